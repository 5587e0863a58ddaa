// The query dial: with two-number queries and keys, the keys are arrows and the focused
// token's query is an arrow the reader turns by dragging; a Key | q · k | score | Weight table follows.

import { format } from "d3-format";
import { scaleLinear } from "d3-scale";
import { el, fill, fmt2, fmtG, groupLabels, short, svg } from "./dom.js";
import { drawLabel, measurer, percentages, place } from "./labels.js";

const SIZE = 300,
  PAD = 26;
const MAX_LABELS = 12; // keys beyond these (the lightest) keep their arrows, unlabelled
const TURN_R = 22; // the radius of RoPE's turn, drawn round the origin
const CROWDED = 30; // a key's tip nearer the origin than this is in the crowd there
const LABEL_GAP = 3; // between two labels, beyond the placer's own pixel
let instances = 0; // marker ids must be unique in the document

/** @typedef {import("../types").Matrix} Matrix */
/** @typedef {import("d3-scale").ScaleLinear<number, number>} Linear */
/** @typedef {ReturnType<typeof place>[number]} Placed */
/** @typedef {import("../types").Position} Position */
/**
 * @typedef {object} DialView
 * @property {string[]} tokens
 * @property {string[]} [keys]  the keys' tokens (the tokens themselves by default)
 * @property {number} focus
 * @property {Matrix} q  two numbers a query
 * @property {Matrix} k  two numbers a key
 * @property {ArrayLike<number>} scoreRow  the focused row's scores
 * @property {ArrayLike<number>} weightRow  and its weights
 * @property {(j: number) => boolean} masked  the focused row may not read key j
 * @property {number | null} [scale]  the widget's scale, or null: read back from the scores
 * @property {boolean} [scaleSet]
 * @property {number | null} [temperature]
 * @property {Position | null} [position]
 */
/** @typedef {{ node: SVGSVGElement | HTMLElement, update(view: DialView): void, destroy(): void }} Dial */
/**
 * An arrow from the origin to (x, y), with its label's text and class, the radius of its mark and
 * the screen angle its label goes first; then where the label went.
 * @typedef {{ x: number, y: number, r: number, toward: number | null, text: string, cls: string, weight: number | null,
 *   optional?: boolean, ascent?: number, placed?: Placed | null }} Arrow
 */

/** @param {number[]} scores  @param {number[]} weights */
// Are the weights softmax(scores) as they are, with no temperature to divide by?
function isSoftmax(scores, weights) {
  const top = Math.max(...scores),
    e = scores.map((s) => Math.exp(s - top)),
    sum = e.reduce((a, b) => a + b, 0);
  return e.every((x, i) => Math.abs(x / sum - weights[i]) < 1e-9);
}

/** The point of a box nearest (x, y).
 * @param {number[]} box  @param {number} x  @param {number} y */
const nearest = (box, x, y) => [Math.min(Math.max(x, box[0]), box[2]), Math.min(Math.max(y, box[1]), box[3])];

/** The turn from the query given to the query turned: an arc about the origin, going the way RoPE turns (anticlockwise
 * on the page for a positive angle; the y axis points down there, so the arc sweeps counter to the screen's angles).
 * @param {number[]} O  @param {number[]} from  @param {number[]} to  @param {number} turns */
function turnArc(O, from, to, turns) {
  const r = TURN_R,
    start = Math.atan2(from[1] - O[1], from[0] - O[0]),
    end = Math.atan2(to[1] - O[1], to[0] - O[0]);
  /** @param {number} a */
  const at = (a) => [O[0] + r * Math.cos(a), O[1] + r * Math.sin(a)];
  const sweep = (((start - end) % (2 * Math.PI)) + 2 * Math.PI) % (2 * Math.PI); // how far, the turn's way
  const [x0, y0] = at(start),
    [x1, y1] = at(end);
  const path = `M${x0},${y0}A${r},${r} 0 ${sweep > Math.PI ? 1 : 0} 0 ${x1},${y1}`;
  return svg("path", { class: "aw-turn", d: path, "data-turns": turns });
}

/** createDial(parent, {onQuery([x, y]), onQueryEnd()}) -> {update(state), destroy()}
 * @param {HTMLElement} parent
 * @param {{ onQuery: (vector: number[]) => void, onQueryEnd: () => void }} options
 * @returns {Dial} */
