// The app core: draws one attention computation in five stages from a model's state, and turns
// what the reader does into proposed changes. Both adapters mount it: the live widget
// (widget.js, changes go to Python) and the exported page (standalone.js, changes settle here).
// The page computes scores and weights itself (attention.js), so a drag needs no round trip; what
// only the kernel computes (the overview, the measures) comes through one request path (requests.js).
import { effectiveTokens } from "./attention.js";
import { signedColours, weightColours } from "./colours.js";
import { createStore } from "./derived.js";
import { createFetching } from "./fetching.js";
import { createRequests, current, held } from "./requests.js";
import { layerIndex, layerNumber, mayWrite } from "./rules.js";
import { savePicture, snapshotPNG, snapshotSVG } from "./snapshot.js";
import { createCell } from "./views/cell.js";
import { createControls } from "./views/controls.js";
import { el, fill, fmt2, palette, watchLayout } from "./views/dom.js";
import { createExercise } from "./views/exercise.js";
import { createGeneration } from "./views/generation.js";
import { createHeads } from "./views/heads.js";
import { createImage, createPicture } from "./views/image.js";
import { describeKv, methodName } from "./views/kv.js";
import { createMeasure } from "./views/measure.js";
import { createQkMap } from "./views/qkmap.js";
import { describeRow, roundingWarning } from "./views/readout.js";
import { captionOf, createStages } from "./views/stages.js";
import { createTokenStrip } from "./views/tokens.js";

/** @typedef {import("./state").State} State */
/** @typedef {import("./state").Constants} Constants */
/** @typedef {import("./types").Get} Get */
/** @typedef {import("./types").Store} Store */
/** @typedef {import("./types").Model} Model */
/** @typedef {import("./types").Change} Change */
/** @typedef {import("./views/dom.js").Palette} Palette */
/** @typedef {import("./views/exercise.js").Secret} Secret */
/** @typedef {import("./views/image.js").Picture} Picture */

/**
 * What mount() made, as the drawing below reads it.
 * @typedef {object} Parts
 * @property {import("./types").AppRoot} root
 * @property {Model} model
 * @property {Store} store
 * @property {Get} get  the state as it stands
 * @property {Constants} constants
 * @property {boolean} live  a kernel computes what the page asks for
 * @property {ReturnType<typeof createRequests> | null} requests
 * @property {(name: string) => boolean} shows  whether the page shows a computed view
 * @property {ReturnType<typeof createFetching>} fetching
 * @property {HTMLParagraphElement} notice
 * @property {ReturnType<typeof createControls>} controls
 * @property {ReturnType<typeof createHeads>} heads
 * @property {ReturnType<typeof createQkMap>} qk
 * @property {ReturnType<typeof createTokenStrip>} strip
 * @property {ReturnType<typeof createGeneration>} generation
 * @property {HTMLParagraphElement} caption
 * @property {HTMLDivElement} body
 * @property {HTMLParagraphElement} readout
 * @property {HTMLParagraphElement} kvReadout  the compressed KV cache in words
 * @property {ReturnType<typeof createCell>} cellView
 * @property {ReturnType<typeof createMeasure>} measure
 * @property {ReturnType<typeof createExercise>} exercise
 * @property {ReturnType<typeof createStages>} stages
 * @property {ReturnType<typeof createImage>} imageView
 * @property {ReturnType<typeof createPicture>} picture
 */

/** mount(host, model, {propose, flush}) -> cleanup. `propose(change, {soon, later})` asks for a
 * whole change (the rules settle its follow-ups); `soon`: part of a drag, sent at most every so
 * often; `later`: shown now, sent by the next flush().
 * @param {HTMLElement} host  @param {Model} model  @param {{ propose: import("./types").Propose, flush: () => void }} adapter
 * @returns {() => void} */
