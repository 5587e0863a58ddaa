"""attnwidget's speed, size and memory, measured against baselines in the same run.

    python benchmarks/run.py            # everything below; writes benchmarks/results/latest.{json,md}
    python benchmarks/run.py --quick    # fewer samples, for a smoke test

It ends with the goals (benchmarks/README.md): each with its measured median and p95, and
whether the median meets it.

Every timing is repeated; medians and p95 are reported, and each is set beside a baseline
measured in the same run on the same machine (shared machines are noisy: ratios travel
better than milliseconds). See benchmarks/README.md for what each number means.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import platform
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from attnwidget import AttentionWidget, attention  # noqa: E402
from attnwidget.export import CHROMIUM_ARGS, chromium_path  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results"


def stats(samples):
    s = sorted(samples)
    return {"median": statistics.median(s), "p95": s[min(len(s) - 1, int(round(0.95 * (len(s) - 1))))], "n": len(s)}


def timeit(fn, repeat):
    fn()  # warm up
    out = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t0) * 1e3)
    return stats(out)


def qkv(heads, n, d, seed=0):
    rng = np.random.default_rng(seed)
    return tuple(rng.normal(size=(heads, n, d)).astype(np.float32) for _ in range(3))


# --- Python -------------------------------------------------------------------------


def bare_attention(q, k, v):
    """The baseline: softmax(QKᵀ/√d)·V in plain numpy, nothing else."""
    s = q @ k.T / np.sqrt(q.shape[1])
    e = np.exp(s - s.max(axis=1, keepdims=True))
    return (e / e.sum(axis=1, keepdims=True)) @ v


def python_benchmarks(repeat):
    q, k, v = (a[0].astype(float) for a in qkv(1, 512, 64))
    out = {}
    out["bare numpy softmax(QKᵀ/√d)·V, n=512 d=64"] = base = timeit(lambda: bare_attention(q, k, v), repeat)

    def core():
        a = attention(q, k, v)
        return a.weights, a.output

    def everything():
        a = attention(q, k, v)
        return a.weights, a.output, a.effective_tokens, a.sense_resolved, a.output_spread

    w = AttentionWidget(q=q, k=k, v=v)
    temps = iter(np.tile(np.linspace(0.5, 2, 50), 1000))

    def widget_recompute():
        w.temperature = next(temps)
        return w.weights, w.output

    for name, fn in [
        ("attention(): weights and output", core),
        ("attention(): every metric too", everything),
        ("widget: set temperature, read weights and output", widget_recompute),
    ]:
        r = timeit(fn, repeat)
        r["ratio"] = r["median"] / base["median"]
        out[name] = r

    q12, k12, v12 = qkv(12, 512, 64)
    base12 = timeit(lambda: [bare_attention(q12[h], k12[h], v12[h]) for h in range(12)], max(5, repeat // 4))
    out["bare numpy, 12 heads, n=512 d=64"] = base12
    build = timeit(lambda: AttentionWidget(q=q12, k=k12, v=v12), max(5, repeat // 2))
    build["ratio"] = build["median"] / base12["median"]
    out["build a widget: 12 heads, n=512 d=64"] = build
    return out


# --- wire ---------------------------------------------------------------------------


class RecordingComm:
    kernel = object()
    comm_id = "bench"

    def __init__(self):
        self.sent = []

    def send(self, data=None, buffers=None, **kwargs):
        self.sent.append((data, buffers or []))

    def on_msg(self, callback):
        pass

    def close(self, *args, **kwargs):
        pass


def message_bytes(data, buffers):
    return len(json.dumps(data, separators=(",", ":")).encode()) + sum(len(memoryview(b).cast("B")) for b in buffers)


def wire_benchmarks():
    from ipywidgets.embed import dependency_state, embed_data
    from ipywidgets.widgets.widget import _remove_buffers

    q, k, v = qkv(12, 512, 64)
    raw = q.nbytes + k.nbytes + v.nbytes
    w = AttentionWidget(q=q, k=k, v=v)
    state, _, buffers = _remove_buffers(w.get_state())
    live = message_bytes(state, buffers)
    # what a notebook saved with widget state stores for this one widget
    saved = len(
        json.dumps(embed_data(views=[w], state=dependency_state(w))["manager_state"], separators=(",", ":")).encode()
    )
    w.comm = RecordingComm()
    w.temperature = 0.5
    ((data, bufs),) = w.comm.sent
    return {
        "raw float32 bytes of q, k, v (12 heads, n=512, d=64)": raw,
        "full state, live (JSON + binary buffers)": {"bytes": live, "ratio": live / raw},
        "full state, saved in a notebook (base64)": {"bytes": saved, "ratio": saved / raw},
        "one temperature change": {"bytes": message_bytes(data, bufs)},
    }


# --- page ---------------------------------------------------------------------------

TIME_CHANGES = """([name, values]) => {
  const a = document.querySelector('.aw-root').attnwidget, out = [];
  for (const x of values) { const t0 = performance.now(); a.model.set(name, x); a.redraw(); \
out.push(performance.now() - t0); }
  return out; }"""
# The baseline in the page: a bare JS softmax over the same n×n scores, nothing drawn.
TIME_BARE_SOFTMAX = """(count) => {
  const a = document.querySelector('.aw-root').attnwidget, s = Float64Array.from(a.numbers().scores);
  const n = Math.round(Math.sqrt(s.length)), out = [];
  for (let r = 0; r < count; r++) {
    const t0 = performance.now(), w = new Float64Array(n * n);
    for (let i = 0; i < n; i++) {
      let m = -Infinity, sum = 0;
      for (let j = 0; j < n; j++) m = Math.max(m, s[i * n + j]);
      for (let j = 0; j < n; j++) sum += (w[i * n + j] = Math.exp((s[i * n + j] - m) / (1 + r / count)));
      for (let j = 0; j < n; j++) w[i * n + j] /= sum;
    }
    out.push(performance.now() - t0);
  }
  return out; }"""


# Main-thread work per change, by Chrome's own task timer (CDP Performance metrics, TaskDuration):
# the change, then two frames (the redraw is batched to the next one), minus the same wait with
# no change. A long input's weights picture comes from a worker: the window lasts until it has
# arrived and been drawn (no canvas marked data-pending), two frames later, so the redraw it
# brings counts too. Between samples the head thumbnails are let finish, so they are not counted.
FRAMES = "new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(done)))"
DRAWN = """new Promise((done) => { const wait = () => (document.querySelector('[data-pending]') ? \
requestAnimationFrame(wait)
                                          : requestAnimationFrame(() => requestAnimationFrame(done))); wait(); })"""


def task_samples(page, changes) -> tuple[list[float], list[float], list[str]]:
    """Chrome's task timer across each change and the two frames after it (ms), the same two frames
    with no change (ms), and the changes the page refused or did not take ("name=value: why")."""
    cdp = page.context.new_cdp_session(page)
    cdp.send("Performance.enable", {"timeDomain": "threadTicks"})
    busy = lambda: next(
        m["value"] for m in cdp.send("Performance.getMetrics")["metrics"] if m["name"] == "TaskDuration"
    )
    settle = lambda: page.wait_for_selector(
        ".aw-heads[data-complete=true], .aw-heads[hidden]", state="attached", timeout=60_000
    )
    root = "document.querySelector('.aw-root').attnwidget"
    work, idle, refused = [], [], []
    for name, value in changes:
        settle()
        page.evaluate(DRAWN)
        t0 = busy()
        page.evaluate(FRAMES)
        idle.append((busy() - t0) * 1000)
        t0 = busy()
        said = page.evaluate(
            f"([n, v]) => {{ try {{ {root}.model.set(n, v); return null; }} catch (e) {{ return String(e); }} }}",
            [name, value],
        )
        page.evaluate(DRAWN)
        work.append((busy() - t0) * 1000)
        if said or page.evaluate(f"(n) => {root}.model.get(n)", name) != value:
            refused.append(f"{name}={value!r}: {said or 'not taken'}")
    cdp.detach()
    return work, idle, refused


def task_ms_per_change(page, changes):
    """The median and p95 of task_samples' work, less the idle frames' median."""
    work, idle, _ = task_samples(page, changes)
    r = stats(work)
    r["idle_median"] = stats(idle)["median"]
    r["median"] -= r["idle_median"]
    r["p95"] -= r["idle_median"]
    return r


def first_paint(page):
    """[firstPaint, renderStart] of the page's widget, ms from navigation start."""
    page.wait_for_function("document.querySelector('.aw-root')?.attnwidget?.firstPaint > 0")
    return page.evaluate(
        "(() => { const a = document.querySelector('.aw-root').attnwidget; return [a.firstPaint, a.renderStart]; })()"
    )


