"""Files written by to_html, save_svg and save_png are whole or not there at all; a PNG scale
that Chromium cannot draw is refused before any browser starts; any text the traits accept
makes a page that is valid UTF-8 with no raw control character in it."""

import base64
import json
import math
import os
import re
import subprocess
import sys
import tempfile

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from attnwidget import AttentionWidget, export
from attnwidget.widget import visible_text

# What no page or picture may carry raw: C0 controls but tab/LF/CR, DEL, C1, surrogates, U+FFFE/U+FFFF.
RAW = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ud800-\udfff\ufffe\uffff]")
PNG = b"\x89PNG\r\n\x1a\n"


def embedded_state(text):
    return json.loads(
        re.search(r'<script type="application/json" id="attnwidget-state">(.*?)</script>', text, re.S).group(1)
    )["state"]


@pytest.fixture
def no_browser(monkeypatch):
    """Starting Playwright fails the test."""
    import playwright.sync_api

    def refuse():
        raise AssertionError("a browser was started")

    monkeypatch.setattr(playwright.sync_api, "sync_playwright", refuse)


@pytest.fixture
def fake_pictures(monkeypatch):
    """Pictures without a browser: _snapshot answers what `made` holds for each kind."""
    made = {
        "svg": '<svg xmlns="http://www.w3.org/2000/svg" width="1" height="1"/>',
        "png": "data:image/png;base64," + base64.b64encode(PNG + b"rest").decode(),
    }
    monkeypatch.setattr(export, "_snapshot", lambda widget, kind, scale: made[kind])
    return made


@pytest.mark.parametrize("scale", [0, -1, 0.2, 8.01, 100, math.nan, math.inf, -math.inf, "2", None, True, 1j])
def test_a_png_scale_outside_the_range_is_refused_before_a_browser_starts(tmp_path, no_browser, scale):
    path = tmp_path / "lab.png"
    with pytest.raises(ValueError, match=r"scale must be a finite number from 0\.25 to 8") as err:
        AttentionWidget().save_png(path, scale=scale)
    assert repr(scale) in str(err.value)
    assert not path.exists()


@pytest.mark.parametrize("scale", [0.25, 1, 2.5, np.float64(3), 8])
def test_a_png_scale_inside_the_range_is_used(tmp_path, monkeypatch, fake_pictures, scale):
    asked = []
    monkeypatch.setattr(export, "_snapshot", lambda widget, kind, s: asked.append(s) or fake_pictures[kind])
    AttentionWidget().save_png(tmp_path / "lab.png", scale=scale)
    assert asked == [scale] and (tmp_path / "lab.png").read_bytes() == PNG + b"rest"


WRITERS = {
    "to_html": lambda w, path: w.to_html(path),
    "save_svg": lambda w, path: w.save_svg(path),
    "save_png": lambda w, path: w.save_png(path),
}


@pytest.mark.parametrize("write", WRITERS.values(), ids=WRITERS.keys())
@pytest.mark.parametrize("existing", [False, True], ids=["new", "existing"])
def test_a_write_that_fails_at_the_last_step_leaves_nothing(tmp_path, monkeypatch, fake_pictures, write, existing):
    path = tmp_path / "out"
    if existing:
        path.write_text("before")

    def full_disk(*args):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", full_disk)
    with pytest.raises(OSError, match="No space left"):
        write(AttentionWidget(), path)
    assert os.listdir(tmp_path) == (["out"] if existing else [])  # no temporary file left either
    if existing:
        assert path.read_text() == "before"


@pytest.mark.parametrize("write", WRITERS.values(), ids=WRITERS.keys())
def test_a_write_completes_and_keeps_no_temporary_file(tmp_path, fake_pictures, write):
    path = tmp_path / "out"
    path.write_text("before")
    write(AttentionWidget(), path)
    assert os.listdir(tmp_path) == ["out"] and path.read_bytes() not in (b"", b"before")


@pytest.mark.parametrize(
    "kind, answer, error",
    [
        (
            "svg",
            '<svg xmlns="http://www.w3.org/2000/svg"><text>\ud83d</text></svg>',
            UnicodeError,
        ),  # a lone surrogate from the page
        ("png", "data:,", ValueError),  # what a canvas too large for Chromium gives
        ("png", "data:image/png;base64,QUJD", ValueError),  # not a PNG
    ],
)
def test_a_picture_that_cannot_be_written_whole_leaves_nothing(tmp_path, fake_pictures, kind, answer, error):
    fake_pictures[kind] = answer
    new, old = tmp_path / f"new.{kind}", tmp_path / f"old.{kind}"
    old.write_text("before")
    for path in (new, old):
        with pytest.raises(error):
            WRITERS[f"save_{kind}"](AttentionWidget(), path)
    assert sorted(os.listdir(tmp_path)) == [old.name] and old.read_text() == "before"


