"""blockwise.Heads: rows, tiles, pooled maps, summaries and outputs of long inputs, block by block,
against the dense formulas (formulas.attention, head_summaries, overview.thumbnail) on inputs small
enough to hold whole, with blocks forced small so that several blocks and ragged ends are read."""

import tracemalloc

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from attnwidget.blockwise import Heads
from attnwidget.formulas import allowed_cells, attention, head_summaries
from attnwidget.inputs import reading_mask
from attnwidget.overview import thumbnail

torch = pytest.importorskip("torch")

# Biases written with operators alone, so the same function serves numpy and torch positions; their values are
# exact in float32 (powers of two times whole numbers), so float32 and float64 inputs see the same bias.
BIASES = {
    None: None,
    "alibi": lambda h, rows, cols: -(2.0 ** -(h + 1)) * abs(rows[:, None] - cols[None, :]),
    "pattern": lambda h, rows, cols: 0.25 * ((rows[:, None] * 3 + cols[None, :] * (5 + h)) % 7),
    # a bias at or below formulas.CLOSED closes its cell, as a model's additive mask does
    "closing": lambda h, rows, cols: -(2.0**100) * ((rows[:, None] + cols[None, :] * (h + 1)) % 3 == 0),
}


@st.composite
def cases(draw, float32=False):
    """q, k, v of a grouped layer and the options, as Heads takes them."""
    kv, group = draw(st.integers(1, 3)), draw(st.integers(1, 4))
    n = draw(st.integers(1, 300))
    m = n if draw(st.booleans()) else draw(st.integers(1, 300))
    d, dv = draw(st.integers(1, 16)), draw(st.integers(1, 6))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    size = draw(st.sampled_from([0.3, 1.0, 3.0]))
    q = rng.normal(scale=size, size=(kv * group, n, d))
    k, v = rng.normal(scale=size, size=(kv, m, d)), rng.normal(size=(kv, m, dv))
    causal = draw(st.booleans())
    temperatures = st.floats(0.25, 20) if float32 else st.sampled_from([1.0, 1e-3, 1e-9, 40.0]) | st.floats(0.05, 20)
    options = {
        "causal": causal,
        "sink": draw(st.booleans()),
        "window": draw(st.none() | st.integers(1, n + 2)) if causal else None,
        "temperature": draw(temperatures),
        "scale": draw(st.none() | st.floats(0.05, 2)),
        "softcap": draw(st.none() | st.floats(0.5, 30)),
        "bias": BIASES[draw(st.sampled_from(list(BIASES)))],
    }
    if float32:
        q, k, v = (a.astype(np.float32) for a in (q, k, v))
    return q, k, v, options, draw(st.integers(1, 9))


def dense(q, k, v, options, head):
    """formulas.attention of one head, every cell held: the answer the blocks must give."""
    n, m = q.shape[1], k.shape[1]
    group = head // (len(q) // len(k))
    window = options["window"]
    mask = None if window is None else np.arange(m)[None, :] > np.arange(n)[:, None] - window
    mask = reading_mask(mask, options["sink"], n, m)
    bias = options["bias"] and options["bias"](head, np.arange(n), np.arange(m))
    a = attention(
        *(np.asarray(x, dtype=float) for x in (q[head], k[group], v[group])),
        temperature=options["temperature"],
        causal=options["causal"],
        scale=options["scale"],
        softcap=options["softcap"],
        mask=mask,
        bias=bias,
    )
    return a, allowed_cells(n, options["causal"], mask, m)


def pool(weights, rows_px, cols_px, how):
    """The dense matrix pooled: pixel p holds rows i with ⌊i·P/n⌋ = p (overview.thumbnail's blocks)."""
    n, m = weights.shape
    rows_px, cols_px = min(rows_px, n), min(cols_px, m)
    r, c = (np.arange(n) * rows_px) // n, (np.arange(m) * cols_px) // m
    out = np.zeros((rows_px, cols_px))
    for p in range(rows_px):
        for x in range(cols_px):
            cells = weights[np.ix_(r == p, c == x)]
            out[p, x] = cells.max() if how == "max" else cells.mean()
    return out


