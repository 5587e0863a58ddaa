"""The attention computation of one head in plain numpy: no widget, no traitlets.

One definition of every formula the widget shows; ``js/attention.js`` computes the same
ones so the page can redraw without asking the kernel.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

__all__ = ["Attention", "Differential", "attention", "default_scale", "principal_axes"]

# Scores up to this size: a row's sums and differences stay finite in float64.
SCORE_LIMIT = 1e300


def default_scale(d_k: int) -> float:
    """The usual 1/sqrt(d_k)."""
    return 1.0 / float(np.sqrt(d_k))


def score_bound(q: np.ndarray, k: np.ndarray, scale) -> float:
    """An upper bound on every number computing scale · q·k makes: the dot product and each of
    its partial sums (d·max|q|·max|k|), and the score (that times |scale|). inf when it overflows."""
    s = default_scale(q.shape[-1]) if scale is None else abs(scale)
    with np.errstate(over="ignore"):
        dot = (
            q.shape[-1] * float(np.abs(q).max()) * float(np.abs(k).max())
        )  # summed before it is scaled; in float64, whatever q's type
        return float(max(dot, s * dot))


def overflow_message(q, k, scale, bias=None) -> str | None:
    """Why these scores cannot be computed in float64, or None when they can."""
    bound = score_bound(q, k, scale)
    if bound <= SCORE_LIMIT and (bias is None or bound + float(np.abs(bias).max()) <= SCORE_LIMIT):
        return None
    if bound <= SCORE_LIMIT:
        return (
            f"scale·q·k (up to about {bound:.1e}) plus the bias (up to {float(np.abs(bias).max()):.1e}) would overflow "
            f"float64; keep their sum below {SCORE_LIMIT:.0e}."
        )
    return (
        f"q and k are so large that their dot products or scores (up to about {bound:.1e}) would overflow float64; "
        f"divide q or k by a constant so that d·max|q|·max|k| and the score stay below {SCORE_LIMIT:.0e}."
    )


def _scaled(a: np.ndarray):
    """``a`` divided by its largest magnitude, and that magnitude (1 for all zeros): metrics of
    huge values are computed on numbers near 1, then scaled back, so nothing overflows."""
    m = float(np.abs(a).max()) if a.size else 0.0
    m = m if m > 0 else 1.0
    return a / m, m


# A score at or below this closes its cell (weight exactly 0 at every temperature), as an additive mask of a
# model's lowest number does: how attention weights given as input keep a cell given 0 (integrations/weights.py).
CLOSED = -1e30
UNDERFLOW = -746.0  # exp of anything at or below is exactly 0.0


def _softmax_rows(
    scores: np.ndarray, temperature: float, allowed, *, overwrite=False, closed=None, bounded=False, sink=None
) -> np.ndarray:
    """Row-wise softmax of scores / temperature over the allowed cells (and those scored above
    CLOSED); the rest are exactly 0. The row maximum is subtracted before dividing by the
    temperature, so every exponent is <= 0 and no finite input overflows, however small T is. A
    row with no allowed cell reads nothing: all its weights are 0 (not NaN). ``overwrite``: in
    ``scores``'s own memory; ``closed``: ``~allowed``, when the caller has it; ``bounded``: the
    caller knows every score is finite and above CLOSED (they are not looked over for it). A step
    that would change nothing is skipped (clipping finite scores, dividing by T = 1): the same numbers.

    ``sink``: a learnt sink's logit z (gpt-oss): one more column of every row, with score z, in the
    softmax and dropped after it, so each row sums to 1 − the sink's share; None (or z at or below
    CLOSED) for none."""
    lo, hi = (0.0, 0.0) if bounded else (scores.min(initial=0.0), scores.max(initial=0.0))
    s = scores if overwrite else scores.copy()
    if not (np.isfinite(lo) and np.isfinite(hi)):  # a score that overflowed to ±inf still has a row maximum
        np.clip(s, -np.finfo(float).max, np.finfo(float).max, out=s)
    if allowed is not None:
        np.copyto(s, -np.inf, where=~allowed if closed is None else closed)
    if not lo > CLOSED:
        s[s <= CLOSED] = -np.inf
    top = s.max(axis=1, keepdims=True, initial=-np.inf)
    z = float(sink) if sink is not None and sink > CLOSED else None
    if z is not None:
        np.maximum(top, z, out=top)  # the sink's column is one of the row's: no row is empty
    empty = ~np.isfinite(top[:, 0])
    top[empty] = 0.0
    s -= top
    if temperature != 1:
        with np.errstate(over="ignore"):  # at a tiny T a gap becomes -inf, whose exp is the 0 it should be
            s /= temperature
    # exp where it is not exactly 0 (numpy's exp of -inf, or of what underflows, is several times slower; NaN stays)
    dead = np.less_equal(s, UNDERFLOW)
    np.exp(s, out=s, where=np.logical_not(dead))
    np.copyto(s, 0.0, where=dead)
    total = s.sum(axis=1, keepdims=True)
    if z is not None:
        with np.errstate(over="ignore", under="ignore"):
            total += np.exp((z - top) / temperature)  # the sink's own term: its share, dropped from the row
    total[empty] = 1.0
    s /= total
    return s


def scores_of(q, k, scale=None, bias=None, softcap=None, out=None) -> np.ndarray:
    """scale · Q Kᵀ (scale None: 1/sqrt(d_k)), soft-capped to softcap · tanh(s / softcap) when
    ``softcap`` is given (Gemma 2's cap: no score beyond ±softcap), plus ``bias`` when given: the
    scores, before temperature and mask (written into ``out`` when given)."""
    s = np.matmul(q, k.T, out=out)
    if not np.issubdtype(s.dtype, np.inexact):
        s = s.astype(float)  # (whole numbers given)
    s *= default_scale(q.shape[-1]) if scale is None else scale  # in place: the same numbers, one pass fewer
    if softcap is not None:
        s = np.multiply(np.tanh(np.divide(s, softcap, out=s), out=s), softcap, out=s)
    if bias is not None:
        s = s + bias if np.result_type(s, bias) != s.dtype else np.add(s, bias, out=s)
    return s


def allowed_cells(n: int, causal: bool, mask=None, n_keys: int | None = None):
    """Which cells a row may read (n × n_keys booleans; n_keys defaults to n): the causal rule
    (row i reads columns j ≤ i) and an optional mask together; None when every cell may be read."""
    allowed = None if mask is None else np.asarray(mask, dtype=bool)
    if causal:
        lower = np.tri(n, n if n_keys is None else n_keys, dtype=bool)
        allowed = lower if allowed is None else allowed & lower
    return allowed


SUMMARIES = ("first", "self", "previous", "effective_tokens")


def head_summaries(
    weights: np.ndarray, allowed=None, *, cross: bool = False, sinks: bool = False
) -> dict[str, np.ndarray]:
    """What each head does, in one number per head: weights is (..., n, n_keys), rows read;
    allowed the cells rows may read (n × n_keys, None: all). Each is a mean over the rows where it
    exists, so a causal or masked head is measured on what its rows could do:

    - ``"first"``: the weight on token 0 (attention-sink mass), over rows that may read it;
    - ``"self"``: the weight on the row's own token, over rows that may read themselves;
    - ``"previous"``: the weight on token i − 1, over rows i ≥ 1 that may read it;
    - ``"effective_tokens"``: exp(entropy) of the row's weights divided by their sum (see
      :func:`effective_tokens`), over rows that may read anything;
    - ``"sink_share"`` (with ``sinks``, a model's learnt sinks): the share of the row's budget its
      head's learnt sink takes, 1 − the row's sum, over rows that may read anything.

    A summary no row has (the previous token of a one-token input) is NaN. In cross-attention
    (``cross``: rows are one text's tokens, columns another's) no row reads itself or its
    previous token, so ``"self"`` and ``"previous"`` are NaN.
    """
    n, m = weights.shape[-2:]
    i, p = np.arange(min(n, m)), np.arange(1, min(n, m + 1))
    diagonal, previous = np.zeros(weights.shape[:-1]), np.zeros(weights.shape[:-1])  # rows past the keys have neither
    diagonal[..., i] = weights[..., i, i]
    previous[..., p] = weights[..., p, p - 1]
    total = weights.sum(axis=-1)
    share = 1 - total if sinks else None
    return summaries_of_rows(
        weights[..., :, 0], diagonal, previous, _exp_entropy(weights, total), allowed, m, cross=cross, sink_share=share
    )


def summaries_of_rows(
    first, diagonal, previous, effective, allowed, n_keys: int, *, cross: bool = False, sink_share=None
) -> dict[str, np.ndarray]:
    """head_summaries from each row's numbers (..., n): its weight on token 0, on itself, on the
    token before it, its effective tokens and (a model's learnt sinks) the share its sink takes;
    allowed as there (n × n_keys, None: all)."""
    n = first.shape[-1]
    may = np.ones((n, n_keys), dtype=bool) if allowed is None else np.asarray(allowed, dtype=bool)
    i, p = np.arange(min(n, n_keys)), np.arange(1, min(n, n_keys + 1))

    def mean(values, rows):  # values (..., n) per row; rows (n,) where the summary exists
        with np.errstate(invalid="ignore"):
            return np.where(rows.any(), (values * rows).sum(axis=-1) / max(1, rows.sum()), np.nan)

    has_self, has_previous = np.zeros(n, dtype=bool), np.zeros(n, dtype=bool)
    if not cross:  # in cross-attention a row and a column of the same number are different tokens
        has_self[i], has_previous[p] = may[i, i], may[p, p - 1]
    found = {
        "first": mean(first, may[:, 0]),
        "self": mean(diagonal, has_self),
        "previous": mean(previous, has_previous),
        "effective_tokens": mean(effective, may.any(axis=1)),
    }
    if sink_share is not None:
        found["sink_share"] = mean(sink_share, may.any(axis=1))
    return found


def effective_tokens(w: np.ndarray) -> np.ndarray:
    """exp(entropy) of each row of weights ``w`` (rows × keys, or (...) × rows × keys) divided by the
    row's sum: 1 = all on one token, n = an even split; 0 for a row that reads nothing. A row sums to 1,
    unless a learnt sink took a share of it: then it counts the tokens among what the row keeps (its
    weights divided by their sum), whatever the share the sink took."""
    total = w.sum(axis=-1)
    return np.where(total > 0, _exp_entropy(w, total), 0.0)


def _exp_entropy(w: np.ndarray, total: np.ndarray) -> np.ndarray:
    """exp(entropy) of each row of ``w`` divided by its ``total`` (1 for a row of zeros, as the overview's
    fast path has it)."""
    logw = np.log(np.where(w > 0, w, 1.0))  # 0·ln 0 = 0
    kept = np.where(total > 0, total, 1.0)
    # the entropy of w / t is ln t − Σ w·ln w / t: exactly the plain one where t = 1
    return np.exp(np.log(kept) - (w * logw).sum(axis=-1) / kept)


class Attention:
    """The result of one attention computation.

    ``scores`` is scale·QKᵀ (soft-capped by ``softcap`` and plus ``bias``, when given) before
    temperature and mask; ``weights`` the row-wise softmax of scores / temperature (rows read,
    columns are read from), with a learnt ``sink`` logit z as one more column of each row, dropped
    after the softmax (each row then sums to 1 − the sink's share); ``output`` is weights·V. The
    metrics are computed on first use.
    """

    def __init__(
        self,
        q,
        k,
        v,
        *,
        temperature: float = 1.0,
        causal: bool = False,
        scale=None,
        mask=None,
        bias=None,
        softcap=None,
        sink=None,
    ):
        self.q, self.k, self.v = q, k, v
        self.temperature = float(temperature)
        self.causal = bool(causal)
        self.scale = default_scale(q.shape[1]) if scale is None else float(scale)
        self.bias = bias  # an additive term of the scores (a model's position bias), or None
        self.softcap = None if softcap is None else float(softcap)  # scores capped to ±softcap, or None
        self.sink = None if sink is None or sink <= CLOSED else float(sink)  # a learnt sink's logit, or None
        self.scores = scores_of(q, k, self.scale, bias, self.softcap)
        self.allowed = allowed_cells(q.shape[0], self.causal, mask, k.shape[0])
        if (self.scores <= CLOSED).any():  # closed by their score (weights given as input: a cell given 0)
            self.allowed = (self.scores > CLOSED) & (True if self.allowed is None else self.allowed)
        self.weights = _softmax_rows(self.scores, self.temperature, self.allowed, sink=self.sink)
        self.output = self.weights @ v

    @cached_property
    def effective_tokens(self) -> np.ndarray:
        """exp(entropy) of each row: 1 = all on one token, n = an even split; 0 for a row
        that may read nothing. With a learnt sink, of the row's weights divided by their sum: the
        tokens among what the row keeps."""
        return effective_tokens(self.weights)

    @cached_property
    def sense_resolved(self) -> np.ndarray:
        """How far each output moved from the mean value, as a fraction of the
        furthest any single value lies from that mean (0 when all values coincide)."""
        v, m = _scaled(self.v)  # a ratio: the same for values scaled to near 1, which cannot overflow
        mean = v.mean(axis=0)
        reach = np.linalg.norm(v - mean, axis=1).max()
        if reach == 0:
            return np.zeros(self.output.shape[0])
        return np.linalg.norm(self.output / m - mean, axis=1) / reach

    def cell(self, i: int, j: int) -> dict:
        """The arithmetic of one weight, step by step: row i (the reader) and column j.

        exp is shown unshifted, exp(score / T), as on paper; when that would overflow the
        whole row is shifted by its maximum (``shift``), which leaves every ratio unchanged.
        """
        n, m = self.weights.shape
        if not (0 <= i < n and 0 <= j < m):
            raise IndexError(f"cell ({i}, {j}) is outside the {n}×{m} matrix")
        row = self.scores[i] if self.allowed is None else self.scores[i, self.allowed[i]]
        if self.sink is not None:  # the sink's logit is one more term of the row's sum (its share, no token's)
            row = np.append(row, self.sink)
        # exp is shown unshifted while it can be: outside ±700 every term would overflow or
        # underflow, so the whole row is shifted by its maximum (ratios are unchanged)
        with np.errstate(over="ignore", under="ignore"):  # a tiny T: score / T may be ±inf, shown as such
            top = row.max() / self.temperature if row.size else 0.0
            shift = float(top) if abs(top) > 700 else 0.0
            masked = self.allowed is not None and not self.allowed[i, j]
            # shifted, each term is exp((s - max) / T): the same as exp(s / T - shift), and never inf - inf
            t = self.temperature
            exp_of = (lambda s: np.exp((s - row.max()) / t)) if shift else (lambda s: np.exp(s / t))
            exp_row = exp_of(row)
            dot = float(self.q[i] @ self.k[j])
            bias = 0.0 if self.bias is None else float(self.bias[i, j])
            capped = None if self.softcap is None else float(self.softcap * np.tanh(self.scale * dot / self.softcap))
            tempered = float(self.scores[i, j] / t)
            exp_cell = 0.0 if masked else float(exp_of(self.scores[i, j]))
        return {
            "dot": dot,
            "scale": self.scale,
            "softcap": self.softcap,
            "capped": capped,  # softcap · tanh(scale · dot / softcap), or None without a cap
            "bias": bias,
            "score": float(self.scores[i, j]),
            "temperature": self.temperature,
            "tempered": tempered,
            "shift": shift,
            "masked": masked,
            "exp": exp_cell,
            "row_sum": float(exp_row.sum()),  # with a learnt sink, its exp(z / T) too
            "sink": self.sink,  # the head's learnt sink's logit z, or None
            "weight": float(self.weights[i, j]),
            "value": self.v[j].copy(),
            "share": self.weights[i, j] * self.v[j],
        }

    @cached_property
    def output_spread(self) -> float:
        """The largest distance between any two tokens' outputs."""
        o, m = _scaled(self.output)  # near 1: squares of huge outputs would overflow
        o = o - o.mean(axis=0)  # centred: the Gram form keeps its precision
        sq = (o * o).sum(axis=1)
        d2 = sq[:, None] + sq[None, :] - 2.0 * (o @ o.T)  # Gram form: O(n²) memory, not O(n²·d)
        return float(np.sqrt(max(d2.max(), 0.0)) * m)


def pair_heads(head: int, heads: int) -> tuple[int, int]:
    """Differential attention's pair of head ``head`` (of ``heads``): the heads whose softmax maps are its
    map 1 and map 2, (p, p + heads/2) with p = head mod heads/2, as DiffLlama pairs them."""
    half = heads // 2
    return head % half, head % half + half


@dataclass(frozen=True)
class Differential:
    """Differential attention at one pair of heads (Ye et al., 2025, "Differential Transformer"):
    ``map1`` and ``map2`` are the two heads' own softmaxes (``heads``: which), ``lam`` the layer's λ,
    ``difference`` = map1 − λ·map2 (each row sums to 1 − λ, where a row reads anything), what the model
    mixes the pair's values with, and ``output`` = difference @ the values (the model's mix, before its
    group norm). ``shown``: the map the weights stage shows, "map 1", "map 2" or "difference"."""

    heads: tuple[int, int]
    lam: float
    map1: np.ndarray
    map2: np.ndarray
    difference: np.ndarray
    output: np.ndarray
    shown: str


def differential(one: Attention, two: Attention, lam: float, heads: tuple[int, int], shown: str) -> Differential:
    """The pair whose maps ``one`` (map 1) and ``two`` (map 2) computed, at the same temperature and mask."""
    difference = one.weights - lam * two.weights
    return Differential(heads, float(lam), one.weights, two.weights, difference, difference @ one.v, shown)


def principal_axes(v):
    """The two principal axes of the value rows (per head): d_v × 2, or None when d_v ≤ 2.

    A linear map keeps convex combinations, so every output still lands inside the
    projected hull of the values. All heads at once, from the d_v × d_v covariance.
    """
    if v is None or v.shape[-1] <= 2:
        return None
    heads = (v if v.ndim == 3 else v[None]).astype(float)
    heads = heads / np.maximum(np.abs(heads).max(axis=(1, 2), keepdims=True), 1e-300)  # same axes; no overflow
    centered = heads - heads.mean(axis=1, keepdims=True)
    _, vectors = np.linalg.eigh(np.swapaxes(centered, 1, 2) @ centered)
    axes = vectors[:, :, ::-1][:, :, :2].copy()  # eigh sorts ascending: the last two carry the most variance
    return axes if v.ndim == 3 else axes[0]


def _as_matrix(name: str, x) -> np.ndarray:
    a = np.asarray(x, dtype=float)
    if a.ndim != 2 or 0 in a.shape:
        raise ValueError(f"{name} must be a non-empty 2-D array (tokens × width), got shape {a.shape}")
    return a


def attention(
    q,
    k,
    v,
    *,
    temperature: float = 1.0,
    causal: bool = False,
    scale=None,
    mask=None,
    bias=None,
    softcap=None,
    sink=None,
) -> Attention:
    """Compute attention for queries ``q`` (n×d_k), keys ``k`` (m×d_k) and values ``v`` (m×d_v).

    m = n for self-attention; in cross-attention the queries come from one text and the keys
    and values from another (a translation model's decoder reading its source), so the
    weights are n × m. ``scale`` defaults to 1/sqrt(d_k); ``temperature`` divides the scores
    before the softmax; ``causal`` stops row i reading columns j > i; ``mask`` (n×m booleans,
    True where row i may read column j, e.g. to leave out padding) is applied with it. ``bias``
    (n×m) is added to the scores, as some models add a position bias (T5, ALiBi). ``softcap``
    (c > 0) caps each scale·q·k to c·tanh(s/c) before the bias, as Gemma 2 does. ``sink`` (a
    number z) is a learnt attention sink, as gpt-oss's heads have: one more logit in every row's
    softmax, divided by the temperature as the scores are, whose column no token gets and is dropped
    after the softmax, so each row keeps 1 − the sink's share (z at or below CLOSED, -1e30: none). A
    row that may read nothing has all-zero weights, a zero output and 0 effective tokens.
    """
    q, k, v = _as_matrix("q", q), _as_matrix("k", k), _as_matrix("v", v)
    if q.shape[1] != k.shape[1]:
        raise ValueError(f"q and k must have the same width, got {q.shape[1]} and {k.shape[1]}")
    if k.shape[0] != v.shape[0]:
        raise ValueError(
            f"k and v must have the same number of tokens (one key and one value per token read), got {k.shape[0]} "
            f"and {v.shape[0]}"
        )
    check_options(temperature, scale, softcap)
    if mask is not None:
        mask = _as_mask(mask, q.shape[0], k.shape[0])
    if bias is not None:
        if np.ndim(bias) != 2:
            raise ValueError(f"bias must be tokens × tokens (queries × keys, 2-D), got shape {np.shape(bias)}")
        bias = _as_matrix("bias", bias)
        if bias.shape != (q.shape[0], k.shape[0]):
            raise ValueError(
                f"bias must be tokens × tokens (queries × keys), {(q.shape[0], k.shape[0])}; got {bias.shape}"
            )
        if not np.isfinite(bias).all():
            raise ValueError("bias must be finite")
    problem = overflow_message(q, k, scale, bias)
    if problem:
        raise ValueError(problem)
    if sink is not None and not (isinstance(sink, (int, float, np.floating, np.integer)) and np.isfinite(sink)):
        raise ValueError(f"sink must be a finite number (a learnt sink's logit), or None for none; got {sink!r}")
    return Attention(
        q, k, v, temperature=temperature, causal=causal, scale=scale, mask=mask, bias=bias, softcap=softcap, sink=sink
    )


def check_options(temperature: float, scale, softcap) -> None:
    """Refuse a temperature, scale or soft cap the formulas cannot take, saying what they take
    (attention's, and blockwise.Heads' for long inputs)."""
    if not (np.isfinite(temperature) and temperature > 0):
        raise ValueError(f"temperature must be finite and > 0, got {temperature}")
    if scale is not None and not np.isfinite(scale):
        raise ValueError(f"scale must be a finite number, or None for 1/sqrt(d_k), got {scale}")
    if softcap is not None and not (np.isfinite(softcap) and softcap > 0):
        raise ValueError(
            "softcap must be a finite number > 0 (scores become softcap · tanh(s / softcap)), or None for no cap; "
            f"got {softcap}"
        )


def _as_mask(mask, n: int, n_keys: int | None = None) -> np.ndarray:
    """Booleans, or numbers that are exactly 0 and 1; anything else (0.5, NaN, text) is refused
    rather than read as True."""
    n_keys = n if n_keys is None else n_keys
    expected = f"mask must be {n}×{n_keys} booleans (True where a row may read)"
    m = np.asarray(mask)
    if m.shape != (n, n_keys):
        raise ValueError(f"{expected}, got shape {m.shape}")
    if m.dtype == bool:
        return m
    if not (np.issubdtype(m.dtype, np.number) and not np.iscomplexobj(m) and np.isin(m, (0, 1)).all()):
        shown = m[~np.isin(m, (0, 1))].ravel()[:3] if np.issubdtype(m.dtype, np.number) else m.dtype
        raise ValueError(f"{expected}, or numbers that are exactly 0 and 1; got {shown}")
    return m == 1
