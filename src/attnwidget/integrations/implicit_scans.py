"""The scans of layers that are not attention, and the matrix α each one applies (its implicit attention).

Each scan here is linear in its input x once its input-dependent parameters are fixed: y_t = Σ_s α_ts x_s
for every channel (Mamba-1) or head (the others), with α lower triangular. A scan holds those parameters
(float64, on the model's device) and gives y two ways: step by step, as the layer's recurrence runs
(``recurrence``), and as α · x, α built a block of rows at a time (``build``): no more than ``BUDGET``
numbers are held at once besides the result.

- ``Selective``, h_t = exp(Δ_t A) h_{t-1} + Δ_t B_t x_t, y_t = C_t · h_t + D x_t (Mamba-1: A per channel
  and state, B and C shared by every channel; Mamba-2: A one number per head, B and C per group of heads):
  α_ts = Σ_k C_t[k] B_s[k] Δ_s exp(A_k Σ_{r=s+1..t} Δ_r), plus D on the diagonal (Mamba-1's built by
  carrying each column's state from row to row, as the scan does).
  MiniMax's lightning attention is this scan with B = k, C = q, Δ = 1 and A = −(the head's slope).
- ``Gated``, h_t = a_t h_{t-1} + b_t x_t, y_t = h_t per channel (Griffin's RG-LRU):
  α_ts = b_s a_{s+1} ⋯ a_t.
- ``ShortConv``, y_t = C_t Σ_j w_j B_{t−j} x_{t−j} (LFM2's gated short convolution, per channel):
  α_ts = C_t w_{t−s} B_s for 0 ≤ t − s < the kernel's length, zero farther back.
- ``Delta``, the gated delta rule, S_t = (I − β_t k_t k_tᵀ) G_t S_{t-1} + β_t k_t v_tᵀ, y_t = S_tᵀ q_t
  (G_t a decay: one number per head, or one per key dimension): x is v, and
  α_ts = q_tᵀ M_t ⋯ M_{s+1} β_s k_s with M_r = (I − β_r k_r k_rᵀ) G_r, not a product of scalar gates; it is
  built by carrying each row's q_t back through the M_r (u ← G_r (u − β_r k_r (k_r · u))).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

BUDGET = 1 << 24  # numbers held at once while α is built (about 128 MB in float64)


class Scan:
    """What every scan has: x and the parameters (count × n × ...), and how α is built and checked."""

    x: torch.Tensor  # count × n × p: the scan's input, p numbers per channel or head sharing one α

    @property
    def cost(self) -> int:
        """Numbers held per cell of α while a block is built."""
        return 1

    @property
    def count(self) -> int:
        return self.x.shape[0]

    @property
    def n(self) -> int:
        return self.x.shape[1]

    def skip(self, idx: torch.Tensor) -> torch.Tensor:
        """The skip term on α's diagonal (D x_t added to y_t) of channels ``idx``: none but Mamba's."""
        return self.x.new_zeros(len(idx))

    def block(self, idx: torch.Tensor, start: int, stop: int) -> torch.Tensor:
        """α of channels (heads) ``idx``, rows start..stop: len(idx) × (stop − start) × n."""
        raise NotImplementedError

    def recurrence(self) -> torch.Tensor:
        """y, count × n × p, computed step by step as the layer's scan runs."""
        raise NotImplementedError


