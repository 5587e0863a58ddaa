// Small multiples: every head's weight matrix side by side; click one to select that head.
// Each is a thumbnail of at most SIZE × SIZE pixels, one pixel per block of cells.
import { rgb } from "d3-color";
import * as A from "../attention.js";
import { lookupTable } from "../picture.js";
import { el, fill, fmt2, inkOn } from "./dom.js";

const SIZE = 84, SMALLEST = 30; // a thumbnail's side in CSS pixels: at most, and at least (a whole model's grid)
const KEEP = 2 ** 24; // scores kept for reuse, over every head: 128 MB

/** The mean weight of each block of cells (W is n × m), at most SIZE × SIZE blocks:
 * {data, width, height, max, averaged}. */
export function thumbnail(W, n, m = W.length / n) {
  const width = Math.min(m, SIZE), height = Math.min(n, SIZE), sums = new Float64Array(width * height), counts = new Float64Array(width * height);
  const blocks = (count, side) => new Int32Array(count).map((_, i) => Math.floor((i * side) / count));
  const rowBlock = blocks(n, height), colBlock = blocks(m, width);
  for (let i = 0; i < n; i++) {
    const row = rowBlock[i] * width;
    for (let j = 0; j < m; j++) { sums[row + colBlock[j]] += W[i * m + j]; counts[row + colBlock[j]] += 1; }
  }
  let max = 0;
  for (let p = 0; p < sums.length; p++) { sums[p] /= counts[p]; max = Math.max(max, sums[p]); }
  return { data: sums, width, height, max, averaged: width < m || height < n };
}

/** Fill in work.thumbs (a store's `thumbnails()`) head by head, each head's scores in pieces of
 * rows, until all are done or busy() says stop; true when every head is done. */
export function advance(work, busy) {
  const { job } = work, n = job.q.rows, m = job.k.rows, step = Math.max(1, Math.floor(65536 / m));
  for (let h = work.thumbs.indexOf(null); h >= 0 && !busy(); h = work.thumbs.indexOf(null)) {
    job.scores[h] ??= new Float64Array(n * m);
    const q = A.headOf(job.q, h), k = A.headOf(job.k, h);
    // a head's bias: its own among a layer's heads (a model's thumbnails run over every layer), or the shared one
    const bias = job.bias && (job.bias.heads > 1 ? A.headOf(job.bias, h % job.bias.heads) : job.bias);
    while (job.rows[h] < n && !busy()) {
      const r = job.rows[h];
      A.addBias(A.scoreRows(job.scores[h], q, k, job.scale, r, Math.min(n, r + step)), bias, r, Math.min(n, r + step));
      job.rows[h] = Math.min(n, r + step);
    }
    if (job.rows[h] < n) break;
    const W = A.weights(job.scores[h], n, work.temperature, work.causal, work.mask);
    const open = (i, j) => !(work.causal && j > i) && (!work.mask || !!work.mask[i * m + j]);
    work.thumbs[h] = { ...thumbnail(W, n, m), summary: A.headSummary(W, n, open, work.cross) };
    // a whole model's heads are too many to keep every score of (12 × 12 at 512 tokens: 300 MB):
    // past KEEP numbers a head keeps only its thumbnail, and scores itself again when chosen
    if (n * m * job.q.heads > KEEP) [job.scores[h], job.rows[h]] = [null, 0];
  }
  return !work.thumbs.includes(null);
}

/** createHeads(parent, {onPick(layer, head), onProgress()}) -> {update({work, layers, layer, head, color, width}), destroy()}.
 * One row of thumbnails per layer (a model's), one per head; a click or Enter picks that layer
 * and head, and the arrow keys move between them. Small inputs get their thumbnails at once;
 * long ones once the page is idle, about 25 ms of work per task, so a drag stays smooth (new
 * work during a drag restarts the wait; a redraw for the same work leaves it running) and
 * onProgress asks for a redraw as heads complete. */
