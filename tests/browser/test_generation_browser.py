"""Generation, one token at a time (`step`), in a real JupyterLab and in an exported page: the
page's "next token" reaches Python, Python's step reaches the page, each step forward computes
only the new token's row, and every number equals numpy's for the tokens written so far."""

import numpy as np
import pytest
from test_export_browser import open_page

from attnwidget import AttentionWidget, attention
from attnwidget.rules import GENERATION_IS_CAUSAL, READS_BOTH_WAYS

pytestmark = pytest.mark.browser

ROOT = "document.querySelector('.aw-root')"
TOKENS = ["She", "sat", "by", "the", "river", "bank"]


def numbers(page):
    return page.evaluate(f"{ROOT}.attnwidget.numbers()")


def work(page):
    return page.evaluate(f"{ROOT}.attnwidget.work()")


def wait_for_tokens(page, count):
    page.wait_for_function(f"document.querySelectorAll('.aw-root .aw-token-text').length === {count}")
    page.evaluate(
        "new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(done)))"
    )  # the redraw after it


def prefix_weights(w, s):
    """numpy's weights for the first s tokens, written so far: the causal rule on."""
    return attention(w.q[:s], w.k[:s], w.v[:s], temperature=w.temperature, causal=True, scale=w.scale).weights


@pytest.fixture(scope="module")
def gen_nb(open_notebook):
    setup = (
        "from attnwidget import AttentionWidget\n"
        'w = AttentionWidget("She sat by the river bank", step=2, stage="weights")\nw'
    )
    page, kernel, errors = open_notebook("generation.ipynb", [setup])
    yield page, kernel, errors
    kernel.close()
    page.context.close()


def test_next_token_in_the_page_reaches_python_and_computes_one_row(gen_nb, artifacts):
    page, kernel, errors = gen_nb
    wait_for_tokens(page, 2)
    root = page.locator(".aw-root")
    assert "step 2 of 6" in root.locator(".aw-gen-where").inner_text()
    # the page's numbers (scores, weights and outputs, all computed) are Python's for the two tokens written
    got, want = np.array(numbers(page)["weights"]), np.array(kernel.eval("w.weights"))
    assert want.shape == (2, 2) and np.abs(got - want.ravel()).max() <= 1e-6
    root.locator(".aw-gen-next").click()
    assert kernel.wait_for("[w.step, w.focus, int(w.causal)]", lambda v: v == [3, 2, 1]) == [3, 2, 1]
    wait_for_tokens(page, 3)
    assert root.locator(".aw-token-text").all_inner_texts() == TOKENS[:3]
    got, want = np.array(numbers(page)["weights"]), np.array(kernel.eval("w.weights"))
    assert want.shape == (3, 3) and got.shape == (9,)
    assert np.abs(got - want.ravel()).max() <= 1e-6
    assert work(page) == {"scores": 1, "weights": 1, "output": 1}  # the new row only
    # the K and V cache: one column per token written, the newest marked new
    caches = root.locator(".aw-gen canvas.aw-grid")
    assert caches.count() == 2 and "the last, by, is new" in caches.first.get_attribute("aria-label")
    assert root.get_attribute("data-written") == "3"
    root.screenshot(path=str(artifacts / "generation-lab.png"))
    assert not errors, errors


def test_python_step_reaches_the_page(gen_nb):
    page, kernel, errors = gen_nb
    kernel.run("w.step = 5")
    wait_for_tokens(page, 5)
    root = page.locator(".aw-root")
    assert root.locator(".aw-token-text").all_inner_texts() == TOKENS[:5]
    assert "step 5 of 6" in root.locator(".aw-gen-where").inner_text()
    page.wait_for_selector(".aw-token[data-index='4'][aria-pressed=true]")  # Python moved the focus to the new row
    got, want = np.array(numbers(page)["weights"]), np.array(kernel.eval("w.weights"))
    assert want.shape == (5, 5) and np.abs(got - want.ravel()).max() <= 1e-6
    # the last token written: the whole matrix, the cache still shown with its new column
    kernel.run("w.step = 6")
    wait_for_tokens(page, 6)
    assert page.locator(".aw-gen").is_visible() and root.get_attribute("data-written") == "6"
    assert "all 6 tokens written" in root.locator(".aw-gen-where").inner_text()
    # the causal checkbox is the learner's again, and turning it off ends the writing
    assert root.locator(".aw-causal").is_enabled()
    kernel.run("w.causal = False")
    page.wait_for_function(f"{ROOT}.dataset.written === '0'")
    assert page.locator(".aw-gen").is_hidden()
    kernel.run("w.causal = True")
    assert not errors, errors


