"""Attention weights alone (from_attentions): every form other tools give, shown as given,
re-tempered exactly, and what needs queries and keys refused."""

import warnings

import numpy as np
import pytest
import traitlets
from hypothesis import given, settings
from hypothesis import strategies as st
from test_integrations import gpt2_tokenizer, hooked, tf  # (fixtures)

from attnwidget import AttentionWidget


class Tokens:  # n fixed ids as a text: what is compared is the model's attention
    all_special_tokens = ()

    def __init__(self, ids):
        self.ids = ids

    def __call__(self, text, return_tensors=None):
        import torch

        ids = torch.tensor([self.ids])
        return {"input_ids": ids, "attention_mask": torch.ones_like(ids)}

    def convert_ids_to_tokens(self, ids):
        return [f"t{i}" for i in ids]


@pytest.fixture(scope="module")
def gpt2(tf):
    import torch

    torch.manual_seed(0)
    model = tf.GPT2Model(tf.GPT2Config(n_embd=32, n_layer=3, n_head=4, n_positions=32, vocab_size=50)).eval()
    model.set_attn_implementation("eager")
    ids = [3, 14, 15, 9, 26, 5, 35]
    with torch.no_grad():
        attentions = model(input_ids=torch.tensor([ids]), output_attentions=True).attentions
    return model, ids, attentions


def heads_of(w):
    """The widget's weights of every head of the current layer (w.weights, head by head), heads × n × m;
    the head shown is kept."""
    shown = w.head
    out = []
    for head in range(w.n_heads):
        w.head = head
        out.append(w.weights)
    w.head = shown
    return np.array(out)


def each_head(w):
    """Every layer's every head of the widget's weights, layers × heads × n × m; the layer and head shown are kept."""
    shown = w.layer
    out = []
    for layer in range(w.n_layers):
        w.layer = layer
        out.append(heads_of(w))
    w.layer = shown
    return np.array(out)


def test_hugging_faces_attentions_are_shown_as_given_in_every_layer_and_head(gpt2):
    _, ids, attentions = gpt2
    tokens = [f"t{i}" for i in ids]
    w = AttentionWidget.from_attentions(attentions, tokens)
    want = np.stack([a[0].numpy() for a in attentions])
    np.testing.assert_allclose(each_head(w), want, atol=1e-6)
    assert (w.n_layers, w.n_heads, w.causal, w.weights_only) == (
        3,
        4,
        True,
        "weights",
    )  # a causal pattern: the causal rule
    # the same weights as one array of each shape, numpy or torch
    np.testing.assert_allclose(each_head(AttentionWidget.from_attentions(want, tokens)), want, atol=1e-6)
    np.testing.assert_allclose(
        AttentionWidget.from_attentions(attentions[1][0], tokens, head=2).weights, want[1, 2], atol=1e-6
    )
    np.testing.assert_allclose(AttentionWidget.from_attentions(want[2, 3], tokens).weights, want[2, 3], atol=1e-6)
    summaries = w.head_summary()  # the overview's numbers, from the weights alone
    assert summaries["first"].shape == (3, 4) and np.all(np.isfinite(summaries["effective_tokens"]))


def test_a_transformer_lens_cache_is_read_for_its_patterns(gpt2_tokenizer):
    tl = pytest.importorskip("transformer_lens")
    import torch

    model = hooked(tl, gpt2_tokenizer, "gpt2-like")
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        _, cache = model.run_with_cache("I sat on the riverbank")
    tokens = model.to_str_tokens("I sat on the riverbank")
    w = AttentionWidget.from_attentions(cache, tokens)
    want = np.stack([cache[f"blocks.{i}.attn.hook_pattern"][0].numpy() for i in range(model.cfg.n_layers)])
    np.testing.assert_allclose(each_head(w), want, atol=1e-6)


@pytest.mark.parametrize("temperature", [0.3, 1.7, 4.0])
def test_a_temperature_retempers_the_weights_as_the_scores_would(gpt2, temperature):
    """softmax(log W / T) from the weights equals softmax(S / T) from the same model's Q and K."""
    model, ids, attentions = gpt2
    from_scores = AttentionWidget.from_transformers(model, Tokens(ids), "text", temperature=temperature)
    from_weights = AttentionWidget.from_attentions(attentions, [f"t{i}" for i in ids], temperature=temperature)
    np.testing.assert_allclose(each_head(from_weights), each_head(from_scores), atol=1e-5)
    np.testing.assert_allclose(
        from_weights.head_summary()["effective_tokens"], from_scores.head_summary()["effective_tokens"], rtol=1e-4
    )


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 9), st.integers(1, 3), st.sampled_from([0.2, 1.0, 3.0]), st.integers(0, 2**31))
def test_a_weight_of_zero_stays_zero_at_any_temperature(n, heads, temperature, seed):
    rng = np.random.default_rng(seed)
    w = rng.random((heads, n, n)) * (rng.random((heads, n, n)) < 0.6)  # zeros a head has alone, or all heads
    w[:, :, 0] += 1e-3  # every row reads something
    w /= w.sum(axis=-1, keepdims=True)
    widget = AttentionWidget.from_attentions(w, [f"t{i}" for i in range(n)], temperature=temperature)
    for h in range(heads):
        widget.head = h
        got = widget.weights
        assert np.all(got[w[h] == 0] == 0)
        want = w[h] ** (1 / temperature)
        np.testing.assert_allclose(got, want / want.sum(axis=-1, keepdims=True), rtol=1e-9, atol=1e-12)


