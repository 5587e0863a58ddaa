// Small multiples: every head's weight matrix side by side; click one to select that head.
import { el, fill, palette } from "./dom.js";

const SIZE = 84;

/** createHeads(parent, {onHead(h)}) -> {update({weights: Float64Array[], n, head, color}), destroy()} */
export function createHeads(parent, { onHead }) {
  const list = el("div", { class: "aw-heads-list", role: "toolbar", "aria-label": "Heads: click one to select it" });
  const node = el("figure", { class: "aw-figure aw-heads" }, el("figcaption", {}, "every head's weights"), list);
  parent.append(node);

  return {
    node,
    update({ weights, n, head, color }) {
      const pal = palette(node);
      const cell = SIZE / n, dpr = window.devicePixelRatio || 1;
      fill(list, weights.map((W, h) => {
        const canvas = el("canvas", { width: Math.ceil(SIZE * dpr), height: Math.ceil(SIZE * dpr), style: `width:${SIZE}px;height:${SIZE}px` });
        const ctx = canvas.getContext("2d");
        ctx.scale(dpr, dpr);
        ctx.fillStyle = pal.zero;
        ctx.fillRect(0, 0, SIZE, SIZE);
        for (let i = 0; i < n; i++) {
          for (let j = 0; j < n; j++) {
            ctx.fillStyle = color(W[i * n + j]);
            ctx.fillRect(j * cell, i * cell, Math.ceil(cell), Math.ceil(cell));
          }
        }
        return el("button", { type: "button", class: "aw-head", "data-head": h, "aria-pressed": String(h === head), "aria-label": `head ${h + 1}`, onclick: () => onHead(h) },
          canvas, el("span", {}, `head ${h + 1}`));
      }));
    },
    destroy() { node.remove(); },
  };
}
