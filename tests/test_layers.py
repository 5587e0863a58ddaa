"""A model's layers in the widget, and the 2-D projection of wide values (no model needed)."""

import numpy as np
import pytest
import traitlets
from scipy.spatial import Delaunay

from attnwidget import AttentionWidget, attention
from attnwidget.formulas import principal_axes
from attnwidget.integrations.common import ModelAttention


def fake_model(n_layers=3, heads=2, n=5, d=6, seed=0):
    rng = np.random.default_rng(seed)
    layers = [tuple(rng.normal(size=(heads, n, d)) for _ in range(3)) for _ in range(n_layers)]
    return ModelAttention(
        architecture="fake",
        tokens=[f"t{i}" for i in range(n)],
        layers=layers,
        causal=True,
        scale=None,
        model_name="fake",
    )


def test_layers_switch_in_python_and_from_the_page():
    found = fake_model()
    w = AttentionWidget._from_model(found, 1, 1, {})
    assert (w.n_layers, w.layer, w.head, w.causal, w.model_name) == (3, 1, 1, True, "fake")
    q, k, v = found.layers[1]
    np.testing.assert_allclose(w.weights, attention(q[1], k[1], v[1], causal=True).weights)
    w.set_state({"layer": 2})  # the page's layer switcher
    q, k, v = found.layers[2]
    np.testing.assert_allclose(w.weights, attention(q[1], k[1], v[1], causal=True).weights)
    with pytest.raises(traitlets.TraitError, match="'layer' must be a layer index from 0 to 2"):
        w.layer = 3
    assert w.layer == 2
    with pytest.raises(ValueError, match="layer must be from 0 to 2"):
        AttentionWidget._from_model(found, 5, 0, {})


def test_two_dimensional_values_need_no_projection():
    assert AttentionWidget("I sat on the river bank").value_basis is None


@pytest.mark.parametrize("seed", range(4))
def test_projection_keeps_outputs_inside_the_hull(seed):
    rng = np.random.default_rng(seed)
    q, k, v = rng.normal(size=(8, 4)), rng.normal(size=(8, 4)), rng.normal(size=(8, 16))
    w = AttentionWidget(q=q, k=k, v=v)
    basis = w.value_basis
    assert basis.shape == (16, 2)
    np.testing.assert_allclose(basis.T @ basis, np.eye(2), atol=1e-12)  # orthonormal axes
    mean = v.mean(axis=0)
    pv, po = (v - mean) @ basis, (w.output - mean) @ basis
    assert (Delaunay(pv).find_simplex(po, tol=1e-9) >= 0).all()
    # the first axis carries the most variance
    assert np.var(pv[:, 0]) >= np.var(pv[:, 1])


def test_projection_follows_heads_and_new_values():
    rng = np.random.default_rng(1)
    w = AttentionWidget(q=rng.normal(size=(3, 6, 4)), k=rng.normal(size=(3, 6, 4)), v=rng.normal(size=(3, 6, 5)))
    assert w.value_basis.shape == (3, 5, 2)
    for h in range(3):
        np.testing.assert_allclose(np.abs(w.value_basis[h]), np.abs(principal_axes(w.v[h])))
    w.v = rng.normal(size=(3, 6, 2))
    assert w.value_basis is None


