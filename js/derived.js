// Every number the page draws, derived from the synced state. Each is a getter memoised on the
// identity of its inputs (the rule shown.py uses for `attention`): a changed input makes a new
// object, so nothing can be stale, and nothing is computed twice. No list of what to keep.
import * as A from "./attention.js";
import * as KV from "./kvcache.js";
import { held, current as isCurrent } from "./requests.js";
import { layerIndex, writing } from "./rules.js";

/** @typedef {import("./state").State} State */
/** @typedef {import("./state").ArrayValue} ArrayValue */
/** @typedef {import("./types").Matrix} Matrix */
/** @typedef {import("./types").Numbers} Numbers */
/** @typedef {import("./types").Mask} Mask */
/** @typedef {import("./types").ArrayName} ArrayName */
/** @template {ArrayName} K @typedef {import("./types").Decoded<K>} Decoded */
/** @typedef {import("./types").PageState} PageState */
/** @typedef {import("./types").Get} Get */
/** @typedef {import("./types").Store} Store */
/** @typedef {import("./types").HeadJob} HeadJob */
/** @typedef {import("./types").ThumbWork} ThumbWork */
/** A model's every layer's arrays, stacked (rules/values.py's LAYERED maps q, k, v and the value axes to them). @typedef {"model_q" | "model_k" | "model_v" | "model_basis"} Stacked */

/** fn, remembered for the last arguments it was called with (compared by identity).
 * @template {(...args: never[]) => unknown} F  @param {F} fn  @returns {F} */
export function memo(fn) {
  /** @type {unknown[] | null} */
  let last = null;
  /** @type {unknown} */
  let value;
  return /** @type {F} */ (
    (/** @type {Parameters<F>} */ ...args) => {
      if (!last || args.length !== last.length || args.some((a, i) => a !== /** @type {unknown[]} */ (last)[i])) {
        value = fn(...args);
        last = args;
      }
      return value;
    }
  );
}

// While a text is being written (`step` below the number of tokens) only its first `step` tokens
// exist: these arrays lose the rows past it (a mask's and a bias's columns too), as Python's do.
/** @type {Partial<Record<keyof State, 1 | 2>>} */
const CUT = { tokens: 1, key_tokens: 1, q: 1, k: 1, v: 1, x: 1, model_q: 1, model_k: 1, model_v: 1, mask: 2, model_masks: 2, bias: 2, model_bias: 2 };
CUT.terms = CUT.model_terms = 2; // (a bias's first term: DeBERTa's)

/** The first r rows of each head of m (and, when both, its first r columns); m itself when r is 0.
 * @template {Numbers | Uint8Array} D  @template {import("./types").Matrix<D> | null} M
 * @param {M} m  @param {number} r  @param {boolean} [both]  @returns {M} */
export function firstRows(m, r, both) {
  if (!m || !r || r >= m.rows) return m;
  const c = both ? Math.min(r, m.cols) : m.cols,
    held = m.only == null ? m.heads : 1, // (a live model's layer: one head's data)
    data = new /** @type {new (size: number) => D} */ (m.data.constructor)(held * r * c);
  for (let h = 0; h < held; h++)
    for (let i = 0; i < r; i++) data.set(m.data.subarray((h * m.rows + i) * m.cols, (h * m.rows + i) * m.cols + c), (h * r + i) * c);
  return { ...m, data, rows: r, cols: c };
}

// --- generation: a step forward computes one new row ---
// A text written one token at a time adds one query and one key (and value) per step. Under the
// causal rule the earlier rows read nothing new, so their scores, weights and outputs are kept,
// copied into the larger matrices, and only the new token's row is computed: its query with each
// key in the cache. Which inputs grew by one row is checked on the numbers themselves, so the
// result is always the very number a full recompute gives (the same sums in the same order).

/** True when b is a with one more row appended (same width, the same numbers first).
 * @param {Matrix | null | undefined} a  @param {Matrix} b */
function oneMore(a, b) {
  if (!a || !b || a.rows + 1 !== b.rows || a.cols !== b.cols) return false;
  const x = a.data,
    y = b.data;
  for (let p = 0; p < x.length; p++) if (!Object.is(x[p], y[p])) return false;
  return true;
}
/** True when the r×r top-left corner of b (row-major, `c` columns) equals a (r×r), or both are absent.
 * @param {ArrayLike<number> | null | undefined} a  @param {ArrayLike<number> | null | undefined} b  @param {number} r  @param {number} c */
function sameCorner(a, b, r, c) {
  if (!a || !b) return !a && !b;
  for (let i = 0; i < r; i++) for (let j = 0; j < r; j++) if (!Object.is(a[i * r + j], b[i * c + j])) return false;
  return true;
}
/** Copies an r×r row-major matrix into the top-left corner of a larger one with c columns.
 * @param {Float64Array} to  @param {Float64Array} from  @param {number} r  @param {number} c */