export function mount(host, model, { propose, flush }) {
  const root = /** @type {import("./types").AppRoot} */ (el("div", { class: "aw-root" })); // (its attnwidget is set below)
  host.append(root);
  const store = createStore((name) => model.get(name)); // every derived number, memoised on its inputs
  const get = store.get; // the state as it stands: while generating, the tokens written so far
  // a refused change (a layer an exported page does not hold) says why where the reader looks
  /** @param {string | null} refused */
  const said = (refused) => {
    if (refused) [notice.hidden, notice.textContent] = [false, refused];
  };
  /** @template {keyof State} K  @param {K} name  @param {State[K]} value */
  const save = (name, value) => said(propose(/** @type {Change} */ ({ [name]: value })));
  const fetching = createFetching(model, store, { propose, said, schedule: () => schedule() });
  const toHead = fetching.toHead;
  const live = !!model.holds; // a kernel computes what the page asks for
  // a view is still wanted while the page shows it (the overview of a model's layers, the measure
  // chosen, the summary chosen among a computed view's): a request for one no longer shown stops
  /** @param {string} name */
  const shows = (name) => {
    const spec = get("_constants").views[name];
    if (spec.held_in === "overview") return store.kernelOverview();
    if (spec.held_in === "measure_data") return get("measure") === name && !get("measures")?.[name];
    // (asked while every trait named has one of its values; null: any value but null)
    const when = Object.entries(spec.asked_when || {});
    return (
      when.length > 0 &&
      when.every(([t, values]) => {
        const value = get(/** @type {keyof State} */ (t));
        return values === null ? value != null : /** @type {unknown[]} */ (values).includes(value);
      })
    );
  };
  const requests = live ? createRequests(model, get, shows) : null;

  // --- views ---
  /** @param {number} i */
  const onFocus = (i) => save("focus", i);
  const constants = get("_constants"); // AttentionWidget's stages, temperature range and computed views
  const controls = createControls(root, {
    get,
    stages: constants.stages,
    blockNames: constants.blocks,
    range: constants.temperature_range,
    onStage: (s) => save("stage", /** @type {State["stage"]} */ (s)), // (one of the stages offered: the rules check it)
    onTemperature: (t, final) => propose({ temperature: t }, { soon: !final }),
    onCausal: (b) => save("causal", b),
    onSink: (b) => save("sink", b),
    onDifference: (b) => save("difference_map", b),
    onPosition: (scheme) => save("position", scheme),
    onSentence: (i) => save("sentence_index", i),
    onLayer: (i) => toHead({ layer: i }),
    onBlock: (b) => toHead({ block: b }),
    onStep: (s) => save("step", s), // the rules move the focus to the new token's row, with the causal rule on
    onKvMethod: (method) => save("kv_method", method),
    onKvBudget: (budget) => save("kv_budget", budget),
    onSave: (kind) =>
      savePicture(root, kind, `attention-${get("stage")}`).catch((err) => {
        notice.hidden = false; // said where the reader looks, until the next redraw
        notice.textContent = `The ${kind.toUpperCase()} picture could not be made: ${err.message}`;
      }),
  });
  // Said plainly when rounding could make the page's numbers differ from Python's.
  const notice = el("p", { class: "aw-notice", role: "status", hidden: true });
  root.append(notice);
  const overviewRow = el("div", { class: "aw-overview-row" }); // the heads, and beside them the query–key map
  root.append(overviewRow);
  const heads = createHeads(overviewRow, {
    // a layer only where the grid shows a model's layers (your own arrays are one row, whatever the layer)
    onPick: (l, h) => {
      const number = layerNumber({ layer_numbers: get("layer_numbers") }, l); // (l: the row's place; the model's own number)
      /** @type {Change} */
      const change = get("layer_shown") && number !== get("layer") ? { layer: number, head: h } : { head: h };
      // coloured by a score over every text: the head is shown on the text where its score is highest
      const best = computedAnswer({ get, constants, shows })?.answer?.best?.[get("summary")];
      const text = best ? best[l * (best.length / Math.max(1, get("n_layers"))) + h] : -1;
      if (text >= 0 && text !== get("sentence_index")) change.sentence_index = text;
      toHead(change);
    },
    onProgress: () => schedule(),
    onSummary: (name) => save("summary", /** @type {State["summary"]} */ (name)), // (one offered: the rules check it)
    onMap: (on) => save("qk_map", on),
    signed: Object.keys(constants.views).filter((n) => constants.views[n].signed),
  });
  // a click on a point opens its text at its token
  const qk = createQkMap(overviewRow, {
    onOpen: (text, position) =>
      propose(text !== get("sentence_index") && (get("sentences") || []).length > 1 ? { sentence_index: text, focus: position } : { focus: position }),
  });
  // a click on a token focuses it; with your own keys kept (kv_method "mask"), a key's keeps or evicts it (in
  // cross-attention the keys are the text read, below)
  /** @param {number} j  @param {boolean} read  a token of the text read */
  const onToken = (j, read) => {
    if (get("kv_method") !== "mask" || (!read && store.cross())) return read ? undefined : onFocus(j);
    const keys = get("kv_keys") || [];
    save("kv_keys", keys.includes(j) ? keys.filter((k) => k !== j) : [...keys, j]);
  };
  const strip = createTokenStrip(root, { onFocus, onPick: onToken });
  const generation = createGeneration(root); // the K and V cache while generating
  const caption = el("p", { class: "aw-caption" });
  const body = el("div", { class: "aw-body" });
  const readout = el("p", { class: "aw-readout", "aria-live": "polite" });
  const kvReadout = el("p", { class: "aw-kv", hidden: true });
  root.append(caption, body);
  const cellView = createCell(root, { onClose: () => save("cell", null) });
  root.append(readout, kvReadout);
  const measure = createMeasure(root, { onMeasure: (m) => save("measure", /** @type {State["measure"]} */ (m)), onFocus, views: constants.views }); // (one offered)
  // the predict / temperature exercise, at the top of the weights stage (views/exercise.js)
  const exercise = createExercise(body, {
    onGuess: (g) => save("guess", g), // after a reveal, a new try: the rules hide the row again
    onReveal: (guess) => propose(guess ? { guess, revealed: true } : { revealed: true }),
  });
  const imageView = createImage(body, { onFocus, onChange: () => schedule() }); // a vision model's image, beside the stages
  const picture = createPicture(() => schedule()); // its pixels, once decoded: the view's and the strip's tiles
  const stages = createStages(body, {
    onFocus,
    onPickCell: (i, j) => (j == null ? onFocus(i) : propose({ focus: i, cell: [i, j] })),
    onQuery: (vec) => propose({ q: store.withQuery(vec) }, { later: true }), // the query being turned: drawn at once, sent on release
    onQueryEnd: () => flush(),
    onResidual: (b) => save("residual", b),
    onWindow: () => schedule(),
  });
  const parts = /** @type {Parts} */ ({ root, model, store, get, constants, live, requests, shows, fetching, notice }); // (the views: next)
  Object.assign(parts, { controls, heads, qk, strip, generation, caption, body, readout, kvReadout, cellView, measure, exercise, stages, imageView, picture });

  // --- drawing, batched to one frame ---
  let frame = 0,
    layoutRetries = 0;
  const schedule = () => {
    if (!frame) frame = requestAnimationFrame(draw);
  };
  function draw() {
    frame = 0;
    if (stages.starting()) return; // the worker's start comes first (below)
    // A theme switch hides the notebook for a moment: try the arcs again on the next frames.
    if (drawAll(parts)) layoutRetries = 0;
    else if (layoutRetries++ < 60) schedule();
  }

  // For scripts and tests: the numbers the page draws (its own computation) and pictures of it.
  root.attnwidget = {
    numbers: () => {
      const warning = roundingWarning(store.agreement(), get("temperature"));
      return {
        scores: Array.from(store.scores()),
        weights: Array.from(store.weights()),
        output: Array.from(store.output()),
        // differential attention: the pair of the head shown, λ, the other map, and the difference and its mix (null
        // while a live page waits for the other head)
        differential: differentialNumbers(store),
        scale: store.scale(),
        temperature: get("temperature"),
        sink: store.sink(), // the head shown's learnt sink's logit, or null
        effective_tokens: Array.from({ length: store.q().rows }, (_, i) => effectiveTokens(store.weightRow(i), store.m(), 0)),
        exact: !warning,
        notice: warning,
      };
    },
    /** The compressed KV cache of the head shown as the page computes it, and the layer's as the kernel sent it:
     * {method, budget, keep (1 a key kept), error, row, retained, change (null where it cannot be said), layer
     * ({retained, change}, or null while the page holds none for the state shown)}; null while kv_method is "". */
    kv: () => {
      const kv = store.kv();
      if (!kv) return null;
      const focus = Math.min(get("focus"), get("tokens").length - 1),
        row = store.kvRow(focus),
        layer = kvLayer(parts);
      /** @param {number | null | undefined} x */
      const plain = (x) => (x == null || Number.isNaN(x) ? null : x);
      return {
        method: kv.method,
        budget: kv.budget,
        keep: kv.keep ? Array.from(kv.keep) : null,
        error: kv.error,
        row: focus,
        retained: plain(row?.retained),
        change: plain(row?.change),
        layer: typeof layer === "string" ? null : layer,
      };
    },
    /** How many rows the page's last computation of the scores, weights and output computed (one for a step of generation). */
    work: () => store.work(),
    /** The panel beyond one head: {key, values (its matrix, row-major), row (the arcs' shares), state} as drawn. */
    measure: () => measure.numbers(),
    /** A vision model's image view: the map drawn over the image, one value a patch (views/image.js). */
    image: () => imageView.numbers(),
    snapshot: (kind, scale) => (kind === "svg" ? snapshotSVG(root) : snapshotPNG(root, scale)),
    model,
    // draw now rather than at the next frame: lets benchmarks time one redraw
    redraw: () => {
      cancelAnimationFrame(frame);
      draw();
    },
    firstPaint: 0,
    /** Every part the page draws is drawn: the stages' pictures (a worker's too) and every head's
     * thumbnail loaded. Pictures (save_png, save_svg) are taken once this holds. */
    ready: () =>
      !!root.attnwidget.firstPaint &&
      !stages.pending() &&
      picture.settled() &&
      (heads.node.hidden ||
        (heads.node.dataset.complete === "true" &&
          [.../** @type {NodeListOf<HTMLImageElement>} */ (heads.node.querySelectorAll("img.aw-thumb"))].every((i) => i.complete && i.naturalWidth > 0))),
  };

  // --- wiring ---
  // any change redraws, at most once a frame; the store recomputes only what depends on it
  model.on("change", schedule);
  const unwatch = watchLayout(root, strip.list, schedule);
  // A long input's worker is asked before the first draw, which waits until it runs (it says so,
  // or fails, through onWindow): a worker cannot start while this thread computes the page's
  // own numbers. One that says nothing holds the page up for a second at most.
  stages.start({ stage: get("stage"), tokens: get("tokens"), keys: store.keys(), pal: palette(root), ...store.numbers() });
  draw();

  return () => {
    cancelAnimationFrame(frame);
    requests?.destroy();
    model.off("change", schedule);
    unwatch();
    for (const v of [fetching, controls, heads, qk, strip, stages, cellView, exercise, generation, measure, imageView]) v.destroy();
    root.remove();
  };
}

