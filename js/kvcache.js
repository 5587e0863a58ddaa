// A compressed KV cache of the head shown: which keys a method keeps for a budget of B, and what the
// focused row loses reading only those. The twin of kvcache.py's choose() and losses() for one head
// with a cache of its own (group 1) at its default options, as the widget's kv_method and kv_budget
// ask (w.kv_keep()); the same arithmetic in the same order, ties to the earlier key.
// No DOM: the page's views draw what this returns.

export const SINKS = 4; // StreamingLLM's first tokens kept (kvcache.SINKS)
export const SNAP_WINDOW = 64; // SnapKV's observation window at most (kvcache.SNAP_WINDOW)
export const KERNEL = 5; // SnapKV's pooling width (kvcache.KERNEL)
export const NO_CROSS =
  "a compressed KV cache keeps a text's own keys, the first and the most recent of the tokens its queries read: in " +
  "cross-attention the keys are another text's, so no key is the query's recent one; use a self-attention widget"; // (kvcache.NO_CROSS)

/** What a compressed cache keeps: one byte a key (1 kept), or why it cannot say.
 * @typedef {{ keep: Uint8Array, error: null } | { keep: null, error: string }} Kept */

/** The keys head `weights` (rows × m, every row read) keeps by `method` ("streaming", "h2o", "snapkv" or
 * "mask", with `keys`: the positions kept) for a budget of `budget` keys (kvcache.of_layer's choice, one head).
 * @param {string} method  @param {number} budget  @param {ArrayLike<number>} weights  @param {number} rows
 * @param {number} m  @param {readonly number[]} keys  @param {boolean} [cross]  cross-attention: refused
 * @returns {Kept} */
export function choose(method, budget, weights, rows, m, keys, cross = false) {
  if (cross) return { keep: null, error: NO_CROSS };
  const keep = new Uint8Array(m);
  if (method === "mask") {
    const bad = keys.find((j) => !(j >= 0 && j < m));
    if (bad !== undefined) return { keep: null, error: `kv_keys holds ${bad}, past the ${m} keys read (0 to ${m - 1}): keep keys that exist` };
    for (const j of keys) keep[j] = 1;
    return { keep, error: null };
  }
  if (method === "streaming") {
    keep.fill(1, 0, Math.min(SINKS, budget, m));
    if (budget > SINKS) keep.fill(1, Math.max(0, m - (budget - SINKS)));
    return { keep, error: null };
  }
  /** @type {Float64Array} */
  let scores;
  let recent;
  if (method === "h2o") {
    recent = Math.min(Math.floor(budget / 2), m);
    scores = new Float64Array(m); // the column sums over every row, a row at a time as numpy adds them
    for (let i = 0; i < rows; i++) for (let j = 0; j < m; j++) scores[j] += weights[i * m + j];
  } else if (method === "snapkv") {
    recent = Math.min(SNAP_WINDOW, Math.max(1, Math.floor(budget / 2)), rows, m); // (kvcache.snap_window)
    const before = m - recent,
      votes = new Float64Array(before); // the window's mean weight on each key before it
    for (let i = rows - recent; i < rows; i++) for (let j = 0; j < before; j++) votes[j] += weights[i * m + j];
    for (let j = 0; j < before; j++) votes[j] /= recent;
    scores = new Float64Array(m); // pooled over KERNEL neighbours, zeros past the ends counted in the mean
    const pad = Math.floor(KERNEL / 2);
    for (let j = 0; j < before; j++) {
      let t = 0;
      for (let c = j - pad; c < j - pad + KERNEL; c++) t += c >= 0 && c < before ? votes[c] : 0;
      scores[j] = t / KERNEL;
    }
  } else return { keep: null, error: `no such method: ${method}` };
  if (recent > 0) keep.fill(1, m - recent);
  // the rest: the highest scores among the keys not kept yet, ties to the earlier key
  const rest = [];
  for (let j = 0; j < m; j++) if (!keep[j]) rest.push(j);
  rest.sort((a, b) => scores[b] - scores[a] || a - b);
  for (const j of rest.slice(0, Math.max(0, Math.min(budget, m) - recent))) keep[j] = 1;
  return { keep, error: null };
}

/** What a row loses reading only the kept keys (kvcache.losses, one head): its `retained` weight Σ_kept w and how far
 * its output moves, ‖o′ − o‖ / ‖o‖ with o′ = Σ_kept w v / retained; NaN where nothing kept holds weight, or o = 0.
 * @param {ArrayLike<number>} row  the row's weights (m)  @param {{ data: ArrayLike<number>, cols: number } | null} v  each key's value
 * @param {Uint8Array} keep  @returns {{ retained: number, change: number, kept: number }} */
export function losses(row, v, keep) {
  const m = keep.length;
  let retained = 0,
    kept = 0;
  for (let j = 0; j < m; j++)
    if (keep[j]) {
      retained += row[j];
      kept++;
    }
  if (!v) return { retained, change: Number.NaN, kept };
  const d = v.cols,
    o = new Float64Array(d),
    o2 = new Float64Array(d);
  for (let j = 0; j < m; j++)
    for (let c = 0; c < d; c++) {
      o[c] += row[j] * v.data[j * d + c];
      if (keep[j]) o2[c] += row[j] * v.data[j * d + c];
    }
  let moved = 0,
    size = 0;
  for (let c = 0; c < d; c++) {
    moved += (o2[c] / retained - o[c]) ** 2;
    size += o[c] ** 2;
  }
  const change = Math.sqrt(moved) / Math.sqrt(size);
  return { retained, change: Number.isFinite(change) ? change : Number.NaN, kept };
}
