// The same formulas as src/attnwidget/formulas.py (and position.py), for drawing without a kernel round trip.
// Matrices are {data, rows, cols} (data row-major: Float32Array or Float64Array inputs, exactly
// the numbers Python holds; Float64Array results: every sum and product is in float64).

/** @typedef {import("./types").Matrix} Matrix */
/** @typedef {import("./types").Numbers} Numbers */
/** @typedef {import("./state").ArrayValue} ArrayValue */
/** @typedef {import("./state").MaskValue} MaskValue */
/** @typedef {ArrayLike<number> | null} MaskCells (n × m, 1 where a row may read; null: every cell) */

/** @typedef {{ new (buffer: ArrayBufferLike, byteOffset?: number, length?: number): Numbers | Int32Array | Uint8Array, BYTES_PER_ELEMENT: number }} ArrayType */
/** @type {Record<string, ArrayType>} */
const TYPES = { float32: Float32Array, float64: Float64Array, int32: Int32Array, uint8: Uint8Array };

/** Decode a synced array {shape, dtype, view: DataView} into {data, heads, rows, cols}.
 * @template {ArrayValue | MaskValue | null | undefined} V
 * @param {V} value
 * @returns {V extends MaskValue ? import("./types").Matrix<Uint8Array> : V extends ArrayValue ? Matrix : null} */
export function decodeMatrix(value) {
  /** @typedef {V extends MaskValue ? import("./types").Matrix<Uint8Array> : V extends ArrayValue ? Matrix : null} Out */
  if (!value) return /** @type {Out} */ (null);
  const { view, shape } = value;
  const Type = TYPES[value.dtype || "float32"];
  // A DataView may sit inside a larger buffer: honour its offset and length (copied when the
  // offset does not suit the element size).
  const data =
    view.byteOffset % Type.BYTES_PER_ELEMENT === 0
      ? new Type(view.buffer, view.byteOffset, view.byteLength / Type.BYTES_PER_ELEMENT)
      : new Type(view.buffer.slice(view.byteOffset, view.byteOffset + view.byteLength));
  const [heads, rows, cols] = shape.length === 3 ? shape : [1, ...shape];
  // a live model's layer comes one head at a time: the data are head `only`'s alone
  const { head } = /** @type {ArrayValue} */ (value); // (a mask has none)
  return /** @type {Out} */ (head == null ? { data, heads, rows, cols } : { data, heads, rows, cols, only: head });
}

/** One head of a (heads ×) rows × cols matrix, sharing its memory; of a matrix that holds one
 * head only, that head (the last one shown, until the kernel sends the next).
 * @template {Numbers | Uint8Array} D  @param {import("./types").Matrix<D>} m  @param {number} h
 * @returns {import("./types").Matrix<D>} */
export function headOf(m, h) {
  const size = m.rows * m.cols;
  const p = m.only == null ? h : 0;
  return { data: /** @type {D} */ (m.data.subarray(p * size, (p + 1) * size)), heads: 1, rows: m.rows, cols: m.cols };
}

/** Encode a typed array as a synced array of the same precision, for sending an edited matrix back to Python.
 * @param {Numbers} data  @param {number[]} shape  @returns {ArrayValue} */
export function encodeMatrix(data, shape) {
  const copy = data.slice();
  return { shape, dtype: copy instanceof Float64Array ? "float64" : "float32", view: new DataView(copy.buffer) };
}

/** @param {number} dk  @returns {number} */
export function defaultScale(dk) {
  return 1 / Math.sqrt(dk);
}

/** scale · Q Kᵀ (soft-capped to softcap · tanh(s / softcap) when softcap is given, then + bias,
 * n×m, when given), n×m (n queries, m keys), before temperature and mask.
 * @param {Matrix} q  @param {Matrix} k  @param {number} scale  @param {Matrix | null} [bias]  @param {number | null} [softcap]
 * @returns {Float64Array} */
export function scores(q, k, scale, bias = null, softcap = null) {
  return addBias(scoreRows(new Float64Array(q.rows * k.rows), q, k, scale, 0, q.rows, softcap), bias, 0, q.rows);
}

/** A score soft-capped: softcap · tanh(s / softcap), as numpy computes it (Gemma 2's cap).
 * @param {number} s  @param {number} softcap */
