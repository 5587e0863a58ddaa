// The widget's rules, on plain state: the twin of src/attnwidget/rules/, with the same names
// and the same messages. No DOM, no model: a state is an object of every trait's value (arrays,
// {shape, dtype, view}, are only looked at for their shape and compared by identity), a change
// the values asked for. settle(state, change, sources, page) returns the complete new state or
// throws a Refused; validate gives its message, or null. The names and limits come from Python
// (state._constants). tests/test_rules_contract.py runs both twins on generated cases and
// compares every field: a rule changed on one side only fails it.

/** @typedef {import("./state").State} State */
/** @typedef {import("./state").Constants} Constants */
/** @typedef {import("./state").ArrayValue} ArrayValue */
/** @typedef {import("./state").MaskValue} MaskValue */
/** A state being settled: every field, each typed (a misspelt name fails the type check). @typedef {State} Settling */
/** A field named at run time (a change's, or a list's), as Python's setattr and getattr reach one: the
 * one place the rules index the state by a string.
 * @param {State} s  @param {keyof State} name  @param {unknown} value */
const setField = (s, name, value) => {
  /** @type {Record<string, unknown>} */ (/** @type {unknown} */ (s))[name] = value;
};
/** @param {State} s  @param {keyof State} name  @returns {unknown} */
const field = (s, name) => /** @type {Record<string, unknown>} */ (/** @type {unknown} */ (s))[name];
/** What a source brings in: a text's, block's or layer's tokens and arrays, and what goes with them.
 * @typedef {Partial<State> & { tokens: string[] } & Record<string, unknown>} Brought */
/**
 * What the rules bring in on a switch (a live page has none: the kernel brings them; an exported page's payload.js).
 * @typedef {object} Sources
 * @property {(i: number) => Brought} sentence  a text's tokens and arrays (a model's text: its every layer)
 * @property {(name: string) => Brought} block  a block's every layer, and its rules
 * @property {(block: string, layer: number, text?: number) => Brought} layer  a layer's own q, k, v, value axes (and mask, bias)
 * @property {(v: ArrayValue) => ArrayValue | null} basis  the value axes of new values
 */

export class Refused extends Error {}

// --- how values are said in messages: as Python says them ---

/** A number as Python's repr writes a float. @param {number} x  @returns {string} */
export function num(x) {
  if (Number.isNaN(x)) return "nan";
  if (!Number.isFinite(x)) return x > 0 ? "inf" : "-inf";
  if (x === 0) return Object.is(x, -0) ? "-0.0" : "0.0";
  const [mantissa, exp] = x.toExponential().split("e");
  const e = Number(exp);
  if (e < -4 || e >= 16) return `${mantissa}e${e < 0 ? "-" : "+"}${String(Math.abs(e)).padStart(2, "0")}`;
  const plain = String(x);
  return plain.includes(".") ? plain : `${plain}.0`;
}

/** A string as Python's repr writes it (printable ASCII and other text as it is). @param {string} s */
export function pyStr(s) {
  const quote = s.includes("'") && !s.includes('"') ? '"' : "'";
  let out = "";
  for (const c of s) {
    const code = /** @type {number} */ (c.codePointAt(0));
    if (c === "\\" || c === quote) out += `\\${c}`;
    else if (c === "\n") out += "\\n";
    else if (c === "\r") out += "\\r";
    else if (c === "\t") out += "\\t";
    else if (c !== " " && /[\p{C}\p{Z}]/u.test(c))
      // not printable, as Python's str.isprintable says: escaped as repr escapes it
      out +=
        code < 0x100
          ? `\\x${code.toString(16).padStart(2, "0")}`
          : code < 0x10000
            ? `\\u${code.toString(16).padStart(4, "0")}`
            : `\\U${code.toString(16).padStart(8, "0")}`;
    else out += c;
  }
  return quote + out + quote;
}

/** @param {unknown} v  @returns {v is number} */
const isInt = (v) => typeof v === "number" && Number.isInteger(v);
/** @param {unknown} v  @returns {v is number} */
const isNumber = (v) => typeof v === "number";

/** A value's kind, as Python names its type. @param {unknown} value */
export function kind(value) {
  if (value === null || value === undefined) return "None";
  if (typeof value === "boolean") return "bool";
  if (typeof value === "number") return Number.isInteger(value) ? "int" : "float";
  if (typeof value === "string") return "str";
  if (Array.isArray(value)) return "list";
  return "dict";
}

/** A value as Python's repr writes it. @param {unknown} value  @returns {string} */
export function show(value) {
  if (value === null || value === undefined) return "None";
  if (typeof value === "boolean") return value ? "True" : "False";
  if (typeof value === "number") return Number.isInteger(value) ? String(value) : num(value);
  if (typeof value === "string") return pyStr(value);
  if (Array.isArray(value)) return `[${value.map(show).join(", ")}]`;
  return kind(value);
}

/** @param {string[]} values */
const oneOf = (values) => values.map(pyStr).join(", ");
/** @param {{ shape: number[] } | null | undefined} a */
const fmtShape = (a) => (a == null ? "None" : a.shape.length === 1 ? `(${a.shape[0]},)` : `(${a.shape.join(", ")})`);
/** @param {number[]} a  @param {number[]} b */
const sameShape = (a, b) => a.length === b.length && a.every((n, i) => n === b[i]);

// --- one value at a time: its kind and its own range ---

/** @param {string} name  @param {unknown} value */
function index(name, value) {
  if (!isInt(value)) throw new Refused(`'${name}' must be an integer${name === "step" ? "" : " index"}, got ${show(value)}.`);
  return value;
}

/** @param {string} name  @param {unknown} value */
function flag(name, value) {
  if (value === 0 || value === 1) return value === 1; // as traitlets' Bool takes them
  if (typeof value !== "boolean") throw new Refused(`'${name}' must be True or False, got ${show(value)}.`);
  return value;
}

/** @param {string} name  @param {unknown} value  @param {string} what */
function number(name, value, what) {
  if (!isNumber(value)) throw new Refused(`'${name}' must be ${what}, got ${kind(value)} ${show(value)}.`);
  return value;
}

