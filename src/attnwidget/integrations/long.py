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
from typing import Any, NoReturn

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


def shape_of(open_: np.ndarray, rows: np.ndarray) -> tuple[bool, int | None] | None:
    """(causal, window) of a mask's ``rows`` (booleans, True where a row reads), where they are the causal
    rule and a sliding window exactly; None where they are not (padding, a two-sided window, ...)."""
    m = open_.shape[1]
    causal = not (open_ & (np.arange(m)[None, :] > rows[:, None])).any()
    first = np.where(open_.any(1), open_.argmax(1), m)  # each row's first column read
    spans = (rows - first + 1)[first > 0]  # the rows that do not read column 0: their windows
    window = int(spans[0]) if causal and len(spans) and (spans == spans[0]).all() else None
    if not (causal or open_.all()) or (causal and len(spans) and window is None):
        return None
    return (causal, window) if np.array_equal(open_, open_rows(rows, m, causal, window)) else None


def capture_long(model, on_call=None, samples: int = SAMPLED, **inputs) -> dict[int, LongLayer]:
    """Run ``model(**inputs)`` (batch 1) with its own attention: {each call's layer number (the model's
    own): what it read}, in order; ``on_call(count)`` is told of each call read (a count of layers).

    What each row reads is read from the mask the model passes (on the sampled rows), or, with none,
    from what the kernel does without one: SDPA's causal flag (no window: SDPA has none), a
    FlashAttention kernel's causal flag and ``sliding_window``."""
    import torch
    from transformers import AttentionInterface
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

    config = getattr(model, "config", None)
    impl = getattr(config, "_attn_implementation", None) or "eager"
    family = f"{type(model).__name__} (model_type {getattr(config, 'model_type', None)!r})"
    names = {id(m): name for name, m in model.named_modules()}
    # the kernel the model calls: a wrapper another library set in the table models read (kvpress sets
    # one at import), which comes before the registered one, or the registered one
    local = getattr(ALL_ATTENTION_FUNCTIONS, "_local_mapping", {})
    mapping = local if impl in local else AttentionInterface._global_mapping
    had = mapping.get(impl)
    if (had is None and impl != "eager") or impl.startswith("flex"):
        raise NotImplementedError(
            f"{family} runs attention with {impl!r}, which a long text's reading does not follow: load it with "
            'attn_implementation="sdpa" (or "eager" for a short text)'
        )
    calls: dict[int, LongLayer] = {}
    seen: set[int] = set()

    def refuse(what: str) -> NoReturn:
        raise NotImplementedError(f"{family} {what}, which a long text's reading does not hold")

    def recording(module, query, key, value, attention_mask, *args, **kwargs):
        own = had if had is not None else sys.modules[type(module).__module__].eager_attention_forward
        result = own(module, query, key, value, attention_mask, *args, **kwargs)
        if query.shape[0] != 1:
            raise ValueError(f"one text at a time: the batch has {query.shape[0]}")
        for what, names_ in (("learnt attention sinks", ("s_aux", "sinks")), ("a position bias", ("position_bias",))):
            if any(kwargs.get(n) is not None for n in names_):
                refuse(f"adds {what} to its scores")
        n, m = query.shape[2], key.shape[2]
        if n != m:
            refuse(f"reads another text's keys ({type(module).__name__}: cross-attention, {n} queries, {m} keys)")
        if id(module) in seen:
            refuse(f"computes attention twice in {names.get(id(module)) or type(module).__name__} (one layer)")
        seen.add(id(module))
        scaling = kwargs.get("scaling", args[1] if len(args) > 1 else None)
        scaling = float(scaling if scaling is not None else query.shape[-1] ** -0.5)
        rows = sampled_rows(n, samples)
        if attention_mask is not None:  # its shape, read from the mask itself
            mask = attention_mask[0, 0][torch.as_tensor(rows, device=attention_mask.device), :m]
            given = mask > torch.finfo(mask.dtype).min / 2 if mask.dtype.is_floating_point else mask.bool()
            found = shape_of(given.cpu().numpy(), rows)
            if found is None or (mask.dtype.is_floating_point and bool((torch.where(given, mask, 0) != 0).any())):
                refuse(
                    f"passes a mask at layer {len(calls)} that is not the causal rule and a sliding window alone "
                    "(padding, a two-sided window or a bias in it): read one text with no padding, or a shorter "
                    "text with AttentionWidget.from_transformers"
                )
            causal, window = found
        else:  # the kernel's own rule, as transformers decides it (sdpa_attention_forward, the flash kernels)
            flag = kwargs.get("is_causal")
            causal = impl != "eager" and n > 1 and bool(getattr(module, "is_causal", True) if flag is None else flag)
            window = None if impl in ("eager", "sdpa") else kwargs.get("sliding_window")
        layer = getattr(module, "layer_idx", None)
        layer = len(calls) if layer is None else int(layer)
        if layer in calls:
            refuse(f"makes two attention calls numbered layer {layer} (an encoder's and a decoder's?)")
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
        _held_to_the_model(layer, call, result, rows, open_rows(rows, m, causal, call.window), query.dtype, family)
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
    """The sampled rows' weights (their output, where the kernel returns no weights) against the model's own,
    a group of heads at a time: each reads its key-value head as a view, never copied out to every head."""
    import torch

    output, weights = (result[0], result[1]) if isinstance(result, tuple) else (result, None)
    at = torch.as_tensor(rows, device=call.q.device)
    heads, (kv, m, _) = call.q.shape[0], call.k.shape
    group = heads // kv
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
    for g in range(kv):
        hs = slice(g * group, (g + 1) * group)
        k, v = (t[g : g + 1].expand(group, m, t.shape[-1]) for t in (call.k, call.v))
        check(
            sampled,
            output[:, at][:, :, hs],
            None if weights is None else weights[:, hs][:, :, at],
            dtype,
            family,
            (call.q[hs][:, at], k, v),
        )
