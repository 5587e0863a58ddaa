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

from .implicit_scans import Delta, Gated, Scan, Selective, ShortConv

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
    """A copy in the scans' precision, apart from the model (not its parameter itself)."""
    return t.detach().to(torch.float32 if t.device.type == "mps" else WIDE, copy=True)


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


def _split_conv(m, mixed, sizes):
    """q, k and v after the layer's convolution over their concatenation (1 × n × width) and its activation."""
    return torch.split(_conv(m.conv1d, mixed.transpose(1, 2), m.activation).transpose(1, 2), sizes, dim=-1)


def _delta(dk: int, q, k, v, log_decay, beta) -> Delta:
    """The gated delta rule's inputs as it reads them (torch_chunk_gated_delta_rule, chunk_kimi_delta_attention):
    q and k (1 × n × heads·d_k) L2-normalised, shared by value heads in turn, q scaled by 1/√d_k; log_decay
    (n × heads, or n × heads × d_k) and beta (n × heads)."""
    n, heads, dv = v.shape[1], log_decay.shape[1], v.shape[-1] // log_decay.shape[1]
    q, k = (_wide(t[0]).reshape(n, -1, dk) for t in (q, k))
    q, k = (t * torch.rsqrt((t * t).sum(-1, keepdim=True) + 1e-6) for t in (q, k))
    q, k = (t.repeat_interleave(heads // t.shape[1], dim=1).transpose(0, 1) for t in (q, k))
    log_decay = _wide(log_decay)
    return Delta(
        x=_wide(v[0]).reshape(n, heads, dv).transpose(0, 1).contiguous(),
        q=(q * q.shape[-1] ** -0.5).contiguous(),
        k=k.contiguous(),
        log_decay=(log_decay if log_decay.dim() == 3 else log_decay[..., None]).transpose(0, 1).contiguous(),
        beta=_wide(beta).T.contiguous(),
    )


def _decay(m, a):
    """Gated DeltaNet's decay, log G_t = −exp(A_log) softplus(a + dt_bias): n × heads."""
    return -torch.exp(_wide(m.A_log)) * F.softplus(_wide(a[0]) + _wide(m.dt_bias))


def qwen3_next(m, h):
    """Qwen3-Next: q, k, v, z, b, a from two fused projections (its own fix_query_key_value_ordering)."""
    q, k, v, _, b, a = m.fix_query_key_value_ordering(m.in_proj_qkvz(h), m.in_proj_ba(h))
    mixed = torch.cat([t.reshape(1, h.shape[1], -1) for t in (q, k, v)], dim=-1)
    q, k, v = _split_conv(m, mixed, [m.key_dim, m.key_dim, m.value_dim])
    return _delta(m.head_k_dim, q, k, v, _decay(m, a), b[0].sigmoid()), None


def qwen3_5(m, h):
    """Qwen3.5: q, k, v from one projection, b and a from their own."""
    q, k, v = _split_conv(m, m.in_proj_qkv(h), [m.key_dim, m.key_dim, m.value_dim])
    return _delta(m.head_k_dim, q, k, v, _decay(m, m.in_proj_a(h)), m.in_proj_b(h)[0].sigmoid()), None


def olmo_hybrid(m, h):
    """OLMo-hybrid: q, k, v from their own projections; β doubled where eigenvalues may be negative."""
    q, k, v = _split_conv(
        m, torch.cat([m.q_proj(h), m.k_proj(h), m.v_proj(h)], -1), [m.key_dim, m.key_dim, m.value_dim]
    )
    beta = m.b_proj(h)[0].sigmoid() * (2.0 if m.allow_neg_eigval else 1.0)
    return _delta(m.head_k_dim, q, k, v, _decay(m, m.a_proj(h)), beta), None


def kimi(m, h):
    """Kimi delta attention (Kimi-Linear, Bailing-hybrid): a decay per key channel, from the layer's forget gate."""
    q, k, v = _split_conv(m, torch.cat([m.q_proj(h), m.k_proj(h), m.v_proj(h)], -1), [m.qkv_dim] * 3)
    return _delta(m.head_dim, q, k, v, m.forget_gate(h)[0], torch.sigmoid(m.b_proj(h))[0]), None


def lightning(m, h):
    """MiniMax's lightning attention: q, k, v from one projection and its activation; each head's state decays
    by exp(−slope) a token (its slope_rate)."""
    n, heads = h.shape[1], m.num_attention_heads
    qkv = _wide(m.act_fn(m.qkv_proj(h))[0]).view(n, heads, 3 * m.head_dim).transpose(0, 1)
    q, k, v = torch.split(qkv, m.head_dim, dim=-1)
    ones = qkv.new_ones(heads, n)
    slope = _wide(m.slope_rate).reshape(heads, 1)
    scan = Selective(x=v.contiguous(), dt=ones, A=-slope, B=k.contiguous(), C=q.contiguous(), D=ones[:, 0] * 0)
    return scan, None


def short_conv(m, h):
    """LFM2's gated short convolution: B, C and x from in_proj, y = C ⊙ conv(B ⊙ x) per channel. A convolution
    with a bias adds C ⊙ bias, which no α gives: refused."""
    if m.conv.bias is not None:
        raise NotImplementedError("its convolution adds a bias, so y is α · x plus a term of its own: not read")
    B, C, x = _wide(m.in_proj(h)[0]).T.chunk(3, dim=0)  # each channels × n
    w = _wide(m.conv.weight[:, 0]).flip(-1)  # channels × length, w[:, d]: d tokens back
    return ShortConv(x=x[..., None].contiguous(), B=B.contiguous(), C=C.contiguous(), w=w.contiguous()), None


def rglru(m, x):
    """Griffin's RG-LRU (RecurrentGemmaRglru), hooked itself: x its input (after the block's convolution), per
    channel; a_t = exp(−8 r_t softplus(Λ)) and b_t = i_t √(1 − a_t²), r and i its gates (blocks of channels
    per head), b_0 = i_0 at the text's first position, where it resets. Its output is y."""
    n, heads = x.shape[1], m.num_attention_heads
    xs = _wide(x[0]).view(n, heads, -1).transpose(0, 1)  # heads × n × block

    def gate(weight, bias):
        return torch.sigmoid(xs @ _wide(weight) + _wide(bias)[:, None, :]).transpose(0, 1).reshape(n, -1)

    log_a = -8.0 * gate(m.recurrent_gate_weight, m.recurrent_gate_bias) * F.softplus(_wide(m.recurrent_param))
    b = gate(m.input_gate_weight, m.input_gate_bias) * torch.sqrt(1 - torch.exp(2 * log_a))
    b[0] = gate(m.input_gate_weight, m.input_gate_bias)[0]  # (reset: the first position's input is not scaled)
    return Gated(x=_wide(x[0]).T[..., None].contiguous(), log_a=log_a.T.contiguous(), b=b.T.contiguous()), None


@dataclass(frozen=True)
class Reader:
    read: Callable[..., tuple[Scan, torch.Tensor | None]]  # (mixer, its input) -> (scan, gate or None)
    at: Callable | None  # the mixer's submodule whose input is y (gate None), or y ⊙ silu(gate); None: its output
    kind: str  # in words
    per: str  # what α is one of: "channel" or "head"


MAMBA1 = Reader(mamba1, lambda m: m.out_proj, "Mamba-1 selective state space", "channel")
MAMBA2 = Reader(
    mamba2, lambda m: m.norm if getattr(m, "mamba_rms_norm", True) else m.out_proj, "Mamba-2 state space", "head"
)
GATED_DELTA = "gated DeltaNet"
KIMI = "Kimi delta attention (gated DeltaNet, a decay per key channel)"
LIGHTNING = "lightning attention (linear attention with a fixed decay per head)"
CONV = "gated short convolution"
# the mixers read, by class name
READERS: dict[str, Reader] = {
    **dict.fromkeys(("MambaMixer", "FalconMambaMixer", "JambaMambaMixer"), MAMBA1),
    **dict.fromkeys(
        ("Mamba2Mixer", "BambaMixer", "NemotronHMamba2Mixer", "GraniteMoeHybridMambaLayer", "Zamba2MambaMixer"),
        MAMBA2,
    ),
    "FalconH1Mixer": MAMBA2,
    "Qwen3NextGatedDeltaNet": Reader(qwen3_next, lambda m: m.norm, GATED_DELTA, "head"),
    "Qwen3_5GatedDeltaNet": Reader(qwen3_5, lambda m: m.norm, GATED_DELTA, "head"),
    "OlmoHybridGatedDeltaNet": Reader(olmo_hybrid, lambda m: m.o_norm, GATED_DELTA, "head"),
    **dict.fromkeys(
        ("KimiLinearDeltaAttention", "BailingHybridDeltaAttention"), Reader(kimi, lambda m: m.o_norm, KIMI, "head")
    ),
    "MiniMaxLightningAttention": Reader(lightning, lambda m: m.norm, LIGHTNING, "head"),
    **dict.fromkeys(("Lfm2ShortConv", "Lfm2MoeShortConv"), Reader(short_conv, lambda m: m.out_proj, CONV, "channel")),
    "RecurrentGemmaRglru": Reader(rglru, None, "Griffin's RG-LRU recurrence", "channel"),
}
