"""DeBERTa's scores as its three terms in the page: each layer's position terms added to its own q · k (the page's
numbers are Python's in every layer), the scores stage naming c2c, c2p and p2c, and the focused row's highest score
and a cell's arithmetic split into them as w.score_terms() splits them; in an exported page and in JupyterLab."""

import pathlib
import re

import numpy as np
import pytest
from test_byhand import CONFIGS, TEXT, build
from test_integrations import gpt2_tokenizer, tf  # (fixtures)

from attnwidget import AttentionWidget

pytestmark = pytest.mark.browser
torch = pytest.importorskip("torch")

ROOT = "document.querySelector('.aw-root').attnwidget"
TESTS = str(pathlib.Path(__file__).parents[1])
FOCUS, CELL = 3, 5


def numbers_in(text: str) -> list[float]:
    return [float(x) for x in re.findall(r"-?\d+\.\d+", text.replace("−", "-"))]


def shows_the_terms(page, w, evaluate) -> None:
    """The page at w's layer: its numbers, its scores' legend, the readout's and the cell's terms."""
    n = len(w.tokens)
    numbers = evaluate(f"{ROOT}.numbers()")
    np.testing.assert_allclose(np.reshape(numbers["scores"], (n, n)), w.scores, rtol=0, atol=1e-9)
    np.testing.assert_allclose(np.reshape(numbers["weights"], (n, n)), w.weights, rtol=0, atol=1e-9)
    terms = w.score_terms()
    assert (
        "Here each score is 3 terms, as this model adds them: c2c, content to content"
        in page.locator(".aw-caption").inner_text()
    )
    assert "score = c2c + c2p + p2c, c2c = scale · q · k" in page.locator(".aw-legend:visible").first.inner_text()
    assert page.locator("figure:visible figcaption", has_text="c2p + p2c: the model's position terms").count() == 1
    top = int(np.argmax(w.scores[FOCUS]))
    said = page.locator(".aw-terms").inner_text()
    assert said.startswith("itself" if top == FOCUS else w.tokens[top])
    want = [w.scores[FOCUS, top], *(terms[t][FOCUS, top] for t in ("c2c", "c2p", "p2c"))]
    assert numbers_in(said) == pytest.approx(want, abs=0.006)
    steps = page.locator(".aw-cell").inner_text()
    assert "= c2c" in steps and "+ c2p" in steps and "+ p2c" in steps
    c2p, p2c = (terms[t][FOCUS, CELL] for t in ("c2p", "p2c"))
    added = re.search(r"\+ c2p (\S+) \+ p2c (\S+) = score", steps)
    assert added and numbers_in(" ".join(added.groups())) == pytest.approx([c2p, p2c], abs=6e-4)


def test_an_exported_page_splits_debertas_scores(browser, tmp_path, tf, gpt2_tokenizer):
    torch.manual_seed(0)
    config = tf.DebertaV2Config(vocab_size=len(gpt2_tokenizer), **{**CONFIGS["deberta-v3"][1], "num_hidden_layers": 3})
    w = AttentionWidget.from_transformers(
        tf.DebertaV2Model(config).eval(), gpt2_tokenizer, TEXT, stage="scores", head=1, focus=FOCUS, cell=(FOCUS, CELL)
    )
    whole, held = tmp_path / "deberta.html", tmp_path / "deberta-held.html"
    w.to_html(whole)
    w.to_html(held, layers=[2])  # (a page of some layers: each carried with its own terms)
    assert w.page_state(layers=[2])["state"]["held_layers"] == [0, 2]
    page = browser.new_context(viewport={"width": 1100, "height": 1400}, bypass_csp=True).new_page()
    try:
        for path in (whole, held):
            page.goto(path.as_uri())
            for layer in (0, 2, 1, 0) if path == whole else (0, 2, 0):  # each layer's own, by the page's own switch
                page.evaluate(f"{ROOT}.model.set('layer', {layer})")
                w.layer = layer
                shows_the_terms(page, w, page.evaluate)
    finally:
        page.context.close()


def test_in_jupyterlab_the_page_splits_debertas_scores(open_notebook, gpt2_tokenizer):
    setup = f"""
import sys; sys.path.insert(0, {TESTS!r})
import transformers
from attnwidget import AttentionWidget
from test_byhand import TEXT, build
tokenizer = transformers.AutoTokenizer.from_pretrained({gpt2_tokenizer.name_or_path!r})
w = AttentionWidget.from_transformers(build("deberta-v3", len(tokenizer)), tokenizer, TEXT, stage="scores", head=1, \
focus={FOCUS}, cell=({FOCUS}, {CELL}))
w
"""
    page, kernel, errors = open_notebook("deberta.ipynb", [setup])
    try:
        page.locator(".aw-root .aw-layer").select_option("1")
        assert kernel.wait_for("w.layer", lambda x: x == 1) == 1
        page.wait_for_function("document.querySelector('.aw-legend') !== null")
        model = build("deberta-v3", len(gpt2_tokenizer))
        w = AttentionWidget.from_transformers(
            model, gpt2_tokenizer, TEXT, stage="scores", head=1, focus=FOCUS, cell=(FOCUS, CELL), layer=1
        )
        page.wait_for_function(  # (the page redrew at layer 1: its scores are that layer's)
            f"Math.abs({ROOT}.numbers().scores[{FOCUS * len(w.tokens) + CELL}] - {float(w.scores[FOCUS, CELL])}) < 1e-9"
        )
        shows_the_terms(page, w, page.evaluate)
        assert errors == []
    finally:
        page.context.close()


def test_an_exported_page_keeps_a_bias_set_by_hand(browser, tmp_path, gpt2_tokenizer):
    w = AttentionWidget.from_transformers(build("deberta-v3", len(gpt2_tokenizer)), gpt2_tokenizer, TEXT, focus=FOCUS)
    n = len(w.tokens)
    w.bias = np.random.default_rng(0).normal(size=(w.n_heads, n, n))  # your own: its terms are gone
    assert w.terms is None
    for layers in (None, [1]):
        path = tmp_path / f"own-bias-{layers}.html"
        w.to_html(path, layers=layers)
        page = browser.new_context(viewport={"width": 1100, "height": 1200}, bypass_csp=True).new_page()
        try:
            page.goto(path.as_uri())
            got = np.reshape(page.evaluate(f"{ROOT}.numbers()")["weights"], (n, n))
            np.testing.assert_allclose(got, w.weights, rtol=0, atol=1e-9)  # the bias set, not the layer's
            assert page.locator(".aw-terms").count() == 0
        finally:
            page.context.close()