def test_stepping_works_in_an_exported_page_with_no_kernel(browser, tmp_path, artifacts):
    w = AttentionWidget("She sat by the river bank", step=1, stage="weights")
    path = tmp_path / "generation.html"
    w.to_html(path)
    page, problems = open_page(browser, path)
    root = page.locator(".aw-root")
    wait_for_tokens(page, 1)
    assert numbers(page)["weights"] == [1.0]  # one token reads itself (and every number is computed, outputs too)
    page.evaluate("document.querySelector('.aw-token').dataset.mark = 'first'")
    for s in range(2, 7):
        root.locator(".aw-gen-next").click()
        wait_for_tokens(page, s)
        assert page.evaluate("document.querySelector('.aw-token').dataset.mark") == "first", (
            "the strip keeps the tokens written"
        )
        state = page.evaluate(
            f"(({{model: m}}) => [m.get('step'), m.get('focus'), m.get('causal')])({ROOT}.attnwidget)"
        )
        assert state == [s, s - 1, True]
        got = np.array(numbers(page)["weights"])
        assert np.abs(got - prefix_weights(w, s).ravel()).max() <= 1e-6, f"step {s}"
        assert work(page) == {"scores": 1, "weights": 1, "output": 1}, f"step {s}: one new row"
        if s == 4:
            root.screenshot(path=str(artifacts / "generation-export.png"))
            # writing is causal: the checkbox waits, and a page change that turns it off is refused,
            # as Python refuses it
            assert root.locator(".aw-causal").is_disabled()
            said = page.evaluate(
                f"(() => {{ try {{ {ROOT}.attnwidget.model.set('causal', false); }} "
                "catch (e) { return e.message; } })()"
            )
            assert said == GENERATION_IS_CAUSAL  # Python's answer, word for word
            assert page.evaluate(f"{ROOT}.attnwidget.model.get('causal')") is True
    # the last token written: nothing left to write, and its step still shown with the cache
    assert page.locator(".aw-gen-next").is_disabled() and page.locator(".aw-gen").is_visible()
    # back a step: the later token is gone again, and the causal rule stays on
    root.locator(".aw-gen-prev").click()
    wait_for_tokens(page, 5)
    assert np.abs(np.array(numbers(page)["weights"]) - prefix_weights(w, 5).ravel()).max() <= 1e-6
    assert not problems, problems
    page.context.close()


def test_an_exported_page_without_the_causal_rule_offers_to_write_token_by_token(browser, tmp_path):
    path = tmp_path / "open.html"
    AttentionWidget(stage="scores").to_html(path)
    page, problems = open_page(browser, path)
    root = page.locator(".aw-root")
    assert root.locator(".aw-gen-steps").is_hidden()
    root.locator(".aw-gen-write").click()
    wait_for_tokens(page, 1)
    assert page.evaluate(
        f"(({{model: m}}) => [m.get('step'), m.get('focus'), m.get('causal')])({ROOT}.attnwidget)"
    ) == [1, 0, True]
    assert root.locator(".aw-causal").is_checked() and root.locator(".aw-gen-steps").is_visible()
    assert not problems, problems
    page.context.close()


