"""AttentionWidget.dense_limit: the widget computes whole tokens × keys matrices up to it, and past it
refuses (made, changed or asked), naming LongAttention and the setting; nothing n × n is made first."""

import warnings

import numpy as np
import pytest
import traitlets
from hypothesis import given, settings
from hypothesis import strategies as st
from test_integrations import gpt2, gpt2_tokenizer, hooked, tf

from attnwidget import AttentionWidget

LIMIT = 8


@pytest.fixture
def limit(monkeypatch):
    """Every widget's limit lowered to LIMIT tokens for the test (put back after it)."""
    monkeypatch.setattr(AttentionWidget, "dense_limit", LIMIT)
    return LIMIT


def arrays(n, m=None, heads=2, seed=0):
    rng = np.random.default_rng(seed)
    m = n if m is None else m
    return dict(
        tokens=[f"t{i}" for i in range(n)],
        q=rng.normal(size=(heads, n, 4)),
        k=rng.normal(size=(heads, m, 4)),
        v=rng.normal(size=(heads, m, 2)),
    )


def says_what_to_do(message: str) -> None:
    for part in ("attnwidget.LongAttention", "LongWidget(long)", "docs/long.md", "AttentionWidget.dense_limit = "):
        assert part in message, part


def test_the_default_is_4096_tokens():
    assert AttentionWidget.dense_limit == 4096


def test_own_arrays_past_the_limit_are_refused_with_the_size_the_limit_and_what_to_call(limit):
    with pytest.raises(ValueError) as refused:
        AttentionWidget(**arrays(LIMIT + 1))
    message = str(refused.value)
    says_what_to_do(message)
    assert "9 × 9" in message and "dense_limit = 8" in message and "AttentionWidget.dense_limit = 9" in message
    assert "648 bytes" in message  # 9 × 9 × 8: one matrix of float64
    assert AttentionWidget(**arrays(LIMIT)).weights.shape == (LIMIT, LIMIT)  # at the limit: whole, as ever


def test_raising_the_limit_lets_a_longer_text_through(limit, monkeypatch):
    monkeypatch.setattr(AttentionWidget, "dense_limit", 12)
    w = AttentionWidget(**arrays(12))
    assert w.weights.shape == (12, 12) and np.allclose(w.weights.sum(-1), 1)


def test_cross_attentions_keys_count_too(limit):
    given = arrays(3, LIMIT + 4)
    with pytest.raises(ValueError, match="3 × 12") as refused:
        AttentionWidget(**given, key_tokens=[f"k{i}" for i in range(LIMIT + 4)])
    says_what_to_do(str(refused.value))


def test_a_sentence_and_a_list_of_sentences_with_a_long_one_are_refused(limit):
    long = " ".join(["river"] * (LIMIT + 1))
    with pytest.raises(ValueError, match="dense_limit"):
        AttentionWidget(long)
    with pytest.raises(ValueError, match="dense_limit"):
        AttentionWidget(["the river bank", long])  # a text it could switch to is one it could not show


def test_a_refusal_is_a_traiterror_too_as_every_refused_change_is(limit):
    with pytest.raises(traitlets.TraitError):
        AttentionWidget(**arrays(LIMIT + 1))


def test_a_later_change_past_the_limit_is_refused_and_the_state_kept(limit):
    w = AttentionWidget(**arrays(5), focus=2)
    before = {n: getattr(w, n) for n in ("tokens", "q", "k", "v", "focus")}
    weights = w.weights.copy()
    bigger = arrays(LIMIT + 3, seed=1)
    with pytest.raises(ValueError, match="11 × 11") as refused:
        w.set_vectors(**bigger)
    says_what_to_do(str(refused.value))
    assert all(getattr(w, n) is before[n] or getattr(w, n) == before[n] for n in before)
    np.testing.assert_array_equal(w.weights, weights)
    w.set_vectors(**arrays(LIMIT, seed=2))  # up to the limit: taken
    assert w.weights.shape == (LIMIT, LIMIT)


def test_the_limit_set_on_one_widget_is_that_widgets(limit):
    w, other = AttentionWidget(**arrays(4)), AttentionWidget(**arrays(4))
    w.dense_limit = 12
    w.set_vectors(**arrays(12))
    assert w.weights.shape == (12, 12)
    with pytest.raises(ValueError, match="dense_limit"):
        other.set_vectors(**arrays(12))
    assert AttentionWidget.dense_limit == LIMIT


def test_switching_to_a_text_past_a_lowered_limit_is_refused_and_the_text_kept(limit):
    w = AttentionWidget(["the river bank", "she sat by the river bank and read"])
    w.dense_limit = 4
    with pytest.raises(ValueError, match="dense_limit") as refused:
        w.sentence_index = 1
    assert "w.dense_limit = 8" in str(refused.value)
    assert w.sentence_index == 0 and w.tokens == ["the", "river", "bank"]


def test_a_lowered_limit_makes_the_whole_matrices_refuse_and_leaves_the_rest(limit):
    w = AttentionWidget(**arrays(LIMIT), cell=(2, 1))
    w.dense_limit = LIMIT - 1
    for name in ("weights", "scores", "output", "effective_tokens", "output_spread", "cell_arithmetic", "attention"):
        with pytest.raises(ValueError, match="8 × 8") as refused:
            getattr(w, name)
        message = str(refused.value)
        says_what_to_do(message)
        assert name in message and "w.dense_limit = 8" in message
    for method in ("rollout", "head_summary", "norms", "head_scores"):
        with pytest.raises(ValueError, match="dense_limit"):
            getattr(w, method)()
    with pytest.raises(ValueError, match="dense_limit"):
        w.to_html()
    assert w.n_heads == 2 and len(w.tokens) == LIMIT and w.q.shape == (2, LIMIT, 4)  # nothing n × n: as ever
    w.temperature = 0.5  # a change that brings in no arrays is taken
    w.dense_limit = LIMIT
    assert w.weights.shape == (LIMIT, LIMIT)


