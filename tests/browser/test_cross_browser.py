"""Cross-attention in the page: rows are the target's tokens and columns the source's, so every
matrix is n_queries × n_keys; the page's numbers are Python's, the strip links a target token
down to the source tokens it reads, and an encoder–decoder model's blocks switch in the page."""

import pathlib

import numpy as np
import pytest
from pages import evaluated

from attnwidget import AttentionWidget

pytestmark = pytest.mark.browser

ROOT = "document.querySelector('.aw-root').attnwidget"


def open_page(browser, w, path, width=1100):
    w.to_html(path)
    page = browser.new_context(viewport={"width": width, "height": 1100}, bypass_csp=True).new_page()
    page.goto(path.as_uri())
    return page


def numbers(page, n, m):
    got = evaluated(page, f"{ROOT}.numbers()")
    return {name: np.reshape(got[name], (n, -1)) for name in ("scores", "weights", "output")}


def set_(page, name, value):
    page.evaluate(f"([n, v]) => {ROOT}.model.set(n, v)", [name, value])
    page.evaluate("() => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)))")


@pytest.mark.parametrize("n, m", [(4, 7), (9, 3), (150, 620)])  # wider, taller, and a long one (detail view, worker)
def test_the_page_computes_cross_attention_as_python_does(browser, tmp_path, n, m):
    rng = np.random.default_rng(n + m)
    q, k, v = rng.normal(size=(2, n, 4)), rng.normal(size=(2, m, 4)), rng.normal(size=(2, m, 4))
    w = AttentionWidget(
        tokens=[f"t{i}" for i in range(n)],
        key_tokens=[f"s{j}" for j in range(m)],
        q=q,
        k=k,
        v=v,
        head=1,
        stage="weights",
        focus=2,
        temperature=0.7,
    )
    page = open_page(browser, w, tmp_path / f"cross-{n}-{m}.html")
    try:
        page.wait_for_function(
            "(() => { const c = document.querySelector('.aw-panel:not([hidden]) canvas.aw-grid'); "
            "return c && !c.hasAttribute('data-pending') && c.dataset.left; })()"
        )
        got = numbers(page, n, m)
        for name in ("scores", "weights", "output"):
            np.testing.assert_allclose(got[name], getattr(w, name), rtol=0, atol=1e-12, err_msg=name)
        # the strip: the target's tokens to click, the source's below with the focused row's weights
        assert page.locator(".aw-tokens:not(.aw-key-tokens) .aw-token").count() == n
        assert page.locator(".aw-key-token").count() == m
        assert page.locator(".aw-links path").count() >= 1
        top = int(np.argmax(w.weights[2]))
        assert page.locator(".aw-readout").inner_text().startswith(f"t2 reads s{top} {w.weights[2, top]:.3f}")
        # a cell past the last row's number is a cell: its arithmetic is Python's
        j = m - 1
        set_(page, "cell", [2, j])
        assert f"{w.weights[2, j]:.3f}" in page.locator(".aw-cell").inner_text()
        assert "t2" in page.locator(".aw-cell").inner_text() and f"s{j}" in page.locator(".aw-cell").inner_text()
        # the blend: values are the source tokens', one output per target token
        set_(page, "stage", "blend")
        labels = page.locator(".aw-blend-table th.aw-key, .aw-blend-table th.aw-rest").all_inner_texts()
        assert all(t.startswith("s") or t.startswith("…") for t in labels)
        out = page.locator(".aw-blend-table .aw-out").all_inner_texts()
        assert [float(t.replace("−", "-")) for t in out] == pytest.approx(np.round(w.output[2], 2), abs=0.006)
        assert page.locator(".aw-plot circle.aw-value").count() == m
        assert page.locator(".aw-plot circle.aw-output").count() == n
    finally:
        page.context.close()


def fake_blocks():
    from test_cross import fake_seq2seq

    return fake_seq2seq(src=6, tgt=4, heads=2, d=4, layers=(2, 3, 3), seed=5)


