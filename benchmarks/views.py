"""How large a text each research view handles in about a second, on a model shaped like GPT-2 small.

    python benchmarks/views.py            # writes benchmarks/results/views.{json,md} (under ~10 minutes)
    python benchmarks/views.py --quick    # fewer samples, smaller texts (under ~2 minutes)

Each view is timed as the Python call the page waits for, on a randomly initialised
GPT2LMHeadModel of GPT-2 small's shape (12 layers × 12 heads, width 768, 2,048 positions; eager
attention, float32, CPU; nothing downloaded) reading texts of random words, one token each:

- ``w.rollout()``, and the page's rollout entry (``computed_views.entry("rollout", w._inputs())``, the layer
  shown the last: rollout through every layer, as the page asks for it there);
- ``w.flow()`` (exact: a maximum flow per pair, so texts of a few dozen tokens);
- ``w.norms()``: its first call for a layer (each sample another layer), and a second call on that
  layer at another temperature, which reuses the layer's Gram matrices;
- ``w.difference(0, 1)`` on a widget of two texts of the same length (one word differs): its
  result is every layer's and head's, layers × heads × n × n in float64 (1.2 GB at 1,024 tokens);
  and the page's difference entry (the head shown's matrix and every head's largest change, which
  the panel and the overview draw), at the last layer;
- ``w.head_effects()`` (a pass of the model per layer; each sample on a new widget, as a widget
  keeps the effects it computed).

Texts double from 16 tokens until a view's median passes a few seconds (or the next size would
not fit in memory or in the time budget); flow and head effects take their own, smaller sizes.
The baseline, measured in the same run at every size: ``w.head_summary()``, which computes every
layer's and head's weights as the views do. Calls under a second get 5 samples (after one warm-up
call), slower ones 3; medians and p95 are reported, and each median's ratio to the baseline's.
Samples taken while other processes kept much of the machine busy are taken again once it is
quieter (see BUSY); the share they took is reported beside every median.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import time

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from run import machine, stats  # noqa: E402  (benchmarks/run.py: the same medians and p95)

from attnwidget import AttentionWidget, computed_views  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results"
LAYERS, HEADS, WIDTH, POSITIONS = 12, 12, 768, 2048
WORDS = 1000  # the tokenizer's vocabulary: w0 … w999, one token each

VIEWS = {  # name -> what is timed
    "rollout": "w.rollout()",
    "rollout entry": 'computed_views.entry("rollout", w._inputs()), at the last layer',
    "flow": "w.flow()",
    "norms, first call": "w.norms(), first call for a layer",
    "norms, again": "w.norms(), again at another temperature (Gram matrices kept)",
    "difference": "w.difference(0, 1), two texts of the same length",
    "difference entry": 'computed_views.entry("difference", w._inputs()), at the last layer',
    "head effects": "w.head_effects()",
}
DOUBLING = (
    "rollout",
    "rollout entry",
    "norms, first call",
    "norms, again",
    "difference",
    "difference entry",
)  # texts 16, 32, 64, …


def memory_needed(view: str, n: int) -> float:
    """Bytes a call holds at its peak, roughly: float64 weights of every layer and head (the difference's
    result), or of one layer's heads at a time (the baseline, norms, rollout: which also holds its n × n
    of every layer)."""
    every, one = LAYERS * HEADS * n * n * 8, HEADS * n * n * 8
    rollout = 4 * one + 2 * LAYERS * n * n * 8
    # (the difference: its result, and each text's layer at a time)
    return {
        "rollout": rollout,
        "rollout entry": rollout,
        "difference": every + 2 * one,
        "difference entry": 4 * one,
    }.get(view, 4 * one)


def source() -> dict:
    """The commit measured, and whether src/ differs from it (then no commit's numbers)."""
    git = lambda *args: subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True).stdout.strip()
    return {
        "commit": git("rev-parse", "--short", "HEAD") or None,
        "src_changed": bool(git("status", "--porcelain", "--", "src")),
    }


def available_memory() -> float:
    with open("/proc/meminfo") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith("MemAvailable"))


