"""One numbering: wherever the page shows the number of a head, a layer, a token, a step or a
dimension, it is the number Python uses (`w.head = 2` shows "head 2"), in every view."""

import random
import re
from types import SimpleNamespace

import numpy as np
import pytest

from attnwidget import AttentionWidget

pytestmark = pytest.mark.browser

LAYERS, HEADS, N, D = 3, 4, 7, 2
ROOT = "document.querySelector('.aw-root')"


def fake_model(seed=0):
    rng = np.random.default_rng(seed)
    layers = [tuple(rng.normal(size=(HEADS, N, D)) for _ in range(3)) for _ in range(LAYERS)]
    return SimpleNamespace(
        tokens=[f"w{i}" for i in range(N)], layers=layers, causal=True, scale=None, model_name="fake"
    )


@pytest.fixture(scope="module")
def page(browser, tmp_path_factory):
    path = tmp_path_factory.mktemp("numbering") / "model.html"
    AttentionWidget._from_model(fake_model(), 0, 0, {"stage": "tokens"}).to_html(path)
    page = browser.new_context(viewport={"width": 1200, "height": 1000}).new_page()
    page.goto(path.as_uri())
    page.wait_for_selector(".aw-heads[data-complete=true]", state="attached")
    yield page
    page.context.close()


def set_state(page, change):
    page.evaluate(f"c => {ROOT}.attnwidget.model.propose(c)", change)
    page.evaluate(f"{ROOT}.attnwidget.redraw()")


def shown(page, selector):
    return page.locator(selector).evaluate_all("ns => ns.filter(n => n.offsetParent !== null).map(n => n.textContent)")


def test_heads_layers_tokens_and_steps_are_counted_as_python_counts_them(page):
    # every head button says its own layer and head, as Python numbers them
    for b in page.locator(".aw-head").all():
        label = b.get_attribute("aria-label")
        assert label == f"layer {b.get_attribute('data-layer')}, head {b.get_attribute('data-head')}", label
    assert shown(page, ".aw-heads-row") == [f"layer {layer}" for layer in range(LAYERS)]
    assert shown(page, ".aw-heads-col") == [str(h) for h in range(HEADS)]
    options = page.locator(".aw-layer option").all_inner_texts()
    assert [re.match(r"\d+", o).group() for o in options] == [str(layer) for layer in range(LAYERS)], options
    rng = random.Random(3)
    for _ in range(8):
        layer, head, focus = rng.randrange(LAYERS), rng.randrange(HEADS), rng.randrange(N)
        set_state(page, {"step": N})  # a step moves the focus to the newest token: set it first
        set_state(page, {"layer": layer, "head": head, "focus": focus, "stage": "tokens"})
        assert page.locator(".aw-head[aria-pressed=true]").get_attribute("aria-label") == f"layer {layer}, head {head}"
        assert page.locator(".aw-layer").evaluate("s => s.options[s.selectedIndex].text").startswith(str(layer))
        assert f"token {focus}" in page.locator(".aw-readout").inner_text()
        # the query/key stage's dimensions are Python's columns: q[:, 0], q[:, 1]
        set_state(page, {"stage": "qk"})
        canvas = page.locator(".aw-panel:not([hidden]) canvas.aw-grid").first
        box = canvas.bounding_box()
        ds = canvas.evaluate("c => ({...c.dataset})")
        page.mouse.move(
            box["x"] + float(ds["left"]) + float(ds["cellWidth"]) / 2,
            box["y"] + float(ds["top"]) + float(ds["cellHeight"]) / 2,
        )
        tip = page.locator(".aw-tip:not([hidden])").first.inner_text()
        assert "[0]" in tip, tip
        step = rng.randrange(1, N)
        set_state(page, {"step": step})
        where = page.locator(".aw-gen-where").inner_text()
        assert where.startswith(f"step {step} of {N}"), where
