"""Queries and keys seen together (w.query_key_map(), qkmap.py): the points equal a principal
component analysis written here (eigenvectors of the covariance, not an SVD), up to the sign of
each axis; the balancing and the move leave every weight unchanged; bad input is refused."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from test_across_layers import model_widget

from attnwidget import AttentionWidget, qkmap
from attnwidget.formulas import _softmax_rows, allowed_cells, scores_of
from attnwidget.widget import _on_page_message

TEXTS = ["the cat sat on the mat", "a dog saw the dog run", "she sat by the river bank"]


def by_hand(w, layer: int, head: int) -> np.ndarray:
    """Every text's queries then keys of one head, balanced and moved as the docs say, projected
    on the covariance's two leading eigenvectors."""
    qs, ks = [], []
    for t in range(max(1, len(w.sentences))):
        w.sentence_index = t
        if w.n_layers:
            w.layer = layer
        q, k = (a[head] if a.ndim == 3 else a for a in (np.asarray(w.q, float), np.asarray(w.k, float)))
        qs.append(q)
        ks.append(k)
    q_all, k_all = np.concatenate(qs), np.concatenate(ks)
    c = np.sqrt(np.mean(np.linalg.norm(k_all, axis=1)) / np.mean(np.linalg.norm(q_all, axis=1)))
    shift = (q_all * c).mean(0) - (k_all / c).mean(0)
    x = np.concatenate([part for q, k in zip(qs, ks) for part in (q * c, k / c + shift)])
    values, vectors = np.linalg.eigh(np.cov(x.T, bias=True))
    top = vectors[:, np.argsort(values)[::-1][:2]]
    return (x - x.mean(0)) @ top


def same_up_to_sign(got, want):
    for axis in range(2):
        sign = 1.0 if np.dot(got[:, axis], want[:, axis]) >= 0 else -1.0
        np.testing.assert_allclose(got[:, axis], sign * want[:, axis], atol=1e-9, rtol=0)


def test_the_points_are_the_principal_components_of_every_query_and_key():
    w = model_widget(seed=4, n=7, layers=2, heads=3)  # 16-number vectors
    found = w.query_key_map(layer=1, head=2)
    same_up_to_sign(found["points"], by_hand(w, 1, 2))
    n = len(w.tokens)
    assert list(found["kind"]) == ["query"] * n + ["key"] * n and list(found["position"]) == [*range(n)] * 2
    assert found["layer"] == 1 and found["head"] == 2 and found["explained"][0] >= found["explained"][1] > 0


def test_every_text_is_in_the_map_with_its_tokens():
    w = AttentionWidget(TEXTS)
    found = w.query_key_map()
    same_up_to_sign(found["points"], by_hand(w, 0, 0))
    for t, text in enumerate(TEXTS):
        words = text.split()
        at = found["text"] == t
        assert list(found["position"][at]) == [*range(len(words))] * 2
        assert [found["token"][i] for i in np.flatnonzero(at)] == words * 2
    again = w.query_key_map()  # deterministic, whatever text is shown
    np.testing.assert_array_equal(again["points"], found["points"])


@settings(max_examples=40, deadline=None)
@given(
    q=arrays(np.float64, (5, 3), elements=st.floats(-4, 4)),
    k=arrays(np.float64, (6, 3), elements=st.floats(-4, 4)),
    causal=st.booleans(),
)
def test_balancing_and_moving_the_keys_changes_no_weight(q, k, causal):
    q2, k2, c, shift = qkmap.balance(q, k)
    if np.linalg.norm(q, axis=1).mean() > 1e-3 and np.linalg.norm(k, axis=1).mean() > 1e-3:
        assert np.isclose(np.linalg.norm(q2, axis=1).mean(), np.linalg.norm(k2 - shift, axis=1).mean())
    np.testing.assert_allclose(q2.mean(0), k2.mean(0), atol=1e-9)
    allowed = allowed_cells(5, causal, None, 6)
    before = _softmax_rows(scores_of(q, k, 0.5), 1.0, allowed)
    after = _softmax_rows(scores_of(q2, k2, 0.5), 1.0, allowed)
    np.testing.assert_allclose(after, before, atol=1e-9)


