"""Attention of long inputs, block by block: exact rows, tiles, pooled maps, head summaries and
outputs of one layer's heads from its q, k and v, holding nothing of size n × m beyond one band of
rows (block × m) at a time.

The math is formulas.py's (scale, soft cap, bias, causal rule, temperature; the row maximum is
subtracted before dividing by T, closed cells are exactly 0, a row that reads nothing is all
zeros), with a causal sliding window (row i reads j in (i − window, i], as Mistral's and Gemma's
sliding layers do) and the sink (the first token's column closed, as inputs.reading_mask does). A
band reads every key its rows may read at once, so each row's maximum and sum (its log-sum-exp) are
exact from one pass, and kept (two floats a row): a tile asked for later costs only its own cells.

q, k and v stay as given: numpy arrays are computed with numpy, torch tensors with torch on their
own device, in float32 (float64 when an input is float64); the answers are numpy.
"""

from __future__ import annotations

import math
import sys
import threading
from typing import Any, Callable, NamedTuple

import numpy as np

from . import threads
from .formulas import CLOSED, SUMMARIES, check_options

__all__ = ["BUDGET", "Cells", "Heads", "Scan"]

BUDGET = 64 * 2**20  # bytes of scores a band of rows may hold (its scores and their exponentials)
FASTEST = 64  # rows a band holds at most: past it the band leaves the cache and the passes over it slow down
# below this temperature a tile is cut from its rows computed whole, not from their kept top and total: a score
# computed in another product may differ by a rounding, which 1/T would magnify into the weight
TINY = 1e-3
# a closed cell's score: finite, so that its 0 weight times it is 0, not NaN, in the entropy's Σ w·s (any score at
# or below CLOSED reads as closed, so a row of closed cells reads nothing)
FLOOR = -1e30


class Cells(NamedTuple):
    """Weights and scores (scale·q·k, soft-capped, plus the bias: before temperature and mask) of some cells."""

    weights: np.ndarray
    scores: np.ndarray


class Scan(NamedTuple):
    """One pass over a head: its weights pooled onto pixels (the largest weight in each, and the
    mean), and its summaries (formulas.head_summaries' names, one number each)."""

    max: np.ndarray | None
    mean: np.ndarray | None
    summaries: dict


class _Numpy:
    """numpy's spelling of the few operations torch spells otherwise; the rest (@, slicing, in-place
    arithmetic, exp and tanh with out=) is written once, the same for both."""

    xp, inf = np, np.inf
    parallel = True  # bands shared among the cores, numpy's BLAS in one thread under each (threads.each)

    def __init__(self, dtype):
        self.dtype = np.dtype(dtype)
        self.itemsize = self.dtype.itemsize

    empty = lambda self, size: np.empty(size, self.dtype)
    arange = lambda self, a, b: np.arange(a, b)
    ints = lambda self, values: np.asarray(values, dtype=np.int64)
    asarray = lambda self, x: np.asarray(x, dtype=self.dtype)
    numpy = lambda self, x: np.asarray(x)
    rowmax = lambda self, x: x.max(axis=-1, keepdims=True, initial=-np.inf)
    floor_ = lambda self, x, lo: np.maximum(x, lo, out=x)
    rowdot_ = lambda self, x, y: np.einsum("...j,...j->...", x, y)  # Σ_j x_ij·y_ij (torch's overwrites x)
    colmax = lambda self, x: x.max(axis=0)
    # x reduced over runs: from each start to the next (numpy's way), or by each element's run number (torch's)
    segments = lambda self, x, starts, index, how: (np.maximum if how == "max" else np.add).reduceat(x, starts)
    # the largest magnitude, NaN or inf when x holds one: from x's maximum and minimum (np.abs(x) would copy x)
    largest = lambda self, x: float(np.abs(np.array([x.max(), x.min()], dtype=float)).max()) if x.size else 0.0