# Set up before the page's own script: performance.now() (ms since navigation start) when the
# page first marks every head thumbnail drawn. The observer's callback runs at the end of the
# task that drew the last thumbnail.
HEADS_COMPLETE = """new MutationObserver((records, observer) => {
  if (records.some((r) => r.target.matches('.aw-heads') && r.target.dataset.complete === 'true')) {
    window.awHeadsComplete = performance.now();
    observer.disconnect();
  } }).observe(document, { subtree: true, attributes: true, attributeFilter: ['data-complete'] });"""


def drag_long_tasks(page, moves):
    """A real mouse drag along the temperature slider, back and forth; the durations (ms) of the
    long tasks (over 50 ms) a PerformanceObserver saw from the drag's start to 300 ms after it."""
    page.evaluate("""() => { window.longTasks = [];
        new PerformanceObserver((l) => l.getEntries().forEach((e) => \
window.longTasks.push(e.duration))).observe({ entryTypes: ['longtask'] }); }""")
    # head thumbnails done (or none: one head)
    page.wait_for_selector(".aw-heads[data-complete=true], .aw-heads[hidden]", state="attached", timeout=120_000)
    page.evaluate(FRAMES)
    page.evaluate("window.longTasks = []")
    box = page.locator(".aw-slider").bounding_box()
    y = box["y"] + box["height"] / 2
    page.mouse.move(box["x"] + 4, y)
    page.mouse.down()
    for i in range(moves):
        page.mouse.move(box["x"] + 4 + (box["width"] - 8) * (i % 30) / 29, y)
        page.wait_for_timeout(16)
    page.mouse.up()
    page.wait_for_timeout(300)
    return page.evaluate("window.longTasks")


