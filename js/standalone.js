// A model that lives in the page alone: for exported pages with no kernel. It answers the
// same get/set/on/off/save_changes calls as a live widget model, and does in the page what
// Python does for a live widget when the sentence or a model's layer changes: swapping in that
// sentence's vectors, or the model's tokens back (a model's layers are all in the state, and
// the store cuts the current one from them).

function decode(value) {
  if (value && typeof value === "object" && typeof value.base64 === "string") {
    let bytes;
    if (Uint8Array.fromBase64)
      bytes = Uint8Array.fromBase64(value.base64); // native: a whole model's megabytes, four times as fast
    else {
      const text = atob(value.base64);
      bytes = new Uint8Array(text.length);
      for (let i = 0; i < text.length; i++) bytes[i] = text.charCodeAt(i); // a plain loop: megabytes of it
    }
    return { shape: value.shape, dtype: value.dtype, view: new DataView(bytes.buffer) };
  }
  return value;
}

const decodeAll = (state) => Object.fromEntries(Object.entries(state).map(([k, v]) => [k, decode(v)]));

/** Python's exercise rule, in the page: a change to the focused row (unless it brings its own
 * guess, for the new row) clears the guess and the reveal; a new guess after a reveal hides the
 * real row again. Returns the extra changes. */
export function exerciseFollowUps(state, changes) {
  const changed = Object.keys(changes).filter((k) => state[k] !== changes[k]);
  const exercise = ("exercise" in changes ? changes.exercise : state.exercise) || state.exercise; // leaving one clears it too
  const guessed = "guess" in changes || (exercise === "temperature" && state.exercise === "temperature" && "revealed" in changes);
  const row = state._constants.row_traits; // what the row depends on: a change to any of them starts a new try
  if (exercise && !guessed && changed.some((k) => row.includes(k)) && (state.guess != null || state.revealed || changes.revealed))
    return { guess: null, revealed: false };
  if (changed.includes("guess") && !("revealed" in changes) && state.revealed) return { revealed: false };
  return {};
}

/** A widget's render({model, el}) on embedded state (exported pages); payload.theme is "light",
 * "dark" or "auto" (the reader's setting). Returns the cleanup. */
export function standalone(render, el, payload) {
  const started = performance.now();
  const cleanup = render({ model: localModel(payload), el });
  const root = el.querySelector(".aw-root"),
    dark = window.matchMedia("(prefers-color-scheme: dark)");
  const setTheme = () => {
    const isDark = payload.theme === "dark" || (payload.theme !== "light" && dark.matches);
    root.classList.toggle("aw-dark", isDark);
    document.body.classList.toggle("aw-page-dark", isDark);
  };
  setTheme();
  dark.addEventListener("change", setTheme);
  root.attnwidget.renderStart = started; // when the page's script began: decoding, then drawing
  return () => {
    dark.removeEventListener("change", setTheme);
    cleanup();
  };
}

/** localModel({state, variants}) -> an anywidget-style model */
function localModel({ state: raw, variants = {} }) {
  const state = decodeAll(raw);
  // a list by index (sentences, layers), or by name (an encoder–decoder model's blocks)
  const swaps = Object.fromEntries(
    Object.entries(variants).map(([name, all]) => [
      name,
      Array.isArray(all) ? all.map(decodeAll) : Object.fromEntries(Object.entries(all).map(([k, v]) => [k, decodeAll(v)])),
    ]),
  );
  // the block shown at first: its every layer's arrays are in the state, not among the variants
  const home = Object.fromEntries(["model_q", "model_k", "model_v", "model_basis", "n_layers"].map((k) => [k, state[k]]));
  const listeners = new Map();
  const emit = (name) => (listeners.get(name) || []).slice().forEach((f) => f());

  function apply(changes) {
    const step = changes.step ?? state.step;
    if (changes.causal === false && step > 0 && step < (changes.tokens ?? state.tokens).length) return; // as Python refuses it: writing is causal
    changes = { ...changes, ...exerciseFollowUps(state, changes) };
    const changed = Object.keys(changes).filter((k) => state[k] !== changes[k]);
    Object.assign(state, changes);
    changed.forEach((k) => emit(`change:${k}`));
    if (changed.length) emit("change"); // once for the whole change, as a live model does
    for (const k of changed) if (swaps[k]) swap(k, changes[k]);
  }

  // Python's follow-ups, in the page: a new sentence keeps the focus on the same word when it
  // has it; indices stay inside the new tokens, and embeddings that no longer fit are dropped.
  function swap(name, index) {
    let next = swaps[name][index];
    if (!next) return;
    if (name === "block" && !("model_q" in next)) next = { ...next, ...home };
    // a layer of an encoder–decoder model: the tokens of the block shown
    if (name === "layer" && swaps.block?.[state.block])
      next = { ...next, tokens: swaps.block[state.block].tokens, key_tokens: swaps.block[state.block].key_tokens };
    const extra = {},
      n = next.tokens.length,
      m = (next.key_tokens || next.tokens).length;
    if (name === "sentence_index") {
      const word = (state.tokens[state.focus] || "").toLowerCase();
      const found = next.tokens.findIndex((t) => t.toLowerCase() === word);
      if (found >= 0) extra.focus = found;
      extra.cell = null;
    }
    // while generating, every token written stays so, and a step past the new tokens becomes their
    // number; another block's text (or cross-attention) is shown written whole, as Python does
    const oldN = state.tokens.length;
    if (name === "block" || (n !== oldN && state.step && (state.step === oldN || state.step > n))) extra.step = n;
    const rows = Math.min(extra.step ?? state.step ?? n, n) || n; // the rows there are
    if ((extra.focus ?? state.focus) >= rows) extra.focus = rows - 1;
    if (name === "block") {
      extra.layer = Math.min(state.layer, next.n_layers - 1); // the same layer, where the block has it
      const heads = next.model_q.shape[0] / next.n_layers;
      if (state.head >= heads) extra.head = heads - 1;
    }
    if (state.mask && (state.mask.shape[0] !== n || state.mask.shape[1] !== m) && !("mask" in next)) extra.mask = null; // a mask for other tokens, as Python drops it
    if (state.cell && (state.cell[0] >= rows || state.cell[1] >= (m === n ? rows : m))) extra.cell = null;
    const x = "x" in next ? next.x : state.x,
      v = next.v ?? next.model_v ?? state.model_v; // a model's layer brings no arrays: all are in model_v
    if (x && (x.shape[0] !== n || x.shape[1] !== v.shape[v.shape.length - 1])) extra.x = null;
    if (!(x && extra.x !== null)) extra.residual = false; // nothing to add the mix to
    apply({ ...next, ...extra });
  }

  return {
    get: (name) => state[name],
    set: (name, value) => apply({ [name]: value }),
    save_changes() {},
    send() {},
    on(event, f) {
      if (!listeners.has(event)) listeners.set(event, []);
      listeners.get(event).push(f);
    },
    off(event, f) {
      const list = listeners.get(event) || [];
      if (f)
        listeners.set(
          event,
          list.filter((g) => g !== f),
        );
      else listeners.delete(event);
    },
  };
}
