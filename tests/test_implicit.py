"""The implicit attention of layers that are not attention (integrations/implicit.py): on tiny random
models of each family read, α · x is the layer's own scan output y (within 1e-5), in every such layer;
α is causal; the mean map, one channel and every channel agree; α is built block by block the same way
whatever the block; layers of other kinds are listed with why."""

import dataclasses
from unittest import mock

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from test_interface import tokenizer  # noqa: E402
from tiny_families import OVERRIDES, tiny_config  # noqa: E402

from attnwidget.integrations import implicit  # noqa: E402

TOL = 1e-5
SINGLE = {"granitemoehybrid", "minimax", "lfm2_moe"}  # (their experts' grouped matrix product takes no float64)
ONE_EXPERT = dict(num_experts=1, num_local_experts=1)  # (an MLP, which takes float64, not experts)
CONV = "gated short convolution"
KDA = "Kimi delta attention (gated DeltaNet, a decay per key channel)"
# (value heads twice the key heads: each key head read by two value heads; chunks shorter than the text)
DELTA = dict(linear_num_key_heads=2, linear_num_value_heads=4, linear_key_head_dim=8, linear_value_head_dim=8)
LONG = dict(max_position_embeddings=128)  # (texts longer than the gated delta rule's chunks of 64 tokens)
MAMBA2 = dict(num_heads=4, head_dim=16, n_groups=2, state_size=8, chunk_size=4)
# family -> (what its tiny config needs besides tiny_families', the kind of layer read, how many are read)
FAMILIES = {
    "mamba": ({}, "Mamba-1 selective state space", 2),
    "falcon_mamba": ({}, "Mamba-1 selective state space", 2),
    "jamba": (ONE_EXPERT, "Mamba-1 selective state space", 1),
    "mamba2": (MAMBA2, "Mamba-2 state space", 2),
    "bamba": (dict(mamba_n_groups=2), "Mamba-2 state space", 1),
    "nemotron_h": (dict(mamba_num_heads=4, mamba_head_dim=16, n_groups=2), "Mamba-2 state space", 1),
    "granitemoehybrid": ({}, "Mamba-2 state space", 1),
    "zamba2": ({}, "Mamba-2 state space", 2),
    "falcon_h1": (dict(mamba_chunk_size=4), "Mamba-2 state space", 2),
    "falcon_h1+norm": (dict(mamba_chunk_size=4, mamba_rms_norm=True), "Mamba-2 state space", 2),
    "qwen3_next": (dict(DELTA, mlp_only_layers=[0, 1], **LONG), "gated DeltaNet", 1),
    "qwen3_5_text": (dict(DELTA, **LONG), "gated DeltaNet", 1),
    "olmo_hybrid": (dict(linear_num_key_heads=2, linear_num_value_heads=4), "gated DeltaNet", 1),
    "olmo_hybrid+positive": (dict(linear_allow_neg_eigval=False), "gated DeltaNet", 1),
    "kimi_linear": (dict(mlp_layer_types=["dense", "dense"], linear_num_heads=4, linear_head_dim=8, **LONG), KDA, 1),
    "bailing_hybrid": ({}, KDA, 1),
    "minimax": (
        dict(block_size=4, num_local_experts=1, **LONG),
        "lightning attention (linear attention with a fixed decay per head)",
        1,
    ),
    "lfm2": ({}, CONV, 1),
    "lfm2_moe": ({}, CONV, 1),
    "recurrent_gemma": ({}, "Griffin's RG-LRU recurrence", 1),
}
# the submodule whose input is the scan's own output, by the layer's class (else Mamba's rules, in own_outputs)
NORM = {
    "Qwen3NextGatedDeltaNet": "norm",
    "Qwen3_5GatedDeltaNet": "norm",
    "MiniMaxLightningAttention": "norm",
    "Lfm2ShortConv": "out_proj",
    "Lfm2MoeShortConv": "out_proj",
}


def tiny(kind, seed=0):
    family = kind.split("+")[0]
    with mock.patch.dict(OVERRIDES, {family: {**OVERRIDES.get(family, {}), **FAMILIES[kind][0]}}):
        config = tiny_config(family, 64)
    torch.manual_seed(seed)
    model = transformers.AutoModel.from_config(config).eval()
    return model if family in SINGLE else model.double()


def ids(n=11, seed=1):
    return torch.randint(1, 60, (1, n), generator=torch.Generator().manual_seed(seed))


