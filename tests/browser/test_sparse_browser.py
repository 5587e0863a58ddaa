"""Sparse attention in the page: the focused row says how many keys its indexer chose and how much of
dense attention's weight they had, the same as Python's selection(), in every head of every layer."""

import pytest

pytestmark = pytest.mark.browser
torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from test_interface import tokenizer  # noqa: E402  (a fixture)
from test_sparse import TEXT, deepseek  # noqa: E402

from attnwidget import AttentionWidget  # noqa: E402

ROOT = "document.querySelector('.aw-root').attnwidget"


def test_the_page_says_what_the_indexers_choice_keeps(browser, tmp_path, tokenizer):
    w = AttentionWidget.from_transformers(deepseek(len(tokenizer), 3), tokenizer, TEXT, stage="weights")
    w.focus = len(w.tokens) - 1
    w.to_html(tmp_path / "sparse.html")
    page = browser.new_context(viewport={"width": 1000, "height": 1200}, bypass_csp=True).new_page()
    try:
        page.goto((tmp_path / "sparse.html").as_uri())
        for layer in w.sparse_layers:
            for head in range(w.n_heads):
                page.evaluate(
                    f"(() => {{ const m = {ROOT}.model; m.set('layer', {layer}); m.set('head', {head}); }})()"
                )
                w.layer, w.head = layer, head
                said = w.selection()
                kept = float(said["kept"][w.focus])
                # (the page redraws on the next frame: until then the last head's row is shown)
                page.wait_for_function(
                    "k => Math.abs(+document.querySelector('.aw-selection')?.dataset.kept - k) < 1e-6", arg=kept
                )
                text = page.locator(".aw-selection").inner_text()
                assert f"reads the {int(said['chosen'][w.focus])} keys its indexer chose" in text
                assert f"dense attention would give {kept:.3f} of the row" in text
        # a key not chosen: its cell says what dense attention would have given it
        j = next(j for j in range(w.focus) if w.weights[w.focus, j] == 0)
        canvas = page.locator(".aw-panel:not([hidden]) canvas.aw-grid").first
        box, ds = canvas.bounding_box(), canvas.evaluate("c => ({...c.dataset})")
        page.mouse.move(
            box["x"] + float(ds["left"]) + (j + 0.5) * float(ds["cellWidth"]),
            box["y"] + float(ds["top"]) + (w.focus + 0.5) * float(ds["cellHeight"]),
        )
        tip = page.locator(".aw-tip:not([hidden])").first.inner_text()
        assert f"dense attention would give it {w.selection()['dense'][w.focus, j]:.3f}" in tip, tip
        page.evaluate(f"{ROOT}.model.set('causal', false)")  # (another rule: the keys open are not the choice)
        page.wait_for_function("!document.querySelector('.aw-selection')")
        page.evaluate(f"{ROOT}.model.set('causal', true)")
        page.wait_for_selector(".aw-selection")
        page.evaluate(f"{ROOT}.model.set('stage', 'scores')")
        page.wait_for_function("!document.querySelector('.aw-selection')")  # (scores: before any choice is weighed)
    finally:
        page.context.close()
