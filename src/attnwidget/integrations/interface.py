"""Reading a model where it computes attention: transformers' attention interface.

Every model built on ``transformers.AttentionInterface`` hands its attention function the query,
key and value after rotary, the mask it built (causal, padding, sliding window), its scaling and
extra terms such as Gemma 2's ``softcap`` and gpt-oss's learnt sinks. ``capture`` puts a function
there for one forward pass that records those and then calls the model's own eager attention, so
the pass is unchanged; a model loaded for SDPA or another fast kernel is run eagerly for that pass,
with the same weights.
"""

from __future__ import annotations

import contextlib
import sys
from dataclasses import dataclass

import numpy as np

from ..formulas import _softmax_rows, scores_of
from . import differential


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
    out: Projection | str | None = None  # the output projection the call's result is fed to, or why it was not found
    # each head's learnt sink (gpt-oss): a logit, one more column of every row's softmax, dropped after it; or None
    sinks: np.ndarray | None = None
    # differential attention's λ (differential.py): v holds both halves of the values, and head p's map 1 −
    # λ · head p + heads/2's map 2 is what the layer mixes them with; None for every other layer
    lam: float | None = None

    def weights(self) -> np.ndarray:
        """Each head's weights from what this call caught, in float64 (for checking): the core's
        scores and softmax, with the cap between them (and each head's sink in the softmax)."""
        heads = []
        for h, (q, k) in enumerate(zip(self.q.astype(np.float64), self.k.astype(np.float64))):
            s = scores_of(q, k, self.scaling, softcap=self.softcap)
            if self.bias is not None:
                s = s + self.bias[h % len(self.bias)]
            heads.append(_softmax_rows(s, 1.0, self.open, sink=None if self.sinks is None else self.sinks[h]))
        return np.stack(heads)


@dataclass
class Projection:
    """A layer's output projection, held by reference to the model's own tensors (no copy): the
    attention output (heads·d_head wide, head h in columns h·d_head to (h+1)·d_head) @ ``weight``
    (heads·d_head × width, a view: a Linear's weight transposed) + ``bias`` (or None)."""

    weight: object  # a torch tensor (or numpy array)
    bias: object | None
    name: str = ""  # the module's name in the model, e.g. "h.0.attn.c_proj"

    def arrays(self) -> tuple[np.ndarray, np.ndarray | None]:
        """The weight and bias as numpy (float32, or float64 for a float64 model): views where the
        model is on the CPU in float32, else copies made for this call."""
        return _numpy(self.weight), None if self.bias is None else _numpy(self.bias)


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


@contextlib.contextmanager
def routed(function):
    """Every eager attention call goes to ``function`` (the module, query, key, value, mask, ...) while held:
    "eager" is looked up in transformers' table first, before the model's own default."""
    from transformers import AttentionInterface

    mapping = AttentionInterface._global_mapping
    had = mapping.get("eager")
    mapping["eager"] = function
    try:
        yield
    finally:
        if had is None:
            mapping.pop("eager", None)
        else:
            mapping["eager"] = had


