"""The same random attention shown by four tools in headless Chromium: attnwidget's exported
page, bertviz's head_view, CircuitsVis's attention_heads and Inspectus's attention. For each tool
and size it reports the time to first paint and the bytes the browser receives, beside two
floors loaded in the same rounds: attnwidget's exported page of a one-token, one-head widget
(the same bundle, next to nothing to draw) and the same document with no script at all (a
static picture in place of the widget, its paint read the same way).

    python benchmarks/side_by_side.py            # from the repo root, after the set-up below
    python benchmarks/side_by_side.py --quick    # a smoke test: small n, few loads and changes

At n = 256 it also measures the main-thread work per change, with real mouse events, for the
moments of benchmarks/run.py's goals (a temperature step, a focus, head and stage change), and
sets these and the paint times beside run.py's own figures from results/latest.json (run.py
runs first in `make bench`). bertviz and CircuitsVis have no temperature and no stages, and
CircuitsVis's attention_heads no token to focus: those are reported as "no such control".

Set-up (once):
    npm ci --prefix benchmarks                   # requirejs, d3, jquery and terser (see package.json)
    .venv/bin/pip install bertviz==1.4.1 circuitsvis==1.43.3 inspectus==0.2.0

bertviz and CircuitsVis load their scripts from CDNs (cdnjs, unpkg). This machine reaches
no CDN, so every request not for the local page server is answered by Playwright request
routing from local copies: the npm packages in benchmarks/node_modules, at the versions the
tools ask for where the npm registry has them, and CircuitsVis's bundle, which that registry
lacks, from its own PyPI wheel. A request with no local copy is aborted and reported, never
dropped quietly. A real reader downloads those scripts too, so they count in the bytes.
Inspectus inlines its own script and style in the HTML it displays, and loads nothing.

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

TOOLS = ("attnwidget", "bertviz", "circuitsvis", "inspectus")
# Loaded in every round beside the tools, at every n (they do not depend on it): the floor
# under attnwidget's page (its one-token, one-head page) and the floor under any page (no script).
FLOORS = ("one_token", "no_script")
PAGES = TOOLS + FLOORS
NS = (16, 64, 256, 512)
HEADS, D, SEED = 12, 64, 0
# A cell whose first load is slow gets fewer loads, to keep the whole run near ten minutes:
# (first load took at least this many seconds, loads in that cell).
FEWER_SAMPLES = ((90, 1), (30, 2))
SCREENSHOT_N = 64
# --quick: a smoke test of every part, in under a minute
QUICK = {"ns": [16, 64], "samples": 3, "change_n": 64, "changes": 4, "change_budget": 10.0}
VIEWPORT = {"width": 1100, "height": 900}
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
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


def inspectus_html(weights, tokens) -> str:
    """Inspectus's attention view as a notebook shows it: inspectus.attention() displays two HTML
    outputs (its inline script and style, then the chart's element and call), caught here and
    written into one document. weights: layers × heads × n × n (here 1 × 12)."""
    import inspectus
    import IPython.display

    shown = []
    display = IPython.display.display
    IPython.display.display = lambda *objects, **_: shown.extend(objects)
    try:
        inspectus.attention(weights, tokens)
    finally:
        IPython.display.display = display
    body = "".join(o.data for o in shown)
    head = '<!doctype html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n<title>Attention</title>\n</head>'
    return f"{head}\n<body>\n{body}\n</body>\n</html>\n"


def write_floors(folder: pathlib.Path) -> dict:
    """The two floor pages: attnwidget's exported page of one token and one head (the whole
    bundle, the same document around it), and that document with its scripts taken out and a
    small static picture (a PNG in a data: URL) where the widget would be."""
    import base64
    import struct
    import zlib

    import attnwidget

    paths = {name: folder / f"{name}.html" for name in FLOORS}
    q, k, v = np.random.default_rng(SEED).normal(size=(3, 1, 1, D)).astype(np.float32)
    attnwidget.AttentionWidget(tokens=["t0"], q=q, k=k, v=v, stage="weights").to_html(paths["one_token"], theme="light")
    page = paths["one_token"].read_text(encoding="utf-8")

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    side = 24  # one cell of the one-token page's grid, about
    pixels = zlib.compress(b"".join(b"\x00" + bytes((49, 130, 189)) * side for _ in range(side)))
    png = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", side, side, 8, 2, 0, 0, 0))
    png += chunk(b"IDAT", pixels) + chunk(b"IEND", b"")
    picture = (
        f'<img class="aw-floor" alt="" width="{side}" height="{side}" '
        f'src="data:image/png;base64,{base64.b64encode(png).decode()}">'
    )
    static = re.sub(r"<script[\s\S]*?</script>\n?", "", page)
    static = static.replace('<div id="attnwidget"></div>', f'<div id="attnwidget">{picture}</div>')
    if "<script" in static or picture not in static:
        raise RuntimeError("the one-token page is not in the form write_floors expects: update it")
    paths["no_script"].write_text(static, encoding="utf-8")
    return paths


def write_pages(n: int, folder: pathlib.Path, tools=TOOLS) -> dict:
    """Each tool's HTML as its Python API gives it for a notebook, one file per tool."""
    import attnwidget

    tokens, q, k, v, weights = make_data(n)
    paths = {tool: folder / f"{tool}_{n}.html" for tool in tools}
    # attnwidget computes the weights itself in the page, from q, k and v.
    attnwidget.AttentionWidget(tokens=tokens, q=q, k=k, v=v, stage="weights").to_html(
        paths["attnwidget"], theme="light"
    )
    if "bertviz" in tools:
        write_bertviz(paths["bertviz"], weights, tokens)
    if "circuitsvis" in tools:
        write_circuitsvis(paths["circuitsvis"], weights, tokens)
    if "inspectus" in tools:
        # layers × heads × n × n, one layer of 12 heads (its head row picks the head shown)
        paths["inspectus"].write_text(inspectus_html(weights[None], tokens), encoding="utf-8")
    return paths


