"""Learnt attention sinks (gpt-oss and its kin): each head adds one learnt logit z to every row's
softmax, a column no token gets, dropped after the softmax, so each row keeps 1 − the sink's share.
The formula in Python, your own arrays with sinks=, and the summaries that say the share."""

import numpy as np
import pytest
import traitlets
from hypothesis import given, settings
from hypothesis import strategies as st

from attnwidget import AttentionWidget, attention
from attnwidget.formulas import CLOSED, effective_tokens


def with_sink(scores, z, temperature=1.0, allowed=None):
    """softmax([scores, z] / T) over the cells allowed, the sink's column dropped: the model's own recipe."""
    n, m = scores.shape
    s = np.concatenate([scores, np.full((n, 1), z)], axis=1) / temperature
    if allowed is not None:
        s[:, :m][~allowed] = -np.inf
    e = np.exp(s - s.max(axis=1, keepdims=True))
    return (e / e.sum(axis=1, keepdims=True))[:, :m]


@settings(max_examples=60, deadline=None)
@given(
    n=st.integers(1, 7),
    z=st.floats(-6, 6),
    temperature=st.floats(0.1, 5),
    causal=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_the_sink_takes_its_share_of_every_row(n, z, temperature, causal, seed):
    rng = np.random.default_rng(seed)
    q, k, v = (rng.normal(size=(n, 3)) for _ in range(3))
    a = attention(q, k, v, temperature=temperature, causal=causal, sink=z)
    allowed = np.tri(n, dtype=bool) if causal else None
    want = with_sink(a.scores, z, temperature, allowed)
    np.testing.assert_allclose(a.weights, want, rtol=1e-12, atol=1e-15)
    share = 1 - a.weights.sum(axis=1)
    assert np.all(share > -1e-15) and np.all(share <= 1) and np.all(a.weights.sum(axis=1) > 0)
    np.testing.assert_allclose(a.output, a.weights @ v)
    # effective tokens count the tokens among what the row keeps: its weights divided by their sum
    kept = a.weights / a.weights.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(
        a.effective_tokens,
        np.exp(-(kept * np.log(kept, where=kept > 0, out=np.zeros_like(kept))).sum(axis=1)),
        rtol=1e-10,
    )
    # the same tokens' proportions as without the sink: the sink takes a share, it does not reorder
    np.testing.assert_allclose(
        kept, attention(q, k, v, temperature=temperature, causal=causal).weights, rtol=1e-10, atol=1e-300
    )


def test_temperature_divides_the_sink_as_it_divides_the_scores():
    q = np.array([[1.0, 0.0], [0.0, 1.0]])
    a = attention(q, q, q, temperature=0.5, scale=1.0, sink=1.0)
    # row 0: scores (1, 0) and the sink 1, each over T = 0.5: e², e⁰, e² -> the sink takes e² / (2e² + 1)
    assert a.weights[0, 0] == pytest.approx(np.e**2 / (2 * np.e**2 + 1), rel=1e-14)
    assert 1 - a.weights[0].sum() == pytest.approx(np.e**2 / (2 * np.e**2 + 1), rel=1e-12)
    cell = a.cell(0, 1)
    assert cell["sink"] == 1.0 and cell["row_sum"] == pytest.approx(2 * np.e**2 + 1, rel=1e-14)
    assert cell["exp"] / cell["row_sum"] == pytest.approx(cell["weight"], rel=1e-14)


def test_a_closed_sink_takes_nothing_and_a_row_that_reads_nothing_keeps_nothing():
    rng = np.random.default_rng(0)
    q, k, v = (rng.normal(size=(4, 2)) for _ in range(3))
    np.testing.assert_array_equal(attention(q, k, v, sink=CLOSED).weights, attention(q, k, v).weights)
    shut = np.ones((4, 4), dtype=bool)
    shut[2] = False
    a = attention(q, k, v, mask=shut, sink=3.0)
    assert (a.weights[2] == 0).all() and a.effective_tokens[2] == 0 and np.isfinite(a.weights).all()
    # a tiny temperature: the larger of the sink and the row's best takes all (a tie shared)
    cold = attention(q, k, v, temperature=1e-9, sink=1e6)
    assert (cold.weights == 0).all()


def test_effective_tokens_of_rows_that_sum_to_one_are_unchanged():
    w = np.array([[0.5, 0.25, 0.25], [1.0, 0.0, 0.0], [0.0, 0.0, 0.0]])
    np.testing.assert_allclose(effective_tokens(w), [np.exp(1.5 * np.log(2)), 1.0, 0.0], rtol=1e-15)
    np.testing.assert_allclose(effective_tokens(w * 0.3), effective_tokens(w), rtol=1e-14)  # a sink took 0.7


def test_your_own_arrays_take_one_sink_per_head():
    rng = np.random.default_rng(2)
    q, k, v = (rng.normal(size=(2, 5, 4)) for _ in range(3))
    w = AttentionWidget(q=q, k=k, v=v, sinks=[0.5, -1.0], causal=True)
    assert w.sinks == (0.5, -1.0)
    summary = w.head_summary()
    for h, z in enumerate((0.5, -1.0)):
        w.head = h
        want = with_sink(w.scores, z, allowed=np.tri(5, dtype=bool))
        np.testing.assert_allclose(w.weights, want, rtol=1e-12)
        assert summary["sink_share"][0, h] == pytest.approx(np.mean(1 - w.weights.sum(axis=1)), rel=1e-12)
    w.temperature = 2.0
    np.testing.assert_allclose(w.weights, with_sink(w.scores, -1.0, 2.0, np.tri(5, dtype=bool)), rtol=1e-12)
    w.sinks = None  # no sinks: every row sums to 1 again
    np.testing.assert_allclose(w.weights.sum(axis=1), 1)
    assert "sink_share" not in w.head_summary()


@pytest.mark.parametrize(
    "bad, said",
    [
        ([1.0], "one sink logit per head (2)"),
        ([1.0, float("nan")], "must be finite"),
        ("1", "a list of numbers"),
        ([1.0, 1e301], "at most 1e+300"),
    ],
)
def test_bad_sinks_are_refused_and_the_widget_keeps_its_state(bad, said):
    rng = np.random.default_rng(3)
    q, k, v = (rng.normal(size=(2, 4, 3)) for _ in range(3))
    w = AttentionWidget(q=q, k=k, v=v, sinks=[0.0, 1.0])
    before = w.weights.copy()
    with pytest.raises(traitlets.TraitError, match="'sinks'") as err:
        w.sinks = bad
    assert said in str(err.value)
    assert w.sinks == (0.0, 1.0)
    np.testing.assert_array_equal(w.weights, before)


def test_the_sink_summary_is_refused_without_sinks():
    w = AttentionWidget()
    with pytest.raises(traitlets.TraitError, match="sink_share"):
        w.summary = "sink_share"


# --- a real model's sinks: gpt-oss and its kin, tiny and random -------------------------------------------------

TEXT = "I sat on the riverbank and the river sat on the bank."


def tiny(kind, tokenizer, dtype=None):
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    from tiny_families import tiny_config

    torch.manual_seed(0)
    model = transformers.AutoModel.from_config(tiny_config(kind, len(tokenizer)), attn_implementation="eager").eval()
    return model if dtype is None else model.to(dtype)


@pytest.fixture(scope="module")
def words(tmp_path_factory):
    transformers = pytest.importorskip("transformers")
    from test_integrations import gpt2_tokenizer

    return gpt2_tokenizer.__wrapped__(transformers, tmp_path_factory)


@pytest.mark.parametrize("kind", ["gpt_oss", "flint", "hy_v4", "openai_privacy_filter", "mimo_v2_flash"])
def test_every_layer_and_head_is_the_models_own(kind, words):
    """The widget's weights are the model's output_attentions, every layer and head (float32: within 1e-5), its
    sinks the model's own logits, and the rows sum to 1 − the sink's share."""
    import torch

    model = tiny(kind, words)
    enc = words(TEXT, return_tensors="pt")
    with torch.no_grad():
        out = model(**enc, output_attentions=True)
    w = AttentionWidget.from_transformers(model, words, TEXT)
    own = [getattr(m, "sinks", None) for m in model.modules() if type(m).__name__.endswith("Attention")]
    assert w.n_layers == len(out.attentions) == len(own)
    assert w.model_sinks.shape == (w.n_layers, w.n_heads)
    for layer, (want, z) in enumerate(zip(out.attentions, own)):
        w.layer = layer
        if z is None:  # (MiMo's full-attention layers have none: a sink that takes nothing)
            assert all(x == CLOSED for x in w.sinks)
        else:
            np.testing.assert_array_equal(w.sinks, z.detach().double().numpy())
        for head in range(w.n_heads):
            w.head = head
            np.testing.assert_allclose(w.weights, want[0, head].double().numpy(), atol=1e-5, rtol=0)
        rows = out.attentions[layer][0].double().numpy().sum(axis=-1)
        if z is not None:
            assert (rows < 1 - 1e-7).all()  # a share went to the sink in every row
    summary = w.head_summary()
    for layer in range(w.n_layers):
        w.layer = layer
        for head in range(w.n_heads):
            w.head = head
            assert summary["sink_share"][layer, head] == pytest.approx(
                np.mean(1 - w.weights.sum(axis=1)), rel=1e-9, abs=1e-12
            )


def test_the_overview_says_each_heads_sink_share(words):
    from attnwidget import overview

    w = AttentionWidget.from_transformers(tiny("gpt_oss", words), words, TEXT)
    want = w.head_summary()["sink_share"].ravel()
    for fast in (False, True):  # numpy's float64 path, and torch's float32 one
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(overview, "FAST_FROM", 0 if fast else 2**62)
            got = overview.compute(w._inputs())["summaries"]
        np.testing.assert_allclose(got["sink_share"], want, rtol=1e-5 if fast else 1e-12, atol=1e-7 if fast else 0)
        for name in ("effective_tokens", "first"):
            np.testing.assert_allclose(got[name], w.head_summary()[name].ravel(), rtol=1e-5 if fast else 1e-12)
    w.summary = "sink_share"  # offered: the heads coloured by it


def test_a_half_precision_model_is_read_within_its_rounding(words):
    import torch

    model = tiny("gpt_oss", words, torch.bfloat16)
    w = AttentionWidget.from_transformers(model, words, TEXT)  # (the check allows bfloat16's rounding)
    assert w.sinks is not None and len(w.sinks) == w.n_heads


@pytest.mark.parametrize(
    "kind, said",
    [
        ("inkling2_text", "a logit for every token"),  # per-token sinks, made from each token's hidden state
        ("granite_swa", "in a way attnwidget does not read"),  # its sinks scale the output after a plain softmax
        ("granitemoe_swa", "in a way attnwidget does not read"),
    ],
)
def test_a_family_that_uses_its_sinks_another_way_is_refused_by_name(kind, said, words):
    model = tiny(kind, words)
    with pytest.raises(NotImplementedError, match="learnt attention sinks") as err:
        AttentionWidget.from_transformers(model, words, TEXT)
    assert said in str(err.value) and (kind in str(err.value) or type(model).__name__ in str(err.value))


def test_a_sink_models_weights_alone_are_refused_saying_how_to_read_it(words):
    import torch

    model = tiny("gpt_oss", words)
    enc = words(TEXT, return_tensors="pt")
    with torch.no_grad():
        attentions = model(**enc, output_attentions=True).attentions
    tokens = words.convert_ids_to_tokens(enc["input_ids"][0])
    with pytest.raises(ValueError, match="learnt attention sinks .* from_transformers"):
        AttentionWidget.from_attentions(attentions, tokens)


def test_nnsight_reads_the_sinks_in_its_own_trace(words):
    nnsight = pytest.importorskip("nnsight")
    import warnings

    import torch
    from tiny_families import tiny_config
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(tiny_config("gpt_oss", len(words)), attn_implementation="eager").eval()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        lm = nnsight.TransformersModel(model, tokenizer=words)
    w = AttentionWidget.from_nnsight(lm, TEXT, stage="weights")
    with torch.no_grad():
        want = model(**words(TEXT, return_tensors="pt"), output_attentions=True).attentions
    for layer in range(w.n_layers):
        w.layer = layer
        assert w.sinks == tuple(float(z) for z in model.model.layers[layer].self_attn.sinks)
        for head in range(w.n_heads):
            w.head = head
            np.testing.assert_allclose(w.weights, want[layer][0, head].double().numpy(), atol=1e-5, rtol=0)


def test_a_models_layer_without_sinks_takes_none_but_your_own_arrays_do(words):
    w = AttentionWidget.from_transformers(tiny("llama", words), words, "I sat on the river bank")
    before = w.weights.copy()
    with pytest.raises(traitlets.TraitError, match="this model has none"):
        w.sinks = [0.5] * w.n_heads
    assert w.sinks is None and np.array_equal(w.weights, before)
    q, k, v = (np.array(a) for a in (w.q, w.k, w.v))
    w.set_vectors(q=q, k=k, v=v)  # your own arrays: sinks of your own
    w.sinks = [0.5] * w.n_heads
    assert not w.layer_shown and w.weights[0, 0] < 1


def test_the_predict_exercise_is_refused_on_a_head_whose_sink_takes_a_share():
    rng = np.random.default_rng(0)
    q, k, v = (rng.normal(size=(2, 5, 3)) for _ in range(3))
    w = AttentionWidget(tokens=list("abcde"), q=q, k=k, v=v, sinks=[-1e30, 1.0])  # head 1's sink is open
    w.exercise = "predict"  # head 0: its sink takes nothing, each row sums to 1
    with pytest.raises(traitlets.TraitError, match="this head's learnt sink takes part of every row"):
        w.head = 1
    assert w.head == 0 and w.exercise == "predict"
