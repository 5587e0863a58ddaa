"""The page for a long text (attnwidget.LongWidget) from Python's side: what it answers the page's
questions with (maps, rows, regions), that every answer is exact and bounded whatever n, and that
bad questions are refused saying what was wrong."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from attnwidget.formulas import attention
from attnwidget.long import LongAttention, LongLayer

N = 300


def layers(n=N, heads=4, kv=2, d=8, seed=0, **options):
    rng = np.random.default_rng(seed)
    q, k, v = rng.normal(size=(heads, n, d)), rng.normal(size=(kv, n, d)), rng.normal(size=(kv, n, d))
    return {0: LongLayer(q, k, v, **options), 5: LongLayer(q[::-1].copy(), k, v, causal=False)}


def dense(long, layer, head):
    x = long._layers[layer]
    group = x.q.shape[0] // x.k.shape[0]
    mask = np.tril(np.ones((len(long), len(long)), bool)) if x.causal else None
    if x.window:
        mask &= np.triu(np.ones_like(mask), -(x.window - 1))
    kv = head // group
    return attention(x.q[head], x.k[kv], x.v[kv], temperature=long.temperature, mask=mask, scale=x.scale).weights


def pooled(a, rows, cols, f):
    r = -(-np.arange(rows + 1) * a.shape[0] // rows)
    c = -(-np.arange(cols + 1) * a.shape[1] // cols)
    return np.array([[f(a[r[p] : r[p + 1], c[q] : c[q + 1]]) for q in range(cols)] for p in range(rows)])


LONG = LongAttention([f"t{i}" for i in range(N)], layers(window=40), temperature=0.7)
DENSE = {(x, h): dense(LONG, x, h) for x in LONG.layers for h in range(4)}


@settings(max_examples=60, deadline=None)
@given(
    st.sampled_from([0, 5]),
    st.integers(0, 3),
    st.integers(0, N - 1),
    st.integers(1, N),
    st.integers(0, N - 1),
    st.integers(1, N),
    st.integers(1, 40),
    st.integers(1, 40),
    st.sampled_from(["max", "mean"]),
)
def test_a_region_pooled_onto_pixels_is_the_dense_matrix_pooled(layer, head, r0, rows, c0, cols, px_r, px_c, how):
    r1, c1 = min(N, r0 + rows), min(N, c0 + cols)
    got = LONG.region(layer, head, (r0, r1), (c0, c1), (px_r, px_c), how)
    want = pooled(
        DENSE[layer, head][r0:r1, c0:c1], min(px_r, r1 - r0), min(px_c, c1 - c0), np.max if how == "max" else np.mean
    )
    np.testing.assert_allclose(got, want, atol=1e-12)


def test_a_region_that_fits_its_pixels_is_its_exact_cells():
    got = LONG.region(0, 1, (100, 140), (60, 120), (64, 64))
    np.testing.assert_array_equal(got, LONG.tile(0, 1, (100, 140), (60, 120)).weights)


@pytest.mark.parametrize(
    ("rows", "cols", "size", "said"),
    [
        ((5, 5), (0, 4), (8, 8), "rows 5 to 5 are not a region of the 300 rows"),
        ((0, 4), (-1, 4), (8, 8), "columns -1 to 4 are not a region"),
        ((0, 4), (0, 4), (0, 8), "size must be a whole number of pixels"),
    ],
)
def test_a_region_it_cannot_give_says_why(rows, cols, size, said):
    with pytest.raises(ValueError, match=said):
        LONG.region(0, 0, rows, cols, size)


# --- the widget: what the page asks and is answered ---

from attnwidget.long_widget import MAX_SIDE, LongWidget  # noqa: E402


def widget(long=LONG, **options):
    w = LongWidget(long, **options)
    w.sent = []
    w.send = lambda content, buffers=None: w.sent.append((content, [bytes(b) for b in buffers or []]))
    return w


def ask(w, **question):
    """The page's question (from view "v"), answered; the map's thread waited for. The answers, progress left out."""
    w.sent.clear()
    w._answer({"view": "v", **question})
    w._pool().submit(lambda: None).result()
    return [(c, b) for c, b in w.sent if c["kind"] != "progress"]


def floats(b, shape):
    return np.frombuffer(b, np.float32).reshape(shape)


@pytest.mark.parametrize("how", ["max", "mean"])
def test_the_map_the_page_asks_for_is_the_head_pooled_with_its_key(how):
    w = widget()
    [(said, [pixels])] = ask(w, ask="map", id=7, layer=5, head=2, how=how, size=[64, 48])
    assert said == {
        "kind": "map",
        "view": "v",
        "id": 7,
        "layer": 5,
        "head": 2,
        "how": how,
        "temperature": 0.7,
        "rows": 64,
        "cols": 48,
        "top": pytest.approx(floats(pixels, (64, 48)).max()),
    }
    f = np.max if how == "max" else np.mean
    np.testing.assert_allclose(floats(pixels, (64, 48)), pooled(DENSE[5, 2], 64, 48, f), rtol=1e-6, atol=1e-9)


def held(w):
    """The map's thread held until the returned event is set (what is asked meanwhile waits behind it)."""
    gate = __import__("threading").Event()
    w._pool().submit(gate.wait)
    return gate


