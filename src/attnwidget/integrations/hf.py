"""Hugging Face transformers models: each layer's input, put through that layer's own
layer norm (where it comes before attention) and q/k/v projections, split into heads.

Imported only by ``attnwidget.integrations.from_transformers``, after torch and
transformers are known to be importable.
"""

from __future__ import annotations

import inspect
import math
import os
import pathlib

import numpy as np
import torch

from .common import ModelAttention, _check_readable, _tokens_of

BERT_FAMILY = ("bert", "roberta", "xlm-roberta", "camembert", "electra")
LLAMA_FAMILY = ("llama", "mistral", "qwen2")
SUPPORTED = (
    "BERT-family encoders (" + ", ".join((*BERT_FAMILY, "distilbert")) + "), "
    "GPT-2 (gpt2), LLaMA-style rotary decoders (" + ", ".join(LLAMA_FAMILY) + "), "
    "BLOOM (bloom, its ALiBi position bias added to the scores), "
    "T5's encoder (t5, its relative position bias added to the scores)"
)


def extract(model, tokenizer, text: str) -> ModelAttention:
    base = _base_model(model)
    config = base.config
    kind = getattr(config, "model_type", None)
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
        raise NotImplementedError(
            f"attnwidget cannot read attention from {type(model).__name__} (model_type {kind!r}); "
            f"supported: {SUPPORTED}"
        )

    enc = tokenizer(text, return_tensors="pt")
    ids = enc["input_ids"]
    n = ids.shape[1]
    if n == 0:
        raise ValueError(f"{text!r} gives no tokens")
    _check_readable(text, ids[0].tolist(), _display_name(config, model), _positions(config, kind),
                    (config.vocab_size, "config.vocab_size"))
    if kind in LLAMA_FAMILY:
        _check_window(config, n)

    device = next(base.parameters()).device
    body = base.encoder if kind == "t5" else base  # T5: its encoder's self-attention (the decoder needs a target)
    accepted = inspect.signature(body.forward).parameters  # DistilBERT takes no token_type_ids
    enc = {key: val.to(device) for key, val in enc.items() if key in accepted}
    was_training = base.training
    base.eval()  # dropout off, so the hidden states are the model's real ones
    try:
        with torch.no_grad():
            out = body(**enc, output_hidden_states=True)
            # hidden_states[i] is the input of layer i (the last entry is the final output)
            layers, scales = [], set()
            for i, layer in enumerate(_layers(base, kind)):
                q, k, v, scale = per_layer(base, layer, i, out.hidden_states[i])
                layers.append(tuple(_numpy(t) for t in (q, k, v)))
                scales.add(scale)
            bias = _bloom_bias(base, enc) if kind == "bloom" else _t5_bias(base, n) if kind == "t5" else None
    finally:
        base.train(was_training)

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
        scale=None if math.isclose(scale, d_head ** -0.5, rel_tol=1e-9) else float(scale),
        architecture=kind,
        model_name=_display_name(config, model),
        bias=None if bias is None else _numpy(bias),
    )


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
                f"attnwidget cannot read attention from {type(model).__name__}: expected a Hugging Face "
                f"PreTrainedModel; supported: {SUPPORTED}"
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
    return q, k, v, d ** -0.5


def _distilbert_layer(base, layer, i, h):
    att = layer.attention
    d = att.dim // att.n_heads
    q, k, v = (_heads(proj(h), d) for proj in (att.q_lin, att.k_lin, att.v_lin))
    return q, k, v, d ** -0.5


def _gpt2_layer(base, layer, i, h):
    att, config = layer.attn, base.config
    d = att.head_dim
    q, k, v = (_heads(t, d) for t in att.c_attn(layer.ln_1(h)).split(att.embed_dim, dim=2))
    # GPT2Attention's own rule, read from the config so it holds across releases
    scale = d ** -0.5 if config.scale_attn_weights else 1.0
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
    return q, k, v, getattr(att, "scaling", d ** -0.5)


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


def _t5_bias(base, n):
    """T5's relative position bias, heads × n × n: learnt per bucket of distance by the first
    layer and added to the scores of every layer, as the model does."""
    return base.encoder.block[0].layer[0].SelfAttention.compute_bias(n, n)[0]


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
        return (config.max_position_embeddings - config.pad_token_id - 1,
                "config.max_position_embeddings - config.pad_token_id - 1")
    return config.max_position_embeddings, "config.max_position_embeddings"


def _check_window(config, n):
    """Sliding-window attention masks far-back keys; below the window it is plain causal."""
    window = getattr(config, "sliding_window", None)
    types = getattr(config, "layer_types", None)
    if window is not None and (types is None or "sliding_attention" in types) and n > window:
        raise NotImplementedError(
            f"{n} tokens exceed this model's sliding attention window of {window}; use a shorter text"
        )


def _numpy(t) -> np.ndarray:
    return t.detach().to(device="cpu", dtype=torch.float64).numpy()