def write_bertviz(path: pathlib.Path, weights, tokens) -> None:
    import torch
    from bertviz import head_view

    # bertviz: a tuple with one tensor per layer, (batch, heads, n, n); 'return' gives an
    # IPython HTML object whose .data is what a notebook would display.
    view = head_view((torch.from_numpy(weights)[None],), tokens, html_action="return")
    path.write_text(view.data, encoding="utf-8")


def write_circuitsvis(path: pathlib.Path, weights, tokens) -> None:
    from circuitsvis.attention import attention_heads

    # CircuitsVis: str() is the CDN version of the HTML, which a notebook with internet shows
    # (its _repr_html_ first probes the internet, which must not happen here). Its default
    # mask_upper_tri=True greys out the upper triangle; these weights are not causal.
    rendered = attention_heads(attention=weights, tokens=tokens, mask_upper_tri=False)
    path.write_text(str(rendered), encoding="utf-8")


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
    terser = [
        str(NODE_MODULES / ".bin" / "terser"),
        str(NODE_MODULES / "requirejs" / "require.js"),
        "-c",
        "-m",
        "--comments",
        "/@license/",
    ]
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
            "body": require_min,
            "source": (
                f"npm requirejs@{npm_version('requirejs')} require.js, minified by terser@{npm_version('terser')}"
            ),
            "note": "same version",
        },
        f"{cdnjs}/d3/5.7.0/d3.min.js": {
            "body": (NODE_MODULES / "d3" / "dist" / "d3.min.js").read_bytes(),
            "source": f"npm d3@{npm_version('d3')} dist/d3.min.js",
            "note": "same version",
        },
        f"{cdnjs}/jquery/2.0.0/jquery.min.js": {
            "body": (NODE_MODULES / "jquery" / "dist" / "jquery.min.js").read_bytes(),
            "source": f"npm jquery@{npm_version('jquery')} dist/jquery.min.js",
            "note": "jquery 2.0.0 is not on npm (it jumps from 1.9.1 to 1.11/2.1.0); 2.1.0 is the nearest 2.x",
        },
        f"https://unpkg.com/circuitsvis@{circuitsvis.__version__}/dist/cdn/esm.js": {
            "body": esm.encode("utf-8"),
            "source": f"PyPI circuitsvis=={circuitsvis.__version__} dist/cdn/iife.js as an ES module",
            "note": (
                "circuitsvis is not on the npm registry reachable here (404); same version, IIFE build instead of the "
                "ESM build"
            ),
        },
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
        # Each head's thumbnail is an <img> of a bitmap: loaded, with pixels.
        "all_heads": f"""((is) => is.length >= {HEADS} && is.every((i) => i.complete && i.naturalWidth > 0))(
            [...document.querySelectorAll('.aw-root .aw-heads .aw-head img.aw-thumb')].filter({VISIBLE}))""",
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
# Inspectus draws the head selected (the sum of those selected) as an SVG rect per cell, appended
# in one synchronous pass with its token and head rows: the first cell means the whole view.
CONDITIONS["inspectus"] = {
    "first": "document.querySelector('.attention-visualization svg.matrix rect.cell') !== null",
    "all_heads": "document.querySelector('.attention-visualization svg.matrix rect.cell') !== null",
}
# The floors: one head, so no thumbnails (the one-token page's first paint is its whole page);
# the static page's picture is painted once it is decoded and laid out.
CONDITIONS["one_token"] = {"first": CONDITIONS["attnwidget"]["first"], "all_heads": CONDITIONS["attnwidget"]["first"]}
STATIC = "((i) => !!i && i.complete && i.naturalWidth > 0 && i.offsetWidth > 0)(document.querySelector('img.aw-floor'))"
CONDITIONS["no_script"] = {"first": STATIC, "all_heads": STATIC}
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
  const left = new Map(Object.entries(conditions).map(([name, ready]) => [name, () => { try { return !!ready(); \
} catch (e) { return false; } }]));
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


def load_once(
    browser, url: str, tool: str, stand_ins: dict, timeout_s: float, screenshot: pathlib.Path | None, then=None
):
    """One cold load in a fresh context: {first, all_heads (ms, None if not by the cap), requests, unserved, errors}.
    then(page), when given, runs on the loaded page (once everything is drawn) before the context
    closes; its answer, or its error, is the result's "then"."""
    requests, unserved, errors, times = [], [], [], {}
    context = browser.new_context(viewport=VIEWPORT)
    try:

        def serve(route):
            url = route.request.url
            if url in stand_ins:
                route.fulfill(
                    status=200,
                    body=stand_ins[url]["body"],
                    headers={
                        "content-type": "text/javascript; charset=utf-8",
                        "access-control-allow-origin": "*",  # the CircuitsVis module is loaded with `crossorigin`
                    },
                )
            else:
                unserved.append(url)
                route.abort()

        def console(message):
            if message.text.startswith(MARK):
                name, ms = message.text[len(MARK) :].split()
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
        after = None
        if then is not None:
            if error is not None:
                after = {"error": "the page was not drawn within the cap"}
            else:
                try:
                    after = then(page)
                except Exception as err:
                    after = {"error": str(err).splitlines()[0][:300]}
        return {
            **{name: times.get(name) for name in MOMENTS},
            "error": error,
            "wall_s": wall,
            "requests": requests,
            "unserved": unserved,
            "errors": errors,
            "then": after,
        }
    finally:
        context.close()


# ---------------------------------------------------------------------------------------------
# Main-thread work per change: the moments the tools share, driven by real mouse events