export const capped = (s, softcap) => softcap * Math.tanh(s / softcap);

/** Rows r0..r1 of `bias` (rows × cols, or null for none) added to `out` in place: scale·q·k + bias,
 * one addition per score, as numpy makes it.
 * @param {Float64Array} out  @param {Matrix | null} bias  @param {number} r0  @param {number} r1 */
export function addBias(out, bias, r0, r1) {
  if (!bias) return out;
  for (let p = r0 * bias.cols, end = r1 * bias.cols; p < end; p++) out[p] += bias.data[p];
  return out;
}

/** Rows r0..r1 of scale · Q Kᵀ (soft-capped when softcap is given), written into `out` (so long
 * inputs can be done in pieces).
 * @param {Float64Array} out  @param {Matrix} q  @param {Matrix} k  @param {number} scale  @param {number} r0  @param {number} r1
 * @param {number | null} [softcap] */
export function scoreRows(out, q, k, scale, r0, r1, softcap = null) {
  // Two queries against four keys at a time: each loaded number serves several sums, about four
  // times as fast as one dot product at a time. Every sum still runs over c in order, so each
  // score is the very same number as the plain loop's.
  const d = q.cols,
    m = k.rows,
    Q = q.data,
    K = k.data;
  /** @param {number} i  @param {number} j */
  const dot = (i, j) => {
    let s = 0;
    for (let c = 0; c < d; c++) s += Q[i * d + c] * K[j * d + c];
    return s;
  };
  let i = r0;
  for (; i + 1 < r1; i += 2) {
    const qa = i * d,
      qb = qa + d,
      oa = i * m,
      ob = oa + m;
    let j = 0;
    for (; j + 3 < m; j += 4) {
      const k0 = j * d,
        k1 = k0 + d,
        k2 = k1 + d,
        k3 = k2 + d;
      let a0 = 0,
        a1 = 0,
        a2 = 0,
        a3 = 0,
        b0 = 0,
        b1 = 0,
        b2 = 0,
        b3 = 0;
      for (let c = 0; c < d; c++) {
        const x = Q[qa + c],
          y = Q[qb + c],
          u0 = K[k0 + c],
          u1 = K[k1 + c],
          u2 = K[k2 + c],
          u3 = K[k3 + c];
        a0 += x * u0;
        a1 += x * u1;
        a2 += x * u2;
        a3 += x * u3;
        b0 += y * u0;
        b1 += y * u1;
        b2 += y * u2;
        b3 += y * u3;
      }
      out[oa + j] = scale * a0;
      out[oa + j + 1] = scale * a1;
      out[oa + j + 2] = scale * a2;
      out[oa + j + 3] = scale * a3;
      out[ob + j] = scale * b0;
      out[ob + j + 1] = scale * b1;
      out[ob + j + 2] = scale * b2;
      out[ob + j + 3] = scale * b3;
    }
    for (; j < m; j++) {
      out[oa + j] = scale * dot(i, j);
      out[ob + j] = scale * dot(i + 1, j);
    }
  }
  for (; i < r1; i++) for (let j = 0; j < m; j++) out[i * m + j] = scale * dot(i, j);
  if (softcap != null) for (let p = r0 * m, end = r1 * m; p < end; p++) out[p] = capped(out[p], softcap);
  return out;
}

/**
 * Row-wise softmax of scores / T (`rows` rows of S.length / rows keys) over the cells a row may
 * read: with causal, j ≤ i; with a mask (rows × keys, 1 = may read), its cells. The others are
 * exactly 0, and so is a row that may read nothing.
 */
/** A score at or below this closes its cell: weight exactly 0 at every temperature (core.CLOSED). */
export const CLOSED = -1e30;

/** A learnt sink's logit as the softmax takes it: null for none (null, or at or below CLOSED, as a closed cell).
 * @param {number | null | undefined} z  @returns {number | null} */
export const sinkLogit = (z) => (z != null && z > CLOSED ? z : null);

/** With a learnt sink (`sink`, its logit z: gpt-oss), z is one more column of every row's softmax, dropped
 * after it: each row sums to 1 − the sink's share.
 * @param {ArrayLike<number>} S  @param {number} rows  @param {number} temperature  @param {boolean} causal  @param {MaskCells} [mask]
 * @param {number | null} [sink] */
