"""The kept keys of each KV-cache compression method against its definition written here from whole
weight matrices, on random layers (grouped heads, budgets past the text, windows, pooling), and
what a row loses reading only them."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from attnwidget import kvcache


def causal_weights(q, k, group):
    heads, n, d = q.shape
    kk = np.repeat(k, group, axis=0)
    s = np.einsum("hid,hjd->hij", q, kk) / np.sqrt(d)
    s = np.where(np.tril(np.ones((n, n), bool)), s, -np.inf)
    w = np.exp(s - s.max(axis=-1, keepdims=True))
    return w / w.sum(axis=-1, keepdims=True)


def top(scores, count, among):
    """The ``count`` keys of ``among`` with the highest score, the earlier key first among equals."""
    return set(sorted(among, key=lambda j: (-scores[j], j))[:count])


def expected(method, budget, w, group, sinks=4, window=None, kernel=5, pooling="avg", normalise=False):
    heads, n, _ = w.shape
    out = []
    for g in range(heads // group):
        mine = w[g * group : (g + 1) * group]
        if method == "streaming":
            keep = set(range(min(sinks, budget, n))) | set(
                range(max(0, n - (budget - sinks)), n) if budget > sinks else ()
            )
        elif method == "h2o":
            recent = min(budget // 2 if window is None else window, n)
            score = mine.sum(axis=1).mean(axis=0)
            if normalise:
                score = score / np.array([n - j for j in range(n)])
            keep = set(range(n - recent, n)) | top(score, min(budget, n) - recent, range(n - recent))
        else:
            recent = min(min(64, max(1, budget // 2)) if window is None else window, n)
            votes = mine[:, n - recent :, : n - recent].mean(axis=1)  # each head's window's mean weights
            pooled = np.zeros_like(votes)
            for j in range(n - recent):
                near = [t for t in range(j - kernel // 2, j - kernel // 2 + kernel)]
                got = [
                    votes[:, t] if 0 <= t < n - recent else np.full(len(votes), 0.0 if pooling == "avg" else -np.inf)
                    for t in near
                ]
                pooled[:, j] = np.mean(got, axis=0) if pooling == "avg" else np.max(got, axis=0)
            score = pooled.mean(axis=0)
            keep = set(range(n - recent, n)) | top(score, min(budget, n) - recent, range(n - recent))
        out.append(sorted(keep))
    return out


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 2**31),
    n=st.integers(1, 40),
    kv=st.sampled_from([1, 2]),
    group=st.sampled_from([1, 2, 3]),
    method=st.sampled_from(["streaming", "h2o", "snapkv"]),
    budget=st.integers(1, 48),
    window=st.one_of(st.none(), st.integers(0, 12)),
    kernel=st.integers(1, 7),
    pooling=st.sampled_from(["avg", "max"]),
    normalise=st.booleans(),
    sinks=st.integers(0, 6),
)
def test_kept_keys_are_each_methods_definition(
    seed, n, kv, group, method, budget, window, kernel, pooling, normalise, sinks
):
    rng = np.random.default_rng(seed)
    q = rng.normal(size=(kv * group, n, 8)) * 2
    k = rng.normal(size=(kv, n, 8))
    if method == "snapkv" and window == 0:
        with pytest.raises(ValueError, match="queries that vote"):
            kvcache.kept(method, budget, q, k, window=0)
        return
    if window is not None and window > budget:
        with pytest.raises(ValueError, match="at most the budget"):
            kvcache.kept(method, budget, q, k, window=window) if method != "streaming" else kvcache.choose(
                method, budget, n, window=window
            )
        return
    options = dict(window=window, kernel=kernel, pooling=pooling, normalise=normalise, sinks=sinks)
    got = kvcache.kept(method, budget, q, k, **options)
    want = expected(method, budget, causal_weights(q, k, group), group, **options)
    assert got.shape == (kv, n)
    assert [sorted(np.flatnonzero(row)) for row in got] == want
    assert (got.sum(axis=1) == min(budget, n)).all()


def test_snapkv_kept_from_a_band_at_a_time_equals_whole_rows():
    """The blockwise path (bands of 3 rows) keeps what the whole weights do, column sums included."""
    from attnwidget.blockwise import Heads

    rng = np.random.default_rng(1)
    q, k = rng.normal(size=(4, 50, 8)), rng.normal(size=(2, 50, 8))
    w = causal_weights(q, k, 2)
    heads = Heads(q, k, k, causal=True, block=3)
    assert np.allclose(kvcache.column_sums(heads, 3), w[3].sum(axis=0))
    for method in ("h2o", "snapkv"):
        got = kvcache.from_heads(heads, method, 20, window=6)
        assert [sorted(np.flatnonzero(r)) for r in got] == expected(method, 20, w, 2, window=6)


def test_mask_keeps_what_you_give_and_says_what_is_wrong():
    keep = np.zeros(10, bool)
    keep[[0, 3, 9]] = True
    assert (kvcache.choose("mask", 0, 10, mask=keep, kv_heads=2) == keep).all()
    for bad, why in [(np.ones(9, bool), "one per key"), (np.ones(10), "booleans")]:
        with pytest.raises(ValueError, match=why):
            kvcache.choose("mask", 0, 10, mask=bad)
    with pytest.raises(ValueError, match="method must be one of"):
        kvcache.choose("h2", 4, 10)
    with pytest.raises(ValueError, match="budget"):
        kvcache.choose("h2o", 0, 10, columns=np.ones((1, 10)))


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**31), n=st.integers(2, 30), dv=st.integers(1, 5))
def test_losses_are_the_retained_mass_and_the_outputs_move(seed, n, dv):
    rng = np.random.default_rng(seed)
    w = rng.dirichlet(np.ones(n), size=3)
    v = rng.normal(size=(3, n, dv))
    keep = rng.random((3, n)) < 0.5
    keep[:, 0] = True
    got = kvcache.losses(w, v, keep)
    outs, outs2 = [], []
    for h in range(3):
        o = sum(w[h, j] * v[h, j] for j in range(n))
        mass = sum(w[h, j] for j in range(n) if keep[h, j])
        o2 = sum(w[h, j] * v[h, j] for j in range(n) if keep[h, j]) / mass
        assert got["retained"][h] == pytest.approx(mass)
        assert got["change"][h] == pytest.approx(np.linalg.norm(o2 - o) / np.linalg.norm(o))
        outs.append(o)
        outs2.append(o2)
    whole = np.linalg.norm(np.concatenate(outs2) - np.concatenate(outs)) / np.linalg.norm(np.concatenate(outs))
    assert got["layer_change"] == pytest.approx(whole)
    assert got["layer_retained"] == pytest.approx(got["retained"].mean())
    everything = kvcache.losses(w, v, np.ones((3, n), bool))
    assert np.allclose(everything["retained"], 1) and np.allclose(everything["change"], 0)


def test_a_widgets_kv_keep_is_its_layers_weights_compressed():
    from attnwidget import AttentionWidget

    rng = np.random.default_rng(3)
    q, k, v = (rng.normal(size=(3, 12, 4)) for _ in range(3))
    w = AttentionWidget(tokens=[f"t{i}" for i in range(12)], q=q, k=k, v=v, causal=True, temperature=0.7, focus=9)
    weights = causal_weights(q / 0.7, k, 1)  # (temperature 0.7 divides every score)
    assert np.allclose(weights[w.head], w.weights)
    for method in ("streaming", "h2o", "snapkv"):
        got = w.kv_keep(method, 5, window=2)
        keep = [sorted(np.flatnonzero(r)) for r in got["kept"]]
        assert keep == expected(method, 5, weights, 1, window=2)
        for h in range(3):
            row, kept = weights[h, 9], got["kept"][h]
            o, o2 = row @ v[h], (row * kept) @ v[h] / (row * kept).sum()
            assert got["retained"][h] == pytest.approx((row * kept).sum())
            assert got["change"][h] == pytest.approx(np.linalg.norm(o2 - o) / np.linalg.norm(o))
    w.kv_method, w.kv_budget, w.kv_keys = "mask", 3, [7, 0]
    got = w.kv_keep()
    assert [sorted(np.flatnonzero(r)) for r in got["kept"]] == [[0, 7]] * 3 and got["row"] == 9
    shared = w.kv_keep("h2o", 4, group=3)  # one cache for the three heads: their column sums averaged
    assert (shared["kept"] == shared["kept"][0]).all()
    assert [sorted(np.flatnonzero(shared["kept"][0]))] == expected("h2o", 4, weights, 3)


def test_bad_kv_settings_say_what_to_fix_and_keep_the_last_good_ones():
    from traitlets import TraitError

    from attnwidget import AttentionWidget

    w = AttentionWidget("She sat by the river bank", kv_method="h2o", kv_budget=3)
    for name, bad, why in [("kv_budget", 0, "≥ 1"), ("kv_method", "H2O", "one of"), ("kv_keys", [1, -2], "positions")]:
        with pytest.raises(TraitError, match=why):
            setattr(w, name, bad)
    assert (w.kv_method, w.kv_budget, w.kv_keys) == ("h2o", 3, [])
    w.kv_keys = [40]
    with pytest.raises(ValueError, match="past the 6 keys read"):
        w.kv_keep("mask")
    with pytest.raises(ValueError, match="say which keys to keep"):
        AttentionWidget("a b").kv_keep()


@settings(max_examples=30, deadline=None)
@given(
    seed=st.integers(0, 2**31),
    n=st.integers(1, 150),
    causal=st.booleans(),
    window=st.one_of(st.none(), st.integers(1, 90)),
    sink=st.booleans(),
    block=st.integers(1, 40),
)
def test_streaming_share_from_bands_is_each_rows_weight_near_it_and_on_the_first_tokens(
    seed, n, causal, window, sink, block
):
    """The streaming share of every row, a band at a time, against the definition on whole weights:
    Σ_j w_ij over j < 4 or |i − j| < 64; and atlas's score is its mean over rows."""
    from attnwidget import atlas
    from attnwidget.blockwise import Heads

    window = window if causal else None
    rng = np.random.default_rng(seed)
    q, k = rng.normal(size=(2, n, 8)) * 1.5, rng.normal(size=(1, n, 8))
    heads = Heads(q, k, k, causal=causal, window=window, sink=sink, block=block)
    rows = np.arange(n)
    whole = heads.rows(rows).weights  # heads × n × n, exact
    for h in range(2):
        sums, share = kvcache.one_pass(heads, h)
        want = [sum(whole[h, i, j] for j in range(n) if j < 4 or abs(i - j) < 64) for i in range(n)]
        assert np.allclose(share, want, atol=1e-6)
        assert np.allclose(sums, whole[h].sum(axis=0), atol=1e-6)
    if causal and not window and not sink:
        scores = atlas.text_scores(whole, [str(i) for i in range(n)])
        assert np.allclose(scores["streaming"], [kvcache.one_pass(heads, h)[1].mean() for h in range(2)])


