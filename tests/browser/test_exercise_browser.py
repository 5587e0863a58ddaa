"""The predict-then-reveal and temperature exercises in a real browser: a guess dragged in the
page reaches Python and spends exactly the whole budget; Reveal shows the real row and the score
Python computes; a bad guess from the page is refused and put back; and an exported page with no
kernel keeps both exercises working, with the scores numpy gives."""

import json
import re

import numpy as np
import pytest
from test_export_browser import open_page

from attnwidget import AttentionWidget, attention

pytestmark = pytest.mark.browser
MODEL = "document.querySelector('.aw-root').attnwidget.model"


FRAMES = "new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(done)))"  # a redraw


def exported(browser, tmp_path, w, name):
    """w as an exported page, opened: (page, problems the page reported)."""
    w.to_html(tmp_path / name)
    return open_page(browser, tmp_path / name)


def page_guess(page):
    return page.evaluate(f"{MODEL}.get('guess')")


def shown_score(page):
    """The score the page shows (its text) and the number it computed (data-score)."""
    result = page.locator(".aw-ex-result")
    text = result.inner_text()
    return float(re.search(r"score (\d\.\d\d)", text).group(1)), float(result.get_attribute("data-score")), text


def assert_row_hidden(page):
    """Before the reveal, the focused row's weights are nowhere on the weights stage."""
    assert page.locator(".aw-root canvas.aw-grid:visible").count() == 0, "the weights matrix must wait for the reveal"
    assert page.locator(".aw-ex-result").inner_text() == ""
    assert all(t == "" for t in page.locator(".aw-token-weight").all_inner_texts()), "no percentages in the token strip"
    assert page.locator(".aw-arcs path").count() == 0, "no arcs"
    assert "hidden until you reveal" in page.locator(".aw-readout").inner_text()
    assert all(t == "" for t in page.locator(".aw-ex-real").all_inner_texts())


def real_percentages(page):
    return [int(re.search(r"\d+", t).group()) for t in page.locator(".aw-ex-real").all_inner_texts()]


@pytest.fixture(scope="module")
def live(open_notebook):
    page, kernel, errors = open_notebook(
        "exercise.ipynb",
        [
            "from attnwidget import AttentionWidget\n"
            "w = AttentionWidget(exercise='predict', focus=5, stage='weights')\nw"
        ],
    )
    page.wait_for_selector(".aw-exercise:not([hidden])")
    yield page, kernel, errors
    kernel.close()
    page.context.close()


def test_a_dragged_guess_reaches_python_and_reveal_shows_the_real_row_and_score(live, artifacts):
    page, kernel, errors = live
    assert_row_hidden(page)
    assert page.locator(".aw-ex-reveal").is_enabled(), "the even split the bars start from is a guess too"
    # drag river's bar to about 60% with real pointer events
    box = page.locator(".aw-ex-track").nth(4).bounding_box()
    y = box["y"] + box["height"] / 2
    page.mouse.move(box["x"] + box["width"] * 0.1, y)
    page.mouse.down()
    page.mouse.move(box["x"] + box["width"] * 0.6, y, steps=8)
    page.mouse.up()
    guess = kernel.wait_for("w.guess", lambda g: g is not None)
    assert guess is not None and len(guess) == 6
    assert abs(sum(guess) - 1) < 1e-6 and min(guess) >= 0
    assert guess[4] == pytest.approx(0.6, abs=0.03)
    assert guess == pytest.approx(page_guess(page), abs=1e-12), "Python has the page's guess"
    assert_row_hidden(page)  # a guess alone shows nothing of the real row

    page.click(".aw-ex-reveal")
    assert kernel.wait_for("w.revealed", lambda r: r is True) is True
    page.wait_for_selector(".aw-ex-result[data-score]")
    weights = np.array(kernel.eval("w.weights[w.focus]"))
    shown = real_percentages(page)
    assert sum(shown) == 100 and np.abs(np.array(shown) - 100 * weights).max() < 1, f"{shown} vs {weights}"
    text_score, page_score, text = shown_score(page)
    score = kernel.eval("w.score")
    assert page_score == pytest.approx(score, abs=1e-6)
    assert text_score == float(f"{score:.2f}") and "half the total difference" in text
    assert page.locator(".aw-root canvas.aw-grid:visible").count() >= 1, "the matrix is back after the reveal"
    page.locator(".aw-root").screenshot(path=str(artifacts / "exercise-predict-revealed.png"))

    # a new temperature from the page is a new try: the guess and the reveal go, in Python and in the page
    slider = page.locator(".aw-slider")
    slider.focus()
    for _ in range(5):
        page.keyboard.press("ArrowLeft")
    assert kernel.wait_for("w.guess", lambda g: g is None) is None
    assert kernel.eval("w.revealed") is False
    page.wait_for_function(f"{MODEL}.get('guess') === null && !{MODEL}.get('revealed')")
    page.wait_for_selector(".aw-ex-result:not([data-score])", state="attached")
    assert_row_hidden(page)
    assert not errors


