"""An exported page whose embedded data was altered (by hand, by a broken copy, by someone
hostile) checks it against what it declares before drawing anything, and says in the page what
is wrong: never wrong numbers without a word, a blank page, a raw JavaScript error or a stopped
tab. Each alteration is made to a real exported page's JSON; an unaltered page draws."""

import base64
import json
import re

import numpy as np
import pytest

from attnwidget import AttentionWidget

pytestmark = pytest.mark.browser

STATE = re.compile(r'(<script type="application/json" id="attnwidget-state">)(.*?)(</script>)', re.S)


def q_bytes(payload, change):
    """payload with state.q's bytes replaced by change(bytes)."""
    q = payload["state"]["q"]
    q["base64"] = base64.b64encode(change(base64.b64decode(q["base64"]))).decode()


def huge(payload, *names):
    """Finite entries whose products overflow: every entry of ``names`` 1e200."""
    for name in names:
        a = payload["state"][name]
        a["base64"] = base64.b64encode(np.full(a["shape"], 1e200).tobytes()).decode()


def nan_first(raw: bytes) -> bytes:
    return np.float64(np.nan).tobytes() + raw[8:]


ALTERATIONS = {
    "dtype swapped": (
        lambda p: p["state"]["q"].update(dtype="float32"),
        "q holds 192 bytes, but its shape [6,4] in float32 needs 96",
    ),
    "dtype unknown": (lambda p: p["state"]["q"].update(dtype="complex64"), 'q has dtype "complex64"'),
    "shape too large": (
        lambda p: p["state"]["q"].update(shape=[10**9, 10**6]),
        "q holds 192 bytes, but its shape [1000000000,1000000] in float64 needs",
    ),
    "shape not numbers": (lambda p: p["state"]["q"].update(shape=["6", 4]), 'q has shape ["6",4]'),
    "bytes cut short": (lambda p: q_bytes(p, lambda b: b[:20]), "q holds 20 bytes, but its shape [6,4] in float64"),
    "NaN bytes": (lambda p: q_bytes(p, nan_first), "q holds NaN at index 0"),
    "temperature 0": (lambda p: p["state"].update(temperature=0), "'temperature' must be a finite number > 0"),
    "temperature as text": (lambda p: p["state"].update(temperature="hot"), "'temperature'"),
    "head out of range": (lambda p: p["state"].update(head=99), "'head' must be a head index from 0 to 0, got 99"),
    "head below 0": (lambda p: p["state"].update(head=-1), "'head' must be a head index from 0 to 0, got -1"),
    "entries that overflow": (lambda p: huge(p, "q", "k"), "overflow"),
    "shape of other rows": (lambda p: p["state"]["q"].update(shape=[4, 6]), "'q'"),
    "version as text": (lambda p: p.update(version="1"), "it declares version '1', not a version number"),
}


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    w = AttentionWidget("She sat by the river bank", stage="weights")
    path = tmp_path_factory.mktemp("altered") / "page.html"
    w.to_html(path)
    text = path.read_text()
    return text, json.loads(STATE.search(text).group(2))


def open_altered(browser, tmp_path, text, payload):
    path = tmp_path / "altered.html"
    body = json.dumps(payload).replace("<", "\\u003c")
    path.write_text(STATE.sub(lambda m: m.group(1) + body + m.group(3), text, count=1))
    page = browser.new_context(bypass_csp=True).new_page()
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(path.as_uri())
    page.wait_for_selector(".aw-root, .aw-page-error", state="attached")
    return page, errors


def test_an_unaltered_page_draws(browser, tmp_path, exported):
    page, errors = open_altered(browser, tmp_path, *exported)
    try:
        assert page.locator(".aw-page-error").count() == 0 and page.locator(".aw-root").count() == 1
        assert errors == []
    finally:
        page.context.close()


@pytest.mark.parametrize("name", list(ALTERATIONS))
def test_altered_data_is_named_in_the_page_and_nothing_is_drawn(browser, tmp_path, exported, name):
    text, payload = exported
    alter, words = ALTERATIONS[name]
    payload = json.loads(json.dumps(payload))  # (a copy)
    alter(payload)
    page, errors = open_altered(browser, tmp_path, text, payload)
    try:
        shown = page.locator(".aw-page-error")
        assert shown.count() == 1, f"{name}: no message in the page (errors: {errors})"
        said = shown.inner_text()
        assert "This page's data cannot be shown" in said and words in said, said
        assert "export it again" in said.lower()
        assert page.locator(".aw-root").count() == 0  # nothing drawn from numbers it could not trust
        assert errors == []  # said in the page, not thrown
    finally:
        page.context.close()


def test_a_page_whose_data_is_not_json_says_so_in_the_page(browser, tmp_path, exported):
    text, _ = exported
    cut = STATE.sub(lambda m: m.group(1) + m.group(2)[: len(m.group(2)) // 2] + m.group(3), text, count=1)
    path = tmp_path / "cut.html"
    path.write_text(cut)
    page = browser.new_context(bypass_csp=True).new_page()
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    try:
        page.goto(path.as_uri())
        page.wait_for_selector(".aw-page-error", state="attached")
        assert "its data is not valid JSON (" in page.locator(".aw-page-error").inner_text()
        assert errors == []
    finally:
        page.context.close()


def rollout_layers(p, count):
    """The rollout carried with its matrix cut to ``count`` layers (bytes and shape agreeing)."""
    m = p["state"]["measure_data"]["rollout"]["matrix"]
    layer = len(base64.b64decode(m["base64"])) // m["shape"][0]
    m["base64"] = base64.b64encode(base64.b64decode(m["base64"])[: count * layer]).decode()
    m["shape"] = [count, *m["shape"][1:]]


COMPUTED = {
    "a measure for fewer layers": (
        lambda p: rollout_layers(p, 2),
        "rollout's matrix has shape [2,5,5]: for layer it must begin [3] (3 layers, 2 heads)",
    ),
    "effects for other heads": (
        lambda p: p["state"].update(head_effects=[0.1] * 5),
        "head_effects holds 5 numbers: it must hold one per head, 6",
    ),
}


@pytest.mark.parametrize("name", list(COMPUTED))
def test_computed_numbers_that_disagree_with_the_state_are_named_in_the_page(browser, tmp_path, name):
    """What Python computed for an exported model's page (a measure at every layer, each head's
    effect) is checked against the layers and heads the page holds, not drawn for other heads."""
    from test_across_layers import model_widget

    w = model_widget(n=5, layers=3, heads=2)
    w.measure = "rollout"
    path = tmp_path / "model.html"
    w.to_html(path)
    text = path.read_text()
    payload = json.loads(STATE.search(text).group(2))
    alter, words = COMPUTED[name]
    alter(payload)
    page, errors = open_altered(browser, tmp_path, text, payload)
    try:
        said = page.locator(".aw-page-error").inner_text()
        assert words in said, said
        assert page.locator(".aw-root").count() == 0 and errors == []
    finally:
        page.context.close()
