"""The implicit attention of a hybrid model's other layers: the matrix α with y_t = Σ_s α_ts x_s that a
state-space or linear-attention layer's scan computes (Ali, Zimerman & Wolf, "The Hidden Attention of
Mamba Models", 2024; "Explaining Modern Gated-Linear RNNs via a Unified Implicit Attention
Formulation", 2025).

``implicit_attention(model, tokenizer, text)`` runs the model once; each layer of a kind read here
(implicit_readers.READERS) is hooked: its input is caught, and so is what its scan gave, where the layer's
own modules receive it (its gated norm, or its output projection) or where it leaves the layer (the RG-LRU's
output). The scan's inputs and parameters are
recomputed from the layer's own weights on that input, and a layer is returned only when its scan, run
again step by step, gives what the layer itself gave (``error``); otherwise it is listed in ``skipped``
with the difference. α is built on request, a block of rows at a time (implicit_scans.build).

α is not a softmax: its entries are signed, its rows do not sum to 1, and a Mamba layer's includes
the skip term D on the diagonal (``alpha(skip=False)`` leaves it out). x is the scan's input (after
the input projection, the convolution and its activation) and y its output before the gate, the norm
and the output projection.
"""

from __future__ import annotations

import contextlib
import inspect
import re
from dataclasses import dataclass, field

import numpy as np
import torch

from . import implicit_readers as readers
from . import implicit_scans as scans
from .common import _check_readable, _evaluating, _tokens_of

__all__ = ["ImplicitAttention", "ImplicitLayer", "implicit_attention"]

# the largest difference, relative to the layer's largest output, between the scan run again and the layer's
# own output, by the model's precision (the layer's own scan runs in float32 even in a float64 model)
TOLERANCE = {torch.float64: 1e-5, torch.float32: 1e-4}
HALF = 1e-2  # float16, bfloat16
SOFTMAX = "softmax attention: read it with from_transformers"
# kinds of layer known and not read here, by class name, in words
NOT_READ = {
    "RwkvBlock": "RWKV time mixing",
    "xLSTMBlock": "xLSTM's mLSTM",
}


@dataclass
class ImplicitLayer:
    """One layer's implicit attention: ``alpha`` and ``alphas`` give α, ``x`` and ``y`` let α · x = y be
    checked: ``alphas() @ x`` is ``y`` (count × n × p: each channel or head has p numbers per token, all
    read with one α)."""

    layer: int  # the model's own layer number
    kind: str  # in words: "Mamba-1 selective state space", "Mamba-2 state space", ...
    per: str  # "channel" (Mamba-1: one α per inner channel) or "head"
    module: str  # the mixer's name in the model
    x: np.ndarray  # count × n × p, float64: the scan's input
    y: np.ndarray  # count × n × p, float64: the scan's output (the layer's own where a module receives it)
    error: float  # largest |scan run again − the layer's own output|, relative to the layer's largest output
    scan: scans.Scan = field(repr=False)  # the parameters α is built from (on the model's device)

    @property
    def count(self) -> int:
        """How many channels (heads) the layer has, each with its own α."""
        return self.scan.count

    def alpha(self, channel: int | None = None, *, channels=None, skip: bool = True, dtype=np.float32) -> np.ndarray:
        """α, n × n: of one channel (head), or the mean over ``channels`` (every one by default); with
        ``skip=False``, without Mamba's skip term D on the diagonal (α · x is then y − D x)."""
        if channel is not None:
            return self.alphas([channel], skip=skip, dtype=dtype)[0]
        return _numpy(scans.build(self.scan, self._index(channels), True, skip), dtype)

    def alphas(self, channels=None, *, skip: bool = True, dtype=np.float32) -> np.ndarray:
        """α of each of ``channels`` (every one by default), len × n × n; Mamba-1 has d_inner channels:
        mind the memory (d_inner · n² numbers), or ask for a few."""
        return _numpy(scans.build(self.scan, self._index(channels), False, skip), dtype)

    def _index(self, channels) -> torch.Tensor:
        idx = list(range(self.count)) if channels is None else [int(c) for c in np.atleast_1d(channels)]
        bad = next((c for c in idx if not 0 <= c < self.count), None)
        if bad is not None:
            raise IndexError(f"{self.per} {bad} is not one of layer {self.layer}'s {self.count} {self.per}s")
        if not idx:
            raise ValueError(f"no {self.per}s given: give at least one, or None for every one")
        return torch.tensor(idx, device=self.scan.x.device)


