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


# --- only a model that reads causally is written token by token ---


def fake_model(causal, n=6, layers=2, heads=2, texts=1, seed=3):
    """A model's reading (one text, or a list of ``texts``), as integrations.from_transformers gives it."""
    from attnwidget.integrations.common import ModelAttention

    rng = np.random.default_rng(seed)
    each = [
        ModelAttention(
            tokens=[f"t{i}" for i in range(n)],
            causal=causal,
            scale=None,
            architecture="fake",
            model_name="fake",
            layers=[tuple(rng.normal(size=(heads, n, 4)) for _ in range(3)) for _ in range(layers)],
        )
        for _ in range(texts)
    ]
    return each if texts > 1 else each[0]


def test_a_model_that_reads_both_ways_is_not_written_token_by_token():
    from attnwidget.rules import READS_BOTH_WAYS

    w = AttentionWidget._from_model(fake_model(causal=False), 1, 0, {})
    assert (w.step, w.causal, w.model_causal) == (6, False, False)
    with pytest.raises(traitlets.TraitError, match="reads both ways") as err:
        w.step = 3
    assert READS_BOTH_WAYS in str(err.value) and "from_transformers(model, tokenizer," in str(err.value)
    for change in ({"step": 3}, {"step": 3, "causal": True}):
        w.set_state(change)  # a page's message: refused, nothing changes
        assert (w.step, w.causal, w.weights.shape) == (6, False, (6, 6))  # nothing changed
    w.causal = True  # the causal rule alone stays the learner's to try on it
    assert w.weights.shape == (6, 6)
    with pytest.raises((ValueError, traitlets.TraitError), match="reads both ways"):
        AttentionWidget._from_model(fake_model(causal=False), 0, 0, {"step": 2})
    # vectors of one's own set on it are the lab's exercise, written token by token as any
    rng = np.random.default_rng(1)
    w.set_vectors(tokens=list("abcd"), q=rng.normal(size=(4, 3)), k=rng.normal(size=(4, 3)), v=rng.normal(size=(4, 2)))
    w.step = 2
    assert (w.step, w.layer_shown, w.weights.shape) == (2, False, (2, 2))
    # a model that reads causally: each step is its own numbers on that prefix
    g = AttentionWidget._from_model(fake_model(causal=True), 1, 0, {})
    g.step = 3
    assert (g.step, g.model_causal, g.weights.shape) == (3, True, (3, 3))


def test_attention_weights_alone_are_written_token_by_token_only_when_they_read_causally():
    rng = np.random.default_rng(0)
    both = rng.random((2, 5, 5))
    both /= both.sum(-1, keepdims=True)
    one_way = np.tril(rng.random((2, 5, 5)))
    one_way /= one_way.sum(-1, keepdims=True)
    tokens = list("abcde")
    w = AttentionWidget.from_attentions(both, tokens)
    with pytest.raises(traitlets.TraitError, match="reads both ways"):
        w.step = 2
    g = AttentionWidget.from_attentions(one_way, tokens)
    g.step = 2
    np.testing.assert_allclose(g.weights, one_way[0, :2, :2] / one_way[0, :2, :2].sum(-1, keepdims=True), atol=1e-12)


def test_an_encoder_decoders_decoder_is_written_but_not_its_encoder():
    from test_cross import fake_seq2seq

    w = AttentionWidget._from_model(fake_seq2seq(tgt=4), 0, 0, {}, "decoder")
    assert w.model_causal
    w.step = 2
    w.block = "encoder"  # shown whole
    assert (w.step, w.model_causal) == (5, False)
    with pytest.raises(traitlets.TraitError, match="reads both ways"):
        w.step = 2
    w.set_state({"block": "decoder", "step": 2})
    assert (w.block, w.step, w.model_causal) == ("decoder", 2, True)
    w.set_state({"block": "encoder", "step": 3})  # a page's message: refused, nothing changes
    assert (w.block, w.step, w.model_causal) == ("decoder", 2, True)


# --- while writing, every array is over the tokens written: w.written_tokens ---


def _token_axes(w):
    """Each public array of ``w`` and the axes of it that run over the tokens."""
    axes = {
        "scores": (0, 1),
        "weights": (0, 1),
        "output": (0,),
        "effective_tokens": (0,),
        "sense_resolved": (0,),
        "rollout()": (1, 2),
        "flow()": (0, 1),
        "norms()": (1, 2),
    }
    got = {name: (getattr(w, name[:-2])() if name.endswith("()") else getattr(w, name)) for name in axes}
    if len(w.sentences) > 1:
        axes["difference()"] = (2, 3)
        got["difference()"] = w.difference(0, 1)
    if w.x is not None:
        axes["residual_output"], got["residual_output"] = (0,), w.residual_output
    for name in ("scores", "weights", "output", "effective_tokens"):
        axes[f"attention.{name}"], got[f"attention.{name}"] = axes[name], getattr(w.attention, name)
    return {name: [got[name].shape[a] for a in axes[name]] for name in axes}


@settings(max_examples=25, deadline=None)
@given(kind=st.sampled_from(["sentence", "sentences", "own", "model", "texts"]), data=st.data())
def test_every_array_is_over_the_tokens_written_and_written_tokens_names_them(kind, data):
    rng = np.random.default_rng(data.draw(st.integers(0, 99)))
    if kind == "sentence":
        w = AttentionWidget("I sat on the river bank and read")
    elif kind == "sentences":
        w = AttentionWidget(["She sat by the river bank", "I put money in the bank"])
    elif kind == "own":
        n = data.draw(st.integers(1, 7))
        q, k, v = rng.normal(size=(2, n, 4)), rng.normal(size=(2, n, 4)), rng.normal(size=(2, n, 3))
        w = AttentionWidget(tokens=[f"t{i}" for i in range(n)], q=q, k=k, v=v, x=rng.normal(size=(n, 3)))
    else:
        texts = 2 if kind == "texts" else 1
        found = fake_model(True, n=data.draw(st.integers(1, 7)), texts=texts)
        w = AttentionWidget._from_model(found, 1, 0, {}, texts=["a", "b"] if texts > 1 else None)
    n = len(w.tokens)
    for step in data.draw(st.lists(st.integers(1, n), min_size=1, max_size=3)):
        w.step = step
        assert w.written_tokens == w.tokens[:step] and len(w.tokens) == n
        for name, sizes in _token_axes(w).items():
            assert sizes == [len(w.written_tokens)] * len(sizes), (name, step, sizes)
        assert w.focus < len(w.written_tokens)