const SUMMARIES = [["", "nothing"], ["first", "weight on the first token"], ["self", "weight on itself"],
  ["previous", "weight on the previous token"], ["effective_tokens", "effective tokens"]];

export function createHeads(parent, { onPick, onProgress, onSummary }) {
  const title = el("span", {});
  const choice = el("select", { class: "aw-summary", "aria-label": "Colour the heads by a summary" },
    SUMMARIES.map(([value, label]) => el("option", { value }, label)));
  choice.addEventListener("change", () => onSummary(choice.value));
  const sort = el("input", { type: "checkbox", class: "aw-summary-sort" });
  sort.addEventListener("change", () => { shape = ""; onProgress(); }); // the page's own: a new order, redrawn
  const sortBox = el("label", { class: "aw-toggle" }, sort, "strongest first");
  const caption = el("figcaption", { class: "aw-heads-caption" }, title, el("label", {}, "colour by ", choice), sortBox);
  const list = el("div", { class: "aw-heads-list", role: "grid", "aria-label": "Heads: click one to show it below" });
  const node = el("figure", { class: "aw-figure aw-heads" }, caption, list);
  parent.append(node);
  let buttons = [], shape = "", ranked = null; // ranked: the order the heads were last ranked in
  let current = null, timer = 0;
  const run = (work) => {
    if (work !== current) return;
    const finished = work.thumbs.filter(Boolean).length, started = performance.now();
    const done = advance(work, () => performance.now() - started > 25);
    if (work.thumbs.filter(Boolean).length > finished) onProgress(); // a redraw only for a new picture
    if (!done) timer = setTimeout(() => run(work), 0);
  };
  // the arrow keys move between cells (one tab stop for the whole grid)
  function onKey(ev) {
    const shown = [...list.querySelectorAll(".aw-head")], at = shown.indexOf(ev.target.closest(".aw-head")); // as laid out
    // cells a row: the grid's heads, or as many as the wrapping run fits on its first line
    const per = Number(list.dataset.heads) || shown.filter((b) => b.offsetTop === shown[0]?.offsetTop).length || 1;
    const step = { ArrowRight: 1, ArrowLeft: -1, ArrowDown: per, ArrowUp: -per }[ev.key];
    if (at < 0 || step === undefined) return;
    ev.preventDefault();
    const next = shown[Math.max(0, Math.min(shown.length - 1, at + step))];
    next.focus();
    next.click();
  }
  list.addEventListener("keydown", onKey);

  const shown = new WeakMap(); // canvas -> the thumbnail it shows, so unchanged ones are not repainted

  function paint(canvas, thumb, lut, scaled) {
    const { data, width, height, max } = thumb, img = new ImageData(width, height), px = new Uint32Array(img.data.buffer);
    const top = scaled && max > 0 ? max : 1;
    for (let p = 0; p < data.length; p++) px[p] = lut[Math.min(255, Math.round((255 * data[p]) / top))];
    [canvas.width, canvas.height] = [width, height]; // a cross-attention head's is stretched to the square
    canvas.getContext("2d").putImageData(img, 0, 0);
  }

  return {
    node,
    /** A head still being computed keeps its old picture. */
    update({ work, layers = 1, layer = 0, head, color, width = 760, summary = "" }) {
      if (work !== current) {
        clearTimeout(timer);
        current = work;
        if (work.job.q.rows <= 128 && work.thumbs.length <= 16) advance(work, () => false);
        else timer = setTimeout(() => run(work), 120);
      }
      const thumbs = work.thumbs, per = thumbs.length / layers;
      node.dataset.complete = String(!thumbs.includes(null));
      // a model's grid fits the width: thumbnails shrink (not below SMALLEST) before rows wrap
      const side = layers > 1 ? Math.max(SMALLEST, Math.min(SIZE, Math.floor((width - 70) / per) - 14)) : SIZE;
      // a summary: each head's value, and (strongest first) the heads in its order
      const value = (p) => (summary && thumbs[p] ? thumbs[p].summary[summary] : NaN);
      // ranked once every head has its value; while new values are computed the last ranking stays
      const sorted = !!summary && sort.checked && (!thumbs.includes(null) || ranked?.length === thumbs.length);
      let order = thumbs.map((_, p) => p);
      if (sorted && thumbs.includes(null)) order = ranked;
      else if (sorted) order.sort((a, b) => (Number.isNaN(value(a)) - Number.isNaN(value(b))) || value(b) - value(a) || a - b);
      ranked = sorted ? order : null;
      const arrangement = `${layers}|${thumbs.length}|${side}|${sorted ? order.join(",") : ""}`;
      if (shape !== arrangement) {
        shape = arrangement;
        buttons = thumbs.map((_, p) => {
          const [l, h] = [Math.floor(p / per), p % per], name = layers > 1 ? `layer ${l + 1}, head ${h + 1}` : `head ${h + 1}`;
          return el("button", { type: "button", class: "aw-head", "data-layer": l, "data-head": h, "aria-label": name, title: name, onclick: () => onPick(l, h) },
            el("canvas", { style: `width:${side}px;height:${side}px` }),
            el("span", { class: "aw-head-label" }, layers > 1 && !sorted ? "" : layers > 1 ? `L${l + 1} H${h + 1}` : `head ${h + 1}`),
            el("span", { class: "aw-head-value" }));
        });
        // a model: one row per layer, named; columns named by head (sorted: one ranked run of cells)
        const grid = layers > 1 && !sorted;
        const rows = grid
          ? [el("span", {}), ...Array.from({ length: per }, (_, h) => el("span", { class: "aw-heads-col" }, `${h + 1}`)),
            ...buttons.flatMap((b, p) => (p % per ? [b] : [el("span", { class: "aw-heads-row" }, `layer ${p / per + 1}`), b]))]
          : order.map((p) => buttons[p]);
        list.classList.toggle("aw-heads-model", grid);
        list.style.gridTemplateColumns = grid ? `auto repeat(${per}, ${side + 10}px)` : "";
        list.dataset.heads = grid ? String(per) : ""; // a wrapping run: rows as laid out
        fill(list, rows);
      }
      choice.value = summary;
      sortBox.hidden = !summary;
      const top = Math.max(...thumbs.map((_, p) => value(p)).filter((v) => !Number.isNaN(v)), 0);
      buttons.forEach((b, p) => {
        const v = value(p), shown = summary && !Number.isNaN(v);
        b.lastChild.textContent = summary ? (Number.isNaN(v) ? "–" : fmt2(v)) : "";
        b.dataset.value = shown ? String(v) : "";
        // the value's colour, as the weights' (0 to the largest of these heads), behind the thumbnail
        const tint = shown ? color(top > 0 ? v / top : 0) : "";
        b.style.background = tint;
        b.style.color = tint && inkOn(tint);
        b.lastChild.hidden = !summary;
      });
      // averaged blocks of a long input are faint: then each picture is scaled to its own maximum
      const scaled = thumbs.some((t) => t && t.averaged);
      title.textContent = `${layers > 1 ? "every layer's heads" : "every head's weights"}${scaled ? " (block means, each scaled to its maximum)" : ""}`;
      let lut = null;
      thumbs.forEach((t, p) => {
        const canvas = buttons[p].firstChild, key = `${scaled}|${color(0)}|${color(1)}`; // both ends: a theme changes either
        if (!t || (shown.get(canvas)?.thumb === t && shown.get(canvas).key === key)) return;
        lut ??= lookupTable(color, 0, 1, rgb); // the picture's own 256 packed colours
        paint(canvas, t, lut, scaled);
        shown.set(canvas, { thumb: t, key });
      });
      const at = Math.min(layer, layers - 1) * per + Math.min(head, per - 1);
      buttons.forEach((b, p) => {
        b.setAttribute("aria-pressed", String(p === at));
        b.tabIndex = p === at ? 0 : -1;
      });
    },
    destroy() { clearTimeout(timer); list.removeEventListener("keydown", onKey); node.remove(); },
  };
}
