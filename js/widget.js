// anywidget entry: draws one attention computation in five stages from the synced state.
// The page computes scores and weights itself (attention.js), so a drag needs no round trip;
// clicks go back to Python as trait changes.
import "./widget.css";
import { scaleDiverging, scaleSequential } from "d3-scale";
import { interpolateLab } from "d3-interpolate";
import * as A from "./attention.js";
import { createStore } from "./derived.js";
import { el, fill, palette, fmt2, fmt3, fmtE, fmtT } from "./views/dom.js";
import { createControls } from "./views/controls.js";
import { createTokenStrip } from "./views/tokens.js";
import { createGrid } from "./views/grid.js";
import { createBlend } from "./views/blend.js";
import { createDial } from "./views/dial.js";
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

/** Two hues from a neutral 0, and already a fifth of the way to either at the smallest nonzero
 * score: a small negative and a small positive score never look alike, in either theme. */
function diverging({ neg, zero, pos }) {
  const toNeg = interpolateLab(zero, neg), toPos = interpolateLab(zero, pos);
  return (t) => (t === 0.5 ? zero : t < 0.5 ? toNeg(0.2 + 0.8 * (1 - 2 * t)) : toPos(0.2 + 0.8 * (2 * t - 1)));
}

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
  const closed = store.closed;

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
  const roundingNotice = () => {
    const T = get("temperature"), agree = store.agreement();
    return agree.exact ? null : `These numbers are too sensitive to rounding to show exactly: a score here can differ from `
      + `Python's by up to ${fmtE(agree.scoreError)} (scores reach ${fmtE(agree.top)}), which at T = ${fmtT(T)} can move `
      + `a weight by up to ${fmtE(agree.weightError)}. Python's w.scores and w.weights are the reference; `
      + "raise the temperature, or scale q and k down, to see them here.";
  };
  const heads = createHeads(root, { onHead: (h) => save("head", h), onProgress: () => schedule() });
  const strip = createTokenStrip(root, { onFocus });
  const caption = el("p", { class: "aw-caption" });
  const body = el("div", { class: "aw-body" });
  const readout = el("p", { class: "aw-readout", "aria-live": "polite" });
  root.append(caption, body);
  const cellView = createCell(root, { onClose: () => save("cell", null) });
  root.append(readout);

  // Each panel is shown in the stages it names; the weights matrix stays for the blend.
  const panels = [];
  const panel = (...stages) => {
    const p = el("div", { class: "aw-panel" });
    body.append(p);
    panels.push([p, stages]);
    return p;
  };
  const tokensPanel = panel("tokens"), qkPanel = panel("qk"), scoresPanel = panel("scores"), weightsPanel = panel("weights", "blend");
  const blendPanel = panel("blend");
  const tokenName = (i) => get("tokens")[i];
  const emptyGrid = createGrid(tokensPanel, { title: "who reads whom", onPick: onFocus, describe: (i, j) => `${tokenName(i)} reads ${tokenName(j)}` });
  const entry = (m, i, j) => fmt3(m.data[i * m.cols + j]);
  const qGrid = createGrid(qkPanel, { title: "queries Q", onPick: onFocus, describe: (i, j) => `q(${tokenName(i)})[${j + 1}] = ${entry(store.q(), i, j)}` });
  const kGrid = createGrid(qkPanel, { title: "keys K", onPick: onFocus, describe: (i, j) => `k(${tokenName(i)})[${j + 1}] = ${entry(store.k(), i, j)}` });
  let dragged = null; // the query being turned: drawn at once, sent to Python on release
  const dial = createDial(qkPanel, {
    onQuery: (vec) => {
      const all = store.all("q"), h = Math.min(get("head"), all.heads - 1), f = get("focus");
      const data = all.data.slice(); // the same precision as Python sent
      data.set(vec, (h * all.rows + f) * all.cols);
      dragged = A.encodeMatrix(data, all.heads > 1 ? [all.heads, all.rows, all.cols] : [all.rows, all.cols]);
      model.set("q", dragged);
    },
    onQueryEnd: () => { if (dragged) model.save_changes(); dragged = null; },
  });
  const describeCell = (i, j) => {
    const n = store.q().rows, masked = closed(i, j);
    return `${tokenName(i)} reads ${tokenName(j)}\nscore ${fmt3(store.scores()[i * n + j])}\nweight ${masked ? `0 (masked: ${get("causal") && j > i ? "cannot read ahead" : "the mask closes this cell"})` : fmt3(store.weights()[i * n + j])}`;
  };
  const scoresGrid = createGrid(scoresPanel, { title: "scores", onPick: onPickCell, describe: describeCell });
  const scoresLegend = el("div", { class: "aw-legend" });
  scoresPanel.append(scoresLegend);
  const weightsGrid = createGrid(weightsPanel, { title: "weights", onPick: onPickCell, describe: describeCell });
  const weightsLegend = el("div", { class: "aw-legend" });
  weightsPanel.append(weightsLegend);
  const blend = createBlend(blendPanel, { onResidual: (b) => save("residual", b) });

  function legend(node, title, color, lo, hi) {
    const at = Array.from({ length: 21 }, (_, i) => lo + ((hi - lo) * i) / 20);
    if (lo < 0 && hi > 0) at.push(0); // the neutral zero gets its own stop
    const stops = at.sort((a, b) => a - b).map((v) => `${color(v)} ${hi > lo ? ((100 * (v - lo)) / (hi - lo)).toFixed(1) : 0}%`);
    fill(node,
      el("span", { class: "aw-legend-title" }, title),
      el("span", {}, fmt2(lo)),
      el("span", { class: "aw-legend-bar", style: `background: linear-gradient(to right, ${stops.join(", ")})` }),
      el("span", {}, fmt2(hi)));
  }

  function describeRow(focus, tokens, stage) {
    const n = tokens.length, name = tokens[focus];
    if (stage === "tokens" || stage === "qk") return [`Focus: ${name} (token ${focus + 1} of ${n}).`];
    const values = stage === "scores" ? store.scores() : store.weights();
    const order = Array.from({ length: n }, (_, j) => j).filter((j) => !closed(focus, j));
    order.sort((a, b) => values[focus * n + b] - values[focus * n + a]);
    const top = order.slice(0, 6).map((j) =>
      el("span", { class: "aw-read", "data-index": j }, `${j === focus ? "itself" : tokens[j]} ${stage === "scores" ? fmt2(values[focus * n + j]) : fmt3(values[focus * n + j])}`));
    const verb = stage === "scores" ? " scores " : " reads ";
    const tail = stage === "scores" ? [] : [` — ${fmt2(A.effectiveTokens(store.weights(), n, focus))} effective tokens`];
    return [el("b", {}, name), verb, ...top.flatMap((s, i) => (i ? [", ", s] : [s])), order.length > 6 ? ", …" : "", ...tail];
  }

  // --- drawing, batched to one frame ---
  let frame = 0, layoutRetries = 0;
  const schedule = () => { if (!frame) frame = requestAnimationFrame(draw); };

  function draw() {
    frame = 0;
    const pal = palette(root), q = store.q(), k = store.k(), S = store.scores(), W = store.weights(), mask = store.mask();
    const tokens = get("tokens"), n = tokens.length, stage = get("stage"), causal = get("causal");
    const focus = Math.min(get("focus"), n - 1), cell = get("cell");
    root.dataset.stage = stage;
    const maxWidth = Math.max(320, (root.clientWidth || 760) - 40);
    controls.update({
      stage, temperature: get("temperature"), causal, sentenceList: get("sentences") || [], sentenceIndex: get("sentence_index"),
      layers: get("n_layers") || 0, layer: get("layer") || 0, modelName: get("model_name") || "",
    });
    const showWeights = stage === "weights" || stage === "blend";
    const row = Array.from(W.subarray(focus * n, focus * n + n));
    // A theme switch hides the notebook for a moment: try the arcs again on the next frames.
    if (strip.update({ tokens, focus, row: showWeights ? row : null, pal })) layoutRetries = 0;
    else if (layoutRetries++ < 60) schedule();
    caption.textContent = CAPTIONS[stage] || "";
    const warning = roundingNotice();
    notice.hidden = !warning;
    notice.textContent = warning || "";
    for (const [p, stages] of panels) p.hidden = !stages.includes(stage);
    fill(readout, describeRow(focus, tokens, stage));

    const isMasked = causal || mask ? closed : null;
    // Long inputs spread the budget thin: past 64 tokens the colour runs up to the largest weight
    // (the legend says so), or the matrix would be a blank page of near-zero cells.
    const topWeight = n > 64 ? store.topWeight() : 1;
    const thumbColor = scaleSequential(interpolateLab(pal.zero, pal.seq)).domain([0, 1]); // thumbnails scale themselves
    const weightColor = thumbColor.copy().domain([0, topWeight || 1]);
    heads.node.hidden = store.all("q").heads < 2;
    if (!heads.node.hidden) heads.update({ work: store.thumbnails(), head: get("head"), color: thumbColor });
    cellView.update(cell && stage !== "tokens" && stage !== "qk" ? {
      a: A.cellArithmetic(q, k, store.v(), S, W, { i: cell[0], j: cell[1], scale: store.scale(), temperature: get("temperature"), causal, mask }),
      reader: tokens[cell[0]], read: tokens[cell[1]],
    } : null);

    const base = { rows: n, rowLabels: tokens, colLabels: tokens, focusRow: focus, maxWidth };
    if (stage === "tokens") {
      const blank = scaleSequential(() => pal.zero).domain([0, 1]); // a scale, so long inputs take the pixel path
      emptyGrid.update({ ...base, cols: n, value: () => 0, color: blank, key: blank, ariaLabel: `${n} by ${n} attention matrix, not yet filled` });
    } else if (stage === "qk") {
      const m = Math.max(A.magnitude(q.data), A.magnitude(k.data));
      const color = scaleDiverging(diverging(pal)).domain([-m, 0, m]);
      const dims = Array.from({ length: q.cols }, (_, j) => `${j + 1}`);
      const qk = { ...base, cols: q.cols, colLabels: dims, color, text: fmt2, maxWidth: Math.min(maxWidth / 2 - 20, 360) };
      qGrid.update({ ...qk, value: (i, j) => q.data[i * q.cols + j], ariaLabel: "query vectors" });
      kGrid.update({ ...qk, value: (i, j) => k.data[i * k.cols + j], focusRow: null, ariaLabel: "key vectors" });
      dial.node.hidden = q.cols !== 2;
      if (q.cols === 2) {
        dial.update({ tokens, focus, q, k, scoreRow: S.subarray(focus * n, focus * n + n), weightRow: row, masked: (j) => closed(focus, j),
          scale: store.scale(), scaleSet: get("scale") != null, temperature: get("temperature") });
      }
    } else if (stage === "scores") {
      let m = 1e-9, lo = Infinity, hi = -Infinity;
      for (const s of S) { m = Math.max(m, Math.abs(s)); lo = Math.min(lo, s); hi = Math.max(hi, s); }
      const color = scaleDiverging(diverging(pal)).domain([-m, 0, m]);
      scoresGrid.update({ ...base, cols: n, value: (i, j) => S[i * n + j], color, text: fmt2, masked: isMasked, causal: causal && !mask, cell, key: S, data: S, ariaLabel: `scores from ${fmt2(lo)} to ${fmt2(hi)}` });
      // one range, the matrix's own; its colours are those of a scale centred on 0
      legend(scoresLegend, `score (scale ${fmt3(store.scale())}${get("scale") == null ? " = 1/√d" : ", set"}; colour centred on 0)`, color, lo, hi);
    }
    if (showWeights) {
      const sums = store.rowSums();
      weightsGrid.update({
        ...base, cols: n, value: (i, j) => W[i * n + j], color: weightColor, text: fmt2, masked: isMasked, causal: causal && !mask, cell, key: W, data: W,
        maxWidth: stage === "blend" ? Math.min(maxWidth, 420) : maxWidth,
        extra: [{ title: "Σ row", value: (i) => fmt2(sums[i]) }, { title: "eff.", value: (i) => fmt2(A.effectiveTokens(W, n, i)) }], // only for the rows drawn
        ariaLabel: `weights at temperature ${fmt2(get("temperature"))}`,
      });
      legend(weightsLegend, topWeight < 1 ? `weight (colour stretched to the largest, ${fmt3(topWeight)})` : "weight", weightColor, 0, topWeight);
    }
    if (stage === "blend") {
      const v = store.v(), O = store.output(), x = store.x();
      blend.update({
        tokens, focus, row, v, O, sense: A.senseResolved(O, v, focus), spread: store.spread(), axes: get("value_axes") || [],
        x, residual: get("residual") && !!x, basis: store.basis(),
      });
    }
  }

  // For scripts and tests: the numbers the page draws (its own computation) and pictures of it.
  root.attnwidget = {
    numbers: () => {
      const warning = roundingNotice();
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
  root.attnwidget.firstPaint = performance.now();

  return () => {
    cancelAnimationFrame(frame);
    clearTimeout(sendTimer);
    for (const [name, h] of handlers) model.off(`change:${name}`, h);
    themeWatch.disconnect();
    resize.disconnect();
    for (const v of [controls, heads, strip, emptyGrid, qGrid, kGrid, dial, scoresGrid, weightsGrid, blend, cellView]) v.destroy();
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
