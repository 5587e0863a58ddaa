"""What a widget can switch to: its sentences (or a model's texts), a model's layers, an
encoder–decoder model's blocks.

The rules (rules.py) ask for them by name when a follow-up brings one in; the page asks the same
questions of the payload (js/payload.js). Each layer's arrays are views of one stacked copy per
model (or block), which is also what the page gets.
"""

from __future__ import annotations

import numpy as np

from .core import principal_axes
from .traits import own


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


def stacked(found) -> dict:
    """A model's (or one block's) every layer's heads, stacked: (layers · heads) × tokens × width.
    Each layer is copied in and then replaced by views of the stacks, so that a model's arrays
    are held twice only one layer at a time (a large model's reading peaks lower)."""
    columns = [[layer[i] for layer in found.layers] for i in range(3)]  # the only hold on them: each is dropped once copied
    found.layers = []
    try:
        stacks = [_into_stack(column) for column in columns]
    finally:  # (refused, the model keeps its layers: copied ones as views, the same numbers)
        found.layers = list(zip(*columns))
    arrays: dict[str, object] = {name: own(st) for name, st in zip(("model_q", "model_k", "model_v"), stacks)}
    wide = found.layers[0][2].shape[-1] > 2  # values wider than the plot: their principal axes
    arrays["model_basis"] = frozen(np.concatenate([principal_axes(lv) for _, _, lv in found.layers]), fresh=True) if wide else None
    biases = getattr(found, "biases", None)  # (attention weights alone: nearly all of their data)
    if biases:
        found.biases = list(biases)
    arrays["model_bias"] = own(_into_stack(found.biases)) if biases else None
    masks = getattr(found, "masks", None) or []
    distinct = list({id(m): m for m in masks if m is not None}.values())  # layers with one mask share it
    arrays["model_masks"] = own(np.stack(distinct).astype(bool)) if distinct else None
    index = {id(m): i for i, m in enumerate(distinct)}
    arrays["mask_of_layer"] = [index[id(m)] if m is not None else -1 for m in masks]
    return {**arrays, "n_layers": len(found.layers)}


def _into_stack(arrays: list) -> np.ndarray:
    """The arrays (each heads × …) stacked, float32 when all are, else float64; each is checked,
    copied in and replaced in the list by its view of the stack, one at a time, so that they are
    held twice only one at a time."""
    dtype = np.float32 if all(np.asarray(a).dtype == np.float32 for a in arrays) else np.float64
    stack = np.empty((sum(len(a) for a in arrays), *np.shape(arrays[0])[1:]), dtype=dtype)
    start = 0
    for j, a in enumerate(arrays):
        if not np.isfinite(a).all():
            raise ValueError(f"an array this widget switches to holds {a[~np.isfinite(a)][0]}: every number must be finite")
        stack[start : start + len(a)] = a
        arrays[j], start = stack[start : start + len(a)], start + len(a)
    return stack


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
        self._layers: dict[tuple, dict] = {}  # each layer's views of them, made once: a switch back brings the same arrays
        self._sentences: dict[int, dict] = {}

    def sentence(self, i: int) -> dict:
        """A sentence's arrays; a model's text: its every layer, as a block's (see block), and the step it opens at."""
        if i not in self._sentences:
            if self.texts:
                f = self.texts[i]
                step = opening_step(f)
                self._sentences[i] = dict(tokens=list(f.tokens), key_tokens=None, bias=frozen(f.bias), step=step)
            else:
                e = self.examples[i]
                arrays = {n: frozen(getattr(e, n)) for n in ("q", "k", "v", "x")}
                self._sentences[i] = dict(tokens=list(e.tokens), **arrays, value_basis=principal_axes(arrays["v"]))
        return {**self._sentences[i], **self.stack("", i)} if self.texts else self._sentences[i]  # (the stack the widget adopted)

    def found(self, block: str, text: int = 0):
        return self.blocks[block] if block else self.texts[text] if self.texts else self.model

    def block(self, name: str) -> dict:
        f = self.blocks[name]
        return dict(tokens=list(f.tokens), key_tokens=_keys(f), causal=f.causal, scale=f.scale, softcap=f.softcap, bias=frozen(f.bias), **self.stack(name))

    def stack(self, block: str = "", text: int = 0) -> dict:
        key = (block, text if self.texts else 0)
        if key not in self._stacks:
            self._stacks[key] = stacked(self.found(*key))
        return self._stacks[key]

    def adopt(self, block: str, arrays: dict, text: int = 0) -> None:
        """Take the widget's own copies of a stack as the one its layers are views of."""
        key = (block, text if self.texts else 0)
        before = self._stacks.get(key, {})
        if any(not (a is before.get(n) or (not isinstance(a, np.ndarray) and a == before.get(n))) for n, a in arrays.items()):
            self._layers = {k: found for k, found in self._layers.items() if k[:2] != key}
        self._stacks[key] = arrays

    def layer(self, block: str, i: int, text: int = 0) -> dict:
        key = (block, text if self.texts else 0, i)
        if key not in self._layers:
            self._layers[key] = self._layer(*key)
        return self._layers[key]

    def _layer(self, block: str, text: int, i: int) -> dict:
        f, arrays = self.found(block, text), self.stack(block, text)
        heads = len(arrays["model_q"]) // arrays["n_layers"]
        part = slice(i * heads, (i + 1) * heads)
        basis, masks, which = arrays["model_basis"], arrays.get("model_masks"), arrays.get("mask_of_layer") or ()
        mask = {"mask": None if which[i] < 0 or masks is None else own(masks[which[i]])} if which else {}  # only a model with masks sets one
        biases = arrays.get("model_bias")
        bias = {} if biases is None else {"bias": own(biases[part])}  # only a model with a bias per layer sets one
        return dict(
            **mask,
            **bias,
            tokens=list(f.tokens),
            key_tokens=_keys(f),
            q=own(arrays["model_q"][part]),  # the widget's own: no trait copies them
            k=own(arrays["model_k"][part]),
            v=own(arrays["model_v"][part]),
            value_basis=None if basis is None else own(basis[part]),
        )

    @staticmethod
    def basis(v):
        return principal_axes(v)


def _keys(found):
    keys = getattr(found, "key_tokens", None)
    return None if keys is None else list(keys)