def build(scan: Scan, idx: torch.Tensor, mean: bool, skip: bool = True) -> torch.Tensor:
    """α of channels ``idx`` (len × n × n), or their mean (n × n), a block of rows and channels at a time;
    without the skip term on the diagonal where ``skip`` is False."""
    n = scan.n
    rows = max(1, min(n, BUDGET // (n * scan.cost)))
    chunk = max(1, BUDGET // (n * scan.cost * rows))
    out = scan.x.new_zeros((n, n) if mean else (len(idx), n, n))
    for i in range(0, len(idx), chunk):
        part = idx[i : i + chunk]
        for start in range(0, n, rows):
            stop = min(n, start + rows)
            a = scan.block(part, start, stop)
            if mean:
                out[start:stop] += a.sum(0)
            else:
                out[i : i + len(part), start:stop] = a
    if not skip:
        out.diagonal(dim1=-2, dim2=-1).sub_(scan.skip(idx).sum() if mean else scan.skip(idx)[:, None])
    return out / len(idx) if mean else out


@dataclass
class Selective(Scan):
    """Mamba's selective scan (Mamba-1 per channel, Mamba-2 per head)."""

    x: torch.Tensor  # count × n × p
    dt: torch.Tensor  # count × n: Δ, after its bias, softplus and clamp
    A: torch.Tensor  # count × N (Mamba-1) or count × 1 (Mamba-2): negative
    B: torch.Tensor  # groups × n × N
    C: torch.Tensor  # groups × n × N
    D: torch.Tensor  # count

    @property
    def cost(self) -> int:  # (Mamba-1 holds each column's state besides α: fewer numbers than α's when rows >= N)
        return 2 if self.A.shape[1] > 1 else 1

    def skip(self, idx):
        return self.D[idx]

    def _group(self, idx):
        return idx // (self.count // self.B.shape[0])

    def block(self, idx, start, stop):
        g = self._group(idx)
        if self.A.shape[1] > 1:
            return self._states(idx, g, start, stop)
        total = self.dt[idx].cumsum(1)  # Σ_{r<=t} Δ_r
        causal = torch.ones(stop - start, self.n, dtype=torch.bool, device=self.x.device).tril(start)
        gap = (total[:, start:stop, None] - total[:, None, :]).where(causal, 0)  # Σ_{r=s+1..t} Δ_r, s <= t
        # one decay per head: (C_t · B_s) Δ_s exp(A gap)
        a = (self.C[g, start:stop] @ self.B[g].transpose(1, 2)) * torch.exp(self.A[idx, :, None] * gap)
        a = a * self.dt[idx][:, None, :] * causal
        return self._skip(a, idx, start, stop)

    def _states(self, idx, g, start, stop):
        """One decay per state (Mamba-1): column s's state Δ_s B_s exp(A (Σ_{r=s+1..t} Δ_r)) carried from row to
        row, as the scan carries it (one exponential per column and row, not per state and cell), and read by
        C_t; the block's first row starts from the closed form."""
        dt, A, B, C = self.dt[idx], self.A[idx][:, None, :], self.B[g], self.C[g]
        total = dt.cumsum(1)
        h = B.new_zeros(len(idx), stop, B.shape[2])  # len × columns × N
        gap = total[:, start, None] - total[:, : start + 1]
        h[:, : start + 1] = dt[:, : start + 1, None] * B[:, : start + 1] * torch.exp(A * gap[..., None])
        a = B.new_zeros(len(idx), stop - start, self.n)
        for t in range(start, stop):
            if t > start:
                h[:, :t] *= torch.exp(dt[:, t, None, None] * A)
                h[:, t] = dt[:, t, None] * B[:, t]
            a[:, t - start, : t + 1] = (h[:, : t + 1] @ C[:, t, :, None])[..., 0]
        return self._skip(a, idx, start, stop)

    def _skip(self, a, idx, start, stop):
        rows = torch.arange(start, stop, device=a.device)
        a[:, rows - start, rows] += self.D[idx, None]
        return a

    def recurrence(self):
        g = self._group(torch.arange(self.count, device=self.x.device))
        B, C = self.B[g], self.C[g]  # count × n × N
        h = self.x.new_zeros(self.count, self.x.shape[2], self.B.shape[2])
        y = torch.empty_like(self.x)
        for t in range(self.n):
            dt = self.dt[:, t, None, None]
            h = torch.exp(dt * self.A[:, None, :]) * h + dt * self.x[:, t, :, None] * B[:, t, None, :]
            y[:, t] = (h * C[:, t, None, :]).sum(-1) + self.D[:, None] * self.x[:, t]
        return y


@dataclass
class Delta(Scan):
    """The gated delta rule (gated DeltaNet; Kimi delta attention with a decay per key dimension)."""

    x: torch.Tensor  # count × n × d_v: the values
    q: torch.Tensor  # count × n × d_k: queries, as the rule reads them (normalised, scaled)
    k: torch.Tensor  # count × n × d_k: keys, as the rule reads them (normalised)
    log_decay: torch.Tensor  # count × n × 1 (one decay per head) or count × n × d_k: log G_t
    beta: torch.Tensor  # count × n

    def block(self, idx, start, stop):
        q, k, beta, decay = self.q[idx], self.k[idx], self.beta[idx], self.log_decay[idx].exp()
        u = q.new_zeros(len(idx), stop - start, q.shape[2])  # each row's q_t carried back to s
        a = q.new_zeros(len(idx), stop - start, self.n)
        for s in range(stop - 1, -1, -1):
            if s >= start:
                u[:, s - start] = q[:, s]  # (row t starts at s = t; rows after s are still zero)
            read = u @ k[:, s, :, None]  # len × rows × 1: k_s · u
            a[:, :, s] = beta[:, s, None] * read[..., 0]
            u = decay[:, s, None, :] * (u - beta[:, s, None, None] * read * k[:, s, None, :])
        return a

    def recurrence(self):
        S = self.x.new_zeros(self.count, self.q.shape[2], self.x.shape[2])
        y = torch.empty_like(self.x)
        for t in range(self.n):
            k = self.k[:, t]
            S = S * self.log_decay[:, t, :, None].exp()
            delta = (self.x[:, t] - (S * k[..., None]).sum(1)) * self.beta[:, t, None]
            S = S + k[..., None] * delta[:, None, :]
            y[:, t] = (S * self.q[:, t, :, None]).sum(1)
        return y


@dataclass
class Gated(Scan):
    """A gated diagonal linear recurrence (Griffin's RG-LRU), per channel."""

    x: torch.Tensor  # count × n × 1
    log_a: torch.Tensor  # count × n: log a_t, the state's decay
    b: torch.Tensor  # count × n: the input's weight

    def block(self, idx, start, stop):
        total = self.log_a[idx].cumsum(1)
        causal = torch.ones(stop - start, self.n, dtype=torch.bool, device=self.x.device).tril(start)
        gap = (total[:, start:stop, None] - total[:, None, :]).where(causal, 0)  # Σ_{r=s+1..t} log a_r
        return torch.exp(gap) * self.b[idx, None, :] * causal

    def recurrence(self):
        h = self.x.new_zeros(self.count)
        y = torch.empty_like(self.x)
        for t in range(self.n):
            h = self.log_a[:, t].exp() * h + self.b[:, t] * self.x[:, t, 0]
            y[:, t, 0] = h
        return y


@dataclass
class ShortConv(Scan):
    """A gated causal depthwise convolution (LFM2), per channel."""

    x: torch.Tensor  # count × n × 1
    B: torch.Tensor  # count × n: the input gate
    C: torch.Tensor  # count × n: the output gate
    w: torch.Tensor  # count × length: w[:, d] weighs the token d steps back

    def block(self, idx, start, stop):
        lag = torch.arange(start, stop, device=self.x.device)[:, None] - torch.arange(self.n, device=self.x.device)
        near = (lag >= 0) & (lag < self.w.shape[1])
        w = self.w[idx][:, lag.clamp(0, self.w.shape[1] - 1)] * near  # len × rows × n
        return self.C[idx, start:stop, None] * w * self.B[idx, None, :]

    def recurrence(self):
        bx = self.B * self.x[..., 0]
        y = sum(self.w[:, d, None] * torch.nn.functional.pad(bx, (d, 0))[:, : self.n] for d in range(self.w.shape[1]))
        return (self.C * y)[..., None]
