"""The working tree's page against an earlier commit's, measured in one run, interleaved.

    python benchmarks/against.py                  # against 600ad33; writes benchmarks/results/against.{json,md}
    python benchmarks/against.py --against REF    # another commit, tag or branch
    python benchmarks/against.py --quick          # fewer rounds, a smoke test (about 2 minutes)

The earlier commit is taken out of git without touching the working tree (``git archive REF``
into /tmp/against-REF, with a copy of node_modules, its bundle built there by its own
``scripts/build.mjs``); the working tree's bundle is built too. Each side then exports the same
three widgets to standalone pages with its own code (a subprocess with ``PYTHONPATH=<side>/src``):

- ``arrays``: 256 tokens × 12 heads, d = 64, seeded random q, k and v (run.py's ``qkv``);
- ``model``: ``AttentionWidget.from_transformers`` on a randomly initialised GPT-2-shaped model
  (4 layers × 12 heads, width 768, eager, nothing downloaded) reading 64 words of a word-level
  tokenizer (views.py's), one token each;
- ``lab``: the default ``AttentionWidget()``.

Both sides' pages are opened in the same headless Chromium, alternately (round r opens each page
old then new, round r + 1 new then old; each page twice a side a round, the second time for its
first paint alone), and are measured the way run.py measures them: first paint
(``root.attnwidget.firstPaint``, from navigation start and from the widget's script start,
``renderStart``), and the main-thread work per change by Chrome's task timer (CDP
``Performance.getMetrics``, ``TaskDuration`` in thread time) across the change and the two frames
that redraw it, less the same two frames with no change (their median is taken off the median and
the p95). The changes go through the page's model (``root.attnwidget.model.set``), the same values
on both sides, each a real change, each trait set back (untimed) before the next kind: a
temperature step, a focus change, a head change, a stage change and, on the model's page, a layer
change and choosing a measure of the panel beyond one head (those its buttons offer, enabled, on
both sides; the exported page carries their matrices).

The table gives each measure's median and p95 for both sides and new/old of the medians. A
median more than 10 % worse is measured again (the same interleaving, that measure alone) before
it is reported as a regression. The machine's load average is recorded before and after (and at
each round): on a shared two-core machine only the ratios of one run mean much.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

# benchmarks/run.py and views.py: the browser's flags, the frames and task timer, first paint, medians
# and p95, the machine line, the model's tokenizer and texts
from run import CHROMIUM_ARGS, DRAWN, chromium_path, first_paint, machine, qkv, stats  # noqa: E402
from run import task_samples as work_per_change  # noqa: E402  (samples kept to pool over page loads)
from views import build_tokenizer, source, text  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results"
DEFAULT_REF = "600ad33"
ARRAYS_N, ARRAYS_HEADS, D = 256, 12, 64
MODEL_N, MODEL_LAYERS, MODEL_HEADS, MODEL_WIDTH = 64, 4, 12, 768
WORDS = 1000  # views.py's tokenizer: w0 … w999
REGRESSION = 1.10  # new/old of the medians past which a measure is measured again
ROOT_JS = "document.querySelector('.aw-root').attnwidget"

# Run in a subprocess with PYTHONPATH=<side>/src: the three pages, exported by that side's own code.
EXPORT = r"""
import json, pathlib, sys
import numpy as np
import attnwidget
from attnwidget import AttentionWidget

out, arrays, model_dir, tokenizer_dir, words = sys.argv[1:6]
out = pathlib.Path(out)
a = np.load(arrays)
made = {"attnwidget": attnwidget.__file__, "pages": {}}

def export(name, w):
    path = out / f"{name}.html"
    w.to_html(path, theme="light")
    made["pages"][name] = {"path": str(path), "bytes": path.stat().st_size, "tokens": len(w.tokens),
                           "heads": int(np.shape(w.q)[0]) if np.ndim(w.q) == 3 else 1, "stage": w.stage}

