"""The page for a long text (LongWidget) at 1,024 and 32,768 tokens: main-thread work per focus change,
pan step and zoom step, by Chrome's own task timer, and the token strip's elements at each length.

    python benchmarks/long_page.py          # writes results/long_page.md and .json

An exported page of each length (the head shown's map pooled onto 512² pixels, and the rows of the
positions the focus steps through), in headless Chromium at 1,200 px. Each step is a key press (→ on
the strip: the next token focused, its row drawn and the strip's chips tinted; ↓ on the map: a pan step;
+ on the map: a zoom step), timed from before the press to two frames after it (CDP
Performance.getMetrics, TaskDuration, thread time), less the same two frames with nothing pressed
(the baseline, measured between samples in the same run). Medians and p95 of repeated samples.

Then the same at 32,768 tokens live in JupyterLab, where a zoomed view's region is asked of the kernel:
the main-thread work from a pan step's key press until the region it asks for has arrived and been
drawn (pooled onto the screen's pixels, or each cell exact with its number), two frames after; the
kernel's own time is not main-thread work, the frames' idle work during the wait is counted.
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = pathlib.Path(__file__).parent
sys.path.insert(0, str(HERE))
from run import FRAMES, machine, stats  # noqa: E402

from attnwidget.export import CHROMIUM_ARGS  # noqa: E402
from attnwidget.long import LongAttention, LongLayer  # noqa: E402
from attnwidget.long_widget import LongWidget  # noqa: E402

LENGTHS = (1_024, 32_768)
STEPS = 30  # samples of each kind
FRAME_MS = 16


def page_of(n: int, folder: pathlib.Path) -> pathlib.Path:
    rng = np.random.default_rng(0)
    q = rng.normal(size=(2, n, 32)).astype(np.float32)
    k = rng.normal(size=(1, n, 32)).astype(np.float32)
    tokens = [f"t{i}" for i in range(n)]
    start = n // 2
    w = LongWidget(LongAttention(tokens, {0: LongLayer(q, k, k)}), focus=start)
    path = folder / f"long-{n}.html"
    w.to_html(path, positions=range(start, start + STEPS + 2), map_size=512, max_mb=16, theme="light")
    return path


def measure(browser, path: pathlib.Path) -> dict:
    page = browser.new_page(viewport={"width": 1200, "height": 1400})
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(path.as_uri())
    canvas = page.locator("canvas.aw-long-canvas")
    page.wait_for_function("(c) => c.dataset.shows === 'map'", arg=canvas.element_handle(), timeout=60_000)
    cdp = page.context.new_cdp_session(page)
    cdp.send("Performance.enable", {"timeDomain": "threadTicks"})

    def busy() -> float:
        return next(m["value"] for m in cdp.send("Performance.getMetrics")["metrics"] if m["name"] == "TaskDuration")

    def steps(target, key: str) -> tuple[list[float], list[float]]:
        target.focus()
        work, idle = [], []
        for _ in range(STEPS):
            page.evaluate(FRAMES)
            t0 = busy()
            page.evaluate(FRAMES)
            idle.append((busy() - t0) * 1000)
            t0 = busy()
            page.keyboard.press(key)
            page.evaluate(FRAMES)
            work.append((busy() - t0) * 1000)
        return work, idle

    out = {}
    strip = page.locator(".aw-long-strip")
    out["focus"] = steps(strip, "ArrowRight")
    canvas.focus()
    for _ in range(4):  # zoomed in a little, so that a pan moves the picture
        page.keyboard.press("+")
    out["pan"] = steps(canvas, "ArrowDown")
    page.get_by_role("button", name="whole map").click()
    out["zoom"] = steps(canvas, "+")
    chips = page.locator(".aw-long-chip").count()
    elements = page.evaluate("document.querySelectorAll('.aw-long *').length")
    page.close()
    if errors:
        raise RuntimeError(f"the page at {path.name} failed: {errors}")
    return {
        "steps": {kind: {"work": stats(w), "idle": stats(i)} for kind, (w, i) in out.items()},
        "chips": chips,
        "elements": elements,
    }


LIVE = """
import numpy as np
from attnwidget import LongWidget
rng = np.random.default_rng(0)
q = rng.normal(size=(2, 32_768, 32)).astype(np.float32)
k = rng.normal(size=(1, 32_768, 32)).astype(np.float32)
w = LongWidget(tokens=[f"t{i}" for i in range(32_768)], q=q, k=k, v=k, focus=16_384)
w
"""


def live(browser) -> dict:
    """Region arrivals in a live page: main-thread work per pan step until its region is drawn."""
    sys.path.insert(0, str(HERE.parent / "tests" / "browser"))
    from conftest import Lab, _open_notebook

    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        lab = Lab(pathlib.Path(tmp))
        try:
            page, kernel, errors = _open_notebook(lab, browser, "long.ipynb", [LIVE], viewport=(1200, 1600))
            canvas = page.locator("canvas.aw-long-canvas")
            page.wait_for_function("(c) => c.dataset.shows === 'map'", arg=canvas.element_handle(), timeout=120_000)
            cdp = page.context.new_cdp_session(page)
            cdp.send("Performance.enable", {"timeDomain": "threadTicks"})
            metric = lambda: next(
                m["value"] for m in cdp.send("Performance.getMetrics")["metrics"] if m["name"] == "TaskDuration"
            )
            regions = lambda: int(canvas.evaluate("(c) => c.dataset.regions || 0"))
            page.evaluate(FRAMES)
            t0, wall = metric(), time.perf_counter()
            page.wait_for_timeout(2000)
            idle = (metric() - t0) / (time.perf_counter() - wall)  # main-thread work a second of waiting costs
            canvas.focus()
            for name, presses, shows in (("pooled region", 5, "pooled region"), ("exact cells", 12, "cells")):
                for _ in range(presses):
                    page.keyboard.press("+")
                page.wait_for_function(
                    f"(c) => c.dataset.shows === '{shows}'", arg=canvas.element_handle(), timeout=60_000
                )
                work, waited = [], []
                for i in range(STEPS // 3):
                    before = regions()
                    page.evaluate(FRAMES)
                    t0, wall = metric(), time.perf_counter()
                    page.keyboard.press("ArrowDown" if i % 2 == 0 else "ArrowUp")
                    page.wait_for_function(
                        f"(c) => +(c.dataset.regions || 0) > {before}", arg=canvas.element_handle(), timeout=60_000
                    )
                    page.evaluate(FRAMES)
                    work.append((metric() - t0) * 1000)
                    waited.append((time.perf_counter() - wall) * 1000)
                less = [w - idle * t for w, t in zip(work, waited)]
                out[name] = {
                    "work": stats(work),
                    "less_idle": stats(less),
                    "waited": stats(waited),
                    "idle_per_s": idle * 1000,
                    "view": canvas.evaluate("(c) => c.dataset.view"),
                }
            kernel.close()
            page.context.close()
            if errors:
                raise RuntimeError(f"the live page failed: {errors}")
        finally:
            lab.stop()
    return out


def main() -> None:
    from playwright.sync_api import sync_playwright

    load = [os.getloadavg()[0]]
    results = {
        "machine": machine(),
        "commit": subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=HERE
        ).stdout.strip(),
        "lengths": {},
    }
    with tempfile.TemporaryDirectory() as tmp, sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path=os.environ.get("ATTNWIDGET_CHROMIUM", "/usr/bin/chromium"), args=CHROMIUM_ARGS
        )
        for n in LENGTHS:
            results["lengths"][str(n)] = measure(browser, page_of(n, pathlib.Path(tmp)))
            load.append(os.getloadavg()[0])
        results["live"] = live(browser)
        load.append(os.getloadavg()[0])
        browser.close()
    results["load"] = load
    (HERE / "results" / "long_page.json").write_text(json.dumps(results, indent=1))
    (HERE / "results" / "long_page.md").write_text(report(results))
    print(report(results))


def report(r: dict) -> str:
    rows = []
    for n, x in r["lengths"].items():
        cells = []
        for kind in ("focus", "pan", "zoom"):
            s = x["steps"][kind]
            work = s["work"]["median"] - s["idle"]["median"]
            p95 = s["work"]["p95"] - s["idle"]["median"]
            cells.append(f"{work:.1f} ({p95:.1f}) ×{work / FRAME_MS:.2f}")
        rows.append(f"| {int(n):,} | " + " | ".join(cells) + f" | {x['chips']} | {x['elements']} |")
    goals = all(
        x["steps"][k]["work"]["median"] - x["steps"][k]["idle"]["median"] <= FRAME_MS
        for x in r["lengths"].values()
        for k in ("focus", "pan", "zoom")
    )
    same = len({x["chips"] for x in r["lengths"].values()}) == 1
    return "\n".join(
        [
            "# The page for a long text: work per step",
            "",
            f"Machine: {r['machine']}; commit {r['commit']}; load average {', '.join(f'{x:.2f}' for x in r['load'])}.",
            "An exported LongWidget page (2 heads, the head shown's map pooled onto 512² pixels), headless Chromium at "
            "1,200 px. Main-thread work per step (Chrome's task timer, TaskDuration, thread time) from before the key "
            f"press to two frames after it, less the same two frames with nothing pressed; medians of {STEPS} samples "
            "(p95 in brackets), ms, and × the 16 ms frame.",
            "",
            "| tokens | focus change (→ on the strip), ms | pan step (↓ on the map) | zoom step (+ on the map) "
            "| strip chips in the document | elements in the page |",
            "| ---: | ---: | ---: | ---: | ---: | ---: |",
            *rows,
            "",
            f"Goals (issue 47: each step within a frame, ≤ 16 ms; the same strip elements at 1,024 and 32,768): "
            f"{'met' if goals else 'not met'}; {'met' if same else 'not met'}.",
            "",
            "A focus change here draws the row the page holds; in a live notebook the row (every head, 32,768 tokens) "
            "is computed by the kernel in about 17 ms (results/long.md) and drawn when it arrives, the same drawing as "
            "here.",
            "",
            "Live in JupyterLab at 32,768 tokens: a pan step of a zoomed view, from the key press until the region it "
            "asks for has arrived from the kernel and been drawn, two frames after (main-thread work in all: the key, "
            "the message, the painting, and the idle frames' own work while the kernel computes; then less that idle "
            "work, measured as a rate over two seconds of waiting in the same run), ms:",
            "",
            "| what arrives (the view's rows and columns) | in all, median (p95) | less the idle frames, median (p95) "
            "| × the 16 ms frame | wall time until drawn, median | samples |",
            "| --- | ---: | ---: | ---: | ---: | ---: |",
            *(
                f"| {name} ({x['view']}) | {x['work']['median']:.1f} ({x['work']['p95']:.1f}) | "
                f"{x['less_idle']['median']:.1f} ({x['less_idle']['p95']:.1f}) | "
                f"×{x['less_idle']['median'] / FRAME_MS:.2f} "
                f"| {x['waited']['median']:.0f} | {x['work']['n']} |"
                for name, x in r.get("live", {}).items()
            ),
            "",
            "In all, this counts JupyterLab's own work for each message (its kernel status, the websocket's "
            "decoding) and Chrome's painting of the notebook; a CPU profile of such steps puts the page's own "
            "script (the region's picture, its putImageData and the redraw) near 10 ms of each.",
            "",
        ]
    )


if __name__ == "__main__":
    main()
