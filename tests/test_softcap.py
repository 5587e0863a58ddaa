"""Soft-capping, a concept of the core: score = c · tanh(scale · q · k / c) before the bias, as
Gemma 2 computes it; refused nowhere, and a bad cap refused with the widget's state kept."""

import numpy as np
import pytest
import traitlets
from hypothesis import given, settings
from hypothesis import strategies as st

from attnwidget import AttentionWidget, attention


@settings(max_examples=60, deadline=None)
@given(
    st.integers(1, 6),
    st.integers(1, 5),
    st.floats(0.1, 50),
    st.sampled_from([None, 0.7]),
    st.booleans(),
    st.integers(0, 2**31),
)
def test_capped_scores_are_the_formula_and_weights_their_softmax(n, d, c, scale, with_bias, seed):
    rng = np.random.default_rng(seed)
    q, k, v = (rng.normal(scale=4, size=(n, d)) for _ in range(3))
    bias = rng.normal(size=(n, n)) if with_bias else None
    a = attention(q, k, v, softcap=c, scale=scale, bias=bias, causal=True)
    s = (d**-0.5 if scale is None else scale) * (q @ k.T)
    want = c * np.tanh(s / c) + (0 if bias is None else bias)
    np.testing.assert_allclose(a.scores, want, rtol=1e-12, atol=1e-12)
    assert np.all(np.abs(a.scores - (0 if bias is None else bias)) <= c * (1 + 1e-12))
    e = np.where(np.tri(n, dtype=bool), np.exp(want - want.max(axis=1, keepdims=True)), 0)
    np.testing.assert_allclose(a.weights, e / e.sum(axis=1, keepdims=True), atol=1e-12)
    cell = a.cell(n - 1, 0)
    assert cell["softcap"] == c and cell["capped"] == pytest.approx(
        c * np.tanh(cell["scale"] * cell["dot"] / c), rel=1e-12
    )
    assert cell["score"] == pytest.approx(cell["capped"] + cell["bias"], rel=1e-12, abs=1e-12)


def test_the_widget_caps_every_head_and_the_overview():
    rng = np.random.default_rng(1)
    q, k, v = (rng.normal(scale=3, size=(3, 5, 4)) for _ in range(3))
    w = AttentionWidget(q=q, k=k, v=v, softcap=1.5, head=2)
    s = 0.5 * q[2] @ k[2].T
    np.testing.assert_allclose(w.scores, 1.5 * np.tanh(s / 1.5), atol=1e-12)
    free = AttentionWidget(q=q, k=k, v=v, head=2)
    assert not np.allclose(w.weights, free.weights)
    capped = w.head_summary()["effective_tokens"]
    for h in range(3):
        w.head = h
        assert capped[0, h] == pytest.approx(np.mean(np.exp(-(w.weights * np.log(w.weights)).sum(axis=1))), rel=1e-12)
    w.softcap = None
    np.testing.assert_array_equal(w.weights, free.weights)  # the cap taken off: the plain scores again


@pytest.mark.parametrize("bad", [0, -1.0, float("inf"), float("nan"), "5", 1e11])
def test_a_bad_cap_is_refused_and_the_widget_keeps_its_state(bad):
    w = AttentionWidget("She sat by the river bank", softcap=4.0)
    before = w.weights.copy()
    with pytest.raises(traitlets.TraitError, match="'softcap' must be"):
        w.softcap = bad
    assert w.softcap == 4.0
    np.testing.assert_array_equal(w.weights, before)
    if bad != 1e11:  # (the core takes any finite cap > 0; the widget keeps to what the page shows)
        with pytest.raises(ValueError, match="softcap must be a finite number > 0"):
            attention(np.ones((2, 2)), np.ones((2, 2)), np.ones((2, 2)), softcap=-2 if bad == "5" else bad)
