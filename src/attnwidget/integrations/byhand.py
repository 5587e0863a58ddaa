"""Families that compute attention their own way, not through transformers' attention interface, read
by hand: BLOOM and MPT (ALiBi), XGLM (sinusoidal positions, its own scaled dot product) and DeBERTa v1,
v2 and v3 (disentangled attention).

In one forward pass of the model's own (``output_attentions``), a hook on each layer's attention module
records what it is handed (its input, the ALiBi or relative positions the model made for it); from that
input each layer's q, k and v are made by the module's own projections, as its code makes them, with its
scale and the term it adds to the scores (ALiBi; DeBERTa's content-to-position and position-to-content
terms), and held to the weights the model returned (interface.check): a family read wrong is refused,
never shown. Only transformers' own code of each family is read so (a model loaded with code of its own,
trust_remote_code, is refused).

DeBERTa's scores are three terms (He et al., 2021): content to content (its q · k), content to position
(each query · the key of its relative position to each token) and position to content (each key · the
query of its relative position), each scaled by 1/√(d·(1 + the position terms)). The first is the widget's
scale · q · k; the other two, each layer's own, its bias; ``Terms`` keeps what they are made of, so that
each is there to show on its own (``AttentionWidget.score_terms``).

No torch here: what is read is the model's own tensors, through their methods (ablation.py imports BY_HAND
without torch).
"""

from __future__ import annotations

import inspect
import sys
from dataclasses import dataclass
from typing import Callable, NamedTuple, cast

import numpy as np

from .common import ModelAttention
from .interface import Caught, Projection, _numpy, check


class Read(NamedTuple):
    """One layer read by hand: q, k, v (heads × n × d, torch), its scale and the term its scores get
    (heads × n × n, or None), and (DeBERTa) what its position terms are made of."""

    q: object
    k: object
    v: object
    scale: float
    bias: object = None
    parts: tuple | None = None  # (keys, queries of the relative positions, c2p_at, p2c_at), numpy


class Family(NamedTuple):
    layers: str  # where the model keeps its layers
    attention: str  # each layer's attention module, which the hook watches
    projection: str  # each layer's output projection
    read: Callable  # (attention module, the arguments it was handed) -> Read
    causal: bool
    refused: Callable = lambda config: ""  # what of its config attnwidget does not read, said (""; nothing)


@dataclass
class Terms:
    """DeBERTa's scores of every layer, split into its terms (``of``). ``c2p_at[i, j]``: which of the
    relative positions' keys query i reads at key j; ``p2c_at[j, i]``: which relative position's query key
    j is read with by query i (the model's own indices, its position buckets and clamping followed)."""

    names: tuple[str, ...]  # the position terms the model adds ("c2p", "p2c": its pos_att_type)
    scale: float
    keys: list  # per layer, heads × 2·span × d: the relative positions' keys (None without c2p)
    queries: list  # per layer, heads × 2·span × d: the relative positions' queries (None without p2c)
    c2p_at: np.ndarray | None  # n × n
    p2c_at: np.ndarray | None  # n × n

    @property
    def split(self) -> bool:
        """The bias is made of these terms, which the page shows apart: ``first`` of each layer, and the bias less
        it."""
        return bool(self.names)

    def first(self, layer: int, q: np.ndarray, k: np.ndarray) -> np.ndarray:
        """The first position term of ``layer`` (c2p, or the only one), heads × n × n in the bias's float32."""
        return self.of(layer, q, k)[self.names[0]].astype(np.float32)

    def of(self, layer: int, q: np.ndarray, k: np.ndarray, head: int | None = None) -> dict[str, np.ndarray]:
        """Each term of ``layer``'s scores, float64, "c2c" first, at these q and k: heads × n × d, or one
        ``head``'s n × d (then each term is n × n). They sum to the scores the model softmaxes."""
        q, k = np.asarray(q, dtype=np.float64), np.asarray(k, dtype=np.float64)
        at = slice(None) if head is None else head
        out = {"c2c": self.scale * q @ np.swapaxes(k, -1, -2)}
        if "c2p" in self.names:  # each query against every relative position's key, then each key's own
            by = q @ np.swapaxes(self.keys[layer][at].astype(np.float64), -1, -2)
            out["c2p"] = self.scale * _pick(by, self.c2p_at)
        if "p2c" in self.names:  # each key against every relative position's query, then each query's own
            by = k @ np.swapaxes(self.queries[layer][at].astype(np.float64), -1, -2)
            out["p2c"] = self.scale * np.swapaxes(_pick(by, self.p2c_at), -1, -2)
        return out


