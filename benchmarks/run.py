"""attnwidget's speed, size and memory, measured against baselines in the same run.

    python benchmarks/run.py            # everything below; writes benchmarks/results/latest.{json,md}
    python benchmarks/run.py --quick    # fewer samples, for a smoke test

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

    for name, fn in [("attention(): weights and output", core), ("attention(): every metric too", everything),
                     ("widget: set temperature, read weights and output", widget_recompute)]:
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
    saved = len(json.dumps(embed_data(views=[w], state=dependency_state(w))["manager_state"], separators=(",", ":")).encode())
    w.comm = RecordingComm()
    w.temperature = 0.5
    (data, bufs), = w.comm.sent
    return {
        "raw float32 bytes of q, k, v (12 heads, n=512, d=64)": raw,
        "full state, live (JSON + binary buffers)": {"bytes": live, "ratio": live / raw},
        "full state, saved in a notebook (base64)": {"bytes": saved, "ratio": saved / raw},
        "one temperature change": {"bytes": message_bytes(data, bufs)},
    }


# --- page ---------------------------------------------------------------------------

TIME_CHANGES = """([name, values]) => {
  const a = document.querySelector('.aw-root').attnwidget, out = [];
  for (const x of values) { const t0 = performance.now(); a.model.set(name, x); a.redraw(); out.push(performance.now() - t0); }
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
# no change. Between samples the head thumbnails are let finish, so they are not counted.
FRAMES = "new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(done)))"


def task_ms_per_change(page, changes):
    cdp = page.context.new_cdp_session(page)
    cdp.send("Performance.enable", {"timeDomain": "threadTicks"})
    busy = lambda: next(m["value"] for m in cdp.send("Performance.getMetrics")["metrics"] if m["name"] == "TaskDuration")  # noqa: E731
    settle = lambda: page.wait_for_selector(".aw-heads[data-complete=true], .aw-heads[hidden]", state="attached", timeout=60_000)  # noqa: E731
    work, idle = [], []
    for name, value in changes:
        settle()
        t0 = busy()
        page.evaluate(FRAMES)
        idle.append((busy() - t0) * 1000)
        t0 = busy()
        page.evaluate("([n, v]) => document.querySelector('.aw-root').attnwidget.model.set(n, v)", [name, value])
        page.evaluate(FRAMES)
        work.append((busy() - t0) * 1000)
    r = stats(work)
    r["idle_median"] = stats(idle)["median"]
    r["median"] -= r["idle_median"]
    return r


def exported(tmp, n, heads, stage="weights"):
    q, k, v = qkv(heads, n, 64, seed=n + heads)
    path = pathlib.Path(tmp) / f"page-{n}-{heads}-{stage}.html"
    AttentionWidget(q=q, k=k, v=v, stage=stage, tokens=[f"t{i}" for i in range(n)]).to_html(path, theme="light")
    return path


def page_benchmarks(samples):
    from playwright.sync_api import sync_playwright

    out = {}
    temps = [float(t) for t in np.exp(np.linspace(np.log(0.15), np.log(4.5), samples))]
    with tempfile.TemporaryDirectory() as tmp, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS)
        out["chromium"] = browser.version

        def open_page(path):
            page = browser.new_page(viewport={"width": 1280, "height": 1000}, bypass_csp=True)  # lets our probes run
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
        out["main-thread work per temperature step, n=1024 (goal ≤ 16 ms)"] = task_ms_per_change(page, [("temperature", t) for t in temps])
        page.close()

        # a real slider drag at n=512 (12 heads), watching for long tasks
        page = open_page(exported(tmp, 512, 12))
        page.evaluate("""() => { window.longTasks = [];
            new PerformanceObserver((l) => l.getEntries().forEach((e) => window.longTasks.push(e.duration))).observe({ entryTypes: ['longtask'] }); }""")
        page.wait_for_selector(".aw-heads[data-complete=true]", state="attached", timeout=60_000)  # thumbnails done
        page.evaluate("window.longTasks = []")
        box = page.locator(".aw-slider").bounding_box()
        y = box["y"] + box["height"] / 2
        page.mouse.move(box["x"] + 4, y)
        page.mouse.down()
        for i in range(60):
            page.mouse.move(box["x"] + 4 + (box["width"] - 8) * (i % 30) / 29, y)
            page.wait_for_timeout(16)
        page.mouse.up()
        page.wait_for_timeout(300)
        long_tasks = page.evaluate("window.longTasks")
        out["slider drag, n=512, 12 heads: long tasks over 50 ms"] = {"count": len(long_tasks), "longest_ms": max(long_tasks, default=0)}
        page.close()

        # first paint: from navigation start to the end of the first complete draw
        # (the exported page carries its 4.7 MB of arrays as base64 text inside the HTML, which
        # the browser must parse first; in a notebook they arrive as binary buffers)
        first, own = [], []
        path = exported(tmp, 512, 12)
        for _ in range(max(3, samples // 6)):
            page = open_page(path)
            a = page.evaluate("(() => { const a = document.querySelector('.aw-root').attnwidget; return [a.firstPaint, a.renderStart]; })()")
            first.append(a[0])
            own.append(a[0] - a[1])
            page.close()
        out["first paint, n=512, 12 heads (ms from navigation start)"] = stats(first)
        out["first paint, n=512, 12 heads (ms from the widget's script start: decode + draw)"] = stats(own)

        # memory: the JS heap once everything (12 head thumbnails included) is drawn
        page = open_page(exported(tmp, 1024, 12))
        page.wait_for_selector(".aw-heads[data-complete=true]", state="attached", timeout=120_000)
        cdp = page.context.new_cdp_session(page)
        cdp.send("HeapProfiler.collectGarbage")
        heap = cdp.send("Runtime.getHeapUsage")
        # typed arrays keep their numbers outside the JS heap proper: count both
        out["JS heap, n=1024, 12 heads (MB used, with typed-array storage)"] = (heap["usedSize"] + heap.get("backingStorageSize", 0)) / 2**20
        out["JS heap detail"] = {k: round(v / 2**20, 1) for k, v in heap.items()}
        page.close()
        browser.close()
    return out


def machine():
    cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")), platform.processor())
    return {"cpus": os.cpu_count(), "cpu": cpu, "python": platform.python_version(), "numpy": np.__version__,
            "node": subprocess.run(["node", "--version"], capture_output=True, text=True).stdout.strip()}


def fmt(v):
    if isinstance(v, dict) and "median" in v:
        s = f"median {v['median']:.2f} ms, p95 {v['p95']:.2f} ms ({v['n']} samples)"
        s += f"; ×{v['ratio']:.2f} the baseline" if "ratio" in v else ""
        return s + (f"; an idle two frames' {v['idle_median']:.2f} ms taken off the median" if "idle_median" in v else "")
    if isinstance(v, dict) and "bytes" in v:
        return f"{v['bytes']:,} bytes" + (f" (×{v['ratio']:.3f} the raw float32 bytes)" if "ratio" in v else "")
    if isinstance(v, dict):
        return ", ".join(f"{k} {x:.1f}" if isinstance(x, float) else f"{k} {x}" for k, x in v.items())
    return f"{v:,.1f}" if isinstance(v, float) else f"{v:,}" if isinstance(v, int) else str(v)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="fewer samples")
    args = parser.parse_args()
    repeat, samples = (10, 10) if args.quick else (40, 30)
    results = {"machine": machine(), "python": python_benchmarks(repeat), "wire": wire_benchmarks(), "page": page_benchmarks(samples)}
    results["machine"]["chromium"] = results["page"].pop("chromium")
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "latest.json").write_text(json.dumps(results, indent=2) + "\n")
    lines = ["# Latest results", "", f"Machine: {json.dumps(results['machine'])}", ""]
    for section in ("python", "wire", "page"):
        lines += [f"## {section}", "", "| measure | result |", "| --- | --- |"]
        lines += [f"| {name} | {fmt(v)} |" for name, v in results[section].items()]
        lines.append("")
    (RESULTS / "latest.md").write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