/** @param {string} name  @param {unknown} value  @param {boolean} allowNone  @returns {string[] | null} */
function textList(name, value, allowNone) {
  if (value == null && allowNone) return null;
  if (!Array.isArray(value)) throw new Refused(`'${name}' must be a list with one string per token, got ${kind(value)}.`);
  const bad = value.find((t) => typeof t !== "string");
  if (bad !== undefined)
    throw new Refused(`'${name}' must be strings, one per token; got ${kind(bad)} ${show(bad)}. Convert them with [str(t) for t in ${name}].`);
  return value.slice();
}

/** @param {unknown} v  @returns {v is ArrayValue | MaskValue} */
function isArray(v) {
  const a = /** @type {{ shape?: unknown, view?: unknown }} */ (v);
  return v !== null && typeof v === "object" && Array.isArray(a.shape) && a.view instanceof DataView;
}

const littleEndian = new Uint8Array(new Uint32Array([1]).buffer)[0] === 1;
/** A float array's `size` numbers: a typed view of its bytes where they are aligned and in this
 * machine's order (little-endian, as sent), else a copy read number by number.
 * @param {DataView} view  @param {number} width  @param {number} size */
function numbers(view, width, size) {
  /** @type {{ new (buffer: ArrayBufferLike, offset: number, size: number): Float32Array | Float64Array, new (size: number): Float32Array | Float64Array }} */
  const Typed = width === 8 ? Float64Array : Float32Array;
  if (littleEndian && view.byteOffset % width === 0) return new Typed(view.buffer, view.byteOffset, size);
  const out = new Typed(size);
  for (let i = 0; i < size; i++) out[i] = width === 8 ? view.getFloat64(i * 8, true) : view.getFloat32(i * 4, true);
  return out;
}

const scans = new WeakMap(); // an array ({shape, dtype, view}) -> what scan found: read once, however often checked
/** A float array's numbers, {dtype: "float32" | "float64", view}: {bad: the index of its first
 * number that is not finite, or -1; at: that number; top: its largest magnitude (Infinity when one
 * is not finite)}. Kept per array object: a page's new array is a new object, and one set again
 * (even over bytes written in place) is no change to check.
 * @param {{ dtype: string, view: DataView }} array  @returns {{ bad: number, at: number | null, top: number }} */
export function scan(array) {
  let found = scans.get(array);
  if (!found) {
    const width = array.dtype === "float64" ? 8 : 4,
      x = numbers(array.view, width, array.view.byteLength / width);
    let top = 0,
      bad = -1;
    for (let i = 0; i < x.length; i++) {
      const a = Math.abs(x[i]);
      if (!(a < Infinity)) {
        bad = i; // (NaN too: it is not below anything)
        break;
      }
      if (a > top) top = a;
    }
    found = { bad, at: bad < 0 ? null : x[bad], top: bad < 0 ? top : Infinity };
    scans.set(array, found);
  }
  return found;
}

/** An array a script gave the page: {shape, dtype, view}, finite (Python's trait types check the rest).
 * @param {string} name  @param {unknown} value  @param {Constants} C */
function array(name, value, C) {
  if (value == null) {
    if (["q", "k", "v", "tokens"].includes(name)) throw new Refused(`'${name}' must be an array of numbers, got None.`);
    return null;
  }
  if (!isArray(value)) throw new Refused(`an array from the page could not be read (${kind(value)}); expected {shape, dtype: float32 or float64, view}`);
  dims(name, value.shape);
  const dtype = name === "mask" ? "uint8" : null;
  if (dtype ? value.dtype !== dtype : value.dtype !== "float32" && value.dtype !== "float64")
    throw new Refused(`an array from the page could not be read (dtype ${value.dtype}); expected {shape, dtype: ${dtype || "float32 or float64"}, view}`);
  const size = value.shape.reduce((a, b) => a * b, 1),
    width = value.dtype === "float64" ? 8 : value.dtype === "uint8" ? 1 : 4;
  if (value.view.byteLength !== size * width)
    throw new Refused(`an array from the page could not be read (${value.view.byteLength} bytes for shape ${fmtShape(value)})`);
  if (size === 0) throw new Refused(`'${name}' must not be empty, got shape ${fmtShape(value)}`);
  if (dtype)
    for (let i = 0; i < size; i++) if (value.view.getUint8(i) > 1) throw new Refused("'mask' must be booleans, or exactly 0 and 1 (True where a row may read)");
  if (!dtype) {
    const { bad, at, top } = scan(value);
    if (bad >= 0) throw new Refused(`'${name}' must be finite; found ${num(/** @type {number} */ (at))}`);
    if (top > C.entry_limit) throw new Refused(`'${name}' entries must be at most 1e+300 in size: divide the array by a constant.`);
  }
  return value;
}

// each array's dimensions, as Python's trait types say them
/** @type {Record<string, [number[], string]>} */
const DIMS = {
  q: [[2, 3], "tokens × width or heads × tokens × width"],
  k: [[2, 3], "tokens × width or heads × tokens × width"],
  v: [[2, 3], "tokens × width or heads × tokens × width"],
  bias: [[2, 3], "tokens × width or heads × tokens × width"],
  x: [[2], "tokens × width"],
  mask: [[2], "queries × keys booleans (True where a row may read)"],
};

/** @param {string} name  @param {number[]} shape */
function dims(name, shape) {
  const [allowed, said] = DIMS[name];
  if (!allowed.includes(shape.length))
    throw new Refused(`'${name}' must be ${allowed.join("-D or ")}-D (${said}), got ${shape.length}-D with shape ${fmtShape({ shape })}`);
}

/** Why scores of these arrays could not be computed in float64, or null (core.overflow_message's twin).
 * @param {Pick<State, "q" | "k" | "scale" | "bias">} arrays  @returns {string | null} */
