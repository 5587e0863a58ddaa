// The picture of a large matrix: one pixel per cell, coloured through a 256-step lookup table.
// Past MAX_SIDE rows or columns a pixel stands for a block of cells and shows the block's cell of
// largest magnitude (the strongest weight, the most extreme score), so no spike is lost to
// scaling. The page and its painting worker share this file, so both draw exactly alike.

import { extent, weights } from "./attention.js";

export const MAX_SIDE = 1024;

const littleEndian = new Uint8Array(new Uint32Array([1]).buffer)[0] === 1;
/** An opaque colour {r, g, b} as one 32-bit pixel (RGBA bytes in memory order). */
export const pack = ({ r, g, b }) => (littleEndian ? ((255 << 24) | (b << 16) | (g << 8) | r) >>> 0 : ((r << 24) | (g << 16) | (b << 8) | 255) >>> 0);

/** For each of `side` blocks of `n` cells, the first cell of the next block (side + 1 bounds). */
function bounds(n, side) {
  return Int32Array.from({ length: side + 1 }, (_, b) => Math.floor((b * n) / side));
}

/**
 * paint({rows, cols, data | value(i, j), lo, hi, lut, closedPixel, causal, mask, closed(i, j)})
 * -> {pixels: Uint32Array, width, height}. `lut` holds 256 packed colours from lo to hi; a cell
 * is closed when causal and j > i, when the mask (rows × cols, 0 = closed) says so, or when
 * closed(i, j) is true; a block of closed cells gets closedPixel.
 */
export function paint({ rows, cols, data, value, lo, hi, lut, closedPixel, causal = false, mask = null, closed = null }) {
  const width = Math.min(cols, MAX_SIDE), height = Math.min(rows, MAX_SIDE);
  const pixels = new Uint32Array(width * height), step = hi > lo ? 255 / (hi - lo) : 0;
  const colour = (v) => {
    const k = (v - lo) * step;
    return lut[k < 0 ? 0 : k > 255 ? 255 : k | 0];
  };
  if (width === cols && height === rows) { // one pixel per cell: the hot path, no block bookkeeping
    for (let i = 0, p = 0; i < rows; i++) {
      for (let j = 0; j < cols; j++, p++) {
        const shut = (causal && j > i) || (mask && !mask[p]) || (closed && closed(i, j));
        pixels[p] = shut ? closedPixel : colour(data ? data[p] : value(i, j));
      }
    }
    return { pixels, width, height };
  }
  const rb = bounds(rows, height), cb = bounds(cols, width);
  for (let y = 0; y < height; y++) {
    for (let x = 0; x < width; x++) {
      let best = NaN, size = -1;
      for (let i = rb[y]; i < rb[y + 1]; i++) {
        for (let j = cb[x]; j < cb[x + 1]; j++) {
          const p = i * cols + j;
          if ((causal && j > i) || (mask && !mask[p]) || (closed && closed(i, j))) continue;
          const v = data ? data[p] : value(i, j), m = Math.abs(v);
          if (m > size) { size = m; best = v; }
        }
      }
      pixels[y * width + x] = size < 0 ? closedPixel : colour(best);
    }
  }
  return { pixels, width, height };
}

/** A colour scale as 256 packed colours from lo to hi: `rgb` turns a CSS colour into {r, g, b}. */
export function lookupTable(color, lo, hi, rgb) {
  return Uint32Array.from({ length: 256 }, (_, k) => pack(rgb(color(lo + ((hi - lo) * k) / 255))));
}

/**
 * The weights at a temperature and their picture, from scores held apart: what the painting
 * worker does for each message, and the page itself where no worker can start. `W` (n×n) is
 * written over. The colours run from 0 to 1, or to the largest weight when `stretch`.
 */
export function weightPicture({ scores, n, temperature, causal, mask, stretch, lut, closedPixel }, W) {
  weights(scores, n, temperature, causal, mask, W);
  const top = stretch ? extent(W)[1] : 1;
  return { ...paint({ rows: n, cols: n, data: W, lo: 0, hi: top || 1, lut, closedPixel, causal, mask }), top };
}
