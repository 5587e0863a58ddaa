"""A model's attention over a long text, held as each layer's q, k and v and computed block by block
(blockwise.Heads): exact rows, tiles, pooled maps, summaries and outputs, nothing of size n × n.

    long = LongAttention.from_transformers(model, tokenizer, text)   # 32,768 tokens: the model's own pass
    long.rows(layer=5, positions=[-1])          # every head's weights of the last token, exact
    long.map(layer=5, head=3, size=512)         # the whole head pooled onto 512 × 512 pixels
    long.tile(layer=5, head=3, rows=(1000, 1256), cols=(0, 256))   # any region, cell by cell
    long.overview(size=32)                      # every head's thumbnail and summaries
"""

from __future__ import annotations

import numbers
import threading

import numpy as np

from . import kvcache
from .blockwise import Cells, Heads
from .integrations.long import LongLayer, capture_long

__all__ = ["LongAttention", "LongLayer"]

MAX_CELLS = 2**25  # rows() at once: 256 MB of weights and scores in float32
MAX_PIXELS = 4096  # a map's side: a map is held whole (float64, its largest and its mean)
TEMPERATURES_KEPT = 2  # each layer's heads kept at this many temperatures (rows' sums: heads × n × 2 floats each)


def _temperature(t) -> float:
    if isinstance(t, bool) or not isinstance(t, numbers.Real) or not (np.isfinite(float(t)) and float(t) > 0):
        raise ValueError(f"temperature must be finite and > 0, got {t}")
    return float(t)