function intoCorner(to, from, r, c) {
  for (let i = 0; i < r; i++) to.set(from.subarray(i * r, i * r + r), i * c);
  return to;
}

/** createGrowing() -> {scores(q, k, scale, bias), weights(S, rows, T, causal, mask, sink), output(W, v), work}:
 * the functions of attention.js, computing one row when the inputs are the last ones with one
 * more token (a step of generation); `work` says how many rows the last call of each computed. */
export function createGrowing() {
  const work = { scores: 0, weights: 0, output: 0 };
  /** @type {WeakMap<Float64Array, Float64Array>} */
  const grownFrom = new WeakMap(); // a result -> the last one it was grown from
  /** @type {{ q: Matrix, k: Matrix, scale: number, softcap: number | null, bias: Matrix | null, S: Float64Array } | null} */
  let S0 = null;
  /** @type {{ S: Float64Array, rows: number, temperature: number, causal: boolean, mask: Mask, sink: number | null, W: Float64Array } | null} */
  let W0 = null;
  /** @type {{ W: Float64Array, v: Matrix, O: Float64Array } | null} */
  let O0 = null;
  return {
    work,
    /** @param {Matrix} q  @param {Matrix} k  @param {number} scale  @param {Matrix | null} [bias]  @param {number | null} [softcap] */
    scores(q, k, scale, bias = null, softcap = null) {
      const n = q.rows,
        m = k.rows;
      let S;
      const p = S0;
      if (p && p.scale === scale && p.softcap === softcap && n === m && oneMore(p.q, q) && oneMore(p.k, k) && sameCorner(p.bias?.data, bias?.data, n - 1, m)) {
        S = intoCorner(new Float64Array(n * m), p.S, n - 1, m);
        // the new row: the new query with every key in the cache
        A.scoreRows(S, q, k, scale, n - 1, n, softcap);
        // the earlier rows' new column: cells the causal rule closes (no weight reads them),
        // filled only so that the scores shown are the ones Python holds
        const d = q.cols;
        for (let i = 0; i < n - 1; i++) {
          let t = 0;
          for (let c = 0; c < d; c++) t += q.data[i * d + c] * k.data[(m - 1) * d + c];
          S[i * m + m - 1] = softcap == null ? scale * t : A.capped(scale * t, softcap);
        }
        if (bias) {
          A.addBias(S, bias, n - 1, n);
          for (let i = 0; i < n - 1; i++) S[i * m + m - 1] += bias.data[i * m + m - 1];
        }
        grownFrom.set(S, p.S);
        work.scores = 1;
      } else {
        S = A.scores(q, k, scale, bias, softcap);
        work.scores = n;
      }
      S0 = { q, k, scale, softcap, bias, S };
      return S;
    },
    /** @param {Float64Array} S  @param {number} rows  @param {number} temperature  @param {boolean} causal  @param {Mask} [mask]
     * @param {number | null} [sink] */
    weights(S, rows, temperature, causal, mask = null, sink = null) {
      const m = S.length / rows,
        p = W0;
      let W;
      if (
        causal &&
        p?.causal &&
        p.temperature === temperature &&
        p.sink === sink &&
        m === rows &&
        p.rows + 1 === rows &&
        grownFrom.get(S) === p.S &&
        sameCorner(p.mask, mask, rows - 1, m)
      ) {
        // earlier rows read only the keys before them: the same weights, a zero in the new column
        W = intoCorner(new Float64Array(S.length), p.W, rows - 1, m);
        A.weightRow(S, m, rows - 1, temperature, causal, mask, W.subarray((rows - 1) * m, rows * m), sink);
        grownFrom.set(W, p.W);
        work.weights = 1;
      } else {
        W = A.weights(S, rows, temperature, causal, mask, sink);
        work.weights = rows;
      }
      W0 = { S, rows, temperature, causal, mask, sink, W };
      return W;
    },
    /** @param {Float64Array} W  @param {Matrix} v */
    output(W, v) {
      const p = O0,
        m = v.rows,
        n = W.length / m,
        d = v.cols;
      if (!(p && grownFrom.get(W) === p.W && oneMore(p.v, v))) {
        O0 = { W, v, O: A.output(W, v) };
        work.output = n;
        return O0.O;
      }
      // earlier rows weigh the new value by 0: the same outputs; the new row blends every value
      const O = new Float64Array(n * d);
      O.set(p.O);
      const i = n - 1;
      for (let j = 0; j < m; j++) {
        const w = W[i * m + j];
        if (w === 0) continue;
        for (let c = 0; c < d; c++) O[i * d + c] += w * v.data[j * d + c];
      }
      O0 = { W, v, O };
      work.output = 1;
      return O;
    },
  };
}

/** createStore(get) -> getters for the model's current state; `get(name)` reads a synced trait
 * as sent, `store.get(name)` as it stands (while generating: the tokens written so far).
 * @param {Get} get  @returns {Store} */
