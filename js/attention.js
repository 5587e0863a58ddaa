// The same formulas as src/attnwidget/core.py, for drawing without a kernel round trip.
// Matrices are {data, rows, cols} (data row-major: Float32Array inputs, Float64Array results).

/** Decode a synced array {shape, dtype, view: DataView} into {data: Float32Array, heads, rows, cols}. */
export function decodeMatrix(value) {
  if (!value) return null;
  const { view, shape } = value;
  // A DataView may sit inside a larger buffer: honour its offset and length.
  const data = new Float32Array(view.buffer, view.byteOffset, view.byteLength / 4);
  const [heads, rows, cols] = shape.length === 3 ? shape : [1, ...shape];
  return { data, heads, rows, cols };
}

/** One head of a (heads ×) rows × cols matrix, sharing its memory. */
export function headOf(m, h) {
  const size = m.rows * m.cols;
  return { data: m.data.subarray(h * size, (h + 1) * size), heads: 1, rows: m.rows, cols: m.cols };
}

/** Encode a Float32Array as a synced array, for sending an edited matrix back to Python. */
export function encodeMatrix(data, shape) {
  const copy = Float32Array.from(data);
  return { shape, dtype: "float32", view: new DataView(copy.buffer) };
}

export function defaultScale(dk) {
  return 1 / Math.sqrt(dk);
}

/** scale · Q Kᵀ, n×n, before temperature and mask. */
export function scores(q, k, scale) {
  return scoreRows(new Float64Array(q.rows * k.rows), q, k, scale, 0, q.rows);
}

/** Rows r0..r1 of scale · Q Kᵀ, written into `out` (so long inputs can be done in pieces). */
export function scoreRows(out, q, k, scale, r0, r1) {
  const d = q.cols;
  for (let i = r0; i < r1; i++) {
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
  const inv = 1 / temperature;
  for (let i = 0; i < n; i++) {
    const last = causal ? i : n - 1, row = i * n;
    let max = -Infinity;
    for (let j = 0; j <= last; j++) if (S[row + j] > max) max = S[row + j];
    let sum = 0;
    for (let j = 0; j <= last; j++) {
      const e = Math.exp((S[row + j] - max) * inv); // max first: no overflow at any T
      W[row + j] = e;
      sum += e;
    }
    const norm = 1 / sum;
    for (let j = 0; j <= last; j++) W[row + j] *= norm;
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

/** Rows (n × d, flat) minus a centre, times a d × 2 basis: a 2-D projection, as a matrix. */
export function project(rows, n, centre, basis) {
  const d = basis.rows, out = new Float64Array(n * 2);
  for (let i = 0; i < n; i++) {
    for (let c = 0; c < d; c++) {
      const x = rows[i * d + c] - centre[c];
      out[i * 2] += x * basis.data[c * 2];
      out[i * 2 + 1] += x * basis.data[c * 2 + 1];
    }
  }
  return { data: out, heads: 1, rows: n, cols: 2 };
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

/** The arithmetic of one weight, step by step, as core.Attention.cell computes it. */
export function cellArithmetic(q, k, v, S, W, { i, j, scale, temperature, causal }) {
  const n = q.rows, last = causal ? i : n - 1;
  let dot = 0;
  for (let c = 0; c < q.cols; c++) dot += q.data[i * q.cols + c] * k.data[j * k.cols + c];
  let max = -Infinity;
  for (let m = 0; m <= last; m++) max = Math.max(max, S[i * n + m]);
  const shift = Math.abs(max / temperature) > 700 ? max / temperature : 0; // exp would overflow or vanish: shift the row
  let rowSum = 0;
  for (let m = 0; m <= last; m++) rowSum += Math.exp(S[i * n + m] / temperature - shift);
  const masked = causal && j > i, tempered = S[i * n + j] / temperature, weight = W[i * n + j];
  const value = Array.from(v.data.subarray(j * v.cols, (j + 1) * v.cols));
  return { dot, scale, score: S[i * n + j], temperature, tempered, shift, masked, exp: masked ? 0 : Math.exp(tempered - shift), rowSum, weight, value, share: value.map((x) => weight * x) };
}

/** Everything at once, for tests and small inputs: the JS twin of core.attention. */
export function attention(q, k, v, { temperature = 1, causal = false, scale = null } = {}) {
  const n = q.rows, s = scale == null ? defaultScale(q.cols) : scale;
  const S = scores(q, k, s), W = weights(S, n, temperature, causal), O = output(W, v);
  const eff = Array.from({ length: n }, (_, i) => effectiveTokens(W, n, i));
  const sense = Array.from({ length: n }, (_, i) => senseResolved(O, v, i));
  return { scale: s, scores: S, weights: W, output: O, effectiveTokens: eff, senseResolved: sense, outputSpread: outputSpread(O, n, v.cols) };
}
