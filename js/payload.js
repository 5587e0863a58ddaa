// The exported page's data (src/attnwidget/payload.py documents its schema), decoded in this one
// place: the state as a live page would hold it, and the sources the rules bring in on a switch.

import { check, checkState, layerIndex, layerNumber, nHeads, overflow, pyStr, Refused, scan, show } from "./rules.js";

/** @typedef {import("./state").State} State */
/** @typedef {import("./state").ArrayValue} ArrayValue */
/** @typedef {import("./state").MaskValue} MaskValue */
/** @typedef {import("./types").PageState} PageState */
/** @typedef {import("./rules.js").Brought} Brought */
/** @typedef {import("./rules.js").Sources} Sources */
/** A group of values as encoded (arrays in base64, the rest as JSON), decoded: a text's, a block's, a layer's. @typedef {Record<string, unknown>} Values */
/**
 * An exported page's data as read, before it is checked (payload.py's schema).
 * @typedef {object} RawPayload
 * @property {unknown} version
 * @property {Values & { _constants?: unknown }} state
 * @property {{ sentences?: (Values | null)[], blocks?: Record<string, Values>, model?: Values | null }} [sources]
 * @property {Record<string, Values>} [arrays]
 */
/** A model's every layer's arrays, stacked: the state's own, a block's or a text's. @typedef {Partial<State>} Stack */

export const VERSION = 1;

/** @param {string} base64 */
function bytesOf(base64) {
  if (Uint8Array.fromBase64) return Uint8Array.fromBase64(base64); // native: a whole model's megabytes, four times as fast
  const text = atob(base64),
    bytes = new Uint8Array(text.length);
  for (let i = 0; i < text.length; i++) bytes[i] = text.charCodeAt(i); // a plain loop: megabytes of it
  return bytes;
}

/** @type {Record<string, number>} */
const BYTES = { float32: 4, float64: 8, int32: 4, uint8: 1 };

/** An array as encoded ({shape, dtype, base64}), checked against what it declares before its bytes are
 * read: an altered page is refused with what is wrong, never drawn from numbers it does not hold.
 * `finite`: numbers the page computes from (not NaN, not infinite). Anything else comes back as it is.
 * @param {unknown} value  @param {string} [name]  @param {boolean} [finite]  @returns {unknown} */
function decode(value, name = "an array", finite = false) {
  if (!(value && typeof value === "object" && typeof (/** @type {{ base64?: unknown }} */ (value).base64) === "string")) return value;
  const { shape, dtype, base64 } = /** @type {{ shape: number[], dtype: string, base64: string }} */ (value); // (what it declares: checked here)
  if (!Object.hasOwn(BYTES, dtype)) throw new Refused(`${name} has dtype ${JSON.stringify(dtype)}: not one this page reads (${Object.keys(BYTES).join(", ")})`);
  if (!Array.isArray(shape) || !shape.every((n) => Number.isSafeInteger(n) && n >= 0))
    throw new Refused(`${name} has shape ${JSON.stringify(shape)}: a shape is a list of whole numbers`);
  const need = shape.reduce((a, n) => a * n, 1) * BYTES[dtype],
    pad = base64.endsWith("==") ? 2 : base64.endsWith("=") ? 1 : 0,
    holds = base64.length % 4 ? "bytes cut short" : `${(base64.length / 4) * 3 - pad} bytes`;
  if (holds !== `${need} bytes`) throw new Refused(`${name} holds ${holds}, but its shape ${JSON.stringify(shape)} in ${dtype} needs ${need}`);
  let bytes;
  try {
    bytes = bytesOf(base64);
  } catch {
    throw new Refused(`${name}'s bytes are not base64`);
  }
  const array = { shape, dtype, view: new DataView(/** @type {ArrayBuffer} */ (bytes.buffer), bytes.byteOffset, bytes.byteLength) };
  if (finite && (dtype === "float32" || dtype === "float64")) {
    const { bad, at } = scan(array); // (kept for the rules' checks of the same array)
    if (bad >= 0) throw new Refused(`${name} holds ${at} at index ${bad}: every number must be finite`);
  }
  return array;
}

