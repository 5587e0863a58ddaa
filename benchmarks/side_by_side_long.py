"""Long texts side by side, in one run: attnwidget's exported LongWidget page beside bertviz's
head_view, CircuitsVis's attention_heads, Inspectus's attention and attnview, at 1,024 to 32,768
tokens (12 heads, one layer), in headless Chromium. For each tool and length: does it survive, the
time to first paint, the bytes of the document and of what it loads, and the JS heap after paint.

    python benchmarks/side_by_side_long.py               # from the repo root: about 10 minutes here
    python benchmarks/side_by_side_long.py --ns 256 512  # a smoke test, in a few minutes

Set-up: benchmarks/side_by_side.py's (`npm ci --prefix benchmarks`; bertviz, CircuitsVis and
Inspectus at its versions), and `.venv/bin/pip install attnview==0.5.1`. The server, the CDN routing,
the paint watcher, the data and the sizes are side_by_side.py's, imported from it.

The data: side_by_side.py's random q, k, v (12 heads, d = 64, seed 0). bertviz, CircuitsVis,
Inspectus and attnview are given its weights, 12 × n × n (not causal, as there), and each writes
them whole into its page. attnwidget's LongWidget is given q, k and v (causal) and writes its
default export: the head shown's map pooled onto 256 × 256 pixels (each pixel's largest weight, and
its mean) and the exact rows of the first and last positions, whatever n.

A tool survives a length when its page is written within 120 s (by its Python API, in a child
process) and draws within 60 s of navigation start on every load, without a crash. A tool that fails
at one length is not tried at larger ones. A tool that needs the whole matrix is not attempted where
12 × n² float32 numbers pass 4 GB (12.9 GB at 16,384 tokens, 51.5 GB at 32,768). The machine is
shared, so memory is capped: the child writing a page, and each Chromium process, may allocate at
most 8 GB of data (RLIMIT_DATA; past it an allocation fails, in the page or in Python, and is
reported, instead of the machine running out). A cell that fails at the cap (a MemoryError in the
writing, or a load whose largest Chromium process came within 15 % of it) is tried once more with
12 GB, and what happened then is reported beside it: whether the cap decided the outcome.

attnwidget's pages are written by one commit's code and bundle (--ref, HEAD by default; its tree
taken out and its bundle built by benchmarks/against.py's materialise), so that edits to the working
tree during the run do not reach them. Beside the JS heap, the peak resident memory of the largest
Chromium process during each load is recorded (sampled from /proc).

Writes benchmarks/results/side_by_side_long.json and .md.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import pathlib
import resource
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import side_by_side as sbs  # noqa: E402
from side_by_side import (  # noqa: E402
    CHROMIUM_ARGS,
    CONDITIONS,
    HEADS,
    NONBLANK,
    SEED,
    VISIBLE,
    D,
    DocumentServer,
    cdn_stand_ins,
    fmt_bytes,
    fmt_ms,
    gzip_size,
    load_once,
    machine,
    make_data,
    sizes,
)

RESULTS = HERE / "results"
TOOLS = ("attnwidget", "bertviz", "circuitsvis", "inspectus", "attnview")
NAMES = {
    "attnwidget": "attnwidget LongWidget page",
    "bertviz": "bertviz head_view",
    "circuitsvis": "CircuitsVis attention_heads",
    "inspectus": "Inspectus attention",
    "attnview": "attnview",
}
NS = (1_024, 2_048, 4_096, 8_192, 16_384, 32_768)
SAMPLES = 3
FEWER_SAMPLES = ((30, 1), (10, 2))  # (the first load took at least this many seconds, loads in that cell)
INPUT_GB = 4.0  # the whole matrix, 12 × n² float32, past which a tool is not attempted

# First paint, the moment each page first shows attention (for bertviz, CircuitsVis and Inspectus
# side_by_side.py's own). load_once waits for two moments; here both are the first paint.
FIRST = {
    # the map drawn on the visible canvas: it shows the head's whole map and has a non-blank pixel
    "attnwidget": f"""[...document.querySelectorAll('canvas.aw-long-canvas')].some((c) =>
        c.dataset.shows === 'map' && {VISIBLE}(c) && {NONBLANK}(c))""",
    # attnview draws, in one synchronous pass, the focused query's strongest keys as cards and a
    # table row per key; the raw matrix only when its <details> is opened
    "attnview": "document.querySelector('#destinations .destination') !== null",
    **{tool: CONDITIONS[tool]["first"] for tool in ("bertviz", "circuitsvis", "inspectus")},
}
WATCHED = {tool: f"long_{tool}" for tool in TOOLS}  # (names of its own in side_by_side's conditions)
for tool, ready in FIRST.items():
    CONDITIONS[WATCHED[tool]] = {"first": ready, "all_heads": ready}

# What each tool writes and draws, read in its code (the notes under the table).
WHAT = {
    "attnwidget": "writes the head shown's map pooled onto 256² pixels (largest and mean), the exact rows of the "
    "first and last positions (n numbers each) and the tokens: the rows and the tokens are what grow with n. It "
    "draws the pooled map on one canvas and keeps only the token chips on screen. Zoomed in, the exported page "
    "shows the pooled map: each cell's own weight is computed by a live kernel, which an exported page has not.",
    "bertviz": "writes every head's n × n weights as JSON text, twice (head_view.js names its PYTHON_PARAMS "
    "marker once more in a comment, and str.replace fills both), and draws an SVG line per query, key and head "
    "shown.",
    "circuitsvis": "writes every head's n × n weights as JSON text and draws each head's whole pattern on a "
    "Chart.js canvas (a thumbnail per head and the zoomed head).",
    "inspectus": "writes every head's n × n weights as JSON text and draws the heads selected as one SVG rect "
    "per cell, with a token element per row and column.",
    "attnview": "turns every layer's n × n weights per head into nested Python tuples of floats and writes them "
    "as JSON text at full precision; the page draws the focused query's strongest keys, a table row per key, "
    "and a token strip windowed to 11 tokens (the raw matrix only when its <details> is opened).",
}


# ---------------------------------------------------------------------------------------------
# Writing a page, in a child process: its memory capped, its time too


STAGE = ["making the data"]  # (in the child: what it was doing, for a MemoryError)


def write_page(tool: str, n: int, path: pathlib.Path, limit_s: float) -> dict:
    """The tool's page from the same random attention; {"data_s", "write_s"}. The write is ended by
    SIGALRM (the process killed, as its default action: a C call cannot hold it off) at limit_s."""
    t0 = time.monotonic()
    if tool == "attnwidget":
        from attnwidget import LongWidget

        q, k, v = np.random.default_rng(SEED).normal(size=(3, HEADS, n, D)).astype(np.float32)  # as make_data
        tokens = [f"t{i}" for i in range(n)]
    else:
        tokens, _, _, _, weights = make_data(n)
    made = time.monotonic()
    STAGE[0] = "writing the page"
    signal.alarm(max(1, round(limit_s)))
    if tool == "attnwidget":
        LongWidget(tokens=tokens, q=q, k=k, v=v).to_html(path)  # its default export
    elif tool == "bertviz":
        sbs.write_bertviz(path, weights, tokens)
    elif tool == "circuitsvis":
        sbs.write_circuitsvis(path, weights, tokens)
    elif tool == "inspectus":
        path.write_text(sbs.inspectus_html(weights[None], tokens), encoding="utf-8")  # one layer of 12 heads
    else:
        import attnview

        attnview.export_html(weights, path, tokens=tokens)  # heads × n × n: one layer
    signal.alarm(0)
    import attnwidget

    return {"data_s": round(made - t0, 2), "write_s": round(time.monotonic() - made, 2), "code": attnwidget.__file__}


def child(tool: str, n: int, path: str, limit_s: float, memory_gb: float) -> None:
    cap = int(memory_gb * 1e9)
    resource.setrlimit(resource.RLIMIT_DATA, (cap, resource.getrlimit(resource.RLIMIT_DATA)[1]))
    try:
        out = write_page(tool, n, pathlib.Path(path), limit_s)
    except MemoryError:
        out = {"error": f"{STAGE[0]} needs more than the {memory_gb:g} GB memory cap (MemoryError)"}
    except Exception as err:  # e.g. torch's "can't allocate memory", said in its own words
        out = {"error": f"{type(err).__name__}: {str(err).splitlines()[0][:200] if str(err) else ''}"}
    print(json.dumps(out))


def write_in_child(tool: str, n: int, path: pathlib.Path, args, code: pathlib.Path, memory_gb: float) -> dict:
    """The page written by a child process, with attnwidget from code/src (a commit's snapshot)."""
    command = [sys.executable, __file__, "--write", tool, str(n), str(path)]
    command += ["--write-limit", str(args.write_limit), "--memory-gb", str(memory_gb)]
    env = {**os.environ, "PYTHONPATH": str(code / "src")}
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=args.write_limit + 900, env=env)
    except subprocess.TimeoutExpired:
        return {"error": f"making the data and the page took over {args.write_limit + 900:.0f} s"}
    if done.returncode == -signal.SIGALRM:
        return {"error": f"the page was not written within {args.write_limit:.0f} s"}
    if done.returncode != 0:
        said = (done.stderr.strip().splitlines() or ["(nothing on stderr)"])[-1][:200]
        return {"error": f"the process writing the page ended with code {done.returncode}: {said}"}
    written = json.loads(done.stdout.strip().splitlines()[-1])
    if "code" in written and not written.pop("code").startswith(str(code / "src")):
        raise RuntimeError(f"the page was written by an attnwidget not from {code}/src: check PYTHONPATH")
    return written


