"""Random sessions in exported pages, replayed in Python: every change the page proposes (a
click, a key, a typed percentage) is applied to the same widget in Python, which must accept or
refuse it with the same message; after each step the page's state and numbers equal Python's."""

import json
import os

import numpy as np
import pytest
import traitlets
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_cross import fake_seq2seq
from test_export_browser import open_page
from test_layers import fake_model

from attnwidget import AttentionWidget, rules

pytestmark = pytest.mark.browser

ROOT = "document.querySelector('.aw-root')"
# every change the page's controls propose, with the rules' answer, logged for the replay
HOOK = f"""() => {{
  const m = {ROOT}.attnwidget.model, propose = m.propose;
  window.awLog = [];
  m.propose = (change) => {{ const refused = propose(change); window.awLog.push({{ change, refused }}); \
return refused; }};
}}"""
FIELDS = [n for n in rules.FIELDS if n not in rules.ARRAYS]
STATE = f"(names) => Object.fromEntries(names.map((n) => [n, {ROOT}.attnwidget.model.get(n) ?? null]))"
# what a reader can do: (selector, how)
ACTIONS = [
    (".aw-token", "click"),
    (".aw-stage", "click"),
    (".aw-causal", "click"),
    (".aw-sink", "click"),
    (".aw-sentence", "click"),
    (".aw-layer", "click"),
    (".aw-block", "click"),
    (".aw-head", "click"),
    (".aw-gen-control button", "click"),
    (".aw-ex-reveal", "click"),
    (".aw-ex-input", "type"),
    (".aw-slider", "key"),
    ("canvas.aw-grid", "cell"),
    (".aw-cell-close", "click"),
    (".aw-residual", "click"),
]


def rng_arrays(seed, *shapes):
    rng = np.random.default_rng(seed)
    return [rng.normal(size=s) for s in shapes]


def kinds():
    q, k, v = rng_arrays(1, (3, 5, 4), (3, 5, 4), (3, 5, 3))
    cq, ck, cv = rng_arrays(2, (3, 4), (5, 4), (5, 2))
    mask = np.ones((5, 5), dtype=bool)
    mask[:, 2] = False
    return {
        "sentences": lambda: AttentionWidget(
            ["She sat by the river bank", "I put my money in the bank and left"], stage="weights"
        ),
        "sentences with a bias": lambda: AttentionWidget(
            ["She sat by the river bank", "I sat"],
            bias=-0.3 * np.abs(np.subtract.outer(range(6), range(6))),
            stage="scores",
        ),
        "heads, bias and mask": lambda: AttentionWidget(
            q=q, k=k, v=v, bias=rng_arrays(3, (3, 5, 5))[0], mask=mask, stage="scores", head=1
        ),
        "predict": lambda: AttentionWidget(exercise="predict", focus=5, stage="weights"),
        "temperature exercise": lambda: AttentionWidget(exercise="temperature", goal=2.0, stage="weights"),
        "writing": lambda: AttentionWidget("I sat on the river bank", step=2, stage="weights"),
        "cross-attention": lambda: AttentionWidget(
            tokens=["x", "y", "z"], key_tokens=list("abcde"), q=cq, k=ck, v=cv, stage="weights"
        ),
        "a model's layers": lambda: AttentionWidget._from_model(
            fake_model(n_layers=3, heads=2, n=5, d=4), 1, 0, {"stage": "weights"}
        ),
        "an encoder–decoder model": lambda: AttentionWidget._from_model(
            fake_seq2seq(), 0, 0, {"stage": "weights"}, "cross"
        ),
        "sink and causal": lambda: AttentionWidget(
            "I sat on the river bank and read", causal=True, sink=True, stage="blend"
        ),
    }


KINDS = kinds()


@pytest.fixture(scope="module")
def pages(browser, tmp_path_factory):
    """One page per kind, loaded once; each example reloads it."""
    folder, opened = tmp_path_factory.mktemp("sessions"), {}

    def page(kind):
        if kind not in opened:
            opened[kind] = _open(browser, folder, kind)
        return opened[kind]

    yield page
    for page, _ in opened.values():
        page.context.close()


