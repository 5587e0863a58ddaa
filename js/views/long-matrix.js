// A long text's attention matrix: the head's whole map pooled onto pixels (each pixel's largest
// weight, or its mean), zoomed (wheel, +/−, buttons) and panned (drag, arrow keys) down to single
// cells. The region on screen is asked of the source once the view rests, and drawn when it comes:
// pooled onto the screen's pixels while it is larger than them, then each cell exact, with its
// number once there is room; the pooled picture meanwhile. Closed cells (ahead of the causal rule,
// outside a sliding window) are drawn as such from the layer's shape, at any zoom.
import { rgb } from "d3-color";
import { interpolateLab } from "d3-interpolate";
import { scaleLinear } from "d3-scale";
import { pack } from "../picture.js";
import { el, fmtE, inkOn } from "./dom.js";
import { visible } from "./long-strip.js";

const WIDE = 112, // room for a row's position and token
  NARROW = 52, // room for a position alone (a narrow page)
  TOP = 22,
  MIN_SPAN = 6, // cells on a side at the deepest zoom
  MAP = 512, // the whole map's pixels on a side
  RANGE = 1e4, // the log scale spans the map's largest weight down to 1/RANGE of it
  REST = 120, // ms the view rests before its region is asked for
  MAX_REGION = 2 ** 26; // cells the kernel computes for one region (long_widget.py): past it, the map serves
const commas = new Intl.NumberFormat("en-US").format;

/** @typedef {import("../long.js").Source} Source  @typedef {import("../long.js").LayerShape} LayerShape */
/** @typedef {{ layer: number, head: number, how: string, temperature: number, shape: LayerShape, focus: number }} Shown */
/** @typedef {{ canvas: HTMLCanvasElement, values: Float32Array, rows: number, cols: number, top: number, key: string }} Picture */
/** @typedef {Picture & { r0: number, r1: number, c0: number, c1: number, exact: boolean, scores: Float32Array | null }} Region */

/** Where a weight lies on the page's scale, 0 to 1: linear from 0 to `top`, or log from top / RANGE to top.
 * @param {number} top  @param {boolean} log  @returns {(w: number) => number} */
export function position(top, log) {
  const lo = Math.log10(top / RANGE),
    span = Math.log10(RANGE);
  return (w) => (!(w > 0 && top > 0) ? 0 : Math.min(1, Math.max(0, log ? (Math.log10(w) - lo) / span : w / top)));
}

/** The colours of 257 steps of the scale, packed for an ImageData.
 * @param {import("./dom.js").Palette} pal */
export function steps(pal) {
  const name = `${pal.zero} ${pal.seq}`;
  if (made?.name !== name) {
    const at = interpolateLab(pal.zero, pal.seq),
      css = Array.from({ length: 257 }, (_, k) => at(k / 256));
    made = { name, css: (t) => at(t), packed: Uint32Array.from(css, (c) => pack(rgb(c))), ink: css.map(inkOn) };
  }
  return made;
}
/** The last palette's steps (made once: the theme changes rarely), with each step's ink for a number on it.
 * @type {{ name: string, css: (t: number) => string, packed: Uint32Array, ink: string[] } | null} */
let made = null;

/** An image of `values` (rows × cols), each at its place on the scale (see position), as a canvas to
 * draw from. The scale is written out in the loop: a region's million pixels in a few milliseconds.
 * @param {Float32Array} values  @param {number} rows  @param {number} cols  @param {number} top  @param {boolean} log  @param {Uint32Array} packed */
export function picture(values, rows, cols, top, log, packed) {
  const canvas = document.createElement("canvas");
  canvas.width = cols;
  canvas.height = rows;
  const image = new ImageData(cols, rows),
    px = new Uint32Array(image.data.buffer),
    lo = Math.log10(top / RANGE),
    perLog = 256 / Math.log10(RANGE),
    perWeight = top > 0 ? 256 / top : 0;
  for (let i = 0; i < rows * cols; i++) {
    const v = values[i],
      t = v > 0 ? (log ? (Math.log10(v) - lo) * perLog : v * perWeight) : 0;
    px[i] = packed[t <= 0 ? 0 : t >= 256 ? 256 : (t + 0.5) | 0];
  }
  canvas.getContext("2d")?.putImageData(image, 0, 0);
  return canvas;
}