def test_while_writing_only_the_tokens_written_count(limit):
    w = AttentionWidget(**arrays(LIMIT), causal=True, step=4)
    w.dense_limit = 5
    assert w.weights.shape == (4, 4)  # the tokens written so far: 4 × 4
    w.step = 6
    with pytest.raises(ValueError, match="6 × 6"):
        _ = w.weights


def test_the_pages_request_past_a_lowered_limit_is_answered_with_the_refusal(limit):
    w = AttentionWidget(**arrays(LIMIT), measure="mean")
    w.dense_limit = 4
    w._on_page({"kind": "compute", "view": "mean"})
    assert "dense_limit" in w.measure_data["mean"]["error"]


def test_a_limit_that_is_not_a_number_of_tokens_is_refused_saying_so(monkeypatch):
    for bad in (0, -5, 2.5, "4096", True):
        monkeypatch.setattr(AttentionWidget, "dense_limit", bad)
        with pytest.raises(ValueError, match="dense_limit must be a whole number of tokens"):
            AttentionWidget(**arrays(3))


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 12), limit=st.integers(1, 12), lowered=st.integers(1, 12))
def test_whole_matrices_exactly_up_to_the_limit(n, limit, lowered):
    original = AttentionWidget.dense_limit
    AttentionWidget.dense_limit = limit
    try:
        if n > limit:
            with pytest.raises(ValueError, match=f"{n} × {n}"):
                AttentionWidget(**arrays(n))
            return
        w = AttentionWidget(**arrays(n))
    finally:
        AttentionWidget.dense_limit = original
    assert w.weights.shape == (n, n)
    w.dense_limit = lowered
    if n > lowered:
        with pytest.raises(ValueError, match=f"{n} × {n}"):
            _ = w.scores
    else:
        assert w.scores.shape == (n, n)


def test_from_attentions_past_the_limit_is_refused(limit):
    n = LIMIT + 1
    weights = np.full((1, 2, n, n), 1 / n)
    with pytest.raises(ValueError, match="dense_limit"):
        AttentionWidget.from_attentions(weights, [f"t{i}" for i in range(n)])


def test_a_models_text_past_the_limit_is_refused_before_the_model_runs(tf, gpt2_tokenizer, limit):
    model = gpt2(tf, gpt2_tokenizer)
    runs = []
    model.transformer.register_forward_pre_hook(lambda *_: runs.append(1))
    text = "I sat on the riverbank and read a book"
    count = len(gpt2_tokenizer(text)["input_ids"])
    assert count > LIMIT
    with pytest.raises(ValueError, match=f"{count} × {count}") as refused:
        AttentionWidget.from_transformers(model, gpt2_tokenizer, text)
    says_what_to_do(str(refused.value))
    with pytest.raises(ValueError, match="dense_limit"):
        AttentionWidget.from_transformers(model, gpt2_tokenizer, ["I sat", text])
    short = "I sat on"
    with pytest.raises(ValueError, match="generate"):  # the prompt and the tokens it would write
        AttentionWidget.from_transformers(model, gpt2_tokenizer, short, generate=LIMIT)
    assert runs == []
    w = AttentionWidget.from_transformers(model, gpt2_tokenizer, short)
    assert w.weights.shape == (len(w.tokens),) * 2 and runs


def test_switching_to_a_models_text_past_a_lowered_limit_is_refused_before_it_is_read(tf, gpt2_tokenizer):
    model = gpt2(tf, gpt2_tokenizer)
    w = AttentionWidget.from_transformers(model, gpt2_tokenizer, ["I sat on", "I sat on the riverbank and read"])
    runs = []
    model.transformer.register_forward_pre_hook(lambda *_: runs.append(1))
    w.dense_limit = w.text_lengths[0]
    with pytest.raises(ValueError, match="Text 1 would compute") as refused:
        w.sentence_index = 1
    assert f"w.dense_limit = {w.text_lengths[1]}" in str(refused.value)
    assert runs == [] and w.sentence_index == 0  # the longer text never read


LONG = "I sat on the riverbank and read a book"


def test_a_transformer_lens_models_text_past_the_limit_is_refused_before_it_runs(gpt2_tokenizer, limit):
    tl = pytest.importorskip("transformer_lens")
    model = hooked(tl, gpt2_tokenizer, "gpt2-like")
    runs = []
    for module in model.modules():  # (a bridge runs the model it wraps, not its own forward)
        module.register_forward_pre_hook(lambda *_: runs.append(1))
    count = model.to_tokens(LONG, truncate=False).shape[-1]  # (its BOS token first)
    with pytest.raises(ValueError, match=f"{count} × {count}") as refused:
        AttentionWidget.from_transformer_lens(model, LONG)
    says_what_to_do(str(refused.value))
    assert runs == []


def test_an_nnsight_models_text_past_the_limit_is_refused_before_it_runs(tf, gpt2_tokenizer, limit):
    nnsight = pytest.importorskip("nnsight")
    model = gpt2(tf, gpt2_tokenizer)
    runs = []
    model.register_forward_pre_hook(lambda *_: runs.append(1))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (nnsight's announcements)
        wrapped = nnsight.LanguageModel(model, tokenizer=gpt2_tokenizer)
        with pytest.raises(ValueError, match="dense_limit") as refused:
            AttentionWidget.from_nnsight(wrapped, LONG)
    says_what_to_do(str(refused.value))
    assert runs == []
