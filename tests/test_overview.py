"""A model's overview, computed in the kernel: every layer's heads as thumbnails (block means,
as the page draws its own) and summaries (head_summary's), asked for by the page, dropped when its
inputs change."""

import json
import pathlib
import shutil
import subprocess

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_layers import fake_model

from attnwidget import AttentionWidget, overview
from attnwidget.overview import SIZE, thumbnail
from attnwidget.widget import _on_page_message

ROOT = pathlib.Path(__file__).resolve().parents[1]


def compute(widget):
    return overview.compute(widget._inputs())


def block_means(w):
    """Each block's mean, block by block: row i in block ⌊i·h/n⌋, column j in ⌊j·w/m⌋."""
    n, m = w.shape
    h, wd = min(n, SIZE), min(m, SIZE)
    sums, counts = np.zeros((h, wd)), np.zeros((h, wd))
    for i in range(n):
        for j in range(m):
            sums[i * h // n, j * wd // m] += w[i, j]
            counts[i * h // n, j * wd // m] += 1
    return sums / counts


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 200), st.integers(1, 200), st.integers(0, 2**31))
def test_a_thumbnail_is_the_mean_of_each_block(n, m, seed):
    w = np.random.default_rng(seed).random((n, m))
    np.testing.assert_allclose(thumbnail(w[None])[0], block_means(w), rtol=1e-12)


@pytest.mark.skipif(shutil.which("node") is None, reason="needs Node.js")
def test_the_kernels_thumbnails_are_the_pages():
    rng = np.random.default_rng(3)
    cases = [rng.random((n, m)) for n, m in ((5, 5), (90, 90), (200, 37), (1, 300))]
    script = (
        f'import {{ thumbnail }} from "{(ROOT / "js" / "thumbs.js").as_uri()}";\n'
        'import { readFileSync } from "node:fs";\n'
        "const out = JSON.parse(readFileSync(0, 'utf8')).map((w) => "
        "Array.from(thumbnail(Float64Array.from(w.flat()), w.length).data));\n"
        "process.stdout.write(JSON.stringify(out));\n"
    )
    done = subprocess.run(
        ["node", "--input-type=module", "-e", script],
        input=json.dumps([c.tolist() for c in cases]),
        capture_output=True,
        text=True,
        check=True,
    )
    for w, page in zip(cases, json.loads(done.stdout)):
        np.testing.assert_allclose(np.ravel(thumbnail(w[None])[0]), page, rtol=1e-12)


def test_the_overview_carries_head_summarys_numbers_and_each_heads_picture():
    w = AttentionWidget._from_model(fake_model(n_layers=3, heads=2, n=7, d=4), 1, 0, {"temperature": 0.6, "sink": True})
    o = compute(w)
    assert (o["layers"], o["heads"], o["width"], o["height"]) == (3, 2, 7, 7) and not o["averaged"]
    want = w.head_summary()
    for name, values in o["summaries"].items():
        np.testing.assert_array_equal(
            np.array(values, dtype=float).reshape(3, 2), want[name]
        )  # NaN (sink: "first") as None
    assert o["summaries"]["first"] == [None] * 6
    thumbs = np.frombuffer(o["thumbs"]["view"], dtype=np.uint8).reshape(o["thumbs"]["shape"])
    w.set_state({"layer": 2})
    w.head = 1
    picture = block_means(w.weights)
    np.testing.assert_allclose(thumbs[2 * 2 + 1] / 255 * o["top"][5], picture, atol=picture.max() / 510 + 1e-12)
    want_key = {"temperature": 0.6, "causal": True, "sink": True, "step": 7, "block": ""}
    assert o["key"] == {
        **want_key,
        "scale": w.scale,
        "softcap": None,
        "sentence_index": 0,
        "position": w.position,
        "rope_base": 10000.0,
    }


def test_the_page_asks_for_the_overview_and_a_change_of_its_inputs_drops_it():
    from test_widget import RecordingComm

    w = AttentionWidget._from_model(fake_model(n_layers=2, heads=2, n=5, d=4), 0, 0, {})
    assert w.overview is None  # nothing computed until a page asks
    w.comm = RecordingComm()
    _on_page_message(w, {"kind": "compute", "view": "overview"}, [])
    ((data, buffers),) = w.comm.sent
    assert set(data["state"]) == {"overview"} and len(buffers) == 1  # the thumbnails: one binary buffer
    assert w.overview["key"]["temperature"] == 1.0
    w.comm.sent.clear()
    w.set_state({"head": 1})  # not an input: the overview stays
    assert w.overview is not None
    w.set_state({"temperature": 2.0})
    assert w.overview is None and w.comm.sent[-1][0]["state"]["overview"] is None  # the page is told it is out of date
    _on_page_message(w, {"kind": "compute", "view": "overview"}, [])
    assert w.overview["key"]["temperature"] == 2.0
    np.testing.assert_array_equal(
        np.array(w.overview["summaries"]["effective_tokens"]).reshape(2, 2), w.head_summary()["effective_tokens"]
    )
    # a widget of your own arrays draws its heads in the page: nothing to ask of the kernel
    own = AttentionWidget("She sat by the river bank")
    _on_page_message(own, {"kind": "compute", "view": "overview"}, [])
    _on_page_message(own, {"kind": "nonsense"}, [])
    assert own.overview is None