@pytest.mark.parametrize("step, focus", [(2, None), (None, None), (4, 3)])
def test_a_new_sentence_in_an_exported_page_keeps_pythons_step(browser, tmp_path, step, focus):
    # Python's rule: a text being written stays at its step; one written in full stays so; the
    # focus stays among the tokens written (at step 4 "the" is focused, and is token 5 of the next)
    w = AttentionWidget(
        ["I sat on the river bank and read", "I put my money in the bank and left"],
        step=step,
        focus=focus,
        causal=True,
        stage="weights",
    )
    path = tmp_path / "two.html"
    w.to_html(path)
    page, problems = open_page(browser, path)
    page.locator(".aw-sentence[data-index='1']").click()
    page.wait_for_function("document.querySelector('.aw-root').attnwidget.model.get('sentence_index') === 1")
    w.sentence_index = 1  # Python's answer to the same click
    wait_for_tokens(page, len(w.weights))
    assert page.evaluate(f"[{ROOT}.attnwidget.model.get('step'), {ROOT}.attnwidget.model.get('focus')]") == [
        w.step,
        w.focus,
    ]
    assert np.abs(np.array(numbers(page)["weights"]) - w.weights.ravel()).max() <= 1e-6
    assert not problems, problems
    page.context.close()


PIXEL = """([sel, i, j]) => {
  const c = [...document.querySelectorAll(sel)].filter((e) => e.getClientRects().length)[0], d = c.dataset;
  const dpr = c.width / c.getBoundingClientRect().width, x = (+d.left + (j + 0.5) * +d.cellWidth) * dpr, \
y = (+d.top + (i + 0.5) * +d.cellHeight) * dpr;
  // a cell's colour away from its number: a few pixels in from its corner
  return Array.from(c.getContext('2d').getImageData(Math.round((+d.left + j * +d.cellWidth + 3) * dpr), \
Math.round((+d.top + i * +d.cellHeight + 3) * dpr), 1, 1).data);
}"""


def test_a_cached_number_keeps_its_colour_while_writing(browser, tmp_path):
    rng = np.random.default_rng(4)
    k = rng.normal(size=(6, 2)) * 0.3
    k[5] = k[1]  # the last token's key is the second's: the same number, the same colour
    k[4] = [3.0, -3.0]  # a large key arrives at step 5: the cached colours must not fade
    w = AttentionWidget(tokens=TOKENS, q=rng.normal(size=(6, 2)), k=k, v=k.copy(), step=2, stage="weights")
    path = tmp_path / "cache.html"
    w.to_html(path)
    page, problems = open_page(browser, path)
    root = page.locator(".aw-root")
    cache, weights = ".aw-gen canvas.aw-grid", ".aw-panel:not([hidden]) canvas.aw-grid"
    wait_for_tokens(page, 2)
    first = page.evaluate(PIXEL, [cache, 0, 1])  # the K cache: row = dimension 0, column = token 1
    row0 = page.evaluate(PIXEL, [weights, 0, 0])  # the first row's weight: a cached row from step 2 on
    for s in range(3, 7):
        root.locator(".aw-gen-next").click()
        wait_for_tokens(page, s)
        assert page.evaluate(PIXEL, [cache, 0, 1]) == first, f"step {s}: a cached key changed colour"
        assert page.evaluate(PIXEL, [weights, 0, 0]) == row0, f"step {s}: a cached weight row changed colour"
    # the new column (token 5) holds token 1's key: drawn in the same colour as the cached one
    assert page.evaluate(PIXEL, [cache, 0, 5]) == first
    # and the page says what the marks on the cache mean
    assert "cached" in root.locator(".aw-gen").inner_text() and "new" in root.locator(".aw-gen").inner_text()
    assert not problems, problems
    page.context.close()


