"""Why a head attends where it does: a model's score at one cell split into what its query and its
key were made of.

The residual stream that feeds layer L is the sum of what wrote into it: the token embedding, the
position embedding (models with one), each earlier layer's heads (head h's output: its slice of
the attention output times its rows of the output projection), that projection's bias, and each
MLP's output. Hold the layer's input norm at the scale it had in this pass (σ, or the RMS, of the
whole stream at each position) and the norm is affine; so are the query and the key (a linear
projection, its bias, rotary at the position). Each is then a sum over the stream's parts plus a
constant (the norm's bias and the projections'), and the score q_i · k_j × scaling is a sum over
(query part, key part) pairs, exactly. Grouped heads share their key parts.

The parts are read in one pass of the model (``read``); the query and key of any set of parts come
from the model's own attention module, called again on them at the cell's positions and stopped
where it hands its query and key to the attention function, so no family's projections or rotary
are written here. A model whose stream is not a plain sum (post-norm blocks such as BERT's, Gemma
2's norms after attention), or whose input norm is neither a LayerNorm nor an RMSNorm, is refused,
saying why.
"""

from __future__ import annotations

import contextlib
import sys
from dataclasses import dataclass, field, replace
from types import SimpleNamespace
from typing import Any

import numpy as np

from . import held_norms
from .common import _evaluating
from .interface import Projection, _eager, _numpy, _Projections, routed

PLAIN = (
    "{family}: {why}, so the stream that feeds a layer is not a sum of what the earlier layers wrote as they wrote "
    "it. attnwidget splits the scores of pre-norm models, whose layers add their attention's and MLP's outputs to "
    "the stream as they are (GPT-2, Llama, Mistral, Qwen 2, Gemma, GPT-NeoX)"
)
_PAST = ("past_key_values", "past_key_value", "layer_past", "cache")  # a cache: none when called again


class _Enough(Exception):
    """Raised where the attention module hands over its query and key: nothing after is needed."""


@dataclass
class _Layer:
    module: Any  # the attention module (a torch module)
    call: tuple  # (args, kwargs, where the stream was: an index in args or "hidden_states")
    z: np.ndarray  # the attention function's output: queries × heads × d_head
    out: Projection
    mlp: np.ndarray  # n × width: what the MLP added (the layer's output − its input − the attention's)
    q: np.ndarray  # query heads × n × d_head, after rotary: the model's own
    k: np.ndarray  # key heads × n × d_head
    scaling: float
    norm: tuple  # the input norm held: (weight, bias or None, centred, each position's σ or RMS)
    # the norms inside the attention (Qwen 3's q_norm and k_norm, of each head's query or key), held the same way:
    # (module, weight, bias or None, centred, each row's scale shaped as its input less the last axis)
    inner: list = field(default_factory=list)


@dataclass
class ScoreParts:
    """One cell's score as (query part, key part) pairs: ``table[a, b]`` is query part a's and key part
    b's term, scaling included, and the table sums to ``score``, the model's own score."""

    query: list[str]  # the query's parts, in order: the embedding, the position embedding, each earlier
    key: list[str]  # layer's heads, output bias and MLP, then this layer's biases; the key's the same
    groups: list[str]  # each part's group: "embedding", "position", "layer 3", "bias"
    table: np.ndarray
    score: float
    layer: int
    head: int
    row: int
    column: int  # −1 for a row's: then table[a, b] is the pair's share of the row's terms' magnitude, Σ_j |term|
    terms: np.ndarray | None = None  # a row's: query parts × key parts × keys, each pair's term of each key's score
    keys: list[int] | None = None  # a row's keys

    @property
    def total(self) -> float:
        """The pairs' sum: the score (a row's: the scores' sum)."""
        return float(self.table.sum() if self.terms is None else self.terms.sum())

    def by_layer(self) -> ScoreParts:
        """The same table with each layer's heads, output bias and MLP summed into one part."""
        order = list(dict.fromkeys(self.groups))
        sums = np.array([[g == o for g in self.groups] for o in order], dtype=np.float64)
        names = [_group_name(o, self.query, self.groups) for o in order]
        keys = [_group_name(o, self.key, self.groups) for o in order]
        return replace(self, query=names, key=keys, groups=order, table=sums @ self.table @ sums.T)

    def largest(self, count: int = 8) -> list[tuple[str, str, float]]:
        """The ``count`` pairs of largest magnitude: (query part, key part, term), largest first."""
        flat = np.argsort(-np.abs(self.table), axis=None, kind="stable")[:count]
        return [
            (self.query[a], self.key[b], float(self.table[a, b]))
            for a, b in zip(*np.unravel_index(flat, self.table.shape))
        ]

    def __repr__(self) -> str:
        shown = self.largest(6)
        if self.terms is not None:
            said = f"layer {self.layer} head {self.head}, row {self.row}"
            lines = [f"{said}: each pair's share of its terms over {len(self.keys or ())} keys"]
            return "\n".join([*lines, *(f"  {v:6.1%}  query: {a} × key: {b}" for a, b, v in shown)])
        lines = [f"layer {self.layer} head {self.head}, query {self.row} × key {self.column}: score {self.score:.4g}"]
        lines += [f"  {v:+.4g}  query: {a} × key: {b}" for a, b, v in shown]
        rest = self.total - sum(v for _, _, v in shown)
        lines.append(f"  {rest:+.4g}  the other {self.table.size - len(shown)} pairs")
        return "\n".join(lines)