def answers(w, kind=None):
    return [(c["view"], c["id"], c["kind"]) for c, _ in w.sent if c["kind"] != "progress" and kind in (None, c["kind"])]


def test_a_map_tells_its_progress_and_one_superseded_by_its_view_is_not_computed():
    n = 4096
    rng = np.random.default_rng(3)
    long = LongAttention(list(map(str, range(n))), {0: LongLayer(*(rng.normal(size=(1, n, 4)) for _ in range(3)))})
    w = widget(long)
    long.heads(0).block = 16  # (many bands, so that progress is told)
    gate = held(w)
    for view, i, size in (("a", 1, 32), ("b", 1, 24), ("a", 2, 16)):  # two views, numbering their own questions
        w._answer({"ask": "map", "view": view, "id": i, "layer": 0, "head": 0, "size": [size, size]})
    gate.set()
    w._pool().submit(lambda: None).result()
    assert answers(w) == [("a", 1, "superseded"), ("b", 1, "map"), ("a", 2, "map")]
    rows = {(c["view"], c["id"]): c["rows"] for c, _ in w.sent if c["kind"] == "map"}
    assert rows == {("b", 1): 24, ("a", 2): 16}
    progress = [(c["view"], c["id"], c["fraction"]) for c, _ in w.sent if c["kind"] == "progress"]
    assert progress and {p[:2] for p in progress} <= {("b", 1), ("a", 2)} and all(0 < p[2] < 1 for p in progress)


def test_a_map_being_computed_stops_when_its_view_asks_another_or_the_widget_closes():
    n = 8192
    rng = np.random.default_rng(5)
    q = rng.normal(size=(1, n, 16)).astype(np.float32)
    w = widget(LongAttention([str(i) for i in range(n)], {0: LongLayer(q, q, q)}))
    w.long.heads(0).block = 16
    w._answer({"ask": "map", "view": "a", "id": 1, "layer": 0, "size": [64, 64]})
    deadline = __import__("time").monotonic() + 30
    while not any(c["kind"] == "progress" for c, _ in w.sent) and __import__("time").monotonic() < deadline:
        __import__("time").sleep(0.005)
    w._answer({"ask": "map", "view": "a", "id": 2, "layer": 0, "size": [8, 8]})
    w._pool().submit(lambda: None).result()
    assert answers(w, "superseded") == [("a", 1, "superseded")] and answers(w, "map") == [("a", 2, "map")]
    w._answer({"ask": "map", "view": "a", "id": 3, "layer": 0, "size": [32, 32]})
    w.close()
    w._jobs = None
    assert answers(w, "map") == [("a", 2, "map")]  # (3 never answered: the widget is closed)


