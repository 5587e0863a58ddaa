// Whole percentages of a row add up to exactly 100, each within a point of the truth.

import assert from "node:assert/strict";
import { test } from "node:test";
import { percentages } from "../../js/views/dom.js";

test("rows of random weights", () => {
  let seed = 7;
  const random = () => (seed = (seed * 16807) % 2147483647) / 2147483647;
  for (let trial = 0; trial < 2000; trial++) {
    const raw = Array.from({ length: 1 + (trial % 12) }, () => random() ** 3);
    const total = raw.reduce((a, b) => a + b, 0),
      row = raw.map((x) => x / total);
    const shown = percentages(row);
    assert.equal(
      shown.reduce((a, b) => a + b, 0),
      100,
    );
    shown.forEach((p, i) => assert.ok(Math.abs(p - 100 * row[i]) < 1, `${p} vs ${100 * row[i]}`));
  }
});

test("a row that reads nothing stays at 0", () => {
  assert.deepEqual(percentages([0, 0, 0]), [0, 0, 0]);
});
