// The five stages' panels: the empty matrix, Q and K with the query dial, the scores, the weights
// (kept for the blend) and the blend. Each stage draws from the view it is given, in a function of
// its own; the numbers come in as values, or as functions where they are computed only if drawn.

import { rgb } from "d3-color";
import { scaleSequential } from "d3-scale";
import * as A from "../attention.js";
import { signedColours, weightColours } from "../colours.js";
import { memo } from "../derived.js";
import { createPainter } from "../painter.js";
import { lookupTable, pack } from "../picture.js";
import { createBlend } from "./blend.js";
import { createDetail, extent, follow } from "./detail.js";
import { createDial } from "./dial.js";
import { CLOSED, el, figuresTo, fmt2, fmt3, fmtG, legend, short } from "./dom.js";
import { createGrid } from "./grid.js";

/** @typedef {import("../state").State["stage"]} Stage */
/** @typedef {import("../types").Position} Position */
/** @typedef {import("./grid.js").GridSpec} GridSpec */
/** @typedef {import("./detail.js").Detail} Detail */
/**
 * What the stages draw: the state shown, and the numbers of the head shown (store.numbers()).
 * @typedef {import("../types").Shown & {
 *   stage: Stage, tokens: string[], keys: string[], focus: number, cell: [number, number] | null, row: number[] | null,
 *   pal: import("./dom.js").Palette, maxWidth: number, secret: string | null, hint: boolean, written: number,
 *   evicted?: Uint8Array | null }} StageView
 */
/** What start() needs: a worker's picture is asked for before the page computes its own numbers. */
/** @typedef {import("../types").Shown & { stage: Stage, tokens: string[], keys: string[], pal: import("./dom.js").Palette }} StartView */
/**
 * @typedef {object} StagesOptions
 * @property {(i: number) => void} onFocus
 * @property {(i: number, j: number | null) => void} onPickCell
 * @property {(vector: number[]) => void} onQuery
 * @property {() => void} onQueryEnd
 * @property {(on: boolean) => void} onResidual
 * @property {() => void} onWindow
 */
/**
 * @typedef {object} Stages
 * @property {(view: StageView) => void} update
 * @property {(view: StartView) => void} start
 * @property {() => boolean} pending
 * @property {() => boolean} starting
 * @property {() => [number, number] | null} span
 * @property {() => void} destroy
 */

/** The captions' offer of a cell's arithmetic (left out while the cells wait for an exercise's reveal). */
const CELL_HINT = " Click a cell for its arithmetic.";

/** What each stage shows, in a sentence under the controls.
 * @type {Record<Stage, string>} */
const CAPTIONS = {
  tokens:
    "The sentence as tokens. Every token reads every other: in the matrix the row is the token doing the reading (its query), the column the token read from (its key). Click a token to focus it.",
  qk: "Each token makes a query (what it is looking for) and a key (what it contains): one row of Q and one of K, a number per dimension. A token's query is compared with every key by their dot product q · k; times the scale, that is the score the next stage shows.",
  scores:
    "Scores = scale · Q·Kᵀ, before any normalisation. Purple: query and key point the same way; orange: they point apart, which is information too. Click a cell for its arithmetic.",
  weights:
    "Weights = softmax(scores / T), row by row: every row sums to exactly 1, a fixed budget. Effective tokens = exp(entropy): how many ways the budget went. Click a cell for its arithmetic.",
  blend: "The focused row's weights times the value vectors, summed: the output is a weighted average of the values, so it can only land inside their hull.",
};

/** The tokens stage's caption under the causal rule: not every token reads every other. */
const CAUSAL_TOKENS_CAPTION =
  "The sentence as tokens, under the causal rule: each token reads only itself and the tokens before it (the hatched cells are closed). In the matrix the row is the token doing the reading (its query), the column the token read from (its key). Click a token to focus it.";

/** The tokens stage's caption when a mask (or the sink view) closes cells, without the causal rule. */
const MASKED_TOKENS_CAPTION =
  "The sentence as tokens. Every token reads every other except in the hatched cells, which the mask closes (or the sink view, the first token's column). In the matrix the row is the token doing the reading (its query), the column the token read from (its key). Click a token to focus it.";

/** The scores stage's caption while a predict exercise keeps the scores for its reveal. */
const HIDDEN_SCORES_CAPTION =
  "Scores = scale · Q·Kᵀ, before any normalisation. In this exercise they wait for the reveal: they rank the tokens as the weights will.";

/** The weights stage's caption while the temperature exercise keeps the effective tokens secret. */
const SECRET_EFF_CAPTION =
  "Weights = softmax(scores / T), row by row: every row sums to exactly 1, a fixed budget. How many ways the budget went stays hidden until you reveal.";