def test_the_focused_row_is_exact_with_every_heads_strongest_keys():
    w = widget()
    [(said, [weights, scores])] = ask(w, ask="row", id=3, layer=0, head=1, position=250)
    rows = LONG.rows(0, [250])
    np.testing.assert_allclose(floats(weights, (N,)), DENSE[0, 1][250], atol=1e-7)
    np.testing.assert_allclose(floats(scores, (N,)), rows.scores[1, 0], rtol=1e-6)
    assert said["position"] == 250 and len(said["heads"]) == 4
    for h, each in enumerate(said["heads"]):
        row = DENSE[0, h][250]
        assert [j for j, _ in each["keys"]] == list(np.argsort(-row, kind="stable")[:8])
        inside = row[row > 0]
        assert each["effective"] == pytest.approx(np.exp(-(inside * np.log(inside)).sum()))
        assert each["first"] == pytest.approx(row[0]) and all(j > 250 - 40 for j, _ in each["keys"])  # the window


def test_a_region_is_exact_cells_once_it_fits_and_pooled_before():
    w = widget()
    [(said, [weights, scores])] = ask(w, ask="region", id=1, layer=0, head=3, r0=10, r1=30, c0=5, c1=25, size=[40, 40])
    assert said["exact"] and (said["rows"], said["cols"]) == (20, 20)
    np.testing.assert_allclose(floats(weights, (20, 20)), DENSE[0, 3][10:30, 5:25], atol=1e-7)
    np.testing.assert_allclose(floats(scores, (20, 20)), LONG.tile(0, 3, (10, 30), (5, 25)).scores, rtol=1e-6)
    [(said, [pixels])] = ask(w, ask="region", id=2, layer=0, head=3, r0=0, r1=300, c0=0, c1=200, size=[30, 20])
    assert not said["exact"]
    np.testing.assert_allclose(floats(pixels, (30, 20)), pooled(DENSE[0, 3][:, :200], 30, 20, np.max), atol=1e-7)


@pytest.mark.parametrize(
    ("question", "said"),
    [
        ({"ask": "map", "layer": 9, "size": [8, 8]}, "layer 9 is not held; the layers are \\[0, 5\\]"),
        ({"ask": "map", "layer": 0, "head": 4, "size": [8, 8]}, "head 4 is not one of layer 0's"),
        ({"ask": "map", "layer": 0, "size": [8, MAX_SIDE + 1]}, "size must be \\[rows, columns\\] of pixels"),
        ({"ask": "map", "layer": 0, "size": [8, 8], "how": "sum"}, 'how must be "max" or "mean"'),
        ({"ask": "row", "layer": 0, "position": N}, "position must be a token's position, 0 to 299"),
        ({"ask": "region", "layer": 0, "r0": 5, "r1": 2, "c0": 0, "c1": 4, "size": [8, 8]}, "rows 5 to 2 are not"),
        ({"ask": "region", "layer": 0, "r0": "a", "r1": 2, "c0": 0, "c1": 4, "size": [8, 8]}, "four whole numbers"),
    ],
)
def test_a_question_it_cannot_answer_is_answered_with_what_was_wrong(question, said):
    w = widget()
    [(answer, buffers)] = ask(w, id=5, **question)
    assert answer["kind"] == "error" and answer["id"] == 5 and buffers == []
    assert __import__("re").search(said, answer["message"]), answer["message"]