def test_what_needs_queries_and_keys_is_refused_and_values_bring_the_blend_back(gpt2):
    _, ids, attentions = gpt2
    tokens = [f"t{i}" for i in ids]
    w = AttentionWidget.from_attentions(attentions, tokens, stage="weights")
    for stage in ("qk", "scores", "blend"):
        with pytest.raises(traitlets.TraitError, match="attention weights alone"):
            w.stage = stage
    assert w.stage == "weights"  # kept
    with pytest.raises(
        ValueError, match="no queries or keys, so no scores. Read the model with from_transformers, or pass q=, k=, v="
    ):
        _ = w.scores
    with pytest.raises(ValueError, match="pass values="):
        _ = w.output
    with pytest.raises(traitlets.TraitError, match="carries the weights' logarithms as its bias"):
        w.bias = np.zeros((4, len(ids), len(ids)))
    values = np.random.default_rng(0).normal(size=(len(ids), 2))
    v = AttentionWidget.from_attentions(attentions, tokens, values=values, stage="blend")
    np.testing.assert_allclose(v.output, attentions[0][0, 0].numpy() @ values, atol=1e-6)
    with pytest.raises(traitlets.TraitError, match="no 'scores' stage"):
        v.stage = "scores"


@pytest.mark.parametrize(
    "weights, message",
    [
        (-np.eye(3), "a negative number"),
        (np.full((3, 3), np.nan), "the weights hold nan"),
        (np.where(np.eye(3) > 0, np.inf, 0.0), "the weights hold inf"),
        (
            np.ones((3, 3)),
            "row 0 of head 0 (layer 0) sums to 3: each row of weights sums to 1 (within 0.0001), or is all 0; "
            "pass the weights after the softmax",
        ),
        (np.eye(7), "the weights are 7 queries × 7 keys, but 3 tokens were given: give one token per row"),
        (
            np.eye(5),
            "2 positions more than the tokens, as a tokenizer's special tokens ([CLS] … [SEP], <s>) add: pass the "
            'tokens the model read, tokenizer.convert_ids_to_tokens(inputs["input_ids"][0])',
        ),
        (np.ones((4, 5)) / 5, "the weights are 4 queries × 5 keys, but 3 tokens were given (for cross-attention"),
        ((np.ones((2, 1, 3, 3)) / 3,), "layer 0 holds a batch of 2 texts"),
        (np.ones((1, 1, 1, 3, 3)) / 3, "attention weights of 5 dimensions"),
        ((), "the attentions are empty"),
        ({"blocks.0.hook_resid_pre": np.eye(3)}, "this cache has no attention patterns"),
        (
            (None, None),
            "the attentions hold None: the model ran with an attention kernel that gives no weights (SDPA, flash); "
            'load it with attn_implementation="eager"',
        ),
        (
            np.stack([np.eye(3), np.eye(3) * [1, 0, 1]]),
            "row 1 of head 1 (layer 0) is all 0, but other heads read in that row",
        ),
    ],
)
def test_bad_weights_are_refused_with_what_was_wrong(weights, message):
    with pytest.raises(ValueError, match=None) as err:
        AttentionWidget.from_attentions(weights, ["a", "b", "c"])
    assert message in str(err.value)


def test_a_cells_arithmetic_starts_from_the_weight_given():
    w = np.array([[[1.0, 0.0, 0.0], [0.2, 0.8, 0.0], [0.1, 0.3, 0.6]]])
    widget = AttentionWidget.from_attentions(w, ["a", "b", "c"], cell=(2, 1), focus=2, temperature=2.0)
    steps = widget.cell_arithmetic
    assert "dot" not in steps and "share" not in steps
    assert steps["given"] == pytest.approx(0.3) and steps["score"] == pytest.approx(np.log(0.3))
    assert steps["weight"] == pytest.approx(np.sqrt(0.3) / np.sqrt([0.1, 0.3, 0.6]).sum())  # re-tempered at T = 2