def test_a_bad_guess_from_the_page_is_refused_and_resynced(live):
    page, kernel, errors = live
    kernel.run("w.guess = [0.1, 0.1, 0.1, 0.1, 0.3, 0.3]")
    page.wait_for_function(f"JSON.stringify({MODEL}.get('guess')) === JSON.stringify([0.1, 0.1, 0.1, 0.1, 0.3, 0.3])")
    # a crafted guess that spends half the budget
    page.evaluate(f"(() => {{ const m = {MODEL}; m.set('guess', [0.5, 0, 0, 0, 0, 0]); m.save_changes(); }})()")
    page.wait_for_function(
        f"JSON.stringify({MODEL}.get('guess')) === JSON.stringify([0.1, 0.1, 0.1, 0.1, 0.3, 0.3])", timeout=10_000
    )
    assert kernel.eval("w.guess") == [0.1, 0.1, 0.1, 0.1, 0.3, 0.3]
    assert [page.locator(".aw-ex-input").nth(j).input_value() for j in range(6)] == ["10", "10", "10", "10", "30", "30"]


def test_in_jupyterlab_enter_applies_a_typed_share_and_a_reply_never_merges_into_the_box_being_typed(live):
    page, kernel, errors = live
    kernel.run("w.guess = [0.1, 0.1, 0.1, 0.1, 0.3, 0.3]")
    page.wait_for_function(f"JSON.stringify({MODEL}.get('guess')) === JSON.stringify([0.1, 0.1, 0.1, 0.1, 0.3, 0.3])")
    box = page.locator(".aw-ex-input").nth(2)
    box.fill("")
    box.type("40")
    box.press("Enter")  # applied on Enter, the box still focused
    assert kernel.wait_for("w.guess", lambda g: g is not None and g[2] == pytest.approx(0.4)) is not None
    other = page.locator(".aw-ex-input").nth(3)
    other.fill("")
    other.type("4")  # the learner is typing here when the kernel's reply to something else arrives
    kernel.run("w.guess = [0.2, 0.1, 0.2, 0.1, 0.2, 0.2]")
    page.wait_for_function(f"{MODEL}.get('guess')[0] === 0.2")
    page.evaluate(FRAMES)
    assert other.input_value() == "4"  # not overwritten by the reply
    other.type("5")
    assert other.input_value() == "45"
    other.press("Enter")
    assert kernel.wait_for("w.guess", lambda g: g[3] == pytest.approx(0.45)) is not None
    assert not errors


def test_exported_predict_page_types_a_guess_and_scores_it_with_no_kernel(browser, tmp_path, artifacts):
    w = AttentionWidget(exercise="predict", focus=5, stage="weights", temperature=0.7)
    page, problems = exported(browser, tmp_path, w, "predict.html")
    page.wait_for_selector(".aw-exercise:not([hidden])")
    assert_row_hidden(page)
    inputs = page.locator(".aw-ex-input")
    inputs.nth(4).fill("60")
    inputs.nth(4).press("Enter")
    page.evaluate(FRAMES)  # the inputs redrawn with the first guess before the second is typed
    inputs.nth(5).fill("30")
    inputs.nth(5).press("Enter")
    guess = page_guess(page)
    assert guess is not None and abs(sum(guess) - 1) < 1e-12 and min(guess) >= 0
    # what the learner typed is held (river stays 60, not 46): the four untyped make room
    assert guess[4] == pytest.approx(0.6, abs=1e-12) and guess[5] == pytest.approx(0.3, abs=1e-12)
    assert guess[:4] == pytest.approx([0.025] * 4, abs=1e-12)
    assert [int(inputs.nth(j).input_value()) for j in range(6)][4:] == [60, 30]
    assert_row_hidden(page)
    # the blend is the row times the values: it waits for the reveal too, and the exercise goes with it
    page.click(".aw-stage[data-stage=blend]")
    page.wait_for_selector(".aw-root[data-stage=blend]")
    assert_row_hidden(page)
    assert (
        page.locator(".aw-blend:visible, .aw-panel:not([hidden]) svg").count() == 0
        and page.locator(".aw-exercise").is_visible()
    )
    page.click(".aw-stage[data-stage=weights]")
    page.click(".aw-ex-reveal")
    page.wait_for_selector(".aw-ex-result[data-score]")
    expected = 1 - 0.5 * np.abs(np.array(guess) - w.weights[5]).sum()
    text_score, page_score, _ = shown_score(page)
    assert page_score == pytest.approx(expected, abs=1e-6) and text_score == float(f"{expected:.2f}")
    shown = real_percentages(page)
    assert np.abs(np.array(shown) - 100 * w.weights[5]).max() < 1
    # Python agrees, for the same guess
    w.guess = guess
    w.revealed = True
    assert w.score == pytest.approx(page_score, abs=1e-6)
    page.locator(".aw-root").screenshot(path=str(artifacts / "exercise-predict-export.png"))
    # no kernel, and still Python's rule: a new focus is a new try
    page.locator(".aw-token", has_text="river").click()
    page.wait_for_function(f"{MODEL}.get('guess') === null && {MODEL}.get('revealed') === false")
    page.wait_for_selector(".aw-ex-result:not([data-score])", state="attached")
    assert page.locator(".aw-ex-result").inner_text() == ""
    assert not problems