# ---------------------------------------------------------------------------------------------
# Loading it


def heap_after_paint(page) -> dict:
    cdp = page.context.new_cdp_session(page)
    cdp.send("Performance.enable")
    metrics = {m["name"]: m["value"] for m in cdp.send("Performance.getMetrics")["metrics"]}
    return {"used": metrics["JSHeapUsedSize"], "total": metrics["JSHeapTotalSize"]}


def why_not_drawn(r: dict, draw_limit: float, memory_gb: float, peak: int) -> str:
    said = f"; the page said: {r['errors'][0][:160]}" if r["errors"] else ""
    if "crash" in r["error"].lower():
        return (
            f"the page crashed, its largest Chromium process at {size(peak)} resident (each may allocate "
            f"{memory_gb:g} GB){said}"
        )
    if "Timeout" in r["error"]:
        return f"nothing drawn within {draw_limit:.0f} s, its largest Chromium process at {size(peak)} resident{said}"
    return f"{r['error'][:160]}{said}"


def capped_chromium(folder: pathlib.Path, chromium: str, memory_gb: float) -> tuple[str, pathlib.Path]:
    """A launcher that starts Chromium with each of its processes' data capped (RLIMIT_DATA), and the
    file it writes its process id to (exec keeps it), for PeakRss."""
    launcher = folder / f"chromium-{memory_gb:g}.sh"
    pid = folder / f"chromium-{memory_gb:g}.pid"
    launcher.write_text(f'#!/bin/bash\nulimit -d {int(memory_gb * 1e6)}\necho $$ > "{pid}"\nexec "{chromium}" "$@"\n')
    launcher.chmod(0o755)
    return str(launcher), pid


