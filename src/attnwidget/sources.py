"""What a widget can switch to: its sentences (or a model's texts), a model's layers, an
encoder–decoder model's blocks.

The rules (rules/) ask for them by name when a follow-up brings one in; the page asks the same
questions of the payload (js/payload.js). Each layer's arrays are views of one stacked copy per
model (or block), which is also what the page gets.
"""

from __future__ import annotations

import numpy as np

from .examples import sentence_example
from .formulas import CLOSED, principal_axes
from .rules import LAYERED
from .traits import _kind, own, token_list


def frozen(a, fresh=False):
    """A read-only copy (None stays None), float32 when given float32, else float64: what a switch
    brings in is the widget's own, as an assignment's is (traits.Matrix), so later edits to a
    model's or an example's arrays cannot reach it. ``fresh``: ``a`` was just made here (a stack
    of layers), and is taken without a second copy."""
    if a is None:
        return None
    dtype = np.float32 if np.asarray(a).dtype == np.float32 else np.float64
    a = a if fresh and a.dtype == dtype else np.array(a, dtype=dtype)
    if not np.isfinite(a).all():
        raise ValueError(f"an array this widget switches to holds {a[~np.isfinite(a)][0]}: every number must be finite")
    return own(a)


def stacked(found, axes: bool = True) -> dict:
    """A model's (or one block's) every layer's heads, stacked: (layers · heads) × tokens × width.
    Each layer is copied in and then replaced by views of the stacks, so that a model's arrays
    are held twice only one layer at a time (a large model's reading peaks lower). ``axes``
    False: without model_basis (the blend's axes, for a text only computed from: with_axes)."""
    held = found.layers  # (a remote read's: its layers not read yet are stand-ins, read into the stacks later)
    columns = [
        [layer[i] for layer in list.__iter__(held)] for i in range(3)
    ]  # the only hold on them: each is dropped once copied
    found.layers = []
    try:
        stacks = [_into_stack(column) for column in columns]
    finally:  # (refused, the model keeps its layers: copied ones as views, the same numbers)
        held[:] = list(zip(*columns))
        found.layers = held
    arrays: dict[str, object] = {name: own(st) for name, st in zip(("model_q", "model_k", "model_v"), stacks)}
    if axes:
        with_axes(arrays, len(found.layers))
    biases = getattr(found, "biases", None)  # (attention weights alone: nearly all of their data)
    if biases:
        found.biases = list(biases)
    arrays["model_bias"] = own(_into_stack(found.biases)) if biases else None
    terms = getattr(found, "terms", None)  # (DeBERTa's: its bias's first term, the page shows the terms apart)
    firsts = [terms.first(i, q, k) for i, (q, k, _) in enumerate(found.layers)] if terms and terms.split else []
    arrays["model_terms"] = own(_into_stack(firsts)) if firsts else None
    arrays["model_sinks"] = sink_stack(getattr(found, "sinks", None), len(found.layers))
    masks = getattr(found, "masks", None) or []
    distinct = list({id(m): m for m in masks if m is not None}.values())  # layers with one mask share it
    arrays["model_masks"] = own(np.stack(distinct).astype(bool)) if distinct else None
    index = {id(m): i for i, m in enumerate(distinct)}
    arrays["mask_of_layer"] = [index[id(m)] if m is not None else -1 for m in masks]
    return {**arrays, "n_layers": len(found.layers)}


def sink_stack(sinks, layers: int):
    """A model's learnt sinks as layers × heads logits (formulas.CLOSED, -1e30, in a layer without), or None
    for a model without; each layer's are its heads' (ModelAttention.sinks)."""
    if not sinks or all(z is None for z in sinks):
        return None
    heads = len(next(z for z in sinks if z is not None))
    rows = [np.full(heads, CLOSED) if z is None else np.asarray(z, dtype=np.float64) for z in sinks]
    return frozen(np.stack(rows).reshape(layers, heads), fresh=True)


def with_axes(arrays: dict, layers: int) -> dict:
    """``arrays`` (a stack) with model_basis: each layer's values' principal axes, where the values are wider than
    the blend's plot (None otherwise)."""
    if "model_basis" not in arrays:
        v = arrays["model_v"]
        heads = len(v) // layers
        arrays["model_basis"] = None
        if v.shape[-1] > 2:
            each = [principal_axes(v[i * heads : (i + 1) * heads]) for i in range(layers)]
            arrays["model_basis"] = frozen(np.concatenate(each), fresh=True)
    return arrays


