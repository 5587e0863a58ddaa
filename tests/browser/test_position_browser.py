"""Where position enters a model's attention, named in its page beside the model's name, in the
words Python gives (position_about); a widget of your own arrays says nothing of it."""

import numpy as np
import pytest
from test_interface import model_for, tokenizer  # (a fixture)

from attnwidget import AttentionWidget

pytestmark = pytest.mark.browser


@pytest.mark.parametrize("family", ["gpt_neox", "gpt2"])
def test_a_models_page_names_where_position_enters(browser, tmp_path, tokenizer, family):
    w = AttentionWidget.from_transformers(model_for(family, tokenizer), tokenizer, "I sat on the riverbank.")
    own = AttentionWidget()
    pages = []
    try:
        for widget, name in ((w, "model.html"), (own, "own.html")):
            widget.to_html(tmp_path / name)
            page = browser.new_context(bypass_csp=True).new_page()
            pages.append(page)
            page.goto((tmp_path / name).as_uri())
            page.wait_for_selector(".aw-root")
        shown = pages[0].locator(".aw-position")
        assert shown.is_visible() and shown.text_content() == w.position_about
        assert w.position_about.startswith({"gpt_neox": "RoPE, base 10,000, 25% of", "gpt2": "learned"}[family])
        assert not pages[1].locator(".aw-position").is_visible()
    finally:
        for page in pages:
            page.context.close()


def _lab_page(browser, w, path, width=1100):
    w.to_html(path)
    page = browser.new_context(viewport={"width": width, "height": 1000}, bypass_csp=True).new_page()
    page.goto(path.as_uri())
    page.wait_for_selector(".aw-root")
    return page


NUMBERS = "document.querySelector('.aw-root').attnwidget.numbers()"
SET = """([name, value]) => {
  const m = document.querySelector('.aw-root').attnwidget.model;
  m.set(name, value);
  m.save_changes();
}"""


@pytest.mark.parametrize(
    "kw",
    [
        dict(position="rope"),
        dict(position="rope", rope_base=37.5, causal=True, step=4),
        dict(position="alibi"),
        dict(position="alibi", alibi_slopes=[0.7, 0.0, 2.5], causal=True),
    ],
)
def test_the_page_computes_what_python_computes_at_every_head(browser, tmp_path, kw):
    rng = np.random.default_rng(len(kw))
    q, k, v = (rng.normal(size=(3, 7, 6)) for _ in range(3))
    bias = rng.normal(size=(7, 7)) if kw.get("causal") else None  # a bias given besides ALiBi's
    w = AttentionWidget(tokens=list("abcdefg"), q=q, k=k, v=v, bias=bias, stage="weights", **kw)
    page = _lab_page(browser, w, tmp_path / "lab.html")
    try:
        for h in range(3):
            page.evaluate(SET, ["head", h])
            w.head = h
            got = page.evaluate(NUMBERS)
            n = w.scores.shape[0]
            np.testing.assert_allclose(np.reshape(got["scores"], (n, -1)), w.scores, rtol=0, atol=1e-12)
            np.testing.assert_allclose(np.reshape(got["weights"], (n, -1)), w.weights, rtol=0, atol=1e-12)
    finally:
        page.context.close()


