// Small DOM helpers. Text always goes in as text nodes, never as HTML.

import { rgb } from "d3-color";
import { format } from "d3-format";

const SVG_NS = "http://www.w3.org/2000/svg";

/** A child of el/svg/fill: a node, or text (a number or string), or an array of them (flattened
 * one level); null and undefined are left out. */
/** @typedef {Node | string | number | null | undefined} Leaf */
/** @typedef {Leaf | Leaf[]} Child */
/** Handlers by their event's name ("onclick" gets a MouseEvent). */
/** @typedef {{ [K in keyof GlobalEventHandlersEventMap as `on${K}`]?: (event: GlobalEventHandlersEventMap[K]) => void }} Handlers */
/** Attributes: null, undefined and false are left out, true is the empty string, the rest is written as a string. */
/** @typedef {Handlers & { [name: string]: string | number | boolean | null | undefined | Function }} Attrs */
/** @typedef {(n: number) => string} Fmt */
/** @typedef {ReturnType<typeof palette>} Palette */
/** @typedef {import("../types").ClosedWhy} ClosedWhy */

/**
 * @template {Element} N
 * @param {N} node  @param {Attrs | null | undefined} attrs  @param {Child[]} children
 * @returns {N}
 */
function build(node, attrs, children) {
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value == null || value === false) continue;
    if (key.startsWith("on")) node.addEventListener(key.slice(2), /** @type {EventListener} */ (value));
    else node.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children.flat()) {
    if (child == null) continue;
    node.append(typeof child === "object" ? child : document.createTextNode(String(child)));
  }
  return node;
}

/** el("button", {class: "x", onclick: f}, "label", childNode)
 * @template {keyof HTMLElementTagNameMap} K
 * @param {K} tag  @param {Attrs | null} [attrs]  @param {...Child} children
 * @returns {HTMLElementTagNameMap[K]}
 */
export function el(tag, attrs, ...children) {
  return build(document.createElement(tag), attrs, children);
}

/**
 * @template {keyof SVGElementTagNameMap} K
 * @param {K} tag  @param {Attrs | null} [attrs]  @param {...Child} children
 * @returns {SVGElementTagNameMap[K]}
 */
export function svg(tag, attrs, ...children) {
  return build(document.createElementNS(SVG_NS, tag), attrs, children);
}

/** Replace all of a node's children.
 * @template {Element} N
 * @param {N} node  @param {...Child} children
 * @returns {N}
 */
export function fill(node, ...children) {
  node.replaceChildren(
    ...children
      .flat()
      .filter((c) => c != null)
      .map((c) => (typeof c === "object" ? /** @type {Node} */ (c) : document.createTextNode(String(c)))),
  );
  return node;
}

/** The widget's theme colours, read from its CSS variables (they follow JupyterLab's theme).
 * @param {Element} root */
export function palette(root) {
  const css = getComputedStyle(root);
  /** @param {string} name */
  const get = (name) => css.getPropertyValue(name).trim();
  return {
    fg: get("--aw-fg"),
    muted: get("--aw-muted"),
    bg: get("--aw-bg"),
    panel: get("--aw-panel"),
    pos: get("--aw-pos"),
    neg: get("--aw-neg"),
    zero: get("--aw-zero"),
    seq: get("--aw-seq"),
    accent: get("--aw-accent"),
    masked: get("--aw-masked"),
    font: css.fontFamily || "sans-serif",
  };
}

/** @type {Fmt} */
export const fmt2 = format(".2f");
/** @type {Fmt} */
export const fmt3 = format(".3f");
/** Numbers written to two significant figures of the scale's top, and never fewer than two decimals:
 * a long row's weights near 1/197 read 0.0051, not 0.01, alike in the cells and the legend.
 * @type {(top: number) => Fmt} */
export const figuresTo = (top) => (top > 0 && top < 0.1 ? format(`.${1 - Math.floor(Math.log10(top))}f`) : fmt2);
/** @type {Fmt} */
export const pct = format(".0%");
/** @type {Fmt} */
export const fmtE = format(".2~g"); // 1.2e-7, 7.1e+7, 1
/** @type {Fmt} */
export const fmtG = format(".3~g"); // three figures, not three decimals: ALiBi's slopes run down to 2^(−8)
/** A temperature as it is: two decimals for the slider's own values, more digits for one set from
 * Python (0.2371 is not "0.24"), powers of ten far from 1 (T = 1e-6 is not "0.00").
 * @type {Fmt} */
export const fmtT = (t) => (t >= 0.01 && t < 1e4 ? (Math.round(t * 100) / 100 === t ? fmt2(t) : format(".4~g")(t)) : format(".2~e")(t));

/** Whole percentages of a row of weights that add up to exactly 100 (largest remainders get the
 * leftover points); a row that reads nothing stays all 0.
 * @param {number[]} weights  @returns {number[]} */
export function percentages(weights) {
  const total = weights.reduce((a, w) => a + w, 0);
  if (!(total > 0)) return weights.map(() => 0);
  const exact = weights.map((w) => (100 * w) / total),
    out = exact.map(Math.floor);
  let left = 100 - out.reduce((a, p) => a + p, 0);
  const order = exact.map((x, i) => /** @type {[number, number]} */ ([x - out[i], i])).sort((a, b) => b[0] - a[0]);
  for (const [, i] of order) {
    if (left-- <= 0) break;
    out[i] += 1;
  }
  return out;
}

