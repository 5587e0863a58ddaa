// The page for a long text (LongWidget): the head's whole map pooled onto pixels, zoomed and
// panned down to exact cells; a token strip holding only what is on screen, searchable; the
// focused row exact, its strongest keys named; every head's summary of that row. What it draws
// comes from a source: a live kernel (asked, and answered as the page is used), or an exported
// page's payload (what the author chose to keep).
import "./widget.css";
import "./long.css";
import { format } from "d3-format";
import { el, fill, palette } from "./views/dom.js";
import { createMatrix } from "./views/long-matrix.js";
import { createRow } from "./views/long-row.js";
import { createStrip } from "./views/long-strip.js";

/** @typedef {{ heads: number, causal: boolean, window: number | null }} LayerShape */
/** @typedef {{ kind: string, id?: number, [key: string]: any }} Answer */
/** @typedef {{ answer: Answer, buffers: Float32Array[] }} Reply */
/** @typedef {{ get: (name: string) => any, set: (name: string, value: any) => void, save_changes: () => void,
 *   on: (event: string, f: () => void) => void, off: (event: string, f: () => void) => void }} Model */
/** @typedef {{ ask: (question: Record<string, any>, progress?: (f: number) => void) => Promise<Reply | null>,
 *   holds: string, destroy: () => void }} Source */

export const commas = format(",");

/** A live kernel's answers: each question gets this view's name and a number, and its answer (or
 * refusal) resolves it; the kernel answers every view, so each reads only its own.
 * @param {any} model  @returns {Source} */
function kernel(model) {
  const view = `${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 8)}`;
  let next = 0;
  /** @type {Map<number, { resolve: (r: Reply | null) => void, progress?: (f: number) => void }>} */
  const waiting = new Map();
  /** @param {Answer} answer  @param {(DataView | ArrayBuffer)[]} [buffers] */
  const onMessage = (answer, buffers = []) => {
    const who = answer?.view !== view || answer.id == null ? undefined : waiting.get(answer.id);
    if (!who) return;
    if (answer.kind === "progress") return who.progress?.(answer.fraction);
    waiting.delete(/** @type {number} */ (answer.id));
    if (answer.kind === "error") {
      console.warn(`attnwidget: ${answer.message}`);
      return who.resolve({ answer, buffers: [] });
    }
    const floats = buffers.map((b) =>
      b instanceof DataView ? new Float32Array(b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength)) : new Float32Array(b),
    );
    who.resolve({ answer, buffers: floats });
  };
  model.on("msg:custom", onMessage);
  return {
    holds: "",
    ask(question, progress) {
      const id = ++next;
      return new Promise((resolve) => {
        waiting.set(id, { resolve, progress });
        model.send({ ...question, view, id });
      });
    },
    destroy() {
      model.off("msg:custom", onMessage);
      for (const w of waiting.values()) w.resolve(null);
      waiting.clear();
    },
  };
}

/** An exported page's answers: the maps and rows it holds, decoded once; nothing else.
 * @param {any} payload  @returns {Source} */
function held(payload) {
  /** @param {string} text */
  const decode = (text) => {
    const bytes = Uint8Array.from(atob(text), (c) => c.charCodeAt(0));
    return new Float32Array(bytes.buffer);
  };
  /** @type {Map<string, Reply>} */
  const maps = new Map(),
    rows = new Map();
  for (const m of payload.maps) maps.set(`${m.layer}/${m.head}/${m.how}`, { answer: { kind: "map", ...m, data: undefined }, buffers: [decode(m.data)] });
  // each row once, its summaries of every head, and the weights of the heads the page holds
  for (const r of payload.rows)
    for (const [head, weights] of Object.entries(r.weights))
      rows.set(`${r.layer}/${r.position}/${head}`, {
        answer: { ...r, kind: "row", head: Number(head), weights: undefined },
        buffers: [decode(/** @type {string} */ (weights))],
      });
  return {
    holds: payload.holds,
    async ask(q) {
      if (q.ask === "map") return maps.get(`${q.layer}/${q.head}/${q.how}`) || null;
      if (q.ask === "row") return rows.get(`${q.layer}/${q.position}/${q.head}`) || null;
      return null; // (regions need a kernel)
    },
    destroy() {},
  };
}

