"""Long-context head scores and compressed KV caches, beside the model's own forward pass.

    python benchmarks/long_scores.py                  # 16,384 tokens (about 20 minutes on 2 cores)
    python benchmarks/long_scores.py --quick          # 2,048 tokens, one sample (a smoke test)

The model and text: long_model.py's (Llama-style, GPT-2 small's size, 12 layers × 12 heads, 4 key-value
heads, RoPE, random weights, SDPA, float32 on the CPU, random token ids). In one process, with every
layer's q, k and v read once (capture_long), each of these is timed over every layer of the model, and
divided by the forward pass timed in the same run:

- ``streaming``: every head's streaming share (LongAttention.head_scores, one pass over each head's bands);
- ``retrieval``: the retrieval score's reading of a written answer (needle._copied: each decoding step's
  row of every head, 32 steps, and whether its largest weight copies the needle), the model's writing
  left out (it is the model's own time);
- ``kept streaming``, ``kept h2o``, ``kept snapkv``: every layer's kept keys at a budget of n / 8
  (kvcache.from_heads; H2O's column sums are a pass over each head, SnapKV's the last 64 rows).

Goal (issue 50): each within one forward pass's time. Writes results/long_scores.{json,md}.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

import numpy as np
from long_model import ROOT, SHAPE, median, model, timed


def measure(n: int, samples: int) -> dict:
    import torch

    from attnwidget import kvcache, needle
    from attnwidget.integrations.long import capture_long
    from attnwidget.long import LongAttention

    torch.set_num_threads(os.cpu_count() or 1)
    m = model()
    ids = torch.randint(0, 32000, (1, n), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        m(input_ids=ids[:, :256])  # (a warm-up at a short length)

    def forward():
        with torch.no_grad():
            m(input_ids=ids)

    out = {"forward": timed(forward, samples)}
    long = LongAttention([str(i) for i in ids[0].tolist()], capture_long(m, input_ids=ids))
    heavy = max(1, samples - 1)  # (a pass over every head of every layer: as long as a forward pass)
    out["streaming"] = timed(lambda: long.head_scores(["streaming"]), heavy)
    tokens, prompt, span = ids[0].numpy(), n - 32, (n // 2, n // 2 + 24)
    out["retrieval"] = timed(lambda: needle._copied(long, tokens, prompt, span), samples)
    budget = n // 8
    for method in ("streaming", "h2o", "snapkv"):
        every = lambda: [kvcache.from_heads(long.heads(x), method, budget) for x in long.layers]  # noqa: B023
        out[f"kept {method}"] = timed(every, heavy if method == "h2o" else samples)
    return out


def table(results: dict, load: tuple) -> str:
    names = ("streaming", "retrieval", "kept streaming", "kept h2o", "kept snapkv")
    lines = [
        "# Long-context head scores and compressed KV caches, beside the model's forward pass",
        "",
        f"Llama-style, GPT-2 small's size ({SHAPE['num_hidden_layers']} layers × {SHAPE['num_attention_heads']} heads"
        f" of 64, {SHAPE['num_key_value_heads']} key-value heads, RoPE), random weights, SDPA, float32, "
        f"{os.cpu_count()} CPUs. Every layer; medians of the samples, each ÷ the forward pass of the same run; load "
        f"average {load[0]:.2f} before, {load[1]:.2f} after. Kept keys at a budget of n / 8.",
        "",
        "| tokens | forward s | " + " | ".join(f"{n} s (÷ forward)" for n in names) + " | within one pass | commit |",
        "| ---: | ---: | " + " | ".join("---:" for _ in names) + " | :---: | --- |",
    ]
    for n, r in results.items():
        fw = median(r["forward"])
        ratios = [median(r[x]) / fw for x in names]
        cells = " | ".join(f"{median(r[x]):.2f} (×{q:.2f})" for x, q in zip(names, ratios))
        lines.append(
            f"| {int(n):,} | {fw:.1f} | {cells} | {'yes' if max(ratios) <= 1 else 'no'} | {r.get('commit', '')} |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--lengths", type=int, nargs="+", default=[16384])
    p.add_argument("--samples", type=int, default=3)
    p.add_argument("--quick", action="store_true")
    args = p.parse_args()
    lengths, samples = ([2048], 1) if args.quick else (args.lengths, args.samples)
    load0 = os.getloadavg()[0]
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT).stdout
    fresh = {}
    for n in lengths:
        fresh[str(n)] = {**measure(n, samples), "commit": commit.strip()}
        print(f"  {n} tokens: {fresh[str(n)]}", file=sys.stderr, flush=True)
    load = (load0, os.getloadavg()[0])
    print(table(fresh, load))
    if args.quick:
        return
    out = ROOT / "benchmarks" / "results"
    (out / "long_scores.json").write_text(json.dumps({"load": load, "results": fresh}, indent=1) + "\n")
    (out / "long_scores.md").write_text(table(fresh, load))


if __name__ == "__main__":
    np.seterr(all="ignore")
    main()