export function overflow({ q, k, scale, bias }) {
  /** @param {number} x */
  const e = (x) => (Number.isFinite(x) ? x.toExponential(1) : "inf");
  /** @param {ArrayValue | null} a */
  const top = (a) => (a == null ? 0 : scan(a).top);
  const d = q.shape[q.shape.length - 1],
    s = scale == null ? 1 / Math.sqrt(d) : Math.abs(scale),
    dot = d * top(q) * top(k),
    bound = Math.max(dot, s * dot),
    b = top(bias);
  if (bound <= 1e300 && bound + b <= 1e300) return null;
  if (bound <= 1e300) return `scale·q·k (up to about ${e(bound)}) plus the bias (up to ${e(b)}) would overflow float64; keep their sum below 1e+300.`;
  return `q and k are so large that their dot products or scores (up to about ${e(bound)}) would overflow float64; divide q or k by a constant so that d·max|q|·max|k| and the score stay below 1e+300.`;
}

/** The arrays a widget's state holds of its own (a page or a script may set them). @typedef {"q" | "k" | "v" | "x" | "mask" | "bias"} OwnArray */
/** @type {OwnArray[]} */
export const ARRAYS = ["q", "k", "v", "x", "mask", "bias"];
/** The changes that bring in another sentence's, layer's or block's arrays (from the kernel, or a page's sources). @type {(keyof State)[]} */
export const BRINGS_IN = ["sentence_index", "layer", "block"];

/** Whether `value` is one of a field's choices (a list of its literal type, asked of any string). @param {readonly string[]} choices  @param {string} value */
const among = (choices, value) => choices.includes(value);

/** A field's value as the state holds it, or Refused: its kind and its own range. @param {string} name  @param {unknown} value  @param {Constants} C  @returns {unknown} */
export function check(name, value, C) {
  if (name === "kv_budget") {
    if (!isInt(value) || value < 1) throw new Refused(`'kv_budget' must be a whole number ≥ 1 (the keys each head keeps), got ${show(value)}.`);
    return value;
  }
  if (name === "kv_keys") {
    if (!Array.isArray(value) || !value.every((j) => isInt(j) && j >= 0))
      throw new Refused(`'kv_keys' must be a list of key positions (whole numbers ≥ 0), got ${show(value)}.`);
    return [...new Set(value)].sort((a, b) => a - b);
  }
  if (/** @type {string[]} */ (C.indices).includes(name)) return index(name, value);
  if (/** @type {string[]} */ (C.flags).includes(name)) return flag(name, value);
  if (name === "temperature") {
    const t = number(name, value, "a finite number > 0");
    if (!(Number.isFinite(t) && t > 0)) {
      const [lo, hi] = C.temperature_range;
      throw new Refused(`'temperature' must be a finite number > 0 (the slider spans ${num(lo)} to ${num(hi)}), got ${num(t)}.`);
    }
    return t;
  }
  if (name === "scale") {
    if (value == null) return null;
    const s = number(name, value, "a number, or None for 1/√d");
    if (!(Number.isFinite(s) && Math.abs(s) <= C.scale_limit))
      throw new Refused(`'scale' must be a finite number no larger than 1e+10 in size, or None for 1/√d; got ${num(s)}.`);
    return s;
  }
  if (name === "softcap") {
    if (value == null) return null;
    const c = number(name, value, "a number > 0, or None for no cap");
    if (!(Number.isFinite(c) && c > 0 && c <= C.scale_limit))
      throw new Refused(
        `'softcap' must be a finite number > 0 and no larger than 1e+10 (scores become softcap·tanh(s/softcap)), or None for no cap; got ${num(c)}.`,
      );
    return c;
  }
  if (name === "position") {
    if (typeof value !== "string" || !(among(C.positions, value) || among(C.model_positions, value)))
      throw new Refused(`'position' must be one of ${oneOf(C.positions)}; got ${show(value)}.`);
    return value;
  }
  if (name === "rope_base") {
    const b = number(name, value, "a number > 1");
    if (!(Number.isFinite(b) && b > 1 && b <= C.scale_limit))
      throw new Refused(
        `'rope_base' must be a finite number > 1 and no larger than 1e+10 (pair i of a vector turns by position × base^(−2i/width)); got ${num(b)}.`,
      );
    return b;
  }
  if (name === "alibi_slopes") {
    if (value == null) return null;
    if (!Array.isArray(value) || !value.every(isNumber))
      throw new Refused(
        `'alibi_slopes' must be a list of numbers, one slope m per head (−m·|i − j| is added to the scores), or None for 2^(−8h/H); got ${show(value)}.`,
      );
    if (!value.every((m) => Number.isFinite(m) && m >= 0 && m <= C.scale_limit))
      throw new Refused(`'alibi_slopes' must be finite slopes ≥ 0 and no larger than 1e+10; got [${value.map(num).join(", ")}].`);
    return value.slice();
  }
  if (name === "sinks") {
    if (value == null) return null;
    if (!Array.isArray(value) || !value.every(isNumber))
      throw new Refused(
        `'sinks' must be a list of numbers, one learnt sink logit per head (one more column of each row's softmax, which no token gets), or None for none; got ${show(value)}.`,
      );
    if (!value.every((z) => Number.isFinite(z) && Math.abs(z) <= C.entry_limit))
      throw new Refused(`'sinks' must be finite logits, each at most 1e+300 in size; got [${value.map(num).join(", ")}].`);
    return value.slice(); // (held whole, as alibi_slopes)
  }
  if (name === "goal") {
    const g = number(name, value, "a number of effective tokens");
    if (!(Number.isFinite(g) && g >= 1))
      throw new Refused(`'goal' is a number of effective tokens, at least 1 (one token takes the whole budget); got ${num(g)}.`);
    return g;
  }
  if (name === "stage") {
    if (typeof value !== "string" || !among(C.stages, value)) throw new Refused(`'stage' must be one of ${C.stages.join(", ")}; got ${show(value)}.`);
    return value;
  }
  for (const [field, allowed] of /** @type {[string, string[]][]} */ ([
    ["exercise", C.exercises.filter((e) => e)],
    ["summary", C.summaries],
    ["measure", C.measures],
    ["kv_method", C.kv_methods],
  ]))
    if (name === field) {
      if (typeof value !== "string" || !(value === "" || allowed.includes(value)))
        throw new Refused(`'${name}' must be one of ${oneOf(allowed)}, or '' for none; got ${show(value)}.`);
      return value;
    }
  if (name === "block") {
    if (typeof value !== "string") throw new Refused(`'block' must be a block's name, got ${show(value)}.`);
    return value;
  }
  if (name === "cell") {
    if (value == null) return null;
    if (!Array.isArray(value) || value.length !== 2 || !value.every(isInt))
      throw new Refused(`'cell' must be (row, column), two integer indices, or None; got ${show(value)}.`);
    return [value[0], value[1]];
  }
  if (name === "guess") {
    if (value == null) return null;
    if (!Array.isArray(value) || !value.every(isNumber))
      throw new Refused(`'guess' must be a list of weights, one per token the focused row reads, or None; got ${show(value)}.`);
    return value.slice();
  }
  if (name === "tokens" || name === "key_tokens" || name === "value_axes") return textList(name, value, name === "key_tokens");
  if (/** @type {string[]} */ (ARRAYS).includes(name)) return array(name, value, C);
  return value;
}

