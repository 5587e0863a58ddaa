"""Attention weights alone (from_attentions) in the page: drawn as given, in every layer, re-tempered
as Python re-tempers them, with no query/key or scores stage."""

import numpy as np
import pytest

from attnwidget import AttentionWidget

pytestmark = pytest.mark.browser

ROOT = "document.querySelector('.aw-root').attnwidget"


def causal_pattern(rng, layers, heads, n):
    w = rng.random((layers, heads, n, n)) ** 3 * np.tri(n)
    return w / w.sum(axis=-1, keepdims=True)


def test_a_page_of_weights_draws_them_as_given_and_retempers_them_with_no_scores_stage(browser, tmp_path):
    rng = np.random.default_rng(3)
    n = 8
    given = causal_pattern(rng, 3, 2, n)
    w = AttentionWidget.from_attentions(
        given, [f"t{i}" for i in range(n)], layer=1, head=1, stage="weights", focus=6, cell=(6, 2)
    )
    path = tmp_path / "weights.html"
    w.to_html(path)
    page = browser.new_context(viewport={"width": 1100, "height": 1000}, bypass_csp=True).new_page()
    try:
        page.goto(path.as_uri())
        page.wait_for_selector(".aw-stage[data-stage='weights'][aria-pressed='true']")
        np.testing.assert_allclose(
            np.reshape(page.evaluate(f"{ROOT}.numbers()")["weights"], (n, n)), given[1, 1], atol=1e-6
        )
        offered = page.locator(".aw-stage:visible").evaluate_all(
            "bs => bs.map((b) => b.dataset.stage + ' ' + b.textContent)"
        )
        assert offered == ["tokens 1Tokens", "weights 2Weights"]  # no query/key, no scores, no blend without values
        assert "These weights were given as they are" in page.locator(".aw-caption").inner_text()
        steps = page.locator(".aw-cell").inner_text()
        assert "the weight given =" in steps and f"{given[1, 1, 6, 2]:.3f}" in steps and "q(" not in steps
        # the stepper steps over the stages weights cannot give
        assert page.locator(".aw-next").is_disabled()
        page.locator(".aw-back").click()
        page.wait_for_function(f"{ROOT}.model.get('stage') === 'tokens'")
        page.locator(".aw-next").click()
        page.wait_for_function(f"{ROOT}.model.get('stage') === 'weights'")
        # re-tempered in the page as in Python: softmax(log W / T)
        page.evaluate(f"{ROOT}.model.set('temperature', 0.5)")
        w.temperature = 0.5
        page.wait_for_function(f"{ROOT}.model.get('temperature') === 0.5")
        page.evaluate("new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)))")
        np.testing.assert_allclose(
            np.reshape(page.evaluate(f"{ROOT}.numbers()")["weights"], (n, n)), w.weights, rtol=0, atol=1e-12
        )
        # another layer: its own weights
        page.locator("select.aw-layer").select_option("2")
        page.wait_for_function(f"{ROOT}.model.get('layer') === 2")
        page.evaluate("new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)))")
        w.layer = 2
        np.testing.assert_allclose(
            np.reshape(page.evaluate(f"{ROOT}.numbers()")["weights"], (n, n)), w.weights, rtol=0, atol=1e-12
        )
    finally:
        page.context.close()


def test_a_page_holding_some_layers_of_weights_draws_each_with_its_own(browser, tmp_path):
    rng = np.random.default_rng(4)
    n = 6
    given = causal_pattern(rng, 4, 2, n)
    w = AttentionWidget.from_attentions(given, [f"t{i}" for i in range(n)], layer=1, stage="weights")
    path = tmp_path / "held.html"
    w.to_html(path, layers=[3])
    page = browser.new_context(viewport={"width": 1100, "height": 1000}, bypass_csp=True).new_page()
    try:
        page.goto(path.as_uri())
        page.wait_for_selector(".aw-stage[data-stage='weights'][aria-pressed='true']")
        np.testing.assert_allclose(
            np.reshape(page.evaluate(f"{ROOT}.numbers()")["weights"], (n, n)), given[1, 0], atol=1e-6
        )
        page.locator("select.aw-layer").select_option("3")
        page.wait_for_function(f"{ROOT}.model.get('layer') === 3")
        page.evaluate("new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)))")
        np.testing.assert_allclose(
            np.reshape(page.evaluate(f"{ROOT}.numbers()")["weights"], (n, n)), given[3, 0], atol=1e-6
        )
    finally:
        page.context.close()
