"""A model's layers × heads at a glance, computed in the kernel: each head's weights as a
thumbnail (block means, as the page draws them) and its summaries (core.head_summaries), at the
widget's temperature, causal rule, each layer's mask, sink and step.

The page holds the layer it shows; every other layer stays here, and the page gets this overview
instead (AttentionWidget.overview, asked for by the page when its inputs change).
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from .core import _softmax_rows, allowed_cells, head_summaries, scores_of

SIZE = 84  # a thumbnail's side, at most: js/thumbs.js draws its own at the same size


def _starts(count: int, side: int) -> np.ndarray:
    """The first row (or column) of each of ``side`` blocks of ``count``: row i is in block ⌊i·side/count⌋."""
    block = (np.arange(count) * side) // count
    return np.flatnonzero(np.r_[True, block[1:] != block[:-1]])


def thumbnail(weights: np.ndarray) -> np.ndarray:
    """The mean weight of each block of cells of (heads ×) n × m weights: at most SIZE × SIZE."""
    n, m = weights.shape[-2:]
    rows, cols = _starts(n, min(n, SIZE)), _starts(m, min(m, SIZE))
    sums = np.add.reduceat(np.add.reduceat(weights, rows, axis=-2), cols, axis=-1)
    counts = np.diff(np.r_[rows, n])[:, None] * np.diff(np.r_[cols, m])[None, :]
    return sums / counts


FAST_FROM = 2**22  # cells in a layer's heads: from here the overview's weights are torch's, in float32


def each_layer(widget, fast=False):
    """(weights, allowed) of each layer shown in the overview, weights heads × n × m: a model's
    every layer, each at its own mask, or the widget's own heads as one layer. In float64 with
    numpy (head_summary's numbers); ``fast``, a large layer's in float32 with torch when it is
    installed (every core; the model's own precision), within about 1e-6 of those."""
    found = [widget._sources.layer(widget.block, i) for i in range(widget.n_layers)] if widget.layer_shown else []
    layers = [(f["q"], f["k"], f.get("mask", widget.mask)) for f in found] or [(widget.q, widget.k, widget.mask)]
    n, m = widget._rows(), widget._keys_read()  # while generating: the tokens written so far
    for q, k, own in layers:
        mask = widget._reading_mask(own)
        allowed = allowed_cells(n, widget.causal, None if mask is None else mask[:n, :m], m)
        q, k = (a[..., :r, :] if a.ndim == 3 else a[None, :r] for a, r in ((q, n), (k, m)))
        if fast and len(q) * n * m >= FAST_FROM and _torch() is not None:
            yield _torch_weights(widget, q, k, allowed), allowed
            continue
        bias = [None if widget.bias is None else widget._head_of(widget.bias, h)[:n, :m] for h in range(len(q))]
        scores = (scores_of(q[h].astype(float), k[h].astype(float), widget.scale, bias[h], widget.softcap) for h in range(len(q)))
        yield np.stack([_softmax_rows(s, widget.temperature, allowed) for s in scores]), allowed


def compute(widget) -> dict:
    """The overview the page draws: {layers, heads, width, height, averaged, thumbs (uint8,
    layers · heads × height × width, each scaled to its own largest block mean), top (those
    largest means), summaries ({name: layers · heads numbers, None for NaN}), key (the inputs it
    was computed at)}."""

    def one(layer):  # numpy lets go of the GIL: layers are summed up on every core at once
        weights, allowed = layer
        t = thumbnail(weights)
        peak = t.max(axis=(1, 2))
        return np.rint(255 * t / np.where(peak > 0, peak, 1)[:, None, None]).astype(np.uint8), peak, head_summaries(weights, allowed, cross=widget.cross)

    workers = os.cpu_count() or 1
    done, pending = [], []
    with ThreadPoolExecutor(max_workers=workers) as pool:
        for layer in each_layer(widget, fast=True):  # at most a few layers' weights in memory at once
            pending.append(pool.submit(one, layer))
            if len(pending) > workers:
                done.append(pending.pop(0).result())
        done += [p.result() for p in pending]
    thumbs = [t for t, _, _ in done]
    top = [float(p) for _, peak, _ in done for p in peak]
    rows = [r for _, _, r in done]
    stack = np.ascontiguousarray(np.concatenate(thumbs))
    n, m = widget._rows(), widget._keys_read()
    return {
        "layers": len(rows),
        "heads": len(stack) // len(rows),
        "width": int(stack.shape[2]),
        "height": int(stack.shape[1]),
        "averaged": bool(stack.shape[1] < n or stack.shape[2] < m),
        "thumbs": {"shape": list(stack.shape), "dtype": "uint8", "view": memoryview(stack.reshape(-1).data)},
        "top": top,
        "summaries": {name: [None if np.isnan(v) else float(v) for r in rows for v in r[name]] for name in rows[0]},
        "key": key(widget),
    }


def _torch():
    try:
        import torch
    except ImportError:
        return None
    return torch


def _torch_weights(widget, q, k, allowed) -> np.ndarray:
    """Every head's weights at once, as core's scores and softmax compute them, in float32."""
    torch = _torch()
    n, m = q.shape[1], k.shape[1]
    Q, K = (torch.from_numpy(np.array(a, dtype=np.float32)) for a in (q, k))
    s = (widget.attention.scale if widget.scale is None else widget.scale) * (Q @ K.transpose(1, 2))
    if widget.softcap is not None:
        s = widget.softcap * torch.tanh(s / widget.softcap)
    if widget.bias is not None:
        s += torch.from_numpy(np.ascontiguousarray(widget.bias[..., :n, :m], dtype=np.float32))
    if allowed is not None:
        s.masked_fill_(~torch.from_numpy(np.ascontiguousarray(allowed)), float("-inf"))
    w = torch.softmax(s / widget.temperature, dim=-1)
    return torch.nan_to_num(w, nan=0.0).numpy()  # a row that may read nothing: all 0, as core's


def key(widget) -> dict:
    """What the page compares with its own state to know whether the overview is current."""
    return {"temperature": widget.temperature, "causal": widget.causal, "sink": widget.sink, "step": widget.step, "block": widget.block}