/** Each of `values`' arrays decoded; `where` names them (and that they are computed from: finite).
 * @param {Values | null | undefined} values  @param {string} [where]  @param {boolean} [finite]  @returns {Values} */
const decodeAll = (values, where = "", finite = true) =>
  Object.fromEntries(Object.entries(values || {}).map(([k, v]) => [k, decode(v, `${where}${k}`, finite)]));

/** @type {Record<string, number>} */
const WIDTH = { float32: 4, float64: 8 };

/** Heads [from, from + count) of a stacked array, sharing its memory.
 * @param {ArrayValue} a  @param {number} from  @param {number} count  @returns {ArrayValue} */
function heads(a, from, count) {
  const [, rows, cols] = a.shape,
    size = rows * cols * WIDTH[a.dtype];
  return { shape: [count, rows, cols], dtype: a.dtype, view: new DataView(a.view.buffer, a.view.byteOffset + from * size, count * size) };
}

/** A layer's own q, k, v and value axes: slices of the stacked model arrays (`stack` holds
 * model_q, model_k, model_v, model_basis and n_layers; `layered` names each, rules/values.py's LAYERED).
 * @param {Stack} stack  @param {number} i  @param {Record<string, keyof State>} layered  @returns {Record<string, ArrayValue | null>} */
export function layerArrays(stack, i, layered) {
  const count = /** @type {ArrayValue} */ (stack.model_q).shape[0] / /** @type {number} */ (stack.n_layers); // (a stack has both)
  return Object.fromEntries(Object.entries(layered).map(([n, m]) => [n, stack[m] ? heads(/** @type {ArrayValue} */ (stack[m]), i * count, count) : null]));
}

/** @type {Record<string, number>} */
const MASK = { ...WIDTH, uint8: 1 };

/** A layer's own mask, when the model has masks ({mask}: a slice of model_masks, or null for a
 * layer without one); {} when it has none, so a mask set by hand stays.
 * @param {Stack} stack  @param {number} i  @returns {{ mask?: MaskValue | null }} */
export function layerMask(stack, i) {
  const which = stack.mask_of_layer?.[i];
  if (!stack.model_masks || which == null) return {};
  if (which < 0) return { mask: null };
  const [, rows, cols] = stack.model_masks.shape,
    size = rows * cols * MASK[stack.model_masks.dtype];
  const view = new DataView(stack.model_masks.view.buffer, stack.model_masks.view.byteOffset + which * size, size);
  return { mask: { shape: [rows, cols], dtype: stack.model_masks.dtype, view } };
}

/** A layer's own bias, when the model has one per layer ({bias}: its heads of model_bias), and its first term
 * where the model says its terms ({terms}: of model_terms); {} when not.
 * @param {Stack} stack  @param {number} i  @returns {{ bias?: ArrayValue, terms?: ArrayValue }} */
export function layerBias(stack, i) {
  if (!stack.model_bias) return {};
  const count = stack.model_bias.shape[0] / /** @type {number} */ (stack.n_layers);
  return { bias: heads(stack.model_bias, i * count, count), ...(stack.model_terms ? { terms: heads(stack.model_terms, i * count, count) } : {}) };
}

/** A layer's own learnt sinks ({sinks}: its row of model_sinks, one logit per head), or {sinks: null} for a model
 * without: a model's layer brings its own in, as Python's sources do.
 * @param {Stack} stack  @param {number} i  @returns {{ sinks: number[] | null }} */
export function layerSinks(stack, i) {
  const all = stack.model_sinks;
  if (!all) return { sinks: null };
  const count = all.shape[1],
    width = WIDTH[all.dtype];
  const view = new DataView(all.view.buffer, all.view.byteOffset + i * count * width, count * width);
  return { sinks: Array.from({ length: count }, (_, h) => (width === 8 ? view.getFloat64(h * 8, true) : view.getFloat32(h * 4, true))) };
}

