// Every number the page draws, derived from the synced state. Each is a getter memoised on the
// identity of its inputs (the rule widget.py uses for `attention`): a changed input makes a new
// object, so nothing can be stale, and nothing is computed twice. No list of what to keep.
import * as A from "./attention.js";

/** fn, remembered for the last arguments it was called with (compared by identity). */
export function memo(fn) {
  let last = null,
    value;
  return (...args) => {
    if (!last || args.length !== last.length || args.some((a, i) => a !== last[i])) {
      value = fn(...args);
      last = args;
    }
    return value;
  };
}

/** createStore(get) -> getters for the model's current state; `get(name)` reads a synced trait. */
export function createStore(get) {
  // the codec: each synced array decoded once, when its value (a new object) arrives
  const codecs = {};
  const decoded = (name) => (codecs[name] ??= memo(A.decodeMatrix))(get(name));
  // A model's q, k, v and value axes: the current layer's, cut from every layer's arrays (sent
  // once), while Python says its own are that layer's; else the arrays sent.
  const LAYERED = { q: "model_q", k: "model_k", v: "model_v", value_basis: "model_basis" };
  const layers = {};
  const layerOf = (all, layer, count) => {
    const heads = all.heads / count,
      size = heads * all.rows * all.cols,
      l = Math.min(layer, count - 1);
    return { data: all.data.subarray(l * size, (l + 1) * size), heads, rows: all.rows, cols: all.cols };
  };
  const array = (name) => {
    const all = LAYERED[name] && get("layer_shown") ? decoded(LAYERED[name]) : null;
    return all ? (layers[name] ??= memo(layerOf))(all, get("layer"), get("n_layers")) : decoded(name);
  };
  const heads = {};
  const ofHead = (name) => (heads[name] ??= memo((m, h) => (m ? A.headOf(m, Math.min(h, m.heads - 1)) : null)))(array(name), get("head"));
  const basisOf = memo((b, v, h) => (b && b.heads === v.heads && b.rows === v.cols && b.cols === 2 ? A.headOf(b, Math.min(h, b.heads - 1)) : null));
  // the cells rows may read besides the causal rule (n × m): the mask, and with `sink` the first token's column closed
  const maskOf = memo((mask, n, m, sink) => {
    const given = mask && mask.rows === n && mask.cols === m ? mask.data : null;
    if (!sink) return given;
    const open = given ? Uint8Array.from(given) : new Uint8Array(n * m).fill(1);
    for (let i = 0; i < n; i++) open[i * m] = 0;
    return open;
  });
  const scaleOf = memo((s, d) => s ?? A.defaultScale(d));
  // the additive bias of a head: its own (heads × n × m), or the one for every head (n × m)
  const biasOf = memo((b, h, n, m) => (b && b.rows === n && b.cols === m ? (b.heads > 1 ? A.headOf(b, Math.min(h, b.heads - 1)) : b) : null));
  // cross-attention: the columns are another text's tokens (Python's rule: other labels)
  const crossOf = memo((tokens, keys) => !!keys && (keys.length !== tokens.length || keys.some((t, j) => t !== tokens[j])));
  const scores = memo(A.scores),
    weights = memo(A.weights),
    output = memo(A.output);
  const spread = memo(A.outputSpread);
  // The weight rows asked for at these scores, T, causal and mask: at most ROWS kept, the
  // oldest asked for going first, so hovering a long input never builds up its whole matrix.
  const ROWS = 128;
  const rowsAt = memo(() => new Map());
  const scoreRange = memo(A.extent),
    weightRange = memo(A.extent); // two: each keeps its own last input
  const rounding = memo(A.roundingBound),
    agreement = memo(A.agreement);
  // every head's scores are kept apart from the temperature: the heads view fills them in pieces
  const headJob = memo((q, k, scale, bias) => ({ q, k, scale, bias, scores: new Array(q.heads).fill(null), rows: new Array(q.heads).fill(0) }));
  const thumbJob = memo((job, temperature, causal, mask, cross) => ({ job, temperature, causal, mask, cross, thumbs: new Array(job.q.heads).fill(null) }));

  const s = {
    all: (name) => array(name), // every head, decoded
    /** Every layer's heads of q, k or v, stacked (null for a widget without a model's layers). */
    model: (name) => (get("layer_shown") ? decoded(LAYERED[name]) : null),
    q: () => ofHead("q"),
    k: () => ofHead("k"),
    v: () => ofHead("v"),
    x: () => array("x"),
    basis: () => basisOf(array("value_basis"), array("v"), get("head")),
    /** The columns' tokens: the tokens themselves, or in cross-attention the text read. */
    keys: () => get("key_tokens") ?? get("tokens"),
    cross: () => crossOf(get("tokens"), get("key_tokens")),
    /** How many keys each row reads (the columns). */
    m: () => array("k").rows,
    mask: () => maskOf(array("mask"), array("q").rows, array("k").rows, !!get("sink")), // n×m, 1 where a row may read; null: every cell
    scale: () => scaleOf(get("scale"), array("q").cols),
    /** The current head's additive score bias (n×m), or null. */
    bias: () => biasOf(array("bias"), get("head"), array("q").rows, array("k").rows),
    /** Every head's bias as sent (null for none): the thumbnails' heads take theirs from it. */
    allBias: () => (array("bias")?.rows === array("q").rows && array("bias")?.cols === array("k").rows ? array("bias") : null),
    scores: () => {
      // a head the thumbnails have already scored needs no second pass (the same arithmetic)
      const job = s.headJob(),
        h = s.jobIndex();
      return job.rows[h] === job.q.rows && job.scores[h] ? job.scores[h] : scores(s.q(), s.k(), s.scale(), s.bias());
    },
    weights: () => weights(s.scores(), s.q().rows, get("temperature"), get("causal"), s.mask()),
    /** Row i of the weights, computed alone (the same arithmetic): a long input's whole matrix is
     * the painting worker's, and the page needs only the rows it shows in numbers. */
    weightRow: (i) => {
      const S = s.scores(),
        T = get("temperature"),
        causal = get("causal"),
        mask = s.mask(),
        rows = rowsAt(S, T, causal, mask);
      let row = rows.get(i);
      if (row)
        rows.delete(i); // asked again: to the back of the queue
      else row = A.weightRow(S, s.m(), i, T, causal, mask);
      rows.set(i, row);
      if (rows.size > ROWS) rows.delete(rows.keys().next().value);
      return row;
    },
    output: () => output(s.weights(), s.v()),
    scoreRange: () => scoreRange(s.scores()), // [lowest, highest]
    topWeight: () => weightRange(s.weights())[1],
    spread: () => spread(s.output(), s.q().rows, s.v().cols),
    agreement: () => agreement(rounding(s.q(), s.k(), s.scale(), s.scores()), s.scores(), s.q().rows, get("temperature"), get("causal"), s.mask()),
    // every head's thumbnail: a model's every layer, else the heads of q and k
    headJob: () => headJob(s.model("q") ?? array("q"), s.model("k") ?? array("k"), s.scale(), s.allBias()),
    /** The current head's place among the thumbnails' heads. */
    jobIndex: () => (s.model("q") ? Math.min(get("layer"), get("n_layers") - 1) * array("q").heads : 0) + Math.min(get("head"), array("q").heads - 1),
    thumbnails: () => thumbJob(s.headJob(), get("temperature"), get("causal"), s.mask(), s.cross()),
    /** q as a synced array, with the focused token's query in the current head set to `vec`
     * (the query dial's drag), in the precision Python sent. */
    withQuery: (vec) => {
      const all = array("q"),
        h = Math.min(get("head"), all.heads - 1),
        data = all.data.slice();
      data.set(vec, (h * all.rows + get("focus")) * all.cols);
      return A.encodeMatrix(data, all.heads > 1 ? [all.heads, all.rows, all.cols] : [all.rows, all.cols]);
    },
    /** The arithmetic of the weight of cell (i, j), step by step. */
    cellArithmetic: (i, j) =>
      A.cellArithmetic(s.q(), s.k(), s.v(), s.scores(), s.weightRow(i), {
        i,
        j,
        scale: s.scale(),
        temperature: get("temperature"),
        causal: get("causal"),
        mask: s.mask(),
        bias: s.bias(),
      }),
    /** Why row i may not read column j: "ahead" (the causal rule), "sink" (the first token, left
     * out), "mask"; null when it may. */
    closedWhy: (i, j) => (get("causal") && j > i ? "ahead" : !s.closed(i, j) ? null : get("sink") && j === 0 ? "sink" : "mask"),
    /** A cell row i may not read: ahead of it under the causal rule, or closed by the mask. */
    closed: (i, j) => (get("causal") && j > i) || (!!s.mask() && !s.mask()[i * s.m() + j]),
  };
  return s;
}
