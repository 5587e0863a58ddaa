"""Across many texts: the head atlas and the query–key map at research size, on a model shaped
like GPT-2 small (benchmarks/views.py's: 12 layers × 12 heads, width 768, random weights, eager
attention, float32, CPU; nothing downloaded).

    python benchmarks/atlas.py            # writes benchmarks/results/atlas.{json,md} (a few minutes)
    python benchmarks/atlas.py --quick    # fewer texts and samples

Measured, each a median of repeated samples (after a warm-up call), beside a baseline in the same run:

- ``w.head_scores()`` over 25, 50 and 100 texts of 128 tokens (sink, previous, self, duplicate,
  entropy over the texts, and induction on the model's own run of repeated random tokens, read
  once per widget, as its first call does). Baseline: the model's own forward pass over the same
  texts, one at a time (what reading them costs the model).
- the memory: the peak of what head_scores() allocates beyond what the widget holds
  (tracemalloc), and what the widget holds of its texts (their q, k and v), at each count: the
  texts read first while they fit ``sources.HOLD`` (1 GB), and the three read last;
- ``w.query_key_map()`` at 100 texts × 64 tokens (12,800 points), and in the exported page: the
  main-thread time of drawing the map (a change of its colouring, measured around the event),
  and of one hover (the pointer's move to a point, the tooltip written) over 20 points.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys
import tempfile
import time
import tracemalloc

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "benchmarks"))

from run import CHROMIUM_ARGS, chromium_path, machine, stats  # noqa: E402
from views import build_model, build_tokenizer, source, text  # noqa: E402

from attnwidget import AttentionWidget  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results"


def timed(fn, repeat: int) -> dict:
    fn()  # warm up (the induction texts are read here, once per widget)
    out = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return stats(out)


def held_bytes(w) -> tuple[int, int]:
    """What the widget holds of its texts' q, k and v (the texts read and not let go of), and how many texts that is."""
    held = [f for f in w._sources.texts if f._found is not None]  # (LazyText: reading .layers would read the text)
    return sum(a.nbytes for f in held for layer in f.layers for a in layer), len(held)


def model_pass(model, tokenizer, texts):
    import torch

    with torch.no_grad():
        for t in texts:
            model(**tokenizer(t, return_tensors="pt"))


def scores(model, tokenizer, count: int, n: int, repeat: int) -> dict:
    texts = [text(n, seed=i) for i in range(count)]
    t0 = time.perf_counter()
    w = AttentionWidget.from_transformers(model, tokenizer, texts)
    made = time.perf_counter() - t0
    first_t0 = time.perf_counter()
    w.head_scores()  # the first call: the induction texts read too
    first = time.perf_counter() - first_t0
    tracemalloc.start()
    w.head_scores()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    out = {
        "texts": count,
        "tokens": n,
        "made_s": made,
        "first_call_s": first,
        "head_scores_s": timed(w.head_scores, repeat),
        "model_pass_s": timed(lambda: model_pass(model, tokenizer, texts), repeat),
        "peak_mb": peak / 1e6,
    }
    held, count = held_bytes(w)
    out["held_mb"], out["held_texts"] = held / 1e6, count
    out["ratio"] = out["head_scores_s"]["median"] / out["model_pass_s"]["median"]
    w.close()
    return out