// --- the state's own measures ---

/** @param {Pick<State, "q">} s */
export const nHeads = (s) => (s.q == null || s.q.shape.length === 2 ? 1 : s.q.shape[0]);
/** What a live page gets of a model's layer one head at a time (the head shown): its layered
 * arrays (C.layered), and of attention weights alone the bias too (rules/values.py's by_head).
 * @param {Pick<State, "weights_only">} s  @param {Constants} C  @returns {(keyof State)[]} */
export const byHead = (s, C) => [.../** @type {(keyof State)[]} */ (Object.keys(C.layered)), ...(s.weights_only ? /** @type {const} */ (["bias"]) : [])];
/** Still writing: only the first `step` tokens exist. @param {Pick<State, "step" | "tokens">} s */
export const writing = (s) => 0 < (s.step || 0) && s.step < s.tokens.length;
/** A text may be written one token at a time: the numbers of its first `step` tokens are the prefix's own
 * (your own arrays and the lab's; a model's widget only where the model, or the block shown, reads causally).
 * @param {Pick<State, "n_layers" | "layer_shown" | "model_causal">} s */
export const mayWrite = (s) => !s.n_layers || !s.layer_shown || !!s.model_causal;
/** A differential attention model's layer is shown (its λ known): the difference map can be. @param {Partial<State>} s */
export const differential = (s) => !!s.model_lambda?.length && !!s.layer_shown;

/** The text the difference compares text `shown` with: the next of as many tokens (`lengths`: each
 * text's), or a thrown Refused saying why there is none.
 * @param {number[]} lengths  @param {number} shown  @param {Constants} C  @returns {number} */
export function otherText(lengths, shown, C) {
  if (lengths.length < 2) throw new Refused(C.two_texts);
  for (let i = 1; i < lengths.length; i++) {
    const t = (shown + i) % lengths.length; // the next text on, round to those before
    if (lengths[t] === lengths[shown]) return t;
  }
  throw new Refused(
    `difference needs another text of ${lengths[shown]} tokens, as text ${shown} has (the texts have ${lengths.join(", ")}): it compares the weights cell by cell, so give a minimal pair.`,
  );
}

/** How many tokens read: all of them, or while writing the first `step`. @param {Pick<State, "step" | "tokens">} s */
export const rows = (s) => (writing(s) ? s.step : s.tokens.length);
/** How many tokens a row reads: the tokens written, or cross-attention's own.
 * @param {Pick<State, "step" | "tokens" | "cross" | "key_tokens">} s */
export const keysRead = (s) => (s.cross ? /** @type {string[]} */ (s.key_tokens).length : rows(s)); // (cross-attention's are given)

/** The tokens `row` may not read (the causal rule, the mask, the sink), of those it reads.
 * @param {State} s  @param {number} row */
export function closedKeys(s, row) {
  const m = keysRead(s),
    mask = s.mask,
    cols = mask ? mask.shape[1] : 0,
    /** @type {number[]} */
    out = [];
  for (let j = 0; j < m; j++) if ((s.causal && j > row) || (s.sink && j === 0) || (mask && !mask.view.getUint8(row * cols + j))) out.push(j);
  return out;
}

/** @param {Pick<State, "step" | "tokens">} s */
const soFar = (s) => (writing(s) ? ` written so far (step ${s.step} of ${s.tokens.length}: advance step to reach later tokens)` : "");

/** Where the layer shown is among the layers held: its place in layer_numbers (the model's own
 * numbers), or the layer itself where those are 0 to n_layers − 1; −1 for a number not held.
 * @param {Pick<State, "layer" | "layer_numbers">} s */
export const layerIndex = (s) => (s.layer_numbers?.length ? s.layer_numbers.indexOf(s.layer) : s.layer);

/** The model's own number of the layer held at `index` (layerIndex's inverse). @param {Pick<State, "layer_numbers">} s  @param {number} index */
export const layerNumber = (s, index) => (s.layer_numbers?.length ? s.layer_numbers[index] : index);

/** The layer to show after a switch of text or block: the one shown, where the new one holds it; else the
 * nearest held below it (the first held when none is). @param {Settling} s */
function heldLayer(s) {
  const numbers = s.layer_numbers || [];
  if (!numbers.length) return Math.min(s.layer, s.n_layers - 1);
  const below = numbers.filter((x) => x <= s.layer);
  return below.length ? Math.max(...below) : numbers[0];
}

/** @param {Settling} s */
function checkLayer(s) {
  const numbers = s.layer_numbers || [];
  if (!numbers.length) return inRange("layer", s.layer, Math.max(1, s.n_layers || 0), "a layer index");
  if (numbers.includes(s.layer)) return;
  const kinds = s.layer_kinds || [],
    kind = 0 <= s.layer && s.layer < kinds.length ? kinds[s.layer] : "";
  const why = kind ? ` (the model's layer ${s.layer} is ${kind}: it computes no attention weights)` : "";
  throw new Refused(`'layer' must be one of the model's layers with attention weights, by its own number: ${numbers.join(", ")}; got ${s.layer}${why}.`);
}

