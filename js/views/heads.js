// Small multiples: every head's weight matrix side by side; click one to select that head.
// Each is a thumbnail of at most SIZE × SIZE pixels, one pixel per block of cells.
import { rgb } from "d3-color";
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

/** createHeads(parent, {onHead(h)}) -> {update({thumbs, head, color}), destroy()} */
export function createHeads(parent, { onHead }) {
  const caption = el("figcaption", {}, "every head's weights");
  const list = el("div", { class: "aw-heads-list", role: "toolbar", "aria-label": "Heads: click one to select it" });
  const node = el("figure", { class: "aw-figure aw-heads" }, caption, list);
  parent.append(node);
  let buttons = [];

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
    /** thumbs[h] may be null while a head is still being computed: its old picture stays. */
    update({ thumbs, head, color }) {
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
        const canvas = buttons[h].firstChild, key = `${scaled}|${color(1)}`;
        if (!t || (shown.get(canvas)?.thumb === t && shown.get(canvas).key === key)) return;
        lut ??= Uint8Array.from({ length: 256 * 3 }, (_, i) => { const c = rgb(color(Math.floor(i / 3) / 255)); return [c.r, c.g, c.b][i % 3]; });
        paint(canvas, t, lut, scaled);
        shown.set(canvas, { thumb: t, key });
      });
      buttons.forEach((b, h) => b.setAttribute("aria-pressed", String(h === head)));
    },
    destroy() { node.remove(); },
  };
}
