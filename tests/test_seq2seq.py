"""Encoder–decoder models (BART, mBART, Marian, T5) read with a target: the encoder's, the
decoder's and the cross-attention's Q, K and V reproduce the model's own attention probabilities.

Models are tiny randomly initialised configs with the byte-level test tokenizer of
test_integrations; nothing is downloaded.
"""

import numpy as np
import pytest
from test_integrations import gpt2, gpt2_tokenizer, random_model, text_of, tf

import attnwidget
from attnwidget.integrations import ModelAttention, from_transformers

TEXT = "I sat on the riverbank."
TARGET = "I sat on the river"
BART_SIZES = dict(
    d_model=32,
    encoder_layers=2,
    decoder_layers=2,
    encoder_attention_heads=4,
    decoder_attention_heads=4,
    encoder_ffn_dim=64,
    decoder_ffn_dim=64,
    max_position_embeddings=64,
)
CONFIG = {"bart": "BartConfig", "mbart": "MBartConfig", "marian": "MarianConfig", "t5": "T5Config"}
MODEL = {
    "bart": "BartForConditionalGeneration",
    "mbart": "MBartForConditionalGeneration",
    "marian": "MarianMTModel",
    "t5": "T5ForConditionalGeneration",
}


def seq2seq(tf, tokenizer, kind, cls=None, **config):
    """A tiny random encoder–decoder model; id 0 (byte 0, never in the texts) pads, the
    tokenizer's last id (<|endoftext|>) begins, ends and starts the decoder."""
    last = len(tokenizer) - 1
    ids = dict(pad_token_id=0, bos_token_id=last, eos_token_id=last, decoder_start_token_id=last)
    sizes = (
        dict(
            d_model=64,
            d_kv=16,
            d_ff=128,
            num_layers=2,
            num_decoder_layers=2,
            num_heads=4,
            relative_attention_num_buckets=8,
        )
        if kind == "t5"
        else BART_SIZES
    )
    return random_model(tf, cls or MODEL[kind], CONFIG[kind], len(tokenizer), **{**ids, **sizes, **config})


def decoder_ids(model, tokenizer, target=TARGET):
    return [model.config.decoder_start_token_id, *tokenizer(text_target=target)["input_ids"]]


def assert_matches_model(model, tokenizer, text=TEXT, target=TARGET) -> dict[str, ModelAttention]:
    """For every block, layer and head, attnwidget's weights equal the model's own attentions."""
    import torch

    result = from_transformers(model, tokenizer, text, target=target)
    src = tokenizer(text, return_tensors="pt")
    dec = torch.tensor([decoder_ids(model, tokenizer, target)])
    with torch.no_grad():
        out = model(
            input_ids=src["input_ids"],
            attention_mask=src["attention_mask"],
            decoder_input_ids=dec,
            output_attentions=True,
        )
    reference = {"encoder": out.encoder_attentions, "decoder": out.decoder_attentions, "cross": out.cross_attentions}
    assert set(result) == set(reference)
    n_s, n_t = src["input_ids"].shape[1], dec.shape[1]
    rows = {"encoder": n_s, "decoder": n_t, "cross": n_t}
    columns = {"encoder": n_s, "decoder": n_t, "cross": n_s}
    for block, ma in result.items():
        assert isinstance(ma, ModelAttention) and ma.causal is (block == "decoder")
        assert len(ma.tokens) == rows[block]
        assert len(ma.key_tokens) == n_s if block == "cross" else ma.key_tokens is None
        assert len(ma.layers) == len(reference[block]) == 2
        for layer, (q, k, v) in enumerate(ma.layers):
            heads = reference[block][layer].shape[1]
            assert q.shape[:2] == (heads, rows[block]) and k.shape[:2] == v.shape[:2] == (heads, columns[block])
            assert q.dtype == k.dtype == v.dtype == np.float32  # the model's own precision
            for h in range(heads):
                bias = None if ma.bias is None else ma.bias[h]
                w = attnwidget.attention(q[h], k[h], v[h], causal=ma.causal, scale=ma.scale, bias=bias).weights
                np.testing.assert_allclose(
                    w,
                    reference[block][layer][0, h].double().numpy(),
                    atol=1e-5,
                    rtol=0,
                    err_msg=f"{block} layer {layer} head {h}",
                )
    # nothing of the reading is left on the model
    assert not any(m._forward_hooks for m in model.modules() if isinstance(m, torch.nn.Linear))
    from transformers import AttentionInterface

    assert "eager" not in AttentionInterface._global_mapping
    return result