/** @param {string} name  @param {number} value  @param {number} count  @param {string} what */
function inRange(name, value, count, what) {
  if (!(0 <= value && value < count)) throw new Refused(`'${name}' must be ${what} from 0 to ${count - 1}, got ${value}.`);
}

/** Unchanged: the same array object (each assignment stores a new one), or an equal value. @param {unknown} a  @param {unknown} b */
export function same(a, b) {
  if (a === b) return true;
  if (a == null || b == null || typeof a !== "object" || typeof b !== "object") return false;
  if (isArray(a) || isArray(b)) return false;
  return Array.isArray(a) && Array.isArray(b) && a.length === b.length && a.every((x, i) => x === b[i]);
}

// --- the whole change ---

/** The message that refuses `change`, or null when it is accepted.
 * @param {State} state  @param {Record<string, unknown>} change  @param {Sources | null} [sources]  @param {boolean} [page]
 * @returns {string | null} */
export function validate(state, change, sources = null, page = false) {
  try {
    settle(state, change, sources, page);
  } catch (err) {
    if (err instanceof Refused) return err.message;
    throw err;
  }
  return null;
}

/** The complete state after `change` and every follow-up, or a thrown Refused. `page`: the change
 * came from a page, which may set only the writable traits. (Fields besides the state's, an exported page's, are kept.)
 * @template {State} S  @param {S} state  @param {Record<string, unknown>} change  @param {Sources | null} [sources]  @param {boolean} [page]
 * @returns {S} */
export function settle(state, change, sources = null, page = false) {
  const C = state._constants;
  if (page) {
    const refused = Object.keys(change).filter((k) => !(/** @type {string[]} */ (C.writable).includes(k)));
    if (refused.length) throw new Refused(`the page may not set ${refused.map(pyStr).join(", ")} (read-only, private or unknown)`);
  }
  const s = /** @type {Settling} */ ({ ...state }),
    before = /** @type {Settling} */ (state);
  const names = /** @type {(keyof State)[]} */ (Object.keys(change)); // (each checked by name below: an unknown one is refused)
  for (const name of names) setField(s, name, check(name, change[name], C));
  const asked = new Set(names.filter((n) => !same(field(s, n), field(before, n)))); // a value as it was is no change (traitlets' rule too)
  if (asked.has("bias") && s.weights_only) throw new Refused(C.weights_bias);
  if (asked.has("summary") && s.summary === "effect" && !s.next_token) throw new Refused(C.no_effect);
  if (asked.has("summary") && (s.summary === "induction" || s.summary === "retrieval") && !s.reads_model) throw new Refused(C.no_induction);
  if (asked.has("qk_map") && s.qk_map && s.weights_only) throw new Refused(C.no_qk_map);
  if (asked.has("summary") && s.summary === "sink_share" && s.sinks == null) throw new Refused(C.no_sinks);
  if (
    asked.has("sinks") &&
    s.sinks != null &&
    s.layer_shown &&
    s.model_sinks == null &&
    !(/** @type {(keyof State)[]} */ (["q", "k", "v"]).some((n) => asked.has(n)))
  )
    throw new Refused(C.model_sinks); // (your own arrays with them: not the model's layer any more)
  position(s, before, asked, C);
  if (asked.has("key_tokens")) s.cross = s.key_tokens != null; // the columns' own labels: cross-attention; null: self-attention again
  bringIn(s, before, asked, sources);
  if (!s.cross) s.key_tokens = s.tokens; // the columns are the tokens themselves
  const changed = new Set(asked);
  for (const n of fields(C)) if (n in s && !same(field(s, n), field(before, n))) changed.add(n);
  fit(s, before, asked, changed, sources);
  checkState(s);
  if (asked.has("measure") && s.measure === "difference") otherText(s.text_lengths || [], s.sentence_index, C); // two texts of as many tokens (the panel's reason)
  return /** @type {S} */ (s);
}

/** @param {Constants} C */
const fields = (C) => [...C.writable, ...C.read_only];

/** The lab chooses where position enters; a model's q and k carry its own (set as it loads).
 * @param {Settling} s  @param {Settling} before  @param {Set<string>} asked  @param {Constants} C */
function position(s, before, asked, C) {
  const turned = ["position", "rope_base", "alibi_slopes"].filter((n) => asked.has(n));
  if (turned.length && (s.n_layers || s.weights_only) && !asked.has("model_q"))
    throw new Refused(
      `'${turned[0]}' is for your own queries and keys: this model's carry its own position already (${before.position || "unknown"}). Try 'rope' or 'alibi' on a widget of your own arrays (AttentionWidget(), or tokens=, q=, k=, v=).`,
    );
  if (asked.has("position") && !s.n_layers && !C.positions.includes(s.position))
    throw new Refused(`'position' must be one of ${oneOf(C.positions)}; got ${show(s.position)}.`);
}

/** settle(), then the numbers' own check (overflow): what both pages run for a proposed change.
 * @template {State} S  @param {S} state  @param {Record<string, unknown>} change  @param {Sources | null} [sources]  @param {boolean} [page]
 * @returns {S} */
export function settleChecked(state, change, sources = null, page = false) {
  const s = settle(state, change, sources, page);
  if (/** @type {const} */ (["q", "k", "scale", "bias"]).some((n) => !same(s[n], state[n]))) {
    const problem = overflow(s);
    if (problem) throw new Refused(problem);
  }
  return s;
}

/** A sentence's, block's or layer's arrays, with what goes with them.
 * @param {Settling} s  @param {Settling} before  @param {Set<string>} asked  @param {Sources | null} sources */