class PeakRss:
    """While in use: the largest resident set of any one of our Chromium processes (the browser's and
    its descendants; the cap is per process), sampled every 0.2 s, in bytes."""

    def __init__(self, pidfile: pathlib.Path):
        self.root = int(pidfile.read_text())
        self.peak = 0

    def sample(self) -> None:
        children: dict = {}
        for stat in pathlib.Path("/proc").glob("[0-9]*/stat"):
            try:
                parent = int(stat.read_text().rsplit(")", 1)[1].split()[1])  # (after the name: state, parent)
            except OSError:  # (gone meanwhile)
                continue
            children.setdefault(parent, []).append(int(stat.parent.name))
        ours, todo = [], [self.root]
        while todo:
            pid = todo.pop()
            ours.append(pid)
            todo += children.get(pid, [])
        for pid in ours:
            try:
                resident = int(pathlib.Path(f"/proc/{pid}/statm").read_text().split()[1]) * resource.getpagesize()
            except OSError:
                continue
            self.peak = max(self.peak, resident)

    def __enter__(self):
        self.done = threading.Event()

        def watch():
            while not self.done.wait(0.2):
                self.sample()

        self.thread = threading.Thread(target=watch, daemon=True)
        self.thread.start()
        return self

    def __exit__(self, *_):
        self.done.set()
        self.thread.join()


