// The page's compressed KV cache (js/kvcache.js) refuses cross-attention with Python's words
// (kvcache.NO_CROSS), and keeps a self-attention head's keys.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import test from "node:test";
import { choose, NO_CROSS } from "../../js/kvcache.js";

test("cross-attention is refused in Python's words", () => {
  const W = new Float64Array(5 * 9).fill(1 / 9);
  const found = choose("h2o", 4, W, 5, 9, [], true);
  assert.equal(found.keep, null);
  assert.equal(found.error, NO_CROSS);
  const python = readFileSync(new URL("../../src/attnwidget/kvcache.py", import.meta.url), "utf8");
  const said = [...python.matchAll(/NO_CROSS = \(\n((?:\s+".*"\n)+)\)/g)][0][1];
  assert.equal([...said.matchAll(/"(.*)"/g)].map((m) => m[1]).join(""), NO_CROSS);
});

test("a self-attention head keeps the budget's keys", () => {
  const W = new Float64Array(6 * 6).fill(1 / 6);
  const found = choose("streaming", 5, W, 6, 6, []);
  assert.deepEqual(Array.from(found.keep ?? []), [1, 1, 1, 1, 0, 1]);
});
