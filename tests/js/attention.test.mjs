// attention.js against the lab's published figures and the same properties as the numpy core.
// (tests/test_js_core.py also checks it against numpy on random cases.)

import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";
import * as A from "../../js/attention.js";
import { firstRows } from "../../js/derived.js";

const lab = JSON.parse(readFileSync(new URL("../../src/attnwidget/data/lab.json", import.meta.url)));
const matrix = (rows) => ({ data: Float32Array.from(rows.flat()), rows: rows.length, cols: rows[0].length });
const [q, k, v] = [matrix(lab.q), matrix(lab.k), matrix(lab.v)];
const n = q.rows,
  BANK = 5,
  RIVER = 4;
const close = (x, want, digits) => assert.equal(x.toFixed(digits), want.toFixed(digits), `${x} vs ${want}`);

test("the lab's figures at temperature 1", () => {
  const a = A.attention(q, k, v);
  close(Math.min(...a.scores), -1.0, 1);
  close(Math.max(...a.scores), 2.8, 1);
  close(a.weights[BANK * n + RIVER], 0.556, 3);
  close(a.weights[BANK * n + BANK], 0.306, 3);
  close(a.effectiveTokens[BANK], 3.13, 2);
  close(a.output[BANK * 2], 0.69, 2);
  close(a.output[BANK * 2 + 1], 0.23, 2);
  close(a.outputSpread, 0.503, 3);
});

test("the lab's figures at the ends of the dial", () => {
  close(A.attention(q, k, v, { temperature: 5 }).outputSpread, 0.049, 3);
  const cold = A.attention(q, k, v, { temperature: 0.2 });
  close(cold.weights[BANK * n + RIVER], 0.951, 3);
  close(cold.weights[BANK * n + BANK], 0.049, 3);
});

test("rows sum to one; causal cells are exactly zero", () => {
  for (const causal of [false, true]) {
    const a = A.attention(q, k, v, { temperature: 0.7, causal });
    for (let i = 0; i < n; i++) {
      let sum = 0;
      for (let j = 0; j < n; j++) {
        sum += a.weights[i * n + j];
        if (causal && j > i) assert.equal(a.weights[i * n + j], 0);
      }
      assert.ok(Math.abs(sum - 1) < 1e-12);
    }
  }
});

test("extreme temperatures: arg-max rows when cold, uniform when hot, never NaN", () => {
  const cold = A.attention(q, k, v, { temperature: 1e-6 });
  const hot = A.attention(q, k, v, { temperature: 1e6 });
  for (let i = 0; i < n; i++) {
    const row = Array.from(cold.scores.subarray(i * n, i * n + n));
    const best = row.indexOf(Math.max(...row));
    assert.equal(cold.weights[i * n + best], 1);
    for (let j = 0; j < n; j++) assert.ok(Math.abs(hot.weights[i * n + j] - 1 / n) < 1e-5);
  }
  assert.ok(cold.output.every(Number.isFinite));
});

test("a DataView inside a larger buffer is read at its own offset", () => {
  const buf = new ArrayBuffer(64);
  new Float32Array(buf, 16, 4).set([1, 2, 3, 4]);
  const m = A.decodeMatrix({ view: new DataView(buf, 16, 16), shape: [2, 2], dtype: "float32" });
  assert.deepEqual(Array.from(m.data), [1, 2, 3, 4]);
});

test("a layer sent one head at a time gives that head, whichever is asked, until the next comes", () => {
  const view = new DataView(Float32Array.from([5, 6, 7, 8]).buffer);
  const m = A.decodeMatrix({ view, shape: [3, 2, 2], dtype: "float32", head: 1 });
  assert.deepEqual([m.heads, m.rows, m.cols, m.only], [3, 2, 2, 1]);
  for (const h of [0, 1, 2]) assert.deepEqual(Array.from(A.headOf(m, h).data), [5, 6, 7, 8]);
  const first = firstRows(m, 1); // while a text is written: that head's first row
  assert.deepEqual([Array.from(first.data), first.heads, first.only], [[5, 6], 3, 1]);
  const whole = A.decodeMatrix({ view: new DataView(Float32Array.from([1, 2, 3, 4, 5, 6, 7, 8]).buffer), shape: [2, 2, 2], dtype: "float32" });
  assert.deepEqual(Array.from(A.headOf(whole, 1).data), [5, 6, 7, 8]);
  assert.deepEqual(Array.from(A.headOf(whole, 0).data), [1, 2, 3, 4]);
});

test("head summaries: each a mean over the rows where it exists", () => {
  const n = 4,
    S = Float64Array.from({ length: n * n }, (_, p) => Math.sin(p * 1.7) * 2);
  const W = A.weights(S, n, 0.8, true);
  const open = (i, j) => j <= i;
  const s = A.headSummary(W, n, open);
  const mean = (xs) => xs.reduce((a, b) => a + b, 0) / xs.length;
  assert.ok(Math.abs(s.first - mean([0, 1, 2, 3].map((i) => W[i * n]))) < 1e-15);
  assert.ok(Math.abs(s.self - mean([0, 1, 2, 3].map((i) => W[i * n + i]))) < 1e-15);
  assert.ok(Math.abs(s.previous - mean([1, 2, 3].map((i) => W[i * n + i - 1]))) < 1e-15); // row 0 has no previous token
  assert.ok(Math.abs(s.effective_tokens - mean([0, 1, 2, 3].map((i) => A.effectiveTokens(W, n, i)))) < 1e-15);
  assert.ok(Number.isNaN(A.headSummary(W, n, (_, j) => j > 0).first)); // no row may read token 0
});

test("a masking bias as models build it (float32's minimum) is no rounding risk: its cells are 0 in both", () => {
  const low = -3.4028234663852886e38; // np.finfo(np.float32).min
  const bias = new Float64Array(n * n);
  for (let i = 0; i < n; i++) for (let j = i + 1; j < n; j++) bias[i * n + j] = low; // the causal rule, as a bias
  const S = A.scores(q, k, A.defaultScale(q.cols), { data: bias, rows: n, cols: n });
  for (const T of [1, 0.2]) assert.ok(A.agreement(A.roundingBound(q, k, A.defaultScale(q.cols), S), S, n, T, false).exact, `T = ${T}`);
  // a true near-tie is still said: two cells a hair apart at a tiny temperature
  const tie = Float64Array.from([1, 1 + 1e-12, low, 0]);
  const qq = { data: Float64Array.from([1, 0, 0, 1]), rows: 2, cols: 2 };
  assert.equal(A.agreement(A.roundingBound(qq, qq, 1, tie), tie, 2, 1e-13, false).exact, false);
});
