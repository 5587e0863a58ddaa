"""Nothing from outside leaves the widget inconsistent: page messages are applied whole or not
at all, user observers cannot stop the widget's own bookkeeping, closed widgets are freed,
and inputs that would mean something else are refused. Hypothesis hunts for new cases."""

import gc
import logging
import weakref

import numpy as np
import pytest
import traitlets
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ipywidgets.widgets.widget import _remove_buffers
from test_layers import fake_model
from test_widget import RecordingComm

from attnwidget import AttentionWidget, attention
from attnwidget.formulas import principal_axes


def snapshot(w):
    """Every trait value, by identity (arrays are stored as new objects on every change); the
    logger and the queue of keys to send are bookkeeping made on first use, not state."""
    return {k: v for k, v in w._trait_values.items() if k not in ("log", "_states_to_send")}


def same(a, b):
    def equal(x, y):
        return x is y or (not isinstance(x, np.ndarray) and not isinstance(y, np.ndarray) and x == y)

    return a.keys() == b.keys() and all(equal(a[k], b[k]) for k in a)


def array_msg(a, dtype="float32"):
    with np.errstate(over="ignore"):  # 1e160 in float32 is inf: a value the page may well send
        a = np.ascontiguousarray(a, dtype=dtype)
    return {"shape": list(a.shape), "dtype": dtype, "view": memoryview(a.reshape(-1))}


def check_invariants(w):
    n = len(w.tokens)
    assert 0 <= w.focus < n
    assert w.cell is None or (0 <= w.cell[0] < n and 0 <= w.cell[1] < n)
    assert 0 <= w.head < w.n_heads
    assert w.q.shape[:-1] == w.k.shape[:-1] == w.v.shape[:-1] and w.q.shape[-2] == n and w.q.shape[-1] == w.k.shape[-1]
    assert not w.residual or w.x is not None
    assert w.x is None or w.x.shape == (n, w.v.shape[-1])
    assert w.mask is None or w.mask.shape == (n, n)
    assert w.cell is None or w.cell[0] == w.focus  # the cell shown is in the focused row
    expected = principal_axes(w.v)
    assert (w.value_basis is None) == (expected is None)
    if expected is not None:
        assert w.value_basis.shape == expected.shape
    assert np.isfinite(w.weights).all() and np.isfinite(w.output).all()
    if w.n_layers:
        assert 0 <= w.layer < w.n_layers


# --- 1. the page gets the numbers Python holds ---


def test_float32_exact_arrays_travel_as_float32_and_others_exactly_as_float64():
    rng = np.random.default_rng(0)
    exact = rng.normal(size=(2, 5, 4)).astype(np.float32)
    w = AttentionWidget(q=exact, k=exact, v=exact[..., :2])
    state, paths, buffers = _remove_buffers(w.get_state())
    assert state["q"]["dtype"] == "float32" and memoryview(buffers[paths.index(["q", "view"])]).nbytes == exact.nbytes
    w.set_vectors(q=exact.astype(float) + 1e-9)  # not representable in float32: float32 would change the numbers
    state, paths, buffers = _remove_buffers(w.get_state())
    assert state["q"]["dtype"] == "float64"
    sent = np.frombuffer(buffers[paths.index(["q", "view"])], dtype=np.float64).reshape(state["q"]["shape"])
    assert np.array_equal(sent, w.q)


# --- 2. messages from the page are applied whole or not at all ---


def test_a_bad_array_refuses_the_whole_message_with_its_focus(monkeypatch):
    w = AttentionWidget()
    sent = []
    monkeypatch.setattr(w, "send_state", lambda key=None: sent.append(key))
    before = snapshot(w)
    for junk in ("junk", 3, [1, 2], {"shape": [6, 4]}, {"shape": [6, 4], "dtype": "float32", "view": b"\0" * 3}):
        w.set_state({"q": junk, "focus": 99})
        assert same(snapshot(w), before) and w.focus == 0
    assert set(sent[-1]) == {"q", "focus"}