def test_a_large_layers_overview_is_torchs_float32_within_a_millionth_of_numpys():
    pytest.importorskip("torch")
    from attnwidget.integrations.common import ModelAttention
    from attnwidget.overview import FAST_FROM

    rng = np.random.default_rng(4)
    n, heads = 1024, 4
    assert heads * n * n >= FAST_FROM  # the fast path
    layers = [tuple(rng.normal(size=(heads, n, 16)).astype(np.float32) for _ in range(3)) for _ in range(2)]
    window = np.subtract.outer(np.arange(n), np.arange(n)) < 100
    found = ModelAttention(
        tokens=[f"t{i}" for i in range(n)],
        layers=layers,
        causal=True,
        scale=None,
        architecture="fake",
        model_name="fake",
        softcap=3.0,
        masks=[window, None],
    )
    w = AttentionWidget._from_model(found, 0, 0, {"temperature": 0.7})
    o, want = compute(w), w.head_summary()
    for name in want:
        np.testing.assert_allclose(np.array(o["summaries"][name], dtype=float).reshape(2, heads), want[name], rtol=1e-5)
    thumbs = (
        np.frombuffer(o["thumbs"]["view"], dtype=np.uint8).reshape(o["thumbs"]["shape"])
        / 255
        * np.array(o["top"])[:, None, None]
    )
    w.set_state({"layer": 1})
    w.head = 3
    picture = thumbnail(w.weights[None])[0]
    np.testing.assert_allclose(thumbs[heads + 3], picture, atol=picture.max() / 255)


def test_a_large_models_overview_is_computed_on_a_thread_and_handed_over_when_the_page_asks_again():
    from test_widget import RecordingComm

    w = AttentionWidget._from_model(fake_model(n_layers=2, heads=4, n=512, d=4), 0, 0, {})
    w.comm = RecordingComm()
    _on_page_message(w, {"kind": "compute", "view": "overview"}, [])
    assert w.overview is None and w._overview.thread.is_alive()  # the kernel answers other messages meanwhile
    w.set_state({"head": 2})  # (one such message)
    assert w.head == 2
    w._overview.thread.join()
    w.set_state({"temperature": 0.5})  # the inputs changed while it ran: that result is stale
    _on_page_message(w, {"kind": "compute", "view": "overview"}, [])
    assert w.overview is None  # not handed over; computed again for T = 0.5
    w._overview.thread.join()
    _on_page_message(w, {"kind": "compute", "view": "overview"}, [])
    assert w.overview["key"]["temperature"] == 0.5
    np.testing.assert_allclose(
        np.array(w.overview["summaries"]["effective_tokens"]).reshape(2, 4),
        w.head_summary()["effective_tokens"],
        rtol=1e-12,
    )


def test_a_layer_switch_keeps_the_overview_of_a_model_whose_layers_have_masks():
    from attnwidget.integrations.common import ModelAttention

    rng = np.random.default_rng(2)
    n = 6
    window = np.subtract.outer(np.arange(n), np.arange(n)) < 3
    layers = [tuple(rng.normal(size=(2, n, 4)) for _ in range(3)) for _ in range(3)]
    found = ModelAttention(
        tokens=list("abcdef"),
        layers=layers,
        causal=True,
        scale=None,
        architecture="f",
        model_name="f",
        masks=[window, window, None],
    )
    w = AttentionWidget._from_model(found, 0, 0, {})
    _on_page_message(w, {"kind": "compute", "view": "overview"}, [])
    before = w.overview
    for layer in (1, 2, 0):  # each layer brings its own mask: not an input of the overview
        w.set_state({"layer": layer})
        assert w.overview is before
    # each layer's summaries, from the weights the widget shows on that layer
    want = np.zeros((3, 2))
    for layer in range(3):
        w.set_state({"layer": layer})
        for head in (0, 1):
            w.head = head
            p = w.weights
            want[layer, head] = np.mean(np.exp(-np.sum(np.where(p > 0, p * np.log(np.where(p > 0, p, 1)), 0), axis=1)))
    np.testing.assert_allclose(np.array(before["summaries"]["effective_tokens"]).reshape(3, 2), want, rtol=1e-12)
    w.set_state({"sink": True})
    assert w.overview is None


def test_an_overview_that_fails_on_its_thread_is_said_once(monkeypatch):
    def fails(inputs):
        raise MemoryError("no room for the weights")

    w = AttentionWidget._from_model(fake_model(n_layers=2, heads=4, n=512, d=4), 0, 0, {})
    monkeypatch.setattr(overview, "compute", fails)
    _on_page_message(w, {"kind": "compute", "view": "overview"}, [])
    w._overview.thread.join()
    _on_page_message(w, {"kind": "compute", "view": "overview"}, [])
    assert w.overview["error"] == "MemoryError: no room for the weights"  # the page stops asking and says so


