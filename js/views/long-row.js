// The focused row of a long text, exact: its weights over every key (pooled onto the strip's
// pixels, each its largest), its strongest keys named with their positions, its budget and
// effective tokens, and every head of the layer's summary of the same row.
import { format } from "d3-format";
import { el, fill } from "./dom.js";
import { picture, steps } from "./long-matrix.js";
import { visible } from "./long-strip.js";

const commas = new Intl.NumberFormat("en-US").format,
  percent = format(".1%"),
  one = format(".1f");

/** @typedef {import("../long.js").Reply} Reply  @typedef {import("../long.js").LayerShape} LayerShape */

/**
 * @param {HTMLElement} box
 * @param {{ tokens: string[], pal: () => import("./dom.js").Palette, onHead: (h: number) => void, onShow: (j: number) => void }} options
 */
export function createRow(box, { tokens, pal, onHead, onShow }) {
  const n = tokens.length;
  const title = el("p", { class: "aw-long-row-title" }),
    canvas = el("canvas", { class: "aw-long-rowbar", role: "img" }),
    keys = el("p", { class: "aw-long-keys" }),
    budget = el("p", { class: "aw-long-budget" }),
    table = el("table", { class: "aw-long-heads" }),
    caption = el("p", { class: "aw-long-caption" });
  box.append(
    el(
      "section",
      { class: "aw-long-row", "aria-label": "the focused row" },
      title,
      canvas,
      keys,
      budget,
      caption,
      el("div", { class: "aw-long-heads-wrap" }, table),
    ),
  );
  /** @type {{ reply: Reply, layer: number, head: number, position: number, shape: LayerShape } | null} */
  let last = null;

  /** The row's weights pooled onto the bar's pixels (each pixel its largest weight), drawn, the row's own position marked. */
  /** @param {Float32Array} w  @param {number} at  the focused position, marked */
  function drawBar(w, at) {
    const width = Math.max(100, Math.min(box.clientWidth || 600, 1100)),
      dpr = window.devicePixelRatio || 1,
      px = Math.min(n, Math.round(width * dpr)),
      pooled = new Float32Array(px);
    let top = 0;
    for (let j = 0; j < n; j++) {
      const p = Math.floor((j * px) / n);
      if (w[j] > pooled[p]) pooled[p] = w[j];
      if (w[j] > top) top = w[j];
    }
    const image = picture(pooled, 1, px, top, true, steps(pal()).packed);
    canvas.width = px;
    canvas.height = Math.round(18 * dpr);
    canvas.style.width = `${width}px`;
    const g = /** @type {CanvasRenderingContext2D} */ (canvas.getContext("2d"));
    g.imageSmoothingEnabled = false;
    g.drawImage(image, 0, 0, px, canvas.height);
    g.fillStyle = pal().accent; // (where the query itself is: a causal row reads nothing to its right)
    g.fillRect(Math.min(px - 2 * dpr, Math.floor((at * px) / n)), 0, 2 * dpr, canvas.height);
    canvas.setAttribute(
      "aria-label",
      `the focused row's weights over all ${commas(n)} keys, each pixel its largest, on a log scale; the row's own position marked`,
    );
  }

  function draw() {
    if (!last) return;
    const { reply, layer, head, position: at, shape } = last;
    const where = `Row ${commas(at)} “${visible(tokens[at], 24)}” (layer ${layer}, head ${head})`;
    if (reply.answer.kind !== "row") {
      title.textContent = `${where}: ${reply.answer.message}`;
      fill(keys);
      fill(table);
      caption.textContent = "";
      budget.textContent = "";
      canvas.hidden = true;
      return;
    }
    const heads = /** @type {{ keys: [number, number][], effective: number, first: number }[]} */ (reply.answer.heads),
      mine = heads[head];
    title.textContent = `${where}, exact: the keys it reads most`;
    canvas.hidden = false;
    drawBar(reply.buffers[0], at);
    fill(
      keys,
      ...mine.keys.map(([j, w]) =>
        el(
          "button",
          { type: "button", class: "aw-long-key", title: `show position ${commas(j)} in the strip`, onclick: () => onShow(j) },
          `“${visible(tokens[j], 16)}” #${commas(j)} `,
          el("b", {}, percent(w)),
        ),
      ),
    );
    const readable = shape.causal ? Math.min(at + 1, shape.window ?? Infinity) : n;
    const first = readable > at || !shape.causal ? `the first token takes ${percent(mine.first)}` : "the first token is outside its window";
    budget.textContent = `Its budget of 1 is spread over the ${commas(readable)} token${readable === 1 ? "" : "s"} it may read: ${one(mine.effective)} effective tokens (the exponential of the row's entropy); ${first}.`;
    caption.textContent = `Every head of layer ${layer} on the same row (click one to show it):`;
    fill(
      table,
      el("tr", {}, el("th", {}, "head"), el("th", {}, "reads most"), el("th", {}, "weight"), el("th", {}, "effective tokens"), el("th", {}, "first token")),
      ...heads.map((h, k) =>
        el(
          "tr",
          {
            class: k === head ? "aw-long-shown" : null,
            role: "button",
            "aria-pressed": String(k === head),
            "aria-label": `show head ${k}`,
            tabindex: "0",
            onclick: () => onHead(k),
            onkeydown: (e) => {
              if (e.key !== "Enter" && e.key !== " ") return;
              e.preventDefault();
              onHead(k);
            },
          },
          el("td", {}, String(k)),
          el("td", {}, h.keys.length ? `“${visible(tokens[h.keys[0][0]], 14)}” #${commas(h.keys[0][0])}` : "nothing"),
          el("td", {}, h.keys.length ? percent(h.keys[0][1]) : ""),
          el("td", {}, one(h.effective)),
          el("td", {}, percent(h.first)),
        ),
      ),
    );
  }

  return {
    /** The row at `position` is being asked for. @param {number} at */
    pending(at) {
      box.dataset.pending = String(at);
    },
    /** @param {Reply | null} reply  @param {{ layer: number, head: number, position: number, shape: LayerShape }} of */
    update(reply, of) {
      delete box.dataset.pending;
      last = {
        reply: reply || {
          answer: { kind: "missing", message: "this page does not hold this row: it holds the rows its author chose (see above)" },
          buffers: [],
        },
        ...of,
      };
      box.dataset.row = String(of.position);
      draw();
    },
    redraw: draw,
    destroy() {
      box.replaceChildren();
    },
  };
}
