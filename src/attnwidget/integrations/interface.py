"""Reading a model where it computes attention: transformers' attention interface.

Every model built on ``transformers.AttentionInterface`` hands its attention function the query,
key and value after rotary, the mask it built (causal, padding, sliding window), its scaling and
extra terms such as Gemma 2's ``softcap``. ``capture`` puts a function there for one forward pass
that records those and then calls the model's own eager attention, so the pass is unchanged; a
model loaded for SDPA or another fast kernel is run eagerly for that pass, with the same weights.
"""

from __future__ import annotations

import contextlib
import sys
from dataclasses import dataclass

import numpy as np

from ..core import _softmax_rows, scores_of


@dataclass
class Caught:
    """One attention call: heads × queries × width arrays (float32), the keys and values already
    repeated to the query heads (grouped-query attention), and what the scores get."""

    layer: int
    q: np.ndarray
    k: np.ndarray
    v: np.ndarray
    scaling: float
    open: np.ndarray | None  # queries × keys, True where the model's mask lets a query read; None: every cell
    softcap: float | None  # scores = softcap · tanh(s / softcap), when the model caps them
    bias: np.ndarray | None = None  # (heads or 1) × queries × keys added to the scores (T5's position bias), or None
    name: str = ""  # the attention module's name in the model, e.g. "decoder.layers.0.encoder_attn"

    def weights(self) -> np.ndarray:
        """Each head's weights from what this call caught, in float64 (for checking): the core's
        scores and softmax, with the cap between them."""
        heads = []
        for h, (q, k) in enumerate(zip(self.q.astype(np.float64), self.k.astype(np.float64))):
            s = scores_of(q, k, self.scaling, softcap=self.softcap)
            if self.bias is not None:
                s = s + self.bias[h % len(self.bias)]
            heads.append(_softmax_rows(s, 1.0, self.open))
        return np.stack(heads)


def _numpy(t) -> np.ndarray:
    """float32, or float64 for a float64 model: the model's own numbers, exactly."""
    import torch

    return t.detach().to(device="cpu", dtype=torch.float64 if t.dtype == torch.float64 else torch.float32).numpy()


@contextlib.contextmanager
def _eager(model):
    """The model set to run eagerly (its own attention code) for the pass, and set back after."""
    before = getattr(getattr(model, "config", None), "_attn_implementation", None)
    if before in (None, "eager"):
        yield
        return
    model.set_attn_implementation("eager")
    try:
        yield
    finally:
        model.set_attn_implementation(before)


def capture(model, on_call=None, run=None, **inputs) -> list[Caught]:
    """Run ``model(**inputs)`` (batch 1) once and return every attention call it made, in order;
    ``on_call(count)`` is told of each (a progress report). ``run()``, when given, runs the pass
    instead (a tracing tool's own, such as nnsight's trace of the model).

    Raises NotImplementedError when the model makes no call through the attention interface (a
    family that computes attention its own way), naming the model's class."""
    import torch
    from transformers import AttentionInterface

    caught: list[Caught] = []
    names = {id(m): name for name, m in model.named_modules()}

    def recording(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs):
        if query.shape[0] != 1:
            raise ValueError(f"one text at a time: the batch has {query.shape[0]}")
        sinks = next((kwargs[n] for n in ("s_aux", "sinks") if kwargs.get(n) is not None), None)
        if sinks is not None:
            raise NotImplementedError(
                f"{type(model).__name__} adds learnt attention sinks to every row's softmax ({type(module).__name__}): "
                "their weights are not a softmax of q·k, so attnwidget cannot show them"
            )
        groups = query.shape[1] // key.shape[1]
        k, v = (t.repeat_interleave(groups, dim=1) for t in (key, value))
        scale = float(scaling if scaling is not None else query.shape[-1] ** -0.5)
        open_, bias = None, kwargs.get("position_bias")
        bias = None if bias is None else _numpy(bias[0, :, :, : key.shape[-2]])
        if attention_mask is not None:
            m = attention_mask[0, :, :, : key.shape[-2]]
            # an additive mask closes a cell with its dtype's minimum (or -inf); a boolean one with False
            opens = m > torch.finfo(m.dtype).min / 2 if m.dtype.is_floating_point else m.bool()
            open_ = opens[0].cpu().numpy()
            if m.dtype.is_floating_point and bool((torch.where(opens, m, 0) != 0).any()):  # finite terms: a bias
                extra = _numpy(torch.where(opens, m, 0))
                bias = extra if bias is None else bias + extra
            if open_.all():
                open_ = None
        if bias is not None and not bias.any():
            bias = None  # T5's layers without a position bias of their own pass zeros
        softcap = kwargs.get("softcap")
        layer = getattr(module, "layer_idx", None)
        caught.append(
            Caught(
                len(caught) if layer is None else layer,
                _numpy(query[0]),
                _numpy(k[0]),
                _numpy(v[0]),
                scale,
                open_,
                softcap or None,
                bias,
                names.get(id(module), ""),
            )
        )
        if on_call is not None:
            on_call(len(caught))
        # then the model's own eager attention: the forward pass is the model's
        own = sys.modules[type(module).__module__].eager_attention_forward
        return own(module, query, key, value, attention_mask, scaling=scaling, dropout=dropout, **kwargs)

    mapping = AttentionInterface._global_mapping
    had = mapping.get("eager")
    mapping["eager"] = recording  # "eager" is looked up here first, before the model's own default
    try:
        with _eager(model), torch.no_grad():
            run() if run is not None else model(**inputs)
    finally:
        if had is None:
            mapping.pop("eager", None)
        else:
            mapping["eager"] = had
    if not caught:
        kind = getattr(getattr(model, "config", None), "model_type", None)
        raise NotImplementedError(
            f"attnwidget cannot read attention from {type(model).__name__} (model_type {kind!r}): it computes attention "
            "without transformers' attention interface, where attnwidget reads it (every model built on the interface "
            "is read, and BLOOM by hand)"
        )
    return caught