def _into_stack(arrays: list) -> np.ndarray:
    """The arrays (each heads × …) stacked, float32 when all are, else float64; each is checked,
    copied in and replaced in the list by its view of the stack, one at a time, so that they are
    held twice only one at a time."""
    dtype = np.float32 if all(np.asarray(a).dtype == np.float32 for a in arrays) else np.float64
    stack = np.zeros((sum(len(a) for a in arrays), *np.shape(arrays[0])[1:]), dtype=dtype)  # (untouched: no memory)
    start = 0
    for j, a in enumerate(arrays):
        if not np.isfinite(a).all():
            raise ValueError(
                f"an array this widget switches to holds {a[~np.isfinite(a)][0]}: every number must be finite"
            )
        if any(np.asarray(a).strides):  # (a remote layer not read yet is a stand-in of zeros: nothing to copy)
            stack[start : start + len(a)] = a
        arrays[j], start = stack[start : start + len(a)], start + len(a)
    return stack


# A model's several texts, read when first needed, are kept while their arrays take at most HOLD bytes (the first
# read stay: a pass over every text then reads again only those past it); past it, the KEEP read last (besides the
# one shown: a difference needs two).
HOLD, KEEP = 1e9, 3


def opening_step(found) -> int:
    """The tokens a model's text opens written: up to its prompt (generate=), else all of them."""
    return getattr(found, "prompt_length", None) or len(found.tokens)


