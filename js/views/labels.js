// Label placement for the plots: a small greedy placer. Each label, in priority order, tries
// spots around its point and takes the first that covers no placed label and no mark and
// stays inside the plot; one that had to move further out gets a leader line to its point.
import { svg } from "./dom.js";

export { percentages } from "./dom.js"; // whole percentages that add up to exactly 100

/** A box on the plot, [x0, y0, x1, y1]; a segment is [x1, y1, x2, y2]. */
/** @typedef {number[]} Box */
/** @typedef {number[]} Segment */
/**
 * A label to place: its point, its size and the options `place` reads (see there).
 * @typedef {{ x: number, y: number, w: number, h: number, r?: number, toward?: number | null, far?: number,
 *   optional?: boolean, nearest?: boolean }} Label
 */
/** Where a label went: its box, and a leader back to its point where it moved out. */
/** @typedef {{ box: Box, leader: Segment | null }} Placed */
/** @typedef {{ w: number, h: number, ascent: number }} TextSize */

// Eight directions around a point (screen angles: +y is down), in the default order of
// preference: up-right first, as labels on scatter plots usually sit.
const DIRECTIONS = [-45, 0, -135, 180, 45, 135, -90, 90].map((deg) => (deg * Math.PI) / 180);
const RINGS = [0, 8, 18, 30, 46, 66, 90]; // how much further out each ring of candidates lies
// a wide search (a crowded plot, each label wanted): every 22.5°, and further out
const WIDE_DIRECTIONS = [...DIRECTIONS, ...DIRECTIONS.map((a) => a + Math.PI / 8)];
const WIDE_RINGS = [...RINGS, 120, 150];
const GAP = 3; // between a point's mark and its label
const LEADER_SEEN = 18; // a ring this far out draws a leader long enough to see: nearer, a label must be plainly its point's
const NEAREST = 1.5; // how much nearer its own point than any other a label without a leader sits
const LINE_GAP = 7; // between two labels side by side (with the 1 px every overlap test keeps)

// A w×h box whose nearest side (or corner, diagonally) lies d away from (x, y) in direction a;
// a corner clears the square around a mark of radius r too.
/** @param {number} x  @param {number} y  @param {number} w  @param {number} h  @param {number} a  @param {number} d  @param {number} r
 * @returns {Box} */
function boxAt(x, y, w, h, a, d, r) {
  const cx = Math.cos(a),
    cy = Math.sin(a),
    diagonal = Math.abs(cx) > 0.3 && Math.abs(cy) > 0.3;
  const ax = Math.abs(cx) < 0.3 ? 0.5 : cx > 0 ? 0 : 1; // which part of the box faces the point
  const ay = Math.abs(cy) < 0.3 ? 0.5 : cy > 0 ? 0 : 1;
  /** @param {number} c */
  const off = (c) => Math.sign(c) * (diagonal ? Math.max(Math.abs(c) * d, r + 2) : Math.abs(c) * d);
  const left = x + off(cx) - ax * w,
    top = y + off(cy) - ay * h;
  return [left, top, left + w, top + h];
}

/** @param {Box} a  @param {Box} b */
const overlaps = (a, b, pad = 1) => a[0] < b[2] + pad && b[0] < a[2] + pad && a[1] < b[3] + pad && b[1] < a[3] + pad;
/** @param {Box} a  @param {Box} b */
const area = (a, b) => Math.max(0, Math.min(a[2], b[2]) - Math.max(a[0], b[0])) * Math.max(0, Math.min(a[3], b[3]) - Math.max(a[1], b[1]));
/** @param {Box} a  @param {Box} b */
const inside = (a, b) => a[0] >= b[0] && a[1] >= b[1] && a[2] <= b[2] && a[3] <= b[3];

/** Does the segment [x1, y1, x2, y2] pass through the box? (Liang–Barsky clipping)
 * @param {Segment} segment  @param {Box} box */
export function crosses([x1, y1, x2, y2], box) {
  const dx = x2 - x1,
    dy = y2 - y1;
  let t0 = 0,
    t1 = 1;
  for (const [p, q] of [
    [-dx, x1 - box[0]],
    [dx, box[2] - x1],
    [-dy, y1 - box[1]],
    [dy, box[3] - y1],
  ]) {
    if (p === 0) {
      if (q < 0) return false;
      continue;
    }
    const t = q / p;
    if (p < 0) {
      if (t > t1) return false;
      t0 = Math.max(t0, t);
    } else {
      if (t < t0) return false;
      t1 = Math.min(t1, t);
    }
  }
  return true;
}