# The same window as benchmarks/run.py's task_ms_per_change: Chrome's own task timer (CDP
# Performance.getMetrics, TaskDuration, in thread time) read before the mouse event and after the
# two frames that follow it, minus the same two frames with no change before it. The mouse is
# first put on the control (and the control scrolled into view) outside the window, so the
# window holds the change alone: a click (button down and up) or, for a control that answers
# hovering, the move onto it. Work the page still does after those two frames is counted too,
# apart ("later"): frame pairs are read until one costs no more than 1.5 × idle + 1 ms.
FRAMES = "new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(done)))"
CHANGES = ("temperature step", "focus change", "head change", "stage change")
# What each change is in each tool; None: the tool has no such control.
HOW = {
    "attnwidget": {
        "temperature step": "click on the temperature slider (a new point each time)",
        "focus change": "click a token in the token strip",
        "head change": "click a head thumbnail",
        "stage change": "click a stage button (Scores, Weights, Blend, Query · Key in turn)",
    },
    "bertviz": {
        "temperature step": None,
        "focus change": "hover a token in the left column (its lines and the colour boxes follow)",
        "head change": "click a head's colour box at the top (it toggles that head: off, then on again)",
        "stage change": None,
    },
    "circuitsvis": {
        "temperature step": None,
        "focus change": None,  # attention_heads has no tokens to hover; its zoomed pattern has a tooltip per cell
        "head change": "hover a head thumbnail (the zoomed pattern shows that head)",
        "stage change": None,
    },
    "inspectus": {
        "temperature step": None,
        "focus change": "click a query token (its row is selected and the other rows fade)",
        "head change": "click a head's box in the Head row (the matrix shows the heads selected)",
        "stage change": None,
    },
}
MIN_CHANGES = 3  # a moment stops early, past its time budget, only once it has this many


def work_per_change(page, steps, settle, budget_s: float) -> dict:
    """steps: [(prepare, act)]. Main-thread ms per act (see FRAMES above), until the steps run
    out or, past MIN_CHANGES, budget_s seconds have gone."""
    cdp = page.context.new_cdp_session(page)
    cdp.send("Performance.enable", {"timeDomain": "threadTicks"})

    def busy():
        return (
            next(m["value"] for m in cdp.send("Performance.getMetrics")["metrics"] if m["name"] == "TaskDuration")
            * 1000
        )

    work, idle, later = [], [], []
    began = time.monotonic()
    for prepare, act in steps:
        if len(work) >= MIN_CHANGES and time.monotonic() - began > budget_s:
            break
        if settle:
            settle()
        prepare()
        page.evaluate(FRAMES)
        t0 = busy()
        page.evaluate(FRAMES)
        idle.append(busy() - t0)
        t0 = busy()
        act()
        page.evaluate(FRAMES)
        work.append(busy() - t0)
        extra = 0.0
        for _ in range(60):
            t0 = busy()
            page.evaluate(FRAMES)
            spent = busy() - t0
            if spent <= 1.5 * idle[-1] + 1:
                break
            extra += spent
        later.append(extra)
    rest = statistics.median(idle)
    return {
        "median_ms": statistics.median(work) - rest,
        "p95_ms": p95(work) - rest,
        "n": len(work),
        "idle_median_ms": rest,
        "later_median_ms": statistics.median(later),
        "later_max_ms": max(later),
        "work_ms": [round(w, 1) for w in work],
        "later_ms": [round(x, 1) for x in later],
        "seconds": round(time.monotonic() - began, 1),
    }


