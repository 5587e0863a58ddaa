"""The numpy core against an independent reference, and its properties."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.spatial import ConvexHull, Delaunay
from scipy.special import softmax

from attnwidget import attention
from attnwidget.formulas import CLOSED, _softmax_rows


def random_qkv(seed, n=7, dk=5, dv=3):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(n, dk)), rng.normal(size=(n, dk)), rng.normal(size=(n, dv))


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("temperature", [0.1, 0.7, 1.0, 3.0])
@pytest.mark.parametrize("causal", [False, True])
def test_matches_scipy_reference(seed, temperature, causal):
    q, k, v = random_qkv(seed)
    a = attention(q, k, v, temperature=temperature, causal=causal)
    scores = (q @ k.T) / np.sqrt(q.shape[1])
    masked = np.where(np.triu(np.ones_like(scores), 1).astype(bool), -np.inf, scores) if causal else scores
    ref = softmax(masked / temperature, axis=1)
    np.testing.assert_allclose(a.scores, scores, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(a.weights, ref, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(a.output, ref @ v, rtol=1e-10, atol=1e-12)
    entropy = -np.sum(np.where(ref > 0, ref * np.log(np.where(ref > 0, ref, 1)), 0), axis=1)
    np.testing.assert_allclose(a.effective_tokens, np.exp(entropy), rtol=1e-10)


def test_scale_overrides_one_over_sqrt_d():
    q, k, v = random_qkv(1)
    assert attention(q, k, v).scale == pytest.approx(1 / np.sqrt(5))
    np.testing.assert_allclose(attention(q, k, v, scale=3).scores, 3 * q @ k.T)


@pytest.mark.parametrize("seed", range(10))
def test_rows_sum_to_one_and_outputs_stay_in_the_hull(seed):
    q, k, v = random_qkv(seed, n=9, dv=2)
    a = attention(q, k, v, temperature=0.5 + seed / 3)
    np.testing.assert_allclose(a.weights.sum(axis=1), 1.0, atol=1e-12)
    assert (a.weights >= 0).all()
    hull = Delaunay(v[ConvexHull(v).vertices])
    assert (hull.find_simplex(a.output, tol=1e-9) >= 0).all()


def test_causal_cells_are_exactly_zero_and_first_row_reads_itself():
    q, k, v = random_qkv(3)
    w = attention(q, k, v, causal=True).weights
    assert (w[np.triu_indices(7, 1)] == 0).all()
    assert w[0, 0] == 1.0
    np.testing.assert_allclose(w.sum(axis=1), 1.0, atol=1e-12)


def test_extreme_temperatures():
    q, k, v = random_qkv(4)
    hot = attention(q, k, v, temperature=1e6)
    np.testing.assert_allclose(hot.weights, 1 / 7, atol=1e-5)  # uniform
    np.testing.assert_allclose(hot.effective_tokens, 7, atol=1e-3)
    cold = attention(q, k, v, temperature=1e-6)
    np.testing.assert_array_equal(cold.weights, np.eye(7)[cold.scores.argmax(axis=1)])  # arg-max row
    np.testing.assert_allclose(cold.effective_tokens, 1.0)
    assert np.isfinite(cold.output).all()


def test_huge_scores_and_ties_stay_finite():
    q = np.array([[1e4], [1e4], [-1e4]])
    a = attention(q, q, np.eye(3), scale=1.0, temperature=1e-6)
    assert np.isfinite(a.weights).all() and np.isfinite(a.output).all()
    np.testing.assert_allclose(a.weights[0], [0.5, 0.5, 0.0])  # a tie is shared


def test_single_token():
    a = attention([[1.0, 2.0]], [[0.5, -1.0]], [[3.0, 4.0]])
    assert a.weights.tolist() == [[1.0]]
    assert a.output.tolist() == [[3.0, 4.0]]
    assert a.output_spread == 0.0 and a.sense_resolved.tolist() == [0.0]


def test_sense_resolved_and_output_spread_definitions():
    q, k, v = random_qkv(6, dv=2)
    a = attention(q, k, v)
    mean = v.mean(axis=0)
    reach = np.linalg.norm(v - mean, axis=1).max()
    np.testing.assert_allclose(a.sense_resolved, np.linalg.norm(a.output - mean, axis=1) / reach)
    pairwise = np.linalg.norm(a.output[:, None] - a.output[None, :], axis=2)
    assert a.output_spread == pytest.approx(pairwise.max(), rel=1e-9)


@pytest.mark.parametrize(
    "args, message",
    [
        (dict(q=np.ones((3, 2)), k=np.ones((3, 4)), v=np.ones((3, 2))), "same width"),
        (dict(q=np.ones((3, 2)), k=np.ones((4, 2)), v=np.ones((3, 2))), "same number of tokens"),
        (dict(q=np.ones(3), k=np.ones((3, 2)), v=np.ones((3, 2))), "2-D"),
    ],
)
def test_bad_shapes_are_explained(args, message):
    with pytest.raises(ValueError, match=message):
        attention(**args)


@pytest.mark.parametrize("t", [0, -1, np.inf, np.nan])
def test_bad_temperature_is_explained(t):
    q, k, v = random_qkv(0)
    with pytest.raises(ValueError, match="temperature"):
        attention(q, k, v, temperature=t)


def _plain_softmax(scores, temperature, allowed):
    """The softmax as first written, exp over every cell: -inf cells and underflows included."""
    s = scores.copy()
    if allowed is not None:
        s[~allowed] = -np.inf
    s[s <= CLOSED] = -np.inf
    top = s.max(axis=1, keepdims=True, initial=-np.inf)
    empty = ~np.isfinite(top[:, 0])
    top[empty] = 0.0
    s -= top
    if temperature != 1:
        with np.errstate(over="ignore"):
            s /= temperature
    with np.errstate(under="ignore"):
        s = np.exp(s)
    total = s.sum(axis=1, keepdims=True)
    total[empty] = 1.0
    return s / total


@settings(max_examples=300, deadline=None)
@given(
    st.integers(1, 9),
    st.integers(1, 9),
    st.sampled_from([1e-300, 1e-6, 0.01, 0.3, 1.0, 2.5, 1e8]),
    st.sampled_from([1.0, 100.0, 1e6]),
    st.booleans(),
    st.integers(0, 2**32 - 1),
)
def test_softmax_skips_only_exact_zeros(n, m, temperature, spread, masked, seed):
    """Cells whose exp is exactly 0 (closed, -inf, or underflowing at a small T) are not passed
    through exp, and every weight is still the plain formula's, bit for bit (NaN where it gives NaN)."""
    rng = np.random.default_rng(seed)
    scores = rng.normal(size=(n, m)) * spread
    scores[rng.random((n, m)) < 0.1] = CLOSED * 2  # (a model's additive mask)
    scores[rng.random((n, m)) < 0.03] = np.nan  # (a NaN stays one, as it was)
    allowed = rng.random((n, m)) < 0.7 if masked else None
    with np.errstate(invalid="ignore", over="ignore"):  # (a row with NaN: its maximum is not subtracted)
        got = _softmax_rows(scores, temperature, allowed)
        np.testing.assert_array_equal(got, _plain_softmax(scores, temperature, allowed))
