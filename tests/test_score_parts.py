"""w.score_parts and integrations.score_parts: a model's score at a cell split into (query part, key part)
pairs of the residual stream, the layer's norm held at its scale.

Checked: the pairs sum to the model's own score at every cell of every head (its q and k, caught where
it computes attention) for every pre-norm family the tiny sweep has, float32 and float64; the parts sum
to the stream each layer reads; removing a part made by hand (the token embedding's rows, one head's
slice of the output projection) from the attention's input changes the score by exactly that part's
row and column; random Llamas (hypothesis); the widget's defaults, its row and its refusals. Tiny
random models; nothing is downloaded."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_integrations import TEXT, gpt2_tokenizer, minilm, random_model, tf
from tiny_families import tiny_config

from attnwidget import AttentionWidget
from attnwidget.integrations import score_parts
from attnwidget.integrations.interface import capture

# every pre-norm family of the tiny sweep whose stream and norms are held (GPT-2's absolute positions and biases,
# Llama's grouped heads and rotary, Qwen 2's q and k biases, Qwen 3's norms of each head's query and key, Gemma's
# 1 + w gains and scaled embedding, GPT-NeoX's and Phi's parallel blocks and partial rotary, OLMo's LayerNorm without
# a gain, gpt-oss's learnt sinks, Persimmon's centred query and key norms)
SPLIT = (
    *("gpt2", "llama", "gpt_neox", "mistral", "qwen2", "qwen3", "gemma", "phi", "olmo", "cohere", "gpt_bigcode"),
    *("gpt_oss", "persimmon"),
)
# refused, and what the refusal must say
REFUSED = {
    "olmo2": "does not read a norm of the stream",  # its norms after attention and MLP
    "gemma2": "caps its scores",
    "gemma3_text": "is not its input \\+ its attention.s output \\+ its MLP.s",  # its norms after attention and MLP
    "opt": "no MLP module",
}
ROUND = 1e-5  # float32: |Σ pairs − score| ≤ this × scaling · ‖q‖ · ‖k‖, the largest score those q and k could make


def tiny(tf, kind, dtype=None):
    import torch
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    torch.manual_seed(0)
    config = tiny_config(kind, 64)
    config._attn_implementation = "eager"
    model = getattr(tf, MODEL_FOR_CAUSAL_LM_MAPPING_NAMES[kind])(config).eval()
    return model if dtype is None else model.to(dtype)


IDS = [5, 17, 3, 42, 8, 17, 29, 60, 11, 5]


def worst(stream) -> float:
    """The largest |Σ pairs − the model's score| over every cell j ≤ i of every head, over scaling · ‖q‖ · ‖k‖;
    the model's q and k as capture() reads them, where the model computes attention."""
    import torch

    out = 0.0
    for number, layer in enumerate(capture(stream.model, input_ids=torch.tensor([stream.ids]))):
        heads = layer.q.shape[0]  # (capture repeats grouped keys to the query heads)
        for h in range(heads):
            for i in range(len(stream.ids)):
                for j in range(i + 1):
                    found = stream.cell(number, h, i, j)
                    q, k = layer.q[h, i].astype(float), layer.k[h, j].astype(float)
                    assert found.score == pytest.approx(layer.scaling * q @ k, rel=1e-6, abs=1e-6 * abs(q) @ abs(k))
                    out = max(
                        out, abs(found.total - found.score) / (layer.scaling * np.linalg.norm(q) * np.linalg.norm(k))
                    )
    return out


@pytest.mark.parametrize("kind", SPLIT)
def test_the_pairs_sum_to_the_models_own_score_at_every_cell(tf, kind):
    assert worst(score_parts.read(tiny(tf, kind), IDS)) <= ROUND


@pytest.mark.parametrize("kind", ["gpt2", "gpt_neox"])
def test_in_float64_the_pairs_sum_to_the_score_to_float64s_rounding(tf, kind):
    import torch

    assert worst(score_parts.read(tiny(tf, kind, torch.float64), IDS)) <= 1e-12


@pytest.mark.parametrize("kind", ["gpt2", "llama", "gpt_neox"])
def test_the_parts_sum_to_the_stream_each_layer_reads(tf, kind):
    import torch

    model = tiny(tf, kind, torch.float64)
    with torch.no_grad():
        states = model(input_ids=torch.tensor([IDS]), output_hidden_states=True).hidden_states
    stream = score_parts.read(model, IDS)
    for layer in range(len(stream.layers)):
        names, groups, parts = stream.parts(layer, list(range(len(IDS))))
        assert len(names) == len(groups) == len(parts)
        np.testing.assert_allclose(parts.sum(0), states[layer][0].numpy(), rtol=0, atol=1e-12)