/** Draws every part from the state as it stands; false when the token strip could not be laid out yet.
 * @param {Parts} p  @returns {boolean} */
function drawAll(p) {
  const { root, model, store, get, constants } = p;
  const pal = palette(root);
  const tokens = get("tokens"),
    keys = store.keys(),
    stage = get("stage");
  const focus = Math.min(get("focus"), tokens.length - 1),
    cell = get("cell"),
    image = p.picture(get("image")); // (null until its pixels are read)
  root.dataset.stage = stage;
  root.dataset.fetching = p.fetching.label(); // the numbers below are the last head's until it comes
  const maxWidth = Math.max(320, (root.clientWidth || 760) - 40);
  // the K and V cache while generating (from the query/key stage on); the grids mark the rows it keeps
  const written = p.generation.update({
    written: store.written(),
    cross: store.cross(),
    k: store.k,
    v: store.v,
    top: store.wholeTop, // one colour scale for the whole text: a cached number keeps its colour
    all: model.get("tokens"),
    causal: get("causal"),
    stage,
    tokens,
    pal,
    maxWidth,
  });
  root.dataset.written = String(written); // for scripts and tests
  p.controls.update(controlsView(model, store, constants, stage));
  const shown = store.numbers();
  p.stages.start({ stage, tokens, keys, pal, ...shown }); // a worker's picture first: it computes while the page does
  const showWeights = stage === "weights" || stage === "blend";
  const pair = store.pair(),
    D = pair?.shown === "difference" ? store.difference() : null, // a differential pair's difference, shown
    m = keys.length;
  const rowKey = D ? D.subarray(focus * m, (focus + 1) * m) : store.weightRow(focus), // the same object exactly while the row's numbers are
    row = Array.from(rowKey);
  // what an exercise keeps secret until its reveal: the focused row's weights ("row") or effective tokens ("eff")
  const [ex, guess, revealed, goal] = /** @type {[State["exercise"], State["guess"], State["revealed"], State["goal"]]} */ (
    /** @type {const} */ (["exercise", "guess", "revealed", "goal"]).map(get)
  );
  const secret = p.exercise.update({
    stage,
    tokens,
    keys,
    focus,
    ...(ex ? { row: rowKey, why: keys.map((_, j) => store.closedWhy(focus, j)) } : {}),
    cross: store.cross(),
    exercise: ex,
    guess,
    revealed,
    goal,
  });
  const hint = secret !== "row" || !!get("scores_hint"); // before a predict reveal, the scores rank the row: the teacher's choice
  p.caption.textContent = captionOf({
    stage,
    cross: store.cross(),
    causal: get("causal"),
    masked: !!store.mask(),
    secret,
    hint,
    bias: !!store.bias(),
    softcap: store.softcap(),
    residual: !!get("residual") && !!store.x(),
    sink: !!get("sink"),
    first: keys[0],
    given: !!get("weights_only"),
    position: store.position(),
    reader: tokens[focus],
    focus,
    image: !!get("image"),
    terms: store.termNames(),
    learnt: store.sink(),
    pair,
    waiting: pair?.shown === "difference" && !D,
  });
  const warning = roundingWarning(store.agreement(), get("temperature"));
  p.notice.hidden = !warning;
  p.notice.textContent = warning || "";
  // what the stages draw: the state shown, and the numbers of the head shown (computed only if drawn)
  const row0 = showWeights || stage === "qk" ? row : null;
  // a compressed KV cache: the keys the head shown evicts, marked over its map and the tokens (not while an exercise hides the row)
  const kv = secret === "row" ? null : store.kv(),
    evicted = kv?.keep ? kv.keep.map((k) => 1 - k) : null;
  const view = { stage, tokens, keys, focus, cell, row: row0, pal, maxWidth, secret, hint, written, evicted, ...shown };
  fill(p.readout, describeRow(view));
  drawKv(p, kv, tokens[focus], focus, keys.length, stage);
  drawHeads(p, pal, maxWidth, secret);
  drawMeasure(p, tokens, keys, focus, pal, maxWidth, secret, image);
  p.cellView.update(
    cell && stage !== "tokens" && stage !== "qk" && secret !== "row"
      ? {
          a: store.cellArithmetic(...cell),
          why: store.closedWhy(...cell),
          biased: !!store.bias(),
          position: store.position(),
          given: get("weights_only") || "",
          terms: store.scoreTerms(...cell),
          parts: scoreParts(p),
          reader: tokens[cell[0]],
          read: keys[cell[1]],
        }
      : null,
  );
  p.stages.update(view);
  const cross = store.cross() ? keys : null; // the text read, below the tokens that read it
  const closedCell = store.closedCells(),
    closed = (/** @type {number} */ j) => closedCell(focus, j);
  const stripRow = showWeights && secret !== "row" && !D ? row : null; // (a signed row has no shares of 100 %)
  const laidOut = p.strip.update({
    tokens,
    keys: cross,
    focus,
    row: stripRow,
    rowKey,
    closed,
    pal,
    span: cross ? null : p.stages.span(),
    image,
    evicted: evicted && { keys: evicted, said: `evicted from ${kvWhose(p, /** @type {import("./types").KvCache} */ (kv))}` },
  });
  // over the image: the strip's row, or the row of the measure drawn (neither while an exercise keeps the row)
  const measured = get("measure") && secret !== "row" ? p.measure.focusedRow() : null;
  const [layer, head] = [get("layer") || 0, get("head")];
  p.imageView.update({ image, failed: p.picture.failed(), tokens, focus, weights: stripRow, measure: measured, layer, head, secret, pal, maxWidth });
  // the first draw with every picture in it (a long input's weights come from a worker)
  if (!root.attnwidget.firstPaint && !p.stages.pending()) root.attnwidget.firstPaint = performance.now();
  return laidOut;
}