@pytest.mark.parametrize(
    "key, value",
    [
        ("n_layers", 5),
        ("sentences", ["x"]),
        ("model_name", "m"),
        ("value_basis", None),
        ("_esm", "export default {}"),
        ("_css", ""),
        ("_model_name", "X"),
        ("nonsense", 1),
    ],
)
def test_read_only_private_and_unknown_keys_are_refused(monkeypatch, key, value):
    w = AttentionWidget(["a river bank", "a money bank"])
    sent = []
    monkeypatch.setattr(w, "send_state", lambda key=None: sent.append(key))
    before = snapshot(w)
    w.set_state({key: value, "focus": 2})
    assert same(snapshot(w), before)
    # the page is put back on Python's state for the known keys it sent (unknown ones cannot be sent)
    assert sent == [[k for k in (key, "focus") if k in w.keys]]


def test_a_complex_array_from_the_page_is_refused():
    w = AttentionWidget()
    before = snapshot(w)
    w.set_state({"q": array_msg(w.q, "complex128")})
    assert same(snapshot(w), before)


def test_an_accepted_message_is_applied_whole_and_not_echoed():
    w = AttentionWidget()
    w.comm = RecordingComm()
    w.set_state({"focus": 5, "temperature": 0.2, "stage": "weights"})
    assert (w.focus, w.temperature, w.stage) == (5, 0.2, "weights")
    # the page already shows what it sent: only the protocol's acknowledgement goes back
    assert [m["method"] for m, _ in w.comm.sent] == ["echo_update"]


def updates(w):
    return [m["state"] for m, _ in w.comm.sent if m["method"] == "update"]


def test_a_click_that_crosses_a_change_from_python_ends_on_the_same_value():
    w = AttentionWidget()
    w.comm = RecordingComm()
    w.focus = 4  # on its way to the page
    w.set_state({"focus": 2})  # a click sent before the page saw 4
    assert w.focus == 2
    echo = [m["state"] for m, _ in w.comm.sent if m["method"] == "echo_update"]
    assert echo == [{"focus": 2}]  # the page learns that Python took its 2


def test_a_page_value_the_widget_settles_otherwise_is_sent_back():
    w = AttentionWidget(stage="weights")
    w.comm = RecordingComm()
    w.set_state({"focus": 3, "cell": [1, 0]})  # a cell outside the focused row
    assert (w.focus, w.cell) == (3, None)
    assert {"cell": None} in updates(w)


def test_set_trait_is_a_whole_change_too():
    rng = np.random.default_rng(0)
    q, k, v = rng.normal(size=(3, 2)), rng.normal(size=(3, 2)), rng.normal(size=(3, 2))
    w = AttentionWidget(tokens=list("abc"), q=q, k=k, v=v, x=np.ones((3, 2)), residual=True, cell=(1, 0))
    w.set_trait("x", None)
    assert w.residual is False
    w.set_trait("focus", 2)
    assert w.cell is None
    w.set_trait("v", np.ones((3, 5)))
    assert w.value_basis is not None
    s = AttentionWidget(["a b c", "d e f g"])
    s.set_trait("sentence_index", 1)
    assert s.tokens == ["d", "e", "f", "g"]


def test_observers_are_told_changes_in_order():
    w = AttentionWidget()
    w.focus = 5
    seen = []
    w.observe(lambda c: seen.append(c.new), names=["focus"])
    w.observe(lambda c: setattr(w, "focus", 0), names=["tokens"])
    w.set_vectors(tokens=list("abc"), q=np.ones((3, 2)), k=np.ones((3, 2)), v=np.ones((3, 2)))
    assert w.focus == 0 and seen[-1] == 0


