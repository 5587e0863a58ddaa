// Small multiples: every head's weight matrix side by side; click one to select that head.
// Each is a thumbnail of at most SIZE × SIZE pixels, one pixel per block of cells.
import { rgb } from "d3-color";
import * as A from "../attention.js";
import { el, fill } from "./dom.js";

const SIZE = 84;

/** The mean weight of each block of cells, at most SIZE × SIZE blocks: {data, side, max, averaged}. */
export function thumbnail(W, n) {
  const side = Math.min(n, SIZE), sums = new Float64Array(side * side), counts = new Float64Array(side * side);
  const block = new Int32Array(n).map((_, i) => Math.floor((i * side) / n));
  for (let i = 0; i < n; i++) {
    const row = block[i] * side;
    for (let j = 0; j < n; j++) { sums[row + block[j]] += W[i * n + j]; counts[row + block[j]] += 1; }
  }
  let max = 0;
  for (let p = 0; p < sums.length; p++) { sums[p] /= counts[p]; max = Math.max(max, sums[p]); }
  return { data: sums, side, max, averaged: side < n };
}

/** Fill in work.thumbs (a store's `thumbnails()`) head by head, each head's scores in pieces of
 * rows, until all are done or busy() says stop; true when every head is done. */
export function advance(work, busy) {
  const { job } = work, n = job.q.rows, step = Math.max(1, Math.floor(65536 / n));
  for (let h = work.thumbs.indexOf(null); h >= 0 && !busy(); h = work.thumbs.indexOf(null)) {
    job.scores[h] ??= new Float64Array(n * n);
    const q = A.headOf(job.q, h), k = A.headOf(job.k, h);
    while (job.rows[h] < n && !busy()) {
      const r = job.rows[h];
      A.scoreRows(job.scores[h], q, k, job.scale, r, Math.min(n, r + step));
      job.rows[h] = Math.min(n, r + step);
    }
    if (job.rows[h] < n) break;
    work.thumbs[h] = thumbnail(A.weights(job.scores[h], n, work.temperature, work.causal, work.mask), n);
  }
  return !work.thumbs.includes(null);
}

/** createHeads(parent, {onHead(h), onProgress()}) -> {update({work, head, color}), destroy()}.
 * Small inputs get their thumbnails at once; long ones once the page is idle, about 25 ms of
 * work per task, so a drag stays smooth (new work during a drag restarts the wait; a redraw
 * for the same work leaves it running) and onProgress asks for a redraw as heads complete. */
export function createHeads(parent, { onHead, onProgress }) {
  const caption = el("figcaption", {}, "every head's weights");
  const list = el("div", { class: "aw-heads-list", role: "toolbar", "aria-label": "Heads: click one to select it" });
  const node = el("figure", { class: "aw-figure aw-heads" }, caption, list);
  parent.append(node);
  let buttons = [];
  let current = null, timer = 0;
  const run = (work) => {
    if (work !== current) return;
    const finished = work.thumbs.filter(Boolean).length, started = performance.now();
    const done = advance(work, () => performance.now() - started > 25);
    if (work.thumbs.filter(Boolean).length > finished) onProgress(); // a redraw only for a new picture
    if (!done) timer = setTimeout(() => run(work), 0);
  };

  const shown = new WeakMap(); // canvas -> the thumbnail it shows, so unchanged ones are not repainted

  function paint(canvas, thumb, lut, scaled) {
    const { data, side, max } = thumb, img = new ImageData(side, side), px = img.data;
    const top = scaled && max > 0 ? max : 1;
    for (let p = 0; p < data.length; p++) {
      const k = 3 * Math.min(255, Math.round((255 * data[p]) / top));
      px[p * 4] = lut[k]; px[p * 4 + 1] = lut[k + 1]; px[p * 4 + 2] = lut[k + 2]; px[p * 4 + 3] = 255;
    }
    canvas.width = canvas.height = side;
    canvas.getContext("2d").putImageData(img, 0, 0);
  }

  return {
    node,
    /** A head still being computed keeps its old picture. */
    update({ work, head, color }) {
      if (work !== current) {
        clearTimeout(timer);
        current = work;
        if (work.job.q.rows <= 128) advance(work, () => false);
        else timer = setTimeout(() => run(work), 120);
      }
      const thumbs = work.thumbs;
      node.dataset.complete = String(!thumbs.includes(null));
      if (buttons.length !== thumbs.length) {
        buttons = thumbs.map((_, h) => el("button", { type: "button", class: "aw-head", "data-head": h, "aria-label": `head ${h + 1}`, onclick: () => onHead(h) },
          el("canvas", { style: `width:${SIZE}px;height:${SIZE}px` }), el("span", {}, `head ${h + 1}`)));
        fill(list, buttons);
      }
      // averaged blocks of a long input are faint: then each picture is scaled to its own maximum
      const scaled = thumbs.some((t) => t && t.averaged);
      caption.textContent = scaled ? "every head's weights (block means, each scaled to its maximum)" : "every head's weights";
      let lut = null;
      thumbs.forEach((t, h) => {
        const canvas = buttons[h].firstChild, key = `${scaled}|${color(0)}|${color(1)}`; // both ends: a theme changes either
        if (!t || (shown.get(canvas)?.thumb === t && shown.get(canvas).key === key)) return;
        lut ??= Uint8Array.from({ length: 256 * 3 }, (_, i) => { const c = rgb(color(Math.floor(i / 3) / 255)); return [c.r, c.g, c.b][i % 3]; });
        paint(canvas, t, lut, scaled);
        shown.set(canvas, { thumb: t, key });
      });
      buttons.forEach((b, h) => b.setAttribute("aria-pressed", String(h === head)));
    },
    destroy() { clearTimeout(timer); node.remove(); },
  };
}
