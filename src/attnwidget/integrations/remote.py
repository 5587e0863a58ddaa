"""An nnsight model read inside its own trace, so that the trace can run on a remote server (NDIF).

On a server only the trace's body runs: transformers' attention interface cannot be hooked there
(interface.capture). Each attention module's call to its attention function is instead one of
nnsight's source operations (``attention_interface_1`` in the ``forward`` of every family built on
the interface): the body saves what that call is handed (q and k after rotary, k and v before
grouped-query heads are repeated, the model's mask, its scaling, soft cap and sinks) and what it
returns, and only those tensors travel back. Here they become the same ``Caught`` calls as a local
read, each checked against the attention's own output from the same pass, and the same
``ModelAttention``.

Imported only by ``attnwidget.integrations.from_nnsight``, after torch, transformers and nnsight are
known to be importable.
"""

from __future__ import annotations

import inspect
import threading

import numpy as np
import torch

from . import byhand, hf, layers, on_server, remote_errors
from .common import ModelAttention
from .configs import position_of
from .interface import Caught, _numpy, refuse

OP = "attention_interface"  # the name transformers' attention modules give their attention function
CALL = f"{OP}_1"  # nnsight's name for its call: ``attention_interface = ...`` is ``_0``, the call ``_1``


def read(lm, text: str, remote: bool | str, layer: int | None = None) -> ModelAttention:
    """``text`` read by ``lm`` (an nnsight model of a Hugging Face causal or encoder model) in one trace
    with ``remote`` passed to it: ``"local"`` (serialised as for a server, run here), True (the NDIF
    server nnsight is configured for) or a server's address.

    The server checks every layer (on_server.gap) and computes its overview (on_server.overview); only the
    layer ``layer`` (the model's number; None: the first) brings its q, k and v back, in the model's dtype,
    with each layer's mask, scale, soft cap and sinks. Every other layer is read when first needed
    (``found.remote``: one more trace). ``found.fetched``: the bytes brought back so far."""
    module, tokenizer = lm._module, lm.tokenizer
    base = hf._base_model(module)
    config = base.config
    kind = getattr(config, "model_type", None)
    family = f"{type(module).__name__} (model_type {kind!r})"
    if kind in byhand.BY_HAND or getattr(config, "is_encoder_decoder", False):
        why = "computes attention its own way, read by hand" if kind in byhand.BY_HAND else "is an encoder–decoder"
        raise NotImplementedError(
            f"{family} {why}: attnwidget reads it on this machine only (from_nnsight(model, text) without remote=, "
            "or from_transformers), not in a remote trace, which reads each attention module's call to "
            "transformers' attention interface"
        )
    implementation = getattr(config, "_attn_implementation", None) or "eager"
    if implementation not in ("eager", "sdpa"):
        raise NotImplementedError(
            f"{family} is loaded with attn_implementation={implementation!r}, whose mask a remote trace cannot read: "
            'load it with attn_implementation="eager" or "sdpa"'
        )
    sites = _sites(lm, module, base, family)
    numbers = [number for _, _, number in sites]
    if layer is not None and layer not in numbers:
        raise ValueError(
            f"layer must be one of the model's attention layers, by its own number: {numbers}; got {layer}"
        )
    shown = 0 if layer is None else numbers.index(layer)
    ids, tokens = hf.extract(module, tokenizer, text, check_only=True)
    device = next(module.parameters()).device
    inputs = {"input_ids": torch.tensor([ids]), "attention_mask": torch.ones(1, len(ids), dtype=torch.long)}
    if device.type != "meta":
        inputs = {key: val.to(device) for key, val in inputs.items()}
    # without a mask, SDPA applies the module's causal rule itself (transformers' default: causal); eager applies none
    causal = [getattr(_module_at(base, name), "is_causal", True) for name, _, _ in sites]
    causal = [rule if implementation == "sdpa" else None for rule in causal]
    saved = _run(lm, family, sites, inputs, remote, [shown], causal)  # the check and overview of every layer
    if len(saved["layers"]) != len(sites):
        raise RuntimeError(
            f"the trace brought back {len(saved['layers'])} attention calls of the {len(sites)} asked for"
        )
    n = len(ids)
    calls = []
    for (name, _, number), one in zip(sites, saved["layers"]):
        heads, d, dv = one["shape"]
        sinks = one["sinks"]
        if sinks is not None and tuple(sinks.shape) != (heads,):
            raise NotImplementedError(
                f"{family} adds learnt attention sinks of shape {tuple(sinks.shape)} to its rows' softmax, where "
                f"attnwidget reads one logit per head ({heads} here); it shows nothing rather than other weights"
            )
        if one["terms"]:
            raise NotImplementedError(
                f"{family} adds a term to its scores through its mask at layer {number}, which a remote trace does "
                "not bring back; read it on this machine (from_nnsight without remote=)"
            )
        index = one["mask"]
        closed = (
            saved["masks"][index].numpy()
            if index >= 0
            else np.triu(np.ones((n, n), dtype=bool), 1)
            if index == -2
            else None
        )
        scaling = float(one["scaling"] if one["scaling"] is not None else d**-0.5)
        q, k, v = (np.broadcast_to(np.float32(0), (heads, n, w)) for w in (d, d, dv))  # read when first needed
        call = Caught(number, q, k, v, scaling, None if closed is None else ~closed, one["softcap"] or None, name=name)
        call.sinks = None if sinks is None else _numpy(sinks)
        refuse(call, one["worst"], one["dtype"], family)
        calls.append(call)
    found = hf._assemble(calls, tokens, hf._display_name(config, module), kind)
    names = [c.name for c in calls]
    found.layer_numbers = layers.numbers(names)
    if found.layer_numbers is not None:
        found.layer_kinds = layers.kinds(base, names, found.layer_numbers)
    found.sparse = layers.sparse(base, names, found.layer_numbers or list(range(len(calls)))) or None
    found.position = position_of(config)
    found.device = "cpu"  # the numbers came back to this machine
    found.served = {key: [one[key] for one in saved["layers"]] for key in ("thumbs", "top", "summaries")}
    found.remote = reader = Remote(lm, family, sites, inputs, remote, found, set(range(len(sites))))
    found.layers = held = Held(found.layers)
    held.remote = reader
    found.fetched = saved["bytes"]
    found.ids = ids  # (what it read: the duplicate-token score's ids)
    reader.fill({shown: reader.to_numpy(saved["qkv"][0])})
    return found


