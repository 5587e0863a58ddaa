"""The exported page's data: everything a page with no kernel needs, as plain JSON.

Schema, version 1 (decoded in one place, js/payload.js)::

    {
      "version": 1,
      "state":   {trait: value},   # the synced traits as a live page receives them; arrays as
                                   # {shape, dtype, base64} where the live widget sends buffers
      "sources": {                 # what the rules bring in on a switch (sources.Sources)
        "sentences": [{tokens, q, k, v, x, value_basis}, ...],      # by sentence_index
                                   # a model's texts: [{tokens, key_tokens, bias, step, n_layers
                                   # [, model_q, model_k, model_v, model_basis, model_masks,
                                   # mask_of_layer, model_bias, model_sinks]} or null, ...]: the text shown has
                                   # its arrays in "state" only; null: a text left out (over budget)
        "model":  {tokens, key_tokens} or null,                     # a model's layers' tokens
        "blocks": {name: {tokens, key_tokens, causal, scale, softcap, bias,
                          model_q, model_k, model_v, model_basis, n_layers}}
                                   # the block shown at first has its arrays in "state" only
      },
      "arrays": {"layer:i": {q, k, v, value_basis[, mask, bias], sinks}}  # the layers held, when not all are
    }

A layer's q, k, v and value axes are slices of model_q, model_k, model_v and model_basis (heads
of one layer after another), so they are not in "state" when ``layer_shown`` is true. A model too
large for the page's budget holds some of its layers only: then "state" has no stacks, but the
layer shown, "held_layers" (the layers in "arrays") and the overview of every layer, computed here.
"state" also has "computed": the other views declared in computed_views.py that the state asks for (head
scores, while a summary of theirs colours the overview), and "measure_data": each measure the page
can show, computed here at the state exported (computed_views.for_page), its matrix in base64 (weight ×
‖value‖ of values no projection turns: {"in_page": true}, the page computes it); and
"head_effects" (layers · heads numbers) when a language model's effects were computed before the
export (the "effect" summary), with "head_effects_key": the step and text they are of.
The page checks all of it before drawing (js/payload.js): each array against its dtype, shape and
byte count, the state's values as the rules check a change, a vision model's image against its
tokens (image_problem, here too); an altered page says what is wrong.
A model's several texts are all held while every text's every layer fits the budget; otherwise
the page holds the text shown alone (and its layers as above), and refuses a switch to another.
"""

from __future__ import annotations

import base64
import warnings
from typing import Any

import numpy as np

from .computed_views import VIEWS_FOR_PAGE
from .rules import LAYERED, _is_int, by_head, show

VERSION = 1


def encoded(widget, values: dict) -> dict:
    """Trait values as the page receives them, with base64 where a live widget sends buffers."""
    out = {}
    for name, value in values.items():
        to_json = widget.trait_metadata(name, "to_json")
        out[name] = _in_base64(to_json(value, widget) if to_json else value)
    return out


def _in_base64(data):
    """{shape, dtype, view} (a live widget's buffer) as {shape, dtype, base64}; anything else as it is."""
    if isinstance(data, dict) and "view" in data:
        return {**data, "view": None, "base64": base64.b64encode(bytes(data["view"])).decode("ascii")}
    return data


BUDGET = 50e6  # bytes: an exported page holds every layer of a model while it stays under this