def page(model, tokenizer, count: int, n: int, repeat: int) -> dict:
    from playwright.sync_api import sync_playwright

    w = AttentionWidget.from_transformers(model, tokenizer, [text(n, seed=i) for i in range(count)], qk_map=True)
    t0 = time.perf_counter()
    w.query_key_map()  # the first: every text read (and kept while they fit sources.HOLD)
    first = time.perf_counter() - t0
    python = timed(lambda: w.query_key_map(head=int(np.random.default_rng().integers(12))), repeat)
    folder = pathlib.Path(tempfile.mkdtemp())
    w.to_html(folder / "map.html")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS)
        tab = browser.new_page(viewport={"width": 1200, "height": 1000})
        tab.goto((folder / "map.html").as_uri())
        tab.wait_for_selector(".aw-qk[data-points]", timeout=60_000)
        points = int(tab.locator(".aw-qk").get_attribute("data-points"))
        draws = tab.evaluate(
            """(repeat) => { const s = document.querySelector('.aw-qk-colour'), out = [];
            for (let i = 0; i < repeat * 2; i++) { s.value = i % 2 ? 'position' : 'token';
              const t0 = performance.now(); s.dispatchEvent(new Event('change')); out.push(performance.now() - t0); }
            return out; }""",
            repeat,
        )
        hovers = tab.evaluate(
            """(count) => { const fig = document.querySelector('.aw-qk'), c = fig.querySelector('canvas'),
              r = c.getBoundingClientRect(), n = Number(fig.dataset.points), out = [];
            for (let k = 0; k < 20; k++) { const [x, y] = fig.pointAt(Math.floor((k * n) / 20));
              const t0 = performance.now();
              c.dispatchEvent(new MouseEvent('mousemove', {clientX: r.left + x, clientY: r.top + y, bubbles: true}));
              out.push(performance.now() - t0); }
            return out; }""",
            20,
        )
        browser.close()
    return {
        "texts": count,
        "tokens": n,
        "points": points,
        "first_s": first,
        "python_s": python,
        "draw_ms": stats(draws),
        "hover_ms": stats(hovers),
    }


def markdown(report: dict) -> str:
    lines = [
        "# Across many texts: head scores and the query–key map",
        "",
        f"Machine: {report['machine']['cpus']} CPUs, {report['machine']['cpu']}; commit {report['source']['commit']}"
        f"{' (src changed)' if report['source']['src_changed'] else ''}.",
        "GPT-2 small's shape (12 layers × 12 heads, width 768), random weights, float32, CPU.",
        "",
        "| texts × tokens | head_scores() median (p95) s | model's own pass over the texts, s | ratio | first call s"
        " | peak beyond the widget MB | the widget holds: texts, their q, k, v MB |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in report["scores"]:
        h, m = r["head_scores_s"], r["model_pass_s"]
        lines.append(
            f"| {r['texts']} × {r['tokens']} | {h['median']:.2f} ({h['p95']:.2f}) | {m['median']:.2f} | "
            f"×{r['ratio']:.2f} | {r['first_call_s']:.2f} | {r['peak_mb']:.1f} | "
            f"{r['held_texts']}, {r['held_mb']:.0f} |"
        )
    p = report["page"]
    lines += [
        "",
        f"Query–key map, {p['texts']} texts × {p['tokens']} tokens ({p['points']:,} points):",
        "",
        "| measure | median | p95 | samples |",
        "| --- | ---: | ---: | ---: |",
        f"| query_key_map(), first call (every text read), s | {p['first_s']:.2f} | | 1 |",
        f"| query_key_map() of another head, s | {p['python_s']['median']:.3f} | {p['python_s']['p95']:.3f} | "
        f"{p['python_s']['n']} |",
        f"| the page draws the map (main thread), ms | {p['draw_ms']['median']:.1f} | {p['draw_ms']['p95']:.1f} | "
        f"{p['draw_ms']['n']} |",
        f"| one hover, ms | {p['hover_ms']['median']:.2f} | {p['hover_ms']['p95']:.2f} | {p['hover_ms']['n']} |",
        "",
    ]
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    import torch

    torch.set_num_threads(2)
    model = build_model()
    tokenizer = build_tokenizer(tempfile.mkdtemp())
    counts, repeat = ((5, 10), 1) if args.quick else ((25, 50, 100), 3)
    report = {"machine": machine(), "source": source(), "scores": [], "page": None}
    for count in counts:
        report["scores"].append(scores(model, tokenizer, count, 128, repeat))
        print(report["scores"][-1], flush=True)
    report["page"] = page(model, tokenizer, 10 if args.quick else 100, 64, 3 if args.quick else 5)
    print(report["page"], flush=True)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "atlas.json").write_text(json.dumps(report, indent=1))
    (RESULTS / "atlas.md").write_text(markdown(report))
    print(markdown(report))


if __name__ == "__main__":
    main()
