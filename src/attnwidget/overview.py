"""A model's layers × heads at a glance, computed in the kernel: each head's weights as a
thumbnail (block means, as the page draws them) and its summaries (formulas.head_summaries), at the
widget's temperature, causal rule, each layer's mask, sink and step.

The page holds the layer it shows; every other layer stays here, and the page gets this overview
instead (AttentionWidget.overview, asked for by the page when its inputs change).
"""

from __future__ import annotations

import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from .computed_views import VIEWS
from .formulas import CLOSED, head_summaries, summaries_of_rows
from .inputs import Inputs, load_torch, sink_column, tensor

SIZE = 84  # a thumbnail's side, at most: js/thumbs.js draws its own at the same size


def _starts(count: int, side: int) -> np.ndarray:
    """The first row (or column) of each of ``side`` blocks of ``count``: row i is in block ⌊i·side/count⌋."""
    block = (np.arange(count) * side) // count
    return np.flatnonzero(np.r_[True, block[1:] != block[:-1]])


def thumbnail(weights: np.ndarray) -> np.ndarray:
    """The mean weight of each block of cells of (heads ×) n × m weights: at most SIZE × SIZE."""
    n, m = weights.shape[-2:]
    rows, cols = _starts(n, min(n, SIZE)), _starts(m, min(m, SIZE))
    return np.add.reduceat(np.add.reduceat(weights, rows, axis=-2), cols, axis=-1) / _counts(len(rows), len(cols), n, m)


# cells in a layer's heads: from here the overview's weights are torch's, in float32 (below, weights_of's)
FAST_FROM = 2**22
IN_FLIGHT = 1e9  # bytes: the layers' weights held at once while the overview is computed