/** A model over an exported page's state: the same get/set/on as a live one, in the page alone.
 * @param {Record<string, any>} state  @returns {Model} */
function localModel(state) {
  /** @type {Map<string, Set<() => void>>} */
  const listeners = new Map();
  return {
    get: (name) => state[name],
    set(name, value) {
      if (state[name] === value) return;
      state[name] = value;
      for (const f of listeners.get(`change:${name}`) || []) f();
    },
    save_changes() {},
    on(event, f) {
      if (!listeners.has(event)) listeners.set(event, new Set());
      /** @type {Set<() => void>} */ (listeners.get(event)).add(f);
    },
    off: (event, f) => listeners.get(event)?.delete(f),
  };
}

/** Draws the page in `root` over `model`, asking `source`; returns what stops it.
 * @param {HTMLElement} root  @param {Model} model  @param {Source} source  @param {boolean} [dark] an exported page's theme */
export function mount(root, model, source, dark = false) {
  const tokens = /** @type {string[]} */ (model.get("tokens")),
    n = tokens.length;
  /** @type {Record<string, LayerShape>} */
  const layers = model.get("layers");
  /** @param {string} name  @param {any} value */
  const set = (name, value) => {
    model.set(name, value);
    model.save_changes();
  };
  const shape = () => layers[String(model.get("layer"))];
  const title = el("p", { class: "aw-long-title" });
  const layerSelect = el("select", { "aria-label": "layer" }),
    headSelect = el("select", { "aria-label": "head" });
  for (const x of Object.keys(layers)) layerSelect.append(el("option", { value: x }, `layer ${x}`));
  const dial = el("input", {
      type: "range",
      min: "-2",
      max: "2",
      step: "0.01",
      "aria-label": "temperature",
      // an exported page holds its maps and rows at one temperature: the dial there says which, and stays
      disabled: !!source.holds,
      title: source.holds ? "This page holds its maps and rows at this temperature; a live notebook changes it." : null,
    }),
    dialText = el("output", { class: "aw-long-t" });
  const howButtons = ["max", "mean"].map((h) =>
    el("button", { type: "button", "data-how": h, onclick: () => set("how", h) }, h === "max" ? "largest in a pixel" : "mean of a pixel"),
  );
  const controls = el(
    "div",
    { class: "aw-long-controls" },
    el("label", {}, "Layer ", layerSelect),
    el("label", {}, "Head ", headSelect),
    el("label", { class: "aw-long-dial" }, "Temperature ", dial, dialText),
    el("span", { class: "aw-long-how", role: "group", "aria-label": "what a pixel of the map holds" }, ...howButtons),
  );
  const holds = el("p", { class: "aw-long-holds", hidden: !source.holds }, source.holds);
  const stripBox = el("div"),
    rowBox = el("div"),
    matrixBox = el("div");
  const note = el(
    "details",
    { class: "aw-long-note" },
    el("summary", {}, `What is not drawn at ${commas(n)} tokens, and why`),
    el(
      "p",
      {},
      "Arcs, the query and key grids, the blend of values and the grids of numbers are drawn for texts that fit on a screen " +
        "(AttentionWidget, up to its dense_limit). Here the focused row's strongest keys stand for the arcs, the map shows every " +
        "row at once, pooled, and zoomed in far enough it shows each cell with its number.",
    ),
  );
  const page = el("div", { class: `aw-root aw-long${dark ? " aw-dark" : ""}` }, title, controls, holds, stripBox, rowBox, matrixBox, note);
  fill(root, page);
  const pal = () => palette(page);

  const strip = createStrip(stripBox, { tokens, pal, onFocus: (i) => set("focus", i) });
  const row = createRow(rowBox, {
    tokens,
    pal,
    onHead: (h) => set("head", h),
    onShow: (j) => strip.reveal(j),
  });
  const matrix = createMatrix(matrixBox, {
    tokens,
    pal,
    source,
    onFocus: (i) => set("focus", i),
  });

  // One row question at a time: a focus moved while one is answered (a key held down) asks once more,
  // for where the focus is then, not for every token it passed.
  let rowBusy = false,
    rowAgain = false;
  async function askRow() {
    const layer = model.get("layer"),
      head = model.get("head"),
      position = model.get("focus");
    row.pending(position);
    if (rowBusy) return void (rowAgain = true);
    rowBusy = true;
    const reply = await source.ask({ ask: "row", layer, head, position });
    rowBusy = false;
    if (rowAgain) {
      rowAgain = false;
      return askRow();
    }
    row.update(reply, { layer, head, position, shape: shape() });
    strip.tint(reply?.answer.kind === "row" ? reply.buffers[0] : null);
  }

  function drawControls() {
    const s = shape(),
      layer = model.get("layer"),
      head = model.get("head");
    layerSelect.value = String(layer);
    if (headSelect.options.length !== s.heads) fill(headSelect, ...Array.from({ length: s.heads }, (_, h) => el("option", { value: String(h) }, String(h))));
    headSelect.value = String(head);
    const t = model.get("temperature");
    dial.value = String(Math.log10(t));
    dial.setAttribute("aria-valuetext", `T = ${format(".3~g")(t)}`);
    dialText.textContent = `T = ${format(".3~g")(t)}`;
    for (const b of howButtons) b.setAttribute("aria-pressed", String(b.dataset.how === model.get("how")));
    const name = model.get("name");
    title.textContent = `${name ? `${name}: attention` : "Attention"} over ${commas(n)} tokens, layer ${layer}, head ${head}${s.causal ? (s.window ? `, each token reading the ${commas(s.window)} before it (itself included)` : ", causal") : ""}`;
  }

  const shownNow = () => ({
    layer: model.get("layer"),
    head: model.get("head"),
    how: model.get("how"),
    temperature: model.get("temperature"),
    shape: shape(),
    focus: model.get("focus"),
  });
  const onLayer = () => {
    drawControls();
    matrix.show(shownNow());
    askRow();
  };
  const onFocus = () => {
    strip.focus(model.get("focus"));
    matrix.focus(model.get("focus"));
    askRow();
  };
  const onHow = () => {
    drawControls();
    matrix.show(shownNow());
  };
  layerSelect.addEventListener("change", () => set("layer", Number(layerSelect.value)));
  headSelect.addEventListener("change", () => set("head", Number(headSelect.value)));
  dial.addEventListener("input", () => (dialText.textContent = `T = ${format(".2~g")(10 ** Number(dial.value))}`));
  dial.addEventListener("change", () => set("temperature", Number((10 ** Number(dial.value)).toPrecision(2))));
  const events = /** @type {const} */ ([
    ["change:layer", onLayer],
    ["change:head", onLayer],
    ["change:temperature", onLayer],
    ["change:how", onHow],
    ["change:focus", onFocus],
  ]);
  for (const [e, f] of events) model.on(e, f);
  strip.focus(model.get("focus"));
  onLayer();
  const theme = new MutationObserver(() => {
    strip.redraw();
    matrix.redraw();
    row.redraw();
  });
  theme.observe(document.body, { attributes: true, attributeFilter: ["data-jp-theme-light", "data-jp-theme-name"] });
  return () => {
    theme.disconnect();
    for (const [e, f] of events) model.off(e, f);
    for (const part of [strip, row, matrix]) part.destroy();
    source.destroy();
  };
}

/** @param {import("@anywidget/types").RenderProps<any>} props */
function render({ model, el: root }) {
  return mount(root, model, kernel(model));
}

export default { render };

/** Render an exported page: its payload (LongWidget's page_state()) or its JSON text; `theme` inside.
 * @param {HTMLElement} root  @param {string | Record<string, any>} payload */
export function renderStandalone(root, payload) {
  const data = typeof payload === "string" ? JSON.parse(payload) : payload;
  const dark = data.theme === "dark" || (data.theme === "auto" && matchMedia("(prefers-color-scheme: dark)").matches);
  document.body.classList.toggle("aw-page-dark", dark);
  return mount(root, localModel({ ...data.state }), held(data), dark);
}
