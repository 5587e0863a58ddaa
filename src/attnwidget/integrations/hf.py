"""Hugging Face transformers models: each layer's input, put through that layer's own
layer norm (where it comes before attention) and q/k/v projections, split into heads.
Encoder–decoder models given a target are read instead from what their q/k/v projections
output while the model runs.

Imported only by ``attnwidget.integrations.from_transformers``, after torch and
transformers are known to be importable.
"""

from __future__ import annotations

import contextlib
import inspect
import math
import numbers
import os
import pathlib

import numpy as np
import torch

from .common import ModelAttention, _check_readable, _tokens_of

BERT_FAMILY = ("bert", "roberta", "xlm-roberta", "camembert", "electra")
LLAMA_FAMILY = ("llama", "mistral", "qwen2")
BART_FAMILY = ("bart", "mbart", "marian")
WRITERS = ("gpt2", *LLAMA_FAMILY, "bloom")  # decoders that generate= can run: causal, one token at a time
SEQ2SEQ = (*BART_FAMILY, "t5")
SUPPORTED = (
    "BERT-family encoders (" + ", ".join((*BERT_FAMILY, "distilbert")) + "), "
    "GPT-2 (gpt2), LLaMA-style rotary decoders (" + ", ".join(LLAMA_FAMILY) + "), "
    "BLOOM (bloom, its ALiBi position bias added to the scores), "
    "T5's encoder (t5, its relative position bias added to the scores), "
    "and, with target=, encoder–decoder models: BART-family (" + ", ".join(BART_FAMILY) + ") "
    "and T5 (t5), with their encoder, decoder and cross-attention"
)


def extract(model, tokenizer, text: str, target: str | None = None, generate: int = 0) -> ModelAttention | dict[str, ModelAttention]:
    if isinstance(generate, bool) or not isinstance(generate, numbers.Integral):
        raise TypeError(f"generate must be a whole number of tokens to write, got {generate!r}")
    if generate < 0:
        raise ValueError(f"generate must be 0 or more tokens to write, got {generate}")
    generate = int(generate)
    base = _base_model(model)
    config = base.config
    kind = getattr(config, "model_type", None)
    if generate:
        _check_writer(model, kind)
    if target is not None:
        return _extract_seq2seq(model, base, tokenizer, text, target)
    if kind in BART_FAMILY:
        raise ValueError(
            f'{type(model).__name__} ({kind}) is an encoder–decoder model: pass target="…", the text '
            "its decoder writes, to read its encoder, decoder and cross-attention"
        )
    if kind in BERT_FAMILY:
        per_layer, causal = _bert_layer, bool(getattr(config, "is_decoder", False))
        pos = getattr(config, "position_embedding_type", "absolute") or "absolute"
        if pos != "absolute":  # older releases add relative-position terms to the scores
            raise NotImplementedError(f"{type(model).__name__}: position_embedding_type={pos!r} is not supported")
    elif kind == "distilbert":
        per_layer, causal = _distilbert_layer, False
    elif kind == "gpt2":
        per_layer, causal = _gpt2_layer, True
    elif kind in LLAMA_FAMILY:
        per_layer, causal = _llama_layer, True
    elif kind == "bloom":
        per_layer, causal = _bloom_layer, True
    elif kind == "t5":
        per_layer, causal = _t5_layer, False
    else:
        raise NotImplementedError(f"attnwidget cannot read attention from {type(model).__name__} (model_type {kind!r}); supported: {SUPPORTED}")

    enc = tokenizer(text, return_tensors="pt")
    ids = enc["input_ids"]
    prompt = ids.shape[1]
    if prompt == 0:
        raise ValueError(f"{text!r} gives no tokens")
    _check_readable(text, ids[0].tolist(), _display_name(config, model), _positions(config, kind), (config.vocab_size, "config.vocab_size"), generate)
    if kind in LLAMA_FAMILY:
        _check_window(config, prompt + generate)
    if generate:  # then read the whole text, the prompt and what the model wrote, by its ids
        ids = _greedy(model, ids, generate)
        enc = {"input_ids": ids, "attention_mask": torch.ones_like(ids)}
    n = ids.shape[1]

    device = next(base.parameters()).device
    body = base.encoder if kind == "t5" else base  # T5: its encoder's self-attention (the decoder needs a target)
    accepted = inspect.signature(body.forward).parameters  # DistilBERT takes no token_type_ids
    enc = {key: val.to(device) for key, val in enc.items() if key in accepted}
    with _evaluating(base), torch.no_grad():
        out = body(**enc, output_hidden_states=True)
        # hidden_states[i] is the input of layer i (the last entry is the final output)
        layers, scales = [], set()
        for i, layer in enumerate(_layers(base, kind)):
            q, k, v, scale = per_layer(base, layer, i, out.hidden_states[i])
            layers.append(tuple(_numpy(t) for t in (q, k, v)))
            scales.add(scale)
        bias = _bloom_bias(base, enc) if kind == "bloom" else _t5_bias(base.encoder, n) if kind == "t5" else None

    d_head = layers[0][0].shape[-1]
    if len(scales) > 1:
        raise NotImplementedError(
            f"{type(model).__name__} scales its attention scores differently in each layer "
            "(scale_attn_by_inverse_layer_idx); attnwidget takes one scale per model"
        )
    scale = scales.pop()
    return ModelAttention(
        tokens=_tokens_of(tokenizer, ids[0].tolist()),
        layers=layers,
        causal=causal,
        scale=None if math.isclose(scale, d_head**-0.5, rel_tol=1e-9) else float(scale),
        architecture=kind,
        model_name=_display_name(config, model),
        bias=None if bias is None else _numpy(bias),
        prompt_length=prompt if generate else None,
    )


