// Every head's thumbnail and summaries: each head's weights at the temperature, as block means
// (the picture) and as head summaries (the numbers). Small inputs are done here at once; a whole
// model's heads (12 × 12 at 512 tokens is 144 score matrices) by a pool of workers, one head per
// message, so the page's thread stays free and every core helps. Where no worker can start the
// page does them itself, in slices between its other work.
import * as A from "./attention.js";
import { startWorker } from "./painter.js";

export const SIZE = 84; // a thumbnail's side in pixels, at most
const KEEP = 2 ** 24; // scores kept for reuse, over every head: 128 MB

/** @typedef {import("./types").Matrix} Matrix */
/** @typedef {import("./painter.js").Copied} Copied */
/** @typedef {import("./painter.js").Started} Started */
/** A head's thumbnail: block means of its weights, at most SIZE × SIZE, and its summaries by name. */
/** @typedef {ReturnType<typeof thumbnail> & { summary: Record<string, number> }} Thumb */
/** @typedef {import("./types").HeadJob} HeadJob */
/** The thumbnails' work computed here (a store's `thumbnails()`, not the kernel's): thumbs[h] null until done. */
/** @typedef {Extract<import("./types").ThumbWork, { kernel?: undefined }>} ThumbWork */
/** A head's settings: its learnt sink's logit (`sink`, or null) and whether the summaries say the sink's share (`withSinks`). */
/** @typedef {{ temperature: number, causal: boolean, mask: import("./types").Mask, cross: boolean, sink?: number | null, withSinks?: boolean }} ThumbSettings */
/** What a worker is sent for one head's thumbnail; keep: send its scores back too. */
/** @typedef {ThumbSettings & { kind: "thumb", q: Copied, k: Copied, bias: Copied | null, scale: number, softcap: number | null, keep: boolean }} ThumbMessage */
/**
 * @typedef {object} ThumbPool
 * @property {() => boolean} usable
 * @property {() => void} hold
 * @property {(work: ThumbWork) => void} run
 * @property {() => void} destroy
 */

/** The mean weight of each block of cells (W is n × m), at most SIZE × SIZE blocks:
 * {data, width, height, max, averaged}.
 * @param {ArrayLike<number>} W  @param {number} n */
export function thumbnail(W, n, m = W.length / n) {
  const width = Math.min(m, SIZE),
    height = Math.min(n, SIZE),
    sums = new Float64Array(width * height),
    counts = new Float64Array(width * height);
  /** @param {number} count  @param {number} side */
  const blocks = (count, side) => new Int32Array(count).map((_, i) => Math.floor((i * side) / count));
  const rowBlock = blocks(n, height),
    colBlock = blocks(m, width);
  for (let i = 0; i < n; i++) {
    const row = rowBlock[i] * width;
    for (let j = 0; j < m; j++) {
      sums[row + colBlock[j]] += W[i * m + j];
      counts[row + colBlock[j]] += 1;
    }
  }
  let max = 0;
  for (let p = 0; p < sums.length; p++) {
    sums[p] /= counts[p];
    max = Math.max(max, sums[p]);
  }
  return { data: sums, width, height, max, averaged: width < m || height < n };
}

/** One head's thumbnail and summaries from its scores S (n rows): {data, width, height, max, averaged, summary}.
 * @param {Float64Array} S  @param {number} n  @param {ThumbSettings} settings  @returns {Thumb} */
export function thumbOf(S, n, { temperature, causal, mask, cross, sink = null, withSinks = false }) {
  const m = S.length / n,
    W = A.weights(S, n, temperature, causal, mask, sink);
  const open = A.openCell(causal, mask, m);
  return { ...thumbnail(W, n, m), summary: A.headSummary(W, n, open, cross, withSinks) };
}

/** A head's own arrays among a job's: its q and k, and its bias (its own among a layer's heads,
 * for a model's thumbnails run over every layer; or the one shared).
 * @param {HeadJob} job  @param {number} h  @returns {{ q: Matrix, k: Matrix, bias: Matrix | null }} */
function headArrays(job, h) {
  const bias = job.bias && (job.bias.heads > 1 ? A.headOf(job.bias, h % job.bias.heads) : job.bias);
  return { q: A.headOf(job.q, h), k: A.headOf(job.k, h), bias };
}

/** Fill in work.thumbs (a store's `thumbnails()`) head by head, each head's scores in pieces of
 * rows, until all are done or busy() says stop; true when every head is done.
 * @param {ThumbWork} work  @param {() => boolean} busy */
export function advance(work, busy) {
  const { job } = work,
    n = job.q.rows,
    m = job.k.rows,
    step = Math.max(1, Math.floor(65536 / m));
  for (let h = work.thumbs.indexOf(null); h >= 0 && !busy(); h = work.thumbs.indexOf(null)) {
    job.scores[h] ??= new Float64Array(n * m);
    const { q, k, bias } = headArrays(job, h);
    while (job.rows[h] < n && !busy()) {
      const r = job.rows[h];
      A.addBias(
        A.scoreRows(/** @type {Float64Array} */ (job.scores[h]), q, k, job.scale, r, Math.min(n, r + step), job.softcap),
        bias,
        r,
        Math.min(n, r + step),
      );
      job.rows[h] = Math.min(n, r + step);
    }
    if (job.rows[h] < n) break;
    work.thumbs[h] = thumbOf(/** @type {Float64Array} */ (job.scores[h]), n, { ...work, mask: maskOfHead(work, h), ...sinkOfHead(work, h) });
    // a whole model's heads are too many to keep every score of (12 × 12 at 512 tokens: 300 MB):
    // past KEEP numbers a head keeps only its thumbnail, and scores itself again when chosen
    if (!kept(job)) [job.scores[h], job.rows[h]] = [null, 0];
  }
  return !work.thumbs.includes(null);
}

