// Small multiples: every head's weight matrix side by side; click one to select that head.
// Each is a thumbnail of at most SIZE × SIZE pixels, one pixel per block of cells.
import { rgb } from "d3-color";
import { format } from "d3-format";
import { lookupTable } from "../picture.js";
import { advance, createThumbPool, SIZE } from "../thumbs.js";
import { el, fill, fmt2, inkOn, legend } from "./dom.js";

const SMALLEST = 30; // a thumbnail's side in CSS pixels, at least (a whole model's grid); at most SIZE
const HEADER = 56; // a bitmap's 54 bytes of header, and 2 more: its pixels start on a multiple of 4

/** @typedef {import("../types").Thumb} Thumb */
/** Every head's thumbnails (store.thumbnails()): computed here, or the kernel's overview (`kernel`). @typedef {import("../types").ThumbWork} Work */
/** Thumbnails the page (or its workers, thumbs.js) computes. @typedef {Extract<Work, { kernel?: undefined }>} OwnWork */
/** A colour scale from [0, 1] (or [-1, 1], signed) to CSS colours. @typedef {(t: number) => string} Colour */
/**
 * What colours the heads in place of the summary: the difference panel's, or an exported page's "effect".
 * @typedef {{ name: string, label: string, values: number[], signed?: boolean, note?: string }} ColourBy
 */
/**
 * @typedef {object} HeadsOptions
 * @property {(layer: number, head: number) => void} onPick  (layer: the row's place among the layers held)
 * @property {() => void} onProgress  asks for a redraw (new pictures, a new order)
 * @property {(name: string) => void} onSummary
 * @property {(on: boolean) => void} [onMap]
 * @property {string[]} [signed]  the summaries measured either way from 0
 */
/**
 * @typedef {object} HeadsView
 * @property {Work} work
 * @property {number} [layers]
 * @property {number} [layer]
 * @property {number} head
 * @property {Colour} color
 * @property {Colour} [signedColor]
 * @property {number} [width]
 * @property {string} [summary]
 * @property {string} [loading]
 * @property {number[] | null} [held]  the layers an exported page holds, or null for all
 * @property {number[]} [numbers]  the model's own number of each row's layer (a hybrid's attention layers); empty: 0, 1, 2, …
 * @property {string[]} [kinds]  what each of the model's layers is, by number: "" for a row's, else its kind (no weights)
 * @property {ColourBy | null} [colourBy]
 * @property {string[]} [offered]
 * @property {string[]} [unavailable]
 * @property {boolean} [map]
 * @property {boolean} [mappable]
 * @property {boolean[] | null} [estimated]
 */
/** @typedef {{ node: HTMLElement, update(view: HeadsView): void, destroy(): void }} Heads */

/** createHeads(parent, {onPick(layer, head), onProgress()}) -> {update({work, layers, layer, head, color, width}), destroy()}.
 * One row of thumbnails per layer (a model's), one per head; a click or Enter picks that layer
 * and head, and the arrow keys move between them. Small inputs get their thumbnails at once;
 * long ones from workers (thumbs.js), or where none can run once the page is idle, about 25 ms of
 * work per task, so a drag stays smooth (new work during a drag restarts the wait; a redraw for
 * the same work leaves it running); onProgress asks for a redraw as heads complete. */
