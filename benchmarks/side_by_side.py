"""The same random attention shown by three tools in headless Chromium: attnwidget's exported
page, bertviz's head_view and CircuitsVis's attention_heads. For each tool and size it reports
the time to first paint and the bytes the browser receives.

    python benchmarks/side_by_side.py            # from the repo root, after the set-up below

Set-up (once):
    npm ci --prefix benchmarks                   # requirejs, d3, jquery and terser (see package.json)
    .venv/bin/pip install bertviz==1.4.1 circuitsvis==1.43.3

bertviz and CircuitsVis load their scripts from CDNs (cdnjs, unpkg). This machine reaches
no CDN, so every request not for the local page server is answered by Playwright request
routing from local copies: the npm packages in benchmarks/node_modules, at the versions the
tools ask for where the npm registry has them, and CircuitsVis's bundle, which that registry
lacks, from its own PyPI wheel. A request with no local copy is aborted and reported, never
dropped quietly. A real reader downloads those scripts too, so they count in the bytes.

Writes benchmarks/results/side_by_side.json and .md, and one screenshot per tool at n=64.
"""

from __future__ import annotations

import argparse
import functools
import gzip
import http.server
import importlib.metadata
import json
import os
import pathlib
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np

HERE = pathlib.Path(__file__).resolve().parent
RESULTS = HERE / "results"
NODE_MODULES = HERE / "node_modules"