/** The tokens stage's caption in cross-attention, where the rows and the columns are two texts. */
const CROSS_CAPTION =
  "Cross-attention: two texts as tokens. Each token of the text being written (the rows, on top) reads the tokens of the text it comes from (the columns, below): the row is the token doing the reading (its query), the column the token read from (its key and value). Click a token on top to focus it.";

/** Why a cell cannot be read, in words (view.closedWhy). */

/** Said under the blend's caption when the residual is shown: x + mix is not an average of the values. */
const RESIDUAL_NOTE =
  "With the residual, the mix is added to the word's own numbers: x + mix starts from x, not from the values, so it can land outside the hull.";

/** Said under the caption when the scores have a bias added. */
const BIAS_NOTE =
  "Here each score also has a bias added, as some models add one for the distance between tokens: scores = scale · Q·Kᵀ + bias (the bias is drawn under the scores).";

/** Said under the caption when the bias is a model's own terms (DeBERTa's): their names, "c2c" first. @param {string[]} names */
const TERMS_NOTE = (names) =>
  `Here each score is ${names.length} terms, as this model adds them: ${names.map((n) => TERMS[n] || n).join(", ")}. The position terms are drawn under the scores.`;
/** @type {Record<string, string>} */
const TERMS = {
  c2c: "c2c, content to content (scale · q · k)",
  c2p: "c2p, content to position (the query against the key of the two tokens' relative position)",
  p2c: "p2c, position to content (the key against the query of their relative position)",
};

/** Said under the caption when the model caps its scores (Gemma 2's soft-capping). */
/** @param {number} c */
const SOFTCAP_NOTE = (c) =>
  `This model caps its scores: each scale · q · k becomes ${fmt3(c)} · tanh(scale · q · k / ${fmt3(c)}), so no score goes past ±${fmt3(c)}; small scores are nearly unchanged, large ones flattened.`;

/** Said under the caption of attention weights given as they are (from_attentions). */
const GIVEN_NOTE =
  "These weights were given as they are: with no queries or keys there are no scores to show. A temperature re-tempers each row, softmax(log W / T), the very numbers the scores would give; a weight of 0 stays 0.";

/** The weights stage's caption for a head with a learnt sink (its logit z): the budget is shared with the sink.
 * @param {number} z */
const LEARNT_CAPTION = (z) =>
  `Weights = softmax([scores, z] / T), row by row, where z = ${fmt3(z)} is this head's learnt sink: one more logit in every row, divided by T as the scores are, whose column is dropped after the softmax. So each row keeps less than the budget of 1 (Σ row), and the sink column is the rest, the part no token gets. Effective tokens = exp(entropy) of the row's weights ÷ Σ row: how many tokens share what it keeps. Click a cell for its arithmetic.`;

/** Said under the blend's caption for a head with a learnt sink. */
const LEARNT_BLEND_NOTE =
  "This head has a learnt sink: the weights sum to less than 1, the rest going to no token, so the output is the values' weighted sum pulled toward 0 (the sink adds nothing), inside the hull of the values and the origin.";

/** Said under the caption while the first token is left out. */
/** @param {string} first */
const SINK_NOTE = (first) =>
  `Sink view: the first token (${first}) is left out and each row's budget is spread over the rest; these are not the model's own weights (untick "hide first token" for them).`;

/** The weights stage's and the blend's captions while they show a differential pair's difference (a Pair). */
/** @param {import("../types").Pair} p */
const DIFFERENCE_CAPTIONS = (p) => ({
  weights: `Differential attention: the model mixes this pair's values with map 1 − λ·map 2, head ${p.heads[0]}'s softmax minus λ = ${fmt3(p.lam)} times head ${p.heads[1]}'s (the temperature divides both maps' scores). Each row sums to 1 − λ = ${fmt3(1 - p.lam)}, not 1, and a weight can be negative: purple adds that token's value, orange subtracts it.${CELL_HINT}`,
  blend: `Differential attention: the focused row of map 1 − λ·map 2 times the value vectors, summed. Its weights sum to 1 − λ = ${fmt3(1 - p.lam)} and some are negative, so the mix can land outside the values' hull: it is what the model hands its group norm (then × (1 − λ_init)) before the output projection.`,
});

/** Said under the scores, weights and blend stages of a differential attention model: which map they show. */
/** @param {Stage} stage  @param {import("../types").Pair} p  @param {boolean} waiting  the other map is on its way */
function pairNote(stage, p, waiting) {
  const [a, b] = p.heads,
    own = p.head === a ? "map 1" : "map 2";
  if (waiting) return `Head ${p.head}'s own softmax is shown while head ${p.head === a ? b : a}'s, the pair's other map, comes from the kernel.`;
  if (p.shown === "difference")
    return stage === "scores"
      ? `These are head ${p.head}'s own scores (${own} of the pair): the weights stage shows map 1 − λ·map 2 of heads ${a} and ${b}.`
      : "";
  return `Differential attention: head ${p.head}'s softmax is ${own} of the pair of heads ${a} and ${b}; the model mixes the pair's values with map 1 − λ·map 2 (λ = ${fmt3(p.lam)} in this layer), not with either map alone: tick “difference” to see it.`;
}

