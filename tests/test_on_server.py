"""What a remote trace computes on the server (integrations/on_server.py), against the widget's own numbers:
each layer's overview (thumbnails, their largest means, the summaries) on random layers with masks, rows that
read nothing, soft caps and learnt sinks; and the mask a server sends, by what it shuts."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from attnwidget.formulas import head_summaries  # noqa: E402
from attnwidget.integrations import on_server  # noqa: E402
from attnwidget.overview import thumbnail  # noqa: E402


def weights_by_hand(q, k, scaling, softcap, closed, sinks):
    """softmax(q·kᵀ · scaling), capped, shut cells 0, each head's sink a column of its own dropped after it."""
    s = q @ np.swapaxes(k, 1, 2) * scaling
    if softcap is not None:
        s = softcap * np.tanh(s / softcap)
    s = np.where(closed, -np.inf, s)
    if sinks is not None:
        s = np.concatenate([s, np.broadcast_to(sinks[:, None, None], (*s.shape[:2], 1))], axis=-1)
    top = s.max(axis=-1, keepdims=True)
    e = np.exp(s - np.where(np.isfinite(top), top, 0))
    w = e / np.where(e.sum(-1, keepdims=True) > 0, e.sum(-1, keepdims=True), 1)
    return w[..., :-1] if sinks is not None else w


@pytest.mark.parametrize("seed", range(24))
def test_the_servers_overview_is_the_widgets(seed):
    rng = np.random.default_rng(seed)
    heads, n, d = int(rng.integers(1, 4)), int(rng.integers(1, 130)), int(rng.integers(2, 9))
    q, k = rng.normal(size=(heads, n, d)) * 2, rng.normal(size=(heads, n, d)) * 2
    closed = np.triu(np.ones((n, n), dtype=bool), 1) | (rng.random((n, n)) < rng.choice([0, 0.3]))
    if n > 2 and seed % 3 == 0:
        closed[1] = True  # a row that reads nothing
    softcap = 3.0 if seed % 4 == 1 else None
    sinks = rng.normal(size=heads) if seed % 2 else None
    w = weights_by_hand(q, k, 0.4, softcap, closed, sinks)
    t = thumbnail(w)
    top = t.max(axis=(1, 2))
    expected = head_summaries(w, ~closed, sinks=sinks is not None)
    T = lambda a: None if a is None else torch.from_numpy(np.asarray(a, dtype=np.float32))
    thumbs, peaks, found = on_server.overview(T(q), T(k), 0.4, softcap, torch.from_numpy(closed), T(sinks))
    np.testing.assert_allclose(peaks.numpy(), top, rtol=2e-5, atol=1e-7)
    rounded = np.rint(255 * t / np.where(top > 0, top, 1)[:, None, None])
    assert np.abs(thumbs.numpy().astype(int) - rounded).max() <= 1
    names = ["first", "self", "previous", "effective_tokens", "sink_share"]
    assert len(found) == len(names)
    for name, got in zip(names, found.numpy()):
        want = expected.get(name, np.where(np.isnan(expected["effective_tokens"]), np.nan, 0.0))  # (no sink: 0)
        np.testing.assert_allclose(got, want, rtol=2e-5, atol=1e-6, err_msg=name)


def test_a_mask_travels_once_and_the_causal_rule_not_at_all():
    n = 6
    causal = torch.ones(n, n, dtype=torch.bool).triu(1)
    window = causal | torch.ones(n, n, dtype=torch.bool).tril(-3)
    seen: list = []
    assert on_server.find(seen, None, n) == -1 and on_server.find(seen, torch.zeros(n, n, dtype=torch.bool), n) == -1
    assert on_server.find(seen, causal.clone(), n) == -2 and seen == []
    assert on_server.find(seen, window.clone(), n) == 0 and on_server.find(seen, window.clone(), n) == 0
    assert len(seen) == 1 and torch.equal(seen[0], window)
    additive = torch.where(window, torch.finfo(torch.float32).min, 0.0)[None, None]
    shut, terms = on_server.closed(additive, n, n, True)
    assert torch.equal(shut, window) and not terms
    shut, terms = on_server.closed(additive + 0.5, n, n, True)  # finite terms besides: a bias through the mask
    assert terms
    shut, _ = on_server.closed(None, n, n, True)  # SDPA's own causal rule, no mask made
    assert torch.equal(shut, causal)
    assert on_server.closed(None, n, n, False) == (None, False)