/** The cell's score split into residual parts: the kernel's answer (or the one an exported page carries) while it
 * is for the state shown, else what the page says instead; null for a widget whose model the kernel cannot run.
 * @param {Parts} p  @returns {import("./views/cell.js").Parts | string | null} */
function scoreParts(p) {
  const { get, live } = p,
    spec = p.constants.views.score_parts;
  if (!spec || !get("reads_model")) return null;
  const answer = held(get, "score_parts", spec);
  if (answer && current(answer, get)) return answer.error ? `It cannot be split: ${answer.error}` : /** @type {any} */ (answer);
  return live ? "computing…" : "in a live notebook (the model is not in this page)";
}

/** Whose compressed cache: "head 2's compressed KV cache (H2O, 16 keys)". @param {Parts} p  @param {import("./types").KvCache} kv */
const kvWhose = (p, kv) =>
  `${p.store.all("q").heads > 1 ? `head ${p.get("head")}'s ` : "the "}compressed KV cache (${kv.method === "mask" ? "your keys" : `${methodName(kv.method)}, ${kv.budget} keys`})`;

/** The layer's compressed cache for the state shown, {retained, change}: the kernel's answer (or the one an exported
 * page carries) while it is for the state shown; else what the page says instead.
 * @param {Parts} p  @returns {{ retained: number | null, change: number | null } | string} */
