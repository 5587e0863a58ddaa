"""A model whose layers have masks of their own (Gemma 2's sliding-window and global layers, its
soft cap) in the page: a layer switch brings that layer's mask, the numbers are Python's, and every
thumbnail and summary of the overview is computed at its own layer's mask, by workers and by the
page alike."""

import numpy as np
import pytest

from attnwidget import AttentionWidget
from attnwidget.integrations.common import ModelAttention

pytestmark = pytest.mark.browser

ROOT = "document.querySelector('.aw-root').attnwidget"
LAYERS, HEADS, N, WINDOW = 4, 3, 40, 6


def windowed_model(seed=0):
    rng = np.random.default_rng(seed)
    layers = [
        tuple(rng.normal(scale=2, size=(HEADS, N, 8)).astype(np.float32) for _ in range(3)) for _ in range(LAYERS)
    ]
    i, j = np.indices((N, N))
    window = (i - j < WINDOW) | (j > i)  # what the causal rule leaves: the last WINDOW tokens
    masks = [window if layer % 2 == 0 else None for layer in range(LAYERS)]  # local, global, local, global
    return ModelAttention(
        tokens=[f"t{i}" for i in range(N)],
        layers=layers,
        causal=True,
        scale=None,
        architecture="gemma2",
        model_name="windowed",
        softcap=4.0,
        masks=masks,
    )


def test_each_layer_is_read_at_its_own_mask_in_the_page_and_its_overview(browser, tmp_path):
    w = AttentionWidget._from_model(windowed_model(), 0, 1, {"stage": "weights", "temperature": 0.8})
    assert w.model_masks.shape == (1, N, N) and w.mask_of_layer == [0, -1, 0, -1]
    path = tmp_path / "windowed.html"
    w.to_html(path)
    want = w.head_summary()
    pages = []
    for init in ("", "delete window.Worker"):  # the workers' thumbnails, and the page's own
        page = browser.new_context(viewport={"width": 1000, "height": 1000}, bypass_csp=True).new_page()
        if init:
            page.add_init_script(init)
        page.goto(path.as_uri())
        pages.append(page)
    try:
        for page in pages:
            for layer in (0, 1, 2, 3):
                page.evaluate(f"{ROOT}.model.set('layer', {layer})")
                w.layer = layer
                assert (w.mask is None) is (layer % 2 == 1)
                weights = np.reshape(page.evaluate(f"{ROOT}.numbers()")["weights"], (N, N))
                np.testing.assert_allclose(weights, w.weights, rtol=0, atol=1e-12)
                if layer % 2 == 0:  # the window: the last row reads nothing before it
                    assert weights[N - 1, : N - WINDOW].max() == 0 and weights[N - 1, N - WINDOW :].min() > 0
            page.wait_for_function("document.querySelector('.aw-heads').dataset.complete === 'true'")
            page.evaluate(f"{ROOT}.model.set('summary', 'effective_tokens')")
            page.wait_for_function(
                f"[...document.querySelectorAll('.aw-head[data-value]')].length === {LAYERS * HEADS}"
            )
            for cell in page.locator(".aw-head").all():
                layer, head = int(cell.get_attribute("data-layer")), int(cell.get_attribute("data-head"))
                assert abs(float(cell.get_attribute("data-value")) - want["effective_tokens"][layer, head]) < 1e-12, (
                    layer,
                    head,
                )
        # the local layers' summaries differ from the global ones': the masks are not all one
        assert abs(want["effective_tokens"][0].mean() - want["effective_tokens"][1].mean()) > 0.1
    finally:
        for page in pages:
            page.context.close()


@pytest.mark.parametrize("some", [False, True])
def test_a_layer_switch_brings_its_own_mask_and_the_measures_stay_current(browser, tmp_path, some):
    """A layer's own mask comes with the layer (no input of the measures, as in Python): rollout,
    carried at every layer, stays current across the switches, whether the page holds every
    layer or some (to_html(layers=...): their arrays come one by one)."""
    w = AttentionWidget._from_model(windowed_model(), 0, 1, {"stage": "weights", "measure": "rollout"})
    path = tmp_path / "held.html"
    w.to_html(path, layers=[0, 1, 2] if some else None, max_mb=0.01 if some else 50)
    page = browser.new_context(viewport={"width": 1000, "height": 1400}, bypass_csp=True).new_page()
    try:
        page.goto(path.as_uri())
        page.wait_for_selector(".aw-measure[data-state='current']")
        assert bool(page.evaluate(f"{ROOT}.model.get('held_layers')")) is some
        for layer in (1, 2, 0):
            page.evaluate(f"{ROOT}.model.set('layer', {layer})")
            page.wait_for_function(f"{ROOT}.model.get('layer') === {layer}")
            assert page.evaluate(f"{ROOT}.model.edited()") == []
            assert page.evaluate(f"{ROOT}.measure().state") == "current"
    finally:
        page.context.close()
