"""Each family's scan recomputed from its layer's own weights on the input the layer received, as
transformers 5's PyTorch path computes it (modeling_<family>.py: the mixer's forward up to the scan), and
where the layer's own numbers show what the scan gave (implicit.py checks the two agree).

A reader takes the mixer and its input hidden states (1 × n × width) and returns the scan (implicit_scans:
float64 parameters, channels or heads first) and the gate z: the submodule named in ``Reader.at`` receives
y itself (z None) or y ⊙ silu(z), as n × width.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch
import torch.nn.functional as F

from .implicit_scans import Scan, Selective

WIDE = torch.float64  # the scans' precision (float32 where the device has no float64)


def _act(name: str):
    from transformers.activations import ACT2FN

    return ACT2FN[name]


def _conv(conv, xs: torch.Tensor, activation: str) -> torch.Tensor:
    """The layer's causal depthwise convolution of xs (1 × channels × n), then its activation
    (causal_conv1d_fn)."""
    n = xs.shape[-1]
    out = F.conv1d(
        xs.to(conv.weight.dtype), conv.weight, conv.bias, padding=conv.weight.shape[-1] - 1, groups=xs.shape[1]
    )
    return _act(activation)(out[..., :n])


def _wide(t: torch.Tensor) -> torch.Tensor:
    return t.to(torch.float32 if t.device.type == "mps" else WIDE)


def mamba1(m, h):
    """Mamba-1 (MambaMixer, FalconMambaMixer, JambaMambaMixer): per inner channel, x after in_proj's first
    half, the convolution and its activation; Δ, B, C from x_proj (Falcon-Mamba and Jamba normalise them);
    the output projection reads y ⊙ silu(z), z in_proj's second half."""
    xs, gate = m.in_proj(h).transpose(1, 2).chunk(2, dim=1)
    xs = _conv(m.conv1d, xs, m.activation).transpose(1, 2)  # 1 × n × channels
    step, B, C = torch.split(m.x_proj(xs), [m.time_step_rank, m.ssm_state_size, m.ssm_state_size], dim=-1)
    if hasattr(m, "dt_layernorm"):
        step, B, C = m.dt_layernorm(step), m.b_layernorm(B), m.c_layernorm(C)
    dt = F.softplus(_wide(step[0] @ m.dt_proj.weight.T) + _wide(m.dt_proj.bias))  # n × channels
    scan = Selective(
        x=_wide(xs[0]).T[:, :, None],
        dt=dt.T.contiguous(),
        A=-torch.exp(_wide(m.A_log)),
        B=_wide(B),
        C=_wide(C),
        D=_wide(m.D),
    )
    return scan, _wide(gate[0].T)


def mamba2(m, h):
    """Mamba-2 (Mamba2Mixer, BambaMixer, NemotronHMamba2Mixer, GraniteMoeHybridMambaLayer, Zamba2MambaMixer,
    FalconH1Mixer): per head, x after the convolution and its activation (head_dim numbers per head), B and C
    per group of heads, Δ = softplus(dt + dt_bias) clamped to time_step_limit, A one number per head; the
    gated norm reads y (Falcon-H1 without it: the output projection reads y ⊙ silu(z))."""
    h = h * getattr(m, "ssm_in_multiplier", 1.0)  # (Falcon-H1's multipliers)
    projected = m.in_proj(h)
    if getattr(m, "mup_vector", None) is not None:
        projected = projected * m.mup_vector
    gate, xbc, dt = projected.split([m.intermediate_size, m.conv_dim, m.num_heads], dim=-1)
    xbc = _conv(m.conv1d, xbc.transpose(1, 2), m.activation)[0].T  # n × conv_dim
    size = m.n_groups * m.ssm_state_size
    xs, B, C = torch.split(xbc, [m.intermediate_size, size, size], dim=-1)
    n = xs.shape[0]
    low, high = m.time_step_limit
    dt = F.softplus(_wide(dt[0]) + _wide(m.dt_bias)).clamp(low, high)  # n × heads
    scan = Selective(
        x=_wide(xs).view(n, m.num_heads, m.head_dim).transpose(0, 1).contiguous(),
        dt=dt.T.contiguous(),
        A=-torch.exp(_wide(m.A_log))[:, None],
        B=_wide(B).view(n, m.n_groups, -1).transpose(0, 1).contiguous(),
        C=_wide(C).view(n, m.n_groups, -1).transpose(0, 1).contiguous(),
        D=_wide(m.D),
    )
    return scan, (None if getattr(m, "mamba_rms_norm", True) else _wide(gate[0]))


@dataclass(frozen=True)
class Reader:
    read: Callable[..., tuple[Scan, torch.Tensor | None]]  # (mixer, its input) -> (scan, gate or None)
    at: Callable  # the mixer's submodule whose input is y (gate None), or y ⊙ silu(gate)
    kind: str  # in words
    per: str  # what α is one of: "channel" or "head"


MAMBA1 = Reader(mamba1, lambda m: m.out_proj, "Mamba-1 selective state space", "channel")
MAMBA2 = Reader(
    mamba2, lambda m: m.norm if getattr(m, "mamba_rms_norm", True) else m.out_proj, "Mamba-2 state space", "head"
)
# the mixers read, by class name
READERS: dict[str, Reader] = {
    **dict.fromkeys(("MambaMixer", "FalconMambaMixer", "JambaMambaMixer"), MAMBA1),
    **dict.fromkeys(
        ("Mamba2Mixer", "BambaMixer", "NemotronHMamba2Mixer", "GraniteMoeHybridMambaLayer", "Zamba2MambaMixer"),
        MAMBA2,
    ),
    "FalconH1Mixer": MAMBA2,
}