/** Said under the query/key, scores and weights stages when position enters the lab's scores: what it did to the
 * focused token (`reader`, at position `focus`).
 * @param {Stage} stage  @param {Position} position  @param {string} reader  @param {number} focus */
function positionNote(stage, { scheme, slope, biased }, reader, focus) {
  const who = `${short(reader)}'s query`;
  if (scheme === "rope") {
    if (stage === "qk")
      return `RoPE: each query and key is turned by its position × θ before the dot product (pair i of a vector by base^(−2i/d); θ = 1 radian for two numbers): ${who} turned ${focus} × θ. The grids show them turned.`;
    if (stage === "scores")
      return `RoPE: these are scores of turned queries and keys (${who} turned ${focus} × θ, each key by its own position), so a score depends on how far apart two tokens are, not on where they stand.`;
    return `RoPE: ${short(reader)} reads each token through a turn of (its position − ${focus}) × θ, so its weights change with distance: the same two words further apart score differently.`;
  }
  const m = fmtG(/** @type {number} */ (slope)); // (ALiBi's: a slope)
  if (stage === "qk") return `ALiBi leaves queries and keys as they are: it adds −m·|i − j| to the scores (m = ${m} for this head), in the next stage.`;
  if (stage === "scores")
    return `ALiBi: each score gets −m·|i − j| added (m = ${m} for this head), a penalty that grows with the distance between the two tokens${biased ? ", on top of the bias given" : ""}: the ramp is drawn under the scores.`;
  return `ALiBi: each place of distance between two tokens costs ${m} of score (m, this head's slope), so ${short(reader)} leans toward the tokens near it.`;
}

/** The sentences under the controls for what the stage draws: its caption (the one that fits the
 * cross-attention, the causal rule, a mask, an exercise's secret) and the notes its numbers need.
 * view: {stage, cross, causal, masked, secret, hint, bias, softcap, residual (shown, with x), sink, first (the first token),
 * given (weights alone), position (derived.js's: the lab's RoPE or ALiBi), reader and focus (the focused token and its place),
 * image (the tokens are an image's patches), terms (the names of the terms the scores are the sum of: DeBERTa's),
 * learnt (the head's learnt sink's logit, or null), pair (a differential pair: derived.js's) and waiting (its other map
 * is on its way)}.
 * @param {{ stage: Stage, cross: boolean, causal: boolean, masked: boolean, secret: string | null, hint: boolean, bias: boolean,
 *   softcap: number | null, residual: boolean, sink: boolean, first: string, given: boolean, position?: Position | null,
 *   reader?: string, focus?: number, image?: boolean, terms?: string[], learnt?: number | null,
 *   pair?: import("../types").Pair | null, waiting?: boolean }} view */
export function captionOf({
  stage,
  cross,
  causal,
  masked,
  secret,
  hint,
  bias,
  softcap,
  residual,
  sink,
  first,
  given,
  position = null,
  reader = "",
  focus = 0,
  image = false,
  terms = [],
  learnt = null,
  pair = null,
  waiting = false,
}) {
  let said = CAPTIONS[stage] || "";
  const difference = pair?.shown === "difference" && !waiting ? DIFFERENCE_CAPTIONS(pair) : null;
  if (difference && (stage === "weights" || stage === "blend") && secret !== "eff") said = difference[stage];
  if (stage === "tokens") said = cross ? CROSS_CAPTION : causal ? CAUSAL_TOKENS_CAPTION : masked ? MASKED_TOKENS_CAPTION : said;
  else if (stage === "weights" && secret === "eff") said = SECRET_EFF_CAPTION;
  else if (stage === "weights" && learnt != null) said = LEARNT_CAPTION(learnt);
  else if (stage === "scores" && !hint) said = HIDDEN_SCORES_CAPTION;
  if (image) said = said.replace("The sentence as tokens", "The image as tokens ([CLS] and the like, then one per patch, row by row)");
  if (secret === "row") said = said.replace(CELL_HINT, ""); // the cells wait for the reveal
  const notes = [said];
  if (softcap != null && (stage === "scores" || stage === "weights")) notes.push(SOFTCAP_NOTE(softcap));
  const turned = position && ["qk", "scores", "weights"].includes(stage);
  if (turned) notes.push(positionNote(stage, /** @type {Position} */ (position), reader, focus));
  if (bias && !given && !(position?.scheme === "alibi" && !position.biased) && (stage === "scores" || stage === "weights"))
    notes.push(terms.length ? TERMS_NOTE(terms) : BIAS_NOTE);
  if (given && stage !== "tokens") notes.push(GIVEN_NOTE);
  if (stage === "blend" && learnt != null) notes.push(LEARNT_BLEND_NOTE);
  if (stage === "blend" && residual) notes.push(RESIDUAL_NOTE);
  if (sink && stage !== "tokens" && stage !== "qk") notes.push(SINK_NOTE(first));
  if (pair && ["scores", "weights", "blend"].includes(stage)) notes.push(pairNote(stage, pair, waiting));
  return notes.filter(Boolean).join(" ");
}

