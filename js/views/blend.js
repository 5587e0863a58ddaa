// The blend stage: the focused row's weights against the value grid, the products and their
// sum (the output), and a 2-D plot of the values, their convex hull, their mean and the outputs.
import { scaleLinear } from "d3-scale";
import { polygonHull } from "d3-polygon";
import { el, svg, fill, fmt2, fmt3, groupLabels, short } from "./dom.js";
import { extent, meanRow, project } from "../attention.js";

const MAX_DIMS = 6; // wider values: the table shows the first few dimensions, exactly
const MAX_ROWS = 16; // longer sequences: the table lists the heaviest tokens

const W = 340, H = 300, PAD = 34;

/** createBlend(parent, {onResidual(bool)}) -> {update(state), destroy()} */
export function createBlend(parent, { onResidual }) {
  const table = el("table", { class: "aw-blend-table" });
  const residual = el("input", { type: "checkbox", class: "aw-residual" });
  residual.addEventListener("change", () => onResidual(residual.checked));
  const residualToggle = el("label", { class: "aw-toggle", hidden: true }, residual, "add the mix to the word's own numbers (x + mix)");
  const plot = svg("svg", { class: "aw-plot", width: W, height: H, role: "img" });
  const readout = el("p", { class: "aw-metrics" });
  const node = el("div", { class: "aw-blend" },
    el("figure", { class: "aw-figure" }, el("figcaption", {}, "weights × values = output"), table, residualToggle),
    el("figure", { class: "aw-figure" }, el("figcaption", {}, "values, their hull and the outputs"), plot, readout));
  parent.append(node);

  function drawTable({ tokens, focus, row, v, O, x, residual: withX }) {
    const d = v.cols, dims = Array.from({ length: Math.min(d, MAX_DIMS) }, (_, c) => c);
    const sub = (c) => (d <= 9 ? String.fromCharCode(0x2081 + c) : `[${c + 1}]`);
    const head = el("tr", {}, el("th", {}, "token"), el("th", {}, `a(${short(tokens[focus], 16)}, ·)`),
      dims.map((c) => el("th", { class: "aw-v" }, `v${sub(c)}`)), dims.map((c) => el("th", {}, `a·v${sub(c)}`)));
    // long rows: the heaviest tokens in sentence order, the rest summed up in one line
    let shown = tokens.map((_, j) => j);
    if (shown.length > MAX_ROWS) shown = shown.sort((a, b) => row[b] - row[a]).slice(0, MAX_ROWS).sort((a, b) => a - b);
    const body = shown.map((j) => el("tr", { class: row[j] === 0 ? "aw-zero" : null },
      el("th", { scope: "row" }, tokens[j]), el("td", {}, fmt3(row[j])),
      dims.map((c) => el("td", { class: "aw-v" }, fmt2(v.data[j * d + c]))),
      dims.map((c) => el("td", {}, fmt3(row[j] * v.data[j * d + c])))));
    if (shown.length < tokens.length) {
      const rest = 1 - shown.reduce((a, j) => a + row[j], 0);
      body.push(el("tr", { class: "aw-rest" }, el("th", { scope: "row" }, `… ${tokens.length - shown.length} more`), el("td", {}, fmt3(rest)),
        el("td", { colspan: 2 * dims.length }, "lighter tokens, included in the sum")));
    }
    const sum = row.reduce((a, b) => a + b, 0);
    const foot = el("tr", { class: "aw-sum" }, el("th", { scope: "row" }, "Σ"), el("td", {}, fmt3(sum)),
      dims.map(() => el("td", { class: "aw-v" })),
      dims.map((c) => el("td", { class: "aw-out", "data-dim": c }, fmt2(O[focus * d + c]))));
    const own = withX && [
      el("tr", { class: "aw-own" }, el("th", { scope: "row" }, `+ x(${short(tokens[focus], 16)})`), el("td"), dims.map(() => el("td", { class: "aw-v" })),
        dims.map((c) => el("td", {}, fmt2(x.data[focus * d + c])))),
      el("tr", { class: "aw-sum" }, el("th", { scope: "row" }, "= x + mix"), el("td"), dims.map(() => el("td", { class: "aw-v" })),
        dims.map((c) => el("td", { class: "aw-out aw-with-x", "data-dim": c }, fmt2(x.data[focus * d + c] + O[focus * d + c])))),
    ];
    fill(table, el("thead", {}, head), el("tbody", {}, body), el("tfoot", {}, foot, own || []));
  }

  function drawPlot({ tokens, focus, v: values, O: outputs, axes, x: X, residual: withX, basis }) {
    // values wider than two: plot both values and outputs on V's principal axes
    let v = values, O = outputs, mix = outputs;
    if (basis) {
      const centre = meanRow(values);
      v = project(values.data, values.rows, centre, basis);
      O = project(outputs, values.rows, centre, basis).data;
      // the residual moves the word by the mix itself: project it without the centre
      mix = project(outputs, values.rows, new Float64Array(values.cols), basis).data;
      if (withX) X = project(X.data, values.rows, centre, basis);
      axes = ["principal axis 1 of V", "principal axis 2 of V"];
    }
    const n = v.rows, d = v.cols;
    const px = (j) => v.data[j * d], py = (j) => (d > 1 ? v.data[j * d + 1] : 0);
    const ox = (i) => O[i * d], oy = (i) => (d > 1 ? O[i * d + 1] : 0);
    // with the residual, the word starts at its own embedding and moves by the mix
    const own = withX ? [X.data[focus * d], d > 1 ? X.data[focus * d + 1] : 0] : null;
    const moved = own && [own[0] + mix[focus * d], own[1] + (d > 1 ? mix[focus * d + 1] : 0)];
    const xs = [0], ys = [0];
    for (let j = 0; j < n; j++) { xs.push(px(j), ox(j)); ys.push(py(j), oy(j)); }
    if (own) xs.push(own[0], moved[0]), ys.push(own[1], moved[1]);
    // One unit is the same length on both axes, so distances on the plot are true distances.
    const [x0, x1] = extent(xs), [y0, y1] = extent(ys);
    const span = Math.max(x1 - x0, y1 - y0, 1e-9) * 1.1;
    const cx = x0 / 2 + x1 / 2, cy = y0 / 2 + y1 / 2; // halves first: no overflow
    const x = scaleLinear().domain([cx - span / 2, cx + span / 2]).range([PAD, W - 10]);
    const y = scaleLinear().domain([cy - span / 2, cy + span / 2]).range([H - PAD + 6, 16]);
    const parts = [];
    // axes through zero, with their names
    parts.push(svg("line", { class: "aw-axis", x1: PAD, x2: W - 10, y1: y(0), y2: y(0) }));
    parts.push(svg("line", { class: "aw-axis", x1: x(0), x2: x(0), y1: 16, y2: H - PAD + 6 }));
    parts.push(svg("text", { class: "aw-axis-label", x: W - 10, y: y(0) + 14, "text-anchor": "end" }, `${axes[0] || "v₁"} →`));
    parts.push(svg("text", { class: "aw-axis-label", x: x(0) + 6, y: 12 }, `↑ ${d > 1 ? axes[1] || "v₂" : ""}`));
    for (const t of x.ticks(4)) parts.push(svg("text", { class: "aw-tick", x: x(t), y: H - 8, "text-anchor": "middle" }, fmt2(t)));
    // convex hull of the values: every output must land inside it
    const pts = Array.from({ length: n }, (_, j) => [x(px(j)), y(py(j))]);
    const hull = n >= 3 ? polygonHull(pts) : null;
    if (hull) parts.push(svg("path", { class: "aw-hull", d: `M${hull.map((p) => p.join(",")).join("L")}Z` }));
    else if (n === 2) parts.push(svg("line", { class: "aw-hull", x1: pts[0][0], y1: pts[0][1], x2: pts[1][0], y2: pts[1][1] }));
    // the mean of the values
    const mean = meanRow(v);
    const m = [x(mean[0]), y(d > 1 ? mean[1] : 0)];
    parts.push(svg("path", { class: "aw-mean", d: `M${m[0] - 5},${m[1] - 5}L${m[0] + 5},${m[1] + 5}M${m[0] - 5},${m[1] + 5}L${m[0] + 5},${m[1] - 5}` }));
    parts.push(svg("text", { class: "aw-tick", x: m[0] - 7, y: m[1] + 14, "text-anchor": "end" }, "mean"));
    // values, labelled
    pts.forEach(([a, b]) => parts.push(svg("circle", { class: "aw-value", cx: a, cy: b, r: 4 })));
    if (n <= 60) {
      for (const g of groupLabels(pts, tokens, 0)) parts.push(svg("text", { class: "aw-value-label", x: g.x + 6, y: g.y - 6 }, g.label));
    }
    // every token's output, the focused one emphasised with the path from its own value
    for (let i = 0; i < n; i++) if (i !== focus) parts.push(svg("circle", { class: "aw-output", cx: x(ox(i)), cy: y(oy(i)), r: 3 }));
    const f = [x(ox(focus)), y(oy(focus))];
    parts.push(svg("line", { class: "aw-move", x1: pts[focus][0], y1: pts[focus][1], x2: f[0], y2: f[1] }));
    parts.push(svg("circle", { class: "aw-output aw-focus-output", cx: f[0], cy: f[1], r: 6.5 }));
    // the label sits on the far side from the mean, inside the plot
    const right = f[0] < W * 0.55, below = f[1] > m[1];
    parts.push(svg("text", { class: "aw-output-label", x: f[0] + (right ? 10 : -10), y: f[1] + (below ? 18 : -10), "text-anchor": right ? "start" : "end" },
      basis ? `${short(tokens[focus])}'s output (projected)` : `${short(tokens[focus])} output (${fmt2(ox(focus))}${d > 1 ? `, ${fmt2(oy(focus))}` : ""})`));
    if (own) {
      const start = [x(own[0]), y(own[1])], end = [x(moved[0]), y(moved[1])];
      parts.push(svg("line", { class: "aw-residual-move", x1: start[0], y1: start[1], x2: end[0], y2: end[1] }));
      parts.push(svg("rect", { class: "aw-own-point", x: start[0] - 4, y: start[1] - 4, width: 8, height: 8 }));
      parts.push(svg("circle", { class: "aw-with-x-point", cx: end[0], cy: end[1], r: 6.5 }));
      const onRight = end[0] < W * 0.6;
      parts.push(svg("text", { class: "aw-output-label", x: end[0] + (onRight ? 9 : -9), y: end[1] - 9, "text-anchor": onRight ? "start" : "end" }, `${short(tokens[focus])} + mix`));
    }
    fill(plot, parts);
    plot.setAttribute("aria-label", `Values of ${n} tokens with their convex hull; ${tokens[focus]}'s output at ${fmt2(ox(focus))}, ${fmt2(oy(focus))}`);
  }

  return {
    node,
    update(s) {
      residualToggle.hidden = !s.x;
      residual.checked = !!s.residual;
      drawTable(s);
      drawPlot(s);
      fill(readout,
        el("span", {}, "sense resolved ", el("b", { class: "aw-sense" }, fmt2(s.sense))),
        el("span", {}, "output spread (all tokens) ", el("b", { class: "aw-spread" }, fmt3(s.spread))),
        s.v.cols > 2 ? el("span", { class: "aw-projection-note" }, s.basis
          ? `the plot is a projection: ${s.v.cols}-dimensional values on their two principal axes (PCA); the table's numbers are exact${s.v.cols > MAX_DIMS ? `, first ${MAX_DIMS} of ${s.v.cols} dimensions` : ""}`
          : `the plot shows the first two of ${s.v.cols} value dimensions`) : null);
    },
    destroy() { node.remove(); },
  };
}