def test_exported_temperature_page_reveals_the_effective_tokens_reached(browser, tmp_path):
    w = AttentionWidget(exercise="temperature", goal=2.0, focus=5, stage="weights")
    page, problems = exported(browser, tmp_path, w, "temperature.html")
    page.wait_for_selector(".aw-exercise:not([hidden])")
    prompt = page.locator(".aw-ex-prompt").inner_text()
    assert "bank's row spends its budget on about 2 tokens" in prompt
    assert "effective tokens" not in page.locator(".aw-readout").inner_text(), "the number reached waits for the reveal"
    slider = page.locator(".aw-slider")
    slider.focus()
    for _ in range(25):
        page.keyboard.press("ArrowLeft")
    page.evaluate("new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(done)))")
    t = page.evaluate(f"{MODEL}.get('temperature')")
    assert t < 1
    page.click(".aw-ex-reveal")
    page.wait_for_selector(".aw-ex-result[data-score]")
    row = attention(w.q, w.k, w.v, temperature=t).weights[5]
    reached = float(np.exp(-(row[row > 0] * np.log(row[row > 0])).sum()))
    result = page.locator(".aw-ex-result")
    assert float(result.get_attribute("data-reached")) == pytest.approx(reached, abs=1e-6)
    assert f"effective tokens reached: {reached:.2f} (goal 2)" in result.inner_text()
    # which way to go next, and why, said in the page
    advice = (
        "lower T: a colder row concentrates its budget"
        if reached > 2.1
        else "raise T: a warmer row spreads its budget"
        if reached < 1.9
        else "on the goal"
    )
    assert advice in result.inner_text(), result.inner_text()
    score = max(0.0, 1 - abs(reached - 2) / 2)
    assert float(result.get_attribute("data-score")) == pytest.approx(score, abs=1e-6)
    # Python's own score, for the same state
    w.temperature = t
    w.revealed = True
    assert w.score == pytest.approx(score, abs=1e-6)
    assert f"{reached:.2f} effective tokens" in page.locator(".aw-readout").inner_text()
    # a new temperature is a new try, with no kernel as with one
    slider.focus()
    page.keyboard.press("ArrowRight")
    page.wait_for_selector(".aw-ex-result:not([data-score])", state="attached")
    assert page.evaluate(f"{MODEL}.get('revealed')") is False
    assert json.dumps(problems) == "[]"


def test_live_temperature_reveal_sent_with_the_sliders_last_value(open_notebook):
    page, kernel, errors = open_notebook(
        "temperature-exercise.ipynb",
        [
            "from attnwidget import AttentionWidget\n"
            "t = AttentionWidget(exercise='temperature', goal=2, focus=5, stage='weights')\nt"
        ],
    )
    try:
        page.wait_for_selector(".aw-exercise:not([hidden])")
        # the slider's value still waiting to be sent (as mid-drag), then Reveal: one message with both
        page.evaluate(f"{MODEL}.set('temperature', 0.6)")
        page.click(".aw-ex-reveal")
        assert kernel.wait_for("t.revealed", lambda r: r is True) is True
        assert kernel.eval("t.temperature") == 0.6
        page.wait_for_selector(".aw-ex-result[data-score]")
        page.wait_for_timeout(300)  # Python's answer, had it put the reveal back
        assert page.evaluate(f"{MODEL}.get('revealed')") is True
        assert float(page.locator(".aw-ex-result").get_attribute("data-score")) == pytest.approx(
            kernel.eval("t.score"), abs=1e-6
        )
        assert not errors
    finally:
        kernel.close()
        page.context.close()


def test_an_even_split_can_be_revealed_as_a_guess(browser, tmp_path):
    w = AttentionWidget(exercise="predict", focus=5, stage="weights")
    page, problems = exported(browser, tmp_path, w, "even.html")
    page.wait_for_selector(".aw-exercise:not([hidden])")
    assert page_guess(page) is None and page.locator(".aw-ex-reveal").is_enabled()
    page.click(".aw-ex-reveal")
    page.wait_for_selector(".aw-ex-result[data-score]")
    assert page_guess(page) == pytest.approx([1 / 6] * 6, abs=1e-12)
    w.guess, w.revealed = [1 / 6] * 6, True
    assert shown_score(page)[1] == pytest.approx(w.score, abs=1e-6)
    assert not problems
    page.context.close()