function bringIn(s, before, asked, sources) {
  if (asked.has("sentence_index") && sources && 0 <= s.sentence_index && s.sentence_index < (s.sentences || []).length) {
    const ex = sources.sentence(s.sentence_index);
    const old = before.tokens || [];
    const word = 0 <= s.focus && s.focus < old.length ? old[s.focus].toLowerCase() : null;
    const lowered = ex.tokens.map((t) => t.toLowerCase());
    s.cross = false; // a sentence is self-attention, whatever came before
    if ("model_q" in ex) {
      // a model's text: its every layer, brought in as a block's are
      s.tokens = ex.tokens;
      for (const name of s._constants.stack) setField(s, name, ex[name] ?? (name === "mask_of_layer" ? [] : null));
      for (const name of /** @type {const} */ (["bias", "step"])) if (!asked.has(name)) setField(s, name, ex[name]); // its own position bias, and the step it opens at, unless this change sets them
      if (!asked.has("layer")) s.layer = heldLayer(s);
      asked = new Set([...asked, "layer"]);
    } else for (const name of /** @type {const} */ (["tokens", "q", "k", "v", "x", "value_basis"])) setField(s, name, ex[name]);
    if (word !== null && lowered.includes(word) && !asked.has("focus")) s.focus = lowered.indexOf(word); // the same word in the new sentence
    s.cell = null;
  }
  // (a block set while the widget is made is loaded already, with the rules it was given)
  if (asked.has("block") && sources && (s.blocks || []).includes(s.block) && before.block) {
    const found = sources.block(s.block);
    for (const name of s._constants.stack) setField(s, name, found[name] ?? (name === "mask_of_layer" ? [] : null));
    if (!asked.has("step")) s.step = found.tokens.length; // another text: shown written whole
    for (const name of /** @type {const} */ (["causal", "scale", "softcap", "bias"])) if (!asked.has(name)) setField(s, name, found[name]); // the block's own rules, unless this change sets them
    s.model_causal = !!found.causal; // (what the block itself reads, whatever the widget's causal)
    if (!asked.has("layer")) s.layer = heldLayer(s); // the same layer, where the block has it
    asked = new Set([...asked, "layer"]);
  }
  const blocks = s.blocks || [],
    texts = (s.sentences || []).length,
    known = blocks.length ? blocks.includes(s.block) : !s.block; // (an unknown block is refused below)
  const text = texts ? s.sentence_index : 0; // a model's text shown (the sentences are its texts)
  if (
    (asked.has("layer") || asked.has("model_q")) &&
    sources &&
    known &&
    0 <= layerIndex(s) &&
    layerIndex(s) < (s.n_layers || 0) &&
    0 <= text &&
    text < Math.max(1, texts)
  ) {
    const found = sources.layer(s.block || "", layerIndex(s), text);
    s.tokens = found.tokens;
    s.cross = found.key_tokens != null;
    if (s.cross) s.key_tokens = /** @type {string[]} */ (found.key_tokens);
    for (const name of /** @type {const} */ (["q", "k", "v", "value_basis"])) if (name !== "value_basis" || !asked.has(name)) setField(s, name, found[name]);
    if ("mask" in found && !asked.has("mask")) s.mask = /** @type {MaskValue | null} */ (found.mask); // the layer's own mask (a sliding window, local attention)
    if ("bias" in found && !asked.has("bias")) s.bias = /** @type {ArrayValue | null} */ (found.bias); // the layer's own bias (attention weights alone: their logarithms)
    if ("terms" in found) s.terms = /** @type {ArrayValue | null} */ (found.terms); // the first term of that bias (DeBERTa's c2p)
    if ("sinks" in found && !asked.has("sinks")) s.sinks = /** @type {number[] | null} */ (found.sinks); // the layer's own learnt sinks (null: a model without)
    s.layer_shown = true;
  } else if (["q", "k", "v"].some((n) => asked.has(n)) && s.layer_shown) s.layer_shown = false; // your own arrays now, not the layer's
}

/** Everything else made to fit the new tokens, heads and values.
 * @param {Settling} s  @param {Settling} before  @param {Set<string>} asked  @param {Set<string>} changed  @param {Sources | null} sources */
function fit(s, before, asked, changed, sources) {
  const n = s.tokens.length,
    m0 = /** @type {string[]} */ (s.key_tokens).length; // (the tokens themselves, unless cross-attention's own)
  const { x, v, q } = s;
  if (x != null && !changed.has("x") && v != null && !sameShape(x.shape, [n, v.shape[v.shape.length - 1]])) s.x = null; // embeddings for other tokens or values
  if (s.mask != null && !changed.has("mask") && !sameShape(s.mask.shape, [n, m0])) s.mask = null; // a mask for other tokens
  const b = s.bias;
  if (
    b != null &&
    !changed.has("bias") &&
    (!sameShape(b.shape.slice(-2), [n, m0]) || (b.shape.length === 3 && (q.shape.length !== 3 || q.shape[0] !== b.shape[0])))
  )
    s.bias = null; // a bias for other tokens, or other heads
  if (s.terms != null && (asked.has("bias") || s.bias == null)) s.terms = null; // the terms of the model's own bias only
  if (s.x == null && s.residual && !changed.has("residual")) s.residual = false; // nothing to add the mix to
  if (s.difference_map && !differential(s) && !asked.has("difference_map")) s.difference_map = false; // your own arrays: no layer's λ
  const oldN = (before.tokens || []).length,
    stepped = asked.has("step");
  const brought = s.step != null && s.step !== before.step; // a model's text opens at its own step
  if (!stepped && (s.step == null || (!brought && n !== oldN && (s.step === oldN || s.step > n)))) s.step = n; // every token written stays so (a new widget's: all); a step past the new tokens, the last
  if (s.cross && 0 < s.step && s.step < n && !stepped) s.step = n; // cross-attention reads the whole source: written whole
  if (s.step !== before.step || stepped) {
    if (0 < s.step && s.step < n) {
      if (!s.causal && asked.has("causal")) throw new Refused(s._constants.generation_is_causal);
      s.causal = true; // a text written one token at a time: no token reads ahead
    }
  } else if (asked.has("causal") && !s.causal && 0 < s.step && s.step < n) throw new Refused(s._constants.generation_is_causal);
  if (stepped && !changed.has("focus") && (before.step || s.focus >= rows(s))) s.focus = rows(s) - 1; // the row the new token adds
  const r = rows(s),
    m = keysRead(s);
  if (r && !asked.has("focus") && s.focus >= r) s.focus = r - 1;
  let cell = s.cell;
  if (!changed.has("cell") && cell != null && (cell[0] >= r || cell[1] >= m)) s.cell = cell = null;
  // the cell shown is always in the focused row: the arcs and readout are about its reader
  if (cell != null && cell[0] !== s.focus) {
    if (changed.has("cell") && !changed.has("focus")) s.focus = cell[0];
    else s.cell = null;
  }
  if (s.alibi_slopes != null && !asked.has("alibi_slopes") && s.alibi_slopes.length !== nHeads(s)) s.alibi_slopes = null; // slopes for other heads: the default's again
  if (s.sinks != null && !asked.has("sinks") && s.sinks.length !== nHeads(s)) s.sinks = null; // sinks of other heads: none
  if (s.sinks == null && s.summary === "sink_share" && !asked.has("summary")) s.summary = ""; // no sinks left to colour the heads by
  if (!changed.has("head") && s.head >= nHeads(s)) s.head = nHeads(s) - 1;
  if (changed.has("v") && !changed.has("value_basis") && !same(s.v, before.v)) s.value_basis = sources ? sources.basis(s.v) : null;
  // an exercise is about one row as it is: anything that changes that row starts a new try; a
  // new guess after a reveal is a new try too (a guess sent with the change is for the new row;
  // the temperature exercise's reveal sent with the slider's last value is of that value)
  const kept = asked.has("guess") || (s.exercise === "temperature" && asked.has("revealed") && before.exercise === "temperature");
  if ((s.exercise || before.exercise) && !kept && s._constants.row_traits.some((k) => !same(s[k], before[k]))) {
    s.guess = null;
    s.revealed = false;
  } else if (changed.has("guess") && !asked.has("revealed")) s.revealed = false;
}