export function weights(S, rows, temperature, causal, mask = null, sink = null) {
  const m = S.length / rows,
    W = new Float64Array(S.length);
  for (let i = 0; i < rows; i++) weightRow(S, m, i, temperature, causal, mask, W.subarray(i * m, i * m + m), sink);
  return W;
}

/** Row i of `weights`, into `out` (n numbers: a row is n keys long; zeros where the row may not read).
 * @param {ArrayLike<number>} S  @param {number} n  @param {number} i  @param {number} temperature  @param {boolean} causal
 * @param {MaskCells} [mask]  @param {Float64Array} [out]  @param {number | null} [sink] */
export function weightRow(S, n, i, temperature, causal, mask = null, out = new Float64Array(n), sink = null) {
  const last = causal ? Math.min(i, n - 1) : n - 1,
    row = i * n,
    z = sinkLogit(sink);
  out.fill(0);
  let max = z ?? -Infinity; // the sink's column is one of the row's
  for (let j = 0; j <= last; j++) if ((!mask || mask[row + j]) && S[row + j] > CLOSED && S[row + j] > max) max = S[row + j];
  if (max === -Infinity) return out;
  let sum = 0;
  for (let j = 0; j <= last; j++) {
    if ((mask && !mask[row + j]) || S[row + j] <= CLOSED) continue;
    // max first: no overflow at any T; divided, as numpy does (1/T overflows for a tiny T)
    const e = Math.exp((S[row + j] - max) / temperature);
    out[j] = e;
    sum += e;
  }
  if (z != null) sum += Math.exp((z - max) / temperature); // the sink's own term: its share, dropped from the row
  for (let j = 0; j <= last; j++) out[j] /= sum; // divided, as numpy divides by the row's total
  return out;
}

/** W · V, n×d_v (W is n × m, V m × d_v). @param {ArrayLike<number>} W  @param {Matrix} v */
export function output(W, v) {
  const m = v.rows,
    n = W.length / m,
    d = v.cols,
    O = new Float64Array(n * d);
  for (let i = 0; i < n; i++) {
    for (let j = 0; j < m; j++) {
      const w = W[i * m + j];
      if (w === 0) continue;
      for (let c = 0; c < d; c++) O[i * d + c] += w * v.data[j * d + c];
    }
  }
  return O;
}

/** Differential attention's pair of head `head` (of `heads`): the heads whose softmax maps are its map 1
 * and map 2, [p, p + heads/2] with p = head mod heads/2 (formulas.py's pair_heads).
 * @param {number} head  @param {number} heads  @returns {[number, number]} */
export function pairHeads(head, heads) {
  const half = Math.floor(heads / 2);
  return [head % half, (head % half) + half];
}

/** Differential attention's signed difference map1 − λ·map2, cell by cell (formulas.py's differential):
 * each row sums to 1 − λ where it reads anything. @param {ArrayLike<number>} W1  @param {ArrayLike<number>} W2  @param {number} lam */
export function difference(W1, W2, lam) {
  const D = new Float64Array(W1.length);
  for (let p = 0; p < D.length; p++) D[p] = W1[p] - lam * W2[p];
  return D;
}

/** Weight × ‖value‖ of one head (Kobayashi et al., 2020) where the head adds its values as they
 * are (Python's core.attention_norms with no output projection): W[i, j]·‖v_j‖, rows × keys, float32
 * as Python sends a measure. W: rows × m; v: {rows: m, cols, data}.
 * @param {ArrayLike<number>} W  @param {Matrix} v */
export function weightNorms(W, v) {
  const m = v.rows,
    d = v.cols,
    lengths = new Float64Array(m),
    out = new Float32Array(W.length);
  for (let j = 0; j < m; j++) {
    let sum = 0;
    for (let c = 0; c < d; c++) sum += v.data[j * d + c] * v.data[j * d + c];
    lengths[j] = Math.sqrt(sum);
  }
  for (let p = 0; p < W.length; p++) out[p] = W[p] * lengths[p % m];
  return out;
}