def _check_writer(model, kind) -> None:
    """generate= writes with the model's own head: a decoder-only model that predicts the next token."""
    name = type(model).__name__
    head = getattr(model, "get_output_embeddings", None)
    if not callable(head) or head() is None:
        raise ValueError(f"generate= needs a model with a language-model head, such as GPT2LMHeadModel or LlamaForCausalLM (AutoModelForCausalLM); got {name}")
    if kind not in WRITERS:
        raise NotImplementedError(
            f"generate= needs a decoder-only model that writes one token at a time: GPT-2 (gpt2), LLaMA-style "
            f"({', '.join(LLAMA_FAMILY)}) or BLOOM (bloom); got {name} (model_type {kind!r})"
        )


def _greedy(model, ids, k: int):
    """``ids`` and then the model's own most likely next token, k times (greedy decoding: no
    sampling, beams or penalties), each read from the whole text so far. Stops early after an
    end-of-text token, as ``model.generate`` does."""
    config = getattr(model, "generation_config", None) or model.config
    eos = getattr(config, "eos_token_id", None)
    stop = set() if eos is None else {eos} if isinstance(eos, int) else set(eos)
    ids = ids.to(next(model.parameters()).device)
    with _evaluating(model), torch.no_grad():
        for _ in range(k):
            logits = model(input_ids=ids, attention_mask=torch.ones_like(ids), use_cache=False).logits
            ids = torch.cat([ids, logits[:, -1].argmax(dim=-1, keepdim=True)], dim=1)
            if ids[0, -1].item() in stop:
                break
    return ids.cpu()


