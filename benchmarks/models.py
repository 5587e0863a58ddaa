"""Real models at their real size, live in JupyterLab: a model shaped like GPT-2 small (12 layers
× 12 heads, d_head 64) at 1,024 tokens and one with Llama-3-8B's attention (32 layers × 32 heads,
8 KV heads, d_head 128; random weights, a small MLP and vocabulary) at 2,048 tokens.

    python benchmarks/models.py                 # both shapes (the Llama one takes minutes)
    python benchmarks/models.py --only gpt2-small   # that shape again; the other's numbers are kept

For each shape, in a notebook in a real JupyterLab and headless Chromium: the kernel's read time
and peak memory (from_transformers), then from the cell that displays the widget: its first
paint, the complete overview (computed in the kernel), a click on another layer until the page
has drawn it (median of a few), every byte the page received from the kernel, the page's JS
heap, and the saved notebook's widget state. Beside them, bertviz's model_view on the same
attention, built in a separate process with a memory limit: the size of its page, or where it
stops. Writes benchmarks/results/models.json and .md.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "browser"))
RESULTS = ROOT / "benchmarks" / "results"

SHAPES = {
    "gpt2-small": dict(
        n=1024,
        config="GPT2Config(n_embd=768, n_layer=12, n_head=12, n_positions=1024, vocab_size=512)",
        model="GPT2Model",
    ),
    "llama-3-8b": dict(
        n=2048,
        config=(
            "LlamaConfig(hidden_size=4096, num_hidden_layers=32, num_attention_heads=32, num_key_value_heads=8, "
            "head_dim=128, intermediate_size=256, vocab_size=512, max_position_embeddings=2048)"
        ),
        model="LlamaModel",
    ),
}

SETUP = """
import time, resource, numpy as np, torch, transformers
from attnwidget import AttentionWidget
torch.manual_seed(0)
model = transformers.{model}(transformers.{config}).eval()
model = model.to("cuda") if torch.cuda.is_available() else model  # where there is a GPU, \
the model and its overview run on it
class Tokens:  # n random ids as a text: the shape is what is measured, not a tokenizer
    all_special_tokens = []
    def __call__(self, text, return_tensors=None):
        ids = torch.randint(0, 512, (1, {n}), generator=torch.Generator().manual_seed(1))
        return {{"input_ids": ids, "attention_mask": torch.ones_like(ids)}}
    def convert_ids_to_tokens(self, ids):
        return [f"t{{i}}" for i in ids]
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
start = time.perf_counter()
w = AttentionWidget.from_transformers(model, Tokens(), "text", stage="weights", summary="effective_tokens")
read_s = time.perf_counter() - start
peak_gb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6
weights_gb = sum(p.numel() * p.element_size() for p in model.parameters()) / 1e9
"""
SHOW = "shown_at = time.time()\nw"

BERTVIZ = """
import resource, sys, time, torch, transformers
resource.setrlimit(resource.RLIMIT_AS, ({limit}, {limit}))
from bertviz import model_view
torch.manual_seed(0)
model = transformers.{model}(transformers.{config}).eval()
model.set_attn_implementation("eager")  # bertviz needs output_attentions
ids = torch.randint(0, 512, (1, {n}), generator=torch.Generator().manual_seed(1))
start = time.perf_counter()
with torch.no_grad():
    attentions = model(input_ids=ids, output_attentions=True).attentions
