"""Why a head attends where it does, for a widget of a model: its score at a cell split into (query part,
key part) pairs (integrations/score_parts.py), for the text, layer and head shown.

The stream is read once per text (one pass of the model) and kept for the last text asked, so each
further cell costs a call of one layer's attention on the parts at two positions.
"""

from __future__ import annotations

from .inputs import Inputs
from .integrations import score_parts

NOT_A_MODEL = (
    "score_parts needs a widget of a transformers model that it can run again (AttentionWidget.from_transformers): "
    "it reads what each layer wrote into the residual stream"
)
SHOWN = 8  # the page lists this many pairs of the cell's, largest first
_KEPT: dict = {}  # (id of the model, ids) → its Stream: the last text read


def stream(inputs: Inputs) -> score_parts.Stream:
    """The stream of the text shown, read once (ValueError for a widget without a model it can run,
    NotImplementedError, saying why, for a model whose score is not split)."""
    s = inputs.state
    found = None if s["blocks"] or not s["layer_shown"] else inputs.sources.found("", s["sentence_index"])
    rerun = getattr(found, "rerun", None)
    if rerun is None or rerun.library != "transformers":
        raise ValueError(NOT_A_MODEL + ("" if rerun is None else " (a TransformerLens model is not read for it yet)"))
    key = (id(rerun.model), tuple(rerun.ids))
    if key not in _KEPT:
        read = score_parts.read(rerun.model, rerun.ids, list(s["tokens"]))
        _KEPT.clear()
        _KEPT[key] = read
    return _KEPT[key]


def of(inputs: Inputs, row: int | None, column: int | None, layer: int | None, head: int | None):
    """The cell's (or, with ``column`` None, the row's) ScoreParts at the widget's layer, head and focus
    unless given."""
    s = inputs.state
    layer = s["layer"] if layer is None else layer
    head = s["head"] if head is None else head
    row = s["focus"] if row is None else row
    try:
        return _of(stream(inputs), inputs, row, column, layer, head)
    except NotImplementedError as e:  # (a family not split: said as what this widget cannot show)
        raise ValueError(str(e)) from e


def _of(found: score_parts.Stream, inputs: Inputs, row: int, column: int | None, layer: int, head: int):
    s = inputs.state
    n = min(len(found.ids), inputs.rows)
    if not 0 <= row < n:
        raise ValueError(f"row {row} is not one of the {n} rows (0 … {n - 1})")
    keys = list(range(row + 1 if s["causal"] else len(found.ids)))
    if column is None:
        return found.row(layer, head, row, keys)
    if not 0 <= column < len(found.ids):
        raise ValueError(f"column {column} is not one of the {len(found.ids)} keys (0 … {len(found.ids) - 1})")
    return found.cell(layer, head, row, column)


def for_page(inputs: Inputs) -> dict:
    """The page's "score_parts": the cell's largest pairs (heads apart) and by layer, the score and their sum."""
    row, column = inputs.state["cell"]
    parts = of(inputs, row, column, None, None)
    pairs = lambda p: [{"query": a, "key": b, "value": v} for a, b, v in p.largest(SHOWN)]
    return {
        "pairs": pairs(parts),
        "layers": pairs(parts.by_layer()),
        "score": parts.score,
        "total": parts.total,
        "count": int(parts.table.size),
        "cell": [row, column],
    }