/** @type {[string, string][]} */
const SUMMARIES = [
  ["", "nothing"],
  ["first", "weight on the first token"],
  ["self", "weight on itself"],
  ["previous", "weight on the previous token"],
  ["effective_tokens", "effective tokens"],
  ["sink_share", "share its learnt sink takes (no token gets it)"], // a model's learnt sinks: offered when the heads have it
  ["effect", "effect on the next token"], // a causal language model's (head_effects): offered when its overview has it
  // head scores over every text (Python's head_scores, computed_views.py): computed in the kernel when chosen
  ["sink", "sink score (weight on the first token), every text"],
  ["duplicate", "weight on earlier copies of its token, every text"],
  ["induction", "induction score (random tokens repeated)"], // a model's: offered when it can read it again
  ["entropy", "entropy of its rows (nats), every text"],
  ["streaming", "streaming share (weight on the first 4 and nearest 64 tokens), every text"],
  ["retrieval", "retrieval score (a needle copied from a long text)"], // a model's that writes: as induction
];
// scores from 0 to 1 (a weight, or a mean or sum of weights): coloured on that whole scale, every head alike, so a head
// at 0.08 is pale beside one at 0.66; the others (entropy, effective tokens, an effect, a difference) are stretched to
// the largest head's, and their legend says so
const BOUNDED = new Set(["first", "self", "previous", "sink_share", "sink", "duplicate", "induction", "streaming", "retrieval"]);
// listed only where the heads have it (a widget with learnt sinks)
const OWN = new Set(["sink_share"]);
const whole = (/** @type {number} */ v) => String(v); // a bounded scale's ends: 0 and 1

/** A table of signed changes (the heads' effects) written alike: a sign and the decimals the largest size needs, three
 * or (below 0.01) enough for its two first figures; a change too small for them reads −0.0000, not a power of ten. */
const signedFormat = (/** @type {number} */ top) => format(`+.${top > 0 && top < 0.01 ? Math.min(12, 1 - Math.floor(Math.log10(top))) : 3}f`);

/** signed: the summaries measured either way from a neutral 0 (the effect on the next token's
 * log-probability), ranked and tinted by size (Python's computed_views.py says which).
 * @param {HTMLElement} parent
 * @param {HeadsOptions} options
 * @returns {Heads} */