def _open(browser, folder, kind):
    path = folder / f"{len(list(folder.iterdir()))}.html"
    KINDS[kind]().to_html(path)
    return open_page(browser, path)


def apply_in_python(w, change):
    """The page's change, as Python takes a message from a page: whole, or refused with a message."""
    refused = [k for k in change if k not in rules.WRITABLE]
    if refused:
        return f"the page may not set {', '.join(map(repr, refused))} (read-only, private or unknown)"
    try:
        with w.hold_trait_notifications():
            for name, value in change.items():
                setattr(w, name, value)
    except traitlets.TraitError as err:
        return str(err)
    return None


def python_state(w):
    out = {}
    for n in FIELDS:
        value = getattr(w, n)
        out[n] = list(value) if isinstance(value, tuple) else value
    return out


def act(page, data, problems):
    """One thing a reader does, chosen among the controls the page shows and enables."""
    shown = page.evaluate(
        """(actions) => actions.flatMap(([selector, how]) => [...document.querySelectorAll(selector)]
             .map((e, i) => [selector, how, i, e.offsetParent !== null && !e.disabled && !e.closest('[hidden]')])
             .filter((o) => o[3]).map((o) => o.slice(0, 3)))""",
        ACTIONS,
    )
    if not shown:
        return "nothing to do"
    selector, how, i = data.draw(st.sampled_from(shown), label="control")
    loc = page.locator(selector).nth(i)
    if how == "click":
        loc.click()
    elif how == "type":
        loc.fill(str(data.draw(st.integers(0, 100), label="percent")))
        loc.press("Enter")
    elif how == "key":
        loc.press(data.draw(st.sampled_from(["ArrowLeft", "ArrowRight", "Home", "End", "PageUp"]), label="key"))
    elif how == "cell":
        box = loc.bounding_box()
        loc.click(
            position={
                "x": data.draw(st.floats(0.05, 0.95)) * box["width"],
                "y": data.draw(st.floats(0.05, 0.95)) * box["height"],
            }
        )
    return f"{how} {selector}[{i}]"


@pytest.mark.parametrize("kind", list(KINDS))
@settings(
    max_examples=max(3, int(os.environ.get("ATTNWIDGET_FUZZ", "0")) // 200),
    deadline=None,
    suppress_health_check=list(HealthCheck),
    database=None,
)
@given(data=st.data())
def test_a_random_session_in_an_exported_page_is_pythons_step_for_step(pages, kind, data):
    page, problems = pages(kind)
    page.reload()
    page.wait_for_selector(".aw-root")
    page.evaluate(HOOK)
    w = KINDS[kind]()
    for step in range(12):
        did = act(page, data, problems)
        page.evaluate(f"{ROOT}.attnwidget.redraw()")
        for entry in page.evaluate("window.awLog.splice(0)"):
            said = apply_in_python(w, entry["change"])
            assert said == entry["refused"], (
                f"step {step} ({did}): {json.dumps(entry['change'])}: Python said {said!r}, "
                f"the page {entry['refused']!r}"
            )
        got = page.evaluate(STATE, FIELDS)
        want = python_state(w)
        diff = {n: (got[n], want[n]) for n in FIELDS if got[n] != want[n]}
        assert not diff, f"step {step} ({did}): page vs Python {diff}"
        numbers = page.evaluate(f"{ROOT}.attnwidget.numbers()")
        np.testing.assert_allclose(
            np.reshape(numbers["weights"], w.weights.shape), w.weights, atol=1e-6, err_msg=f"step {step} ({did})"
        )
        np.testing.assert_allclose(
            np.reshape(numbers["scores"], w.scores.shape), w.scores, atol=1e-6 * max(1, np.abs(w.scores).max())
        )
    assert not [p for p in problems if not p.startswith("console")], problems
