"""A hybrid model in the page: its attention layers by the model's own numbers (Jamba's 1 and 3), its
other layers named in the layer menu and the overview and not offered, in an exported page and live."""

import numpy as np
import pytest

pytestmark = pytest.mark.browser
torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from test_hybrids import TEXT, hybrid  # noqa: E402
from test_interface import tokenizer  # noqa: E402  (a fixture)

from attnwidget import AttentionWidget  # noqa: E402

ROOT = "document.querySelector('.aw-root').attnwidget"
MAMBA = "Mamba-1 selective state space"


def test_an_exported_hybrid_numbers_its_layers_as_the_model_does(browser, tmp_path, tokenizer):
    w = AttentionWidget.from_transformers(hybrid("jamba", len(tokenizer)), tokenizer, TEXT, head=2)
    w.to_html(tmp_path / "jamba.html")
    page = browser.new_context(viewport={"width": 1000, "height": 1200}, bypass_csp=True).new_page()
    try:
        page.goto((tmp_path / "jamba.html").as_uri())
        menu = page.locator(".aw-layer")
        options = menu.locator("option")
        assert options.all_inner_texts() == [f"0 · {MAMBA}", "1", f"2 · {MAMBA}", "3"]
        assert [o.is_disabled() for o in options.all()] == [True, False, True, False]
        assert menu.input_value() == "1"
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
