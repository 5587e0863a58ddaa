"""TransformerLens ``HookedTransformer`` models.

The model runs once with its activation cache on; each layer's queries and keys are
read at the last hook before the scores are formed (``hook_rot_q``/``hook_rot_k`` for
rotary models, else ``hook_q``/``hook_k``) and values at ``hook_v``: the model's own
projections of that layer's input, after its own layer norm.

Imported only by ``attnwidget.integrations.from_transformer_lens``.
"""

from __future__ import annotations

import math
from typing import Literal, overload

import torch

from .common import ModelAttention, Reader, _check_readable, _tokens_of
from .interface import Projection


@overload
def extract(model, text: str, cache=..., ids=..., *, check_only: Literal[True]) -> tuple[list[int], list[str]]: ...
@overload
def extract(model, text: str, cache=..., ids=..., check_only: Literal[False] = ...) -> ModelAttention: ...
def extract(model, text: str, cache=None, ids=None, check_only=False) -> ModelAttention | tuple[list[int], list[str]]:
    """(ids: read these token ids, not the text's: Reader; check_only: the text's (ids, tokens), checked, without
    running.)"""
    try:
        from transformer_lens.HookedTransformer import HookedTransformer
    except ImportError as e:  # TransformerLens 4 removed it
        raise ImportError(
            "from_transformer_lens needs TransformerLens < 4, which has HookedTransformer: pip install "
            '"attnwidget[transformer-lens]"'
        ) from e
    if not isinstance(model, HookedTransformer):
        raise NotImplementedError(
            f"from_transformer_lens takes a transformer_lens HookedTransformer, got {type(model).__name__}"
        )
    cfg = model.cfg
    _check_supported(cfg)
    rotary = cfg.positional_embedding_type == "rotary"
    names = ("hook_rot_q", "hook_rot_k", "hook_v") if rotary else ("hook_q", "hook_k", "hook_v")

    # prepends BOS when the model's config says so; truncate=False, or it would cut at n_ctx unsaid
    tokens = model.to_tokens(text, truncate=False) if ids is None else torch.tensor([list(ids)], device=cfg.device)
    _check_readable(text, tokens[0].tolist(), cfg.model_name, (cfg.n_ctx, "cfg.n_ctx"), (cfg.d_vocab, "cfg.d_vocab"))
    if check_only:
        return tokens[0].tolist(), _tokens_of(model.tokenizer, tokens[0].tolist())
    if cache is None:
        was_training = model.training
        model.eval()
        try:
            with torch.no_grad():
                _, cache = model.run_with_cache(tokens, names_filter=lambda name: name.endswith(names))
        finally:
            model.train(was_training)
    else:  # the researcher's own run of the model on this text: read, not run again
        _check_cache(cache, cfg, names, tokens.shape[1])

    layers = []
    for i in range(cfg.n_layers):
        # cached as (batch, pos, heads, d_head); grouped-query K and V have fewer heads
        q, k, v = (cache[f"blocks.{i}.attn.{name}"][0].transpose(0, 1) for name in names)
        group = q.shape[0] // k.shape[0]
        k, v = (t.repeat_interleave(group, dim=0) for t in (k, v))
        layers.append(tuple(t.detach().to("cpu", torch.float64).numpy() for t in (q, k, v)))

    # scores are divided by attn_scale (sqrt(d_head) unless the config says otherwise)
    scales = {float(block.attn.attn_scale) for block in model.blocks}
    if len(scales) > 1:
        raise NotImplementedError("this model scales its attention scores differently in each layer")
    scale = 1.0 / scales.pop()

    return ModelAttention(
        reader=reader(model),
        tokens=_tokens_of(model.tokenizer, tokens[0].tolist()),
        layers=layers,
        causal=cfg.attention_dir == "causal",
        scale=None if math.isclose(scale, cfg.d_head**-0.5, rel_tol=1e-9) else scale,
        architecture=cfg.original_architecture or "hooked-transformer",
        model_name=cfg.model_name,
        # each layer's output: z (heads · d_head) @ W_O + b_O, W_O heads × d_head × width (a view, not a copy)
        projections=[
            Projection(
                b.attn.W_O.detach().reshape(-1, b.attn.W_O.shape[-1]), b.attn.b_O.detach(), f"blocks.{i}.attn.W_O"
            )
            for i, b in enumerate(model.blocks)
        ],
    )


def reader(model) -> Reader:
    """How to read the model again on token ids of one's own (the induction score's), with its BOS first where its
    config prepends one."""
    cfg, tokenizer = model.cfg, model.tokenizer
    bos = getattr(tokenizer, "bos_token_id", None)
    prefix = [bos] if cfg.default_prepend_bos and bos is not None else []
    return Reader(lambda ids: extract(model, "", ids=ids), tokenizer, cfg.d_vocab, cfg.n_ctx, (prefix, []))


def _check_supported(cfg) -> None:
    """Refuse configs whose attention pattern is not softmax(scale·q·kᵀ) with a causal or no mask."""
    problems = []
    if cfg.positional_embedding_type in ("alibi", "relative_positional_bias"):
        problems.append(f"positional_embedding_type={cfg.positional_embedding_type!r}")
    if getattr(cfg, "attn_scores_soft_cap", -1.0) > 0:
        problems.append("attn_scores_soft_cap")
    if "local" in (getattr(cfg, "attn_types", None) or ()):
        problems.append("local attention")
    for flag in ("use_attention_sinks", "use_logn_attn"):
        if getattr(cfg, flag, False):
            problems.append(flag)
    # Q/K norms and clipping come after hook_q/hook_k; only the rotary hooks see them
    if cfg.positional_embedding_type != "rotary" and (
        getattr(cfg, "use_qk_norm", False)
        or getattr(cfg, "clip_qkv", None) is not None
        or (cfg.original_architecture or "").startswith("Olmo")
    ):
        problems.append("Q/K normalisation or clipping without rotary embeddings")
    if getattr(cfg, "clip_qkv", None) is not None:
        problems.append("clip_qkv (values are clipped after hook_v)")
    if cfg.attention_dir not in ("causal", "bidirectional"):
        problems.append(f"attention_dir={cfg.attention_dir!r}")
    if problems:
        raise NotImplementedError(
            f"from_transformer_lens does not support {cfg.model_name!r}: {', '.join(sorted(set(problems)))}"
        )


def _check_cache(cache, cfg, names, n: int) -> None:
    """A run_with_cache cache of this text, holding each layer's queries, keys and values."""
    missing = [
        f"blocks.{i}.attn.{name}"
        for i in range(cfg.n_layers)
        for name in names
        if f"blocks.{i}.attn.{name}" not in cache
    ]
    if missing:
        raise ValueError(
            f"the cache has no {missing[0]} ({len(missing)} of the hooks read are missing): run_with_cache with no "
            f"names_filter, or one that keeps {', '.join(names)}"
        )
    shape = tuple(cache[f"blocks.0.attn.{names[0]}"].shape)
    if shape[0] != 1 or shape[1] != n:
        raise ValueError(
            f"the cache is of {shape[0]} text(s) of {shape[1]} tokens, but the text is one of {n} tokens: pass the "
            "text the cache was made from, alone"
        )