class _Torch(_Numpy):
    """torch's spelling of the same, on the tensors' device (torch shares the cores itself)."""

    parallel = False

    def __init__(self, torch, dtype, device):
        self.xp, self.dtype, self.device = torch, dtype, device
        self.itemsize = torch.empty((), dtype=dtype).element_size()

    empty = lambda self, size: self.xp.empty(size, dtype=self.dtype, device=self.device)
    arange = lambda self, a, b: self.xp.arange(a, b, device=self.device)
    ints = lambda self, values: self.xp.as_tensor(np.asarray(values, dtype=np.int64), device=self.device)
    asarray = lambda self, x: self.xp.as_tensor(x, dtype=self.dtype, device=self.device)
    numpy = lambda self, x: x.detach().cpu().numpy() if hasattr(x, "detach") else np.asarray(x)
    floor_ = lambda self, x, lo: x.clamp_(min=lo)
    rowdot_ = lambda self, x, y: x.mul_(y).sum(dim=-1)
    colmax = lambda self, x: x.amax(dim=0)
    largest = lambda self, x: float(self.xp.stack([x.max(), x.min()]).double().abs().max()) if x.numel() else 0.0

    # (torch has no maximum of nothing)
    rowmax = lambda self, x: x.amax(dim=-1, keepdim=True) if x.shape[-1] else x.new_full((*x.shape[:-1], 1), -np.inf)

    def segments(self, x, starts, index, how: str):
        out = self.xp.zeros(len(starts), dtype=x.dtype, device=x.device)  # weights are ≥ 0: 0 is max's identity
        return out.scatter_reduce_(0, index, x, "amax") if how == "max" else out.index_add_(0, index, x)


def _backend(q, k, v):
    """The backend of q, k and v (all numpy-like, or all torch tensors on one device) and the arrays as 3-D."""
    torch = sys.modules.get("torch")
    tensors = [torch is not None and isinstance(a, torch.Tensor) for a in (q, k, v)]
    if any(tensors) and not all(tensors):
        raise ValueError("q, k and v must all be torch tensors or all be arrays; convert the others with the same kind")
    arrays = []
    for name, a in zip("qkv", (q, k, v)):
        a = a if all(tensors) else np.asarray(a)
        kind = str(a.dtype)
        if not (("float" in kind or "int" in kind) and "complex" not in kind):
            raise ValueError(f"{name} must hold numbers (floats or integers), got dtype {kind}")
        if a.ndim not in (2, 3) or 0 in a.shape:
            raise ValueError(
                f"{name} must be heads × tokens × width (3-D, or tokens × width for one head), non-empty; "
                f"got shape {tuple(a.shape)}"
            )
        arrays.append(a[None] if a.ndim == 2 else a)
    wide = any(str(a.dtype) in ("float64", "torch.float64") or "int" in str(a.dtype) for a in arrays)
    if all(tensors):
        if len({a.device for a in arrays}) > 1:
            raise ValueError(f"q, k and v must be on one device, got {[str(a.device) for a in arrays]}")
        return _Torch(torch, torch.float64 if wide else torch.float32, arrays[0].device), arrays
    return _Numpy(np.float64 if wide else np.float32), arrays


