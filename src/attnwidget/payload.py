"""The exported page's data: everything a page with no kernel needs, as plain JSON.

Schema, version 1 (decoded in one place, js/payload.js)::

    {
      "version": 1,
      "state":   {trait: value},   # the synced traits as a live page receives them; arrays as
                                   # {shape, dtype, base64} where the live widget sends buffers
      "sources": {                 # what the rules bring in on a switch (sources.Sources)
        "sentences": [{tokens, q, k, v, x, value_basis}, ...],      # by sentence_index
        "model":  {tokens, key_tokens} or null,                     # a model's layers' tokens
        "blocks": {name: {tokens, key_tokens, causal, scale, softcap, bias,
                          model_q, model_k, model_v, model_basis, n_layers}}
                                   # the block shown at first has its arrays in "state" only
      },
      "arrays": {}                 # named arrays sent later (a model's layers on demand)
    }

A layer's q, k, v and value axes are slices of model_q, model_k, model_v and model_basis (heads
of one layer after another), so they are not in "state" when ``layer_shown`` is true.
"""

from __future__ import annotations

import base64

VERSION = 1
LAYERED = ("q", "k", "v", "value_basis")


def encoded(widget, values: dict) -> dict:
    """Trait values as the page receives them, with base64 where a live widget sends buffers."""
    out = {}
    for name, value in values.items():
        to_json = widget.trait_metadata(name, "to_json")
        data = to_json(value, widget) if to_json else value
        if isinstance(data, dict) and "view" in data:
            data = {**data, "view": None, "base64": base64.b64encode(bytes(data["view"])).decode("ascii")}
        out[name] = data
    return out


def page_payload(widget) -> dict:
    """The payload (above) of ``widget``."""
    from .sources import stacked

    src = widget._sources
    from .rules import STACK

    # a live page's state, and a model's every layer (a live page gets the overview instead, from the kernel)
    live = [n for n in widget.keys if n in widget._own and n != "overview" and not (widget.layer_shown and n in LAYERED)]
    names = live + [n for n in STACK if n not in live]
    sources: dict = {"sentences": [], "model": None, "blocks": {}}
    if len(src.examples) > 1:
        sources["sentences"] = [encoded(widget, src.sentence(i)) for i in range(len(src.examples))]
    if src.model is not None:
        keys = getattr(src.model, "key_tokens", None)
        sources["model"] = encoded(widget, {"tokens": list(src.model.tokens), "key_tokens": keys})
    for name, f in src.blocks.items():
        arrays = stacked(f) if name != widget.block else {"n_layers": len(f.layers)}  # the block shown: in the state already
        keys = getattr(f, "key_tokens", None)
        sources["blocks"][name] = encoded(
            widget, dict(tokens=list(f.tokens), key_tokens=keys, causal=f.causal, scale=f.scale, softcap=f.softcap, bias=f.bias, **arrays)
        )
    return {"version": VERSION, "state": encoded(widget, {n: getattr(widget, n) for n in names}), "sources": sources, "arrays": {}}