def capture(model, on_call=None, run=None, **inputs) -> list[Caught]:
    """Run ``model(**inputs)`` (batch 1) once and return every attention call it made, in order;
    ``on_call(count)`` is told of each (a progress report). ``run()``, when given, runs the pass
    instead (a tracing tool's own, such as nnsight's trace of the model).

    Raises NotImplementedError when the model makes no call through the attention interface (a
    family that computes attention its own way), naming the model's class."""
    import torch

    caught: list[Caught] = []
    names = {id(m): name for name, m in model.named_modules()}
    family = f"{type(model).__name__} (model_type {getattr(getattr(model, 'config', None), 'model_type', None)!r})"
    # the last call's module, query, key and output: a layer that calls attention again on them (differential attention)
    last: list = [None, None, None, None]

    def recording(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs):
        if query.shape[0] != 1:
            raise ValueError(f"one text at a time: the batch has {query.shape[0]}")
        sinks = next((kwargs[n] for n in ("s_aux", "sinks") if kwargs.get(n) is not None), None)
        if sinks is not None and tuple(sinks.shape) != (query.shape[1],):
            raise NotImplementedError(
                f"{family} adds learnt attention sinks of shape {tuple(sinks.shape)} to its rows' softmax "
                f"({type(module).__name__}): a logit for every token (made from its hidden state), where attnwidget "
                f"reads one logit per head, the same for every row (gpt-oss's, {query.shape[1]} here); it shows "
                "nothing rather than other weights"
            )
        again = module is last[0] and all(a is b or torch.equal(a, b) for a, b in ((query, last[1]), (key, last[2])))
        lam = differential.strength(module) if again and caught[-1].lam is None else None
        if module is last[0] and (query is last[1] or torch.equal(query, last[1])) and lam is None:
            raise NotImplementedError(
                f"{family} computes attention twice in each layer over the same queries and keys "
                f"({type(module).__name__}) and combines the results, as differential attention does: what its "
                "tokens read is not one softmax of q·k, so attnwidget cannot show it, and shows nothing rather than "
                "something else. Pass weights you have computed yourself to AttentionWidget.from_attentions"
            )
        call = caught_call(
            len(caught) if getattr(module, "layer_idx", None) is None else module.layer_idx,
            names.get(id(module), ""),
            query,
            key,
            value,
            attention_mask,
            scaling,
            kwargs,
            sinks,
        )
        # then the model's own eager attention: the forward pass is the model's
        own = sys.modules[type(module).__module__].eager_attention_forward
        result = own(module, query, key, value, attention_mask, scaling=scaling, dropout=dropout, **kwargs)
        output, weights = (result[0], result[1]) if isinstance(result, tuple) else (result, None)
        groups = query.shape[1] // key.shape[1]
        k, v = (t.repeat_interleave(groups, dim=1) for t in (key, value))
        check(call, output, weights, query.dtype, family, (query[0], k[0], v[0]))
        if lam is not None:  # differential attention's second call: the layer's other half of the values
            first = caught[-1]
            first.v, first.lam, first.out = np.concatenate([first.v, call.v], axis=-1), lam, differential.UNREAD
            projections.done()
            mixes.expect(module, first, last[3], output)
        else:
            caught.append(call)
            projections.expect(call, output)
        last[:] = module, query, key, output
        if on_call is not None:
            on_call(len(caught))
        return result

    projections = _Projections(names)
    mixes = differential.Mixes(family)
    try:
        with routed(recording), _eager(model), torch.no_grad(), projections.watching(model):
            run() if run is not None else model(**inputs)
    finally:
        mixes.remove()
    projections.done()
    mixes.done()
    if not caught:
        kind = getattr(getattr(model, "config", None), "model_type", None)
        from .implicit_readers import READERS

        if any(type(m).__name__ in READERS for m in model.modules()):  # (a state-space model: Mamba, ...)
            raise NotImplementedError(
                f"{type(model).__name__} (model_type {kind!r}) computes no attention: its layers are state-space or "
                "linear-attention scans, whose implicit attention (α with y = α · x) "
                "attnwidget.integrations.implicit_attention(model, tokenizer, text) reads"
            )
        raise NotImplementedError(
            f"attnwidget cannot read attention from {type(model).__name__} (model_type {kind!r}): it computes "
            "attention without transformers' attention interface, where attnwidget reads it (every model built on the "
            "interface is read, and BLOOM, MPT, XGLM and DeBERTa by hand)"
        )
    return caught


def caught_call(layer: int, name: str, query, key, value, attention_mask, scaling, kwargs, sinks=None) -> Caught:
    """One attention call's arguments (batch 1, as transformers' attention functions take them: keys and values
    before grouped-query heads are repeated, the model's 4-D mask or None) as a ``Caught``."""
    import torch

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
    return Caught(
        layer,
        _numpy(query[0]),
        _numpy(k[0]),
        _numpy(v[0]),
        scale,
        open_,
        kwargs.get("softcap") or None,
        bias,
        name,
        sinks=None if sinks is None else _numpy(sinks),
    )