def compute(inputs: Inputs) -> dict:
    """The overview the page draws: {layers, heads, width, height, averaged, thumbs (uint8,
    layers · heads × height × width, each scaled to its own largest block mean), top (those
    largest means), summaries ({name: layers · heads numbers, None for NaN}), key (the inputs it
    was computed at)}."""

    def one(
        q, k, allowed, bias, sinks
    ):  # a layer's thumbnails and summaries: numpy and torch let go of the GIL, so layers overlap
        if len(q) * q.shape[1] * k.shape[1] >= FAST_FROM and load_torch() is not None:
            sums, summaries = _torch_layer(inputs, q, k, allowed, bias, sinks)
            t = sums / _counts(*sums.shape[1:], q.shape[1], k.shape[1])
        else:
            weights = inputs.weights_of(q, k, allowed, bias, sinks)
            t = thumbnail(weights)
            summaries = head_summaries(weights, allowed, cross=inputs.cross, sinks=inputs.has_sinks)
        peak = t.max(axis=(1, 2))
        return np.rint(255 * t / np.where(peak > 0, peak, 1)[:, None, None]).astype(np.uint8), peak, summaries

    served = inputs.served()
    if served is not None:  # a remote model's, as its server computed it (integrations/on_server.overview)
        thumbs = [t.numpy() for t in served["thumbs"]]
        top = [float(p) for peaks in served["top"] for p in peaks]
        names = ("first", "self", "previous", "effective_tokens", "sink_share")
        rows = [
            dict(zip(names[: 5 if inputs.state.get("model_sinks") is not None else 4], np.asarray(r, dtype=float)))
            for r in served["summaries"]
        ]
        return _assembled(inputs, thumbs, top, rows)
    # layers summed up at once: one per core, while their weights stay within IN_FLIGHT bytes
    q = inputs.layers[0][0]
    layer_bytes = (q.size // q.shape[-1] if q.ndim == 3 else q.shape[0]) * inputs.keys * 8
    workers = max(1, min(os.cpu_count() or 1, int(IN_FLIGHT // layer_bytes)))
    done, pending = [], []
    with ThreadPoolExecutor(max_workers=workers) as pool:
        for layer in inputs.each_layer():
            pending.append(pool.submit(one, *layer))
            if len(pending) >= workers:
                done.append(pending.pop(0).result())
        done += [p.result() for p in pending]
    return _assembled(
        inputs, [t for t, _, _ in done], [float(p) for _, peak, _ in done for p in peak], [r for *_, r in done]
    )


def _assembled(inputs: Inputs, thumbs: list, top: list, rows: list) -> dict:
    """The overview from each layer's thumbnails (uint8), their largest means and summaries (name: per head)."""
    stack = np.ascontiguousarray(np.concatenate(thumbs))
    n, m = inputs.rows, inputs.keys
    summaries = {name: [None if np.isnan(v) else float(v) for r in rows for v in r[name]] for name in rows[0]}
    if (
        inputs.effect is not None
    ):  # offered, None until asked for (each layer is a forward pass of the model), or the effects
        effect = inputs.effect
        summaries["effect"] = (
            [None] * len(top) if effect is False else [None if np.isnan(v) else float(v) for v in effect.ravel()]
        )
    exact = getattr(inputs, "effect_exact", None)
    return {
        **({} if exact is None else {"effect_exact": [bool(x) for x in np.ravel(exact)]}),
        "layers": len(rows),
        "heads": len(stack) // len(rows),
        "width": int(stack.shape[2]),
        "height": int(stack.shape[1]),
        "averaged": bool(stack.shape[1] < n or stack.shape[2] < m),
        "thumbs": {"shape": list(stack.shape), "dtype": "uint8", "view": memoryview(stack.reshape(-1).data)},
        "top": top,
        "summaries": summaries,
        "key": key(inputs),
    }


class Background:
    """The overview of a large model computed on a thread, so the kernel answers the page
    meanwhile (numpy and torch let go of the GIL); the page asks again until it has it, and the
    result is handed over on the kernel's own thread, when it asks."""

    SMALL = 2**20  # cells: below this an overview is computed at once, when asked
    EARLY = (
        2**28
    )  # cells: below this (well under a second) it is begun when the widget is shown, not after its first picture

    def __init__(self):
        self.thread: threading.Thread | None = None
        self.done: tuple | None = None  # (inputs, overview) of the last computation finished
        self.seconds: float | None = None  # how long the last one took (benchmarks/models.py reports it)

    def ask(self, inputs: Inputs, begin: bool = True) -> dict | None:
        """The overview at ``inputs``, or None while it is being computed (or, not ``begin``,
        when it is too large to begin while the page draws its first picture, whose cores it
        would take)."""
        if inputs.cells < self.SMALL:
            return compute(inputs)
        if not begin and inputs.cells >= self.EARLY:
            return None
        if self.done is not None and self.done[0].same(inputs, VIEWS["overview"].depends):
            overview, self.done = self.done[1], None
            return overview
        if self.thread is None or not self.thread.is_alive():
            self.thread = threading.Thread(target=self._run, args=(inputs,), daemon=True, name="attnwidget overview")
            self.thread.start()
        return None

    def _run(self, inputs: Inputs) -> None:
        start = time.perf_counter()
        try:
            self.done = (inputs, compute(inputs))
            self.seconds = time.perf_counter() - start
        except Exception as err:  # (memory, most likely) said once, in the page, instead of asked for again and again
            self.done = (inputs, {"error": f"{type(err).__name__}: {err}", "key": key(inputs)})


CHUNK = 2**23  # cells of scores the fast path holds at once (two such arrays: 64 MB)


def _torch_layer(inputs: Inputs, q, k, allowed, bias=None, sinks=None) -> tuple[np.ndarray, dict]:
    """A layer's thumbnail sums (heads × blocks × blocks) and summaries, in float32 with torch on
    every core, as core's scores and softmax compute them (within about 1e-5), a chunk of rows at
    a time: a chunk skips the keys none of its rows may read (half the work of a causal layer).
    ``sinks``: each head's learnt sink, a column of its own in the softmax (or None)."""
    torch, device = load_torch(), inputs.device
    heads, n, m = len(q), q.shape[1], k.shape[1]
    Q, K = tensor(q, device), tensor(k, device)
    if inputs.softcap is None:
        Q = Q * inputs.scale  # n × d cells scaled instead of n × m
    shut = np.zeros((n, m), dtype=bool) if allowed is None else ~np.asarray(allowed, dtype=bool)
    A = tensor(shut, device, bool)
    reach = (
        np.full(n, m) if allowed is None else np.where(allowed.any(axis=1), m - np.argmax(allowed[:, ::-1], axis=1), 0)
    )
    blocks = tensor((np.arange(n) * min(n, SIZE)) // n, device, np.int64)  # each row's block of the thumbnail
    sums = torch.zeros(heads, min(n, SIZE), m, device=device)
    first, diagonal, previous, effective, share = (torch.zeros(heads, n, device=device) for _ in range(5))
    Z = None if sinks is None else sink_column(torch, sinks, device, torch.float32)
    step = max(1, min(CHUNK // (heads * m), -(-n // 8)))  # at least 8 chunks: a causal layer's skip pays
    room = [
        torch.empty(heads * step * m, device=device) for _ in range(2)
    ]  # the scores and their exp, made once: no new memory per chunk
    for r0 in range(0, n, step):
        r1 = min(n, r0 + step)
        c1 = int(reach[r0:r1].max())
        if c1 == 0:
            continue  # rows that read nothing: their weights are all 0
        s, e = (r[: heads * (r1 - r0) * c1].view(heads, r1 - r0, c1) for r in room)
        torch.matmul(Q[:, r0:r1], K[:, :c1].transpose(1, 2), out=s)
        if inputs.softcap is not None:
            s.mul_(inputs.scale / inputs.softcap).tanh_().mul_(inputs.softcap)
        if bias is not None:
            s += tensor(bias[..., r0:r1, :c1], device)
        if shut[r0:r1, :c1].any():  # from the first column with a closed cell (a causal chunk's own corner)
            lo = int(np.argmax(shut[r0:r1, :c1].any(axis=0)))
            s[..., lo:].masked_fill_(A[r0:r1, lo:c1], float("-inf"))
        s.masked_fill_(s <= CLOSED, float("-inf"))  # closed by its score (formulas.CLOSED: a cell given 0)
        top = s.amax(dim=-1, keepdim=True)
        if Z is not None:
            top = torch.maximum(top, Z)  # the sink's column is one of the row's
        top = torch.where(torch.isfinite(top), top, 0.0)  # (a row with no cell open: as core's, no maximum)
        s.sub_(top)
        if inputs.temperature != 1:
            s.div_(inputs.temperature)  # after the maximum, as core's: no overflow at a small T
        s.clamp_(
            min=-1e30
        )  # closed cells, and scores past float32's range: finite, so that 0 weight times them is 0, not NaN
        torch.exp(s, out=e)
        closed = reach[r0:r1] == 0
        if closed.any():
            e[:, tensor(closed, device, bool)] = 0.0  # a row of closed cells reads nothing
        total = e.sum(dim=-1)
        total = torch.where(total > 0, total, 1.0)
        # entropy of the tokens' w = e / Z from s = log e: log Z − Σ w·s, without a logarithm per cell
        effective[:, r0:r1] = torch.exp(torch.log(total) - s.mul_(e).sum(dim=-1) / total)
        if Z is not None:  # the sink's term joins the row's total: its share, no token's
            own = torch.exp((Z - top) / inputs.temperature)[..., 0]
            share[:, r0:r1] = own / (total + own)
            total = total + own
        w = e.div_(total[..., None])
        first[:, r0:r1] = w[:, :, 0]
        rows = torch.arange(
            r0, max(r0, min(r1, c1)), device=device
        )  # rows with their own column, and the one before it, in reach
        diagonal[:, rows] = w[:, rows - r0, rows]
        rows = torch.arange(max(r0, 1), max(r0, 1, min(r1, c1 + 1)), device=device)
        previous[:, rows] = w[:, rows - r0, rows - 1]
        sums[:, :, :c1].index_add_(1, blocks[r0:r1], w)
    cols = _starts(m, min(m, SIZE))
    thumbs = np.add.reduceat(sums.cpu().numpy(), cols, axis=-1)
    first, diagonal, previous, effective, share = (
        a.cpu().numpy().astype(float) for a in (first, diagonal, previous, effective, share)
    )
    sink_share = share if inputs.has_sinks else None
    return thumbs.astype(float), summaries_of_rows(
        first, diagonal, previous, effective, allowed, m, cross=inputs.cross, sink_share=sink_share
    )


def _counts(height: int, width: int, n: int, m: int) -> np.ndarray:
    """How many cells each block of a height × width thumbnail of n × m weights holds."""
    return np.diff(np.r_[_starts(n, height), n])[:, None] * np.diff(np.r_[_starts(m, width), m])[None, :]


def key(inputs: Inputs) -> dict:
    """What the page compares with its own state to know whether the overview is current."""
    return VIEWS["overview"].key(inputs)
