// The exercises' pure parts: a rebalanced guess always spends exactly the whole budget, and the
// scores follow Python's formulas (w.score).

import assert from "node:assert/strict";
import { test } from "node:test";
import { evenGuess, fmtGoal, predictScore, rebalance, temperatureScore } from "../../js/views/exercise.js";

let seed = 11;
const random = () => (seed = (seed * 16807) % 2147483647) / 2147483647;
const sum = (a) => a.reduce((x, y) => x + y, 0);

test("rebalance keeps the sum 1, the value set, the others' proportions and closed cells at 0", () => {
  for (let trial = 0; trial < 3000; trial++) {
    const m = 1 + (trial % 9);
    const open = Array.from({ length: m }, (_, i) => i === 0 || random() > 0.2);
    let g = evenGuess(open);
    for (let step = 0; step < 6; step++) {
      const j = Math.floor(random() * m),
        value = random() < 0.1 ? (random() < 0.5 ? 0 : 1) : random();
      const before = g;
      g = rebalance(g, j, value, open);
      assert.ok(Math.abs(sum(g) - 1) <= 4e-16 * m || !open.some(Boolean), `sum ${sum(g)}`);
      g.forEach((x, i) => {
        assert.ok(x >= 0 && Number.isFinite(x));
        if (!open[i]) assert.equal(x, 0);
      });
      if (!open[j]) assert.deepEqual(g, before);
      else if (open.filter(Boolean).length > 1) {
        assert.ok(Math.abs(g[j] - value) < 1e-12, `${g[j]} vs ${value}`);
        // the others keep their proportions when they held something
        const others = open.map((o, i) => o && i !== j);
        const [a, b] = others.map((o, i) => (o ? i : -1)).filter((i) => i >= 0);
        if (b !== undefined && before[a] > 1e-9 && before[b] > 1e-9 && g[a] > 1e-9) assert.ok(Math.abs(g[a] / g[b] - before[a] / before[b]) < 1e-6);
      } else assert.equal(g[j], 1);
    }
  }
});

test("rebalance: out-of-range and unreadable values are clamped; equal shares when the others held nothing", () => {
  assert.deepEqual(rebalance([0.5, 0.5], 0, 2), [1, 0]);
  assert.deepEqual(rebalance([0.5, 0.5], 0, -1), [0, 1]);
  assert.deepEqual(rebalance([1, 0, 0], 0, 0.5), [0.5, 0.25, 0.25]);
  assert.deepEqual(rebalance([0.2, 0.8], 1, Number.NaN), [1, 0]);
});

test("rebalance holds the values the learner set: the others make room, and the held ones only past what is left", () => {
  // river 60, then bank 30: river stays 60 (not 46), the four untyped share the last 10
  let g = evenGuess(Array(6).fill(true));
  g = rebalance(g, 4, 0.6, undefined, [4]);
  g = rebalance(g, 5, 0.3, undefined, [4, 5]);
  assert.ok(Math.abs(g[4] - 0.6) < 1e-12 && Math.abs(g[5] - 0.3) < 1e-12, String(g));
  for (const i of [0, 1, 2, 3]) assert.ok(Math.abs(g[i] - 0.025) < 1e-12, String(g));
  // more than is left: the untyped give all they have, then the held give in proportion
  const h = rebalance([0.1, 0.6, 0.3], 0, 0.7, undefined, [0, 1]);
  assert.ok(Math.abs(h[0] - 0.7) < 1e-12 && Math.abs(h[1] - 0.3) < 1e-12 && h[2] === 0, String(h));
  for (let trial = 0; trial < 2000; trial++) {
    const m = 2 + (trial % 8),
      open = Array.from({ length: m }, (_, i) => i === 0 || random() > 0.2);
    let g = evenGuess(open);
    const held = [];
    for (let step = 0; step < 6; step++) {
      const j = Math.floor(random() * m),
        value = random();
      const before = g;
      g = rebalance(g, j, value, open, held);
      assert.ok(Math.abs(sum(g) - 1) <= 4e-16 * m || !open.some(Boolean), `sum ${sum(g)}`);
      if (!open[j]) continue;
      const heldSum = held.filter((i) => i !== j && open[i]).reduce((a, i) => a + before[i], 0);
      const untyped = open.some((o, i) => o && i !== j && !held.includes(i));
      if (untyped && value + heldSum <= 1) held.forEach((i) => i !== j && open[i] && assert.ok(Math.abs(g[i] - before[i]) < 1e-12));
      if (open.filter(Boolean).length > 1) assert.ok(Math.abs(g[j] - value) < 1e-12);
      if (!held.includes(j)) held.push(j);
    }
  }
});

test("scores: Python's formulas", () => {
  assert.equal(predictScore([0.25, 0.75], [0.25, 0.75]), 1);
  assert.equal(predictScore([1, 0], [0, 1]), 0);
  assert.ok(Math.abs(predictScore([0.5, 0.5, 0], [0.2, 0.3, 0.5]) - (1 - 0.5 * (0.3 + 0.2 + 0.5))) < 1e-15);
  assert.equal(temperatureScore(2, 2), 1);
  assert.ok(Math.abs(temperatureScore(2.5, 2) - 0.75) < 1e-15);
  assert.equal(temperatureScore(9, 2), 0);
  assert.deepEqual([1, 2, 2.5, 1.75, 2.0001].map(fmtGoal), ["1", "2", "2.5", "1.75", "2"]);
});
