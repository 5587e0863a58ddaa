// The query dial: with two-number queries and keys, the keys are arrows and the focused
// token's query is an arrow the reader turns by dragging; a Key | Score | Weight table follows.
import { scaleLinear } from "d3-scale";
import { el, svg, fill, fmt2, pct, groupLabels, short } from "./dom.js";

const SIZE = 300, PAD = 26;
let instances = 0; // marker ids must be unique in the document

/** createDial(parent, {onQuery([x, y]), onQueryEnd()}) -> {update(state), destroy()} */
export function createDial(parent, { onQuery, onQueryEnd }) {
  const plot = svg("svg", { class: "aw-dial", width: SIZE, height: SIZE, role: "img" });
  const table = el("table", { class: "aw-dial-table" });
  const node = el("div", { class: "aw-dial-wrap" },
    el("figure", { class: "aw-figure" }, el("figcaption", {}, "turn the query: drag its tip"), plot),
    el("figure", { class: "aw-figure" }, el("figcaption", {}, "what the query finds"), table));
  parent.append(node);
  let scale = null, dragging = false;
  const markerId = `aw-head-${++instances}`;

  const toVector = (ev) => {
    const r = plot.getBoundingClientRect();
    return [scale.invert(ev.clientX - r.left), -scale.invert(ev.clientY - r.top)];
  };
  function onDown(ev) {
    if (!ev.target.classList.contains("aw-dial-handle")) return;
    dragging = true;
    plot.setPointerCapture(ev.pointerId);
    ev.preventDefault();
  }
  function onMove(ev) {
    if (dragging) onQuery(toVector(ev));
  }
  function onUp(ev) {
    if (!dragging) return;
    dragging = false;
    if (plot.hasPointerCapture(ev.pointerId)) plot.releasePointerCapture(ev.pointerId);
    onQueryEnd();
  }
  // a cancelled or lost pointer ends the drag too, so hovering never keeps turning the query
  const ends = ["pointerup", "pointercancel", "lostpointercapture"];
  plot.addEventListener("pointerdown", onDown);
  plot.addEventListener("pointermove", onMove);
  for (const e of ends) plot.addEventListener(e, onUp);

  return {
    node,
    update({ tokens, focus, q, k, scoreRow, weightRow, masked }) {
      const query = [q.data[focus * 2], q.data[focus * 2 + 1]];
      let reach = Math.hypot(...query);
      for (let j = 0; j < k.rows; j++) reach = Math.max(reach, Math.hypot(k.data[j * 2], k.data[j * 2 + 1]));
      // Keep the axes still while dragging, so the arrow stays under the pointer.
      reach ||= 1; // all-zero vectors: any axes will do
      if (!dragging || !scale) scale = scaleLinear().domain([-reach * 1.25, reach * 1.25]).range([PAD, SIZE - PAD]);
      const X = (x) => scale(x), Y = (y) => SIZE - scale(y);
      // key labels sit above their tips, the query's below, so the two never cover each other
      const arrow = (x, y, cls, label, extra = {}, dy = -6) => [
        svg("line", { class: cls, x1: X(0), y1: Y(0), x2: X(x), y2: Y(y), "marker-end": `url(#${markerId})`, ...extra }),
        svg("text", { class: `${cls}-label`, x: X(x) + (x >= 0 ? 6 : -6), y: Y(y) + dy, "text-anchor": x >= 0 ? "start" : "end" }, label),
      ];
      const parts = [
        svg("defs", {}, svg("marker", { id: markerId, viewBox: "0 0 10 10", refX: 8, refY: 5, markerWidth: 10, markerHeight: 10, markerUnits: "userSpaceOnUse", orient: "auto-start-reverse" },
          svg("path", { d: "M0,0L10,5L0,10z", class: "aw-arrowhead" }))),
        svg("line", { class: "aw-axis", x1: PAD, x2: SIZE - PAD, y1: Y(0), y2: Y(0) }),
        svg("line", { class: "aw-axis", x1: X(0), x2: X(0), y1: PAD, y2: SIZE - PAD }),
      ];
      // keys that coincide share one arrow and one label
      const open = tokens.map((_, j) => j).filter((j) => !masked(j));
      const keys = groupLabels(open.map((j) => [k.data[j * 2], k.data[j * 2 + 1]]), open.map((j) => tokens[j]));
      for (const g of keys) {
        const w = weightRow[open[g.index]];
        parts.push(...arrow(g.x, g.y, "aw-key", `${g.label} key`, { style: `stroke-width:${(1 + 5 * w).toFixed(2)}px` }));
      }
      parts.push(...arrow(query[0], query[1], "aw-query", `${short(tokens[focus])} query`, {}, 18));
      parts.push(svg("circle", { class: "aw-dial-handle", cx: X(query[0]), cy: Y(query[1]), r: 9, tabindex: -1 }));
      fill(plot, parts);
      plot.setAttribute("aria-label", `${tokens[focus]}'s query (${fmt2(query[0])}, ${fmt2(query[1])}) against ${k.rows} keys`);

      const rows = tokens.map((t, j) => el("tr", { "data-index": j, class: masked(j) ? "aw-masked-row" : null },
        el("th", { scope: "row" }, t),
        el("td", { class: "aw-dial-score" }, masked(j) ? "—" : fmt2(scoreRow[j])),
        el("td", { class: "aw-dial-weight" }, masked(j) ? "masked" : pct(weightRow[j]))));
      fill(table, el("thead", {}, el("tr", {}, el("th", {}, "Key"), el("th", {}, "Score"), el("th", {}, "Weight"))), el("tbody", {}, rows));
    },
    destroy() {
      plot.removeEventListener("pointerdown", onDown);
      plot.removeEventListener("pointermove", onMove);
      for (const e of ends) plot.removeEventListener(e, onUp);
      node.remove();
    },
  };
}
