"""Long contexts (issue 47): one attention layer of the Llama-3-8B shape (32 heads of 128, 8 key-value
heads, causal, random float32 q, k and v given as arrays) read block by block by
attnwidget.blockwise.Heads at 8,192, 16,384 and 32,768 tokens (and 131,072 with --longest).

    python benchmarks/long.py             # writes benchmarks/results/long.{json,md} (several minutes)
    python benchmarks/long.py --quick     # 2,048 and 4,096 tokens, fewer samples (printed, not written)
    python benchmarks/long.py --longest   # 131,072 tokens too (about 3 GB of q, k, v; long)
    python benchmarks/long.py --lengths 131072   # only these lengths; the others keep their last rows

Each length runs in a fresh process (so its memory peak is its own), for numpy arrays and for torch
tensors (the same memory, torch.from_numpy), each timing the median of repeated samples after a
warm-up:

- a focused row of every head (``rows([i])``: 32 rows of n weights and scores);
- a 256 × 256 tile, cold (its rows' maxima and sums not yet known: each row computed whole) and warm
  (after the head's pooled map);
- one head's pooled map, 512 × 512 pixels, max and mean in one pass (``scan``, summaries included;
  ``pooled`` and LongAttention.map take this path), with a ``progress`` callback: how often it was
  told and the longest wait between tellings (from the start);
- the overview: every head's 84 × 84 thumbnail and summaries (``scan(h, 84, 84)`` for each head).

Past 32,768 tokens the pooled map is one sample without warm-up, each backend's overview runs only
if its estimate (32 × the pooled map's time) fits in what is left of ``--overview-budget``, and the
row and the cold tile are timed again with their products in one thread (what the second core adds).

Baseline, in the same process: torch's scaled_dot_product_attention forward of the same layer
(causal, grouped heads; at 131,072 tokens one key-value group of four heads, times eight). The
memory: tracemalloc's peak over the numpy path's pooled map, rows and cold tile (what numpy
allocates beyond the q, k and v given), and the process's largest resident size beyond what it held
with q, k and v made, after the kernel's measures and before the baseline (numpy and torch both).
Exactness: head 0's weights × values (``output``) against the baseline's own output for head 0.
Each length's row says the commit it was measured at; lengths not run keep their last rows.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import multiprocessing
import os
import pathlib
import queue as queues
import resource
import subprocess
import sys
import time
import tracemalloc

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "benchmarks"))

from run import machine, stats  # noqa: E402
from views import source  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results"
HEADS, KV_HEADS, WIDTH = 32, 8, 128
GOALS = {  # issue 47's, in seconds: at these lengths and beyond
    "row_s": (32_768, 0.050),
    "tile_warm_s": (0, 0.100),
    "tile_cold_s": (0, 0.100),
}
POOLED_GOALS = {16_384: 1.0, 32_768: 4.0}
MEASURED = [f"src/attnwidget/{name}.py" for name in ("blockwise", "threads", "formulas")]


def timed(fn, repeat: int, setup=None, warm: bool = True) -> dict:
    """Median (and p95) seconds of ``fn`` over ``repeat`` samples, after a warm-up unless ``warm`` is
    False; ``setup`` runs untimed before each and its result is ``fn``'s argument."""
    out = []
    for i in range(repeat + warm):
        arg = setup() if setup else None
        t0 = time.perf_counter()
        fn(arg) if setup else fn()
        if i or not warm:
            out.append(time.perf_counter() - t0)
    return stats(out)


