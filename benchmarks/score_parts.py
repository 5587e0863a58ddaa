"""A score split into residual parts (w.score_parts), beside the model's own forward pass.

    python benchmarks/score_parts.py            # 256 tokens, 5 samples of each
    python benchmarks/score_parts.py --quick    # 64 tokens, 2 samples (a smoke test)

The model: GPT-2 small's shape (12 layers × 12 heads of 64, width 768, its vocabulary), random weights,
float32 on the CPU, loaded for SDPA as transformers loads it by default; random token ids. Timed in one
process, medians of the samples:

- ``forward``: the model's own forward pass (the baseline every ratio divides by);
- ``first``: the first cell of a text, which reads the stream once (integrations.score_parts.read: one
  eager pass with every part's output recorded) and splits one cell of the last layer;
- ``cell``: each further cell (layers, heads and cells drawn at random, the stream read);
- ``row``: a whole row of the last layer by layer (every key's score).

Goals (issue 51): ``first`` at most one forward pass's time beyond the pass itself (first ÷ forward ≤ 2),
``cell`` ≤ 0.5 s. Writes results/score_parts.{json,md}.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).parent))
from long_model import median, timed  # noqa: E402


def measure(n: int, samples: int) -> dict:
    import torch
    import transformers as tf

    from attnwidget.integrations import score_parts

    torch.set_num_threads(os.cpu_count() or 1)
    torch.manual_seed(0)
    config = tf.GPT2Config(n_layer=12, n_head=12, n_embd=768, n_positions=1024)
    model = tf.GPT2LMHeadModel(config).eval()
    ids = torch.randint(0, config.vocab_size, (1, n), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        model(input_ids=ids[:, :16])  # (a warm-up)

    def forward():
        with torch.no_grad():
            model(input_ids=ids)

    listed = ids[0].tolist()
    out = {"forward": timed(forward, samples)}
    out["first"] = timed(lambda: score_parts.read(model, listed).cell(11, 0, n - 1, n // 2), samples)
    stream = score_parts.read(model, listed)
    rng = np.random.default_rng(2)
    cells = []
    for _ in range(4 * samples):
        i = int(rng.integers(0, n))
        cells.append((int(rng.integers(0, 12)), int(rng.integers(0, 12)), i, int(rng.integers(0, i + 1))))
    out["cell"] = [timed(lambda c=c: stream.cell(*c), 1)[0] for c in cells]
    out["row"] = timed(lambda: stream.row(11, 3, n - 1, list(range(n))), samples)
    return out


def table(results: dict, load: tuple) -> str:
    lines = [
        "# A score split into residual parts, beside the model's forward pass",
        "",
        f"GPT-2 small's shape (12 layers × 12 heads, width 768), random weights, float32, {os.cpu_count()} CPUs; "
        f"medians of the samples; load average {load[0]:.2f} before, {load[1]:.2f} after. first: the stream read "
        "and one cell; cell: each further cell; row: a row of every key, by layer.",
        "",
        "| tokens | forward s | first s (÷ forward) | cell s | row s | first within 2 passes | cell ≤ 0.5 s | commit |",
        "| ---: | ---: | ---: | ---: | ---: | :---: | :---: | --- |",
    ]
    for n, r in results.items():
        fw, first, cell, row = (median(r[x]) for x in ("forward", "first", "cell", "row"))
        lines.append(
            f"| {int(n):,} | {fw:.3f} | {first:.3f} (×{first / fw:.2f}) | {cell:.4f} | {row:.3f} | "
            f"{'yes' if first / fw <= 2 else 'no'} | {'yes' if cell <= 0.5 else 'no'} | {r.get('commit', '')} |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--tokens", type=int, default=256)
    p.add_argument("--samples", type=int, default=5)
    p.add_argument("--quick", action="store_true")
    args = p.parse_args()
    n, samples = (64, 2) if args.quick else (args.tokens, args.samples)
    load0 = os.getloadavg()[0]
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT).stdout
    fresh = {str(n): {**measure(n, samples), "commit": commit.strip()}}
    load = (load0, os.getloadavg()[0])
    print(table(fresh, load))
    if args.quick:
        return
    out = ROOT / "benchmarks" / "results"
    (out / "score_parts.json").write_text(json.dumps({"load": load, "results": fresh}, indent=1) + "\n")
    (out / "score_parts.md").write_text(table(fresh, load))


if __name__ == "__main__":
    main()