def test_an_unwritable_path_leaves_nothing(tmp_path):
    with pytest.raises(FileNotFoundError):
        AttentionWidget().to_html(tmp_path / "no such folder" / "lab.html")
    (tmp_path / "folder").mkdir()
    with pytest.raises(OSError):
        AttentionWidget().to_html(tmp_path / "folder")  # a folder is not replaced by a page
    assert os.listdir(tmp_path) == ["folder"] and os.listdir(tmp_path / "folder") == []


# Any text at all, surrogates and control characters included.
any_text = st.text(st.characters(exclude_categories=()), max_size=12)


@settings(max_examples=60, deadline=None)
@given(
    tokens=st.lists(any_text, min_size=1, max_size=4),
    axes=st.lists(any_text, min_size=2, max_size=2),
    title=st.none() | any_text,
)
def test_to_html_writes_any_text_the_traits_accept(tokens, axes, title):
    n = len(tokens)
    w = AttentionWidget(tokens=tokens, q=np.eye(n), k=np.eye(n), v=np.ones((n, 2)), value_axes=axes)
    try:
        with tempfile.TemporaryDirectory() as folder:
            path = os.path.join(folder, "page.html")
            assert w.to_html(path, title=title) is None  # (written: nothing to print in a notebook)
            with open(path, "rb") as f:
                text = f.read().decode("utf-8")  # strict: no surrogate was written
        returned = w.to_html(title=title)
    finally:
        w.close()
    assert text == returned
    assert not RAW.search(text)
    state = embedded_state(text)
    assert state["tokens"] == [visible_text(t) for t in tokens] and state["value_axes"] == [
        visible_text(a) for a in axes
    ]


def test_control_characters_from_the_command_line_become_visible_in_a_page(tmp_path):
    out = tmp_path / "lab.html"
    subprocess.run(
        [sys.executable, "-m", "attnwidget", "export", "bank\x1b river \x9b\x07", "-o", str(out)],
        check=True,
        capture_output=True,
    )
    text = out.read_bytes().decode("utf-8")
    assert not RAW.search(text)
    assert embedded_state(text)["tokens"] == ["bank", "␛", "river", "\ufffd", "␇"]


