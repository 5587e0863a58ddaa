"""Reading a model on a long text: its own attention kernel runs (SDPA, FlashAttention, or eager),
and each layer's q, k and v are kept as the model made them, for blockwise.Heads.

interface.capture runs the model eagerly and copies every layer to float32 numpy, with the keys and
values repeated to the query heads and the mask held whole: right for a short text, impossible at
32,768 tokens, where an eager pass alone writes n × n weights per head. Here the pass is the model's
own and nothing of size n × n is made by the reading; what the reading keeps is q (heads × n × d)
and the keys and values once per key-value head, in the model's dtype, on its device.

What each layer reads is its mask's shape, not its mask: the causal rule and a sliding window (the
module's ``sliding_window`` or the call's), checked on the rows sampled below against the mask the
model passed, where it passed one. Every layer is then held to the model's own result on those
rows (interface.check's bound: the model's output, or its weights, within its dtype's rounding):
a model read wrong is refused by name, as everywhere else.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any

import numpy as np

from .interface import Caught, check

SAMPLED = 256  # rows of each layer held to the model's own result: the first and last, and spread between


@dataclass(frozen=True)
class LongLayer:
    """One layer's q (heads × n × d), k and v (kv_heads × m × d) as the model made them (torch tensors
    on its device, or numpy arrays of one's own), and the shape of what each row reads."""

    q: Any
    k: Any
    v: Any
    scale: float | None = None  # None: 1/sqrt(d)
    causal: bool = True
    window: int | None = None  # a causal sliding window: row i reads j in (i − window, i]
    softcap: float | None = None
    name: str = ""  # the attention module's name in the model


def sampled_rows(n: int, count: int = SAMPLED) -> np.ndarray:
    """The rows checked: a few at each end (where a mask's edges are) and the rest spread evenly."""
    ends = np.r_[np.arange(min(8, n)), np.arange(max(0, n - 8), n)]
    spread = np.linspace(0, n - 1, max(0, count - len(ends))).round().astype(np.int64)
    return np.unique(np.r_[ends, spread])


def open_rows(rows, m: int, causal: bool, window: int | None):
    """Which of m columns each of ``rows`` reads under the causal rule and a sliding window (numpy booleans)."""
    j, i = np.arange(m)[None, :], np.asarray(rows)[:, None]
    ok = np.ones((len(rows), m), dtype=bool)
    if causal:
        ok &= j <= i
    if window:
        ok &= j > i - window
    return ok


def capture_long(model, on_call=None, samples: int = SAMPLED, **inputs) -> dict[int, LongLayer]:
    """Run ``model(**inputs)`` (batch 1) with its own attention: {each call's layer number (the model's
    own): what it read}, in order; ``on_call(count)`` is told of each."""
    import torch
    from transformers import AttentionInterface

    config = getattr(model, "config", None)
    impl = getattr(config, "_attn_implementation", None) or "eager"
    family = f"{type(model).__name__} (model_type {getattr(config, 'model_type', None)!r})"
    names = {id(m): name for name, m in model.named_modules()}
    mapping = AttentionInterface._global_mapping
    had = mapping.get(impl)
    calls: dict[int, LongLayer] = {}

    def recording(module, query, key, value, attention_mask, *args, **kwargs):
        own = had if had is not None else sys.modules[type(module).__module__].eager_attention_forward
        result = own(module, query, key, value, attention_mask, *args, **kwargs)
        if query.shape[0] != 1:
            raise ValueError(f"one text at a time: the batch has {query.shape[0]}")
        for what, names_ in (("learnt attention sinks", ("s_aux", "sinks")), ("a position bias", ("position_bias",))):
            if any(kwargs.get(n) is not None for n in names_):
                raise NotImplementedError(
                    f"{family} adds {what} to its scores, which a long text's reading does not hold: read a shorter "
                    "text with AttentionWidget.from_transformers"
                )
        n, m = query.shape[2], key.shape[2]
        scaling = kwargs.get("scaling", args[1] if len(args) > 1 else None)
        scaling = float(scaling if scaling is not None else query.shape[-1] ** -0.5)
        window = kwargs.get("sliding_window") or getattr(module, "sliding_window", None) or None
        if attention_mask is None:  # the kernel's own causal rule, as transformers' sdpa decides it
            flag = kwargs.get("is_causal")
            causal = impl != "eager" and n > 1 and bool(getattr(module, "is_causal", True) if flag is None else flag)
        else:
            causal = bool(getattr(module, "is_causal", True))
        rows = sampled_rows(n, samples)
        expected = open_rows(rows, m, causal, window)
        if attention_mask is not None:
            mask = attention_mask[0, 0][torch.as_tensor(rows, device=attention_mask.device), :m]
            given = (mask > torch.finfo(mask.dtype).min / 2 if mask.dtype.is_floating_point else mask.bool()).cpu()
            if not np.array_equal(given.numpy(), expected) or (
                mask.dtype.is_floating_point and bool((torch.where(given.to(mask.device), mask, 0) != 0).any())
            ):
                shape = "the causal rule and sliding window" if window else "the causal rule"
                raise NotImplementedError(
                    f"{family}'s mask at layer {len(calls)} is not {shape} "
                    "alone (padding, or a bias in it), which is all a long text's reading holds: read one text with no "
                    "padding, or a shorter text with AttentionWidget.from_transformers"
                )
        layer = getattr(module, "layer_idx", None)
        layer = len(calls) if layer is None else int(layer)
        if layer in calls:
            raise NotImplementedError(
                f"{family} computes attention twice in layer {layer}: a form of attention a long text's reading "
                "does not hold (differential attention?)"
            )
        call = LongLayer(
            query[0].detach().contiguous(),
            key[0].detach().contiguous(),
            value[0].detach().contiguous(),
            scaling,
            causal,
            int(window) if window else None,
            kwargs.get("softcap") or None,
            names.get(id(module), ""),
        )
        _held_to_the_model(layer, call, result, rows, expected, query.dtype, family)
        calls[layer] = call
        if on_call is not None:
            on_call(len(calls))
        return result

    mapping[impl] = recording
    try:
        with torch.no_grad():
            model(**inputs)
    finally:
        if had is None:
            mapping.pop(impl, None)
        else:
            mapping[impl] = had
    if not calls:
        raise NotImplementedError(
            f"attnwidget cannot read attention from {family} on a long text: it computes attention without "
            "transformers' attention interface"
        )
    return calls


def _held_to_the_model(layer: int, call: LongLayer, result, rows, expected, dtype, family: str) -> None:
    """The sampled rows' weights (their output, where the kernel returns no weights) against the model's own."""
    import torch

    output, weights = (result[0], result[1]) if isinstance(result, tuple) else (result, None)
    at = torch.as_tensor(rows, device=call.q.device)
    groups = call.q.shape[0] // call.k.shape[0]
    k, v = (t.repeat_interleave(groups, dim=0) for t in (call.k, call.v))  # (one layer's, for the check alone)
    sampled = Caught(
        layer,
        np.empty(0),
        np.empty(0),
        np.empty(0),
        call.scale or 0.0,  # (always set by capture_long)
        None if expected.all() else expected,
        call.softcap,
        name=call.name,
    )
    check(
        sampled,
        output[:, at],
        None if weights is None else weights[:, :, at],
        dtype,
        family,
        (call.q[:, at], k, v),
    )
