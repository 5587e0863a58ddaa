"""A compressed KV cache, seen: for a budget of B keys per head, which keys a compression method
keeps, and what a query loses when it reads only those.

The cache is compressed once the text is read (as kvpress compresses a prompt's cache after its
forward pass): each key-value head keeps B of the n keys, chosen by

- ``"streaming"`` (StreamingLLM, Xiao et al. 2024): the first ``sinks`` tokens and the most recent
  B − sinks;
- ``"h2o"`` (H2O, Zhang et al. 2023): the ``window`` most recent keys (default B // 2), and the rest
  by their accumulated weight, the column sums Σ_i w_ij of the whole text's rows (``normalise``:
  each divided by the rows that may read it, n − j under the causal rule, as kvpress's
  ObservedAttentionPress does);
- ``"snapkv"`` (SnapKV, Li et al. 2024): the last ``window`` queries (default half the budget, at
  most 64) vote, each key before them scored by their mean weight on it, pooled over ``kernel``
  neighbours (``pooling``
  "avg", zeros past the ends counted, or "max"); the window's own keys and the top B − window of
  the others are kept;
- ``"mask"``: the keys you choose (a boolean per key, or per key-value head and key).

A group's query heads (grouped-query attention) share their key-value head's cache: their scores are
averaged onto it. Ties go to the earlier key. A budget of n or more keeps every key.

Then, for a row i (a query), each head's ``retained`` mass Σ_{j kept} w_ij and how far its output
moves, ‖o′ − o‖ / ‖o‖ with o = Σ_j w_ij v_j and o′ = Σ_{j kept} w_ij v_j / retained (the softmax over
the kept keys alone, which is what the compressed cache computes); over the layer, the same of
every head's output side by side (before the output projection).
"""

from __future__ import annotations

import numpy as np

__all__ = ["METHODS", "choose", "from_heads", "kept", "losses"]

METHODS = ("streaming", "h2o", "snapkv", "mask")
SINKS = 4  # StreamingLLM's first tokens kept (kvpress's n_sink)
NO_CROSS = (
    "a compressed KV cache keeps a text's own keys, the first and the most recent of the tokens its queries read: in "
    "cross-attention the keys are another text's, so no key is the query's recent one; use a self-attention widget"
)
OPTIONS = ("sinks", "window", "kernel", "pooling", "normalise")  # what a method's choice may be given
SNAP_WINDOW, KERNEL = 64, 5  # SnapKV's observation window and pooling kernel (kvpress's defaults)
# a head's streaming share: each row's weight on the first 4 tokens and the 64 nearest (|i − j| < 64), as a streaming
# cache of StreamingLLM's shape keeps them (head scores' "streaming"; DuoAttention's streaming heads read little else)
STREAMING = (4, 64)


