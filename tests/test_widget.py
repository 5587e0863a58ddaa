"""The widget's Python API: constructor, synced traits, validation, derived properties."""

import numpy as np
import pytest
import traitlets

from attnwidget import AttentionWidget, attention


def qkv(n=4, dk=3, dv=2, seed=0):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(n, dk)), rng.normal(size=(n, dk)), rng.normal(size=(n, dv))


def test_defaults():
    w = AttentionWidget()
    assert (w.temperature, w.focus, w.stage, w.causal, w.scale) == (1.0, 0, "tokens", False, None)
    assert AttentionWidget.temperature_range == (0.1, 5.0)
    assert w.stages == ("tokens", "qk", "scores", "weights", "blend")


def test_custom_arrays_and_derived_properties_follow_the_traits():
    q, k, v = qkv()
    w = AttentionWidget(
        tokens=list("abcd"), q=q, k=k, v=v, temperature=0.5, focus=2, stage="weights", causal=True, scale=2.0
    )
    ref = attention(q, k, v, temperature=0.5, causal=True, scale=2.0)
    np.testing.assert_allclose(w.weights, ref.weights)
    np.testing.assert_allclose(w.output, ref.output)
    w.temperature = 2.0
    w.causal = False
    np.testing.assert_allclose(w.weights, attention(q, k, v, temperature=2.0, scale=2.0).weights)
    w.scale = None
    np.testing.assert_allclose(w.scores, q @ k.T / np.sqrt(3))
    assert w.output_spread == pytest.approx(attention(q, k, v, temperature=2.0).output_spread)


def test_tokens_default_to_indices():
    q, k, v = qkv()
    assert AttentionWidget(q=q, k=k, v=v).tokens == ["0", "1", "2", "3"]


def test_derived_arrays_are_read_only_and_inputs_are_copied():
    q, k, v = qkv()
    w = AttentionWidget(q=q, k=k, v=v)
    with pytest.raises(ValueError):
        w.weights[0, 0] = 1
    q[0, 0] = 99.0  # editing the caller's array afterwards does not reach the widget
    assert w.q[0, 0] != 99.0


def test_mixing_a_sentence_with_arrays_is_explained():
    q, k, v = qkv()
    with pytest.raises(TypeError, match="either a sentence or tokens/q/k/v"):
        AttentionWidget("a river bank", q=q, k=k, v=v)
    with pytest.raises(TypeError, match="missing k, v"):
        AttentionWidget(q=q)


def test_unknown_keyword_is_an_error():
    with pytest.raises(TypeError, match="temprature"):
        AttentionWidget(temprature=2)


@pytest.mark.parametrize(
    "name, value, message",
    [
        ("temperature", 0.0, "finite number > 0"),
        ("temperature", -1.0, "finite number > 0"),
        ("temperature", float("nan"), "finite number > 0"),
        ("temperature", float("inf"), "finite number > 0"),
        ("focus", 6, "from 0 to 5"),
        ("focus", -1, "from 0 to 5"),
        ("stage", "softmax", "one of tokens, qk, scores, weights, blend"),
        ("scale", float("nan"), "finite"),
        ("q", np.ones((6, 3)), "same width"),
        ("v", np.ones((5, 2)), "agree on the number of tokens"),
        ("q", np.ones(4), "2-D"),
        ("k", np.zeros((0, 4)), "empty"),
        ("v", [[1, np.nan]] * 6, "finite"),
        ("v", np.ones((6, 2)) * 1j, "complex"),
        ("v", "river", "numbers"),
        ("tokens", ["a", "b"], "agree on the number of tokens"),
    ],
)
def test_bad_values_are_refused_with_a_clear_message_and_state_is_kept(name, value, message):
    w = AttentionWidget()
    before = {n: getattr(w, n) for n in ("tokens", "q", "k", "v", "temperature", "focus", "stage", "scale")}
    with pytest.raises(traitlets.TraitError, match=message):
        setattr(w, name, value)
    for n, old in before.items():
        np.testing.assert_equal(getattr(w, n), old)
    assert round(w.weights[5, 4], 3) == 0.556


def test_set_vectors_changes_the_number_of_tokens_atomically():
    w = AttentionWidget(focus=5)
    q, k, v = qkv(n=3)
    w.set_vectors(tokens=["x", "y", "z"], q=q, k=k, v=v)
    assert w.tokens == ["x", "y", "z"] and w.focus == 2 and w.weights.shape == (3, 3)
    with pytest.raises(traitlets.TraitError):
        w.set_vectors(tokens=["a", "b"], q=np.ones((2, 2)), k=np.ones((2, 3)), v=np.ones((2, 2)))
    assert w.tokens == ["x", "y", "z"] and w.q.shape == (3, 3)


