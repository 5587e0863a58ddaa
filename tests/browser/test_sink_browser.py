"""The sink view in the page: the first token's column left out and every row renormalised,
the page's own numbers equal to Python's, said in words, and toggled from either side."""

import numpy as np
import pytest

from attnwidget import AttentionWidget

pytestmark = pytest.mark.browser

NUMBERS = "document.querySelector('.aw-root').attnwidget.numbers()"


def test_an_exported_page_renormalises_without_the_first_token_and_says_so(browser, tmp_path):
    rng = np.random.default_rng(3)
    w = AttentionWidget(
        q=rng.normal(size=(2, 9, 4)),
        k=rng.normal(size=(2, 9, 4)),
        v=rng.normal(size=(2, 9, 2)),
        tokens=[f"t{i}" for i in range(9)],
        causal=True,
        sink=True,
        stage="weights",
        head=1,
        focus=4,
    )
    path = tmp_path / "sink.html"
    w.to_html(path)
    page = browser.new_context(
        viewport={"width": 1000, "height": 900}, bypass_csp=True
    ).new_page()  # lets the probes below run
    try:
        page.goto(path.as_uri())
        root = page.locator(".aw-root")
        np.testing.assert_allclose(np.reshape(page.evaluate(NUMBERS)["weights"], (9, 9)), w.weights, atol=1e-12)
        assert "Sink view: the first token (t0) is left out" in root.locator(".aw-caption").inner_text()
        assert root.locator(".aw-sink").is_checked()
        assert "t0" not in root.locator(".aw-readout").inner_text()  # t4 no longer reads t0
        # a left-out cell's arithmetic says why it is 0, as does a cell ahead of its row
        page.evaluate("document.querySelector('.aw-root').attnwidget.model.set('cell', [4, 0])")
        page.wait_for_function("document.querySelector('.aw-cell:not([hidden])')?.textContent.includes('t4 reads t0')")
        assert "t0 is the first token, left out in the sink view, weight =" in root.locator(".aw-cell").inner_text()
        page.evaluate("document.querySelector('.aw-root').attnwidget.model.set('cell', [4, 6])")
        page.wait_for_function("document.querySelector('.aw-cell:not([hidden])')?.textContent.includes('t4 reads t6')")
        assert "t6 comes after t4: with the causal rule it cannot be read" in root.locator(".aw-cell").inner_text()
        # unticked: the model's real weights, in the page's numbers too
        root.locator(".aw-sink").uncheck()
        page.wait_for_function("!document.querySelector('.aw-caption').textContent.includes('Sink view')")
        w.sink = False
        np.testing.assert_allclose(np.reshape(page.evaluate(NUMBERS)["weights"], (9, 9)), w.weights, atol=1e-12)
    finally:
        page.context.close()


def test_the_toggle_reaches_python_and_python_reaches_the_page(open_notebook):
    setup = """
from attnwidget import AttentionWidget
s = AttentionWidget(stage="weights", focus=5, sink=True)
s
"""
    page, kernel, errors = open_notebook("sink.ipynb", [setup])
    try:
        toggle = page.locator(".aw-root .aw-sink")
        toggle.uncheck()
        assert kernel.wait_for("s.sink", lambda v: v is False) is False
        kernel.run("s.sink = True")
        page.wait_for_function("document.querySelector('.aw-caption').textContent.includes('Sink view')")
        weights = np.reshape(page.evaluate(NUMBERS)["weights"], (6, 6))
        assert (weights[:, 0] == 0).all()
        np.testing.assert_allclose(weights, np.array(kernel.eval("s.weights.tolist()")), atol=1e-12)
        assert errors == []
    finally:
        page.context.close()