names = [
    "tokens",
    "q",
    "k",
    "v",
    "x",
    "mask",
    "residual",
    "temperature",
    "focus",
    "stage",
    "causal",
    "scale",
    "head",
    "cell",
    "sentence_index",
    "value_axes",
    "layer",
    "n_layers",
    "sentences",
    "value_basis",
    "model_name",
    "_esm",
    "junk",
    "layout",
]
junk_values = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-5, 12),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=5),
    st.lists(st.one_of(st.integers(-2, 8), st.text(max_size=3)), max_size=7),
    st.builds(
        lambda shape, dtype, n: {"shape": shape, "dtype": dtype, "view": memoryview(b"\x3f" * n)},
        st.lists(st.integers(0, 7), max_size=4),
        st.sampled_from(["float32", "float64", "complex64", "int8", "<f4", "bogus"]),
        st.integers(0, 200),
    ),
    st.fixed_dictionaries({"shape": st.just([6, 2])}),
)


@st.composite
def plausible(draw, w):
    """Values of the right kind for the widget as it stands, now and then slightly off."""
    n, heads = len(w.tokens), w.n_heads
    rows = draw(st.sampled_from([n, n, n - 1 if n > 1 else n, n + 1]))
    widths = {"q": w.q.shape[-1], "k": w.k.shape[-1], "v": w.v.shape[-1], "x": w.v.shape[-1]}
    name = draw(
        st.sampled_from(
            ["q", "k", "v", "x", "focus", "cell", "head", "layer", "sentence_index", "temperature", "tokens"]
        )
    )
    if name in widths:
        shape = (rows, widths[name]) if name == "x" or heads == 1 else (heads, rows, widths[name])
        scale = draw(st.sampled_from([1.0, 1e-30, 1e30, 1e160]))
        a = np.random.default_rng(draw(st.integers(0, 9))).normal(size=shape) * scale
        return name, array_msg(a, draw(st.sampled_from(["float32", "float64"])))
    if name == "tokens":
        return name, [f"t{i}" for i in range(rows)]
    if name == "cell":
        return name, draw(st.one_of(st.none(), st.tuples(st.integers(-1, n), st.integers(-1, n)).map(list)))
    if name == "temperature":
        return name, draw(st.floats(1e-300, 1e300))
    return name, draw(st.integers(-1, 6))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_fuzzed_page_messages_leave_the_widget_consistent(data):
    kind = data.draw(st.sampled_from(["lab", "sentences", "model", "custom"]))
    if kind == "lab":
        w = AttentionWidget()
    elif kind == "sentences":
        w = AttentionWidget(["I sat on the river bank and read", "I put my money in the bank"])
    elif kind == "model":
        w = AttentionWidget._from_model(fake_model(n_layers=2, heads=2, n=4, d=3), 0, 1, {})
    else:
        rng = np.random.default_rng(0)
        w = AttentionWidget(
            q=rng.normal(size=(3, 5, 4)), k=rng.normal(size=(3, 5, 4)), v=rng.normal(size=(3, 5, 3)), x=None, head=2
        )
    w.comm = RecordingComm()
    for _ in range(data.draw(st.integers(1, 4))):
        msg = dict(
            data.draw(
                st.lists(
                    st.one_of(plausible(w), st.tuples(st.sampled_from(names), junk_values)), min_size=1, max_size=5
                )
            )
        )
        before = snapshot(w)
        w.comm.sent.clear()
        w.set_state(msg)  # never raises
        check_invariants(w)
        if not same(snapshot(w), before):  # applied: every key sent was a writable trait and holds its new value
            assert all(
                k in w.keys and not k.startswith("_") and not w.traits()[k].read_only and k != "layout" for k in msg
            )


def test_a_message_through_the_comm_with_buffers_is_applied():
    w = AttentionWidget()
    q = np.asarray(w.q) * 2
    state, paths, buffers = _remove_buffers({"q": array_msg(q, "float64"), "focus": 3})
    w._handle_msg(
        {"content": {"data": {"method": "update", "state": state, "buffer_paths": paths}}, "buffers": buffers}
    )
    assert w.focus == 3 and np.array_equal(w.q, q)