// Directions nearest `toward` first (a label beyond an arrow's tip, away from the crowd).
/** @param {number | null | undefined} toward  @returns {number[]} */
const order = (toward, all = DIRECTIONS) => (toward == null ? all : all.slice().sort((a, b) => Math.abs(angle(a - toward)) - Math.abs(angle(b - toward))));
/** @param {number} a */
const angle = (a) => Math.atan2(Math.sin(a), Math.cos(a)); // into (−π, π]

// A leader from the edge of the point's mark to the nearest point of the label.
/** @param {{ x: number, y: number, r?: number }} point  @param {Box} box  @returns {Segment | null} */
function leaderTo({ x, y, r = 0 }, box) {
  const nx = Math.min(Math.max(x, box[0]), box[2]),
    ny = Math.min(Math.max(y, box[1]), box[3]);
  const len = Math.hypot(nx - x, ny - y);
  return len > r ? [x + ((nx - x) * r) / len, y + ((ny - y) * r) / len, nx, ny] : null;
}

/**
 * place(labels, {bounds, marks, lines, taken}) -> [{box, leader} or null], in the labels' order.
 * labels: [{x, y, w, h, r, toward, far, optional, nearest}], most important first: the point,
 * the label's size, the radius of the point's mark and, if given, the screen angle the label
 * should go first and how far out it may move; an optional label that finds no free spot is left
 * out (null) rather than cover another; a `nearest` label (one with no leader that could tell
 * whose it is, as a small mark's name) sits nearer its point than any other mark wherever it goes.
 * bounds: [x0, y0, x1, y1] the labels stay in; marks and taken: boxes no label may cover
 * (taken: other text); lines: segments a label crosses only when nothing else fits nearby;
 * walls: segments no label crosses (the axes); wide: search every 22.5° and further out before
 * leaving a label out. A leader crosses no label, and no label a leader.
 * @param {Label[]} labels
 * @param {{ bounds: Box, marks?: Box[], lines?: Segment[], taken?: Box[], walls?: Segment[], wide?: boolean }} options
 * @returns {(Placed | null)[]}
 */
export function place(labels, { bounds, marks = [], lines = [], taken = [], walls = [], wide = false }) {
  const hard = [...marks, ...taken],
    soft = lines.slice(),
    /** @type {Box[]} */
    boxes = [], // the labels placed, and their leaders: a leader crosses no label, nor a label a leader
    /** @type {Segment[]} */
    leaders = [];
  /** @param {Box} b */
  const free = (b) => inside(b, bounds) && !hard.some((o) => overlaps(b, o));
  /** @param {Box} b */
  const clear = (b) => !soft.some((s) => crosses(s, b));
  const centres = marks.map((m) => [(m[0] + m[2]) / 2, (m[1] + m[3]) / 2]);
  /** @param {Label} label  @param {Box} b  @param {boolean} led */
  const untangled = (label, b, led) => {
    const leader = led && leaderTo(label, b);
    return !leaders.some((s) => crosses(s, b)) && !(leader && boxes.some((o) => crosses(leader, o)));
  };
  return labels.map((label) => {
    const { x, y, w, h, r = 0, toward, far = Infinity } = label;
    const dirs = order(toward, wide ? WIDE_DIRECTIONS : DIRECTIONS);
    // a label with no leader must sit clearly nearer its own point than any other (half as far
    // again from the next), or it reads as the other's name
    /** @param {Box} b */
    const own = (b) => {
      const d = distance(x, y, b);
      return centres.every(([cx, cy]) => Math.hypot(cx - x, cy - y) < 0.5 || distance(cx, cy, b) >= NEAREST * d);
    };
    /** @type {{ box: Box, moved: boolean } | null} */
    let best = null;
    // near spots first, then further rings (up to `far`); in each, a spot that crosses no line
    // before one that does; an axis is crossed only by a label that must be shown and found no
    // other free spot at any ring
    search: for (const walled of label.optional ? [true] : [true, false]) {
      for (const ring of (wide ? WIDE_RINGS : RINGS).filter((d) => d <= far)) {
        for (const strict of [true, false]) {
          for (const a of dirs) {
            const b = boxAt(x, y, w, h, a, r + GAP + ring, r);
            if (
              free(b) &&
              (!walled || !walls.some((s) => crosses(s, b))) &&
              (!strict || clear(b)) &&
              ((ring >= LEADER_SEEN && !label.nearest) || own(b)) &&
              untangled(label, b, ring > 0)
            ) {
              best = { box: b, moved: ring > 0 };
              break search;
            }
          }
        }
      }
    }
    // nowhere free: an optional label is left out, any other takes the spot that covers least
    if (!best && label.optional) return null;
    if (!best) {
      let least = Infinity;
      for (const ring of RINGS)
        for (const a of dirs) {
          const b = clamp(boxAt(x, y, w, h, a, r + GAP + ring, r), bounds);
          const cost = hard.reduce((s, o) => s + area(b, o), 0);
          if (cost < least) {
            least = cost;
            best = { box: b, moved: !nearby(label, b) };
          }
        }
    }
    // a label's neighbours on its line keep a word's width away: two names side by side read as one phrase
    // (best is set: a label that is not optional takes the spot that covers least, and there is always one)
    best = /** @type {{ box: Box, moved: boolean }} */ (best);
    hard.push(best.box, [best.box[0] - LINE_GAP, best.box[1] + 2, best.box[2] + LINE_GAP, best.box[3] - 2]);
    const leader = best.moved ? leaderTo(label, best.box) : null;
    if (leader) soft.push(leader);
    boxes.push(best.box);
    if (leader) leaders.push(leader);
    return { box: best.box, leader };
  });
}

