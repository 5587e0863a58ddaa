// Queries and keys together: one head's every query and key of every text in one 2-D map (the
// kernel's query_key_map, qkmap.py). Queries are dots, keys rings; coloured by position or by
// token; hover names the token and its text, a click opens that text at that token.
import { decodeMatrix } from "../attention.js";
import { el, fill, luminance, short } from "./dom.js";

const HEIGHT = 340,
  PAD = 14,
  NEAR = 7; // px: how close the pointer must come to a point to name it
const CELL = 16; // px: the hover index's buckets

const numbers = (a) => decodeMatrix(a).data; // (its dtype's typed array, wherever the buffer sits)
// a hue per token, spread by the golden angle so that neighbours in a vocabulary differ
const hueOf = (token) => {
  let h = 0;
  for (const ch of token) h = (h * 31 + ch.codePointAt(0)) >>> 0;
  return (h * 137.508) % 360;
};

/** createQkMap(parent, {onOpen(text, position)}) -> {node, width(), update({answer, pending, texts, layer, head, pal, width}), destroy()}. */
export function createQkMap(parent, { onOpen }) {
  const title = el("span", { class: "aw-qk-title" });
  const by = el(
    "select",
    { class: "aw-qk-colour", "aria-label": "Colour the points by" },
    el("option", { value: "position" }, "position"),
    el("option", { value: "token" }, "token"),
  );
  const status = el("span", { class: "aw-qk-status", role: "status" });
  const canvas = el("canvas", { class: "aw-qk-canvas", role: "img" });
  const tip = el("div", { class: "aw-tip aw-qk-tip", hidden: true });
  const key = el("p", { class: "aw-qk-key" });
  const node = el(
    "figure",
    { class: "aw-figure aw-qk", hidden: true },
    el("figcaption", {}, title, el("label", {}, " colour by ", by), status),
    el("div", { class: "aw-qk-plot" }, canvas, tip),
    key,
  );
  parent.append(node);
  let shown = null, // {answer, points, texts, ...} drawn last
    laid = null; // {xs, ys (CSS px), grid: Map(bucket -> indices)}
  by.addEventListener("change", () => shown && draw(shown));

  function layout(a, width) {
    const pts = numbers(a.points),
      n = pts.length / 2;
    let x0 = Infinity,
      x1 = -Infinity,
      y0 = Infinity,
      y1 = -Infinity;
    for (let i = 0; i < n; i++) {
      x0 = Math.min(x0, pts[2 * i]);
      x1 = Math.max(x1, pts[2 * i]);
      y0 = Math.min(y0, pts[2 * i + 1]);
      y1 = Math.max(y1, pts[2 * i + 1]);
    }
    // one scale for both axes: distances on the map are distances between the vectors
    const span = Math.max(x1 - x0, y1 - y0, 1e-12),
      s = Math.min(width - 2 * PAD, HEIGHT - 2 * PAD) / span;
    const ox = (width - (x1 - x0) * s) / 2,
      oy = (HEIGHT - (y1 - y0) * s) / 2;
    const xs = new Float32Array(n),
      ys = new Float32Array(n),
      grid = new Map();
    for (let i = 0; i < n; i++) {
      xs[i] = ox + (pts[2 * i] - x0) * s;
      ys[i] = HEIGHT - (oy + (pts[2 * i + 1] - y0) * s); // the second axis points up
      const b = `${Math.floor(xs[i] / CELL)},${Math.floor(ys[i] / CELL)}`;
      const list = grid.get(b);
      if (list) list.push(i);
      else grid.set(b, [i]);
    }
    return { xs, ys, grid, n };
  }

  function draw(v) {
    const { answer: a, pal, width } = v;
    const text = numbers(a.text),
      position = numbers(a.position),
      query = numbers(a.query);
    const dpr = window.devicePixelRatio || 1;
    canvas.width = Math.round(width * dpr);
    canvas.height = Math.round(HEIGHT * dpr);
    canvas.style.width = `${width}px`;
    canvas.style.height = `${HEIGHT}px`;
    const ctx = canvas.getContext("2d");
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.clearRect(0, 0, width, HEIGHT);
    laid = layout(a, width);
    let last = 0;
    for (let i = 0; i < laid.n; i++) last = Math.max(last, position[i]);
    const byToken = by.value === "token",
      light = luminance(pal.bg) < 0.5 ? 64 : 40; // readable on the theme's background
    const colour = (i) => `hsl(${byToken ? hueOf(a.token[i]) : 270 * (1 - position[i] / Math.max(1, last))}, 70%, ${light}%)`;
    ctx.lineWidth = 1.2;
    for (let i = 0; i < laid.n; i++) {
      ctx.beginPath();
      ctx.arc(laid.xs[i], laid.ys[i], query[i] ? 2.6 : 3.2, 0, 2 * Math.PI);
      if (query[i]) {
        ctx.fillStyle = colour(i);
        ctx.fill();
      } else {
        ctx.strokeStyle = colour(i);
        ctx.stroke();
      }
    }
    const texts = new Set(text).size,
      [e1, e2] = a.explained || [];
    canvas.setAttribute("aria-label", `${laid.n} points: the queries and keys of ${texts} text${texts === 1 ? "" : "s"}`);
    fill(
      key,
      "● query  ○ key · ",
      byToken ? "a colour per token" : `colour: position 0 (violet) to ${last} (red)`,
      e1 == null ? "" : ` · axes: the first two principal components (${Math.round(100 * e1)}% and ${Math.round(100 * e2)}% of the variance)`,
    );
    node.dataset.points = String(laid.n);
    node.dataset.drawn = String(performance.now());
  }

  /** The point nearest (x, y) within NEAR px, or -1. */
  function nearest(x, y) {
    if (!laid) return -1;
    let best = -1,
      d = NEAR * NEAR;
    const bx = Math.floor(x / CELL),
      by_ = Math.floor(y / CELL);
    for (let dx = -1; dx <= 1; dx++)
      for (let dy = -1; dy <= 1; dy++)
        for (const i of laid.grid.get(`${bx + dx},${by_ + dy}`) || []) {
          const e = (laid.xs[i] - x) ** 2 + (laid.ys[i] - y) ** 2;
          if (e < d) [best, d] = [i, e];
        }
    return best;
  }
  const at = (ev) => {
    const r = canvas.getBoundingClientRect();
    return [ev.clientX - r.left - canvas.clientLeft, ev.clientY - r.top - canvas.clientTop]; // (inside its border)
  };
  const describe = (i) => {
    const a = shown.answer,
      t = numbers(a.text)[i],
      pos = numbers(a.position)[i],
      q = a.query.view.getUint8(i);
    const named = shown.texts[t];
    return `“${a.token[i]}” · ${q ? "query" : "key"} of token ${pos}${named === undefined ? "" : ` · text ${t}: ${short(named, 40)}`}`;
  };
  function onMove(ev) {
    const [x, y] = at(ev),
      i = nearest(x, y);
    tip.hidden = i < 0;
    canvas.style.cursor = i < 0 ? "" : "pointer";
    if (i < 0) return;
    tip.textContent = describe(i); // token text is data: set as text, never as HTML
    tip.style.left = `${Math.min(x + 12, shown.width - 220)}px`;
    tip.style.top = `${y + 12}px`;
    node.dataset.hovered = String(i);
  }
  const onLeave = () => {
    tip.hidden = true;
  };
  function onClick(ev) {
    const i = nearest(...at(ev));
    if (i >= 0) onOpen(numbers(shown.answer.text)[i], numbers(shown.answer.position)[i]);
  }
  node.pointAt = (i) => (laid ? [laid.xs[i], laid.ys[i]] : null); // for scripts and tests: where point i is drawn
  canvas.addEventListener("mousemove", onMove);
  canvas.addEventListener("mouseleave", onLeave);
  canvas.addEventListener("click", onClick);

  return {
    node,
    /** answer: the kernel's (or as exported), null while none; pending: words for a map not yet current. */
    update({ on, answer, pending = "", texts = [], layer, head, pal, width }) {
      node.hidden = !on;
      if (!on) return;
      title.textContent = `Queries and keys of ${texts.length > 1 ? `all ${texts.length} texts` : "this text"}: layer ${layer}, head ${head}`;
      status.textContent = answer?.error ? ` could not be computed: ${answer.error}` : pending;
      const w = Math.max(240, Math.min(520, width));
      if (!answer?.points || answer.error) return;
      const v = { answer, pal, width: w, texts, dpr: window.devicePixelRatio || 1 };
      const same = shown && shown.answer === answer && shown.width === w && shown.dpr === v.dpr;
      if (same && shown.pal.bg === pal.bg) return; // drawn already
      shown = v;
      draw(v);
    },
    destroy() {
      canvas.removeEventListener("mousemove", onMove);
      canvas.removeEventListener("mouseleave", onLeave);
      canvas.removeEventListener("click", onClick);
      node.remove();
    },
  };
}