@pytest.mark.parametrize("kind", ["bart", "mbart", "marian", "t5"])
def test_encoder_decoder_and_cross_attention_match_the_model(tf, gpt2_tokenizer, kind):
    model = seq2seq(tf, gpt2_tokenizer, kind)
    result = assert_matches_model(model, gpt2_tokenizer)
    source = ["I", "sat", "on", "the", "river", "·bank", "·."]
    decoder = ["<|endoftext|>", "I", "sat", "on", "the", "river"]
    assert result["encoder"].tokens == source and result["encoder"].key_tokens is None
    assert result["decoder"].tokens == decoder and result["decoder"].key_tokens is None
    assert result["cross"].tokens == decoder and result["cross"].key_tokens == source
    q, k, v = result["cross"].layers[1]
    assert q.shape == (4, 6, 16 if kind == "t5" else 8) and k.shape == v.shape == (4, 7, q.shape[2])
    for ma in result.values():
        assert ma.architecture == kind and ma.model_name == MODEL[kind]
        assert ma.scale == (1.0 if kind == "t5" else None)  # BART-family: the default 1/sqrt(d_head)
    if kind == "t5":  # relative position bias in both self-attentions, none in cross-attention
        assert result["encoder"].bias.shape == (4, 7, 7) and result["decoder"].bias.shape == (4, 6, 6)
        assert result["cross"].bias is None
        # both depend on distance alone; the decoder's puts every later key in one bucket (the
        # causal mask hides them), and is finite: the mask is not part of it
        for ma in (result["encoder"], result["decoder"]):
            n = len(ma.tokens)
            assert all(np.ptp(np.diagonal(ma.bias, offset, 1, 2), axis=1).max() < 1e-9 for offset in range(-n + 1, n))
        later = np.triu(np.ones((6, 6), bool))
        assert np.isfinite(result["decoder"].bias).all()
        assert np.ptp(result["decoder"].bias[:, later], axis=1).max() < 1e-9
        assert np.ptp(result["encoder"].bias[:, np.triu(np.ones((7, 7), bool))], axis=1).min() > 0
    else:
        assert all(ma.bias is None for ma in result.values())


@pytest.mark.parametrize("kind", ["bart", "t5"])
def test_the_widget_shows_every_block_layer_and_head_as_the_model_computes_it(tf, gpt2_tokenizer, kind):
    import torch

    model = seq2seq(tf, gpt2_tokenizer, kind)
    w = attnwidget.AttentionWidget.from_transformers(model, gpt2_tokenizer, TEXT, target=TARGET)
    src = gpt2_tokenizer(TEXT, return_tensors="pt")
    with torch.no_grad():
        out = model(**src, decoder_input_ids=torch.tensor([decoder_ids(model, gpt2_tokenizer)]), output_attentions=True)
    reference = {"encoder": out.encoder_attentions, "decoder": out.decoder_attentions, "cross": out.cross_attentions}
    assert w.block == "cross" and len(w.tokens) == 6 and len(w.key_tokens) == 7 and w.weights.shape == (6, 7)
    for block in ("encoder", "cross", "decoder"):  # switched as the page switches them
        w.set_state({"block": block})
        assert w.causal is (block == "decoder") and (w.bias is not None) is (kind == "t5" and block != "cross")
        for layer in range(2):
            w.set_state({"layer": layer})
            for head in range(4):
                w.head = head
                np.testing.assert_allclose(
                    w.weights,
                    reference[block][layer][0, head].double().numpy(),
                    atol=1e-5,
                    rtol=0,
                    err_msg=f"{block} layer {layer} head {head}",
                )
    summary = w.head_summary()  # the decoder's: a self-attention, with a previous token
    assert summary["previous"].shape == (2, 4) and not np.isnan(summary["previous"]).any()
    w.block = "cross"
    assert np.isnan(w.head_summary()["self"]).all()


@pytest.mark.parametrize("kind", ["bart", "t5"])
def test_base_models(tf, gpt2_tokenizer, kind):
    model = seq2seq(tf, gpt2_tokenizer, kind, cls="T5Model" if kind == "t5" else None)
    base = model if kind == "t5" else model.model
    assert type(base).__name__ in ("BartModel", "T5Model")
    assert_matches_model(base, gpt2_tokenizer)


def test_t5_without_target_is_its_encoder_as_before(tf, gpt2_tokenizer):
    model = seq2seq(tf, gpt2_tokenizer, "t5")
    alone = from_transformers(model, gpt2_tokenizer, TEXT)
    encoder = from_transformers(model, gpt2_tokenizer, TEXT, target=TARGET)["encoder"]
    assert isinstance(alone, ModelAttention) and alone.tokens == encoder.tokens and alone.key_tokens is None
    np.testing.assert_allclose(alone.bias, encoder.bias)
    for a, b in zip(alone.layers, encoder.layers):
        for x, y in zip(a, b):
            np.testing.assert_allclose(x, y, atol=1e-6)