class LongAttention:
    """Every layer of a model's attention over one long text. ``layers``: the model's own layer
    numbers -> LongLayer (a hybrid model's attention layers keep their numbers). ``temperature``
    divides every score, as the widget's does; set it and each layer is computed again when asked.
    rows(), tile(), map() and region() also take a ``temperature`` of their own (a widget's, say),
    leaving this one as it is."""

    _temperature: float

    def __init__(self, tokens, layers: dict[int, LongLayer], *, temperature: float = 1.0, name: str = ""):
        if not layers:
            raise ValueError("layers must hold at least one layer: {layer number: LongLayer(q, k, v, ...)}")
        self.tokens = [str(t) for t in tokens]
        self.name = name
        self._layers = dict(layers)
        n = {int(np.shape(x.q)[1]) for x in self._layers.values()}
        if n != {len(self.tokens)}:
            raise ValueError(f"each layer's q must have one row per token ({len(self.tokens)}); got {sorted(n)}")
        self._heads: dict[tuple[int, float], Heads] = {}
        self._lock = threading.Lock()  # (a page's map is computed in a thread of its own)
        self.temperature = temperature
        for x in self.layers:  # each layer's options checked now, not at its first question
            self.heads(x)

    @property
    def temperature(self) -> float:
        return self._temperature

    @temperature.setter
    def temperature(self, t: float) -> None:
        self._temperature = _temperature(t)

    @property
    def layers(self) -> list[int]:
        """The model's own numbers of the layers held."""
        return list(self._layers)

    def __len__(self) -> int:
        return len(self.tokens)

    def heads(self, layer: int, temperature: float | None = None) -> Heads:
        """Layer ``layer``'s heads (blockwise.Heads) at ``temperature`` (default: this one's), made when
        first asked; each layer's kept at the last TEMPERATURES_KEPT temperatures asked (its rows' sums
        are for one temperature)."""
        if layer not in self._layers:
            raise ValueError(f"layer {layer!r} is not one of the layers held: {self.layers}")
        t = self._temperature if temperature is None else _temperature(temperature)
        with self._lock:
            if (layer, t) not in self._heads:
                x = self._layers[layer]
                self._heads[layer, t] = Heads(
                    x.q, x.k, x.v, scale=x.scale, temperature=t, causal=x.causal, window=x.window, softcap=x.softcap
                )
                for old in [key for key in self._heads if key[0] == layer][:-TEMPERATURES_KEPT]:
                    del self._heads[old]
            return self._heads[layer, t]

    def rows(self, layer: int, positions, heads=None, *, temperature: float | None = None) -> Cells:
        """The weights and scores of the rows at ``positions`` (whole numbers; negative ones count from
        the end) of each of ``heads`` (default: all), heads × len(positions) × n each, exact. Up to
        MAX_CELLS cells at once: for more, ``tile`` a region or ``map`` the whole head."""
        at, n = np.asarray(positions).reshape(-1), len(self)
        if at.size and not (np.issubdtype(at.dtype, np.integer) and (at >= -n).all() and (at < n).all()):
            raise ValueError(f"positions must be whole numbers from {-n} to {n - 1}, got {positions!r}")
        count = self.heads(layer, temperature).heads if heads is None else np.atleast_1d(heads).size
        if count * at.size * n > MAX_CELLS:
            raise ValueError(
                f"{count} heads × {at.size} rows × {n} tokens is {count * at.size * n:,} cells, more than rows() "
                f"gives at once ({MAX_CELLS:,}): ask fewer rows, tile() a region, or map() the whole head"
            )
        return self.heads(layer, temperature).rows(np.where(at < 0, at + n, at).astype(np.int64), heads)

    def tile(self, layer: int, head: int, rows: tuple[int, int], cols: tuple[int, int], *, temperature=None) -> Cells:
        """The weights and scores of rows[0]..rows[1] − 1 × cols[0]..cols[1] − 1 of one head, exact."""
        return self.heads(layer, temperature).tile(head, rows[0], rows[1], cols[0], cols[1])

    def map(
        self,
        layer: int,
        head: int,
        size: int | tuple[int, int] = 512,
        how: str = "max",
        progress=None,
        *,
        temperature=None,
    ) -> np.ndarray:
        """One head's whole weight map pooled onto size × size pixels (or (rows, cols)): each pixel's
        largest weight ("max", where a sharp head's single cells stay visible) or its mean ("mean")."""
        rows, cols = tuple(size) if isinstance(size, (tuple, list)) else (size, size)
        if not all(isinstance(x, numbers.Integral) and 1 <= x <= MAX_PIXELS for x in (rows, cols)):
            raise ValueError(f"size must be a whole number of pixels from 1 to {MAX_PIXELS}, or two, got {size!r}")
        return self.heads(layer, temperature).pooled(head, rows, cols, how, progress)

    def region(
        self,
        layer: int,
        head: int,
        rows: tuple[int, int],
        cols: tuple[int, int],
        size=(256, 256),
        how: str = "max",
        *,
        temperature: float | None = None,
    ) -> np.ndarray:
        """Rows rows[0]..rows[1] − 1 × columns cols[0]..cols[1] − 1 of one head pooled onto at most
        ``size`` pixels, as map() pools the whole (a region no larger than its pixels is its exact
        cells): what a zoomed view shows. Computed a band of rows at a time, exact."""
        if how not in ("max", "mean"):
            raise ValueError(f'how must be "max" or "mean", got {how!r}')
        heads, (r0, r1), (c0, c1) = self.heads(layer, temperature), map(int, rows), map(int, cols)
        if not all(isinstance(x, numbers.Integral) and 1 <= int(x) <= MAX_PIXELS for x in size):
            raise ValueError(f"size must be a whole number of pixels from 1 to {MAX_PIXELS} on each side, got {size!r}")
        heads.check_region(r0, r1, c0, c1)
        P, Q = min(size[0], r1 - r0), min(size[1], c1 - c0)
        if (P, Q) == (r1 - r0, c1 - c0):
            return heads.tile(head, r0, r1, c0, c1).weights
        redges = r0 - (-np.arange(P + 1) * (r1 - r0) // P)  # pixel p: rows redges[p] to redges[p + 1] − 1
        cstarts = -(-np.arange(Q) * (c1 - c0) // Q)
        reduce = np.maximum if how == "max" else np.add
        out = np.zeros((P, Q))
        band = max(1, heads.budget // (2 * (c1 - c0) * heads.be.itemsize))  # rows whose tile fits the budget
        for a in range(r0, r1, band):
            b = min(r1, a + band)
            w = reduce.reduceat(heads.tile(head, a, b, c0, c1).weights, cstarts, axis=1)
            pixel = np.searchsorted(redges, np.arange(a, b), side="right") - 1
            starts = np.flatnonzero(np.r_[True, pixel[1:] != pixel[:-1]])
            at = pixel[starts]
            out[at] = reduce(out[at], reduce.reduceat(w, starts, axis=0))
        if how == "mean":
            out /= np.outer(np.diff(redges), np.diff(np.r_[cstarts, c1 - c0]))
        return out

    def summaries(self, layer: int, heads=None) -> dict[str, np.ndarray]:
        """The overview's summaries of the layer's heads (formulas.head_summaries), one number a head."""
        return self.heads(layer).summaries(heads)

    def output(self, layer: int, head: int) -> np.ndarray:
        """One head's output, its weights × values (n × d_v), a band of rows at a time."""
        return self.heads(layer).output(head)

    def head_scores(self, names=("streaming",), progress=None) -> dict[str, np.ndarray]:
        """Scores of every head over this text, layers × heads, block by block: ``"streaming"``, the mean
        over rows of each row's weight on the first kvcache.STREAMING[0] tokens and its nearest
        STREAMING[1] (atlas.text_scores' "streaming", nothing n × n held). The retrieval score needs the
        model to write: attnwidget.needle."""
        names = (names,) if isinstance(names, str) else tuple(names)
        if not names or set(names) - {"streaming"}:
            raise ValueError(f'a long text\'s head scores are "streaming"; got {list(names)!r}')
        count, done, out = sum(self.heads(x).heads for x in self.layers), 0, []
        for x in self.layers:
            heads, row = self.heads(x), []
            for h in range(heads.heads):
                row.append(float(kvcache.one_pass(heads, h)[1].mean()))
                done += 1
                if progress is not None:
                    progress(done / count)
            out.append(row)
        return {"streaming": np.array(out)}

    def kv_keep(self, layer: int, method: str, budget: int, position: int = -1, **options) -> dict:
        """A compressed KV cache of ``layer`` (kvcache's methods and options; the model's grouped heads
        share their key-value head's keys): {"kept": kv_heads × n booleans, and for the row at
        ``position`` each query head's "retained" mass and output "change" (‖o′ − o‖ / ‖o‖), with
        "layer_retained" and "layer_change"}, computed block by block."""
        heads = self.heads(layer)
        keep = kvcache.from_heads(heads, method, budget, **options)  # (the model's groups: no group= of one's own)
        row = self.rows(layer, [position]).weights[:, 0]  # heads × n, exact
        v = np.repeat(heads.be.numpy(heads.v), heads.group, axis=0)
        return {"kept": keep, **kvcache.losses(row, v, np.repeat(keep, heads.group, axis=0))}

    def overview(self, size: int = 32, progress=None) -> dict:
        """Every head at a glance, in one pass over each: {"thumbnails": layers × heads × size × size
        (each pixel's largest weight), "summaries": {name: layers × heads}, "layers": the layer numbers}."""
        thumbs, sums = [], []
        count = sum(self.heads(x).heads for x in self.layers)
        done = 0
        for x in self.layers:
            heads = self.heads(x)
            row, summary = [], []
            for h in range(heads.heads):
                tell = None if progress is None else (lambda f, d=done: progress((d + f) / count))
                scan = heads.scan(h, size, size, tell)
                row.append(np.asarray(scan[0]))  # (asked with pixels: a map)
                summary.append(scan.summaries)
                done += 1
            thumbs.append(np.stack(row))
            sums.append(summary)
        names = list(sums[0][0])
        return {
            "thumbnails": np.stack(thumbs) if len({t.shape for t in thumbs}) == 1 else thumbs,
            "summaries": {s: np.array([[h[s] for h in layer] for layer in sums]) for s in names},
            "layers": self.layers,
        }

    @classmethod
    def from_transformers(cls, model, tokenizer, text: str, *, temperature: float = 1.0, progress=None):
        """Read ``model`` (a transformers model on its attention interface) on ``text`` with its own
        attention kernel, keeping each layer's q, k and v as it made them; every layer is held to the
        model's own result on a sample of its rows (integrations/long.py), or refused. ``progress(count)``
        is told how many layers are read so far."""
        import torch

        from .integrations.common import _evaluating, _tokens_of
        from .integrations.hf import _base_model, _display_name

        if not isinstance(text, str):
            raise TypeError(f"text must be a string; got {type(text).__name__}")
        base = _base_model(model)
        enc = tokenizer(text, return_tensors="pt")
        device = next(base.parameters()).device
        ids = enc["input_ids"].to(device)
        if ids.shape[1] == 0:
            raise ValueError(f"{text[:40]!r} gives no tokens")
        with _evaluating(base), torch.no_grad():
            layers = capture_long(base, on_call=progress, input_ids=ids)
        return cls(
            _tokens_of(tokenizer, ids[0].tolist()),
            layers,
            temperature=temperature,
            name=_display_name(base.config, model),
        )