n = a["q"].shape[1]
export("arrays", AttentionWidget(q=a["q"], k=a["k"], v=a["v"], tokens=[f"t{i}" for i in range(n)], stage="weights"))
import transformers
model = transformers.GPT2LMHeadModel.from_pretrained(model_dir, attn_implementation="eager").eval()
tokenizer = transformers.AutoTokenizer.from_pretrained(tokenizer_dir)
export("model", AttentionWidget.from_transformers(model, tokenizer, words, stage="weights"))
export("lab", AttentionWidget())
print(json.dumps(made))
"""


# --- the two sides ------------------------------------------------------------------------


def git(*args) -> str:
    return subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True, check=True).stdout.strip()


def build(folder: pathlib.Path) -> None:
    subprocess.run(["node", "scripts/build.mjs"], cwd=folder, check=True)


def materialise(ref: str) -> pathlib.Path:
    """REF's tree in /tmp/against-REF (made anew), with a real copy of node_modules and its bundle built."""
    folder = pathlib.Path(tempfile.gettempdir()) / f"against-{ref.replace('/', '_')}"
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir()
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", ref], capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(folder)], input=archive, check=True)
    shutil.copytree(ROOT / "node_modules", folder / "node_modules", symlinks=True)
    build(folder)
    return folder


def model_inputs(tmp: pathlib.Path) -> tuple[pathlib.Path, pathlib.Path, pathlib.Path, str]:
    """The arrays widget's q, k, v; a random GPT-2-shaped model and views.py's tokenizer, saved to
    folders both sides load from (the same weights on both); the model's 64-word text."""
    import torch
    import transformers

    q, k, v = qkv(ARRAYS_HEADS, ARRAYS_N, D, seed=ARRAYS_N + ARRAYS_HEADS)
    arrays = tmp / "arrays.npz"
    np.savez(arrays, q=q, k=k, v=v)
    torch.manual_seed(0)
    config = transformers.GPT2Config(
        n_layer=MODEL_LAYERS,
        n_head=MODEL_HEADS,
        n_embd=MODEL_WIDTH,
        vocab_size=WORDS + 1,
        n_positions=MODEL_N,
        bos_token_id=WORDS,
        eos_token_id=WORDS,
    )
    model_dir, tokenizer_dir = tmp / "model", tmp / "tokenizer"
    transformers.GPT2LMHeadModel(config).eval().save_pretrained(model_dir)
    build_tokenizer(tokenizer_dir)
    return arrays, model_dir, tokenizer_dir, text(MODEL_N)


def export(side: pathlib.Path, out: pathlib.Path, inputs) -> dict:
    out.mkdir(parents=True)
    env = {**os.environ, "PYTHONPATH": str(side / "src"), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    done = subprocess.run(
        [sys.executable, "-c", EXPORT, str(out), *map(str, inputs)], env=env, capture_output=True, text=True
    )
    if done.returncode:
        raise RuntimeError(f"exporting with {side}/src failed:\n{done.stderr[-3000:]}")
    made = json.loads(done.stdout.strip().splitlines()[-1])
    if not made["attnwidget"].startswith(str(side / "src")):
        raise RuntimeError(f"the export imported {made['attnwidget']}, not {side}/src's attnwidget")
    return made


# --- the page -----------------------------------------------------------------------------


class Pages:
    """One headless Chromium, with run.py's flags and viewport, for both sides' pages."""

    def __init__(self, p):
        self.browser = p.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS)
        self.errors: list[str] = []

    def open(self, path: str):
        page = self.browser.new_page(viewport={"width": 1280, "height": 1000}, bypass_csp=True)
        page.on("pageerror", lambda e: self.errors.append(f"{pathlib.Path(path).parent.name}: {e}"))
        page.goto(pathlib.Path(path).as_uri())
        page.wait_for_selector(".aw-root")
        return page


def offered_measures(page) -> list[str]:
    """The panel's measures its buttons offer and do not mark unavailable."""
    return page.evaluate(
        "[...document.querySelectorAll('.aw-measure-choice')]"
        ".filter((b) => b.getAttribute('aria-disabled') !== 'true').map((b) => b.dataset.measure)"
    )


# Each kind of change: the trait it sets, and its values in turn (a function of the page and the
# measures offered). A page's first value always differs from the trait's value on opening and each
# value from the one before, so every sample is a real change; after a kind's changes the trait is
# set back, untimed, so the next kind starts from the page as it opened.
TEMPERATURES = [float(t) for t in np.exp(np.linspace(np.log(0.15), np.log(4.5), 23))]
STAGES = ("scores", "weights", "blend", "qk")
KINDS = {
    "temperature step": ("temperature", lambda info, measures: [TEMPERATURES[(7 * j) % 23] for j in range(23)]),
    "focus change": ("focus", lambda info, measures: list(range(info["tokens"]))),
    "head change": ("head", lambda info, measures: list(range(info["heads"]))),
    "stage change": ("stage", lambda info, measures: list(STAGES)),
    "layer change": ("layer", lambda info, measures: list(range(MODEL_LAYERS))),
    "choosing a measure": ("measure", lambda info, measures: measures if len(measures) > 1 else [*measures, ""]),
}
CHANGES = ("temperature step", "focus change", "head change", "stage change")
MODEL_CHANGES = (*CHANGES, "layer change", "choosing a measure")