def test_an_exported_encoder_decoder_page_switches_blocks_and_layers_by_itself(browser, tmp_path):
    blocks = fake_blocks()
    w = AttentionWidget._from_model(blocks, 1, 1, {"stage": "weights"}, "cross")
    page = open_page(browser, w, tmp_path / "blocks.html")
    reference = AttentionWidget._from_model(blocks, 1, 1, {}, "cross")  # Python, following the page's clicks
    try:
        assert (
            page.locator(".aw-block").count() == 3
            and page.locator(".aw-block[aria-pressed=true]").inner_text() == "cross-attention"
        )
        for block, layer in (("encoder", 1), ("decoder", 1), ("decoder", 2), ("cross", 0)):
            if block != reference.block:
                page.locator(f".aw-block[data-block={block}]").click()
            if layer != reference.layer or block != reference.block:
                page.locator(".aw-layer").select_option(str(layer))
            reference.block, reference.layer = block, layer
            page.evaluate("() => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)))")
            n, m = len(reference.tokens), len(reference.key_tokens)
            np.testing.assert_allclose(
                numbers(page, n, m)["weights"], reference.weights, rtol=0, atol=1e-12, err_msg=f"{block} {layer}"
            )
            assert page.locator(".aw-key-token").count() == (m if block == "cross" else 0)
            assert page.locator(".aw-heads .aw-head").count() == 2 * reference.n_layers  # the block's own overview
        assert page.evaluate(f"{ROOT}.model.get('causal')") is False
    finally:
        page.context.close()


def test_a_block_clicked_in_jupyterlab_reaches_python(open_notebook):
    tests = str(pathlib.Path(__file__).parents[1])
    setup = f"""
import sys; sys.path.insert(0, {tests!r})
from attnwidget import AttentionWidget
from test_cross import fake_seq2seq
w = AttentionWidget._from_model(fake_seq2seq(src=6, tgt=4, seed=5), 0, 0, {{"stage": "weights"}}, "cross")
w
"""
    page, kernel, errors = open_notebook("cross.ipynb", [setup])
    try:
        page.locator(".aw-root .aw-block[data-block=decoder]").click()
        # (as one string: the kernel's eval gives a mixed tuple back as strings, which no tuple equals)
        said = kernel.wait_for("f'{w.block} {w.causal} {len(w.key_tokens)}'", lambda r: r == "decoder True 4")
        assert said == "decoder True 4"
        page.wait_for_function(f"{ROOT}.model.get('causal') === true && {ROOT}.model.get('key_tokens').length === 4")
        weights = np.reshape(page.evaluate(f"{ROOT}.numbers()")["weights"], (4, 4))
        np.testing.assert_allclose(weights, np.array(kernel.eval("w.weights.tolist()")), rtol=0, atol=1e-12)
        kernel.run("w.block = 'cross'")  # and back from Python: the page draws the source below
        page.wait_for_function("document.querySelectorAll('.aw-root .aw-key-token').length === 6")
        # another text's block: the page's own arrays are the layer's, so its clicks still settle and reach Python
        page.locator(".aw-root .aw-block[data-block=encoder]").click()
        assert kernel.wait_for("f'{w.block} {len(w.tokens)}'", lambda r: r == "encoder 6") == "encoder 6"
        page.wait_for_function(f"{ROOT}.model.get('tokens').length === 6")
        page.locator(".aw-root .aw-token").nth(5).click()
        assert kernel.wait_for("w.focus", lambda f: f == 5) == 5
        assert errors == []
    finally:
        page.context.close()


from test_integrations import gpt2_tokenizer, tf  # noqa: E402 (fixtures)


@pytest.mark.parametrize("kind", ["bart", "t5"])
def test_a_translation_models_page_shows_the_models_own_attentions(browser, tmp_path, tf, gpt2_tokenizer, kind):
    import torch
    from test_seq2seq import TARGET, TEXT, decoder_ids, seq2seq

    model = seq2seq(tf, gpt2_tokenizer, kind)
    w = AttentionWidget.from_transformers(model, gpt2_tokenizer, TEXT, target=TARGET, stage="weights", layer=1, head=2)
    with torch.no_grad():
        out = model(
            **gpt2_tokenizer(TEXT, return_tensors="pt"),
            decoder_input_ids=torch.tensor([decoder_ids(model, gpt2_tokenizer)]),
            output_attentions=True,
        )
    reference = {"encoder": out.encoder_attentions, "decoder": out.decoder_attentions, "cross": out.cross_attentions}
    page = open_page(browser, w, tmp_path / f"{kind}.html")
    try:
        for block in ("cross", "encoder", "decoder"):
            if block != "cross":
                page.locator(f".aw-block[data-block={block}]").click()
            page.evaluate("() => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)))")
            want = reference[block][1][0, 2].double().numpy()
            np.testing.assert_allclose(numbers(page, *want.shape)["weights"], want, atol=1e-5, rtol=0, err_msg=block)
            # T5's position bias is drawn apart in the scores stage of its two self-attentions
            assert page.evaluate(f"{ROOT}.model.get('bias') !== null") is (kind == "t5" and block != "cross")
    finally:
        page.context.close()