class Sources:
    """The sentences (examples.Example), the model (a ModelAttention), its texts (one
    ModelAttention each, read alone) or the blocks (name → ModelAttention) a widget was made
    with; any of them may be empty. ``text`` picks one of the texts (0 when there are none)."""

    def __init__(self, examples=(), model=None, blocks=None, texts=()):
        self.examples, self.blocks, self.texts = list(examples), dict(blocks or {}), list(texts)
        self.model = self.texts[0] if self.texts and model is None else model
        self._stacks: dict[tuple, dict] = {}  # every (block, text)'s stacked arrays, made when first shown
        self._layers: dict[
            tuple, dict
        ] = {}  # each layer's views of them, made once: a switch back brings the same arrays
        self._sentences: dict[int, dict] = {}
        self._shown: tuple | None = None  # the (block, text) the widget shows: its arrays are the widget's own
        self._kept: set = set()  # the texts kept while they fit HOLD, and their bytes
        self._kept_bytes = 0
        self.tell = None  # says in the page what a remote model's server is reading (``text``), where set

    def sentence(self, i: int, axes: bool = True) -> dict:
        """A sentence's arrays; a model's text: its every layer, as a block's (see block), and the step it opens at
        (``axes`` False: without the values' axes, for a text only computed from)."""
        if i not in self._sentences:
            if self.texts:
                f = self.texts[i]
                step = opening_step(f)
                self._sentences[i] = dict(tokens=list(f.tokens), key_tokens=None, bias=frozen(f.bias), step=step)
            else:
                e = self.examples[i]
                arrays = {n: frozen(getattr(e, n)) for n in ("q", "k", "v", "x")}
                self._sentences[i] = dict(tokens=list(e.tokens), **arrays, value_basis=principal_axes(arrays["v"]))
        return (
            {**self._sentences[i], **self.stack("", i, axes)} if self.texts else self._sentences[i]
        )  # (the stack the widget adopted)

    def ids(self, text: int = 0) -> list | None:
        """A model's token ids of a text (what it read), or None where only labels are known."""
        found = self.found("", text) if self.texts or self.model is not None else None
        known = getattr(found, "ids", None)  # (a text not read yet: LazyText knows them)
        return known if known is not None else getattr(getattr(found, "rerun", None), "ids", None)

    def found(self, block: str, text: int = 0):
        return self.blocks[block] if block else self.texts[text] if self.texts else self.model

    def block(self, name: str) -> dict:
        f = self.blocks[name]
        return dict(
            tokens=list(f.tokens),
            key_tokens=_keys(f),
            causal=f.causal,
            scale=f.scale,
            softcap=f.softcap,
            bias=frozen(f.bias),
            **self.stack(name),
        )

    def stack(self, block: str = "", text: int = 0, axes: bool = True) -> dict:
        key = (block, text if self.texts else 0)
        if key not in self._stacks:
            self._stacks[key] = stacked(self.found(*key), axes)
            self._forget(key)
        else:
            self._stacks[key] = self._stacks.pop(key)  # the last used: kept longest
        found = self._stacks[key]
        if axes and "model_basis" not in found:  # (read for computing only, now shown: its layers get their axes)
            with_axes(found, found["n_layers"])
            self._layers = {k: layer for k, layer in self._layers.items() if k[:2] != key}
        return found

    def _forget(self, new: tuple) -> None:
        """Keep the text just read while the texts kept take at most HOLD bytes; else let go of the texts read
        longest ago past KEEP (never the one the widget shows): read again when needed."""
        if not self.texts or new[0]:
            return
        size = sum(np.asarray(a).nbytes for a in self._stacks[new].values() if isinstance(a, np.ndarray))
        if self._kept_bytes + size <= HOLD:
            self._kept.add(new)
            self._kept_bytes += size
            return
        texts = [k for k in self._stacks if not k[0] and k != self._shown and k not in self._kept]
        for key in texts[: max(0, len(texts) - KEEP)]:
            del self._stacks[key]
            self._layers = {k: found for k, found in self._layers.items() if k[:2] != key}
            self._sentences.pop(key[1], None)
            drop = getattr(self.texts[key[1]], "drop", None)
            if drop is not None:
                drop()

    def show(self, block: str, text: int = 0) -> None:
        """The (block, text) the widget shows now: never let go of, its layers with their axes."""
        self._shown = (block, text if self.texts else 0)

    def adopt(self, block: str, arrays: dict, text: int = 0) -> None:
        """Take the widget's own copies of a stack as the one its layers are views of."""
        key = (block, text if self.texts else 0)
        self.show(*key)
        before = self._stacks.get(key, {})
        if any(
            not (a is before.get(n) or (not isinstance(a, np.ndarray) and a == before.get(n)))
            for n, a in arrays.items()
        ):
            self._layers = {k: found for k, found in self._layers.items() if k[:2] != key}
        self._stacks[key] = arrays

    def layer(self, block: str, i: int, text: int = 0) -> dict:
        key = (block, text if self.texts else 0, i)
        if key not in self._layers:
            self._layers[key] = self._layer(*key)
        return self._layers[key]

    def layers(self, block: str, count: int, text: int = 0) -> list[dict]:
        """Every layer's arrays (as ``layer``'s); a remote model's not read yet are read in one trace first."""
        self.complete(block, text)
        return [self.layer(block, i, text) for i in range(count)]

    def complete(self, block: str = "", text: int = 0) -> None:
        """A remote model's layers not read yet read now, in one trace (its stacks are then whole); else nothing."""
        f = self.found(block, text) if self.texts or self.model is not None or block else None
        remote = getattr(f, "remote", None)
        if remote is not None and remote.missing:
            remote.tell = self.tell
            remote.ensure(range(len(getattr(f, "layers", ()))))
            key = (block, text if self.texts else 0)
            if key in self._stacks:
                _axes_read(remote, self._stacks[key])

    def _layer(self, block: str, text: int, i: int) -> dict:
        f, arrays = self.found(block, text), self.stack(block, text, axes=(block, text) == self._shown)
        remote = getattr(f, "remote", None)
        if remote is not None:  # a remote model's layer not read yet: read into the stacks now (one more trace)
            remote.tell = self.tell
            remote.ensure([i])
            _axes_read(remote, arrays)
        heads = len(arrays["model_q"]) // arrays["n_layers"]
        part = slice(i * heads, (i + 1) * heads)
        masks, which = arrays.get("model_masks"), arrays.get("mask_of_layer") or ()
        mask = (
            {"mask": None if which[i] < 0 or masks is None else own(masks[which[i]])} if which else {}
        )  # only a model with masks sets one
        biases = arrays.get("model_bias")
        bias = {} if biases is None else {"bias": own(biases[part])}  # only a model with a bias per layer sets one
        if arrays.get("model_terms") is not None:
            bias["terms"] = own(arrays["model_terms"][part])  # (and its first term, where it is two)
        stack = arrays.get("model_sinks")  # a model's layer brings its own learnt sinks in, or None
        sinks = None if stack is None else tuple(float(z) for z in stack[i])
        # the layered arrays (rules.LAYERED): the layer's heads of each stack, the widget's own (no trait copies them)
        layered = {n: None if arrays.get(m) is None else own(arrays[m][part]) for n, m in LAYERED.items()}
        return dict(**mask, **bias, sinks=sinks, tokens=list(f.tokens), key_tokens=_keys(f), **layered)

    @staticmethod
    def basis(v):
        return principal_axes(v)


