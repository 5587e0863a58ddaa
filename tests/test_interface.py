"""Reading models where they compute attention (transformers' attention interface): on random tiny
configs of every family below, the q, k, mask, scaling and softcap caught reproduce the model's own
eager `output_attentions`, layer by layer and head by head, and the model's forward pass is its own."""

import numpy as np
import pytest

from attnwidget.integrations.interface import capture

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

BASE = dict(
    vocab_size=64,
    hidden_size=32,
    intermediate_size=64,
    num_hidden_layers=2,
    num_attention_heads=4,
    max_position_embeddings=64,
)
N = 9  # tokens: longer than every sliding window below
FAMILIES = {
    "llama": dict(num_key_value_heads=2),
    "mistral": dict(num_key_value_heads=2, sliding_window=5),
    "gemma": dict(num_key_value_heads=1, head_dim=8),
    "gemma2": dict(
        num_key_value_heads=2, head_dim=8, sliding_window=5, attn_logit_softcapping=5.0, query_pre_attn_scalar=8
    ),
    "gemma3_text": dict(
        num_key_value_heads=2,
        head_dim=8,
        sliding_window=5,
        query_pre_attn_scalar=8,
        layer_types=["sliding_attention", "full_attention"],
    ),
    "phi": dict(),
    "phi3": dict(num_key_value_heads=2, pad_token_id=0),
    "gpt_neox": dict(),
    "opt": dict(ffn_dim=64, word_embed_proj_dim=32),
    "gptj": dict(n_embd=32, n_head=4, n_layer=2, rotary_dim=4, n_positions=64),
    "olmo": dict(num_key_value_heads=2),
    "starcoder2": dict(num_key_value_heads=2, sliding_window=5),
    "qwen3": dict(num_key_value_heads=2, head_dim=8),
    "albert": dict(embedding_size=16),
    "modernbert": dict(global_attn_every_n_layers=2, local_attention=4, num_hidden_layers=3, pad_token_id=0),
    "gpt2": dict(n_embd=32, n_head=4, n_layer=2, n_positions=64),
    "qwen2": dict(num_key_value_heads=2),
}


def tiny(family, implementation="eager"):
    torch.manual_seed(0)
    config = transformers.AutoConfig.for_model(family, **{**BASE, **FAMILIES[family]})
    return transformers.AutoModel.from_config(config, attn_implementation=implementation).eval()


