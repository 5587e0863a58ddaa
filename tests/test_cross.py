"""Cross-attention in the widget: rows are one text's tokens (the target), columns another's
(the source), so matrices are n_queries × n_keys; and an encoder–decoder model's three blocks.
No model needed (models are in test_seq2seq.py)."""

import numpy as np
import pytest
import traitlets
from hypothesis import given, settings
from hypothesis import strategies as st

from attnwidget import AttentionWidget, attention
from attnwidget.formulas import head_summaries
from attnwidget.integrations.common import ModelAttention


def softmax(s):
    e = np.exp(s - s.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def cross_widget(n=3, m=5, d=4, heads=None, seed=0, **kwargs):
    rng = np.random.default_rng(seed)
    shape = (lambda rows: (heads, rows, d)) if heads else (lambda rows: (rows, d))
    q, k, v = rng.normal(size=shape(n)), rng.normal(size=shape(m)), rng.normal(size=shape(m))
    return AttentionWidget(
        tokens=[f"t{i}" for i in range(n)], key_tokens=[f"s{j}" for j in range(m)], q=q, k=k, v=v, **kwargs
    )


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 7), m=st.integers(1, 7), d=st.integers(1, 5), t=st.floats(0.2, 4), seed=st.integers(0, 99))
def test_cross_attention_numbers_are_numpys(n, m, d, t, seed):
    w = cross_widget(n, m, d, seed=seed, temperature=t)
    s = w.q @ w.k.T / np.sqrt(d)
    np.testing.assert_allclose(w.weights, softmax(s / t), atol=1e-12)
    assert w.weights.shape == (n, m) and w.output.shape == (n, w.v.shape[1])
    np.testing.assert_allclose(w.output, softmax(s / t) @ w.v, atol=1e-12)
    assert w.key_tokens == [f"s{j}" for j in range(m)] and w.tokens == [f"t{i}" for i in range(n)]


def test_key_tokens_are_the_tokens_in_self_attention_and_read_only():
    w = AttentionWidget()
    assert w.key_tokens == w.tokens
    w.set_vectors(tokens=["a", "b"], q=np.eye(2), k=np.eye(2), v=np.eye(2))
    assert w.key_tokens == ["a", "b"]
    with pytest.raises(traitlets.TraitError, match="read-only"):
        w.key_tokens = ["x", "y"]
    with pytest.raises(TypeError, match="key_tokens= .*need q="):
        AttentionWidget(key_tokens=["x"])


def test_keys_without_labels_are_numbered_and_cells_and_focus_keep_in_range():
    rng = np.random.default_rng(1)
    w = AttentionWidget(q=rng.normal(size=(2, 3)), k=rng.normal(size=(4, 3)), v=rng.normal(size=(4, 2)))
    assert (w.tokens, w.key_tokens) == (["0", "1"], ["0", "1", "2", "3"])
    w.cell = (1, 3)  # a column past the last row is a cell in cross-attention
    assert w.focus == 1 and w.cell_arithmetic["weight"] == pytest.approx(w.weights[1, 3])
    with pytest.raises(traitlets.TraitError, match="row from 0 to 1 and column from 0 to 3"):
        w.cell = (1, 4)
    with pytest.raises(traitlets.TraitError, match="'focus' must be a token index from 0 to 1"):
        w.focus = 2
    assert w.cell == (1, 3)


def test_mismatched_cross_arrays_are_refused_whole_with_a_message_that_says_which():
    w = cross_widget(3, 5)
    before = (w.q, w.k, w.v, list(w.key_tokens))
    with pytest.raises(traitlets.TraitError, match="columns \\(keys\\).*key_tokens: 5, k: 5, v: 4"):
        w.v = np.ones((4, 4))
    with pytest.raises(traitlets.TraitError, match="rows \\(queries\\).*tokens: 3, q: 4"):
        w.q = np.ones((4, 4))
    assert (w.q, w.k, w.v, list(w.key_tokens)) == before
    # another source, in one change, keeps the target rows
    w.set_vectors(key_tokens=["x", "y"], k=np.ones((2, 4)), v=np.ones((2, 4)))
    assert w.key_tokens == ["x", "y"] and w.weights.shape == (3, 2)
    np.testing.assert_allclose(w.weights, 0.5)
    # and back to self-attention: the columns are the tokens again
    w.set_vectors(key_tokens=None, tokens=["a", "b"], q=np.eye(2), k=np.eye(2), v=np.eye(2))
    assert w.key_tokens == ["a", "b"]
    with pytest.raises(traitlets.TraitError, match="must agree on the number of tokens"):
        w.set_vectors(k=np.ones((3, 2)), v=np.ones((3, 2)))  # self-attention is square


