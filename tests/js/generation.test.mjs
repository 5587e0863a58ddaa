// Generation, one token at a time: the store computes one new row per step (derived.js
// createGrowing), and every number is the very one a full recompute gives.

import assert from "node:assert/strict";
import { test } from "node:test";
import * as A from "../../js/attention.js";
import { createGrowing } from "../../js/derived.js";

// a small deterministic generator (mulberry32), so a failure can be replayed
function random(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
const matrix = (rnd, rows, cols, Type = Float32Array) => ({ data: Type.from({ length: rows * cols }, () => rnd() * 4 - 2), heads: 1, rows, cols });
/** The first r rows of m (and its first r columns when square is asked), as a new matrix: what the store's cut makes. */
const prefix = (m, r, square = false) => {
  const c = square ? r : m.cols,
    data = new m.data.constructor(r * c);
  for (let i = 0; i < r; i++) data.set(m.data.subarray(i * m.cols, i * m.cols + c), i * c);
  return { data, heads: 1, rows: r, cols: c };
};

for (const [name, seed, n, d, dv, opts] of [
  ["plain", 1, 9, 4, 2, {}],
  ["float64 vectors, a set scale", 2, 7, 3, 3, { Type: Float64Array, scale: 0.37 }],
  ["a bias and a mask", 3, 8, 5, 2, { bias: true, mask: true }],
  ["a low temperature", 4, 10, 2, 2, { temperature: 0.1 }],
  ["the width of a real head", 5, 6, 64, 64, { temperature: 0.7 }],
]) {
  test(`a step forward computes one row and equals a full recompute: ${name}`, () => {
    const rnd = random(seed),
      Type = opts.Type ?? Float32Array;
    const [q, k, v] = [matrix(rnd, n, d, Type), matrix(rnd, n, d, Type), matrix(rnd, n, dv, Type)];
    const bias = opts.bias ? matrix(rnd, n, n) : null;
    const mask = opts.mask ? Uint8Array.from({ length: n * n }, (_, p) => (p % n === 0 || rnd() > 0.3 ? 1 : 0)) : null;
    const T = opts.temperature ?? 1,
      scale = opts.scale ?? A.defaultScale(d);
    const g = createGrowing();
    for (let s = 1; s <= n; s++) {
      const [qs, ks, vs] = [prefix(q, s), prefix(k, s), prefix(v, s)];
      const bs = bias && prefix(bias, s, true),
        ms = mask && prefix({ data: mask, rows: n, cols: n }, s, true).data;
      const S = g.scores(qs, ks, scale, bs),
        W = g.weights(S, s, T, true, ms),
        O = g.output(W, vs);
      const fullS = A.scores(qs, ks, scale, bs),
        fullW = A.weights(fullS, s, T, true, ms),
        fullO = A.output(fullW, vs);
      assert.deepEqual(Array.from(S), Array.from(fullS), `scores at step ${s}`);
      assert.deepEqual(Array.from(W), Array.from(fullW), `weights at step ${s}`);
      assert.deepEqual(Array.from(O), Array.from(fullO), `output at step ${s}`);
      assert.deepEqual(g.work, { scores: 1, weights: 1, output: 1 }, `work at step ${s}`); // the first step has one row anyway
    }
  });
}

test("anything but one more token is a full recompute", () => {
  const rnd = random(7),
    n = 6,
    d = 3;
  const [q, k, v] = [matrix(rnd, n, d), matrix(rnd, n, d), matrix(rnd, n, 2)];
  const g = createGrowing(),
    scale = A.defaultScale(d);
  const at = (s, T = 1, causal = true, qq = q) => {
    const S = g.scores(prefix(qq, s), prefix(k, s), scale);
    g.output(g.weights(S, s, T, causal), prefix(v, s));
    return { ...g.work };
  };
  assert.deepEqual(at(3), { scores: 3, weights: 3, output: 3 }); // the first computation
  assert.deepEqual(at(4), { scores: 1, weights: 1, output: 1 }); // a step forward
  assert.deepEqual(at(6), { scores: 6, weights: 6, output: 6 }); // two tokens at once
  assert.deepEqual(at(5), { scores: 5, weights: 5, output: 5 }); // a step back
  assert.deepEqual(at(6, 0.5), { scores: 1, weights: 6, output: 6 }); // another temperature: every row's weights change
  // an edited earlier query changes its row: all of it again
  const edited = { ...q, data: q.data.slice() };
  edited.data[0] += 1;
  const S = g.scores(prefix(edited, 6), prefix(k, 6), scale);
  assert.equal(g.work.scores, 6);
  assert.deepEqual(Array.from(S), Array.from(A.scores(prefix(edited, 6), prefix(k, 6), scale)));
  // without the causal rule an earlier row would read the new key: every row again
  g.scores(prefix(q, 5), prefix(k, 5), scale);
  g.weights(g.scores(prefix(q, 6), prefix(k, 6), scale), 6, 1, false);
  assert.equal(g.work.weights, 6);
});
