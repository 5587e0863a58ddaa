"""A model read on long texts (attnwidget.long.LongAttention), beside its own forward pass.

    python benchmarks/long_model.py                    # 8,192 and 16,384 tokens (about 15 minutes on 2 cores)
    python benchmarks/long_model.py --lengths 32768    # a 32k text (about 20 minutes more)
    python benchmarks/long_model.py --quick            # 2,048 tokens, one sample (a smoke test)

The model: Llama-style, GPT-2 small's size (12 layers × 12 heads of 64, 4 key-value heads, RoPE,
width 768), random weights, SDPA, float32 on the CPU. Each length runs twice in a process of its own,
so that each peak of resident memory is that run's alone:

- ``forward``: the model's own forward pass on the text (the baseline, same run);
- ``read``: the same pass read (capture_long: every layer's q, k and v kept, each layer held to the
  model's output on 256 sampled rows), then, from what was kept, a focused row of every head of a
  layer, a 256 × 256 tile, one head's map pooled onto 512 × 512 pixels, and the overview (every
  head's 32 × 32 thumbnail and summaries).

Goals (issue 47): reading ≤ 1.25 × the forward pass; memory beyond the forward pass's peak ≤ the q,
k and v kept + 256 MB; a row ≤ 50 ms at 32,768 tokens; a pooled map ≤ 1 s at 16,384 and ≤ 4 s at
32,768; a tile ≤ 100 ms; the overview ≤ the forward pass. Writes results/long_model.{json,md}.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import resource
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "benchmarks"))

SHAPE = dict(
    hidden_size=768, intermediate_size=3072, num_hidden_layers=12, num_attention_heads=12, num_key_value_heads=4
)


def model():
    import torch
    import transformers

    torch.manual_seed(0)
    config = transformers.LlamaConfig(vocab_size=32000, max_position_embeddings=131072, **SHAPE)
    return transformers.AutoModel.from_config(config, attn_implementation="sdpa").eval()


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # (kB on Linux)


def median(xs):
    xs = sorted(xs)
    return xs[len(xs) // 2] if len(xs) % 2 else (xs[len(xs) // 2 - 1] + xs[len(xs) // 2]) / 2


def timed(call, samples: int) -> list[float]:
    out = []
    for _ in range(samples):
        start = time.perf_counter()
        call()
        out.append(time.perf_counter() - start)
    return out


def one(phase: str, n: int, samples: int) -> dict:
    """One phase at one length, in this process: its times (s) and this process's peak memory (MB)."""
    import torch

    from attnwidget.integrations.long import capture_long
    from attnwidget.long import LongAttention

    torch.set_num_threads(os.cpu_count() or 1)
    m = model()
    ids = torch.randint(0, 32000, (1, n), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        m(input_ids=ids[:, :256])  # (a warm-up at a short length)
    before = peak_mb()
    if phase == "forward":

        def forward():
            with torch.no_grad():
                m(input_ids=ids)

        return {"forward": timed(forward, samples), "peak_mb": peak_mb(), "model_mb": before}
    held: dict = {}

    def read():
        held.clear()
        held.update(capture_long(m, input_ids=ids))

    out = {"read": timed(read, samples)}
    long = LongAttention([str(i) for i in ids[0].tolist()], held)
    kept = sum(t.numel() * t.element_size() for x in held.values() for t in (x.q, x.k, x.v))
    layer = long.layers[len(long.layers) // 2]
    long.rows(layer, [n - 1])  # (each head's row sums, kept per head, come with its first row)
    out["row"] = timed(lambda: long.rows(layer, [n // 2]), 5)
    out["tile"] = timed(lambda: long.tile(layer, 3, (n // 2, n // 2 + 256), (n // 4, n // 4 + 256)), 5)
    out["map"] = timed(lambda: long.map(layer, 5, size=512), max(1, samples - 1))
    start = time.perf_counter()
    long.overview(size=32)
    out["overview"] = [time.perf_counter() - start]
    out.update(peak_mb=peak_mb(), model_mb=before, kept_mb=kept / 2**20)
    return out


def run(n: int, samples: int) -> dict:
    """Both phases at length n, each in a new process."""
    found = {}
    for phase in ("forward", "read"):
        cmd = [sys.executable, __file__, "--one", phase, str(n), str(samples)]
        done = subprocess.run(cmd, capture_output=True, text=True, check=True)
        found[phase] = json.loads(done.stdout.strip().splitlines()[-1])
        print(f"  {n} tokens, {phase}: {found[phase]}", file=sys.stderr, flush=True)
    return found


def table(results: dict, load: tuple) -> str:
    lines = [
        "# A model read on long texts: LongAttention beside the model's own forward pass",
        "",
        f"Llama-style, GPT-2 small's size ({SHAPE['num_hidden_layers']} layers × {SHAPE['num_attention_heads']} heads "
        f"of 64, {SHAPE['num_key_value_heads']} key-value heads, RoPE), random weights, SDPA, float32, "
        f"{os.cpu_count()} CPUs. Medians of the samples; load average {load[0]:.2f} before, {load[1]:.2f} after.",
        "",
        "| tokens | forward s | read s | read / forward | row ms | tile ms | map (512²) s | overview s "
        "| overview / forward | memory beyond forward MB | q, k, v kept MB | within kept + 256 MB | commit |",
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | :---: | --- |",
    ]
    for n, r in results.items():
        f, d = r["forward"], r["read"]
        fw, rd = median(f["forward"]), median(d["read"])
        beyond = d["peak_mb"] - f["peak_mb"]
        lines.append(
            f"| {int(n):,} | {fw:.1f} | {rd:.1f} | ×{rd / fw:.2f} | {1000 * median(d['row']):.1f} | "
            f"{1000 * median(d['tile']):.1f} | {median(d['map']):.2f} | {d['overview'][0]:.1f} | "
            f"×{d['overview'][0] / fw:.2f} | {beyond:.0f} | {d['kept_mb']:.0f} | "
            f"{'yes' if beyond <= d['kept_mb'] + 256 else 'no'} | {r.get('commit', '0bab775')} |"
        )
    lines += [
        "",
        "The row: every head of the middle layer at the middle position (each head's row sums kept from a",
        "first row). The tile: 256 × 256 cells of head 3 there. The map: head 5's weights pooled onto 512 × 512",
        "pixels (each pixel's largest weight). The overview: every head's 32 × 32 thumbnail and summaries.",
        "Memory: the read process's peak resident memory less the forward process's (both hold the model).",
    ]
    return "\n".join(lines) + "\n"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--lengths", type=int, nargs="+", default=[8192, 16384])
    p.add_argument("--samples", type=int, default=2)
    p.add_argument("--quick", action="store_true")
    p.add_argument("--one", nargs=3, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.one:
        phase, n, samples = args.one
        print(json.dumps(one(phase, int(n), int(samples))))
        return
    lengths, samples = ([2048], 1) if args.quick else (args.lengths, args.samples)
    load0 = os.getloadavg()[0]
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT).stdout
    fresh = {str(n): {**run(n, samples), "commit": commit.strip()} for n in lengths}
    load = (load0, os.getloadavg()[0])
    out = ROOT / "benchmarks" / "results"
    # the lengths not run now keep their last results (each row says at which commit it was measured)
    before = json.loads((out / "long_model.json").read_text()) if (out / "long_model.json").exists() else {}
    results = dict(sorted({**before.get("results", {}), **fresh}.items(), key=lambda kv: int(kv[0])))
    (out / "long_model.json").write_text(json.dumps({"load": load, "results": results}, indent=1) + "\n")
    (out / "long_model.md").write_text(table(results, load))
    print(table(results, load))


if __name__ == "__main__":
    main()