def test_mask_bias_sink_and_causal_are_queries_by_keys():
    w = cross_widget(3, 5, heads=2, seed=2)
    mask = np.ones((3, 5), dtype=bool)
    mask[:, 2] = False
    bias = np.arange(15.0).reshape(3, 5) / 10
    w.set_vectors(mask=mask, bias=bias)
    s = w.q[0] @ w.k[0].T / 2 + bias
    s[:, 2] = -np.inf
    np.testing.assert_allclose(w.weights, softmax(s), atol=1e-12)
    w.sink = True  # the first key's column out, every row renormalised
    assert np.all(w.weights[:, 0] == 0) and np.allclose(w.weights.sum(axis=1), 1)
    w.sink, w.mask, w.causal = False, None, True  # causal: row i reads columns j <= i
    np.testing.assert_array_equal(w.weights > 0, np.tri(3, 5, dtype=bool))
    with pytest.raises(traitlets.TraitError, match="columns \\(keys\\).*mask: 4"):
        w.mask = np.ones((3, 4), dtype=bool)


def test_cross_summaries_have_no_self_or_previous_token():
    w = cross_widget(4, 6, heads=3, seed=3)
    s = w.head_summary()
    assert np.isnan(s["self"]).all() and np.isnan(s["previous"]).all()
    weights = np.stack([attention(w.q[h], w.k[h], w.v[h]).weights for h in range(3)])
    np.testing.assert_allclose(s["first"][0], weights[:, :, 0].mean(axis=1))
    np.testing.assert_allclose(s["effective_tokens"][0], head_summaries(weights)["effective_tokens"])


def fake_seq2seq(src=5, tgt=3, heads=2, d=4, layers=(2, 3, 3), seed=0):
    """An encoder–decoder model's three blocks, as integrations.from_transformers(target=) gives them."""
    rng = np.random.default_rng(seed)
    source, target = [f"s{j}" for j in range(src)], [f"t{i}" for i in range(tgt)]

    def block(rows, cols, count, **kw):
        arrays = [tuple(rng.normal(size=(heads, r, d)) for r in (rows, cols, cols)) for _ in range(count)]
        return ModelAttention(architecture="fake", layers=arrays, scale=None, model_name="fake-seq2seq", **kw)

    return {
        "encoder": block(
            src, src, layers[0], tokens=source, key_tokens=None, causal=False, bias=rng.normal(size=(heads, src, src))
        ),
        "decoder": block(tgt, tgt, layers[1], tokens=target, key_tokens=None, causal=True, bias=None),
        "cross": block(tgt, src, layers[2], tokens=target, key_tokens=source, causal=False, bias=None),
    }


def expected(found, layer, head):
    q, k, v = (a[head] for a in found.layers[layer])
    return attention(q, k, v, causal=found.causal, bias=None if found.bias is None else found.bias[head]).weights


def test_a_models_blocks_switch_in_python_and_from_the_page():
    blocks = fake_seq2seq()
    w = AttentionWidget._from_model(blocks, 1, 1, {}, "cross")
    assert (w.block, w.tokens, w.key_tokens, w.causal, w.n_layers) == (
        "cross",
        blocks["cross"].tokens,
        blocks["cross"].key_tokens,
        False,
        3,
    )
    np.testing.assert_allclose(w.weights, expected(blocks["cross"], 1, 1))
    w.focus, w.cell = 2, (2, 4)
    w.set_state({"block": "encoder"})  # the page's switch: its tokens, bias and causal rule come with it
    assert (w.tokens, w.key_tokens, w.causal, w.layer, w.n_layers) == (blocks["encoder"].tokens,) * 2 + (False, 1, 2)
    assert w.cell == (2, 4) and w.bias is not None
    np.testing.assert_allclose(w.weights, expected(blocks["encoder"], 1, 1))
    w.block, w.layer = "decoder", 2
    assert w.causal and w.bias is None and w.cell is None and w.focus == 2
    np.testing.assert_allclose(w.weights, expected(blocks["decoder"], 2, 1))
    w.set_state({"layer": 0})
    np.testing.assert_allclose(w.weights, expected(blocks["decoder"], 0, 1))
    with pytest.raises(traitlets.TraitError, match="'block' must be one of 'encoder', 'decoder', 'cross'"):
        w.block = "middle"
    w.set_state({"block": 7})  # a crafted message: refused, nothing changes
    assert w.block == "decoder" and w.layer == 0
    with pytest.raises(traitlets.TraitError, match="only an encoder–decoder model has blocks"):
        AttentionWidget().block = "cross"


