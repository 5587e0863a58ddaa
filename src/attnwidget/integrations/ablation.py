"""Head ablation: each head's effect on a causal language model's next token.

A head is ablated at its own output slot, before the output projection mixes the heads: its part
of what the attention function returns (batch × positions × heads × d_head) is set to zero, or to
its mean over the text's positions. A Hugging Face model is reached where interface.capture reads
it, through transformers' attention interface (no code per model); TransformerLens at its
``hook_z``. One pass per layer, a batch of copies of the text each ablating another of its heads.

torch is imported only when a model is run.
"""

from __future__ import annotations

import contextlib
import inspect
import sys
from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np

from .byhand import BY_HAND

MODES = ("zero", "mean")
METHODS = ("exact", "attribution")
TWO_BLOCKS = (
    "{name} is an encoder–decoder model: head effects are on a causal language model's next token "
    "(AutoModelForCausalLM)"
)
NO_TEXT = (
    "{name} is a vision transformer: head effects are each head's change to a causal language model's next token, "
    "and a model that reads an image writes no next token; head_summary() and head_scores() describe its heads"
)
BUDGET = 2**30  # bytes a pass's copies may take in attention scores and activations (the batch is split past it)


@dataclass
class Rerun:
    """What a model's widget keeps to run the model again: the model itself (a reference, not a
    copy of its weights) and the ids it read."""

    model: object
    ids: list[int]
    causal: bool  # the model's attention reads only earlier positions (a decoder)
    library: str = "transformers"  # or "transformer_lens"
    kept: dict = field(default_factory=dict)  # what was read of this text once (score_parts' stream), by name


def _one_of(name: str, value, allowed: tuple, meaning: str) -> str:
    if not isinstance(value, str) or value not in allowed:
        raise ValueError(f"{name} must be {' or '.join(map(repr, allowed))} ({meaning}); got {value!r}")
    return value


def check_mode(mode) -> str:
    return _one_of("mode", mode, MODES, "a head's output set to zero, or to its mean over the text's positions")


def check_method(method) -> str:
    meaning = "each head ablated and the model run again, or the linear estimate of one forward and one backward pass"
    return _one_of("method", method, METHODS, meaning)


def refusal(rerun: Rerun | None, vision: str = "") -> str | None:
    """Why the model cannot give a next token to ablate for (None when it can); ``vision``: the name of the
    vision transformer the widget shows, which has none."""
    if rerun is None and vision:
        return NO_TEXT.format(name=vision)
    if rerun is None:
        return (
            "head effects run the model again: they need a widget made from a model "
            "(AttentionWidget.from_transformers, from_nnsight or from_transformer_lens), not your own arrays, "
            "sentences or attention weights alone"
        )
    model = rerun.model
    name = type(model).__name__
    if rerun.library == "transformer_lens":
        return (
            None
            if rerun.causal
            else f"{name} attends in both directions (an encoder): it has no next token to ablate heads for"
        )
    config = getattr(model, "config", None)
    if getattr(config, "is_encoder_decoder", False):
        return TWO_BLOCKS.format(name=name)
    if not rerun.causal:
        return (
            f"{name} is an encoder (each token reads the whole text): it has no next token to ablate heads for; use a "
            "causal language model (AutoModelForCausalLM)"
        )
    head = getattr(model, "get_output_embeddings", None)
    if not callable(head) or head() is None:
        return (
            "head effects need a model with a language-model head, such as GPT2LMHeadModel or LlamaForCausalLM "
            f"(AutoModelForCausalLM); got {name}"
        )
    if getattr(config, "model_type", None) in BY_HAND:
        return (
            f"{name} computes attention without transformers' attention interface, where heads are ablated; a model of "
            "the GPT-2 or Llama families (or a TransformerLens bridge of one, from_transformer_lens) has head effects"
        )
    if any(hasattr(m, "lambda_q1") for m in cast(Any, model).modules()):  # differential attention (differential.py)
        return (
            f"{name} mixes each pair of heads' values with map 1 − λ·map 2 (differential attention): a head is half "
            "of a pair, so it cannot be ablated alone"
        )
    return None


