"""Differential attention (Ye et al., 2025, "Differential Transformer"; transformers' DiffLlama), read
where it computes attention.

Its layer calls the attention function twice with the same queries and keys, over two halves of its
values (value heads g and g + kv_heads/2, each repeated to every query head), so query head h's two
results are its one softmax map times each half: together, that map @ the values of width 2·d_head.
It then pairs head p with head p + heads/2 (p < heads/2; both read the same values) and mixes
map 1 − λ·map 2 @ those values, λ = exp(λq1·λk1) − exp(λq2·λk2) + λ_init, one per layer; a group norm
and a factor (1 − λ_init) follow, before the output projection.

``capture`` keeps each head's own softmax as any layer's (the model's ``output_attentions``), the two
calls as one with both halves of the values, and the layer's λ; the mix is held to what the model
hands its group norm, so a layer that mixes otherwise is refused rather than shown.
"""

from __future__ import annotations

import numpy as np

LAMBDAS = ("lambda_q1", "lambda_k1", "lambda_q2", "lambda_k2")  # the module's vectors whose products make λ
UNREAD = (
    "differential attention: a pair of heads' mix is normalised (a group norm, then × (1 − λ_init)) before the "
    "output projection, which is then not a linear map of each head's values"
)


def strength(module) -> float | None:
    """λ of a differential attention module, in float64 from its own parameters: exp(λq1·λk1) −
    exp(λq2·λk2) + λ_init; None for a module that is not one (or mixes without a group norm to check)."""
    if not all(hasattr(module, n) for n in (*LAMBDAS, "lambda_init", "groupnorm")):
        return None
    q1, k1, q2, k2 = (getattr(module, n).detach().double() for n in LAMBDAS)
    return float(np.exp(float(q1 @ k1)) - np.exp(float(q2 @ k2)) + float(module.lambda_init))


class Mixes:
    """Each differential layer's mix, checked when the model hands it to its group norm: its two calls'
    outputs (the model's, queries × heads × d_head each) mixed pair by pair with the λ caught must be
    what the group norm receives, within the rounding of the model's dtype and of λ in it."""

    def __init__(self, family: str):
        self.family = family
        self.hooks: list = []  # the group norms' hooks, removed after the pass
        self.waiting: dict = {}  # id(module) -> the call whose mix its group norm is to receive

    def expect(self, module, call, first, second) -> None:
        """The two calls of ``call``'s layer returned ``first`` and ``second``: its group norm's input comes next."""
        self.waiting[id(module)] = call
        self.hooks.append(module.groupnorm.register_forward_pre_hook(self._checker(module, call, first, second)))

    def _checker(self, module, call, first, second):
        def check(norm, args):
            import torch

            if self.waiting.pop(id(module), None) is not call:
                return
            x = args[0]
            both = torch.cat([first, second], dim=-1)[0].to(torch.float64)  # queries × heads × 2·d_head
            half = both.shape[1] // 2
            one, two = both[:, :half], both[:, half:]
            want = one - call.lam * two
            eps = torch.finfo(x.dtype).eps
            # the model's own product and difference, rounded in its dtype, with λ rounded there too
            bound = 4 * eps * (one.abs() + abs(call.lam) * two.abs() + 4 * _size(module) * two.abs()) + 1e-30
            shape = tuple(x.shape[1:]) == tuple(want.shape)
            gap = (x[0].to(torch.float64) - want).abs() - bound if shape else None
            if gap is None or bool((gap > 0).any()):
                by = "its shape differs" if gap is None else f"by {float(gap.max()):.2g} beyond rounding"
                raise NotImplementedError(
                    f"{self.family} mixes its heads at layer {call.layer} ({call.name or 'its attention module'}) "
                    f"otherwise than differential attention's map 1 − λ·map 2 (head p with head p + heads/2, "
                    f"λ = {call.lam:.6g}): what it hands its group norm differs ({by}), so nothing is shown rather "
                    "than numbers the model did not compute"
                )

        return check

    def remove(self) -> None:
        for h in self.hooks:
            h.remove()
        self.hooks = []

    def done(self) -> None:
        """The pass is over: every layer's mix must have been checked."""
        if self.waiting:
            call = next(iter(self.waiting.values()))
            raise NotImplementedError(
                f"{self.family} computes attention twice at layer {call.layer} as differential attention does, but "
                "never hands the mix to its group norm, where attnwidget checks it: nothing is shown"
            )


def _size(module) -> float:
    """How large λ's terms are (|exp(λq1·λk1)| + |exp(λq2·λk2)| + |λ_init|): λ's rounding is ε times that."""
    q1, k1, q2, k2 = (getattr(module, n).detach().double() for n in LAMBDAS)
    return float(np.exp(float(q1 @ k1)) + np.exp(float(q2 @ k2)) + abs(float(module.lambda_init)))