def _pick(by: np.ndarray, at) -> np.ndarray:
    """by[..., i, at[i, j]]: each row's column of the relative position it reads at j."""
    return np.take_along_axis(by, np.broadcast_to(at, by.shape[:-1] + (at.shape[-1],)), -1)


def read(base, inputs: dict, tokens: list[str], name: str, on_call=None) -> ModelAttention:
    """One forward pass of ``base`` on ``inputs`` (batch 1), each layer read by hand where its attention
    module computes attention, and checked against the model's own weights."""
    config = base.config
    kind = config.model_type
    family = f"{type(base).__name__} (model_type {kind!r})"
    where = type(base).__module__
    if not where.startswith("transformers."):
        raise NotImplementedError(
            f"{family} runs code of its own ({where}, loaded with trust_remote_code): attnwidget reads {kind} as "
            "transformers' own code computes it. Load the model without trust_remote_code"
        )
    spec = FAMILIES[kind]
    said = spec.refused(config)
    if said:
        raise NotImplementedError(f"{family} {said}")
    layers = list(base.get_submodule(spec.layers))
    modules = [layer.get_submodule(spec.attention) for layer in layers]
    handed: dict = {}

    def record(module, args, kwargs):  # (its first call: DeBERTa's z_steps run the last layer again after)
        if module not in handed:
            handed[module] = inspect.signature(module.forward).bind(*args, **kwargs).arguments
            if on_call is not None:
                on_call(len(handed))

    hooks = [m.register_forward_pre_hook(record, with_kwargs=True) for m in modules]
    try:
        out = base(**inputs, output_attentions=True)
    finally:
        for hook in hooks:
            hook.remove()
    reads = [spec.read(m, handed[m]) for m in modules]
    scale = reads[0].scale
    if any(r.scale != scale for r in reads):  # (the widget takes one scale per model)
        raise NotImplementedError(f"{family} scales its scores differently in each layer: {[r.scale for r in reads]}")
    arrays: list[tuple[np.ndarray, ...]] = [(_numpy(r.q), _numpy(r.k), _numpy(r.v)) for r in reads]
    biases = [_numpy(r.bias) if hasattr(r.bias, "detach") else r.bias for r in reads]
    reading = np.tri(len(tokens), dtype=bool) if spec.causal else None
    for i, ((q, k, v), r, bias) in enumerate(zip(arrays, reads, biases)):
        call = Caught(i, q, k, v, scale, reading, None, bias, f"{spec.layers}.{i}.{spec.attention}")
        check(call, None, out.attentions[i], out.attentions[i].dtype, family, (r.q, r.k, r.v))
    first = biases[0]
    shared = first is not None and all(b is not None and np.array_equal(b, first) for b in biases)  # (ALiBi)
    return ModelAttention(
        tokens=tokens,
        layers=arrays,
        causal=spec.causal,
        scale=None if abs(scale * arrays[0][0].shape[-1] ** 0.5 - 1) < 1e-9 else scale,
        architecture=kind,
        model_name=name,
        bias=first if shared else None,
        biases=None if shared or first is None else [cast(np.ndarray, b) for b in biases],  # (DeBERTa: each its own)
        projections=[_projection(layer, f"{spec.layers}.{i}.", spec.projection) for i, layer in enumerate(layers)],
        terms=_terms(reads) if kind.startswith("deberta") else None,
    )


def _projection(layer, at: str, name: str) -> Projection:
    p = layer.get_submodule(name)
    return Projection(p.weight.detach().T, None if p.bias is None else p.bias.detach(), at + name)