def check(call: Caught, output, weights, dtype, family: str, qkv=None) -> None:
    """The weights attnwidget shows for ``call`` against what the model's own attention function
    returned for it: its weights, or where it returns none its output (weights × values), within
    the rounding of the model's dtype. Raises NotImplementedError, naming the family and the
    layer, where they differ: a family read wrong is refused, never shown. ``qkv``: the call's
    query, keys and values (heads × tokens × width) as torch tensors on the model's device, where
    the check then runs; else the call's own arrays, on the CPU.

    A call with learnt sinks (``call.sinks``) has each head's logit as one more column of its rows'
    softmax, dropped after it, as gpt-oss's eager attention computes it; a family whose attention
    uses its sinks another way (its weights or output differ) is refused, saying so.

    The bound: a score reaches the softmax rounded to ε (its dtype's, or float32's where the
    softmax runs in float32, as transformers' does) times itself and its bias, plus the
    accumulator's ε times d · scale · ‖q‖ · ‖k‖ (float32's for half-precision products, added up in
    float32); the check's own scores, in float32 (float64 for a float64 model), add their own. A
    softmax whose inputs move by at most δ moves each weight by at most (e^{2δ} − 1) times itself.
    In half precision the rounding is coarse (bfloat16's ε is 2⁻⁷): a difference smaller than it
    cannot be told from rounding there."""
    import torch

    from .on_server import gap

    q, k, v = qkv if qkv is not None else (torch.from_numpy(a) for a in (call.q, call.k, call.v))
    heads, n, _ = q.shape
    m = k.shape[1]
    if weights is not None and tuple(weights.shape[1:]) != (heads, n, m):
        raise NotImplementedError(
            f"{family}'s attention at layer {call.layer} returns weights of shape {tuple(weights.shape)} "
            f"where attnwidget caught {heads} heads × {n} queries × {m} keys: a form of attention attnwidget "
            "does not read; nothing is shown"
        )
    if weights is None and tuple(output.shape[1:]) != (n, heads, v.shape[-1]):
        raise NotImplementedError(
            f"{family}'s attention at layer {call.layer} returns neither weights nor an output of "
            "queries × heads × width, so attnwidget cannot check what it caught against it; nothing is shown"
        )
    device = q.device
    bias = None if call.bias is None else torch.from_numpy(np.ascontiguousarray(call.bias)).to(device)
    closed = None if call.open is None else torch.from_numpy(~call.open).to(device)
    sinks = None if call.sinks is None else torch.from_numpy(call.sinks).to(device)
    refuse(
        call,
        gap(q, k, v, call.scaling, call.softcap, bias, closed, sinks, weights, output, dtype),
        dtype,
        family,
    )


def refuse(call: Caught, worst: float, dtype, family: str) -> None:
    """Raises where ``worst`` (on_server.gap's) says the model's own result lies past rounding from what was caught."""
    if worst > 0 and call.sinks is not None:
        raise NotImplementedError(
            f"{family} adds learnt attention sinks at layer {call.layer} ({call.name or 'its attention module'}) in a "
            "way attnwidget does not read: what its attention returns is not the softmax of its scores with each "
            "head's sink as one more column, dropped after it (gpt-oss's recipe, which attnwidget shows); they differ "
            f"beyond rounding (by {worst:.2g} more than {dtype}'s rounding allows), so nothing is shown rather than "
            "numbers the model did not compute"
        )
    if worst > 0:
        raise NotImplementedError(
            f"{family} computes attention at layer {call.layer} ({call.name or 'its attention module'}) in a way "
            f"attnwidget does not read: the model's own result and the softmax of the q·k attnwidget caught differ "
            f"beyond rounding (by {worst:.2g} more than {dtype}'s rounding allows), so nothing is shown rather than "
            "numbers the model did not compute. Pass its own attention weights to AttentionWidget.from_attentions "
            "if they are what it mixes the values with"
        )


_UNREAD = (
    "no module of the model took this attention call's output (heads · d_head wide) as its input "
    "(a gate, norm or adapter before the output projection); norms() needs a plain linear output projection: "
    "merge or remove adapters (PEFT's merge_and_unload) and forward hooks on it"
)


