// The same formulas as src/attnwidget/core.py, for drawing without a kernel round trip.
// Matrices are row-major Float64Arrays with their shape beside them.

/** Decode a synced array {shape, dtype, view: DataView} into {data: Float32Array, rows, cols}. */
export function decodeMatrix(value) {
  if (!value) return null;
  const { view, shape } = value;
  // A DataView may sit inside a larger buffer: honour its offset and length.
  const data = new Float32Array(view.buffer, view.byteOffset, view.byteLength / 4);
  return { data, rows: shape[0], cols: shape[1] };
}

export function defaultScale(dk) {
  return 1 / Math.sqrt(dk);
}

/** scale · Q Kᵀ, n×n, before temperature and mask. */
export function scores(q, k, scale) {
  const n = q.rows, d = q.cols, out = new Float64Array(n * k.rows);
  for (let i = 0; i < n; i++) {
    for (let j = 0; j < k.rows; j++) {
      let s = 0;
      for (let c = 0; c < d; c++) s += q.data[i * d + c] * k.data[j * d + c];
      out[i * k.rows + j] = scale * s;
    }
  }
  return out;
}

/** Row-wise softmax of scores / T; with causal, cells j > i are exactly 0. */
export function weights(S, n, temperature, causal) {
  const W = new Float64Array(n * n);
  for (let i = 0; i < n; i++) {
    const last = causal ? i : n - 1, row = i * n;
    let max = -Infinity;
    for (let j = 0; j <= last; j++) if (S[row + j] > max) max = S[row + j];
    let sum = 0;
    for (let j = 0; j <= last; j++) {
      const e = Math.exp((S[row + j] - max) / temperature); // max first: no overflow at any T
      W[row + j] = e;
      sum += e;
    }
    for (let j = 0; j <= last; j++) W[row + j] /= sum;
  }
  return W;
}

/** W · V, n×d_v. */
export function output(W, v) {
  const n = v.rows, d = v.cols, O = new Float64Array(n * d);
  for (let i = 0; i < n; i++) {
    for (let j = 0; j < n; j++) {
      const w = W[i * n + j];
      if (w === 0) continue;
      for (let c = 0; c < d; c++) O[i * d + c] += w * v.data[j * d + c];
    }
  }
  return O;
}

/** exp(entropy) of row i. */
export function effectiveTokens(W, n, i) {
  let h = 0;
  for (let j = 0; j < n; j++) {
    const w = W[i * n + j];
    if (w > 0) h -= w * Math.log(w);
  }
  return Math.exp(h);
}

/** Mean of the value rows. */
export function meanRow(v) {
  const m = new Float64Array(v.cols);
  for (let j = 0; j < v.rows; j++) for (let c = 0; c < v.cols; c++) m[c] += v.data[j * v.cols + c];
  return m.map((x) => x / v.rows);
}

function dist(a, ai, b, bi, d) {
  let s = 0;
  for (let c = 0; c < d; c++) {
    const t = a[ai * d + c] - b[bi * d + c];
    s += t * t;
  }
  return Math.sqrt(s);
}

/** ‖O_i − mean(V)‖ / max_j ‖V_j − mean(V)‖, 0 when all values coincide. */
export function senseResolved(O, v, i) {
  const mean = meanRow(v);
  let reach = 0;
  for (let j = 0; j < v.rows; j++) reach = Math.max(reach, dist(v.data, j, mean, 0, v.cols));
  return reach === 0 ? 0 : dist(O, i, mean, 0, v.cols) / reach;
}

/** The largest distance between any two tokens' outputs. */
export function outputSpread(O, n, d) {
  let best = 0;
  for (let i = 0; i < n; i++) for (let j = i + 1; j < n; j++) best = Math.max(best, dist(O, i, O, j, d));
  return best;
}

/** Everything at once, for tests and small inputs: the JS twin of core.attention. */
export function attention(q, k, v, { temperature = 1, causal = false, scale = null } = {}) {
  const n = q.rows, s = scale == null ? defaultScale(q.cols) : scale;
  const S = scores(q, k, s), W = weights(S, n, temperature, causal), O = output(W, v);
  const eff = Array.from({ length: n }, (_, i) => effectiveTokens(W, n, i));
  const sense = Array.from({ length: n }, (_, i) => senseResolved(O, v, i));
  return { scale: s, scores: S, weights: W, output: O, effectiveTokens: eff, senseResolved: sense, outputSpread: outputSpread(O, n, v.cols) };
}
