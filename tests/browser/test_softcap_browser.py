"""Soft-capped scores (Gemma 2: score = c · tanh(scale · q · k / c)) in the page: its numbers are
Python's, on the page's own path and the painting worker's, and the scores stage and a cell's
arithmetic say the cap."""

import numpy as np
import pytest
from pages import evaluated

from attnwidget import AttentionWidget

pytestmark = pytest.mark.browser

ROOT = "document.querySelector('.aw-root').attnwidget"


@pytest.mark.parametrize("n", [9, 600])  # the page's own computation, and the painting worker's
def test_the_page_caps_the_scores_as_python_does(browser, tmp_path, n):
    rng = np.random.default_rng(5)
    q, k, v = (rng.normal(scale=3, size=(2, n, 4)) for _ in range(3))
    w = AttentionWidget(
        q=q, k=k, v=v, tokens=[f"t{i}" for i in range(n)], softcap=2.5, head=1, stage="scores", focus=3, cell=(3, 1)
    )
    assert np.abs(w.scores).max() <= 2.5 and np.abs(w.attention.scale * q[1] @ k[1].T).max() > 2.5  # the cap bites
    path = tmp_path / f"softcap-{n}.html"
    w.to_html(path)
    page = browser.new_context(viewport={"width": 1100, "height": 1000}, bypass_csp=True).new_page()
    try:
        page.goto(path.as_uri())
        numbers = evaluated(page, f"{ROOT}.numbers()")
        np.testing.assert_allclose(np.reshape(numbers["scores"], (n, n)), w.scores, rtol=0, atol=1e-12)
        np.testing.assert_allclose(np.reshape(numbers["weights"], (n, n)), w.weights, rtol=0, atol=1e-12)
        assert "score = 2.500 · tanh(scale · q · k / 2.500)" in page.locator(".aw-legend:visible").first.inner_text()
        assert "This model caps its scores" in page.locator(".aw-caption").inner_text()
        a = w.attention.cell(3, 1)
        steps = page.locator(".aw-cell").inner_text()
        assert "capped: 2.500 · tanh(… / 2.500)" in steps and f"{a['score']:.3f}".replace("-", "−") in steps
        # another temperature: the same cap, new weights, still Python's
        page.evaluate(f"{ROOT}.model.set('temperature', 0.5)")
        w.temperature = 0.5
        page.evaluate(f"{ROOT}.model.set('stage', 'weights')")
        page.wait_for_function(
            "(() => { const c = document.querySelector('.aw-panel:not([hidden]) canvas.aw-grid'); "
            "return c && !c.hasAttribute('data-pending') && c.dataset.left; })()"
        )
        np.testing.assert_allclose(
            np.reshape(evaluated(page, f"{ROOT}.numbers()")["weights"], (n, n)), w.weights, rtol=0, atol=1e-12
        )
        if n >= 512:  # the worker capped the scores too: its picture is the one the page paints itself
            from test_engine_browser import PIXELS

            here = browser.new_context(viewport={"width": 1100, "height": 1000}, bypass_csp=True).new_page()
            here.add_init_script("delete window.Worker")
            here.goto(path.as_uri())
            here.evaluate(f"{ROOT}.model.set('temperature', 0.5)")
            here.evaluate(f"{ROOT}.model.set('stage', 'weights')")
            here.wait_for_function(
                "(() => { const c = document.querySelector('.aw-panel:not([hidden]) canvas.aw-grid'); "
                "return c && c.dataset.left; })()"
            )
            canvas = ".aw-panel:not([hidden]) canvas.aw-grid"
            assert page.locator(canvas).first.evaluate(PIXELS) == here.locator(canvas).first.evaluate(PIXELS)
            here.context.close()
    finally:
        page.context.close()