def _extract_seq2seq(model, base, tokenizer, text: str, target: str) -> dict[str, ModelAttention]:
    """An encoder–decoder model's "encoder", "decoder" and "cross" attention, the decoder reading
    its start token then ``target``. q, k and v are what the model's own projections output
    during one forward pass, caught by hooks, so no layer norm or embedding is redone here."""
    config = base.config
    kind = getattr(config, "model_type", None)
    name = _display_name(config, model)
    if kind not in SEQ2SEQ:
        if getattr(config, "is_encoder_decoder", False):
            raise NotImplementedError(f"attnwidget cannot read attention from {type(model).__name__} (model_type {kind!r}); supported: {SUPPORTED}")
        raise ValueError(f"target= is for encoder–decoder models; {type(model).__name__} ({kind!r}) reads one text: call it without target=")
    if getattr(base, "encoder", None) is None or getattr(base, "decoder", None) is None:
        raise ValueError(
            f"{type(model).__name__} lacks an encoder or a decoder; target= needs the whole encoder–decoder "
            "model (e.g. T5ForConditionalGeneration, BartForConditionalGeneration)"
        )

    start = getattr(config, "decoder_start_token_id", None)
    if start is None:  # recent releases keep it in the generation config
        start = getattr(getattr(model, "generation_config", None), "decoder_start_token_id", None)
    if start is None:
        raise ValueError(f"{name} does not say which token its decoder starts with: set config.decoder_start_token_id")
    src = tokenizer(text)["input_ids"]
    # text_target= switches tokenizers with their own target conventions (Marian, mBART) to them
    takes_target = "text_target" in inspect.signature(tokenizer.__call__).parameters
    tgt = list(tokenizer(text_target=target)["input_ids"] if takes_target else tokenizer(target)["input_ids"])
    for t, ids in ((text, src), (target, tgt)):
        if not ids:
            raise ValueError(f"{t!r} gives no tokens")
    dec = [start, *tgt]
    positions = _positions(config, kind)
    _check_readable(text, src, name, positions, (config.vocab_size, "config.vocab_size"))
    # Marian can give its decoder a vocabulary of its own
    dec_vocab = getattr(config, "decoder_vocab_size", None)
    _check_readable(target, dec, name, positions, (dec_vocab, "config.decoder_vocab_size") if dec_vocab else (config.vocab_size, "config.vocab_size"))

    blocks = _seq2seq_attention(base, kind)
    outputs: dict[tuple, list] = {}  # (block, layer, 0/1/2 for q/k/v) -> each output of that projection

    def catch(key):
        return lambda module, args, out: outputs.setdefault(key, []).append(out)

    hooks = [
        proj.register_forward_hook(catch((block, i, j)))
        for block, atts in blocks.items()
        for i, att in enumerate(atts)
        for j, proj in enumerate(_qkv_projections(att))
    ]
    device = next(base.parameters()).device
    ids = torch.tensor([src], device=device)
    try:
        with _evaluating(base), torch.no_grad():
            # no cache: every projection runs once, on the whole sequence
            base(input_ids=ids, attention_mask=torch.ones_like(ids), decoder_input_ids=torch.tensor([dec], device=device), use_cache=False)
            bias = {"encoder": _t5_bias(base.encoder, len(src)), "decoder": _t5_bias(base.decoder, len(dec))} if kind == "t5" else {}
    finally:
        for hook in hooks:
            hook.remove()

    src_tokens, dec_tokens = _tokens_of(tokenizer, src), _tokens_of(tokenizer, dec)
    result = {}
    for block, atts in blocks.items():
        layers, scales = [], set()
        for i, att in enumerate(atts):
            d = _head_dim(att)
            qkv = []
            for j in range(3):
                seen = outputs.get((block, i, j), [])
                if len(seen) != 1:
                    raise RuntimeError(f"{name}: {block} layer {i}'s projection ran {len(seen)} times, expected once")
                qkv.append(_numpy(_heads(seen[0], d)))
            layers.append(tuple(qkv))
            # T5 has no scaling: its scores are QKᵀ (scale 1.0); BART-family modules say theirs
            scales.add(1.0 if kind == "t5" else float(getattr(att, "scaling", d**-0.5)))
        if len(scales) > 1:
            raise NotImplementedError(f"{name} scales its {block} attention scores differently in each layer")
        scale = scales.pop()
        b = bias.get(block)
        result[block] = ModelAttention(
            tokens=src_tokens if block == "encoder" else dec_tokens,
            layers=layers,
            causal=block == "decoder",
            scale=None if math.isclose(scale, d**-0.5, rel_tol=1e-9) else scale,
            architecture=kind,
            model_name=name,
            bias=None if b is None else _numpy(b),
            key_tokens=src_tokens if block == "cross" else None,
        )
    return result


