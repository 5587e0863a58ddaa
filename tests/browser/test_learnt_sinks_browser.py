"""Learnt attention sinks in the page (a tiny random gpt-oss): every layer's and head's weights and
effective tokens are Python's (1e-6), at another temperature too, on the page's own path and the
painting worker's; the row budget says the sink's share, and so do the readout, the caption, a
cell's arithmetic and the overview's summary; in JupyterLab, the kernel's overview and a layer
switch."""

import numpy as np
import pytest
from pages import RECORD_CANVAS_TEXT, evaluated

from attnwidget import AttentionWidget

pytestmark = pytest.mark.browser
transformers = pytest.importorskip("transformers")
torch = pytest.importorskip("torch")

ROOT = "document.querySelector('.aw-root').attnwidget"
TEXT = "I sat on the riverbank and the river sat on the bank."
# a gpt-oss small enough for a test, its heads' sinks spread out (random ones are near 0)
CONFIG = """
import torch, transformers
def tiny_gpt_oss(vocab):
    torch.manual_seed(0)
    config = transformers.GptOssConfig(vocab_size=vocab, hidden_size=32, intermediate_size=32, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, head_dim=8, num_local_experts=4, num_experts_per_tok=2,
        sliding_window=4, max_position_embeddings=64)
    model = transformers.GptOssModel(config).eval()
    with torch.no_grad():
        for layer, sinks in zip(model.layers, ([-2.0, 0.0, 1.0, 3.0], [0.5, -1.0, 2.0, -3.0])):
            layer.self_attn.sinks.copy_(torch.tensor(sinks))
    return model
"""


@pytest.fixture(scope="module")
def words(tmp_path_factory):
    from test_integrations import gpt2_tokenizer

    return gpt2_tokenizer.__wrapped__(transformers, tmp_path_factory)


def tiny_gpt_oss(vocab):
    scope: dict = {}
    exec(CONFIG, scope)
    return scope["tiny_gpt_oss"](vocab)


def numbers(page):
    return evaluated(page, f"{ROOT}.numbers()")


def test_every_layer_and_head_in_the_page_is_pythons(browser, tmp_path, words):
    model = tiny_gpt_oss(len(words))
    w = AttentionWidget.from_transformers(model, words, TEXT, stage="weights", summary="sink_share")
    n = len(w.tokens)
    w.focus = n - 1
    path = tmp_path / "sinks.html"
    w.to_html(path, theme="light")
    page = browser.new_context(viewport={"width": 1200, "height": 1100}, bypass_csp=True).new_page()
    page.add_init_script(RECORD_CANVAS_TEXT)
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    try:
        page.goto(path.as_uri())
        page.wait_for_function(f"{ROOT}.ready()")
        for temperature in (1.0, 0.5):
            page.evaluate(f"{ROOT}.model.set('temperature', {temperature})")
            w.temperature = temperature
            for layer in range(w.n_layers):
                for head in range(w.n_heads):
                    page.evaluate(f"{ROOT}.model.set('layer', {layer})")
                    page.evaluate(f"{ROOT}.model.set('head', {head})")
                    w.layer, w.head = layer, head
                    got = numbers(page)
                    assert got["sink"] == w.sinks[head]
                    np.testing.assert_allclose(np.reshape(got["weights"], (n, n)), w.weights, rtol=0, atol=1e-6)
                    np.testing.assert_allclose(got["effective_tokens"], w.effective_tokens, rtol=0, atol=1e-6)
                    np.testing.assert_allclose(np.reshape(got["output"], (n, -1)), w.output, rtol=0, atol=1e-6)
        # the overview computed in the page: every head's sink share, as head_summary() says
        page.evaluate(f"{ROOT}.model.set('temperature', 1)")
        w.temperature = 1.0
        page.wait_for_selector(".aw-heads[data-complete=true]", state="attached")
        want = w.head_summary()["sink_share"]
        cells = page.locator(".aw-head").all()
        assert len(cells) == w.n_layers * w.n_heads
        for cell in cells:
            layer, head = int(cell.get_attribute("data-layer")), int(cell.get_attribute("data-head"))
            assert abs(float(cell.get_attribute("data-value")) - want[layer, head]) < 1e-6
        assert page.locator(".aw-summary").input_value() == "sink_share"
        # in words: the row budget's sink column, the readout, the caption and a cell's arithmetic
        w.layer, w.head = 0, 3  # the sink at 3: it takes most of every row
        page.evaluate("window.__drawn = []")
        page.evaluate(f"{ROOT}.model.set('layer', 0)")
        page.evaluate(f"{ROOT}.model.set('head', 3)")
        page.wait_for_function(f"{ROOT}.ready() && window.__drawn.includes('sink')")
        drawn = page.evaluate("window.__drawn")
        kept = w.weights.sum(axis=1)
        for i in range(n):
            assert f"{kept[i]:.2f}" in drawn and f"{1 - kept[i]:.2f}" in drawn  # Σ row and the sink's share
        readout = page.locator(".aw-readout").inner_text()
        focus = n - 1
        assert f"its sink takes {1 - kept[focus]:.3f} (no token gets it)" in readout
        assert f"{w.effective_tokens[focus]:.2f} effective tokens among what it keeps" in readout
        caption = page.locator(".aw-caption").inner_text()
        assert "z = 3.000 is this head's learnt sink" in caption and "the part no token gets" in caption
        page.evaluate(f"{ROOT}.model.set('cell', [{focus}, {focus - 1}])")
        w.cell = (focus, focus - 1)  # (a cell its window reads)
        page.locator(".aw-cell", has_text="among them").wait_for()
        steps = page.locator(".aw-cell").inner_text()
        a = w.cell_arithmetic
        assert "the sink's exp(3.000 / T) among them" in steps and f"{a['row_sum']:.3f}" in steps
        page.evaluate(f"{ROOT}.model.set('stage', 'blend')")
        page.locator(".aw-caption", has_text="This head has a learnt sink").wait_for()
        assert not errors
    finally:
        page.context.close()


