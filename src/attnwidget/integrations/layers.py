"""A model's layers by their own numbers: which of them compute attention (the calls caught), and what
the others are. A hybrid (Jamba, Bamba, Qwen3-Next, LFM2, MiniMax, ...) runs attention in some layers
and a state-space scan, linear attention or a convolution in the rest; the widget numbers its attention
layers as the model does (Jamba's 1 and 3, not 0 and 1) and names the others.
"""

from __future__ import annotations

import re

# what a layer's mixing module is, by words in its class name (the first that matches)
_KINDS = (
    ("GatedDeltaNet", "gated DeltaNet (linear attention)"),
    ("DeltaAttention", "delta-rule linear attention"),
    ("Lightning", "lightning (linear) attention"),
    ("LinearAttention", "linear attention"),
    ("ShortConv", "short convolution"),
    ("Recurrent", "RG-LRU recurrence"),
)
_CONFIG_WORDS = {"linear_attention": "linear attention", "conv": "short convolution", "mamba": "Mamba state space"}


def numbers(names: list[str]) -> list[int] | None:
    """The model's own number of each call's layer (the first number in its module's name, where the
    model keeps its layers in a list), where they are not 0, 1, 2, ... and none repeats; else None
    (a model that runs its layers again, as HRM does, keeps its runs numbered in order)."""
    found = [re.search(r"(?:^|\.)(\d+)(?:\.|$)", name) for name in names]
    if not all(found):
        return None
    said = [int(m.group(1)) for m in found if m]
    return said if said != list(range(len(said))) and len(set(said)) == len(said) else None


def kinds(model, names: list[str], held: list[int]) -> list[str] | None:
    """What each of the model's layers is, by number: "" for one of ``held``, else its kind in words;
    None where the layers' list is not found."""
    first = re.match(r"(.*?)\.?(\d+)(?:\.|$)", names[0])
    if first is None:
        return None
    try:
        listed = model.get_submodule(first.group(1)) if first.group(1) else model
        count = len(listed)
    except (AttributeError, TypeError):
        return None
    types = list(getattr(getattr(model, "config", None), "layer_types", None) or ())
    return ["" if i in held else _kind(listed[i], types[i] if i < len(types) else "") for i in range(count)]


def _kind(layer, said: str) -> str:
    from .implicit_readers import READERS  # (the kinds whose implicit attention is read, in their words)

    for module in list(layer.modules())[1:]:  # (not the layer itself: its name may say linear attention)
        name = type(module).__name__
        if name in READERS:
            return READERS[name].kind
        for word, kind in _KINDS:
            if word in name:
                return kind
        a_log = getattr(module, "A_log", None)  # a Mamba scan's decay: per channel and state (1) or per head (2)
        if a_log is not None and hasattr(a_log, "ndim"):
            return "Mamba-1 selective state space" if a_log.ndim == 2 else "Mamba-2 state space"
    if said in _CONFIG_WORDS:
        return _CONFIG_WORDS[said]
    if any("CrossAttention" in type(m).__name__ for m in layer.modules()):
        return "cross-attention to another input (an image), not given, so not run"
    return f"a {type(layer).__name__} in which no attention call was caught"


def sparse(model, names: list[str], numbers: list[int]) -> list[int]:
    """The numbers of the layers whose attention reads a few keys per query that an indexer chose
    (DeepSeek V3.2's: its top ``index_topk`` keys, closed to the rest in the mask it hands the
    attention function), so that the mask caught is that choice."""
    found = []
    for name, number in zip(names, numbers):
        try:
            module = model.get_submodule(name)
        except AttributeError:
            continue
        if getattr(getattr(module, "indexer", None), "index_topk", None) is not None:
            found.append(number)
    return found