@dataclass
class ImplicitAttention:
    """A model's implicit attention on one text: its layers read, and the others' numbers with why not."""

    tokens: list[str]  # one per position (row and column of α); the ids as text when no tokenizer was given
    layers: list[ImplicitLayer]
    skipped: dict[int, str]  # layer number -> why it is not read
    model_name: str


def implicit_attention(model, tokenizer=None, text: str | None = None, *, input_ids=None) -> ImplicitAttention:
    """Every layer of ``model`` whose kind is read here, on ``text`` read with ``tokenizer``, or on
    ``input_ids`` (one sequence of token ids); the model runs once. Read (implicit_readers.READERS):
    Mamba-1 (mamba, falcon_mamba, jamba), Mamba-2 (mamba2, bamba, nemotron_h, granitemoehybrid, zamba2,
    falcon_h1), gated DeltaNet (qwen3_next, qwen3_5, olmo_hybrid), Kimi delta attention (kimi_linear,
    bailing_hybrid), lightning attention (minimax), gated short convolutions (lfm2, lfm2_moe) and Griffin's
    RG-LRU (recurrent_gemma). Other layers, attention layers among them, are in ``skipped`` with why."""
    from .hf import _base_model, _display_name

    base = _base_model(model)
    name = _display_name(base.config, model)
    ids, tokens = _ids(base, tokenizer, text, input_ids, name)
    device = next(base.parameters()).device
    mixers = {n: m for n, m in base.named_modules() if type(m).__name__ in readers.READERS}
    caught: dict[str, dict] = {n: {} for n in mixers}
    with contextlib.ExitStack() as stack:
        for n, m in mixers.items():
            stack.enter_context(_hooks(m, readers.READERS[type(m).__name__], caught[n]))
        stack.enter_context(_evaluating(base))
        stack.enter_context(torch.no_grad())
        accepted = inspect.signature(base.forward).parameters
        base(input_ids=ids.to(device), **({"use_cache": False} if "use_cache" in accepted else {}))
    layers, skipped = [], {}
    with torch.no_grad():
        for n, m in mixers.items():
            number = _number(m, n)
            found = _read(m, n, number, caught[n])
            if isinstance(found, str):
                skipped[number] = found
            else:
                layers.append(found)
    read = {layer.layer for layer in layers}
    for i, layer in enumerate(_layers(base)):
        if i not in read and i not in skipped:
            skipped[i] = _why(base.config, i, layer)
    return ImplicitAttention(tokens, layers, dict(sorted(skipped.items())), name)


def _ids(base, tokenizer, text, input_ids, name) -> tuple[torch.Tensor, list[str]]:
    from .configs import _positions, _vocabulary

    if input_ids is None:
        if tokenizer is None or not isinstance(text, str):
            raise TypeError(
                "implicit_attention reads a text: give a tokenizer and a text, or input_ids= (one sequence of token "
                "ids); e.g. implicit_attention(model, tokenizer, 'She sat by the river bank')"
            )
        input_ids = tokenizer(text, return_tensors="pt")["input_ids"]
    ids = torch.as_tensor(input_ids).long()
    if ids.dim() == 1:
        ids = ids[None]
    if ids.dim() != 2 or ids.shape[0] != 1:
        raise ValueError(
            f"input_ids must be one sequence of token ids (n, or 1 × n), got shape {tuple(ids.shape)}: read "
            "several texts one at a time"
        )
    if ids.shape[1] == 0:
        raise ValueError("no tokens to read: the text or input_ids is empty")
    kind = getattr(base.config, "model_type", None)
    shown = text if text is not None else f"a sequence of {ids.shape[1]} token ids"
    _check_readable(shown, ids[0].tolist(), name, _positions(base.config, kind), _vocabulary(base.config))
    tokens = _tokens_of(tokenizer, ids[0].tolist()) if tokenizer is not None else [str(i) for i in ids[0].tolist()]
    return ids, tokens


