"""Generation one token at a time: `step` tokens written, their numbers those of the prefix."""

import numpy as np
import pytest
import traitlets
from hypothesis import given, settings
from hypothesis import strategies as st

from attnwidget import AttentionWidget, attention


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 8), heads=st.integers(1, 3), seed=st.integers(0, 99), t=st.floats(0.3, 3), data=st.data())
def test_each_step_is_the_prefixs_own_attention_and_earlier_rows_never_change(n, heads, seed, t, data):
    rng = np.random.default_rng(seed)
    q, k, v = (rng.normal(size=(heads, n, 4)) for _ in range(3))
    w = AttentionWidget(tokens=[f"t{i}" for i in range(n)], q=q, k=k, v=v, temperature=t, head=heads - 1)
    assert w.step == n and w.weights.shape == (n, n)
    before = None
    for s in range(1, n + 1):
        w.step = s
        prefix = attention(q[-1, :s], k[-1, :s], v[-1, :s], temperature=t, causal=True)
        np.testing.assert_allclose(w.weights, prefix.weights, atol=1e-12)
        np.testing.assert_allclose(w.output, prefix.output, atol=1e-12)
        assert w.focus == s - 1 and (w.causal or s == n == 1)
        if (
            before is not None
        ):  # the cache: rows written before are as they were (to rounding: a bigger product sums in another order)
            np.testing.assert_allclose(w.weights[: s - 1, : s - 1], before, rtol=0, atol=1e-15)
        before = w.weights.copy()
    s = data.draw(st.integers(1, n))
    w.step = s
    summary = w.head_summary()
    assert summary["effective_tokens"].shape == (1, heads)
    assert summary["effective_tokens"][0, -1] == pytest.approx(w.effective_tokens.mean())


def test_tokens_not_written_yet_cannot_be_focused_or_picked():
    w = AttentionWidget(step=3)
    assert (w.focus, w.causal, w.weights.shape) == (2, True, (3, 3))
    with pytest.raises(
        traitlets.TraitError, match="'focus' must be a token index written so far \\(step 3 of 6: advance step"
    ):
        w.focus = 4
    with pytest.raises(traitlets.TraitError, match="'cell' must be .* from 0 to 2"):
        w.cell = (2, 4)
    with pytest.raises(traitlets.TraitError, match="is causal: causal=False needs every token written"):
        w.causal = False
    assert (w.focus, w.causal, w.step) == (2, True, 3)
    w.set_state({"step": 9})  # a crafted message: refused, nothing changes
    assert w.step == 3
    with pytest.raises(traitlets.TraitError, match="'step' must be the number of tokens written so far, from 1 to 6"):
        w.step = 0


def test_the_step_follows_new_tokens():
    w = AttentionWidget(["She sat by the river bank", "I put my money in the bank and left"])
    w.sentence_index = 1  # every token written stays so
    assert w.step == 9
    w.step = 4
    w.sentence_index = 0  # a step that still fits is kept
    assert (w.step, len(w.tokens)) == (4, 6) and w.weights.shape == (4, 4)
    w.set_vectors(tokens=["a", "b"], q=np.eye(2), k=np.eye(2), v=np.eye(2))
    assert w.step == 2  # past the new tokens: the last


def test_stepping_the_focus_and_a_cell_in_one_change_keeps_them():
    w = AttentionWidget(step=2)
    w.set_state({"step": 4, "focus": 1, "cell": [1, 0]})
    assert (w.step, w.focus, w.cell) == (4, 1, (1, 0))


def test_cross_attention_is_written_whole():
    rng = np.random.default_rng(0)
    w = AttentionWidget(
        tokens=["a", "b"],
        key_tokens=["x", "y", "z"],
        q=rng.normal(size=(2, 3)),
        k=rng.normal(size=(3, 3)),
        v=rng.normal(size=(3, 2)),
    )
    assert w.step == 2
    with pytest.raises(traitlets.TraitError, match="is for self-attention"):
        w.step = 1


def test_a_new_sentence_keeps_the_focus_among_the_tokens_written():
    w = AttentionWidget(
        ["I sat on the river bank and read", "I put my money in the bank and left"], step=4, focus=3
    )  # "the"
    w.sentence_index = 1  # "the" is token 5 there, not written yet at step 4
    assert (w.step, w.focus, w.weights.shape) == (4, 3, (4, 4))
    with pytest.raises(traitlets.TraitError, match="'focus' must be a token index written so far"):
        w.focus = 5  # asked for: refused, not moved


def test_becoming_cross_attention_writes_the_text_whole():
    w = AttentionWidget(step=2)
    r = np.random.default_rng(0)
    w.set_vectors(key_tokens=list("abc"), q=r.normal(size=(6, 4)), k=r.normal(size=(3, 4)), v=r.normal(size=(3, 4)))
    assert w.step == 6 and w.weights.shape == (6, 3)


def test_a_block_switch_while_writing_shows_the_other_text_whole():
    from test_cross import fake_seq2seq

    w = AttentionWidget._from_model(fake_seq2seq(tgt=4), 0, 0, {}, "decoder")
    w.step, w.focus = 2, 0
    w.set_state({"block": "encoder"})  # not causal: refused before, as "causal=False needs every token written"
    assert (w.block, w.step, w.causal, w.focus) == ("encoder", 5, False, 0)
    w.block = "decoder"
    assert w.step == 4 and w.weights.shape == (4, 4)


def test_what_is_asked_with_step_is_refused_when_it_cannot_be():
    with pytest.raises(ValueError, match="is causal"):
        AttentionWidget(step=2, causal=False)
    with pytest.raises(ValueError, match="focus 4 is not written yet at step 3: pass a focus from 0 to 2"):
        AttentionWidget(step=3, focus=4)
    assert AttentionWidget(step=3, focus=1).focus == 1 and AttentionWidget(step=3).causal


@pytest.mark.parametrize(
    "step, says",
    [
        (True, "'step' must be an integer, got True"),
        (0, "'step' must be the number of tokens written so far, from 1 to 6"),
    ],
)
def test_a_step_that_is_not_a_count_of_tokens_is_refused_as_the_step(step, says):
    for kwargs in ({}, {"focus": 2}):  # never blamed on the focus
        with pytest.raises(traitlets.TraitError, match=says):
            AttentionWidget(step=step, **kwargs)
    w = AttentionWidget(step=3)
    with pytest.raises(traitlets.TraitError, match=says):
        w.step = step
    assert (w.step, w.focus) == (3, 2)