def test_the_page_is_sent_the_map_of_the_head_shown_while_it_is_on():
    w = AttentionWidget(TEXTS)
    _on_page_message(w, {"kind": "compute", "view": "query_key_map"}, [])
    assert "query_key_map" not in (w.computed or {})  # not asked while off
    w.qk_map = True
    _on_page_message(w, {"kind": "compute", "view": "query_key_map"}, [])
    sent = w.computed["query_key_map"]
    points = np.frombuffer(sent["points"]["view"], np.float32).reshape(sent["points"]["shape"])
    np.testing.assert_allclose(points, w.query_key_map()["points"], atol=1e-5)
    assert sent["key"] == {"step": len(w.tokens), "block": "", "layer": 0, "head": 0}
    w.temperature = 0.3  # no weight in it: still current
    assert "query_key_map" in w.computed
    state = w.page_state()["state"]["computed"]["query_key_map"]
    assert state["points"]["base64"] and state["token"][:2] == ["the", "cat"]  # an exported page carries it


def test_bad_input_is_refused_with_what_to_do():
    w = model_widget(seed=1, n=4, layers=2, heads=2)
    for kwargs, words in (
        (dict(layer=2), "layer must be from 0 to 1"),
        (dict(head=-1), "head must be from 0 to 1"),
        (dict(head=1.5), "head must be from 0 to 1"),
        (dict(method="mds"), "method must be one of"),
    ):
        with pytest.raises(ValueError, match=words):
            w.query_key_map(**kwargs)
    with pytest.raises(Exception, match="must be True or False"):
        w.qk_map = "yes"
    assert w.qk_map is False


def test_a_model_widget_given_vectors_of_its_own_maps_them_not_a_layer():
    w = model_widget(seed=1, n=4, layers=2, heads=2)
    w.layer = 1
    rng = np.random.default_rng(3)
    w.set_vectors(q=rng.normal(size=(2, 4, 3)), k=rng.normal(size=(2, 4, 3)), v=rng.normal(size=(2, 4, 2)))
    assert not w.layer_shown
    own = AttentionWidget(tokens=w.tokens, q=w.q, k=w.k, v=w.v)
    same_up_to_sign(w.query_key_map()["points"], by_hand(own, 0, 0))  # the vectors shown, whatever the layer
    w.qk_map = True
    _on_page_message(w, {"kind": "compute", "view": "query_key_map"}, [])
    sent = w.computed["query_key_map"]
    assert "error" not in sent
    points = np.frombuffer(sent["points"]["view"], np.float32).reshape(sent["points"]["shape"])
    np.testing.assert_allclose(points, w.query_key_map()["points"], atol=1e-5)


def test_a_widget_of_weights_alone_has_no_map_and_says_what_has_one():
    rng = np.random.default_rng(0)
    weights = rng.random(size=(2, 3, 5, 5))  # layers × heads × rows × keys
    weights /= weights.sum(-1, keepdims=True)
    w = AttentionWidget.from_attentions(weights, list("abcde"))
    # its queries and keys are zeros: the map would put every point at (0, 0)
    with pytest.raises(ValueError, match=r"no queries or keys.*from_transformers"):
        w.query_key_map()
    with pytest.raises(Exception, match=r"no queries or keys.*from_transformers"):
        w.qk_map = True
    assert w.qk_map is False  # the widget as it was
    _on_page_message(w, {"kind": "compute", "view": "query_key_map"}, [])
    assert "query_key_map" not in (w.computed or {})
    with pytest.raises(Exception, match=r"no queries or keys"):
        AttentionWidget.from_attentions(weights, list("abcde"), qk_map=True)


def test_texts_of_other_widths_are_refused_not_concatenated():
    """The lab's fitted sentence (4 numbers) beside a lexicon sentence (2): not one space, said so."""
    w = AttentionWidget(["She sat by the river bank", "He ran to the money bank"])
    with pytest.raises(ValueError, match=r"different widths \(2 and 4 numbers\).*one width"):
        w.query_key_map()