@pytest.mark.parametrize("kind", ["bart", "mbart", "marian"])
def test_bart_family_without_target_asks_for_one(tf, gpt2_tokenizer, kind):
    with pytest.raises(ValueError, match=rf"{MODEL[kind]} \({kind}\) is an encoder–decoder model: pass target="):
        from_transformers(seq2seq(tf, gpt2_tokenizer, kind), gpt2_tokenizer, TEXT)


def test_target_for_a_model_without_a_decoder_is_refused(tf, gpt2_tokenizer):
    with pytest.raises(ValueError, match=r"target= is for encoder–decoder models; GPT2LMHeadModel \('gpt2'\)"):
        from_transformers(gpt2(tf, gpt2_tokenizer), gpt2_tokenizer, TEXT, target=TARGET)
    encoder_only = seq2seq(tf, gpt2_tokenizer, "t5", cls="T5EncoderModel")
    with pytest.raises(ValueError, match=r"T5EncoderModel lacks an encoder or a decoder"):
        from_transformers(encoder_only, gpt2_tokenizer, TEXT, target=TARGET)


def test_another_encoder_decoder_family_is_read_through_the_attention_interface(tf, gpt2_tokenizer):
    last = len(gpt2_tokenizer) - 1
    pegasus = random_model(
        tf,
        "PegasusForConditionalGeneration",
        "PegasusConfig",
        len(gpt2_tokenizer),
        pad_token_id=0,
        eos_token_id=last,
        decoder_start_token_id=last,
        **BART_SIZES,
    )
    result = assert_matches_model(pegasus, gpt2_tokenizer)  # once refused: no hand-written path for it
    assert result["cross"].key_tokens == result["encoder"].tokens


def test_text_or_target_without_tokens_is_refused(tf, gpt2_tokenizer):
    model = seq2seq(tf, gpt2_tokenizer, "bart")
    with pytest.raises(ValueError, match="'' gives no tokens"):
        from_transformers(model, gpt2_tokenizer, TEXT, target="")
    with pytest.raises(ValueError, match="'' gives no tokens"):
        from_transformers(model, gpt2_tokenizer, "", target=TARGET)


def test_target_longer_than_the_decoder_reads_is_refused(tf, gpt2_tokenizer):
    model = seq2seq(tf, gpt2_tokenizer, "bart")
    # the decoder reads the start token too: 63 target tokens fill its 64 positions
    assert (
        len(from_transformers(model, gpt2_tokenizer, TEXT, target=text_of(gpt2_tokenizer, 63))["decoder"].tokens) == 64
    )
    with pytest.raises(
        ValueError, match=r"is 65 tokens long but .* reads at most 64 positions \(config.max_position_embeddings\)"
    ):
        from_transformers(model, gpt2_tokenizer, TEXT, target=text_of(gpt2_tokenizer, 64))
    with pytest.raises(ValueError, match=r"is 65 tokens long"):
        from_transformers(model, gpt2_tokenizer, text_of(gpt2_tokenizer, 65), target=TARGET)


def test_start_token_outside_the_decoder_vocabulary_is_refused(tf, gpt2_tokenizer):
    model = seq2seq(tf, gpt2_tokenizer, "marian", decoder_start_token_id=len(gpt2_tokenizer))
    with pytest.raises(
        ValueError, match=rf"token id {len(gpt2_tokenizer)} is outside the model's vocabulary .*decoder_vocab_size"
    ):
        from_transformers(model, gpt2_tokenizer, TEXT, target=TARGET)


def test_missing_decoder_start_token_is_named(tf, gpt2_tokenizer):
    model = seq2seq(tf, gpt2_tokenizer, "mbart", decoder_start_token_id=None)
    with pytest.raises(ValueError, match=r"set config.decoder_start_token_id"):
        from_transformers(model, gpt2_tokenizer, TEXT, target=TARGET)


def test_dropout_is_off_and_each_module_keeps_its_training_mode(tf, gpt2_tokenizer):
    model = seq2seq(tf, gpt2_tokenizer, "bart", dropout=0.5, attention_dropout=0.5)
    expected = assert_matches_model(model, gpt2_tokenizer)  # built in eval mode
    model.train()
    model.model.encoder.eval()  # a mix: the encoder frozen, the rest training
    before = {name: m.training for name, m in model.named_modules()}
    result = from_transformers(model, gpt2_tokenizer, TEXT, target=TARGET)
    assert {name: m.training for name, m in model.named_modules()} == before
    for block in expected:
        for a, b in zip(expected[block].layers, result[block].layers):
            for x, y in zip(a, b):
                np.testing.assert_array_equal(x, y)