def effects(rerun: Rerun, step: int, mode: str, method: str = "exact", only=None) -> np.ndarray:
    """layers × heads, float64: log p(next) with that head ablated alone, minus log p(next) of the
    model's own pass, at the last of the first ``step`` tokens; next is the token the model's own
    pass finds most likely there. ``method="attribution"``: its linear estimate (attribution
    patching), (z' − z) · ∂ log p(next) / ∂z summed over the head's output slot z (z' its ablated
    value), from one forward and one backward pass. ``only`` (exact): a layers × heads mask of
    the heads to ablate; the others are NaN."""
    problem = refusal(rerun)
    if problem:
        raise ValueError(problem)
    ids, mode = rerun.ids[:step], check_mode(mode)
    lens = rerun.library == "transformer_lens"
    if check_method(method) == "attribution":
        return (_lens_estimate if lens else _transformers_estimate)(rerun.model, ids, mode)
    return (_lens if lens else _transformers)(rerun.model, ids, mode, only)


def _chosen(only, layer: int, heads: int, step: int):
    """The heads of ``layer`` to ablate (every one without ``only``), ``step`` copies a pass at most."""
    chosen = list(range(heads)) if only is None else [int(h) for h in np.flatnonzero(only[layer])]
    return [chosen[at : at + step] for at in range(0, len(chosen), step)]


def _estimate(slots, grads, mode: str) -> np.ndarray:
    """layers × heads: each head's (ablated − actual) · gradient over its slot (1 × positions × heads × d)."""
    import torch

    out = []
    for z, g in zip(slots, grads):
        target = torch.zeros_like(z) if mode == "zero" else z.mean(dim=1, keepdim=True).expand_as(z)
        out.append(((target - z).double() * g.double()).sum(dim=(0, 1, 3)).cpu().numpy())
    return np.stack(out)


@contextlib.contextmanager
def _differentiable(model):
    """Gradients on while the block runs, inside torch.inference_mode() too (whose tensors have none); a model whose
    weights were made in it (inference tensors, which no gradient goes through) refused first."""
    import torch

    if any(p.is_inference() for p in model.parameters()):
        raise ValueError(
            f"{type(model).__name__}'s weights were made inside torch.inference_mode() (inference tensors), through "
            'which torch takes no gradient, and method="attribution" needs one: load the model outside it, or use '
            'method="exact" (the default), which runs the model without gradients'
        )
    with torch.inference_mode(False), torch.enable_grad():
        yield


def _transformers_estimate(model, ids: list[int], mode: str) -> np.ndarray:
    """A Hugging Face model's estimate: a zero added to what each layer's attention function returns
    (its heads' outputs, batch × positions × heads × d) is what the gradient is taken against."""
    import torch

    from .common import _evaluating
    from .interface import _eager, routed

    slots: list = []

    def recording(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs):
        own = sys.modules[type(module).__module__].eager_attention_forward  # the model's own attention
        out, weights = own(module, query, key, value, attention_mask, scaling=scaling, dropout=dropout, **kwargs)
        zero = torch.zeros_like(out, requires_grad=True)
        slots.append((out.detach(), zero))
        return out + zero, weights

    keep = {"logits_to_keep": 1} if "logits_to_keep" in inspect.signature(model.forward).parameters else {}
    with routed(recording), _eager(model), _evaluating(model), _differentiable(model):
        x = torch.tensor([ids], device=next(model.parameters()).device)  # (not an inference tensor)
        logits = model(input_ids=x, attention_mask=torch.ones_like(x), use_cache=False, **keep).logits
        logp = _log_next(logits)[0]
        _check_calls(model, [z.shape[2] for z, _ in slots], len(slots))
        grads = torch.autograd.grad(logp[int(logp.argmax())], [zero for _, zero in slots])
    return _estimate([z for z, _ in slots], grads, mode)


