"""Where position enters the lab's attention (the ``position`` trait), the twin of js/attention.js's
rope and alibi: RoPE turns each query and key by its token's position, ALiBi adds to each score a
penalty that grows with the distance between the two tokens. Token i is at position i (rows and
columns alike). A model's widget carries its own scheme in its q, k and bias already.
"""

from __future__ import annotations

import numpy as np

ROPE_BASE = 10000.0  # RoPE's base by default, as in RoFormer and most models since


def angles(n: int, width: int, base: float = ROPE_BASE) -> np.ndarray:
    """n × width/2: position p times θ_i = base^(−2i/width), the angle pair i of token p turns by."""
    theta = base ** (-np.arange(0, width, 2, dtype=float) / width)
    return np.arange(n, dtype=float)[:, None] * theta[None, :]


def rope(x: np.ndarray, base: float = ROPE_BASE) -> np.ndarray:
    """(heads ×) n × width vectors, each turned pair by pair by its position × θ_i, in transformers'
    layout: the pairs are (x[i], x[i + width/2]), the first half of each vector with the second."""
    x = np.asarray(x, dtype=float)
    half = x.shape[-1] // 2
    a = angles(x.shape[-2], x.shape[-1], base)
    cos, sin = np.cos(a), np.sin(a)
    first, second = x[..., :half], x[..., half:]
    return np.concatenate([first * cos - second * sin, second * cos + first * sin], axis=-1)


def slopes(heads: int) -> list[float]:
    """The ALiBi paper's slopes, as BLOOM has them: m_h = 2^(−8h/H) for heads h = 1 … H when H is a
    power of two (1/2, 1/4, … 1/256 for 8 heads); otherwise those of the power of two P below H,
    then every other slope of 2P heads, 2^(−4(2r − 1)/P), for the H − P heads left."""
    power = 1 << (heads.bit_length() - 1)
    extra = [2.0 ** (-4 * (2 * r - 1) / power) for r in range(1, heads - power + 1)]
    return [2.0 ** (-8 * h / power) for h in range(1, power + 1)] + extra


def alibi(n: int, m: int, ms) -> np.ndarray:
    """heads × n × m: ``−m_h·|i − j|``, added to the scores of row i reading column j."""
    distance = np.abs(np.arange(n)[:, None] - np.arange(m)[None, :]).astype(float)
    return -np.asarray(ms, dtype=float)[:, None, None] * distance


def positioned(q: np.ndarray, k: np.ndarray, bias, state: dict):
    """q, k and bias as the scores take them at ``state``'s ``position``: turned (RoPE), or the bias
    plus ALiBi's (heads × n × m with q's heads, n × m for 2-D q); as given otherwise."""
    scheme = None if state.get("n_layers") else state.get("position")  # (a model's: in its q and k already)
    if scheme == "rope":
        return rope(q, state["rope_base"]), rope(k, state["rope_base"]), bias
    if scheme != "alibi":
        return q, k, bias
    heads = q.shape[0] if q.ndim == 3 else 1
    ramp = alibi(q.shape[-2], k.shape[-2], state.get("alibi_slopes") or slopes(heads))
    ramp = ramp if q.ndim == 3 else ramp[0]
    return q, k, ramp if bias is None else bias + ramp