def test_a_models_layers_stay_in_the_kernel_and_a_switch_sends_the_head_shown_alone():
    from test_widget import RecordingComm

    found = fake_model(n_layers=3, heads=2, n=5, d=6)
    w = AttentionWidget._from_model(found, 0, 1, {})
    assert w.model_q.shape == (6, 5, 6) and w.model_basis.shape == (6, 6, 2)
    np.testing.assert_array_equal(w.model_k[2:4], found.layers[1][1])  # layer 1's heads, in order
    assert w.layer_shown
    assert not {"model_q", "model_k", "model_v", "model_basis", "model_masks"} & set(w.get_state())  # never on the wire
    w.comm = RecordingComm()
    w.layer = 2
    ((data, buffers),) = w.comm.sent
    assert set(data["state"]) == {"layer", "q", "k", "v", "value_basis", "layer_arrays"} and data["state"][
        "layer_arrays"
    ] == ["", 2, 1]
    # that layer's head shown, once: the page asks for another head when it shows one
    assert sum(b.nbytes for b in buffers) == (sum(a.nbytes for a in found.layers[2]) + w.value_basis.nbytes) // 2
    views = {path[0]: b for path, b in zip(data["buffer_paths"], buffers)}
    for name in ("q", "k", "v", "value_basis"):
        value = data["state"][name]
        assert value["shape"] == list(getattr(w, name).shape) and value["head"] == 1
        np.testing.assert_array_equal(np.frombuffer(views[name], dtype=value["dtype"]), getattr(w, name)[1].ravel())
    q, k, v = found.layers[2]
    np.testing.assert_allclose(w.weights, attention(q[1], k[1], v[1], causal=True).weights)
    np.testing.assert_allclose(np.abs(w.value_basis), np.abs(principal_axes(v)))
    w.comm.sent.clear()
    w.head = 0  # another head of the layer: its arrays, named
    ((data, buffers),) = w.comm.sent
    assert data["state"]["layer_arrays"] == ["", 2, 0] and data["state"]["q"]["head"] == 0
    views = {path[0]: b for path, b in zip(data["buffer_paths"], buffers)}
    np.testing.assert_array_equal(np.frombuffer(views["k"], dtype=data["state"]["k"]["dtype"]), k[0].ravel())
    # your own arrays are sent, and the page told they are not a layer's
    w.comm.sent.clear()
    w.q = w.q * 2
    ((data, buffers),) = w.comm.sent
    assert "q" in data["state"] and data["state"]["layer_shown"] is False and buffers
    w.comm.sent.clear()
    w.set_state({"layer": 1})  # the page's switcher: back to a layer's own arrays
    assert w.layer_shown and np.array_equal(w.q, found.layers[1][0])
    assert any("q" in data["state"] for data, _ in w.comm.sent)
    # exported pages carry every layer once: the model's source is only its tokens (rows and columns)
    payload = w.page_state()
    assert (
        payload["version"] == 1
        and set(payload["sources"]["model"]) == {"tokens", "key_tokens"}
        and "q" not in payload["state"]
    )
    assert payload["state"]["model_q"]["shape"] == [6, 5, 6]


def test_a_refused_layer_switch_sends_nothing_and_changes_nothing():
    from test_widget import RecordingComm

    found = fake_model(n_layers=3, heads=2, n=5, d=6)
    w = AttentionWidget._from_model(found, 0, 1, {})
    assert np.shares_memory(w._sources.layer("", 1)["q"], w.model_q)  # the layers are views, not a second copy
    w.layer = 1
    w.comm = RecordingComm()
    with pytest.raises(traitlets.TraitError), w.hold_trait_notifications():
        w.layer, w.focus = 0, 99  # refused whole
    assert not w.comm.sent
    w.temperature = 2.0
    assert w.layer_shown and np.array_equal(w.q, found.layers[1][0])
    assert all("q" not in data["state"] for data, _ in w.comm.sent)


def test_summaries_and_a_bias_follow_your_own_arrays_on_a_model_widget():
    found = fake_model(n_layers=3, heads=2, n=5, d=6)
    w = AttentionWidget._from_model(found, 0, 0, {})
    rng = np.random.default_rng(1)
    w.set_vectors(
        tokens=["a", "b"], q=rng.normal(size=(2, 2, 3)), k=rng.normal(size=(2, 2, 3)), v=rng.normal(size=(2, 2, 3))
    )
    assert w.head_summary()["self"].shape == (1, 2)  # your arrays: one row, not the model's layers
    w.bias = np.zeros((2, 2, 2))
    w.set_vectors(tokens=["a", "b"], q=rng.normal(size=(2, 3)), k=rng.normal(size=(2, 3)), v=rng.normal(size=(2, 3)))
    assert w.bias is None  # it was for two heads