def exported(tmp, n, heads, stage="weights", step=None):
    q, k, v = qkv(heads, n, 64, seed=n + heads)
    path = pathlib.Path(tmp) / f"page-{n}-{heads}-{stage}-{step}.html"
    AttentionWidget(q=q, k=k, v=v, stage=stage, tokens=[f"t{i}" for i in range(n)], step=step).to_html(
        path, theme="light"
    )
    return path


def exported_model(tmp, layers, heads, n, d):
    """A whole model's page (its overview over every layer × head), float32 as a real model's arrays are."""
    from types import SimpleNamespace

    rng = np.random.default_rng(layers * heads + n)
    arrays = [tuple(rng.normal(size=(heads, n, d)).astype(np.float32) for _ in range(3)) for _ in range(layers)]
    found = SimpleNamespace(
        tokens=[f"t{i}" for i in range(n)], layers=arrays, causal=False, scale=None, model_name="bench"
    )
    path = pathlib.Path(tmp) / f"model-{layers}x{heads}-{n}-{d}.html"
    AttentionWidget._from_model(found, 0, 0, {}).to_html(path, theme="light")
    return path


def page_benchmarks(samples, moves):
    from playwright.sync_api import sync_playwright

    out = {}
    temps = [float(t) for t in np.exp(np.linspace(np.log(0.15), np.log(4.5), samples))]
    with tempfile.TemporaryDirectory() as tmp, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS)
        out["chromium"] = browser.version

        def open_page(path, init=None):
            page = browser.new_page(viewport={"width": 1280, "height": 1000}, bypass_csp=True)  # lets our probes run
            if init:
                page.add_init_script(init)  # runs before any of the page's own scripts
            page.goto(path.as_uri())
            page.wait_for_selector(".aw-root")
            return page

        for n in (256, 1024):
            page = open_page(exported(tmp, n, 1))
            bare = stats(page.evaluate(TIME_BARE_SOFTMAX, samples))
            t = stats(page.evaluate(TIME_CHANGES, ["temperature", temps]))
            t["ratio"] = t["median"] / bare["median"]
            out[f"bare JS softmax of the scores, n={n}"] = bare
            out[f"temperature change → repainted, n={n}"] = t
            if n == 1024:
                focus = [int(i) for i in np.random.default_rng(1).integers(0, n, samples)]
                f = stats(page.evaluate(TIME_CHANGES, ["focus", focus]))
                f["ratio"] = f["median"] / bare["median"]
                out[f"focus change → repainted, n={n}"] = f
            page.close()

        # every kind of change at 256 tokens × 12 heads, and a temperature step at 1024 tokens
        page = open_page(exported(tmp, 256, 12))
        rng = np.random.default_rng(2)
        cases = {
            "temperature step": [("temperature", t) for t in temps],
            "focus change": [("focus", int(i)) for i in rng.integers(0, 256, samples)],
            "head change": [("head", h % 12) for h in range(1, samples + 1)],
            "stage change": [("stage", ("scores", "weights", "blend", "qk")[i % 4]) for i in range(samples)],
        }
        for what, changes in cases.items():
            out[f"main-thread work per {what}, n=256, 12 heads (goal ≤ 16 ms)"] = task_ms_per_change(page, changes)
        page.close()
        page = open_page(exported(tmp, 1024, 1))
        out["main-thread work per temperature step, n=1024 (goal ≤ 16 ms)"] = task_ms_per_change(
            page, [("temperature", t) for t in temps]
        )
        page.close()

        # generation at n=1024 (one head), from step 512 on: a step forward computes one new row and
        # keeps the rest; the baseline is a temperature step at the same length, which recomputes all
        page = open_page(exported(tmp, 1024, 1, step=512))
        forward = task_ms_per_change(page, [("step", 512 + i) for i in range(1, samples + 1)])
        whole = task_ms_per_change(page, [("temperature", t) for t in temps])
        forward["ratio"] = forward["median"] / whole["median"]
        out["main-thread work per generation step, n=512 → 1024 (ratio: against a full recompute at that length)"] = (
            forward
        )
        out["main-thread work per temperature step while generating, n≈512 (the full recompute)"] = whole
        page.close()

        # a real slider drag at n=512 (12 heads), watching for long tasks
        page = open_page(exported(tmp, 512, 12))
        long_tasks = drag_long_tasks(page, moves)
        out["slider drag, n=512, 12 heads: long tasks over 50 ms"] = {
            "count": len(long_tasks),
            "longest_ms": max(long_tasks, default=0),
        }
        page.close()

        # first paint: from navigation start to the end of the first complete draw
        # (the exported page carries its 4.7 MB of arrays as base64 text inside the HTML, which
        # the browser must parse first; in a notebook they arrive as binary buffers)
        loads = max(3, samples // 6)
        first, own = [], []
        path = exported(tmp, 512, 12)
        for _ in range(loads):
            page = open_page(path)
            a = first_paint(page)
            first.append(a[0])
            own.append(a[0] - a[1])
            page.close()
        out["first paint, n=512, 12 heads (ms from navigation start)"] = stats(first)
        out["first paint, n=512, 12 heads (ms from the widget's script start: decode + draw)"] = stats(own)

        # at 256 tokens × 12 heads: first paint, and all 12 head thumbnails drawn (the moment the
        # page marks .aw-heads[data-complete=true], seen by a MutationObserver set up before the
        # page's own script runs), both in ms from navigation start
        first, thumbs = [], []
        path = exported(tmp, 256, 12)
        for _ in range(max(3, samples // 4)):
            page = open_page(path, init=HEADS_COMPLETE)
            first.append(first_paint(page)[0])
            page.wait_for_selector(".aw-heads[data-complete=true]", state="attached", timeout=60_000)
            thumbs.append(page.evaluate("window.awHeadsComplete"))
            page.close()
        out["first paint, n=256, 12 heads (ms from navigation start)"] = stats(first)
        out["all 12 head thumbnails drawn, n=256 (ms from navigation start)"] = stats(thumbs)

        # a whole model's overview at 512 tokens: MiniLM's shape (6 × 12, d = 32) and BERT-base's
        # (12 × 12, d = 64), every thumbnail drawn, ms from navigation start
        for layers, d in ((6, 32), (12, 64)):
            path, done = exported_model(tmp, layers, 12, 512, d), []
            for _ in range(3):
                page = open_page(path, init=HEADS_COMPLETE)
                page.wait_for_selector(".aw-heads[data-complete=true]", state="attached", timeout=120_000)
                done.append(page.evaluate("window.awHeadsComplete"))
                page.close()
            out[f"overview drawn, {layers} × 12 at n=512, d={d} (ms from navigation start)"] = stats(done)

        # 4096 tokens, one head: first paint, and a real slider drag (stage "weights") watching for long tasks
        first = []
        path = exported(tmp, 4096, 1)
        for _ in range(loads):
            page = open_page(path)
            first.append(first_paint(page)[0])
            page.close()
        out["first paint, n=4096, 1 head (ms from navigation start)"] = stats(first)
        page = open_page(path)
        long_tasks = drag_long_tasks(page, moves)
        out["slider drag, n=4096, 1 head: long tasks over 50 ms"] = {
            "count": len(long_tasks),
            "longest_ms": max(long_tasks, default=0),
        }
        page.close()

        # memory: the JS heap once everything (12 head thumbnails included) is drawn
        page = open_page(exported(tmp, 1024, 12))
        page.wait_for_selector(".aw-heads[data-complete=true]", state="attached", timeout=120_000)
        cdp = page.context.new_cdp_session(page)
        cdp.send("HeapProfiler.collectGarbage")
        heap = cdp.send("Runtime.getHeapUsage")
        # typed arrays keep their numbers outside the JS heap proper: count both
        out["JS heap, n=1024, 12 heads (MB used, with typed-array storage)"] = (
            heap["usedSize"] + heap.get("backingStorageSize", 0)
        ) / 2**20
        out["JS heap detail"] = {k: round(v / 2**20, 1) for k, v in heap.items()}
        page.close()
        browser.close()
    return out


def machine():
    cpu = next(
        (line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")),
        platform.processor(),
    )
    return {
        "cpus": os.cpu_count(),
        "cpu": cpu,
        "python": platform.python_version(),
        "numpy": np.__version__,
        "node": subprocess.run(["node", "--version"], capture_output=True, text=True).stdout.strip(),
    }


def fmt(v):
    if isinstance(v, dict) and "median" in v:
        s = f"median {v['median']:.2f} ms, p95 {v['p95']:.2f} ms ({v['n']} samples)"
        s += f"; ×{v['ratio']:.2f} the baseline" if "ratio" in v else ""
        return s + (f"; an idle two frames' {v['idle_median']:.2f} ms taken off both" if "idle_median" in v else "")
    if isinstance(v, dict) and "bytes" in v:
        return f"{v['bytes']:,} bytes" + (f" (×{v['ratio']:.3f} the raw float32 bytes)" if "ratio" in v else "")
    if isinstance(v, dict):
        return ", ".join(f"{k} {x:.1f}" if isinstance(x, float) else f"{k} {x}" for k, x in v.items())
    return f"{v:,.1f}" if isinstance(v, float) else f"{v:,}" if isinstance(v, int) else str(v)


# The goals (benchmarks/README.md), each read from a measure above: (id, the goal's number there,
# goal, section, measure, limit in ms). The drag's goal is a count: no task over 50 ms.
GOALS = [
    (
        "temperature_256",
        1,
        "temperature step, n=256 × 12 heads: main-thread work ≤ 16 ms",
        "page",
        "main-thread work per temperature step, n=256, 12 heads (goal ≤ 16 ms)",
        16,
    ),
    (
        "focus_256",
        1,
        "focus change, n=256 × 12 heads: main-thread work ≤ 16 ms",
        "page",
        "main-thread work per focus change, n=256, 12 heads (goal ≤ 16 ms)",
        16,
    ),
    (
        "head_256",
        1,
        "head change, n=256 × 12 heads: main-thread work ≤ 16 ms",
        "page",
        "main-thread work per head change, n=256, 12 heads (goal ≤ 16 ms)",
        16,
    ),
    (
        "stage_256",
        1,
        "stage change, n=256 × 12 heads: main-thread work ≤ 16 ms",
        "page",
        "main-thread work per stage change, n=256, 12 heads (goal ≤ 16 ms)",
        16,
    ),
    (
        "temperature_1024",
        2,
        "temperature step, n=1024: main-thread work ≤ 16 ms",
        "page",
        "main-thread work per temperature step, n=1024 (goal ≤ 16 ms)",
        16,
    ),
    (
        "first_paint_256",
        3,
        "first paint, n=256 × 12 heads: ≤ 300 ms from navigation",
        "page",
        "first paint, n=256, 12 heads (ms from navigation start)",
        300,
    ),
    (
        "all_heads_256",
        3,
        "all 12 head thumbnails drawn, n=256: ≤ 1 s from navigation",
        "page",
        "all 12 head thumbnails drawn, n=256 (ms from navigation start)",
        1000,
    ),
    (
        "first_paint_4096",
        4,
        "first paint, n=4096, 1 head: ≤ 1.5 s from navigation",
        "page",
        "first paint, n=4096, 1 head (ms from navigation start)",
        1500,
    ),
    (
        "drag_4096",
        4,
        "slider drag, n=4096, 1 head (stage weights): no task over 50 ms",
        "page",
        "slider drag, n=4096, 1 head: long tasks over 50 ms",
        None,
    ),
    (
        "build_512",
        5,
        "build a widget in Python, n=512 × 12 heads: ≤ 50 ms",
        "python",
        "build a widget: 12 heads, n=512 d=64",
        50,
    ),
    (
        "overview_minilm",
        6,
        "overview of a 6 × 12 model (MiniLM), n=512: ≤ 2 s from navigation",
        "page",
        "overview drawn, 6 × 12 at n=512, d=32 (ms from navigation start)",
        2000,
    ),
    (
        "overview_base",
        6,
        "overview of a 12 × 12 model (d=64), n=512: ≤ 2 s from navigation",
        "page",
        "overview drawn, 12 × 12 at n=512, d=64 (ms from navigation start)",
        2000,
    ),
]


def goals(results):
    """One row per goal: the median and p95 measured, and whether the median meets the goal."""
    rows = []
    for gid, number, goal, section, measure, limit in GOALS:
        v = results[section].get(measure)
        row = {"id": gid, "number": number, "goal": goal, "measure": measure, "limit_ms": limit}
        if v is None:
            row.update(median=None, p95=None, n=None, met=None)
        elif limit is None:  # the drag: a count of long tasks
            row.update(
                median=None, p95=None, n=None, long_tasks=v["count"], longest_ms=v["longest_ms"], met=v["count"] == 0
            )
        else:
            row.update(median=v["median"], p95=v["p95"], n=v["n"], met=v["median"] <= limit)
        rows.append(row)
    return rows


def goals_table(rows):
    lines = ["| # | goal | median | p95 | samples | met? |", "| ---: | --- | ---: | ---: | ---: | --- |"]
    for r in rows:
        if "long_tasks" in r:
            measured = [f"{r['long_tasks']} over 50 ms (longest {r['longest_ms']:.0f} ms)", "–", "one drag"]
        elif r["median"] is None:
            measured = ["not measured", "–", "–"]
        else:
            measured = [f"{r['median']:,.1f} ms", f"{r['p95']:,.1f} ms", str(r["n"])]
        verdict = "–" if r["met"] is None else "met" if r["met"] else "not met"
        lines.append(f"| {r['number']} | {r['goal']} | " + " | ".join(measured) + f" | {verdict} |")
    return lines


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="fewer samples")
    parser.add_argument(
        "--out", default=str(RESULTS / "latest"), help="results path without extension (default: %(default)s)"
    )
    args = parser.parse_args()
    repeat, samples, moves = (10, 10, 30) if args.quick else (40, 30, 60)
    results = {
        "machine": machine(),
        "python": python_benchmarks(repeat),
        "wire": wire_benchmarks(),
        "page": page_benchmarks(samples, moves),
    }
    results["machine"]["chromium"] = results["page"].pop("chromium")
    results["goals"] = goals(results)
    out = pathlib.Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps(results, indent=2) + "\n")
    lines = ["# Latest results", "", f"Machine: {json.dumps(results['machine'])}", ""]
    for section in ("python", "wire", "page"):
        lines += [f"## {section}", "", "| measure | result |", "| --- | --- |"]
        lines += [f"| {name} | {fmt(v)} |" for name, v in results[section].items()]
        lines.append("")
    lines += [
        "## Goals",
        "",
        'Each goal (benchmarks/README.md) with what this run measured; "met" when the median is within it (the drag: '
        "when no task took over 50 ms).",
        "",
    ]
    lines += goals_table(results["goals"]) + [""]
    out.with_suffix(".md").write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
