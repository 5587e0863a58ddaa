// The panel beyond one head's weights: what each pair moves (weight × ‖value‖), the layer's heads'
// mean, rollout and flow up to the layer shown, and the difference between two texts. Each comes
// with its words from its declaration (computed_views.py). Python computes each matrix
// (measures.py) for the state in its key: a live page asks again when that is not the state shown,
// and keeps the last one drawn meanwhile; an exported page draws what it carries and says at which state.
import { differenceColours, weightColours } from "../colours.js";
import { current } from "../requests.js";
import { layerIndex } from "../rules.js";
import { el, figuresTo, fill, fmt2, fmt3, legend, short } from "./dom.js";
import { createGrid } from "./grid.js";
import { createTokenStrip } from "./tokens.js";

/** @typedef {import("../state").State} State */
/** @typedef {import("../state").ArrayValue} ArrayValue */
/** @typedef {import("./dom.js").Palette} Palette */
/** @typedef {import("./image.js").Picture} Picture */
/** @typedef {import("../types").Get} Get */
/**
 * One measure's matrix for the page (computed_views.entry, or the page's own weight × ‖value‖), at
 * the state in its key; or why it could not be computed.
 * @typedef {object} Entry
 * @property {ArrayValue} matrix  rows × cols, or every value of a choice first ("every")
 * @property {number} lo
 * @property {number} hi
 * @property {{ [K in keyof State]?: State[K] } & { measure: string }} key
 * @property {("layer" | "head")[]} [every]  the choices whose every value it holds, in order
 * @property {number} [other]  the difference's other text
 * @property {boolean} [in_page]  an exported page computes it itself (weight × ‖value‖)
 * @property {string} [error]
 */
/**
 * @typedef {object} MeasureView
 * @property {string} measure  the measure chosen, or ""
 * @property {string[]} offered  names, in order
 * @property {Record<string, string>} why  why each of those it cannot show cannot be shown
 * @property {Entry | null} entry  the kernel's, or the page's own, for `measure`
 * @property {boolean} live  a kernel computes another
 * @property {string[]} [edited]  an exported page's arrays changed since it was exported
 * @property {Get} get
 * @property {string[]} tokens
 * @property {string[]} keys
 * @property {number} focus
 * @property {number[] | null} weights  the focused row's, for weight × ‖value‖
 * @property {string[]} sentences
 * @property {string | null} secret  what an exercise hides
 * @property {boolean} cross
 * @property {(i: number, j: number) => boolean} closed
 * @property {Picture | null} image  a vision model's picture, for the strip's tiles
 * @property {Palette} pal
 * @property {number} maxWidth
 */
/** What a measure drawn is; reads: an image's caption of its focused row ({t}: the token). @typedef {{ name: string, label: string, title: string, signed: boolean, reads: string }} About */
/** The focused row of the matrix drawn, as drawn. @typedef {About & { row: number[], state: string | undefined }} FocusedRow */
/**
 * For scripts and tests: the matrix drawn (row-major), the state it is for, its scale's top and the arcs' row.
 * @typedef {{ key?: Entry["key"], values?: number[], row?: number[] | null, hi?: number, state: string | undefined }} MeasureNumbers
 */
/**
 * @typedef {object} Measure
 * @property {HTMLElement} node
 * @property {() => MeasureNumbers} numbers
 * @property {() => FocusedRow | null} focusedRow
 * @property {(view: MeasureView) => void} update
 * @property {() => void} destroy
 */
/**
 * What the panel draws: the matrix's cells by value, its scale and the arcs' row.
 * @typedef {{ tokens: string[], keys: string[], value: (i: number, j: number) => number, values: () => number[], row: number[] | null,
 *   hi: number, focus: number, cols: number, about?: About }} Drawn
 */

/** A measure's words, from its declaration (computed_views.py): its button, its sentence, its figure's title.
 * @param {Record<string, import("../state").ViewSpec>} views  @param {string} name */
const wordsOf = (views, name) => ({ label: views[name]?.label || name, about: views[name]?.about || "", title: views[name]?.title || name });

/** A title's {layer}, {head} and {other} filled in.
 * @param {string} template  @param {Record<string, string | number>} values */
export const filled = (template, values) => template.replace(/\{(\w+)\}/g, (all, name) => String(values[name] ?? all));

/** Which state an entry is for, in words: the parts of its key that are not the state shown.
 * @param {Entry["key"]} key  @param {Get} get  @param {string[]} [edited] */