TOOLS = ("attnwidget", "bertviz", "circuitsvis")
NS = (16, 64, 256, 512)
HEADS, D, SEED = 12, 64, 0
# A cell whose first load is slow gets fewer loads, to keep the whole run near ten minutes:
# (first load took at least this many seconds, loads in that cell).
FEWER_SAMPLES = ((90, 1), (30, 2))
SCREENSHOT_N = 64
VIEWPORT = {"width": 1100, "height": 900}
CHROMIUM_ARGS = [
    "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]


# ---------------------------------------------------------------------------------------------
# The data and the three pages

def make_data(n: int):
    """q, k, v for 12 heads (random normal in float32, d=64, fixed seed) and the weights attnwidget computes."""
    import attnwidget

    rng = np.random.default_rng(SEED)
    q, k, v = rng.normal(size=(3, HEADS, n, D)).astype(np.float32)  # a real model's numbers (they travel as float32)
    weights = np.stack([attnwidget.attention(q[h], k[h], v[h]).weights for h in range(HEADS)])
    return [f"t{i}" for i in range(n)], q, k, v, weights


def write_pages(n: int, folder: pathlib.Path) -> dict:
    """Each tool's HTML as its Python API gives it for a notebook, one file per tool."""
    import attnwidget
    import torch
    from bertviz import head_view
    from circuitsvis.attention import attention_heads

    tokens, q, k, v, weights = make_data(n)
    paths = {tool: folder / f"{tool}_{n}.html" for tool in TOOLS}
    # attnwidget computes the weights itself in the page, from q, k and v.
    attnwidget.AttentionWidget(tokens=tokens, q=q, k=k, v=v, stage="weights").to_html(paths["attnwidget"], theme="light")
    # bertviz: a tuple with one tensor per layer, (batch, heads, n, n); 'return' gives an
    # IPython HTML object whose .data is what a notebook would display.
    view = head_view((torch.from_numpy(weights)[None],), tokens, html_action="return")
    paths["bertviz"].write_text(view.data, encoding="utf-8")
    # CircuitsVis: str() is the CDN version of the HTML, which a notebook with internet shows
    # (its _repr_html_ first probes the internet, which must not happen here). Its default
    # mask_upper_tri=True greys out the upper triangle; these weights are not causal.
    rendered = attention_heads(attention=weights, tokens=tokens, mask_upper_tri=False)
    paths["circuitsvis"].write_text(str(rendered), encoding="utf-8")
    return paths


# ---------------------------------------------------------------------------------------------
# What the browser fetches: the documents from a local HTTP server, CDN URLs from npm copies

def npm_version(package: str) -> str:
    return json.loads((NODE_MODULES / package / "package.json").read_text())["version"]


def cdn_stand_ins() -> dict:
    """URL -> {body, source, note}: a local copy for every CDN script the tools are known to load."""
    import circuitsvis

    missing = [p for p in ("requirejs", "d3", "jquery", "terser") if not (NODE_MODULES / p / "package.json").exists()]
    if missing:
        sys.exit(f"benchmarks/node_modules lacks {', '.join(missing)}: run `npm ci --prefix benchmarks` first")

    # npm's requirejs ships only the unminified require.js; cdnjs serves a minified one, so
    # minify it the same way (keeping the licence comment) to send what cdnjs sends, give or take.
    terser = [str(NODE_MODULES / ".bin" / "terser"), str(NODE_MODULES / "requirejs" / "require.js"), "-c", "-m", "--comments", "/@license/"]
    require_min = subprocess.run(terser, capture_output=True, check=True).stdout

    # circuitsvis is not on the npm registry reachable here. Its PyPI wheel ships the IIFE
    # bundle built from the same sources and version as the CDN's esm.js (one esbuild bundle
    # each, React included); exporting the two names the page imports makes it an ES module.
    iife = pathlib.Path(circuitsvis.__file__).parent / "dist" / "cdn" / "iife.js"
    esm = iife.read_text(encoding="utf-8").rsplit("//# sourceMappingURL=", 1)[0]
    esm += "\nexport const { render, AttentionHeads } = CircuitsVis;\nexport default CircuitsVis;\n"

    cdnjs = "https://cdnjs.cloudflare.com/ajax/libs"
    return {
        f"{cdnjs}/require.js/2.3.6/require.min.js": {
            "body": require_min, "source": f"npm requirejs@{npm_version('requirejs')} require.js, minified by terser@{npm_version('terser')}",
            "note": "same version"},
        f"{cdnjs}/d3/5.7.0/d3.min.js": {
            "body": (NODE_MODULES / "d3" / "dist" / "d3.min.js").read_bytes(), "source": f"npm d3@{npm_version('d3')} dist/d3.min.js",
            "note": "same version"},
        f"{cdnjs}/jquery/2.0.0/jquery.min.js": {
            "body": (NODE_MODULES / "jquery" / "dist" / "jquery.min.js").read_bytes(), "source": f"npm jquery@{npm_version('jquery')} dist/jquery.min.js",
            "note": "jquery 2.0.0 is not on npm (it jumps from 1.9.1 to 1.11/2.1.0); 2.1.0 is the nearest 2.x"},
        f"https://unpkg.com/circuitsvis@{circuitsvis.__version__}/dist/cdn/esm.js": {
            "body": esm.encode("utf-8"), "source": f"PyPI circuitsvis=={circuitsvis.__version__} dist/cdn/iife.js as an ES module",
            "note": "circuitsvis is not on the npm registry reachable here (404); same version, IIFE build instead of the ESM build"},
    }


class DocumentServer:
    """A plain local HTTP server for the pages: routing a 100 MB page through Playwright would
    time the test harness, not the tool."""

    def __init__(self, folder: pathlib.Path):
        class Handler(http.server.SimpleHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                if self.path == "/favicon.ico":  # asked for by the browser, not by any tool
                    self.send_response(204)
                    self.end_headers()
                    return
                super().do_GET()

        class Server(http.server.ThreadingHTTPServer):
            def handle_error(self, request, client_address):
                # A load stopped at the cap closes its connection mid-response: not an error here.
                if not isinstance(sys.exc_info()[1], ConnectionError):
                    super().handle_error(request, client_address)

        self.httpd = Server(("127.0.0.1", 0), functools.partial(Handler, directory=str(folder)))
        self.base = f"http://127.0.0.1:{self.httpd.server_address[1]}/"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


# ---------------------------------------------------------------------------------------------
# Paint times: conditions per tool, checked on every animation frame from the first one

# Each condition is a JS expression that is true once that much is drawn. "Non-blank": some
# pixel is not transparent black, the state every canvas starts in (the tools paint opaque
# cells). A plain loop over 32-bit pixels keeps the check to about a millisecond per frame, so
# the watching steals little time from the page being watched.
NONBLANK = """((c) => {
    if (!(c.width > 0 && c.height > 0)) return false;
    const px = new Uint32Array(c.getContext('2d').getImageData(0, 0, c.width, c.height).data.buffer);
    for (let i = 0; i < px.length; i++) if (px[i] !== 0) return true;
    return false; })"""
VISIBLE = "((c) => c.offsetWidth > 0)"
# Two moments per load. "first": the tool's first attention matrix or lines are drawn, the
# headline. "all_heads": every head's attention is drawn, since the tools order their work
# differently (attnwidget draws the selected head's matrix first and then fills in the 12 head
# thumbnails; CircuitsVis draws its 12 thumbnails and the zoomed head in one go).
CONDITIONS = {
    "attnwidget": {
        # The visible weights matrix (stage "weights"; other stages' grids sit in hidden panels).
        "first": f"""document.querySelector('.aw-root') &&
            [...document.querySelectorAll('.aw-root canvas.aw-grid')].some((c) => {VISIBLE}(c) && {NONBLANK}(c))""",
        "all_heads": f"""((cs) => cs.length >= {HEADS} && cs.every({NONBLANK}))(
            [...document.querySelectorAll('.aw-root .aw-heads .aw-head canvas')].filter({VISIBLE}))""",
    },
    "bertviz": {
        # head_view appends every line of every head in one synchronous pass, so the first
        # line in #attention means all of them are in the SVG: both moments are the same.
        # (No layout is asked for here: the check must not do the browser's rendering work.)
        "first": "document.querySelector('#vis svg #attention line') !== null",
        "all_heads": "document.querySelector('#vis svg #attention line') !== null",
    },
    "circuitsvis": {
        # A Chart.js canvas per head (thumbnails) plus one for the zoomed head.
        "first": f"""[...document.querySelectorAll('[id^="circuits-vis-"] canvas')].some({NONBLANK})""",
        "all_heads": f"""((cs) => cs.length >= {HEADS + 1} && cs.every({NONBLANK}))(
            [...document.querySelectorAll('[id^="circuits-vis-"] canvas')])""",
    },
}
MOMENTS = ("first", "all_heads")

# Runs before any page script: checks the conditions at the start of every animation frame.
# A condition seen at the start of frame k is in what frame k renders (style, layout, paint),
# so its time is performance.now() (ms since navigation start) at the start of frame k + 1:
# that counts the rendering too, which for an SVG of three million lines takes most of a
# minute, and overshoots by at most one idle frame. Watching from outside after page.goto
# could start late, after a small page has already painted.
# The times reach Python as console messages, not through wait_for_function: that one runs
# its predicate with eval() in the page, which attnwidget's CSP forbids, and its timeout waits
# for a page whose main thread is busy for minutes (CircuitsVis at n=512) to answer first. A
# console message needs nothing from the page, and the wait for it times out on the dot.
MARK = "side-by-side paint:"
WATCH = """(() => {
  const conditions = %s;
  const left = new Map(Object.entries(conditions).map(([name, ready]) => [name, () => { try { return !!ready(); } catch (e) { return false; } }]));
  let seen = [];  // conditions that held at the start of the previous frame
  const tick = () => {
    const now = performance.now();
    for (const name of seen) console.debug(`%s ${name} ${now}`);
    seen = [];
    for (const [name, ready] of left) {
      if (!ready()) break;  // in order: "all_heads" is never reported before "first"
      seen.push(name);
      left.delete(name);
    }
    if (left.size || seen.length) requestAnimationFrame(tick);
  };
  requestAnimationFrame(tick);
})();"""


def watch_script(tool: str) -> str:
    conditions = ", ".join(f"{name}: () => ({CONDITIONS[tool][name]})" for name in MOMENTS)
    return WATCH % ("{" + conditions + "}", MARK)


def load_once(browser, url: str, tool: str, stand_ins: dict, timeout_s: float, screenshot: pathlib.Path | None):
    """One cold load in a fresh context: {first, all_heads (ms, None if not by the cap), requests, unserved, errors}."""
    requests, unserved, errors, times = [], [], [], {}
    context = browser.new_context(viewport=VIEWPORT)
    try:
        def serve(route):
            url = route.request.url
            if url in stand_ins:
                route.fulfill(status=200, body=stand_ins[url]["body"], headers={
                    "content-type": "text/javascript; charset=utf-8",
                    "access-control-allow-origin": "*",  # the CircuitsVis module is loaded with `crossorigin`
                })
            else:
                unserved.append(url)
                route.abort()

        def console(message):
            if message.text.startswith(MARK):
                name, ms = message.text[len(MARK):].split()
                times[name] = float(ms)
            elif message.type == "error":
                errors.append(message.text[:300])

        # Anything not on the local server is a CDN (or something else the page should not need).
        context.route(re.compile(r"^https?://(?!127\.0\.0\.1[:/])"), serve)
        context.add_init_script(watch_script(tool))
        page = context.new_page()
        page.on("request", lambda r: requests.append(r.url))
        page.on("pageerror", lambda e: errors.append(str(e)[:300]))
        page.on("console", console)
        start = time.monotonic()
        error = None
        try:
            last = f"{MARK} {MOMENTS[-1]} "
            with page.expect_console_message(lambda m: m.text.startswith(last), timeout=timeout_s * 1000):
                page.goto(url, wait_until="commit", timeout=timeout_s * 1000)
        except Exception as err:  # the cap, or the renderer giving up
            error = str(err).splitlines()[0][:300]
        wall = time.monotonic() - start
        if screenshot is not None and error is None:
            page.wait_for_timeout(500)  # let anything drawn after the last frame settle
            page.screenshot(path=str(screenshot))
        return {**{name: times.get(name) for name in MOMENTS}, "error": error, "wall_s": wall,
                "requests": requests, "unserved": unserved, "errors": errors}
    finally:
        context.close()


# ---------------------------------------------------------------------------------------------
# Sizes and statistics

@functools.lru_cache(maxsize=None)
def gzip_size(data: bytes) -> int:
    return len(gzip.compress(data, compresslevel=6))


def sizes(requests: list, page_path: pathlib.Path, page_url: str, stand_ins: dict) -> dict:
    """Bytes of the document and of everything else served for it (the local CDN copies).
    gzip sizes are what a server that compresses would put on the wire."""
    rows = []
    for url in dict.fromkeys(requests):  # each URL once, in request order
        if url.startswith(("data:", "blob:")) or url.endswith("/favicon.ico"):  # not sent by the tool
            continue
        if url == page_url:
            body = page_path.read_bytes()
            rows.append({"url": "(document)", "bytes": len(body), "gzip_bytes": gzip_size(body), "served_by": "local HTTP server"})
        elif url in stand_ins:
            body = stand_ins[url]["body"]
            rows.append({"url": url, "bytes": len(body), "gzip_bytes": gzip_size(body), "served_by": stand_ins[url]["source"]})
        else:
            rows.append({"url": url, "bytes": 0, "gzip_bytes": 0, "served_by": "NOT SERVED"})
    return {
        "document_bytes": rows[0]["bytes"] if rows and rows[0]["url"] == "(document)" else None,
        "total_bytes": sum(r["bytes"] for r in rows),
        "total_gzip_bytes": sum(r["gzip_bytes"] for r in rows),
        "requests": rows,
    }


def p95(values):
    # Linear interpolation between order statistics; with 5 samples this sits close to the maximum.
    return float(np.percentile(values, 95)) if values else None


def machine() -> dict:
    cpu = next((line.split(":", 1)[1].strip() for line in pathlib.Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor())
    nproc = subprocess.run(["nproc"], capture_output=True, text=True).stdout.strip()
    packages = {}
    for name in ("attnwidget", "bertviz", "circuitsvis", "torch", "numpy", "playwright", "transformers"):
        try:
            packages[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            packages[name] = None
    npm = {name: npm_version(name) for name in ("requirejs", "d3", "jquery", "terser")}
    return {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "nproc": nproc, "cpu": cpu,
            "python": platform.python_version(), "platform": platform.platform(), "python_packages": packages, "npm_packages": npm}


# ---------------------------------------------------------------------------------------------
# The run

def run(args) -> dict:
    from playwright.sync_api import sync_playwright

    RESULTS.mkdir(parents=True, exist_ok=True)
    stand_ins = cdn_stand_ins()
    cells = {tool: {} for tool in TOOLS}
    began = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="side_by_side_") as tmp, sync_playwright() as p:
        folder = pathlib.Path(tmp)
        server = DocumentServer(folder)
        launch = functools.partial(p.chromium.launch, executable_path=args.chromium, args=CHROMIUM_ARGS)
        browser = launch()
        info = machine()
        info["chromium"] = browser.version
        try:
            for n in args.ns:
                t0 = time.monotonic()
                paths = write_pages(n, folder)
                print(f"n={n}: pages written in {time.monotonic() - t0:.1f} s", flush=True)
                cell = {tool: {"first_ms": [], "all_heads_ms": [], "loads": 0, "timeouts": 0, "wall_s": [], "errors": [],
                               "unserved": [], "sizes": None, "note": ""} for tool in TOOLS}
                active = list(TOOLS)
                for tool in TOOLS:  # a tool that painted nothing by the cap at a smaller n would not now
                    if any(cells[tool][m]["timeouts"] and not cells[tool][m]["first_ms"] for m in cells[tool]):
                        cell[tool]["note"] = "skipped: nothing painted by the cap at a smaller n"
                        active.remove(tool)
                wanted = {tool: args.samples for tool in TOOLS}
                for i in range(args.samples):
                    # Tools take turns within each round (in a rotating order), so slow drifts
                    # in the machine's load fall on all of them alike.
                    order = active[i % len(active):] + active[: i % len(active)] if active else []
                    for tool in order:
                        c = cell[tool]
                        if c["loads"] >= wanted[tool]:
                            continue
                        url = server.base + paths[tool].name
                        shot = RESULTS / f"side_by_side_{tool}_{n}.png" if n == SCREENSHOT_N and not c["first_ms"] else None
                        r = load_once(browser, url, tool, stand_ins, args.timeout, shot)
                        c["loads"] += 1
                        c["wall_s"].append(round(r["wall_s"], 2))
                        c["errors"] += [e for e in r["errors"] if e not in c["errors"]]
                        c["unserved"] += [u for u in r["unserved"] if u not in c["unserved"]]
                        if c["sizes"] is None:
                            c["sizes"] = sizes(r["requests"], paths[tool], url, stand_ins)
                        for name in MOMENTS:
                            if r[name] is not None:
                                c[f"{name}_ms"].append(round(r[name], 1))
                        shown = "  ".join(f"{name} {'-' if r[name] is None else f'{r[name]:,.0f} ms'}" for name in MOMENTS)
                        print(f"  {tool:<11} n={n:<4} load {i + 1}: {shown}", flush=True)
                        if r["error"] is not None:
                            # A closed context leaves a renderer stuck in a long script running
                            # on, taking a core from every load after it; a new browser ends it.
                            browser.close()
                            browser = launch()
                            c["timeouts"] += 1
                            c["errors"].append(r["error"])
                            wanted[tool] = 0  # one load past the cap is the answer for this cell
                            c["note"] = f"not all painted within the {args.timeout:.0f} s cap"
                            print(f"  {tool:<11} n={n:<4} load {i + 1}: stopped at the cap ({r['error'][:70]})", flush=True)
                            continue
                        for seconds, count in FEWER_SAMPLES:
                            if c["loads"] == 1 and r["wall_s"] >= seconds and wanted[tool] > count:
                                wanted[tool] = count
                                c["note"] = f"{count} load{'s' if count > 1 else ''} only: the first took {r['wall_s']:.0f} s"
                                break
                for tool in TOOLS:
                    c = cells[tool][n] = cell[tool]
                    for name in MOMENTS:
                        got = c[f"{name}_ms"]
                        c[f"{name}_median_ms"] = float(statistics.median(got)) if got else None
                        c[f"{name}_p95_ms"] = p95(got)
                for tool in TOOLS:
                    for name in MOMENTS:
                        base, mine = cells["attnwidget"][n][f"{name}_median_ms"], cells[tool][n][f"{name}_median_ms"]
                        cells[tool][n][f"{name}_ratio_to_attnwidget"] = mine / base if base and mine else None
                # The big pages take memory; they are not needed once measured.
                for path in paths.values():
                    path.unlink()
        finally:
            browser.close()
            server.close()
    return {
        "config": {"ns": list(args.ns), "heads": HEADS, "d": D, "seed": SEED, "samples": args.samples,
                   "fewer_samples_after_s": dict(FEWER_SAMPLES), "timeout_s": args.timeout,
                   "viewport": VIEWPORT, "chromium_args": CHROMIUM_ARGS},
        "machine": info,
        "paint_conditions": CONDITIONS,
        "cdn_stand_ins": {url: {"source": s["source"], "note": s["note"], "bytes": len(s["body"])} for url, s in stand_ins.items()},
        "results": {tool: {str(n): c for n, c in cells[tool].items()} for tool in TOOLS},
        "run_seconds": round(time.monotonic() - began, 1),
    }


# ---------------------------------------------------------------------------------------------
# Reporting

def fmt_ms(v):
    return "–" if v is None else f"{v:,.0f}" if v >= 100 else f"{v:.1f}"


def fmt_bytes(v):
    if v is None:
        return "–"
    for unit, size in (("MB", 1e6), ("kB", 1e3)):
        if v >= size:
            return f"{v / size:.1f} {unit}"
    return f"{v} B"


def table(report: dict) -> str:
    lines = [
        "| tool | n | loads | first paint, median ms | p95 | × attnwidget | all heads drawn, median ms | p95 | × attnwidget "
        "| document | total sent | total gzip |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    cap = report["config"]["timeout_s"] * 1000
    for n in report["config"]["ns"]:
        for tool in TOOLS:
            c = report["results"][tool][str(n)]
            sz = c["sizes"] or {}
            loads = "skipped" if c["note"].startswith("skipped") else f"{c['loads']}" + (" (1 at the cap)" if c["timeouts"] else "")
            row = [tool, str(n), loads]
            for name in MOMENTS:
                median, ratio = c[f"{name}_median_ms"], c[f"{name}_ratio_to_attnwidget"]
                shown = [fmt_ms(median), fmt_ms(c[f"{name}_p95_ms"]), "–" if ratio is None else f"{ratio:.2f}"]
                if median is None and c["timeouts"]:  # a lower bound: not painted by the cap
                    base = report["results"]["attnwidget"][str(n)][f"{name}_median_ms"]
                    shown = [f"> {cap:,.0f}", "–", f"> {cap / base:.0f}" if base else "–"]
                row += shown
            row += [fmt_bytes(sz.get("document_bytes")), fmt_bytes(sz.get("total_bytes")), fmt_bytes(sz.get("total_gzip_bytes"))]
            lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def markdown(report: dict) -> str:
    m = report["machine"]
    out = ["# Side by side: attnwidget, bertviz, CircuitsVis", "",
           f"Same random attention ({report['config']['heads']} heads, seed {report['config']['seed']}) in each tool, "
           "cold loads in a fresh headless Chromium context. First paint: ms from navigation start to the first "
           "animation frame where the tool's attention is drawn. Sizes: the document and every script it loads.", "",
           table(report), "",
           "## How it is measured", "",
           "- Each load: a new browser context (empty cache), `page.goto` of the tool's HTML from a local HTTP server, "
           "CDN scripts answered from local copies by Playwright routing. A script added before the page's own checks "
           "each tool's conditions at the start of every animation frame (requestAnimationFrame); once one holds, "
           "`performance.now()` (ms since navigation start) at the start of the next frame, after the browser has "
           "rendered the frame that shows it, goes to Python as a console message. Loads are capped at "
           f"{report['config']['timeout_s']:.0f} s; tools take turns in a rotating order.",
           "- First paint (the headline): attnwidget: `.aw-root` exists and a visible `canvas.aw-grid` (the weights "
           "matrix, stage \"weights\") has a non-blank pixel. bertviz: the head view's SVG has its `#attention` lines. "
           "CircuitsVis: one of its Chart.js canvases has a non-blank pixel.",
           f"- All heads drawn: attnwidget: also all {HEADS} head thumbnails non-blank. bertviz: the same moment as "
           f"first paint (it adds every head's lines in one synchronous pass). CircuitsVis: all {HEADS + 1} canvases "
           "(a thumbnail per head and the zoomed head) non-blank.",
           "- Median and p95 over the loads that got there (p95 by linear interpolation: with 5 loads it is near the "
           "slowest); × attnwidget is the ratio of medians at the same n, in the same run. \"> x\" is a lower bound "
           "from the cap.",
           "- Sizes: the HTML document plus every script it loads, as bodies (not compressed); \"total gzip\" is what a "
           "server compressing at gzip level 6 would send. The document is what each tool's Python API returns "
           "(attnwidget: `to_html`, bertviz: `head_view(..., html_action='return').data`, CircuitsVis: `str(attention_heads(...))`, "
           "its CDN form).", ""]
    notes = [f"- {tool} n={n}: {c['note']}" for tool in TOOLS for n, c in report["results"][tool].items() if c["note"]]
    unserved = sorted({u for tool in TOOLS for c in report["results"][tool].values() for u in c["unserved"]})
    out += ["## Notes", ""] + (notes or [f"- every cell has all its {report['config']['samples']} loads"])
    out += ["- bertviz's document carries the weights twice: head_view.js names its PYTHON_PARAMS marker once more "
            "in a comment, and str.replace fills both.",
            "- CircuitsVis is given `mask_upper_tri=False` (its default greys out the upper triangle, for causal "
            "models); these weights are not causal. The same weights go to bertviz and CircuitsVis (computed by "
            "`attnwidget.attention` per head); attnwidget gets q, k, v and computes them in the page."]
    out += [f"- requests that could not be served: {', '.join(unserved) if unserved else 'none'}", ""]
    out += ["## What each tool requested (at any n)", ""]
    for tool in TOOLS:
        asked = {r["url"]: r["served_by"] for c in report["results"][tool].values() if c["sizes"] for r in c["sizes"]["requests"]}
        out += [f"- {tool}: " + "; ".join(f"{url} ← {by}" for url, by in asked.items())]
    out += ["", "## CDN stand-ins", ""]
    out += [f"- {url} ← {s['source']} ({fmt_bytes(s['bytes'])}; {s['note']})" for url, s in report["cdn_stand_ins"].items()]
    out += ["", "## Machine", "",
            f"- run: {m['date']}", f"- nproc: {m['nproc']}", f"- CPU: {m['cpu']}", f"- Chromium: {m['chromium']}", f"- Python {m['python']} on {m['platform']}",
            "- Python packages: " + ", ".join(f"{k} {v}" for k, v in m["python_packages"].items()),
            "- npm packages (benchmarks/package.json): " + ", ".join(f"{k}@{v}" for k, v in m["npm_packages"].items()),
            f"- whole run: {report['run_seconds'] / 60:.1f} min", ""]
    return "\n".join(out)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ns", type=int, nargs="+", default=list(NS), help="token counts (default: %(default)s)")
    parser.add_argument("--samples", type=int, default=5, help="loads per tool and n (default: %(default)s)")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds before a load counts as a timeout (default: %(default)s)")
    parser.add_argument("--chromium", default=os.environ.get("ATTNWIDGET_CHROMIUM", "/usr/bin/chromium"))
    parser.add_argument("--out", default=str(RESULTS / "side_by_side"), help="results path without extension")
    parser.add_argument("--report-only", action="store_true", help="rewrite the .md from the existing .json, measuring nothing")
    args = parser.parse_args(argv)

    out = pathlib.Path(args.out)
    if args.report_only:
        report = json.loads(out.with_suffix(".json").read_text(encoding="utf-8"))
    else:
        report = run(args)
        out.with_suffix(".json").write_text(json.dumps(report, indent=1), encoding="utf-8")
    md = markdown(report)
    out.with_suffix(".md").write_text(md, encoding="utf-8")
    print()
    print(table(report))
    written = [out.with_suffix(".md")] if args.report_only else [out.with_suffix(".json"), out.with_suffix(".md")]
    print(f"\nwritten: {', '.join(map(str, written))} (the measuring took {report['run_seconds'] / 60:.1f} min)")


if __name__ == "__main__":
    main()
