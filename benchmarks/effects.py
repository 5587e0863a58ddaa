"""Every head's effect at once: the attribution estimate against the exact ablation, on a model
shaped like GPT-2 small (benchmarks/views.py's: 12 layers × 12 heads, width 768, eager attention,
float32, CPU; nothing downloaded).

    python benchmarks/effects.py            # writes benchmarks/results/effects.{json,md} (a few minutes)
    python benchmarks/effects.py --quick    # fewer sizes and samples

Measured, each a median of repeated samples after a warm-up call, on a new widget each sample
(a widget keeps the exact effects it computed):

- ``w.head_effects(method="attribution")`` at 64, 128 and 256 tokens, and ``w.head_effects()``
  (exact: a pass of the model per layer, its heads a batch) at 64 tokens, beside the model's own
  forward pass on the same text (the baseline, in the same run);
- how well the estimate ranks the heads at 64 tokens: Pearson and Spearman correlation with the
  exact effects, whether the top heads agree, and the heads where they disagree most. Two weight
  scales: GPT-2's own initialisation (0.02: heads move the next token a little, nearly linearly)
  and a wider one (0.25: heads matter, and the linear estimate is tested where it is hardest).
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys
import tempfile
import time

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "benchmarks"))

from run import machine, stats  # noqa: E402
from views import HEADS, LAYERS, POSITIONS, WIDTH, build_tokenizer, source, text  # noqa: E402

from attnwidget.research import EXACT  # noqa: E402


def build(scale: float):
    import torch
    import transformers

    torch.manual_seed(0)
    config = transformers.GPT2Config(
        n_layer=LAYERS, n_head=HEADS, n_embd=WIDTH, n_positions=POSITIONS, initializer_range=scale
    )
    config._attn_implementation = "eager"
    return transformers.GPT2LMHeadModel(config).eval()


def timed(call, samples: int, before=lambda: None) -> list[float]:
    before()
    call()  # warm-up
    out = []
    for _ in range(samples):
        before()
        start = time.perf_counter()
        call()
        out.append(time.perf_counter() - start)
    return out


def ranks(a: np.ndarray) -> np.ndarray:
    return np.argsort(np.argsort(a.ravel())).astype(float)


def compare(exact: np.ndarray, estimate: np.ndarray, top: int = 5) -> dict:
    """How the estimate stands beside the exact effects: correlations, the top heads (most negative:
    the heads the next token needs most) and the heads where they differ most."""
    e, a = exact.ravel(), estimate.ravel()
    heads = [divmod(int(i), exact.shape[1]) for i in range(e.size)]
    worst = np.argsort(-np.abs(a - e))[:top]
    return {
        "pearson": float(np.corrcoef(e, a)[0, 1]),
        "spearman": float(np.corrcoef(ranks(e), ranks(a))[0, 1]),
        "top_exact": [heads[i] for i in np.argsort(e)[:top]],
        "top_estimate": [heads[i] for i in np.argsort(a)[:top]],
        "top_shared": len(set(np.argsort(e)[:top]) & set(np.argsort(a)[:top])),
        "largest_exact": float(np.abs(e).max()),
        # the page ablates exactly the EXACT heads of largest |estimate|: how many of the largest |exact| it finds
        "page_found": len(set(np.argsort(-np.abs(e))[:EXACT]) & set(np.argsort(-np.abs(a))[:EXACT])),
        "disagree": [
            {"layer": heads[i][0], "head": heads[i][1], "exact": float(e[i]), "estimate": float(a[i])} for i in worst
        ],
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "effects"))
    args = parser.parse_args()
    import torch

    from attnwidget import AttentionWidget

    samples = 3 if args.quick else 5
    sizes = (64, 128) if args.quick else (64, 128, 256)
    info = machine() | {"torch": torch.__version__, "torch_threads": torch.get_num_threads(), "attnwidget": source()}
    started = time.perf_counter()
    rows, quality = [], {}
    with tempfile.TemporaryDirectory() as folder:
        tokenizer = build_tokenizer(folder)
        for scale in (0.02, 0.25):
            model = build(scale)
            for n in sizes if scale == 0.02 else (64,):
                words = text(n)
                fresh = {}

                def new(words=words, fresh=fresh, model=model):
                    fresh["w"] = AttentionWidget.from_transformers(model, tokenizer, words)

                ids = torch.tensor([tokenizer(words)["input_ids"]])

                def forward(ids=ids, model=model):
                    with torch.no_grad():
                        model(input_ids=ids)

                base = stats(timed(forward, samples))
                est = stats(timed(lambda fresh=fresh: fresh["w"].head_effects(method="attribution"), samples, new))
                row = {"scale": scale, "tokens": n, "forward": base, "attribution": est}
                if n == 64:
                    row["exact"] = stats(timed(lambda fresh=fresh: fresh["w"].head_effects(), samples, new))
                    # the page's "effect" summary: every estimate, then the EXACT largest ablated (what it waits for)
                    row["page"] = stats(timed(lambda fresh=fresh: fresh["w"]._page_effects(), samples, new))
                    new()
                    quality[str(scale)] = compare(
                        fresh["w"].head_effects(), fresh["w"].head_effects(method="attribution")
                    )
                rows.append(row)
                print(json.dumps(row), flush=True)
    results = {
        "machine": info,
        "model": f"GPT2LMHeadModel, random weights: {LAYERS} layers × {HEADS} heads, width {WIDTH}, eager, float32",
        "seconds": time.perf_counter() - started,
        "rows": rows,
        "quality": quality,
    }
    out = pathlib.Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps(results, indent=2) + "\n")
    lines = [
        "# Every head's effect at once: the attribution estimate and the exact ablation",
        "",
        f"Machine: {info.get('cpus')} CPUs, {info.get('cpu')}; {results['model']}. Medians (p95) of {samples} samples,",
        "each on a new widget, after a warm-up; baseline: the model's own forward pass on the same text, same run.",
        "",
        f"The page's \"effect\" summary shows every head's estimate, then the {EXACT} heads of largest estimate",
        "ablated exactly (page s: until both are drawn).",
        "",
        "| weights' scale | tokens | forward pass s | attribution s | × forward | exact s | × forward | page s |",
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in rows:
        f, a, x = r["forward"]["median"], r["attribution"]["median"], r.get("exact", {}).get("median")
        exact = f"{x:.2f} ({r['exact']['p95']:.2f}) | ×{x / f:.1f}" if x is not None else "– | –"
        estimate = f"{a:.3f} ({r['attribution']['p95']:.3f}) | ×{a / f:.1f}"
        page = f"{r['page']['median']:.2f} ({r['page']['p95']:.2f})" if "page" in r else "–"
        lines.append(f"| {r['scale']} | {r['tokens']} | {f:.3f} | {estimate} | {exact} | {page} |")
    lines += ["", "How the estimate ranks the heads at 64 tokens (144 heads):", ""]
    lines += [
        "| weights' scale | largest exact effect | Pearson | Spearman | top 5 heads shared "
        f"| largest {EXACT} the page finds |",
        "| ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for scale, q in quality.items():
        shared, found = f"{q['top_shared']} of 5", f"{q['page_found']} of {EXACT}"
        lines.append(
            f"| {scale} | {q['largest_exact']:.3g} | {q['pearson']:.3f} | {q['spearman']:.3f} | {shared} | {found} |"
        )
    for scale, q in quality.items():
        lines += ["", f"Where they disagree most (scale {scale}):", ""]
        lines += ["| layer | head | exact | estimate |", "| ---: | ---: | ---: | ---: |"]
        lines += [f"| {d['layer']} | {d['head']} | {d['exact']:+.4f} | {d['estimate']:+.4f} |" for d in q["disagree"]]
    out.with_suffix(".md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