# Other processes' share of the machine's CPU time while a view's samples ran (the machine's busy
# time from /proc/stat less this process's own): past BUSY, they are taken again once the share has
# stayed under QUIET for a second (waiting at most QUIET_WAIT seconds, WAITS in a run), up to RETRIES
# times, and the set with the least of them kept. Still past BUSY, a size is "contended": its median
# does not count as a text past 1 s. A short set of samples is judged over WINDOW seconds from its start.
BUSY, QUIET, QUIET_WAIT, WAITS, WINDOW, RETRIES = 0.25, 0.1, 30.0, 120.0, 0.5, 2


def cpu_now() -> tuple[float, float, float]:
    """(wall clock, the machine's busy CPU seconds, this process's CPU seconds)."""
    with open("/proc/stat") as f:
        ticks = [int(x) for x in f.readline().split()[1:9]]  # user nice system idle iowait irq softirq steal
    own = os.times()
    return time.perf_counter(), (sum(ticks) - ticks[3] - ticks[4]) / os.sysconf("SC_CLK_TCK"), own.user + own.system


def others_share(start, end) -> float:
    wall, busy, own = (b - a for a, b in zip(start, end))
    return max(0.0, busy - own) / (max(wall, 1e-9) * (os.cpu_count() or 1))


def wait_for_quiet() -> float:
    """Seconds waited until other processes took under QUIET of the machine for a second."""
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < QUIET_WAIT:
        start = cpu_now()
        time.sleep(1.0)
        if others_share(start, cpu_now()) < QUIET:
            break
    return time.perf_counter() - t0


# --- the model and its texts ----------------------------------------------------------


def build_model():
    import torch
    import transformers

    torch.manual_seed(0)
    config = transformers.GPT2Config(
        n_layer=LAYERS, n_head=HEADS, n_embd=WIDTH, n_positions=POSITIONS, attn_implementation="eager"
    )
    return transformers.GPT2LMHeadModel(config).eval()


def build_tokenizer(folder):
    """A word-level tokenizer (w0 … w999, split at spaces), saved and loaded as a model's would be."""
    import transformers
    from tokenizers import Tokenizer, models, pre_tokenizers

    vocab = {f"w{i}": i for i in range(WORDS)} | {"[UNK]": WORDS}
    tokenizer = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    transformers.PreTrainedTokenizerFast(tokenizer_object=tokenizer, unk_token="[UNK]").save_pretrained(folder)
    return transformers.AutoTokenizer.from_pretrained(folder)


def text(n: int, seed: int = 0) -> str:
    return " ".join(f"w{i}" for i in np.random.default_rng(seed + n).integers(0, WORDS, n))