def _heads(x, heads: int):
    """(1, n, heads · d) -> heads × n × d: head h in columns h·d to (h+1)·d, as every family here lays them."""
    return x.reshape(x.shape[-2], heads, -1).transpose(0, 1)


# --- BLOOM, MPT, XGLM -------------------------------------------------------------


def _bloom(att, got) -> Read:
    h = got["hidden_states"]
    fused = att.query_key_value(h)  # (1, n, heads · 3 · d): each head's q, k, v side by side
    q, k, v = (fused[0].view(h.shape[1], att.num_heads, 3, att.head_dim)[:, :, j].transpose(0, 1) for j in range(3))
    alibi = got["alibi"]  # (heads, 1, n): slope · key position, the same in every row
    return Read(
        q,
        k,
        v,
        float(att.inv_norm_factor),
        att.beta * alibi.reshape(att.num_heads, -1, alibi.shape[-1]).expand(-1, h.shape[1], -1),
    )


def _mpt(att, got) -> Read:
    h = got["hidden_states"]
    n = h.shape[1]
    mixed = att.Wqkv(h)
    if att.clip_qkv:
        mixed = mixed.clamp(min=-att.clip_qkv, max=att.clip_qkv)
    q, k, v = (_heads(x, att.n_heads) for x in mixed.chunk(3, dim=2))
    alibi = got["position_bias"]  # (heads, 1, max_seq_len): slope · (key position − the last), its last n columns
    alibi = alibi[:, max(0, alibi.shape[1] - n) :, max(0, alibi.shape[2] - n) :]
    return Read(q, k, v, float(att.softmax_scale), alibi.expand(-1, n, -1))


_MPT_OWN = dict(qk_ln=False, alibi=True, alibi_bias_max=8, prefix_lm=False, attn_uses_sequence_id=False)


def _mpt_refused(config) -> str:
    """An option of MPT's config that transformers' MptAttention does not follow: the model it runs is
    not the one the config describes (it adds ALiBi of bias_max 8 whatever the config says)."""
    given = config.attn_config
    for option, own in _MPT_OWN.items():
        value = getattr(given, option, own) if not isinstance(given, dict) else given.get(option, own)
        if value != own:
            return (
                f"sets attn_config.{option}={value!r}, which transformers' MptAttention does not follow (it "
                f"computes attention as with {option}={own!r}): attnwidget reads attention as the model computes "
                "it, and refuses rather than show it under a config that says otherwise. Set "
                f"model.config.attn_config.{option} = {own!r} to read it as transformers runs it"
            )
    return ""


def _xglm(att, got) -> Read:
    h = got["hidden_states"]  # (its self-attention: the hook is on self_attn alone)
    q, k, v = (_heads(p(h), att.num_heads) for p in (att.q_proj, att.k_proj, att.v_proj))
    return Read(q, k, v, float(att.scaling))  # (the model scales q before q · k: the same scores)


# --- DeBERTa ------------------------------------------------------------------


def _deberta_v2(att, got) -> Read:
    h = got["hidden_states"]
    q, k, v = (_heads(p(h), att.num_attention_heads) for p in (att.query_proj, att.key_proj, att.value_proj))
    types = [t for t in ("c2p", "p2c") if t in att.pos_att_type]
    scale = 1 / float(_code(att).scaled_size_sqrt(q, 1 + len(types)))
    if not att.relative_attention or not types:
        return Read(q, k, v, scale, parts=(None, None, None, None))
    span = att.pos_ebd_size
    emb = got["rel_embeddings"][: 2 * span]
    keys = att.key_proj if att.share_att_key else getattr(att, "pos_key_proj", None)
    queries = att.query_proj if att.share_att_key else getattr(att, "pos_query_proj", None)
    rel = got.get("relative_pos")
    if rel is None:
        rel = _code(att).build_relative_position(q, k, att.position_buckets, att.max_relative_positions)
    return _disentangled(q, k, v, scale, types, emb, keys, queries, rel, span, att.num_attention_heads)