@settings(max_examples=40, deadline=None)
@given(cases(), st.data())
def test_rows_and_tiles_are_the_dense_softmax(case, data):
    q, k, v, options, block = case
    heads = Heads(q, k, v, block=block, **options)
    n, m = q.shape[1], k.shape[1]
    positions = data.draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=5))
    chosen = data.draw(st.lists(st.integers(0, len(q) - 1), min_size=1, max_size=len(q), unique=True))
    got = heads.rows(positions, heads=chosen)
    assert got.weights.shape == got.scores.shape == (len(chosen), len(positions), m)
    for i, h in enumerate(chosen):
        a, _ = dense(q, k, v, options, h)
        np.testing.assert_allclose(got.weights[i], a.weights[positions], atol=1e-6, rtol=0)
        np.testing.assert_allclose(got.scores[i], a.scores[positions], atol=1e-9, rtol=1e-9)
    h = data.draw(st.integers(0, len(q) - 1))
    r0, c0 = data.draw(st.integers(0, n - 1)), data.draw(st.integers(0, m - 1))
    r1, c1 = data.draw(st.integers(r0 + 1, n)), data.draw(st.integers(c0 + 1, m))
    a, _ = dense(q, k, v, options, h)
    cells = heads.tile(h, r0, r1, c0, c1)
    np.testing.assert_allclose(cells.weights, a.weights[r0:r1, c0:c1], atol=1e-6, rtol=0)
    np.testing.assert_allclose(cells.scores, a.scores[r0:r1, c0:c1], atol=1e-9, rtol=1e-9)
    lse = heads.lse(h)  # log Σ exp(score / T) over the cells each row reads; -inf for a row that reads nothing
    s = np.where(a.allowed if a.allowed is not None else True, a.scores, -np.inf)
    top = s.max(axis=1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        want = top / options["temperature"] + np.log(np.exp((s - top) / options["temperature"]).sum(1, keepdims=True))
    np.testing.assert_allclose(lse, np.where(np.isfinite(top), want, -np.inf)[:, 0], rtol=1e-9)


@settings(max_examples=40, deadline=None)
@given(cases(), st.integers(1, 40), st.integers(1, 40))
def test_pooled_maps_summaries_and_outputs_are_the_dense_ones(case, rows_px, cols_px):
    q, k, v, options, block = case
    heads = Heads(q, k, v, block=block, **options)
    fractions = []
    h = len(q) - 1
    scan = heads.scan(h, rows_px, cols_px, progress=fractions.append)
    a, allowed = dense(q, k, v, options, h)
    np.testing.assert_allclose(scan.max, pool(a.weights, rows_px, cols_px, "max"), atol=1e-6, rtol=0)
    np.testing.assert_allclose(scan.mean, pool(a.weights, rows_px, cols_px, "mean"), atol=1e-6, rtol=0)
    np.testing.assert_allclose(heads.pooled(h, rows_px, cols_px, how="mean"), scan.mean, atol=1e-12)
    np.testing.assert_allclose(heads.pooled(h, 84, 84, how="mean"), thumbnail(a.weights), atol=1e-6, rtol=0)
    assert fractions == sorted(fractions) and fractions[-1] == 1.0
    want = head_summaries(np.stack([dense(q, k, v, options, i)[0].weights for i in range(len(q))]), allowed)
    every = heads.summaries()
    for name, values in want.items():
        np.testing.assert_allclose(every[name], values, atol=1e-6, rtol=0, equal_nan=True)
        np.testing.assert_allclose(scan.summaries[name], values[h], atol=1e-6, rtol=0, equal_nan=True)
    np.testing.assert_allclose(heads.output(h), a.output, atol=1e-6, rtol=1e-6)


@settings(max_examples=25, deadline=None)
@given(cases(float32=True), st.data())
def test_float32_inputs_are_computed_in_float32_within_its_precision(case, data):
    q, k, v, options, block = case
    heads = Heads(q, k, v, block=block, **options)
    h = data.draw(st.integers(0, len(q) - 1))
    a, allowed = dense(q, k, v, options, h)
    n = q.shape[1]
    got = heads.rows([0, n // 2, n - 1], heads=[h])
    assert got.weights.dtype == np.float32
    np.testing.assert_allclose(got.weights[0], a.weights[[0, n // 2, n - 1]], atol=2e-5, rtol=0)
    np.testing.assert_allclose(heads.tile(h, 0, n, 0, k.shape[1]).weights, a.weights, atol=2e-5, rtol=0)
    scan = heads.scan(h, 16, 16)
    np.testing.assert_allclose(scan.max, pool(a.weights, 16, 16, "max"), atol=2e-5, rtol=0)
    np.testing.assert_allclose(scan.mean, pool(a.weights, 16, 16, "mean"), atol=2e-5, rtol=0)
    for name, values in head_summaries(a.weights, allowed).items():  # effective tokens: up to m, so relative
        np.testing.assert_allclose(scan.summaries[name], values, atol=2e-5, rtol=2e-5, equal_nan=True)
    np.testing.assert_allclose(heads.output(h), a.output, atol=1e-4, rtol=1e-4)


@settings(max_examples=20, deadline=None)
@given(cases(), st.data())
def test_torch_tensors_give_numpys_numbers(case, data):
    q, k, v, options, block = case
    mine, theirs = (
        Heads(q, k, v, block=block, **options),
        Heads(*map(torch.from_numpy, (q, k, v)), block=block, **options),
    )
    n, m = q.shape[1], k.shape[1]
    h = data.draw(st.integers(0, len(q) - 1))
    positions = data.draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=4))
    # the weights within the 1e-6 of exactness (at T = 1e-9 torch's and numpy's roundings of a capped score apart
    # are a weight apart), the scores, and so each row's maximum, within rounding
    close = lambda x, y: np.testing.assert_allclose(x, y, atol=1e-6, rtol=1e-6, equal_nan=True)
    got, want = theirs.rows(positions), mine.rows(positions)
    assert isinstance(got.weights, np.ndarray) and isinstance(got.scores, np.ndarray)
    close(got.weights, want.weights)
    np.testing.assert_allclose(got.scores, want.scores, atol=1e-12, rtol=1e-12)
    close(theirs.tile(h, 0, n, 0, m).weights, mine.tile(h, 0, n, 0, m).weights)
    ours, yours = theirs.scan(h, 7, 9), mine.scan(h, 7, 9)
    close(ours.max, yours.max), close(ours.mean, yours.mean)
    for name in yours.summaries:
        close(ours.summaries[name], yours.summaries[name])
    close(theirs.output(h), mine.output(h))
    np.testing.assert_allclose(theirs.lse(h), mine.lse(h), rtol=1e-12)


def test_a_tile_at_a_tiny_temperature_is_exact_whatever_computed_its_rows_before():
    """At T = 1e-9 a rounding apart between two products of the same scores is a weight apart: a tile
    must not be cut with row maxima another product found (here each row's own, one row at a time)."""
    rng = np.random.default_rng(0)
    q, k, v = rng.normal(size=(1, 50, 16)), rng.normal(size=(1, 50, 16)), rng.normal(size=(1, 50, 2))
    options = {"causal": False, "sink": False, "window": None, "temperature": 1e-9, "scale": None, "softcap": None}
    heads = Heads(q, k, v, **options)
    for i in range(50):
        heads.rows([i])
    a, _ = dense(q, k, v, {**options, "bias": None}, 0)
    for r0, c0 in ((0, 0), (7, 3), (20, 11)):
        np.testing.assert_allclose(heads.tile(0, r0, 50, c0, 50).weights, a.weights[r0:, c0:], atol=1e-6, rtol=0)


def test_the_band_of_rows_stays_within_the_budget():
    q = np.zeros((2, 5000, 4), dtype=np.float32)
    for budget in (2**20, 2**24):
        heads = Heads(q, q[:1], q[:1], budget=budget)
        assert 1 <= heads.block and heads.block * 5000 * 4 * 2 <= budget
    assert Heads(q[:, :10], q[:1, :10], q[:1, :10], budget=2**20).block == 10  # no band longer than the input


def test_a_long_input_never_holds_a_matrix_of_its_size():
    """At 20,000 tokens any n × n float32 array is 1.6 GB; the pooled map, the summaries, a few rows, a
    tile and the output of a head are computed within 200 MB (numpy's allocations are traced)."""
    n, limit = 20_000, 200e6
    assert n * n * 4 >= 8 * limit
    rng = np.random.default_rng(0)
    q, k, v = (rng.normal(size=(1, n, 4)).astype(np.float32) for _ in range(3))
    tracemalloc.start()
    try:
        heads = Heads(q, k, v, causal=True, sink=True)
        scan = heads.scan(0, 256, 256)
        rows = heads.rows([0, n // 2, n - 1])
        tile = heads.tile(0, n - 256, n, n - 512, n - 256)
        out = heads.output(0)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < limit, f"peak {peak / 1e6:.0f} MB"
    assert scan.max.shape == (256, 256) and rows.weights.shape == (1, 3, n) and tile.weights.shape == (256, 256)
    np.testing.assert_allclose(rows.weights.sum(axis=-1), [[0, 1, 1]], atol=1e-4)  # row 0 may only read the sink
    assert out.shape == (n, 4) and np.isfinite(out).all()


def test_the_progress_of_a_scan_is_reported_and_its_summaries_match_the_separate_ones():
    rng = np.random.default_rng(1)
    q, k, v = (rng.normal(size=(2, 50, 3)) for _ in range(3))
    heads = Heads(q, k, v, causal=True, block=8)
    seen = []
    scan = heads.scan(1, 10, 10, progress=seen.append)
    assert len(seen) == 7 and seen[-1] == 1.0 and seen == sorted(seen)
    for name, values in heads.summaries(heads=[1]).items():
        assert values[0] == pytest.approx(scan.summaries[name])


GOOD = np.zeros((4, 6, 3))


@pytest.mark.parametrize(
    "args, options, message",
    [
        ((GOOD[0, 0], GOOD[:2], GOOD[:2]), {}, r"q must be .*heads × tokens × width.*got shape \(3,\)"),
        ((GOOD, GOOD[:3], GOOD[:3]), {}, r"3 key-value heads.*4 query heads"),
        ((GOOD, GOOD[:2, :, :2], GOOD[:2]), {}, r"same width"),
        ((GOOD, GOOD[:2], GOOD[:2, :5]), {}, r"one key and one value per token"),
        ((GOOD, GOOD[:2], GOOD[:1]), {}, r"k and v must have the same number of heads"),
        ((GOOD, GOOD[:2], GOOD[:2]), {"temperature": 0}, r"temperature must be finite and > 0"),
        ((GOOD, GOOD[:2], GOOD[:2]), {"temperature": float("nan")}, r"temperature"),
        ((GOOD, GOOD[:2], GOOD[:2]), {"scale": float("inf")}, r"scale must be a finite number"),
        ((GOOD, GOOD[:2], GOOD[:2]), {"softcap": -1}, r"softcap must be a finite number > 0"),
        ((GOOD, GOOD[:2], GOOD[:2]), {"window": 4}, r"window.*causal=True"),
        ((GOOD, GOOD[:2], GOOD[:2]), {"window": 0, "causal": True}, r"window must be a whole number ≥ 1"),
        ((GOOD, GOOD[:2], GOOD[:2]), {"bias": np.zeros((6, 6))}, r"bias must be a function"),
        ((GOOD, GOOD[:2], GOOD[:2]), {"block": 0}, r"block must be"),
        ((GOOD.astype(str), GOOD[:2], GOOD[:2]), {}, r"q must hold numbers"),
        ((GOOD * np.nan, GOOD[:2], GOOD[:2]), {}, r"q holds NaN or infinite"),
    ],
)
def test_bad_input_is_refused_naming_the_problem(args, options, message):
    with pytest.raises(ValueError, match=message):
        Heads(*args, **options)


def test_bad_requests_are_refused_naming_the_problem():
    heads = Heads(GOOD, GOOD[:2], GOOD[:2], bias=lambda h, rows, cols: np.zeros(3))
    with pytest.raises(ValueError, match=r"position 6 is outside the 6 rows \(0 to 5\)"):
        heads.rows([0, 6])
    with pytest.raises(ValueError, match=r"head 4 is outside the 4 heads"):
        heads.rows([0], heads=[4])
    with pytest.raises(ValueError, match=r"rows 3 to 2.*0 ≤ r0 < r1 ≤ 6"):
        heads.tile(0, 3, 2, 0, 6)
    with pytest.raises(ValueError, match=r"columns 0 to 7.*0 ≤ c0 < c1 ≤ 6"):
        heads.tile(0, 0, 6, 0, 7)
    with pytest.raises(ValueError, match=r"how must be"):
        heads.pooled(0, 2, 2, how="median")
    with pytest.raises(ValueError, match=r"pixels.*≥ 1"):
        heads.pooled(0, 0, 2)
    with pytest.raises(ValueError, match=r"bias gave an array of shape \(3,\) for a block of 1 × 6"):
        heads.rows([0])
    nan = Heads(GOOD, GOOD[:2], GOOD[:2], bias=lambda h, rows, cols: np.full((len(rows), len(cols)), np.nan))
    with pytest.raises(ValueError, match=r"bias must be finite"):
        nan.tile(0, 0, 2, 0, 2)