export function createHeads(parent, { onPick, onProgress, onSummary, onMap = () => {}, signed: signedNames = [] }) {
  const SIGNED = new Set(signedNames);
  const title = el("span", {});
  const choice = el("select", { class: "aw-summary", "aria-label": "Colour the heads by a summary" });
  // the menu lists the summaries this widget can have, no others (not merely hidden: every browser leaves them out)
  const options = new Map(SUMMARIES.map(([value, label]) => /** @type {const} */ ([value, el("option", { value }, label)])));
  let listed = "";
  // while the panel's difference colours the heads, the menu says so (and is not a choice), and why beside it
  const byPanel = el("option", { value: "colourBy", hidden: true, disabled: true });
  const why = el("span", { class: "aw-summary-why", hidden: true });
  choice.addEventListener("change", () => onSummary(choice.value));
  const sort = el("input", { type: "checkbox", class: "aw-summary-sort" });
  sort.addEventListener("change", () => {
    shape = "";
    onProgress();
  }); // the page's own: a new order, redrawn
  const sortBox = el("label", { class: "aw-toggle" }, sort, "strongest first");
  const mapBox = el("input", { type: "checkbox", class: "aw-qk-toggle" });
  mapBox.addEventListener("change", () => onMap(mapBox.checked));
  const mapLabel = el("label", { class: "aw-toggle", title: "every query and key of the head shown, of every text, in one map" }, mapBox, "queries & keys map");
  const caption = el("figcaption", { class: "aw-heads-caption" }, title, el("label", {}, "colour by ", choice), why, sortBox, mapLabel);
  const legendNode = el("div", { class: "aw-legend aw-heads-legend", hidden: true }); // what the heads' colours say
  const list = el("div", { class: "aw-heads-list", role: "grid", "aria-label": "Heads: click one to show it below" });
  const node = el("figure", { class: "aw-figure aw-heads" }, caption, legendNode, list);
  parent.append(node);
  /** @type {HTMLElement[]} */
  let buttons = [],
    shape = "";
  /** @type {number[] | null} */
  let ranked = null; // ranked: the order the heads were last ranked in
  /** @type {Work | null} */
  let current = null;
  /** @type {Work | null} */
  let started = null; // the work whose thumbnails are being computed
  let timer = 0,
    frame = 0,
    first = true, // first: the page's first thumbnails, asked for at once
    waiting = true; // until the page's first paint: the buttons take their room, the pictures come after
  // the first paint shows the stage drawn without waiting for every head's picture: they are
  // computed and painted once that frame is on screen (a frame, then a task)
  const afterPaint = () => {
    frame = requestAnimationFrame(() => {
      timer = setTimeout(() => {
        waiting = false;
        onProgress();
      }, 0);
    });
  };
  // a whole model's heads go to workers; where none can run, the page does them itself
  // (the kernel's overview is never the pool's: a failure comes for work computed here, unless the work changed meanwhile)
  const pool = createThumbPool({ onThumb: onProgress, onFail: () => current && run(/** @type {OwnWork} */ (current)) });
  /** @param {OwnWork} work */
  const run = (work) => {
    if (work !== current) return;
    const finished = work.thumbs.filter(Boolean).length,
      started = performance.now();
    const done = advance(work, () => performance.now() - started > 25);
    if (work.thumbs.filter(Boolean).length > finished) onProgress(); // a redraw only for a new picture
    if (!done) timer = setTimeout(() => run(work), 0);
  };
  // the arrow keys move between cells (one tab stop for the whole grid)
  /** @param {KeyboardEvent} ev */
  function onKey(ev) {
    const shown = /** @type {HTMLElement[]} */ ([...list.querySelectorAll(".aw-head")]),
      at = shown.indexOf(/** @type {HTMLElement} */ (/** @type {Element} */ (ev.target).closest(".aw-head"))); // as laid out (none: -1)
    // cells a row: the grid's heads, or as many as the wrapping run fits on its first line
    const per = Number(list.dataset.heads) || shown.filter((b) => b.offsetTop === shown[0]?.offsetTop).length || 1;
    const step = /** @type {Partial<Record<string, number>>} */ ({ ArrowRight: 1, ArrowLeft: -1, ArrowDown: per, ArrowUp: -per })[ev.key];
    if (at < 0 || step === undefined) return;
    ev.preventDefault();
    const next = shown[Math.max(0, Math.min(shown.length - 1, at + step))];
    next.focus();
    next.click();
  }
  list.addEventListener("keydown", onKey);

  /** @type {WeakMap<HTMLImageElement, { thumb: Thumb, key: string }>} */
  const shown = new WeakMap(); // image -> the thumbnail it shows, so unchanged ones are not repainted

  // Each thumbnail is an <img> of an uncompressed bitmap, not a <canvas>: a model's thousand heads
  // as a thousand canvases cost the compositor a fifth of a second a frame (Chrome's "layerize").
  /** @param {HTMLImageElement} image  @param {Thumb} thumb  @param {Uint32Array} lut  @param {boolean} scaled */
  function paint(image, thumb, lut, scaled) {
    const { data, width, height, max } = thumb,
      bytes = new ArrayBuffer(HEADER + 4 * data.length),
      head = new DataView(bytes),
      px = new Uint32Array(bytes, HEADER);
    const top = scaled && max > 0 ? max : 1;
    for (let p = 0; p < data.length; p++) {
      const c = lut[Math.min(255, Math.round((255 * data[p]) / top))]; // ImageData's order, R G B A; a bitmap's is B G R A
      px[p] = (c & 0xff00ff00) | ((c & 0xff) << 16) | ((c >>> 16) & 0xff);
    }
    [
      [0, 0x4d42, 2], // "BM"
      [2, bytes.byteLength, 4],
      [10, HEADER, 4], // where the pixels start
      [14, 40, 4], // BITMAPINFOHEADER
      [18, width, 4],
      [22, -height, 4], // top row first
      [26, 1, 2],
      [28, 32, 2], // bits a pixel
      [34, 4 * data.length, 4],
    ].forEach(([at, v, n]) => (n === 2 ? head.setUint16(at, v, true) : head.setInt32(at, v, true)));
    URL.revokeObjectURL(image.src); // (a blob: URL of the last one, or nothing)
    image.src = URL.createObjectURL(new Blob([bytes], { type: "image/bmp" })); // a cross-attention head's is stretched to the square
  }

  return {
    node,
    /** A head still being computed keeps its old picture. */
    /** colourBy: {name, label, values (one per thumbnail), signed}, colours the heads in place of the summary: the
     * difference panel's ("difference"), or an exported page's "effect"; offered: summaries to list though no thumbnail
     * has them; unavailable: summaries this widget cannot have, not listed; mappable: the widget has queries and keys
     * to map (not attention weights alone); estimated: for "effect", true where a head's value is an estimate (marked
     * ≈), not the head ablated. */
    update({
      work,
      layers = 1,
      layer = 0,
      head,
      color,
      signedColor = color,
      width = 760,
      summary: chosen = "",
      loading = "",
      held = null,
      numbers = [],
      kinds = [],
      colourBy = null,
      offered = [],
      unavailable = [],
      map = false,
      mappable = true,
      estimated = null,
    }) {
      mapBox.checked = map;
      mapLabel.hidden = !mappable;
      const summary = colourBy ? "colourBy" : chosen;
      if (work !== current) {
        if (!waiting) clearTimeout(timer);
        current = work;
        pool.hold(); // the workers stop on the old work now, not after the wait below
      }
      if (waiting && !frame) afterPaint();
      if (!waiting && started !== current) {
        started = work;
        const here = !work.kernel; // the kernel's overview is computed there
        if (here && work.job.q.rows * work.job.k.rows <= 128 * 128 && work.thumbs.length <= 16) advance(work, () => false);
        else if (here && pool.usable()) timer = setTimeout(() => pool.run(work), first ? 0 : 120);
        else if (here) timer = setTimeout(() => run(work), 120);
        first = false;
      }
      const thumbs = work.thumbs,
        per = thumbs.length / layers;
      node.dataset.complete = String(!waiting && !thumbs.includes(null));
      // a model's grid fits the width: thumbnails shrink (not below SMALLEST) before rows wrap
      const side = layers > 1 ? Math.max(SMALLEST, Math.min(SIZE, Math.floor((width - 70) / per) - 14)) : SIZE;
      // a summary: each head's value, and (strongest first) the heads in its order
      /** @param {number} p */
      const raw = (p) => (colourBy ? (colourBy.values[p] ?? NaN) : summary && thumbs[p] ? (thumbs[p].summary[summary] ?? NaN) : NaN);
      // a signed summary ranks its most negative first (the heads the next token needs most)
      const signed = colourBy ? !!colourBy.signed : SIGNED.has(summary),
        value = signed ? (/** @type {number} */ p) => -raw(p) : raw;
      // a signed summary (the effect on the next token) only where it is offered or the heads have it
      /** @param {string} name */
      const has = (name) =>
        name === chosen ||
        (!unavailable.includes(name) && (!(SIGNED.has(name) || OWN.has(name)) || offered.includes(name) || thumbs.some((t) => t && name in t.summary)));
      const names = SUMMARIES.map(([name]) => name).filter(has);
      if (listed !== names.join("|")) {
        listed = names.join("|");
        choice.replaceChildren(...names.map((name) => /** @type {HTMLOptionElement} */ (options.get(name))), byPanel); // (names: the summaries')
      }
      // ranked once every head has its value; while new values are computed the last ranking stays
      const sorted = !!summary && sort.checked && (!thumbs.includes(null) || ranked?.length === thumbs.length);
      let order = thumbs.map((_, p) => p);
      if (sorted && thumbs.includes(null))
        order = /** @type {number[]} */ (ranked); // (sorted: ranked before)
      else if (sorted) order.sort((a, b) => +Number.isNaN(value(a)) - +Number.isNaN(value(b)) || value(b) - value(a) || a - b);
      ranked = sorted ? order : null;
      const arrangement = `${layers}|${thumbs.length}|${side}|${sorted ? order.join(",") : ""}|${numbers}|${kinds}`;
      const number = (/** @type {number} */ l) => (numbers.length ? numbers[l] : l); // the model's own
      if (shape !== arrangement) {
        shape = arrangement;
        buttons = thumbs.map((_, p) => {
          const [l, h] = [Math.floor(p / per), p % per],
            name = layers > 1 ? `layer ${number(l)}, head ${h}` : `head ${h}`; // Python's numbers: w.layer, w.head
          return el(
            "button",
            { type: "button", class: "aw-head", "data-layer": number(l), "data-head": h, "aria-label": name, title: name, onclick: () => onPick(l, h) },
            el("img", { class: "aw-thumb", alt: "", draggable: "false", style: `width:${side}px;height:${side}px` }),
            el("span", { class: "aw-head-label" }, layers > 1 && !sorted ? "" : layers > 1 ? `L${number(l)} H${h}` : `head ${h}`),
            el("span", { class: "aw-head-value" }),
          );
        });
        // a model: one row per layer, named; columns named by head (sorted: one ranked run of cells); a hybrid's
        // other layers (state space, linear attention, ...) as rows that say what they are, before the row at `l`
        const grid = layers > 1 && !sorted;
        /** @param {number} l */
        const others = (l) =>
          kinds.flatMap((kind, x) =>
            kind && x < (l < layers ? number(l) : Infinity) && (l === 0 || x > number(l - 1))
              ? [
                  el("span", { class: "aw-heads-row" }, `layer ${x}`),
                  el(
                    "span",
                    {
                      class: "aw-heads-other",
                      "data-other-layer": x,
                      style: `grid-column: span ${per}`,
                      title: `Layer ${x} mixes tokens without attention weights. Its implicit attention (α with y = α · x: signed, not a softmax) is w.implicit_attention(${x}) in Python.`,
                    },
                    `${kind}: no attention weights`,
                  ),
                ]
              : [],
          );
        const rows = grid
          ? [
              el("span", {}),
              ...Array.from({ length: per }, (_, h) => el("span", { class: "aw-heads-col" }, `${h}`)),
              ...buttons.flatMap((b, p) => (p % per ? [b] : [...others(p / per), el("span", { class: "aw-heads-row" }, `layer ${number(p / per)}`), b])),
              ...others(layers),
            ]
          : order.map((p) => buttons[p]);
        list.classList.toggle("aw-heads-model", grid);
        list.style.gridTemplateColumns = grid ? `auto repeat(${per}, ${side + 10}px)` : "";
        list.dataset.heads = grid ? String(per) : ""; // a wrapping run: rows as laid out
        fill(list, rows);
      }
      byPanel.hidden = colourBy?.name !== "difference"; // the difference panel's colours: not a summary
      byPanel.textContent = byPanel.hidden ? "" : `${/** @type {ColourBy} */ (colourBy).label} (the panel's)`;
      choice.value = byPanel.hidden ? chosen : "colourBy";
      why.hidden = byPanel.hidden;
      choice.disabled = !byPanel.hidden;
      why.textContent = byPanel.hidden ? "" : "(the difference panel colours each head by its largest change: click “difference” again to choose a summary)";
      choice.title = why.hidden ? "" : why.textContent.slice(1, -1);
      sortBox.hidden = !summary;
      const values = thumbs.map((_, p) => raw(p)).filter((v) => !Number.isNaN(v)),
        top = signed ? Math.max(...values.map(Math.abs), 0) : Math.max(...values, 0);
      const bounded = !signed && BOUNDED.has(colourBy ? colourBy.name : summary),
        written = signedFormat(top);
      // a bounded score's colour is its own value's; another's, its share of the largest head's (the legend says which)
      /** @param {number} v */
      const tintOf = (v) => (signed ? signedColor(top > 0 ? v / top : 0) : color(bounded ? Math.max(0, Math.min(1, v)) : top > 0 ? v / top : 0));
      legendNode.hidden = !summary || !values.length;
      if (!legendNode.hidden) {
        const label = colourBy ? colourBy.label : /** @type {HTMLOptionElement} */ (options.get(summary)).textContent;
        if (bounded) legend(legendNode, `colour: ${label}, on its whole scale`, tintOf, 0, 1, whole);
        else if (signed) legend(legendNode, `colour: ${label}, scaled to the largest size, ${written(top).slice(1)}`, tintOf, -top, top, written);
        else legend(legendNode, `colour: ${label}, scaled to the largest, ${fmt2(top)}`, tintOf, 0, top);
      }
      buttons.forEach((b, p) => {
        const away = !!held && layers > 1 && !held.includes(Math.floor(p / per)); // a layer this exported page does not hold
        b.classList.toggle("aw-head-away", away);
        b.title = `${b.getAttribute("aria-label")}${away ? " (not in this page)" : ""}`;
        const v = value(p),
          shown = summary && !Number.isNaN(v);
        const about = summary === "effect" && estimated?.[p] ? "≈" : ""; // an estimate, not the head ablated
        const text = /** @type {HTMLElement} */ (b.lastChild); // (its value's span)
        text.textContent = summary ? (Number.isNaN(v) ? "–" : about + (signed ? written(raw(p)) : fmt2(v))) : "";
        b.dataset.value = shown ? String(raw(p)) : "";
        // the value's colour behind the thumbnail: as the weights' (see tintOf), or a signed one's from its neutral 0
        // (purple: the head raises the next token's log-probability, orange: lowers it)
        const tint = shown ? tintOf(raw(p)) : "";
        b.style.background = tint;
        b.style.color = tint && inkOn(tint);
        text.hidden = !summary;
      });
      // averaged blocks of a long input are faint: then each picture is scaled to its own maximum
      const scaled = thumbs.some((t) => t?.averaged);
      title.textContent = `${layers > 1 ? "every layer's heads" : "every head's weights"}${scaled ? " (block means, each scaled to its maximum)" : ""}${colourBy && !colourBy.signed ? ` · coloured by ${colourBy.label}` : ""}${colourBy?.note ? ` · ${colourBy.note}` : signed ? " · orange: without the head the next token is less likely; purple: more likely" : ""}${summary === "effect" && estimated?.some((x) => x) ? ` · ≈: estimated (attribution patching); the ${estimated.filter((x) => !x).length} heads estimated largest: ablated exactly` : ""}${loading ? ` · ${loading}` : ""}${held ? ` · this page holds layers ${held.map(number).join(", ")} of ${numbers.length ? `its attention layers ${numbers.join(", ")}` : layers}` : ""}`;
      node.dataset.loading = String(!!loading && !held);
      let lut = null;
      thumbs.forEach((t, p) => {
        const image = /** @type {HTMLImageElement} */ (buttons[p].firstChild),
          key = `${scaled}|${color(0)}|${color(1)}`; // both ends: a theme changes either
        if (waiting || !t || (shown.get(image)?.thumb === t && /** @type {{ key: string }} */ (shown.get(image)).key === key)) return;
        lut ??= lookupTable(color, 0, 1, rgb); // the picture's own 256 packed colours
        paint(image, t, lut, scaled);
        shown.set(image, { thumb: t, key });
      });
      const at = Math.min(layer, layers - 1) * per + Math.min(head, per - 1);
      buttons.forEach((b, p) => {
        b.setAttribute("aria-pressed", String(p === at));
        b.tabIndex = p === at ? 0 : -1;
      });
    },
    destroy() {
      cancelAnimationFrame(frame);
      clearTimeout(timer);
      pool.destroy();
      list.removeEventListener("keydown", onKey);
      node.remove();
    },
  };
}