def test_half_precision_a_whole_output_and_a_cache_without_its_batch_are_taken(gpt2):
    import torch

    _, ids, attentions = gpt2
    tokens = [f"t{i}" for i in ids]
    half = tuple(a.to(torch.bfloat16) for a in attentions)  # rows sum to 1 within bfloat16's rounding, not 1e-4
    assert float((half[0].float().sum(-1) - 1).abs().max()) > 1e-4
    np.testing.assert_allclose(
        AttentionWidget.from_attentions(half, tokens).weights, attentions[0][0, 0].numpy(), atol=2e-2
    )
    whole = {"last_hidden_state": None, "attentions": attentions}  # the model's whole output, as a mapping
    np.testing.assert_allclose(
        AttentionWidget.from_attentions(whole, tokens).weights, attentions[0][0, 0].numpy(), atol=1e-6
    )
    cache = {f"blocks.{i}.attn.hook_pattern": a[0] for i, a in enumerate(attentions)}  # remove_batch_dim=True
    np.testing.assert_allclose(
        AttentionWidget.from_attentions(cache, tokens, layer=2).weights, attentions[2][0, 0].numpy(), atol=1e-6
    )


def test_a_row_of_zeros_is_allowed_and_cross_attention_takes_key_tokens():
    w = np.array([[[0.5, 0.5], [0.0, 0.0], [0.25, 0.75]]])
    widget = AttentionWidget.from_attentions(w, ["a", "b", "c"], key_tokens=["x", "y"])
    np.testing.assert_allclose(widget.weights, w[0])
    assert widget.cross and widget.key_tokens == ["x", "y"]


def test_a_causal_pattern_is_written_token_by_token_and_exported(gpt2, tmp_path):
    _, ids, attentions = gpt2
    w = AttentionWidget.from_attentions(attentions, [f"t{i}" for i in ids], stage="weights")
    w.step = 3
    np.testing.assert_allclose(w.weights, attentions[0][0, 0, :3, :3].numpy(), atol=1e-6)  # the pattern's prefix
    page = w.page_state()
    assert page["state"]["weights_only"] == "weights" and page["state"]["model_bias"]["shape"] == [12, 7, 7]
    w.to_html(tmp_path / "weights.html")
    assert (tmp_path / "weights.html").stat().st_size > 0
    # the budget counts each layer's weights (q, k and v alone, width 1, would fit it)
    budget = 1.5 * sum(a.nbytes for a in (w.model_q, w.model_k, w.model_v))
    with pytest.warns(UserWarning, match=r"one layer of this model alone takes 0.0\d+ MB of the page"):
        small = w.page_state(budget=budget)
    assert 0 in small["state"]["held_layers"] and len(small["state"]["held_layers"]) < 3
    assert set(small["arrays"]["layer:0"]) >= {"q", "k", "v", "bias"}


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 2**16),
    causal=st.booleans(),
    temperature=st.sampled_from([0.05, 1.0, 7.0, 1e28, 1e30, 1e300]),
    change=st.sampled_from(["causal off", "mask none", "another mask", "sink", "step"]),
)
def test_a_cell_given_0_stays_0_in_every_state(seed, causal, temperature, change):
    """Weights given as input stay what was given: a cell of weight 0 (in every head, as the causal
    rule, or in one head alone) keeps weight 0 whatever the temperature, causal rule, mask, sink or
    step; a row left with nothing to read reads nothing (no weight appears anywhere in it)."""
    rng = np.random.default_rng(seed)
    n, heads = 5, 2
    w0 = rng.random((2, heads, n, n)) * (rng.random((2, heads, n, n)) > 0.35)
    w0[:, :, :, 2] = 0  # a column no head reads: the layer's mask
    if causal:
        w0 = np.tril(w0)
    w0[..., 0, 0] = np.where(w0[..., 0].sum(-1) == 0, 1.0, w0[..., 0, 0])  # every row reads something
    for layer in range(2):
        for h in range(heads):
            for i in range(n):
                if w0[layer, h, i].sum() == 0:
                    w0[layer, h, i, min(i, 1) if causal else 0] = 1.0
    w0 /= w0.sum(axis=-1, keepdims=True)
    w = AttentionWidget.from_attentions(tuple(w0[:, None][layer] for layer in range(2)), [f"t{i}" for i in range(n)])
    w.temperature = temperature
    if change == "causal off" and w.causal:
        w.causal = False
    elif change == "mask none":
        w.mask = None
    elif change == "another mask":
        w.mask = np.ones((n, n), dtype=bool)
    elif change == "sink":
        w.sink = True
    elif change == "step" and w.causal:
        w.step = 3
    for layer in range(2):
        w.layer = layer
        for h in range(heads):
            w.head = h
            got, given = w.weights, w0[layer, h, : len(w.weights), : len(w.weights)]
            assert (got[given == 0] == 0).all(), (layer, h, got, given)
            rows = got.sum(axis=1)
            assert np.all((np.abs(rows - 1) < 1e-9) | (rows == 0))  # a row reads something, whole, or nothing