def minimal_pair(n: int) -> tuple[str, str]:
    """Two texts of n tokens that differ in the middle word."""
    words = text(n).split()
    other = words.copy()
    other[n // 2] = "w1" if words[n // 2] != "w1" else "w2"
    return " ".join(words), " ".join(other)


# --- timing -----------------------------------------------------------------------------


class Run:
    """The measurements so far, the time budget and how many samples a call gets."""

    def __init__(self, quick: bool, budget: float):
        self.quick, self.start = quick, time.perf_counter()
        self.budget = self.total = (
            budget  # seconds from the start by which no new measurement begins (a part's share of total)
        )
        self.waits = 0.0  # seconds spent waiting for a quiet machine, at most WAITS a run
        self.stop_s = 1.0 if quick else 3.0  # a view's sizes stop once its median passes this
        self.retries = 0 if quick else RETRIES  # (a smoke test does not wait for a quiet machine)
        self.baseline: dict[int, dict] = {}
        self.views: dict[str, dict] = {
            name: {"what": what, "sizes": {}, "stopped": None} for name, what in VIEWS.items()
        }
        self.builds: dict[int, float] = {}

    def elapsed(self) -> float:
        return time.perf_counter() - self.start

    def predicted(self, name: str, n: int) -> float | None:
        """A call's seconds at n, from the view's last two sizes (its growth, taken as at least
        quadratic), or None before it has any."""
        sizes = self.baseline if name == "baseline" else self.views[name]["sizes"]
        done = sorted(sizes)
        if not done:
            return None
        last = done[-1]
        power = 2.0
        if len(done) > 1:
            a, b = sizes[done[-2]]["median"], sizes[last]["median"]
            if a > 0 and b > 0:
                power = max(2.0, min(4.0, np.log(b / a) / np.log(last / done[-2])))
        return sizes[last]["median"] * (n / last) ** power

    def why_not(self, name: str, n: int) -> str | None:
        """Why view ``name`` is not timed at n (None when it is)."""
        if name != "baseline" and self.views[name]["stopped"]:
            return self.views[name]["stopped"]
        if memory_needed(name, n) > available_memory() / 2:
            return (
                f"{n} tokens would need about {memory_needed(name, n) / 1e9:.1f} GB, more than half the memory "
                "available"
            )
        guess = self.predicted(name, n)
        if guess is not None and self.elapsed() + guess * (3 if guess > 1 else 6) > self.budget:
            return (
                f"{n} tokens (about {guess:.0f} s a call) would pass this part's share of the time budget "
                f"({self.budget:.0f} s of the run's {self.total:.0f} s)"
            )
        return None

    def samples(self, guess: float | None) -> tuple[int, bool]:
        """(samples, warm up first): 5 after a warm-up for a call under a second, else 3."""
        if self.quick:
            return 3, guess is None or guess < 1
        return (5, True) if guess is None or guess < 1 else (3, False)

    def _samples(self, call, before, count: int, warm: bool) -> dict:
        out, start = [], cpu_now()
        for i in range(-1 if warm else 0, count):
            if before is not None:
                before(i)
            t0 = time.perf_counter()
            call()
            if i >= 0:
                out.append(time.perf_counter() - t0)
        time.sleep(max(0.0, WINDOW - (time.perf_counter() - start[0])))  # /proc/stat counts in ticks of 10 ms
        end = cpu_now()
        return {**stats(out), "others_cpu": others_share(start, end), "seconds": sum(out)}

    def time(self, name: str, n: int, call, before=None) -> dict | None:
        """Time ``call`` at n (``before(i)``, untimed, readies sample i; i = -1 the warm-up);
        None when it is not timed at n (and the view is stopped for larger texts). Samples taken
        while other processes kept more than BUSY of the machine are taken again once it is
        quieter, and the set with less of them kept (both are in the results)."""
        why = self.why_not(name, n)
        if why:
            if name != "baseline":
                self.views[name]["stopped"] = why
            return None
        r = self._samples(call, before, *self.samples(self.predicted(name, n)))
        attempts = [r]
        while (
            r["others_cpu"] > BUSY
            and len(attempts) <= self.retries
            and self.waits + QUIET_WAIT <= WAITS
            and self.elapsed() + 2 * r["seconds"] + QUIET_WAIT < self.budget
        ):
            waited = wait_for_quiet()
            self.waits += waited
            attempts.append({**self._samples(call, before, *self.samples(r["median"])), "waited_s": waited})
            r = min(attempts, key=lambda a: a["others_cpu"])
        if len(attempts) > 1:
            r = {
                **r,
                "attempts": [
                    {k: a[k] for k in ("median", "p95", "n", "others_cpu", "waited_s") if k in a} for a in attempts
                ],
            }
        r["contended"] = r["others_cpu"] > BUSY
        if name == "baseline":
            self.baseline[n] = r
            return r
        base = self.baseline.get(n)
        r["ratio"] = r["median"] / base["median"] if base else None
        self.views[name]["sizes"][n] = r
        if r["median"] > self.stop_s:
            self.views[name]["stopped"] = f"its median passed {self.stop_s:g} s at {n} tokens"
        again = f" ({len(r['attempts'])} attempts)" if "attempts" in r else ""
        print(
            f"  {name:18} n={n:5}: median {r['median']:8.3f} s, p95 {r['p95']:8.3f} s ({r['n']} samples), others' CPU "
            f"{r['others_cpu']:.0%}{again}",
            flush=True,
        )
        return r


def widget(run: Run, model, tokenizer, n: int, texts=None):
    t0 = time.perf_counter()
    w = AttentionWidget.from_transformers(model, tokenizer, texts or text(n))
    run.builds.setdefault(n, time.perf_counter() - t0)
    if len(w.tokens) != n:
        raise RuntimeError(f"the text of {n} words gave {len(w.tokens)} tokens")
    return w


def baseline(run: Run, w, n: int) -> None:
    if n not in run.baseline:
        run.time("baseline", n, w.head_summary)


# --- the views --------------------------------------------------------------------------


def time_flow(run: Run, model, tokenizer, sizes) -> None:
    for n in sizes:
        if run.why_not("flow", n):
            run.time("flow", n, lambda: None)  # records why
            break
        w = widget(run, model, tokenizer, n)
        baseline(run, w, n)
        run.time("flow", n, w.flow)


def time_head_effects(run: Run, model, tokenizer, sizes) -> None:
    """Each sample on a widget of its own: a widget keeps the effects it computed."""
    for n in sizes:
        if run.why_not("head effects", n):
            run.time("head effects", n, lambda: None)
            break
        baseline(run, widget(run, model, tokenizer, n), n)
        fresh = {}

        def before(i, n=n, fresh=fresh):
            fresh["w"] = widget(run, model, tokenizer, n)

        run.time("head effects", n, lambda fresh=fresh: fresh["w"].head_effects(), before)


def time_doubling(run: Run, model, tokenizer, sizes) -> None:
    for n in sizes:
        if all(run.why_not(name, n) for name in DOUBLING):
            for name in DOUBLING:
                run.time(name, n, lambda: None)
            break
        w = widget(run, model, tokenizer, n)
        baseline(run, w, n)
        run.time("rollout", n, w.rollout)

        def at_layer(i, w=w):  # sample i reads layer i for the first time (the warm-up the last layer)
            w.layer, w.temperature = i % LAYERS, 1.0

        run.time("norms, first call", n, w.norms, at_layer)

        def other_temperature(i, w=w):  # the layer's Gram matrices kept from its first call
            w.temperature = 0.6 + 0.05 * (i + 1)

        w.layer, w.temperature = 0, 1.0
        w.norms()
        run.time("norms, again", n, w.norms, other_temperature)
        w.temperature, w.measure, w.layer = 1.0, "rollout", LAYERS - 1
        run.time("rollout entry", n, lambda w=w: computed_views.entry("rollout", w._inputs()))
        del w
        if not (run.why_not("difference", n) and run.why_not("difference entry", n)):  # (each records its own why)
            pair = widget(run, model, tokenizer, n, list(minimal_pair(n)))
            run.time("difference", n, lambda pair=pair: pair.difference(0, 1))
            pair.measure, pair.layer = "difference", LAYERS - 1
            run.time("difference entry", n, lambda pair=pair: computed_views.entry("difference", pair._inputs()))
            del pair


# --- results ----------------------------------------------------------------------------


def within(sizes: dict[int, dict], limit: float = 1.0) -> dict:
    """The largest text whose median is within ``limit`` seconds, the first measured past it (not
    contended: a busy machine's slow median says nothing of the view), and where the line between
    them (log tokens against log seconds) crosses ``limit``."""
    done = sorted(sizes)
    best = max((n for n in done if sizes[n]["median"] <= limit), default=None)
    past = next(
        (n for n in done if sizes[n]["median"] > limit and not sizes[n]["contended"] and (best is None or n > best)),
        None,
    )
    estimate = None
    if best is not None and past is not None:
        a, b = sizes[best]["median"], sizes[past]["median"]
        estimate = float(
            np.exp(np.log(best) + (np.log(limit) - np.log(a)) * (np.log(past) - np.log(best)) / (np.log(b) - np.log(a)))
        )
    return {
        "largest": best,
        "median": sizes[best]["median"] if best else None,
        "first_past": past,
        "estimate": estimate,
    }


def seconds(v: float | None) -> str:
    if v is None:
        return "–"
    return f"{v:.3f} s" if v < 10 else f"{v:.1f} s"


def busy(r: dict) -> str:
    return f"{r['others_cpu']:.0%}" + (" *" if "attempts" in r else "") + (" †" if r["contended"] else "")


def report(run: Run, results: dict) -> list[str]:
    m = results["machine"]
    lines = [
        "# Research views: how large a text each handles in about a second",
        "",
        f"Machine: {json.dumps(m)}",
        "",
        f"Model: {results['model']}. Texts: random words of a word-level tokenizer, one token each. "
        f"Run took {results['seconds']:.0f} s{' (--quick)' if run.quick else ''}.",
        "",
        "Each view is the Python call the page waits for (benchmarks/views.py says what each is). Baseline: "
        "`w.head_summary()` on the same widget (every layer's and head's weights and four summaries of them), measured "
        "in the same run; × is a view's median over the baseline's. Others' CPU: the share of the machine's CPU time "
        f"other processes took while the samples ran; past {BUSY:.0%} the samples were taken again once the machine "
        f"was quieter (up to {run.retries} more times), and the set with the least of it kept (marked *; every set is "
        "in the .json). † marks a size still contended then: its median is not counted as a text past 1 s.",
        "",
        "## Largest text handled within 1 s (median)",
        "",
        "| view | largest text within 1 s | its median | first size past 1 s (its median) | where it crosses 1 s "
        "(interpolated) |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for name, v in run.views.items():
        w, sizes = results["within_1s"][name], v["sizes"]
        largest = "none measured" if w["largest"] is None else f"{w['largest']:,} tokens"
        if w["largest"] is not None and w["first_past"] is None:
            larger = any(n > w["largest"] for n in sizes)  # only contended ones
            largest = (
                f"≥ {largest} ({'larger texts measured only on a busy machine' if larger else 'the largest measured'})"
            )
        past = "–" if w["first_past"] is None else f"{w['first_past']:,} ({seconds(sizes[w['first_past']]['median'])})"
        est = "–" if w["estimate"] is None else f"≈ {w['estimate']:,.0f} tokens"
        lines.append(f"| {v['what']} | {largest} | {seconds(w['median'])} | {past} | {est} |")
    lines += ["", "## Per size", ""]
    for v in run.views.values():
        lines += [
            f"### {v['what']}",
            "",
            "| tokens | median | p95 | samples | × head_summary() | others' CPU |",
            "| ---: | ---: | ---: | ---: | ---: | ---: |",
        ]
        for n, r in sorted(v["sizes"].items()):
            ratio = "–" if r["ratio"] is None else f"×{r['ratio']:.2f}"
            lines.append(f"| {n:,} | {seconds(r['median'])} | {seconds(r['p95'])} | {r['n']} | {ratio} | {busy(r)} |")
        lines += ["", f"Stopped: {v['stopped']}." if v["stopped"] else "Stopped: its sizes ran out.", ""]
    lines += [
        "### Baseline: w.head_summary()",
        "",
        "| tokens | median | p95 | samples | others' CPU | building the widget (from_transformers, once, for scale) |",
        "| ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for n, r in sorted(run.baseline.items()):
        lines.append(
            f"| {n:,} | {seconds(r['median'])} | {seconds(r['p95'])} | {r['n']} | {busy(r)} | "
            f"{seconds(run.builds.get(n))} |"
        )
    return lines + [""]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="fewer samples and smaller texts, under ~2 minutes")
    parser.add_argument(
        "--out", default=str(RESULTS / "views"), help="results path without extension (default: %(default)s)"
    )
    args = parser.parse_args()
    import torch
    import transformers

    run = Run(args.quick, budget=90 if args.quick else 480)
    info = machine()
    info.update(torch=torch.__version__, transformers=transformers.__version__, torch_threads=torch.get_num_threads())
    info.update(
        attnwidget=source(),
        memory_available_gb=round(available_memory() / 1e9, 1),
        load_at_start=[round(x, 2) for x in os.getloadavg()],
    )
    model = build_model()
    with tempfile.TemporaryDirectory() as folder:
        tokenizer = build_tokenizer(folder)
        doubling = [16 * 2**i for i in range(8) if 16 * 2**i <= POSITIONS]
        flow, effects = ((8, 16, 24), (4, 8)) if args.quick else ((8, 16, 24, 32, 48, 64, 96, 128), (4, 8, 16, 32, 64))
        # each part may begin measurements until its share of the budget has passed (what one leaves, the next has)
        for share, part, sizes in (
            (0.6, time_doubling, [n for n in doubling if n <= 512 or not args.quick]),
            (0.8, time_flow, flow),
            (1.0, time_head_effects, effects),
        ):
            run.budget = share * run.total
            part(run, model, tokenizer, sizes)
    info["load_at_end"] = [round(x, 2) for x in os.getloadavg()]
    results = {
        "machine": info,
        "model": (
            f"GPT2LMHeadModel, random weights: {LAYERS} layers × {HEADS} heads, width {WIDTH}, {POSITIONS} positions, "
            "eager attention, float32, CPU"
        ),
        "quick": args.quick,
        "seconds": run.elapsed(),
        "baseline": {"what": "w.head_summary()", "sizes": dict(sorted(run.baseline.items()))},
        "builds_s": dict(sorted(run.builds.items())),
        "views": run.views,
        "within_1s": {name: within(v["sizes"]) for name, v in run.views.items()},
    }
    out = pathlib.Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps(results, indent=2) + "\n")
    lines = report(run, results)
    out.with_suffix(".md").write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