export function createStore(get) {
  // how many tokens are written while generating; 0 when every one is (cross-attention is written whole)
  // (asked at every array read: remembered for the step, tokens and cross-attention it was asked at)
  const writtenAt = memo((/** @type {number} */ step, /** @type {string[]} */ tokens, /** @type {boolean} */ cross) =>
    writing({ step, tokens }) && !cross ? step : 0,
  );
  const written = () => writtenAt(get("step"), get("tokens"), get("cross"));
  /** @type {Record<string, (list: string[] | null, r: number) => string[] | null>} */
  const cutTokens = {};
  /** @template {keyof PageState} K  @param {K} name  @returns {PageState[K]} */
  const current = (name) =>
    name === "tokens" || name === "key_tokens"
      ? /** @type {PageState[K]} */ (
          (cutTokens[name] ??= memo((/** @type {string[] | null} */ list, /** @type {number} */ r) => (r && list ? list.slice(0, r) : list)))(
            /** @type {string[] | null} */ (get(name)),
            written(),
          )
        )
      : get(name);
  // the codec: each synced array decoded once, when its value (a new object) arrives
  /** @type {Record<string, (value: State[ArrayName], r: number) => import("./types").Matrix<Numbers | Uint8Array> | null>} */
  const codecs = {};
  /** @template {ArrayName} K  @param {K} name  @returns {Decoded<K>} */
  const decoded = (name) =>
    /** @type {Decoded<K>} */ (
      (codecs[name] ??= memo((/** @type {State[ArrayName]} */ value, /** @type {number} */ r) => firstRows(A.decodeMatrix(value), r, CUT[name] === 2)))(
        get(name),
        CUT[name] ? written() : 0,
      )
    );
  // A model's q, k, v and value axes: the current layer's, cut from every layer's arrays (sent
  // once), while Python says its own are that layer's; else the arrays sent.
  const LAYERED = /** @type {Record<string, Stacked>} */ (get("_constants").layered); // q -> model_q and the like (rules/values.py's LAYERED)
  /** @type {Record<string, (all: Matrix, layer: number, count: number) => Matrix>} */
  const layers = {};
  const shownLayer = () => layerIndex({ layer: get("layer"), layer_numbers: get("layer_numbers") }); // (its place among those held)
  /** @param {Matrix} all  @param {number} layer  @param {number} count  @returns {Matrix} */
  const layerOf = (all, layer, count) => {
    const heads = all.heads / count,
      size = heads * all.rows * all.cols,
      l = Math.min(layer, count - 1);
    return { data: all.data.subarray(l * size, (l + 1) * size), heads, rows: all.rows, cols: all.cols };
  };
  // every token's, written or not: while a text is written its cache keeps one colour scale
  /** @type {Record<string, (value: State[ArrayName]) => import("./types").Matrix<Numbers | Uint8Array> | null>} */
  const uncut = {};
  /** @template {ArrayName} K  @param {K} name  @returns {Decoded<K>} */
  const whole = (name) => /** @type {Decoded<K>} */ ((uncut[name] ??= memo(A.decodeMatrix))(get(name)));
  /** @type {Record<string, (m: Matrix, layer: number, count: number, h: number) => number>} */
  const tops = {}; // one memo for k's, one for v's
  /** @param {Matrix} m  @param {number} layer  @param {number} count  @param {number} h */
  const topOf = (m, layer, count, h) => {
    const all = count ? layerOf(m, layer, count) : m;
    return A.magnitude(A.headOf(all, Math.min(h, all.heads - 1)).data);
  };
  // each array as Python holds it
  /** @template {ArrayName} K  @param {K} name  @returns {Decoded<K>} */
  const given = (name) => {
    const all = LAYERED[name] && get("layer_shown") ? decoded(LAYERED[name]) : null;
    return /** @type {Decoded<K>} */ (all ? (layers[name] ??= memo(layerOf))(all, shownLayer(), get("n_layers")) : decoded(name));
  };
  // and as the scores take it: the lab's q and k turned by RoPE, its bias with ALiBi's ramp (position.py)
  /** @type {Record<string, (m: Matrix, base: number) => Matrix>} */
  const turned = { q: memo(A.rope), k: memo(A.rope) };
  const ramped = memo(
    (/** @type {Matrix | null} */ b, /** @type {number} */ heads, /** @type {number} */ n, /** @type {number} */ m, /** @type {number[] | null} */ slopes) =>
      A.withAlibi(b, heads, n, m, slopes ?? A.alibiSlopes(heads)),
  );
  const scheme = () => (get("n_layers") ? "none" : get("position") || "none"); // a model's q and k carry its own
  /** @template {ArrayName} K  @param {K} name  @returns {Decoded<K>} */
  const array = (name) => {
    const at = scheme();
    if (at === "rope" && turned[name]) return /** @type {Decoded<K>} */ (turned[name](/** @type {Matrix} */ (given(name)), get("rope_base"))); // (q and k: never null)
    if (at !== "alibi" || name !== "bias") return given(name);
    const q = given("q");
    return /** @type {Decoded<K>} */ (ramped(given("bias"), q.heads, q.rows, given("k").rows, get("alibi_slopes")));
  };
  /** @type {Record<string, (m: Matrix, h: number) => Matrix | null>} */
  const heads = {};
  /** q, k or v of the head shown (never null: the state always has them). @param {"q" | "k" | "v"} name */
  const ofHead = (name) =>
    /** @type {Matrix} */ (
      (heads[name] ??= memo((/** @type {Matrix} */ m, /** @type {number} */ h) => (m ? A.headOf(m, Math.min(h, m.heads - 1)) : null)))(array(name), get("head"))
    );
  const basisOf = memo((/** @type {Matrix | null} */ b, /** @type {Matrix} */ v, /** @type {number} */ h) =>
    b && b.heads === v.heads && b.rows === v.cols && b.cols === 2 ? A.headOf(b, Math.min(h, b.heads - 1)) : null,
  );
  // the cells rows may read besides the causal rule (n × m): the mask, and with `sink` the first token's column closed
  /** @param {import("./types").Matrix<Uint8Array> | null} mask  @param {number} n  @param {number} m  @param {boolean} sink  @returns {Mask} */
  const openCells = (mask, n, m, sink) => {
    const given = mask && mask.rows === n && mask.cols === m ? mask.data : null;
    if (!sink) return given;
    const open = given ? Uint8Array.from(given) : new Uint8Array(n * m).fill(1);
    for (let i = 0; i < n; i++) open[i * m] = 0;
    return open;
  };
  const maskOf = memo(openCells);
  const denseOf = memo(openCells); // (sparse attention's dense counterpart: no mask of the layer's own)
  const closedOf = memo((/** @type {boolean} */ causal, /** @type {Mask} */ mask, /** @type {number} */ m) => {
    const open = A.openCell(causal, mask, m);
    return (/** @type {number} */ i, /** @type {number} */ j) => !open(i, j);
  });
  // every layer's own mask (with `sink`), for the thumbnails of a model whose layers have masks; null when it has none
  const layerMasksOf = memo(
    (
      /** @type {import("./types").Matrix<Uint8Array> | null} */ all,
      /** @type {number[] | undefined} */ which,
      /** @type {number} */ n,
      /** @type {number} */ m,
      /** @type {boolean} */ sink,
    ) => (all && which?.length ? which.map((w) => openCells(w < 0 ? null : A.headOf(all, w), n, m, sink)) : null),
  );
  const scaleOf = memo((/** @type {number | null} */ s, /** @type {number} */ d) => s ?? A.defaultScale(d));
  // the additive bias of a head: its own (heads × n × m), or the one for every head (n × m)
  const biasOf = memo((/** @type {Matrix | null} */ b, /** @type {number} */ h, /** @type {number} */ n, /** @type {number} */ m) =>
    b && b.rows === n && b.cols === m ? (b.heads > 1 ? A.headOf(b, Math.min(h, b.heads - 1)) : b) : null,
  );
  const termsOf = memo((/** @type {Matrix | null} */ t, /** @type {number} */ h, /** @type {number} */ n, /** @type {number} */ m) =>
    t && t.rows === n && t.cols === m ? A.headOf(t, Math.min(h, t.heads - 1)) : null,
  );
  // differential attention: the pair of the head shown (its two heads, the layer's λ, the map shown), and the
  // other head's map at the same state, from its q and k where the page holds every head, else the kernel's
  // (a live page gets a layer one head at a time: the "pair" view sends the other one's)
  const pairOf = memo(
    (/** @type {number[]} */ lambdas, /** @type {number} */ layer, /** @type {number} */ head, /** @type {number} */ heads, /** @type {boolean} */ d) => {
      const [one, two] = A.pairHeads(head, heads);
      return /** @type {import("./types").Pair} */ ({
        head,
        heads: [one, two],
        lam: lambdas[layer],
        shown: d ? "difference" : head === one ? "map 1" : "map 2",
      });
    },
  );
  const kernelPair = memo((/** @type {import("./state").Answer | null} */ a, /** @type {number} */ r) => {
    if (!a?.q) return null; // (a refusal: {error, key})
    const [q, k] = [a.q, a.k].map((m) => /** @type {Matrix} */ (firstRows(/** @type {Matrix} */ (A.decodeMatrix(m)), r)));
    return { head: /** @type {number} */ (a.head), q, k };
  });
  const otherHead = { q: memo(A.headOf), k: memo(A.headOf) };
  const otherBias = memo((/** @type {Matrix | null} */ b, /** @type {number} */ h, /** @type {number} */ n, /** @type {number} */ m) =>
    b && b.rows === n && b.cols === m ? (b.heads > 1 ? A.headOf(b, Math.min(h, b.heads - 1)) : b) : null,
  );
  const otherScores = memo(A.scores),
    otherWeights = memo(A.weights),
    differenceOf = memo(A.difference),
    mixedOf = memo(A.output);
  const growing = createGrowing(); // a step of generation computes only the new token's row
  const scores = memo(growing.scores),
    weights = memo(growing.weights),
    output = memo(growing.output);
  const spread = memo(A.outputSpread),
    norms = memo(A.weightNorms);
  // The weight rows asked for at these scores, T, causal and mask: at most ROWS kept, the
  // oldest asked for going first, so hovering a long input never builds up its whole matrix.
  const ROWS = 128;
  const rowsAt = memo(
    /** @type {(S: Float64Array, T: number, causal: boolean, mask: Mask, sink: number | null) => Map<number, Float64Array>} */ (() => new Map()),
  );
  const scoreRange = memo(A.extent),
    weightRange = memo(A.extent); // two: each keeps its own last input
  const rounding = memo(A.roundingBound),
    agreement = memo(A.agreement);
  // every head's scores are kept apart from the temperature: the heads view fills them in pieces
  /** @type {(q: Matrix, k: Matrix, scale: number, softcap: number | null, bias: Matrix | null) => HeadJob} */
  const headJob = memo((q, k, scale, softcap, bias) => ({
    q,
    k,
    scale,
    softcap,
    bias,
    scores: new Array(q.heads).fill(null),
    rows: new Array(q.heads).fill(0),
  }));
  // the kernel's overview as the thumbnails' work, done; while a new one is computed the last stays shown
  /** @type {ThumbWork | null} */
  let lastKernel = null;
  const kernelWork = memo((/** @type {import("./state").Answer | null} */ o) => {
    if (!o || o.error) return null; // (an overview the kernel could not compute: said in the caption)
    const count = o.layers * o.heads,
      size = o.width * o.height,
      v = o.thumbs.view,
      bytes = new Uint8Array(v.buffer, v.byteOffset, v.byteLength);
    const thumbs = Array.from({ length: count }, (_, p) => ({
      data: Float64Array.from(bytes.subarray(p * size, (p + 1) * size), (x) => (x / 255) * o.top[p]),
      width: o.width,
      height: o.height,
      max: o.top[p],
      averaged: o.averaged,
      summary: Object.fromEntries(Object.entries(o.summaries).map(([name, values]) => [name, values[p] ?? NaN])),
    }));
    lastKernel = { job: { q: { rows: 0, heads: count }, k: { rows: 0 } }, thumbs, kernel: true, count };
    return lastKernel;
  });
  /** @param {number} count  @returns {ThumbWork} */
  const waiting = (count) => ({ job: { q: { rows: 0, heads: count }, k: { rows: 0 } }, thumbs: new Array(count).fill(null), kernel: true, count });
  /** @type {(job: HeadJob, temperature: number, causal: boolean, mask: Mask, cross: boolean, masks: Mask[] | null, sinks: (number | null)[] | null) => ThumbWork} */
  const thumbJob = memo((job, temperature, causal, mask, cross, masks, sinks) => ({
    job,
    temperature,
    causal,
    mask,
    masks,
    cross,
    sinks,
    thumbs: new Array(job.q.heads).fill(null),
  }));
  // a learnt sink's logit per head: the head shown's, and every thumbnail head's (a model's every layer's, from model_sinks)
  const sinkOf = memo((/** @type {number[] | null} */ sinks, /** @type {number} */ h) => (sinks ? A.sinkLogit(sinks[Math.min(h, sinks.length - 1)]) : null));
  const sinksOf = memo((/** @type {Matrix | null} */ every, /** @type {number[] | null} */ own) =>
    every ? Array.from(every.data, A.sinkLogit) : own ? own.map(A.sinkLogit) : null,
  );

  // the compressed KV cache of the head shown (kvcache.js): its keys kept, once per weights and setting
  const kvKept = memo(
    (
      /** @type {string} */ method,
      /** @type {number} */ budget,
      /** @type {number[]} */ keys,
      /** @type {Float64Array} */ W,
      /** @type {number} */ m,
      /** @type {boolean} */ cross,
    ) => KV.choose(method, budget, W, W.length / m, m, keys, cross),
  );

  /** @type {Store} */
  const s = {
    all: (name) => array(name), // every head, decoded

    /** Every layer's heads of q, k or v, stacked (null for a widget without a model's layers). */
    model: (name) => (get("layer_shown") ? decoded(LAYERED[name]) : null),
    q: () => ofHead("q"),
    k: () => ofHead("k"),
    v: () => ofHead("v"),
    /** The largest |number| of the head's k or v over every token of the text, written so far or not. */
    wholeTop: (name) => {
      const top = (tops[name] ??= memo(topOf));
      const all = LAYERED[name] && get("layer_shown") ? whole(LAYERED[name]) : null; // (a live page has the layer shown alone)
      return all ? top(all, shownLayer(), get("n_layers"), get("head")) : top(whole(name), 0, 0, get("head"));
    },
    x: () => array("x"),
    basis: () => basisOf(array("value_basis"), array("v"), get("head")),
    /** The columns' tokens: the tokens themselves, or in cross-attention the text read. */
    keys: () => current("key_tokens") ?? current("tokens"),
    /** Cross-attention: the columns are another text's tokens (Python's `cross`). */
    cross: () => !!get("cross"),
    /** A synced trait as it stands: while generating, only the tokens written so far. */
    get: current,
    /** How many tokens are written so far while generating (`step`); 0 when all are. */
    written,
    /** How many rows the last computation of the scores, weights and output computed: one for a step of generation. */
    work: () => ({ ...growing.work }),
    /** How many keys each row reads (the columns). */
    m: () => array("k").rows,
    mask: () => maskOf(array("mask"), array("q").rows, array("k").rows, !!get("sink")), // n×m, 1 where a row may read; null: every cell
    scale: () => scaleOf(get("scale"), array("q").cols),
    /** The soft cap on scores (softcap · tanh(s / softcap)), or null for none. */
    softcap: () => get("softcap") ?? null,
    /** The current head's additive score bias (n×m), or null. */
    bias: () => biasOf(array("bias"), get("head"), array("q").rows, array("k").rows),
    /** The current head's first score term (term_names': DeBERTa's c2p), n×m, or null: the bias less it is the second. */
    terms: () => termsOf(array("terms"), get("head"), array("q").rows, array("k").rows),
    /** The names of the terms the scores are the sum of (DeBERTa's c2c, c2p, p2c), while the bias is the model's own; []. */
    termNames: () => (s.terms() && s.bias() ? ["c2c", ...(get("term_names") || [])] : []),
    /** Cell (i, j)'s score as the terms the model adds it from, [name, value] each (termNames); null without them. */
    scoreTerms: (i, j) => {
      const names = s.termNames(),
        first = /** @type {Matrix} */ (s.terms()),
        bias = /** @type {Matrix} */ (s.bias());
      if (!names.length) return null;
      const at = i * s.m() + j;
      /** @type {[string, number][]} */
      const out = [
        ["c2c", s.scores()[at] - bias.data[at]],
        [names[1], first.data[at]],
      ];
      if (names[2]) out.push([names[2], bias.data[at] - first.data[at]]);
      return out;
    },
    /** The head shown's learnt sink's logit (one more column of each row's softmax, dropped after it), or null. */
    sink: () => sinkOf(get("sinks"), get("head")),
    /** Each thumbnail head's learnt sink: a model's every layer's heads (model_sinks, where the page holds every
     * layer), or the heads of q; null for none. */
    allSinks: () => sinksOf(s.model("q") ? decoded("model_sinks") : null, get("sinks")),
    /** Every head's bias as sent (null for none): the thumbnails' heads take theirs from it. */
    allBias: () =>
      s.model("q") && get("model_bias")
        ? decoded("model_bias") // a bias per layer: every layer's heads, as the thumbnails' heads are
        : array("bias")?.rows === array("q").rows && array("bias")?.cols === array("k").rows
          ? array("bias")
          : null,
    scores: () => {
      // a head the thumbnails have already scored needs no second pass (the same arithmetic)
      const job = s.headJob(),
        h = s.jobIndex();
      // (not where every layer has a bias of its own: the thumbnails add the layer's, and a bias set by hand is the state's)
      const kept = job.rows[h] === job.q.rows && !(s.model("q") && get("model_bias")) ? job.scores[h] : null;
      return kept || scores(s.q(), s.k(), s.scale(), s.bias(), s.softcap());
    },
    weights: () => weights(s.scores(), s.q().rows, get("temperature"), get("causal"), s.mask(), s.sink()),
    /** Row i of the weights, computed alone (the same arithmetic): a long input's whole matrix is
     * the painting worker's, and the page needs only the rows it shows in numbers. */
    weightRow: (i) => {
      const S = s.scores(),
        T = get("temperature"),
        causal = get("causal"),
        mask = s.mask(),
        sink = s.sink(),
        rows = rowsAt(S, T, causal, mask, sink);
      let row = rows.get(i);
      if (row)
        rows.delete(i); // asked again: to the back of the queue
      else row = A.weightRow(S, s.m(), i, T, causal, mask, undefined, sink);
      rows.set(i, row);
      if (rows.size > ROWS) rows.delete(/** @type {number} */ (rows.keys().next().value)); // (the oldest: there are ROWS + 1)

      return row;
    },
    output: () => output(s.weights(), s.v()),
    /** Differential attention (model_lambda) at the head shown: {heads: [map 1's, map 2's], lam: the layer's λ,
     * shown: "map 1" | "map 2" | "difference"}; null for other widgets, and for your own arrays. */
    pair: () => {
      const lambdas = get("model_lambda");
      if (!lambdas?.length || !get("layer_shown")) return null;
      const heads = array("q").heads;
      return pairOf(lambdas, shownLayer(), Math.min(get("head"), heads - 1), heads, !!get("difference_map"));
    },
    /** The weights of the pair's other head at the same state (temperature, mask, step); null without a pair, or while
     * a live page waits for that head's arrays. */
    otherWeights: () => {
      const pair = s.pair();
      if (!pair) return null;
      const q = array("q"),
        k = array("k"),
        other = pair.heads[pair.heads[0] === pair.head ? 1 : 0];
      const answer = q.only == null ? null : held(get, "pair", get("_constants").views.pair),
        sent = answer && isCurrent(answer, get) ? kernelPair(answer, written()) : null;
      if (q.only != null && (!sent || sent.head !== other)) return null;
      const oq = sent ? sent.q : otherHead.q(q, other),
        ok = sent ? sent.k : otherHead.k(k, other);
      const S = otherScores(oq, ok, s.scale(), otherBias(array("bias"), other, q.rows, k.rows), s.softcap());
      return otherWeights(S, oq.rows, get("temperature"), get("causal"), s.mask());
    },
    /** map 1 − λ·map 2 of the pair of the head shown (rows × keys): what the model mixes the values with; null as otherWeights. */
    difference: () => {
      const pair = s.pair(),
        other = s.otherWeights();
      if (!pair || !other) return null;
      const own = s.weights();
      return pair.heads[0] === pair.head ? differenceOf(own, other, pair.lam) : differenceOf(other, own, pair.lam);
    },
    /** The difference @ the values: the pair's mix, as the model hands it to its group norm; null as difference. */
    mixed: () => {
      const D = s.difference();
      return D && mixedOf(D, s.v());
    },
    /** Weight × ‖value‖ of the head shown, rows × keys (float32): an exported page's own, where the heads add their values as they are. */
    norms: () => norms(s.weights(), s.v()),
    scoreRange: () => scoreRange(s.scores()), // [lowest, highest]
    topWeight: () => weightRange(s.weights())[1],
    spread: () => spread(s.output(), s.q().rows, s.v().cols),
    agreement: () => agreement(rounding(s.q(), s.k(), s.scale(), s.scores()), s.scores(), s.q().rows, get("temperature"), get("causal"), s.mask()),
    // every head's thumbnail: a model's every layer, else the heads of q and k
    headJob: () => headJob(s.model("q") ?? array("q"), s.model("k") ?? array("k"), s.scale(), s.softcap(), s.allBias()),
    /** The current head's place among the thumbnails' heads. */
    jobIndex: () => (s.model("q") ? Math.min(shownLayer(), get("n_layers") - 1) * array("q").heads : 0) + Math.min(get("head"), array("q").heads - 1),
    thumbnails: () =>
      s.kernelOverview()
        ? (kernelWork(get("overview")) ?? (lastKernel = lastKernel?.count === s.modelHeads() ? lastKernel : waiting(s.modelHeads())))
        : thumbJob(s.headJob(), get("temperature"), get("causal"), s.mask(), s.cross(), s.layerMasks(), s.allSinks()),
    /** A model's overview comes from the kernel: a live page holds only the layer it shows. */
    kernelOverview: () => !!get("layer_shown") && !s.model("q"),
    modelHeads: () => (get("n_layers") || 1) * array("q").heads,
    /** The kernel's overview is not the one for the state shown (it is being computed, or asked for). */
    overviewDue: () => s.kernelOverview() && !get("overview")?.error && !isCurrent(get("overview"), get),
    /** Each layer's own mask (n × m, with the sink), while a model whose layers have masks is shown; else null. */
    layerMasks: () => (get("layer_shown") ? layerMasksOf(decoded("model_masks"), get("mask_of_layer"), array("q").rows, array("k").rows, !!get("sink")) : null),
    /** q as a synced array, with the focused token's query in the current head set to `vec`
     * (the query dial's drag), in the precision Python sent. */
    withQuery: (vec) => {
      const all = whole("q"), // every token's, as Python has them (written or not), before any turn
        h = Math.min(get("head"), all.heads - 1),
        data = all.data.slice();
      // the dial turns the query as the scores take it: with RoPE, the query given is that turned back
      data.set(scheme() === "rope" ? A.turn(vec, -get("focus")) : vec, (h * all.rows + get("focus")) * all.cols);
      return A.encodeMatrix(data, all.heads > 1 ? [all.heads, all.rows, all.cols] : [all.rows, all.cols]);
    },
    /** Where position enters the lab's scores: {scheme: "rope" | "alibi", base, slope (the head shown's), given
     * (the head shown's queries before RoPE turns them), biased (a bias given besides ALiBi's)}; null for none
     * (a model's q and k carry its own). */
    position: () => {
      const at = scheme();
      if (at !== "rope" && at !== "alibi") return null;
      const h = get("head"),
        heads = given("q").heads;
      return {
        scheme: at,
        base: get("rope_base"),
        slope: at === "alibi" ? (get("alibi_slopes") ?? A.alibiSlopes(heads))[Math.min(h, heads - 1)] : null,
        given: A.headOf(given("q"), Math.min(h, heads - 1)),
        biased: !!given("bias"),
      };
    },
    /** The numbers of the head shown and the settings they depend on, as the stages take them. */
    numbers: () => ({
      temperature: get("temperature"),
      causal: get("causal"),
      cross: s.cross(),
      residual: !!get("residual"),
      axes: get("value_axes") || [],
      scaleSet: get("scale") != null,
      turnable: s.q().cols === 2 && !get("layer_shown"), // the dial turns your own 2-D queries, not a model's
      position: s.position(),
      q: s.q(),
      k: s.k(),
      v: s.v(),
      x: s.x(),
      basis: s.basis(),
      bias: s.bias(),
      mask: s.mask(),
      scale: s.scale(),
      softcap: s.softcap(),
      sink: s.sink(),
      scores: s.scores,
      weights: s.weights,
      weightRow: s.weightRow,
      topWeight: s.topWeight,
      scoreRange: s.scoreRange,
      output: s.output,
      spread: s.spread,
      pair: s.pair(),
      difference: s.difference,
      mixed: s.mixed,
      closed: s.closedCells(),
      closedWhy: s.closedWhy,
      selection: s.selection,
      cellArithmetic: s.cellArithmetic,
      termNames: s.termNames(),
      scoreTerms: s.scoreTerms,
    }),
    /** The arithmetic of the weight of cell (i, j), step by step. */
    cellArithmetic: (i, j) =>
      A.cellArithmetic(s.q(), s.k(), s.v(), s.scores(), s.weightRow(i), {
        i,
        j,
        scale: s.scale(),
        softcap: s.softcap(),
        temperature: get("temperature"),
        causal: get("causal"),
        mask: s.mask(),
        bias: s.bias(),
        sink: s.sink(),
      }),
    /** Why row i may not read column j: "ahead" (the causal rule), "sink" (the first token, left
     * out), "mask"; null when it may. */
    closedWhy: (i, j) => (get("causal") && j > i ? "ahead" : !s.closed(i, j) ? null : get("sink") && j === 0 ? "sink" : "mask"),
    /** A cell row i may not read: ahead of it under the causal rule, or closed by the mask. */
    closed: (i, j) => s.closedCells()(i, j),
    /** closed(i, j) for the state as it stands, made once per causal rule and mask: what a grid asks of every cell. */
    closedCells: () => closedOf(get("causal"), s.mask(), s.m()),
    /** The compressed KV cache of the head shown (kv_method, kv_budget; kv_keys for "mask"): {method, budget, keep (1 a key
     * kept) or error}; null while it is off. */
    kv: () => {
      const method = get("kv_method") || "";
      if (!method) return null;
      const budget = get("kv_budget") ?? 16;
      return { method, budget, ...kvKept(method, budget, get("kv_keys") || [], s.weights(), s.m(), !!get("cross")) };
    },
    /** What row i of the head shown loses reading only the keys its compressed cache keeps: {kept (how many),
     * retained (Σ of its weight on them), change (‖o′ − o‖ / ‖o‖; NaN where it cannot be said)}; null while it is off. */
    kvRow: (i) => {
      const kv = s.kv();
      if (!kv?.keep) return null;
      const m = s.m();
      return KV.losses(s.weights().subarray(i * m, (i + 1) * m), s.v(), kv.keep);
    },
    /** Sparse attention's choice in row i, in a layer of sparse_layers (each query reads the keys its indexer
     * chose; shown.py's selection()): how many keys the row reads, and the share of dense attention's weight
     * (the same scores, every key the causal rule allows) those keys had, and that dense row; null for any other layer. */
    selection: (i) => {
      // (the choice is the layer's own mask under the model's causal rule: with another rule, or the first token
      // hidden, the keys open are not the indexer's; shown.py's selection() refuses them)
      if (!get("layer_shown") || !(get("sparse_layers") || []).includes(get("layer"))) return null;
      if (get("causal") !== get("model_causal") || get("sink")) return null;
      const m = s.m(),
        dense = A.weightRow(s.scores(), m, i, get("temperature"), get("causal"), denseOf(null, array("q").rows, m, !!get("sink")), undefined, s.sink()),
        closed = s.closedCells();
      let chosen = 0,
        kept = 0;
      for (let j = 0; j < m; j++)
        if (!closed(i, j)) {
          chosen++;
          kept += dense[j];
        }
      return { chosen, kept, dense };
    },
  };
  return s;
}
