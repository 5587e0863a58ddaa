// The blend stage: the focused row's weights against the value grid, the products and their
// sum (the output), and a 2-D plot of the values, their convex hull, their mean and the outputs.

import { polygonHull } from "d3-polygon";
import { scaleLinear } from "d3-scale";
import { extent, meanRow, project } from "../attention.js";
import { el, fill, fmt2, fmt3, groupLabels, short, svg } from "./dom.js";
import { drawLabel, measurer, place } from "./labels.js";

const MAX_DIMS = 6; // wider values: the table shows the first few dimensions, exactly
const MAX_COLS = 10; // longer sequences: the table lists the heaviest tokens, one column each

const W = 340,
  H = 300;
const L = 42,
  R = W - 10,
  T = 20,
  B = H - 42; // the plotting area; ticks and axis names around it

/** @typedef {import("../types").Matrix} Matrix */
/**
 * @typedef {object} BlendView
 * @property {string[]} tokens  the rows: one output each
 * @property {string[]} keys  the values' tokens
 * @property {boolean} cross
 * @property {number} focus
 * @property {number[]} row  the focused row's weights
 * @property {Matrix} v  the values
 * @property {Float64Array} O  the outputs, row-major (tokens × v's width)
 * @property {number} sense  sense resolved (attention.js senseResolved)
 * @property {number} spread  output spread over every token
 * @property {string[]} axes  the names of the values' two axes
 * @property {Matrix | null} x  each token's own embedding, or null
 * @property {boolean} residual  x + the mix shown (x is there)
 * @property {Matrix | null} basis  values wider than two: their two principal axes (d × 2)
 */
/** @typedef {{ node: HTMLElement, update(view: BlendView): void, destroy(): void }} Blend */
/** A label the plot places (labels.js place), before its text is measured.
 * @typedef {{ x: number, y: number, r: number, toward?: number | null, far?: number, text: string, cls: string, optional?: boolean,
 *   nearest?: boolean, w?: number, h?: number, ascent?: number }} Label */
/** @typedef {[number, number, number, number]} Segment */

/** x and y scales on which one unit is as long across as up (distances on the plot are true
 * distances), the data centred with a margin.
 * @param {number[]} xs  [smallest, largest]  @param {number[]} ys */
function equalScales([x0, x1], [y0, y1]) {
  const k = Math.min((R - L) / Math.max(x1 - x0, 1e-9), (B - T) / Math.max(y1 - y0, 1e-9)) / 1.1;
  const cx = x0 / 2 + x1 / 2,
    cy = y0 / 2 + y1 / 2; // halves first: no overflow
  const hx = (R - L) / 2 / k,
    hy = (B - T) / 2 / k;
  return {
    x: scaleLinear()
      .domain([cx - hx, cx + hx])
      .range([L, R]),
    y: scaleLinear()
      .domain([cy - hy, cy + hy])
      .range([B, T]),
  };
}

// The screen angle from a to b: a label at b goes this way, away from a.
/** @param {number[]} a  @param {number[]} b */
const away = (a, b) => (Math.hypot(b[0] - a[0], b[1] - a[1]) < 1 ? null : Math.atan2(b[1] - a[1], b[0] - a[0]));

/** createBlend(parent, {onResidual(bool)}) -> {update(state), destroy()}
 * @param {HTMLElement} parent
 * @param {{ onResidual: (on: boolean) => void }} options
 * @returns {Blend} */