def _seq2seq_attention(base, kind):
    """Each layer's attention module, per block: "encoder" and "decoder" self-attention, and the
    decoder's "cross"-attention to the encoder's output."""
    if kind == "t5":
        return {
            "encoder": [b.layer[0].SelfAttention for b in base.encoder.block],
            "decoder": [b.layer[0].SelfAttention for b in base.decoder.block],
            "cross": [b.layer[1].EncDecAttention for b in base.decoder.block],
        }
    return {
        "encoder": [layer.self_attn for layer in base.encoder.layers],
        "decoder": [layer.self_attn for layer in base.decoder.layers],
        "cross": [layer.encoder_attn for layer in base.decoder.layers],
    }


def _qkv_projections(att):
    return (att.q, att.k, att.v) if hasattr(att, "key_value_proj_dim") else (att.q_proj, att.k_proj, att.v_proj)


def _head_dim(att):
    return att.key_value_proj_dim if hasattr(att, "key_value_proj_dim") else att.head_dim


@contextlib.contextmanager
def _evaluating(base):
    """Dropout off, so the states are the model's real ones; each module's own mode back after."""
    modes = {m: m.training for m in base.modules()}
    base.eval()
    try:
        yield
    finally:
        for m, training in modes.items():
            m.training = training


def _display_name(config, model) -> str:
    name = getattr(config, "_name_or_path", "") or type(model).__name__
    if os.path.isdir(name):  # loaded from a folder: its last two parts read like "org/name"
        name = "/".join(pathlib.Path(name).resolve().parts[-2:])
    return name


def _base_model(model):
    """The transformer body: unwraps task heads and sentence-transformers wrappers."""
    from transformers import PreTrainedModel

    if not isinstance(model, PreTrainedModel):
        first = model[0] if hasattr(model, "__getitem__") and hasattr(model, "_first_module") else None
        inner = getattr(first, "auto_model", None)  # sentence_transformers.SentenceTransformer
        if not isinstance(inner, PreTrainedModel):
            raise NotImplementedError(
                f"attnwidget cannot read attention from {type(model).__name__}: expected a Hugging Face PreTrainedModel; supported: {SUPPORTED}"
            )
        model = inner
    return model.base_model


def _layers(base, kind):
    if kind in ("gpt2", "bloom"):
        return base.h
    if kind == "distilbert":
        return base.transformer.layer
    if kind in LLAMA_FAMILY:
        return base.layers
    if kind == "t5":
        return base.encoder.block
    return base.encoder.layer


def _heads(x, d_head):
    """(1, n, heads·d_head) -> (heads, n, d_head)."""
    return x[0].reshape(x.shape[1], -1, d_head).transpose(0, 1)


def _bert_layer(base, layer, i, h):
    att = layer.attention.self
    d = att.attention_head_size
    q, k, v = (_heads(proj(h), d) for proj in (att.query, att.key, att.value))
    return q, k, v, d**-0.5


def _distilbert_layer(base, layer, i, h):
    att = layer.attention
    d = att.dim // att.n_heads
    q, k, v = (_heads(proj(h), d) for proj in (att.q_lin, att.k_lin, att.v_lin))
    return q, k, v, d**-0.5


def _gpt2_layer(base, layer, i, h):
    att, config = layer.attn, base.config
    d = att.head_dim
    q, k, v = (_heads(t, d) for t in att.c_attn(layer.ln_1(h)).split(att.embed_dim, dim=2))
    # GPT2Attention's own rule, read from the config so it holds across releases
    scale = d**-0.5 if config.scale_attn_weights else 1.0
    if config.scale_attn_by_inverse_layer_idx:
        scale /= float(i + 1)
    return q, k, v, scale