/** decodePayload(payload) -> {state, sources}: sources answers the rules' sentence(i), block(name), layer(block, i) and basis(v).
 * @param {RawPayload | null | undefined} payload  as read from the page: checked here
 * @returns {{ state: PageState, sources: Sources }} */
export function decodePayload(payload) {
  if (!payload || typeof payload !== "object" || !payload.state || typeof payload.state !== "object" || !payload.state._constants)
    throw new Refused("it holds no widget's state");
  if (typeof payload.version !== "number")
    throw new Refused(`it declares version ${typeof payload.version === "string" ? pyStr(payload.version) : String(payload.version)}, not a version number`);
  if (payload.version !== VERSION) throw new Refused(`it is version ${payload.version}; this page reads version ${VERSION}`);
  const state = /** @type {PageState} */ (/** @type {unknown} */ (decodeAll(payload.state))), // (checked below: checkLoaded)
    src = payload.sources || {};
  if (state.overview) state.overview = { ...state.overview, thumbs: decode(state.overview.thumbs, "overview thumbs") }; // a model too large for the page: its overview as exported
  // the measures beyond one head, computed at the state exported
  if (state.measure_data)
    state.measure_data = Object.fromEntries(
      Object.entries(state.measure_data).map(([n, e]) => [n, e.matrix ? { ...e, matrix: decode(e.matrix, `${n}'s matrix`) } : e]),
    );
  if (state.computed) state.computed = Object.fromEntries(Object.entries(state.computed).map(([n, answer]) => [n, decodeAll(answer, `${n}'s `, false)]));
  const sentences = (src.sentences || []).map((e, i) => (e ? /** @type {Brought} */ (decodeAll(e, `text ${i}'s `)) : null)); // null: a model's text left out
  const blocks = Object.fromEntries(Object.entries(src.blocks || {}).map(([name, b]) => [name, /** @type {Brought} */ (decodeAll(b, `block ${name}'s `))]));
  const model = src.model ? /** @type {Brought} */ (decodeAll(src.model, "the model's ")) : null;
  // the block shown at first: its every layer's arrays are in the state, not among the blocks
  const home = /** @type {Stack} */ (Object.fromEntries(state._constants.stack.map((k) => [k, state[k]])));
  /** @param {string} block  @param {number} text  @returns {Stack} */
  const stackOf = (block, text) => (block && blocks[block].model_q ? blocks[block] : !block && sentences[text]?.model_q ? sentences[text] : home);
  // a model's several texts: each with its own tokens and layers (the one shown at first: in the state)
  const texts = state.n_layers && sentences.length > 1,
    first = state.sentence_index;
  /** @param {number} i  @returns {Brought} */
  const text = (i) => {
    if (!sentences[i])
      throw new Refused(
        `This page holds text ${first} of ${sentences.length} (${pyStr(state.sentences[first])}): the others were left out to keep it small. ` +
          `Export it with a larger max_mb= (and no layers=) to have every text, or switch to text ${i} in the notebook (w.sentence_index = ${i}) and export it again.`,
      );
    return sentences[i].model_q ? sentences[i] : { ...sentences[i], ...home };
  };
  /** @type {Map<string, Brought>} */
  const layers = new Map(); // one object per layer's array: the rules compare arrays by identity
  const arrays = Object.fromEntries(Object.entries(payload.arrays || {}).map(([name, a]) => [name, decodeAll(a, `${name}'s `)]));
  const held = state.held_layers; // a model too large for the page: the layers it holds, in `arrays`
  const number = (/** @type {number} */ i) => layerNumber(state, i); // the model's own number of the layer held at i
  /** @param {number} i  @returns {Brought} */
  const heldLayer = (i) => {
    const found = arrays[`layer:${i}`];
    if (!found)
      throw new Refused(
        `This page holds layers ${/** @type {number[]} */ (held).map(number).join(", ")} of ${state.layer_numbers?.length ? `its attention layers ${state.layer_numbers.join(", ")}` : state.n_layers}: layer ${number(i)} was left out to keep it small. Export it with to_html(layers=[…, ${number(i)}]) to have it.`,
      );
    const words = /** @type {Brought} */ (model); // (a model's page: it has its tokens)
    return { tokens: words.tokens, key_tokens: words.key_tokens ?? null, ...found };
  };
  /** @type {Sources} */
  const sources = {
    sentence: (i) => (texts ? text(i) : /** @type {Brought} */ (sentences[i])), // (only a model's texts are left out)
    block: (name) => ({ ...blocks[name], ...(blocks[name].model_q ? {} : home) }),
    layer(block, i, t = 0) {
      const key = `${block}:${t}:${i}`;
      if (held && !block) return heldLayer(i);
      if (!layers.has(key)) {
        const words = /** @type {Brought} */ (block ? blocks[block] : texts ? sentences[t] : model); // (a model's layers: its tokens are there)
        const stack = stackOf(block, t);
        layers.set(key, {
          tokens: words.tokens,
          key_tokens: words.key_tokens ?? null,
          ...layerArrays(stack, i, state._constants.layered),
          ...layerMask(stack, i),
          ...layerBias(stack, i),
          ...layerSinks(stack, i),
        });
      }
      return /** @type {Brought} */ (layers.get(key));
    },
    // new values a script set: their axes are Python's to compute (the blend then plots their first two)
    basis: () => null,
  };
  if (state.layer_shown && layerIndex(state) >= 0) {
    // a layer's own: cut from the stacks (or held whole), not sent twice; its bias too when it has one of its own
    // (a layer the model does not hold: refused below)
    // (a bias and its terms only where Python left them out as the layer's: one set by hand is the state's own)
    const shown = sources.layer(state.block || "", layerIndex(state), texts ? first : 0);
    const own = /** @type {const} */ (["bias", "terms"]).filter((n) => n in shown && !(n in state));
    Object.assign(state, pick(shown, ["q", "k", "v", "value_basis", ...own]));
  }
  checkLoaded(state);
  return { state, sources };
}

