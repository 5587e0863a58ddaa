// The picture of a large matrix: one pixel per cell, coloured through a 256-step lookup table.
// Past MAX_SIDE rows or columns a pixel stands for a block of cells and shows the block's cell of
// largest magnitude (the strongest weight, the most extreme score), so no spike is lost to
// scaling. The page and its painting worker share this file, so both draw exactly alike.

import { weightRow } from "./attention.js";

export const MAX_SIDE = 1024;

/** A painted picture: one packed pixel per block of cells, and the largest value shown. */
/** @typedef {{ pixels: Uint32Array<ArrayBuffer>, width: number, height: number, top: number }} Painted */
/** @typedef {{ r: number, g: number, b: number }} RGB */
/**
 * @typedef {object} PaintOptions
 * @property {number} rows
 * @property {number} cols
 * @property {(i: number, out: Float64Array) => ArrayLike<number>} row
 * @property {number} lo
 * @property {number | "max"} hi
 * @property {Uint32Array} lut
 * @property {number} closedPixel
 * @property {boolean} [causal]
 * @property {ArrayLike<number> | null} [mask]
 * @property {((i: number, j: number) => boolean) | null} [closed]
 */
/**
 * What weightPicture needs: the scores (n rows), the temperature and rules (and a learnt sink), and the colours.
 * @typedef {object} WeightJob
 * @property {Float64Array} scores
 * @property {number | null} [sink]
 * @property {number} n
 * @property {number} temperature
 * @property {boolean} causal
 * @property {Uint8Array | null} mask
 * @property {boolean} stretch
 * @property {Uint32Array} lut
 * @property {number} closedPixel
 */

const littleEndian = new Uint8Array(new Uint32Array([1]).buffer)[0] === 1;
/** An opaque colour {r, g, b} as one 32-bit pixel (RGBA bytes in memory order). */
/** @type {(colour: RGB) => number} */
export const pack = ({ r, g, b }) => (littleEndian ? ((255 << 24) | (b << 16) | (g << 8) | r) >>> 0 : ((r << 24) | (g << 16) | (b << 8) | 255) >>> 0);

/** For each of n cells, its block among `side` blocks of whole cells (block b holds cells
 * floor(b·n/side) up to, not including, floor((b+1)·n/side)).
 * @param {number} n  @param {number} side */
function blockOf(n, side) {
  const of = new Int32Array(n);
  for (let b = 0; b < side; b++) of.fill(b, Math.floor((b * n) / side), Math.floor(((b + 1) * n) / side));
  return of;
}

/**
 * paint({rows, cols, row(i, out), lo, hi, lut, closedPixel, causal, mask, closed(i, j)})
 * -> {pixels: Uint32Array, width, height, top}. row(i, out) gives row i's values (filling `out`,
 * cols long, or returning its own array); `lut` holds 256 packed colours from lo to hi, and
 * hi = "max" runs them up to the largest value shown (returned as top). A cell is closed when
 * causal and j > i, when the mask (rows × cols, 0 = closed) says so, or when closed(i, j); a
 * block with no open cell gets closedPixel. Rows are read one at a time: a long input's whole
 * matrix need never be held.
 * @param {PaintOptions} options  @returns {Painted}
 */
export function paint({ rows, cols, row, lo, hi, lut, closedPixel, causal = false, mask = null, closed = null }) {
  const width = Math.min(cols, MAX_SIDE),
    height = Math.min(rows, MAX_SIDE);
  const rowBlock = blockOf(rows, height),
    colBlock = blockOf(cols, width);
  const best = new Float64Array(width * height),
    size = new Float64Array(width * height).fill(-1); // -1: no open cell
  const out = new Float64Array(cols);
  for (let i = 0; i < rows; i++) {
    const values = row(i, out),
      y = rowBlock[i] * width,
      end = causal ? Math.min(cols, i + 1) : cols;
    for (let j = 0; j < end; j++) {
      if ((mask && !mask[i * cols + j]) || closed?.(i, j)) continue;
      const v = values[j],
        m = v < 0 ? -v : v,
        p = y + colBlock[j];
      if (m > size[p] || size[p] < 0) {
        size[p] = m;
        best[p] = v;
      }
    }
  }
  let top = -Infinity;
  if (hi === "max") for (let p = 0; p < best.length; p++) if (size[p] >= 0 && best[p] > top) top = best[p];
  const high = hi === "max" ? (top > lo ? top : lo + 1) : hi,
    step = high > lo ? 255 / (high - lo) : 0;
  const pixels = new Uint32Array(width * height);
  for (let p = 0; p < pixels.length; p++) {
    if (size[p] < 0) {
      pixels[p] = closedPixel;
      continue;
    }
    const k = (best[p] - lo) * step + 0.5; // the table's nearest entry
    pixels[p] = lut[k < 0 ? 0 : k > 255 ? 255 : k | 0];
  }
  return { pixels, width, height, top: top === -Infinity ? 0 : top };
}

/** A colour scale as 256 packed colours from lo to hi: `rgb` turns a CSS colour into {r, g, b}.
 * @param {(v: number) => string} color  @param {number} lo  @param {number} hi  @param {(color: string) => RGB} rgb */
export function lookupTable(color, lo, hi, rgb) {
  return Uint32Array.from({ length: 256 }, (_, k) => pack(rgb(color(lo + ((hi - lo) * k) / 255))));
}

/**
 * The weights at a temperature, row by row, and their picture: what the painting worker does for
 * each message, and the page itself where no worker can start (n rows of scores). The colours run from 0 to 1, or to
 * the largest weight when `stretch` (returned as top either way).
 * @param {WeightJob} job  @returns {Painted}
 */
export function weightPicture({ scores, n, temperature, causal, mask, stretch, lut, closedPixel, sink = null }) {
  const m = scores.length / n; // n rows (queries) of m keys
  /** @param {number} i  @param {Float64Array} out */
  const row = (i, out) => weightRow(scores, m, i, temperature, causal, mask, out, sink);
  return paint({ rows: n, cols: m, row, lo: 0, hi: stretch ? "max" : 1, lut, closedPixel, causal, mask });
}