def _llama_layer(base, layer, i, h):
    att = layer.self_attn
    d = att.head_dim
    x = layer.input_layernorm(h)
    q, k, v = (_heads(proj(x), d) for proj in (att.q_proj, att.k_proj, att.v_proj))
    position_ids = torch.arange(h.shape[1], device=h.device)[None]
    cos, sin = base.rotary_emb(h, position_ids)  # (1, n, d), as the model computes them
    q, k = (t * cos[0] + _rotate_half(t) * sin[0] for t in (q, k))
    # grouped-query attention: query head j reads key/value head j // group
    group = q.shape[0] // k.shape[0]
    k, v = (t.repeat_interleave(group, dim=0) for t in (k, v))
    return q, k, v, getattr(att, "scaling", d**-0.5)


def _bloom_layer(base, layer, i, h):
    att = layer.self_attention
    d = att.head_dim
    fused = att.query_key_value(layer.input_layernorm(h))  # (1, n, heads · 3 · d): each head's q, k, v side by side
    q, k, v = (fused[0].view(h.shape[1], att.num_heads, 3, d)[:, :, j].transpose(0, 1) for j in range(3))
    return q, k, v, att.inv_norm_factor


def _bloom_bias(base, enc):
    """BLOOM's ALiBi term, heads × n × n: each head adds slope · (key position) to every score
    of a row (the same, up to a constant per row, as penalising distance), as the model builds it."""
    n, heads = enc["input_ids"].shape[1], base.config.n_head
    mask = enc.get("attention_mask", torch.ones_like(enc["input_ids"]))
    alibi = base.build_alibi_tensor(mask, heads, dtype=torch.float32)  # (heads, 1, n)
    return alibi.reshape(heads, 1, n).expand(heads, n, n)


def _t5_layer(base, layer, i, h):
    part = layer.layer[0]  # the block's self-attention, with its layer norm first
    att = part.SelfAttention
    d = att.key_value_proj_dim
    x = part.layer_norm(h)
    q, k, v = (_heads(proj(x), d) for proj in (att.q, att.k, att.v))
    return q, k, v, att.scaling  # 1.0: T5 does not scale its scores


def _t5_bias(stack, n):
    """T5's relative position bias, heads × n × n: learnt per bucket of distance by the first
    layer of the encoder (or decoder) ``stack`` and added to the scores of its every layer, as
    the model does. The decoder's buckets tell earlier from later keys; its causal mask is not
    part of it. Cross-attention has none."""
    return stack.block[0].layer[0].SelfAttention.compute_bias(n, n)[0]


def _rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def _positions(config, kind):
    """How many tokens the model reads, and the config attribute that says so."""
    if kind == "gpt2":
        return config.n_positions, "config.n_positions"
    if kind == "bloom":  # ALiBi has no table of positions to run past
        return float("inf"), "ALiBi"
    if kind == "t5":  # relative positions: buckets of distance, none to run past
        return float("inf"), "relative positions"
    if kind in ("roberta", "xlm-roberta", "camembert"):  # positions are numbered from pad_token_id + 1
        return (config.max_position_embeddings - config.pad_token_id - 1, "config.max_position_embeddings - config.pad_token_id - 1")
    return config.max_position_embeddings, "config.max_position_embeddings"


def _check_window(config, n):
    """Sliding-window attention masks far-back keys; below the window it is plain causal."""
    window = getattr(config, "sliding_window", None)
    types = getattr(config, "layer_types", None)
    if window is not None and (types is None or "sliding_attention" in types) and n > window:
        raise NotImplementedError(f"{n} tokens exceed this model's sliding attention window of {window}; use a shorter text")


def _numpy(t) -> np.ndarray:
    return t.detach().to(device="cpu", dtype=torch.float64).numpy()
