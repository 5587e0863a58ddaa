"""The additive score bias in the page: its numbers are Python's, the scores stage shows the
bias apart, and a cell's arithmetic gives the two terms."""

import numpy as np
import pytest
from pages import evaluated

from attnwidget import AttentionWidget

pytestmark = pytest.mark.browser

NUMBERS = "document.querySelector('.aw-root').attnwidget.numbers()"


@pytest.mark.parametrize("n", [9, 600])  # the page's own picture, and the painting worker's
def test_the_page_adds_the_bias_as_python_does(browser, tmp_path, n):
    rng = np.random.default_rng(4)
    heads = 2
    q, k, v = (rng.normal(size=(heads, n, 4)) for _ in range(3))
    slopes = np.array([0.5, 0.25])[:, None, None]  # ALiBi-like: each head penalises distance at its own rate
    bias = -slopes * np.abs(np.arange(n)[:, None] - np.arange(n)[None, :])
    w = AttentionWidget(
        q=q, k=k, v=v, tokens=[f"t{i}" for i in range(n)], bias=bias, head=1, stage="scores", focus=3, cell=(3, 1)
    )
    path = tmp_path / f"bias-{n}.html"
    w.to_html(path)
    page = browser.new_context(viewport={"width": 1100, "height": 1000}, bypass_csp=True).new_page()
    try:
        page.goto(path.as_uri())
        numbers = evaluated(page, NUMBERS)
        np.testing.assert_allclose(np.reshape(numbers["scores"], (n, n)), w.scores, rtol=0, atol=1e-12)
        np.testing.assert_allclose(np.reshape(numbers["weights"], (n, n)), w.weights, rtol=0, atol=1e-12)
        assert "score = scale · q · k + bias" in page.locator(".aw-legend:visible").first.inner_text()
        assert page.locator("figure:visible figcaption", has_text="bias (added to scale · q · k)").count() == 1
        a = w.attention.cell(3, 1)
        steps = page.locator(".aw-cell").inner_text()
        assert (
            f"{a['scale'] * a['dot']:.3f}".replace("-", "−") in steps
            and f"+ bias {a['bias']:.3f}".replace("-", "−") in steps
        )
        # the weights stage: the worker's picture (from 512 tokens) is the page's own
        page.evaluate("document.querySelector('.aw-root').attnwidget.model.set('stage', 'weights')")
        page.wait_for_function(
            "(() => { const c = document.querySelector('.aw-panel:not([hidden]) canvas.aw-grid'); "
            "return c && !c.hasAttribute('data-pending') && c.dataset.left; })()"
        )
        if n >= 512:  # the worker added the same bias: its picture is the one the page paints itself
            from test_engine_browser import PIXELS

            here = browser.new_context(viewport={"width": 1100, "height": 1000}, bypass_csp=True).new_page()
            here.add_init_script("delete window.Worker")
            here.goto(path.as_uri())
            here.evaluate("document.querySelector('.aw-root').attnwidget.model.set('stage', 'weights')")
            here.wait_for_function(
                "(() => { const c = document.querySelector('.aw-panel:not([hidden]) canvas.aw-grid'); "
                "return c && c.dataset.left; })()"
            )
            canvas = ".aw-panel:not([hidden]) canvas.aw-grid"
            assert page.locator(canvas).first.evaluate(PIXELS) == here.locator(canvas).first.evaluate(PIXELS)
            here.context.close()
        top = int(np.argmax(w.weights[3]))
        assert (
            page.locator(".aw-readout")
            .inner_text()
            .startswith(f"t3 reads {'itself' if top == 3 else f't{top}'} {w.weights[3].max():.3f}")
        )
    finally:
        page.context.close()
