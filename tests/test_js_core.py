"""js/attention.js computes what numpy computes, on the same random cases."""

import json
import pathlib
import shutil
import subprocess

import numpy as np
import pytest

from attnwidget import attention

ROOT = pathlib.Path(__file__).resolve().parents[1]


def on_each(cases, each: str):
    """js/attention.js (as A) run by node on each case c: the JSON of ``each``, a JS function of c."""
    script = (
        f'import * as A from "{(ROOT / "js" / "attention.js").as_uri()}";\n'
        'import { readFileSync } from "node:fs";\n'
        f"const out = JSON.parse(readFileSync(0, 'utf8')).map({each});\n"
        "process.stdout.write(JSON.stringify(out));\n"
    )
    done = subprocess.run(
        ["node", "--input-type=module", "-e", script],
        input=json.dumps(cases),
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(done.stdout)


def run_js(cases):
    return on_each(
        cases,
        "(c) => {\n"
        "  const m = (rows) => ({ data: Float32Array.from(rows.flat()), rows: rows.length, cols: rows[0].length });\n"
        "  const a = A.attention(m(c.q), m(c.k), m(c.v), c.options);\n"
        "  return { scores: Array.from(a.scores), weights: Array.from(a.weights), output: Array.from(a.output),\n"
        "           eff: a.effectiveTokens, sense: a.senseResolved, spread: a.outputSpread };\n"
        "}",
    )


@pytest.mark.skipif(shutil.which("node") is None, reason="needs Node.js")
def test_js_matches_numpy_on_random_cases():
    rng = np.random.default_rng(7)
    cases = []
    for i in range(24):
        n, dk, dv = rng.integers(1, 12), rng.integers(1, 9), rng.integers(1, 4)
        # float32 on both sides: the page receives float32 buffers
        q, k, v = (rng.normal(scale=2, size=s).astype(np.float32) for s in ((n, dk), (n, dk), (n, dv)))
        opts = {
            "temperature": float(np.exp(rng.uniform(np.log(0.1), np.log(5)))),
            "causal": bool(i % 2),
            "scale": None if i % 3 else float(rng.uniform(0.5, 3)),
            "softcap": None if i % 4 else float(rng.uniform(0.5, 4)),  # Gemma 2's cap: c · tanh(s / c)
        }
        cases.append({"q": q.tolist(), "k": k.tolist(), "v": v.tolist(), "options": opts})
    for case, js in zip(cases, run_js(cases)):
        a = attention(np.array(case["q"]), np.array(case["k"]), np.array(case["v"]), **case["options"])
        np.testing.assert_allclose(js["scores"], a.scores.ravel(), rtol=1e-9, atol=1e-9)
        np.testing.assert_allclose(js["weights"], a.weights.ravel(), rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(js["output"], a.output.ravel(), rtol=1e-9, atol=1e-9)
        np.testing.assert_allclose(js["eff"], a.effective_tokens, rtol=1e-9)
        np.testing.assert_allclose(js["sense"], a.sense_resolved, rtol=1e-9, atol=1e-12)
        assert js["spread"] == pytest.approx(a.output_spread, rel=1e-7, abs=1e-9)


@pytest.mark.skipif(shutil.which("node") is None, reason="needs Node.js")
def test_a_score_at_or_below_closed_gives_weight_0_in_the_page_as_in_numpy_at_any_temperature():
    """core.CLOSED (a cell given 0 in weights given as input): closed in js/attention.js as in numpy,
    whatever the temperature; a row of closed cells reads nothing."""
    from attnwidget.formulas import CLOSED, _softmax_rows

    rng = np.random.default_rng(3)
    cases = []
    for t in (0.01, 1.0, 1e28, 1e300):
        S = np.log(rng.random((4, 4)))
        S[rng.random((4, 4)) < 0.4] = CLOSED
        S[3] = CLOSED  # a row with nothing to read
        cases.append({"S": S.ravel().tolist(), "t": t})
    got = on_each(cases, "(c) => Array.from(A.weights(Float64Array.from(c.S), 4, c.t, false))")
    for case, js in zip(cases, got):
        S = np.array(case["S"]).reshape(4, 4)
        want = _softmax_rows(S.copy(), case["t"], None)
        np.testing.assert_allclose(js, want.ravel(), rtol=1e-12, atol=0)
        assert (np.array(js).reshape(4, 4)[S <= CLOSED] == 0).all() and not np.array(js)[12:].any()


@pytest.mark.skipif(shutil.which("node") is None, reason="needs Node.js")
def test_a_learnt_sink_is_the_same_column_in_the_page_as_in_numpy():
    """A learnt sink's logit in the softmax, the effective tokens of what each row keeps, the sink's share
    among the head summaries and a cell's arithmetic: js/attention.js's numbers are numpy's."""
    from attnwidget.formulas import head_summaries

    rng = np.random.default_rng(11)
    cases = []
    for i in range(16):
        n, dk = int(rng.integers(1, 9)), int(rng.integers(1, 5))
        q, k, v = (rng.normal(scale=2, size=(n, s)).astype(np.float32) for s in (dk, dk, 2))
        opts = {
            "temperature": float(np.exp(rng.uniform(np.log(0.1), np.log(5)))),
            "causal": bool(i % 2),
            "sink": [float(rng.normal(scale=3)), -1e30, 40.0][i % 3],  # (a closed sink, one that takes nearly all)
        }
        cases.append({"q": q.tolist(), "k": k.tolist(), "v": v.tolist(), "options": opts, "cell": [n - 1, 0]})
    got = on_each(
        cases,
        "(c) => {\n"
        "  const m = (rows) => ({ data: Float32Array.from(rows.flat()), rows: rows.length, cols: rows[0].length });\n"
        "  const [q, k, v] = [m(c.q), m(c.k), m(c.v)], a = A.attention(q, k, v, c.options), n = q.rows;\n"
        "  const open = A.openCell(c.options.causal, null, n);\n"
        "  const cell = A.cellArithmetic(q, k, v, a.scores, a.weights.subarray(c.cell[0] * n, (c.cell[0] + 1) * n),\n"
        "    { i: c.cell[0], j: c.cell[1], scale: a.scale, ...c.options });\n"
        "  return { weights: Array.from(a.weights), eff: a.effectiveTokens, cell,\n"
        "           summary: A.headSummary(a.weights, n, open, false, true) };\n"
        "}",
    )
    for case, js in zip(cases, got):
        a = attention(*(np.array(case[x], dtype=np.float32).astype(float) for x in "qkv"), **case["options"])
        np.testing.assert_allclose(js["weights"], a.weights.ravel(), rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(js["eff"], a.effective_tokens, rtol=1e-9)
        want = head_summaries(a.weights, a.allowed, sinks=True)
        assert set(js["summary"]) == set(want)
        for name, value in want.items():
            assert js["summary"][name] == pytest.approx(float(value), rel=1e-9, abs=1e-12), name
        cell = a.cell(*case["cell"])
        assert js["cell"]["sink"] == cell["sink"]
        for name in ("row_sum", "exp", "weight", "shift"):
            assert js["cell"][name if name != "row_sum" else "rowSum"] == pytest.approx(cell[name], rel=1e-9), name


def test_the_differential_pair_and_difference_are_numpys():
    from attnwidget.formulas import differential, pair_heads

    rng = np.random.default_rng(11)
    cases, want = [], []
    for heads in (2, 4, 6, 8):
        for head in range(heads):
            n = int(rng.integers(1, 7))
            q, k, v = (rng.normal(size=(2, n, 3)) for _ in range(3))
            one, two = (attention(q[i], k[i], v[0], temperature=0.7, causal=True) for i in range(2))
            lam = float(rng.uniform(-0.5, 1.5))
            d = differential(one, two, lam, pair_heads(head, heads), "difference")
            cases.append({"head": head, "heads": heads, "W1": one.weights.ravel().tolist(),
                          "W2": two.weights.ravel().tolist(), "lam": lam})  # fmt: skip
            want.append((list(pair_heads(head, heads)), d.difference.ravel()))
    got = on_each(
        cases, "(c) => ({ pair: A.pairHeads(c.head, c.heads), D: Array.from(A.difference(c.W1, c.W2, c.lam)) })"
    )
    for g, (pair, difference) in zip(got, want):
        assert g["pair"] == pair
        np.testing.assert_array_equal(g["D"], difference)  # the same two operations per cell: the same numbers