/** The settled state holds together, or the change is refused with what did not fit. @param {State} s */
export function checkState(s) {
  const { tokens, key_tokens, cross, q, k, v, x, mask, bias } = s;
  for (const name of /** @type {const} */ (["tokens", "key_tokens"]))
    if (/** @type {string[]} */ (s[name]).length === 0)
      throw new Refused(`'${name}' must not be empty: give one string per row of ${name === "tokens" ? "q" : "k and v"}.`);
  /** @param {{ shape: number[] }} a  @param {number} i */
  const last = (a, i) => a.shape[a.shape.length + i];
  if (bias != null && ((!cross && last(bias, -1) !== last(bias, -2)) || (bias.shape.length === 3 && (q.shape.length !== 3 || bias.shape[0] !== q.shape[0]))))
    throw new Refused(`'bias' must be tokens × tokens, or heads × tokens × tokens with q's heads; got ${fmtShape(bias)} beside q ${fmtShape(q)}.`);
  if (mask != null && !cross && mask.shape[0] !== mask.shape[1])
    throw new Refused(`'mask' must be n×n booleans (True where a row may read), tokens × tokens; got shape ${fmtShape(mask)}.`);
  /** @type {[string, ArrayValue][]} */
  const arrays = [
    ["q", q],
    ["k", k],
    ["v", v],
  ];
  if (new Set(arrays.map(([, a]) => a.shape.length)).size > 1 || new Set(arrays.filter(([, a]) => a.shape.length === 3).map(([, a]) => a.shape[0])).size > 1)
    throw new Refused(`q, k and v must all be 2-D, or all 3-D with the same number of heads; got ${arrays.map(([n, a]) => `${n} ${fmtShape(a)}`).join(", ")}.`);
  if (last(q, -1) !== last(k, -1))
    throw new Refused(`'q' and 'k' must have the same width (they are compared by dot product), got q ${fmtShape(q)} and k ${fmtShape(k)}.`);
  /** @param {{ shape: number[] } | null} a  @param {number} i */
  const dim = (a, i) => (a == null ? null : i < 0 ? last(a, i) : a.shape[i]);
  /** @param {[string, number | null][]} pairs */
  const present = (pairs) => pairs.filter(([, c]) => c != null);
  const rowCounts = present([
    ["tokens", tokens.length],
    ["q", last(q, -2)],
    ["x", dim(x, 0)],
    ["mask", dim(mask, 0)],
    ["bias", dim(bias, -2)],
  ]);
  const colCounts = present([
    ...(cross ? /** @type {[string, number][]} */ ([["key_tokens", /** @type {string[]} */ (key_tokens).length]]) : []),
    ["k", last(k, -2)],
    ["v", last(v, -2)],
    ["mask", dim(mask, 1)],
    ["bias", dim(bias, -1)],
  ]);
  /** @param {[string, number | null][]} pairs */
  const said = (pairs) => pairs.map(([n, c]) => `${n}: ${c}`).join(", ");
  if (!cross && new Set([...rowCounts, ...colCounts].map(([, c]) => c)).size > 1) {
    const rowNames = new Set(rowCounts.map(([n]) => n));
    let told =
      said(rowCounts) +
      colCounts
        .filter(([n]) => !rowNames.has(n))
        .map(([n, c]) => `, ${n}: ${c}`)
        .join("");
    for (const [n, a] of /** @type {[string, MaskValue | ArrayValue | null][]} */ ([
      ["mask", mask],
      ["bias", bias],
    ]))
      if (a != null) told += `, ${n} columns: ${last(a, -1)}`;
    throw new Refused(
      `tokens, q, k, v (and x, mask, bias) must agree on the number of tokens, got ${told}. ` +
        "To change the number of tokens, replace them together with set_vectors(tokens=, q=, k=, v=); " +
        "for keys from another text (cross-attention), pass key_tokens= too.",
    );
  }
  for (const [group, told, what] of /** @type {[[string, number | null][], string, string][]} */ ([
    [rowCounts, "tokens, q (and x, mask and bias rows)", "rows (queries)"],
    [colCounts, "key_tokens, k, v (and mask and bias columns)", "columns (keys)"],
  ]))
    if (cross && new Set(group.map(([, c]) => c)).size > 1)
      throw new Refused(
        `In cross-attention ${told} must agree on the number of ${what}, got ${said(group)}. Replace them together with set_vectors(tokens=, key_tokens=, q=, k=, v=).`,
      );
  if ((s.position === "rope" || s.position === "alibi") && !s.n_layers && cross)
    throw new Refused(
      `position=${show(s.position)} counts the rows and the columns as places in one text; in cross-attention the columns are another text's tokens: set position='none' for it.`,
    );
  if (s.position === "rope" && !s.n_layers && last(q, -1) % 2)
    throw new Refused(
      `position='rope' turns pairs of numbers: q and k need an even width, got ${last(q, -1)}. Give vectors of an even width, or set position='none' or 'alibi'.`,
    );
  if (s.alibi_slopes != null && s.alibi_slopes.length !== nHeads(s))
    throw new Refused(`'alibi_slopes' must have one slope per head (${nHeads(s)}), got ${s.alibi_slopes.length}.`);
  if (s.sinks != null && s.sinks.length !== nHeads(s)) throw new Refused(`'sinks' must have one sink logit per head (${nHeads(s)}), got ${s.sinks.length}.`);
  if (x != null && x.shape[1] !== last(v, -1))
    throw new Refused(`'x' must have the width of the values (the mix is added to it): v ${fmtShape(v)}, x ${fmtShape(x)}.`);
  const n = tokens.length;
  if (!(1 <= s.step && s.step <= n))
    throw new Refused(`'step' must be the number of tokens written so far, from 1 to ${n} (${n} shows them all); got ${s.step}.`);
  if (writing(s) && cross)
    throw new Refused(
      "'step' below the number of tokens is for self-attention (a text written one token at a time); in cross-attention set it to the number of tokens.",
    );
  if (writing(s) && !mayWrite(s)) throw new Refused(s._constants.reads_both_ways);
  const r = rows(s),
    m = keysRead(s),
    cell = s.cell;
  if (cell != null && !(0 <= cell[0] && cell[0] < r && 0 <= cell[1] && cell[1] < m)) {
    const span = r === m ? `both from 0 to ${r - 1}` : `row from 0 to ${r - 1} and column from 0 to ${m - 1}`;
    throw new Refused(`'cell' must be (row, column) with ${span}, or None; got (${cell[0]}, ${cell[1]}).`);
  }
  inRange("focus", s.focus, r, `a token index${soFar(s)}`);
  inRange("head", s.head, nHeads(s), "a head index");
  checkLayer(s);
  inRange("sentence_index", s.sentence_index, Math.max(1, (s.sentences || []).length), "a sentence index");
  const blocks = s.blocks || [];
  if (blocks.length ? !blocks.includes(s.block) : s.block !== "") {
    const have = blocks.length ? `one of ${oneOf(blocks)}` : "'' (only an encoder–decoder model has blocks)";
    throw new Refused(`'block' must be ${have}; got ${show(s.block)}.`);
  }
  if (s.residual && x == null) throw new Refused("'residual' needs token embeddings: pass x= (tokens × value width) first.");
  if (s.difference_map && !differential(s)) throw new Refused(s._constants.no_difference);
  if (s.difference_map && s.exercise) throw new Refused(s._constants.difference_exercise);
  if (s.exercise === "predict" && s.sinks != null && s.sinks[Math.min(s.head, s.sinks.length - 1)] > -1e29) throw new Refused(s._constants.sink_exercise);
  const unknown = s._constants.weights_only[s.weights_only || ""] || {};
  if (unknown[s.stage]) throw new Refused(unknown[s.stage]);
  checkExercise(s, m);
}