/** The scores' and weights' titles: which map of a differential pair they show (`difference`: the weights are the
 * pair's difference); "scores" and "weights" for other widgets.
 * @param {import("../types").Pair | null} pair  @param {boolean} difference */
export function mapTitles(pair, difference) {
  if (!pair) return { scores: "scores", weights: "weights" };
  const [a, b] = pair.heads,
    own = `${pair.head === a ? "map 1" : "map 2"} of the pair of heads ${a} and ${b}`;
  return {
    scores: `scores of head ${pair.head} (${own})`,
    // (a negative λ adds map 2: said as a sum, not as "− −0.120")
    weights: difference
      ? `map 1 − λ·map 2: head ${a}'s weights ${pair.lam < 0 ? "+" : "−"} ${fmt3(Math.abs(pair.lam))} × head ${b}'s`
      : `weights of head ${pair.head}: ${own}`,
  };
}
/** A grid's figure caption set to `title`. @param {{ node: HTMLElement }} grid  @param {string} title */
const titled = (grid, title) => {
  const caption = grid.node.querySelector("figcaption");
  if (caption && caption.textContent !== title) caption.textContent = title;
};

/** A map's label with a compressed KV cache shown: its dimmed columns. @param {StageView} view */
const EVICTED_LABEL = (view) => (view.evicted?.includes(1) ? "; dimmed columns: keys the compressed KV cache evicts" : "");

const ZOOM_FROM = 96; // tokens: past this the matrix gets a detail view of a window of it
const PAINT_FROM = 512; // tokens: from here the weights picture is painted by a worker

/** createStages(body, {onFocus(i), onPickCell(i, j), onQuery([x, y]), onQueryEnd(), onResidual(bool), onWindow()})
 *  -> {update(view), start(view), pending(), starting(), span(), destroy()}.
 *  view = {stage, tokens, keys (the columns' tokens), focus, cell, row (the focused row's weights), pal, maxWidth, secret,
 *  written (the tokens shown written while a text is written; 0: none), temperature, causal, cross, residual, axes,
 *  turnable (the query dial is offered), scaleSet (a scale was given), and the numbers of the head shown:
 *  q, k, v, x, basis, bias, mask (matrices or null), scale, and functions scores(), weights(), weightRow(i), topWeight(),
 *  scoreRange(), output(), spread(), closed(i, j), closedWhy(i, j), cellArithmetic(i, j)}.
 * @param {HTMLElement} body  @param {StagesOptions} options  @returns {Stages} */
