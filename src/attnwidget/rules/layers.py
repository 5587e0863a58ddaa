"""A model's layers by their own numbers: ``layer`` is the model's number of the layer shown (a hybrid's
attention layers keep theirs, ``layer_numbers``), and each layer's arrays are held in order, so a number
is turned into its place among the layers held here (the twin of js/rules.js's layerIndex and its kin)."""

from __future__ import annotations

from .values import Refused, _in_range


def layer_index(state) -> int:
    """Where the layer shown is among the layers held: its place in layer_numbers (the model's own
    numbers), or the layer itself where those are 0 to n_layers − 1; −1 for a number not held."""
    numbers = list(state.get("layer_numbers") or ())
    layer = state["layer"]
    return (numbers.index(layer) if layer in numbers else -1) if numbers else layer


def layer_number(state, index: int) -> int:
    """The model's own number of the layer held at ``index`` (layer_index's inverse)."""
    numbers = state.get("layer_numbers") or ()
    return int(numbers[index]) if numbers else index


def held_layer(state) -> int:
    """The layer to show after a switch of text or block: the one shown, where the new one holds it; else the
    nearest held below it (the first held when none is)."""
    numbers = list(state.get("layer_numbers") or ())
    if not numbers:
        return min(state["layer"], state["n_layers"] - 1)
    return max((x for x in numbers if x <= state["layer"]), default=numbers[0])


def _check_layer(state) -> None:
    numbers = list(state.get("layer_numbers") or ())
    layer = state["layer"]
    if not numbers:
        return _in_range("layer", layer, max(1, state.get("n_layers", 0)), "a layer index")
    if layer in numbers:
        return None
    kinds = state.get("layer_kinds") or ()
    kind = kinds[layer] if 0 <= layer < len(kinds) else ""
    why = f" (the model's layer {layer} is {kind}: it computes no attention weights)" if kind else ""
    raise Refused(
        f"'layer' must be one of the model's layers with attention weights, by its own number: "
        f"{', '.join(map(str, numbers))}; got {layer}{why}."
    )
