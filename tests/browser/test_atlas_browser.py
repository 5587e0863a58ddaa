"""Head scores over every text (w.head_scores(), a view the kernel computes: computed_views.py) in the page:
choosing one in "colour by" asks the kernel through the page's one request path, and the heads
are coloured with Python's numbers, for the state shown; an exported page carries them."""

import numpy as np
import pytest
from test_overview_browser import HEADS, LAYERS, kernel_model, opened

from attnwidget import AttentionWidget

pytestmark = pytest.mark.browser
ROOT = "document.querySelector('.aw-root').attnwidget"


def values_on_page(page) -> dict:
    cells = page.locator(".aw-head").all()
    return {
        (int(c.get_attribute("data-layer") or 0), int(c.get_attribute("data-head"))): c.get_attribute("data-value")
        for c in cells
    }


def test_in_jupyterlab_a_head_score_is_asked_of_the_kernel_and_colours_the_heads(open_notebook):
    setup = f"""
{kernel_model(4)}m = AttentionWidget._from_model(found, 0, 0, {{"stage": "weights"}})
m
"""
    page, kernel, errors = open_notebook("atlas.ipynb", [setup])
    try:
        page.wait_for_selector(".aw-heads[data-complete=true]", state="attached")
        assert not kernel.eval("m.computed")  # nothing asked yet
        page.locator(".aw-summary").select_option("sink")
        assert kernel.wait_for("m.summary", lambda s: s == "sink") == "sink"
        page.wait_for_function(f"{ROOT}.model.get('computed')?.head_scores?.key.temperature === 1")
        page.wait_for_selector(".aw-heads[data-loading=false]", state="attached")
        want = np.array(kernel.eval("m.head_scores()['sink'].tolist()"))
        got = values_on_page(page)
        assert len(got) == LAYERS * HEADS
        for (layer, head), value in got.items():
            assert abs(float(value) - want[layer, head]) < 1e-12
        assert "coloured by its sink score over this text" in page.locator(".aw-heads-caption").text_content()
        # another temperature: the answer is out of date, dropped, and asked for again
        page.evaluate(f"{ROOT}.model.set('temperature', 0.5); {ROOT}.model.save_changes()")
        page.wait_for_function(f"{ROOT}.model.get('computed')?.head_scores?.key.temperature === 0.5")
        page.wait_for_selector(".aw-heads[data-loading=false]", state="attached")
        want = np.array(kernel.eval("m.head_scores()['sink'].tolist()"))
        for (layer, head), value in values_on_page(page).items():
            assert abs(float(value) - want[layer, head]) < 1e-12
        assert errors == []
    finally:
        page.context.close()


def test_an_exported_page_carries_the_scores(browser, tmp_path):
    rng = np.random.default_rng(0)
    toks = ["the", "cat", "sat", "on", "the", "mat"]
    q, k, v = rng.normal(size=(3, 6, 4)), rng.normal(size=(3, 6, 4)), rng.normal(size=(3, 6, 2))
    w = AttentionWidget(tokens=toks, q=q, k=k, v=v, summary="duplicate", stage="weights")
    want = w.head_scores()["duplicate"]
    page = opened(browser, w, tmp_path / "atlas.html")
    try:
        for (_, head), value in values_on_page(page).items():
            assert abs(float(value) - want[0, head]) < 1e-12
        assert "its duplicate score over this text" in page.locator(".aw-heads-caption").text_content()
        page.evaluate(f"{ROOT}.model.set('temperature', 0.5)")  # no kernel: it says which state it shows
        page.wait_for_function(
            "document.querySelector('.aw-heads-caption').textContent.includes('as exported, at T = 1.00')"
        )
    finally:
        page.context.close()


def test_a_click_on_a_head_shows_it_on_the_text_where_its_score_is_highest(browser, tmp_path):
    from attnwidget.integrations.common import ModelAttention

    rng = np.random.default_rng(3)
    words = [["a", "b", "a", "b", "a", "b"], ["a", "b", "c", "d", "e", "f"], ["x", "y", "x", "z", "x", "y"]]
    found = [
        ModelAttention(
            tokens=t,
            causal=True,
            scale=None,
            architecture="fake",
            model_name="fake",
            layers=[tuple(rng.normal(size=(HEADS, 6, 8)) for _ in range(3)) for _ in range(LAYERS)],
        )
        for t in words
    ]
    w = AttentionWidget._from_model(found, 0, 0, {"stage": "weights", "summary": "duplicate"}, texts=["1", "2", "3"])
    best = w.page_state()["state"]["computed"]["head_scores"]["best"]["duplicate"]
    page = opened(browser, w, tmp_path / "best.html")
    try:
        # a head whose highest is on text 2, then one whose is on text 0 (text 1 repeats no token)
        picks = [next(divmod(p, HEADS) for p in range(1, LAYERS * HEADS) if best[p] == t) for t in (2, 0)]
        for layer, head in picks:
            want = best[layer * HEADS + head]
            page.locator(f".aw-head[data-layer='{layer}'][data-head='{head}']").click()
            page.wait_for_function(
                f"{ROOT}.model.get('layer') === {layer} && {ROOT}.model.get('head') === {head}"
                f" && {ROOT}.model.get('sentence_index') === {want}"
            )
    finally:
        page.context.close()


def test_an_exported_page_colours_the_heads_by_their_streaming_share(browser, tmp_path):
    """Heads from reading only their neighbours (ALiBi's steep slope) to reading everywhere (none)."""
    rng = np.random.default_rng(1)
    n = 150
    q, k, v = rng.normal(size=(3, 4, n, 4))
    w = AttentionWidget(
        tokens=[f"t{i}" for i in range(n)], q=q, k=k, v=v, causal=True, position="alibi",
        alibi_slopes=[0.0, 0.01, 0.05, 0.5], summary="streaming", stage="weights",
    )  # fmt: skip
    want = w.head_scores(["streaming"])["streaming"]
    assert want[0, 0] < 0.9 < want[0, 3]  # (the heads differ: the colours have something to show)
    page = opened(browser, w, tmp_path / "streaming.html")
    try:
        for (_, head), value in values_on_page(page).items():
            assert abs(float(value) - want[0, head]) < 1e-12
        assert "its streaming score over this text" in page.locator(".aw-heads-caption").text_content()
    finally:
        page.context.close()