html = model_view(attentions, [f"t{{i}}" for i in ids[0].tolist()], html_action="return")
print(len(html.data.encode()), time.perf_counter() - start)
"""


def bertviz(shape: dict, n: int, limit_gb: float = 16) -> dict:
    """bertviz's model_view page for the shape at n tokens: its size and build time, or why it stopped."""
    code = BERTVIZ.format(limit=int(limit_gb * 1e9), n=n, **{k: shape[k] for k in ("model", "config")})
    try:
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=900)
    except subprocess.TimeoutExpired:
        return {"n": n, "stopped": "took over 15 minutes"}
    if done.returncode:
        last = (done.stderr.strip().splitlines() or ["killed"])[-1]
        memory = done.returncode < 0 or any(m in done.stderr for m in ("MemoryError", "can't allocate memory"))
        return {"n": n, "stopped": f"out of memory (a {limit_gb:g} GB limit)" if memory else last[:120]}
    size, seconds = done.stdout.split()
    return {"n": n, "page_mb": int(size) / 1e6, "build_s": float(seconds)}


def measure(name: str, shape: dict, lab, browser) -> dict:
    from conftest import _open_notebook

    received = []
    notebook = f"bench-{name}.ipynb"
    page, kernel, errors = None, None, []
    context_hook = browser.new_context  # every websocket frame from the kernel is counted

    def counting(**kw):
        context = context_hook(**kw)
        context.on(
            "page",
            lambda p: p.on(
                "websocket",
                lambda ws: ws.on(
                    "framereceived", lambda f: received.append(len(f) if isinstance(f, (bytes, str)) else 0)
                ),
            ),
        )
        return context

    browser.new_context = counting
    try:
        page, kernel, errors = _open_notebook(
            lab, browser, notebook, [SETUP.format(**shape), SHOW], viewport=(1280, 1400), timeout=900_000
        )
    finally:
        browser.new_context = context_hook
    root = "document.querySelector('.aw-root').attnwidget"
    page.wait_for_function(f"{root} && {root}.firstPaint > 0", timeout=600_000)
    shown_at = kernel.eval("shown_at")
    painted = page.evaluate(f"(performance.timeOrigin + {root}.firstPaint) / 1000")
    page.wait_for_selector(".aw-heads[data-complete=true][data-loading=false]", state="attached", timeout=900_000)
    overview_at = page.evaluate("Date.now() / 1000")
    opening = sum(received)  # the notebook, the widget's state and its overview
    layers = kernel.eval("w.n_layers")
    switches, sent = [], []
    for layer in (layers - 1, layers // 2, 1, 0):
        before = sum(received)
        t = page.evaluate(f"(window.awLastQ = {root}.model.get('q'), performance.now())")
        page.locator(f".aw-head[data-layer='{layer}'][data-head='0']").click()
        # the page sets the layer at once; the wait is for the kernel's arrays of it, then their drawing
        page.wait_for_function(
            f"{root}.model.get('q') !== window.awLastQ && !document.querySelector('.aw-root').dataset.fetching",
            timeout=120_000,
        )
        drawn = page.evaluate(
            "new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(() => r(performance.now()))))"
        )
        switches.append((drawn - t) / 1000)
        time.sleep(0.5)  # the rest of the layer's message, if any
        sent.append(sum(received) - before)
    cdp = page.context.new_cdp_session(page)
    cdp.send("Performance.enable")
    heap = {m["name"]: m["value"] for m in cdp.send("Performance.getMetrics")["metrics"]}["JSHeapUsedSize"]
    page.evaluate("window.jupyterapp.commands.execute('docmanager:save')")
    time.sleep(3)
    saved = json.loads((lab.root / notebook).read_text())
    state = json.dumps(saved.get("metadata", {}).get("widgets", {}))
    out = {
        "tokens": shape["n"],
        "device": kernel.eval("str(next(model.parameters()).device)"),
        "layers": layers,
        "heads": kernel.eval("w.n_heads"),
        "kernel_read_s": kernel.eval("read_s"),
        "kernel_peak_gb": kernel.eval("peak_gb"),
        "model_weights_gb": kernel.eval("weights_gb"),
        "first_paint_s": painted - shown_at,
        "overview_s": overview_at - shown_at,
        "overview_kernel_s": kernel.eval("w._overview.seconds"),  # of that, computing it in the kernel
        "layer_switch_s": statistics.median(switches),
        "layer_switches_s": switches,
        "received_mb": sum(received) / 1e6,
        "opening_mb": opening / 1e6,
        "per_switch_mb": statistics.median(sent) / 1e6,
        "page_heap_mb": heap / 1e6,
        "saved_state_mb": len(state.encode()) / 1e6,
        "page_errors": errors,
    }
    kernel.run("w.close(); del w, model; import gc; gc.collect()")
    kernel.close()
    page.context.close()
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=sorted(SHAPES))
    parser.add_argument("--no-bertviz", action="store_true")
    args = parser.parse_args(argv)
    from conftest import CHROMIUM, CHROMIUM_ARGS, Lab
    from playwright.sync_api import sync_playwright

    # --only measures one shape again: the other's numbers stay as last measured
    report = (
        json.loads((RESULTS / "models.json").read_text()) if args.only and (RESULTS / "models.json").exists() else {}
    )
    with tempfile.TemporaryDirectory() as tmp, sync_playwright() as p:
        lab = Lab(pathlib.Path(tmp))
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            for name, shape in SHAPES.items():
                if args.only and name != args.only:
                    continue
                print(f"{name}: {shape['n']} tokens", flush=True)
                previous = report.get(name)
                report[name] = measure(name, shape, lab, browser)
                print(json.dumps(report[name], indent=1), flush=True)
                if args.no_bertviz:
                    report[name]["bertviz"] = (previous or {}).get("bertviz", [])  # as last measured
                else:
                    report[name]["bertviz"] = [bertviz(shape, n) for n in (256, 512, shape["n"])]
                    print(json.dumps(report[name]["bertviz"]), flush=True)
        finally:
            browser.close()
            lab.stop()
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "models.json").write_text(json.dumps(report, indent=1))
    (RESULTS / "models.md").write_text(markdown(report))
    print(markdown(report))