function kvLayer(p) {
  const { get, live } = p,
    spec = p.constants.views.kv_cache;
  const answer = spec ? held(get, "kv_cache", spec) : null,
    edited = live ? [] : p.model.edited?.() || []; // (an exported page's answer: of its arrays as brought in)
  if (answer && current(answer, get) && !edited.length)
    return answer.error ? `cannot say: ${answer.error}` : { retained: answer.layer_retained, change: answer.layer_change };
  return live ? "computing…" : "in a live notebook (this page holds the layer's numbers at the state exported only)";
}

/** The compressed KV cache in words, under the focused row's (scores, weights and blend).
 * @param {Parts} p  @param {import("./types").KvCache | null} kv  @param {string} reader  @param {number} focus  @param {number} m  @param {string} stage */
function drawKv(p, kv, reader, focus, m, stage) {
  const shown = !!kv && ["scores", "weights", "blend"].includes(stage);
  p.kvReadout.hidden = !shown;
  if (!shown) return;
  const cache = /** @type {import("./types").KvCache} */ (kv); // (shown: there is one)
  fill(p.kvReadout, describeKv({ kv: cache, row: p.store.kvRow(focus), reader, m, head: p.get("head"), heads: p.store.all("q").heads, layer: kvLayer(p) }));
}

/** A differential pair's numbers for scripts (numbers().differential), or null for other widgets. @param {Store} store */
function differentialNumbers(store) {
  const pair = store.pair();
  if (!pair) return null;
  const other = store.otherWeights(),
    D = store.difference(),
    O = store.mixed();
  return {
    head: pair.head,
    heads: pair.heads,
    lambda: pair.lam,
    shown: pair.shown,
    other: other && Array.from(other),
    difference: D && Array.from(D),
    output: O && Array.from(O),
  };
}

