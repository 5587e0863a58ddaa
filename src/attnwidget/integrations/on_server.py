"""What a remote trace computes beside the model, on the server (integrations/remote.py): the check that the
softmax of the q·k caught is what the model mixed its values with, and a layer's overview (thumbnails and
summaries). torch alone: attnwidget is not installed on a server, so this module travels with the trace by value
(nnsight.register), and a local read's check (interface.check) runs the same code. The trace calls them with
every argument given and under torch.no_grad(): a function sent by value may arrive without its defaults or
decorators.
"""

from __future__ import annotations

import torch


def gap(q, k, v, scaling, softcap, bias, closed, sinks, weights, output, dtype, reduced: bool | None = None) -> float:
    """How far the model's own weights (or its output, weights × values) lie past rounding from the softmax
    of ``q·k`` (heads × tokens × width, keys and values repeated to the query heads): 0 within it. ``bias``
    (heads or 1 × n × m), ``closed`` (n × m, True: shut) and ``sinks`` (one logit per head) may be None;
    ``weights`` (1 × heads × n × m) or ``output`` (1 × n × heads × width) is the model's; ``dtype`` the model's;
    ``reduced``: half-precision products were added up in half precision (None: as torch's settings let cuBLAS).

    The bound: a score reaches the softmax rounded to ε (its dtype's, or float32's where the softmax runs in
    float32, as transformers' does) times itself and its bias, plus the accumulator's ε times d · scale · ‖q‖ ·
    ‖k‖; the check's own scores, in float32 (float64 for a float64 model), add their own. A softmax whose
    inputs move by at most δ moves each weight by at most (e^{2δ} − 1) times itself."""
    half = dtype in (torch.float16, torch.bfloat16)
    if reduced is None:
        matmul = torch.backends.cuda.matmul
        allowed = matmul.allow_fp16_reduced_precision_reduction or matmul.allow_bf16_reduced_precision_reduction
        reduced = half and q.is_cuda and bool(allowed)
    f32 = torch.finfo(torch.float32).eps
    work = torch.float64 if dtype == torch.float64 else torch.float32
    eps = max(torch.finfo(dtype).eps, f32)  # a score as the softmax takes it, and each weight it returns
    acc = torch.finfo(dtype).eps if (not half or reduced) else f32
    mine = torch.finfo(work).eps
    q, k, v = (t.detach().to(work) for t in (q, k, v))
    heads, n, d = q.shape
    m = k.shape[1]
    device, scale = q.device, abs(scaling)
    # what the scores of a row can reach: ‖q_i‖ · the longest key (bounds Σ|q||k| for the accumulation's error)
    reach = (acc + mine) * d * scale * q.norm(dim=-1) * k.norm(dim=-1).amax(-1, keepdim=True)
    bias = None if bias is None else bias.to(device, work)
    closed = None if closed is None else closed.to(device)
    sinks = None if sinks is None else sinks.to(device, work)[:, None, None]
    rows = max(1, 2**22 // max(1, heads * m))  # a block of rows at a time: no n × n held for a long text
    worst = 0.0
    for r0 in range(0, n, rows):
        at = slice(r0, min(n, r0 + rows))
        s = q[:, at] @ k.transpose(-1, -2) * scaling
        if softcap is not None:
            s = softcap * torch.tanh(s / softcap)
        size = s.abs()
        if bias is not None:
            s = s + bias[:, at]
            size += bias[:, at].abs()
        top = size.amax(-1) if sinks is None else torch.maximum(size.amax(-1), sinks[..., 0].abs())
        delta = (eps + mine) * top + reach[:, at]  # each row's largest move of a score (closed ones too)
        if closed is not None:
            s.masked_fill_(closed[at], -torch.inf)
        if sinks is None:
            ours = torch.softmax(s, -1).nan_to_num(0.0)  # a row that reads nothing: zeros, as the widget's
        else:  # each head's sink, a column of its own in the softmax, dropped after it
            ours = torch.softmax(torch.cat([s, sinks.expand(-1, s.shape[1], 1)], -1), -1)[..., :-1]
        spread = torch.expm1(2 * delta)[..., None]  # each weight's relative bound
        if weights is not None:
            theirs = weights[0, :, at].detach().to(device, work)
            gaps = (ours - theirs).abs_().sub_(torch.maximum(ours, theirs.abs()).mul_(2 * spread).add_(4 * eps))
        else:
            theirs = output[0, at].detach().to(device, work).transpose(0, 1)
            held = ours @ v.abs()
            room = (spread * ours) @ v.abs() + (acc * m + 2 * eps) * held
            gaps = (ours @ v - theirs).abs() - 2 * (room + 2 * eps * held.amax(-1, keepdim=True))
        worst = max(worst, float(gaps.nan_to_num(torch.inf).max()))
    return worst


def overview(q, k, scaling, softcap, closed, sinks, side: int = 84) -> tuple:
    """A layer's overview at the model's own settings (temperature 1), as overview.compute draws it: each
    head's thumbnail (block means of its weights, at most ``side`` × ``side``, scaled to its largest and
    rounded to 0–255), that largest mean, and its summaries (first, self, previous, effective tokens, sink
    share; the means over the rows where each exists, as formulas.summaries_of_rows takes them). Arguments as
    ``gap``'s; float32, a block of rows at a time."""
    q, k = q.detach().float(), k.detach().float()
    heads, n, _ = q.shape
    m = k.shape[1]
    device = q.device
    may = torch.ones(n, m, dtype=torch.bool, device=device) if closed is None else ~closed.to(device)
    z = None if sinks is None else sinks.to(device, torch.float32)[:, None, None]
    h, w = min(n, side), min(m, side)
    row_block = (torch.arange(n, device=device) * h) // n
    col_block = (torch.arange(m, device=device) * w) // m
    sums = torch.zeros(heads, h, m, device=device)
    each = torch.zeros(5, heads, n, device=device)  # first, self, previous, effective tokens, sink share
    rows = max(1, 2**22 // max(1, heads * m))
    for r0 in range(0, n, rows):
        r1 = min(n, r0 + rows)
        s = q[:, r0:r1] @ k.transpose(-1, -2) * scaling
        if softcap is not None:
            s = softcap * torch.tanh(s / softcap)
        s = s.masked_fill(~may[r0:r1], -torch.inf)
        if z is not None:
            s = torch.cat([s, z.expand(-1, r1 - r0, 1)], -1)
        weights = torch.softmax(s, -1).nan_to_num(0.0)
        if z is not None:
            each[4, :, r0:r1] = weights[..., -1]
            weights = weights[..., :-1]
        total = weights.sum(-1)
        share = weights / torch.where(total > 0, total, 1.0)[..., None]
        entropy = -(share * torch.log(torch.where(share > 0, share, 1.0))).sum(-1)
        each[3, :, r0:r1] = torch.exp(entropy)
        each[0, :, r0:r1] = weights[..., 0]
        at = torch.arange(r0, r1, device=device)
        own, before = at < m, (at >= 1) & (at <= m)
        each[1, :, r0:r1][:, own] = weights[:, own, at[own]]
        each[2, :, r0:r1][:, before] = weights[:, before, at[before] - 1]
        sums.index_add_(1, row_block[r0:r1], weights)
    blocks = torch.zeros(heads, h, w, device=device).index_add_(2, col_block, sums)
    counts = torch.bincount(row_block, minlength=h)[:, None] * torch.bincount(col_block, minlength=w)[None, :]
    means = blocks / counts
    top = means.amax(dim=(1, 2))
    thumbs = torch.round(255 * means / torch.where(top > 0, top, 1.0)[:, None, None]).to(torch.uint8)
    i = torch.arange(n, device=device)
    where = torch.zeros(5, n, dtype=torch.bool, device=device)
    where[0] = may[:, 0]
    where[1, : min(n, m)] = may[i[: min(n, m)], i[: min(n, m)]]
    p = i[1 : min(n, m + 1)]
    where[2, p] = may[p, p - 1]
    where[3] = where[4] = may.any(dim=1)
    found = (each * where[:, None]).sum(-1) / where.sum(-1).clamp(min=1)[:, None]
    found[~where.any(-1)] = torch.nan  # a summary no row has
    return thumbs.cpu(), top.cpu(), found.cpu()  # (a layer without sinks: a share of 0, dropped where none has any)


def closed(mask, n: int, m: int, causal: bool) -> tuple:
    """The cells the model's mask (4-D, batch first, as its attention function takes it; None: SDPA's own
    rule) shuts, n × m (None: none), and whether it adds finite terms besides (a bias through the mask)."""
    if mask is None:
        return (torch.ones(n, m, dtype=torch.bool, device="cpu").triu(m - n + 1) if causal and n > 1 else None), False
    mask = mask[0, 0, :, :m].expand(n, m)  # (a mask of the keys alone, 1 × m, is every row's)
    if not mask.dtype.is_floating_point:
        return ~mask.bool(), False
    shut = mask <= torch.finfo(mask.dtype).min / 2
    return shut, bool((torch.where(shut, 0, mask) != 0).any())


def find(masks: list, shut, m: int) -> int:
    """``shut``'s place among the distinct ``masks`` seen (added when new); -1: it shuts nothing, -2: the
    causal rule alone (neither travels)."""
    if shut is None or not bool(shut.any()):
        return -1
    n = shut.shape[0]
    if torch.equal(shut.cpu(), torch.ones(n, m, dtype=torch.bool).triu(m - n + 1)):
        return -2
    for i, seen in enumerate(masks):
        if torch.equal(seen, shut):
            return i
    masks.append(shut.clone())
    return len(masks) - 1
