"""Views beyond one head's weights, computed here and drawn by the page's panel "Beyond one head":
what a head's pairs move (weight × ‖value‖), rollout and flow up to the layer shown, and the
difference between two texts. Each is a queries × keys matrix for the state in its "key",
which the page compares with its own state (as it does the overview's): a live page asks again
when they differ; an exported page says which state it shows.
"""

from __future__ import annotations

import numpy as np

from . import rules
from .core import attention_flow, rollout

NAMES = rules.MEASURES
# the reasons a widget cannot show a measure, each said once
ACROSS_CROSS = (
    "{what} follows a text through its own layers: it is for self-attention, not cross-attention; "
    "show the encoder's or the decoder's self-attention instead (w.block = 'encoder' or 'decoder')"
)
TWO_TEXTS = (
    "difference needs two texts: make the widget with several, such as "
    "AttentionWidget.from_transformers(model, tokenizer, [text_a, text_b]); this widget has one."
)
NO_VALUES = "weight × ‖value‖ needs each key's value, and this widget has attention weights alone: pass values= (one vector per key) to from_attentions"
FLOW_CELLS = 28 * 28 * 12  # tokens² · layers: about a second of flow's maximum flows on two cores (benchmarks/views.py)
SIGNED = ("difference",)  # drawn on a diverging scale: the others are never negative


def available(state: dict, difference: str = TWO_TEXTS) -> dict[str, str]:
    """Each measure's name -> "" where a widget in ``state`` (the rules' plain state) can show it,
    else why not (the page's tooltip); ``difference``: why the texts have no difference, or ""."""
    n, layers = rules.rows(state), max(1, state["n_layers"] if state["layer_shown"] else 1)
    too_many = n * n * layers > FLOW_CELLS
    return {
        "norms": NO_VALUES if state["weights_only"] == "weights" else "",
        "rollout": ACROSS_CROSS.format(what="rollout") if state["cross"] else "",
        "flow": ACROSS_CROSS.format(what="flow")
        if state["cross"]
        else f"flow is exact, a maximum flow for each pair: {n} tokens × {layers} layers is too many for the page (about "
        f"{int((FLOW_CELLS / layers) ** 0.5)} tokens at most); w.flow() computes it in Python, or use rollout"
        if too_many
        else "",
        "difference": difference,
    }


def key(widget, name: str, every_layer: bool = False) -> dict:
    """The state a measure's matrix is for: what the page compares (each name one of its traits)."""
    k = {"measure": name, "temperature": widget.temperature, "causal": widget.causal, "sink": widget.sink, "step": widget.step}
    k.update(block=widget.block, sentence_index=widget.sentence_index)
    if not every_layer:
        k["layer"] = widget.layer
    if name in ("norms", "difference"):
        k["head"] = min(widget.head, widget.n_heads - 1)
    return k


def matrix(widget, name: str) -> np.ndarray:
    """The measure's queries × keys for the state as it stands (or, for rollout, every layer's)."""
    up_to = widget.layer if widget.layer_shown else 0
    if name == "rollout":
        return rollout(widget._every_layers_weights("rollout", up_to))
    if name == "flow":
        return attention_flow(widget._every_layers_weights("flow", up_to))
    return widget.norms()[min(widget.head, widget.n_heads - 1)]  # norms (entry computes the difference)


def _difference(widget) -> tuple[np.ndarray, np.ndarray]:
    """The head shown's difference from the other text at the layer shown, and every layer's and
    head's largest |difference| (layers × heads), in one pass over the layers."""
    layer, h = (widget.layer if widget.layer_shown else 0), min(widget.head, widget.n_heads - 1)
    shown, largest = np.empty(0), []
    for at, d in enumerate(widget._differences(*widget._difference_pair())):
        largest.append(np.abs(d).max(axis=(1, 2)))
        if at == layer:
            shown = d[h].copy()
    return shown, np.array(largest)


def entry(widget, name: str, every_layer: bool = False) -> dict:
    """What the page draws for measure ``name``: {matrix (float32, rows × cols, or layers × rows ×
    cols with ``every_layer``: rollout's every layer, for an exported page), lo, hi, key}, or
    {error, key} when it cannot be computed."""
    why = widget.measures.get(name, f"measure must be one of {', '.join(NAMES)}")
    if why:
        return {"error": why, "key": key(widget, name)}
    every_layer = every_layer and name == "rollout" and widget.layer_shown
    extra: dict = {}
    try:
        with np.errstate(all="ignore"):  # numbers past float32 are said below, not warned of
            if every_layer:
                m = rollout(widget._every_layers_weights("rollout"))
            elif name == "difference":  # with which text, and every head's largest difference (the overview's colours)
                m, largest = _difference(widget)
                extra = {"other": widget._difference_pair()[1], "largest": [float(v) for v in largest.reshape(-1)]}
            else:
                m = matrix(widget, name)
                m = m[-1] if name == "rollout" else m
            m = np.ascontiguousarray(m, dtype=np.float32)
    except ValueError as e:  # what a model's layer cannot give (an output projection it could not read): said in the panel
        return {"error": str(e), "key": key(widget, name)}
    if not np.isfinite(m).all():
        return {"error": f"{name} has numbers too large to draw (past float32's range): scale the values down to see it", "key": key(widget, name)}
    top = float(np.abs(m).max()) if m.size else 0.0
    return {
        **extra,
        "matrix": {"shape": list(m.shape), "dtype": "float32", "view": memoryview(m.reshape(-1).data)},
        "lo": -top if name in SIGNED else 0.0,
        "hi": top,
        "key": key(widget, name, every_layer),
    }


PAGE_BYTES = 4e6  # an exported page carries rollout at every layer within this
OTHERS_CELLS = 256 * 256  # queries × keys: up to this an exported page also carries the measures not shown (each well under a second)


def for_page(widget, in_base64) -> dict:
    """The measures an exported page carries, at the state exported: the one shown, and for a
    short text every other the widget can show (flow while it takes under a quarter second);
    rollout with every layer while they fit PAGE_BYTES, so the layer control goes on working."""
    out = {}
    cells = widget._rows() * widget._keys_read()
    for name in NAMES:
        slow = name == "flow" and widget._rows() ** 2 * max(1, widget.n_layers) > FLOW_CELLS // 4
        if name != widget.measure and (slow or widget.measures.get(name) or cells > OTHERS_CELLS):
            continue
        every = name == "rollout" and cells * 4 * max(1, widget.n_layers) <= PAGE_BYTES
        e = entry(widget, name, every_layer=every)
        out[name] = {**e, "matrix": in_base64(e["matrix"])} if "matrix" in e else e
    return out