def _lens_estimate(model, ids: list[int], mode: str) -> np.ndarray:
    """A TransformerLens model's estimate, at each layer's hook_z."""
    import torch

    slots: list = []

    def recording(z, hook):
        zero = torch.zeros_like(z, requires_grad=True)
        slots.append((z.detach(), zero))
        return z + zero

    was_training = model.training
    model.eval()
    try:
        with _differentiable(model):
            x = torch.tensor([ids], device=model.cfg.device)  # (not an inference tensor)
            hooks = [(lambda name: name.endswith("attn.hook_z"), recording)]
            logp = _log_next(model.run_with_hooks(x, return_type="logits", fwd_hooks=hooks))[0]
            if len(slots) != model.cfg.n_layers:
                raise NotImplementedError(_NO_Z.format(name=type(model).__name__, layer=len(slots)))
            grads = torch.autograd.grad(logp[int(logp.argmax())], [zero for _, zero in slots])
    finally:
        model.train(was_training)
    return _estimate([z for z, _ in slots], grads, mode)


# a TransformerLens model's heads are ablated at hook_z, which a hook name it lacks would skip without a word
_NO_Z = (
    "{name}'s layer {layer} has no hook_z (each head's output) to ablate: its head effects cannot be computed "
    "here; read the Hugging Face model it wraps, loaded on its own, with from_transformers"
)


def _ablate(out, chosen: list[int], mode: str):
    """``out`` (batch × positions × heads × d) with head chosen[b] ablated in copy b (copies past
    those chosen are left as they are)."""
    import torch

    b = torch.arange(len(chosen), device=out.device)
    h = torch.tensor(chosen, device=out.device)
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


def _transformers(model, ids: list[int], mode: str, only=None) -> np.ndarray:
    """A Hugging Face model, ablated in what its attention function returns. The layers before the
    one ablated are the same in every copy: where the layer's block (the attention module's parent
    in a list of layers) takes the hidden states first, they run once and the block widens them to
    the batch; an unablated copy in the first batch checks that this is the model's own pass, and
    otherwise every copy runs the whole model."""
    import torch

    from .common import _evaluating
    from .interface import _eager, routed

    device = next(model.parameters()).device
    x = torch.tensor([ids], device=device)
    # which layer's heads are ablated this pass, from which and how many; each call's module and heads
    plan: dict[str, Any] = {"layer": -1, "chosen": [], "calls": 0, "modules": [], "heads": []}

    def ablating(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs):
        own = sys.modules[type(module).__module__].eager_attention_forward  # the model's own attention
        out, weights = own(module, query, key, value, attention_mask, scaling=scaling, dropout=dropout, **kwargs)
        layer, plan["calls"] = plan["calls"], plan["calls"] + 1
        plan["modules"].append(module)
        plan["heads"].append(out.shape[2])
        if layer == plan["layer"]:
            out = _ablate(out, plan["chosen"], mode)
        return out, weights

    keep = {"logits_to_keep": 1} if "logits_to_keep" in inspect.signature(model.forward).parameters else {}

    def log_next(batch, block=None, copies=0):
        """log p at the last position, a row per copy; ``block`` widens its input to ``copies``."""
        plan["calls"], plan["modules"], plan["heads"] = 0, [], []
        handle = None if block is None else block.register_forward_pre_hook(_widen(copies, len(ids)), with_kwargs=True)
        try:
            logits = model(input_ids=batch, attention_mask=torch.ones_like(batch), use_cache=False, **keep).logits
        finally:
            if handle is not None:
                handle.remove()
        return _log_next(logits)

    with routed(ablating), _eager(model), _evaluating(model), torch.no_grad():
        clean = log_next(x)[0]
        heads = list(plan["heads"])
        _check_calls(model, heads, len(plan["modules"]), plan["modules"])
        blocks = _blocks(model, plan["modules"])
        best = int(clean.argmax())
        width = int(getattr(model.config, "hidden_size", 0) or 0)
        step = _copies(heads[0], len(ids), width)
        out = np.full((len(heads), heads[0]), np.nan)
        checked = False
        for layer in range(len(heads)):
            for chosen in _chosen(only, layer, heads[0], step):
                count = len(chosen)
                plan.update(layer=layer, chosen=chosen)
                ablated = None
                if blocks is not None:
                    try:  # with one unablated copy more the first time: it must be the model's own pass
                        ablated = log_next(x, blocks[layer], count + (not checked))
                    except (RuntimeError, ValueError, IndexError):
                        ablated = None
                    if (
                        ablated is None
                        or len(ablated) != count + (not checked)
                        or (not checked and not _agrees(ablated[-1], clean, best))
                    ):
                        blocks, ablated = None, None  # the whole model for every copy, from here on
                    checked = True
                if ablated is None:
                    ablated = log_next(x.expand(count, -1))
                out[layer, chosen] = (ablated[:count, best] - clean[best]).cpu().numpy()
    return out


