"""What a widget can switch to: its sentences, a model's layers, an encoder–decoder model's blocks.

The rules (rules.py) ask for them by name when a follow-up brings one in; the page asks the same
questions of the payload (js/payload.js). Each layer's arrays are views of one stacked copy per
model (or block), which is also what the page gets.
"""

from __future__ import annotations

import numpy as np

from .core import principal_axes


def stacked(found) -> dict:
    """A model's (or one block's) every layer's heads, stacked: (layers · heads) × tokens × width."""
    arrays: dict[str, object] = {}
    for i, name in enumerate(("model_q", "model_k", "model_v")):
        arrays[name] = a = np.concatenate([layer[i] for layer in found.layers])
        a.setflags(write=False)
    wide = found.layers[0][2].shape[-1] > 2  # values wider than the plot: their principal axes
    arrays["model_basis"] = np.concatenate([principal_axes(lv) for _, _, lv in found.layers]) if wide else None
    return {**arrays, "n_layers": len(found.layers)}


class Sources:
    """The sentences (examples.Example), the model (a ModelAttention) or the blocks (name →
    ModelAttention) a widget was made with; any of them may be empty."""

    def __init__(self, examples=(), model=None, blocks=None):
        self.examples, self.blocks = list(examples), dict(blocks or {})
        self.model = model
        self._stacks: dict[str, dict] = {}

    def sentence(self, i: int) -> dict:
        e = self.examples[i]
        return dict(tokens=list(e.tokens), q=e.q, k=e.k, v=e.v, x=e.x, value_basis=principal_axes(e.v))

    def found(self, block: str):
        return self.blocks[block] if block else self.model

    def block(self, name: str) -> dict:
        f = self.blocks[name]
        return dict(tokens=list(f.tokens), key_tokens=_keys(f), causal=f.causal, scale=f.scale, bias=f.bias, **self.stack(name))

    def stack(self, block: str = "") -> dict:
        if block not in self._stacks:
            self._stacks = {block: stacked(self.found(block))}  # one block's at a time: the one shown
        return self._stacks[block]

    def adopt(self, block: str, arrays: dict) -> None:
        """Take the widget's own copies of a stack as the one its layers are views of."""
        self._stacks = {block: arrays}

    def layer(self, block: str, i: int) -> dict:
        f, arrays = self.found(block), self.stack(block)
        heads = len(arrays["model_q"]) // arrays["n_layers"]
        part = slice(i * heads, (i + 1) * heads)
        basis = arrays["model_basis"]
        return dict(
            tokens=list(f.tokens),
            key_tokens=_keys(f),
            q=arrays["model_q"][part],
            k=arrays["model_k"][part],
            v=arrays["model_v"][part],
            value_basis=None if basis is None else basis[part],
        )

    @staticmethod
    def basis(v):
        return principal_axes(v)


def _keys(found):
    keys = getattr(found, "key_tokens", None)
    return None if keys is None else list(keys)