/** exp(entropy) of row i's weights divided by the row's sum (formulas.effective_tokens): the tokens among what
 * the row keeps, whatever share a learnt sink took. @param {ArrayLike<number>} W  @param {number} n  @param {number} i */
export function effectiveTokens(W, n, i) {
  let h = 0,
    total = 0;
  for (let j = 0; j < n; j++) {
    const w = W[i * n + j];
    if (w > 0) h -= w * Math.log(w);
    total += w;
  }
  // the entropy of w / t is ln t − Σ w·ln w / t: the plain one where t = 1
  return total > 0 ? Math.exp(Math.log(total) + h / total) : 0; // a row that may read nothing: 0, as in numpy
}

/** The head summaries of one weight matrix (rows × m), as core.head_summaries defines them: each
 * a mean over the rows where it exists (NaN where no row has it). `open(i, j)`: may row i read j.
 * In cross-attention no row reads itself or its previous token. `sinks`: the head's learnt sink's
 * share of each row too ("sink_share", 1 − the row's sum).
 * @param {ArrayLike<number>} W  @param {number} rows  @param {(i: number, j: number) => boolean} open  @param {boolean} [cross]
 * @param {boolean} [sinks]  @returns {Record<string, number>} */
export function headSummary(W, rows, open, cross = false, sinks = false) {
  const m = W.length / rows;
  const sums = { first: 0, self: 0, previous: 0, effective_tokens: 0, sink_share: 0 },
    counts = { first: 0, self: 0, previous: 0, effective_tokens: 0, sink_share: 0 };
  /** @param {keyof typeof sums} name  @param {number} value */
  const add = (name, value) => {
    sums[name] += value;
    counts[name] += 1;
  };
  for (let i = 0; i < rows; i++) {
    let any = false;
    for (let j = 0; j < m && !any; j++) any = open(i, j);
    if (open(i, 0)) add("first", W[i * m]);
    if (!cross && i < m && open(i, i)) add("self", W[i * m + i]);
    if (!cross && i > 0 && i <= m && open(i, i - 1)) add("previous", W[i * m + i - 1]);
    if (any) add("effective_tokens", effectiveTokens(W, m, i));
    if (any && sinks) {
      let kept = 0;
      for (let j = 0; j < m; j++) kept += W[i * m + j];
      add("sink_share", 1 - kept);
    }
  }
  const names = /** @type {(keyof typeof sums)[]} */ (Object.keys(sums)).filter((k) => sinks || k !== "sink_share");
  return Object.fromEntries(names.map((k) => [k, counts[k] ? sums[k] / counts[k] : NaN]));
}

const U = 2 ** -53; // float64's unit roundoff

/**
 * Whether the page's numbers can be trusted to agree with numpy's. Both compute each score
 * within (d+2)·u·|scale|·|q|·|k| of its true value, in different orders, so they may differ by
 * twice that; a score off by δ moves a weight by up to 2δ/T. Returns the bound on a score's
 * difference and the largest score; `agreement` turns them into a verdict for a temperature.
 * @param {Matrix} q  @param {Matrix} k  @param {number} scale  @param {ArrayLike<number>} S
 * @returns {{ score: number, dot: number, top: number }}
 */
export function roundingBound(q, k, scale, S) {
  /** @param {Matrix} m */
  const norms = (m) => {
    // the largest row norm, of rows divided by their largest entry (no overflow)
    const big = magnitude(m.data);
    let top = 0;
    for (let i = 0; i < m.rows; i++) {
      let s = 0;
      for (let c = 0; c < m.cols; c++) s += (m.data[i * m.cols + c] / big) ** 2;
      top = Math.max(top, s);
    }
    return Math.sqrt(top) * big;
  };
  let top = 0;
  for (let i = 0; i < S.length; i++) top = Math.max(top, Math.abs(S[i]));
  // below 2^-1022 rounding errors are absolute, up to half the smallest number per operation
  const tiny = 2 * (q.cols + 2) * (1 + Math.abs(scale)) * Number.MIN_VALUE;
  const dot = 2 * (q.cols + 2) * U * Math.abs(scale) * norms(q) * norms(k) + tiny; // the same for every cell
  return { score: dot + 4 * U * top, dot, top };
}