@contextlib.contextmanager
def _hooks(mixer, reader: readers.Reader, into: dict):
    """Catch the mixer's input (each call's: a mixer called twice in one pass is refused) and the input of
    the submodule that receives the scan's output."""

    def before(module, args, kwargs):
        into.setdefault("inputs", []).append(args[0] if args else kwargs["hidden_states"])

    def at(module, args):
        into.setdefault("own", []).append(args[0])

    def after(module, args, output):
        into.setdefault("own", []).append(output[0] if isinstance(output, tuple) else output)

    handles = [mixer.register_forward_pre_hook(before, with_kwargs=True)]
    if reader.at is None:  # (the mixer's own output is y)
        handles.append(mixer.register_forward_hook(after))
    else:
        handles.append(reader.at(mixer).register_forward_pre_hook(at))
    try:
        yield
    finally:
        for h in handles:
            h.remove()


def _read(mixer, name: str, number: int, caught: dict) -> ImplicitLayer | str:
    """The layer read from what was caught, checked against its own output; or why not."""
    reader = readers.READERS[type(mixer).__name__]
    inputs, own = caught.get("inputs", []), caught.get("own", [])
    if len(inputs) != 1 or len(own) != 1:
        return f"{reader.kind} at {name}: run {len(inputs)} times in one pass (its output seen {len(own)}), not once"
    try:
        scan, gate = reader.read(mixer, inputs[0])
    except NotImplementedError as e:  # (a variant of the family read here that α does not describe)
        return f"{reader.kind} at {name}: {e}"
    y = scan.recurrence()  # count × n × p
    seen = readers._wide(own[0]).reshape(scan.n, -1)  # n × width: y, or y ⊙ silu(gate)
    flat = y.transpose(0, 1).reshape(scan.n, -1)
    if gate is not None:
        flat = flat * torch.nn.functional.silu(gate)
    scale = float(seen.abs().max()) or 1.0
    error = float((flat - seen).abs().max()) / scale
    tolerance = TOLERANCE.get(inputs[0].dtype, HALF)
    if not error <= tolerance:
        return (
            f"{reader.kind} at {name}: the scan recomputed from the layer's weights does not reproduce the layer's "
            f"own output (largest difference {error:.2g} of its largest value, above {tolerance:g}): this layer's "
            f"code differs from what attnwidget reads (transformers version?)"
        )
    if gate is None:  # the layer's own y
        y = seen.reshape(scan.n, scan.count, -1).transpose(0, 1)
    return ImplicitLayer(number, reader.kind, reader.per, name, _numpy(scan.x), _numpy(y), error, scan)


def _number(mixer, name: str) -> int:
    """The model's own number for the mixer's layer: its layer_idx, else the first number in its name."""
    idx = getattr(mixer, "layer_idx", None)
    if isinstance(idx, int) and idx >= 0:
        return idx
    found = re.search(r"\d+", name)
    return int(found.group()) if found else -1


def _layers(base) -> list:
    """The model's list of layers: its first list of modules as long as config.num_hidden_layers."""
    count = getattr(base.config, "num_hidden_layers", None)
    for module in base.modules():
        if isinstance(module, torch.nn.ModuleList) and len(module) == count:
            return list(module)
    return []


def _why(config, i: int, layer) -> str:
    """Why layer i is not read: softmax attention, or a kind not read here."""
    for m in layer.modules():
        if type(m).__name__ in NOT_READ:
            return f"{NOT_READ[type(m).__name__]} ({type(m).__name__}): not read here"
    types = getattr(config, "layer_types", None)
    kind = types[i] if isinstance(types, (list, tuple)) and i < len(types) else None
    if kind is None:
        softmax = any(type(m).__name__.endswith("Attention") for m in layer.modules())
    else:
        softmax = "attention" in kind and "linear" not in kind
    if softmax:
        return SOFTMAX
    return f"{type(layer).__name__}" + (f" ({kind})" if kind else "") + ": a kind of layer not read here"


def _numpy(t: torch.Tensor, dtype=np.float64) -> np.ndarray:
    return t.detach().to("cpu", torch.float64).numpy().astype(dtype, copy=False)