export function createBlend(parent, { onResidual }) {
  const table = el("table", { class: "aw-blend-table" });
  const residual = el("input", { type: "checkbox", class: "aw-residual" });
  residual.addEventListener("change", () => onResidual(residual.checked));
  const residualToggle = el("label", { class: "aw-toggle", hidden: true }, residual, "add the mix to the word's own numbers (x + mix)");
  const plot = svg("svg", { class: "aw-plot", width: W, height: H, viewBox: `0 0 ${W} ${H}`, role: "img" }); // (shrinks with a narrow output)
  const readout = el("p", { class: "aw-metrics" });
  const legend = el("ul", { class: "aw-plot-legend" });
  const node = el(
    "div",
    { class: "aw-blend" },
    el("figure", { class: "aw-figure" }, el("figcaption", {}, "weights × values = output"), table, residualToggle),
    el("figure", { class: "aw-figure" }, el("figcaption", {}, "values, their hull and the outputs"), plot, legend, readout),
  );
  parent.append(node);

  // The lab's layout: one column per token, its weight above its value; multiply down each column,
  // sum across, and the output is the column on the right (then, with the residual, x and x + mix).
  /** @param {BlendView} view */
  function drawTable({ tokens, keys, focus, row, v, O, x, residual: withX }) {
    const d = v.cols,
      dims = Array.from({ length: Math.min(d, MAX_DIMS) }, (_, c) => c);
    const sub = (/** @type {number} */ c) => (d <= 10 ? String.fromCharCode(0x2080 + c) : `[${c}]`); // Python's columns: v[:, 0], …
    // long rows: the heaviest tokens in sentence order, the rest summed up in one column
    let shown = keys.map((_, j) => j);
    if (shown.length > MAX_COLS)
      shown = shown
        .sort((a, b) => row[b] - row[a])
        .slice(0, MAX_COLS)
        .sort((a, b) => a - b);
    const rest = shown.length < keys.length;
    /** @param {(js: number[]) => string} f */
    const restOf = (f) => f(keys.map((_, j) => j).filter((j) => !shown.includes(j)));
    /** @param {number[]} js  @param {(j: number) => number} f */
    const sum = (js, f) => js.reduce((t, j) => t + f(j), 0);
    /** @param {(j: number) => string} f  @param {string} [cls] */
    const cells = (f, cls) => shown.map((j) => el("td", { class: [row[j] === 0 ? "aw-zero" : "", cls || ""].join(" ").trim() || null }, f(j)));
    const me = short(tokens[focus], 16);
    const lines = [
      el(
        "tr",
        {},
        el("th", {}),
        shown.map((j) => el("th", { scope: "col", class: "aw-key" }, keys[j])),
        rest ? el("th", { scope: "col", class: "aw-rest" }, `… ${keys.length - shown.length} more`) : [],
        el("th", { scope: "col", class: "aw-out-head" }, "output"),
        withX ? [el("th", { scope: "col" }, `+ x(${me})`), el("th", { scope: "col" }, "= x + mix")] : [],
      ),
      el(
        "tr",
        { class: "aw-weights" },
        el("th", { scope: "row" }, `a(${me}, ·)`),
        cells((j) => fmt3(row[j])),
        rest
          ? el(
              "td",
              { class: "aw-rest" },
              restOf((js) => fmt3(sum(js, (j) => row[j]))),
            )
          : [],
        el("td", { class: "aw-budget" }, `Σ ${fmt3(row.reduce((a, b) => a + b, 0))}`),
        withX ? [el("td"), el("td")] : [],
      ),
      dims.map((c) =>
        el(
          "tr",
          { class: "aw-values" },
          el("th", { scope: "row" }, `v${sub(c)}`),
          cells((j) => fmt2(v.data[j * d + c]), "aw-v"),
          rest ? el("td", { class: "aw-rest" }) : [],
          el("td"),
          withX ? [el("td"), el("td")] : [],
        ),
      ),
      dims.map((c, i) =>
        el(
          "tr",
          { class: i === 0 ? "aw-products aw-first" : "aw-products" },
          el("th", { scope: "row" }, `a·v${sub(c)}`),
          cells((j) => fmt3(row[j] * v.data[j * d + c])),
          rest
            ? el(
                "td",
                { class: "aw-rest" },
                restOf((js) => fmt3(sum(js, (j) => row[j] * v.data[j * d + c]))),
              )
            : [],
          el("td", { class: "aw-out", "data-dim": c }, fmt2(O[focus * d + c])),
          withX
            ? [
                el("td", { class: "aw-own" }, fmt2(/** @type {Matrix} */ (x).data[focus * d + c])), // (with the residual: x is there)
                el("td", { class: "aw-out aw-with-x", "data-dim": c }, fmt2(/** @type {Matrix} */ (x).data[focus * d + c] + O[focus * d + c])),
              ]
            : [],
        ),
      ),
    ];
    fill(table, el("tbody", {}, lines.flat()));
  }

  /** @param {BlendView} view */
  function drawPlot({ tokens, keys, cross, focus, v: values, O: outputs, axes, x: X, residual: withX, basis }) {
    // values wider than two: plot both values and outputs on V's principal axes
    const count = tokens.length; // outputs: one per row (in cross-attention, not one per value)
    let v = values,
      O = outputs,
      mix = outputs;
    if (basis) {
      const centre = meanRow(values);
      v = project(values.data, values.rows, centre, basis);
      O = project(outputs, count, centre, basis).data;
      // the residual moves the word by the mix itself: project it without the centre
      mix = project(outputs, count, new Float64Array(values.cols), basis).data;
      if (withX) X = project(/** @type {Matrix} */ (X).data, count, centre, basis); // (with the residual: x is there)
      axes = ["principal axis 1 of V", "principal axis 2 of V"];
    }
    const n = v.rows,
      d = v.cols;
    const px = (/** @type {number} */ j) => v.data[j * d],
      py = (/** @type {number} */ j) => (d > 1 ? v.data[j * d + 1] : 0);
    const ox = (/** @type {number} */ i) => O[i * d],
      oy = (/** @type {number} */ i) => (d > 1 ? O[i * d + 1] : 0);
    // with the residual, the word starts at its own embedding and moves by the mix
    const at = /** @type {Matrix} */ (X); // (read only with the residual: x is there)
    const own = withX ? [at.data[focus * d], d > 1 ? at.data[focus * d + 1] : 0] : null;
    const moved = /** @type {number[]} */ (own && [own[0] + mix[focus * d], own[1] + (d > 1 ? mix[focus * d + 1] : 0)]); // (with own)
    const xs = [0],
      ys = [0];
    for (let j = 0; j < n; j++) {
      xs.push(px(j));
      ys.push(py(j));
    }
    for (let i = 0; i < count; i++) {
      xs.push(ox(i));
      ys.push(oy(i));
    }
    if (own) {
      xs.push(own[0], moved[0]);
      ys.push(own[1], moved[1]);
    }
    const { x, y } = equalScales(extent(xs), extent(ys));
    const measure = measurer(plot),
      /** @type {(SVGElement | null)[]} */
      parts = [], // (a label without a leader: null, which fill leaves out)
      /** @type {number[][]} */
      taken = [],
      /** @type {Segment[]} */
      lines = [],
      /** @type {number[][]} */
      marks = [];
    // a text at a fixed place (ticks, axis titles): drawn now, and kept clear of the labels
    /** @param {string} text  @param {string} cls  @param {number} at  @param {number} baseline  @param {string} anchor */
    const fixed = (text, cls, at, baseline, anchor) => {
      const m = measure(text, cls),
        left = at - (anchor === "end" ? m.w : anchor === "middle" ? m.w / 2 : 0);
      const box = [left, baseline - m.ascent, left + m.w, baseline - m.ascent + m.h];
      taken.push(box);
      parts.push(svg("text", { class: cls, x: left.toFixed(1), y: baseline }, text));
    };
    /** @param {string} cls  @param {number} x1  @param {number} y1  @param {number} x2  @param {number} y2 */
    const line = (cls, x1, y1, x2, y2) => {
      lines.push([x1, y1, x2, y2]);
      parts.push(svg("line", { class: cls, x1, y1, x2, y2 }));
    };
    /** @param {SVGElement} node  @param {number[]} at  @param {number} r */
    const mark = (node, [cx, cy], r) => {
      marks.push([cx - r, cy - r, cx + r, cy + r]);
      parts.push(node);
    };

    // axes through zero; numbers along the bottom and the left, one unit as long on both
    /** @type {Segment[]} */
    const walls = [
      [L, y(0), R, y(0)],
      [x(0), T, x(0), B],
    ];
    for (const w of walls) line("aw-axis", ...w);
    for (const t of x.ticks(5)) {
      parts.push(svg("line", { class: "aw-tick-mark", x1: x(t), x2: x(t), y1: B, y2: B + 4 }));
      fixed(x.tickFormat(5)(t), "aw-tick aw-tick-x", x(t), B + 16, "middle");
    }
    if (d > 1)
      for (const t of y.ticks(5)) {
        parts.push(svg("line", { class: "aw-tick-mark", x1: L - 4, x2: L, y1: y(t), y2: y(t) }));
        fixed(y.tickFormat(5)(t), "aw-tick aw-tick-y", L - 6, y(t) + 4, "end");
      }
    fixed(`${short(axes[0] || "v₁", 40)} →`, "aw-axis-label", R, H - 5, "end");
    if (d > 1) fixed(`↑ ${short(axes[1] || "v₂", 40)}`, "aw-axis-label", 4, 12, "start");
    // convex hull of the values: every output must land inside it
    const pts = Array.from({ length: n }, (_, j) => /** @type {[number, number]} */ ([x(px(j)), y(py(j))]));
    const hull = n >= 3 ? polygonHull(pts) : null;
    if (hull) {
      parts.push(svg("path", { class: "aw-hull", d: `M${hull.map((p) => p.join(",")).join("L")}Z` }));
      hull.forEach((p, i) => lines.push([...p, ...hull[(i + 1) % hull.length]]));
    } else if (n === 2) line("aw-hull", ...pts[0], ...pts[1]);
    // the mean of the values, the values, and every token's output
    const mean = meanRow(v),
      m = [x(mean[0]), y(d > 1 ? mean[1] : 0)];
    mark(svg("path", { class: "aw-mean", d: `M${m[0] - 5},${m[1] - 5}L${m[0] + 5},${m[1] + 5}M${m[0] - 5},${m[1] + 5}L${m[0] + 5},${m[1] - 5}` }), m, 5);
    pts.forEach((p) => mark(svg("circle", { class: "aw-value", cx: p[0], cy: p[1], r: 4 }), p, 4));
    for (let i = 0; i < count; i++) if (i !== focus) mark(svg("circle", { class: "aw-output", cx: x(ox(i)), cy: y(oy(i)), r: 3 }), [x(ox(i)), y(oy(i))], 3);
    // the focused output, with the path from its own value (cross-attention's rows have none here)
    /** @type {[number, number]} */
    const f = [x(ox(focus)), y(oy(focus))];
    if (!cross) line("aw-move", ...pts[focus], ...f);
    mark(svg("circle", { class: "aw-output aw-focus-output", cx: f[0], cy: f[1], r: 6.5 }), f, 6.5);
    const name = short(tokens[focus]);
    // the output's label first, on the far side from the mean, away from the crowd
    /** @type {Label[]} */
    const labels = [
      {
        x: f[0],
        y: f[1],
        r: 6.5,
        toward: away(m, f),
        cls: "aw-output-label",
        text: basis ? `${name}'s output (projected)` : `${name} output (${fmt2(ox(focus))}${d > 1 ? `, ${fmt2(oy(focus))}` : ""})`,
      },
    ];
    if (own) {
      /** @type {[number, number]} */
      const start = [x(own[0]), y(own[1])],
        /** @type {[number, number]} */
        end = [x(moved[0]), y(moved[1])];
      line("aw-residual-move", ...start, ...end);
      mark(svg("rect", { class: "aw-own-point", x: start[0] - 4, y: start[1] - 4, width: 8, height: 8 }), start, 4);
      mark(svg("circle", { class: "aw-with-x-point", cx: end[0], cy: end[1], r: 6.5 }), end, 6.5);
      labels.push({ x: end[0], y: end[1], r: 6.5, toward: away(start, end), text: `${name} + mix`, cls: "aw-output-label aw-with-x-label" });
    }
    // then the values' names, each next to its point, or left out where there is no room (a
    // few tokens' names may move further out, with leaders; a crowd's would tangle)
    const far = n <= 12 ? Infinity : 18;
    if (n <= 60) for (const g of groupLabels(pts, keys, 0)) labels.push({ x: g.x, y: g.y, r: 4, far, text: g.label, cls: "aw-value-label", optional: true });
    labels.push({ x: m[0], y: m[1], r: 5, toward: (3 * Math.PI) / 4, text: "mean", cls: "aw-tick aw-mean-label", optional: true, nearest: true });
    for (const l of labels) Object.assign(l, measure(l.text, l.cls));
    const sized = /** @type {(Label & import("./labels.js").TextSize)[]} */ (labels); // (measured)
    const placed = place(sized, { bounds: [1, 1, W - 1, H - 1], marks, lines, taken, walls }); // no label across an axis
    placed.forEach((p, i) => parts.push(...drawLabel(p, sized[i])));
    fill(plot, parts);
    plot.setAttribute(
      "aria-label",
      `Values of ${n} ${cross ? "source " : ""}tokens with their convex hull; ${tokens[focus]}'s output at ${fmt2(ox(focus))}, ${fmt2(oy(focus))}`,
    );
    drawLegend(name, !!own, cross);
  }

  // What each kind of mark stands for, with the mark itself beside its name.
  /** @param {string} name  @param {boolean} withX  @param {boolean} cross */
  function drawLegend(name, withX, cross) {
    /** @param {SVGElement} mark  @param {...string} text */
    const item = (mark, ...text) => el("li", {}, svg("svg", { width: 16, height: 16, viewBox: "-8 -8 16 16", "aria-hidden": "true" }, mark), ...text);
    fill(
      legend,
      item(svg("circle", { class: "aw-value", r: 4 }), cross ? "values (of the source tokens)" : "values"),
      item(svg("path", { class: "aw-mean", d: "M-5,-5L5,5M-5,5L5,-5" }), "mean of the values"),
      item(svg("path", { class: "aw-hull", d: "M-6,5L0,-6L6,5Z" }), "hull of the values"),
      item(svg("circle", { class: "aw-output aw-focus-output", r: 6 }), `${name}'s output`),
      item(svg("circle", { class: "aw-output", r: 3 }), cross ? "the other target tokens' outputs" : "the other tokens' outputs"),
      cross ? null : item(svg("line", { class: "aw-move", x1: -7, y1: 4, x2: 7, y2: -4 }), `${name}'s value to its output`),
      withX ? item(svg("rect", { class: "aw-own-point", x: -4, y: -4, width: 8, height: 8 }), `${name}'s own numbers (x)`) : null,
      withX ? item(svg("circle", { class: "aw-with-x-point", r: 6 }), `${name} + mix: x moved by its output`) : null,
    );
  }

  return {
    node,
    update(s) {
      residualToggle.hidden = !s.x;
      residual.checked = !!s.residual;
      drawTable(s);
      drawPlot(s);
      fill(
        readout,
        el("span", {}, "sense resolved ", el("b", { class: "aw-sense" }, fmt2(s.sense))),
        el("span", {}, "output spread (all tokens) ", el("b", { class: "aw-spread" }, fmt3(s.spread))),
        s.v.cols > 2
          ? el(
              "span",
              { class: "aw-projection-note" },
              s.basis
                ? `the plot is a projection: ${s.v.cols}-dimensional values on their two principal axes (PCA); the table's numbers are exact${s.v.cols > MAX_DIMS ? `, first ${MAX_DIMS} of ${s.v.cols} dimensions` : ""}`
                : `the plot shows the first two of ${s.v.cols} value dimensions`,
            )
          : null,
      );
    },
    destroy() {
      node.remove();
    },
  };
}