def change_steps(page, tool: str, change: str, n: int, count: int):
    """(steps, settle) for one tool and change: count (prepare, act) pairs, each a real mouse event."""
    mouse = page.mouse
    rng = np.random.default_rng(SEED + 1)

    def centre(locator):
        locator.scroll_into_view_if_needed()
        b = locator.bounding_box()
        return b["x"] + b["width"] / 2, b["y"] + b["height"] / 2

    def click(locator):  # the pointer goes there first, outside the window; the click is the change
        return (lambda: mouse.move(*centre(locator)), lambda: (mouse.down(), mouse.up()))

    def hover(locator, start=None):  # the move onto it is the change
        return (
            (lambda: mouse.move(*centre(start))) if start is not None else (lambda: None),
            lambda: mouse.move(*centre(locator)),
        )

    def others(size, first):  # count indices in range(size), none the same as the one before it
        out, last = [], first
        while len(out) < count:
            i = int(rng.integers(0, size))
            if i != last:
                out.append(i)
                last = i
        return out

    heads = [h % HEADS for h in range(1, count + 1)]
    if tool == "attnwidget":

        def settle():  # head thumbnails finished, as in run.py
            page.wait_for_selector(
                ".aw-heads[data-complete=true], .aw-heads[hidden]", state="attached", timeout=120_000
            )

        if change == "temperature step":
            slider = page.locator(".aw-slider")
            points = [0.2, 0.6, 0.35, 0.8, 0.5, 0.1, 0.7, 0.3, 0.9, 0.45, 0.25, 0.65]

            def at(frac):
                def prepare():
                    slider.scroll_into_view_if_needed()
                    b = slider.bounding_box()
                    mouse.move(b["x"] + 4 + (b["width"] - 8) * frac, b["y"] + b["height"] / 2)

                return prepare, lambda: (mouse.down(), mouse.up())

            return [at(points[i % len(points)]) for i in range(count)], settle
        if change == "focus change":
            return [click(page.locator(f".aw-token[data-index='{i}']")) for i in others(n, 0)], settle
        if change == "head change":
            return [click(page.locator(f".aw-head[data-head='{h}']")) for h in heads], settle
        if change == "stage change":
            stages = ("scores", "weights", "blend", "qk")
            return [click(page.locator(f".aw-stage[data-stage='{stages[i % 4]}']")) for i in range(count)], settle
    if tool == "bertviz":
        if change == "focus change":
            tokens = page.locator("#vis svg #left > g:nth-child(2) > g")
            # tokens in view without scrolling: scrolling would move the tokens under the pointer
            shown = page.evaluate("""() => [...document.querySelectorAll('#vis svg #left > g:nth-child(2) > g')]
                .filter((g) => g.getBoundingClientRect().bottom < innerHeight).length""")
            picks = others(max(2, min(shown, n)), 0)
            return [hover(tokens.nth(i), tokens.nth(0) if k == 0 else None) for k, i in enumerate(picks)], None
        if change == "head change":
            boxes = page.locator("#vis svg > g:last-child > rect")
            return [click(boxes.nth(1 + (k // 2) % (HEADS - 1))) for k in range(count)], None
    if tool == "inspectus":
        if change == "focus change":
            rows = page.locator(".attention-visualization .src-tokens").first.locator(".token")
            return [click(rows.nth(i)) for i in others(n, 0)], None
        if change == "head change":
            boxes = page.locator(".attention-visualization .dimension-values").last.locator(".value")
            return [click(boxes.nth(h)) for h in heads], None
    if tool == "circuitsvis" and change == "head change":
        thumbs = page.locator('[id^="circuits-vis-"] canvas')  # the 12 thumbnails come first, then the zoomed head
        return [hover(thumbs.nth(h), thumbs.nth(0) if k == 0 else None) for k, h in enumerate(heads)], None
    return None, None


def measure_changes(page, tool: str, n: int, count: int, budget_s: float) -> dict:
    """Every change the tool has, on one loaded page: {change: result, or None for no such control}."""
    out = {}
    for change in CHANGES:
        steps, settle = change_steps(page, tool, change, n, count) if HOW[tool][change] else (None, None)
        if steps is None:
            out[change] = None
            continue
        try:
            out[change] = work_per_change(page, steps, settle, budget_s)
        except Exception as err:
            out[change] = {"error": str(err).splitlines()[0][:300]}
        r = out[change]
        shown = r.get("error") or f"median {r['median_ms']:,.1f} ms over {r['n']} changes ({r['seconds']:.0f} s)"
        print(f"  {tool:<11} n={n:<4} {change}: {shown}", flush=True)
    return out


# ---------------------------------------------------------------------------------------------
# Sizes and statistics


@functools.cache
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
            rows.append(
                {
                    "url": "(document)",
                    "bytes": len(body),
                    "gzip_bytes": gzip_size(body),
                    "served_by": "local HTTP server",
                }
            )
        elif url in stand_ins:
            body = stand_ins[url]["body"]
            rows.append(
                {"url": url, "bytes": len(body), "gzip_bytes": gzip_size(body), "served_by": stand_ins[url]["source"]}
            )
        else:
            rows.append({"url": url, "bytes": 0, "gzip_bytes": 0, "served_by": "NOT SERVED"})
    return {
        "document_bytes": rows[0]["bytes"] if rows and rows[0]["url"] == "(document)" else None,
        "total_bytes": sum(r["bytes"] for r in rows),
        "total_gzip_bytes": sum(r["gzip_bytes"] for r in rows),
        "requests": rows,
    }


# The goals of a first paint near the floor, as (ratio, n or None for every n, bound, "at most"/"at least"):
# attnwidget's 64 × 12 page within 1.5 × its one-token page, that within 3 × a page with no script,
# and attnwidget 3 × sooner than Inspectus at 64 tokens, 10 × at 256.
FLOOR_GOALS = (
    ("attnwidget / one-token page", 64, 1.5, "at most"),
    ("one-token page / no-script page", None, 3.0, "at most"),
    ("Inspectus / attnwidget", 64, 3.0, "at least"),
    ("Inspectus / attnwidget", 256, 10.0, "at least"),
)
RATIOS = {
    "attnwidget / one-token page": ("attnwidget", "one_token"),
    "one-token page / no-script page": ("one_token", "no_script"),
    "Inspectus / attnwidget": ("inspectus", "attnwidget"),
}


def floor_ratios(cells: dict, ns) -> dict:
    """Per n, each ratio of first paints: of the medians, and the median of each round's own ratio
    (the two pages' loads of one round, taken a few seconds apart)."""
    out = {}
    for n in ns:
        row = {}
        for name, (top, bottom) in RATIOS.items():
            a, b = cells.get(top, {}).get(n), cells.get(bottom, {}).get(n)
            if not (a and b and a["first_median_ms"] and b["first_median_ms"]):
                continue
            paired = (
                [x / y for x, y in zip(a["first_ms"], b["first_ms"])]
                if len(a["first_ms"]) == len(b["first_ms"])
                else []
            )
            row[name] = {
                "of_medians": a["first_median_ms"] / b["first_median_ms"],
                "median_of_rounds": statistics.median(paired) if paired else None,
            }
        out[str(n)] = row
    return out


def floor_table(report: dict) -> str | None:
    """The floors and the tools' first paints at each n, and each goal's ratio: met or not."""
    ratios = report.get("ratios")
    if not ratios:
        return None
    res = report["results"]
    shown = [p for p in ("attnwidget", "one_token", "no_script", "inspectus") if p in res]
    names = {
        "attnwidget": "attnwidget",
        "one_token": "one-token page",
        "no_script": "no-script page",
        "inspectus": "Inspectus",
    }
    lines = [
        "| n | "
        + " | ".join(f"{names[p]}, median ms (p95)" for p in shown)
        + " | "
        + " | ".join(f"{r} (of medians; median of rounds)" for r in RATIOS)
        + " |",
        "| ---: | " + " | ".join("---:" for _ in shown) + " | " + " | ".join("---:" for _ in RATIOS) + " |",
    ]
    for n in report["config"]["ns"]:
        cells = []
        for p in shown:
            c = res[p].get(str(n))
            cells.append(
                "–"
                if not c or c["first_median_ms"] is None
                else f"{fmt_ms(c['first_median_ms'])} ({fmt_ms(c['first_p95_ms'])})"
            )
        for r in RATIOS:
            got = ratios.get(str(n), {}).get(r)
            paired = got and got["median_of_rounds"]
            cells.append("–" if not got else f"{got['of_medians']:.2f}" + (f"; {paired:.2f}" if paired else ""))
        lines.append(f"| {n} | " + " | ".join(cells) + " |")
    lines += ["", "| goal | ratio | measured (of medians) | |", "| --- | ---: | ---: | --- |"]
    for name, at, bound, way in FLOOR_GOALS:
        for n in report["config"]["ns"]:
            if at is not None and n != at:
                continue
            got = ratios.get(str(n), {}).get(name)
            if not got:
                continue
            v = got["of_medians"]
            met = v <= bound if way == "at most" else v >= bound
            lines.append(f"| {name}, n = {n} | {way} {bound:g} | {v:.2f} | {'met' if met else 'not met'} |")
    return "\n".join(lines)


def p95(values):
    # Linear interpolation between order statistics; with 5 samples this sits close to the maximum.
    return float(np.percentile(values, 95)) if values else None


def machine() -> dict:
    cpu = next(
        (
            line.split(":", 1)[1].strip()
            for line in pathlib.Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        ),
        platform.processor(),
    )
    nproc = subprocess.run(["nproc"], capture_output=True, text=True).stdout.strip()
    packages = {}
    for name in ("attnwidget", "bertviz", "circuitsvis", "inspectus", "torch", "numpy", "playwright", "transformers"):
        try:
            packages[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            packages[name] = None
    npm = {name: npm_version(name) for name in ("requirejs", "d3", "jquery", "terser")}
    return {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "nproc": nproc,
        "cpu": cpu,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "python_packages": packages,
        "npm_packages": npm,
    }


# ---------------------------------------------------------------------------------------------
# The run


def run(args) -> dict:
    from playwright.sync_api import sync_playwright

    out = pathlib.Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    stand_ins = cdn_stand_ins()
    tools = [t for t in TOOLS if t in args.tools]
    pages = tools + list(FLOORS)
    cells = {page: {} for page in pages}
    # main-thread work per change at n = args.change_n, measured on each tool's first load there
    changes = {tool: None for tool in tools} if args.changes else None
    load = {"start": os.getloadavg()}

    def probe(tool, n):
        return lambda page: measure_changes(page, tool, n, args.changes, args.change_budget)

    began = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="side_by_side_") as tmp, sync_playwright() as p:
        folder = pathlib.Path(tmp)
        server = DocumentServer(folder)
        launch = functools.partial(p.chromium.launch, executable_path=args.chromium, args=CHROMIUM_ARGS)
        browser = launch()
        info = machine()
        info["chromium"] = browser.version
        floors = write_floors(folder)
        try:
            for n in args.ns:
                t0 = time.monotonic()
                load[str(n)] = os.getloadavg()
                paths = {**write_pages(n, folder, tools), **floors}
                print(f"n={n}: pages written in {time.monotonic() - t0:.1f} s; load average {load[str(n)]}", flush=True)
                cell = {
                    tool: {
                        "first_ms": [],
                        "all_heads_ms": [],
                        "loads": 0,
                        "timeouts": 0,
                        "wall_s": [],
                        "errors": [],
                        "unserved": [],
                        "sizes": None,
                        "note": "",
                    }
                    for tool in pages
                }
                active = list(pages)
                for tool in pages:  # a tool that painted nothing by the cap at a smaller n would not now
                    if any(cells[tool][m]["timeouts"] and not cells[tool][m]["first_ms"] for m in cells[tool]):
                        cell[tool]["note"] = "skipped: nothing painted by the cap at a smaller n"
                        active.remove(tool)
                wanted = {tool: args.samples for tool in pages}
                for i in range(args.samples):
                    # Pages take turns within each round, in an order that rotates and reverses
                    # from round to round, so slow drifts in the machine's load and whatever a
                    # load leaves behind for the next one fall on all of them alike.
                    order = active[i % len(active) :] + active[: i % len(active)] if active else []
                    order = order[::-1] if i % 2 else order
                    for tool in order:
                        c = cell[tool]
                        if c["loads"] >= wanted[tool]:
                            continue
                        url = server.base + paths[tool].name
                        shot = (
                            out.parent / f"side_by_side_{tool}_{n}.png"
                            if n == SCREENSHOT_N and not c["first_ms"] and tool in TOOLS
                            else None
                        )
                        then = (
                            probe(tool, n) if changes and n == args.change_n and changes.get(tool, 0) is None else None
                        )
                        r = load_once(browser, url, tool, stand_ins, args.timeout, shot, then)
                        if then is not None:
                            changes[tool] = r["then"]
                        c["loads"] += 1
                        c["wall_s"].append(round(r["wall_s"], 2))
                        c["errors"] += [e for e in r["errors"] if e not in c["errors"]]
                        c["unserved"] += [u for u in r["unserved"] if u not in c["unserved"]]
                        if c["sizes"] is None:
                            c["sizes"] = sizes(r["requests"], paths[tool], url, stand_ins)
                        for name in MOMENTS:
                            if r[name] is not None:
                                c[f"{name}_ms"].append(round(r[name], 1))
                        shown = "  ".join(
                            f"{name} {'-' if r[name] is None else f'{r[name]:,.0f} ms'}" for name in MOMENTS
                        )
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
                            print(
                                f"  {tool:<11} n={n:<4} load {i + 1}: stopped at the cap ({r['error'][:70]})",
                                flush=True,
                            )
                            continue
                        for seconds, count in FEWER_SAMPLES:
                            if c["loads"] == 1 and r["wall_s"] >= seconds and wanted[tool] > count:
                                wanted[tool] = count
                                c["note"] = (
                                    f"{count} load{'s' if count > 1 else ''} only: the first took {r['wall_s']:.0f} s"
                                )
                                break
                for tool in pages:
                    c = cells[tool][n] = cell[tool]
                    for name in MOMENTS:
                        got = c[f"{name}_ms"]
                        c[f"{name}_median_ms"] = float(statistics.median(got)) if got else None
                        c[f"{name}_p95_ms"] = p95(got)
                for tool in pages:
                    for name in MOMENTS:
                        base, mine = cells["attnwidget"][n][f"{name}_median_ms"], cells[tool][n][f"{name}_median_ms"]
                        cells[tool][n][f"{name}_ratio_to_attnwidget"] = mine / base if base and mine else None
                for tool in tools:
                    if changes and n == args.change_n and changes[tool] is None:
                        changes[tool] = {"error": cell[tool]["note"] or "not loaded"}
                # The big pages take memory; they are not needed once measured.
                for tool in tools:
                    paths[tool].unlink()
            if changes and args.change_n not in args.ns:  # one load per tool just for the changes
                paths = write_pages(args.change_n, folder, tools)
                for tool in tools:
                    r = load_once(
                        browser,
                        server.base + paths[tool].name,
                        tool,
                        stand_ins,
                        args.timeout,
                        None,
                        probe(tool, args.change_n),
                    )
                    changes[tool] = r["then"]
                    if r["error"] is not None:
                        browser.close()
                        browser = launch()
        finally:
            browser.close()
            server.close()
    load["end"] = os.getloadavg()
    info["load_average"] = load
    return {
        "config": {
            "ns": list(args.ns),
            "tools": tools,
            "floors": list(FLOORS),
            "heads": HEADS,
            "d": D,
            "seed": SEED,
            "samples": args.samples,
            "change_n": args.change_n,
            "changes": args.changes,
            "change_budget_s": args.change_budget,
            "min_changes": MIN_CHANGES,
            "fewer_samples_after_s": dict(FEWER_SAMPLES),
            "timeout_s": args.timeout,
            "viewport": VIEWPORT,
            "chromium_args": CHROMIUM_ARGS,
        },
        "machine": info,
        "paint_conditions": CONDITIONS,
        "cdn_stand_ins": {
            url: {"source": s["source"], "note": s["note"], "bytes": len(s["body"])} for url, s in stand_ins.items()
        },
        "results": {tool: {str(n): c for n, c in cells[tool].items()} for tool in pages},
        "ratios": floor_ratios(cells, args.ns),
        "changes": {"n": args.change_n, "how": HOW, "tools": changes} if changes else None,
        "run_py": run_py_goals(pathlib.Path(args.run_results)),
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
        "| tool | n | loads | first paint, median ms | p95 | × attnwidget "
        "| all heads drawn, median ms | p95 | × attnwidget | document | total sent | total gzip |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    cap = report["config"]["timeout_s"] * 1000
    for n in report["config"]["ns"]:
        for tool in report["results"]:
            c = report["results"][tool][str(n)]
            sz = c["sizes"] or {}
            loads = (
                "skipped"
                if c["note"].startswith("skipped")
                else f"{c['loads']}" + (" (1 at the cap)" if c["timeouts"] else "")
            )
            row = [tool, str(n), loads]
            for name in MOMENTS:
                median, ratio = c[f"{name}_median_ms"], c[f"{name}_ratio_to_attnwidget"]
                shown = [fmt_ms(median), fmt_ms(c[f"{name}_p95_ms"]), "–" if ratio is None else f"{ratio:.2f}"]
                if median is None and c["timeouts"]:  # a lower bound: not painted by the cap
                    base = report["results"]["attnwidget"][str(n)][f"{name}_median_ms"]
                    shown = [f"> {cap:,.0f}", "–", f"> {cap / base:.0f}" if base else "–"]
                row += shown
            row += [
                fmt_bytes(sz.get("document_bytes")),
                fmt_bytes(sz.get("total_bytes")),
                fmt_bytes(sz.get("total_gzip_bytes")),
            ]
            lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def run_py_goals(path: pathlib.Path):
    """benchmarks/run.py's goals, from its results file (run.py runs first in `make bench`), or None."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return {
        "path": str(path),
        "written": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(path.stat().st_mtime)),
        "goals": {g["id"]: g for g in data.get("goals", [])},
    }


# The comparison at n = change_n: (moment, goal, run.py's goal id, what this script measured).
MOMENT_ROWS = [
    ("temperature step: main-thread work", "≤ 16 ms", "temperature_256", ("change", "temperature step")),
    ("focus change: main-thread work", "≤ 16 ms", "focus_256", ("change", "focus change")),
    ("head change: main-thread work", "≤ 16 ms", "head_256", ("change", "head change")),
    ("stage change: main-thread work", "≤ 16 ms", "stage_256", ("change", "stage change")),
    ("first paint, from navigation", "≤ 300 ms", "first_paint_256", ("paint", "first")),
    ("all 12 heads drawn, from navigation", "≤ 1 s", "all_heads_256", ("paint", "all_heads")),
]
RUN_PY_N = 256  # run.py measures these goals at 256 tokens × 12 heads


def moments_table(report: dict) -> str | None:
    """The goals' moments in all three tools, one row each; None for a report made before these were measured."""
    ch = report.get("changes")
    if not ch:
        return None
    n, run_py = ch["n"], report.get("run_py")
    cap = report["config"]["timeout_s"] * 1000
    names = {
        "attnwidget": "attnwidget, this script",
        "bertviz": "bertviz",
        "circuitsvis": "CircuitsVis",
        "inspectus": "Inspectus",
    }
    tools = [t for t in TOOLS if t in ch["tools"]]
    lines = [
        f"| n = {n}, {HEADS} heads | goal | attnwidget, run.py | " + " | ".join(names[t] for t in tools) + " |",
        "| --- | --- | ---: | " + " | ".join("---:" for _ in tools) + " |",
    ]

    def tool_change(tool, key):  # the result, None for no such control
        found = ch["tools"].get(tool)
        if not HOW[tool][key]:
            return None
        if found is None or "error" in found:  # the whole page, not one change, went wrong
            return {"error": (found or {}).get("error", "not loaded")}
        return found.get(key) or {"error": "not measured"}

    def change_cell(r):
        if r is None:
            return "no such control"
        if "error" in r:
            return f"not measured: {r['error']}"
        return f"{fmt_ms(r['median_ms'])} ms (p95 {fmt_ms(r['p95_ms'])}; {r['n']} change{'s' if r['n'] > 1 else ''})"

    def paint_cell(tool, moment):
        c = report["results"][tool].get(str(n))
        if c is None:
            return "– (not loaded at this n)"
        if c["note"].startswith("skipped"):
            return "skipped (nothing painted by the cap at a smaller n)"
        median = c[f"{moment}_median_ms"]
        if median is None:
            return f"> {cap:,.0f} ms (the cap)" if c["timeouts"] else "–"
        loads = len(c[f"{moment}_ms"])
        return f"{fmt_ms(median)} ms (p95 {fmt_ms(c[f'{moment}_p95_ms'])}; {loads} load{'s' if loads > 1 else ''})"

    for label, goal, gid, (kind, key) in MOMENT_ROWS:
        g = (run_py or {}).get("goals", {}).get(gid)
        if n != RUN_PY_N:
            mine = f"– (run.py: n = {RUN_PY_N})"
        elif g is None or g.get("median") is None:
            mine = "– (no run.py result)"
        else:
            mine = f"{fmt_ms(g['median'])} ms (p95 {fmt_ms(g['p95'])}; {g['n']}): {'met' if g['met'] else 'not met'}"
        if kind == "change":
            cells = [change_cell(tool_change(t, key)) for t in tools]
        else:
            cells = [paint_cell(t, key) for t in tools]
        lines.append(f"| {label} | {goal} | {mine} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def later_note(report: dict) -> str:
    """Work a page still did after the two frames of a change, where it was over 1 ms (median)."""
    ch = report.get("changes") or {}
    found = [
        f"{tool} {change} {r['later_median_ms']:,.1f} ms (most {r['later_max_ms']:,.1f})"
        for tool, rs in (ch.get("tools") or {}).items()
        if rs and "error" not in rs
        for change, r in rs.items()
        if r and "error" not in r and r["later_median_ms"] > 1
    ]
    if not found:
        return "- After the two frames, no tool did more than 1 ms of further work per change (median)."
    return "- Work done after the two frames, not in the table (median per change; most): " + "; ".join(found) + "."


def markdown(report: dict) -> str:
    m = report["machine"]
    tools = [t for t in TOOLS if t in report["results"]]
    out = [
        "# Side by side: attnwidget, bertviz, CircuitsVis, Inspectus",
        "",
        f"Same random attention ({report['config']['heads']} heads, seed {report['config']['seed']}) in each tool, "
        "cold loads in a fresh headless Chromium context. First paint: ms from navigation start to the first "
        "animation frame where the tool's attention is drawn. Sizes: the document and every script it loads. "
        "one_token: attnwidget's exported page of one token and one head; no_script: that document with no script "
        "and a static picture in the widget's place (the floors, loaded in the same rounds at every n).",
        "",
        table(report),
        "",
    ]
    floors = floor_table(report)
    if floors:
        load = m.get("load_average", {})
        out += [
            "## A first paint near the floor",
            "",
            "First paints in the same rounds (every page loaded once a round, in an order that rotates and reverses "
            "from round to round), and their ratios: of the medians, and the median of each round's own ratio. "
            "The machine's load average (1, 5, 15 min) at the start: "
            f"{', '.join(f'{x:.2f}' for x in load.get('start', []))}; at the end: "
            f"{', '.join(f'{x:.2f}' for x in load.get('end', []))}.",
            "",
            floors,
            "",
        ]
    moments = moments_table(report)
    if moments:
        ch, run_py = report["changes"], report.get("run_py")
        source = f"`{pathlib.Path(run_py['path']).name}`, written {run_py['written']}" if run_py else "not found"
        out += [
            f"## The goals' moments, side by side (n = {ch['n']}, {HEADS} heads)",
            "",
            "Main-thread work per change (Chrome's task timer, in thread time) and paint times, each as median (p95; "
            "how many). *attnwidget, run.py*: benchmarks/run.py's goal measurements (changes made through the page's "
            "model, first paint at the end of the widget's first draw, all heads at the moment the page marks its "
            f"thumbnails complete; results file {source}). The other three columns are measured here, alike for each "
            "tool: changes by real mouse events, paints by the watcher described below.",
            "",
            moments,
            "",
            "What each change is:",
            "",
        ]
        out += [
            f"- {tool}: " + "; ".join(f"{change}: {ch['how'][tool][change] or 'no such control'}" for change in CHANGES)
            for tool in tools
        ]
        out += [""]
    out += [
        "## How it is measured",
        "",
        "- Each load: a new browser context (empty cache), `page.goto` of the tool's HTML from a local HTTP server, "
        "CDN scripts answered from local copies by Playwright routing. A script added before the page's own checks "
        "each tool's conditions at the start of every animation frame (requestAnimationFrame); once one holds, "
        "`performance.now()` (ms since navigation start) at the start of the next frame, after the browser has "
        "rendered the frame that shows it, goes to Python as a console message. Loads are capped at "
        f"{report['config']['timeout_s']:.0f} s; tools take turns in a rotating order.",
        "- First paint (the headline): attnwidget: `.aw-root` exists and a visible `canvas.aw-grid` (the weights "
        'matrix, stage "weights") has a non-blank pixel. bertviz: the head view\'s SVG has its `#attention` lines. '
        "CircuitsVis: one of its Chart.js canvases has a non-blank pixel. Inspectus: its matrix SVG has a cell "
        "(it appends every cell, its token rows and its head row in one synchronous pass). The one-token page: as "
        "attnwidget's. The no-script page: its picture is decoded and laid out.",
        f"- All heads drawn: attnwidget: also all {HEADS} head thumbnails loaded (each an image of its bitmap). "
        "bertviz, Inspectus and the floors: the same moment as "
        f"first paint (it adds every head's lines in one synchronous pass). CircuitsVis: all {HEADS + 1} canvases "
        "(a thumbnail per head and the zoomed head) non-blank.",
        "- Median and p95 over the loads that got there (p95 by linear interpolation: with 5 loads it is near the "
        'slowest); × attnwidget is the ratio of medians at the same n, in the same run. "> x" is a lower bound '
        "from the cap.",
        '- Sizes: the HTML document plus every script it loads, as bodies (not compressed); "total gzip" is what a '
        "server compressing at gzip level 6 would send. The document is what each tool's Python API returns "
        "(attnwidget: `to_html`, bertviz: `head_view(..., html_action='return').data`, CircuitsVis: "
        "`str(attention_heads(...))`, its CDN form).",
    ]
    if moments:
        c = report["config"]
        out += [
            "- Main-thread work per change (the goals' table): on each tool's first load at that n, once all is drawn. "
            "Chrome's task timer (CDP `Performance.getMetrics`, `TaskDuration`, in thread time) is read before the "
            "mouse event and after the two animation frames that follow it, less the same two frames with no change "
            "just before (as benchmarks/run.py does; the idle two frames' median comes off the median and the p95). "
            "The pointer is put on the control (scrolled into view) outside that window, so the window holds only a "
            "click (button down and up) or, where hovering is the control, the move onto it. attnwidget's head "
            f"thumbnails are let finish between changes, as in run.py. Each moment gets up to {c['changes']} changes, "
            f"fewer (at least {c['min_changes']}) when it has taken {c['change_budget_s']:.0f} s.",
            later_note(report),
        ]
    out += [""]
    notes = [
        f"- {tool} n={n}: {c['note']}"
        for tool in report["results"]
        for n, c in report["results"][tool].items()
        if c["note"]
    ]
    unserved = sorted(
        {u for tool in report["results"] for c in report["results"][tool].values() for u in c["unserved"]}
    )
    out += ["## Notes", ""] + (notes or [f"- every cell has all its {report['config']['samples']} loads"])
    out += [
        "- bertviz's document carries the weights twice: head_view.js names its PYTHON_PARAMS marker once more in a "
        "comment, and str.replace fills both.",
        "- CircuitsVis is given `mask_upper_tri=False` (its default greys out the upper triangle, for causal "
        "models); these weights are not causal. The same weights go to bertviz and CircuitsVis (computed by "
        "`attnwidget.attention` per head); attnwidget gets q, k, v and computes them in the page.",
    ]
    out += [f"- requests that could not be served: {', '.join(unserved) if unserved else 'none'}", ""]
    out += ["## What each tool requested (at any n)", ""]
    for tool in report["results"]:
        asked = {
            r["url"]: r["served_by"]
            for c in report["results"][tool].values()
            if c["sizes"]
            for r in c["sizes"]["requests"]
        }
        out += [f"- {tool}: " + "; ".join(f"{url} ← {by}" for url, by in asked.items())]
    out += ["", "## CDN stand-ins", ""]
    out += [
        f"- {url} ← {s['source']} ({fmt_bytes(s['bytes'])}; {s['note']})" for url, s in report["cdn_stand_ins"].items()
    ]
    out += [
        "",
        "## Machine",
        "",
        f"- run: {m['date']}",
        f"- nproc: {m['nproc']}",
        f"- CPU: {m['cpu']}",
        f"- Chromium: {m['chromium']}",
        f"- Python {m['python']} on {m['platform']}",
        "- Python packages: " + ", ".join(f"{k} {v}" for k, v in m["python_packages"].items()),
        "- npm packages (benchmarks/package.json): " + ", ".join(f"{k}@{v}" for k, v in m["npm_packages"].items()),
        f"- whole run: {report['run_seconds'] / 60:.1f} min",
    ]
    load = m.get("load_average")
    if load:
        out += [
            "- load average (1, 5, 15 min): "
            + "; ".join(
                f"{'at n = ' + k if k.isdigit() else k} {', '.join(f'{x:.2f}' for x in v)}" for k, v in load.items()
            )
        ]
    out += [""]
    return "\n".join(out)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--quick",
        action="store_true",
        help=f"a smoke test: n = {' '.join(map(str, QUICK['ns']))}, {QUICK['samples']} loads, "
        f"changes at n = {QUICK['change_n']}, {QUICK['changes']} per moment (any option given wins)",
    )
    parser.add_argument("--ns", type=int, nargs="+", help=f"token counts (default: {' '.join(map(str, NS))})")
    parser.add_argument(
        "--tools",
        nargs="+",
        choices=TOOLS,
        default=list(TOOLS),
        help="the tools to load (attnwidget always; the floors are loaded beside them; default: all)",
    )
    parser.add_argument(
        "--no-changes", action="store_true", help="paint times and sizes only: no main-thread work per change"
    )
    parser.add_argument("--samples", type=int, help="loads per tool and n (default: 5)")
    parser.add_argument(
        "--timeout", type=float, default=120.0, help="seconds before a load counts as a timeout (default: %(default)s)"
    )
    parser.add_argument("--change-n", type=int, help="token count for the main-thread work per change (default: 256)")
    parser.add_argument("--changes", type=int, help="changes per moment and tool (default: 12)")
    parser.add_argument(
        "--change-budget",
        type=float,
        help=f"seconds per moment and tool after which no new change is begun, once it has {MIN_CHANGES} (default: 20)",
    )
    parser.add_argument(
        "--run-results",
        default=str(RESULTS / "latest.json"),
        help="benchmarks/run.py's results, for its goal numbers beside these (default: %(default)s)",
    )
    parser.add_argument("--chromium", default=os.environ.get("ATTNWIDGET_CHROMIUM", "/usr/bin/chromium"))
    parser.add_argument(
        "--out",
        default=str(RESULTS / "side_by_side"),
        help="results path without extension; the screenshots go beside it (default: %(default)s)",
    )
    parser.add_argument(
        "--report-only", action="store_true", help="rewrite the .md from the existing .json, measuring nothing"
    )
    args = parser.parse_args(argv)
    defaults = (
        QUICK if args.quick else {"ns": list(NS), "samples": 5, "change_n": 256, "changes": 12, "change_budget": 20.0}
    )
    for name, value in defaults.items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    if "attnwidget" not in args.tools:
        args.tools = ["attnwidget", *args.tools]
    if args.no_changes:
        args.changes = 0

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
    floors = floor_table(report)
    if floors:
        print(f"\nA first paint near the floor (load average {report['machine'].get('load_average')}):\n")
        print(floors)
    moments = moments_table(report)
    if moments:
        print(
            f"\nThe goals' moments at n = {report['changes']['n']}, {HEADS} heads (run.py's figures beside those "
            "measured here):\n"
        )
        print(moments)
    written = [out.with_suffix(".md")] if args.report_only else [out.with_suffix(".json"), out.with_suffix(".md")]
    print(f"\nwritten: {', '.join(map(str, written))} (the measuring took {report['run_seconds'] / 60:.1f} min)")


if __name__ == "__main__":
    main()
