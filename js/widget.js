// anywidget entry: draws one attention computation in five stages from the synced state.
// The page computes scores and weights itself (attention.js), so a drag needs no round trip;
// clicks go back to Python as trait changes.
import "./widget.css";
import * as A from "./attention.js";
import { createStore } from "./derived.js";
import { el, fill, palette } from "./views/dom.js";
import { describeRow, roundingWarning } from "./views/readout.js";
import { createControls } from "./views/controls.js";
import { createTokenStrip } from "./views/tokens.js";
import { createStages, weightColours } from "./views/stages.js";
import { createHeads } from "./views/heads.js";
import { createCell } from "./views/cell.js";
import { localModel } from "./standalone.js";
import { snapshotSVG, snapshotPNG, download } from "./views/snapshot.js";

const CAPTIONS = {
  tokens: "The sentence as tokens. Every token reads every other: in the matrix the row is the token doing the reading (its query), the column the token read from (its key). Click a token to focus it.",
  qk: "Each token makes a query (what it is looking for) and a key (what it contains). The row's query is compared with the column's key by their dot product q · k; times the scale, that is the score the matrix shows.",
  scores: "Scores = scale · Q·Kᵀ, before any normalisation. Purple: query and key point the same way; orange: they point apart, which is information too. Click a cell for its arithmetic.",
  weights: "Weights = softmax(scores / T), row by row: every row sums to exactly 1, a fixed budget. Effective tokens = exp(entropy): how many ways the budget went. Click a cell for its arithmetic.",
  blend: "The focused row's weights times the value vectors, summed: the output is a weighted average of the values, so it can only land inside their hull.",
};

