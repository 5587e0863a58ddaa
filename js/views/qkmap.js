// Queries and keys together: one head's every query and key of every text in one 2-D map (the
// kernel's query_key_map, qkmap.py). Queries are dots, keys rings; coloured by position or by
// token; hover names the token and its text, a click opens that text at that token.
import { decodeMatrix } from "../attention.js";
import { el, fill, luminance, short } from "./dom.js";

const HEIGHT = 340,
  PAD = 14,
  NEAR = 7; // px: how close the pointer must come to a point to name it
const CELL = 16; // px: the hover index's buckets

/** @typedef {import("./dom.js").Palette} Palette */
/** A typed array as the kernel sends it (computed_views._buffer).
 * @typedef {{ shape: number[], dtype: "float32" | "int32" | "uint8", view: DataView }} Buffer */
/**
 * The kernel's map (computed_views._query_key_map), or as exported: n points, each a query or a key.
 * @typedef {object} QkAnswer
 * @property {Buffer} points  n × 2, float32
 * @property {Buffer} text  each point's text (int32)
 * @property {Buffer} position  its token's position in that text (int32)
 * @property {Buffer} query  1 for a query, 0 for a key (uint8)
 * @property {string[]} token
 * @property {number[]} [explained]  the variance the two axes explain
 * @property {string} [error]  why it could not be computed (then nothing else)
 */
/**
 * @typedef {object} QkView
 * @property {boolean} on
 * @property {QkAnswer | null} answer  null while there is none to draw
 * @property {string} [pending]  words for a map not yet current
 * @property {string[]} [texts]
 * @property {number} layer
 * @property {number} head
 * @property {Palette} pal
 * @property {number} width
 */
/** @typedef {{ node: HTMLElement, update(view: QkView): void, destroy(): void }} QkMap */
/** @typedef {{ answer: QkAnswer, pal: Palette, width: number, texts: string[], dpr: number }} Drawn */

/** @param {Buffer} a */
const numbers = (a) => /** @type {import("../types").Matrix} */ (decodeMatrix(/** @type {import("../state").ArrayValue} */ (a))).data; // (int32 and uint8 too: decodeMatrix reads them) // (its dtype's typed array, wherever the buffer sits)
// a hue per token, spread by the golden angle so that neighbours in a vocabulary differ
/** @param {string} token */
const hueOf = (token) => {
  let h = 0;
  for (const ch of token) h = (h * 31 + /** @type {number} */ (ch.codePointAt(0))) >>> 0;
  return (h * 137.508) % 360;
};

/** createQkMap(parent, {onOpen(text, position)}) -> {node, width(), update({answer, pending, texts, layer, head, pal, width}), destroy()}.
 * @param {HTMLElement} parent
 * @param {{ onOpen: (text: number, position: number) => void }} options
 * @returns {QkMap} */
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
  const node = /** @type {HTMLElement & { pointAt?: (i: number) => number[] | null }} */ (
    el(
      "figure",
      { class: "aw-figure aw-qk", hidden: true },
      el("figcaption", {}, title, el("label", {}, " colour by ", by), status),
      el("div", { class: "aw-qk-plot" }, canvas, tip),
      key,
    )
  );
  parent.append(node);
  /** @type {Drawn | null} */
  let shown = null; // drawn last
  /** @type {ReturnType<typeof layout> | null} */
  let laid = null; // {xs, ys (CSS px), grid: Map(bucket -> indices)}
  by.addEventListener("change", () => shown && draw(shown));

  /** @param {QkAnswer} a  @param {number} width */
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
      grid = /** @type {Map<string, number[]>} */ (new Map());
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

  /** @param {Drawn} v */
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
    const ctx = /** @type {CanvasRenderingContext2D} */ (canvas.getContext("2d"));
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.clearRect(0, 0, width, HEIGHT);
    laid = layout(a, width);
    let last = 0;
    for (let i = 0; i < laid.n; i++) last = Math.max(last, position[i]);
    const byToken = by.value === "token",
      light = luminance(pal.bg) < 0.5 ? 64 : 40; // readable on the theme's background
    /** @param {number} i */
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

  /** The point nearest (x, y) within NEAR px, or -1.
   * @param {number} x  @param {number} y */
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
  /** @param {MouseEvent} ev  @returns {[number, number]} */
  const at = (ev) => {
    const r = canvas.getBoundingClientRect();
    return [ev.clientX - r.left - canvas.clientLeft, ev.clientY - r.top - canvas.clientTop]; // (inside its border)
  };
  /** @param {number} i */
  const describe = (i) => {
    const a = /** @type {Drawn} */ (shown).answer,
      t = numbers(a.text)[i],
      pos = numbers(a.position)[i],
      q = a.query.view.getUint8(i);
    const named = /** @type {Drawn} */ (shown).texts[t];
    return `“${a.token[i]}” · ${q ? "query" : "key"} of token ${pos}${named === undefined ? "" : ` · text ${t}: ${short(named, 40)}`}`;
  };
  /** @param {MouseEvent} ev */
  function onMove(ev) {
    const [x, y] = at(ev),
      i = nearest(x, y);
    tip.hidden = i < 0;
    canvas.style.cursor = i < 0 ? "" : "pointer";
    if (i < 0) return;
    tip.textContent = describe(i); // token text is data: set as text, never as HTML
    tip.style.left = `${Math.min(x + 12, /** @type {Drawn} */ (shown).width - 220)}px`; // (a point found: one is drawn)
    tip.style.top = `${y + 12}px`;
    node.dataset.hovered = String(i);
  }
  const onLeave = () => {
    tip.hidden = true;
  };
  /** @param {MouseEvent} ev */
  function onClick(ev) {
    const i = nearest(...at(ev));
    if (i >= 0) {
      const a = /** @type {Drawn} */ (shown).answer; // (a point found: one is drawn)
      onOpen(numbers(a.text)[i], numbers(a.position)[i]);
    }
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
      if (same && /** @type {Drawn} */ (shown).pal.bg === pal.bg) return; // drawn already
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