def test_what_a_switch_brings_in_is_the_widgets_own_read_only_copy():
    from test_cross import fake_seq2seq

    w = AttentionWidget(["a river bank", "the money bank"])
    w.sentence_index = 1
    assert not w.q.flags.writeable and not np.shares_memory(w.q, w._sources.examples[1].q)
    blocks = fake_seq2seq()
    m = AttentionWidget._from_model(blocks, 0, 0, {}, "cross")
    m.block = "encoder"
    assert not m.bias.flags.writeable and not np.shares_memory(m.bias, blocks["encoder"].bias)


def test_a_refused_block_switch_leaves_the_layers_views_of_the_stacks():
    from test_cross import fake_seq2seq

    w = AttentionWidget._from_model(fake_seq2seq(), 0, 0, {}, "cross")
    with pytest.raises(traitlets.TraitError), w.hold_trait_notifications():
        w.block, w.focus = "encoder", 99  # refused whole
    w.layer = 1
    assert w.block == "cross" and np.shares_memory(w.q, w.model_q)


def test_a_models_widget_sends_no_whole_layer_even_while_it_is_made(monkeypatch):
    sent = []
    monkeypatch.setattr(
        AttentionWidget,
        "_send",
        lambda self, msg, buffers=None: sent.append(sum(memoryview(b).nbytes for b in buffers or [])),
    )
    found = fake_model(n_layers=3, heads=4, n=50, d=6)
    w = AttentionWidget._from_model(found, 1, 2, {})
    head = sum(getattr(w, n)[2].nbytes for n in ("q", "k", "v", "value_basis"))
    assert w.layer_arrays == ["", 1, 2] and head <= sum(sent) < 2 * head  # the head shown, once


def test_a_bias_set_on_a_models_widget_reaches_the_page_that_keeps_its_head():
    from test_widget import RecordingComm

    from attnwidget.widget import _on_page_message

    w = AttentionWidget._from_model(fake_model(n_layers=2, heads=2, n=5, d=6), 0, 0, {})
    _on_page_message(w, {"kind": "holding", "layers": [["", 0, 0]]}, [])
    w.comm = RecordingComm()
    w.bias = np.ones((2, 5, 5))
    ((data, buffers),) = w.comm.sent
    assert "bias" in data["state"] and buffers  # the whole bias: the page's kept heads hold none


def test_a_head_the_page_keeps_is_not_sent_again_and_the_page_is_told_whose_arrays_it_has():
    from test_widget import RecordingComm

    from attnwidget.widget import _on_page_message

    found = fake_model(n_layers=4, heads=2, n=5, d=6)
    w = AttentionWidget._from_model(found, 0, 0, {})
    assert w.layer_arrays == ["", 0, 0]
    w.comm = RecordingComm()
    _on_page_message(
        w,
        {"kind": "holding", "layers": [["", 0, 0], ["", 2, 0], ["", 2, 1], "junk", ["", "x", 0], ["", 1], [1, 1, 1]]},
        [],
    )
    assert w._page_holds == {"": {("", 0, 0), ("", 2, 0), ("", 2, 1)}}  # what cannot be read is left out
    w.comm.sent.clear()  # (the new view is told whose arrays the page holds)
    w.layer = 2  # kept by the page: its name, no arrays
    ((data, buffers),) = w.comm.sent
    assert (
        data["state"]["layer_arrays"] == ["", 2, 0]
        and not {"q", "k", "v", "value_basis"} & set(data["state"])
        and not buffers
    )
    np.testing.assert_array_equal(w.q, found.layers[2][0])  # Python's own are that layer's all the same
    w.comm.sent.clear()
    w.head = 1  # kept too
    assert w.comm.sent[0][0]["state"]["layer_arrays"] == ["", 2, 1] and not w.comm.sent[0][1]
    w.comm.sent.clear()
    w.layer = 3  # not kept: sent, named
    ((data, buffers),) = w.comm.sent
    assert data["state"]["layer_arrays"] == ["", 3, 1] and {"q", "k", "v"} <= set(data["state"]) and buffers
    _on_page_message(w, {"kind": "holding", "layers": []}, [])  # a new page keeps nothing yet
    w.comm.sent.clear()
    w.layer = 2
    assert {"q", "k", "v"} <= set(w.comm.sent[0][0]["state"])
    w.q = w.q * 2  # your own arrays: no layer's
    assert w.layer_arrays is None


