"""Attention sinks: with `sink`, the first token's column is left out and every row is
renormalised over the rest, in Python's numbers (and, in tests/browser, the page's)."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import attnwidget
from attnwidget import AttentionWidget


@settings(max_examples=40, deadline=None)
@given(
    n=st.integers(1, 8),
    causal=st.booleans(),
    masked=st.booleans(),
    temperature=st.floats(0.05, 5),
    seed=st.integers(0, 2**16),
)
def test_the_rest_of_each_row_renormalised(n, causal, masked, temperature, seed):
    rng = np.random.default_rng(seed)
    q, k, v = (rng.normal(size=(n, 3)) for _ in range(3))
    mask = rng.random((n, n)) < 0.8 if masked else None
    w = AttentionWidget(
        q=q, k=k, v=v, tokens=[f"t{i}" for i in range(n)], temperature=temperature, causal=causal, mask=mask, sink=True
    )
    real = attnwidget.attention(q, k, v, temperature=temperature, causal=causal, mask=mask).weights
    assert (w.weights[:, 0] == 0).all()
    for i in range(n):
        rest = real[i, 1:]
        if rest.sum() > 0:  # the row read something besides token 0: the same proportions, summing to 1
            np.testing.assert_allclose(w.weights[i, 1:], rest / rest.sum(), rtol=1e-9, atol=1e-300)
            assert abs(w.weights[i].sum() - 1) < 1e-12
        else:  # it read only token 0 (or nothing): it reads nothing now
            assert (w.weights[i] == 0).all()
    np.testing.assert_allclose(w.output, w.weights @ v)


def test_the_real_weights_are_one_toggle_away_and_summaries_follow():
    w = AttentionWidget(stage="weights")
    real = w.weights.copy()
    w.sink = True
    assert w.weights[0, 0] == 0 and not np.allclose(w.weights, real)
    assert np.isnan(w.head_summary()["first"]).all()  # no row may read token 0
    assert w.mask is None  # the user's own mask is untouched
    w.sink = False
    np.testing.assert_array_equal(w.weights, real)