/** The state's own values as the rules check a change to each (the same messages), and its indices within
 * what it holds: a page whose numbers were altered says so before anything is drawn.
 * @param {PageState} state */
function checkLoaded(state) {
  const C = state._constants;
  for (const name of C.writable) if (name in state) check(name, state[name], C); // (arrays too: dims, sizes, entries)
  checkState(state); // the arrays and tokens agree with each other
  // where position enters is the lab's choice for your own arrays: a model's scheme only with its layers (as settle refuses it)
  if (!state.n_layers && !C.positions.includes(state.position))
    throw new Refused(`'position' must be one of ${C.positions.map(pyStr).join(", ")}; got ${show(state.position)}.`);
  for (const problem of [imageProblem(state.image, state.tokens.length), overflow(state)]) if (problem) throw new Refused(problem);
  /** @param {"head" | "focus" | "sentence_index"} name  @param {number} count  @param {string} what */
  const within = (name, count, what) => {
    if (!(state[name] >= 0 && state[name] < count)) throw new Refused(`'${name}' must be ${what} from 0 to ${count - 1}, got ${state[name]}.`);
  };
  within("head", nHeads(state), "a head index");
  within("focus", state.tokens.length, "a token index");
  if ((state.sentences || []).length > 1) within("sentence_index", state.sentences.length, "a text's index");
  if (state.step > state.tokens.length) throw new Refused(`'step' must be from 0 to ${state.tokens.length}, got ${state.step}.`);
  checkComputed(state);
}

/** @param {unknown} n  @param {number} least  @returns {n is number} */
const whole = (n, least) => Number.isSafeInteger(n) && /** @type {number} */ (n) >= least;