def _check_calls(model, heads: list[int], calls: int, modules=None) -> None:
    """One attention call per layer with attention (every layer, or a hybrid's attention layers) through
    transformers' attention interface, each with the layer's heads, and no module called twice."""
    layers = getattr(getattr(model, "config", None), "num_hidden_layers", None)
    twice = modules is not None and len({id(m) for m in modules}) != len(modules)
    if not heads or len(set(heads)) > 1 or twice or (isinstance(layers, int) and calls > layers):
        raise NotImplementedError(
            f"{type(model).__name__} makes {calls} attention calls through transformers' attention "
            f"interface with {sorted(set(heads))} heads: head effects need one call per layer with attention, with "
            "its heads, as decoder-only models such as GPT-2, Llama, Mistral, Qwen and Gemma (and hybrids' "
            "attention layers) make"
        )


def _blocks(model, modules) -> list | None:
    """Each attention call's block: its module's parent, an item of a list of layers (``h.3``,
    ``layers.3``); None when one is not."""
    names = {id(m): name for name, m in model.named_modules()}
    every = dict(model.named_modules())
    blocks = []
    for module in modules:
        parent = names.get(id(module), "").rpartition(".")[0]
        if not parent.rpartition(".")[2].isdigit() or parent not in every:
            return None
        blocks.append(every[parent])
    return blocks if len({id(b) for b in blocks}) == len(blocks) else None


def _widen(copies: int, n: int):
    """A forward pre-hook that gives a block its hidden states (its first input, 1 × n × width) as
    ``copies`` copies; the rest of its inputs, the same for every copy, broadcast."""

    def widen(module, args, kwargs):
        hidden = args[0] if args else kwargs.get("hidden_states")
        if hidden is None or hidden.ndim != 3 or hidden.shape[:2] != (1, n):
            raise ValueError("the block's first input is not the hidden states")
        wide = hidden.repeat(copies, 1, 1)
        return ((wide, *args[1:]), kwargs) if args else (args, {**kwargs, "hidden_states": wide})

    return widen


def _agrees(row, clean, best: int) -> bool:
    return bool(abs(float(row[best] - clean[best])) <= 1e-4 + 1e-4 * abs(float(clean[best])))


def _lens(model, ids: list[int], mode: str, only=None) -> np.ndarray:
    """A TransformerLens model (a TransformerBridge or a HookedTransformer), ablated at each layer's hook_z (batch ×
    positions × heads × d_head)."""
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
            out = np.full((cfg.n_layers, cfg.n_heads), np.nan)
            for layer in range(cfg.n_layers):
                for chosen in _chosen(only, layer, cfg.n_heads, step):
                    ran: list = []

                    def hook(z, hook, chosen=chosen, ran=ran):
                        ran.append(1)
                        return _ablate(z, chosen, mode)

                    logits = model.run_with_hooks(
                        x.expand(len(chosen), -1),
                        return_type="logits",
                        fwd_hooks=[(f"blocks.{layer}.attn.hook_z", hook)],
                    )
                    if not ran:
                        raise NotImplementedError(_NO_Z.format(name=type(model).__name__, layer=layer))
                    out[layer, chosen] = (_log_next(logits)[:, best] - clean[best]).cpu().numpy()
    finally:
        model.train(was_training)
    return out
