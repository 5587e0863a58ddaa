"""Norms held at the scale they had in one pass (score_parts.py): a LayerNorm or RMSNorm divides each row
by a scale of the whole row (σ, or the RMS), so with that scale held it is affine, gain · (x − mean) / scale
+ bias, and a sum of parts goes through it part by part.

Whatever form a norm keeps its gain in (Gemma's 1 + w, OLMo's none), it is probed: what it makes of 0, of
a large constant and of large vectors of mean 0. The scale of each row is read from the pass itself,
‖gain · x‖ / ‖output − bias‖, and the norm is checked to give, at it, what it gave.
"""

from __future__ import annotations

import contextlib

import numpy as np

NOT_HELD = (
    "{family}: layer {number}'s {kind} is not a LayerNorm or RMSNorm (a gain and a bias on each row, centred or "
    "not, over one scale per row), so it cannot be held at its scale"
)


def probe(norm, width: int) -> tuple[np.ndarray, np.ndarray | None, bool]:
    """A norm's gain, bias (None for none) and whether it centres."""
    import torch

    first = next(iter(norm.parameters()), None)
    like = {"dtype": first.dtype, "device": first.device} if first is not None else {"dtype": torch.float32}

    def of(v):
        with torch.no_grad():
            return norm(torch.as_tensor(v[None], **like))[0].double().cpu().numpy()

    c = 1e3  # (large: the norm's ε is nothing beside it)
    bias = of(np.zeros(width))
    constant = of(np.full(width, c)) - bias
    centred = bool(np.abs(constant).max() <= 1e-3 * (np.abs(bias).max() + 1.0))
    if not centred:
        return constant, (bias if np.abs(bias).max() > 0 else None), False
    weight = np.zeros(width)
    for shift in (0, 1):  # signs ±1 of mean 0 (an odd width leaves one entry 0: the other probe has it)
        signs = np.zeros(width)
        span = np.arange(shift, width - (width - shift) % 2)
        signs[span] = np.where((span - shift) % 2 == 0, 1.0, -1.0)
        spread = np.sqrt(np.mean(signs**2))  # (σ of the probe, over c)
        weight[span] = ((of(c * signs) - bias) * signs * spread)[span]
    return weight, (bias if np.abs(bias).max() > 0 else None), True


def held(norm, x: np.ndarray, out: np.ndarray, what: dict) -> tuple:
    """``norm`` at the scale it had when it made ``out`` of ``x`` (rows on the last axis): (gain, bias or
    None, centred, each row's scale, shaped as x less its last axis); NotImplementedError (``what``: the
    family and layer number to say) where it is not such a norm."""
    weight, bias, centred = probe(norm, x.shape[-1])
    core = (x - x.mean(-1, keepdims=True) if centred else x) * weight
    made = out - (0 if bias is None else bias)
    size = np.linalg.norm(made, axis=-1)
    # (a row of 0, such as a padding token's embedding, is 0 at any scale: 1)
    scale = np.where(size > 0, np.linalg.norm(core, axis=-1) / np.where(size > 0, size, 1.0), 1.0)
    if not np.allclose(core / scale[..., None], made, rtol=1e-3, atol=1e-4 * (np.abs(made).max() + 1e-30)):
        raise NotImplementedError(NOT_HELD.format(kind=type(norm).__name__, **what))
    return weight, bias, centred, scale


@contextlib.contextmanager
def holding(inner: list, positions: list[int]):
    """Each of ``inner`` ((module, gain, bias, centred, scale) of norms inside an attention module, scale
    shaped as the pass's input less its last axis) held at its scale at ``positions`` while the module is
    called again: the axis of the input as long as ``positions`` is theirs (the caller makes that length
    no other axis's)."""
    import torch

    for module, weight, bias, centred, scale in inner:
        like = next(iter(module.parameters()), torch.zeros(()))
        g, b, r = (
            None if a is None else torch.as_tensor(a, dtype=like.dtype, device=like.device)
            for a in (weight, bias, scale)
        )
        at = torch.as_tensor(positions, device=like.device)

        def forward(x, g=g, b=b, r=r, centred=centred, at=at):
            axis = next(a for a in range(1, x.ndim - 1) if x.shape[a] == len(at))
            x = x - x.mean(-1, keepdim=True) if centred else x
            return x * g / r.index_select(axis, at).unsqueeze(-1) + (0 if b is None else b)

        module.forward = forward  # (an instance's forward: torch calls it in place of the class's)
    try:
        yield
    finally:
        for module, *_ in inner:
            del module.forward