function describeKey(key, get, edited = []) {
  const parts = edited.length ? [`the ${edited.join(", ")} exported (changed here since)`] : [];
  if ("temperature" in key && key.temperature !== get("temperature")) parts.push(`T = ${fmt2(/** @type {number} */ (key.temperature))}`);
  if ("layer" in key && key.layer !== get("layer")) parts.push(`layer ${key.layer}`);
  if ("head" in key && key.head !== get("head")) parts.push(`head ${key.head}`);
  for (const flag of /** @type {const} */ (["causal", "sink"])) if (flag in key && key[flag] !== !!get(flag)) parts.push(`${flag} ${key[flag] ? "on" : "off"}`);
  if ("step" in key && key.step !== get("step")) parts.push(`${key.step} tokens written`);
  if ("sentence_index" in key && key.sentence_index !== get("sentence_index")) parts.push(`text ${key.sentence_index}`);
  if ("block" in key && key.block !== (get("block") ?? "")) parts.push(`the ${key.block} block`);
  return parts.join(", ") || "another state of the widget";
}

/** @type {WeakMap<Entry, { shape: number[], data: Float32Array }>} */
const decoded = new WeakMap(); // an entry's matrix as numbers, once
/** @param {Entry} entry */
function numbers(entry) {
  if (!decoded.has(entry)) {
    const { shape, view } = entry.matrix;
    decoded.set(entry, { shape, data: new Float32Array(view.buffer.slice(view.byteOffset, view.byteOffset + view.byteLength)) });
  }
  return /** @type {{ shape: number[], data: Float32Array }} */ (decoded.get(entry));
}

/** @type {WeakMap<Float32Array, Map<number, Float32Array>>} */
const slices = new WeakMap(); // a matrix's numbers -> its slices by offset, each made once
/** The `size` numbers of `data` from `offset`: one object for the same numbers, so the grid repaints
 * its cells when they change (a key of the answer's state would miss a page's own new numbers).
 * @param {Float32Array} data  @param {number} offset  @param {number} size */
function sliceOf(data, offset, size) {
  if (!slices.has(data)) slices.set(data, new Map());
  const found = /** @type {Map<number, Float32Array>} */ (slices.get(data));
  if (!found.has(offset)) found.set(offset, data.subarray(offset, offset + size));
  return /** @type {Float32Array} */ (found.get(offset));
}

/** The focused row's largest weight and its largest weight × ‖value‖, and why they are not the same key.
 * @param {MeasureView} view  @param {number} focus  @param {number} cols  @param {(i: number, j: number) => number} value */
function contrasted(view, focus, cols, value) {
  const weights = /** @type {number[]} */ (view.weights); // (asked only with the head's own row)
  /** @param {(j: number) => number} f */
  const top = (f) => Array.from({ length: cols }, (_, j) => j).reduce((a, j) => (f(j) > f(a) ? j : a), 0);
  const a = top((j) => weights[j]),
    b = top((j) => value(focus, j));
  const [reader, A, B] = [view.tokens[focus], view.keys[a], view.keys[b]];
  const first = `${reader} puts its largest weight on ${A} (${fmt3(weights[a])})`;
  return a === b
    ? `${first}, and ${A} also moves it most (weight × ‖value‖ ${fmt3(value(focus, b))}).`
    : `${first}, but ${A}'s value is short: what moves ${reader} most is ${B} (weight × ‖value‖ ${fmt3(value(focus, b))}).`;
}

/** createMeasure(parent, {onMeasure(name | ""), onFocus(i), views}) -> {node, update(view), destroy()};
 * views: Python's declaration of each view (computed_views.py): whether it is signed.
 * @param {HTMLElement} parent
 * @param {{ onMeasure: (name: string) => void, onFocus: (i: number) => void, views: Record<string, import("../state").ViewSpec> }} options
 * @returns {Measure} */