# --- 3. the widget's own state does not depend on user code ---


def raising(change):
    raise RuntimeError("a bug in the user's observer")


def test_a_raising_observer_cannot_leave_derived_state_stale():
    w = AttentionWidget("I sat on the river bank and read")  # has x
    w.residual = True
    w.comm = RecordingComm()
    w.observe(raising, names="tokens")
    rng = np.random.default_rng(0)
    with pytest.raises(RuntimeError, match="user's observer"):
        w.set_vectors(
            tokens=["a", "b", "c"], q=rng.normal(size=(3, 4)), k=rng.normal(size=(3, 4)), v=rng.normal(size=(3, 5))
        )
    assert w.x is None and w.residual is False
    np.testing.assert_allclose(np.abs(w.value_basis), np.abs(principal_axes(w.v)))
    check_invariants(w)
    ((data, buffers),) = w.comm.sent  # one complete message
    assert {"tokens", "q", "k", "v", "x", "residual", "value_basis"} <= set(data["state"])


def test_a_raising_observer_on_a_page_change_is_logged_as_the_users_error(caplog):
    w = AttentionWidget()
    w.observe(raising, names="focus")
    with caplog.at_level(logging.WARNING):
        w.set_state({"focus": 4})
    assert w.focus == 4
    text = caplog.text
    assert "user's observer" in text and "refused" not in text


def test_huge_values_are_projected_finitely():
    rng = np.random.default_rng(0)
    w = AttentionWidget(q=rng.normal(size=(4, 3)), k=rng.normal(size=(4, 3)), v=rng.normal(size=(4, 3)))
    w.v = rng.normal(size=(4, 3)) * 1e160
    assert np.isfinite(w.value_basis).all()
    np.testing.assert_allclose(w.value_basis.T @ w.value_basis, np.eye(2), atol=1e-9)
    assert np.isfinite(w.output_spread) and np.isfinite(w.sense_resolved).all()


def test_scores_that_would_overflow_are_refused_and_the_state_kept():
    w = AttentionWidget()
    before = snapshot(w)
    with pytest.raises(traitlets.TraitError, match="overflow"):
        w.q = np.full((6, 4), 1e299) * [1, 1, 1, 10]
    with pytest.raises(traitlets.TraitError, match="overflow"):
        w.set_vectors(q=np.full((6, 4), 1e160), k=np.full((6, 4), 1e160))
    assert same(snapshot(w), before)


def test_switching_layer_after_other_vectors_restores_the_models_tokens():
    found = fake_model(n_layers=3, heads=2, n=5, d=4)
    w = AttentionWidget._from_model(found, 0, 0, {})
    rng = np.random.default_rng(0)
    w.set_vectors(
        tokens=["a", "b"], q=rng.normal(size=(2, 2, 3)), k=rng.normal(size=(2, 2, 3)), v=rng.normal(size=(2, 2, 3))
    )
    w.set_state({"layer": 2})
    assert w.layer == 2 and w.tokens == found.tokens
    q, k, v = found.layers[2]
    np.testing.assert_allclose(w.weights, attention(q[0], k[0], v[0], causal=True).weights)
    check_invariants(w)


def test_a_mask_closes_cells_and_goes_when_the_tokens_change():
    w = AttentionWidget("I sat on the river bank", mask=~np.eye(6, dtype=bool), stage="weights")
    ref = attention(w.q, w.k, w.v, mask=~np.eye(6, dtype=bool))
    np.testing.assert_allclose(w.weights, ref.weights)
    assert (np.diag(w.weights) == 0).all()
    for bad in (np.ones((3, 3)), np.full((6, 6), 0.5), np.ones(6)):
        with pytest.raises(traitlets.TraitError, match="mask"):
            w.mask = bad
    state, paths, buffers = _remove_buffers(w.get_state())
    assert (
        state["mask"]["dtype"] == "uint8"
        and bytes(buffers[paths.index(["mask", "view"])]) == (~np.eye(6, dtype=bool)).astype(np.uint8).tobytes()
    )
    w.set_vectors(tokens=["a", "b"], q=np.ones((2, 2)), k=np.ones((2, 2)), v=np.ones((2, 2)))
    assert w.mask is None
    check_invariants(w)