def kinds(widget: str, info: dict) -> list[str]:
    out = MODEL_CHANGES if widget == "model" else CHANGES
    return [w for w in out if not (w == "head change" and info["heads"] < 2)]


def changes_for(what: str, info: dict, measures: list[str], start, r: int, k: int) -> list:
    """The k changes of kind `what` on round r's page (whose trait opened at `start`): the same on
    both sides; focus changes are drawn at random (seeded by the round), the rest taken in turn."""
    trait, values = KINDS[what]
    values = values(info, measures)
    if what == "focus change":
        values = [int(f) for f in np.random.default_rng(1000 + r).permutation(values)]
    else:
        values = values[r * k % len(values) :] + values[: r * k % len(values)]
    out, last = [], start
    for v in values * 2:
        if v != last:
            out.append((trait, v))
            last = v
        if len(out) == k:
            return out
    raise ValueError(f"{what}: fewer than {k} values to change to")


def opening(page) -> dict:
    return page.evaluate(
        f"(names) => Object.fromEntries(names.map((n) => [n, {ROOT_JS}.model.get(n)]))",
        [trait for trait, _ in KINDS.values()],
    )


def measure_rounds(
    pages: Pages, made: dict, measures: list[str], rounds: int, k: int, paints: int, only=None, log=print
) -> dict:
    """Interleaved rounds: in round r each widget's page is opened on one side then on the other
    (old first in even rounds, new first in odd ones), its first paint read and k changes of each
    kind made; then opened `paints - 1` more times on each side, alternately, for its first paint
    alone. only: {widget: [measures]} to measure just those (a second look at a regression).
    Returns samples[widget][measure][side]: {"work": [...], "idle": [...], "refused": [...]}, or
    for a paint time a list of ms."""
    samples: dict = {"_load_by_round": []}
    widgets = list(only) if only else list(made["old"]["pages"])
    for r in range(rounds):
        samples["_load_by_round"].append(os.getloadavg()[0])
        order = ("old", "new") if r % 2 == 0 else ("new", "old")
        for widget in widgets:
            box = samples.setdefault(widget, {})
            wanted = [w for w in kinds(widget, made["old"]["pages"][widget]) if not only or w in only[widget]]
            for load in range(paints):
                for side in order:
                    info = made[side]["pages"][widget]
                    page = pages.open(info["path"])
                    fp, start = first_paint(page)
                    for what, ms_ in (
                        ("first paint (from navigation start)", fp),
                        ("first paint (from the widget's script start)", fp - start),
                    ):
                        box.setdefault(what, {}).setdefault(side, []).append(ms_)
                    if load == 0 and wanted:
                        before = opening(page)
                        for what in wanted:
                            trait = KINDS[what][0]
                            changes = changes_for(what, info, measures, before[trait], r, k)
                            work, idle, refused = work_per_change(page, changes)
                            s = box.setdefault(what, {}).setdefault(side, {"work": [], "idle": [], "refused": []})
                            s["work"] += work
                            s["idle"] += idle
                            s["refused"] += refused
                            page.evaluate(f"([n, v]) => {ROOT_JS}.model.set(n, v)", [trait, before[trait]])
                            page.evaluate(DRAWN)
                    page.close()
        log(f"  round {r + 1}/{rounds} done (load average at its start {samples['_load_by_round'][-1]:.2f})")
    return samples


def summarise(samples: dict) -> dict:
    """Per widget and measure: old's and new's median and p95, and new/old of the medians."""
    out = {}
    for widget, box in samples.items():
        if widget.startswith("_"):
            continue
        for what, sides in box.items():
            row = {}
            for side, s in sides.items():
                if isinstance(s, list):  # a paint time, ms from navigation or script start
                    row[side] = stats(s)
                else:
                    r = stats(s["work"])
                    r["idle_median"] = stats(s["idle"])["median"]
                    r["median"] -= r["idle_median"]
                    r["p95"] -= r["idle_median"]
                    r["refused"] = s["refused"]
                    row[side] = r
            old, new = row["old"]["median"], row["new"]["median"]
            row["ratio"] = new / old if old > 0 else None
            out.setdefault(widget, {})[what] = row
    return out