/**
 * {exact, scoreError, weightError, top}: exact when the scores agree with numpy's to 1e-7 of the
 * largest and the weights (so the outputs too) to about 5e-7, inside the promised 1e-6. A score
 * off by δ moves a weight by a factor of up to e^(2δ/T); at a tiny T that is large, but a row
 * where one score leads every other by more than 2δ + 40·T is still exact (the others are below
 * e^-40 in both), so only rows with a near-tie are unsure.
 * @param {{ score: number, dot?: number, top: number }} bound  @param {ArrayLike<number>} S  @param {number} rows
 * @param {number} temperature  @param {boolean} causal  @param {MaskCells} [mask]
 * @returns {{ exact: boolean, scoreError: number, weightError: number, top: number }}
 */
export function agreement({ score, dot = score, top }, S, rows, temperature, causal, mask = null) {
  const spread = (2 * score) / temperature;
  const scoresOk = score <= 1e-7 * Math.max(1, top);
  if (spread <= 2.5e-7) return { exact: scoresOk, scoreError: score, weightError: spread, top };
  // each cell's own error: the dot product's, and the rounding of its own size (a bias as large as
  // float32's minimum, as models close cells with, errs hugely but is e^-huge = 0 in both)
  /** @param {number} x */
  const err = (x) => dot + 4 * U * Math.abs(x);
  let unsure = 0;
  const n = S.length / rows; // keys per row
  for (let i = 0; i < rows && !unsure; i++) {
    const last = causal ? Math.min(i, n - 1) : n - 1,
      row = i * n;
    let max = -Infinity,
      near = 0,
      worst = 0; // the largest error among the cells that carry weight (the rest are below e^-40 in both)
    for (let j = 0; j <= last; j++) if (!mask || mask[row + j]) max = Math.max(max, S[row + j]);
    for (let j = 0; j <= last; j++)
      if ((!mask || mask[row + j]) && max - S[row + j] <= err(max) + err(S[row + j]) + 40 * temperature) {
        near++;
        worst = Math.max(worst, err(S[row + j]));
      }
    if (near > 1 && (2 * worst) / temperature > 2.5e-7) unsure++;
  }
  return { exact: scoresOk && !unsure, scoreError: score, weightError: unsure ? Math.min(1, Math.expm1(spread)) : 0, top };
}

/** Mean of the value rows. @param {Matrix} v */
export function meanRow(v) {
  const m = new Float64Array(v.cols);
  // each term divided first: a sum of huge values would overflow
  for (let j = 0; j < v.rows; j++) for (let c = 0; c < v.cols; c++) m[c] += v.data[j * v.cols + c] / v.rows;
  return m;
}

/** Rows (n × d, flat) minus a centre, times a d × 2 basis: a 2-D projection, as a matrix.
 * @param {ArrayLike<number>} rows  @param {number} n  @param {ArrayLike<number>} centre  @param {Matrix} basis
 * @returns {import("./types").Matrix<Float64Array>} */
export function project(rows, n, centre, basis) {
  const d = basis.rows,
    out = new Float64Array(n * 2);
  for (let i = 0; i < n; i++) {
    for (let c = 0; c < d; c++) {
      const x = rows[i * d + c] - centre[c];
      out[i * 2] += x * basis.data[c * 2];
      out[i * 2 + 1] += x * basis.data[c * 2 + 1];
    }
  }
  return { data: out, heads: 1, rows: n, cols: 2 };
}

/** @param {ArrayLike<number>} a  @param {number} ai  @param {ArrayLike<number>} b  @param {number} bi  @param {number} d */
function dist(a, ai, b, bi, d) {
  let s = 0;
  for (let c = 0; c < d; c++) {
    const t = a[ai * d + c] - b[bi * d + c];
    s += t * t;
  }
  return Math.sqrt(s);
}

/** [smallest, largest] of an array, by a loop: spreading a long array into Math.max overflows the stack.
 * @param {ArrayLike<number>} values  @returns {[number, number]} */
export function extent(values) {
  let lo = Infinity,
    hi = -Infinity;
  for (let i = 0; i < values.length; i++) {
    if (values[i] < lo) lo = values[i];
    if (values[i] > hi) hi = values[i];
  }
  return [lo, hi];
}