/** The controls' view of the state.
 * @param {Model} model  @param {Store} store  @param {Constants} constants  @param {State["stage"]} stage */
function controlsView(model, store, constants, stage) {
  const get = store.get,
    all = model.get("tokens");
  return {
    stage,
    temperature: get("temperature"),
    causal: get("causal"),
    sink: !!get("sink"),
    difference: store.pair() ? !!get("difference_map") : null, // offered for a differential attention model's layer
    sentenceList: get("sentences") || [],
    sentenceIndex: get("sentence_index"),
    heldTexts: get("held_texts") || null,
    layers: get("n_layers") || 0,
    layer: get("layer") || 0,
    held: get("held_layers") || null,
    numbers: get("layer_numbers") || [],
    kinds: get("layer_kinds") || [],
    modelName: get("model_name") || "",
    position: get("position_about") || "",
    lab: get("n_layers") ? null : { scheme: get("position") || "none", even: store.all("q").cols % 2 === 0 }, // where position enters: the lab's choice
    block: get("block") || "",
    // (offered only where Python would write it: a model's widget whose model reads causally)
    generation:
      get("image") || !mayWrite({ n_layers: get("n_layers"), layer_shown: get("layer_shown"), model_causal: get("model_causal") })
        ? null
        : { step: model.get("step") || all.length, n: all.length, tokens: all, cross: store.cross(), still: store.written() > 0 },
    absent: Object.keys(constants.weights_only[get("weights_only") || ""] || {}), // attention weights alone: no query/key or scores stage
    kv: { method: get("kv_method") || "", budget: get("kv_budget") ?? 16 },
  };
}

/** Every head at a glance: a model's overview comes from the kernel (asked for until current).
 * @param {Parts} p  @param {Palette} pal  @param {number} maxWidth  @param {Secret} secret */
