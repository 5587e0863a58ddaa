"""`controls`: the page without its controls, for a figure (a slide, a course page's illustration):
the stages alone, set from Python or from the page, kept in exported pages."""

import numpy as np
import pytest
import traitlets

from attnwidget import AttentionWidget

pytestmark = pytest.mark.browser

ROOT = "document.querySelector('.aw-root').attnwidget"
SHOWN = "() => { const c = document.querySelector('.aw-root .aw-controls'); return !!c && c.checkVisibility(); }"


def test_controls_is_a_flag_set_from_python():
    w = AttentionWidget("the cat sat", controls=False)
    assert w.controls is False and AttentionWidget().controls is True
    with pytest.raises(traitlets.TraitError, match="'controls' must be True or False, got 'no'"):
        w.controls = "no"
    assert w.controls is False  # (kept)


def test_a_page_without_controls_shows_the_stages_alone_and_the_page_can_bring_them_back(browser, tmp_path):
    w = AttentionWidget("She sat by the river bank", stage="weights", focus=5, controls=False)
    path = tmp_path / "figure.html"
    w.to_html(path)
    page = browser.new_context(viewport={"width": 1000, "height": 900}, bypass_csp=True).new_page()
    try:
        page.goto(path.as_uri())
        page.wait_for_function(f"{ROOT}.ready()")
        assert page.evaluate(SHOWN) is False
        assert page.locator(".aw-root .aw-stage").first.is_visible() is False
        assert page.locator(".aw-root canvas:visible").count() > 0  # the weights themselves are drawn
        weights = np.reshape(page.evaluate(f"{ROOT}.numbers()")["weights"], (6, 6))
        np.testing.assert_allclose(weights, w.weights, atol=1e-12)
        # the page's own rules take it, and refuse what Python refuses
        said = page.evaluate(f"{ROOT}.model.propose({{controls: 'no'}})")
        assert said == "'controls' must be True or False, got 'no'."
        assert page.evaluate(f"{ROOT}.model.propose({{controls: true}})") is None
        page.wait_for_function(SHOWN)
        assert page.locator(".aw-root .aw-stage").first.is_visible()
    finally:
        page.context.close()