def test_every_answer_is_bounded_whatever_the_length():
    n = 100_000
    rng = np.random.default_rng(2)
    q = rng.normal(size=(2, n, 4)).astype(np.float32)
    long = LongAttention(["tok"] * n, {0: LongLayer(q, q[:1], q[:1], window=64)})  # (a window: a quick map)
    w = widget(long)
    answers = ask(w, ask="map", id=1, layer=0, head=0, size=[MAX_SIDE, MAX_SIDE])
    answers += ask(w, ask="row", id=2, layer=0, head=1, position=n - 1)
    answers += ask(w, ask="region", id=3, layer=0, head=1, r0=0, r1=4096, c0=0, c1=4096, size=[MAX_SIDE, MAX_SIDE])
    answers += ask(w, ask="region", id=4, layer=0, head=1, r0=n - 512, r1=n, c0=n - 512, c1=n, size=[512, 512])
    assert [c["kind"] for c, _ in answers] == ["map", "row", "region", "region"]
    assert max(sum(map(len, b)) for _, b in answers) <= 8 * 2**20
    [(refused, _)] = ask(w, ask="region", id=5, layer=0, head=1, r0=0, r1=n, c0=0, c1=n, size=[64, 64])
    assert refused["kind"] == "error" and "zoom in further" in refused["message"]


def test_the_state_refuses_what_is_not_there_and_keeps_its_own():
    w = widget(focus=-1)
    assert (w.layer, w.head, w.focus, w.temperature) == (0, 0, N - 1, 0.7)
    for name, value, said in [
        ("layer", 3, "layer 3 is not held"),
        ("head", 4, "head 4 is not one of layer 0's 0 to 3"),
        ("focus", N, "focus must be a position from 0 to 299"),
        ("temperature", 0.0, "temperature must be finite and > 0"),
    ]:
        with pytest.raises((ValueError, __import__("traitlets").TraitError), match=said):
            setattr(w, name, value)
    assert (w.layer, w.head, w.focus, w.temperature) == (0, 0, N - 1, 0.7)
    w.temperature = 2.0
    assert LONG.temperature == 0.7  # (the widget's own: the LongAttention it shows keeps its own)
    hot = LongAttention(LONG.tokens, LONG._layers, temperature=2.0)
    np.testing.assert_allclose(w.row()[1], dense(hot, 0, 1)[N - 1], atol=1e-12)


def test_own_arrays_make_one_layer_and_a_wrong_call_says_how():
    rng = np.random.default_rng(0)
    q = rng.normal(size=(2, 20, 4))
    w = LongWidget(tokens=list("abcdefghijklmnopqrst"), q=q, k=q, v=q, causal=False)
    assert w.layers == {"0": {"heads": 2, "causal": False, "window": None}} and w.focus == 19
    np.testing.assert_allclose(w.tile((0, 20), (0, 20)), attention(q[0], q[0], q[0]).weights, atol=1e-12)
    with pytest.raises(TypeError, match="needs a LongAttention, or tokens=, q=, k= and v="):
        LongWidget(tokens=["a"], q=q)
    with pytest.raises(TypeError, match="takes an attnwidget.LongAttention"):
        LongWidget("text")
    from ipywidgets.widgets.widget import _instances  # (the widgets open, by comm id)

    open_before = {k for k, x in _instances.items() if isinstance(x, LongWidget)}
    with pytest.raises(__import__("traitlets").TraitError, match="focus must be a position from 0 to 19"):
        LongWidget(tokens=list("abcdefghijklmnopqrst"), q=q, k=q, v=q, focus=20)
    opened = {k for k, x in _instances.items() if isinstance(x, LongWidget)} - open_before
    assert not opened  # (a refused widget is closed, not left open)


# --- exported pages: what the author chose, within a size the author sets, saying what they hold ---


