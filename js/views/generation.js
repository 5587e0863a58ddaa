// Generation, one token at a time: the keys and values written so far kept as a cache that grows
// by one column per step, and the work of a step beside the work of computing everything again.
import { signedColours } from "../colours.js"; // K and V in the colours the query · key stage gives them
import { el, fill, fmt2 } from "./dom.js";
import { createGrid } from "./grid.js";

/** @typedef {import("./dom.js").Palette} Palette */
/** @typedef {import("../types").Matrix} Matrix */
/** @typedef {import("./grid.js").GridSpec} GridSpec */
/**
 * @typedef {object} GenerationView
 * @property {number} written  how many tokens are written (store.written()); 0 when every one is
 * @property {boolean} cross
 * @property {() => Matrix} k  the current head's keys, of the tokens written
 * @property {() => Matrix} v  and its values
 * @property {(name: "k" | "v") => number} top  their largest |number| over the whole text
 * @property {string[]} all  every token of the text
 * @property {boolean} causal
 * @property {string} stage
 * @property {string[]} tokens  the tokens written so far
 * @property {Palette} pal
 * @property {number} maxWidth
 */
/** @typedef {{ node: HTMLElement, update(view: GenerationView): number, destroy(): void }} Generation */

/** @param {number} x */
const count = (x) => x.toLocaleString("en-US");
/** @param {number} x  @param {string} word */
const plural = (x, word) => `${count(x)} ${word}${x === 1 ? "" : "s"}`;

/** createGeneration(parent) -> {node, update(view) -> the tokens shown written (0: none), destroy()};
 *  view = {written (store.written()), cross, k(), v() (the current head's keys and values), top(name) (their largest |number| over the whole text), all (every token), causal,
 *  stage, tokens (written so far), pal, maxWidth}.
 * @param {HTMLElement} parent
 * @returns {Generation} */
export function createGeneration(parent) {
  const head = el("p", { class: "aw-gen-title" });
  const caches = el("div", { class: "aw-gen-caches" });
  const kGrid = createGrid(caches, { title: "K cache (one column per token written)", describe: null });
  const vGrid = createGrid(caches, { title: "V cache", describe: null });
  const work = el("div", { class: "aw-gen-work" });
  const node = el(
    "section",
    { class: "aw-gen", "aria-label": "Generation: the key and value cache", hidden: true },
    head,
    el("div", { class: "aw-gen-row" }, caches, work),
  );
  parent.append(node);

  // one bar per way of computing the step, as long as its count of dot products
  /** @param {string} label  @param {number} value  @param {number} most  @param {string} cls */
  const bar = (label, value, most, cls) =>
    el(
      "div",
      { class: `aw-gen-bar ${cls}` },
      el("span", { class: "aw-gen-bar-label" }, label),
      el("span", { class: "aw-gen-bar-track" }, el("span", { class: "aw-gen-bar-fill", style: `width: ${Math.max(2, (100 * value) / most).toFixed(1)}%` })),
    );

  /** @type {string[] | null} */
  let writing = null; // the tokens of a text being written, one at a time

  return {
    node,
    update(view) {
      const { written, cross, all, causal, stage, tokens, pal } = view;
      // shown while generating, and after the last token is written (step = n) until new tokens or the causal rule off
      if (written) writing = all;
      else if (writing !== all || !causal || cross) writing = null;
      const s = written || (writing ? all.length : 0);
      node.hidden = !s || stage === "tokens"; // from the query · key stage on
      if (node.hidden) return s;
      const n = all.length,
        k = view.k(),
        v = view.v();
      const newest = tokens[s - 1];
      head.textContent =
        `Writing the text: ${s} of ${n} tokens so far. The keys and values of the tokens written are kept (the cache); each step adds one column, ` +
        "outlined and marked “new”; the columns marked “cached” keep their numbers and their colours, on one scale for the whole text.";
      // the cache: one column per token written (d rows), the newest marked "new", the others "cached"
      /** @param {Matrix} m  @param {string} title  @param {number} top  @returns {GridSpec} */
      const matrix = (m, title, top) => {
        return {
          rows: m.cols,
          cols: m.rows,
          value: (/** @type {number} */ i, /** @type {number} */ j) => m.data[j * m.cols + i],
          color: signedColours(pal, top),
          text: fmt2,
          rowLabels: Array.from({ length: m.cols }, (_, i) => `${i}`),
          colLabels: tokens,
          pal,
          maxWidth: Math.max(160, Math.min(view.maxWidth - 40, 44 * s + 60)), // room for its numbers: the two caches wrap on a narrow page
          maxCellHeight: Math.max(2, Math.min(24, Math.floor(140 / m.cols))),
          cached: { axis: "cols", fresh: s - 1 },
          ariaLabel: `${title}: ${m.cols} numbers for each of the ${s} tokens written; the last, ${newest}, is new`,
        };
      };
      kGrid.update(matrix(k, "key cache", Math.max(1e-9, view.top("k"))));
      vGrid.update(matrix(v, "value cache", Math.max(1e-9, view.top("v"))));
      // the work: this step's new row against every row again
      const most = s * s;
      fill(
        work,
        el("p", { class: "aw-gen-work-title" }, "The work of this step"),
        el(
          "p",
          {},
          "New token ",
          el("b", {}, newest),
          s === 1
            ? ": the first, so the cache holds only its own key and value, and its one row reads itself."
            : `: its query with each of the ${count(s)} keys in the cache (its own just added). The ${plural(s - 1, "earlier row")} ${s === 2 ? "stays as it was" : "stay as they were"}: the causal rule means ${s === 2 ? "it never reads" : "they never read"} the new key.`,
        ),
        bar(`this step: ${plural(s, "dot product")}, one new row`, s, most, "aw-gen-step"),
        bar(`recomputing everything: ${s}² = ${plural(most, "dot product")}, ${plural(s, "row")}`, most, most, "aw-gen-full"),
        el(
          "p",
          { class: "aw-gen-note" },
          `Writing all ${n} tokens this way takes 1 + 2 + … + ${n} = ${count((n * (n + 1)) / 2)} dot products, against ${count((n * (n + 1) * (2 * n + 1)) / 6)} for recomputing at every step.`,
        ),
      );
      return s;
    },
    destroy() {
      kGrid.destroy();
      vGrid.destroy();
      node.remove();
    },
  };
}