def test_a_long_reads_streaming_scores_and_kv_cache_equal_the_widgets():
    """LongAttention (q, k, v held, block by block) against the widget's own numbers on the same layer."""
    from attnwidget import AttentionWidget, LongAttention, atlas
    from attnwidget.long import LongLayer

    rng = np.random.default_rng(5)
    n = 90
    q, k, v = rng.normal(size=(4, n, 8)), rng.normal(size=(2, n, 8)), rng.normal(size=(2, n, 3))
    tokens = [f"t{i}" for i in range(n)]
    long = LongAttention(tokens, {0: LongLayer(q, k, v, causal=True)})
    w = AttentionWidget(tokens=tokens, q=q, k=np.repeat(k, 2, 0), v=np.repeat(v, 2, 0), causal=True, focus=n - 1)
    weights = causal_weights(q, k, 2)
    assert np.allclose(long.head_scores()["streaming"][0], atlas.text_scores(weights, tokens)["streaming"])
    for method in ("streaming", "h2o", "snapkv"):
        got, want = long.kv_keep(0, method, 24, window=8), w.kv_keep(method, 24, window=8, group=2)
        assert (np.repeat(got["kept"], 2, axis=0) == want["kept"]).all()
        for name in ("retained", "change", "layer_retained", "layer_change"):
            assert np.allclose(got[name], want[name])
    with pytest.raises(ValueError, match='"streaming"'):
        long.head_scores(["retrieval"])