def test_a_head_is_sent_unless_every_view_of_the_widget_keeps_it():
    """Two views of one widget keep heads of their own (each says which, by its own name): a head
    is left out of a message only when every view keeps it, and a closed view's say is dropped."""
    from test_widget import RecordingComm

    from attnwidget.widget import _on_page_message

    w = AttentionWidget._from_model(fake_model(n_layers=4, heads=2, n=5, d=6), 0, 0, {})
    w.comm = RecordingComm()
    _on_page_message(w, {"kind": "holding", "view": "a", "layers": [["", 0, 0], ["", 2, 0]]}, [])
    _on_page_message(w, {"kind": "holding", "view": "b", "layers": [["", 0, 0]]}, [])
    w.layer = 2  # view b has not got it: sent
    assert {"q", "k", "v"} <= set(w.comm.sent[-1][0]["state"])
    _on_page_message(w, {"kind": "holding", "view": "b", "layers": None}, [])  # view b closed
    w.comm.sent.clear()
    w.layer = 0
    w.layer = 2  # kept by the only view left: its name alone
    assert w.comm.sent[-1][0]["state"]["layer_arrays"] == ["", 2, 0] and not {"q", "k"} & set(
        w.comm.sent[-1][0]["state"]
    )


def test_a_new_view_is_sent_the_head_shown_whole():
    """A view opened later may find another head's arrays in the page's model under the name of the
    head shown (a switch to a head every other view kept sends its name alone): told of a new view,
    the kernel sends the head shown again where so, then says whose arrays the model holds."""
    from test_widget import RecordingComm

    from attnwidget.widget import _on_page_message

    w = AttentionWidget._from_model(fake_model(n_layers=3, heads=2, n=5, d=6), 0, 0, {})
    w.comm = RecordingComm()
    _on_page_message(w, {"kind": "holding", "view": "a", "layers": []}, [])
    w.head = 1  # not kept: sent whole, so the page's model holds head 1's arrays
    _on_page_message(w, {"kind": "holding", "view": "a", "layers": [["", 0, 0], ["", 0, 1]]}, [])
    w.head = 0  # kept by view a: its name alone; the model's arrays are still head 1's
    w.comm.sent.clear()
    _on_page_message(w, {"kind": "holding", "view": "b", "layers": []}, [])  # a view opened now
    (data, buffers), (said, _) = w.comm.sent
    assert data["state"]["layer_arrays"] == ["", 0, 0] and {"q", "k", "v"} <= set(data["state"]) and buffers
    assert said["content"] == {"kind": "heads", "arrays": ["", 0, 0]}  # then: they are head 0's
    w.comm.sent.clear()
    _on_page_message(w, {"kind": "holding", "view": "b", "layers": [["", 0, 0]]}, [])  # known now: nothing more
    assert w.comm.sent == []
    _on_page_message(w, {"kind": "holding", "view": "c", "layers": []}, [])  # another: the arrays are head 0's
    ((said, _),) = w.comm.sent
    assert said["content"] == {"kind": "heads", "arrays": ["", 0, 0]}


def test_ipywidgets_embedding_reads_a_models_widget_one_head_at_a_time():
    """ipywidgets' own embedding (embed_data, embed_minimal_html) asks get_state with drop_defaults."""
    from ipywidgets.embed import embed_data

    w = AttentionWidget._from_model(fake_model(n_layers=2, heads=2, n=5, d=6), 1, 1, {})
    state = embed_data(views=[w])["manager_state"]["state"][w.model_id]["state"]
    assert state["layer_arrays"] == ["", 1, 1] and state["q"]["head"] == 1  # the head shown, alone
