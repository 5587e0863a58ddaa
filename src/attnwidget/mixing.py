"""How heads and layers pass tokens on, in plain numpy: attention rollout and flow (Abnar & Zuidema,
2020) across layers, and each head's value vectors and norms (Kobayashi et al., 2020). The formulas of
one head are in formulas.py."""

from __future__ import annotations

import operator

import numpy as np

from . import threads
from .maxflow import layered_flow

# --- across layers (Abnar & Zuidema, 2020) ---


def _each_mixed(weights):
    """Each layer's Â in turn from its heads' weights (layers × heads × n × n, or one heads × n × n at
    a time; rows read): half the heads' mean, half the identity (the residual path), each row
    renormalised. One n × n is written over for each layer (new memory costs more than the sums),
    a part of its rows on each core."""
    a = None
    for layer in weights:
        layer = np.asarray(layer, dtype=float)
        a = a if a is not None and a.shape == layer.shape[1:] else np.empty(layer.shape[1:])

        def rows(r0, r1, layer=layer, a=a):
            part = np.mean(layer[:, r0:r1], axis=0, out=a[r0:r1])
            part *= 0.5
            part[np.arange(r1 - r0), np.arange(r0, r1)] += 0.5
            part /= part.sum(axis=-1, keepdims=True)

        threads.by_rows(len(a), rows)
        yield a


def _mixed(weights) -> np.ndarray:
    """Every layer's Â, layers × n × n (_each_mixed's, kept)."""
    return np.array([a.copy() for a in _each_mixed(weights)])


def rollout(weights, last: bool = False) -> np.ndarray:
    """Attention rollout: layers × n × n, the rollout up to each layer, Â_l · … · Â_0. Row i of
    layer l says how much of each input token reaches token i there; every row sums to 1.
    ``weights``: layers × heads × n × n, or each layer's heads × n × n in turn (an iterator that
    says how many, ``__length_hint__``, has its result made once rather than gathered). ``last``:
    the rollout up to the last layer alone, n × n (the layers' before it not kept)."""
    count, out = (0 if last else operator.length_hint(weights)), None
    kept: list[np.ndarray] = []
    for at, a in enumerate(_each_mixed(weights)):
        if out is None and count:
            out = np.empty((count, *a.shape))
        if out is not None and at < count:
            into = out[at]
        else:  # (with ``last``, the memory of the product two layers back, no longer needed)
            into = kept.pop(0) if last and len(kept) > 1 else np.empty(a.shape)
        if kept:
            below = kept[-1]
            threads.by_rows(len(a), lambda r0, r1: np.matmul(a[r0:r1], below, out=into[r0:r1]))  # noqa: B023
        else:
            into[...] = a  # (Â_0 · I)
        kept.append(into)
    if last:
        return kept[-1]
    return out if out is not None and len(kept) == count else np.array(kept)


def attention_flow(weights, step=lambda row: None) -> np.ndarray:
    """Attention flow: n × n, entry (i, j) the maximum flow from input token j to token i at the last layer through
    the layered graph whose edge from token j below layer l to token i above it has capacity Â_l[i, j]. Exact
    (maxflow.py). ``step(i + 1)`` precedes row i."""
    a = _mixed(weights)
    n = a.shape[-1]
    flow = layered_flow(a)
    causal = not np.triu(a, 1).any()  # a path from j up to i then passes only tokens j … i: that window's graph
    rows = np.zeros((n, n))
    for i in range(n):
        step(i + 1)
        for j in range(i + 1 if causal else n):
            rows[i, j] = flow(j, i, *((j, i + 1) if causal else (0, n)))
    return rows


# --- norm-based analysis (Kobayashi et al., 2020) ---

CHUNK = 2**22  # numbers of heads × tokens × width made at once while the heads' vectors are formed


def head_vectors(v: np.ndarray, w_o=None, keys=slice(None)) -> np.ndarray:
    """f_h(x_j), heads × keys × width in float64: the vector head h adds to a row's output for key j,
    ``v[h, j] @ w_o[h·d:(h+1)·d]`` (``v`` heads × keys × d: x W_V + b_V; ``w_o`` the output
    projection as x @ W, heads·d × width, head h's slot its rows h·d to (h+1)·d). ``w_o`` None: no
    projection, each head's value in a slot of its own (heads·d wide). ``keys`` picks the keys."""
    heads, _, d = v.shape
    part = v[:, keys].astype(float)
    if w_o is None:
        out = np.zeros((heads, part.shape[1], heads * d))
        for h in range(heads):
            out[h, :, h * d : (h + 1) * d] = part[h]
        return out
    if w_o.shape[0] != heads * d:
        raise ValueError(
            f"the output projection takes {w_o.shape[0]} numbers, but {heads} heads of {d} give {heads * d}"
        )
    return np.stack([part[h] @ np.asarray(w_o[h * d : (h + 1) * d], dtype=float) for h in range(heads)])


def head_grams(v: np.ndarray, w_o=None) -> np.ndarray:
    """Each key's Gram matrix of its heads' vectors, keys × heads × heads (float64):
    G_j[h, h'] = <f_h(x_j), f_h'(x_j)> (f as :func:`head_vectors`), from which every norm of
    :func:`attention_norms` follows at any weights. Formed a few keys at a time, so that no more
    than about CHUNK numbers of heads × keys × width exist at once (and a float64 copy of ``w_o``)."""
    heads, m, d = v.shape
    if w_o is None:  # slots of their own: the heads' vectors are orthogonal
        grams = np.zeros((m, heads, heads))
        grams[:, np.arange(heads), np.arange(heads)] = np.einsum("hjd,hjd->jh", v.astype(float), v.astype(float))
        return grams
    grams = np.empty((m, heads, heads))
    w_o = np.asarray(w_o, dtype=float)  # float64 once (a copy while these are formed), not per chunk
    step = max(1, CHUNK // (heads * w_o.shape[1]))
    for start in range(0, m, step):
        f = head_vectors(v, w_o, slice(start, start + step)).transpose(1, 0, 2)  # keys × heads × width
        grams[start : start + step] = f @ f.transpose(0, 2, 1)
    return grams


def attention_norms(weights: np.ndarray, grams: np.ndarray, combined: bool = False) -> np.ndarray:
    """Norm-based attention (Kobayashi et al., 2020) from weights α (heads × n × m) and each key's
    Gram matrix (m × heads × heads, :func:`head_grams`): heads × n × m, ‖α^h_ij f_h(x_j)‖ =
    α^h_ij ‖f_h(x_j)‖, what head h adds to row i's output for key j; ``combined``: n × m,
    ‖Σ_h α^h_ij f_h(x_j)‖ = sqrt(α_ijᵀ G_j α_ij), the whole layer's vector for that pair (where the
    heads' vectors cancel, within about 1e-8 of the largest head's norm: the root of a difference)."""
    weights = np.asarray(weights, dtype=float)
    if not combined:
        lengths = np.sqrt(np.maximum(np.diagonal(grams, axis1=1, axis2=2), 0.0))  # m × heads
        return weights * lengths.T[:, None, :]
    heads, n, m = weights.shape
    out = np.empty((n, m))
    step = max(1, CHUNK // (heads * m))  # a few rows at a time: no copy of every weight at once
    for start in range(0, n, step):
        a = weights[:, start : start + step].transpose(2, 1, 0)  # m × rows × heads: each key's heads' weights
        out[start : start + step] = ((a @ grams) * a).sum(axis=-1).T  # α_ijᵀ G_j α_ij
    return np.sqrt(np.maximum(out, 0.0, out=out), out=out)