/** Points that land on the same spot share one label ("the, a, of +2"), so labels never pile up.
 * @param {number[][]} points  @param {string[]} labels
 * @returns {{ x: number, y: number, index: number, label: string, count: number }[]} */
export function groupLabels(points, labels, digits = 3) {
  /** @type {Map<string, { x: number, y: number, names: string[], index: number }>} */
  const groups = new Map();
  points.forEach(([x, y], i) => {
    const key = `${x.toFixed(digits)},${y.toFixed(digits)}`;
    if (!groups.has(key)) groups.set(key, { x, y, names: [], index: i });
    /** @type {{ names: string[] }} */ (groups.get(key)).names.push(labels[i]);
  });
  return [...groups.values()].map((g) => {
    const names = g.names.map((name) => short(name));
    // "+2 more": a count of names, not a number on the plot
    const label = names.length > 3 ? `${names.slice(0, 3).join(", ")} +${names.length - 3} more` : names.join(", ");
    return { x: g.x, y: g.y, index: g.index, label, count: names.length };
  });
}

/** A label for a cramped place: long token text cut to `max` characters with an ellipsis.
 * @param {string} text */
export function short(text, max = 24) {
  if (text.length <= max) return text;
  const chars = Array.from(text); // whole characters: cutting UTF-16 units could split one in half
  return chars.length > max ? `${chars.slice(0, max - 1).join("")}…` : text;
}

/** WCAG relative luminance of a CSS colour.
 * @param {string} color */
export function luminance(color) {
  const { r, g, b } = rgb(color);
  /** @param {number} c */
  const lin = (c) => ((c /= 255) <= 0.03928 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4);
  return 0.2126 * lin(r) + 0.7152 * lin(g) + 0.0722 * lin(b);
}

/** Black or white text, whichever contrasts more with the background (WCAG's ratio). Black, not
 * a near-black: on a mid tint the better of the two is then always at least 4.58 : 1 (AA).
 * @param {string} background */
export function inkOn(background) {
  const l = luminance(background);
  return (l + 0.05) / 0.05 >= 1.05 / (l + 0.05) ? "#000" : "#fff";
}

/** Calls redraw when the notebook's theme changes (canvas colours come from CSS variables) or
 * when the root or `also` changes width (a theme switch briefly collapses the token strip, and
 * arcs need its real layout). Returns the function that stops watching.
 * @param {Element} root  @param {Element} also  @param {() => void} redraw
 * @returns {() => void} */
export function watchLayout(root, also, redraw) {
  const theme = new MutationObserver(redraw);
  theme.observe(document.body, { attributes: true, attributeFilter: ["data-jp-theme-light", "data-jp-theme-name"] });
  /** @type {WeakMap<Element, number>} */
  const widths = new WeakMap();
  const resize = new ResizeObserver((entries) => {
    for (const e of entries) {
      if (widths.get(e.target) !== e.contentRect.width) {
        widths.set(e.target, e.contentRect.width);
        redraw();
      }
    }
  });
  resize.observe(root);
  resize.observe(also);
  return () => {
    theme.disconnect();
    resize.disconnect();
  };
}

/** A colour scale's legend: its title, its ends (written by `fmt`) and the bar between them.
 * @param {Element} node  @param {string} title  @param {(v: number) => string} color
 * @param {number} lo  @param {number} hi  @param {Fmt} [fmt] */
export function legend(node, title, color, lo, hi, fmt = fmt2) {
  const at = Array.from({ length: 21 }, (_, i) => lo + ((hi - lo) * i) / 20);
  if (lo < 0 && hi > 0) at.push(0); // the neutral zero gets its own stop
  const stops = at.sort((a, b) => a - b).map((v) => `${color(v)} ${hi > lo ? ((100 * (v - lo)) / (hi - lo)).toFixed(1) : 0}%`);
  fill(
    node,
    el("span", { class: "aw-legend-title" }, title),
    el("span", {}, fmt(lo)),
    el("span", { class: "aw-legend-bar", style: `background: linear-gradient(to right, ${stops.join(", ")})` }),
    el("span", {}, fmt(hi)),
  );
}

/** Why a cell is closed (derived.js closedWhy), in words: short (a row's cell), in the matrix's
 * tooltip, and as a sentence naming the tokens (the cell's arithmetic).
 * @type {Record<ClosedWhy, { short: string, tip: string, sentence: (reader: string, read: string) => string }>} */
export const CLOSED = {
  ahead: {
    short: "cannot read ahead",
    tip: "cannot read ahead",
    sentence: (reader, read) => `${read} comes after ${reader}: with the causal rule it cannot be read`,
  },
  sink: { short: "left out", tip: "the first token is left out", sentence: (_, read) => `${read} is the first token, left out in the sink view` },
  mask: { short: "masked", tip: "the mask closes this cell", sentence: (reader, read) => `the mask closes this cell: ${reader} may not read ${read}` },
};