def test_undecodable_bytes_from_the_command_line_become_visible_in_a_page(tmp_path):
    out = tmp_path / "lab.html"
    done = subprocess.run(
        [sys.executable, "-m", "attnwidget", "export", os.fsdecode(b"bank \xff"), "-o", str(out)],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    assert embedded_state(out.read_bytes().decode("utf-8"))["tokens"] == ["bank", "\ufffd"]


def test_a_models_page_holds_every_layer_under_its_budget_and_else_the_nearest_or_those_asked():
    from attnwidget.integrations.common import ModelAttention
    from attnwidget.payload import held_layers

    rng = np.random.default_rng(0)
    layers = [tuple(rng.normal(size=(2, 6, 4)).astype(np.float32) for _ in range(3)) for _ in range(6)]
    w = AttentionWidget._from_model(
        ModelAttention(tokens=list("abcdef"), layers=layers, causal=True, scale=None, architecture="f", model_name="f"),
        3,
        0,
        {},
    )
    each = 3 * 2 * 6 * 4 * 4 * 4 / 3  # one layer's q, k, v in float32, as base64
    overview = 6 * 2 * 6 * 6 * 4 / 3  # every head's thumbnail, carried when some layers are left out
    assert held_layers(w, w._inputs()) is None and "held_layers" not in w.page_state()["state"]  # small: every layer
    assert held_layers(w, w._inputs(), budget=overview + 2.5 * each) == [
        2,
        3,
    ]  # the layer shown and the nearest that fit
    with pytest.warns(UserWarning, match="one layer of this model alone takes"):
        assert held_layers(w, w._inputs(), budget=0) == [3]
    # each layer held is carried once: the one shown is in "arrays", not in the state as well
    assert not {"q", "k", "v", "value_basis"} & set(w.page_state(layers=[3])["state"])
    assert (
        held_layers(w, w._inputs(), layers=[5, 0]) == [0, 3, 5] and held_layers(w, w._inputs(), layers=range(6)) is None
    )
    with pytest.raises(ValueError, match=r"layers= must be layer indices from 0 to 5; got \[6\]"):
        w.to_html(layers=[6])
    payload = w.page_state(layers=[0])
    assert payload["state"]["held_layers"] == [0, 3] and set(payload["arrays"]) == {"layer:0", "layer:3"}
    assert "model_q" not in payload["state"] and payload["state"]["overview"]["layers"] == 6
    with pytest.raises(ValueError, match="layers= is for a model's widget"):
        AttentionWidget("She sat by the river bank").to_html(layers=[0])


def test_an_exported_pages_data_holds_the_widgets_own_traits_not_the_bundle_it_carries_already():
    state = AttentionWidget().page_state()["state"]
    assert not {"_esm", "_css", "_anywidget_id"} & set(state) and "_constants" in state


@pytest.mark.parametrize(
    "save, wrong, right",
    [("save_png", "x.jpg", "x.png"), ("save_svg", "x.png", "x.svg"), ("save_pdf", "x.PNG", "x.pdf")],
)
def test_a_picture_named_for_another_format_is_refused_before_it_is_drawn(tmp_path, save, wrong, right, monkeypatch):
    w = AttentionWidget("She sat by the river bank")
    monkeypatch.setattr(w, "page_state", lambda: pytest.fail("the page's state was made for a file refused"))
    with pytest.raises(ValueError, match=f"name the file {right}"):
        getattr(w, save)(tmp_path / wrong)
    with pytest.raises(ValueError, match="theme must be one of"):
        getattr(w, save)(tmp_path / right, theme="sepia")
    assert list(tmp_path.iterdir()) == []


def test_to_html_with_a_path_writes_the_page_and_returns_nothing_and_without_returns_it(tmp_path):
    """A notebook cell ending in w.to_html("lab.html") shows no output: the page is in the file."""
    w = AttentionWidget(stage="weights")
    assert w.to_html(tmp_path / "lab.html") is None
    assert export.to_html(w.page_state(), str(tmp_path / "plain.html")) is None
    page = w.to_html()
    assert page.startswith("<!doctype html>") and "attnwidget-state" in page
    assert (tmp_path / "lab.html").read_text(encoding="utf-8") == page
    assert (tmp_path / "plain.html").read_text(encoding="utf-8") == export.to_html(w.page_state())


# Changes to a 32 × 32 image's state (4 × 4 patches of 8 pixels after [CLS]: 17 tokens), and what
# Python says of each; an exported page says the same (tests/browser/test_refused_pages_browser.py)
IMAGES = {
    "a 3 × 3 grid over 16 patches": (
        {"rows": 3, "cols": 3},
        "'image' has 3 × 3 patches after 1 other token: 10 tokens, but there are 17.",
    ),
    "a billion rows": (
        {"rows": 10**9},
        "'image' has 1000000000 × 4 patches after 1 other token: 4000000001 tokens, but there are 17.",
    ),
    "the patches begin later": (
        {"first": 3},
        "'image' has 4 × 4 patches after 3 other tokens: 19 tokens, but there are 17.",
    ),
    "rows as text": (
        {"rows": "4"},
        "'image' rows, cols and first must be whole numbers (rows and cols 1 or more, first 0 or more); got "
        "rows '4', cols 4, first 1.",
    ),
    "no patches": ({"rows": 0, "cols": 17, "first": 0}, "got rows 0, cols 17, first 0."),
    "a patch of no pixels": ({"patch": 0}, "'image' patch must be a patch's side in pixels"),
    "a size of other patches": (
        {"size": [32, 40]},
        "'image' size must be the [height, width] of its 4 × 4 patches of 8 × 8 pixels, [32, 32]; got [32, 40].",
    ),
    "a source on the network": (
        {"src": "https://example.com/cat.png"},
        "'image' src must be the image itself as a data: URL (data:image/…)",
    ),
}
IMAGE = {"src": "data:image/png;base64,iVBORw0KGgo=", "rows": 4, "cols": 4, "first": 1, "patch": 8, "size": [32, 32]}


def image_widget(image):
    """A widget of 17 tokens ([CLS] and 4 × 4 patches) holding ``image`` as a vision model's would."""
    tokens = ["[CLS]"] + [f"r{r}c{c}" for r in range(4) for c in range(4)]
    w = AttentionWidget(tokens=tokens, q=np.eye(17), k=np.eye(17), v=np.ones((17, 2)))
    w.set_trait("image", image)
    return w


@pytest.mark.parametrize("name", list(IMAGES))
def test_an_image_that_does_not_fit_its_tokens_is_refused_at_export(name):
    change, words = IMAGES[name]
    assert image_widget(IMAGE).to_html().startswith("<!doctype html>")
    with pytest.raises(ValueError) as err:
        image_widget({**IMAGE, **change}).to_html()
    assert words in str(err.value)


def test_a_number_json_cannot_hold_is_refused_where_it_is_not_written_into_a_page(tmp_path):
    """A page whose data held a bare NaN could not read it at all (tests/browser/test_refused_pages_browser.py)."""
    payload = AttentionWidget(stage="weights").page_state()
    payload["state"]["head_effects"] = [0.5, float("nan")]
    with pytest.raises(ValueError, match=r"holds nan at data\['state'\]\['head_effects'\]\[1\], but a page's numbers"):
        export.to_html(payload, tmp_path / "page.html")
    assert not (tmp_path / "page.html").exists()
