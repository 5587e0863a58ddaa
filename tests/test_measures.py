"""The panel beyond one head (measures.py): what the page is sent for each measure equals the
widget's own Python computation, for the state its key names; and what cannot be shown says why."""

import base64
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_across_layers import model_widget

from attnwidget import AttentionWidget, measures
from attnwidget.mixing import attention_flow, rollout
from attnwidget.widget import _on_page_message


def ask(w):
    """The page asks for the measure shown, as its message does; returns what it is sent."""
    _on_page_message(w, {"kind": "compute", "view": w.measure}, [])
    return w.measure_data[w.measure]


def matrix(entry):
    m = entry["matrix"]
    return np.frombuffer(bytes(m["view"]), dtype=np.float32).reshape(m["shape"])


@settings(max_examples=20, deadline=None)
@given(
    layer=st.integers(0, 2),
    temperature=st.sampled_from([0.3, 1.0, 2.5]),
    causal=st.booleans(),
    sink=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_rollout_and_flow_sent_to_the_page_are_pythons_up_to_the_layer_shown(layer, temperature, causal, sink, seed):
    w = model_widget(seed=seed, n=5, layers=3, heads=2)
    w.set_state({"layer": layer, "temperature": temperature, "causal": causal, "sink": sink})
    every = np.array([a.copy() for a in w._inputs().across("rollout")])
    w.measure = "rollout"
    got = ask(w)
    np.testing.assert_allclose(matrix(got), w.rollout()[layer], rtol=1e-6, atol=1e-7)
    assert got["key"] == {
        "measure": "rollout",
        "temperature": temperature,
        "causal": causal,
        "sink": sink,
        "step": 5,
        "block": "",
        "sentence_index": 0,
        "layer": layer,
        "scale": None,
        "softcap": None,
        "position": w.position,
        "rope_base": 10000.0,
    }
    w.measure = "flow"
    np.testing.assert_allclose(matrix(ask(w)), attention_flow(every[: layer + 1]), rtol=1e-6, atol=1e-7)
    if layer == 2:
        np.testing.assert_allclose(matrix(ask(w)), w.flow(), rtol=1e-6, atol=1e-7)


def test_a_change_of_the_state_leaves_the_measure_for_another_key_and_the_page_asks_again():
    w = model_widget(n=5, layers=3)
    w.measure = "rollout"
    first = ask(w)
    w.layer = 2
    assert (
        w.measure_data is None or w.measure_data["rollout"]["key"]["layer"] == 0
    )  # the page sees it is not for layer 2, and asks
    second = ask(w)
    assert second["key"]["layer"] == 2
    np.testing.assert_allclose(matrix(second), w.rollout()[2], rtol=1e-6)
    assert not np.allclose(matrix(first), matrix(second))
    again = ask(w)
    assert again is second  # the same state: not computed again


def test_your_own_arrays_changed_leave_no_stale_measure():
    rng = np.random.default_rng(0)
    w = AttentionWidget(
        tokens=list("abcd"), q=rng.normal(size=(2, 4, 3)), k=rng.normal(size=(2, 4, 3)), v=rng.normal(size=(2, 4, 2))
    )
    w.measure = "rollout"
    ask(w)
    w.q = rng.normal(size=(2, 4, 3))
    assert w.measure_data is None  # its key cannot tell: new arrays, the same settings
    np.testing.assert_allclose(matrix(ask(w)), rollout(w._inputs().across("rollout"))[0], rtol=1e-6)


def test_what_a_widget_cannot_show_says_why_and_is_not_computed():
    rng = np.random.default_rng(1)
    cross = AttentionWidget(
        tokens=list("ab"),
        key_tokens=list("xyz"),
        q=rng.normal(size=(2, 3)),
        k=rng.normal(size=(3, 3)),
        v=rng.normal(size=(3, 2)),
    )
    assert "cross-attention" in cross.measures["rollout"] and "cross-attention" in cross.measures["flow"]
    cross.measure = "rollout"
    assert "cross-attention" in ask(cross)["error"]
    long = model_widget(n=int((measures.FLOW_CELLS / 3) ** 0.5) + 2, layers=3)  # past the page's flow limit
    assert long.measures["rollout"] == "" and "too many" in long.measures["flow"] and "rollout" in long.measures["flow"]
    assert model_widget(n=5).measures["flow"] == ""
    # two-way layers: each pair's graph is the whole text's, so the page offers flow on shorter texts
    middle = model_widget(n=int((measures.flow_cells(False) / 3) ** 0.5) + 2, layers=3)
    middle.causal = True
    assert middle.measures["flow"] == ""
    middle.causal = False
    assert "too many" in middle.measures["flow"]
    weights = AttentionWidget.from_attentions(np.full((1, 2, 3, 3), 1 / 3), list("abc"))
    assert "values=" in weights.measures["norms"]
    assert "two texts" in AttentionWidget().measures["difference"]


def test_the_page_offers_a_measure_only_where_there_is_something_beyond_one_head():
    """Which buttons the panel offers is said once, in Python (offered_measures): nothing for one
    head of one text; difference only with several texts; a measure chosen keeps its button."""
    assert AttentionWidget().offered_measures == []
    one = AttentionWidget(measure="rollout")
    assert one.offered_measures == ["norms", "mean", "rollout", "flow"]
    assert AttentionWidget(["a b c", "d e f"]).offered_measures == ["norms", "mean", "rollout", "flow", "difference"]
    w = model_widget(n=5, layers=3)
    assert w.offered_measures == ["norms", "mean", "rollout", "flow"]
    w.measure = "flow"
    assert w.offered_measures == ["norms", "mean", "rollout", "flow"] and w.measures["flow"] == ""


def test_an_unknown_measure_is_refused_and_the_state_kept():
    w = model_widget()
    w.measure = "rollout"
    with pytest.raises(Exception, match="'measure' must be one of"):
        w.measure = "attention"
    assert w.measure == "rollout"


def test_an_exported_page_carries_pythons_measures_at_the_state_exported():
    w = model_widget(n=5, layers=3)
    w.set_state({"layer": 1, "temperature": 0.7, "measure": "flow"})
    shown = w.page_state()["state"]["measure_data"]
    assert set(shown) == {"norms", "mean", "rollout", "flow"} - {n for n, why in w.measures.items() if why}
    every = shown["rollout"]  # every layer: the page's layer slider goes on working
    assert "layer" not in every["key"] and every["matrix"]["shape"] == [3, 5, 5]
    got = np.frombuffer(base64.b64decode(every["matrix"]["base64"]), dtype=np.float32).reshape(3, 5, 5)
    np.testing.assert_allclose(got, w.rollout(), rtol=1e-6)
    flow = np.frombuffer(base64.b64decode(shown["flow"]["matrix"]["base64"]), dtype=np.float32).reshape(3, 5, 5)
    layers = np.array([a.copy() for a in w._inputs().across("flow")])
    for up in range(3):  # flow up to every layer too, for so short a text
        np.testing.assert_allclose(flow[up], attention_flow(layers[: up + 1]), rtol=1e-6, atol=1e-7)


def test_weight_times_value_norm_sent_to_the_page_is_pythons_for_the_head_shown():
    w = model_widget(seed=3, n=5, layers=3, heads=2)
    w.set_state({"layer": 1, "head": 1, "temperature": 0.6, "measure": "norms"})
    got = ask(w)
    np.testing.assert_allclose(matrix(got), w.norms()[1], rtol=1e-6)
    assert got["key"]["head"] == 1 and got["lo"] == 0 and got["hi"] == pytest.approx(w.norms()[1].max(), rel=1e-6)
    w.head = 0
    np.testing.assert_allclose(matrix(ask(w)), w.norms()[0], rtol=1e-6)
    rng = np.random.default_rng(0)
    weights = rng.random((2, 3, 3))
    weights /= weights.sum(axis=-1, keepdims=True)
    given = AttentionWidget.from_attentions(
        weights, list("abc"), values=rng.normal(size=(2, 3, 4)), measure="norms", head=1
    )
    np.testing.assert_allclose(matrix(ask(given)), given.norms()[1], rtol=1e-6)


def test_an_export_of_a_long_text_computes_only_the_measure_shown():
    w = model_widget(n=300, layers=2, heads=1)
    # none shown: none computed (weight × ‖value‖ of values no projection turns: the page's own to compute)
    assert w.page_state()["state"]["measure_data"] == {"norms": {"in_page": True}}
    w.measure = "rollout"
    carried = w.page_state()["state"]["measure_data"]
    assert list(carried) == ["norms", "rollout"] and "matrix" in carried["rollout"]


def test_values_too_large_for_the_page_say_so_in_the_panel():
    rng = np.random.default_rng(2)
    w = AttentionWidget(
        tokens=list("abc"),
        q=rng.normal(size=(3, 2)),
        k=rng.normal(size=(3, 2)),
        v=np.full((3, 2), 1e200),
        measure="norms",
    )
    with np.errstate(all="raise"):
        assert "too large to draw" in ask(w)["error"]


def test_the_difference_of_two_texts_is_whole_whichever_text_is_shown():
    """difference(a, b) of two texts longer than the text shown is theirs, cell by cell, not cut
    to the shown text's length."""
    w = AttentionWidget(["a b c", "the cat sat on the mat", "a dog saw the dog run"], causal=True, temperature=0.7)
    got = w.difference(1, 2)
    assert got.shape == (1, 1, 6, 6)
    w.sentence_index = 1
    first = w.weights.copy()
    w.sentence_index = 2
    np.testing.assert_allclose(got[0, 0], first - w.weights, atol=1e-15)


@settings(max_examples=40, deadline=None)
@given(
    st.integers(1, 3), st.integers(1, 5), st.integers(1, 5), st.sampled_from([0.0, -0.0, 1.0]), st.integers(0, 2**16)
)
def test_each_heads_largest_difference_is_its_largest_absolute_value_and_never_minus_zero(heads, n, m, scale, seed):
    """measures.largest (max and −min, with no |d| made) is np.abs(d).max per head, and 0 where nothing differs
    (two texts whose tokens so far are the same), never −0 for the page to print as "-0"."""
    d = np.random.default_rng(seed).normal(size=(heads, n, m)) * scale
    got = measures.largest(d)
    np.testing.assert_array_equal(got, np.abs(d).max(axis=(1, 2)))
    assert not np.signbit(got).any()


@settings(max_examples=120, deadline=None)
@given(
    st.integers(1, 3),
    st.integers(1, 9),
    st.lists(st.integers(0, 9), min_size=3, max_size=3),
    st.integers(0, 2),
    st.sampled_from(["causal", "two-way", "masked"]),
    st.sampled_from([None, "same", "differs", "2-D"]),
    st.sampled_from([None, "huge", "nan"]),
    st.integers(1, 4),
    st.sampled_from(["numpy", "torch"]),
    st.integers(0, 2**16),
)
def test_the_rows_two_texts_share_are_not_computed_and_the_difference_is_the_whole_ones(
    heads, n, shares, extra, reading, bias, odd, rows, by, seed
):
    """Two texts whose first tokens are the same (a minimal pair): where rows read only earlier keys (a
    causal layer) their first rows have the same weights, so blocks of those rows are not computed; every
    difference and largest value is still that of both texts' whole weights, bit for bit, layer after layer
    (three, each sharing its own number of rows, with its own mask), whatever the bias, keys beyond the
    rows, a layer of one text near float64's limit (scored whole) or with a NaN, by numpy or by torch (a
    GPU's path, here on the CPU); the largest values alone (no difference kept) are the same. No row is
    counted shared whose query, bias, mask or keys read differ."""
    from unittest.mock import patch

    from attnwidget import inputs as inputs_module
    from attnwidget.formulas import allowed_cells
    from attnwidget.inputs import layout_of

    shares, m = [min(p, n) for p in shares], n + extra
    rng = np.random.default_rng(seed)
    ba = None if bias is None else rng.normal(size=(n, m) if bias == "2-D" else (heads, n, m))  # (every head's, each's)
    bb = None if ba is None else ba.copy()
    if bias not in (None, "same") and n > 1:
        bb[..., n // 2, 0] += 1.0  # (another text's own bias: it differs from row n // 2)
    first, second = [], []
    for at, p in enumerate(shares):
        qa, ka = rng.normal(size=(heads, n, 4)), rng.normal(size=(heads, m, 4))
        qb, kb = qa.copy(), ka.copy()
        qb[:, p:] += rng.normal(size=(heads, n - p, 4))
        kb[:, p:] += rng.normal(size=(heads, m - p, 4))
        if odd and at == 1 and p < n:
            qb[0, -1] = 1e160 if odd == "huge" else np.nan  # (a later query of one text)
        allowed = allowed_cells(n, reading == "causal", rng.random((n, m)) > 0.3 if reading == "masked" else None, m)
        first.append((qa, ka, allowed, ba, None))
        second.append((qb, kb, allowed, bb, None))
    own = SimpleNamespace(scale=0.5, softcap=None, temperature=0.8, device="cpu:0" if by == "torch" else "cpu")
    weights = lambda *layer, **more: inputs_module.Inputs.weights_of(own, *layer, **more)
    text = lambda layers: SimpleNamespace(layers=layers, each_layer=lambda: iter(layers), weights_of=weights)
    with (
        patch.object(inputs_module, "ROWS", rows),
        patch.object(inputs_module, "GPUS", ("cuda", "cpu")),
        patch.object(measures, "CHUNK", rows),  # (the largest alone, taken a few rows at a time)
        np.errstate(all="ignore"),
    ):
        shared = [measures.shared_rows(x, y) for x, y in zip(first, second)]
        got = [(d.copy(), most) for d, most in measures.differences(text(first), text(second))]
        every = measures.every_difference(text(first), text(second))
        alone_most = [most for _, most in measures.differences(text(first), text(second), lambda at: False)]
        whole = [weights(*x) - weights(*y) for x, y in zip(first, second)]
        qa, ka, allowed, *_ = first[0]
        alone, every_row = weights(*first[0], layout=layout_of(qa, ka, allowed, shares[0])), weights(*first[0])
    # no row counted shared that reads anything that differs: its query, bias row, mask row, or a key it reads
    for (qa, ka, allowed, ba, _), (qb, kb, _, bb, _), count in zip(first, second, shared):
        for i in range(count):
            reads = np.ones(m, dtype=bool) if allowed is None else allowed[i]
            assert np.array_equal(qa[:, i], qb[:, i]) and np.array_equal(ka[:, reads], kb[:, reads])
            assert ba is None or np.array_equal(ba[..., i, :], bb[..., i, :])
    if reading == "causal" and bias in (None, "same"):
        assert shared[0] == shares[0]  # (a minimal pair through a causal layer: every row before the word that differs)
    for (d, most), want, each, most_alone in zip(got, whole, every, alone_most):
        np.testing.assert_array_equal(d, want)
        np.testing.assert_array_equal(each, want)
        with np.errstate(invalid="ignore"):
            np.testing.assert_array_equal(most, np.abs(want).max(axis=(1, 2)))
        np.testing.assert_array_equal(most_alone, most)  # (the largest alone, a few rows at a time)
    # layout_of(..., p): the rows of the blocks before p's left 0 (at most two blocks' rows before p), the rest whole
    p = shares[0]
    computed = next((r for r in range(n + 1) if np.array_equal(alone[:, r:], every_row[:, r:])), n)
    assert not alone[:, :computed].any() and p - 2 * rows < computed <= p


@settings(max_examples=15, deadline=None)
@given(
    layer=st.integers(0, 2),
    temperature=st.sampled_from([0.4, 1.0, 3.0]),
    causal=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_the_heads_mean_sent_to_the_page_is_the_mean_of_the_layer_shown_heads(layer, temperature, causal, seed):
    w = model_widget(seed=seed, n=5, layers=3, heads=3)
    w.set_state({"layer": layer, "temperature": temperature, "causal": causal, "measure": "mean"})
    heads = [w.copy() for w, _ in w._inputs().weights()][layer]
    got = ask(w)
    np.testing.assert_allclose(matrix(got), heads.mean(axis=0), rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(matrix(got).sum(axis=1), 1, rtol=1e-5)  # a mean of rows that sum to 1
    assert got["key"]["layer"] == layer and "head" not in got["key"]  # the same whichever head is shown
    w.head = 1
    assert ask(w) is got
    # an exported page carries it at every layer, so its layer control goes on working
    page = w.page_state()["state"]["measure_data"]["mean"]
    stack = np.frombuffer(base64.b64decode(page["matrix"]["base64"]), dtype=np.float32).reshape(3, 5, 5)
    for at, weights in enumerate(w.copy() for w, _ in w._inputs().weights()):
        np.testing.assert_allclose(stack[at], weights.mean(axis=0), rtol=1e-6, atol=1e-7)


def test_each_measure_brings_its_own_words_to_the_page():
    """The panel's button, its sentence, its figure's title and an image's caption come with the
    measure's declaration (computed_views.py), so a new measure needs no words written in the page."""
    from attnwidget import computed_views

    for name in computed_views.MEASURES:
        spec = computed_views.VIEWS_FOR_PAGE[name]
        assert spec["label"] and spec["title"] and len(spec["about"]) > 40 and "{t}" in spec["reads"], name
        assert set(spec["follows"]) <= {"layer", "head"}


def test_a_page_saved_before_the_measures_words_travelled_gets_them_when_exported():
    """A payload saved by an earlier version (its views without their words) is drawn whole."""
    import copy
    import json
    import re

    from attnwidget import computed_views, export

    w = model_widget(n=5, layers=2)
    old = copy.deepcopy(w.page_state())
    for spec in old["state"]["_constants"]["views"].values():
        for name in ("label", "about", "title", "reads", "follows", "across_layers"):
            spec.pop(name, None)
    html = export._page(old, "light")
    state = json.loads(re.search(r'<script type="application/json"[^>]*>(.*?)</script>', html, re.S).group(1))
    views = state["state"]["_constants"]["views"]
    assert views["rollout"]["label"] == "rollout" and views["norms"] == {
        **computed_views.VIEWS_FOR_PAGE["norms"],
        **views["norms"],
    }
    assert views["mean"]["title"] == "the mean of layer {layer}'s heads"


def test_the_heads_mean_not_chosen_is_carried_at_the_layer_shown_alone():
    w = model_widget(n=5, layers=3, heads=2)
    w.set_state({"layer": 1, "measure": "rollout"})
    carried = w.page_state()["state"]["measure_data"]
    assert carried["mean"]["every"] == [] and carried["mean"]["key"]["layer"] == 1
    assert carried["mean"]["matrix"]["shape"] == [5, 5] and carried["rollout"]["matrix"]["shape"] == [3, 5, 5]


def test_a_measure_that_follows_a_choice_gives_its_matrix_at_each_value():
    from attnwidget import computed_views

    with pytest.raises(ValueError, match="every_matrix"):
        computed_views.View("spread", (), "measure_data", follows=("layer",))