export function createDial(parent, { onQuery, onQueryEnd }) {
  const plot = svg("svg", { class: "aw-dial", width: SIZE, height: SIZE, viewBox: `0 0 ${SIZE} ${SIZE}`, role: "img" }); // (shrinks with a narrow output)
  const table = el("table", { class: "aw-dial-table" });
  const note = el("p", { class: "aw-dial-note" });
  const node = el(
    "div",
    { class: "aw-dial-wrap" },
    el("figure", { class: "aw-figure" }, el("figcaption", {}, "turn the query: drag its tip"), plot),
    el("figure", { class: "aw-figure" }, el("figcaption", {}, "what the query finds"), table, note),
  );
  parent.append(node);
  /** @type {Linear | null} */
  let scale = null,
    dragging = false;
  const markerId = `aw-head-${++instances}`;

  /** @param {PointerEvent} ev */
  const toVector = (ev) => {
    const at = /** @type {Linear} */ (scale); // (dragging: the axes are drawn)
    const r = plot.getBoundingClientRect(),
      k = SIZE / (r.width || SIZE); // the plot's units per screen pixel: it shrinks on a narrow output
    return [at.invert((ev.clientX - r.left) * k), -at.invert((ev.clientY - r.top) * k)];
  };
  /** @param {PointerEvent} ev */
  function onDown(ev) {
    if (!(/** @type {Element} */ (ev.target).classList.contains("aw-dial-handle"))) return;
    dragging = true;
    plot.setPointerCapture(ev.pointerId);
    ev.preventDefault();
  }
  /** @param {PointerEvent} ev */
  function onMove(ev) {
    if (dragging) onQuery(toVector(ev));
  }
  /** @param {PointerEvent} ev */
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
  for (const e of ends) plot.addEventListener(e, /** @type {EventListener} */ (onUp)); // (pointer events all)

  // The scale the scores carry: given, or read back from a score and its dot product.
  let lastScale = Math.SQRT1_2;
  /** @param {ArrayLike<number>} scoreRow  @param {number[]} dots  @param {number | null | undefined} given */
  const scaleOf = (scoreRow, dots, given) => {
    if (given != null) return given;
    const j = dots.reduce((b, d, i) => (Math.abs(d) > Math.abs(dots[b]) ? i : b), 0);
    if (Math.abs(dots[j]) > 1e-9) lastScale = scoreRow[j] / dots[j];
    return lastScale;
  };

  return {
    node,
    update({ tokens, keys: names = tokens, focus, q, k, scoreRow, weightRow, masked, scale: given, scaleSet, temperature, position = null }) {
      const query = [q.data[focus * 2], q.data[focus * 2 + 1]];
      // RoPE: the arrows are turned, each by its token's position (θ = 1 radian for two numbers); the query as given, dashed
      const rope = position?.scheme === "rope" && focus > 0 ? [position.given.data[focus * 2], position.given.data[focus * 2 + 1]] : null;
      const dots = Array.from({ length: k.rows }, (_, j) => query[0] * k.data[j * 2] + query[1] * k.data[j * 2 + 1]);
      const factor = scaleOf(scoreRow, dots, given);
      // 1/√d unless the widget set a scale (read back: a set scale of exactly 1/√2 reads the same)
      const scaleText = (scaleSet ?? Math.abs(factor * Math.SQRT2 - 1) > 1e-9) ? fmtG(factor) : "1/√2";
      let reach = Math.hypot(...query); // (a turn keeps an arrow's length: the query given reaches as far)
      for (let j = 0; j < k.rows; j++) reach = Math.max(reach, Math.hypot(k.data[j * 2], k.data[j * 2 + 1]));
      // Keep the axes still while dragging, so the arrow stays under the pointer.
      reach ||= 1; // all-zero vectors: any axes will do
      if (!dragging || !scale)
        scale = scaleLinear()
          .domain([-reach * 1.25, reach * 1.25])
          .range([PAD, SIZE - PAD]);
      const at = /** @type {Linear} */ (scale);
      const X = (/** @type {number} */ x) => at(x),
        Y = (/** @type {number} */ y) => SIZE - at(y),
        O = [X(0), Y(0)];
      const lines = [
          [PAD, O[1], SIZE - PAD, O[1]],
          [O[0], PAD, O[0], SIZE - PAD],
        ],
        marks = [];
      // an arrow from the origin, with a label to go on beyond its tip
      /** @param {number} x  @param {number} y  @param {string} cls  @param {string} text  @param {number} r  @param {number | null} [weight]
       * @returns {Arrow} */
      const arrow = (x, y, cls, text, r, weight = null) => {
        const tip = [X(x), Y(y)],
          long = Math.hypot(tip[0] - O[0], tip[1] - O[1]) > 1;
        lines.push([...O, ...tip]);
        marks.push([tip[0] - r, tip[1] - r, tip[0] + r, tip[1] + r]);
        return { x: tip[0], y: tip[1], r, toward: long ? Math.atan2(tip[1] - O[1], tip[0] - O[0]) : null, text, cls, weight };
      };
      const q0 = arrow(query[0], query[1], "aw-query", `${short(tokens[focus])}'s query${rope ? ` turned ${focus} × θ` : ""}`, 9); // r: the handle's
      const before = rope && arrow(rope[0], rope[1], "aw-query-given", "before the turn", 4);
      // keys that coincide share one arrow and one label
      const open = names.map((_, j) => j).filter((j) => !masked(j)); // names: the keys' tokens
      const keys = groupLabels(
        open.map((j) => [k.data[j * 2], k.data[j * 2 + 1]]),
        open.map((j) => names[j]),
      ).map((g) => arrow(g.x, g.y, "aw-key", g.count > 1 ? `keys of ${g.label}` : `${g.label} key`, 6, weightRow[open[g.index]]));
      // labels: the query's, then the keys' from the heaviest, at most MAX_LABELS of them
      // (a key's label is left out where it would cover another)
      const labelled = [
        q0,
        ...(before ? [before] : []),
        ...keys
          .slice()
          .sort((a, b) => /** @type {number} */ (b.weight) - /** @type {number} */ (a.weight)) // (keys': their weights)
          .slice(0, MAX_LABELS)
          .map((a) => Object.assign(a, { optional: true })),
      ];
      // The hub round the origin, where the turn's arc and the arrows too short to tell apart meet: no
      // label goes there (they would pile on one spot). A short key's label starts from the hub's edge,
      // in its arrow's direction (so the labels spread round it as their arrows do), on a leader back
      // to its tip.
      let hub = before ? TURN_R + 3 : 0;
      for (const a of keys) {
        const d = Math.hypot(a.x - O[0], a.y - O[1]);
        if (d < CROWDED) hub = Math.max(hub, d + a.r);
      }
      if (hub) marks.push([O[0] - hub, O[1] - hub, O[0] + hub, O[1] + hub]);
      /** @param {Arrow} a */
      const inHub = (a) => hub && a.toward != null && Math.abs(a.x - O[0]) < hub && Math.abs(a.y - O[1]) < hub;
      const measure = measurer(plot);
      const spots = labelled.map((a) => {
        const m = measure(a.text, `${a.cls}-label`);
        // (each box a few pixels wider and taller than its text: two labels never read as one line or one phrase)
        const spot = { ...a, ...m, w: m.w + LABEL_GAP, h: m.h + LABEL_GAP };
        if (!inHub(a)) return spot;
        const toward = /** @type {number} */ (a.toward); // (in the hub: an arrow with a direction)
        const [c, s] = [Math.cos(toward), Math.sin(toward)],
          t = (hub + 1) / Math.max(Math.abs(c), Math.abs(s)); // to the square's edge
        return { ...spot, x: O[0] + t * c, y: O[1] + t * s, r: 0 };
      });
      // no key's name across the query's arrows (the thick line would strike it through)
      const walls = [q0, ...(before ? [before] : [])].map((a) => [...O, a.x, a.y]);
      place(spots, { bounds: [1, 1, SIZE - 1, SIZE - 1], marks, lines, walls, wide: true }).forEach((p, i) => {
        const a = labelled[i];
        a.ascent = spots[i].ascent;
        // from the hub's edge: the leader runs from the arrow's tip itself
        a.placed = p && inHub(a) ? { box: p.box, leader: [a.x, a.y, ...nearest(p.box, a.x, a.y)] } : p;
      });

      // each arrow right before its label; the keys under the query
      /** @param {Arrow} a */
      const draw = (a) => {
        // (an arrow left unlabelled has no place: nor its label's ascent, then not read)
        const [leader, text] = drawLabel(a.placed, /** @type {Arrow & { ascent: number }} */ ({ ...a, cls: `${a.cls}-label` }));
        const style = a.weight == null ? null : `stroke-width:${(1 + 5 * a.weight).toFixed(2)}px`;
        return [leader, svg("line", { class: a.cls, x1: O[0], y1: O[1], x2: a.x, y2: a.y, "marker-end": `url(#${markerId})`, style }), text];
      };
      const parts = [
        svg(
          "defs",
          {},
          svg(
            "marker",
            {
              id: markerId,
              viewBox: "0 0 10 10",
              refX: 8,
              refY: 5,
              markerWidth: 10,
              markerHeight: 10,
              markerUnits: "userSpaceOnUse",
              orient: "auto-start-reverse",
            },
            svg("path", { d: "M0,0L10,5L0,10z", class: "aw-arrowhead" }),
          ),
        ),
        svg("line", { class: "aw-axis", x1: PAD, x2: SIZE - PAD, y1: O[1], y2: O[1] }),
        svg("line", { class: "aw-axis", x1: O[0], x2: O[0], y1: PAD, y2: SIZE - PAD }),
        keys.map(draw),
        before ? [turnArc(O, [before.x, before.y], [q0.x, q0.y], focus), draw(before)] : [],
        draw(q0),
        svg("circle", { class: "aw-dial-handle", cx: q0.x, cy: q0.y, r: 9, tabindex: -1 }),
      ];
      fill(plot, parts.flat(2));
      plot.setAttribute("aria-label", `${tokens[focus]}'s query (${fmt2(query[0])}, ${fmt2(query[1])}) against ${open.length} keys`);

      // Key | q · k | score | Weight, for the keys the token reads: the dot product (the article's
      // "Score"), the score softmax takes (scale × q · k, as the scores stage names it), and whole
      // percentages that add up to 100
      const shares = percentages(open.map((j) => weightRow[j]));
      const rows = open.map((j, r) =>
        el(
          "tr",
          { "data-index": j },
          el("th", { scope: "row" }, names[j]),
          el("td", { class: "aw-dial-score" }, fmt2(dots[j])),
          el("td", { class: "aw-dial-scaled" }, fmt2(scoreRow[j])),
          el("td", { class: "aw-dial-weight" }, `${shares[r]}%`),
        ),
      );
      const ramp = position?.scheme === "alibi" ? " − m·|i − j|" : ""; // ALiBi's penalty is in the scores too
      const head = el(
        "tr",
        {},
        el("th", {}, "Key"),
        el("th", {}, "q · k"),
        el("th", { class: "aw-dial-scaled" }, `score = ${scaleText} × q · k${ramp}`),
        el("th", {}, "Weight"),
      );
      fill(table, el("thead", {}, head), el("tbody", {}, rows));
      const t =
        temperature == null
          ? isSoftmax(
              open.map((j) => scoreRow[j]),
              open.map((j) => weightRow[j]),
            )
            ? ""
            : " ÷ T, the temperature"
          : temperature === 1
            ? ""
            : ` ÷ T (T = ${fmt2(temperature)})`;
      const closed = names.filter((_, j) => masked(j)).map((name) => short(name, 16));
      const degrees = (focus * 180) / Math.PI;
      const turned =
        position?.scheme === "rope"
          ? ` RoPE: every arrow is turned by its token's position × θ (θ = 1 radian for two numbers): ${short(tokens[focus])}'s query ${focus} × θ${degrees < 360 ? ` (${format(".0f")(degrees)}°)` : ""}, each key by its own, so q · k depends on how far apart two tokens are.${rope ? " Dashed: the query before its turn." : ""}`
          : position?.scheme === "alibi"
            ? ` ALiBi: each score also has −m·|i − j| added, m = ${fmtG(/** @type {number} */ (position.slope))}: a token d places away loses m·d.`
            : "";
      fill(
        note,
        `q · k: the dot product of ${short(tokens[focus])}'s query with each key${position?.scheme === "rope" ? ", both turned" : ""}; score = ${scaleText} × q · k${ramp}. ` +
          `Weight: softmax of the scores${t}, so the weights add up to 100%.` +
          (scaleText === "1/√2" ? " The scale is 1/√d, d = 2 numbers per vector." : "") +
          (closed.length
            ? ` Not read, so not listed: ${closed.length > 3 ? `${closed.slice(0, 3).join(", ")} +${closed.length - 3}` : closed.join(", ")}.`
            : "") +
          turned,
      );
    },
    destroy() {
      plot.removeEventListener("pointerdown", onDown);
      plot.removeEventListener("pointermove", onMove);
      for (const e of ends) plot.removeEventListener(e, /** @type {EventListener} */ (onUp));
      node.remove();
    },
  };
}