/** The largest magnitude in an array (1 when all are 0): metrics of huge values are computed on
 * values divided by it, near 1, so no square overflows. @param {ArrayLike<number>} data */
export function magnitude(data) {
  let top = 0;
  for (let i = 0; i < data.length; i++) top = Math.max(top, Math.abs(data[i]));
  return top > 0 ? top : 1;
}

/** @param {ArrayLike<number>} data  @param {number} m */
const divided = (data, m) => Float64Array.from(data, (x) => x / m);

/** ‖O_i − mean(V)‖ / max_j ‖V_j − mean(V)‖, 0 when all values coincide. @param {Numbers} O  @param {Matrix} v  @param {number} i */
export function senseResolved(O, v, i) {
  const m = magnitude(v.data),
    vs = { ...v, data: divided(v.data, m) },
    Os = divided(O.subarray(i * v.cols, (i + 1) * v.cols), m);
  const mean = meanRow(vs);
  let reach = 0;
  for (let j = 0; j < v.rows; j++) reach = Math.max(reach, dist(vs.data, j, mean, 0, v.cols));
  return reach === 0 ? 0 : dist(Os, 0, mean, 0, v.cols) / reach;
}

/** The largest distance between any two tokens' outputs. @param {ArrayLike<number>} O  @param {number} n  @param {number} d */
export function outputSpread(O, n, d) {
  const m = magnitude(O),
    Os = divided(O, m);
  let best = 0;
  for (let i = 0; i < n; i++) for (let j = i + 1; j < n; j++) best = Math.max(best, dist(Os, i, Os, j, d));
  return best * m;
}

/** The arithmetic of one weight, step by step, as core.Attention.cell computes it; `Wi` is row i of the weights.
 * A learnt sink's exp(z / T) is a term of the row's sum.
 * @param {Matrix} q  @param {Matrix} k  @param {Matrix} v  @param {ArrayLike<number>} S  @param {ArrayLike<number>} Wi
 * @param {{ i: number, j: number, scale: number, temperature: number, causal: boolean, mask?: MaskCells, bias?: Matrix | null, softcap?: number | null, sink?: number | null }} at */
export function cellArithmetic(q, k, v, S, Wi, { i, j, scale, temperature, causal, mask = null, bias = null, softcap = null, sink = null }) {
  const n = k.rows,
    last = causal ? Math.min(i, n - 1) : n - 1,
    open = /** @param {number} m */ (m) => (!mask || mask[i * n + m]) && S[i * n + m] > CLOSED,
    z = sinkLogit(sink);
  let dot = 0;
  for (let c = 0; c < q.cols; c++) dot += q.data[i * q.cols + c] * k.data[j * k.cols + c];
  let max = z ?? -Infinity;
  for (let m = 0; m <= last; m++) if (open(m)) max = Math.max(max, S[i * n + m]);
  if (max === -Infinity) max = 0;
  const shift = Math.abs(max / temperature) > 700 ? max / temperature : 0; // exp would overflow or vanish: shift the row
  // shifted, each term is exp((s - max) / T): the same as exp(s / T - shift), and never ∞ - ∞
  /** @type {(s: number) => number} */
  const expOf = shift ? (s) => Math.exp((s - max) / temperature) : (s) => Math.exp(s / temperature);
  let rowSum = 0;
  for (let m = 0; m <= last; m++) if (open(m)) rowSum += expOf(S[i * n + m]);
  if (z != null) rowSum += expOf(z);
  const masked = (causal && j > i) || !open(j),
    tempered = S[i * n + j] / temperature,
    weight = Wi[j];
  const added = bias ? bias.data[i * n + j] : 0;
  const value = Array.from(v.data.subarray(j * v.cols, (j + 1) * v.cols));
  return {
    dot,
    scale,
    softcap,
    capped: softcap == null ? null : capped(scale * dot, softcap),
    bias: added,
    score: S[i * n + j],
    temperature,
    tempered,
    shift,
    masked,
    exp: masked ? 0 : expOf(S[i * n + j]),
    rowSum,
    sink: z,
    weight,
    value,
    share: value.map((x) => weight * x),
  };
}