class _Projections:
    """Finds each attention call's output projection with no table of models: the first module
    with a weight that is fed the call's output, merged to queries × heads·d_head (GPT-2's c_proj,
    Llama's o_proj, BERT's output.dense, BART's out_proj, T5's o, ...). It must be a linear map
    (torch's Linear or transformers' Conv1D) whose own output, on one row, is that row @ its weight
    + its bias; a call whose output is changed first (a gate), or fed to another kind of module
    (an adapter, a quantised layer), keeps a sentence saying why instead."""

    def __init__(self, names):
        self.names = names
        self.waiting: tuple | None = None  # (call, its output merged): the last call, until its projection is found
        self.checking: tuple | None = None  # (call, module, Projection, input): the module found, until it has run

    def expect(self, call: Caught, output) -> None:
        self.done()
        call.out = _UNREAD
        self.waiting = (call, output.reshape(*output.shape[:2], -1))

    def done(self) -> None:
        self.waiting = self.checking = None

    @contextlib.contextmanager
    def watching(self, model):
        hooks = []
        try:
            for m in model.modules():
                hooks += [m.register_forward_pre_hook(self._before), m.register_forward_hook(self._after)]
            yield
        finally:
            for h in hooks:
                h.remove()

    def _before(self, module, args) -> None:
        if self.waiting is None or not args:
            return
        call, merged = self.waiting
        x = args[0]
        if not (hasattr(x, "shape") and x.shape == merged.shape and bool((x == merged.to(x.dtype)).all())):
            return
        if getattr(module, "weight", None) is None:
            return  # a container such as BERT's BertSelfOutput: its projection is inside
        self.waiting = None
        found = self._linear(module)
        if isinstance(found, str):
            call.out = found
        else:
            self.checking = (call, module, found, x)

    def _linear(self, module) -> Projection | str:
        import torch
        from transformers.pytorch_utils import Conv1D

        w, b = module.weight, getattr(module, "bias", None)
        kind = type(module).__name__
        if type(module) is torch.nn.Linear:
            w = w.detach().T  # x @ Wᵀ + b: the transpose, a view
        elif type(module) is Conv1D:
            w = w.detach()  # GPT-2's: x @ W + b already
        else:
            return (
                f"the attention output goes to a {kind}, not a linear map attnwidget reads (torch's Linear, "
                "transformers' Conv1D): an adapter (merge it into the model first), a quantised layer (load the model "
                "unquantised) or a norm"
            )
        if not w.dtype.is_floating_point or w.ndim != 2:
            return (
                f"the output projection's weight ({kind}) is {w.dtype} of shape {tuple(w.shape)}: not a matrix of "
                "floating-point numbers"
            )
        return Projection(w, None if b is None else b.detach(), self.names.get(id(module), ""))

    def _after(self, module, args, output) -> None:
        if self.checking is None or self.checking[1] is not module:
            return
        import torch

        call, _, found, x = self.checking
        self.checking = None
        y = output[0] if isinstance(output, tuple) else output
        # one row recomputed from the weight held, with a bound on float rounding: the map is that one
        dtype = torch.promote_types(found.weight.dtype, torch.float32)
        w, row = found.weight.to(dtype), x[0, -1].to(dtype)
        want = row @ w + (0 if found.bias is None else found.bias.to(dtype))
        scale = float(row.norm() * torch.linalg.vector_norm(w, dim=0).max()) + (
            0.0 if found.bias is None else float(found.bias.abs().max())
        )
        eps = torch.finfo(dtype).eps * 8 * len(row) ** 0.5 + 2 * (
            torch.finfo(y.dtype).eps if y.dtype.is_floating_point else 1.0
        )
        if y.shape[-1] != want.shape[-1] or float((y[0, -1].to(dtype) - want).abs().max()) > eps * scale:
            call.out = (
                f"{found.name or 'the output projection'} does not give its input @ its weight + its bias: attnwidget "
                "cannot read it as a linear map (remove forward hooks on it, merge adapters, or load the model "
                "unquantised)"
            )
        else:
            call.out = found