def resident() -> float:
    """This process's resident memory now, bytes."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def layer(n: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((HEADS, n, WIDTH), dtype=np.float32)
    k = rng.standard_normal((KV_HEADS, n, WIDTH), dtype=np.float32)
    v = rng.standard_normal((KV_HEADS, n, WIDTH), dtype=np.float32)
    return q, k, v


def told(start: float, times: list, fractions: list) -> dict:
    """How a map's progress was told: calls, the wait before the first and the longest between two
    (seconds), the last fraction, and whether the fractions only grew."""
    gaps = np.diff([start, *times])
    return {
        "calls": len(times),
        "first_s": float(gaps[0]) if len(gaps) else None,
        "median_gap_s": float(np.median(gaps)) if len(gaps) else None,
        "longest_gap_s": float(gaps.max()) if len(gaps) else None,
        "last_fraction": fractions[-1] if fractions else None,
        "increasing": bool(np.all(np.diff(fractions) > 0)),
    }


def kernel(make, n: int, repeat: int, overview_budget: list, one_thread=None) -> dict:
    """The kernel's measures on one backend: ``make()`` gives a fresh Heads over the layer; past 32,768
    tokens the overview only if it is estimated to fit in ``overview_budget[0]`` seconds (then spent), and
    the row and the cold tile again inside ``one_thread()`` (its products in one thread: what the second
    core adds)."""
    row = n // 2 + 17
    t0 = time.perf_counter()
    heads = make()
    out = {"made_s": time.perf_counter() - t0}
    out["row_s"] = timed(lambda: heads.rows([row]), repeat)
    out["tile_cold_s"] = timed(lambda h: h.tile(0, row - 256, row, row - 512, row - 256), repeat, setup=make)
    long = n > 32_768
    if long:
        with one_thread():
            out["row_1thread_s"] = timed(lambda: heads.rows([row]), repeat)
            out["tile_cold_1thread_s"] = timed(
                lambda h: h.tile(0, row - 256, row, row - 512, row - 256), repeat, setup=make
            )
    times, fractions, start = [], [], [0.0]

    def pooled():
        times.clear(), fractions.clear()
        start[0] = time.perf_counter()
        heads.scan(0, 512, 512, progress=lambda f: (times.append(time.perf_counter()), fractions.append(f)))

    # past 32,768 tokens one pooled map, no warm-up (the rows and tiles before it touched q and k)
    out["pooled_s"] = timed(pooled, 1 if long else repeat, warm=not long)
    out["pooled_progress"] = told(start[0], times, fractions)  # (the last sample's)
    out["tile_warm_s"] = timed(lambda: heads.tile(0, row - 256, row, row - 512, row - 256), repeat)
    estimate = HEADS * out["pooled_s"]["median"]
    overview_repeat = 3 if n <= 16_384 else 1
    if long and estimate > overview_budget[0]:
        print(f"{n} tokens: overview skipped (about {estimate:.0f} s, {overview_budget[0]:.0f} s left)", flush=True)
        out["overview_s"], out["overview_estimate_s"] = None, estimate
        return out
    # (no warm-up: the pooled map's samples warmed every path it takes)
    out["overview_s"] = timed(lambda: [heads.scan(h, 84, 84) for h in range(HEADS)], overview_repeat, warm=False)
    overview_budget[0] -= out["overview_s"]["median"] if long else 0
    return out


def one_length(n: int, repeat: int, overview_budget: float, baseline_repeat: int) -> dict:
    """Every measure at n tokens (run in a fresh process)."""
    import torch

    from attnwidget.blockwise import Heads
    from attnwidget.threads import one_blas_thread

    torch.set_num_threads(2)
    q, k, v = layer(n)
    held = resident()
    load = [os.getloadavg()]
    report = {"tokens": n, "qkv_mb": (q.nbytes + k.nbytes + v.nbytes) / 1e6}
    budget = [overview_budget]  # (numpy's overview first, torch's from what it leaves)
    report["numpy"] = kernel(lambda: Heads(q, k, v, causal=True), n, repeat, budget, one_blas_thread)
    tq, tk, tv = (torch.from_numpy(a) for a in (q, k, v))  # the same memory

    @contextlib.contextmanager
    def one_torch_thread():
        torch.set_num_threads(1)
        try:
            yield
        finally:
            torch.set_num_threads(2)

    report["torch"] = kernel(lambda: Heads(tq, tk, tv, causal=True), n, repeat, budget, one_torch_thread)
    load.append(os.getloadavg())
    # memory: numpy's allocations, traced (not timed); then the process's peak so far beyond q, k, v
    heads = Heads(q, k, v, causal=True)
    tracemalloc.start()
    heads.tile(0, n - 256, n, 0, 256)
    heads.scan(0, 512, 512)
    heads.rows([n // 2])
    report["numpy_traced_peak_mb"] = tracemalloc.get_traced_memory()[1] / 1e6
    tracemalloc.stop()
    report["kernel_peak_beyond_qkv_mb"] = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - held) / 1e6
    # the baseline: the layer's own forward pass (one key-value group's four heads × 8 past 32,768 tokens)
    groups = 1 if n > 32_768 else KV_HEADS
    Q, K, V = tq[: groups * 4][None], tk[:groups][None], tv[:groups][None]
    kept = {}
    sdpa = lambda: kept.update(
        o=torch.nn.functional.scaled_dot_product_attention(Q, K, V, is_causal=True, enable_gqa=True)
    )
    with torch.no_grad():
        forward = timed(sdpa, baseline_repeat, warm=n <= 16_384)
    model_out = kept.pop("o")[0, 0].numpy()
    forward = {key: x * (KV_HEADS // groups) if key != "n" else x for key, x in forward.items()}
    report["forward_s"], report["forward_heads_measured"] = forward, groups * 4
    report["output_max_abs_diff"] = float(np.abs(heads.output(0) - model_out).max())
    report["output_max_abs"] = float(np.abs(model_out).max())
    load.append(os.getloadavg())
    report["load_average"] = load
    report["process_peak_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 1e6  # baseline's too
    for backend in ("numpy", "torch"):
        r = report[backend]
        r["overview_ratio"] = r["overview_s"] and r["overview_s"]["median"] / forward["median"]
        r["pooled_ratio_per_head"] = r["pooled_s"]["median"] / (forward["median"] / HEADS)
        r["row_ratio"] = r["row_s"]["median"] / forward["median"]
    return report


def _child(args, queue):
    queue.put(one_length(*args))


def in_fresh_process(*args) -> dict:
    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    p = ctx.Process(target=_child, args=(args, queue))
    p.start()
    while True:  # (a child killed, e.g. out of memory, puts nothing)
        try:
            out = queue.get(timeout=10)
            break
        except queues.Empty:
            if not p.is_alive():
                code = p.exitcode
                raise RuntimeError(f"the run at {args[0]:,} tokens ended without a result (exit code {code})") from None
    p.join()
    return out


def verdicts(r: dict, backend: str) -> list[str]:
    """Issue 47's goals at this length, met or not."""
    b, n, out = r[backend], r["tokens"], []
    for key, (from_n, goal) in GOALS.items():
        if n >= from_n:
            out.append(f"{key[:-2]} ≤ {goal * 1e3:.0f} ms: {'met' if b[key]['median'] <= goal else 'not met'}")
    if n in POOLED_GOALS:
        goal = POOLED_GOALS[n]
        out.append(f"pooled ≤ {goal:g} s: {'met' if b['pooled_s']['median'] <= goal else 'not met'}")
    if n > 32_768:  # the issue's ask for the pooled map there: that it show its progress
        gap = b["pooled_progress"]["longest_gap_s"]
        out.append(f"pooled map's progress told at least once a second: {'met' if gap and gap <= 1 else 'not met'}")
    if b["overview_ratio"] is not None:
        out.append(f"overview ≤ forward: {'met' if b['overview_ratio'] <= 1 else 'not met'}")
    return out