function drawHeads(p, pal, maxWidth, secret) {
  const { store, get, heads } = p;
  const layers = get("layer_shown") ? get("n_layers") : 1,
    held = get("held_layers") || null;
  heads.node.hidden = store.all("q").heads * layers < 2 || secret === "row"; // thumbnails scale themselves
  if (!heads.node.hidden) {
    const overview = get("overview");
    const asked = computedAnswer(p); // head scores over every text: the kernel's
    const loading = overview?.error
      ? `the overview could not be computed (${overview.error})`
      : asked?.answer?.error
        ? `${get("summary")} could not be computed: ${asked.answer.error}`
        : asked && !current(asked.answer, get)
          ? !p.live
            ? asked.answer
              ? `coloured as exported, at T = ${fmt2(asked.answer.key.temperature)}`
              : "this page was exported without these scores: choose them in the notebook and export again"
            : "updating…"
          : p.fetching.label()
            ? `loading ${p.fetching.label()}…`
            : !store.overviewDue()
              ? ""
              : held // an exported page has no kernel to compute another overview: it says which one it shows
                ? `as exported, at T = ${fmt2(/** @type {import("./state").Answer} */ (overview).key.temperature)}` // (a page that holds some layers carries its overview)
                : "updating…";
    heads.update({
      work: store.thumbnails(),
      layers,
      layer: layerIndex({ layer: get("layer"), layer_numbers: get("layer_numbers") }),
      numbers: get("layer_numbers") || [],
      kinds: get("layer_kinds") || [],
      head: get("head"),
      color: weightColours(pal),
      signedColor: signedColours(pal, 1), // a signed summary's (the effect on the next token)
      width: get("qk_map") && maxWidth >= 1000 ? maxWidth - 560 : maxWidth, // the map beside it, on a wide page
      summary: get("summary") || "",
      loading,
      held,
      colourBy: differenceSummary(get) || effectSummary(get) || computedSummary(p),
      offered: get("head_effects") ? ["effect"] : [],
      unavailable: get("reads_model") ? [] : ["induction", "retrieval"], // (the rules refuse them: no model to read again)
      map: !!get("qk_map"),
      mappable: !get("weights_only"), // attention weights alone: no queries and keys to map (the rules refuse qk_map)
      estimated: overview?.effect_exact?.map((/** @type {boolean} */ exact) => !exact) ?? null, // (the kernel's: estimated, then the largest exact)
    });
  }
  drawMap(p, pal, maxWidth);
  if (p.requests && store.kernelOverview()) p.requests.want("overview");
  // the other views the kernel computes (head scores over every text), asked for while the state asks
  for (const [name, spec] of Object.entries(p.constants.views)) if (p.requests && spec.held_in === "computed" && p.shows(name)) p.requests.want(name);
}

/** One head's queries and keys of every text, beside the overview while qk_map is on (the kernel's, or as exported).
 * @param {Parts} p  @param {Palette} pal  @param {number} maxWidth */
function drawMap(p, pal, maxWidth) {
  const { get, constants, live } = p,
    spec = constants.views.query_key_map;
  const on = !!get("qk_map"),
    answer = on ? held(get, "query_key_map", spec) : null,
    edited = live ? [] : p.model.edited?.().filter((n) => n === "q" || n === "k") || [], // (what it maps, changed here)
    fresh = answer && current(answer, get) && !edited.length;
  const pending = !answer
    ? live
      ? "computing…"
      : "this page was exported without the map: turn it on in the notebook and export again"
    : fresh
      ? ""
      : live
        ? "updating…"
        : edited.length
          ? `as exported: the ${edited.join(" and ")} changed here since`
          : "as exported";
  const layer = answer?.key?.layer ?? get("layer") ?? 0,
    head = answer?.key?.head ?? get("head");
  p.qk.update({
    on,
    answer: /** @type {import("./views/qkmap.js").QkAnswer | null} */ (fresh || !live ? answer : null),
    pending,
    texts: get("sentences") || [],
    layer,
    head,
    pal,
    width: maxWidth,
  });
}

/** The computed view the page shows (head scores over every text, while its summary is chosen):
 * {name, spec, answer (as held: the kernel's, or as exported)}, or null when none is shown.
 * @param {Pick<Parts, "get" | "constants" | "shows">} p */
function computedAnswer({ get, constants, shows }) {
  for (const [name, spec] of Object.entries(constants.views))
    if (spec.held_in === "computed" && spec.asked_when?.summary && shows(name)) return { name, spec, answer: held(get, name, spec) };
  return null;
}

/** The overview's colours from the summary chosen among a computed view's, while it is for the state shown.
 * @param {Parts} p  @returns {import("./views/heads.js").ColourBy | null} */
const computedSummary = (p) => {
  const { get, live } = p,
    found = computedAnswer(p);
  // a live page draws the kernel's answer for the state shown; an exported page, the one it carries (and says so)
  if (!found?.answer?.summaries || (live && !current(found.answer, get))) return null;
  const { answer, spec } = found,
    summary = get("summary"),
    texts = answer.texts > 1 ? `${answer.texts} texts` : "this text";
  // (the induction and retrieval scores read texts of their own: random tokens repeated; a needle in long texts)
  /** @type {Record<string, string>} */
  const own = { induction: "on repeated random tokens", retrieval: "copying a needle out of long texts" };
  const over = own[summary] ?? `over ${texts}`;
  return { name: summary, label: `its ${summary} score ${over}`, values: answer.summaries[summary], signed: spec.signed };
};