def test_empty_attentions_say_why_they_are_empty_and_the_two_ways_out():
    with pytest.raises(ValueError, match=r'SDPA.*attn_implementation="eager".*from_transformers'):
        AttentionWidget.from_attentions((), ["a"])


def test_a_missing_tokenizer_is_named_with_what_to_pass():
    pytest.importorskip("transformers")
    with pytest.raises(TypeError, match=r"tokenizer must be the model's tokenizer \(AutoTokenizer"):
        AttentionWidget.from_transformers(object(), None, "some text")


def test_a_models_widget_opens_where_its_weights_are_drawn():
    w = AttentionWidget.from_attentions(np.full((2, 2, 3, 3), 1 / 3), ["a", "b", "c"])
    assert w.stage == "weights"
    assert (
        AttentionWidget.from_attentions(np.full((1, 1, 3, 3), 1 / 3), ["a", "b", "c"], stage="tokens").stage == "tokens"
    )


def test_layers_of_other_shapes_are_refused_saying_which():
    """A tuple of layers with different numbers of heads or tokens, or a cache with a layer missing,
    is refused with which layer differs, instead of heads dropped, repeated or renumbered."""
    even = np.full((1, 2, 3, 3), 1 / 3)
    with pytest.raises(ValueError, match=r"layer 1 .*3 heads.*layer 0 .*2"):
        AttentionWidget.from_attentions((even, np.full((1, 3, 3, 3), 1 / 3)), ["a", "b", "c"])
    with pytest.raises(ValueError, match=r"layer 1 .*4 × 4.*layer 0 .*3 × 3"):
        AttentionWidget.from_attentions((even, np.full((1, 2, 4, 4), 1 / 4)), ["a", "b", "c"])
    cache = {f"blocks.{i}.attn.hook_pattern": np.full((1, 2, 3, 3), 1 / 3) for i in (0, 2)}
    with pytest.raises(ValueError, match=r"blocks\.1\.attn\.hook_pattern"):
        AttentionWidget.from_attentions(cache, ["a", "b", "c"])


def test_a_batch_of_texts_is_never_read_as_layers():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    batch = torch.softmax(torch.tensor(rng.normal(size=(2, 3, 4, 4))), dim=-1)  # one layer: 2 texts × 3 heads
    with pytest.raises(ValueError, match="holds a batch of 2 texts: give one text's weights"):
        AttentionWidget.from_attentions(batch, list("abcd"))
    one = AttentionWidget.from_attentions(batch[1:2], list("abcd"), head=2)  # the second text's layer
    assert one.n_layers == 1 and one.n_heads == 3
    np.testing.assert_allclose(one.weights, batch[1, 2].numpy(), atol=1e-12)
    stacked = AttentionWidget.from_attentions(batch.numpy(), list("abcd"), layer=1)  # numpy: layers × heads × …
    assert stacked.n_layers == 2


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    off=st.floats(-9e-5, 9e-5),
    dtype=st.sampled_from([np.float64, np.float32, np.float16]),
)
def test_weights_are_shown_as_given_each_row_divided_by_its_sum(seed, off, dtype):
    """ "As given" (from_attentions' docstring): at T = 1 each row divided by its sum, which is 1 within 1e-4."""
    rng = np.random.default_rng(seed)
    g = rng.random((2, 5, 5)) * (rng.random((2, 5, 5)) > 0.3)
    g[..., 0] += 0.01  # (no row all zeros)
    g /= g.sum(axis=-1, keepdims=True)
    g[..., 0, :] *= 1 + off  # a row summing to 1 + off
    given = g.astype(dtype)
    w = AttentionWidget.from_attentions(given, list("abcde"))
    exact = given.astype(float)
    exact = exact / exact.sum(axis=-1, keepdims=True)
    for h in range(2):
        w.head = h
        shown = np.asarray(w.weights)
        np.testing.assert_allclose(shown, exact[h], rtol=1e-12, atol=1e-15)
        assert np.abs(shown - given[h]).max() <= 1e-4 + (0 if dtype != np.float16 else 2e-3)
        assert (shown[given[h] == 0] == 0).all()
    w.temperature = 0.002  # re-tempered from the logarithms of the numbers given, not of their float32 roundings
    with np.errstate(divide="ignore"):
        s = np.log(given[w.head].astype(float)) / 0.002
    s = np.exp(s - s.max(axis=-1, keepdims=True))
    np.testing.assert_allclose(np.asarray(w.weights), s / s.sum(axis=-1, keepdims=True), rtol=1e-9, atol=1e-12)
