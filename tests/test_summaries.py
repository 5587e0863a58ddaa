"""Head summaries: one number per layer and head, computed with numpy at the widget's current
temperature, each a mean over the rows where it exists."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import attnwidget
from attnwidget import AttentionWidget


def by_hand(w, allowed):
    """The summaries of one weight matrix, row by row, as the docstring defines them."""
    n = len(w)
    first = [w[i, 0] for i in range(n) if allowed[i, 0]]
    self_ = [w[i, i] for i in range(n) if allowed[i, i]]
    previous = [w[i, i - 1] for i in range(1, n) if allowed[i, i - 1]]
    effective = [np.exp(-sum(x * np.log(x) for x in w[i] if x > 0)) for i in range(n) if allowed[i].any()]
    mean = lambda xs: np.mean(xs) if xs else np.nan
    return {"first": mean(first), "self": mean(self_), "previous": mean(previous), "effective_tokens": mean(effective)}


@settings(max_examples=40, deadline=None)
@given(
    n=st.integers(1, 9),
    heads=st.integers(1, 3),
    causal=st.booleans(),
    masked=st.booleans(),
    temperature=st.floats(0.05, 5),
    seed=st.integers(0, 2**16),
)
def test_each_summary_is_the_mean_over_the_rows_where_it_exists(n, heads, causal, masked, temperature, seed):
    rng = np.random.default_rng(seed)
    q, k, v = (rng.normal(size=(heads, n, 4)) for _ in range(3))
    mask = rng.random((n, n)) < 0.7 if masked else None
    w = AttentionWidget(
        q=q, k=k, v=v, tokens=[f"t{i}" for i in range(n)], temperature=temperature, causal=causal, mask=mask
    )
    got = w.head_summary()
    assert set(got) == {"first", "self", "previous", "effective_tokens"}
    allowed = np.ones((n, n), bool) if mask is None else mask.copy()
    if causal:
        allowed &= np.tri(n, dtype=bool)
    for h in range(heads):
        weights = attnwidget.attention(q[h], k[h], v[h], temperature=temperature, causal=causal, mask=mask).weights
        for name, want in by_hand(weights, allowed).items():
            assert got[name].shape == (1, heads)
            np.testing.assert_allclose(got[name][0, h], want, rtol=1e-12, atol=1e-15, err_msg=name)


def test_summaries_follow_the_temperature_and_never_change_the_widget():
    w = AttentionWidget()
    before = w.head_summary()["effective_tokens"][0, 0]
    w.temperature = 0.2
    colder = w.head_summary()["effective_tokens"][0, 0]
    assert colder < before  # a colder softmax spends its budget on fewer tokens
    summary = w.head_summary()
    summary["self"][0, 0] = 99.0  # the caller's own copy
    assert w.head_summary()["self"][0, 0] != 99.0
