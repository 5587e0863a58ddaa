// Small DOM helpers. Text always goes in as text nodes, never as HTML.
import { format } from "d3-format";

const SVG_NS = "http://www.w3.org/2000/svg";

function build(node, attrs, children) {
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value == null || value === false) continue;
    if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children.flat()) {
    if (child == null) continue;
    node.append(typeof child === "object" ? child : document.createTextNode(String(child)));
  }
  return node;
}

/** el("button", {class: "x", onclick: f}, "label", childNode) */
export function el(tag, attrs, ...children) {
  return build(document.createElement(tag), attrs, children);
}

export function svg(tag, attrs, ...children) {
  return build(document.createElementNS(SVG_NS, tag), attrs, children);
}

/** Replace all of a node's children. */
export function fill(node, ...children) {
  node.replaceChildren(...children.flat().filter((c) => c != null).map((c) => (typeof c === "object" ? c : document.createTextNode(String(c)))));
  return node;
}

/** The widget's theme colours, read from its CSS variables (they follow JupyterLab's theme). */
export function palette(root) {
  const css = getComputedStyle(root);
  const get = (name) => css.getPropertyValue(name).trim();
  return {
    fg: get("--aw-fg"), muted: get("--aw-muted"), bg: get("--aw-bg"),
    pos: get("--aw-pos"), neg: get("--aw-neg"), zero: get("--aw-zero"), seq: get("--aw-seq"),
    accent: get("--aw-accent"), masked: get("--aw-masked"),
    font: css.fontFamily || "sans-serif",
  };
}

export const fmt2 = format(".2f");
export const fmt3 = format(".3f");
export const pct = format(".0%");
export const fmtE = format(".2~g"); // 1.2e-7, 7.1e+7, 1
/** A temperature: two decimals on the slider's scale, powers of ten beyond it (T = 1e-6 is not "0.00"). */
export const fmtT = (t) => (t >= 0.01 && t < 1e4 ? fmt2(t) : format(".2~e")(t));

/** Points that land on the same spot share one label ("the, a, of +2"), so labels never pile up. */
export function groupLabels(points, labels, digits = 3) {
  const groups = new Map();
  points.forEach(([x, y], i) => {
    const key = `${x.toFixed(digits)},${y.toFixed(digits)}`;
    if (!groups.has(key)) groups.set(key, { x, y, names: [], index: i });
    groups.get(key).names.push(labels[i]);
  });
  return [...groups.values()].map((g) => {
    const names = g.names.map((name) => short(name));
    return { x: g.x, y: g.y, index: g.index, label: names.length > 3 ? `${names.slice(0, 3).join(", ")} +${names.length - 3}` : names.join(", ") };
  });
}

/** A label for a cramped place: long token text cut to `max` characters with an ellipsis. */
export const short = (text, max = 24) => (text.length > max ? `${text.slice(0, max - 1)}…` : text);