@pytest.mark.parametrize("temperature, way", [(0.3, "raise T"), (4.0, "lower T")])
def test_the_temperature_feedback_says_which_way_to_move(browser, tmp_path, temperature, way):
    w = AttentionWidget(exercise="temperature", goal=2.0, focus=5, stage="weights", temperature=temperature)
    page, problems = exported(browser, tmp_path, w, "way.html")
    page.click(".aw-ex-reveal")
    page.wait_for_selector(".aw-ex-result[data-score]")
    text = page.locator(".aw-ex-result").inner_text()
    assert way in text and ("concentrates" in text if way == "lower T" else "spreads" in text), text
    assert not problems
    page.context.close()


@pytest.mark.parametrize("hint", [False, True])
def test_before_the_reveal_the_scores_are_a_hint_only_when_the_teacher_gives_it(browser, tmp_path, hint):
    w = AttentionWidget(
        "I sat on the river bank", exercise="predict", focus=5, stage="scores", scores_hint=hint
    )  # 2-D: a query dial
    page, problems = exported(browser, tmp_path, w, f"hint-{hint}.html")
    page.wait_for_selector(".aw-root[data-stage=scores]")
    visible = (
        "() => [...document.querySelectorAll('.aw-panel:not([hidden]) canvas.aw-grid')].filter((c) => "
        "c.getClientRects().length).length"
    )
    readout = page.locator(".aw-readout").inner_text()
    if hint:
        assert page.evaluate(visible) > 0 and "bank scores" in readout, readout
    else:
        assert page.evaluate(visible) == 0 and "scores stay hidden" in readout and "river" not in readout, readout
    # the matrix is not there to click: the caption does not offer a cell's arithmetic
    for stage in ("scores", "weights"):
        page.click(f".aw-stage[data-stage={stage}]")
        page.wait_for_selector(f".aw-root[data-stage={stage}]")
        assert "Click a cell" not in page.locator(".aw-caption").inner_text()
    # the query dial's table holds the weights: it waits for the reveal too
    page.click(".aw-stage[data-stage=qk]")
    page.wait_for_selector(".aw-root[data-stage=qk]")
    assert page.locator(".aw-dial:visible").count() == 0
    page.click(".aw-stage[data-stage=weights]")
    page.click(".aw-ex-reveal")
    page.wait_for_selector(".aw-ex-result[data-score]")
    page.click(".aw-stage[data-stage=qk]")
    page.wait_for_selector(".aw-root[data-stage=qk]")
    assert page.locator(".aw-dial:visible").count() == 1
    page.click(".aw-stage[data-stage=scores]")
    page.wait_for_selector(".aw-root[data-stage=scores]")
    assert page.evaluate(visible) > 0 and "Click a cell" in page.locator(".aw-caption").inner_text()
    assert not problems, problems
    page.context.close()


def test_a_new_try_holds_nothing_and_a_guess_typed_just_before_reveal_is_kept(browser, tmp_path):
    w = AttentionWidget(exercise="predict", focus=5, stage="weights")
    page, problems = exported(browser, tmp_path, w, "tries.html")
    page.wait_for_selector(".aw-exercise:not([hidden])")
    inputs = page.locator(".aw-ex-input")
    inputs.nth(4).fill("60")
    inputs.nth(4).press("Enter")
    page.evaluate(f"{MODEL}.propose({{temperature: 0.7}})")  # a new try: the rules clear the guess
    page.wait_for_function(f"{MODEL}.get('guess') === null")
    page.evaluate(FRAMES)  # and the page redraws the inputs empty
    inputs.nth(5).fill("30")
    inputs.nth(5).press("Enter")
    # river was typed in the last try, not this one: it makes room like every other
    assert page_guess(page) == pytest.approx([0.14] * 5 + [0.3], abs=1e-12)
    # a percentage typed and Reveal pressed before the page redraws: the typed guess is the one revealed
    page.evaluate(f"{MODEL}.propose({{temperature: 0.8}})")
    page.wait_for_function(f"{MODEL}.get('guess') === null")
    page.evaluate(FRAMES)
    page.evaluate("""() => { const i = document.querySelectorAll('.aw-ex-input')[4]; i.value = '50';
        i.dispatchEvent(new Event('change', { bubbles: true })); document.querySelector('.aw-ex-reveal').click(); }""")
    page.wait_for_function(f"{MODEL}.get('revealed') === true")
    assert page_guess(page)[4] == pytest.approx(0.5, abs=1e-12)
    assert not problems, problems
    page.context.close()