@pytest.mark.parametrize("kind", ["hunyuan_v1_dense", "qwen3"])
@pytest.mark.parametrize("n", [1, 2, 4, 8])  # as long as a count of heads or key heads, or a head's width
def test_a_text_as_long_as_an_axis_of_the_heads_splits_too(tf, kind, n):
    assert worst(score_parts.read(tiny(tf, kind), IDS[:n])) <= ROUND


def test_a_half_precision_model_is_refused_saying_how_to_load_it(tf):
    import torch

    with pytest.raises(NotImplementedError, match=r"bfloat16.*model\.float\(\)"):
        score_parts.read(tiny(tf, "llama", torch.bfloat16), IDS)


@pytest.mark.parametrize("kind, why", REFUSED.items())
def test_a_family_whose_score_is_not_a_sum_of_pairs_is_refused_saying_why(tf, kind, why):
    with pytest.raises(NotImplementedError, match=why):
        score_parts.read(tiny(tf, kind), IDS).cell(1, 0, 5, 2)


def test_a_post_norm_bert_is_refused_in_the_widget_and_its_state_kept(minilm):
    model, tokenizer = minilm
    w = AttentionWidget.from_transformers(model, tokenizer, TEXT)
    before = w.get_state()
    with pytest.raises(ValueError, match="pre-norm"):
        w.score_parts(2, 1)
    assert w.get_state() == before


# --- linearity: a part removed by hand from what the attention reads ------------------------------------------


