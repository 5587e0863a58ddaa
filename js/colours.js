// Every colour scale the page draws with, from the theme's palette (views/dom.js palette()):
// one place, so the matrix, the thumbnails, the cache view and the token chips agree.
import { interpolateLab, interpolateRgb } from "d3-interpolate";
import { scaleDiverging, scaleSequential } from "d3-scale";

/** @typedef {import("./views/dom.js").Palette} Palette */
/** @typedef {Pick<Palette, "neg" | "zero" | "pos">} Hues */

/** Two hues from a neutral 0, and already a fifth of the way to either at the smallest nonzero
 * score: a small negative and a small positive score never look alike, in either theme.
 * @param {Hues} hues  @returns {(t: number) => string} */
export function diverging({ neg, zero, pos }) {
  const toNeg = interpolateLab(zero, neg),
    toPos = interpolateLab(zero, pos);
  return (t) => (t === 0.5 ? zero : t < 0.5 ? toNeg(0.2 + 0.8 * (1 - 2 * t)) : toPos(0.2 + 0.8 * (2 * t - 1)));
}

/** Signed numbers (scores, q and k, a bias) on a symmetric domain: a negative one is never pale.
 * @param {Hues} pal  @param {number} top */
export const signedColours = (pal, top) => scaleDiverging(diverging(pal)).domain([-top, 0, top]);

/** A difference of weights on a symmetric domain, straight from a neutral 0: a difference too
 * small to read is as pale as it is small (the signed scale's jump would tint every cell).
 * @param {Hues} hues  @param {number} top */
export function differenceColours({ neg, zero, pos }, top) {
  const toNeg = interpolateLab(zero, neg),
    toPos = interpolateLab(zero, pos);
  return scaleDiverging((/** @type {number} */ t) => (t < 0.5 ? toNeg(1 - 2 * t) : toPos(2 * t - 1))).domain([-top, 0, top]);
}

/** The colours of the weights: 0 to 1, or (long inputs, max < 1) stretched to the largest.
 * @param {Pick<Palette, "zero" | "seq">} pal */
export function weightColours(pal, top = 1) {
  return scaleSequential(interpolateLab(pal.zero, pal.seq)).domain([0, top || 1]);
}

/** @type {{ from: string, to: string, at: (t: number) => string } | null} */
let tints = null; // the chips' interpolator and the two colours it runs between: made once, not per chip
/** A token chip's tint for the weight w it is read with (none: the panel).
 * @param {Pick<Palette, "panel" | "seq">} pal  @param {number | null | undefined} [w] */
export function chipTint(pal, w) {
  if (tints?.from !== pal.panel || tints.to !== pal.seq) tints = { from: pal.panel, to: pal.seq, at: interpolateRgb(pal.panel, pal.seq) };
  return tints.at(w == null ? 0 : 0.7 * w);
}