def test_choosing_rope_in_the_page_turns_the_arrows_and_says_so(browser, tmp_path):
    w = AttentionWidget("I sat by the river bank", stage="qk", focus=5)  # two-number vectors: the dial
    page = _lab_page(browser, w, tmp_path / "rope.html")
    try:
        root = page.locator(".aw-root")
        assert not root.locator(".aw-query-given").count()
        root.locator(".aw-position-select").select_option("rope")
        page.wait_for_selector(".aw-query-given")
        assert page.evaluate("document.querySelector('.aw-root').attnwidget.model.get('position')") == "rope"
        assert "bank's query turned 5 × θ" in root.locator(".aw-caption").inner_text()
        assert root.locator(".aw-query-label").text_content() == "bank's query turned 5 × θ"
        assert root.locator(".aw-turn").count() == 1
        w.position = "rope"
        np.testing.assert_allclose(np.reshape(page.evaluate(NUMBERS)["weights"], (6, 6)), w.weights, atol=1e-12)
        # dragging turns the query as the scores take it: the arrow stays under the pointer
        handle = root.locator(".aw-dial-handle").bounding_box()
        x, y = handle["x"] + handle["width"] / 2, handle["y"] + handle["height"] / 2
        page.mouse.move(x, y)
        page.mouse.down()
        page.mouse.move(x - 30, y + 20, steps=4)
        page.mouse.up()
        moved = root.locator(".aw-dial-handle").bounding_box()
        assert (
            abs(moved["x"] + moved["width"] / 2 - (x - 30)) < 1.5
            and abs(moved["y"] + moved["height"] / 2 - (y + 20)) < 1.5
        )
        # a cell's arithmetic says its dot product is of the turned query and key
        page.evaluate(SET, ["stage", "weights"])
        page.evaluate(SET, ["cell", [5, 4]])
        page.wait_for_selector(".aw-cell:not([hidden])")
        assert "q(bank) · k(river), both turned by RoPE =" in root.locator(".aw-cell").inner_text()
        page.evaluate(SET, ["cell", None])
        page.evaluate(SET, ["stage", "qk"])
        # ALiBi: the ramp under the scores, named with its slope
        root.locator(".aw-position-select").select_option("alibi")
        page.evaluate(SET, ["stage", "scores"])
        page.wait_for_function("document.querySelector('.aw-caption').textContent.includes('ALiBi: each score gets')")
        captions = root.locator(".aw-panel:not([hidden]) figcaption").all_text_contents()
        assert "ALiBi's ramp: −m·|i − j|, m = 0.00391 (added to scale · q · k)" in captions
        page.evaluate(SET, ["cell", [5, 1]])
        page.wait_for_selector(".aw-cell:not([hidden])")
        assert "+ ALiBi's −m·|i − j| −0.016 = score" in root.locator(".aw-cell").inner_text()
    finally:
        page.context.close()


def test_a_models_page_offers_no_position_of_its_own(browser, tmp_path, tokenizer):
    w = AttentionWidget.from_transformers(model_for("gpt2", tokenizer), tokenizer, "I sat on the riverbank.")
    page = _lab_page(browser, w, tmp_path / "model.html")
    try:
        assert not page.locator(".aw-position-select").is_visible()
        assert page.locator(".aw-position").is_visible()
    finally:
        page.context.close()


def test_turning_the_query_while_a_text_is_written_keeps_every_row(browser, tmp_path):
    w = AttentionWidget("I sat by the river bank", stage="qk", step=3, position="rope")
    page = _lab_page(browser, w, tmp_path / "writing.html")
    rows = """() => { const q = document.querySelector('.aw-root').attnwidget.model.get('q');
      const T = q.dtype === 'float32' ? Float32Array : Float64Array;
      const data = new T(q.view.buffer, q.view.byteOffset, q.view.byteLength / T.BYTES_PER_ELEMENT);
      return [q.shape, Array.from(data)]; }"""
    try:
        shape, before = page.evaluate(rows)
        handle = page.locator(".aw-dial-handle").bounding_box()
        x, y = handle["x"] + handle["width"] / 2, handle["y"] + handle["height"] / 2
        page.mouse.move(x, y)
        page.mouse.down()
        page.mouse.move(x + 25, y - 15, steps=3)
        page.mouse.up()
        after_shape, after = page.evaluate(rows)
        assert shape == after_shape == [6, 2]  # every token's query, as Python has them
        changed = [i for i in range(6) if before[2 * i : 2 * i + 2] != after[2 * i : 2 * i + 2]]
        assert changed == [2]  # the focused (last written) token's query turned, the rest as they were
        assert page.evaluate("document.querySelector('.aw-root').attnwidget.model.get('step')") == 3
    finally:
        page.context.close()


def test_in_jupyterlab_the_pages_choice_of_position_is_the_kernels(open_notebook):
    setup = """
from attnwidget import AttentionWidget
w = AttentionWidget("I sat by the river bank", stage="weights", focus=5)
w
"""
    page, kernel, errors = open_notebook("position.ipynb", [setup])
    try:
        page.locator(".aw-position-select").select_option("alibi")
        assert kernel.wait_for("w.position", lambda p: p == "alibi") == "alibi"
        kernel.eval("setattr(w, 'alibi_slopes', [0.5])")
        page.wait_for_function("document.querySelector('.aw-root').attnwidget.model.get('alibi_slopes')?.[0] === 0.5")
        want = np.array(kernel.eval("w.weights.tolist()"))
        np.testing.assert_allclose(np.reshape(page.evaluate(NUMBERS)["weights"], (6, 6)), want, atol=1e-12)
        assert errors == []
    finally:
        page.context.close()