def _deberta(att, got) -> Read:
    """DeBERTa (v1): one fused projection, q and v biased apart; its scale counts every pos_att_type."""
    h = got["hidden_states"]
    heads = att.num_attention_heads
    qkv = att.in_proj(h).reshape(h.shape[1], heads, -1).transpose(0, 1)  # each head's q, k, v side by side
    q, k, v = qkv.chunk(3, dim=-1)
    q, v = q + _heads(att.q_bias[None], heads), v + _heads(att.v_bias[None], heads)
    scale = 1 / float(_code(att).scaled_size_sqrt(q, 1 + len(att.pos_att_type)))
    rel, emb = got.get("relative_pos"), got.get("rel_embeddings")
    types = [t for t in ("c2p", "p2c") if t in att.pos_att_type]
    if not att.relative_attention or rel is None or emb is None or not types:
        return Read(q, k, v, scale, parts=(None, None, None, None))
    span = min(h.shape[1], att.max_relative_positions)
    emb = emb[att.max_relative_positions - span : att.max_relative_positions + span]
    keys, queries = getattr(att, "pos_proj", None), getattr(att, "pos_q_proj", None)
    return _disentangled(q, k, v, scale, types, emb, keys, queries, rel, span, heads)


def _disentangled(q, k, v, scale, types, emb, keys, queries, rel, span: int, heads: int) -> Read:
    """The position terms of one DeBERTa layer: the relative positions' keys and queries (its projections
    of the relative embeddings), which of them each cell reads (the relative position clamped to the
    span, as the model clamps it), and their sum as the layer's bias."""
    rel = rel.reshape(rel.shape[-2:])  # (batch 1) query × key relative positions, bucketed where the model buckets
    pos_keys = _numpy(_heads(keys(emb), heads)) if "c2p" in types else None
    pos_queries = _numpy(_heads(queries(emb), heads)) if "p2c" in types else None
    c2p_at = (rel + span).clamp(0, 2 * span - 1).cpu().numpy() if "c2p" in types else None
    p2c_at = (-rel + span).clamp(0, 2 * span - 1).cpu().numpy() if "p2c" in types else None
    parts = (pos_keys, pos_queries, c2p_at, p2c_at)
    terms = Terms(tuple(types), scale, [pos_keys], [pos_queries], c2p_at, p2c_at).of(0, _numpy(q), _numpy(k))
    bias = np.add.reduce([terms[t] for t in types]).astype(np.float32)  # (the model's own precision)
    return Read(q, k, v, scale, bias, parts)


def _terms(reads: list[Read]) -> Terms:
    first = reads[0].parts or (None,) * 4
    names = tuple(t for t, at in zip(("c2p", "p2c"), first[2:]) if at is not None)
    parts = [r.parts or (None,) * 4 for r in reads]
    return Terms(names, reads[0].scale, [p[0] for p in parts], [p[1] for p in parts], first[2], first[3])


def _deberta_refused(config) -> str:
    if getattr(config, "talking_head", False):
        return (
            "mixes its heads' scores and weights (talking_head=True): no head's weights are a softmax of its own "
            "q · k, so attnwidget cannot show them. Pass its attention weights to AttentionWidget.from_attentions"
        )
    return ""


def _code(module):
    """The module's own modeling file, whose functions it calls (the scale, the relative positions)."""
    return sys.modules[type(module).__module__]


FAMILIES = {
    "bloom": Family("h", "self_attention", "self_attention.dense", _bloom, causal=True),
    "mpt": Family("blocks", "attn", "attn.out_proj", _mpt, causal=True, refused=_mpt_refused),
    "xglm": Family("layers", "self_attn", "self_attn.out_proj", _xglm, causal=True),
    "deberta-v2": Family("encoder.layer", "attention.self", "attention.output.dense", _deberta_v2, causal=False),
    "deberta": Family(
        "encoder.layer", "attention.self", "attention.output.dense", _deberta, causal=False, refused=_deberta_refused
    ),
}
BY_HAND = tuple(FAMILIES)  # the model types read here