def test_an_exported_page_holds_the_maps_and_rows_asked_and_says_so():
    import base64

    w = widget(focus=120)
    data = w.page_state(heads=[1, 2], positions=[0, -1], map_size=32)
    assert data["state"]["tokens"] == LONG.tokens and data["state"]["focus"] == 120
    maps = {(m["layer"], m["head"], m["how"]): m for m in data["maps"]}
    assert set(maps) == {(0, h, how) for h in (1, 2) for how in ("max", "mean")}
    got = np.frombuffer(base64.b64decode(maps[0, 2, "mean"]["data"]), np.float32).reshape(32, 32)
    np.testing.assert_allclose(got, pooled(DENSE[0, 2], 32, 32, np.mean), rtol=1e-6, atol=1e-9)
    rows = {(r["layer"], r["position"]): r for r in data["rows"]}
    assert set(rows) == {(0, p) for p in (0, 120, N - 1)}  # (the focused row, too)
    assert set(rows[0, N - 1]["weights"]) == {"1", "2"} and len(rows[0, N - 1]["heads"]) == 4
    row = np.frombuffer(base64.b64decode(rows[0, N - 1]["weights"]["2"]), np.float32)
    np.testing.assert_allclose(row, DENSE[0, 2][N - 1], atol=1e-7)
    assert data["holds"] == (
        "This page holds layer 0's heads 1 and 2: each head's whole map pooled onto 32 × 32 pixels (each pixel's "
        "largest weight, and its mean), and the exact rows of positions 0, 120 and 299, at temperature 0.7. Zoomed "
        "in, it shows the "
        "pooled map: each cell's own weight is computed by a live notebook."
    )


def test_an_exported_page_over_its_size_is_refused_saying_what_to_drop(tmp_path):
    w = widget()
    with pytest.raises(
        ValueError,
        match=r"over the 0.01 MB asked \(max_mb\): .*fewer heads, positions or layers, or a smaller map_size",
    ):
        w.to_html(tmp_path / "page.html", heads="all", max_mb=0.01)
    assert not (tmp_path / "page.html").exists()
    w.to_html(tmp_path / "page.html", map_size=16)
    text = (tmp_path / "page.html").read_text()
    assert "This page holds layer 0's head 0" in text and len(text.encode()) < 8 * 2**20


def test_rows_and_regions_are_answered_while_a_map_is_computed():
    w = widget()
    gate = held(w)  # (a map that takes as long as it takes)
    w._answer({"ask": "map", "view": "v", "id": 1, "layer": 0, "head": 0, "size": [32, 32]})
    w._answer({"ask": "row", "view": "v", "id": 2, "layer": 0, "head": 0, "position": 200})
    w._answer(
        {"ask": "region", "view": "v", "id": 3, "layer": 0, "r0": 0, "r1": 64, "c0": 0, "c1": 64, "size": [64, 64]}
    )
    assert answers(w) == [("v", 2, "row"), ("v", 3, "region")]
    gate.set()
    w._pool().submit(lambda: None).result()
    assert answers(w) == [("v", 2, "row"), ("v", 3, "region"), ("v", 1, "map")]


def test_two_widgets_of_one_long_attention_keep_their_own_temperatures():
    long = LongAttention(LONG.tokens, LONG._layers)
    hot, cold = widget(long, temperature=3.0), widget(long, temperature=0.25)
    assert long.temperature == 1.0 and (hot.temperature, cold.temperature) == (3.0, 0.25)
    for w, t in ((hot, 3.0), (cold, 0.25), (hot, 3.0)):
        [(said, [weights, _])] = ask(w, ask="row", id=1, layer=0, head=2, position=150)
        assert said["temperature"] == t
        long.temperature = t
        np.testing.assert_allclose(floats(weights, (N,)), dense(long, 0, 2)[150], atol=1e-7)
        long.temperature = 1.0
    np.testing.assert_allclose(
        cold.row()[2], LONG.rows(0, [N - 1], temperature=0.25).weights[2, 0]
    )  # (focus: the last)


def test_an_unexpected_failure_is_answered_not_left_waiting(monkeypatch):
    w = widget()
    monkeypatch.setattr(w.long, "rows", lambda *a, **k: (_ for _ in ()).throw(MemoryError("out of memory")))
    [(said, buffers)] = ask(w, ask="row", id=9, layer=0, position=3)
    assert (said["kind"], said["id"], said["view"], buffers) == ("error", 9, "v", [])
