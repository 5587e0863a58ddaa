"""An additive score bias (a model's position bias: T5's buckets, ALiBi): scores = scale·QKᵀ + bias,
in every number Python gives, with the two terms apart in a cell's arithmetic."""

import numpy as np
import pytest
import traitlets
from hypothesis import given, settings
from hypothesis import strategies as st

import attnwidget
from attnwidget import AttentionWidget


def softmax(s, t):
    e = np.exp((s - s.max(axis=1, keepdims=True)) / t)
    return e / e.sum(axis=1, keepdims=True)


@settings(max_examples=40, deadline=None)
@given(
    n=st.integers(1, 7),
    heads=st.integers(1, 3),
    per_head=st.booleans(),
    temperature=st.floats(0.1, 4),
    seed=st.integers(0, 2**16),
)
def test_scores_are_scale_qk_plus_bias(n, heads, per_head, temperature, seed):
    rng = np.random.default_rng(seed)
    q, k, v = (rng.normal(size=(heads, n, 4)) for _ in range(3))
    bias = rng.normal(size=(heads, n, n) if per_head else (n, n)) * 3
    w = AttentionWidget(q=q, k=k, v=v, tokens=[f"t{i}" for i in range(n)], bias=bias, temperature=temperature)
    for h in range(heads):
        w.head = h
        b = bias[h] if per_head else bias
        np.testing.assert_allclose(w.scores, 0.5 * (q[h] @ k[h].T) + b, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(w.weights, softmax(0.5 * (q[h] @ k[h].T) + b, temperature), rtol=1e-9, atol=1e-15)
        cell = w.attention.cell(n - 1, 0)
        assert cell["bias"] == b[n - 1, 0]
        assert abs(cell["scale"] * cell["dot"] + cell["bias"] - cell["score"]) < 1e-12
        np.testing.assert_allclose(w.head_summary()["self"][0, h], np.mean(np.diag(w.weights)), rtol=1e-12)


def test_a_bad_bias_is_refused_and_a_bias_for_other_tokens_is_dropped():
    w = AttentionWidget(stage="weights")
    n = len(w.tokens)
    with pytest.raises(traitlets.TraitError, match="'bias' must be tokens × tokens"):
        w.bias = np.zeros((n, n + 1))
    huge = AttentionWidget(q=np.full((2, 2), 1e149), k=np.full((2, 2), 1e149), v=np.ones((2, 2)))
    with pytest.raises(traitlets.TraitError, match="plus the bias"):
        huge.bias = np.full((2, 2), 1e300)  # each fits, their sum would not
    assert huge.bias is None
    w.bias = np.eye(n)
    assert w.attention.cell(0, 0)["bias"] == 1.0
    w.set_vectors(tokens=["a", "b"], q=np.ones((2, 2)), k=np.ones((2, 2)), v=np.ones((2, 2)))
    assert w.bias is None  # it belonged to the other tokens
    with pytest.raises(ValueError, match="bias must be tokens × tokens"):
        attnwidget.attention(np.ones((2, 2)), np.ones((2, 2)), np.ones((2, 2)), bias=np.zeros((3, 3)))


def test_set_vectors_takes_a_bias_with_the_new_tokens():
    w = AttentionWidget()
    rng = np.random.default_rng(2)
    bias = rng.normal(size=(3, 3))
    w.set_vectors(
        tokens=["a", "b", "c"],
        q=rng.normal(size=(3, 2)),
        k=rng.normal(size=(3, 2)),
        v=rng.normal(size=(3, 2)),
        bias=bias,
    )
    np.testing.assert_array_equal(w.bias, bias)
    with pytest.raises(traitlets.TraitError, match="agree on the number of tokens"):
        w.set_vectors(tokens=["a", "b"], q=np.ones((2, 2)), k=np.ones((2, 2)), v=np.ones((2, 2)), bias=np.zeros((3, 3)))
    np.testing.assert_array_equal(w.bias, bias)  # nothing changed


def test_an_infinite_bias_is_refused_with_the_way_to_close_cells():
    q = np.ones((2, 2))
    with pytest.raises(traitlets.TraitError, match=r"found -inf .*pass mask= .*np\.finfo\(np\.float32\)\.min"):
        AttentionWidget(q=q, k=q, v=q, bias=[[0, -np.inf], [0, 0]])