export function createMeasure(parent, { onMeasure, onFocus, views }) {
  const choices = el("div", { class: "aw-measure-choices", role: "group", "aria-label": "Beyond one head" });
  const about = el("p", { class: "aw-measure-about" });
  const status = el("p", { class: "aw-measure-status", role: "status" });
  const contrast = el("p", { class: "aw-measure-contrast" }); // weight × ‖value‖ against the weight, in the focused row
  const arcs = el("div", { class: "aw-measure-arcs" });
  const node = el(
    "section",
    { class: "aw-measure", "aria-label": "Beyond one head" },
    el("div", { class: "aw-measure-head" }, el("span", { class: "aw-measure-title" }, "Beyond one head:"), choices),
    about,
    status,
    contrast,
    arcs,
  );
  parent.append(node);
  /** @type {Entry | null} */
  let shown = null; // the entry drawn: kept while its successor is computed
  /** @type {import("./tokens.js").TokenStrip | null} */
  let strip = null; // made when first needed: most widgets never show this panel
  /** @type {string[] & { key?: string }} */
  let names = [];
  /** @type {Drawn | null} */
  let at = null;
  /** @type {unknown[] | null} */
  let drawnFor = null; // what the panel was last drawn from
  const grid = createGrid(node, {
    title: "",
    onPick: (i) => onFocus(i),
    describe: (i, j) => at && `${at.tokens[i]} ← ${at.keys[j]}: ${fmt3(at.value(i, j))}`,
  });
  const legendNode = el("div", { class: "aw-legend" });
  node.append(legendNode);

  /** @param {string[]} offered  @param {string} measure  @param {Record<string, string>} why */
  function buttons(offered, measure, why) {
    const key = offered.map((n) => `${n}:${why[n] || ""}:${n === measure}`).join("|");
    if (key === names.key) return;
    names = Object.assign(offered.slice(), { key });
    fill(
      choices,
      offered.map((n) =>
        el(
          "button",
          {
            type: "button",
            "data-measure": n,
            "aria-pressed": String(n === measure),
            "aria-disabled": why[n] ? "true" : null, // still clickable: the panel then says why not
            class: why[n] ? "aw-measure-choice aw-measure-unavailable" : "aw-measure-choice",
            title: why[n] || (n === measure ? "click again to close" : wordsOf(views, n).about.split(":")[0]),
            onclick: () => onMeasure(n === measure ? "" : n),
          },
          wordsOf(views, n).label,
        ),
      ),
    );
  }

  /** Which of the matrices an answer holds is the state's: those holding every value of a choice
   * ("every": "layer", "head") hold them first, in that order (a page exported before "every": a
   * 3-D matrix is rollout's every layer). Each index is clamped to what is held.
   * @param {Entry} answer  @param {number[]} shape  @param {Get} get */
  function held(answer, shape, get) {
    /** @type {("layer" | "head")[]} */
    const axes = answer.every ?? (shape.length === 3 ? ["layer"] : []);
    // (a layer's place among those held: a hybrid's layers go by the model's own numbers)
    const place = (/** @type {"layer" | "head"} */ axis) =>
      axis === "layer" ? layerIndex({ layer: get("layer") ?? 0, layer_numbers: get("layer_numbers") }) : get(axis);
    return axes.reduce((at, axis, i) => at * shape[i] + Math.min(Math.max(0, place(axis) ?? 0), shape[i] - 1), 0);
  }

  return {
    node,
    /** For scripts and tests: the matrix drawn (row-major), the state it is for, its scale's top and the arcs' row, or null. */
    numbers: () =>
      at && shown ? { key: shown.key, values: at.values(), row: at.row, hi: at.hi, state: node.dataset.state } : { state: node.dataset.state || "" },
    /** The focused row of the matrix drawn, as drawn (a map over an image): {name, label, title, row,
     * signed, state}, or null when none is drawn. */
    focusedRow: () => {
      const drawn = /** @type {Drawn} */ (at); // (read only when there is one)
      return at && shown
        ? { .../** @type {About} */ (at.about), row: Array.from({ length: at.cols }, (_, j) => drawn.value(drawn.focus, j)), state: node.dataset.state }
        : null;
    },
    /** view: {measure, offered (names, in order), why ({name: reason} for those it cannot show),
     * entry (the kernel's, or the page's own, for `measure`), live (a kernel computes another),
     * get (the state), tokens, keys, focus, cross, closed(i, j), weights (the focused row's, for
     * weight × ‖value‖), sentences, secret (what an exercise hides), image (a vision model's picture,
     * for the strip's tiles), pal, maxWidth} */
    update(view) {
      const { measure, offered, why, entry, live, get, edited = [] } = view;
      node.hidden = offered.length === 0;
      if (node.hidden) return;
      const fresh = current(entry, get) && !edited.length; // (an exported page's: of its arrays as exported)
      buttons(offered, measure, why);
      node.dataset.measure = measure;
      about.hidden = !measure;
      about.textContent = measure ? wordsOf(views, measure).about : "";
      if (entry && !entry.error && (fresh || !live)) shown = entry;
      if (!measure || (shown && shown.key.measure !== measure)) shown = null;
      const error = entry?.error || (measure && why[measure]) || "";
      node.dataset.state = !measure ? "" : error ? "error" : fresh ? "current" : live ? "updating" : "exported";
      status.textContent = !measure
        ? ""
        : error
          ? error
          : fresh
            ? ""
            : live
              ? "updating…"
              : entry
                ? `as exported, at ${describeKey(entry.key, get, edited)}: this page has no kernel to compute it again (export it again at the state you want)`
                : "This page was exported without it: choose it in the notebook and export again.";
      status.hidden = !status.textContent;
      // the matrix and arcs are redrawn only when what they show changes: not at every step of a drag
      // the kernel has yet to answer
      const inputs = [
        measure,
        shown,
        error,
        fresh,
        edited.join(),
        view.focus,
        get("layer"),
        get("head"),
        get("block"),
        get("sentence_index"),
        view.tokens,
        view.secret,
        view.image,
        JSON.stringify(view.pal),
        view.maxWidth,
      ];
      inputs.push(offered.join(), JSON.stringify(why), fresh && view.weights ? view.weights.join() : "");
      if (drawnFor && inputs.every((x, i) => x === /** @type {unknown[]} */ (drawnFor)[i])) return;
      drawnFor = inputs;
      const { shape, data } = shown ? numbers(shown) : { shape: [0, 0], data: null };
      const [rows, cols] = shape.slice(-2);
      // another text's or block's matrix is not drawn under these tokens: the status says which it is
      const sameText = !!shown && shown.key.sentence_index === get("sentence_index") && shown.key.block === (get("block") ?? "") && rows === view.tokens.length;
      const draw = sameText && !error && view.secret !== "row"; // (a predict exercise's row: hidden until its reveal)
      grid.node.hidden = legendNode.hidden = arcs.hidden = contrast.hidden = !draw;
      node.dataset.drawn = String(draw);
      if (!draw) {
        at = null;
        return;
      }
      const drawn = /** @type {Entry} */ (shown), // (the same text's: there is one)
        matrix = /** @type {Float32Array} */ (data);
      const offset = held(drawn, shape, get) * rows * cols; // (an exported page's: every layer or head held, the one shown)
      /** @param {number} i  @param {number} j */
      const value = (i, j) => matrix[offset + i * cols + j];
      const signed = !!views[drawn.key.measure]?.signed;
      // the scale of the matrix drawn (of its slice, when every layer or head is held), as a live page's
      const slice = sliceOf(matrix, offset, rows * cols);
      const hi = (slice.length === matrix.length ? drawn.hi : slice.reduce((a, x) => Math.max(a, Math.abs(x)), 0)) || 1,
        lo = signed ? -hi : 0;
      const color = signed ? differenceColours(view.pal, hi) : weightColours(view.pal, hi);
      const focus = Math.min(view.focus, rows - 1);
      at = { tokens: view.tokens, keys: view.keys, value, values: () => Array.from(slice), row: null, hi, focus, cols };
      const layerOf = "layer" in drawn.key ? drawn.key.layer : get("layer"),
        headOf = "head" in drawn.key ? drawn.key.head : get("head");
      const words = wordsOf(views, drawn.key.measure);
      const other = short(view.sentences[/** @type {number} */ (drawn.other)] ?? "the other", 40);
      const title = filled(words.title, { layer: layerOf ?? 0, head: headOf ?? 0, other });
      at.about = { name: drawn.key.measure, label: words.label, title, signed, reads: views[drawn.key.measure]?.reads || "" };
      grid.node.querySelector("figcaption")?.remove();
      grid.node.prepend(el("figcaption", {}, title));
      grid.update({
        rows,
        cols,
        rowLabels: view.tokens.slice(0, rows),
        colLabels: view.keys.slice(0, cols),
        focusRow: focus,
        value,
        color,
        text: figuresTo(hi), // (small numbers, a long text's, with figures enough to tell apart)
        // closed as the head shown reads (weight × ‖value‖, difference); across layers only the causal rule closes cells
        // (a key without causal: undefined, every cell open)
        masked: views[drawn.key.measure]?.across_layers
          ? /** @type {(i: number, j: number) => boolean} */ ((i, j) => /** @type {Entry} */ (shown).key.causal && j > i)
          : view.closed,
        maxWidth: Math.min(view.maxWidth, 760),
        pal: view.pal,
        ariaLabel: title,
        key: slice, // the cell image's cache: the same numbers exactly while this is the same object
      });
      legend(legendNode, words.label, color, lo, hi, figuresTo(hi));
      contrast.hidden = drawn.key.measure !== "norms" || !fresh || !view.weights;
      if (!contrast.hidden) contrast.textContent = contrasted(view, focus, cols, value);
      // arcs from the focused token, as thick as its row's share (a signed difference has none)
      arcs.hidden = signed || view.cross;
      if (!arcs.hidden) {
        strip = strip || createTokenStrip(arcs, { onFocus });
        const row = Array.from({ length: cols }, (_, j) => value(focus, j)),
          total = row.reduce((a, b) => a + b, 0) || 1;
        at.row = row.map((x) => x / total);
        strip.update({ tokens: view.tokens, focus, row: at.row, rowKey: null, pal: view.pal, image: view.image });
      }
    },
    destroy() {
      strip?.destroy();
      grid.destroy();
      node.remove();
    },
  };
}
