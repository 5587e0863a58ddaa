// The stage stepper (back, next, and each stage by name) and the log-scale temperature slider.
import { el, fill, fmtT, short } from "./dom.js";

/** @typedef {import("../state").State} State */
/**
 * @typedef {object} ControlsOptions
 * @property {import("../types").Get} get  the state as it stands: a field these controls draw is read here
 * @property {string[]} stages  Python's, in order
 * @property {string[]} blockNames  an encoder–decoder model's blocks (rules.BLOCKS)
 * @property {number[]} range  the slider's [lo, hi] temperatures
 * @property {(name: string) => void} onStage
 * @property {(t: number, released: boolean) => void} onTemperature
 * @property {(on: boolean) => void} onCausal
 * @property {(on: boolean) => void} onSink
 * @property {(on: boolean) => void} onDifference
 * @property {(scheme: "none" | "rope" | "alibi") => void} onPosition
 * @property {(i: number) => void} onSentence
 * @property {(i: number) => void} onLayer
 * @property {(name: string) => void} onBlock
 * @property {(step: number) => void} onStep
 * @property {(kind: "png" | "svg") => void} onSave
 * @property {(method: State["kv_method"]) => void} onKvMethod
 * @property {(budget: number) => void} onKvBudget
 */
/**
 * A text written one token at a time: the step, every token (as text), and whether it is still being written (rules.js writing).
 * @typedef {{ step: number, n: number, tokens: string[], cross: boolean, still: boolean }} Writing
 */
/**
 * @typedef {object} ControlsView
 * @property {string} stage
 * @property {number} temperature
 * @property {boolean} causal
 * @property {boolean} sink
 * @property {boolean | null} [difference]  a differential pair's difference shown; null: not a differential model's
 * @property {string[]} sentenceList
 * @property {number} sentenceIndex
 * @property {number[] | null} [heldTexts]  the texts an exported page holds, or null for all
 * @property {number} layers
 * @property {number} layer
 * @property {number[] | null} [held]  the layers an exported page holds (their places), or null for all
 * @property {number[]} [numbers]  the model's own number of each layer held (a hybrid's); empty: 0, 1, 2, …
 * @property {string[]} [kinds]  what each of the model's layers is, by number: "" for one held, else its kind
 * @property {string} modelName
 * @property {string} [position]  the page's words for a model's scheme
 * @property {{ scheme: string, even: boolean } | null} [lab]  where position enters your own arrays' scores
 * @property {string} [block]
 * @property {Writing | null} [generation]  offered where Python would write it
 * @property {string[]} [absent]  stages this widget has not got
 * @property {{ method: string, budget: number }} [kv]  the compressed KV cache shown ("" for none)
 */
/** @typedef {{ node: HTMLElement, update(view: ControlsView): void, destroy(): void }} Controls */

// Each stage's name on its button; which stages there are, and their order, come from Python.
/** @type {Record<string, string>} */
const LABELS = { tokens: "Tokens", qk: "Query · Key", scores: "Scores", weights: "Weights", blend: "Blend" };
// The compressed KV cache's methods (kvcache.py's), named in the menu, with what each keeps.
/** @type {[State["kv_method"], string, string][]} */
export const KV_METHODS = [
  ["", "off", "Every key kept"],
  ["streaming", "StreamingLLM", "StreamingLLM: the first 4 tokens (attention sinks) and the most recent ones"],
  ["h2o", "H2O", "H2O (heavy hitters): the most recent half of the budget, and the keys with the most weight summed over every row"],
  ["snapkv", "SnapKV", "SnapKV: the last queries (up to 64) vote with their weights for the earlier keys; the window and the top-voted are kept"],
  ["mask", "my keys", "Your own choice: click tokens to keep or evict them"],
];
const STEPS = 1000; // slider resolution along the log axis
// Round temperatures, for the arrow keys: two significant digits, 0.10 to 9.9.
// (findLastIndex is ES2023, past the checker's library: typed here as the browsers have it)
const ROUND = /** @type {number[] & { findLastIndex(predicate: (r: number) => boolean): number }} */ ([
  ...Array.from({ length: 90 }, (_, i) => (10 + i) / 100),
  ...Array.from({ length: 90 }, (_, i) => (10 + i) / 10),
]);

