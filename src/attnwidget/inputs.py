"""What every computed view is computed from: one description of the numbers, read from the
widget's state once, with one key that says when a result computed from it is out of date.

The overview, the measures (rollout, flow, weight × ‖value‖, the difference), the head effects
and the exported page's payload take an :class:`Inputs`, never the widget: a computation running
in the background is not disturbed by the widget changing meanwhile, and no module but the widget
reads the widget's own members.
"""

from __future__ import annotations

import warnings
from functools import cached_property
from typing import NamedTuple

import numpy as np

from . import rules, threads
from .formulas import CLOSED, _softmax_rows, allowed_cells, default_scale, scores_of
from .position import positioned

# What a computed result depends on. The page compares the plain values (its key) with its own
# state; the arrays, which it cannot compare, are compared here, by identity, when they change.
KEY = ("temperature", "causal", "sink", "scale", "softcap", "position", "rope_base", "step", "block", "sentence_index")
ARRAYS = ("tokens", "mask", "bias", "alibi_slopes", "sinks")
ROWS = 256  # weights_of scores a layer this many rows at a time
# |q|·|k|·d past this: weights_of scores a layer whole (a block's other rounding could move a weight)
NEAR_LIMIT = 1e150


def depends(names: tuple, state: dict) -> tuple:
    """``names`` without a mask or bias that each of a model's layers has of its own: its layers
    are read at those, whatever the widget's (which is then only the layer shown's copy)."""
    own = {
        "mask": bool(state.get("mask_of_layer")),
        "bias": state.get("model_bias") is not None,
        "sinks": state.get("model_sinks") is not None,
    }
    # a model's layer shown: its q, k and v are that layer's slices of model_q (and the like), named by the layer
    layered = {n: bool(state.get("layer_shown")) for n in ("q", "k", "v")}
    return tuple(n for n in names if not own.get(n) and not layered.get(n))


def stale(names: tuple, before: dict, after: dict) -> bool:
    """A result computed at ``before`` is out of date at ``after``: one of ``names`` changed."""
    return any(not rules.same(after[n], before[n]) for n in depends(names, after))


def reading_mask(mask, sink: bool, n: int, m: int):
    """The cells the numbers let rows read besides the causal rule (n × m, True: may read): the
    mask, and with ``sink`` every cell of the first token's column closed (each row is then
    renormalised over the other tokens); None when every cell may be read."""
    if not sink:
        return mask
    closed = np.ones((n, m), dtype=bool) if mask is None else np.array(mask, dtype=bool)
    closed[:, 0] = False
    return closed


def head_of(a, head: int):
    """Head ``head`` of (heads ×) n × m, the last head for one past the end; a 2-D array is its own."""
    return a if a.ndim == 2 else a[min(head, a.shape[0] - 1)]