def test_observers_see_clicks_as_trait_changes():
    w = AttentionWidget()
    seen = []
    w.observe(lambda ch: seen.append((ch["name"], ch["new"])), names=["focus", "temperature", "stage"])
    # what the page sends when the user clicks "bank", drags the slider, and steps on
    w.set_state({"focus": 5, "temperature": 0.2, "stage": "weights"})
    assert ("focus", 5) in seen and ("temperature", 0.2) in seen and ("stage", "weights") in seen
    assert round(w.weights[w.focus][4], 3) == 0.951


def test_arrays_travel_as_binary_buffers():
    w = AttentionWidget()
    from ipywidgets.widgets.widget import _remove_buffers

    state, buffer_paths, buffers = _remove_buffers(w.get_state())
    assert ["q", "view"] in buffer_paths and ["v", "view"] in buffer_paths
    assert state["q"]["shape"] == [6, 4] and state["q"]["dtype"] in ("float32", "float64")
    q_bytes = buffers[buffer_paths.index(["q", "view"])]
    assert np.array_equal(np.frombuffer(q_bytes, dtype=state["q"]["dtype"]).reshape(6, 4), w.q)  # the very numbers


def test_a_refused_value_from_the_page_resyncs_the_page(monkeypatch):
    w = AttentionWidget("I sat on the river bank")
    sent = []
    monkeypatch.setattr(w, "send_state", lambda keys=None: sent.append(keys))
    w.set_state({"focus": 2, "temperature": -3.0})  # one message, one bad value
    assert w.focus == 0 and w.temperature == 1.0  # nothing applied: the message is atomic
    assert sent and set(sent[-1]) == {"focus", "temperature"}
    w.set_state({"focus": 2})
    assert w.focus == 2


class RecordingComm:
    """Stands in for the kernel's comm: records what the widget sends to the page."""

    kernel = object()
    comm_id = "test"

    def __init__(self):
        self.sent = []

    def send(self, data=None, buffers=None, **kwargs):
        self.sent.append((data, buffers))

    def on_msg(self, callback):
        pass

    def close(self, *args, **kwargs):
        pass


def test_replacing_all_vectors_is_one_message_and_a_temperature_is_a_few_bytes():
    w = AttentionWidget("I sat on the river bank")
    w.comm = RecordingComm()
    q, k, v = qkv(n=3)
    w.set_vectors(tokens=["x", "y", "z"], q=q, k=k, v=v)
    assert len(w.comm.sent) == 1
    state = w.comm.sent[0][0]["state"]
    assert {"tokens", "q", "k", "v"} <= set(state)
    w.comm.sent.clear()
    w.temperature = 0.5
    ((data, buffers),) = w.comm.sent
    assert data["state"] == {"temperature": 0.5} and not buffers
    w.comm.sent.clear()
    with pytest.raises(traitlets.TraitError):
        w.set_vectors(tokens=["a"], q=np.ones((1, 3)), k=np.ones((1, 2)), v=np.ones((1, 2)))
    assert w.comm.sent == [] and w.tokens == ["x", "y", "z"]


def test_switching_to_a_sentence_without_embeddings_drops_them():
    w = AttentionWidget(["She sat by the river bank", "I sat on the river bank"])
    assert w.x is None
    w.sentence_index = 1
    w.residual = True
    w.sentence_index = 0  # the lab sentence has no embeddings
    assert w.x is None and w.residual is False
    with pytest.raises(traitlets.TraitError, match="x="):
        w.residual = True


def test_observers_never_see_stale_numbers_during_a_replacement():
    w = AttentionWidget("I sat on the river bank and read")
    seen = []
    w.observe(lambda ch: seen.append((len(ch["new"]), w.weights.shape)), names="tokens")
    q, k, v = qkv(n=3)
    w.set_vectors(tokens=["x", "y", "z"], q=q, k=k, v=v)
    assert seen == [(3, (3, 3))]


def test_derived_traits_are_read_only():
    w = AttentionWidget(["a river bank", "a money bank"])
    for name, value in [("value_basis", np.ones((2, 2))), ("n_layers", 3), ("sentences", ["x"]), ("model_name", "m")]:
        with pytest.raises(traitlets.TraitError, match="read-only"):
            setattr(w, name, value)
    assert w.sentences == ["a river bank", "a money bank"]


def test_a_malformed_array_from_the_page_is_refused(monkeypatch):
    w = AttentionWidget("I sat on the river bank")
    sent = []
    monkeypatch.setattr(w, "send_state", lambda keys=None: sent.append(keys))
    before = w.q
    w.set_state({"q": {"shape": [5, 7], "dtype": "float32", "view": memoryview(b"\0" * 12)}})
    assert w.q is before and sent == [["q"]]
