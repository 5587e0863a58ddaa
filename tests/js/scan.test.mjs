// The rules' one pass over an array's numbers (rules.scan), against a plain loop: the first number
// that is not finite, and the largest magnitude, for aligned and unaligned bytes alike.

import assert from "node:assert/strict";
import { test } from "node:test";
import { scan } from "../../js/rules.js";

function random(seed) {
  let s = seed >>> 0;
  return () => (s = (Math.imul(s, 1664525) + 1013904223) >>> 0) / 2 ** 32;
}

/** `numbers` written as `width`-byte floats after `offset` bytes of something else: its DataView. */
function bytes(numbers, width, offset) {
  const view = new DataView(new ArrayBuffer(offset + numbers.length * width), offset, numbers.length * width);
  numbers.forEach((x, i) => (width === 8 ? view.setFloat64(i * 8, x, true) : view.setFloat32(i * 4, x, true)));
  return view;
}

test("scan finds the first number that is not finite and the largest magnitude, as a plain loop does", () => {
  const rand = random(5);
  for (let trial = 0; trial < 400; trial++) {
    const width = rand() < 0.5 ? 4 : 8,
      offset = [0, 1, 4, 8][Math.floor(rand() * 4)], // (1: bytes no typed array can view in place)
      size = 1 + Math.floor(rand() * 40);
    const numbers = Array.from({ length: size }, () => (rand() - 0.5) * 10 ** Math.floor(rand() * 8));
    for (let k = Math.floor(rand() * 3); k > 0; k--)
      numbers[Math.floor(rand() * size)] = [Number.NaN, Infinity, -Infinity, width === 8 ? 1e301 : 3e38][Math.floor(rand() * 4)];
    const kept = width === 4 ? Array.from(new Float32Array(numbers)) : numbers; // as the bytes hold them
    const bad = kept.findIndex((x) => !Number.isFinite(x)),
      top = bad >= 0 ? Infinity : Math.max(...kept.map(Math.abs));
    const array = { dtype: width === 8 ? "float64" : "float32", view: bytes(numbers, width, offset) };
    const found = scan(array);
    assert.equal(found.bad, bad, `trial ${trial}`);
    assert.equal(found.top, top, `trial ${trial}`);
    if (bad >= 0) assert.ok(Object.is(found.at, kept[bad]), `trial ${trial}`);
    assert.equal(scan(array), found); // read once: the same answer for the same array
  }
});

test("a new array over the same bytes is read again: numbers written in place are not taken as checked", () => {
  const array = { dtype: "float64", view: bytes([1, 2, 3], 8, 0) };
  assert.equal(scan(array).bad, -1);
  array.view.setFloat64(8, Number.NaN, true); // a script writes into the bytes, then sets them again as a new array
  const again = scan({ ...array });
  assert.equal(again.bad, 1);
  assert.equal(again.top, Infinity);
});