class Inputs:
    """The numbers' inputs at the widget's ``state`` (the rules' plain state): each layer's q, k,
    reading mask and bias (a model's every layer, else the widget's own heads as one layer), the
    temperature, causal rule, scale, soft cap, the rows and keys read (the first ``step`` while
    writing) and the text; ``text``: another of a model's texts (or sentences) than the one shown,
    read at its own tokens, arrays and bias and the widget's step. ``sources``: what the widget
    switches to (sources.Sources); ``extra``: what only some views need (``effect``: a language
    model's head effects kept, False when not yet computed, None for no next token; ``device``:
    where the model ran; ``grams``, ``unprojected``: weight × ‖value‖'s)."""

    def __init__(self, state: dict, sources, text: int | None = None, **extra):
        self.state, self.sources = state, sources
        self.temperature, self.causal, self.sink = state["temperature"], state["causal"], state["sink"]
        self.cross, self.softcap = state["cross"], state["softcap"]
        self.rows, self.keys = rules.rows(state), rules.keys_read(state)
        shown = state["sentence_index"]
        self.text = shown if text is None else text
        other = sources.sentence(self.text, axes=False) if self.text != shown else None
        if other is not None:  # another text: all its tokens, or while the widget writes, its first `step`
            n = len(other["tokens"])
            self.rows = self.keys = min(state["step"], n) if rules.writing(state) else n
        self.other = other
        self.effect, self.device = extra.get("effect"), extra.get("device") or "cpu"
        self.effect_exact = extra.get("effect_exact")  # which of ``effect`` are exact (None: all), the rest estimates
        self.extra = extra

    @cached_property
    def layers(self) -> list[tuple]:
        """Each layer's (q, k, reading mask, bias, sinks): made when first read (a change that only asks
        whether a view is available reads none of them). ``sinks``: the layer's learnt sinks, one logit
        per head, or None."""
        state, other, text = self.state, self.other, self.text
        bias = state["bias"] if other is None else other.get("bias")
        # the reading mask's size: the tokens shown (and read), or the other text's rows
        n, m = (
            (self.rows, self.keys)
            if other is not None
            else (len(state["tokens"]), len(state["key_tokens"] or state["tokens"]))
        )
        if state["layer_shown"]:
            found = self.sources.layers(state["block"], state["n_layers"], text)
            # each layer's own mask where the model has them; else the widget's, for the text shown only
            masks = [f.get("mask", state["mask"] if other is None else None) for f in found]
            return [
                (f["q"], f["k"], reading_mask(mk, self.sink, n, m), f.get("bias", bias), f.get("sinks", state["sinks"]))
                for f, mk in zip(found, masks)
            ]
        q, k = (
            (state["q"], state["k"]) if other is None else (other["q"], other["k"])
        )  # your own arrays (a sentence's): one layer
        mask = state["mask"] if other is None else None  # (the widget's mask is the text shown's)
        q, k, bias = positioned(q, k, bias, state)  # the lab's RoPE or ALiBi
        return [(q, k, reading_mask(mask, self.sink, n, m), bias, state["sinks"])]

    @cached_property
    def scale(self) -> float:
        return default_scale(self.layers[0][0].shape[-1]) if self.state["scale"] is None else self.state["scale"]

    @cached_property
    def cells(self) -> int:
        """How many cells of weights every layer's heads have: what computing them costs."""
        stack = self.state.get("model_q") if self.state["layer_shown"] and self.other is None else None
        if stack is not None:  # (from the stack's shape: no remote layer is read to count them)
            return stack.size // stack.shape[-1] * self.keys
        return sum(q.size // q.shape[-1] * self.keys for q, *_ in self.layers)

    def served(self) -> dict | None:
        """A remote model's overview as its server computed it (thumbs, top, summaries: per layer), where some of
        its layers are not read yet and the widget's numbers are the model's own (temperature 1, its causal rule,
        scale, soft cap, masks and sinks, every token written); else None: computed here from every layer."""
        s = self.state
        if not s["layer_shown"] or self.other is not None:
            return None
        found = self.sources.found(s["block"], self.text)
        remote, served = getattr(found, "remote", None), getattr(found, "served", None)
        if remote is None or not remote.missing or served is None:
            return None
        own = (
            s["temperature"] == 1
            and not s["sink"]
            and s["causal"] == found.causal
            and s["scale"] == found.scale
            and s["softcap"] == found.softcap
            and not rules.writing(s)
            and (s["bias"] is None) == (found.bias is None)
            and (s.get("mask_of_layer") or s["mask"] is None)
            and (s.get("model_sinks") is not None or s["sinks"] is None)
        )
        return served if own else None

    def texts(self):
        """(tokens, Inputs) of each of the widget's texts in turn (its sentences, or a model's
        texts; this one alone when it has one), each read when its turn comes. A model's tokens
        are its token ids (two pieces with one label, " the" and "the", are different tokens)."""
        for t in range(max(1, len(self.state["sentences"] or ()))):
            inputs = self if t == self.text else Inputs(self.state, self.sources, t, **self.extra)
            model = self.state["layer_shown"] and not self.state["block"]  # (not one's own vectors, nor a block's)
            ids = self.sources.ids(t) if model else None
            yield (ids or (self.state["tokens"] if inputs.other is None else inputs.other["tokens"])), inputs

    def key(self, names: tuple = KEY, **more) -> dict:
        """The plain values among ``names`` (what the page compares with its own state), and ``more``."""
        plain = lambda v: list(v) if isinstance(v, tuple) else v
        return {**{n: plain(self.state[n]) for n in names if n in KEY or n in PLAIN}, **more}

    def same(self, other: Inputs, names: tuple) -> bool:
        """The same inputs as ``other`` for a result that depends on ``names`` (and the effects kept)."""
        return not stale(names, other.state, self.state) and self.effect is other.effect

    @cached_property
    def has_sinks(self) -> bool:
        """Some layer has learnt sinks: the summaries say the share they take."""
        return any(layer[4] is not None for layer in self.layers)

    def each_layer(self, up_to: int | None = None):
        """(q, k, allowed, bias, sinks) of each layer up to ``up_to`` (every layer without it), q and k
        heads × rows × d, allowed the cells rows may read (None: all), sinks one logit per head (or None)."""
        n, m = self.rows, self.keys
        for at, (q, k, mask, bias, sinks) in enumerate(self.layers):
            if up_to is not None and at > up_to:
                return
            allowed = allowed_cells(n, self.causal, None if mask is None else mask[:n, :m], m)
            q, k = (a[..., :r, :] if a.ndim == 3 else a[None, :r] for a, r in ((q, n), (k, m)))
            yield q, k, allowed, None if bias is None else bias[..., :n, :m], sinks

    def weights_of(self, q, k, allowed, bias=None, sinks=None, out=None, layout=None, after=None) -> np.ndarray:
        """A layer's weights, heads × n × m, in float64 as core computes them (head_summary's numbers),
        written into ``out`` when it has that shape (``sinks``: each head's learnt sink, or None); the cells
        ``layout`` (layout_of's; every row's
        without it) leaves uncomputed are 0. ``after``: the layout of the call whose weights ``out`` holds, nothing
        written into it since (the last layer's): where it is this one, those cells are 0 already and
        not written again (torch's path zeroes its columns all the same).

        numpy computes them, the heads shared among the cores; for a model on a CUDA GPU, torch does, in
        float64 there. The numbers are those of the whole matrix, to rounding."""
        n, m = len(q[0]), len(k[0])
        fits = out is not None and out.shape == (len(q), n, m)
        out = out if fits else np.empty((len(q), n, m))
        layout = layout_of(q, k, allowed) if layout is None else layout
        zeroed = fits and after is not None and (after.blocks, after.skipped) == (layout.blocks, layout.skipped)
        blocks = layout.blocks
        # every score finite and above CLOSED (none of the bias's -inf or model's lowest): the softmax need not look
        scale = default_scale(q.shape[-1]) if self.scale is None else self.scale
        bound = abs(self.softcap) if self.softcap is not None else layout.largest * abs(scale)
        bounded = bound + (0.0 if bias is None else float(np.abs(bias).max(initial=0))) < -CLOSED / 10
        if not zeroed:
            out[:, : layout.skipped] = 0.0
        if not blocks:
            return out
        if _on_gpu(self.device) and not layout.whole:  # (a model on a GPU: the weights made there)
            return _torch_weights(self, q, k, allowed, bias, blocks, out, sinks)
        closed = None if allowed is None else ~allowed  # (once for every head)

        def head(h):
            qh, kh, bh = q[h].astype(float), k[h].astype(float), None if bias is None else head_of(bias, h)
            z = None if sinks is None else sinks[h]
            for r0, r1, c in blocks:
                part = out[h, r0:r1, :c]
                if not zeroed:
                    out[h, r0:r1, c:] = 0.0  # (columns no row of the block reads)
                scores_of(qh[r0:r1], kh[:c], self.scale, None if bh is None else bh[r0:r1, :c], self.softcap, out=part)
                cut = (None, None) if allowed is None else (allowed[r0:r1, :c], closed[r0:r1, :c])
                _softmax_rows(part, self.temperature, cut[0], overwrite=True, closed=cut[1], bounded=bounded, sink=z)

        # each core a head (12 layers at 1,024 tokens: 0.54 s, 0.86 s with BLAS's threads)
        if n * m >= threads.LEAST**2:
            threads.each(head, range(len(q)))
        else:
            for h in range(len(q)):
                head(h)
        return out

    def weights(self, up_to: int | None = None):
        """(weights, allowed) of each layer up to ``up_to`` in turn, each layer's written over the last's
        (new memory for every layer costs more than the weights): copy a layer's to keep it, and write
        nothing into it (the cells it leaves 0 are not written again for the next layer)."""
        held, last = None, None
        for q, k, allowed, bias, sinks in self.each_layer(up_to):
            layout = layout_of(q, k, allowed)
            held, last = self.weights_of(q, k, allowed, bias, sinks, out=held, layout=layout, after=last), layout
            yield held, allowed

    def across(self, what: str, up_to: int | None = None):
        """Each layer's weights in turn for a view that follows the text through its layers."""
        if self.cross:
            raise ValueError(ACROSS_CROSS.format(what=what))
        count = len(self.layers[: None if up_to is None else max(0, up_to + 1)])
        return _Counted((w for w, _ in self.weights(up_to)), count)


class _Counted:
    """An iterator that says how many it yields (rollout then makes its result once)."""

    def __init__(self, items, count: int):
        self.items, self.count = items, count

    def __iter__(self):
        return self

    def __next__(self):
        return next(self.items)

    def __length_hint__(self) -> int:
        return self.count


class Layout(NamedTuple):
    """The cells Inputs.weights_of computes: ``blocks`` (first row, row past the last, columns), the
    ``skipped`` rows before them (left 0), the largest |score| / scale, and whether the layer is
    scored ``whole`` (near float64's limit)."""

    blocks: tuple
    skipped: int
    largest: float
    whole: bool


def layout_of(q, k, allowed, start: int = 0, largest: float | None = None) -> Layout:
    """Which cells weights_of computes for a layer: blocks of ROWS rows, each scored only up to the
    last column one of its rows may read (a causal layer: about half its cells); a block that ends at
    or before ``start`` not at all (the difference's rows two texts share)."""
    n, m = len(q[0]), len(k[0])
    largest = largest_score(q, k) if largest is None else largest
    if not largest < NEAR_LIMIT:
        return Layout(((0, n, m),), 0, largest, True)  # scores near float64's limit: a block's other rounding
    reach = np.full(n, m) if allowed is None else np.where(allowed.any(axis=1), m - allowed[:, ::-1].argmax(axis=1), 0)
    starts = list(range(0, n, ROWS))
    if len(starts) > 1 and n - starts[-1] < 2:
        starts.pop()  # (no block of one row: numpy takes a product of one row another way, to other roundings)
    # (rows r0 to r1, read up to column c; nor of one column)
    blocks = [(r0, r1, min(m, max(2, int(reach[r0:r1].max())))) for r0, r1 in zip(starts, [*starts[1:], n])]
    kept = tuple(b for b in blocks if b[1] > start)  # (the blocks of every row's: the same numbers)
    return Layout(kept, kept[0][0] if kept else n, largest, False)


def largest_score(q, k) -> float:
    """The largest |score| / scale a layer's q and k can give: |q|'s largest × |k|'s largest × d."""
    most = [float(np.maximum(a.max(initial=0), -a.min(initial=0))) for a in (q, k)]  # (no |a| made; NaN stays)
    return most[0] * most[1] * q.shape[-1]


def load_torch():
    """torch, or None where it is not installed."""
    try:
        import torch
    except ImportError:
        return None
    return torch


def tensor(a, device, dtype=np.float32):
    """A torch tensor of ``a`` on ``device`` (read-only arrays, the widget's own, are fine: torch only reads them)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return load_torch().from_numpy(np.ascontiguousarray(a, dtype=dtype)).to(device)


GPUS = ("cuda",)  # device types whose torch computes the research views' weights in float64 (Apple's mps has none)


def _on_gpu(device) -> bool:
    """Whether ``device`` is a GPU torch computes the weights on ("cpu", the default, never imports torch)."""
    if device is None or str(device) == "cpu":
        return False
    torch = load_torch()
    return torch is not None and torch.device(device).type in GPUS


def _torch_weights(inputs: Inputs, q, k, allowed, bias, blocks, out: np.ndarray, sinks=None) -> np.ndarray:
    """weights_of's numbers by torch in float64 on ``inputs.device``, every head of a block of rows at
    once, each step as core's scores_of and _softmax_rows take it (a bias of q's heads or of one; each
    head's learnt sink, a column of its own in the softmax)."""
    torch, device = load_torch(), inputs.device
    Q, K = tensor(q, device, np.float64), tensor(k, device, np.float64).transpose(-1, -2)
    B = None if bias is None else tensor(bias, device, np.float64)
    shut = None if allowed is None else tensor(~np.asarray(allowed, dtype=bool), device, bool)
    into = torch.from_numpy(out)
    scale = inputs.scale
    Z = None if sinks is None else sink_column(torch, sinks, device)
    room = torch.empty(max((r1 - r0) * c for r0, r1, c in blocks) * len(q), dtype=torch.float64, device=device)
    for r0, r1, c in blocks:  # (one block's scores in `room`, made once: new memory costs more than the sums)
        s = torch.matmul(Q[:, r0:r1], K[:, :, :c], out=room[: len(q) * (r1 - r0) * c].view(len(q), r1 - r0, c))
        s *= scale
        if inputs.softcap is not None:
            s.div_(inputs.softcap).tanh_().mul_(inputs.softcap)
        if B is not None:
            s += B[..., r0:r1, :c]
        s.clamp_(-np.finfo(float).max, np.finfo(float).max)  # (a score that overflowed still has a row maximum)
        if shut is not None:
            s.masked_fill_(shut[r0:r1, :c], -np.inf)
        s.masked_fill_(s <= CLOSED, -np.inf)
        top = s.amax(dim=-1, keepdim=True)
        if Z is not None:
            top = torch.maximum(top, Z)  # the sink's column is one of the row's
        top.masked_fill_(top == -np.inf, 0.0)  # a row that reads nothing: all its weights 0, not NaN
        s -= top
        if inputs.temperature != 1:
            s /= inputs.temperature
        s.exp_()
        total = s.sum(dim=-1, keepdim=True)
        if Z is not None:
            total += torch.exp((Z - top) / inputs.temperature)  # the sink's share, dropped from the row
        s /= total.masked_fill_(total == 0, 1.0)
        into[:, r0:r1, :c].copy_(s)
        into[:, r0:r1, c:] = 0.0
    return out


def sink_column(torch, sinks, device, dtype=None):
    """Each head's learnt sink as a heads × 1 × 1 tensor of logits, -inf where a head has none (formulas.CLOSED)."""
    z = np.asarray(sinks, dtype=np.float64)
    z = np.where(z > CLOSED, z, -np.inf)[:, None, None]
    return torch.from_numpy(z).to(device=device, dtype=dtype or torch.float64)


# the plain values a key may hold besides KEY's: the view's own choices of layer and head, and the compressed KV
# cache's row and setting (so a page knows the layer's numbers it holds are for the row and cache it shows)
PLAIN = ("layer", "head", "measure", "focus", "kv_method", "kv_budget", "kv_keys", "cell")
ACROSS_CROSS = (
    "{what} follows a text through its own layers: it is for self-attention, not cross-attention; "
    "show the encoder's or the decoder's self-attention instead (w.block = 'encoder' or 'decoder')"
)