/** The mask of head h among a job's heads: its layer's own, where a model's layers have masks.
 * @param {ThumbWork} work  @param {number} h */
const maskOfHead = (work, h) => (work.masks ? work.masks[Math.floor((h * work.masks.length) / work.job.q.heads)] : work.mask);

/** Head h's learnt sink among a job's heads, and whether the summaries say the sinks' share.
 * @param {ThumbWork} work  @param {number} h  @returns {{ sink: number | null, withSinks: boolean }} */
const sinkOfHead = (work, h) => ({ sink: work.sinks?.[h] ?? null, withSinks: !!work.sinks });

/** @param {HeadJob} job */
const kept = (job) => job.q.rows * job.k.rows * job.q.heads <= KEEP; // every head's scores fit in memory
/** @param {Matrix | null} m  @returns {Copied | null} */
const copy = (m) => m && { data: m.data.slice(), rows: m.rows, cols: m.cols }; // one head's, not every head's buffer

/**
 * createThumbPool({onThumb(), onFail()}) -> {run(work), hold(), usable(), destroy()}: workers that fill
 * in work.thumbs, a head at a time each, the newest work only (a head of older work that arrives
 * late is dropped). onThumb() is called as each arrives; onFail() once when workers cannot run
 * here (a host's policy, an error, or none saying it started within two seconds), after which
 * usable() is false and the caller does the work itself.
 * @param {{ onThumb: () => void, onFail: () => void }} options  @returns {ThumbPool}
 */
export function createThumbPool({ onThumb, onFail }) {
  const size = Math.max(1, Math.min(4, globalThis.navigator?.hardwareConcurrency || 2));
  /** @typedef {Started & { busy: { work: ThumbWork, h: number } | null, ready: boolean }} Entry */
  /** @type {Entry[] | null} */
  let workers = null,
    /** @type {ThumbWork | null} */
    work = null,
    /** @type {(number | undefined)[]} */
    queue = [],
    failed = typeof Worker !== "function",
    /** @type {ReturnType<typeof setTimeout> | 0} */
    silent = 0;

  function start() {
    workers = [];
    for (let i = 0; i < size && !failed; i++) {
      const started = startWorker();
      if (!started) return fail();
      /** @type {Entry} */
      const entry = { ...started, busy: null, ready: false };
      started.worker.onmessage = (/** @type {MessageEvent<import("./paint-worker.js").WorkerReady | import("./paint-worker.js").ThumbAnswer>} */ { data }) => {
        if (data.ready) {
          entry.ready = true;
          clearTimeout(silent);
          return;
        }
        const done = entry.busy;
        entry.busy = null;
        if (done && data.scores && !done.work.job.rows[done.h]) {
          // the head's scores, kept as the page's own slices keep them: choosing it costs no second pass
          done.work.job.scores[done.h] = data.scores;
          done.work.job.rows[done.h] = done.work.job.q.rows;
        }
        if (done && done.work === work && !work.thumbs[done.h]) {
          work.thumbs[done.h] = data.thumb;
          onThumb();
        }
        feed(entry);
      };
      started.worker.onerror = (ev) => {
        ev.preventDefault();
        fail();
      };
      /** @type {Entry[]} */ (workers).push(entry);
    }
    wait(2000);
  }
  // none ready in time: give up, unless the page itself was too busy to hear them (a late timer)
  /** @param {number} ms */
  function wait(ms) {
    const due = performance.now() + ms;
    silent = setTimeout(() => {
      if (!workers || workers.some((w) => w.ready)) return;
      if (performance.now() - due > 250) wait(500);
      else fail();
    }, ms);
  }
  /** @param {Entry} entry */
  function feed(entry) {
    if (!work || failed) return;
    let h = queue.shift();
    while (h != null && work.thumbs[h]) h = queue.shift();
    if (h == null) return;
    const { q, k, bias } = headArrays(work.job, h);
    entry.busy = { work, h };
    entry.worker.postMessage({
      kind: "thumb",
      q: /** @type {Copied} */ (copy(q)),
      k: /** @type {Copied} */ (copy(k)),
      bias: copy(bias),
      scale: work.job.scale,
      softcap: work.job.softcap,
      temperature: work.temperature,
      causal: work.causal,
      mask: maskOfHead(work, h),
      cross: work.cross,
      ...sinkOfHead(work, h),
      keep: kept(work.job),
    });
  }
  function stop() {
    clearTimeout(silent);
    for (const w of workers || []) {
      w.worker.terminate();
      URL.revokeObjectURL(w.url);
    }
    workers = null;
  }
  function fail() {
    if (failed) return;
    failed = true;
    stop();
    onFail();
  }

  return {
    usable: () => !failed,
    /** Drops the work in hand (newer work is coming): heads already asked for finish, unused. */
    hold() {
      work = null;
      queue = [];
    },
    /** Starts on `work`'s heads not yet done; the heads of any older work still in hand are dropped. */
    run(next) {
      if (failed) return;
      if (!workers) start();
      work = next;
      queue = next.thumbs.map((t, h) => (t ? null : h)).filter((h) => h != null);
      for (const w of workers || []) if (!w.busy) feed(w);
    },
    destroy: stop,
  };
}
