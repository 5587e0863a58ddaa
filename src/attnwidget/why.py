"""Why a head attends where it does, for a widget of a model: its score at a cell split into (query part,
key part) pairs (integrations/score_parts.py), for the text, layer and head shown.

Each text's stream is read once (one pass of the model) and kept with the text's rerun while the model's
weights are unchanged, so each further cell costs a call of one layer's attention on the parts.
"""

from __future__ import annotations

from .inputs import Inputs
from .integrations import score_parts
from .rules.values import _is_int

NOT_A_MODEL = (
    "score_parts needs a widget of a transformers model that it can run again (AttentionWidget.from_transformers): "
    "it reads what each layer wrote into the residual stream"
)
SHOWN = 8  # the page lists this many pairs of the cell's, largest first


def stream(inputs: Inputs) -> score_parts.Stream:
    """The stream of the text shown, read once (ValueError for a widget without a model it can run,
    NotImplementedError, saying why, for a model whose score is not split)."""
    s = inputs.state
    if s["blocks"]:
        raise ValueError("score_parts splits a decoder's or an encoder's scores; an encoder–decoder's are not split")
    found = inputs.sources.found("", s["sentence_index"]) if s["layer_shown"] else None
    rerun = getattr(found, "rerun", None)
    if rerun is None or rerun.library != "transformers":
        raise ValueError(NOT_A_MODEL + ("" if rerun is None else " (a TransformerLens model is not read for it yet)"))
    # (kept while the weights are those read: an optimiser's step or an in-place edit moves a tensor's version)
    key = tuple(p._version for p in rerun.model.parameters())
    if rerun.kept.get("score_parts", (None,))[0] != key:
        rerun.kept["score_parts"] = (key, score_parts.read(rerun.model, rerun.ids, list(s["tokens"])))
    return rerun.kept["score_parts"][1]


def of(inputs: Inputs, row, column, layer, head):
    """The cell's (or, with ``column`` None, the row's) ScoreParts at the widget's layer, head and focus
    unless given; ValueError, saying why, for a cell or widget it cannot split (the widget unchanged)."""
    s = inputs.state
    layer = s["layer"] if layer is None else layer
    head = s["head"] if head is None else head
    row = s["focus"] if row is None else row
    for name, value in (("row", row), ("column", column), ("layer", layer), ("head", head)):
        if value is not None and not _is_int(value):
            raise ValueError(f"{name} must be an integer index; got {value!r}")
    if not 0 <= row < inputs.rows:
        raise ValueError(f"row {row} is not one of the {inputs.rows} rows read (0 … {inputs.rows - 1})")
    keys = list(range(row + 1 if inputs.causal else inputs.keys))
    if column is not None and not 0 <= column < inputs.keys:
        raise ValueError(f"column {column} is not one of the {inputs.keys} keys read (0 … {inputs.keys - 1})")
    if column is not None and column not in keys:
        raise ValueError(f"cell ({row}, {column}) is closed: the causal rule keeps row {row} from reading key {column}")
    try:
        found = stream(inputs)
        return found.row(layer, head, row, keys) if column is None else found.cell(layer, head, row, column)
    except NotImplementedError as e:  # (a family not split: said as what this widget cannot show)
        raise ValueError(str(e)) from e


def for_page(inputs: Inputs) -> dict:
    """The page's "score_parts": the cell's largest pairs (heads apart and by layer), how many pairs each
    has, their sum and the model's score; {"error": why} where it cannot be split."""
    row, column = inputs.state["cell"]
    try:
        parts = of(inputs, row, column, None, None)
    except Exception as e:  # (any failure is said in the page, and an export goes on without it)
        return {"error": str(e) or type(e).__name__}
    layers = parts.by_layer()
    pairs = lambda p: [{"query": a, "key": b, "value": v} for a, b, v in p.largest(SHOWN)]
    return {
        "pairs": pairs(parts),
        "layers": pairs(layers),
        "count": int(parts.table.size),
        "layer_count": int(layers.table.size),
        "score": parts.score,
        "total": parts.total,
    }
