"""Predict-then-reveal and temperature exercises: the guess, the reveal and the score in Python."""

import numpy as np
import pytest
import traitlets
from hypothesis import given, settings
from hypothesis import strategies as st

from attnwidget import AttentionWidget


def lab(**kwargs):
    return AttentionWidget(exercise="predict", focus=5, **kwargs)


@settings(max_examples=60, deadline=None)
@given(raw=st.lists(st.floats(0, 10), min_size=6, max_size=6).filter(lambda r: sum(r) > 1e-3), t=st.floats(0.2, 4))
def test_the_score_is_one_minus_half_the_total_difference(raw, t):
    w = lab(temperature=t)
    guess = np.array(raw) / np.sum(raw)
    guess[-1] = 1 - guess[:-1].sum()  # exactly the budget
    w.guess = list(np.clip(guess, 0, None))
    assert w.score is None  # nothing shown before the reveal
    w.revealed = True
    expected = 1 - 0.5 * np.abs(np.array(w.guess) - w.weights[5]).sum()
    assert w.score == pytest.approx(expected, abs=1e-12)
    assert 0 <= w.score <= 1


def test_the_real_row_scores_one_and_a_disjoint_guess_zero():
    w = lab(temperature=0.1)  # bank reads river almost alone
    w.guess = list(w.weights[5])
    w.revealed = True
    assert w.score == pytest.approx(1)
    w.guess = [1.0, 0, 0, 0, 0, 0]  # all on "She": almost nothing in common
    assert w.revealed is False, "a new guess after a reveal is a new try"
    w.revealed = True
    assert w.score == pytest.approx(w.weights[5, 0], abs=1e-12)


@pytest.mark.parametrize(
    "change", [{"focus": 4}, {"temperature": 0.5}, {"causal": True}, {"stage": None}, {"sentence_index": 1}]
)
def test_changing_the_row_starts_a_new_guess(change):
    w = AttentionWidget(["She sat by the river bank", "I sat on the river bank"], exercise="predict", focus=5)
    w.guess = [0.1, 0.1, 0.1, 0.1, 0.5, 0.1]
    w.revealed = True
    if "stage" in change:  # a new stage is the same row: the guess stays
        w.stage = "blend"
        assert w.guess is not None and w.revealed
        return
    w.set_state(change)  # from the page, as a click or the slider would
    assert w.guess is None and w.revealed is False and w.score is None


@pytest.mark.parametrize(
    "guess, says",
    [
        ([0.5, 0.5], "one weight per token the focused row reads \\(6\\), got 2"),
        ([0.5, 0.5, 0, 0, 0, -0.0001], "must sum to 1|≥ 0"),
        ([1.5, -0.5, 0, 0, 0, 0], "finite weights ≥ 0"),
        ([float("nan"), 1, 0, 0, 0, 0], "finite weights ≥ 0"),
        ([0.1] * 6, "must sum to 1 \\(within 1e-6\\), got 0.6"),
    ],
)
def test_bad_guesses_are_refused_and_the_widget_keeps_its_state(guess, says):
    w = lab()
    w.guess = [0, 0, 0, 0, 1, 0]
    with pytest.raises(traitlets.TraitError, match=says):
        w.guess = guess
    assert w.guess == [0, 0, 0, 0, 1, 0]


def test_a_bad_guess_from_the_page_is_refused_and_the_page_put_back():
    from test_widget import RecordingComm

    w = lab()
    w.comm = RecordingComm()
    w.set_state({"guess": [0.5, 0.25, 0, 0, 0, 0]})
    assert w.guess is None
    data, _ = w.comm.sent[-1]  # (after the echo of what the page sent)
    assert data["method"] == "update" and data["state"]["guess"] is None  # the page gets Python's value back


def test_a_reveal_needs_an_exercise_and_a_guess():
    with pytest.raises(traitlets.TraitError, match="Make a guess before revealing"):
        lab().revealed = True
    with pytest.raises(traitlets.TraitError, match="belongs to an exercise"):
        AttentionWidget().revealed = True
    with pytest.raises(traitlets.TraitError, match="belongs to the predict exercise"):
        AttentionWidget().guess = [1, 0, 0, 0, 0, 0]
    with pytest.raises(
        traitlets.TraitError, match="'exercise' must be one of 'predict', 'temperature', or '' for none"
    ):
        AttentionWidget(exercise="guess")


@settings(max_examples=30, deadline=None)
@given(t=st.floats(0.1, 5), goal=st.floats(1, 6))
def test_the_temperature_exercise_scores_the_effective_tokens_reached(t, goal):
    w = AttentionWidget(exercise="temperature", goal=goal, focus=5)
    w.temperature = t
    w.revealed = True
    p = w.weights[5]
    reached = np.exp(-(p[p > 0] * np.log(p[p > 0])).sum())
    assert w.score == pytest.approx(max(0, 1 - abs(reached - goal) / goal), abs=1e-9)
    w.temperature = t + 0.5  # another try
    assert not w.revealed and w.score is None


def test_goal_must_be_a_number_of_tokens():
    with pytest.raises(traitlets.TraitError, match="at least 1"):
        AttentionWidget(exercise="temperature", goal=0.5)


def test_leaving_the_exercise_clears_the_guess():
    w = lab()
    w.guess = [0, 0, 0, 0, 1, 0]
    w.revealed = True
    w.exercise = ""
    assert (w.guess, w.revealed, w.score) == (None, False, None)


@pytest.mark.parametrize(
    "change",
    [{"step": 3, "revealed": True}, {"exercise": "temperature", "revealed": True}, {"focus": 2, "revealed": True}],
)
def test_a_reveal_sent_with_a_new_row_does_not_keep_the_old_guess(change):
    w = lab()
    w.guess = [0, 0, 0, 0, 1, 0]
    w.set_state(change)  # a crafted message: the old guess is for another row
    assert w.guess is None and not w.revealed and w.score is None


def test_a_reveal_sent_with_the_sliders_last_value_reveals_that_value():
    w = AttentionWidget(exercise="temperature", goal=2, focus=5)
    w.set_state(
        {"temperature": 0.56, "revealed": True}
    )  # the page sends both in one message when Reveal follows a drag
    assert w.revealed and w.temperature == 0.56
    assert w.score == pytest.approx(max(0, 1 - abs(w.effective_tokens[5] - 2) / 2))


@pytest.mark.parametrize(
    "made, guess, closed",
    [
        (dict(causal=True, focus=2), [0.5, 0.25, 0, 0.25, 0, 0], "3"),  # the causal rule: token 3 is ahead
        (dict(sink=True, focus=5), [0.5, 0, 0, 0, 0, 0.5], "0"),  # the sink: the first token is left out
        (dict(mask=~np.eye(6, dtype=bool), focus=5), [0, 0, 0, 0, 0.5, 0.5], "5"),  # the mask closes the diagonal
    ],
)
def test_a_guess_cannot_put_weight_where_the_row_cannot_read(made, guess, closed):
    w = AttentionWidget(exercise="predict", **made)
    with pytest.raises(traitlets.TraitError, match=f"cannot read .*: {closed}\\. Give them 0"):
        w.guess = guess
    assert w.guess is None
    kept = [0.0 if j == int(closed) else g for j, g in enumerate(guess)]
    w.guess = [g / sum(kept) for g in kept]  # the same guess without the closed token is taken
    assert w.guess[int(closed)] == 0