def test_the_cell_shown_is_always_in_the_focused_row():
    w = AttentionWidget(stage="weights", cell=(5, 4))
    assert w.focus == 5
    w.focus = 2  # another reader: the cell goes
    assert w.cell is None
    w.cell = (3, 1)  # a cell: its reader is focused
    assert w.focus == 3
    w.set_state({"focus": 1})
    assert w.cell is None
    with pytest.raises(ValueError, match="focused row"):
        AttentionWidget(stage="weights", cell=(5, 4), focus=2)


# --- 4. resources are released ---


def test_a_closed_widget_is_freed():
    rng = np.random.default_rng(0)
    q = rng.normal(size=(64, 8))
    w = AttentionWidget(q=q, k=q, v=q[:, :2])
    _ = w.weights
    ref = weakref.ref(w)
    w.close()
    del w
    gc.collect()
    assert ref() is None


def test_memory_stays_flat_when_long_widgets_are_made_and_closed():
    import tracemalloc

    rng = np.random.default_rng(0)
    q = rng.normal(size=(2048, 64)).astype(np.float32)
    tracemalloc.start()
    try:
        after = []
        for _ in range(5):
            w = AttentionWidget(q=q, k=q, v=q[:, :2])
            _ = w.weights  # 2048² numbers: 32 MB of scores and as much of weights
            w.close()
            del w
            gc.collect()
            after.append(tracemalloc.get_traced_memory()[0])
    finally:
        tracemalloc.stop()
    assert after[-1] - after[0] < 2e6, [f"{a / 1e6:.1f} MB" for a in after]


# --- 7. inputs that would mean something else ---


@pytest.mark.parametrize(
    "make, message",
    [
        (
            lambda: AttentionWidget(tokens="abc", q=np.ones((3, 2)), k=np.ones((3, 2)), v=np.ones((3, 2))),
            "one string per token",
        ),
        (lambda: AttentionWidget({"a river bank": 1, "a money bank": 2}), "a sentence"),
        (lambda: AttentionWidget(123), "a sentence"),
        (lambda: AttentionWidget(["a river bank", 7]), "a sentence"),
    ],
)
def test_inputs_that_would_mean_something_else_are_refused(make, message):
    with pytest.raises((TypeError, traitlets.TraitError), match=message):
        make()


def test_set_vectors_refuses_a_string_of_tokens():
    w = AttentionWidget(tokens=["a", "b", "c"], q=np.ones((3, 2)), k=np.ones((3, 2)), v=np.ones((3, 2)))
    with pytest.raises(traitlets.TraitError, match="one string per token"):
        w.set_vectors(tokens="xyz")
    with pytest.raises(traitlets.TraitError, match="one string per token"):
        w.tokens = "xyz"
    assert w.tokens == ["a", "b", "c"]


@pytest.mark.parametrize("mask", [np.full((3, 3), np.nan), np.full((3, 3), 0.5), np.full((3, 3), 2), [["yes"] * 3] * 3])
def test_a_mask_that_is_not_boolean_is_refused(mask):
    with pytest.raises(ValueError, match="mask"):
        attention(np.ones((3, 2)), np.ones((3, 2)), np.ones((3, 2)), mask=mask)


def test_a_mask_of_zeros_and_ones_is_taken_as_booleans():
    mask = np.tri(3)  # floats, exactly 0 and 1
    a = attention(np.ones((3, 2)), np.ones((3, 2)), np.eye(3)[:, :2], mask=mask)
    np.testing.assert_allclose(
        a.weights, attention(np.ones((3, 2)), np.ones((3, 2)), np.eye(3)[:, :2], causal=True).weights
    )