export function createStages(body, { onFocus, onPickCell, onQuery, onQueryEnd, onResidual, onWindow }) {
  const painter = createPainter(onWindow); // a new picture asks for a redraw, as a moved window does
  const paintColours = memo((/** @type {string} */ zero, /** @type {string} */ seq, /** @type {string} */ masked) => ({
    lut: lookupTable(weightColours({ zero, seq }), 0, 1, rgb),
    closedPixel: pack(rgb(masked)),
    colours: `${zero}|${seq}|${masked}`,
  }));
  // Each panel is shown in the stages it names; the weights matrix stays for the blend.
  /** @type {[HTMLDivElement, Stage[]][]} */
  const panels = [];
  /** @param {...Stage} stages */
  const panel = (...stages) => {
    const p = el("div", { class: "aw-panel" });
    body.append(p);
    panels.push([p, stages]);
    return p;
  };
  const tokensPanel = panel("tokens"),
    qkPanel = panel("qk"),
    scoresPanel = panel("scores"),
    weightsPanel = panel("weights", "blend");
  const blendPanel = panel("blend");
  /** @type {StageView | null} */
  let at = null; // the view drawn last: what the cells' descriptions read (each cell once drawn)
  const name = (/** @type {number} */ i) => /** @type {StageView} */ (at).tokens[i],
    keyName = (/** @type {number} */ j) => /** @type {StageView} */ (at).keys[j]; // a row's token, a column's
  /** @param {import("../types").Matrix} m  @param {number} i  @param {number} j */
  const entry = (m, i, j) => fmt3(m.data[i * m.cols + j]);
  /** @param {number} i  @param {number} j */
  const describeCell = (i, j) => {
    const view = /** @type {StageView} */ (at); // (a cell is described once drawn)
    const m = view.keys.length,
      why = view.closedWhy(i, j);
    // a key sparse attention's indexer did not choose: what dense attention would have given it
    const chose = why === "mask" ? view.selection(i) : null;
    const weight = chose
      ? `0 (not among the keys its indexer chose; dense attention would give it ${fmt3(chose.dense[j])})`
      : why
        ? `0 (masked: ${CLOSED[why].tip})`
        : fmt3(view.weightRow(i)[j]);
    const bias = view.bias,
      score = fmt3(view.scores()[i * m + j]);
    // (read only where there is a bias or a cap)
    const a = /** @type {import("../types").CellArithmetic} */ ((bias || view.softcap != null) && view.cellArithmetic(i, j));
    const cap = /** @type {number} */ (a.softcap); // (written only where there is a cap)
    const capped = view.softcap != null ? `${fmt3(cap)}·tanh(${fmt3(a.scale * a.dot)}/${fmt3(cap)})` : "";
    const term = view.position?.scheme === "alibi" ? (view.position.biased ? "bias − m·|i − j|" : "ALiBi's −m·|i − j|") : "bias";
    const split = view.scoreTerms(i, j); // (the model's own terms: DeBERTa's c2c, c2p, p2c)
    const terms = split
      ? ` = ${split.map(([n, v]) => `${n} ${fmt3(v)}`).join(" + ")}`
      : bias
        ? ` = ${capped || `scale·q·k ${fmt3(a.scale * a.dot)}`} + ${term} ${fmt3(a.bias)}`
        : capped
          ? ` = ${capped}`
          : "";
    const D = view.pair?.shown === "difference" ? view.difference() : null; // a differential pair's, shown
    const mixed = D ? `\nmap 1 − λ·map 2 ${why ? "0" : fmt3(D[i * m + j])}` : "";
    const gone = view.evicted?.[j] ? `\n${keyName(j)} is evicted from the compressed KV cache` : "";
    return `${name(i)} reads ${keyName(j)}\nscore ${score}${terms}\nweight ${weight}${mixed}${gone}`;
  };
  const emptyGrid = createGrid(tokensPanel, { title: "who reads whom", onPick: onFocus, describe: (i, j) => `${name(i)} reads ${keyName(j)}` });
  const qGrid = createGrid(qkPanel, {
    title: "queries Q",
    onPick: onFocus,
    describe: (i, j) => `q(${name(i)})[${j}] = ${entry(/** @type {StageView} */ (at).q, i, j)}`,
  });
  const kGrid = createGrid(qkPanel, {
    title: "keys K",
    onPick: () => {},
    describe: (i, j) => `k(${keyName(i)})[${j}] = ${entry(/** @type {StageView} */ (at).k, i, j)}`,
  });
  const dial = createDial(qkPanel, { onQuery, onQueryEnd });
  // a click on an overview brings the window to that cell, even the one already picked
  /** @param {number} i  @param {number | null} j */
  const pickOnOverview = (i, j) => {
    win.seen = null;
    onPickCell(i, j);
    onWindow();
  };
  const scoresGrid = createGrid(scoresPanel, { title: "scores", onPick: pickOnOverview, describe: describeCell });
  // (its place and size set by follow() before a detail view is drawn)
  const win = /** @type {import("./detail.js").DetailWindow} */ ({ rows: 0, cols: 0 }); // the detail views' window, shared: it stays put across stages
  const scoresDetail = createDetail(scoresPanel, { win, onPickCell, describe: describeCell, onMove: onWindow });
  const scoresLegend = el("div", { class: "aw-legend" });
  scoresPanel.append(scoresLegend);
  // a model's position bias, the second term of its scores, apart
  const biasGrid = createGrid(scoresPanel, {
    title: "bias (added to scale · q · k)",
    onPick: pickOnOverview,
    describe: (i, j) => {
      const view = /** @type {StageView & { bias: import("../types").Matrix }} */ (at); // (drawn with a bias)
      return `${name(i)} reads ${keyName(j)}: ${view.position?.scheme === "alibi" ? "added" : "bias"} ${fmt3(view.bias.data[i * view.keys.length + j])}`;
    },
  });
  const biasLegend = el("div", { class: "aw-legend" });
  scoresPanel.append(biasLegend);
  const weightsGrid = createGrid(weightsPanel, { title: "weights", onPick: pickOnOverview, describe: describeCell });
  const weightsDetail = createDetail(weightsPanel, { win, onPickCell, describe: describeCell, onMove: onWindow });
  const weightsLegend = el("div", { class: "aw-legend" });
  weightsPanel.append(weightsLegend);
  const blend = createBlend(blendPanel, { onResidual });

  // the rows are the readers, the columns what they read; cells a row may not read are hatched
  /** @param {StageView} view */
  const grid = (view) => ({
    rows: view.tokens.length,
    cols: view.keys.length,
    rowLabels: view.tokens,
    colLabels: view.keys,
    focusRow: view.focus,
    maxWidth: view.maxWidth,
    pal: view.pal,
  });
  // the detail of a long matrix: the window's rows and columns, with their labels and numbers
  /** @param {StageView} view  @param {Detail} detail  @param {GridSpec} spec */
  const zoomed = (view, detail, spec) => {
    const n = view.tokens.length,
      m = view.keys.length,
      on = Math.max(n, m) > ZOOM_FROM;
    detail.node.hidden = !on;
    if (!on) return null;
    follow(win, n, m, view.focus, view.cell);
    const { r0, c0 } = win,
      [h, w] = extent(win),
      inside = (/** @type {number} */ i, /** @type {number} */ j) => i >= 0 && i < h && j >= 0 && j < w;
    /** @type {[number, number] | null} */
    const cell = view.cell && inside(view.cell[0] - r0, view.cell[1] - c0) ? [view.cell[0] - r0, view.cell[1] - c0] : null;
    detail.update({
      ...spec,
      rows: h,
      cols: w,
      rowLabels: view.tokens.slice(r0, r0 + h),
      colLabels: view.keys.slice(c0, c0 + w),
      measure: view.tokens, // label room from every token: the view keeps its size as the window moves
      focusRow: inside(view.focus - r0, 0) ? view.focus - r0 : null,
      cell,
      maxWidth: Math.min(view.maxWidth, 760),
      value: (/** @type {number} */ i, /** @type {number} */ j) => spec.value(r0 + i, c0 + j),
      masked: spec.masked && ((/** @type {number} */ i, /** @type {number} */ j) => view.closed(r0 + i, c0 + j)),
      evicted: spec.evicted?.subarray(c0, c0 + w) ?? null,
      data: null,
      key: null,
      causal: false,
      extra: null,
      picture: undefined,
      pending: false,
      ariaLabel: `detail of ${spec.ariaLabel}: rows ${r0} to ${r0 + h - 1}, columns ${c0} to ${c0 + w - 1}`,
    });
    return { r0, c0, rows: h, cols: w };
  };
  let written = 0;
  /** @param {StageView} view */
  const masking = (view) => ({
    masked: view.causal || view.mask ? view.closed : null,
    causal: view.causal && !view.mask, // causal alone has a fast path
    readsAhead: view.causal,
    maskData: view.mask,
    written, // while a text is written, its rows are marked cached and new
  });

  // A long input's weights picture, asked of the worker (at once, so it computes while the page does)
  /** @param {StartView} view */
  const requestPicture = ({ tokens, keys, pal, q, k, scale, softcap, sink, bias, scores, temperature, causal, mask }) =>
    painter.request({
      q,
      k,
      scale,
      softcap,
      sink,
      bias,
      scores,
      n: tokens.length,
      temperature,
      causal,
      mask,
      stretch: keys.length > 64,
      ...paintColours(pal.zero, pal.seq, pal.masked),
    });
  /** @param {StartView} view */
  const painted = (view) => Math.max(view.tokens.length, view.keys.length) >= PAINT_FROM;

  /** @type {Record<Stage, (view: StageView) => void>} */
  const draw = {
    tokens(view) {
      const blank = scaleSequential(() => view.pal.zero).domain([0, 1]); // a scale, so long inputs take the pixel path
      const n = view.tokens.length,
        m = view.keys.length;
      // the cells a row may not read (the causal rule, a mask) are hatched already: who reads whom
      emptyGrid.update({
        ...grid(view),
        ...masking(view),
        value: () => 0,
        color: blank,
        key: blank,
        ariaLabel: `${n} by ${m} attention matrix, not yet filled`,
      });
    },
    qk(view) {
      const { q, k, focus } = view,
        m = view.keys.length;
      const top = Math.max(A.magnitude(q.data), A.magnitude(k.data));
      const color = signedColours(view.pal, top);
      const dims = Array.from({ length: q.cols }, (_, j) => `${j}`); // Python's columns: q[:, 0], q[:, 1], …
      const qk = { ...grid(view), cols: q.cols, colLabels: dims, color, text: fmt2, maxWidth: Math.min(view.maxWidth / 2 - 20, 360) };
      qGrid.update({ ...qk, value: (i, j) => q.data[i * q.cols + j], ariaLabel: "query vectors" });
      kGrid.update({ ...qk, rows: m, rowLabels: view.keys, value: (i, j) => k.data[i * k.cols + j], focusRow: null, ariaLabel: "key vectors" });
      // the dial turns your own 2-D queries; a model's are its own (and come from every layer's arrays)
      /** @type {HTMLElement} */ (dial.node).hidden = !view.turnable || view.secret === "row"; // its table holds the weights
      if (!(/** @type {HTMLElement} */ (dial.node).hidden)) {
        dial.update({
          tokens: view.tokens,
          keys: view.keys,
          focus,
          q,
          k,
          scoreRow: view.scores().subarray(focus * m, focus * m + m),
          weightRow: /** @type {number[]} */ (view.row), // (the qk stage is given the row)
          masked: (j) => view.closed(focus, j),
          scale: view.scale,
          scaleSet: view.scaleSet,
          temperature: view.temperature,
          position: view.position,
        });
      }
    },
    scores(view) {
      const S = view.scores(),
        m = view.keys.length;
      const [lo, hi] = view.scoreRange(),
        top = Math.max(1e-9, -lo, hi); // once per scores, not per draw
      const color = signedColours(view.pal, top);
      /** @type {GridSpec} */
      const spec = {
        ...grid(view),
        ...masking(view),
        value: (i, j) => S[i * m + j],
        color,
        text: fmt2,
        cell: view.cell,
        key: S,
        data: S,
        evicted: view.evicted ?? null,
        ariaLabel: `scores from ${fmt2(lo)} to ${fmt2(hi)}${EVICTED_LABEL(view)}`,
      };
      scoresGrid.update({ ...spec, frame: zoomed(view, scoresDetail, spec) });
      titled(scoresGrid, mapTitles(view.pair, false).scores);
      // one range, the matrix's own; its colours are those of a scale centred on 0
      const { bias } = view;
      const alibi = view.position?.scheme === "alibi" ? view.position : null;
      const added = alibi ? `${alibi.biased ? " + bias" : ""} − m·|i − j|` : bias ? " + bias" : "";
      const named = view.termNames.length ? `${view.termNames.join(" + ")}, ${view.termNames[0]} = ` : ""; // (DeBERTa's terms)
      legend(
        scoresLegend,
        `score = ${named}${view.softcap != null ? `${fmt3(view.softcap)} · tanh(scale · q · k / ${fmt3(view.softcap)})` : "scale · q · k"}${named ? "" : added} (scale ${fmt3(view.scale)}${view.scaleSet ? ", set" : " = 1/√d"}; colour centred on 0)`,
        color,
        lo,
        hi,
      );
      biasGrid.node.hidden = biasLegend.hidden = !bias;
      const ramp = alibi && `ALiBi's ramp: −m·|i − j|, m = ${fmtG(/** @type {number} */ (alibi.slope))}`;
      /** @type {HTMLElement} */ (biasGrid.node.querySelector("figcaption")).textContent = alibi
        ? `${alibi.biased ? `the bias given + ${ramp}` : ramp} (added to scale · q · k)`
        : named
          ? `${view.termNames.slice(1).join(" + ")}: the model's position terms (added to ${view.termNames[0]} = scale · q · k)`
          : "bias (added to scale · q · k)";
      if (bias) {
        const [blo, bhi] = A.extent(bias.data),
          bm = Math.max(1e-9, -blo, bhi);
        const bcolor = signedColours(view.pal, bm);
        biasGrid.update({
          ...grid(view),
          value: (i, j) => bias.data[i * m + j],
          data: bias.data,
          key: bias.data,
          color: bcolor,
          text: fmt2,
          ariaLabel: `bias from ${fmt2(blo)} to ${fmt2(bhi)}`,
        });
        legend(biasLegend, `${alibi ? (alibi.biased ? "bias + ALiBi's penalty" : "ALiBi's penalty") : "bias"} (colour centred on 0)`, bcolor, blo, bhi);
      }
    },
    weights(view) {
      const m = view.keys.length,
        T = view.temperature,
        stretch = m > 64,
        D = view.pair?.shown === "difference" ? view.difference() : null; // a differential pair's: signed
      // Long inputs spread the budget thin: past 64 tokens the colour runs up to the largest weight
      // (the legend says so), or the matrix would be a blank page of near-zero cells.
      let top = 1,
        /** @type {Float64Array | null} */
        W = null,
        /** @type {import("../picture.js").Painted | null | undefined} */
        picture,
        pending = false;
      if (D) {
        painter.release(); // (the worker paints softmaxes: the page draws the difference itself)
        W = D;
      } else if (painted(view)) {
        // the worker's picture; the numbers shown come from the rows alone
        const got = requestPicture(view);
        [picture, pending] = [got ? got.image : null, !got?.current];
        top = picture ? picture.top : 1;
      } else {
        painter.release(); // a short input needs no worker, nor the scores it holds
        W = view.weights();
        if (stretch) top = view.topWeight();
      }
      const [lo, hi] = D ? A.extent(D) : [0, top];
      const color = D ? signedColours(view.pal, Math.max(1e-9, -lo, hi)) : weightColours(view.pal, top),
        figures = D ? fmt2 : figuresTo(top),
        row = W ? (/** @type {number} */ i) => W.subarray(i * m, (i + 1) * m) : view.weightRow; // (the matrix's own rows, when it is at hand)
      /** @type {GridSpec} */
      const spec = {
        ...grid(view),
        ...masking(view),
        value: W ? (i, j) => W[i * m + j] : (i, j) => row(i)[j],
        color,
        text: figures,
        cell: view.cell,
        key: W,
        data: W,
        picture,
        pending,
        maxWidth: view.stage === "blend" ? Math.min(view.maxWidth, 420) : view.maxWidth,
        extra: /** @type {{ title: string, value: (i: number) => string }[]} */ (
          [
            { title: "Σ row", value: (/** @type {number} */ i) => fmt2(row(i).reduce((a, b) => a + b, 0)) },
            // a learnt sink's share: the part of the row's budget no token gets
            view.sink == null ? null : { title: "sink", value: (/** @type {number} */ i) => fmt2(1 - row(i).reduce((a, b) => a + b, 0)) },
            // the temperature exercise keeps the effective tokens secret until its reveal; a signed row has none
            view.secret === "eff" || D ? null : { title: "eff.", value: (/** @type {number} */ i) => fmt2(A.effectiveTokens(row(i), m, 0)) },
          ].filter(Boolean)
        ), // only for the rows drawn
        evicted: view.evicted ?? null,
        ariaLabel: `${D ? `map 1 − λ·map 2 at temperature ${fmt2(T)}, from ${fmt2(lo)} to ${fmt2(hi)}` : `weights at temperature ${fmt2(T)}`}${EVICTED_LABEL(view)}`,
      };
      if (view.stage !== "weights") weightsDetail.node.hidden = true; // the blend shows the whole matrix alone
      weightsGrid.update({ ...spec, frame: view.stage === "weights" ? zoomed(view, weightsDetail, spec) : null });
      titled(weightsGrid, mapTitles(view.pair, !!D).weights);
      if (D) legend(weightsLegend, `map 1 − λ·map 2, λ = ${fmt3(/** @type {import("../types").Pair} */ (view.pair).lam)} (colour centred on 0)`, color, lo, hi);
      else legend(weightsLegend, top < 1 ? `weight (colour stretched to the largest, ${figures(top)})` : "weight", color, 0, top, figures);
    },
    blend(view) {
      draw.weights(view);
      const { v, x } = view,
        O = (view.pair?.shown === "difference" && view.mixed()) || view.output(); // a differential pair's mix, where shown
      blend.update({
        tokens: view.tokens,
        keys: view.keys,
        cross: view.cross,
        focus: view.focus,
        row: /** @type {number[]} */ (view.row), // (the blend is drawn with the weights shown)
        v,
        O,
        sense: A.senseResolved(O, v, view.focus),
        spread: O === view.output() ? view.spread() : A.outputSpread(O, view.tokens.length, v.cols),
        axes: view.axes,
        x,
        residual: view.residual && !!x,
        basis: view.basis,
      });
    },
  };

  return {
    /** view.secret: what an exercise keeps hidden until its reveal ("row": the weights matrix,
     * "eff": the effective tokens column), or null. */
    update(view) {
      at = view;
      written = view.written || 0;
      // the predict exercise: the row and its blend, and the scores that rank it unless the teacher gives that hint
      const hidden = view.secret === "row" ? [weightsPanel, blendPanel, ...(view.hint ? [] : [scoresPanel])] : [];
      for (const [p, stages] of panels) p.hidden = !stages.includes(view.stage) || hidden.includes(p);
      if (view.secret === "row" && (view.stage === "weights" || view.stage === "blend" || (view.stage === "scores" && !view.hint))) return; // nothing to draw yet
      draw[view.stage]?.(view);
    },
    /** Starts the worker on the view's weights picture, if it has one, before the page computes its own numbers. */
    start(view) {
      if ((view.stage === "weights" || view.stage === "blend") && painted(view)) requestPicture(view);
    },
    /** True while the weights picture asked for last is not yet the one shown. */
    pending: () => painter.pending(),
    /** True while a worker asked for a picture has not yet begun (see painter.js). */
    starting: () => painter.starting(),
    /** The detail window's columns, [first, count], while one is shown; else null. */
    span: () => ([scoresDetail, weightsDetail].some((d) => !d.node.hidden && d.node.closest(".aw-panel:not([hidden])")) ? [win.c0, win.size] : null),
    destroy() {
      for (const v of [emptyGrid, qGrid, kGrid, dial, scoresGrid, scoresDetail, biasGrid, weightsGrid, weightsDetail, blend, painter]) v.destroy();
    },
  };
}