class Remote:
    """What reads a remote model's other layers when first needed: one more trace, bringing back their q, k
    and v. ``missing``: the places (in ``found.layers``) not read yet; ``tell(text)``, where set, says what
    is being read while the server works (the widget's page)."""

    def __init__(self, lm, family, sites, inputs, remote, found, missing: set):
        self.lm, self.family, self.sites, self.inputs, self.remote = lm, family, sites, inputs, remote
        self.found, self.missing = found, missing
        self.lock = threading.Lock()  # (one trace of a model at a time: the overview's thread, the kernel's)
        self.axes_due: set[int] = set()
        self.tell = None

    def read(self, places: list[int]) -> dict:
        """The q, k and v of the layers at ``places`` (keys and values repeated to the query heads), float32."""
        if self.tell is not None:
            numbers = [self.sites[i][2] for i in places]
            self.tell(f"layer{'s' if len(numbers) > 1 else ''} {', '.join(map(str, numbers))} from the server")
        saved = _run(self.lm, self.family, self.sites, self.inputs, self.remote, places, None)
        self.found.fetched = (self.found.fetched or 0) + saved["bytes"]
        return {i: self.to_numpy(qkv) for i, qkv in zip(places, saved["qkv"])}

    @staticmethod
    def to_numpy(qkv) -> tuple:
        q, k, v = qkv
        groups = q.shape[1] // k.shape[1]
        return tuple(_numpy(t[0].repeat_interleave(g, dim=0)) for t, g in ((q, 1), (k, groups), (v, groups)))

    def ensure(self, places) -> None:
        """The layers at ``places`` read, those not read yet in one trace."""
        with self.lock:
            due = sorted(set(places) & self.missing)
            if due:
                self.fill(self.read(due))

    def fill(self, got: dict) -> None:
        """The layers read into ``found.layers``: in place of their stand-ins, or, once the widget has stacked
        them, into the stacks its layers are views of (``axes_due``: the layers whose value axes are now due)."""
        held = self.found.layers
        for i, new in got.items():
            now = list.__getitem__(held, i)
            if not any(now[0].strides):  # a stand-in (zeros, no memory)
                list.__setitem__(held, i, new)
            else:
                for view, a in zip(now, new):
                    base = view.base if view.base is not None else view
                    was = base.flags.writeable
                    base.setflags(write=True)
                    view[...] = a
                    base.setflags(write=was)
            self.missing.discard(i)
            self.axes_due.add(i)