def _group_name(group: str, names: list[str], groups: list[str]) -> str:
    return names[groups.index(group)] if group in ("embedding", "position") else "biases" if group == "bias" else group


@dataclass
class Stream:
    """One pass of a model on ``ids``: what each part wrote into the residual stream, by layer."""

    model: Any  # a transformers model
    ids: list
    tokens: list[str]
    family: str
    embedding: np.ndarray  # n × width: the token embedding (times what the model multiplies it by)
    position: np.ndarray | None  # n × width: the position embedding, or None
    layers: list[_Layer] = field(default_factory=list)

    def parts(self, layer: int, positions: list[int], heads: bool = True) -> tuple[list[str], list[str], np.ndarray]:
        """The stream that feeds ``layer`` at ``positions`` as its parts: names, groups and
        parts × positions × width (float64), which sum to the stream; ``heads=False``: each earlier
        layer's heads, output bias and MLP as one part."""
        names, groups, rows = ["embedding"], ["embedding"], [self.embedding[positions]]
        if self.position is not None:
            names, groups, rows = (
                [*names, "position embedding"],
                [*groups, "position"],
                [*rows, self.position[positions]],
            )
        for number, earlier in enumerate(self.layers[:layer]):
            weight, bias = earlier.out.arrays()
            w, b = weight.astype(np.float64), None if bias is None else bias.astype(np.float64)
            z = earlier.z[positions].astype(np.float64)  # positions × heads × d_head
            if not heads:  # (the heads side by side through the whole projection: one product)
                names.append(f"layer {number}")
                rows.append(z.reshape(len(z), -1) @ w + (0 if b is None else b) + earlier.mlp[positions])
                groups.append(names[-1])
                continue
            width = z.shape[2]
            for h in range(z.shape[1]):
                names.append(f"layer {number} head {h}")
                rows.append(z[:, h] @ w[h * width : (h + 1) * width])
            if b is not None:
                names.append(f"layer {number} output bias")
                rows.append(np.broadcast_to(b, rows[-1].shape))
            names.append(f"layer {number} MLP")
            rows.append(earlier.mlp[positions])
            groups += [f"layer {number}"] * (len(names) - len(groups))
        return names, groups, np.stack(rows)

    def cell(self, layer: int, head: int, row: int, column: int) -> ScoreParts:
        """Head ``head`` of ``layer`` at (row, column): its score as a table of (query part, key part) pairs."""
        at = self._layer(layer, head)
        names, groups, parts = self.parts(layer, [row, column])
        q, k = self.qk(layer, parts, [row, column])
        kv = head // (at.q.shape[0] // at.k.shape[0])  # (grouped heads share a key head)
        table = at.scaling * (q[:, head, 0] @ k[:, kv, 1].T)
        score = at.scaling * float(at.q[head, row].astype(np.float64) @ at.k[kv, column].astype(np.float64))
        names = [*names, f"biases (layer {layer}'s norm and projections)"]
        return ScoreParts(
            _named(names, row, self.tokens),
            _named(names, column, self.tokens),
            [*groups, "bias"],
            table,
            score,
            layer,
            head,
            row,
            column,
        )

    def row(self, layer: int, head: int, row: int, keys: list[int]) -> ScoreParts:
        """The row's scores at ``keys`` by layer (each layer's parts summed first, as the maps are linear):
        ``terms`` (query parts × key parts × keys) sum over the pairs to each key's score, and ``table`` is
        each pair's share of their magnitude (the sum of its terms' magnitudes over every pair's); ``score``:
        the scores' sum."""
        at = self._layer(layer, head)
        names, order, parts = self.parts(layer, [row, *keys], heads=False)
        q, k = self.qk(layer, parts, [row, *keys])
        kv = head // (at.q.shape[0] // at.k.shape[0])
        terms = at.scaling * np.einsum("ad,bjd->abj", q[:, head, 0], k[:, kv, 1:])
        labels = [*(_group_name(o, names, order) for o in order), "biases"]
        share = np.abs(terms).sum(-1)
        share = share / max(share.sum(), np.finfo(float).tiny)
        scores = at.scaling * (at.k[kv, keys].astype(np.float64) @ at.q[head, row].astype(np.float64))
        return ScoreParts(
            _named(labels, row, self.tokens),
            ["the embedding", *labels[1:]],
            [*order, "bias"],
            share,
            float(scores.sum()),
            layer,
            head,
            row,
            -1,
            terms,
            list(keys),
        )

    def _layer(self, layer: int, head: int) -> _Layer:
        if not 0 <= layer < len(self.layers):
            raise ValueError(
                f"layer {layer} is not one of the model's {len(self.layers)} layers (0 … {len(self.layers) - 1})"
            )
        if not 0 <= head < self.layers[layer].q.shape[0]:
            raise ValueError(f"head {head} is not one of layer {layer}'s {self.layers[layer].q.shape[0]} heads")
        return self.layers[layer]

    def qk(self, layer: int, parts: np.ndarray, positions: list[int]) -> tuple[np.ndarray, np.ndarray]:
        """Each part's query and key (after rotary) at ``positions`` through the layer's norm held, then the
        constant (the biases) as one more part: parts × heads × positions × d_head each, float64."""
        import torch

        at = self.layers[layer]
        weight, bias, centred, scale = at.norm
        x = parts - parts.mean(-1, keepdims=True) if centred else parts
        u = x / scale[positions][None, :, None] * weight
        constant = np.zeros_like(u[:1]) if bias is None else np.broadcast_to(bias, u[:1].shape)
        first = next(iter(at.module.parameters()))  # (the layer's own device: a model spread over several)
        batch = np.concatenate([np.zeros_like(u[:1]), u, constant])  # (0 first: the map at 0, the projections' bias)
        # the positions' axis is known by its length: made no other axis's (heads, key heads, width, parts)
        taken = {len(batch), *at.q.shape[::2], at.k.shape[0]}
        padded = list(positions) + [positions[0]] * next(
            e for e in range(len(taken) + 1) if len(positions) + e not in taken
        )
        x = np.concatenate([batch, np.repeat(batch[:, :1], len(padded) - len(positions), axis=1)], axis=1)
        q, k = self._call(at, torch.as_tensor(x, dtype=first.dtype, device=first.device), padded)
        q, k = q[:, :, : len(positions)], k[:, :, : len(positions)]
        q = np.concatenate([q[1:-1] - q[:1], q[-1:]])  # each part's (the map less its value at 0), then the constant's
        k = np.concatenate([k[1:-1] - k[:1], k[-1:]])
        for name, mine, own in (
            ("query", q[:, :, 0], at.q[:, positions[0]]),
            ("key", k[:, :, -1], at.k[:, positions[-1]]),
        ):
            if not np.allclose(mine.sum(0), own, rtol=1e-3, atol=1e-4 * (np.abs(own).max() + 1e-30)):
                raise NotImplementedError(
                    f"{self.family}: the {name} vectors of layer {layer}'s parts do not add up to the model's own "
                    f"{name} (off by {np.abs(mine.sum(0) - own).max():.3g}): its attention is not an affine map of "
                    "its normed input at a held scale (a gate or another map inside it), "
                    "so its score is not split"
                )
        return q, k

    def _call(self, at: _Layer, batch, positions: list[int]) -> tuple[np.ndarray, np.ndarray]:
        import torch

        caught: list = []

        def stop(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs):
            caught[:] = [query.double().cpu().numpy(), key.double().cpu().numpy()]
            raise _Enough

        args, kwargs, where = at.call
        args, kwargs = _at(list(args), kwargs, positions, len(self.ids))
        if where == "hidden_states":
            kwargs["hidden_states"] = batch
        else:
            args.insert(where, batch)
        with (
            routed(stop),
            _eager(self.model),
            _evaluating(self.model),
            torch.no_grad(),
            held_norms.holding(at.inner, positions),
        ):
            with contextlib.suppress(_Enough):
                at.module(*args, **kwargs)
        if not caught:
            raise NotImplementedError(f"{self.family}: its attention module made no attention call when called again")
        return caught[0], caught[1]