def retry(p, tool: str, n: int, path: pathlib.Path, folder, server, stand_ins, code, args) -> dict:
    """A cell that failed at the memory cap, once more at args.retry_memory_gb (written again if its
    writing failed; one load, in a browser of its own): did the cap decide it?"""
    gb = args.retry_memory_gb
    out: dict = {"memory_gb": gb}
    if not path.exists():
        written = write_in_child(tool, n, path, args, code, gb)
        out.update(written)
        if "error" in written:
            out["said"] = written["error"]
            return out
    executable, pidfile = capped_chromium(folder, args.chromium, gb)
    browser = p.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
    try:
        with PeakRss(pidfile) as rss:
            r = load_once(browser, server.base + path.name, WATCHED[tool], stand_ins, args.draw_limit, None, None)
    finally:
        browser.close()
    note = f"written in {out['write_s']:.0f} s ({size(path.stat().st_size)}), " if "write_s" in out else ""
    out.update({"first_ms": r["first"], "peak_rss": rss.peak, "bytes": path.stat().st_size})
    if r["error"] is not None:
        out["said"] = note + why_not_drawn(r, args.draw_limit, gb, rss.peak)
    else:
        out["said"] = note + f"drawn in {r['first']:,.0f} ms, its largest Chromium process at {size(rss.peak)}"
    return out


def new_cell() -> dict:
    return {
        "status": None,
        "why": "",
        "first_ms": [],
        "heap_used": [],
        "heap_total": [],
        "peak_rss": [],
        "loads": 0,
        "wall_s": [],
    }