class Held(list):
    """A remote read's layers, (q, k, v) each: a layer not read yet is read (one more trace) when first asked
    for; the list's own methods (list.__getitem__, list.__iter__) give its stand-ins as they are."""

    remote: Remote

    def __getitem__(self, i):
        self.remote.ensure(range(len(self))[i] if isinstance(i, slice) else [range(len(self))[i]])
        return list.__getitem__(self, i)

    def __iter__(self):
        self.remote.ensure(range(len(self)))
        return list.__iter__(self)

    def __reversed__(self):
        self.remote.ensure(range(len(self)))
        return list.__reversed__(self)

    def copy(self) -> list:
        return list(self)

    def __add__(self, other):
        return list(self) + list(other)

    def __radd__(self, other):
        return list(other) + list(self)


def _run(lm, family, sites, inputs, remote, keep: list[int], causal) -> dict:
    """One trace: the q, k and v of the layers at ``keep``; with ``causal`` (each layer's own rule where SDPA runs,
    for its unmade mask; None where eager runs, which has none), every layer's check, overview, mask, scale, soft
    cap and sinks too. ``bytes``: what came back."""
    from nnsight.intervention.interleaver import OutOfOrderError

    try:
        with remote_errors.explained(lm, remote):  # (a failure said in words, what to do with it; nothing kept)
            saved = _trace(lm, [envoy for _, envoy, _ in sites], inputs, remote, keep, causal)
    except OutOfOrderError as e:  # an operation asked for that the pass never ran
        raise NotImplementedError(
            f"{family} did not call its attention function in every attention module during the pass (it computes "
            "attention another way in this configuration, such as GPT-2's reorder_and_upcast_attn), so a remote "
            f"trace cannot read it; read it on this machine (from_nnsight without remote=). nnsight said: {e}"
        ) from e
    saved["bytes"] = _bytes(saved)
    return saved


def _bytes(x) -> int:
    if isinstance(x, torch.Tensor):
        return x.nbytes
    if isinstance(x, dict):
        return sum(_bytes(v) for v in x.values())
    if isinstance(x, (list, tuple)):
        return sum(_bytes(v) for v in x)
    return 0