/** What is wrong with a vision model's `image` beside its `count` tokens, or null: its grid of patches is
 * the tokens after the first `first`, its size that grid's pixels, its picture in the page itself.
 * Python's image_problem (payload.py), in the same words.
 * @param {unknown} image  @param {number} count  @returns {string | null} */
export function imageProblem(image, count) {
  if (image == null) return null;
  if (typeof image !== "object" || Array.isArray(image))
    return `'image' must be a vision model's image, {src, rows, cols, first, patch, size}; got ${show(image)}.`;
  const { rows, cols, first, patch, size, src } = /** @type {Record<string, unknown>} */ (image);
  if (!(whole(rows, 1) && whole(cols, 1) && whole(first, 0)))
    return `'image' rows, cols and first must be whole numbers (rows and cols 1 or more, first 0 or more); got rows ${show(rows)}, cols ${show(cols)}, first ${show(first)}.`;
  if (first + rows * cols !== count)
    return `'image' has ${rows} × ${cols} patches after ${first} other token${first === 1 ? "" : "s"}: ${first + rows * cols} tokens, but there are ${count}.`;
  const side = Array.isArray(patch) ? patch : [patch, patch];
  if (!(side.length === 2 && side.every((n) => whole(n, 1))))
    return `'image' patch must be a patch's side in pixels (a whole number, 1 or more) or [height, width]; got ${show(patch)}.`;
  const want = [rows * side[0], cols * side[1]];
  if (!(Array.isArray(size) && size.length === 2 && size[0] === want[0] && size[1] === want[1]))
    return `'image' size must be the [height, width] of its ${rows} × ${cols} patches of ${side[0]} × ${side[1]} pixels, ${show(want)}; got ${show(size)}.`;
  if (!(typeof src === "string" && src.startsWith("data:image/")))
    return "'image' src must be the image itself as a data: URL (data:image/…), which a page shows with no network.";
  return null;
}

/** What Python computed for the page agrees with the state it says it is for: one number per head, a
 * matrix for every layer or head it holds, value axes as wide as the values.
 * @param {PageState} state */
function checkComputed(state) {
  const heads = nHeads(state),
    layers = Math.max(1, state.n_layers || 0),
    all = layers * heads,
    shape = (/** @type {{ shape: number[] }} */ a) => JSON.stringify(a.shape);

  for (const [name, e] of Object.entries(state.measure_data || {})) {
    if (!e?.matrix?.shape) continue;
    const every = e.every ?? (e.matrix.shape.length === 3 ? ["layer"] : []),
      want = every.map((/** @type {string} */ axis) => (axis === "layer" ? layers : heads));
    if (e.matrix.shape.length !== want.length + 2 || want.some((/** @type {number} */ n, /** @type {number} */ i) => e.matrix.shape[i] !== n))
      throw new Refused(
        `${name}'s matrix has shape ${shape(e.matrix)}: for ${every.join(" and ") || "the state shown"} it must begin ${JSON.stringify(want)} (${layers} layers, ${heads} heads), then rows and columns`,
      );
  }
  const effects = state.head_effects;
  if (Array.isArray(effects) && effects.length !== all) throw new Refused(`head_effects holds ${effects.length} numbers: it must hold one per head, ${all}`);
  const thumbs = state.overview?.thumbs;
  if (thumbs?.shape && thumbs.shape[0] !== all) throw new Refused(`the overview holds ${thumbs.shape[0]} thumbnails: it must hold one per head, ${all}`);
  const basis = state.value_basis,
    d = state.v?.shape?.at(-1);
  if (basis?.shape && d != null && basis.shape.at(-2) !== d)
    throw new Refused(`value_basis has shape ${shape(basis)}: its axes must be as long as the values are wide (${d})`);
}

/** @param {Record<string, unknown>} o  @param {string[]} names */
const pick = (o, names) => Object.fromEntries(names.map((k) => [k, o[k]]));
