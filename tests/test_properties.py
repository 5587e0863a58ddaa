"""Property tests: the numpy core never produces NaN or inf for finite input, and the traits
either take a value or refuse it and keep the state."""

import numpy as np
import traitlets
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from attnwidget import AttentionWidget, attention

finite = st.floats(min_value=-100, max_value=100, allow_nan=False, allow_infinity=False)


@st.composite
def qkv(draw):
    n, dk, dv = draw(st.integers(1, 8)), draw(st.integers(1, 5)), draw(st.integers(1, 3))
    return tuple(draw(arrays(np.float64, shape, elements=finite)) for shape in ((n, dk), (n, dk), (n, dv)))


@settings(max_examples=200, deadline=None)
@given(
    qkv(),
    st.floats(min_value=1e-6, max_value=1e6),
    st.booleans(),
    st.one_of(st.none(), st.floats(min_value=-100, max_value=100)),
)
def test_weights_are_a_budget_and_outputs_stay_among_the_values(arrays_, temperature, causal, scale):
    q, k, v = arrays_
    a = attention(q, k, v, temperature=temperature, causal=causal, scale=scale)  # scores reach ±1e4 and beyond
    n = q.shape[0]
    assert np.isfinite(a.weights).all() and np.isfinite(a.output).all()
    assert (a.weights >= 0).all() and (a.weights <= 1).all()
    np.testing.assert_allclose(a.weights.sum(axis=1), 1.0, atol=1e-9)
    if causal:
        assert (a.weights[np.triu_indices(n, 1)] == 0).all()
    span = np.abs(v).max() * 1e-9 + 1e-12
    assert (a.output >= v.min(axis=0) - span).all() and (a.output <= v.max(axis=0) + span).all()
    assert ((a.effective_tokens >= 1 - 1e-9) & (a.effective_tokens <= n + 1e-9)).all()
    assert np.isfinite(a.output_spread) and np.isfinite(a.sense_resolved).all()


@settings(max_examples=100, deadline=None)
@given(qkv(), st.data())
def test_a_row_that_may_read_nothing_is_defined(arrays_, data):
    q, k, v = arrays_
    n = q.shape[0]
    mask = data.draw(arrays(np.bool_, (n, n)))
    a = attention(q, k, v, mask=mask)
    empty = ~mask.any(axis=1)
    assert np.isfinite(a.weights).all() and np.isfinite(a.output).all()
    assert (a.weights[~mask] == 0).all()
    assert (a.weights[empty] == 0).all() and (a.output[empty] == 0).all() and (a.effective_tokens[empty] == 0).all()
    np.testing.assert_allclose(a.weights[~empty].sum(axis=1), 1.0, atol=1e-9)


values = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(-10, 10),
    st.text(max_size=3),
    st.none(),
    st.lists(st.floats(), max_size=3),
)


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(["temperature", "focus", "stage", "scale", "head", "causal", "cell", "q", "v"]), values)
def test_traits_take_a_value_or_refuse_it_and_keep_the_state(name, value):
    w = AttentionWidget("I sat on the river bank")
    before = {n: getattr(w, n) for n in ("temperature", "focus", "stage", "scale", "head", "causal", "cell", "q", "v")}
    try:
        setattr(w, name, value)
    except traitlets.TraitError as err:
        assert str(err)
        for n, old in before.items():
            np.testing.assert_equal(getattr(w, n), old)
    assert np.isfinite(w.weights).all() and np.isfinite(w.output).all()
    assert w.temperature > 0 and 0 <= w.focus < len(w.tokens)
