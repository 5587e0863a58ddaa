"""Head scores over a widget's texts (atlas.py, w.head_scores()): each equals a computation written
here from the weights the widget shows for each text in turn, and the page is sent them as a
computed view (computed_views.py) keyed to the state they are for."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_across_layers import model_widget

from attnwidget import AttentionWidget, atlas
from attnwidget.widget import _on_page_message

TEXTS = ["the cat sat on the mat", "a dog saw the dog run", "she sat by the river bank"]


def by_hand(w) -> dict[str, np.ndarray]:
    """Each score from w.weights, text by text, layer by layer, head by head, with plain loops."""
    out: dict = {}
    texts = range(max(1, len(w.sentences)))
    per_text = []
    for t in texts:
        w.sentence_index = t
        layers = range(max(1, w.n_layers))
        scores = {name: np.full((len(layers), w.n_heads), np.nan) for name in atlas.SCORES}
        for layer in layers:
            if w.n_layers:
                w.layer = layer
            for h in range(w.n_heads):
                w.head = h
                W, toks = w.weights, w.tokens[: len(w.weights)]
                n = len(W)
                scores["sink"][layer, h] = np.mean([W[i, 0] for i in range(n)])
                scores["self"][layer, h] = np.mean([W[i, i] for i in range(n)])
                if n > 1:
                    scores["previous"][layer, h] = np.mean([W[i, i - 1] for i in range(1, n)])
                copies = [sum(W[i, j] for j in range(i) if toks[j] == toks[i]) for i in range(n) if toks[i] in toks[:i]]
                if copies:
                    scores["duplicate"][layer, h] = np.mean(copies)
                scores["entropy"][layer, h] = np.mean([-sum(x * np.log(x) for x in row if x > 0) for row in W])
                near = [sum(W[i, j] for j in range(len(W[i])) if j < 4 or abs(i - j) < 64) for i in range(n)]
                scores["streaming"][layer, h] = np.mean(near)
        per_text.append(scores)
    for name in atlas.SCORES:
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # (no text repeats a token: NaN)
            out[name] = np.nanmean(np.stack([s[name] for s in per_text]), axis=0)
    return out


@settings(max_examples=15, deadline=None)
@given(temperature=st.sampled_from([0.3, 1.0, 2.0]), causal=st.booleans(), sink=st.booleans())
def test_each_score_is_the_mean_over_texts_of_the_weights_shown(temperature, causal, sink):
    rng = np.random.default_rng(0)
    toks = ["a", "b", "a", "c", "b"]
    q, k, v = rng.normal(size=(3, 5, 4)), rng.normal(size=(3, 5, 4)), rng.normal(size=(3, 5, 2))
    own = AttentionWidget(tokens=toks, q=q, k=k, v=v, temperature=temperature, causal=causal, sink=sink)
    sentences = AttentionWidget(TEXTS, temperature=temperature, causal=causal, sink=sink)
    for w in (own, sentences):
        got = w.head_scores()
        want = by_hand(w)
        assert set(got) == set(atlas.SCORES) - set(atlas.OWN_TEXTS)  # (a model's only: they read the model again)
        for name in got:
            np.testing.assert_allclose(got[name], want[name], rtol=1e-12, atol=1e-12, err_msg=name)


def test_a_models_every_layer_and_head_is_scored():
    w = model_widget(seed=3, n=6, layers=3, heads=2)
    got = w.head_scores()
    want = by_hand(w)
    assert got["sink"].shape == (3, 2)
    for name in got:
        np.testing.assert_allclose(got[name], want[name], rtol=1e-12, atol=1e-12, err_msg=name)
    assert atlas.sink_heads(got) == int((want["sink"] > 0.3).sum())


def test_the_page_asks_for_the_scores_and_gets_them_for_the_state_it_shows():
    w = AttentionWidget(TEXTS, causal=True)
    w.summary = "duplicate"
    _on_page_message(w, {"kind": "compute", "view": "head_scores"}, [])
    sent = w.computed["head_scores"]
    assert sent["key"]["temperature"] == 1.0 and sent["key"]["causal"] is True
    scores = w.head_scores()
    assert set(sent["summaries"]) == set(scores)
    for name in scores:
        want = [None if np.isnan(x) else float(x) for x in scores[name].ravel()]
        assert sent["summaries"][name] == pytest.approx(want, nan_ok=True)
    assert sent["texts"] == 3 and sent["sink_heads"] == atlas.sink_heads(scores)
    w.temperature = 0.5  # out of date: dropped, and asked for again
    assert "head_scores" not in (w.computed or {})
    page = w.page_state()["state"]
    assert page["computed"]["head_scores"]["key"]["temperature"] == 0.5  # an exported page carries them


def test_cross_attention_is_scored_where_it_means_something():
    rng = np.random.default_rng(2)
    w = AttentionWidget(
        tokens=list("ab"),
        key_tokens=list("xyz"),
        q=rng.normal(size=(2, 3)),
        k=rng.normal(size=(3, 3)),
        v=rng.normal(size=(3, 2)),
    )
    got = w.head_scores()
    np.testing.assert_allclose(got["sink"], [[w.weights[:, 0].mean()]])
    assert np.isnan(got["self"]).all() and np.isnan(got["previous"]).all() and np.isnan(got["duplicate"]).all()


def test_a_mask_on_the_text_shown_is_not_put_on_the_other_texts():
    w = AttentionWidget(["the cat sat on the mat", "a dog saw the dog run and ran"], causal=True)
    w.mask = ~np.eye(6, dtype=bool)  # the text shown's rows may not read themselves
    got = w.head_scores()  # (the other text, of 8 tokens, has no mask of its own)
    w.sentence_index = 1
    other = atlas.text_scores(w.weights[None], w.tokens)
    w.sentence_index = 0
    w.mask = ~np.eye(6, dtype=bool)
    shown = atlas.text_scores(w.weights[None], w.tokens)
    np.testing.assert_allclose(got["self"], [[(shown["self"][0] + other["self"][0]) / 2]], atol=1e-15)


def test_a_layer_switch_keeps_the_scores_the_page_was_sent():
    w = model_widget(seed=1, n=5, layers=3, heads=2)
    w.summary = "sink"
    _on_page_message(w, {"kind": "compute", "view": "head_scores"}, [])
    sent = w.computed["head_scores"]
    w.layer = 2  # every layer's scores: the same answer, still current
    assert w.computed["head_scores"] is sent


def test_texts_of_other_heads_are_refused_with_what_to_do():
    w = AttentionWidget(["a b c", "d e f"])
    rng = np.random.default_rng(0)
    w.set_vectors(q=rng.normal(size=(3, 3, 2)), k=rng.normal(size=(3, 3, 2)), v=rng.normal(size=(3, 3, 2)))
    with pytest.raises(ValueError, match="same layers and heads"):
        w.head_scores()
    w.summary = "entropy"
    _on_page_message(w, {"kind": "compute", "view": "head_scores"}, [])
    assert "same layers and heads" in w.computed["head_scores"]["error"]  # said in the page, once


def test_an_empty_list_of_scores_or_an_empty_layer_is_refused_with_what_to_do():
    w = AttentionWidget(TEXTS)
    before = w.head_scores(["sink"])
    for empty in ([], ()):
        with pytest.raises(ValueError, match=r"no scores asked for.*'sink'.*names=None") as e:
            w.head_scores(empty)
        assert "'none'" not in str(e.value)
    with pytest.raises(ValueError, match="head scores are 'sink'.*got 'sinks'"):
        w.head_scores(["sink", "sinks"])
    np.testing.assert_array_equal(w.head_scores(["sink"])["sink"], before["sink"])  # the widget as it was
    for shape in ((2, 0, 0), (2, 3, 0), (3,)):  # no query, no key, not a layer of heads
        with pytest.raises(ValueError, match=r"heads × queries × keys.*at least one query and one key"):
            atlas.text_scores(np.zeros(shape), ["a", "b", "c"], cross=shape[-1] == 0)