/** @param {State} s  @param {number} m */
function checkExercise(s, m) {
  const guess = s.guess;
  if (guess != null) {
    if (s.exercise !== "predict") throw new Refused("'guess' belongs to the predict exercise: set exercise='predict' first.");
    if (guess.length !== m) throw new Refused(`'guess' must have one weight per token the focused row reads (${m}), got ${guess.length}.`);
    if (!guess.every((g) => Number.isFinite(g) && g >= 0)) throw new Refused(`'guess' must be finite weights ≥ 0; got [${guess.map(num).join(", ")}].`);
    const total = fsum(guess);
    if (Math.abs(total - 1) > s._constants.guess_tolerance)
      throw new Refused(
        `'guess' must spend the whole budget: its weights must sum to 1 (within 1e-6), got ${num(Number(total.toPrecision(9)))}. Divide it by its sum.`,
      );
    const shut = closedKeys(s, s.focus).filter((j) => guess[j] !== 0);
    if (shut.length)
      throw new Refused(
        `'guess' puts weight on tokens the focused row cannot read (the causal rule, the mask or the sink close them): ${shut.join(", ")}. Give them 0.`,
      );
  }
  if (s.revealed && !s.exercise) throw new Refused("'revealed' belongs to an exercise: set exercise='predict' or 'temperature' first.");
  if (s.revealed && s.exercise === "predict" && guess == null)
    throw new Refused("Make a guess before revealing: set guess (one weight per token, summing to 1), or spread the bars in the page.");
}

/** An exactly rounded sum, as Python's math.fsum (Shewchuk's partials). @param {number[]} values */
export function fsum(values) {
  /** @type {number[]} */
  const partials = [];

  for (let x of values) {
    let i = 0;
    for (let y of partials) {
      if (Math.abs(x) < Math.abs(y)) [x, y] = [y, x];
      const hi = x + y,
        lo = y - (hi - x);
      if (lo) partials[i++] = lo;
      x = hi;
    }
    partials.length = i;
    partials.push(x);
  }
  let n = partials.length,
    hi = 0;
  if (n) {
    hi = partials[--n];
    let lo = 0;
    while (n > 0) {
      const x = hi,
        y = partials[--n];
      hi = x + y;
      const yr = hi - x;
      lo = y - yr;
      if (lo) break;
    }
    if (n > 0 && ((lo < 0 && partials[n - 1] < 0) || (lo > 0 && partials[n - 1] > 0))) {
      const y = lo * 2,
        x = hi + y;
      if (y === x - hi) hi = x;
    }
  }
  return hi;
}