// Close enough to its point to need no leader: within a first-ring spot's distance.
/** @param {{ x: number, y: number, r?: number }} point  @param {Box} b */
const nearby = ({ x, y, r = 0 }, b) => distance(x, y, b) <= 1.5 * (r + GAP);
/** @param {number} x  @param {number} y  @param {Box} b */
const distance = (x, y, b) => Math.hypot(Math.min(Math.max(x, b[0]), b[2]) - x, Math.min(Math.max(y, b[1]), b[3]) - y);

/** @param {Box} box  @param {Box} bounds  @returns {Box} */
function clamp([x0, y0, x1, y1], bounds) {
  const dx = Math.max(bounds[0] - x0, Math.min(0, bounds[2] - x1)),
    dy = Math.max(bounds[1] - y0, Math.min(0, bounds[3] - y1));
  return [x0 + dx, y0 + dy, x1 + dx, y1 + dy];
}

// --- measuring and drawing, in the page ---

/** @type {CanvasRenderingContext2D | null} */
let context = null;

/** measurer(svgNode) -> (text, cls) -> {w, h, ascent}: the text's box in the font its class
 * gets inside that svg (read from the page's styles, so it holds while the plot is hidden).
 * @param {Element} host  @returns {(text: string, cls: string) => TextSize} */
export function measurer(host) {
  context ??= document.createElement("canvas").getContext("2d");
  /** @type {Map<string, { css: string, size: number }>} */
  const fonts = new Map();
  /** @param {string} cls */
  const font = (cls) => {
    if (!fonts.has(cls)) {
      const probe = svg("text", { class: cls });
      host.append(probe);
      const s = getComputedStyle(probe),
        size = parseFloat(s.fontSize) || 12; // live: read before removing
      fonts.set(cls, { css: `${s.fontStyle || "normal"} ${s.fontWeight || 400} ${size}px ${s.fontFamily || "sans-serif"}`, size });
      probe.remove();
    }
    return /** @type {{ css: string, size: number }} */ (fonts.get(cls));
  };
  return (text, cls) => {
    const f = font(cls);
    const ctx = /** @type {CanvasRenderingContext2D} */ (context); // (a canvas always has a 2d context here)
    ctx.font = f.css;
    const m = ctx.measureText(text);
    const ascent = m.fontBoundingBoxAscent ?? 0.92 * f.size,
      descent = m.fontBoundingBoxDescent ?? 0.24 * f.size;
    return { w: m.width, h: ascent + descent, ascent };
  };
}

/** The placed label as SVG: its leader line (if any), then the text, left-aligned in its box.
 * @param {Placed | null | undefined} placed  @param {{ text: string, cls: string, ascent: number }} label
 * @returns {(SVGLineElement | SVGTextElement | null)[]} */
export function drawLabel(placed, { text, cls, ascent }) {
  if (!placed) return [];
  const { box, leader } = placed;
  return [
    leader && svg("line", { class: "aw-leader", x1: leader[0], y1: leader[1], x2: leader[2], y2: leader[3] }),
    svg("text", { class: cls, x: box[0].toFixed(1), y: (box[1] + ascent).toFixed(1) }, text),
  ];
}