def own_outputs(model):
    """Each mixer's own scan output, caught by hooks of the test's own: the gated norm's input (Mamba-2), or
    the output projection's input, y ⊙ silu(z), and the mixer's input, z being recomputed from it."""
    seen, handles = {}, []

    def keep(key):
        return lambda module, args, kwargs: seen.update({key: args[0] if args else kwargs["hidden_states"]})

    for name, module in model.named_modules():
        norm = NORM.get(type(module).__name__, "o_norm" if hasattr(module, "o_norm") else None)
        if type(module).__name__ == "RecurrentGemmaRglru":  # (its output is y)
            handles.append(module.register_forward_hook(lambda m, a, out, name=name: seen.update({name: out})))
        elif norm is not None:
            handles.append(module.get_submodule(norm).register_forward_pre_hook(keep(name), with_kwargs=True))
        elif hasattr(module, "A_log") and hasattr(module, "out_proj"):
            if getattr(module, "mamba_rms_norm", True) and hasattr(module, "norm"):
                handles.append(module.norm.register_forward_pre_hook(keep(name), with_kwargs=True))
            else:
                handles.append(module.out_proj.register_forward_pre_hook(keep(name), with_kwargs=True))
                handles.append(module.register_forward_pre_hook(keep(name + ".in"), with_kwargs=True))
    return seen, handles


def gate(module, h):
    """z, n × width, as the mixer makes it: Mamba-1's second half of in_proj, Falcon-H1's first part."""
    if hasattr(module, "mup_vector"):
        return (module.in_proj(h * module.ssm_in_multiplier) * module.mup_vector)[0, :, : module.intermediate_size]
    return module.in_proj(h)[0].chunk(2, dim=-1)[1]


@pytest.mark.parametrize("kind", FAMILIES)
def test_alpha_times_x_is_the_layers_own_output(kind):
    model = tiny(kind)
    seen, handles = own_outputs(model)
    try:
        found = implicit.implicit_attention(model, input_ids=ids())
    finally:
        for h in handles:
            h.remove()
    words, count = FAMILIES[kind][1:]
    assert len(found.layers) == count and found.layers, found.skipped
    for layer in found.layers:
        assert layer.kind == words and layer.per == (
            "channel" if words in (FAMILIES["mamba"][1], CONV, FAMILIES["recurrent_gemma"][1]) else "head"
        )
        a = layer.alphas(dtype=np.float64)
        assert a.shape == (layer.count, 11, 11) and layer.x.shape[:2] == (layer.count, 11)
        np.testing.assert_allclose(a @ layer.x, layer.y, atol=TOL)  # the scan's output, from α
        assert np.abs(layer.y).max() > 1e-3  # (not a trivial zero)
        assert layer.error <= TOL
        assert np.all(np.triu(a, 1) == 0)  # causal: no token reads a later one
        own = seen[layer.module].reshape(11, -1)
        y = torch.from_numpy(np.einsum("cts,csp->tcp", a, layer.x).reshape(11, -1))
        if layer.module + ".in" in seen:  # (Mamba-1: the output projection reads y ⊙ silu(z))
            y = y * torch.nn.functional.silu(gate(model.get_submodule(layer.module), seen[layer.module + ".in"]))
        np.testing.assert_allclose(y.detach().numpy(), own.numpy(), atol=TOL)
    assert not set(found.skipped) & {layer.layer for layer in found.layers}
    assert sorted([*found.skipped, *(layer.layer for layer in found.layers)]) == list(range(2))


def test_the_layer_numbers_are_the_models_own():
    found = implicit.implicit_attention(tiny("jamba"), input_ids=ids())
    assert [layer.layer for layer in found.layers] == [0]
    assert found.skipped == {1: "softmax attention: read it with from_transformers"}


@pytest.mark.parametrize("kind", ["mamba", "bamba"])
def test_the_mean_map_one_channel_and_every_channel_agree(kind):
    layer = implicit.implicit_attention(tiny(kind), input_ids=ids()).layers[0]
    every = layer.alphas()
    assert every.dtype == np.float32 and layer.alpha().dtype == np.float32
    np.testing.assert_allclose(layer.alpha(), every.mean(0), atol=1e-6)
    np.testing.assert_array_equal(layer.alpha(3), every[3])
    np.testing.assert_array_equal(layer.alphas([3, 1]), every[[3, 1]])
    np.testing.assert_allclose(layer.alpha(channels=[1, 3]), every[[1, 3]].mean(0), atol=1e-6)
    # without the skip term D: α · x is y − D x, and only the diagonal changes
    bare = layer.alphas(skip=False, dtype=np.float64)
    D = layer.scan.D.numpy()
    np.testing.assert_allclose(bare @ layer.x, layer.y - D[:, None, None] * layer.x, atol=TOL)
    np.testing.assert_allclose(np.tril(bare, -1), np.tril(every, -1), atol=1e-6)
    np.testing.assert_allclose(layer.alpha(skip=False), bare.mean(0), atol=1e-6)
    np.testing.assert_allclose(layer.alpha(2, skip=False), bare[2], atol=1e-6)


@pytest.mark.parametrize("kind", ["mamba", "bamba"])
def test_alpha_is_the_same_whatever_the_block(kind, monkeypatch):
    layer = implicit.implicit_attention(tiny(kind), input_ids=ids(13)).layers[0]
    whole, mean = layer.alphas(dtype=np.float64), layer.alpha(dtype=np.float64)
    monkeypatch.setattr(implicit.scans, "BUDGET", 40)  # a few rows and channels at a time
    np.testing.assert_allclose(layer.alphas(dtype=np.float64), whole, atol=1e-12)
    np.testing.assert_allclose(layer.alpha(dtype=np.float64), mean, atol=1e-12)


