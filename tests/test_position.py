"""Where position enters the lab's attention: position="rope" turns each query and key by its
token's position, position="alibi" adds −m·|i − j| to the scores. Checked against transformers'
own rotary code and BLOOM's bias, against the relative-position property RoPE exists for, and
through every path that computes weights (the head shown, the views, the exported page's payload)."""

import numpy as np
import pytest
import traitlets
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from attnwidget import AttentionWidget, attention
from attnwidget.position import alibi, angles, rope, slopes

finite = st.floats(-3, 3, allow_nan=False)


def lab(**kw):
    rng = np.random.default_rng(0)
    q, k, v = (rng.normal(size=(3, 6, 4)) for _ in range(3))
    return AttentionWidget(tokens=list("abcdef"), q=q, k=k, v=v, **kw)


@settings(max_examples=50, deadline=None)
@given(arrays(float, (5, 6), elements=finite), arrays(float, (5, 6), elements=finite), st.integers(1, 9))
def test_rope_scores_depend_only_on_how_far_apart_tokens_are(q, k, shift):
    """The same tokens moved `shift` places on get the same scores; each vector keeps its length."""
    pad = np.zeros((shift, 6))
    moved = rope(np.vstack([pad, q])) @ rope(np.vstack([pad, k])).T
    np.testing.assert_allclose(moved[shift:, shift:], rope(q) @ rope(k).T, atol=1e-9)
    np.testing.assert_allclose(np.linalg.norm(rope(q), axis=1), np.linalg.norm(q, axis=1), atol=1e-12)


def test_rope_is_transformers_rotation_on_the_same_vectors():
    torch = pytest.importorskip("torch")
    llama = pytest.importorskip("transformers.models.llama.modeling_llama")
    rng = np.random.default_rng(1)
    q, k = rng.normal(size=(2, 9, 8)), rng.normal(size=(2, 9, 8))
    a = angles(9, 8, 500000.0)
    emb = np.concatenate([a, a], axis=-1)  # transformers' cos and sin: each angle for both halves
    cos, sin = (torch.tensor(f(emb))[None] for f in (np.cos, np.sin))
    tq, tk = llama.apply_rotary_pos_emb(torch.tensor(q)[None], torch.tensor(k)[None], cos, sin)
    np.testing.assert_allclose(rope(q, 500000.0), tq[0].numpy(), rtol=0, atol=1e-12)
    np.testing.assert_allclose(rope(k, 500000.0), tk[0].numpy(), rtol=0, atol=1e-12)
    # and the angles are the model's own: θ_i = base^(−2i/width), which it holds in float32
    config = pytest.importorskip("transformers").LlamaConfig(
        hidden_size=16,
        num_attention_heads=2,
        head_dim=8,
        rope_parameters={"rope_type": "default", "rope_theta": 500000.0},
    )
    rotary = llama.LlamaRotaryEmbedding(config)
    np.testing.assert_allclose(angles(2, 8, 500000.0)[1], rotary.inv_freq.double().numpy(), rtol=1e-6)


@pytest.mark.parametrize("heads", [8, 3, 12])
def test_alibi_is_blooms_bias_for_the_same_slopes(heads):
    torch = pytest.importorskip("torch")
    bloom = pytest.importorskip("transformers.models.bloom.modeling_bloom")
    n = 7
    theirs = bloom.build_alibi_tensor(torch.ones(1, n), heads, torch.float64).reshape(heads, 1, n).numpy()
    ours = alibi(n, n, slopes(heads))
    exact = heads & (heads - 1) == 0  # BLOOM makes its slopes in float32: exact only as powers of two
    tolerance = 1e-12 if exact else 1e-6
    assert slopes(heads) == pytest.approx((theirs[:, 0, 1] - theirs[:, 0, 0]).tolist(), rel=tolerance)
    # BLOOM adds m·j to row i, ours −m·|i − j|: under its causal mask they differ by m·i, a row's constant
    causal = np.tril(np.ones((n, n), dtype=bool))
    for h in range(heads):
        row = np.where(causal, ours[h] - theirs[h], np.nan)
        np.testing.assert_allclose(
            row - np.nanmax(row, axis=1, keepdims=True), np.where(causal, 0, np.nan), atol=tolerance * n
        )
    rng = np.random.default_rng(2)
    q, k, v = (rng.normal(size=(heads, n, 4)) for _ in range(3))
    w = AttentionWidget(tokens=list("abcdefg"), q=q, k=k, v=v, causal=True, position="alibi")
    for h in range(heads):
        w.head = h
        expected = attention(q[h], k[h], v[h], causal=True, bias=np.broadcast_to(theirs[h], (n, n))).weights
        np.testing.assert_allclose(w.weights, expected, atol=tolerance)