/** createControls(parent, {stages: [name], range: [lo, hi], onStage(name), onTemperature(t, released), onCausal(bool),
 *  onSink(bool), onPosition("none" | "rope" | "alibi"), onSentence(i), onLayer(i), onBlock(name), onStep(step), onSave("png" | "svg")})
 * @param {HTMLElement} parent
 * @param {ControlsOptions} options
 * @returns {Controls} */
export function createControls(
  parent,
  {
    get,
    stages,
    blockNames,
    range,
    onStage,
    onTemperature,
    onCausal,
    onSink,
    onDifference,
    onPosition,
    onSentence,
    onLayer,
    onBlock,
    onStep,
    onSave,
    onKvMethod,
    onKvBudget,
  },
) {
  const [lo, hi] = range.map(Math.log);
  /** @param {number} p */
  const toT = (p) => Math.exp(lo + (p / STEPS) * (hi - lo));
  /** @param {number} t */
  const toP = (t) => Math.round(((Math.log(t) - lo) / (hi - lo)) * STEPS);
  /** @type {string | null} */
  let current = null;

  const back = el("button", { type: "button", class: "aw-back", "aria-label": "Previous stage" }, "‹ Back");
  const next = el("button", { type: "button", class: "aw-next", "aria-label": "Next stage" }, "Next ›");
  const STAGES = stages.map((name) => [name, LABELS[name] || name]);
  const stageButtons = STAGES.map(([name, label], i) =>
    el("button", { type: "button", class: "aw-stage", "data-stage": name, onclick: () => onStage(name) }, el("span", { class: "aw-stage-num" }, i + 1), label),
  );
  back.addEventListener("click", () => step(-1));
  next.addEventListener("click", () => step(1));
  let offered = STAGES.map(([name]) => name); // (attention weights alone have no query/key or scores stage)
  /** @param {number} by */
  function step(by) {
    const i = offered.indexOf(/** @type {string} */ (current)); // (none yet: -1)
    const j = Math.max(0, Math.min(offered.length - 1, i + by));
    if (j !== i) onStage(offered[j]);
  }

  // The slider moves on a log scale but lands on the values it shows (two decimals), so the
  // position labelled "T = 1.00" is T = 1 and reproduces the lab's figures exactly.
  // T = 1 (the default, the lab's reference) is a detent: a drag across it stops on it as easily as
  // on 0.20, where the log scale is four times finer (within about 1.6% of 1 is 1).
  /** @param {number} p */
  const landed = (p) => {
    const t = toT(p);
    return Math.abs(Math.log(t)) <= 0.016 ? 1 : Math.min(range[1], Math.max(range[0], Math.round(t * 100) / 100));
  };
  const slider = el("input", { type: "range", min: 0, max: STEPS, step: 1, class: "aw-slider", "aria-label": "Temperature" });
  const value = el("output", { class: "aw-temp-value" });
  let shown = 1;
  slider.addEventListener("input", () => onTemperature(landed(Number(slider.value)), false));
  slider.addEventListener("change", () => onTemperature(landed(Number(slider.value)), true)); // released
  // Arrow keys step through round values: 0.10, 0.11 … 0.99, then 1.0, 1.1 … 5.0.
  slider.addEventListener("keydown", (/** @type {KeyboardEvent} */ ev) => {
    const up = /** @type {Record<string, number>} */ ({ ArrowRight: 1, ArrowUp: 1, PageUp: 10, ArrowLeft: -1, ArrowDown: -1, PageDown: -10 })[ev.key];
    const end = /** @type {Partial<Record<string, number>>} */ ({ Home: ROUND[0], End: ROUND[ROUND.length - 1] })[ev.key];
    if (!up && end == null) return;
    ev.preventDefault();
    let t = end;
    if (t == null) {
      const i = up > 0 ? ROUND.findIndex((r) => r > shown + 1e-9) : ROUND.findLastIndex((r) => r < shown - 1e-9);
      const at = i < 0 ? (up > 0 ? ROUND.length - 1 : 0) : i;
      t = ROUND[Math.max(0, Math.min(ROUND.length - 1, at + (up > 0 ? up - 1 : up + 1)))];
    }
    shown = Math.min(range[1], Math.max(range[0], t)); // the next key steps on from here, drawn or not
    onTemperature(shown, true);
  });

  const causal = el("input", { type: "checkbox", class: "aw-causal" });
  causal.addEventListener("change", () => onCausal(causal.checked));
  // attention sinks: offered for a real model's heads, or whenever it is on
  const sink = el("input", { type: "checkbox", class: "aw-sink" });
  sink.addEventListener("change", () => onSink(sink.checked));
  const sinkBox = el(
    "label",
    { class: "aw-toggle", hidden: true, title: "Attention sinks: leave out the first token's column and spread each row's budget over the rest" },
    sink,
    "hide first token",
  );
  // differential attention: the pair's difference, map 1 − λ·map 2, in the weights and blend stages
  const difference = el("input", { type: "checkbox", class: "aw-difference" });
  difference.addEventListener("change", () => onDifference(difference.checked));
  const differenceBox = el(
    "label",
    { class: "aw-toggle", hidden: true, title: "Differential attention: show map 1 − λ·map 2, what the model mixes the pair's values with" },
    difference,
    "difference (map 1 − λ·map 2)",
  );
  // where position enters the lab's scores (a model's is its own, named beside its name)
  const schemes = el(
    "select",
    { class: "aw-position-select", "aria-label": "Where position enters: none, RoPE (turns queries and keys) or ALiBi (a penalty on distance)" },
    el("option", { value: "none" }, "none"),
    el("option", { value: "rope" }, "RoPE"),
    el("option", { value: "alibi" }, "ALiBi"),
  );
  schemes.addEventListener("change", () => onPosition(/** @type {"none" | "rope" | "alibi"} */ (schemes.value))); // (its options' values)
  const schemeBox = el(
    "label",
    { class: "aw-position-box", title: "RoPE turns each query and key by its position; ALiBi adds −m·|i − j| to the scores" },
    "position",
    schemes,
  );
  // a compressed KV cache: the keys a method keeps for a budget, marked over the weights and the tokens
  const kvMethod = el(
    "select",
    { class: "aw-kv-method", "aria-label": "Compressed KV cache: which keys each head keeps" },
    KV_METHODS.map(([value, label, title]) => el("option", { value, title }, label)),
  );
  kvMethod.addEventListener("change", () => onKvMethod(/** @type {State["kv_method"]} */ (kvMethod.value))); // (its options' values)
  const kvBudget = el("input", { type: "number", min: 1, step: 1, class: "aw-kv-budget", "aria-label": "Budget: the keys each head keeps" });
  kvBudget.addEventListener("change", () => {
    const b = Number(kvBudget.value);
    if (Number.isInteger(b) && b >= 1) onKvBudget(b);
    else kvBudget.value = String(shownBudget); // (not a budget: the one shown stays)
  });
  let shownBudget = 16;
  const kvBudgetBox = el("label", { class: "aw-kv-budget-box", title: "The keys each head's cache keeps (its budget)" }, "keeps", kvBudget, "keys");
  const kvHint = el("span", { class: "aw-kv-hint", hidden: true }, "click tokens to keep or evict them");
  const kvBox = el(
    "span",
    { class: "aw-kv-box", role: "group", "aria-label": "Compressed KV cache" },
    el(
      "label",
      { title: "A compressed KV cache keeps only some keys (and their values) per head: see which, and what the focused token loses" },
      "KV cache",
      kvMethod,
    ),
    kvBudgetBox,
    kvHint,
  );
  const sentences = el("div", { class: "aw-sentences", role: "group", "aria-label": "Sentences", hidden: true });
  // a real model's layers
  const layerSelect = el("select", { class: "aw-layer", "aria-label": "Layer (counted from 0, as w.layer is)" });
  layerSelect.addEventListener("change", () => onLayer(Number(layerSelect.value)));
  const modelName = el("span", { class: "aw-model-name" });
  const position = el("span", { class: "aw-position" }); // where position enters its attention (RoPE, ALiBi, …)
  // ("layer" and its menu wrap as one, under a long model name)
  const layerBox = el("label", { class: "aw-layer-box", hidden: true }, modelName, position, el("span", { class: "aw-layer-pick" }, "layer ", layerSelect));
  // an encoder–decoder model's three attentions (their names are Python's: rules.BLOCKS)
  /** @type {Record<string, [string, string]>} */
  const SAID = {
    encoder: ["encoder", "The encoder: the source text's tokens read each other"],
    decoder: ["decoder", "The decoder: the target's tokens read themselves and the ones before (causal)"],
    cross: ["cross-attention", "Cross-attention: each target token reads the source text"],
  };
  const blocks = el(
    "div",
    { class: "aw-blocks", role: "group", "aria-label": "Attention block", hidden: true },
    blockNames.map((name) => {
      const [label, title] = SAID[name] || [name, name];
      return el("button", { type: "button", class: "aw-block", "data-block": name, title, onclick: () => onBlock(name) }, label);
    }),
  );
  // Generation: the text written one token at a time (`step`). Offered to a self-attention widget
  // with the causal rule on (a text that reads only backwards is one that can be written), or
  // from a button that turns it on; while writing, first / previous / next token / all.
  /** @type {{ step: number, n: number }} */
  let steps = { step: 0, n: 0 };
  /** @param {number} s */
  const go = (s) => onStep(Math.max(1, Math.min(steps.n, s)));
  /** @param {string} cls  @param {string} label  @param {string} text  @param {() => number} to */
  const genButton = (cls, label, text, to) => {
    const b = el("button", { type: "button", class: cls, "aria-label": label }, text);
    b.addEventListener("click", () => go(to()));
    return b;
  };
  const writeIt = genButton("aw-gen-write", "Write the text token by token, from the first", "write token by token ▶", () => 1);
  writeIt.title = "Generation: show the text as it is written, one token at a time (turns the causal rule on)";
  const first = genButton("aw-gen-first", "First token", "« first", () => 1),
    previous = genButton("aw-gen-prev", "Previous token", "◀ previous", () => steps.step - 1),
    nextToken = genButton("aw-gen-next", "Next token", "next token ▶", () => steps.step + 1),
    all = genButton("aw-gen-all", "Every token written", "all »", () => steps.n);
  const where = el("span", { class: "aw-gen-where" });
  const stepper = el("span", { class: "aw-gen-steps" }, first, previous, where, nextToken, all);
  // writing turns the causal rule on, and it stays on after the last token: said, until it is off
  const causalNote = el("span", { class: "aw-gen-causal-note", role: "status", hidden: true });
  let wrote = false;
  const genBox = el("div", { class: "aw-gen-control", role: "group", "aria-label": "Generation", hidden: true }, writeIt, stepper, causalNote);
  /** @type {string | number} */
  let shownLayers = -1;
  /** @type {string[] | null} */
  let shownSentences = null;

  const node = el(
    "div",
    { class: "aw-controls" },
    el("nav", { class: "aw-stepper", "aria-label": "Stages" }, back, stageButtons, next),
    el(
      "div",
      { class: "aw-dials" },
      el("label", { class: "aw-temp" }, el("span", {}, "Temperature"), slider, value),
      el("label", { class: "aw-toggle", title: "Each token may read only itself and the tokens before it" }, causal, "causal"),
      sinkBox,
      differenceBox,
      schemeBox,
      blocks,
      layerBox,
      kvBox,
      genBox,
      el(
        "span",
        { class: "aw-save" },
        el("button", { type: "button", class: "aw-save-png", "aria-label": "Save the view as a PNG picture", onclick: () => onSave("png") }, "PNG"),
        el("button", { type: "button", class: "aw-save-svg", "aria-label": "Save the view as an SVG picture", onclick: () => onSave("svg") }, "SVG"),
      ),
    ),
    sentences,
  );
  parent.append(node);

  return {
    node,
    update({
      stage,
      temperature,
      causal: isCausal,
      sink: isSink,
      difference: showsDifference = null,
      sentenceList,
      sentenceIndex,
      heldTexts = null,
      layers,
      layer,
      held = null,
      numbers = [],
      kinds = [],
      modelName: name,
      position: scheme = "",
      lab = null,
      block = "",
      generation = null,
      absent = [],
      kv = { method: "", budget: 16 },
    }) {
      node.style.display = get("controls") === false ? "none" : ""; // a figure: the stages alone (an older page's state has no such field)
      // generation = {step, n, tokens (every token, as text), cross, still (still writing: rules.js writing)}
      const g = generation;
      genBox.hidden = !g || g.cross || g.n < 2;
      if (!genBox.hidden) {
        const g = /** @type {Writing} */ (generation); // (shown: there is one)
        steps = g;
        const writing = g.still || isCausal;
        if (g.still) wrote = true;
        else if (!isCausal) wrote = false;
        causalNote.hidden = !(wrote && isCausal && !g.still);
        causalNote.textContent = causalNote.hidden
          ? ""
          : "The causal rule is still on from writing: each row reads only itself and the tokens before it. Untick “causal” to read both ways again.";
        writeIt.hidden = writing;
        stepper.hidden = !writing;
        first.disabled = previous.disabled = g.step <= 1;
        nextToken.disabled = all.disabled = !g.still;
        // token text is data: set as text, never as markup
        /** @param {string} t */
        const said = (t) => `“${short(t, 16)}”`;
        where.textContent = !g.still
          ? `all ${g.n} tokens written`
          : `step ${g.step} of ${g.n}: ${said(g.tokens[g.step - 1])} written last · next ${said(g.tokens[g.step])}`;
      }
      blocks.hidden = !block;
      for (const b of /** @type {HTMLCollectionOf<HTMLElement>} */ (blocks.children)) b.setAttribute("aria-pressed", String(b.dataset.block === block));
      sink.checked = isSink;
      sinkBox.hidden = !isSink && layers < 1;
      differenceBox.hidden = showsDifference == null;
      difference.checked = !!showsDifference;
      layerBox.hidden = layers < 1;
      modelName.textContent = name;
      position.textContent = scheme;
      position.hidden = !scheme;
      schemeBox.hidden = !lab;
      if (lab) {
        schemes.value = lab.scheme;
        schemes.options[1].disabled = !lab.even && lab.scheme !== "rope"; // RoPE turns pairs of numbers
        schemes.options[1].title = schemes.options[1].disabled ? "RoPE turns pairs of numbers: it needs vectors of an even width" : "";
      }
      // an exported page too large for every layer holds some (held): the others are offered, greyed; a hybrid's
      // layers by the model's own numbers, its layers without attention weights named and greyed
      const menu = `${layers}|${held}|${numbers}|${kinds}`;
      if (menu !== shownLayers) {
        shownLayers = menu;
        const own = numbers.length ? numbers : Array.from({ length: layers }, (_, i) => i);
        fill(
          layerSelect,
          Array.from({ length: Math.max(kinds.length, own.length ? own[own.length - 1] + 1 : 0) }, (_, x) => {
            const i = own.indexOf(x);
            if (i < 0) return el("option", { value: x, disabled: true }, `${x} · ${kinds[x] || "no attention"}`);
            return !held || held.includes(i) ? el("option", { value: x }, `${x}`) : el("option", { value: x, disabled: true }, `${x} (not in this page)`);
          }),
        );
      }
      layerSelect.value = String(layer);
      causal.checked = isCausal;
      // a text being written is causal: the rule stays on until every token is written
      causal.disabled = !!g && !g.cross && g.step < g.n;
      causal.title = causal.disabled ? "A text written one token at a time is causal: press “all »” to turn it off" : "";
      if (sentenceList !== shownSentences) {
        shownSentences = sentenceList;
        sentences.hidden = sentenceList.length < 2;
        fill(
          sentences,
          sentenceList.map((text, i) => el("button", { type: "button", class: "aw-sentence", "data-index": i, onclick: () => onSentence(i) }, text)),
        );
      }
      for (const b of /** @type {HTMLCollectionOf<HTMLElement>} */ (sentences.children)) {
        b.setAttribute("aria-pressed", String(Number(b.dataset.index) === sentenceIndex));
        const away = !!heldTexts && !heldTexts.includes(Number(b.dataset.index)); // a text this exported page left out
        b.classList.toggle("aw-sentence-away", away);
        b.title = away ? "not in this page: export it with a larger max_mb to have every text" : "";
      }
      kvMethod.value = kv.method;
      kvBudgetBox.hidden = !kv.method || kv.method === "mask"; // (your own keys: as many as you click)
      kvHint.hidden = kv.method !== "mask";
      shownBudget = kv.budget;
      if (document.activeElement !== kvBudget) kvBudget.value = String(kv.budget); // (not under the reader's typing)
      current = stage;
      offered = STAGES.map(([name]) => name).filter((name) => !absent.includes(name));
      stageButtons.forEach((b) => {
        b.setAttribute("aria-pressed", String(b.dataset.stage === stage));
        b.hidden = absent.includes(/** @type {string} */ (b.dataset.stage));
        /** @type {ChildNode} */ (b.firstChild).textContent = String(offered.indexOf(/** @type {string} */ (b.dataset.stage)) + 1); // numbered as offered
      });
      back.disabled = stage === offered[0];
      next.disabled = stage === offered[offered.length - 1];
      // Python may hold a temperature outside the slider's range: pin the knob, show the true value.
      shown = temperature;
      slider.value = String(Math.max(0, Math.min(STEPS, toP(temperature))));
      slider.setAttribute("aria-valuetext", fmtT(temperature));
      value.textContent = `T = ${fmtT(temperature)}`;
    },
    destroy() {
      node.remove();
    },
  };
}