@settings(max_examples=8, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    n=st.integers(1, 80),  # (past the gated delta rule's chunks of 64 tokens, and Mamba-2's of 4 here)
    kind=st.sampled_from(["mamba", "mamba2", "qwen3_5_text", "kimi_linear", "minimax"]),
)
def test_alpha_times_x_is_y_for_any_weights_and_length(seed, n, kind):
    layer = implicit.implicit_attention(tiny(kind, seed), input_ids=ids(n, seed)).layers[-1]
    # a float32 model's y is within float32's precision of its largest value (MiniMax's reach 90: 2e-5 apart)
    tol = TOL * max(1.0, np.abs(layer.y).max()) if kind in SINGLE else TOL
    np.testing.assert_allclose(layer.alphas(dtype=np.float64) @ layer.x, layer.y, atol=tol)
    assert layer.error <= TOL


@pytest.mark.parametrize("kind", ["qwen3_next", "kimi_linear"])
def test_the_delta_rule_is_read_across_the_models_chunks(kind):
    """70 tokens: the model's chunked delta rule carries its state from one chunk of 64 to the next."""
    layer = implicit.implicit_attention(tiny(kind), input_ids=ids(70)).layers[0]
    np.testing.assert_allclose(layer.alphas(dtype=np.float64) @ layer.x, layer.y, atol=TOL)
    assert layer.error <= TOL


def test_a_float32_model_is_read_within_its_precision():
    model = tiny("bamba").float()
    layer = implicit.implicit_attention(model, input_ids=ids()).layers[0]
    assert layer.error <= 1e-5
    np.testing.assert_allclose(layer.alphas(dtype=np.float64) @ layer.x, layer.y, atol=1e-5)


def test_text_is_read_with_its_tokenizer(tokenizer):
    config = tiny_config("mamba", len(tokenizer))
    torch.manual_seed(0)
    model = transformers.MambaForCausalLM(config).eval()
    found = implicit.implicit_attention(model, tokenizer, "I sat on the riverbank")
    n = len(tokenizer("I sat on the riverbank")["input_ids"])
    assert len(found.tokens) == n and found.layers[0].alpha().shape == (n, n)
    assert found.tokens[2] == "on"


def test_a_model_with_attention_alone_reads_nothing_and_says_why():
    config = transformers.LlamaConfig(
        vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4
    )
    found = implicit.implicit_attention(transformers.LlamaModel(config).eval(), input_ids=ids())
    assert found.layers == [] and set(found.skipped) == {0, 1}


@pytest.mark.parametrize(
    "kind, more, why",
    [
        ("xlstm", {}, {0: "xLSTM's mLSTM (xLSTMBlock): not read here"}),
        ("rwkv", {}, {0: "RWKV time mixing (RwkvBlock): not read here"}),
        ("lfm2", dict(conv_bias=True), {0: "gated short convolution at layers.0.conv: its convolution adds a bias"}),
    ],
)
def test_layers_of_kinds_not_read_are_listed_with_why(kind, more, why):
    with mock.patch.dict(OVERRIDES, {kind: {**OVERRIDES.get(kind, {}), **more}}):
        config = tiny_config(kind, 64)
    torch.manual_seed(0)
    found = implicit.implicit_attention(transformers.AutoModel.from_config(config).eval(), input_ids=ids())
    assert found.layers == []
    for number, start in why.items():
        assert found.skipped[number].startswith(start)


def test_a_reading_that_does_not_reproduce_the_layer_is_refused(monkeypatch):
    """The layer's inputs recomputed wrongly (here its time steps doubled) no longer give the layer's own
    output: the layer is listed with the measured difference, not returned."""
    own = implicit.readers.READERS["BambaMixer"]

    def wrong(module, h):
        scan, z = own.read(module, h)
        scan.dt = scan.dt * 2
        return scan, z

    monkeypatch.setitem(implicit.readers.READERS, "BambaMixer", dataclasses.replace(own, read=wrong))
    found = implicit.implicit_attention(tiny("bamba"), input_ids=ids())
    assert found.layers == []
    assert "does not reproduce the layer's own output" in found.skipped[0]
    assert found.skipped[1] == "softmax attention: read it with from_transformers"


def test_bad_input_says_what_to_give():
    model = tiny("mamba")
    with pytest.raises(TypeError, match="tokenizer and a text, or input_ids="):
        implicit.implicit_attention(model)
    with pytest.raises(ValueError, match="one sequence"):
        implicit.implicit_attention(model, input_ids=torch.ones(2, 3, dtype=torch.long))
    layer = implicit.implicit_attention(model, input_ids=ids()).layers[0]
    with pytest.raises(IndexError, match="channel 64 .* 64 channels"):
        layer.alpha(64)