@given(st.floats(1e100, 1e300), st.integers(0, 5))
@settings(max_examples=50, deadline=None)
def test_metrics_stay_finite_for_huge_values(size, seed):
    rng = np.random.default_rng(seed)
    v = rng.normal(size=(5, 3)) * size
    a = attention(rng.normal(size=(5, 2)), rng.normal(size=(5, 2)), v)
    assert np.isfinite(a.output_spread) and np.isfinite(a.sense_resolved).all()
    ref = attention(rng.normal(size=(5, 2)) * 0 + a.q, a.k, v / size)  # the same computation on scaled values
    assert a.output_spread / size == pytest.approx(ref.output_spread, rel=1e-9)
    np.testing.assert_allclose(a.sense_resolved, ref.sense_resolved, rtol=1e-9)


def test_extreme_but_accepted_inputs_give_finite_numbers_everywhere():
    # a dot product that overflows before a small scale would bring it back
    with pytest.raises(traitlets.TraitError, match="overflow"):
        AttentionWidget(tokens=["a", "b"], q=[[1e155], [1.0]], k=[[1e155], [1.0]], v=np.eye(2), scale=1e-10)
    # values whose sums would overflow
    with pytest.raises(traitlets.TraitError, match="at most 1e\\+300"):
        AttentionWidget(tokens=["a", "b"], q=np.ones((2, 1)), k=np.ones((2, 1)), v=[[1.7e308, 0.0], [0.0, 1.0]])
    # one cell's arithmetic when score / T overflows: shifted, never inf - inf
    w = AttentionWidget(
        tokens=["a", "b"], q=[[1e150], [1.0]], k=[[1e149], [1.0]], v=np.eye(2), scale=1.0, temperature=1e-300
    )
    w.cell = (0, 0)
    steps = w.cell_arithmetic
    assert steps["exp"] == 1.0 and steps["row_sum"] == 1.0 and steps["weight"] == 1.0
    assert np.isfinite(w.weights).all()


def test_tokens_are_read_once_and_only_from_a_sequence():
    w = AttentionWidget(tokens=["a", "b"], q=np.ones((2, 1)), k=np.ones((2, 1)), v=np.ones((2, 1)))
    w.tokens = (t for t in ["x", "y"])  # a generator is read once
    assert w.tokens == ["x", "y"]
    for bad in ({"x": 1, "y": 2}, {"x", "y"}):
        with pytest.raises(traitlets.TraitError, match="one string per token"):
            w.tokens = bad


def test_an_observer_of_every_trait_that_raises_does_not_turn_a_page_change_into_a_refusal(caplog):
    w = AttentionWidget()
    w.comm = RecordingComm()
    w.observe(raising, names=traitlets.All)
    with caplog.at_level(logging.WARNING):
        w.set_state({"focus": 4, "stage": "weights"})
    assert (w.focus, w.stage) == (4, "weights")  # kept, as the README promises
    assert "observer raised" in caplog.text and "refused" not in caplog.text


def test_a_closed_widget_closes_its_layout_too():
    w = AttentionWidget()
    layout = w.layout
    assert layout.comm is not None
    w.close()
    assert layout.comm is None  # nothing the widget made outlives it


def test_float32_arrays_are_checked_for_overflow_in_float64_as_their_float64_twins_are():
    q = np.full((2, 3), 1e20, dtype=np.float32)  # 3 · 1e20 · 1e20 overflows float32, not float64
    wide = AttentionWidget(tokens=["a", "b"], q=q.astype(np.float64), k=q.astype(np.float64), v=np.ones((2, 2)))
    narrow = AttentionWidget(tokens=["a", "b"], q=q, k=q, v=np.ones((2, 2)))
    assert narrow.q.dtype == np.float32
    np.testing.assert_array_equal(narrow.weights, wide.weights)