def _count(value, name: str, least: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < least:
        raise ValueError(f"{name} must be a whole number ≥ {least}, got {value!r}")
    return int(value)


def _order(scores: np.ndarray) -> np.ndarray:
    """Each row's columns from the highest score down, ties to the earlier column."""
    return np.argsort(-scores, axis=-1, kind="stable")


def _pool(votes: np.ndarray, kernel: int, pooling: str) -> np.ndarray:
    """votes pooled along the last axis over ``kernel`` neighbours (padding kernel // 2 each side)."""
    pad = kernel // 2
    if pooling == "avg":  # zeros past the ends, counted in the mean
        padded = np.pad(votes, [(0, 0)] * (votes.ndim - 1) + [(pad, pad)])
        windows = np.lib.stride_tricks.sliding_window_view(padded, kernel, axis=-1)
        return windows.mean(axis=-1)[..., : votes.shape[-1]]
    padded = np.pad(votes, [(0, 0)] * (votes.ndim - 1) + [(pad, pad)], constant_values=-np.inf)
    return np.lib.stride_tricks.sliding_window_view(padded, kernel, axis=-1).max(axis=-1)[..., : votes.shape[-1]]


def snap_window(budget: int) -> int:
    """SnapKV's voting window by default: half the budget, at most SNAP_WINDOW (kvpress's 64), so that
    the other half is chosen by the votes."""
    return min(SNAP_WINDOW, max(1, budget // 2))


def _check(method, budget, n, sinks, window, kernel, pooling):
    if method not in METHODS:
        raise ValueError(f"method must be one of {', '.join(map(repr, METHODS))}; got {method!r}")
    if method != "mask":
        _count(budget, "budget (the keys each head keeps)", 1)
    _count(sinks, "sinks (the first tokens StreamingLLM keeps)", 0)
    if window is not None:
        _count(window, "window (the most recent keys kept; SnapKV's queries that vote)", 1 if method == "snapkv" else 0)
        if method != "mask" and window > budget:
            raise ValueError(f"window ({window}) must be at most the budget ({budget}): it is kept within the budget")
    _count(kernel, "kernel (SnapKV's pooling width)", 1)
    if pooling not in ("avg", "max"):
        raise ValueError(f'pooling must be "avg" or "max", got {pooling!r}')
    if n < 1:
        raise ValueError("there are no keys to keep: read a text first")


def choose(
    method: str,
    budget: int,
    n: int,
    *,
    columns=None,
    votes=None,
    group: int = 1,
    sinks: int = SINKS,
    window: int | None = None,
    kernel: int = KERNEL,
    pooling: str = "avg",
    normalise: bool = False,
    causal: bool = True,
    mask=None,
    kv_heads: int | None = None,
) -> np.ndarray:
    """The keys kept, kv_heads × n booleans, from each query head's scores: ``columns`` (heads × n,
    the column sums, for "h2o"), ``votes`` (heads × (n − window), the window's mean weights, for
    "snapkv"); ``group`` query heads share a key-value head. See the module's docstring."""
    _check(method, budget, n, sinks, window, kernel, pooling)
    if method == "mask":
        keep = np.asarray(mask)
        if keep.dtype != bool or keep.shape[-1:] != (n,) or keep.ndim > 2:
            raise ValueError(f"mask must be booleans, one per key ({n}) or key-value heads × {n}; got {keep.shape}")
        return np.broadcast_to(keep, (kv_heads or 1, n)).copy() if keep.ndim == 1 else keep.copy()
    if method == "streaming":
        keep = np.zeros((kv_heads or 1, n), bool)
        keep[:, : min(sinks, budget)] = True
        if budget > sinks:
            keep[:, max(0, n - (budget - sinks)) :] = True
        return keep

    def grouped(a):  # (heads × n) -> each key-value head's mean over its query heads
        a = np.asarray(a, dtype=np.float64)
        return a.reshape(a.shape[0] // group, group, a.shape[-1]).mean(axis=1)

    if method == "h2o":
        recent = min(budget // 2 if window is None else window, n)
        scores = grouped(columns)
        if normalise:
            scores = scores / (n - np.arange(n) if causal else n)
    else:
        recent = min(snap_window(budget) if window is None else window, n)
        votes = np.asarray(votes, dtype=np.float64)
        scores = grouped(_pool(votes, kernel, pooling) if votes.shape[-1] else votes)
        scores = np.concatenate([scores, np.zeros((scores.shape[0], n - scores.shape[1]))], axis=-1)
    keep = np.zeros(scores.shape, bool)
    keep[:, n - recent :] = recent > 0
    rest = np.where(keep, -np.inf, scores)
    top = _order(rest)[:, : max(0, min(budget, n) - recent)]
    np.put_along_axis(keep, top, True, axis=-1)
    return keep


def kept(method: str, budget: int, q, k, *, scale=None, causal: bool = True, **options) -> np.ndarray:
    """The keys kept, kv_heads × n booleans, from a layer's queries (heads × n × d, after any
    rotation) and keys (kv_heads × n × d, before they are repeated for grouped heads), computed
    block by block (nothing n × n): see the module's docstring for the methods and ``options``."""
    from .blockwise import Heads

    if method in ("streaming", "mask"):  # (the text's length is all they need)
        return choose(method, budget, np.shape(k)[1], kv_heads=np.shape(k)[0], **options)
    heads = Heads(q, k, k, scale=scale, causal=causal)
    return from_heads(heads, method, budget, **options)


def column_sums(heads, h: int) -> np.ndarray:
    """Σ_i w_ij of head h of blockwise.Heads ``heads``, over every row, a band at a time."""
    return one_pass(heads, h)[0]


def one_pass(heads, h: int, streaming: tuple[int, int] = STREAMING) -> tuple[np.ndarray, np.ndarray]:
    """Head h of blockwise.Heads ``heads`` in one pass over its bands of rows: its column sums (m) and
    each row's streaming share (n), its weight on the first ``streaming[0]`` keys and on those within
    ``streaming[1]`` of it, ``|i − j| < streaming[1]`` (gathered, not a mask of the band)."""
    sinks, local = streaming
    be, sums, share = heads.be, np.zeros((heads.parts, heads.m)), np.zeros(heads.n)
    offsets = np.arange(-local + 1, local)

    def add(part, band):
        r0, r1, c0, c1, w, _, _ = band  # (the band's weights, rows × columns c0..c1)
        if c1 <= c0:  # (rows that read nothing: no weight anywhere)
            return
        sums[part, c0:c1] += be.numpy(w.sum(axis=0))
        rows = np.arange(r0, r1)
        near = rows[:, None] + offsets[None, :]  # each row's neighbours past the first keys, within the band's columns
        ok = (near >= max(sinks, c0)) & (near < c1)
        got = be.numpy(
            w[be.ints((rows - r0)[:, None].repeat(near.shape[1], axis=1)), be.ints(np.where(ok, near - c0, 0))]
        )
        first = be.numpy(w[:, : max(0, min(sinks, c1) - c0)].sum(axis=1)) if c0 < sinks else 0.0
        share[r0:r1] = first + np.where(ok, got, 0.0).sum(axis=1)

    heads._each_band(h, add)
    return sums.sum(axis=0), share


def options_of(options: dict, more: tuple = ()) -> dict:
    """``options``, each one a method's choice takes (OPTIONS, and ``more``), or ValueError."""
    bad = sorted(set(options) - set(OPTIONS) - set(more))
    if bad:
        raise ValueError(f"{bad[0]!r} is not an option of a compressed cache: give some of {', '.join(OPTIONS + more)}")
    return dict(options)


def from_heads(heads, method: str, budget: int, **options) -> np.ndarray:
    """The keys kept of a blockwise.Heads layer (its temperature, rule and window as set), kv_heads × m."""
    if heads.cross:
        raise ValueError(NO_CROSS)
    n, opts = heads.m, options_of(options, ("mask",))
    kw = dict(group=heads.group, kv_heads=heads.kv_heads, causal=heads.causal)
    if method == "h2o":
        _check(method, budget, n, SINKS, opts.get("window"), KERNEL, "avg")  # (before the pass over every row)
        columns = np.stack([column_sums(heads, h) for h in range(heads.heads)])
        return choose(method, budget, n, columns=columns, **kw, **opts)
    if method == "snapkv":
        window = opts.get("window")
        _check(method, budget, n, SINKS, window, opts.get("kernel", KERNEL), opts.get("pooling", "avg"))
        window = min(snap_window(budget) if window is None else window, n)
        rows = heads.rows(np.arange(heads.n - window, heads.n)).weights  # heads × window × m, exact
        opts["window"] = window
        return choose(method, budget, n, votes=rows[:, :, : n - window].mean(axis=1), **kw, **opts)
    return choose(method, budget, n, kv_heads=heads.kv_heads, **opts)


def losses(weights: np.ndarray, v: np.ndarray, keep: np.ndarray) -> dict:
    """What row i loses reading only the kept keys: ``weights`` heads × m (its row of each head),
    ``v`` heads × m × dv (each query head's values), ``keep`` heads × m (each query head's kept keys).
    {"retained": heads, "change": heads (NaN where nothing kept holds weight or o = 0),
    "layer_retained": the heads' mean, "layer_change": of the heads' outputs side by side}."""
    w = np.asarray(weights, dtype=np.float64)
    v = np.asarray(v, dtype=np.float64)
    kw = np.where(keep, w, 0.0)
    retained = kw.sum(axis=-1)
    o = np.einsum("hm,hmd->hd", w, v)
    with np.errstate(invalid="ignore", divide="ignore"):
        o2 = np.einsum("hm,hmd->hd", kw, v) / retained[:, None]
        change = np.linalg.norm(o2 - o, axis=-1) / np.linalg.norm(o, axis=-1)
        layer = np.linalg.norm(o2 - o) / np.linalg.norm(o)
    return {
        "retained": retained,
        "change": np.where(np.isfinite(change), change, np.nan),
        "layer_retained": float(retained.mean()),
        "layer_change": float(layer) if np.isfinite(layer) else float("nan"),
    }


def of_layer(weights, v, row: int, method: str, budget: int, *, keys=(), group: int = 1, causal=True, **options):
    """A widget's layer compressed: ``weights`` heads × n × m (every row read), ``v`` heads × m × dv
    (or None: no values, so no change of output), the focused ``row``; ``keys``: the positions
    "mask" keeps; ``group`` query heads share a cache. {"kept": heads × m (each query head's, its
    group's), and losses()'s of the row}."""
    w = np.asarray(weights, dtype=np.float64)
    heads, n, m = w.shape
    if heads % group:
        raise ValueError(f"group ({group}) must divide the {heads} heads: each key-value head serves that many")
    mask = None
    if method == "mask":
        bad = [j for j in keys if not 0 <= j < m]
        if bad:
            raise ValueError(f"kv_keys holds {bad[0]}, past the {m} keys read (0 to {m - 1}): keep keys that exist")
        mask = np.zeros(m, bool)
        mask[list(keys)] = True
    window = options.get("window")
    if method == "snapkv":
        _check(method, budget, m, SINKS, window, options.get("kernel", KERNEL), options.get("pooling", "avg"))
        window = options["window"] = min(snap_window(budget) if window is None else window, n, m)
    keep = choose(
        method,
        budget,
        m,
        columns=w.sum(axis=1),
        votes=w[:, n - window :, : m - window].mean(axis=1) if method == "snapkv" else None,
        group=group,
        kv_heads=heads // group,
        causal=causal,
        mask=mask,
        **options,
    )
    keep = np.repeat(keep, group, axis=0)
    if v is None:
        v = np.zeros((heads, m, 1))
    v = np.broadcast_to(np.asarray(v, dtype=np.float64)[..., :m, :], (heads, m, np.shape(v)[-1]))
    return {"kept": keep, **losses(w[:, row], v, keep)}