/**
 * @param {HTMLElement} box
 * @param {{ tokens: string[], pal: () => import("./dom.js").Palette, source: Source, onFocus: (i: number) => void }} options
 */
export function createMatrix(box, { tokens, pal, source, onFocus }) {
  const n = tokens.length;
  const canvas = el("canvas", {
    class: "aw-long-canvas",
    tabindex: "0",
    role: "application",
    "aria-roledescription": "zoomable attention map",
    title: "Wheel or + and − to zoom, drag or arrow keys to pan, 0 for the whole map; click a row to focus it",
  });
  const tip = el("div", { class: "aw-tip", hidden: true });
  const status = el("p", { class: "aw-long-status", role: "status" });
  const scaleButton = el("button", { type: "button", "aria-pressed": "true" }, "log scale");
  const bar = el("span", { class: "aw-legend-bar" }),
    legendText = el("span", { class: "aw-long-legend-text" });
  const tools = el(
    "div",
    { class: "aw-long-tools" },
    el("button", { type: "button", "aria-label": "zoom in", onclick: () => zoomBy(2) }, "+"),
    el("button", { type: "button", "aria-label": "zoom out", onclick: () => zoomBy(0.5) }, "−"),
    el("button", { type: "button", onclick: () => setView(0, 0, n) }, "whole map"),
    scaleButton,
    el("span", { class: "aw-legend" }, el("span", {}, "0"), bar, legendText),
  );
  box.append(el("figure", { class: "aw-long-matrix" }, tools, el("div", { class: "aw-canvas-wrap" }, canvas, tip), status));

  /** @type {Shown | null} */
  let shown = null;
  /** @type {Picture | null} */
  let base = null;
  /** @type {Region | null} */
  let region = null;
  let r0 = 0,
    c0 = 0,
    span = n,
    log = true,
    side = 300,
    LEFT = WIDE,
    mapAsked = 0,
    regionAsked = 0,
    timer = 0,
    saying = "", // about the map (computing it, or why there is none)
    regionSaying = ""; // about the region on screen (why its cells are not here); a change of view clears it
  const key = () => (shown ? `${shown.layer}/${shown.head}/${shown.how}/${shown.temperature}` : "");
  const say = (/** @type {string} */ text) => (status.textContent = saying = text);

  /** The scale's top: the map's largest weight, or (no map of the head shown yet) the region's own. */
  const top = (/** @type {Float32Array} */ values) => (base && base.key === key() ? base.top : values.reduce((a, v) => Math.max(a, v), 0) || 1);
  /** A picture of `values` at the current scale. @param {Float32Array} values  @param {number} rows  @param {number} cols */
  const paint = (values, rows, cols) => picture(values, rows, cols, top(values), log, steps(pal()).packed);

  async function askMap() {
    if (!shown) return;
    const mine = ++mapAsked,
      { layer, head, how } = shown,
      size = Math.min(n, MAP),
      wanted = key();
    say(`Computing head ${head}'s whole map (every row, a band at a time)…`);
    const reply = await source.ask(
      { ask: "map", layer, head, how, size: [size, size] },
      (f) => mine === mapAsked && say(`Computing head ${head}'s whole map: ${Math.round(100 * f)}% of its rows…`),
    );
    if (mine !== mapAsked || wanted !== key() || reply?.answer.kind === "superseded") return;
    if (!reply) return say(`This page holds no map of layer ${layer}, head ${head}: its author kept other heads (see above).`);
    if (reply.answer.kind === "error") return say(reply.answer.message);
    const { rows, cols, top } = reply.answer;
    base = { canvas: document.createElement("canvas"), rows, cols, top, key: wanted, values: reply.buffers[0] };
    base.canvas = paint(base.values, rows, cols); // (on its own top: base first)
    saying = "";
    if (region) region.canvas = paint(region.values, region.rows, region.cols); // (on the map's scale)
    draw();
    askRegion();
  }

  function askRegion() {
    clearTimeout(timer);
    regionSaying = "";
    const R0 = Math.floor(r0),
      R1 = Math.min(n, Math.ceil(r0 + span)),
      C0 = Math.floor(c0),
      C1 = Math.min(n, Math.ceil(c0 + span));
    if (span >= n || (R1 - R0) * (C1 - C0) > MAX_REGION || !shown) {
      region = null; // (the whole map serves)
      return draw();
    }
    timer = window.setTimeout(async () => {
      if (!shown) return;
      const mine = ++regionAsked,
        wanted = key(),
        px = Math.min(1024, Math.round(side * (window.devicePixelRatio || 1)));
      const reply = await source.ask({ ask: "region", layer: shown.layer, head: shown.head, how: shown.how, r0: R0, r1: R1, c0: C0, c1: C1, size: [px, px] });
      if (mine !== regionAsked || wanted !== key()) return;
      if (!reply || reply.answer.kind === "error") {
        regionSaying = reply ? reply.answer.message : "Zoomed in, this page shows the pooled map: each cell's own weight is computed by a live notebook.";
        return draw();
      }
      const a = reply.answer;
      region = {
        canvas: paint(reply.buffers[0], a.rows, a.cols),
        rows: a.rows,
        cols: a.cols,
        top: 0,
        key: wanted,
        r0: a.r0,
        r1: a.r1,
        c0: a.c0,
        c1: a.c1,
        exact: a.exact,
        values: reply.buffers[0],
        scores: reply.buffers[1] || null,
      };
      canvas.dataset.regions = String(Number(canvas.dataset.regions || 0) + 1); // (regions drawn: for tests and benchmarks)
      draw();
    }, REST);
  }

  /** Whether cell (i, j) is closed by the layer's shape. @param {number} i  @param {number} j */
  const closed = (i, j) => !!shown?.shape.causal && (j > i || (shown.shape.window != null && j <= i - shown.shape.window));

  function draw() {
    const p = pal(),
      dpr = window.devicePixelRatio || 1;
    LEFT = box.clientWidth < 520 ? NARROW : WIDE;
    side = Math.max(120, Math.min(box.clientWidth - LEFT - 28, 720));
    const width = LEFT + side + 24, // (room for the last column number, centred on its column)
      height = TOP + side + 4;
    if (canvas.width !== Math.round(width * dpr) || canvas.height !== Math.round(height * dpr)) {
      canvas.width = Math.round(width * dpr);
      canvas.height = Math.round(height * dpr);
      canvas.style.width = `${width}px`;
      canvas.style.height = `${height}px`;
    }
    const g = /** @type {CanvasRenderingContext2D} */ (canvas.getContext("2d"));
    g.setTransform(dpr, 0, 0, dpr, 0, 0);
    g.clearRect(0, 0, width, height);
    const s = side / span; // pixels a cell
    g.fillStyle = p.zero;
    g.fillRect(LEFT, TOP, side, side);
    g.imageSmoothingEnabled = false;
    const mine = region && region.key === key() ? region : null,
      covered = !!mine && mine.r0 <= r0 && mine.c0 <= c0 && mine.r1 >= r0 + span && mine.c1 >= c0 + span;
    if (base && base.key === key() && !covered)
      g.drawImage(base.canvas, (c0 * base.cols) / n, (r0 * base.rows) / n, (span * base.cols) / n, (span * base.rows) / n, LEFT, TOP, side, side);
    const cells = region && region.key === key() && region.exact ? region : null;
    g.save();
    g.beginPath();
    g.rect(LEFT, TOP, side, side);
    g.clip();
    if (region && region.key === key())
      g.drawImage(region.canvas, LEFT + (region.c0 - c0) * s, TOP + (region.r0 - r0) * s, (region.c1 - region.c0) * s, (region.r1 - region.r0) * s);
    drawClosed(g, p, s);
    if (cells && s >= 34) drawNumbers(g, cells, s);
    const f = shown?.focus ?? -1;
    if (f >= r0 - 1 && f < r0 + span) {
      g.strokeStyle = p.accent;
      g.lineWidth = 2;
      g.strokeRect(LEFT, TOP + (f - r0) * s, side, Math.max(2, s));
    }
    g.restore();
    drawAxes(g, p, s);
    const exact =
      !!cells &&
      cells.r0 <= Math.floor(r0) &&
      cells.c0 <= Math.floor(c0) &&
      cells.r1 >= Math.min(n, Math.ceil(r0 + span)) &&
      cells.c1 >= Math.min(n, Math.ceil(c0 + span));
    Object.assign(canvas.dataset, {
      view: [r0, r0 + span, c0, c0 + span].map((x) => Math.round(x)).join(","),
      shown: key(), // (layer/head/how/temperature: whose map and cells these are)
      shows: exact ? "cells" : region && region.key === key() ? "pooled region" : base && base.key === key() ? "map" : "nothing",
    });
    canvas.setAttribute(
      "aria-label",
      `attention of layer ${shown?.layer}, head ${shown?.head}: rows ${commas(Math.floor(r0))} to ${commas(Math.ceil(r0 + span) - 1)}, columns ${commas(Math.floor(c0))} to ${commas(Math.ceil(c0 + span) - 1)}`,
    );
    const zoomed = region && region.key === key() && !region.exact ? region : null,
      pooled = zoomed || (base && base.key === key() ? base : null),
      perPixel = zoomed ? (zoomed.r1 - zoomed.r0) / zoomed.rows : n / (base ? base.rows : 1);
    if (saying || regionSaying) status.textContent = saying || regionSaying;
    else if (exact)
      status.textContent = `Rows ${commas(cells.r0)}–${commas(cells.r1 - 1)} × columns ${commas(cells.c0)}–${commas(cells.c1 - 1)}: each cell's weight, exact${s >= 34 ? ", written in it" : " (zoom in to read the numbers)"}.`;
    else if (pooled)
      status.textContent = `Each pixel of the picture holds ${perPixel >= 1.05 ? `about ${commas(Math.round(perPixel))} × ${commas(Math.round(perPixel))} cells` : "a cell"}: ${shown?.how === "mean" ? "their mean weight" : "their largest weight"}. Wheel or +/− to zoom, drag or arrow keys to pan, click a row to focus it.`;
    const colours = steps(p);
    bar.style.background = `linear-gradient(to right, ${Array.from({ length: 11 }, (_, k) => colours.css(k / 10)).join(", ")})`;
    legendText.textContent = base ? `${fmtE(base.top)} (${log ? `log scale from ${fmtE(base.top / RANGE)}` : "linear"})` : "";
  }

  /** @param {CanvasRenderingContext2D} g  @param {import("./dom.js").Palette} p  @param {number} s */
  function drawClosed(g, p, s) {
    if (!shown?.shape.causal) return;
    const w = shown.shape.window,
      x = (/** @type {number} */ j) => LEFT + (j - c0) * s,
      y = (/** @type {number} */ i) => TOP + (i - r0) * s;
    g.fillStyle = p.masked;
    if (span <= 2 * side) {
      // a row at a time: the staircase of whole cells
      for (let i = Math.max(0, Math.floor(r0)); i < Math.min(n, r0 + span); i++) {
        g.fillRect(x(i + 1), y(i), LEFT + side - x(i + 1), s);
        if (w != null) g.fillRect(LEFT, y(i), x(i - w + 1) - LEFT, s);
      }
      return;
    }
    const top = r0,
      bottom = r0 + span;
    g.beginPath();
    g.moveTo(x(top + 1), y(top));
    g.lineTo(LEFT + side + 1, y(top));
    g.lineTo(LEFT + side + 1, y(bottom));
    g.lineTo(x(bottom + 1), y(bottom));
    g.fill();
    if (w != null) {
      g.beginPath();
      g.moveTo(LEFT - 1, y(top));
      g.lineTo(x(top - w + 1), y(top));
      g.lineTo(x(bottom - w + 1), y(bottom));
      g.lineTo(LEFT - 1, y(bottom));
      g.fill();
    }
  }

  /** @param {CanvasRenderingContext2D} g  @param {Region} cells  @param {number} s */
  function drawNumbers(g, cells, s) {
    const where = position(top(cells.values), log),
      ink = steps(pal()).ink;
    g.font = `11px ${pal().font}`;
    g.textAlign = "center";
    g.textBaseline = "middle";
    for (let i = Math.max(cells.r0, Math.floor(r0)); i < Math.min(cells.r1, r0 + span); i++)
      for (let j = Math.max(cells.c0, Math.floor(c0)); j < Math.min(cells.c1, c0 + span); j++) {
        if (closed(i, j)) continue;
        const v = cells.values[(i - cells.r0) * cells.cols + (j - cells.c0)];
        g.fillStyle = ink[(256 * where(v) + 0.5) | 0];
        g.fillText(fmtE(v), LEFT + (j - c0 + 0.5) * s, TOP + (i - r0 + 0.5) * s, s - 3);
      }
  }

  /** @param {CanvasRenderingContext2D} g  @param {import("./dom.js").Palette} p  @param {number} s */
  function drawAxes(g, p, s) {
    g.font = `11px ${p.font}`;
    g.fillStyle = p.muted;
    g.textBaseline = "middle";
    g.textAlign = "right";
    const ticks = (/** @type {number} */ from, /** @type {number} */ count) =>
      scaleLinear()
        .domain([from, from + span])
        .ticks(count)
        .filter(Number.isInteger);
    if (s >= 13) {
      for (let i = Math.max(0, Math.floor(r0)); i < Math.min(n, r0 + span); i++) {
        g.fillStyle = i === shown?.focus ? p.accent : p.fg;
        const label = LEFT === WIDE ? `${commas(i)} ${visible(tokens[i], 10)}` : commas(i);
        g.fillText(label, LEFT - 5, TOP + (i - r0 + 0.5) * s, LEFT - 8);
      }
    } else for (const t of ticks(r0, Math.max(2, Math.floor(side / 45)))) g.fillText(commas(t), LEFT - 5, TOP + (t - r0 + 0.5) * s, LEFT - 8);
    g.fillStyle = p.muted;
    g.textAlign = "center";
    g.textBaseline = "bottom";
    // a column's number over it once there is room for it; else ticks a number's width apart
    const room = commas(Math.ceil(c0 + span)).length * 7 + 10;
    for (const t of ticks(c0, s >= room ? span : Math.max(2, Math.floor(side / (room + 20)))))
      g.fillText(commas(t), LEFT + (t - c0 + 0.5) * s, TOP - 4, Math.max(s, room) - 2);
  }

  /** The cell under a pointer event, in rows and columns (fractions). @param {MouseEvent} e */
  function at(e) {
    const box = canvas.getBoundingClientRect(),
      x = e.clientX - box.left - LEFT,
      y = e.clientY - box.top - TOP;
    return x < 0 || y < 0 || x >= side || y >= side ? null : { i: r0 + (y * span) / side, j: c0 + (x * span) / side, x: x + LEFT, y: y + TOP };
  }

  /** @param {number} rr  @param {number} cc  @param {number} ss */
  function setView(rr, cc, ss) {
    span = Math.max(Math.min(MIN_SPAN, n), Math.min(n, ss));
    r0 = Math.max(0, Math.min(n - span, rr));
    c0 = Math.max(0, Math.min(n - span, cc));
    draw();
    askRegion();
  }
  /** Zoom by `f` about a point (default: the middle). @param {number} f  @param {{ i: number, j: number } | null} [p] */
  function zoomBy(f, p = null) {
    const i = p ? p.i : r0 + span / 2,
      j = p ? p.j : c0 + span / 2,
      to = Math.max(Math.min(MIN_SPAN, n), Math.min(n, span / f));
    setView(i - ((i - r0) * to) / span, j - ((j - c0) * to) / span, to);
  }

  /** @type {{ x: number, y: number, r0: number, c0: number, moved: boolean } | null} */
  let drag = null;
  /** @param {PointerEvent} e */
  const down = (e) => {
    drag = { x: e.clientX, y: e.clientY, r0, c0, moved: false };
    canvas.setPointerCapture?.(e.pointerId);
  };
  /** @param {PointerEvent} e */
  const move = (e) => {
    if (drag && (drag.moved || Math.abs(e.clientX - drag.x) + Math.abs(e.clientY - drag.y) > 3)) {
      drag.moved = true;
      tip.hidden = true;
      return setView(drag.r0 - ((e.clientY - drag.y) * span) / side, drag.c0 - ((e.clientX - drag.x) * span) / side, span);
    }
    const p = at(e);
    if (!p) return void (tip.hidden = true);
    const i = Math.floor(p.i),
      j = Math.floor(p.j),
      cells = region && region.key === key() && region.exact && i >= region.r0 && i < region.r1 && j >= region.c0 && j < region.c1 ? region : null;
    const cell = `row ${commas(i)} “${visible(tokens[i], 16)}” × column ${commas(j)} “${visible(tokens[j], 16)}”`;
    if (closed(i, j)) tip.textContent = `${cell}: closed (${j > i ? "it cannot read ahead" : "outside the sliding window"})`;
    else if (cells) {
      const k = (i - cells.r0) * cells.cols + (j - cells.c0);
      tip.textContent = `${cell}: weight ${cells.values[k].toPrecision(4)}${cells.scores ? `, score ${cells.scores[k].toPrecision(4)}` : ""}`;
    } else tip.textContent = `${cell}${span / side > 1.05 ? " (and its neighbours in this pixel)" : ""}: zoom in for the cell's own number`;
    tip.hidden = false;
    const wide = tip.offsetWidth; // (to the pointer's left where it would run past the canvas's right edge)
    tip.style.left = `${p.x + 14 + wide > canvas.clientWidth ? Math.max(0, p.x - 14 - wide) : p.x + 14}px`;
    tip.style.top = `${p.y + 12}px`;
  };
  /** @param {PointerEvent} e */
  const up = (e) => {
    const p = at(e);
    if (drag && !drag.moved && p) onFocus(Math.floor(p.i));
    drag = null;
  };
  /** @param {WheelEvent} e */
  const wheel = (e) => {
    if (span >= n && e.deltaY > 0) return; // (nothing to zoom out of: the notebook scrolls on)
    e.preventDefault();
    zoomBy(Math.exp(-e.deltaY * 0.002), at(e));
  };
  /** @param {KeyboardEvent} e */
  const key_ = (e) => {
    const step = span / 10,
      moves = /** @type {Record<string, () => void>} */ ({
        ArrowUp: () => setView(r0 - step, c0, span),
        ArrowDown: () => setView(r0 + step, c0, span),
        ArrowLeft: () => setView(r0, c0 - step, span),
        ArrowRight: () => setView(r0, c0 + step, span),
        "+": () => zoomBy(1.5),
        "=": () => zoomBy(1.5),
        "-": () => zoomBy(1 / 1.5),
        0: () => setView(0, 0, n),
        Home: () => setView(0, 0, n),
      });
    if (!(e.key in moves)) return;
    e.preventDefault();
    moves[e.key]();
  };
  canvas.addEventListener("pointerdown", down);
  canvas.addEventListener("pointermove", move);
  canvas.addEventListener("pointerup", up);
  canvas.addEventListener("pointerleave", () => (tip.hidden = true));
  canvas.addEventListener("wheel", wheel, { passive: false });
  canvas.addEventListener("keydown", key_);
  scaleButton.addEventListener("click", () => {
    log = !log;
    scaleButton.setAttribute("aria-pressed", String(log));
    repaint();
  });
  function repaint() {
    if (base) base.canvas = paint(base.values, base.rows, base.cols);
    if (region) region.canvas = paint(region.values, region.rows, region.cols);
    draw();
  }
  const resize = new ResizeObserver(() => draw());
  resize.observe(box);

  return {
    /** Show a layer's head (a new map is asked for when it is another's, or at another temperature). @param {Shown} s */
    show(s) {
      const before = key();
      shown = s;
      if (key() !== before) {
        region = null;
        askMap();
        askRegion(); // (the region on screen, asked at once: a whole map may take a while)
      }
      draw();
    },
    /** @param {number} i */
    focus(i) {
      if (shown) shown = { ...shown, focus: i };
      draw();
    },
    redraw: repaint,
    destroy() {
      clearTimeout(timer);
      resize.disconnect();
      box.replaceChildren();
    },
  };
}