@pytest.mark.parametrize("painted", ["worker", "page"])
def test_a_long_rows_picture_has_the_sink_taken_out(browser, tmp_path, painted):
    """From 512 tokens the weights picture is painted by a worker (or, where none can run, by the page
    itself): the sink's share is taken out of every row there too. Your own arrays, with sinks=."""
    from test_engine_browser import PIXELS

    n = 600
    rng = np.random.default_rng(2)
    q, k, v = (rng.normal(size=(2, n, 4)) for _ in range(3))
    w = AttentionWidget(q=q, k=k, v=v, tokens=[f"t{i}" for i in range(n)], sinks=[4.0, -1.0], stage="weights")
    bare = AttentionWidget(q=q, k=k, v=v, tokens=[f"t{i}" for i in range(n)], stage="weights")
    pictures = []
    for widget, name in ((w, "sunk"), (bare, "bare")):
        path = tmp_path / f"{name}.html"
        widget.to_html(path)
        page = browser.new_context(viewport={"width": 1100, "height": 1000}, bypass_csp=True).new_page()
        if painted == "page":
            page.add_init_script("delete window.Worker")
        try:
            page.goto(path.as_uri())
            page.wait_for_function(
                "(() => { const c = document.querySelector('.aw-panel:not([hidden]) canvas.aw-grid'); "
                "return c && !c.hasAttribute('data-pending') && c.dataset.left; })()"
            )
            if widget is w:
                got = np.reshape(numbers(page)["weights"], (n, n))
                np.testing.assert_allclose(got, w.weights, rtol=0, atol=1e-6)
            pictures.append(page.locator(".aw-panel:not([hidden]) canvas.aw-grid").first.evaluate(PIXELS))
        finally:
            page.context.close()
    assert pictures[0] != pictures[1]  # the sink (at 4, above nearly every score) paled the picture


def test_jupyterlab_shows_the_kernels_sink_shares_and_a_layers_own_sinks(open_notebook, words, tmp_path_factory):
    folder = tmp_path_factory.mktemp("oss-tokenizer")
    words.save_pretrained(folder)
    setup = CONFIG + (
        "from attnwidget import AttentionWidget\n"
        f"words = transformers.AutoTokenizer.from_pretrained({str(folder)!r})\n"
        f"w = AttentionWidget.from_transformers(tiny_gpt_oss(len(words)), words, {TEXT!r}, stage='weights', "
        "summary='sink_share')\n"
        "w"
    )
    page, kernel, errors = open_notebook("learnt_sinks.ipynb", [setup])
    try:
        page.wait_for_selector(".aw-heads[data-complete=true]", state="attached")
        want = kernel.eval("w.head_summary()['sink_share'].tolist()")
        page.wait_for_function("document.querySelectorAll('.aw-head[data-value]').length === 8")
        for cell in page.locator(".aw-head").all():  # the kernel's overview: its summaries, as head_summary()
            layer, head = int(cell.get_attribute("data-layer")), int(cell.get_attribute("data-head"))
            assert abs(float(cell.get_attribute("data-value")) - want[layer][head]) < 1e-6
        page.locator(".aw-head[data-layer='1'][data-head='2']").click()
        assert kernel.wait_for("(w.layer, w.head)", lambda x: tuple(x) == (1, 2)) in ([1, 2], (1, 2))
        page.wait_for_function(f"{ROOT}.numbers().sink === 2")  # layer 1's own sinks came with it
        n = kernel.eval("len(w.tokens)")
        weights = np.array(kernel.eval("w.weights.tolist()"))
        page.wait_for_function(  # (the page redraws once the kernel's layer 1, head 2 arrive)
            f"Math.abs({ROOT}.numbers().weights[0] - {float(weights[0, 0])!r}) < 1e-6"
        )
        np.testing.assert_allclose(np.reshape(numbers(page)["weights"], (n, n)), weights, rtol=0, atol=1e-6)
        assert not [e for e in errors if "favicon" not in e]
    finally:
        kernel.close()
        page.context.close()