def _named(names: list[str], position: int, tokens: list[str]) -> list[str]:
    token = tokens[position] if position < len(tokens) else str(position)
    return [f"the embedding of {token!r}" if n == "embedding" else n for n in names]


def _at(args: list, kwargs: dict, positions: list[int], n: int) -> tuple[list, dict]:
    """The attention module's arguments at ``positions`` alone: each tensor's sequence axis (its first of
    length n after the batch's) taken at them, the mask and cache dropped (nothing runs past the query and key)."""
    import torch

    def at(value):
        if isinstance(value, (tuple, list)):
            return type(value)(at(v) for v in value)
        if not isinstance(value, torch.Tensor) or value.ndim == 0:
            return value
        axes = [a for a in range(min(1, value.ndim - 1), value.ndim) if value.shape[a] == n]
        return value.index_select(axes[0], torch.as_tensor(positions, device=value.device)) if axes else value

    kept = {k: None if k in _PAST or k == "attention_mask" else at(v) for k, v in kwargs.items()}
    return [at(a) for a in args], kept


def read(model, ids: list, tokens: list[str] | None = None) -> Stream:
    """One pass of ``model`` on ``ids`` (batch 1), recording what each part wrote into the residual stream
    and what each layer's attention made of it; raises NotImplementedError, saying why, for a model whose
    stream is not a plain sum or whose norm or attention this cannot hold."""
    import torch

    first = next(iter(model.parameters()))
    if first.dtype in (torch.float16, torch.bfloat16):
        raise NotImplementedError(
            f"the model is in {str(first.dtype).replace('torch.', '')}, whose rounding is coarser than the split's "
            "checks: load it in float32 (model.float()) to split its scores"
        )
    names = {id(m): name for name, m in model.named_modules()}
    family = f"{type(model).__name__} (model_type {getattr(getattr(model, 'config', None), 'model_type', None)!r})"
    attentions = [m for m in model.modules() if "Attention" in type(m).__name__ or "Attn" in type(m).__name__]
    parents = {id(child): m for m in model.modules() for child in m.children()}
    seen: dict = {}  # id(module) → what it was called with and gave
    calls: list = []

    def recording(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs):
        if kwargs.get("softcap"):
            raise NotImplementedError(f"{family} caps its scores (softcap): a capped score is not a sum of pairs")
        own = sys.modules[type(module).__module__].eager_attention_forward
        result = own(module, query, key, value, attention_mask, scaling=scaling, dropout=dropout, **kwargs)
        output = result[0] if isinstance(result, tuple) else result
        if attention_mask is not None and attention_mask.dtype.is_floating_point:
            m = attention_mask[0, :, :, : key.shape[-2]]
            if bool((torch.where(m > torch.finfo(m.dtype).min / 2, m, 0) != 0).any()):
                raise NotImplementedError(f"{family} adds a bias to its scores (ALiBi, T5's): not a product of q and k")
        call = SimpleNamespace(module=module, q=query, k=key, z=output, scaling=scaling, out=None)
        calls.append(call)
        projections.expect(call, output)
        return result

    def before(module, args, kwargs):
        seen[id(module)] = [args, kwargs, None]

    def after(module, args, kwargs, output):
        seen[id(module)][2] = output[0] if isinstance(output, tuple) else output

    watched = {id(m): m for m in attentions}
    watched.update({id(c): c for m in attentions for c in m.children() if "Norm" in type(c).__name__})
    for m in attentions:
        layer = parents.get(id(m))
        for c in [layer, *(layer.children() if layer is not None else ())]:
            if c is not None and (c is layer or "Norm" in type(c).__name__ or names.get(id(c), "").endswith("mlp")):
                watched[id(c)] = c
    embeddings = [m for m in model.modules() if isinstance(m, torch.nn.Embedding)]
    watched.update({id(m): m for m in embeddings})
    projections = _Projections(names)
    hooks = []
    inputs = torch.as_tensor([list(ids)], device=first.device)
    try:
        for m in watched.values():
            hooks += [
                m.register_forward_pre_hook(before, with_kwargs=True),
                m.register_forward_hook(after, with_kwargs=True),
            ]
        with routed(recording), _eager(model), _evaluating(model), torch.no_grad(), projections.watching(model):
            _body(model)(input_ids=inputs)  # (a task's head, such as a language model's 50,000 logits, is not needed)
    finally:
        for h in hooks:
            h.remove()
        projections.done()
    if not calls:
        raise NotImplementedError(f"{family} made no call through transformers' attention interface")
    if len({id(c.module) for c in calls}) < len(calls):
        raise NotImplementedError(
            f"{family} calls one attention module more than once in a pass (layers shared or run again, or "
            "differential attention's two maps): a part's query is then not one call's, so its scores are not split"
        )
    ids, tokens = list(ids), tokens or [str(i) for i in ids]
    return _assemble(model, ids, tokens, family, calls, seen, parents, names, embeddings)