def test_shown_a_models_widget_has_its_overview_or_begins_it_and_a_very_large_one_when_the_page_asks(monkeypatch):
    small = AttentionWidget._from_model(fake_model(n_layers=2, heads=2, n=5, d=4), 0, 0, {})
    small._repr_mimebundle_()
    assert small.overview is not None  # there before the page asks: drawn with the first paint
    large = AttentionWidget._from_model(fake_model(n_layers=2, heads=4, n=512, d=4), 0, 0, {})
    large._repr_mimebundle_()
    assert large.overview is None and large._overview.thread is not None  # begun on a thread
    large._overview.thread.join()
    monkeypatch.setattr(overview.Background, "EARLY", 2**21)
    huge = AttentionWidget._from_model(fake_model(n_layers=2, heads=4, n=512, d=4), 0, 0, {})
    huge._repr_mimebundle_()
    assert huge.overview is None and huge._overview.thread is None  # the page's first picture has the cores
    _on_page_message(huge, {"kind": "compute", "view": "overview"}, [])
    assert huge._overview.thread is not None  # asked (after that picture): begun
    huge._overview.thread.join()
    own = AttentionWidget("She sat by the river bank")
    own._repr_mimebundle_()
    assert own.overview is None  # your own arrays: the page draws its heads itself


@settings(max_examples=60, deadline=None)
@given(
    st.integers(1, 90),
    st.integers(1, 4),
    st.booleans(),
    st.sampled_from(["none", "window", "holes"]),
    st.sampled_from(["none", "normal", "extreme"]),
    st.sampled_from([None, 2.0]),
    st.sampled_from([0.1, 1.0, 3.0]),
    st.integers(1, 5000),
    st.integers(0, 2**31),
)
def test_the_fast_overview_equals_numpys_whatever_the_chunks(
    n, heads, causal, mask, biased, softcap, temperature, chunk, seed
):
    """torch's float32 path, in chunks of rows that skip keys no row of theirs may read, against
    the float64 numpy one: summaries within 1e-5, thumbnails within one step of 255."""
    pytest.importorskip("torch")
    from attnwidget.integrations.common import ModelAttention

    rng = np.random.default_rng(seed)
    layers = [tuple((3 * rng.normal(size=(heads, n, 8))).astype(np.float32) for _ in range(3)) for _ in range(2)]
    gap = np.subtract.outer(np.arange(n), np.arange(n))
    masks = {
        "none": None,
        "window": [np.abs(gap) < 5, None],
        "holes": [rng.random((n, n)) < 0.6, rng.random((n, n)) < 0.1],
    }[mask]
    bias = None if biased == "none" else rng.normal(size=(heads, n, n))
    if biased == "extreme":  # float32's lowest, as traits suggest for a cell read as little as can be
        bias[rng.random((heads, n, n)) < 0.3] = np.finfo(np.float32).min
    found = ModelAttention(
        tokens=[f"t{i}" for i in range(n)],
        layers=layers,
        causal=causal,
        scale=None,
        architecture="fake",
        model_name="fake",
        bias=bias,
        softcap=softcap,
        masks=masks,
    )
    w = AttentionWidget._from_model(found, 0, 0, {"temperature": temperature})
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(overview, "FAST_FROM", 2**62)
        exact = compute(w)
        patch.setattr(overview, "FAST_FROM", 0)
        patch.setattr(overview, "CHUNK", chunk)
        fast = compute(w)
    for name, want in exact["summaries"].items():
        np.testing.assert_allclose(
            np.array(fast["summaries"][name], dtype=float),
            np.array(want, dtype=float),
            rtol=1e-5,
            atol=1e-6,
            err_msg=name,
        )
    np.testing.assert_allclose(fast["top"], exact["top"], rtol=1e-5, atol=1e-7)
    picture = [np.frombuffer(o["thumbs"]["view"], dtype=np.uint8).astype(int) for o in (fast, exact)]
    assert np.abs(picture[0] - picture[1]).max() <= 1


def test_a_models_overview_is_computed_on_the_device_it_ran_on():
    torch = pytest.importorskip("torch")
    w = AttentionWidget._from_model(fake_model(n_layers=2, heads=4, n=600, d=8), 0, 0, {})
    assert w._inputs().device == "cpu"  # a model of arrays: here
    if not torch.cuda.is_available():
        pytest.skip("no GPU on this machine: the overview on one is checked where there is one")
    cpu = compute(w)
    w._device = "cuda"
    gpu = compute(w)
    for name, want in cpu["summaries"].items():
        np.testing.assert_allclose(
            np.array(gpu["summaries"][name], dtype=float), np.array(want, dtype=float), rtol=1e-5, atol=1e-6
        )
