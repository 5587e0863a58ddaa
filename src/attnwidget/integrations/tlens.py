"""TransformerLens models: a ``TransformerBridge`` (TransformerLens 3 and later, wrapping a Hugging
Face model; TransformerLens 4's only model) or the ``HookedTransformer`` of TransformerLens 2 and 3
(deprecated in 3, removed in 4).

The model runs once with hooks on; each layer's queries and keys are read at the last hook before
the scores are formed (``hook_rot_q``/``hook_rot_k`` for rotary models, else ``hook_q``/``hook_k``)
and values at ``hook_v``: the model's own projections of that layer's input, after its own layer
norm. A bridge's scale, soft cap and causal rule are the wrapped Hugging Face attention's own (its
``scaling``, ``attn_logit_softcapping`` and ``is_causal``), and each layer's reading is checked,
during the same pass, against the bridge's own attention pattern (``hook_pattern``) and output
(``hook_z``): a model whose attention is more than those terms is refused, not read wrongly.

Imported only by ``attnwidget.integrations.from_transformer_lens``.
"""

from __future__ import annotations

import importlib
import math
from dataclasses import dataclass
from typing import Any, Literal, overload

import torch

from .common import ModelAttention, Reader, _check_readable, _evaluating, _tokens_of
from .configs import ALIBI, LEARNED, position_of, rope
from .interface import Projection

ACCEPTED = "a transformer_lens TransformerBridge or a HookedTransformer"
HOOKS = ("hook_q", "hook_k", "hook_v")