/** Everything at once, for tests and small inputs: the JS twin of core.attention.
 * @param {Matrix} q  @param {Matrix} k  @param {Matrix} v
 * @param {{ temperature?: number, causal?: boolean, scale?: number | null, mask?: MaskCells, softcap?: number | null, sink?: number | null }} [options] */
export function attention(q, k, v, { temperature = 1, causal = false, scale = null, mask = null, softcap = null, sink = null } = {}) {
  const n = q.rows,
    s = scale == null ? defaultScale(q.cols) : scale;
  const S = scores(q, k, s, null, softcap),
    W = weights(S, n, temperature, causal, mask, sink),
    O = output(W, v);
  const eff = Array.from({ length: n }, (_, i) => effectiveTokens(W, k.rows, i));
  const sense = Array.from({ length: n }, (_, i) => senseResolved(O, v, i));
  return { scale: s, scores: S, weights: W, output: O, effectiveTokens: eff, senseResolved: sense, outputSpread: outputSpread(O, n, v.cols) };
}

/** Whether row i may read column j of an n × m matrix: not ahead of it under the causal rule, and
 * open in the mask (1 where a row may read; null: every cell). The page's one statement of it.
 * @param {boolean} causal  @param {MaskCells} mask  @param {number} m  @returns {(i: number, j: number) => boolean} */
export const openCell = (causal, mask, m) => (i, j) => !(causal && j > i) && (!mask || !!mask[i * m + j]);

// --- where position enters the lab's attention (position.py's twin): token i is at position i ---

/** (heads ×) rows × cols vectors, each turned pair by pair by its position × θ_i, θ_i = base^(−2i/cols):
 * RoPE in transformers' layout, pair i being entries i and i + cols/2.
 * @param {Matrix} m  @param {number} base  @returns {Matrix} */
export function rope(m, base) {
  const { rows, cols } = m,
    half = cols / 2,
    out = new Float64Array(m.data.length);
  const theta = Array.from({ length: half }, (_, i) => base ** (-(2 * i) / cols));
  for (let r = 0, count = m.data.length / cols; r < count; r++) {
    const p = r % rows,
      at = r * cols;
    for (let i = 0; i < half; i++) {
      const a = p * theta[i],
        c = Math.cos(a),
        s = Math.sin(a),
        x = m.data[at + i],
        y = m.data[at + half + i];
      out[at + i] = x * c - y * s;
      out[at + half + i] = y * c + x * s;
    }
  }
  return { ...m, data: out };
}

/** The ALiBi paper's slopes, as BLOOM has them (position.py's slopes): 2^(−8h/P) for the power of two P ≤ H, then
 * every other slope of 2P heads for the heads left. @param {number} heads  @returns {number[]} */
export function alibiSlopes(heads) {
  const power = 2 ** Math.floor(Math.log2(heads));
  const extra = Array.from({ length: heads - power }, (_, i) => 2 ** ((-4 * (2 * (i + 1) - 1)) / power));
  return [...Array.from({ length: power }, (_, i) => 2 ** ((-8 * (i + 1)) / power)), ...extra];
}

/** The bias `b` (n × m for every head, heads × n × m, or null) plus ALiBi's −m_h·|i − j|, as heads × n × m.
 * @param {Matrix | null} b  @param {number} heads  @param {number} n  @param {number} m  @param {number[]} slopes  @returns {Matrix} */
export function withAlibi(b, heads, n, m, slopes) {
  const data = new Float64Array(heads * n * m),
    shared = !b || b.heads === 1;
  for (let h = 0; h < heads; h++)
    for (let i = 0; i < n; i++)
      for (let j = 0; j < m; j++) {
        const p = (h * n + i) * m + j,
          ramp = -slopes[h] * Math.abs(i - j);
        data[p] = b ? b.data[shared ? i * m + j : p] + ramp : ramp;
      }
  return { data, heads, rows: n, cols: m };
}

/** A two-number vector turned by `angle` radians (RoPE's θ is 1 for two numbers: position p turns by p).
 * @param {number[]} vector  @param {number} angle  @returns {number[]} */

export const turn = ([x, y], angle) => [x * Math.cos(angle) - y * Math.sin(angle), y * Math.cos(angle) + x * Math.sin(angle)];