// The difference panel colours the overview by each head's largest difference from the other
// text, while that is the state shown (a new one is on its way, or not in an exported page).
/** @param {Get} get  @returns {import("./views/heads.js").ColourBy | null} */
const differenceSummary = (get) => {
  const d = get("measure") === "difference" ? get("measure_data")?.difference : null;
  const label = "the largest difference from the other text"; // (a largest |difference|: not signed)
  return d?.largest && current(d, get) ? { name: "difference", label, values: d.largest, signed: false } : null;
};

// An exported page colours the heads by the effects computed before it was exported: of the text and step
// exported only (the page cannot run the model), said at another.
/** @param {Get} get  @returns {import("./views/heads.js").ColourBy | null} */
const effectSummary = (get) => {
  const effects = get("summary") === "effect" ? get("head_effects") : null;
  if (!effects) return null;
  const key = get("head_effects_key"),
    fresh = !key || current({ key }, get),
    where = key && (get("sentences") || []).length > 1 ? `text ${key.sentence_index} at step ${key.step}` : `step ${key?.step}`;
  const note = fresh ? "" : `the effect on the next token was computed for ${where} only`;
  const values = fresh ? effects : effects.map(() => NaN);
  return { name: "effect", label: "effect on the next token", values, note, signed: get("_constants").views.effect.signed };
};

/** @type {WeakMap<Float32Array, import("./views/measure.js").Entry>} */
const ownEntries = new WeakMap(); // the page's weight × ‖value‖ -> its entry: the same numbers, the same entry
/** Weight × ‖value‖ of the head shown as an entry of the measure panel, for the state shown.
 * @param {Store} store  @param {Get} get */
function ownNorms(store, get) {
  const values = store.norms(),
    m = store.v().rows;
  if (!ownEntries.has(values)) {
    const key = { measure: "norms", sentence_index: get("sentence_index"), block: get("block") ?? "", layer: get("layer"), head: get("head") };
    const hi = values.reduce((a, x) => (x > a || Number.isNaN(x) ? x : a), 0); // (a NaN stays: with Infinity, past float32's range)
    ownEntries.set(
      values,
      /** @type {import("./views/measure.js").Entry} */ (
        hi < Infinity
          ? { matrix: { shape: [values.length / m, m], dtype: "float32", view: new DataView(values.buffer) }, lo: 0, hi, key, every: [] }
          : { error: "norms has numbers too large to draw (past float32's range): scale the values down to see it", key }
      ), // (the panel reads an error first)
    );
  }
  return ownEntries.get(values);
}

/** The panel beyond one head: a live page offers what the kernel can compute (and says why not);
 * an exported page, what it carries.
 * @param {Parts} p  @param {string[]} tokens  @param {string[]} keys  @param {number} focus  @param {Palette} pal  @param {number} maxWidth
 * @param {Secret} secret  @param {Picture | null} image */
function drawMeasure(p, tokens, keys, focus, pal, maxWidth, secret, image) {
  const { store, get, constants, live } = p;
  const edited = live ? [] : p.model.edited?.() || []; // (an exported page's measures: of its arrays as brought in)
  const data = get("measure_data") || {},
    shown = get("measure") || "";
  const names = Object.keys(constants.views).filter((n) => constants.views[n].held_in === "measure_data");
  // what Python offers (views.offered); a page exported before offered_measures existed: what it carries
  const offered = get("offered_measures") ?? names.filter((n) => n in data || n === shown);
  // why one cannot be shown: Python's reason; in an exported page also a measure it does not carry
  const missing = (/** @type {string} */ n) => `this page was exported without ${n}: choose it in the notebook and export the page again`;
  const reasons = get("measures") || {};
  const why = live ? reasons : Object.fromEntries(offered.map((n) => [n, reasons[n] || (n in data ? "" : missing(n))]));
  const own = !live && data[shown]?.in_page; // weight × ‖value‖ this page computes, of its arrays as they are now
  p.measure.update({
    measure: shown,
    offered,
    why,
    entry: own ? ownNorms(store, get) : data[shown] || null,
    live,
    edited: own ? [] : edited,
    get,
    tokens,
    keys,
    focus,
    weights: shown === "norms" ? Array.from(store.weightRow(focus)) : null, // the head's own row, for the contrast
    sentences: get("sentences") || [],
    secret,
    cross: store.cross(),
    closed: store.closedCells(),
    image,
    pal,
    maxWidth,
  });
  if (live && shown && !why[shown] && !current(held(get, shown, constants.views[shown]), get))
    /** @type {NonNullable<Parts["requests"]>} */ (p.requests).want(shown); // (live: there are requests)
}