function render({ model, el: host }) {
  const root = el("div", { class: "aw-root" });
  host.append(root);
  const get = (name) => model.get(name);
  const save = (name, value) => { model.set(name, value); model.save_changes(); };
  // A dragged slider redraws at once but talks to Python at most every SEND_MS, so a slow
  // observer in the kernel never has a backlog of stale values; the release sends the last.
  const SEND_MS = 150;
  let sendTimer = 0, lastSend = 0;
  const flush = () => { clearTimeout(sendTimer); sendTimer = 0; lastSend = performance.now(); model.save_changes(); };
  const saveSoon = (name, value, final) => {
    model.set(name, value);
    if (final || performance.now() - lastSend > SEND_MS) flush();
    else if (!sendTimer) sendTimer = setTimeout(flush, SEND_MS);
  };

  const store = createStore(get); // every derived number, memoised on its inputs

  // --- views ---
  const onFocus = (i) => {
    const cell = get("cell");
    if (cell && cell[0] !== i) model.set("cell", null); // a cell is shown only for the focused row, as in Python
    save("focus", i);
  };
  const onPickCell = (i, j) => {
    if (j == null) return onFocus(i);
    model.set("focus", i);
    save("cell", [i, j]);
  };
  const constants = get("_constants"); // AttentionWidget's stages and temperature range
  const controls = createControls(root, {
    stages: constants.stages, range: constants.temperature_range,
    onStage: (s) => save("stage", s),
    onTemperature: (t, final) => saveSoon("temperature", t, final),
    onCausal: (b) => save("causal", b),
    onSentence: (i) => save("sentence_index", i),
    onLayer: (i) => save("layer", i),
    onSave: async (kind) => {
      const name = `attention-${get("stage")}`;
      try {
        if (kind === "svg") download(`${name}.svg`, snapshotSVG(root), "image/svg+xml");
        else download(`${name}.png`, await snapshotPNG(root), "image/png");
      } catch (err) { // said where the reader looks, until the next redraw
        notice.hidden = false;
        notice.textContent = `The ${kind.toUpperCase()} picture could not be made: ${err.message}`;
      }
    },
  });
  // Said plainly when rounding could make the page's numbers differ from Python's.
  const notice = el("p", { class: "aw-notice", role: "status", hidden: true });
  root.append(notice);
  const heads = createHeads(root, { onHead: (h) => save("head", h), onProgress: () => schedule() });
  const strip = createTokenStrip(root, { onFocus });
  const caption = el("p", { class: "aw-caption" });
  const body = el("div", { class: "aw-body" });
  const readout = el("p", { class: "aw-readout", "aria-live": "polite" });
  root.append(caption, body);
  const cellView = createCell(root, { onClose: () => save("cell", null) });
  root.append(readout);
  let dragged = null; // the query being turned: drawn at once, sent to Python on release
  const stages = createStages(body, {
    store, get, onFocus, onPickCell,
    onQuery: (vec) => {
      const all = store.all("q"), h = Math.min(get("head"), all.heads - 1), f = get("focus");
      const data = all.data.slice(); // the same precision as Python sent
      data.set(vec, (h * all.rows + f) * all.cols);
      dragged = A.encodeMatrix(data, all.heads > 1 ? [all.heads, all.rows, all.cols] : [all.rows, all.cols]);
      model.set("q", dragged);
    },
    onQueryEnd: () => { if (dragged) model.save_changes(); dragged = null; },
    onResidual: (b) => save("residual", b),
    onWindow: () => schedule(),
  });

  // --- drawing, batched to one frame ---
  let frame = 0, layoutRetries = 0;
  const schedule = () => { if (!frame) frame = requestAnimationFrame(draw); };

  function draw() {
    frame = 0;
    const pal = palette(root);
    const tokens = get("tokens"), n = tokens.length, stage = get("stage");
    const focus = Math.min(get("focus"), n - 1), cell = get("cell");
    root.dataset.stage = stage;
    const maxWidth = Math.max(320, (root.clientWidth || 760) - 40);
    controls.update({
      stage, temperature: get("temperature"), causal: get("causal"), sentenceList: get("sentences") || [], sentenceIndex: get("sentence_index"),
      layers: get("n_layers") || 0, layer: get("layer") || 0, modelName: get("model_name") || "",
    });
    const showWeights = stage === "weights" || stage === "blend";
    const row = Array.from(store.weightRow(focus));

    caption.textContent = CAPTIONS[stage] || "";
    const warning = roundingWarning(store, get("temperature"));
    notice.hidden = !warning;
    notice.textContent = warning || "";
    fill(readout, describeRow(store, focus, tokens, stage));

    heads.node.hidden = store.all("q").heads < 2; // thumbnails scale themselves
    if (!heads.node.hidden) heads.update({ work: store.thumbnails(), head: get("head"), color: weightColours(pal) });
    cellView.update(cell && stage !== "tokens" && stage !== "qk" ? {
      a: A.cellArithmetic(store.q(), store.k(), store.v(), store.scores(), store.weightRow(cell[0]), { i: cell[0], j: cell[1], scale: store.scale(), temperature: get("temperature"), causal: get("causal"), mask: store.mask() }),
      reader: tokens[cell[0]], read: tokens[cell[1]],
    } : null);
    stages.update({ stage, tokens, focus, cell, row: showWeights || stage === "qk" ? row : null, pal, maxWidth });
    // A theme switch hides the notebook for a moment: try the arcs again on the next frames.
    if (strip.update({ tokens, focus, row: showWeights ? row : null, pal, span: stages.span() })) layoutRetries = 0;
    else if (layoutRetries++ < 60) schedule();
    // the first draw with every picture in it (a long input's weights come from a worker)
    if (!root.attnwidget.firstPaint && !stages.pending()) root.attnwidget.firstPaint = performance.now();
  }

  // For scripts and tests: the numbers the page draws (its own computation) and pictures of it.
  root.attnwidget = {
    numbers: () => {
      const warning = roundingWarning(store, get("temperature"));
      return {
        scores: Array.from(store.scores()), weights: Array.from(store.weights()), output: Array.from(store.output()),
        scale: store.scale(), temperature: get("temperature"), exact: !warning, notice: warning,
      };
    },
    snapshot: (kind, scale) => (kind === "svg" ? snapshotSVG(root) : snapshotPNG(root, scale)),
    model,
    // draw now rather than at the next frame: lets benchmarks time one redraw
    redraw: () => { cancelAnimationFrame(frame); draw(); },
    firstPaint: 0,
  };

  // --- wiring ---
  // any change redraws; the store recomputes only what depends on it
  const NAMES = ["q", "k", "v", "x", "value_basis", "mask", "scale", "head", "temperature", "causal", "tokens", "focus", "stage",
    "value_axes", "cell", "residual", "sentences", "sentence_index", "layer", "n_layers", "model_name"];
  const handlers = NAMES.map((name) => [name, () => schedule()]);
  for (const [name, h] of handlers) model.on(`change:${name}`, h);
  // Redraw when the notebook's theme changes (canvas colours come from CSS variables) or the cell resizes.
  const themeWatch = new MutationObserver(schedule);
  themeWatch.observe(document.body, { attributes: true, attributeFilter: ["data-jp-theme-light", "data-jp-theme-name"] });
  // The token strip is watched too: a theme switch briefly collapses it, and arcs need its real layout.
  const sizes = new WeakMap();
  const resize = new ResizeObserver((entries) => {
    for (const e of entries) {
      const w = e.contentRect.width;
      if (sizes.get(e.target) !== w) { sizes.set(e.target, w); schedule(); }
    }
  });
  resize.observe(root);
  resize.observe(strip.list);
  draw();

  return () => {
    cancelAnimationFrame(frame);
    clearTimeout(sendTimer);
    for (const [name, h] of handlers) model.off(`change:${name}`, h);
    themeWatch.disconnect();
    resize.disconnect();
    for (const v of [controls, heads, strip, stages, cellView]) v.destroy();
    root.remove();
  };
}

export default { render };

/** Render from embedded state with no kernel (exported pages); theme is "light", "dark" or "auto". */
export function renderStandalone(el, payload) {
  const started = performance.now();
  const cleanup = render({ model: localModel(payload), el });
  const root = el.querySelector(".aw-root"), dark = window.matchMedia("(prefers-color-scheme: dark)");
  const setTheme = () => {
    const isDark = payload.theme === "dark" || (payload.theme !== "light" && dark.matches);
    root.classList.toggle("aw-dark", isDark);
    document.body.classList.toggle("aw-page-dark", isDark);
  };
  setTheme();
  dark.addEventListener("change", setTheme);
  root.attnwidget.renderStart = started; // when the page's script began: decoding, then drawing
  return () => { dark.removeEventListener("change", setTheme); cleanup(); };
}
