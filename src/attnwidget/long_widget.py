"""LongWidget: the page for a long text (attnwidget.LongAttention), at any length.

What reaches the page is bounded whatever n: the tokens, and what the page asks for as it is used:
one head's pooled map, the focused row (the head shown's whole, every head's strongest keys), and the
regions it zooms into (exact cells once they fit its pixels). Nothing of size n × n is made.

The page asks ({"ask": "map" | "row" | "region", "id": its number, ...}) and is answered
({"kind": the same, "id", ...} with the numbers as float32 buffers, or {"kind": "error", "id",
"message"}); a map, the slow one, is computed in a thread of its own, telling its progress
({"kind": "progress", "id", "fraction"}), so rows and regions are answered meanwhile.
"""

from __future__ import annotations

import base64
import concurrent.futures
import numbers
import os
import pathlib
import threading
import time

import anywidget
import numpy as np
import traitlets

from .formulas import effective_tokens
from .long import LongAttention, LongLayer, _temperature

__all__ = ["LongWidget"]

_STATIC = pathlib.Path(__file__).parent / "static"
MAX_SIDE = 1024  # pixels on a side of a map or a pooled region the page may ask for (4 MB of float32)
MAX_EXACT = 512 * 512  # exact cells in one answer (their weights and scores: 2 MB)
MAX_REGION = 2**26  # cells a region the page asks for may span (about a second): past it, the map serves
TOP_KEYS = 8  # each head's strongest keys of the focused row, named in the page
MAPS_KEPT = 8  # pooled maps kept for a switch back (each MAX_SIDE² × 2 floats at most)


class _Superseded(Exception):
    """A map nobody will see: a newer one was asked by the same view, or the widget closed."""


