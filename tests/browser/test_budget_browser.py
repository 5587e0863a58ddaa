"""An exported page of a model too large for it holds some layers: it says which, shows every
layer's overview as exported, switches between the layers it holds with Python's numbers, and
refuses the others with a message saying how to have them."""

import numpy as np
import pytest

from attnwidget import AttentionWidget
from attnwidget.integrations.common import ModelAttention

pytestmark = pytest.mark.browser

ROOT = "document.querySelector('.aw-root').attnwidget"
LAYERS, HEADS, N = 5, 2, 12


def model():
    rng = np.random.default_rng(6)
    layers = [tuple(rng.normal(size=(HEADS, N, 8)).astype(np.float32) for _ in range(3)) for _ in range(LAYERS)]
    return ModelAttention(
        tokens=[f"t{i}" for i in range(N)],
        layers=layers,
        causal=True,
        scale=None,
        architecture="fake",
        model_name="fake",
    )


def test_a_page_holding_some_layers_says_so_and_switches_between_them(browser, tmp_path):
    w = AttentionWidget._from_model(model(), 2, 0, {"stage": "weights", "summary": "effective_tokens"})
    path = tmp_path / "some.html"
    w.to_html(path, layers=[0, 4])
    want = w.head_summary()["effective_tokens"]
    page = browser.new_context(viewport={"width": 1000, "height": 1000}, bypass_csp=True).new_page()
    try:
        page.goto(path.as_uri())
        page.wait_for_selector(".aw-heads[data-complete=true]", state="attached")
        page.locator(".aw-heads-caption", has_text="this page holds layers 0, 2, 4 of 5").wait_for(state="attached")
        options = page.locator(".aw-layer option").all()
        assert [o.is_disabled() for o in options] == [False, True, False, True, False]
        for cell in page.locator(".aw-head").all():  # every layer's overview, as exported
            layer, head = int(cell.get_attribute("data-layer")), int(cell.get_attribute("data-head"))
            assert abs(float(cell.get_attribute("data-value")) - want[layer, head]) < 1e-12
        for layer in (4, 0):
            page.locator(f".aw-head[data-layer='{layer}'][data-head='1']").click()
            page.wait_for_function(f"{ROOT}.model.get('layer') === {layer} && {ROOT}.model.get('head') === 1")
            w.layer, w.head = layer, 1
            np.testing.assert_allclose(
                np.reshape(page.evaluate(f"{ROOT}.numbers()")["weights"], (N, N)), w.weights, atol=1e-12
            )
        page.locator(".aw-head[data-layer='3'][data-head='0']").click()  # not held
        page.locator(".aw-notice", has_text="This page holds layers 0, 2, 4 of 5: layer 3 was left out").wait_for()
        assert page.evaluate(f"{ROOT}.model.get('layer')") == 0
        page.evaluate(f"{ROOT}.model.set('temperature', 0.5)")  # the stages follow; the overview cannot
        w.temperature = 0.5
        np.testing.assert_allclose(
            np.reshape(page.evaluate(f"{ROOT}.numbers()")["weights"], (N, N)), w.weights, atol=1e-12
        )
        page.locator(".aw-heads-caption", has_text="as exported, at T = 1.00").wait_for(
            state="attached"
        )  # at the redraw
    finally:
        page.context.close()