def run(args) -> dict:
    from playwright.sync_api import sync_playwright

    stand_ins = cdn_stand_ins()
    # attnwidget's code and bundle from one commit, built apart: the working tree may change during the run.
    # (Imported here, not at the top: against.py imports run.py, which puts the working tree's src first on
    # the path, and the children writing the pages must import the commit's.)
    from against import git, materialise

    commit = git("rev-parse", "--short", args.ref)
    code = materialise(commit)
    print(f"attnwidget: commit {commit}, its tree in {code}, its bundle built there", flush=True)
    cells: dict = {tool: {} for tool in args.tools}
    failed_at: dict = {}  # tool -> the n where it failed
    load = {"start": os.getloadavg()}
    began = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="side_by_side_long_") as tmp, sync_playwright() as p:
        folder = pathlib.Path(tmp)
        server = DocumentServer(folder)
        executable, pidfile = capped_chromium(folder, args.chromium, args.memory_gb)

        def launch():
            return p.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)

        browser = launch()
        info = machine()
        info["chromium"] = browser.version
        info["python_packages"]["attnview"] = importlib.metadata.version("attnview")
        try:
            for n in args.ns:
                load[str(n)] = os.getloadavg()
                print(f"n={n:,}: load average {', '.join(f'{x:.2f}' for x in load[str(n)])}", flush=True)
                paths = {}
                for tool in args.tools:
                    c = cells[tool][n] = new_cell()
                    need = HEADS * n * n * 4 / 1e9
                    if tool != "attnwidget" and need > INPUT_GB:
                        c["status"], c["why"] = "not attempted", f"needs n² × heads numbers ({need:.1f} GB)"
                    elif tool in failed_at:
                        c["status"], c["why"] = "not tried", f"failed at {failed_at[tool]:,}"
                    else:
                        path = folder / f"{tool}_{n}.html"
                        written = write_in_child(tool, n, path, args, code, args.memory_gb)
                        c.update({k: v for k, v in written.items() if k != "error"})
                        if "error" in written:
                            c["status"], c["why"] = "failed", written["error"]
                            c["at_the_cap"] = "MemoryError" in written["error"]
                            failed_at[tool] = n
                            path.unlink(missing_ok=True)
                        paths[tool] = path
                    shown = c["why"] or f"written in {c['write_s']:.2f} s ({size(path.stat().st_size)})"
                    print(f"  {tool:<11} {c['status'] or 'page'}: {shown}", flush=True)
                wanted = {tool: args.samples for tool in paths}
                for i in range(args.samples):
                    # the pages take turns, in an order that rotates and reverses from round to round
                    active = [t for t in paths if cells[t][n]["status"] is None]
                    order = active[i % len(active) :] + active[: i % len(active)] if active else []
                    for tool in order[::-1] if i % 2 else order:
                        c = cells[tool][n]
                        if c["loads"] >= wanted[tool]:
                            continue
                        url = server.base + paths[tool].name
                        with PeakRss(pidfile) as rss:
                            r = load_once(
                                browser, url, WATCHED[tool], stand_ins, args.draw_limit, None, heap_after_paint
                            )
                        c["peak_rss"].append(rss.peak)
                        c["loads"] += 1
                        c["wall_s"].append(round(r["wall_s"], 2))
                        c["errors"] = r["errors"][:3]
                        if "sizes" not in c:
                            c["sizes"] = sizes(r["requests"], paths[tool], url, stand_ins)
                            gzip_size.cache_clear()  # (it would keep every document it was given)
                        if r["error"] is not None:
                            browser.close()  # (a renderer still busy would take a core from every later load)
                            browser = launch()
                            c["status"], c["why"] = (
                                "failed",
                                why_not_drawn(r, args.draw_limit, args.memory_gb, rss.peak),
                            )
                            c["at_the_cap"] = rss.peak >= 0.85 * args.memory_gb * 1e9
                            if c["first_ms"]:
                                c["why"] += f" (on load {c['loads']}; drawn on the {len(c['first_ms'])} before)"
                            failed_at[tool] = n
                            print(f"  {tool:<11} load {c['loads']}: failed: {c['why']}", flush=True)
                            continue
                        c["first_ms"].append(round(r["first"], 1))
                        c["heap_used"].append(r["then"].get("used"))
                        c["heap_total"].append(r["then"].get("total"))
                        print(
                            f"  {tool:<11} load {c['loads']}: first paint {r['first']:,.0f} ms, heap "
                            f"{fmt_bytes(r['then'].get('used'))}",
                            flush=True,
                        )
                        for seconds, count in FEWER_SAMPLES:
                            if c["loads"] == 1 and r["wall_s"] >= seconds:
                                wanted[tool] = min(wanted[tool], count)
                                c["note"] = (
                                    f"{count} load{'s' if count > 1 else ''}: the first took {r['wall_s']:.0f} s"
                                )
                                break
                for tool, path in paths.items():
                    c = cells[tool][n]
                    if c.get("at_the_cap") and args.retry_memory_gb > args.memory_gb:
                        c["retry"] = retry(p, tool, n, path, folder, server, stand_ins, code, args)
                        c["why"] += f"; given {args.retry_memory_gb:g} GB: {c['retry']['said']}"
                        print(f"  {tool:<11} given {args.retry_memory_gb:g} GB: {c['retry']['said']}", flush=True)
                    if c["status"] is None:
                        c["status"] = "survived"
                        c["first_median_ms"] = float(statistics.median(c["first_ms"]))
                        heaps = [x for x in c["heap_used"] if x is not None]
                        c["heap_used_median"] = float(statistics.median(heaps)) if heaps else None
                    path.unlink(missing_ok=True)  # (the big pages take the disk's and the cache's room)
                ratios(cells, n)
        finally:
            browser.close()
            server.close()
    load["end"] = os.getloadavg()
    info["load_average"] = load
    return {
        "config": {
            "ns": list(args.ns),
            "tools": list(args.tools),
            "attnwidget_commit": commit,
            "heads": HEADS,
            "d": D,
            "seed": SEED,
            "samples": args.samples,
            "fewer_samples_after_s": dict(FEWER_SAMPLES),
            "write_limit_s": args.write_limit,
            "draw_limit_s": args.draw_limit,
            "memory_cap_gb": args.memory_gb,
            "retry_memory_gb": args.retry_memory_gb,
            "input_limit_gb": INPUT_GB,
            "viewport": sbs.VIEWPORT,
            "chromium_args": CHROMIUM_ARGS,
        },
        "machine": info,
        "paint_conditions": FIRST,
        "results": {tool: {str(n): c for n, c in cells[tool].items()} for tool in args.tools},
        "run_seconds": round(time.monotonic() - began, 1),
    }