def _trace(lm, envoys: list, inputs: dict, remote: bool | str, keep: list[int], causal: list | None) -> dict:
    """The trace's body: what a server runs. It uses nnsight, torch and on_server (sent by value) alone, and saves
    copies, so no view carries the larger tensor it is cut from."""
    import nnsight

    nnsight.register(on_server)
    with lm.trace(inputs, remote=remote):
        qkv: list = []
        each: list = []
        masks: list = []
        for i, envoy in enumerate(envoys):
            args, kwargs = envoy.source.attention_interface_1.inputs
            q, k, v = args[1], args[2], args[3]
            if i in keep:
                qkv.append((q.clone(), k.clone(), v.clone()))
            if causal is None:
                continue
            out = envoy.source.attention_interface_1.output
            mask = args[4] if len(args) > 4 else kwargs.get("attention_mask")
            is_causal = kwargs.get("is_causal")
            rule = causal[i] is not None and (causal[i] if is_causal is None else is_causal)  # (SDPA's: else None)
            closed, terms = on_server.closed(mask, q.shape[-2], k.shape[-2], bool(rule))
            index = on_server.find(masks, closed, k.shape[-2])
            groups = q.shape[1] // k.shape[1]
            kk, vv = (t[0].repeat_interleave(groups, dim=0) for t in (k, v))
            sinks = kwargs.get("s_aux", kwargs.get("sinks"))
            sinks = None if sinks is None else sinks.detach()
            with torch.no_grad():  # (a model's learnt sinks are parameters; every argument given: see on_server)
                scaling = kwargs.get("scaling") or q.shape[-1] ** -0.5
                worst = on_server.gap(
                    q[0], kk, vv, scaling, kwargs.get("softcap"), None, closed, sinks, None, out[0], q.dtype, None
                )
                thumbs, top, summaries = on_server.overview(q[0], kk, scaling, kwargs.get("softcap"), closed, sinks, 84)
            each.append(
                {
                    "shape": (q.shape[1], q.shape[-1], v.shape[-1]),
                    "mask": index,
                    "terms": terms,
                    "scaling": kwargs.get("scaling"),
                    "softcap": kwargs.get("softcap"),
                    "sinks": None if sinks is None else sinks.detach().clone(),
                    "dtype": q.dtype,
                    "worst": worst,
                    "thumbs": thumbs,
                    "top": top,
                    "summaries": summaries,
                }
            )
        got = nnsight.save({"qkv": qkv, "layers": each, "masks": masks})
    return got


def _sites(lm, module, base, family: str) -> list[tuple[str, object, int]]:
    """Every attention module of ``base`` whose ``forward`` calls transformers' attention function once:
    its name in ``base``, its envoy in ``lm`` and its layer number, in the model's order."""
    prefix = next(name for name, m in module.named_modules() if m is base)
    text = getattr(base, "language_model", None)  # a model of images or sound besides text: its text model's alone
    inside = next((name for name, m in base.named_modules() if m is text), None) if text is not None else None
    sites: list[tuple[str, object, int]] = []
    for name, m in base.named_modules():
        if inside is not None and not (name == inside or name.startswith(f"{inside}.") or not inside):
            continue  # (its vision or audio tower does not run on a text)
        try:
            code = inspect.getsource(type(m).forward)
        except (OSError, TypeError):
            continue
        if f"{OP}(" not in code:
            continue
        envoy = lm.get(".".join(p for p in (prefix, name) if p))
        ops = envoy.source.names
        calls = [op for op in ops if op.startswith(f"{OP}_") and op != f"{OP}_0"]
        if calls != [CALL]:
            raise NotImplementedError(
                f"{family}'s attention module {name} ({type(m).__name__}) calls its attention function "
                f"{len(calls)} times in its forward ({', '.join(calls) or 'none named ' + CALL}): a remote trace "
                "reads one call per layer; read it on this machine (from_nnsight without remote=)"
            )
        layer = getattr(m, "layer_idx", None)
        sites.append((name, envoy, len(sites) if layer is None else layer))
    numbers = [getattr(_module_at(base, name), "layer_idx", None) for name, _, _ in sites]
    known = [x for x in numbers if x is not None]
    count = getattr(getattr(base, "config", None), "num_hidden_layers", None)
    if len(set(known)) < len(known) or (sites and not known and isinstance(count, int) and len(sites) < count):
        raise NotImplementedError(
            f"{family} runs its attention modules more than once in a pass ({len(sites)} module{'s' * (len(sites) > 1)}"
            f"{f' for {count} layers' if isinstance(count, int) else ''}: layers shared or repeated), and a remote "
            "trace reads each module's first call; "
            "read it on this machine (from_nnsight without remote=)"
        )
    if not sites:
        raise NotImplementedError(
            f"attnwidget cannot read {family} in a remote trace: no module of it calls transformers' attention "
            "function, which is where a remote trace reads attention"
        )
    return sites


def _module_at(base, name: str):
    return base.get_submodule(name) if name else base