def test_a_block_switch_sends_the_layer_shown_alone_and_exported_pages_carry_every_block():
    from test_widget import RecordingComm

    blocks = fake_seq2seq()
    w = AttentionWidget._from_model(blocks, 0, 0, {}, "decoder")
    w.comm = RecordingComm()
    w.block = "cross"
    ((data, buffers),) = w.comm.sent
    # the page gets the layer it shows; every layer of every block stays in the kernel
    assert {"q", "k", "v", "key_tokens", "block"} <= set(data["state"]) and not {"model_q", "model_k", "model_v"} & set(
        data["state"]
    )
    heads = len(w.q)
    assert (
        sum(b.nbytes for b in buffers)
        == (sum(a.nbytes for a in blocks["cross"].layers[0]) + w.value_basis.nbytes) // heads
    )  # one head's
    w.comm.sent.clear()
    w.layer = 2
    ((data, buffers),) = w.comm.sent
    assert set(data["state"]) == {"layer", "q", "k", "v", "value_basis", "layer_arrays"} and len(buffers) == 4
    np.testing.assert_array_equal(w.q, blocks["cross"].layers[2][0])
    sources = w.page_state()["sources"]
    assert set(sources["blocks"]) == {"encoder", "decoder", "cross"}
    cross, decoder = sources["blocks"]["cross"], sources["blocks"]["decoder"]
    assert (
        cross["key_tokens"] == blocks["cross"].key_tokens
        and cross["n_layers"] == 3
        and decoder["model_k"]["shape"] == [6, 3, 4]
    )
    # the block shown (cross) has its arrays in the state, once
    assert "model_k" not in cross and w.page_state()["state"]["model_k"]["shape"] == [6, 5, 4]


def test_empty_key_tokens_are_refused_and_the_widget_keeps_its_state():
    rng = np.random.default_rng(2)
    with pytest.raises(ValueError, match="'key_tokens' must not be empty"):
        AttentionWidget(q=rng.normal(size=(2, 3)), k=rng.normal(size=(4, 3)), v=rng.normal(size=(4, 2)), key_tokens=[])
    w = cross_widget(3, 5)
    before = (list(w.key_tokens), w.k, w.weights)
    with pytest.raises(traitlets.TraitError, match="'key_tokens' must not be empty"):
        w.set_vectors(key_tokens=[], k=np.ones((0, 4)), v=np.ones((0, 4)))
    assert (list(w.key_tokens), w.k) == before[:2]
    np.testing.assert_allclose(w.weights, before[2])
    with pytest.raises(traitlets.TraitError, match="'key_tokens' must be strings.*for t in key_tokens"):
        w.set_vectors(key_tokens=[object()] * 5)


def test_a_sentence_after_cross_attention_is_self_attention_again():
    w = AttentionWidget(["She sat by the river bank", "I sat on the river bank"])
    w.set_vectors(tokens=["a", "b"], key_tokens=["x", "y", "z"], q=np.eye(2, 3), k=np.eye(3), v=np.eye(3))
    w.sentence_index = 1
    assert w.key_tokens == w.tokens == "I sat on the river bank".split()
    assert w.weights.shape == (6, 6)


def test_a_models_rules_given_to_the_constructor_outlast_its_blocks():
    blocks = fake_seq2seq()
    w = AttentionWidget._from_model(blocks, 0, 0, {"causal": True, "scale": 0.5}, "encoder")
    assert (w.causal, w.scale, w.block) == (True, 0.5, "encoder")
    found = blocks["encoder"]
    q, k, v = (a[0] for a in found.layers[0])
    np.testing.assert_allclose(w.weights, attention(q, k, v, causal=True, scale=0.5, bias=found.bias[0]).weights)
    w.block = "decoder"  # a switch afterwards brings the block's own rules
    assert (w.causal, w.scale) == (True, None)


def test_exported_pages_can_reach_every_blocks_every_layer():
    blocks = fake_seq2seq(layers=(2, 3, 4))
    w = AttentionWidget._from_model(blocks, 0, 0, {}, "encoder")
    blocks_sent = w.page_state()["sources"]["blocks"]
    assert [blocks_sent[b]["n_layers"] for b in ("encoder", "decoder", "cross")] == [2, 3, 4]


@pytest.mark.parametrize("shown", ["encoder", "decoder", "cross"])
def test_an_encoder_decoder_page_exports_whichever_block_is_shown(shown, tmp_path):
    import json

    w = AttentionWidget._from_model(fake_seq2seq(), 0, 0, {}, shown)
    payload = w.page_state()
    assert (
        payload["arrays"] == {} and json.loads(json.dumps(payload)) == payload
    )  # plain JSON, the layers in their blocks
    w.to_html(tmp_path / "page.html")
    assert "<html" in (tmp_path / "page.html").read_text(encoding="utf-8").lower()
    with pytest.raises(ValueError, match="layers= is not offered for an encoder–decoder model yet"):
        w.to_html(layers=[0])