class Heads:
    """One attention layer's heads, computed block by block from q (heads × n × d), k (kv_heads ×
    m × d) and v (kv_heads × m × dv), kept as given; query head h reads key-value head
    h // (heads // kv_heads). Options as formulas.attention's (``scale`` None: 1/sqrt(d)), and:

    - ``window``: a causal sliding window, row i reads columns j in (i − window, i] (needs ``causal``);
    - ``sink``: the first token's column closed (each row renormalised over the others);
    - ``bias``: a function (head, rows, cols) -> len(rows) × len(cols) array added to the scores,
      rows and cols being positions (numpy or torch integers, like q): ALiBi-like biases made a
      block at a time; a value at or below formulas.CLOSED closes its cell;
    - ``cross``: rows and columns are different texts' tokens (no "self" or "previous" summary);
    - ``block``: rows per band (default: what ``budget`` bytes of scores allow, at most 64).
    """

    def __init__(
        self,
        q,
        k,
        v,
        *,
        scale: float | None = None,
        temperature: float = 1.0,
        causal: bool = False,
        softcap: float | None = None,
        sink: bool = False,
        window: int | None = None,
        bias: Callable[[int, Any, Any], Any] | None = None,
        cross: bool = False,
        block: int | None = None,
        budget: int = BUDGET,
    ):
        self.be, (self.q, self.k, self.v) = _backend(q, k, v)
        (self.heads, self.n, self.d), (self.kv_heads, self.m, _), self.dv = self.q.shape, self.k.shape, self.v.shape[2]
        if self.k.shape[2] != self.d:
            raise ValueError(f"q and k must have the same width, got {self.d} and {self.k.shape[2]}")
        if self.v.shape[1] != self.m:
            raise ValueError(
                f"k and v must have one key and one value per token read, got {self.m} keys, {self.v.shape[1]} values"
            )
        if self.v.shape[0] != self.kv_heads:
            raise ValueError(f"k and v must have the same number of heads, got {self.kv_heads} and {self.v.shape[0]}")
        if self.heads % self.kv_heads:
            raise ValueError(
                f"{self.kv_heads} key-value heads cannot be shared by {self.heads} query heads: give a multiple of them"
            )
        check_options(temperature, scale, softcap)
        if window is not None and not (causal and isinstance(window, (int, np.integer)) and window >= 1):
            raise ValueError(
                f"window must be a whole number ≥ 1, with causal=True (row i reads j in (i − window, i]); got "
                f"window={window}, causal={causal}"
            )
        if bias is not None and not callable(bias):
            raise ValueError(
                f"bias must be a function (head, rows, cols) -> that block of it, not n × m; got {type(bias).__name__}"
            )
        if block is not None and not (isinstance(block, (int, np.integer)) and block >= 1):
            raise ValueError(f"block must be a whole number of rows ≥ 1, or None for the budget's, got {block}")
        size = {name: self.be.largest(a) for name, a in zip("qkv", (self.q, self.k, self.v))}
        for name in "qkv":
            if not math.isfinite(size[name]):
                raise ValueError(f"{name} holds NaN or infinite values; attention of them is not a number")
        self.scale = 1.0 / math.sqrt(self.d) if scale is None else float(scale)
        bound = self.d * size["q"] * size["k"] * max(1.0, abs(self.scale))
        if bound > (1e300 if self.be.itemsize == 8 else float(np.finfo(np.float32).max) / 16):  # formulas' limit
            raise ValueError(f"q and k are so large that scores (~{bound:.1e}) overflow: divide q or k by a constant")
        self.temperature, self.causal, self.sink, self.cross = float(temperature), bool(causal), bool(sink), bool(cross)
        self.softcap = None if softcap is None else float(softcap)
        self.window, self.bias, self.group = window, bias, self.heads // self.kv_heads
        self.budget, self.out_dtype = int(budget), (np.float64 if self.be.itemsize == 8 else np.float32)
        self.parts = threads.count() if self.be.parallel else 1  # bands computed at once
        fits = self.budget // (2 * self.parts * self.m * self.be.itemsize)  # rows whose bands fit the budget
        self.block = int(block) if block else max(1, min(FASTEST, self.n, fits))
        # each row's largest open score (-inf: it reads nothing; NaN: not yet computed) and its Σ exp((s − top) / T)
        self._top = np.full((self.heads, self.n), np.nan)
        self._total = np.ones((self.heads, self.n))

    def _span(self, lo: int, hi: int) -> tuple[int, int]:
        """The columns c0..c1 rows lo..hi − 1 may read (closed cells inside are closed one by one)."""
        c0 = max(0, lo - self.window + 1) if self.window else 0
        c0 = max(c0, 1) if self.sink else c0
        c1 = min(self.m, hi) if self.causal else self.m
        return min(c0, c1), c1

    def _scores(self, heads: list, rows, c0: int, c1: int, out):
        """formulas.scores_of for heads of one group, rows (positions) × columns c0..c1, into ``out``."""
        be, g = self.be, heads[0] // self.group
        q = be.xp.stack([be.asarray(self.q[h][rows]) for h in heads])
        fold = self.softcap is None and be.itemsize == 4  # float32: scale q's rows, not every score (a pass fewer)
        if fold:
            q *= self.scale
        (G, B, _), W = q.shape, c1 - c0  # one product per group (its key block read once): heads' rows stacked
        flat = None if out is None else out.reshape(G * B, W)
        s = be.xp.matmul(q.reshape(G * B, -1), be.asarray(self.k[g, c0:c1]).T, out=flat)
        s = s.reshape(G, B, W)
        if not fold:
            s *= self.scale
        if self.softcap is not None:
            s /= self.softcap
            be.xp.tanh(s, out=s)
            s *= self.softcap
        if self.bias is not None:
            cols = be.arange(c0, c1)
            for i, h in enumerate(heads):
                b = be.asarray(self.bias(h, rows, cols))
                if tuple(b.shape) != (len(rows), c1 - c0):
                    raise ValueError(
                        f"bias gave an array of shape {tuple(b.shape)} for a block of {len(rows)} × {c1 - c0} "
                        "(rows × columns): it must return the block of the rows and columns it is given"
                    )
                if not math.isfinite(be.largest(b)):
                    raise ValueError("bias must be finite (a value at or below formulas.CLOSED closes a cell)")
                s[i] += b
        return s

    def _close(self, s, rows, lo: int, hi: int, c0: int, c1: int) -> None:
        """FLOOR in the cells of s (… × rows × columns c0..c1) the rows may not read; lo..hi − 1 spans rows."""
        be = self.be
        if self.causal and max(c0, lo + 1) < c1:  # the band's own corner past the diagonal
            a = max(c0, lo + 1)
            s[..., a - c0 :][..., be.arange(a, c1)[None, :] > rows[:, None]] = FLOOR
        if self.window and c0 < min(c1, hi - self.window):  # the corner left of the window
            b = min(c1, hi - self.window)
            s[..., : b - c0][..., be.arange(c0, b)[None, :] <= rows[:, None] - self.window] = FLOOR
        if self.sink and c0 == 0 and c1 > 0:
            s[..., 0] = FLOOR
        if self.bias is not None:
            s[s <= CLOSED] = FLOOR  # closed by its score, as formulas' softmax closes it

    def _softmax(self, s, e, entropy: bool = False):
        """Weights of masked scores s into e (formulas._softmax_rows), s left as (s − top) / T; each
        row's top and total; with ``entropy`` s kept finite, for Σ w·s."""
        top = self.be.rowmax(s)
        empty = top <= CLOSED
        top[empty] = 0.0
        s -= top
        if self.temperature != 1:
            with np.errstate(over="ignore"):  # at a tiny T a gap becomes -inf, whose exp is the 0 it should be
                s /= self.temperature
        if entropy and self.temperature < 1:  # (FLOOR − top) / T may have overflowed to -inf
            self.be.floor_(s, FLOOR)
        self.be.xp.exp(s, out=e)
        total = e.sum(axis=-1, keepdims=True)
        total[empty] = 1.0
        e /= total
        top[empty] = -self.be.inf
        return top, total

    def _keep(self, heads: list, rows, top, total) -> None:  # the rows' top and total (heads × rows × 1) kept
        rows = self.be.numpy(rows)
        for i, h in enumerate(heads):  # total first: a row whose top is known (not NaN) has its total, for a reader
            self._total[h, rows] = self.be.numpy(total[i, :, 0])  # in another thread (a page's tile during a map)
            self._top[h, rows] = self.be.numpy(top[i, :, 0])

    def _each_band(self, h: int, fn, entropy: bool = False, progress=None) -> None:
        """fn(part, band) for each band of head h's rows (see _bands), the bands shared among ``parts``
        threads, each taking every parts-th band; ``progress(fraction)`` after each, in order."""
        lock, done, parts = threading.Lock(), [0], min(self.parts, -(-self.n // self.block))

        def run(part):
            for band in self._bands(h, entropy, part, parts):
                fn(part, band)
                if progress is not None:
                    with lock:
                        done[0] += band[1] - band[0]
                        progress(done[0] / self.n)

        threads.each(run, range(parts))

    def _bands(self, h: int, entropy: bool = False, part: int = 0, parts: int = 1):
        """Each parts-th band of head h's rows from the part-th: (r0, r1, c0, c1, weights, (s − top) / T,
        total), its weights, scaled scores and totals (rows × columns) in two buffers made once."""
        be, step = self.be, self.block
        room = [be.empty(step * self.m) for _ in range(2)]
        for r0 in range(part * step, self.n, parts * step):
            r1 = min(self.n, r0 + step)
            c0, c1 = self._span(r0, r1)
            rows = be.arange(r0, r1)
            s, e = (r[: (r1 - r0) * (c1 - c0)].reshape(1, r1 - r0, c1 - c0) for r in room)
            self._scores([h], rows, c0, c1, out=s)
            self._close(s, rows, r0, r1, c0, c1)
            top, total = self._softmax(s, e, entropy)
            self._keep([h], rows, top, total)
            yield r0, r1, c0, c1, e[0], s[0], total[0, :, 0]

    def _positions(self, positions, count: int, what: str, among: str) -> np.ndarray:
        at = np.atleast_1d(np.asarray(positions))
        if at.ndim != 1 or not (np.issubdtype(at.dtype, np.integer) or at.size == 0):
            raise ValueError(f"each {what} must be a whole number, got {positions!r}")
        bad = at[(at < 0) | (at >= count)]
        if len(bad):
            raise ValueError(f"{what} {bad[0]} is outside the {count} {among} (0 to {count - 1})")
        return at.astype(np.int64)

    def _head(self, head) -> int:
        return int(self._positions(head if np.ndim(head) == 0 else [head], self.heads, "head", "heads")[0])

    def lse(self, head: int) -> np.ndarray:
        """Each row's log Σ_j exp(score_ij / T) over the cells it reads (n floats; -inf for a row that
        reads nothing): top / T + log(total), computed once per head."""
        h = self._head(head)
        if np.isnan(self._top[h]).any():
            self._each_band(h, lambda part, band: None)  # (each band keeps its rows' top and total)
        top, total = self._top[h], self._total[h]
        with np.errstate(over="ignore", divide="ignore"):
            return np.where(np.isfinite(top), top / self.temperature + np.log(total), -np.inf)

    def rows(self, positions, heads=None) -> Cells:
        """The weights and scores of the rows at ``positions`` of each of ``heads`` (default: all):
        heads × len(positions) × m each; a group's heads read their keys once."""
        at = self._positions(positions, self.n, "position", "rows")
        chosen = self._positions(range(self.heads) if heads is None else heads, self.heads, "head", "heads")
        weights = np.empty((len(chosen), len(at), self.m), dtype=self.out_dtype)
        scores = np.empty_like(weights)
        for g in range(self.kv_heads):
            mine = [i for i, h in enumerate(chosen) if h // self.group == g]
            if not mine:
                continue
            step = max(1, self.budget // (2 * len(mine) * self.m * self.be.itemsize))
            for a in range(0, len(at), step):
                part = self.be.ints(at[a : a + step])
                hs = [int(chosen[i]) for i in mine]
                s = self._scores(hs, part, 0, self.m, out=None)
                scores[mine, a : a + step] = self.be.numpy(s)
                lo, hi = int(at[a : a + step].min()), int(at[a : a + step].max()) + 1
                self._close(s, part, lo, hi, 0, self.m)
                e = self.be.xp.empty_like(s)
                self._keep(hs, part, *self._softmax(s, e))
                weights[mine, a : a + step] = self.be.numpy(e)
        return Cells(weights, scores)

    def check_region(self, r0: int, r1: int, c0: int, c1: int) -> None:
        """Refuses rows r0..r1 − 1 × columns c0..c1 − 1 unless they are a region of the matrix."""
        for (a, b), count, what in (((r0, r1), self.n, "rows"), ((c0, c1), self.m, "columns")):
            if not (0 <= a < b <= count):
                x, y = ("r0", "r1") if what == "rows" else ("c0", "c1")
                raise ValueError(
                    f"{what} {a} to {b} are not a region of the {count} {what}: ask 0 ≤ {x} < {y} ≤ {count}"
                )

    def tile(self, head: int, r0: int, r1: int, c0: int, c1: int) -> Cells:
        """The weights and scores of rows r0..r1 − 1 × columns c0..c1 − 1 of head ``head``, exact (each
        row's top and total computed once, over the whole row)."""
        h = self._head(head)
        self.check_region(r0, r1, c0, c1)
        if (r1 - r0) * (c1 - c0) * 2 * self.be.itemsize > self.budget:
            raise ValueError(
                f"a tile of {r1 - r0} × {c1 - c0} cells exceeds the budget ({self.budget} bytes): ask a smaller one, "
                "or pooled() for the whole map"
            )
        # the rows' top and total known: only the tile's own cells; else (or at a tiny T, where a rounding apart
        # between two products is a weight apart) its rows computed whole, a budget's worth at a time
        be, known = self.be, self.temperature >= TINY and not np.isnan(self._top[h, r0:r1]).any()
        weights = np.empty((r1 - r0, c1 - c0), dtype=self.out_dtype)
        scores = np.empty_like(weights)
        step = r1 - r0 if known else max(1, self.budget // (2 * self.m * be.itemsize))
        for lo in range(r0, r1, step):
            hi = min(r1, lo + step)
            a, b = (c0, c1) if known else (min(c0, self._span(lo, hi)[0]), max(c1, self._span(lo, hi)[1]))
            rows = be.arange(lo, hi)
            s = self._scores([h], rows, a, b, out=None)
            scores[lo - r0 : hi - r0] = be.numpy(s[0, :, c0 - a : c1 - a])
            self._close(s, rows, lo, hi, a, b)
            if known:
                e, top = s, self._top[h, lo:hi]
                s -= be.asarray(np.where(np.isfinite(top), top, 0.0)[None, :, None])
                s /= self.temperature
                be.xp.exp(s, out=s)
                s /= be.asarray(self._total[h, lo:hi][None, :, None])
            else:
                e = be.xp.empty_like(s)
                self._keep([h], rows, *self._softmax(s, e))
            weights[lo - r0 : hi - r0] = be.numpy(e[0, :, c0 - a : c1 - a])
        return Cells(weights, scores)

    def scan(self, head: int, rows_px: int | None = None, cols_px: int | None = None, progress=None) -> Scan:
        """Head ``head``'s weights pooled onto rows_px × cols_px pixels (each clamped to the rows and
        columns there are), both the largest weight in each pixel and the mean, and its summaries, in one
        pass over its bands. Pixel p holds the rows i with ⌊i·P/n⌋ = p (rows ⌈p·n/P⌉ to ⌈(p+1)·n/P⌉ − 1),
        columns likewise: overview.thumbnail's blocks. ``progress(fraction)`` is called after each band
        (from the threads computing them)."""
        h = self._head(head)
        pooling = rows_px is not None or cols_px is not None
        if pooling:
            if not (rows_px and cols_px and rows_px >= 1 and cols_px >= 1):
                raise ValueError(f"pixels must be whole numbers ≥ 1, got {rows_px} × {cols_px}")
            P, Q = min(int(rows_px), self.n), min(int(cols_px), self.m)
            redges, cedges = -(-np.arange(P + 1) * self.n // P), -(-np.arange(Q + 1) * self.m // Q)
            largest, sums = np.zeros((self.parts, P, Q)), np.zeros((self.parts, P, Q))  # each thread's own
            columns = self.be.ints(np.arange(self.m) * Q // self.m)  # each column's pixel
        be, n = self.be, self.n
        first, diagonal, previous, effective = (np.zeros(n) for _ in range(4))  # (threads write their own rows)

        def one(part, band):
            r0, r1, c0, c1, w, s, row_total = band
            if c1 > c0 and c0 == 0:
                first[r0:r1] = be.numpy(w[:, 0])
            i = np.arange(max(r0, c0), min(r1, c1))
            diagonal[i] = be.numpy(w[be.ints(i - r0), be.ints(i - c0)])
            i = np.arange(max(r0, c0 + 1, 1), min(r1, c1 + 1))
            previous[i] = be.numpy(w[be.ints(i - r0), be.ints(i - 1 - c0)])
            effective[r0:r1] = be.numpy(be.xp.exp(be.xp.log(row_total) - be.rowdot_(s, w)))  # log Z − Σ w·s
            if not pooling or c1 <= c0:
                return
            q0, q1 = c0 * Q // self.m, (c1 - 1) * Q // self.m + 1
            starts, index = np.maximum(cedges[q0:q1], c0) - c0, columns[c0:c1] - q0
            for p in range(r0 * P // n, (r1 - 1) * P // n + 1):
                band = w[max(redges[p], r0) - r0 : min(redges[p + 1], r1) - r0]
                pixels = largest[part, p, q0:q1]
                np.maximum(pixels, be.numpy(be.segments(be.colmax(band), starts, index, "max")), out=pixels)
                sums[part, p, q0:q1] += be.numpy(be.segments(band.sum(axis=0), starts, index, "sum"))

        self._each_band(h, one, entropy=True, progress=progress)
        summaries = self._summaries(first, diagonal, previous, effective)
        if not pooling:
            return Scan(None, None, summaries)
        return Scan(largest.max(axis=0), sums.sum(axis=0) / np.outer(np.diff(redges), np.diff(cedges)), summaries)

    def pooled(self, head: int, rows_px: int, cols_px: int, how: str = "max", progress=None) -> np.ndarray:
        """Head ``head``'s whole weight map pooled onto pixels (see scan): ``how`` "max" or "mean"."""
        if how not in ("max", "mean"):
            raise ValueError(f'how must be "max" or "mean" (scan() gives both at once), got {how!r}')
        return np.asarray(self.scan(head, rows_px, cols_px, progress)[0 if how == "max" else 1])

    def summaries(self, heads=None, progress=None) -> dict:
        """formulas.head_summaries of each of ``heads`` (default: all): {name: one number per head}."""
        chosen = self._positions(range(self.heads) if heads is None else heads, self.heads, "head", "heads")
        each = []
        for i, h in enumerate(chosen):
            done = None if progress is None else (lambda f, i=i: progress((i + f) / len(chosen)))
            each.append(self.scan(int(h), progress=done).summaries)
        return {name: np.array([s[name] for s in each]) for name in SUMMARIES}

    def _summaries(self, first, diagonal, previous, effective) -> dict:
        """formulas.summaries_of_rows, with the cells rows may read worked out row by row, not held."""
        n, m, i = self.n, self.m, np.arange(self.n)

        def may(j):  # whether row i may read column j (for one column per row)
            ok = (j >= 0) & (j < m)
            ok &= (j <= i) if self.causal else True
            ok &= (j > i - self.window) if self.window else True
            return ok & (j != 0) if self.sink else ok

        lo = np.maximum(i - self.window + 1, 0) if self.window else np.zeros(n, dtype=np.int64)
        lo, hi = np.maximum(lo, 1 if self.sink else 0), np.minimum(i + 1, m) if self.causal else np.full(n, m)
        has_self = np.zeros(n, dtype=bool) if self.cross else may(i) & (i < min(n, m))
        has_previous = np.zeros(n, dtype=bool) if self.cross else may(i - 1) & (i >= 1)
        mean = lambda values, rows: float((values * rows).sum() / rows.sum()) if rows.any() else float("nan")
        return {
            "first": mean(first, may(np.zeros(n, dtype=np.int64))),
            "self": mean(diagonal, has_self),
            "previous": mean(previous, has_previous),
            "effective_tokens": mean(effective, hi > lo),
        }

    def output(self, head: int, progress=None) -> np.ndarray:
        """Head ``head``'s output, weights × values (n × dv), a band at a time."""
        h = self._head(head)
        out = np.zeros((self.n, self.dv), dtype=self.out_dtype)
        v = self.v[h // self.group]

        def one(part, band):
            r0, r1, c0, c1, w, _, _ = band
            out[r0:r1] = self.be.numpy(w @ self.be.asarray(v[c0:c1]))

        self._each_band(h, one, progress=progress)
        return out