def test_the_kv_cache_answer_says_which_row_and_cache_it_is_for():
    from attnwidget import AttentionWidget
    from attnwidget.computed_views import answer

    w = AttentionWidget("She sat by the river bank", kv_method="mask", kv_keys=[2, 0], focus=4)
    key = answer("kv_cache", w._inputs())["key"]  # (the page compares it with the state it shows)
    assert {n: key[n] for n in ("focus", "kv_method", "kv_budget", "kv_keys")} == {
        "focus": 4,
        "kv_method": "mask",
        "kv_budget": 16,
        "kv_keys": [0, 2],
    }
    exported = w.page_state()["state"]["computed"]["kv_cache"]  # an exported page carries it, at the state exported
    assert exported["key"] == key and exported["layer_retained"] == pytest.approx(w.kv_keep()["layer_retained"])


def test_cross_attention_and_unknown_options_are_refused_saying_why():
    from attnwidget import AttentionWidget
    from attnwidget.blockwise import Heads

    rng = np.random.default_rng(2)
    q, k, v = rng.normal(size=(5, 4)), rng.normal(size=(9, 4)), rng.normal(size=(9, 2))
    cross = AttentionWidget(tokens=list("abcde"), key_tokens=list("ABCDEFGHI"), q=q, k=k, v=v)
    assert cross.cross
    for method in kvcache.METHODS:
        with pytest.raises(ValueError, match="cross-attention the keys are another text's"):
            cross.kv_keep(method, 4)
    with pytest.raises(ValueError, match="cross-attention"):
        kvcache.from_heads(Heads(q[None], k[None], v[None], cross=True), "h2o", 4)
    w = AttentionWidget("She sat by the river bank")
    for bad in ("causal", "kv_heads", "mask", "windows"):
        with pytest.raises(ValueError, match=f"'{bad}' is not an option of a compressed cache"):
            w.kv_keep("h2o", 4, **{bad: 1})
    with pytest.raises(ValueError, match="'group' is not an option"):
        kvcache.from_heads(Heads(q[None], q[None], q[None], causal=True), "snapkv", 4, group=1)