def _assemble(model, ids, tokens, family, calls, seen, parents, names, embeddings) -> Stream:
    def f64(t):
        return t.detach().double().cpu().numpy()[0]

    def given(module):  # the stream a module was called with (its first argument, or hidden_states=)
        args, kwargs, _ = seen[id(module)]
        return kwargs["hidden_states"] if "hidden_states" in kwargs else args[0]

    layers: list[_Layer] = []
    stream: np.ndarray | None = None
    first: np.ndarray | None = None
    for number, call in enumerate(calls):
        layer = parents.get(id(call.module))
        if id(call.module) not in seen or layer is None or id(layer) not in seen:
            raise NotImplementedError(
                f"{family}: its attention module {type(call.module).__name__} was not seen called"
            )
        if not isinstance(call.out, Projection):
            raise NotImplementedError(f"{family}: layer {number}'s output projection is not read: {call.out}")
        args, kwargs, out = seen[id(call.module)]
        x = f64(given(layer))
        if stream is None:
            stream = first = x
        elif not np.array_equal(x, stream):
            why = f"layer {number}'s input is not layer {number - 1}'s output"
            raise NotImplementedError(PLAIN.format(family=family, why=why))
        norm = _norm(layer, given(call.module), x, seen, family, number)
        what = {"family": family, "number": number}
        mlp = next((c for c in layer.children() if id(c) in seen and names.get(id(c), "").endswith("mlp")), None)
        stream = f64(seen[id(layer)][2])
        added = stream - x - f64(out)
        if mlp is None:
            raise NotImplementedError(
                f"{family}: layer {number} keeps no MLP module under the name mlp (OPT's and BioGPT's keep their "
                "linear maps in the layer itself), so what it adds besides attention is not read as one part"
            )
        if not np.allclose(added, f64(seen[id(mlp)][2]), rtol=1e-4, atol=1e-5 * np.abs(stream).max()):
            why = f"layer {number}'s output is not its input + its attention's output + its MLP's"
            raise NotImplementedError(PLAIN.format(family=family, why=why))
        where = "hidden_states" if "hidden_states" in kwargs else 0
        call_args = (
            tuple(a for i, a in enumerate(args) if i != where),
            {k: v for k, v in kwargs.items() if k != "hidden_states"},
            where,
        )
        q, k, z = (_numpy(t[0]) for t in (call.q, call.k, call.z))
        scaling = float(call.scaling if call.scaling is not None else q.shape[-1] ** -0.5)
        numbers = lambda t: t.detach().double().cpu().numpy()
        inner = [  # (norms of each head's query or key: one scale per head and position)
            (c, *held_norms.held(c, numbers(seen[id(c)][0][0]), numbers(seen[id(c)][2]), what))
            for c in call.module.children()
            if "Norm" in type(c).__name__ and id(c) in seen
        ]
        added = added.astype(z.dtype)  # (the model's precision: float32 halves what a long text's stream holds)
        layers.append(_Layer(call.module, call_args, z, call.out, added, q, k, scaling, norm, inner))
    # the embedding: what the first layer read, less the position embeddings' outputs (GPT-2's wpe) where there are any
    assert first is not None  # (a layer was read: calls is not empty)
    embed = model.get_input_embeddings()
    others = [  # (the model's other embeddings that gave a row for each token: positions)
        m
        for m in embeddings
        if m is not embed
        and id(m) in seen
        and seen[id(m)][2] is not None
        and tuple(seen[id(m)][2].shape[-2:]) == first.shape
    ]
    position = first - f64(seen[id(embed)][2]) if others and id(embed) in seen else None
    return Stream(model, ids, tokens, family, first if position is None else first - position, position, layers)


def _body(model):
    from .hf import _base_model

    try:
        return _base_model(model)
    except NotImplementedError:
        return model


def _norm(layer, u, x: np.ndarray, seen: dict, family: str, number: int) -> tuple:
    """The layer's input norm (the module of the layer whose output the attention read, and whose input is the
    stream), held (held_norms.held)."""

    found = next(
        (c for c in layer.children() if "Norm" in type(c).__name__ and id(c) in seen and seen[id(c)][2] is u), None
    )
    if found is None:
        raise NotImplementedError(
            PLAIN.format(family=family, why=f"layer {number}'s attention does not read a norm of the stream")
        )
    given = u.detach().double().cpu().numpy()[0]
    return held_norms.held(found, x, given, {"family": family, "number": number})