def ratios(cells: dict, n: int) -> None:
    """Each tool's first paint, bytes sent and heap against attnwidget's at the same n, in the same run."""
    base = cells["attnwidget"][n]
    for tool in cells:
        c = cells[tool][n]
        mine_bytes, base_bytes = (x.get("sizes", {}).get("total_bytes") for x in (c, base))
        c["ratio_to_attnwidget"] = {
            "first_paint": c["first_median_ms"] / base["first_median_ms"]
            if c.get("first_median_ms") and base.get("first_median_ms")
            else None,
            "total_bytes": mine_bytes / base_bytes if mine_bytes and base_bytes else None,
            "heap_used": c["heap_used_median"] / base["heap_used_median"]
            if c.get("heap_used_median") and base.get("heap_used_median")
            else None,
        }


# ---------------------------------------------------------------------------------------------
# Reporting


def size(v) -> str:
    return f"{v / 1e9:.2f} GB" if v and v >= 1e9 else fmt_bytes(v)


def grid_cell(c: dict) -> str:
    sent = size(c.get("sizes", {}).get("total_bytes")) if c.get("sizes") else None
    if c["status"] == "survived":
        return f"{fmt_ms(c['first_median_ms'])} ms; {sent}; heap {size(c['heap_used_median'])}"
    if c["status"] == "failed":
        return f"**failed**: {c['why']}" + (f" ({sent} sent)" if sent else "")
    if c["status"] == "not tried":
        return f"– ({c['why']})"
    return f"{c['status']}: {c['why']}"


def ratio(v) -> str:
    return "–" if v is None else f"{v:,.1f}" if v >= 10 else f"{v:.2f}"