class LongWidget(anywidget.AnyWidget):
    """A long text's attention in a notebook, at any length: the head's whole map, pooled onto the
    page's pixels, zoomed and panned down to single cells computed exactly when asked; a token strip
    that holds only what is on screen, searchable by text or position; the focused row drawn exactly,
    its strongest keys named. ``LongWidget(long)`` shows a ``LongAttention``;
    ``LongWidget(tokens=..., q=..., k=..., v=...)`` one layer of your own arrays (heads × n × d; k and v
    may have fewer heads, shared in groups), with ``causal``, ``window``, ``scale`` and ``softcap``."""

    _esm, _css = (
        (_STATIC / "long.js", _STATIC / "long.css")
        if os.environ.get("ANYWIDGET_HMR")
        else ((_STATIC / "long.js").read_text(encoding="utf-8"), (_STATIC / "long.css").read_text(encoding="utf-8"))
    )

    tokens = traitlets.List(traitlets.Unicode(), read_only=True).tag(sync=True)
    """The text's tokens (read-only)."""
    layers = traitlets.Dict(read_only=True).tag(sync=True)
    """Each layer held, by the model's own number: {"heads", "causal", "window"} (read-only)."""
    name = traitlets.Unicode(read_only=True).tag(sync=True)
    """The model's name, or ''."""
    layer = traitlets.Int().tag(sync=True)
    """The layer shown (the model's own number)."""
    head = traitlets.Int(0).tag(sync=True)
    """The head shown."""
    focus = traitlets.Int(0).tag(sync=True)
    """The focused row (the query token's position): the one drawn exactly, its strongest keys named."""
    how = traitlets.Enum(("max", "mean"), "max").tag(sync=True)
    """How a pixel of the map holds its cells: their largest weight ("max": a sharp head's single cells
    stay visible) or their mean."""
    temperature = traitlets.Float(1.0).tag(sync=True)
    """Divides every score before the softmax, as AttentionWidget's dial does."""

    def __init__(
        self,
        long: LongAttention | None = None,
        *,
        tokens=None,
        q=None,
        k=None,
        v=None,
        causal=True,
        window=None,
        scale=None,
        softcap=None,
        layer=None,
        head=0,
        focus=-1,
        temperature=None,
        how="max",
    ):
        if long is None:
            if tokens is None or q is None or k is None or v is None:
                raise TypeError("LongWidget() needs a LongAttention, or tokens=, q=, k= and v= (one layer's arrays)")
            long = LongAttention(tokens, {0: LongLayer(q, k, v, scale, causal, window, softcap)})
        elif not isinstance(long, LongAttention):
            raise TypeError(f"LongWidget(long) takes an attnwidget.LongAttention, got {type(long).__name__}")
        elif any(x is not None for x in (tokens, q, k, v)):
            raise TypeError("give a LongAttention or tokens=, q=, k=, v=, not both")
        self.long = long
        n = len(long)
        shapes = {
            str(x): {"heads": long.heads(x).heads, "causal": long.heads(x).causal, "window": long.heads(x).window}
            for x in long.layers
        }
        super().__init__()
        self.set_trait("tokens", long.tokens)
        self.set_trait("layers", shapes)
        self.set_trait("name", long.name)
        self._maps: dict = {}
        self._jobs: concurrent.futures.ThreadPoolExecutor | None = None
        self._latest_map: dict = {}  # each view's last map asked for: (its id); an earlier one is not computed
        self._closed = False
        self._lock = threading.Lock()
        try:
            with self.hold_trait_notifications():
                self.layer = long.layers[0] if layer is None else layer
                self.head, self.how = head, how
                self.focus = int(focus) + n if isinstance(focus, numbers.Integral) and -n <= int(focus) < 0 else focus
                self.temperature = long.temperature if temperature is None else temperature
        except BaseException:  # (refused: no widget is left open behind the error)
            self.close()
            raise
        self.on_msg(lambda _, content, buffers: self._answer(content))

    @classmethod
    def from_transformers(cls, model, tokenizer, text: str, **options) -> LongWidget:
        """Read ``model`` on ``text`` with its own attention kernel (LongAttention.from_transformers) and
        show it; ``options`` as the constructor's (layer, head, focus, temperature, how)."""
        return cls(LongAttention.from_transformers(model, tokenizer, text), **options)

    # --- the state: each value checked, a bad one refused with what to give ---

    @traitlets.validate("layer")
    def _valid_layer(self, proposal):
        if str(proposal.value) not in self.layers:
            raise traitlets.TraitError(f"layer {proposal.value} is not held; the layers are {self.long.layers}")
        return proposal.value

    @traitlets.validate("head")
    def _valid_head(self, proposal):
        heads = self.layers[str(self.layer)]["heads"]
        if not 0 <= proposal.value < heads:
            raise traitlets.TraitError(f"head {proposal.value} is not one of layer {self.layer}'s 0 to {heads - 1}")
        return proposal.value

    @traitlets.validate("focus")
    def _valid_focus(self, proposal):
        if not 0 <= proposal.value < len(self.tokens):
            raise traitlets.TraitError(
                f"focus must be a position from 0 to {len(self.tokens) - 1}, got {proposal.value}"
            )
        return proposal.value

    @traitlets.validate("temperature")
    def _valid_temperature(self, proposal):
        return _temperature(proposal.value)  # (this widget's own: a LongAttention shown twice keeps its own)

    @traitlets.observe("layer")
    def _layer_changed(self, change):
        self.head = min(self.head, self.layers[str(change.new)]["heads"] - 1)

    # --- the numbers of what is shown, for Python ---

    def row(self) -> np.ndarray:
        """Every head's weights of the focused row in the layer shown (heads × n), exact."""
        return self.long.rows(self.layer, [self.focus], temperature=self.temperature).weights[:, 0]

    def map(self, size: int = 512) -> np.ndarray:
        """The head shown's whole map pooled onto size × size pixels (``how``)."""
        return self.long.map(self.layer, self.head, size, self.how, temperature=self.temperature)

    def tile(self, rows: tuple[int, int], cols: tuple[int, int]) -> np.ndarray:
        """The head shown's weights of a region, exact."""
        return self.long.tile(self.layer, self.head, rows, cols, temperature=self.temperature).weights

    # --- the page's questions ---

    def _answer(self, ask) -> None:
        if not isinstance(ask, dict) or ask.get("ask") not in ("map", "row", "region"):
            return
        kind, whose = ask["ask"], {"view": ask.get("view"), "id": ask.get("id")}
        t = self.temperature  # (read once: every number of an answer is of the temperature it names)
        try:
            layer, head = self._whose(ask)
            if kind == "map":
                rows, cols = self._pixels(ask)
                self._latest_map[whose["view"]] = whose["id"]
                self._pool().submit(self._send_map, whose, layer, head, ask.get("how", "max"), rows, cols, t)
            elif kind == "row":
                self._send_row(whose, layer, head, self._position(ask.get("position")), t)
            else:
                self._send_region(whose, layer, head, ask, t)
        except Exception as err:  # said to the page, which would otherwise wait for an answer
            self.send({"kind": "error", **whose, "ask": kind, "message": str(err)})

    def _whose(self, ask) -> tuple[int, int]:
        layer, head = ask.get("layer"), ask.get("head", 0)
        if not isinstance(layer, int) or str(layer) not in self.layers:
            raise ValueError(f"layer {layer!r} is not held; the layers are {self.long.layers}")
        if not isinstance(head, int) or not 0 <= head < self.layers[str(layer)]["heads"]:
            raise ValueError(f"head {head!r} is not one of layer {layer}'s")
        return layer, head

    def _pixels(self, ask) -> tuple[int, int]:
        size = ask.get("size")
        if not (
            isinstance(size, list) and len(size) == 2 and all(isinstance(x, int) and 1 <= x <= MAX_SIDE for x in size)
        ):
            raise ValueError(f"size must be [rows, columns] of pixels, each 1 to {MAX_SIDE}; got {size!r}")
        return size[0], size[1]

    def _position(self, at) -> int:
        if not isinstance(at, int) or not 0 <= at < len(self.tokens):
            raise ValueError(f"position must be a token's position, 0 to {len(self.tokens) - 1}; got {at!r}")
        return at

    def _pool(self) -> concurrent.futures.ThreadPoolExecutor:
        if self._jobs is None:
            self._jobs = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="attnwidget-map")
        return self._jobs

    def _send_map(self, whose: dict, layer: int, head: int, how: str, rows: int, cols: int, t: float) -> None:
        def superseded() -> bool:  # a newer map asked by the same view, or the widget closed: this one is not shown
            return self._closed or self._latest_map.get(whose["view"]) != whose["id"]

        try:
            if superseded():
                raise _Superseded
            if how not in ("max", "mean"):
                raise ValueError(f'how must be "max" or "mean", got {how!r}')
            key = (layer, head, rows, cols, t)
            if key not in self._maps:
                last = [0.0]

                def progress(fraction):  # (from the threads computing the bands) at most ten times a second
                    if superseded():
                        raise _Superseded  # (stops the scan: nobody would see it)
                    now = time.monotonic()
                    with self._lock:
                        if now - last[0] > 0.1 and fraction < 1:
                            last[0] = now
                            self.send({"kind": "progress", **whose, "fraction": fraction})

                scan = self.long.heads(layer, t).scan(head, rows, cols, progress)
                self._maps[key] = (np.asarray(scan[0], np.float32), np.asarray(scan[1], np.float32))
                while len(self._maps) > MAPS_KEPT:
                    self._maps.pop(next(iter(self._maps)))
            pixels = self._maps[key][0 if how == "max" else 1]
            self.send({"kind": "map", **whose, **_about_map(layer, head, how, t, pixels)}, buffers=[pixels.tobytes()])
        except _Superseded:
            if not self._closed:
                self.send({"kind": "superseded", **whose})
        except Exception as err:  # (in the map's thread: said to the page, which would otherwise wait)
            self.send({"kind": "error", **whose, "ask": "map", "message": str(err)})

    def _row(self, layer: int, at: int, t: float):
        """Row ``at`` of every head of ``layer`` at temperature ``t``: its weights and scores (heads × n),
        and each head's strongest keys, effective tokens and first token's weight, as the page names them."""
        cells = self.long.rows(layer, [at], temperature=t)
        each = []
        for w, effective in zip(cells.weights[:, 0], effective_tokens(cells.weights[:, 0])):
            top = np.argsort(-w, kind="stable")[:TOP_KEYS]
            each.append(
                {
                    "keys": [[int(j), float(w[j])] for j in top if w[j] > 0],
                    "effective": float(effective),
                    "first": float(w[0]),
                }
            )
        return cells.weights[:, 0], cells.scores[:, 0], each

    def _send_row(self, whose: dict, layer: int, head: int, at: int, t: float) -> None:
        weights, scores, each = self._row(layer, at, t)
        self.send(
            {
                "kind": "row",
                **whose,
                "layer": layer,
                "head": head,
                "position": at,
                "temperature": t,
                "heads": each,
            },
            buffers=[weights[head].astype(np.float32).tobytes(), scores[head].astype(np.float32).tobytes()],
        )

    def _send_region(self, whose: dict, layer: int, head: int, ask, t: float) -> None:
        r0, r1, c0, c1 = (ask.get(x) for x in ("r0", "r1", "c0", "c1"))
        if not all(isinstance(x, int) for x in (r0, r1, c0, c1)):
            raise ValueError(f"a region is four whole numbers r0, r1, c0, c1; got {[r0, r1, c0, c1]!r}")
        rows, cols = self._pixels(ask)
        how = ask.get("how", "max")
        if (r1 - r0) * (c1 - c0) > MAX_REGION:
            raise ValueError(
                f"a region of {r1 - r0:,} × {c1 - c0:,} cells is more than one question computes ({MAX_REGION:,}): "
                "zoom in further (the whole map serves until then), or call map() in Python"
            )
        exact = (r1 - r0) <= rows and (c1 - c0) <= cols and (r1 - r0) * (c1 - c0) <= MAX_EXACT
        if exact:
            cells = self.long.tile(layer, head, (r0, r1), (c0, c1), temperature=t)
            buffers = [cells.weights.astype(np.float32).tobytes(), cells.scores.astype(np.float32).tobytes()]
            shape = cells.weights.shape
        else:
            pixels = self.long.region(layer, head, (r0, r1), (c0, c1), (rows, cols), how, temperature=t)
            pixels = pixels.astype(np.float32)
            buffers, shape = [pixels.tobytes()], pixels.shape
        self.send(
            {
                "kind": "region",
                **whose,
                "layer": layer,
                "head": head,
                "how": how,
                "temperature": t,
                "r0": r0,
                "r1": r1,
                "c0": c0,
                "c1": c1,
                "rows": shape[0],
                "cols": shape[1],
                "exact": exact,
            },
            buffers=buffers,
        )

    # --- an exported page: what the author chose to keep ---

    def page_state(self, *, layers=None, heads=None, positions=None, map_size: int = 256, max_mb: float = 8) -> dict:
        """What an exported page holds, as plain data: the whole maps (each pixel's largest weight, and
        its mean) of ``heads`` (default: the head shown; "all": every head) of ``layers`` (default: the
        layer shown), pooled onto ``map_size``² pixels, and their exact rows at ``positions`` (default:
        the first and the last) and the focused one, at this temperature; refused past ``max_mb``
        megabytes (the page's data and its script), saying what to drop."""
        n, t = len(self.tokens), self.temperature
        layers = [self.layer] if layers is None else _whole_numbers(layers, "layers", "the model's layer numbers")
        for x in layers:
            self._whose({"layer": x})
        if heads is not None and heads != "all":
            heads = _whole_numbers(heads, "heads", 'head numbers, or "all"')
        chosen = {
            x: list(range(self.layers[str(x)]["heads"])) if heads == "all" else heads or [self.head] for x in layers
        }
        for x, hs in chosen.items():
            for h in hs:
                self._whose({"layer": x, "head": h})
        wanted = [0, -1] if positions is None else _whole_numbers(positions, "positions", "token positions")
        at = sorted({p + n if -n <= p < 0 else self._position(p) for p in wanted} | {self.focus})
        if not (isinstance(map_size, numbers.Integral) and 1 <= map_size <= MAX_SIDE):
            raise ValueError(f"map_size must be a whole number of pixels from 1 to {MAX_SIDE}, got {map_size!r}")
        if isinstance(max_mb, bool) or not isinstance(max_mb, numbers.Real) or not max_mb > 0:
            raise ValueError(f"max_mb must be a number of megabytes > 0, got {max_mb!r}")
        size, count = min(int(map_size), n), sum(map(len, chosen.values()))
        script = sum((_STATIC / f).stat().st_size for f in ("long.js", "long.css"))
        rows = len(layers) * len(at)
        guess = 16 / 3 * (2 * count * size * size + count * len(at) * n) + rows * 300 * max(map(len, chosen.values()))
        guess += script + sum(len(x) + 4 for x in self.tokens)  # (base64 of float32; each row's heads' summaries)
        if guess > max_mb * 1e6:
            what = f"{2 * count} maps of {size}² pixels and {len(at)} rows of {n:,} weights for each of {count} heads"
            raise ValueError(
                f"this page would hold about {guess / 1e6:.1f} MB ({what}), over the {max_mb:g} MB asked (max_mb): "
                "ask fewer heads, positions or layers, or a smaller map_size, or raise max_mb"
            )
        maps, held = [], []
        for x, hs in chosen.items():
            for h in hs:
                scan = self.long.heads(x, t).scan(h, size, size)
                for how, pixels in (("max", np.asarray(scan[0])), ("mean", np.asarray(scan[1]))):
                    maps.append({**_about_map(x, h, how, t, pixels), "data": _b64(pixels)})
            for p in at:  # (each head's summaries of the row once; the weights of each head held)
                weights, _, each = self._row(x, p, t)
                held.append(
                    {
                        "layer": x,
                        "position": p,
                        "temperature": t,
                        "heads": each,
                        "weights": {str(h): _b64(weights[h]) for h in hs},
                    }
                )
        whose = "; ".join(f"layer {x}'s head{'s' if len(hs) > 1 else ''} {_listed(hs)}" for x, hs in chosen.items())
        holds = (
            f"This page holds {whose}: each head's whole map pooled onto {size} × {size} pixels (each pixel's largest "
            f"weight, and its mean), and the exact rows of position{'s' if len(at) > 1 else ''} {_listed(at)}"
            + (f", at temperature {t:g}" if t != 1 else "")
            + ". Zoomed in, it shows the pooled map: each cell's own weight is computed by a live notebook."
        )
        state = {
            k: getattr(self, k) for k in ("tokens", "layers", "name", "layer", "head", "focus", "how", "temperature")
        }
        return {"state": state, "maps": maps, "rows": held, "holds": holds, "max_mb": max_mb}

    def to_html(self, path=None, *, theme: str = "auto", title: str | None = None, **kept) -> str | None:
        """One self-contained HTML page (no kernel, no network) holding what ``page_state(**kept)``
        keeps (layers, heads, positions, map_size, max_mb): written to ``path``, or returned."""
        from .export import _check_theme, _write_whole, long_page

        _check_theme(theme)  # (before any map is computed)
        data = self.page_state(**kept)
        name = title or f"Attention over {len(self.tokens):,} tokens" + (f": {self.name}" if self.name else "")
        page = str(long_page(data, None, theme=theme, title=name))
        size = len(page.encode("utf-8"))
        if size > data["max_mb"] * 1e6:
            raise ValueError(
                f"this page is {size / 1e6:.1f} MB, over the {data['max_mb']:g} MB asked (max_mb): ask fewer heads, "
                "positions or layers, or a smaller map_size, or raise max_mb"
            )
        if path is None:
            return page
        _write_whole(path, page.encode("utf-8"))
        return None

    def close(self) -> None:
        self._closed = True  # (a map being computed stops at its next band)
        jobs = getattr(self, "_jobs", None)  # (None before __init__ ends, as when it refused)
        if jobs is not None:
            jobs.shutdown(wait=False, cancel_futures=True)
        super().close()


def _about_map(layer: int, head: int, how: str, t: float, pixels: np.ndarray) -> dict:
    """What a map is of, as the page reads it beside its numbers."""
    rows, cols = pixels.shape
    return {
        "layer": layer,
        "head": head,
        "how": how,
        "temperature": t,
        "rows": rows,
        "cols": cols,
        "top": float(pixels.max()),
    }


def _b64(a) -> str:
    return base64.b64encode(np.asarray(a, np.float32).tobytes()).decode("ascii")


def _listed(items) -> str:
    words = [f"{i:,}" for i in items]
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]


def _whole_numbers(values, name: str, what: str) -> list[int]:
    """``values`` as a list of whole numbers, or a refusal saying what to give."""
    if isinstance(values, (str, bytes)) or not hasattr(values, "__iter__"):
        raise TypeError(f"{name} must be a list of {what}, got {values!r}")
    out = list(values)
    if not all(isinstance(v, numbers.Integral) and not isinstance(v, bool) for v in out):
        raise TypeError(f"{name} must be a list of {what} (whole numbers), got {values!r}")
    return [int(v) for v in out]