@pytest.mark.parametrize("family", FAMILIES)
def test_what_is_caught_reproduces_the_models_own_attention(family):
    model = tiny(family)
    ids = torch.randint(1, 60, (1, N), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        out = model(input_ids=ids, output_attentions=True)
    caught = capture(model, input_ids=ids)
    assert len(caught) == len(out.attentions)
    for c, want in zip(caught, out.attentions):
        np.testing.assert_allclose(c.weights(), want[0].numpy(), atol=1e-5)
    # the pass is the model's own: the same output as without the capture
    with torch.no_grad():
        again = model(input_ids=ids).last_hidden_state
    np.testing.assert_allclose(again.numpy(), out.last_hidden_state.numpy(), atol=1e-6)
    if family in ("mistral", "starcoder2"):
        # a sliding window is a mask: the last token cannot read the first, although it comes before it
        assert not caught[0].open[N - 1, 0] and caught[0].open[N - 1, N - 1]
    if family == "gemma2":
        assert caught[0].softcap == 5.0


def test_a_half_precision_model_keeps_its_mask():
    ids = torch.randint(1, 60, (1, N), generator=torch.Generator().manual_seed(3))
    full, half = capture(tiny("mistral"), input_ids=ids), capture(tiny("mistral").half(), input_ids=ids)
    for a, b in zip(full, half):
        assert b.open is not None  # float16 closes cells with -65504, not -3.4e38
        np.testing.assert_array_equal(a.open, b.open)


def test_a_model_loaded_for_sdpa_reads_the_same_and_stays_sdpa():
    eager, fast = tiny("llama"), tiny("llama", "sdpa")
    ids = torch.randint(1, 60, (1, N), generator=torch.Generator().manual_seed(2))
    for a, b in zip(capture(eager, input_ids=ids), capture(fast, input_ids=ids)):
        np.testing.assert_array_equal(a.q, b.q)
        np.testing.assert_allclose(a.weights(), b.weights(), atol=1e-12)
    assert fast.config._attn_implementation == "sdpa"


def test_a_model_that_computes_attention_its_own_way_is_refused_by_name():
    class Handmade(torch.nn.Module):
        def forward(self, input_ids):
            return input_ids.float().softmax(-1)

    with pytest.raises(
        NotImplementedError, match=r"cannot read attention from Handmade .*without transformers' attention interface"
    ):
        capture(Handmade(), input_ids=torch.ones(1, 3))
    # and the interface is left as it was
    assert "eager" not in transformers.AttentionInterface._global_mapping


# --- from_transformers: the widget reads every family through the interface --------------

TEXT = "I sat on the riverbank and the river sat on the bank."  # longer than every window above


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    from test_integrations import gpt2_tokenizer

    return gpt2_tokenizer.__wrapped__(transformers, tmp_path_factory)


def model_for(family, tokenizer, head=False, implementation="eager"):
    torch.manual_seed(0)
    config = transformers.AutoConfig.for_model(family, **{**BASE, **FAMILIES[family], "vocab_size": len(tokenizer)})
    auto = transformers.AutoModelForCausalLM if head else transformers.AutoModel
    return auto.from_config(config, attn_implementation=implementation).eval()


@pytest.mark.parametrize("family", FAMILIES)
def test_the_widget_shows_every_layer_and_head_as_the_model_computes_it(family, tokenizer):
    from attnwidget import AttentionWidget

    model = model_for(family, tokenizer)
    enc = tokenizer(TEXT, return_tensors="pt")
    n = enc["input_ids"].shape[1]
    assert n > 5
    with torch.no_grad():
        reference = model(input_ids=enc["input_ids"], output_attentions=True).attentions
    w = AttentionWidget.from_transformers(model, tokenizer, TEXT)
    assert w.n_layers == len(reference) and len(w.tokens) == n
    windowed = []
    for layer in range(w.n_layers):
        w.set_state({"layer": layer})  # as the page switches layers: the layer's own mask comes with it
        windowed.append(w.mask is not None)
        for head in range(w.n_heads):
            w.head = head
            np.testing.assert_allclose(
                w.weights,
                reference[layer][0, head].double().numpy(),
                atol=1e-5,
                rtol=0,
                err_msg=f"layer {layer} head {head}",
            )
    # the overview's summaries: each layer at its own mask
    want = [
        [
            np.mean(np.exp(-np.sum(np.where(r > 0, r * np.log(np.where(r > 0, r, 1)), 0), axis=-1)))
            for r in reference[layer][0].double().numpy()
        ]
        for layer in range(w.n_layers)
    ]
    np.testing.assert_allclose(w.head_summary()["effective_tokens"], want, atol=1e-5)
    if family in ("mistral", "starcoder2"):  # a sliding window in every layer: one mask, shared
        assert all(windowed) and w.model_masks.shape == (1, n, n) and w.mask_of_layer == [0] * w.n_layers and w.causal
    if family in ("gemma2", "gemma3_text", "modernbert"):  # local and global layers
        assert any(windowed) and not all(windowed)
    if family == "modernbert":
        assert not w.causal  # local attention reads both ways
    if family == "gemma2":
        assert w.softcap == 5.0


def test_a_model_loaded_for_sdpa_reads_as_its_eager_twin(tokenizer):
    from attnwidget import AttentionWidget

    eager = AttentionWidget.from_transformers(model_for("mistral", tokenizer), tokenizer, TEXT)
    fast = AttentionWidget.from_transformers(model_for("mistral", tokenizer, implementation="sdpa"), tokenizer, TEXT)
    for layer in range(eager.n_layers):
        eager.layer = fast.layer = layer
        np.testing.assert_allclose(fast.weights, eager.weights, atol=1e-6)
        np.testing.assert_array_equal(fast.mask, eager.mask)


@pytest.mark.parametrize("family", ["mistral", "gemma2", "gpt_neox"])
def test_writing_past_a_sliding_window_is_the_models_own_attention_at_every_step(family, tokenizer):
    from attnwidget import AttentionWidget

    model = model_for(family, tokenizer, head=True)
    k = 4
    w = AttentionWidget.from_transformers(model, tokenizer, TEXT, generate=k)
    ids = tokenizer(TEXT, return_tensors="pt")["input_ids"]
    prompt = ids.shape[1]
    assert w.prompt_length == prompt and len(w.tokens) <= prompt + k
    whole = model.generate(ids, max_new_tokens=k, do_sample=False, num_beams=1, pad_token_id=0)[0]
    for s in range(prompt, len(whole) + 1):
        with torch.no_grad():
            reference = model(input_ids=whole[None, :s], output_attentions=True).attentions
        w.step = s
        for layer in range(w.n_layers):
            w.layer = layer
            for head in range(w.n_heads):
                w.head = head
                np.testing.assert_allclose(
                    w.weights,
                    reference[layer][0, head].double().numpy(),
                    atol=1e-5,
                    err_msg=f"step {s} layer {layer} head {head}",
                )


def test_a_models_arrays_are_kept_once_in_its_own_precision(tokenizer):
    from attnwidget import AttentionWidget
    from attnwidget.integrations import from_transformers

    model = model_for("llama", tokenizer)
    found = from_transformers(model, tokenizer, TEXT)
    assert all(a.dtype == np.float32 for layer in found.layers for a in layer)
    w = AttentionWidget._from_model(found, 1, 0, {})
    assert w.model_q.dtype == w.model_k.dtype == w.model_v.dtype == np.float32
    # the layer shown, the sources' layers and the model's own list are views of the one stack
    assert np.shares_memory(w.q, w.model_q) and np.shares_memory(w._sources.layer("", 0)["k"], w.model_k)
    assert all(np.shares_memory(q, w.model_q) for q, _, _ in found.layers)
    with pytest.raises(ValueError):
        w.model_q[0, 0, 0] = 1.0  # read-only: nothing can edit the widget's numbers behind its back
    # and the numbers are computed in float64, as the page computes them
    assert w.weights.dtype == np.float64


@pytest.mark.parametrize("family", FAMILIES)
def test_the_widget_names_where_position_enters_as_the_model_itself_does(family, tokenizer):
    """position and its words come from the model's config; checked here against the model's own
    modules: a rotary embedding (its base and the share of each head it turns, from its own
    frequencies) or a table of learned positions."""
    from attnwidget import AttentionWidget

    model = model_for(family, tokenizer)
    w = AttentionWidget.from_transformers(model, tokenizer, TEXT)
    rotary = [m for m in model.modules() if hasattr(m, "inv_freq")]
    tables = [
        n for n, m in model.named_modules() if isinstance(m, torch.nn.Embedding) and ("pos" in n or n.endswith("wpe"))
    ]
    assert (w.position, bool(w.position_about)) != ("", False)
    if w.position == "rope":
        assert not tables and w.position_about.startswith("RoPE, base ")
        head = model.config.hidden_size // model.config.num_attention_heads
        head = getattr(model.config, "head_dim", None) or head
        for m in rotary:
            f = m.inv_freq.double()
            if len(f) > 1:  # inv_freq[i] = base^(−i/len): one step down is base^(−1/len)
                assert f"{round(float((f[0] / f[1]) ** len(f))):,}" in w.position_about
            part = 2 * len(f) / head
            assert (f"{part:.0%} of each head rotated" in w.position_about) == (part != 1)
    else:
        assert (w.position, w.position_about) == ("learned", "learned positions, added to the tokens") and tables


# --- a family read wrong is refused, never shown -------------------------------------------


CHANGES = {
    "mixed": lambda w: w * 0.98 + 0.02 / w.shape[-1],  # a mix of the softmax with a uniform row
    "tempered": lambda w: torch.softmax(torch.log(w.float().clamp_min(1e-30)) * 1.05, -1).to(w.dtype),  # learnt T
    "reordered": lambda w: w.roll(1, dims=1),  # heads reordered
}
DTYPES = {"float32": None, "float64": "double", "float16": "half", "bfloat16": "bfloat16"}


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_every_family_reads_in_every_precision_with_no_false_refusal(family, dtype):
    """The check's bound holds the model's own rounding in each precision: no family is refused for it
    (a float64 model's softmax runs in float32; half precision adds its products up in float32)."""
    model = tiny(family)
    model = getattr(model, DTYPES[dtype])() if DTYPES[dtype] else model
    ids = torch.randint(1, 60, (1, N), generator=torch.Generator().manual_seed(1))
    assert len(capture(model, input_ids=ids)) == BASE["num_hidden_layers"] + (family == "modernbert")


@pytest.mark.parametrize(
    ("change", "dtype"),
    [(c, d) for c in CHANGES for d in ("float32", "float64", "float16") if (c, d) != ("tempered", "float16")],
)  # (a 5 % temperature on this tiny model's near-uniform rows is below float16's rounding)
def test_a_family_whose_attention_is_not_what_is_caught_is_refused(change, dtype, monkeypatch, tokenizer):
    """Every call is held to the model's own result: a family whose attention function computes
    something other than the softmax of what it was handed is refused, naming it and the layer."""
    from transformers.models.llama import modeling_llama

    from attnwidget import AttentionWidget

    own = modeling_llama.eager_attention_forward

    def altered(module, query, key, value, attention_mask, **kwargs):
        _, w = own(module, query, key, value, attention_mask, **kwargs)
        w = CHANGES[change](w)
        groups = query.shape[1] // key.shape[1]
        return (w @ value.repeat_interleave(groups, dim=1)).transpose(1, 2).contiguous(), w

    monkeypatch.setattr(modeling_llama, "eager_attention_forward", altered)
    model = model_for("llama", tokenizer)
    model = getattr(model, DTYPES[dtype])() if DTYPES[dtype] else model
    with pytest.raises(NotImplementedError, match=r"LlamaModel \(model_type 'llama'\).*layer 0.*differ"):
        AttentionWidget.from_transformers(model, tokenizer, TEXT)


def test_heads_reordered_are_refused_in_bfloat16_too(monkeypatch):
    """bfloat16's rounding (ε = 2⁻⁷) hides small changes, not a head's weights shown as another's."""
    from transformers.models.llama import modeling_llama

    own = modeling_llama.eager_attention_forward

    def altered(module, query, key, value, attention_mask, **kwargs):
        out, w = own(module, query, key, value, attention_mask, **kwargs)
        return out, w.roll(1, dims=1)

    model = tiny("llama")
    with torch.no_grad():  # sharper rows than a random model's near-uniform ones: heads that differ
        for layer in model.layers:
            layer.self_attn.q_proj.weight *= 8
            layer.self_attn.k_proj.weight *= 8
    ids = torch.randint(1, 60, (1, N), generator=torch.Generator().manual_seed(1))
    capture(model.bfloat16(), input_ids=ids)  # read as it is
    monkeypatch.setattr(modeling_llama, "eager_attention_forward", altered)
    with pytest.raises(NotImplementedError, match=r"layer 0.*differ"):
        capture(model, input_ids=ids)


def test_a_family_that_returns_no_weights_is_held_to_its_output(monkeypatch, tokenizer):
    """Where the attention function returns its output alone, that output is the check: a right one
    reads, a wrong one is refused."""
    from transformers.models.llama import modeling_llama

    from attnwidget import AttentionWidget

    own = modeling_llama.eager_attention_forward
    for factor, ok in ((1.0, True), (1.01, False)):

        def outputs_only(module, query, key, value, attention_mask, factor=factor, **kwargs):
            out, _ = own(module, query, key, value, attention_mask, **kwargs)
            return out * factor, None

        monkeypatch.setattr(modeling_llama, "eager_attention_forward", outputs_only)
        model = model_for("llama", tokenizer)
        if ok:
            AttentionWidget.from_transformers(model, tokenizer, TEXT)
        else:
            with pytest.raises(NotImplementedError, match=r"layer 0.*differ"):
                AttentionWidget.from_transformers(model, tokenizer, TEXT)