def _axes_read(remote, arrays: dict) -> None:
    """The value axes of a remote model's layers read since its stacks were made (they were a stand-in's)."""
    basis = arrays.get("model_basis")
    heads = len(arrays["model_v"]) // arrays["n_layers"]
    for i in sorted(remote.axes_due):
        if basis is not None:
            part = slice(i * heads, (i + 1) * heads)
            basis.setflags(write=True)
            basis[part] = principal_axes(arrays["model_v"][part])
            basis.setflags(write=False)
        remote.axes_due.discard(i)


def _keys(found):
    keys = getattr(found, "key_tokens", None)
    return None if keys is None else list(keys)


def opening(sentence, arrays: dict, value_axes, sentence_index: int) -> tuple[Sources, dict, list, list | None]:
    """What AttentionWidget(sentence) or AttentionWidget(tokens=, q=, k=, v=, ...) opens on:
    (its sources, the state given, its sentences (empty for one), the columns' own tokens (None
    in self-attention)), or TypeError/ValueError saying what to pass instead."""
    tokens, key_tokens, q, k, v, x = (arrays[n] for n in ("tokens", "key_tokens", "q", "k", "v", "x"))
    if sentence is not None and any(a is not None for a in arrays.values()):
        raise TypeError("Pass either a sentence or tokens/q/k/v arrays, not both.")
    if q is None and k is None and v is None:
        if tokens is not None or key_tokens is not None or x is not None:
            raise TypeError("tokens=, key_tokens= and x= need q=, k= and v= arrays too (or pass a sentence instead).")
        many = not isinstance(sentence, str) and sentence is not None
        if many and not (isinstance(sentence, (list, tuple)) and all(isinstance(t, str) for t in sentence)):
            raise TypeError(f"Pass a sentence as a string, or several as a list of strings; got {_kind(sentence)}.")
        texts = list(sentence) if many else [sentence]
        if many and not texts:
            raise ValueError("The list of sentences is empty: give at least one sentence.")
        sources = Sources(examples=[sentence_example(t) for t in texts])
        if not 0 <= sentence_index < len(texts):
            raise ValueError(f"sentence_index must be from 0 to {len(texts) - 1}, got {sentence_index}")
        ex = sources.examples[sentence_index]
        state = dict(tokens=ex.tokens, q=ex.q, k=ex.k, v=ex.v, x=ex.x, value_axes=value_axes or ex.value_axes)
        if not many:
            return sources, state, [], None
        sentences = [" ".join(e.tokens) if t is None else t for e, t in zip(sources.examples, texts)]
        return sources, {**state, "sentence_index": sentence_index}, sentences, None
    if q is None or k is None or v is None:
        missing = [name for name, a in (("q", q), ("k", k), ("v", v)) if a is None]
        raise TypeError(f"Custom vectors need q, k and v together; missing {', '.join(missing)}.")
    n = np.shape(q)[-2] if np.ndim(q) >= 2 else 0
    state = dict(tokens=[str(i) for i in range(n)] if tokens is None else token_list(tokens), q=q, k=k, v=v, x=x)
    m = np.shape(k)[-2] if np.ndim(k) >= 2 else 0
    own_keys = None
    if key_tokens is not None or m != n:  # cross-attention: the columns are other tokens
        own_keys = [str(j) for j in range(m)] if key_tokens is None else token_list(key_tokens)
        if not own_keys:
            raise ValueError("'key_tokens' must not be empty: give one string per row of k and v.")
    if value_axes is not None:
        state["value_axes"] = list(value_axes)
    return Sources(), state, [], own_keys