def markdown(report: dict) -> str:
    m = report["machine"]
    lines = [
        "# Long contexts: one Llama-3-8B attention layer, block by block",
        "",
        f"Machine: {m['cpus']} CPUs; torch {report['torch']}, 2 threads; each length measured at the commit, on "
        "the CPU, its row says (second table).",
        f"{HEADS} heads of {WIDTH}, {KV_HEADS} key-value heads, causal, random float32 q, k, v "
        "(attnwidget.blockwise.Heads). Medians of repeated samples (p95 in brackets), seconds unless said.",
        "Baseline: torch's scaled_dot_product_attention forward of the same layer, in the same process.",
        "",
        "| tokens | inputs | focused row, every head, ms | 256² tile cold, ms | tile warm, ms | one head's pooled map "
        "(512², max + mean + summaries) | ×(forward / 32) | overview: every head's thumbnail + summaries | "
        "×forward | forward (SDPA) |",
        "| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in report["lengths"]:
        f = r["forward_s"]
        for backend in ("numpy", "torch"):
            b = r[backend]
            ms = lambda x: f"{x['median'] * 1e3:.1f} ({x['p95'] * 1e3:.1f})"
            o, p = b["overview_s"], b["pooled_s"]
            pooled_spread = f"{p['p95']:.2f}" if p["n"] > 1 else "n=1"
            overview = (
                f"{o['median']:.1f} (n={o['n']}) | ×{b['overview_ratio']:.2f}"
                if o
                else f"not run (about {b['overview_estimate_s']:.0f}) | —"
            )
            lines.append(
                f"| {r['tokens']:,} | {backend} | {ms(b['row_s'])} | {ms(b['tile_cold_s'])} | {ms(b['tile_warm_s'])} | "
                f"{b['pooled_s']['median']:.2f} ({pooled_spread}) | ×{b['pooled_ratio_per_head']:.2f} | "
                f"{overview} | "
                f"{f['median']:.1f} (n={f['n']}"
                f"{', 4 heads × 8' if r['forward_heads_measured'] < HEADS else ''}) |"
            )
    lines += [
        "",
        "| tokens | q, k, v MB | numpy's traced peak, MB | process peak beyond q, k, v, MB | "
        "head 0's output vs SDPA's, max abs diff (max abs) | pooled map's progress: calls, first, longest gap, ms "
        "(numpy; torch) | load average (start, after kernel, end) | goals | commit, CPU |",
        "| ---: | ---: | ---: | ---: | ---: | --- | --- | --- | --- |",
    ]
    told = lambda t: f"{t['calls']}, {t['first_s'] * 1e3:.0f}, {t['longest_gap_s'] * 1e3:.0f}" if t else "—"
    for r in report["lengths"]:
        load = "; ".join(f"{a[0]:.2f}" for a in r["load_average"])
        goals = "; ".join(f"{b}: " + ", ".join(verdicts(r, b)) for b in ("numpy", "torch"))
        lines.append(
            f"| {r['tokens']:,} | {r['qkv_mb']:.0f} | {r['numpy_traced_peak_mb']:.0f} | "
            f"{r['kernel_peak_beyond_qkv_mb']:.0f} | {r['output_max_abs_diff']:.1e} ({r['output_max_abs']:.1f}) | "
            f"{told(r['numpy'].get('pooled_progress'))}; {told(r['torch'].get('pooled_progress'))} | "
            f"{load} | {goals} | "
            f"{r['commit']}{' (src changed)' if r.get('src_changed') else ''}, {r['cpu']} |"
        )
    lines += [
        "",
        "The tile's cold time includes computing its 256 rows whole (their maxima and sums, then kept); warm,",
        "after the head's pooled map, it computes only its own cells. A focused row and a tile are each",
        "computed from q and k alone; the pooled map and the overview read every row once. The baseline is the",
        "layer's attention alone (SDPA, every core), a stricter one than issue 47's (a whole model's forward",
        "pass, its projections and MLPs included). numpy's bands are shared among the cores (BLAS in one",
        "thread under each); torch shares its own. Timings on a shared machine: see the load averages.",
        "Past 32,768 tokens: one pooled map (no warm-up), the SDPA baseline one key-value group's four heads",
        "timed once and multiplied by 8, and each backend's overview only if its estimate (32 × its pooled map)",
        "fitted in what was left of a time budget (--overview-budget, 900 s by default, for both). There the",
        "row and the cold tile are also timed with their products in one thread (numpy's BLAS, torch's own):",
    ]
    for r in report["lengths"]:
        if "row_1thread_s" in r["numpy"]:
            ms = lambda b, key, r=r: f"{r[b][key]['median'] * 1e3:.0f}"
            lines.append(
                f"at {r['tokens']:,} tokens a row {ms('numpy', 'row_1thread_s')} ms (numpy), "
                f"{ms('torch', 'row_1thread_s')} ms (torch); a cold tile {ms('numpy', 'tile_cold_1thread_s')} ms, "
                f"{ms('torch', 'tile_cold_1thread_s')} ms."
            )
    lines.append("")
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="2,048 and 4,096 tokens, fewer samples")
    parser.add_argument("--longest", action="store_true", help="131,072 tokens too")
    parser.add_argument("--lengths", type=int, nargs="+", help="only these lengths (the others keep their last rows)")
    parser.add_argument("--overview-budget", type=float, default=900.0, help="seconds for overviews past 32,768 tokens")
    args = parser.parse_args(argv)
    import torch

    lengths = [2_048, 4_096] if args.quick else args.lengths or [8_192, 16_384, 32_768]
    lengths = sorted(set(lengths) | ({131_072} if args.longest else set()))
    # the code measured: blockwise and what it imports (others' changes elsewhere in src/ do not count)
    git = ["git", "-C", str(ROOT), "status", "--porcelain", "--"]
    where = source() | {"src_changed": bool(subprocess.run([*git, *MEASURED], capture_output=True, text=True).stdout)}
    fresh = []
    for n in lengths:
        repeat = 2 if args.quick else 5
        baseline_repeat = 1 if args.quick or n > 16_384 else 3
        fresh.append(in_fresh_process(n, repeat, args.overview_budget, baseline_repeat))
        fresh[-1].update(commit=where["commit"], src_changed=where["src_changed"], cpu=machine()["cpu"])
        print(json.dumps(fresh[-1]), flush=True)
    # the lengths not run now keep their last rows (each saying at which commit it was measured); --quick's
    # rows are printed only
    path = RESULTS / "long.json"
    before = json.loads(path.read_text()) if path.exists() and not args.quick else {"lengths": []}
    for r in before["lengths"]:  # (rows from before rows had their own commit: the report's)
        r.setdefault("commit", before["source"]["commit"])
        r.setdefault("src_changed", before["source"]["src_changed"])
        r.setdefault("cpu", before["machine"]["cpu"])
    rows = {r["tokens"]: r for r in before["lengths"]} | {r["tokens"]: r for r in fresh}
    report = {"machine": machine(), "torch": torch.__version__, "lengths": [rows[n] for n in sorted(rows)]}
    if args.quick:
        print(markdown(report))
        return
    RESULTS.mkdir(exist_ok=True)
    path.write_text(json.dumps(report, indent=1))
    (RESULTS / "long.md").write_text(markdown(report))
    print(markdown(report))


if __name__ == "__main__":
    main()