def held_layers(widget, inputs, layers=None, budget: float = BUDGET) -> list[int] | None:
    """The layers an exported page holds (their places among the widget's layers), or None for every
    layer: ``layers`` (by the model's numbers; the one shown among them), or else every layer while
    the page stays under ``budget`` bytes, and otherwise the layer shown and those nearest it that fit."""
    n, src = widget.n_layers, inputs.sources
    if not (widget.layer_shown and n and src.model is not None):
        if layers is not None and src.blocks:
            raise ValueError(
                "layers= is not offered for an encoder–decoder model yet: its page holds every block's every layer"
            )
        if layers is not None:
            raise ValueError(
                "layers= is for a model's widget (from_transformers and the like); this widget has no layers to "
                "leave out"
            )
        return None
    numbers = list(widget.layer_numbers) or list(range(n))  # (the model's own: a hybrid's attention layers)
    if layers is not None:
        asked = sorted({int(i) for i in layers} | {widget.layer})
        bad = [i for i in asked if i not in numbers]
        if bad:
            if not widget.layer_numbers:
                raise ValueError(f"layers= must be layer indices from 0 to {n - 1}; got {bad}")
            said = ", ".join(map(str, numbers))
            raise ValueError(
                f"layers= must be layers with attention weights, by the model's numbers ({said}); got {bad}"
            )
        return None if len(asked) == n else [numbers.index(i) for i in asked]
    # what the page carries, in base64: each layer's q, k, v (and bias, its terms); and, when some are held, every
    # layer's overview
    stacks = (widget.model_q, widget.model_k, widget.model_v, widget.model_bias, widget.model_terms)
    each = sum(a.nbytes for a in stacks if a is not None) / n * 4 / 3
    if each * n <= budget:
        return None
    overview = len(widget.model_q) * min(inputs.rows, 84) * min(inputs.keys, 84) * 4 / 3
    fit = int((budget - overview) // each)
    if fit < 1:
        warnings.warn(
            f"one layer of this model alone takes {each / 1e6:.2g} MB of the page, more than max_mb={budget / 1e6:g}: "
            "the page holds the layer shown",
            stacklevel=3,
        )
    shown = numbers.index(widget.layer)
    near = sorted(range(n), key=lambda i: (abs(i - shown), i))
    return sorted(near[: max(1, fit)])


def held_texts(sources, shown: int, layers=None, budget: float = BUDGET) -> bool:
    """Whether an exported page holds every text of a model's several: while they all fit the
    budget, and no ``layers`` are asked for (those are the text shown's). Each text's size is the
    text shown's in proportion to its tokens (its q, k, v), and to their square (a bias per
    layer): the others are not read to know it."""
    texts = sources.texts
    if len(texts) < 2 or layers is not None:
        return False
    one = texts[shown]
    arrays = sum(np.asarray(a).nbytes for layer in list.__iter__(one.layers) for a in layer)  # (none read for it)
    biases = sum(np.asarray(b).nbytes for b in (getattr(one, "biases", None) or ())) * (
        2 if getattr(getattr(one, "terms", None), "split", False) else 1
    )  # (and their first terms: DeBERTa's)
    share = [len(f.tokens) / len(one.tokens) for f in texts]
    return sum(arrays * s + biases * s * s for s in share) * 4 / 3 <= budget


def image_problem(image, count: int) -> str | None:
    """What is wrong with a vision model's ``image`` (widget.image) beside its ``count`` tokens, or
    None: its grid of patches is the tokens after the first ``first``, its size that grid's pixels,
    its picture in the page itself. js/payload.js says the same of an exported page's."""
    if image is None:
        return None
    if not isinstance(image, dict):
        return f"'image' must be a vision model's image, {{src, rows, cols, first, patch, size}}; got {show(image)}."
    rows: Any = image.get("rows")  # (any JSON: checked here)
    cols: Any = image.get("cols")
    first: Any = image.get("first")
    if not (_is_int(rows) and _is_int(cols) and _is_int(first) and rows >= 1 and cols >= 1 and first >= 0):
        return (
            "'image' rows, cols and first must be whole numbers (rows and cols 1 or more, first 0 or more); got "
            f"rows {show(rows)}, cols {show(cols)}, first {show(first)}."
        )
    if first + rows * cols != count:
        after = f"after {first} other token{'' if first == 1 else 's'}: {first + rows * cols} tokens"
        return f"'image' has {rows} × {cols} patches {after}, but there are {count}."
    patch: Any = image.get("patch")
    side = patch if isinstance(patch, list) else [patch, patch]
    if not (len(side) == 2 and all(_is_int(n) and n >= 1 for n in side)):
        return (
            "'image' patch must be a patch's side in pixels (a whole number, 1 or more) or [height, width]; got "
            f"{show(patch)}."
        )
    want = [rows * side[0], cols * side[1]]
    if image.get("size") != want:
        return (
            f"'image' size must be the [height, width] of its {rows} × {cols} patches of {side[0]} × {side[1]} "
            f"pixels, {show(want)}; got {show(image.get('size'))}."
        )
    src = image.get("src")
    if not (isinstance(src, str) and src.startswith("data:image/")):
        return "'image' src must be the image itself as a data: URL (data:image/…), which a page shows with no network."
    return None


def page_payload(widget, inputs, own, effects=None, layers=None, budget: float = BUDGET) -> dict:
    """The payload (above) of ``widget`` at ``inputs`` (inputs.Inputs: its state and sources),
    holding the layers ``held_layers`` picks; ``own``: the widget's own traits (not anywidget's,
    such as the bundle the page carries already); ``effects``: a language model's head effects,
    as computed (None: none)."""
    from . import computed_views
    from .overview import compute
    from .rules import STACK
    from .sources import stacked

    problem = image_problem(widget.image, len(widget.tokens))
    if problem:  # (only from_transformers sets it: a widget altered since)
        raise ValueError(f"{problem} Make the widget again: from_transformers(model, image_processor, image).")
    src = inputs.sources
    held = held_layers(widget, inputs, layers, budget)
    if held is None and widget.layer_shown:  # every layer in the page: a remote model's not read yet, read now
        src.complete(widget.block, widget.sentence_index)
    # a live page's state, and a model's every layer (a live page gets the overview instead, from the kernel)
    layered = by_head({"weights_only": widget.weights_only})  # a bias per layer is the layer's too
    live = [
        n
        for n in widget.keys
        if n in own and n not in ("overview", "measure_data", "computed") and not (widget.layer_shown and n in layered)
    ]
    names = live + [n for n in STACK if n not in live and (held is None or n == "n_layers")]
    arrays: dict = {}  # the layers held, when not every layer: the one shown among them (so not in "state")
    if held is not None:
        for i in held:
            layer = src.layer("", i, widget.sentence_index)
            arrays[f"layer:{i}"] = encoded(
                widget, {n: layer[n] for n in (*LAYERED, "mask", "bias", "terms", "sinks") if n in layer}
            )
    sources: dict = {"sentences": [], "model": None, "blocks": {}}
    if len(src.examples) > 1:
        sources["sentences"] = [encoded(widget, src.sentence(i)) for i in range(len(src.examples))]
    held_text = None  # the texts an exported page holds, when not all: its buttons say which
    if len(src.texts) > 1:  # a model's texts: the one shown has its stacks in the state; the others while they fit
        every = held_texts(src, widget.sentence_index, layers, budget)
        for i in range(len(src.texts)) if every else ():
            src.complete("", i)
        sources["sentences"] = [
            encoded(widget, _text(src.sentence(i), i == widget.sentence_index))
            if every or i == widget.sentence_index
            else None
            for i in range(len(src.texts))
        ]
        held_text = None if every else [widget.sentence_index]
    model = src.found("", widget.sentence_index) if src.model is not None else None  # (the text shown)
    if model is not None:
        keys = getattr(model, "key_tokens", None)
        sources["model"] = encoded(widget, {"tokens": list(model.tokens), "key_tokens": keys})
    for name, f in src.blocks.items():
        stack = (
            stacked(f) if name != widget.block else {"n_layers": len(f.layers)}
        )  # the block shown: in the state already
        keys = getattr(f, "key_tokens", None)
        sources["blocks"][name] = encoded(
            widget,
            dict(
                tokens=list(f.tokens),
                key_tokens=keys,
                causal=f.causal,
                scale=f.scale,
                softcap=f.softcap,
                bias=f.bias,
                **stack,
            ),
        )
    state = encoded(widget, {n: getattr(widget, n) for n in names})
    if held_text is not None:
        state["held_texts"] = held_text
    state["measure_data"] = computed_views.for_page(inputs, _in_base64)  # computed here: the page has no kernel to ask
    # the other views the page shows as exported (head scores while a summary of theirs colours the overview)
    state["computed"] = {
        n: {
            k: _in_base64(v) for k, v in computed_views.answer(n, inputs).items()
        }  # (the query–key map's arrays: binary)
        for n in computed_views.COMPUTED
        if computed_views.asked(n, inputs.state)
    } or None
    if effects is not None:  # head_effects as computed: the page cannot run the model
        state["head_effects"] = [float(v) for v in effects.ravel()]
        state["head_effects_key"] = {n: inputs.state[n] for n in ("step", "sentence_index")}  # what they are of
    if held is not None:
        overview = compute(inputs)  # every layer at a glance, at the state exported: the page cannot compute it
        state["held_layers"], state["overview"] = held, {**overview, "thumbs": _in_base64(overview["thumbs"])}
    return {"version": VERSION, "state": state, "sources": sources, "arrays": arrays}


def _text(found: dict, shown: bool) -> dict:
    """A model's text as the page brings it in: the one shown without its stacks (in the state already)."""
    from .rules import STACK

    return {n: a for n, a in found.items() if not (shown and n in STACK and n != "n_layers")}


def with_views_now(payload: dict) -> dict:
    """``payload`` with what this version's page reads of each view it names and does not hold (a
    payload saved by an earlier version: its measures' words came with the page then), so the page
    draws it whole. Nothing it holds is changed."""
    constants = (payload.get("state") or {}).get("_constants") or {}
    views = constants.get("views")
    if not isinstance(views, dict):
        return payload
    now = {n: {**VIEWS_FOR_PAGE.get(n, {}), **v} if isinstance(v, dict) else v for n, v in views.items()}
    return {**payload, "state": {**payload["state"], "_constants": {**constants, "views": now}}}
