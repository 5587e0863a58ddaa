"""Head ablation: each head's effect on a causal language model's next token.

A head is ablated at its own output slot, before the output projection mixes the heads: its part
of what the attention function returns (batch × positions × heads × d_head) is set to zero, or to
its mean over the text's positions. A Hugging Face model is reached where interface.capture reads
it, through transformers' attention interface (no code per model); TransformerLens at its
``hook_z``. One pass per layer, a batch of copies of the text each ablating another of its heads.

torch is imported only when a model is run.
"""

from __future__ import annotations

import inspect
import sys
from dataclasses import dataclass
from typing import Any

import numpy as np

MODES = ("zero", "mean")
TWO_BLOCKS = "{name} is an encoder–decoder model: head effects are on a causal language model's next token (AutoModelForCausalLM)"
BUDGET = 2**30  # bytes a pass's copies may take in attention scores and activations (the batch is split past it)


@dataclass
class Rerun:
    """What a model's widget keeps to run the model again: the model itself (a reference, not a
    copy of its weights) and the ids it read."""

    model: object
    ids: list[int]
    causal: bool  # the model's attention reads only earlier positions (a decoder)
    library: str = "transformers"  # or "transformer_lens"


def check_mode(mode) -> str:
    if not isinstance(mode, str) or mode not in MODES:
        raise ValueError(f"mode must be 'zero' or 'mean' (a head's output set to zero, or to its mean over the text's positions); got {mode!r}")
    return mode


def refusal(rerun: Rerun | None) -> str | None:
    """Why the model cannot give a next token to ablate for (None when it can)."""
    if rerun is None:
        return (
            "head effects run the model again: they need a widget made from a model (AttentionWidget.from_transformers, "
            "from_nnsight or from_transformer_lens), not your own arrays, sentences or attention weights alone"
        )
    model = rerun.model
    name = type(model).__name__
    if rerun.library == "transformer_lens":
        return None if rerun.causal else f"{name} attends in both directions (an encoder): it has no next token to ablate heads for"
    config = getattr(model, "config", None)
    if getattr(config, "is_encoder_decoder", False):
        return TWO_BLOCKS.format(name=name)
    if not rerun.causal:
        return f"{name} is an encoder (each token reads the whole text): it has no next token to ablate heads for; use a causal language model (AutoModelForCausalLM)"
    head = getattr(model, "get_output_embeddings", None)
    if not callable(head) or head() is None:
        return f"head effects need a model with a language-model head, such as GPT2LMHeadModel or LlamaForCausalLM (AutoModelForCausalLM); got {name}"
    if getattr(config, "model_type", None) == "bloom":
        return f"{name} computes attention without transformers' attention interface, where heads are ablated"
    return None


def effects(rerun: Rerun, step: int, mode: str) -> np.ndarray:
    """layers × heads, float64: log p(next) with that head ablated alone, minus log p(next) of the
    model's own pass, at the last of the first ``step`` tokens; next is the token the model's own
    pass finds most likely there."""
    problem = refusal(rerun)
    if problem:
        raise ValueError(problem)
    ids = rerun.ids[:step]
    run = _lens if rerun.library == "transformer_lens" else _transformers
    return run(rerun.model, ids, check_mode(mode))


def _ablate(out, first: int, mode: str):
    """Copy b of the batch with head first + b of ``out`` (batch × positions × heads × d) ablated."""
    import torch

    b = torch.arange(len(out), device=out.device)
    h = b + first
    out = out.clone()
    out[b, :, h, :] = 0.0 if mode == "zero" else out[b, :, h, :].mean(dim=1, keepdim=True)
    return out


def _copies(heads: int, n: int, width: int) -> int:
    """How many copies of an n-token text one pass holds within BUDGET."""
    per_copy = 4 * n * (2 * heads * n + 16 * width)  # float32 scores and weights, and the layer's activations
    return max(1, min(heads, BUDGET // per_copy))


def _log_next(logits):
    """log p of every token at the last position, in float64."""
    import torch

    return torch.log_softmax(logits[:, -1].double(), dim=-1)


def _transformers(model, ids: list[int], mode: str) -> np.ndarray:
    import torch
    from transformers import AttentionInterface

    from .hf import _evaluating
    from .interface import _eager

    device = next(model.parameters()).device
    x = torch.tensor([ids], device=device)
    plan: dict[str, Any] = {"layer": -1, "first": 0, "calls": 0, "heads": []}  # which layer's heads are ablated this pass, from which

    def ablating(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs):
        own = sys.modules[type(module).__module__].eager_attention_forward  # the model's own attention
        out, weights = own(module, query, key, value, attention_mask, scaling=scaling, dropout=dropout, **kwargs)
        layer, plan["calls"] = plan["calls"], plan["calls"] + 1
        plan["heads"].append(out.shape[2])
        if layer == plan["layer"]:
            out = _ablate(out, plan["first"], mode)
        return out, weights

    keep = {"logits_to_keep": 1} if "logits_to_keep" in inspect.signature(model.forward).parameters else {}

    def log_next(batch):
        plan["calls"], plan["heads"] = 0, []
        logits = model(input_ids=batch, attention_mask=torch.ones_like(batch), use_cache=False, **keep).logits
        return _log_next(logits)

    mapping = AttentionInterface._global_mapping
    had = mapping.get("eager")
    mapping["eager"] = ablating  # "eager" is looked up here first, before the model's own default
    try:
        with _eager(model), _evaluating(model), torch.no_grad():
            clean = log_next(x)[0]
            heads = list(plan["heads"])
            if not heads or len(set(heads)) > 1:
                raise NotImplementedError(
                    f"{type(model).__name__} makes {len(heads)} attention calls through transformers' attention interface "
                    f"with {sorted(set(heads))} heads: head effects need one call per layer, with its heads"
                )
            best = int(clean.argmax())
            width = int(getattr(model.config, "hidden_size", 0) or 0)
            step = _copies(heads[0], len(ids), width)
            out = np.zeros((len(heads), heads[0]))
            for layer in range(len(heads)):
                for first in range(0, heads[0], step):
                    count = min(step, heads[0] - first)
                    plan["layer"], plan["first"] = layer, first
                    ablated = log_next(x.expand(count, -1))
                    out[layer, first : first + count] = (ablated[:, best] - clean[best]).cpu().numpy()
    finally:
        if had is None:
            mapping.pop("eager", None)
        else:
            mapping["eager"] = had
    return out


def _lens(model, ids: list[int], mode: str) -> np.ndarray:
    """A TransformerLens HookedTransformer, ablated at each layer's hook_z (batch × positions × heads × d_head)."""
    import torch

    cfg = model.cfg
    x = torch.tensor([ids], device=cfg.device)
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            clean = _log_next(model(x, return_type="logits"))[0]
            best = int(clean.argmax())
            step = _copies(cfg.n_heads, len(ids), cfg.d_model)
            out = np.zeros((cfg.n_layers, cfg.n_heads))
            for layer in range(cfg.n_layers):
                for first in range(0, cfg.n_heads, step):
                    count = min(step, cfg.n_heads - first)

                    def hook(z, hook, first=first):
                        return _ablate(z, first, mode)

                    logits = model.run_with_hooks(x.expand(count, -1), return_type="logits", fwd_hooks=[(f"blocks.{layer}.attn.hook_z", hook)])
                    out[layer, first : first + count] = (_log_next(logits)[:, best] - clean[best]).cpu().numpy()
    finally:
        model.train(was_training)
    return out
