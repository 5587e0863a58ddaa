// The fast score loop and the picture painter, against plain reference loops.

import assert from "node:assert/strict";
import { test } from "node:test";
import * as A from "../../js/attention.js";
import { MAX_SIDE, paint, weightPicture } from "../../js/picture.js";

function random(seed) {
  // a small deterministic generator: the same cases every run
  let s = seed >>> 0;
  return () => ((s = (Math.imul(s, 1664525) + 1013904223) >>> 0) / 2 ** 32) * 2 - 1;
}
const rowsOf = (data, cols) => (i) => data.subarray(i * cols, (i + 1) * cols);
const matrix = (rand, rows, cols, Type = Float64Array) => ({ data: Type.from({ length: rows * cols }, () => rand() * 3), heads: 1, rows, cols });

test("scoreRows gives exactly the plain dot product's numbers, for any shape and any piece of rows", () => {
  const rand = random(7);
  for (const [rows, keys, d] of [
    [1, 1, 1],
    [2, 3, 5],
    [7, 9, 3],
    [13, 4, 64],
    [33, 31, 17],
    [5, 8, 2],
  ]) {
    for (const Type of [Float32Array, Float64Array]) {
      const q = matrix(rand, rows, d, Type),
        k = matrix(rand, keys, d, Type),
        scale = rand() + 0.5;
      const want = new Float64Array(rows * keys);
      for (let i = 0; i < rows; i++) {
        for (let j = 0; j < keys; j++) {
          let s = 0;
          for (let c = 0; c < d; c++) s += q.data[i * d + c] * k.data[j * d + c];
          want[i * keys + j] = scale * s;
        }
      }
      assert.deepEqual(A.scoreRows(new Float64Array(rows * keys), q, k, scale, 0, rows), want);
      const pieces = new Float64Array(rows * keys),
        cut = Math.floor(rows / 3) + 1; // odd starts too
      A.scoreRows(pieces, q, k, scale, 0, cut);
      A.scoreRows(pieces, q, k, scale, cut, rows);
      assert.deepEqual(pieces, want);
    }
  }
});

test("weightRow is row i of weights, exactly, with causal rows and a mask", () => {
  const rand = random(3),
    n = 11,
    S = Float64Array.from({ length: n * n }, () => rand() * 5);
  const mask = Uint8Array.from({ length: n * n }, (_, p) => (p % 5 === 2 ? 0 : 1));
  for (const [causal, m] of [
    [false, null],
    [true, null],
    [false, mask],
    [true, mask],
  ]) {
    for (const T of [0.05, 1, 7]) {
      const W = A.weights(S, n, T, causal, m);
      for (let i = 0; i < n; i++) assert.deepEqual(A.weightRow(S, n, i, T, causal, m), W.subarray(i * n, i * n + n));
    }
  }
});

test("a pixel per cell: the colour of its value, the closed colour where causal or the mask closes it", () => {
  const n = 6,
    lut = Uint32Array.from({ length: 256 }, (_, k) => k),
    data = Float64Array.from({ length: n * n }, (_, p) => p / (n * n - 1));
  const mask = Uint8Array.from({ length: n * n }, (_, p) => (p === 1 ? 0 : 1));
  const { pixels, width, height } = paint({ rows: n, cols: n, row: rowsOf(data, n), lo: 0, hi: 1, lut, closedPixel: 999, causal: true, mask });
  assert.equal(width, n);
  assert.equal(height, n);
  for (let i = 0; i < n; i++) {
    for (let j = 0; j < n; j++) {
      const p = i * n + j;
      assert.equal(pixels[p], j > i || p === 1 ? 999 : Math.min(255, Math.round(data[p] * 255)), `cell ${i}, ${j}`);
    }
  }
});

test("past MAX_SIDE a pixel shows its block's cell of largest magnitude, and a closed block the closed colour", () => {
  const rows = MAX_SIDE * 2 + 3,
    cols = MAX_SIDE + 5,
    rand = random(11);
  const data = Float64Array.from({ length: rows * cols }, () => rand() * 0.1);
  const lut = Uint32Array.from({ length: 256 }, (_, k) => k);
  // a single spike, and a strongly negative one, each alone in its block
  data[500 * cols + 700] = 0.9;
  data[1500 * cols + 20] = -0.95;
  const closed = (i, j) => i < 4 && j < 4; // the first block, closed whole
  const { pixels, width, height } = paint({ rows, cols, row: rowsOf(data, cols), lo: -1, hi: 1, lut, closedPixel: 999, closed });
  assert.equal(width, MAX_SIDE);
  assert.equal(height, MAX_SIDE);
  const block = (n, side, x) => [Math.floor((x * n) / side), Math.floor(((x + 1) * n) / side)];
  for (let y = 0; y < height; y += 37) {
    for (let x = 0; x < width; x += 41) {
      const [i0, i1] = block(rows, height, y),
        [j0, j1] = block(cols, width, x);
      let best = null;
      for (let i = i0; i < i1; i++)
        for (let j = j0; j < j1; j++) if (!closed(i, j) && (best === null || Math.abs(data[i * cols + j]) > Math.abs(best))) best = data[i * cols + j];
      const want = best === null ? 999 : Math.min(255, Math.round((best + 1) * 127.5));
      assert.equal(pixels[y * width + x], want, `pixel ${x}, ${y}`);
    }
  }
  const find = (n, side, i) => {
    let x = 0;
    while (block(n, side, x)[1] <= i) x++;
    return x;
  };
  const at = (i, j) => pixels[find(rows, height, i) * width + find(cols, width, j)];
  assert.equal(at(500, 700), Math.floor(1.9 * 127.5)); // the spike is not lost to the scaling
  assert.equal(at(1500, 20), Math.floor(0.05 * 127.5));
  assert.equal(pixels[0], 999);
});

test("the weights picture, row by row, is the picture of the whole weights matrix, stretched to its largest weight", () => {
  const rand = random(5),
    lut = Uint32Array.from({ length: 256 }, (_, k) => k);
  for (const n of [7, 40, MAX_SIDE + 9]) {
    const S = Float64Array.from({ length: n * n }, () => rand() * 4);
    const mask = Uint8Array.from({ length: n * n }, (_, p) => (p % 7 === 3 ? 0 : 1));
    for (const [causal, m, stretch] of [
      [false, null, true],
      [true, mask, true],
      [true, null, false],
    ]) {
      const W = A.weights(S, n, 0.7, causal, m);
      const whole = paint({ rows: n, cols: n, row: rowsOf(W, n), lo: 0, hi: stretch ? A.extent(W)[1] : 1, lut, closedPixel: 999, causal, mask: m });
      const picture = weightPicture({ scores: S, n, temperature: 0.7, causal, mask: m, stretch, lut, closedPixel: 999 });
      assert.deepEqual(picture.pixels, whole.pixels);
      if (stretch) assert.equal(picture.top, A.extent(W)[1]);
    }
  }
});