@overload
def extract(model, text: str, cache=..., ids=..., *, check_only: Literal[True]) -> tuple[list[int], list[str]]: ...
@overload
def extract(model, text: str, cache=..., ids=..., check_only: Literal[False] = ...) -> ModelAttention: ...
def extract(model, text: str, cache=None, ids=None, check_only=False) -> ModelAttention | tuple[list[int], list[str]]:
    """(ids: read these token ids, not the text's: Reader; check_only: the text's (ids, tokens), checked, without
    running.)"""
    bridge, hooked = _classes()
    if bridge is not None and isinstance(model, bridge):
        return _extract_bridge(model, text, cache, ids, check_only)
    if hooked is None or not isinstance(model, hooked):
        takes = ACCEPTED if hooked is not None else "a transformer_lens TransformerBridge"  # (4 has no other)
        raise NotImplementedError(
            f"from_transformer_lens takes {takes}, got {type(model).__name__}: make one with "
            "TransformerBridge.boot_transformers(name), or read a Hugging Face model with from_transformers"
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
        position=_position(cfg),
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
    config prepends one (a bridge: the ids its to_tokens puts around a text, the tokenizer's [CLS] … [SEP] too)."""
    cfg, tokenizer = model.cfg, model.tokenizer
    bridge, _ = _classes()
    if bridge is not None and isinstance(model, bridge):
        ends = _bridge_ends(model)
    else:
        bos = getattr(tokenizer, "bos_token_id", None)
        ends = ([bos] if cfg.default_prepend_bos and bos is not None else [], [])
    return Reader(lambda ids: extract(model, "", ids=ids), tokenizer, cfg.d_vocab, cfg.n_ctx, ends)


def _classes() -> tuple[Any, Any]:
    """(TransformerBridge, HookedTransformer), each None where the TransformerLens installed has not got it
    (TransformerLens 4 removed HookedTransformer; releases before 3 had no bridge)."""
    found: list[Any] = []
    for module, name in (
        ("transformer_lens.model_bridge", "TransformerBridge"),
        ("transformer_lens.HookedTransformer", "HookedTransformer"),
    ):
        try:
            found.append(getattr(importlib.import_module(module), name))
        except (ImportError, AttributeError):
            found.append(None)
    if found == [None, None]:
        raise ImportError(
            f"from_transformer_lens takes {ACCEPTED}, and the TransformerLens installed has neither: pip install "
            '"attnwidget[transformer-lens]"'
        )
    return found[0], found[1]


def _position(cfg) -> tuple[str, str]:
    """A HookedTransformer's position scheme (configs.position_of's words), from its config."""
    kind = cfg.positional_embedding_type
    if kind == "rotary":
        return rope([cfg.rotary_base], (cfg.rotary_dim or cfg.d_head) / cfg.d_head)
    if kind == "shortformer":
        return "learned", "learned positions, added to the queries and keys only"
    return {"alibi": ALIBI, "standard": LEARNED}.get(kind, ("", ""))


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


def _check_cache(cache, cfg, names, n: int, keeps=None) -> None:
    """A run_with_cache cache of this text, holding each layer's ``names`` (``keeps``: the hooks to say it needs)."""
    missing = [
        f"blocks.{i}.attn.{name}"
        for i in range(cfg.n_layers)
        for name in names
        if f"blocks.{i}.attn.{name}" not in cache
    ]
    if missing:
        raise ValueError(
            f"the cache has no {missing[0]} ({len(missing)} of the hooks read are missing): run_with_cache with no "
            f"names_filter, or one that keeps {', '.join(keeps or names)}"
        )
    shape = tuple(cache[f"blocks.0.attn.{names[0]}"].shape)
    if shape[0] != 1 or shape[1] != n:
        raise ValueError(
            f"the cache is of {shape[0]} text(s) of {shape[1]} tokens, but the text is one of {n} tokens: pass the "
            "text the cache was made from, alone"
        )


# --- TransformerBridge ---------------------------------------------------------------------------

CHECKS = ("hook_pattern", "hook_z")  # the bridge's own weights and heads' outputs, against which a reading is checked
ROTARY = ("hook_rot_q", "hook_rot_k", "hook_cos", "hook_sin")  # rotated q and k, or what the bridge rotates them by
ELSEWHERE = "read the Hugging Face model, loaded on its own and not bridged, with from_transformers"


@dataclass
class _Terms:
    """What one layer of a bridge does with q·kᵀ: the wrapped Hugging Face attention's own scale, soft cap and
    causal rule."""

    scale: float
    softcap: float | None
    causal: bool


def _extract_bridge(model, text: str, cache, ids, check_only: bool) -> ModelAttention | tuple[list[int], list[str]]:
    cfg = model.cfg
    config = getattr(model.original_model, "config", None)
    name = cfg.model_name or type(model.original_model).__name__
    attentions, terms = _bridge_terms(model, config, name)
    rotary = cfg.positional_embedding_type == "rotary"
    hooks = HOOKS + (ROTARY if rotary else ())

    # the bridge's own tokens (its BOS, the tokenizer's [CLS] … [SEP]); truncate=False, or it would cut at n_ctx
    tokens = model.to_tokens(text, truncate=False) if ids is None else torch.tensor([list(ids)], device=cfg.device)
    _check_readable(text, tokens[0].tolist(), name, (cfg.n_ctx, "cfg.n_ctx"), (cfg.d_vocab, "cfg.d_vocab"))
    if check_only:
        return tokens[0].tolist(), _tokens_of(model.tokenizer, tokens[0].tolist())
    if cache is None:
        seen, checked = _run_bridge(model, tokens, hooks, attentions, terms, rotary, name)
    else:  # the researcher's own run of the model on this text: read and checked, not run again
        _check_cache(cache, cfg, ("hook_v",), tokens.shape[1], (*hooks, "hook_pattern"))
        seen, checked = _bridge_cache(cache, hooks, attentions, terms, rotary)

    layers: list[tuple] = []
    projections: list[Projection | str] = []
    for i, own in enumerate(terms):
        q, k, v = seen[i]
        pattern, z = checked.get((i, "hook_pattern")), checked.get((i, "hook_z"))
        if pattern is None and z is None:
            raise NotImplementedError(
                f"from_transformer_lens cannot read {name} through its bridge: layer {i} gives neither hook_pattern "
                f"nor hook_z, against which the queries and keys read are checked; {ELSEWHERE}"
            )
        for check, deviation in (("hook_pattern", pattern), ("hook_z", None if pattern is not None else z)):
            if deviation is not None and not deviation[0] <= 1:  # (nan: differs)
                raise NotImplementedError(_differs(name, i, check, deviation[1], own, q.dtype))
        layers.append(tuple(_per_head(t, q.shape[2]).to("cpu", torch.float64).numpy() for t in (q, k, v)))
        if z is None:
            projections.append(f"the bridge gives no hook_z in layer {i}: the heads' outputs fed to W_O are not known")
        elif not z[0] <= 1:  # the weights are the bridge's own, but not what is fed to W_O: weights @ values
            projections.append(
                f"layer {i}'s hook_z is not the heads' weights @ values (a gate or norm before the output projection): "
                "W_O does not map the heads' outputs"
            )
        else:
            projections.append(_bridge_projection(attentions[i], i))

    first = terms[0]
    d_head = layers[0][0].shape[-1]
    return ModelAttention(
        reader=reader(model),
        tokens=_tokens_of(model.tokenizer, tokens[0].tolist()),
        layers=layers,
        causal=first.causal,
        scale=None if math.isclose(first.scale, d_head**-0.5, rel_tol=1e-9) else first.scale,
        softcap=first.softcap,
        architecture=getattr(config, "model_type", None) or cfg.original_architecture or "transformer-bridge",
        model_name=name,
        position=position_of(config) if config is not None else _position(cfg),  # (a native model: its cfg's)
        projections=projections,
    )


def _differs(name: str, i: int, check: str, deviation: float, terms: _Terms, dtype) -> str:
    rule = "with a causal mask" if terms.causal else "with no mask"
    capped = f" capped at ±{terms.softcap:g}" if terms.softcap is not None else ""
    own = "attention pattern (hook_pattern)" if check == "hook_pattern" else "heads' outputs (hook_z)"
    return (
        f"from_transformer_lens cannot read {name} through its bridge: in layer {i}, softmax({terms.scale:.6g}·q·kᵀ"
        f"{capped}) {rule} differs from the bridge's own {own} by up to {deviation:.2g}, more than rounding in "
        f"{str(dtype).replace('torch.', '')} explains, so its attention is more than that (another scale, a sliding "
        f"window narrower than the text, ALiBi, attention sinks, a bias, ...); {ELSEWHERE}"
    )


def _bridge_terms(model, config, name: str) -> tuple[list, list[_Terms]]:
    """Each layer's attention bridge and its terms, read from the Hugging Face attention it wraps; refuses what
    one scale, soft cap and causal rule for the whole model cannot say."""
    if getattr(config, "is_encoder_decoder", False):
        raise NotImplementedError(
            f"from_transformer_lens reads a bridge of a decoder or an encoder, and {name} is an encoder–decoder model: "
            f"{ELSEWHERE} (text and target=)"
        )
    blocks = getattr(model, "blocks", None)
    attentions = [getattr(block, "attn", None) for block in blocks] if blocks is not None else []
    if not attentions or any(a is None for a in attentions):
        raise NotImplementedError(
            f"from_transformer_lens reads a bridge whose every block has attention (bridge.blocks[i].attn); {name}'s "
            "has not"
        )
    terms = [_layer_terms(a, model.cfg) for a in attentions]
    for what, values, flag in (
        ("scales its attention scores", {t.scale for t in terms}, "scale_attn_by_inverse_layer_idx"),
        ("soft-caps its attention scores", {t.softcap for t in terms}, None),
        ("masks its attention (causal or not)", {t.causal for t in terms}, None),
    ):
        if len(values) > 1:
            said = f" ({flag})" if flag and getattr(config, flag, False) else ""
            raise NotImplementedError(f"this model {what} differently in each layer{said}")
    return attentions, terms


def _layer_terms(attention, cfg) -> _Terms:
    """The wrapped attention's own ``scaling``, ``attn_logit_softcapping`` and ``is_causal`` (on it or its inner
    module: BERT's BertSelfAttention), or a native model's ``scale``, ``attn_scores_soft_cap`` and ``causal``;
    1/sqrt(d_head) and the bridge's own causal rule where it says nothing."""
    wrapped: Any = getattr(attention, "original_component", None)
    modules = list(wrapped.modules()) if isinstance(wrapped, torch.nn.Module) else []

    def first(attribute: str, number: bool):
        for module in modules:
            value = getattr(module, attribute, None)
            if isinstance(value, bool) != number and isinstance(value, (int, float)):
                return value
        return None

    scale, softcap, causal = first("scaling", True), first("attn_logit_softcapping", True), first("is_causal", False)
    if type(wrapped).__name__ == "NativeAttention":  # TransformerLens 4's own model (boot_native): it divides by scale
        cap = wrapped.attn_scores_soft_cap
        scale, softcap, causal = 1 / wrapped.scale, cap if cap > 0 else None, wrapped.causal
    return _Terms(
        scale=float(cfg.d_head**-0.5 if scale is None else scale),
        softcap=float(softcap) if softcap else None,
        causal=bool(getattr(attention, "is_causal", True) if causal is None else causal),
    )


def _qkv(found: dict, attention, rotary: bool) -> tuple[Any, Any, Any] | None:
    """A layer's (q, k, v) from its hooks' tensors (hook name → batch × positions × heads × d_head), q and k rotated
    where the model rotates them: hook_rot_q and hook_rot_k, or, where the bridge rotates them between hooks (GPT-NeoX,
    Phi-3, Falcon), hook_q and hook_k rotated by the bridge's own rotation on its own hook_cos and hook_sin; None
    when the hooks given are not enough."""
    q, k, v = (found.get(h) for h in HOOKS)
    if rotary and "hook_rot_q" in found and "hook_rot_k" in found:
        q, k = found["hook_rot_q"], found["hook_rot_k"]
    elif rotary:
        rotate = getattr(attention, "_apply_rotary_pos_emb", None)
        native: Any = getattr(getattr(attention, "original_component", None), "rotary", None)  # (boot_native's)
        if q is None or k is None:
            return None
        if "hook_cos" in found and "hook_sin" in found and callable(rotate):
            turned = rotate(q.transpose(1, 2), k.transpose(1, 2), found["hook_cos"], found["hook_sin"])
        elif callable(getattr(native, "apply_rope", None)):  # a native model rotates inside its attention, unhooked
            turned = native.apply_rope(q.transpose(1, 2), k.transpose(1, 2))
        else:
            return None
        q, k = (t.transpose(1, 2) for t in turned)  # (each takes and gives batch × heads × positions × d_head)
    return None if q is None or k is None or v is None else (q, k, v)


def _unread(found: dict, rotary: bool) -> str:
    """The first hook a layer's reading lacks (for _qkv's None)."""
    if rotary and not ("hook_rot_q" in found and "hook_rot_k" in found):
        return "hook_rot_q"
    return next((h for h in HOOKS if h not in found), "hook_q")


def _run_bridge(model, tokens, hooks, attentions, terms: list[_Terms], rotary: bool, name: str) -> tuple[dict, dict]:
    """One pass of the bridge: each layer's (q, k, v) (layer → _qkv), and how far the weights and heads' outputs
    made of them are from the bridge's own, computed as its hooks fire, a layer at a time ((layer, check) →
    _deviation)."""
    kept: dict = {}  # layer → hook name → tensor
    checked: dict = {}

    def keep(i: int, hook_name: str):
        def hook(tensor, hook):
            kept.setdefault(i, {})[hook_name] = tensor.detach()

        return hook

    def check(i: int, what: str):
        def hook(tensor, hook):
            read = _qkv(kept.get(i, {}), attentions[i], rotary)
            if read is not None:
                checked[i, what] = _deviation(what, tensor.detach(), *read, terms[i])

        return hook

    layers = range(len(terms))
    fwd = [(f"blocks.{i}.attn.{h}", keep(i, h)) for i in layers for h in hooks]
    fwd += [(f"blocks.{i}.attn.{what}", check(i, what)) for i in layers for what in CHECKS]
    have = getattr(model, "hook_dict", None)  # (a bridge refuses a name it has not: a native one has no hook_cos)
    fwd = [(name, hook) for name, hook in fwd if have is None or name in have]
    with _evaluating(model.original_model), _evaluating(model), torch.no_grad():
        model.run_with_hooks(tokens, return_type=None, fwd_hooks=fwd)
    seen: dict[int, tuple[Any, Any, Any]] = {}
    for i in layers:
        found = kept.pop(i, {})
        read = _qkv(found, attentions[i], rotary)
        if read is None:
            missing = _unread(found, rotary)
            rotation = (
                ", nor hook_cos and hook_sin with a rotation of the bridge's own" if missing == "hook_rot_q" else ""
            )
            raise NotImplementedError(
                f"from_transformer_lens cannot read {name} through its bridge: its blocks.{i}.attn.{missing} did not "
                f"fire{rotation}; {ELSEWHERE}"
            )
        seen[i] = read
    return seen, checked


def _bridge_cache(cache, hooks, attentions, terms: list[_Terms], rotary: bool) -> tuple[dict, dict]:
    """(q, k, v, deviations) as _run_bridge's, from a run_with_cache cache of the bridge."""
    keeps = f"run_with_cache with no names_filter, or one that keeps {', '.join(hooks)} and hook_pattern"
    seen: dict[int, tuple[Any, Any, Any]] = {}
    for i, attention in enumerate(attentions):
        found = {h: cache[f"blocks.{i}.attn.{h}"] for h in hooks if f"blocks.{i}.attn.{h}" in cache}
        read = _qkv(found, attention, rotary)
        if read is None:
            raise ValueError(f"the cache has no blocks.{i}.attn.{_unread(found, rotary)}: {keeps}")
        seen[i] = read
    kept = [what for what in CHECKS if all(f"blocks.{i}.attn.{what}" in cache for i in seen)]
    if not kept:
        raise ValueError(
            "the cache has neither blocks.0.attn.hook_pattern nor blocks.0.attn.hook_z, against which what is read "
            f"from a bridge is checked: {keeps}"
        )
    checked = {
        (i, what): _deviation(what, cache[f"blocks.{i}.attn.{what}"], *seen[i], terms[i]) for i in seen for what in kept
    }
    return seen, checked


def _deviation(what: str, own, q, k, v, terms: _Terms) -> tuple[float, float]:
    """How far the reading is from the bridge's own, as (the largest difference over the difference the model's own
    rounding explains, the largest difference): softmax(scale·q·kᵀ, capped, masked) against its pattern (``what``
    "hook_pattern", batch × heads × n × n), or that @ v against its heads' outputs ("hook_z", batch × n × heads ×
    d_head). Computed in float32 (float64 for a float64 model), where the model is."""
    dtype = torch.float64 if q.dtype == torch.float64 else torch.float32
    eps = torch.finfo(q.dtype).eps if q.dtype.is_floating_point else 0.0
    heads = q.shape[2]
    q, k, v = (_per_head(t, heads).to(dtype) for t in (q, k, v))
    s = terms.scale * (q @ k.transpose(-1, -2))
    if terms.softcap is not None:
        s = terms.softcap * torch.tanh(s / terms.softcap)
    size = s.abs()
    if terms.causal:
        closed = torch.ones(s.shape[-2:], dtype=torch.bool, device=s.device).triu(1)
        s, size = s.masked_fill(closed, float("-inf")), size.masked_fill(closed, 0.0)
    weights = torch.softmax(s, dim=-1)
    # a score rounded in the model's dtype (16-bit: eps 2⁻⁷ or 2⁻¹⁰) moves its row's weights by about eps·|score|
    spread = eps * (2 * size.amax(dim=-1, keepdim=True) + 4)
    want = weights if what == "hook_pattern" else weights @ v  # heads × n × (n or d_head)
    if own.numel() != want.numel():
        return math.inf, math.inf
    if what == "hook_pattern":
        got = own.reshape(want.shape).to(want.device, dtype)
        allowed = 1e-4 + spread * torch.maximum(want, got)
    else:
        got = own.reshape(want.shape[1], heads, -1).transpose(0, 1).to(want.device, dtype)
        allowed = 1e-4 * max(1.0, float(v.abs().max())) + (spread * weights) @ v.abs() + eps * want.abs()
    difference = (want - got).abs()
    return float((difference / allowed).max()), float(difference.max())


def _per_head(t, heads: int):
    """A hook's batch × positions × heads × d_head (of one text) as heads × positions × d_head, grouped-query keys
    and values repeated to the query heads that read them (head h reads key head h // (heads / key heads))."""
    t = t[0].transpose(0, 1)
    return t.repeat_interleave(heads // t.shape[0], dim=0)


def _bridge_projection(attention, i: int) -> Projection | str:
    """The layer's output projection as the bridge gives it: W_O (heads × d_head × width) and b_O."""
    try:
        w, b = attention.W_O, attention.b_O
    except (AttributeError, RuntimeError, TypeError, ValueError) as e:
        return f"the bridge's W_O of layer {i} cannot be read: {e}"
    return Projection(w.detach().reshape(-1, w.shape[-1]), None if b is None else b.detach(), f"blocks.{i}.attn.W_O")


def _bridge_ends(model) -> tuple[list, list] | None:
    """The ids the bridge's to_tokens puts before and after a text's own (None: not found, the tokenizer's)."""
    whole = model.to_tokens("a", truncate=False)[0].tolist()
    plain = list(model.tokenizer("a", add_special_tokens=False)["input_ids"])
    at = next((i for i in range(len(whole) - len(plain) + 1) if whole[i : i + len(plain)] == plain), None)
    return None if at is None or not plain else (whole[:at], whole[at + len(plain) :])