def markdown(report: dict) -> str:
    rows = [
        ("kernel: read (from_transformers)", "kernel_read_s", "{:.1f} s"),
        ("kernel: peak memory (model weights)", None, None),
        ("first paint after the cell runs", "first_paint_s", "{:.2f} s"),
        ("complete overview after the cell runs", "overview_s", "{:.1f} s"),
        ("… of which the kernel computing it", "overview_kernel_s", "{:.1f} s"),
        ("a click on another layer, drawn (median)", "layer_switch_s", "{:.2f} s"),
        ("bytes from the kernel: opening (state and overview)", "opening_mb", "{:.1f} MB"),
        ("bytes from the kernel: each layer switch", "per_switch_mb", "{:.1f} MB"),
        ("bytes from the kernel: in all (opening and 4 switches)", "received_mb", "{:.1f} MB"),
        ("the page's JS heap", "page_heap_mb", "{:.0f} MB"),
        ("saved widget state", "saved_state_mb", "{:.1f} MB"),
    ]
    names = [n for n in SHAPES if n in report]  # in SHAPES' order, whichever was measured last
    lines = [
        "# Real models at their real size, live in JupyterLab",
        "",
        "| | "
        + " | ".join(f"{n} ({report[n]['tokens']} tokens, {report[n].get('device', 'cpu')})" for n in names)
        + " |",
    ]
    lines.append("| --- |" + " ---: |" * len(names))
    for label, key, form in rows:
        if key is None:
            cells = [f"{report[n]['kernel_peak_gb']:.1f} GB ({report[n]['model_weights_gb']:.1f} GB)" for n in names]
        else:
            cells = [form.format(report[n][key]) if report[n].get(key) is not None else "–" for n in names]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    for n in names:
        for b in report[n].get("bertviz", []):
            said = b.get("stopped") or f"a {b['page_mb']:.0f} MB page, built in {b['build_s']:.1f} s"
            lines.append(f"\nbertviz model_view, {n} shape at {b['n']} tokens: {said}.")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