def _score(model, ids, layer, head, i, j, edit=None) -> float:
    """The model's own score at (i, j), with ``edit(u)`` applied to what layer ``layer``'s attention reads."""
    attention = [m for m in model.modules() if type(m).__name__.endswith("Attention")][layer]

    def change(module, args, kwargs):
        if "hidden_states" in kwargs:
            return args, {**kwargs, "hidden_states": edit(kwargs["hidden_states"])}
        return (edit(args[0]), *args[1:]), kwargs

    hook = attention.register_forward_pre_hook(change, with_kwargs=True) if edit else None
    import torch

    try:
        call = capture(model, input_ids=torch.tensor([ids]))[layer]
    finally:
        if hook:
            hook.remove()
    groups = call.q.shape[0] // call.k.shape[0]
    return call.scaling * float(call.q[head, i].astype(float) @ call.k[head // groups, j].astype(float))


@pytest.mark.parametrize("kind", ["gpt2", "llama"])
def test_removing_a_part_from_the_stream_changes_the_score_by_its_row_and_column(tf, kind):
    import torch

    model = tiny(tf, kind, torch.float64)
    layer, head, i, j = 1, 2, 8, 3
    ids = torch.tensor([IDS])
    block = next(m for m in model.modules() if type(m).__name__.endswith("Attention"))
    out_proj = block.c_proj if kind == "gpt2" else block.o_proj
    seen = {}
    hooks = [out_proj.register_forward_pre_hook(lambda m, a: seen.__setitem__("z", a[0].detach().clone()))]
    norms = [m for m in model.modules() if "Norm" in type(m).__name__]
    first_norm = norms[2]  # the norm before layer 1's attention (ln_1 / input_layernorm of block 1)
    hooks.append(first_norm.register_forward_pre_hook(lambda m, a: seen.__setitem__("x", a[0].detach().clone())))
    with torch.no_grad():
        model(input_ids=ids)
    for h in hooks:
        h.remove()
    width = seen["z"].shape[-1] // 4
    weight = out_proj.weight if kind == "gpt2" else out_proj.weight.T
    by_hand = {
        "the embedding": (model.transformer.wte if kind == "gpt2" else model.model.embed_tokens).weight[ids[0]],
        "layer 0 head 1": seen["z"][0, :, width : 2 * width] @ weight[width : 2 * width],
    }
    x = seen["x"][0]
    if kind == "gpt2":  # the norm held: LayerNorm's gain over σ at each position, the part centred
        sigma = (x.var(-1, unbiased=False, keepdim=True) + first_norm.eps).sqrt()
        held = lambda p: first_norm.weight * (p - p.mean(-1, keepdim=True)) / sigma
    else:  # RMSNorm's gain over the RMS at each position
        rms = (x.pow(2).mean(-1, keepdim=True) + first_norm.variance_epsilon).sqrt()
        held = lambda p: first_norm.weight * p / rms
    table = score_parts.read(model, IDS).cell(layer, head, i, j)
    score = _score(model, IDS, layer, head, i, j)
    close = 1e-9 if kind == "gpt2" else 1e-6  # (Llama's RMSNorm computes in float32 even in a float64 model)
    assert table.total == pytest.approx(score, abs=close)
    for name, part in by_hand.items():
        a = next(n for n, label in enumerate(table.query) if label.startswith(name.split(" of")[0]) or label == name)
        change = _score(model, IDS, layer, head, i, j, edit=lambda u, part=part: u - held(part)[None])
        own = table.table[a].sum() + table.table[:, a].sum() - table.table[a, a]
        assert change - score == pytest.approx(-own, abs=close), name
        assert abs(own) > 1e-3  # (a part that moves the score)


# --- random models ---------------------------------------------------------------------------------------------


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    heads=st.sampled_from([(4, 4), (4, 2), (4, 1), (2, 2)]),
    layers=st.integers(1, 3),
    bias=st.booleans(),
    seed=st.integers(0, 2**16),
    n=st.integers(1, 9),
)
def test_random_llamas_split_exactly(tf, heads, layers, bias, seed, n):
    import torch

    torch.manual_seed(seed)
    config = tf.LlamaConfig(
        vocab_size=64,
        hidden_size=32,
        intermediate_size=48,
        num_hidden_layers=layers,
        num_attention_heads=heads[0],
        num_key_value_heads=heads[1],
        attention_bias=bias,
        initializer_range=0.3,
        attn_implementation="eager",
    )
    model = tf.LlamaForCausalLM(config).eval()
    ids = list(np.random.default_rng(seed).integers(0, 64, n))
    assert worst(score_parts.read(model, ids)) <= ROUND


# --- the widget --------------------------------------------------------------------------------------------------


def _llama(tf, tokenizer, layers: int, **config):
    """A tiny random Llama of ``layers`` layers over the tokenizer's vocabulary."""
    return random_model(
        tf,
        "LlamaForCausalLM",
        "LlamaConfig",
        len(tokenizer),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=layers,
        num_attention_heads=4,
        initializer_range=0.3,
        **config,
    )


@pytest.fixture(scope="module")
def widget(tf, gpt2_tokenizer):
    model = _llama(tf, gpt2_tokenizer, layers=3, num_key_value_heads=2)
    return AttentionWidget.from_transformers(model, gpt2_tokenizer, "She sat by the river bank")


def test_the_widgets_cell_is_the_layer_head_and_focus_shown_and_sums_to_its_score(widget):
    w = widget
    w.layer, w.head, w.focus = 2, 3, len(w.tokens) - 1
    found = w.score_parts(column=1)
    assert (found.layer, found.head, found.row, found.column) == (2, 3, len(w.tokens) - 1, 1)
    scale = w.scale or w.q.shape[-1] ** -0.5
    own = scale * float(np.asarray(w.q)[3, -1] @ np.asarray(w.k)[3, 1])
    assert found.total == pytest.approx(own, rel=1e-5) and found.score == pytest.approx(own, rel=1e-5)
    assert (
        found.key[0] == f"the embedding of {w.tokens[1]!r}" and found.query[0] == f"the embedding of {w.tokens[-1]!r}"
    )
    again = w.score_parts(len(w.tokens) - 1, 1, layer=2, head=3)
    np.testing.assert_array_equal(again.table, found.table)
    layers = found.by_layer()
    assert layers.total == pytest.approx(found.total, rel=1e-12)
    assert layers.query == [found.query[0], "layer 0", "layer 1", "biases"]
    top = found.largest(5)
    assert [abs(v) for _, _, v in top] == sorted((abs(v) for _, _, v in top), reverse=True)
    assert abs(top[0][2]) == np.abs(found.table).max()


def test_the_widgets_row_gives_every_keys_score_by_layer(widget):
    w = widget
    w.layer, w.head = 1, 2
    row = w.score_parts(4)
    scale = w.scale or w.q.shape[-1] ** -0.5
    own = scale * np.asarray(w.k)[2, :5] @ np.asarray(w.q)[2, 4]
    np.testing.assert_allclose(row.terms.sum((0, 1)), own, rtol=1e-5, atol=1e-6)
    assert row.keys == [0, 1, 2, 3, 4] and row.table.sum() == pytest.approx(1.0)
    assert row.query == [f"the embedding of {w.tokens[4]!r}", "layer 0", "biases"]


@pytest.mark.parametrize(
    "call, said",
    [
        (lambda w: w.score_parts(99, 0), "row 99 is not one of"),
        (lambda w: w.score_parts(2, 50), "column 50 is not one of the"),
        (lambda w: w.score_parts(2, 1, layer=7), "layer 7 is not one of"),
        (lambda w: w.score_parts(2, 1, head=9), "head 9 is not one of"),
        (lambda w: w.score_parts("2", 1), "row must be an integer index; got '2'"),
        (lambda w: w.score_parts(2, 1.5), "column must be an integer index; got 1.5"),
        (lambda w: w.score_parts(2, 1, layer=0.5), "layer must be an integer index"),
        (lambda w: w.score_parts(2, 4), r"cell \(2, 4\) is closed: the causal rule"),
    ],
)
def test_a_cell_not_in_the_model_is_refused_and_the_state_kept(widget, call, said):
    before = widget.get_state()
    with pytest.raises(ValueError, match=said):
        call(widget)
    assert widget.get_state() == before


def test_a_widget_without_a_model_says_what_score_parts_needs():
    w = AttentionWidget("She sat by the river bank")
    with pytest.raises(ValueError, match="from_transformers"):
        w.score_parts(1, 0)


def test_the_page_is_answered_with_the_cells_largest_pairs_while_a_cell_is_shown(widget):
    from attnwidget import computed_views

    w = widget
    w.layer, w.head, w.cell = 2, 1, None
    assert not computed_views.asked("score_parts", w._inputs().state)  # (no cell: nothing to split)
    w.cell = (5, 2)
    state = w._inputs().state
    assert computed_views.asked("score_parts", state)
    assert not computed_views.asked("score_parts", {**state, "reads_model": False})
    w._answer("score_parts")
    answer = w.computed["score_parts"]
    found = w.score_parts(5, 2)
    assert [(p["query"], p["key"], p["value"]) for p in answer["pairs"]] == found.largest(8)
    assert [(p["query"], p["key"], p["value"]) for p in answer["layers"]] == found.by_layer().largest(8)
    assert (answer["count"], answer["total"], answer["score"]) == (found.table.size, found.total, found.score)
    assert computed_views.current("score_parts", answer, w._inputs())
    w.cell = (5, 3)  # another cell: the answer held is not its
    assert not computed_views.current("score_parts", answer, w._inputs())


def test_a_model_changed_in_place_is_read_again(tf, gpt2_tokenizer):
    import torch

    model = _llama(tf, gpt2_tokenizer, layers=2)
    w = AttentionWidget.from_transformers(model, gpt2_tokenizer, "She sat by the river bank", layer=1)
    before = w.score_parts(4, 2)
    with torch.no_grad():
        model.model.layers[0].mlp.down_proj.weight.mul_(3.0)  # (as an optimiser's step does: in place)
    after = w.score_parts(4, 2)
    fresh = score_parts.read(model, list(w._rerun().ids)).cell(1, w.head, 4, 2)
    assert after.total == pytest.approx(fresh.total, rel=1e-12) and after.total != pytest.approx(before.total)


def test_a_model_not_split_is_said_in_the_page_and_its_export_goes_on(minilm):
    from attnwidget import why

    model, tokenizer = minilm
    w = AttentionWidget.from_transformers(model, tokenizer, TEXT, stage="scores")
    w.cell = (2, 1)
    assert "pre-norm" in why.for_page(w._inputs())["error"]
    state = w.page_state()["state"]  # (what an export carries: the refusal, said in its page)
    assert "pre-norm" in state["computed"]["score_parts"]["error"]


def test_any_failure_to_split_is_said_and_an_export_goes_on(widget, monkeypatch):
    def failing(*args, **kwargs):
        raise RuntimeError("Expected all tensors to be on the same device")

    widget.cell = (3, 1)
    monkeypatch.setattr(widget._rerun(), "kept", {})  # (read again, failing)
    monkeypatch.setattr(score_parts, "read", failing)
    state = widget.page_state()["state"]
    assert state["computed"]["score_parts"]["error"] == "Expected all tensors to be on the same device"
