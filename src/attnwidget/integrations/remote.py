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

import torch

from . import byhand, hf, layers
from .common import ModelAttention
from .configs import position_of
from .interface import caught_call, check

OP = "attention_interface"  # the name transformers' attention modules give their attention function
CALL = f"{OP}_1"  # nnsight's name for its call: ``attention_interface = ...`` is ``_0``, the call ``_1``


def read(lm, text: str, remote: bool | str) -> ModelAttention:
    """``text`` read by ``lm`` (an nnsight model of a Hugging Face causal or encoder model) in one trace
    with ``remote`` passed to it: ``"local"`` (serialised as for a server, run here), True (the NDIF
    server nnsight is configured for) or a server's address. ``found.fetched``: the bytes the trace
    brought back (the saved tensors' nbytes)."""
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
    ids, tokens = hf.extract(module, tokenizer, text, check_only=True)
    device = next(module.parameters()).device
    inputs = {"input_ids": torch.tensor([ids]), "attention_mask": torch.ones(1, len(ids), dtype=torch.long)}
    if device.type != "meta":
        inputs = {key: val.to(device) for key, val in inputs.items()}
    from nnsight.intervention.interleaver import OutOfOrderError

    try:
        saved = _trace(lm, [envoy for _, envoy, _ in sites], inputs, remote)
    except OutOfOrderError as e:  # an operation asked for that the pass never ran
        raise NotImplementedError(
            f"{family} did not call its attention function in every attention module during the pass (it computes "
            "attention another way in this configuration, such as GPT-2's reorder_and_upcast_attn), so a remote "
            f"trace cannot read it; read it on this machine (from_nnsight without remote=). nnsight said: {e}"
        ) from e
    if len(saved) != len(sites):
        raise RuntimeError(f"the trace brought back {len(saved)} attention calls of the {len(sites)} asked for")
    calls, fetched = [], 0
    for (name, _, layer), (q, k, v, mask, scaling, softcap, sinks, is_causal, out) in zip(sites, saved):
        fetched += sum(t.nbytes for t in (q, k, v, mask, sinks, out) if isinstance(t, torch.Tensor))
        if sinks is not None and tuple(sinks.shape) != (q.shape[1],):
            raise NotImplementedError(
                f"{family} adds learnt attention sinks of shape {tuple(sinks.shape)} to its rows' softmax, where "
                f"attnwidget reads one logit per head ({q.shape[1]} here); it shows nothing rather than other weights"
            )
        n, m = q.shape[-2], k.shape[-2]
        causal = is_causal if is_causal is not None else getattr(_module_at(base, name), "is_causal", True)
        if mask is None and implementation == "sdpa" and causal and n > 1:  # SDPA's own causal rule, no mask made
            mask = torch.ones(n, m, dtype=torch.bool).tril(m - n)[None, None]
        call = caught_call(layer, name, q, k, v, mask, scaling, {"softcap": softcap}, sinks)
        groups = q.shape[1] // k.shape[1]
        k, v = (t.repeat_interleave(groups, dim=1) for t in (k, v))
        check(call, out, None, q.dtype, family, (q[0], k[0], v[0]))
        calls.append(call)
    found = hf._assemble(calls, tokens, hf._display_name(config, module), kind)
    names = [c.name for c in calls]
    found.layer_numbers = layers.numbers(names)
    if found.layer_numbers is not None:
        found.layer_kinds = layers.kinds(base, names, found.layer_numbers)
    found.sparse = layers.sparse(base, names, found.layer_numbers or list(range(len(calls)))) or None
    found.position = position_of(config)
    found.device = "cpu"  # the numbers came back to this machine
    found.fetched = fetched
    return found


def _trace(lm, envoys: list, inputs: dict, remote: bool | str) -> list:
    """One trace of ``lm`` on ``inputs``: each attention module's call, its arguments and its output,
    saved. Its body is what a server runs: it uses nnsight and torch alone (attnwidget is not there),
    and saves copies, so no view carries the larger tensor it is cut from."""
    import nnsight

    with lm.trace(inputs, remote=remote):
        got = nnsight.save([])  # (a server sends back what is saved, by its name here: the list itself)
        for envoy in envoys:
            args, kwargs = envoy.source.attention_interface_1.inputs
            out = envoy.source.attention_interface_1.output
            q, k, v, mask = args[1], args[2], args[3], args[4] if len(args) > 4 else kwargs.get("attention_mask")
            sinks = kwargs.get("s_aux", kwargs.get("sinks"))
            got.append(
                nnsight.save(
                    (
                        q.clone(),
                        k.clone(),
                        v.clone(),
                        None if mask is None else mask[:1, :1].clone(),
                        kwargs.get("scaling"),
                        kwargs.get("softcap"),
                        None if sinks is None else sinks.clone(),
                        kwargs.get("is_causal"),
                        out[0].clone(),
                    )
                )
            )
    return got


def _sites(lm, module, base, family: str) -> list[tuple[str, object, int]]:
    """Every attention module of ``base`` whose ``forward`` calls transformers' attention function once:
    its name in ``base``, its envoy in ``lm`` and its layer number, in the model's order."""
    prefix = next(name for name, m in module.named_modules() if m is base)
    sites: list[tuple[str, object, int]] = []
    for name, m in base.named_modules():
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
    if not sites:
        raise NotImplementedError(
            f"attnwidget cannot read {family} in a remote trace: no module of it calls transformers' attention "
            "function, which is where a remote trace reads attention"
        )
    return sites


def _module_at(base, name: str):
    return base.get_submodule(name) if name else base