def test_after_writing_the_page_says_the_rows_are_causal_now(browser, tmp_path):
    path = tmp_path / "lab.html"
    AttentionWidget(stage="weights", focus=5).to_html(path)  # the default lab: not causal
    page, problems = open_page(browser, path)
    root = page.locator(".aw-root")
    note = root.locator(".aw-gen-causal-note")
    assert note.count() == 0 or not note.is_visible()
    root.locator(".aw-gen-write").click()
    wait_for_tokens(page, 1)
    root.locator(".aw-gen-all").click()
    wait_for_tokens(page, 6)
    assert page.evaluate(f"{ROOT}.attnwidget.model.get('causal')") is True
    assert note.is_visible() and "causal" in note.inner_text() and "Untick" in note.inner_text(), note.inner_text()
    root.locator(".aw-causal").uncheck()
    page.wait_for_function(f"{ROOT}.attnwidget.model.get('causal') === false")
    note.wait_for(state="hidden", timeout=2000)  # at the redraw, the next frame
    assert not problems, problems
    page.context.close()


def test_a_models_text_written_token_by_token_in_jupyterlab_shows_its_cache(open_notebook):
    # a live page holds the layer shown alone: the cache's colour scale comes from it
    setup = """
import numpy as np
from attnwidget import AttentionWidget
from attnwidget.integrations.common import ModelAttention
rng = np.random.default_rng(3)
found = ModelAttention(tokens=["She", "sat", "by", "the", "river", "bank"], causal=True, scale=None, \
architecture="fake", model_name="fake",
                       layers=[tuple(rng.normal(size=(2, 6, 4)) for _ in range(3)) for _ in range(3)], prompt_length=3)
g = AttentionWidget._from_model(found, 1, 0, {"step": 3, "stage": "qk"})
g
"""
    page, kernel, errors = open_notebook("model-generation.ipynb", [setup])
    try:
        page.wait_for_selector(".aw-gen canvas.aw-grid", timeout=30_000)
        page.locator(".aw-gen-next").click()
        assert kernel.wait_for("g.step", lambda s: s == 4) == 4
        wait_for_tokens(page, 4)
        np.testing.assert_allclose(
            np.reshape(numbers(page)["scores"], (4, 4)), np.array(kernel.eval("g.scores")), atol=1e-12
        )
        assert errors == []
    finally:
        kernel.close()
        page.context.close()


@pytest.mark.parametrize("causal", [False, True])
def test_a_models_page_offers_writing_token_by_token_only_where_its_model_reads_causally(browser, tmp_path, causal):
    from test_step import fake_model

    w = AttentionWidget._from_model(fake_model(causal=causal), 1, 0, {"stage": "weights"})
    path = tmp_path / "model.html"
    w.to_html(path)
    page, problems = open_page(browser, path)
    root = page.locator(".aw-root")
    wait_for_tokens(page, 6)
    control = root.locator(".aw-gen-control")  # "write token by token", or with the causal rule on, the stepper
    assert control.is_visible() is causal
    if not causal:
        root.locator(".aw-causal").check()  # the causal rule on by hand: still not the model's own prefix
        page.wait_for_function(f"{ROOT}.attnwidget.model.get('causal') === true")
        page.evaluate("new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(done)))")
        assert control.is_hidden()
    said = page.evaluate(
        f"(() => {{ try {{ {ROOT}.attnwidget.model.set('step', 2); }} catch (e) {{ return e.message; }} }})()"
    )
    assert said == (None if causal else READS_BOTH_WAYS)  # Python's answer, word for word
    assert page.evaluate(f"{ROOT}.attnwidget.model.get('step')") == (2 if causal else 6)
    assert not problems, problems
    page.context.close()


def test_vectors_of_ones_own_on_an_encoders_page_are_written_token_by_token(browser, tmp_path):
    """Set on a model that reads both ways, vectors of one's own are the lab's exercise: offered as in Python."""
    from test_step import fake_model

    w = AttentionWidget._from_model(fake_model(causal=False), 1, 0, {"stage": "weights"})
    rng = np.random.default_rng(1)
    w.set_vectors(tokens=list("abcd"), q=rng.normal(size=(4, 3)), k=rng.normal(size=(4, 3)), v=rng.normal(size=(4, 2)))
    path = tmp_path / "own.html"
    w.to_html(path)
    page, problems = open_page(browser, path)
    wait_for_tokens(page, 4)
    assert page.locator(".aw-root .aw-gen-control").is_visible()
    assert not problems, problems
    page.context.close()