def test_slopes_default_to_the_alibi_papers():
    assert slopes(8) == [2.0**-h for h in range(1, 9)]
    assert slopes(3) == [2.0**-4, 2.0**-8, 2.0**-2]  # two heads' slopes, then one of four heads' (every other)
    w = lab(position="alibi")
    assert w.alibi_slopes is None  # the default: 2^(−8h/H)
    w.head = 1
    np.testing.assert_allclose(w.scores - lab(head=1).scores, alibi(6, 6, [2.0**-8])[0], atol=1e-12)


@pytest.mark.parametrize("scheme", ["rope", "alibi"])
def test_every_path_computes_the_same_weights(scheme):
    """The head shown, the views computed from the widget's inputs and attention() itself agree."""
    w = lab(position=scheme, rope_base=100.0, alibi_slopes=[0.5, 0.25, 1.0], causal=True)
    q, k, v = w.q, w.k, w.v
    for h in range(3):
        w.head = h
        qh, kh = (rope(a[h], 100.0) for a in (q, k)) if scheme == "rope" else (q[h], k[h])
        bias = None if scheme == "rope" else alibi(6, 6, [w.alibi_slopes[h]])[0]
        expected = attention(qh, kh, v[h], causal=True, bias=bias).weights
        np.testing.assert_allclose(w.weights, expected, atol=1e-12)
        np.testing.assert_allclose(w.head_summary()["first"][0][h], expected[:, 0].mean(), atol=1e-12)
    assert not np.allclose(w.weights, lab(causal=True, head=2).weights)  # position changed them


def test_rollout_and_payload_follow_the_position():
    w = lab(position="rope")
    plain = lab()
    assert not np.allclose(w.rollout(), plain.rollout())
    state = w.page_state()["state"]
    assert (state["position"], state["rope_base"], state["alibi_slopes"]) == ("rope", 10000.0, None)


def test_refusals_say_what_to_do_and_keep_the_state():
    w = lab(position="rope")
    with pytest.raises(traitlets.TraitError, match="one of 'none', 'rope', 'alibi'"):
        w.position = "learned"
    with pytest.raises(traitlets.TraitError, match="one slope per head \\(3\\), got 2"):
        w.alibi_slopes = [0.5, 0.5]
    with pytest.raises(traitlets.TraitError, match="'rope_base' must be a finite number > 1"):
        w.rope_base = 1.0
    for huge in (10**400, -(10**400)):  # an int past float's range: refused as the page reads it, infinite
        with pytest.raises(traitlets.TraitError, match="'rope_base' must be a finite number > 1.*got -?inf"):
            w.rope_base = huge
    with pytest.raises(traitlets.TraitError, match="'temperature' must be a finite number > 0"):
        w.temperature = 10**400
    with pytest.raises(traitlets.TraitError, match="even width, got 3"):
        w.set_vectors(q=np.ones((3, 6, 3)), k=np.ones((3, 6, 3)))
    assert (w.position, w.q.shape[-1], w.alibi_slopes, w.rope_base) == ("rope", 4, None, 10000.0)
    w.position = "none"
    w.set_vectors(q=np.ones((3, 6, 3)), k=np.ones((3, 6, 3)))  # an odd width is fine without RoPE
    w.alibi_slopes = [1.0, 2.0, 3.0]
    w.set_vectors(q=np.ones((6, 3)), k=np.ones((6, 3)), v=np.ones((6, 2)))
    assert w.alibi_slopes is None  # slopes for three heads, and there is one now: the default's again
    w.alibi_slopes = np.array([0.25])  # an array of slopes is read as a list; held whole, as a tuple
    assert w.alibi_slopes == (0.25,)
    w.position = "alibi"
    with pytest.raises(traitlets.TraitError, match="counts the rows and the columns as places in one text"):
        w.set_vectors(key_tokens=["x", "y"], k=np.ones((2, 3)), v=np.ones((2, 2)))
    assert not w.cross


def test_a_models_position_is_its_own():
    readers = pytest.importorskip("attnwidget.integrations.weights")
    del readers
    weights = np.full((1, 2, 3, 3), 1 / 3)
    w = AttentionWidget.from_attentions(weights, ["a", "b", "c"])
    for name, value in (("position", "rope"), ("rope_base", 100.0), ("alibi_slopes", [0.5, 0.5])):
        with pytest.raises(traitlets.TraitError, match="carry its own position already"):
            setattr(w, name, value)
    assert w.position == ""
    with pytest.raises(ValueError, match="position= is for your own queries and keys"):
        AttentionWidget.from_attentions(weights, ["a", "b", "c"], position="rope")
