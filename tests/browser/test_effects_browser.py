"""A head's effect on the next token in the page: the overview coloured by Python's head_effects,
computed in the kernel when the page asks for that summary, and carried by an exported page."""

import pathlib
import re

import numpy as np
import pytest
from test_integrations import TEXT, gpt2, gpt2_tokenizer, tf  # (fixtures)

from attnwidget import AttentionWidget

pytestmark = pytest.mark.browser

ROOT = "document.querySelector('.aw-root').attnwidget"
TESTS = str(pathlib.Path(__file__).parents[1])


def heads_show(page, effects):
    """Every head's cell carries its effect, and the strongest first puts the largest size first."""
    for cell in page.locator(".aw-head").all():
        layer, head = int(cell.get_attribute("data-layer")), int(cell.get_attribute("data-head"))
        assert float(cell.get_attribute("data-value")) == pytest.approx(effects[layer, head], abs=1e-9)


def test_in_jupyterlab_the_effect_summary_is_computed_by_the_kernel_when_chosen(open_notebook, gpt2_tokenizer):
    setup = f"""
import sys; sys.path.insert(0, {TESTS!r})
import transformers
from attnwidget import AttentionWidget
from test_integrations import gpt2
tokenizer = transformers.AutoTokenizer.from_pretrained({gpt2_tokenizer.name_or_path!r})
w = AttentionWidget.from_transformers(gpt2(transformers, tokenizer, initializer_range=0.25), tokenizer, {TEXT!r}, \
stage="weights")
w
"""
    page, kernel, errors = open_notebook("effects.ipynb", [setup])
    try:
        page.wait_for_selector(".aw-heads[data-complete=true]", state="attached")
        assert kernel.eval("len(w._effects)") == 0  # shown: the model is not run again until asked
        page.locator("select.aw-summary").select_option("effect")
        assert kernel.wait_for("w.summary", lambda s: s == "effect") == "effect"
        page.wait_for_function("[...document.querySelectorAll('.aw-head')].every((c) => c.dataset.value !== '')")
        heads_show(page, np.array(kernel.eval("w.head_effects().tolist()")))
        assert errors == []
    finally:
        page.context.close()


def test_an_exported_page_carries_the_effects_computed_before(browser, tmp_path, tf, gpt2_tokenizer):
    w = AttentionWidget.from_transformers(
        gpt2(tf, gpt2_tokenizer, initializer_range=0.25), gpt2_tokenizer, TEXT, stage="weights"
    )
    path = tmp_path / "effects.html"
    w.to_html(path)
    page = browser.new_context(viewport={"width": 1000, "height": 1200}, bypass_csp=True).new_page()
    try:
        page.goto(path.as_uri())
        page.wait_for_selector(".aw-heads[data-complete=true]", state="attached")
        assert page.locator("select.aw-summary option[value=effect]").count() == 0  # none computed: not offered
        w.summary = "effect"  # exported coloured by them: computed for the page
        w.to_html(path)
        assert list(w._effects) == [("zero", len(w.tokens), 0)]
        effects = w.head_effects()
        page.goto(path.as_uri())
        page.wait_for_selector(".aw-heads[data-complete=true]", state="attached")
        page.locator("select.aw-summary").select_option("effect")
        page.wait_for_function(f"{ROOT}.model.get('summary') === 'effect'")
        page.wait_for_function("[...document.querySelectorAll('.aw-head')].every((c) => c.dataset.value !== '')")
        heads_show(page, effects)
        # each effect written alike: its sign and the same decimals, three or more (− the minus sign)
        labels = [c.inner_text().split("\n")[-1] for c in page.locator(".aw-head").all()]
        places = {len(t.split(".")[-1]) for t in labels}
        assert all(re.fullmatch(r"[+−]\d+\.\d{3,}", t) for t in labels) and len(places) == 1, labels
        # strongest first: the heads the next token needs most (the most negative) first
        page.locator(".aw-summary-sort").check()
        page.wait_for_function("document.querySelector('.aw-heads-list').dataset.heads === ''")
        order = [float(c.get_attribute("data-value")) for c in page.locator(".aw-head").all()]
        assert order == sorted(order)
        # another step: the effects exported are of the step exported only, and the page says so
        page.evaluate(f"{ROOT}.model.set('step', {len(w.tokens) - 2})")
        page.wait_for_function("[...document.querySelectorAll('.aw-head')].every((c) => c.dataset.value === '')")
        caption = page.locator(".aw-heads-caption").inner_text().lower()
        assert f"the effect on the next token was computed for step {len(w.tokens)} only" in caption, caption
        page.evaluate(f"{ROOT}.model.set('step', {len(w.tokens)})")  # back: shown again
        page.wait_for_function("[...document.querySelectorAll('.aw-head')].every((c) => c.dataset.value !== '')")
        heads_show(page, effects)
    finally:
        page.context.close()


def test_in_jupyterlab_a_model_of_many_heads_marks_the_estimates_and_ablates_the_largest(
    open_notebook, gpt2_tokenizer, artifacts
):
    setup = f"""
import sys; sys.path.insert(0, {TESTS!r})
import transformers
from attnwidget import AttentionWidget
from test_integrations import random_model
tokenizer = transformers.AutoTokenizer.from_pretrained({gpt2_tokenizer.name_or_path!r})
end = len(tokenizer) - 1
model = random_model(transformers, "GPT2LMHeadModel", "GPT2Config", len(tokenizer), n_embd=48, n_layer=4, n_head=6, \
n_positions=64, initializer_range=0.25, bos_token_id=end, eos_token_id=end)
w = AttentionWidget.from_transformers(model, tokenizer, {TEXT!r}, stage="weights")
w
"""
    page, kernel, errors = open_notebook("many_effects.ipynb", [setup])
    try:
        page.wait_for_selector(".aw-heads[data-complete=true]", state="attached")
        page.locator("select.aw-summary").select_option("effect")
        page.wait_for_function(
            "document.querySelector('.aw-heads-caption').textContent.includes('ablated exactly')"
            " && [...document.querySelectorAll('.aw-head')].every((c) => c.dataset.value !== '')"
        )
        exact = np.array(kernel.eval("w.overview['effect_exact']"))
        assert exact.sum() == 12
        # the page marks as estimated ("≈") the heads Python holds no exact effect of (its last cells may
        # be drawn a frame after the caption: waited for, and refused if they never agree)
        page.wait_for_function(
            "(want) => { const marks = [...document.querySelectorAll('.aw-head')]"
            ".map((c) => c.innerText.split('\\n').pop().startsWith('≈'));"
            " return marks.length === want.length && marks.every((m, i) => m === want[i]); }",
            arg=[bool(not e) for e in exact],
        )
        labels = [c.inner_text().split("\n")[-1] for c in page.locator(".aw-head").all()]
        assert [t.startswith("≈") for t in labels] == list(~exact)
        caption = page.locator(".aw-heads-caption").text_content()
        assert "≈: estimated (attribution patching); the 12 heads estimated largest: ablated exactly" in caption
        page.locator(".aw-heads").screenshot(path=str(artifacts / "effects-estimated.png"))  # (to look at)
        assert errors == []
    finally:
        page.context.close()