def markdown(report: dict) -> str:
    m, res, cfg = report["machine"], report["results"], report["config"]
    ns = cfg["ns"]
    out = [
        "# Long texts side by side: attnwidget's LongWidget page, bertviz, CircuitsVis, Inspectus, attnview",
        "",
        f"The same random attention ({cfg['heads']} heads, d = {cfg['d']}, seed {cfg['seed']}, one layer) at "
        f"{', '.join(f'{n:,}' for n in ns)} tokens, each tool's page in headless Chromium, in one run "
        f"({report['run_seconds'] / 60:.0f} min, {m['date']}). A page survives when it is written within "
        f"{cfg['write_limit_s']:.0f} s and draws within {cfg['draw_limit_s']:.0f} s of navigation start on every "
        "load, without a crash; a tool that fails at one length is not tried at larger ones. Each cell: first "
        "paint (median ms); bytes sent (the document and every script it loads); JS heap used after the paint.",
        "",
        "| tool | " + " | ".join(f"n = {n:,}" for n in ns) + " |",
        "| --- | " + " | ".join("---" for _ in ns) + " |",
    ]
    out += [f"| {NAMES[t]} | " + " | ".join(grid_cell(res[t][str(n)]) for n in ns) + " |" for t in cfg["tools"]]
    out += [
        "",
        "## Each tool and length",
        "",
        "× LongWidget: the ratio to attnwidget's LongWidget page at the same n, in the same run.",
        "",
        "| tool | n | status | page written, s | loads | first paint, median ms (range) | × LongWidget | document "
        "| total sent | total gzip | × LongWidget | JS heap used | × LongWidget | largest Chromium process, peak RSS |",
        "| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for n in ns:
        for t in cfg["tools"]:
            c = res[t][str(n)]
            if c["status"] in ("not tried", "not attempted"):
                continue
            sz, r = c.get("sizes") or {}, c.get("ratio_to_attnwidget") or {}
            paint = (
                f"{fmt_ms(c['first_median_ms'])} ({fmt_ms(min(c['first_ms']))}–{fmt_ms(max(c['first_ms']))})"
                if c.get("first_median_ms")
                else "–"
            )
            heap = size(c.get("heap_used_median")) if c.get("heap_used_median") else "–"
            row = [NAMES[t], f"{n:,}", c["status"] + (f": {c['why']}" if c["why"] else "")]
            row += [f"{c['write_s']:.2f}" if c.get("write_s") is not None else "–", str(c["loads"]), paint]
            row += [ratio(r.get("first_paint")), size(sz.get("document_bytes")), size(sz.get("total_bytes"))]
            row += [size(sz.get("total_gzip_bytes")), ratio(r.get("total_bytes")), heap, ratio(r.get("heap_used"))]
            row += [size(max(c["peak_rss"])) if c["peak_rss"] else "–"]
            out.append("| " + " | ".join(row) + " |")
    out += ["", "## What each tool does at long lengths", ""]
    for t in cfg["tools"]:
        gone = [(n, res[t][str(n)]) for n in ns if res[t][str(n)]["status"] in ("failed", "not attempted")]
        lived = [n for n in ns if res[t][str(n)]["status"] == "survived"]
        end = (
            f"Here it survived up to {max(lived):,} tokens (its page and what it loads: "
            + ", ".join(
                f"{size(res[t][str(n)]['sizes']['total_bytes'])} at {n:,}" for n in dict.fromkeys((lived[0], lived[-1]))
            )
            + ")"
            if lived
            else "Here it survived no length tried"
        ) + (f"; at {gone[0][0]:,}: {gone[0][1]['status']}, {gone[0][1]['why'].rstrip('.')}." if gone else ".")
        out.append(f"- {NAMES[t]}: {WHAT[t]} {end}")
    notes = [
        f"- {NAMES[t]}, n = {int(n):,}: {c['note']}" for t in cfg["tools"] for n, c in res[t].items() if c.get("note")
    ]
    load = m["load_average"]
    out += [
        "",
        "## How it is measured",
        "",
        "- The data: benchmarks/side_by_side.py's random q, k, v (`make_data`); bertviz, CircuitsVis, Inspectus "
        "and attnview are given its weights (12 × n × n, computed by `attnwidget.attention` per head, not causal), "
        "attnwidget's `LongWidget(tokens=, q=, k=, v=)` the q, k and v (causal) and its default `to_html` export.",
        f"- Each page is written by the tool's Python API in a child process, given {cfg['write_limit_s']:.0f} s "
        f"(then killed) and at most {cfg['memory_cap_gb']:g} GB of data (RLIMIT_DATA). A tool that needs the "
        f"whole matrix is not attempted past {cfg['input_limit_gb']:g} GB of it as float32. A cell that failed "
        f"at the cap (a MemoryError in the writing, or a load whose largest Chromium process came within 15 % of "
        f"it) is tried once more with {cfg.get('retry_memory_gb', 12):g} GB (written again if need be, one load "
        'in a browser of its own), reported after "given … GB": whether the cap decided it.',
        "- Each load: side_by_side.py's `load_once`: a new browser context, the page from a local HTTP server, "
        "CDN scripts (bertviz's, CircuitsVis's) from local copies through Playwright routing, and a watcher that "
        "checks the tool's paint condition at the start of every animation frame and reports `performance.now()` "
        f"at the start of the next one. Each load is capped at {cfg['draw_limit_s']:.0f} s; every Chromium "
        f"process may allocate at most {cfg['memory_cap_gb']:g} GB of data (RLIMIT_DATA: past it an allocation "
        "fails in the page, as a RangeError or a crash).",
        "- First paint: LongWidget: its map canvas shows the whole map and has a non-blank pixel. bertviz, "
        "CircuitsVis, Inspectus: side_by_side.py's conditions (the SVG's attention lines; a non-blank Chart.js "
        "canvas; the matrix SVG's first cell). attnview: its strongest-keys cards are in the page. The tools do "
        "not draw the same thing first (LongWidget a 256² pooled map of one head, Inspectus every cell of one head, "
        "attnview one query's row, bertviz and CircuitsVis every head): the times say how soon each shows its "
        "first view.",
        "- Peak RSS: the largest resident set of any one Chromium process (the browser's or one it started) "
        "during a load, sampled every 0.2 s from /proc; the most over the cell's loads.",
        f"- {cfg['samples']} loads per cell, taking turns in a rotating order; 2 when the first took 10 s, 1 when "
        "30 s. JS heap: CDP `Performance.getMetrics` `JSHeapUsedSize` right after the paint, median of the loads.",
        "- Bytes: side_by_side.py's `sizes`: the document and every script it loads, as bodies; gzip at level 6.",
        *notes,
        "",
        "## Machine",
        "",
        f"- run: {m['date']}; {m['nproc']} CPUs ({m['cpu']}); Chromium {m['chromium']}; Python {m['python']}",
        f"- attnwidget: commit {cfg.get('attnwidget_commit')}, taken out with `git archive` and its bundle built there "
        "(benchmarks/against.py's `materialise`), so that edits to the working tree during the run do not reach it",
        "- Python packages: " + ", ".join(f"{k} {v}" for k, v in m["python_packages"].items()),
        "- npm packages (benchmarks/package.json): " + ", ".join(f"{k}@{v}" for k, v in m["npm_packages"].items()),
        "- load average (1, 5, 15 min): "
        + "; ".join(
            f"{'at n = ' + f'{int(k):,}' if k.isdigit() else k} {', '.join(f'{x:.2f}' for x in v)}"
            for k, v in load.items()
        ),
        "",
    ]
    return "\n".join(out)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ns", type=int, nargs="+", default=list(NS), help="token counts (default: %(default)s)")
    parser.add_argument(
        "--ref", default="HEAD", help="the commit whose attnwidget writes its pages (default: %(default)s)"
    )
    parser.add_argument(
        "--tools", nargs="+", choices=TOOLS, default=list(TOOLS), help="the tools (attnwidget always; default: all)"
    )
    parser.add_argument("--samples", type=int, default=SAMPLES, help="loads per tool and n (default: %(default)s)")
    parser.add_argument("--write-limit", type=float, default=120.0, help="seconds to write a page (default: 120)")
    parser.add_argument("--draw-limit", type=float, default=60.0, help="seconds for a page to draw (default: 60)")
    parser.add_argument(
        "--memory-gb", type=float, default=8.0, help="data cap of the writing process and of each Chromium process"
    )
    parser.add_argument(
        "--retry-memory-gb",
        type=float,
        default=12.0,
        help="a cell that failed at the memory cap is tried once more with this much (default: %(default)s)",
    )
    parser.add_argument("--chromium", default=os.environ.get("ATTNWIDGET_CHROMIUM", "/usr/bin/chromium"))
    parser.add_argument("--out", default=str(RESULTS / "side_by_side_long"), help="results path without extension")
    parser.add_argument("--report-only", action="store_true", help="rewrite the .md from the .json")
    parser.add_argument("--write", nargs=3, metavar=("TOOL", "N", "PATH"), help=argparse.SUPPRESS)  # (the child)
    args = parser.parse_args(argv)
    if args.write:
        return child(args.write[0], int(args.write[1]), args.write[2], args.write_limit, args.memory_gb)
    args.tools = [t for t in TOOLS if t in args.tools or t == "attnwidget"]
    out = pathlib.Path(args.out)
    if args.report_only:
        report = json.loads(out.with_suffix(".json").read_text(encoding="utf-8"))
    else:
        report = run(args)
        out.with_suffix(".json").write_text(json.dumps(report, indent=1), encoding="utf-8")
    md = markdown(report)
    out.with_suffix(".md").write_text(md, encoding="utf-8")
    print("\n" + md)


if __name__ == "__main__":
    main()