# --- the report ---------------------------------------------------------------------------

WIDGETS = {
    "arrays": f"{ARRAYS_N} tokens × {ARRAYS_HEADS} heads, d = {D} (random q, k, v)",
    "model": f"GPT-2 shape, {MODEL_LAYERS} layers × {MODEL_HEADS} heads, width {MODEL_WIDTH}, {MODEL_N} tokens "
    "(from_transformers)",
    "lab": "the default AttentionWidget()",
}


def ms(v) -> str:
    return f"{v:,.2f}"


def table(summary: dict, confirmed: dict) -> list[str]:
    lines = [
        "| widget | measure | old median | old p95 | new median | new p95 | new/old | samples (each) |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for widget, rows in summary.items():
        for what, row in rows.items():
            old, new, ratio = row["old"], row["new"], row["ratio"]
            shown = "–" if ratio is None else f"×{ratio:.2f}"
            if (widget, what) in confirmed:
                again = confirmed[(widget, what)]["ratio"]
                shown += f" (again: ×{again:.2f})" if again is not None else ""
            lines.append(
                f"| {widget} | {what} | {ms(old['median'])} | {ms(old['p95'])} | {ms(new['median'])} | "
                f"{ms(new['p95'])} | {shown} | {old['n']} |"
            )
    return lines


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--against", default=DEFAULT_REF, help="the earlier commit (default: %(default)s)")
    parser.add_argument("--quick", action="store_true", help="fewer rounds and changes, a smoke test")
    parser.add_argument(
        "--out", default=str(RESULTS / "against"), help="results path without extension (default: %(default)s)"
    )
    args = parser.parse_args()
    rounds, k, paints = (3, 2, 1) if args.quick else (9, 3, 2)
    again_rounds = 3 if args.quick else 8
    os.environ.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    started, load_before = time.perf_counter(), os.getloadavg()
    log = lambda s: print(s, flush=True)

    ref = git("rev-parse", "--short", args.against)
    log(f"materialising {args.against} ({ref}) and building both bundles")
    old_side = materialise(args.against)
    build(ROOT)
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as tmp, sync_playwright() as p:
        tmp = pathlib.Path(tmp)
        inputs = model_inputs(tmp)
        made = {side: export(folder, tmp / side, inputs) for side, folder in (("old", old_side), ("new", ROOT))}
        for side in made:
            log(f"  {side}: " + ", ".join(f"{w} {v['bytes']:,} bytes" for w, v in made[side]["pages"].items()))
        pages = Pages(p)
        # a first load of each page on each side, not counted (the browser's caches and compiler warm);
        # it also reads the measures the model's page offers, of which those offered on both are chosen
        offered = {}
        for side in ("old", "new"):
            for widget, info in made[side]["pages"].items():
                page = pages.open(info["path"])
                first_paint(page)
                if widget == "model":
                    offered[side] = offered_measures(page)
                page.close()
        measures = [m for m in offered["old"] if m in offered["new"]]
        if not measures:
            raise RuntimeError(f"the model's pages offer no measure in common: {offered}")
        log(f"measures chosen on the model's page: {measures} (offered: {offered})")
        log(f"{rounds} rounds, {k} changes of each kind per page load")
        samples = measure_rounds(pages, made, measures, rounds, k, paints, log=log)
        summary = summarise(samples)

        # a median more than 10 % worse: measured again, that measure alone, before it is called a regression
        flagged = {
            (w, what): row["ratio"]
            for w, rows in summary.items()
            for what, row in rows.items()
            if row["ratio"] is not None and row["ratio"] > REGRESSION
        }
        confirmed = {}
        if flagged:
            only: dict = {}
            for w, what in flagged:
                only.setdefault(w, []).append(what)
            log(f"measuring again: {sorted(flagged)}")
            again = summarise(measure_rounds(pages, made, measures, again_rounds, k, paints, only=only, log=log))
            confirmed = {(w, what): again[w][what] for w, what in flagged}
        errors = pages.errors
        pages.browser.close()

    load_after = os.getloadavg()
    regressions = [
        {
            "widget": w,
            "measure": what,
            "ratio": summary[w][what]["ratio"],
            "again": confirmed[(w, what)]["ratio"],
            "old_median_again": confirmed[(w, what)]["old"]["median"],
            "new_median_again": confirmed[(w, what)]["new"]["median"],
            "confirmed": (confirmed[(w, what)]["ratio"] or 0) > REGRESSION,
        }
        for w, what in confirmed
    ]
    results = {
        "machine": {**machine(), "load_before": load_before, "load_after": load_after},
        "new": {**source(), "what": "the working tree"},
        "old": {"ref": args.against, "commit": ref, "folder": str(old_side)},
        "settings": {
            "rounds": rounds,
            "changes_per_load": k,
            "loads_per_round": paints,
            "again_rounds": again_rounds,
            "measures": measures,
        },
        "pages": {side: made[side]["pages"] for side in made},
        "load_by_round": samples["_load_by_round"],
        "results": summary,
        "again": {f"{w} / {what}": v for (w, what), v in confirmed.items()},
        "regressions": regressions,
        "page_errors": errors,
        "seconds": time.perf_counter() - started,
    }
    out = pathlib.Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps(results, indent=2) + "\n")
    lines = report(results, confirmed)
    out.with_suffix(".md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


def report(results: dict, confirmed: dict) -> list[str]:
    m, old, new, s = results["machine"], results["old"], results["new"], results["settings"]
    lines = [
        f"# The working tree against {old['ref']} ({old['commit']})",
        "",
        f"New: the working tree at {new['commit']}" + (" (src/ changed since)" if new["src_changed"] else "") + ". "
        f"Old: `git archive {old['ref']}`, its own bundle. Both exported by their own code, their pages opened "
        "alternately in one headless Chromium (benchmarks/against.py).",
        "",
        f"Machine: {m['cpus']} × {m['cpu']}, Python {m['python']}, node {m['node']}. Load average (1, 5, 15 min) "
        f"before: {', '.join(f'{x:.2f}' for x in m['load_before'])}; after: "
        f"{', '.join(f'{x:.2f}' for x in m['load_after'])}; at each round's start: "
        f"{', '.join(f'{x:.2f}' for x in results['load_by_round'])}.",
        "",
        f"{s['rounds']} rounds; in each, every page loaded {s['loads_per_round']} times on each side, alternately "
        f"(first paint each time), and {s['changes_per_load']} changes of each kind made on its first load, each "
        "trait set back after its kind. Main-thread work is Chrome's task timer over the change and two frames, "
        "less two idle frames' median; first paint is ms from navigation start (or from the widget's script "
        "start). Times in ms.",
        "",
        "Pages (bytes, old → new): "
        + "; ".join(
            f"{w} {results['pages']['old'][w]['bytes']:,} → {results['pages']['new'][w]['bytes']:,}"
            for w in results["pages"]["old"]
        )
        + f". The model's measures chosen in turn: {', '.join(s['measures'])}.",
        "",
    ]
    lines += [f"- **{w}**: {what}" for w, what in WIDGETS.items()] + [""]
    lines += table(results["results"], confirmed) + [""]
    regs = results["regressions"]
    if not regs:
        lines.append(f"No median is more than {REGRESSION - 1:.0%} worse than the old side's.")
    for r in regs:
        verdict = "**a regression, confirmed**" if r["confirmed"] else "not confirmed on a second look"
        lines.append(
            f"- {r['widget']} / {r['measure']}: ×{r['ratio']:.2f} at first, ×{r['again']:.2f} measured again "
            f"({ms(r['old_median_again'])} → {ms(r['new_median_again'])} ms): {verdict}."
        )
    refused = [
        f"{w} / {what} ({side}): {'; '.join(sorted(set(row[side]['refused'])))}"
        for w, rows in results["results"].items()
        for what, row in rows.items()
        for side in ("old", "new")
        if row[side].get("refused")
    ]
    if refused:
        lines += ["", "Changes a page refused (their samples are still counted): " + " | ".join(refused)]
    if results["page_errors"]:
        lines += ["", "Page errors: " + " | ".join(sorted(set(results["page_errors"])))]
    lines += ["", f"The run took {results['seconds']:.0f} s."]
    return lines


if __name__ == "__main__":
    main()
