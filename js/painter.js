// The weights picture of a long input, painted by a worker: in the weights stage a temperature
// drag never waits for a million exponentials on the page's main thread. Only the newest request
// waits while one is painted, so a fast drag skips the values in between. Where no worker can
// start (a host that forbids them, or one that never says it started) the page paints with the
// same code itself.
import { weightPicture } from "./picture.js";

/* global PAINT_WORKER_SOURCE */ // the worker's bundle, as text (scripts/build.mjs)

/** @typedef {import("./picture.js").Painted} Painted */
/** @typedef {import("./types").Matrix} Matrix */
/** A head's numbers alone, as a worker is sent them. */
/** @typedef {Pick<Matrix, "data" | "rows" | "cols">} Copied */
/**
 * A picture asked for (see createPainter).
 * @typedef {object} PaintJob
 * @property {Matrix} q
 * @property {Matrix} k
 * @property {number} scale
 * @property {number | null} softcap
 * @property {number | null} sink
 * @property {Matrix | null} bias
 * @property {() => Float64Array} scores
 * @property {number} n
 * @property {number} temperature
 * @property {boolean} causal
 * @property {import("./types").Mask} mask
 * @property {boolean} stretch
 * @property {Uint32Array} lut
 * @property {number} closedPixel
 * @property {string} colours
 */
/**
 * What the worker is sent for a picture: q, k and the bias only when they change (else null), the
 * mask only when newMask.
 * @typedef {Pick<PaintJob, "n" | "temperature" | "causal" | "stretch" | "lut" | "closedPixel" | "scale" | "softcap" | "sink"> & {
 *   kind?: undefined, id: number, q: Copied | null, k: Copied | null, bias: Copied | null, newMask: boolean, mask: Uint8Array | null }} PictureMessage
 */
/** @typedef {{ image: Painted, current: boolean }} Requested */
/**
 * @typedef {object} Painter
 * @property {(job: PaintJob) => Requested | null} request
 * @property {() => boolean} pending
 * @property {() => boolean} starting
 * @property {() => void} paintHere
 * @property {() => void} release
 * @property {() => void} destroy
 */
/** @typedef {{ worker: Worker, url: string }} Started */

/** A worker running paint-worker.js, and the URL it came from; null where none can start.
 * @returns {Started | null} */
export function startWorker() {
  try {
    const url = URL.createObjectURL(new Blob([PAINT_WORKER_SOURCE], { type: "text/javascript" }));
    return { worker: new Worker(url), url };
  } catch {
    return null;
  }
}

// Two requests ask for the same picture when every input is the same object or value.
/** @type {(keyof PaintJob)[]} */
const KEYS = ["q", "k", "scale", "softcap", "bias", "n", "temperature", "causal", "mask", "sink", "stretch", "colours"];
/** @param {Matrix} m  @returns {Copied} */
const copy = (m) => ({ data: m.data.slice(), rows: m.rows, cols: m.cols }); // a head alone, not every head's buffer
/** @param {PaintJob | null} a  @param {PaintJob | null} b */
const same = (a, b) => !!a && !!b && KEYS.every((k) => a[k] === b[k]);

/**
 * createPainter(onPicture) -> {request(job), pending(), starting(), paintHere(), release(), destroy()}.
 * job: {q, k (one head's, kept by identity), scale, softcap (or null), sink (a learnt sink's logit, or null), bias (n×n or null), scores() (the page's scores: used only where
 * no worker runs, which then computes its own), n, temperature, causal, mask, stretch, lut,
 * closedPixel, colours (a key naming the lut)}. request returns {image: {pixels, width, height,
 * top}, current}, the newest picture (the same object until another arrives) and whether it is
 * the one asked for; null before the first. onPicture() is called when a picture arrives, and
 * when the worker has started or failed (a worker cannot start while the page's thread is busy:
 * the page waits for it).
 * @param {() => void} onPicture  @returns {Painter}
 */
export function createPainter(onPicture) {
  /** @type {Started | null} */
  let started = null,
    tried = false,
    ready = false; // the worker, started at the first request
  /** @typedef {{ job: PaintJob, picture: Painted }} Shown */
  /** @type {PaintJob | null} */
  let held = null,
    /** @type {(PaintJob & { id: number }) | null} */
    busy = null,
    /** @type {PaintJob | null} */
    next = null,
    /** @type {Shown | null} */
    last = null,
    /** @type {Shown | null} */
    prior = null, // the picture before last: a change undone needs no new one
    /** @type {PaintJob | null} */
    want = null,
    id = 0,
    /** @type {ReturnType<typeof setTimeout> | 0} */
    silent = 0;
  /** @param {PaintJob} job */
  const here = (job) => weightPicture({ ...job, scores: job.scores() });
  const wanted = () => !!last && same(last.job, want);

  function start() {
    tried = true;
    started = typeof Worker === "function" ? startWorker() : null;
    if (!started) return;
    // one that has not said it started within a second (the page holds back meanwhile) is given up
    silent = setTimeout(() => !ready && paintHere(), 1000);
    started.worker.onmessage = (/** @type {MessageEvent<import("./paint-worker.js").WorkerReady | import("./paint-worker.js").PictureAnswer>} */ { data }) => {
      if (data.ready) {
        ready = true;
        clearTimeout(silent);
        return onPicture();
      } // running: the page may busy itself now
      if (!busy || data.id !== busy.id) return;
      // a late answer to a request since taken back (a toggle undone) never replaces the one wanted
      if (!wanted()) [prior, last] = [last, { job: busy, picture: data }];
      busy = null;
      if (next) post(next);
      next = null;
      onPicture();
    };
    // a worker that cannot run (a policy, a script error): paint here from now on
    started.worker.onerror = (ev) => {
      ev.preventDefault();
      paintHere();
    };
  }
  /** @param {PaintJob} job */
  function post(job) {
    busy = { ...job, id: ++id };
    // q, k and the mask travel only when they change: the worker keeps the last ones
    const fresh = !held || held.q !== job.q || held.k !== job.k || held.scale !== job.scale || held.softcap !== job.softcap || held.bias !== job.bias;
    const newMask = !held || held.mask !== job.mask;
    const { n, temperature, causal, stretch, lut, closedPixel, scale, softcap, sink } = job;
    /** @type {Started} */ (started).worker.postMessage(
      /** @satisfies {PictureMessage} */ ({
        id,
        n,
        temperature,
        causal,
        stretch,
        lut,
        closedPixel,
        scale,
        softcap,
        sink,
        q: fresh ? copy(job.q) : null,
        k: fresh ? copy(job.k) : null,
        bias: fresh && job.bias ? copy(job.bias) : null,
        newMask,
        mask: newMask && job.mask ? job.mask.slice() : null,
      }),
    );
    held = job;
  }
  function stop() {
    clearTimeout(silent);
    started?.worker.terminate();
    if (started) URL.revokeObjectURL(started.url);
    started = held = busy = next = null;
    ready = false;
  }
  /** No worker from now on (one that failed, or never said it started): the page paints itself. */
  function paintHere() {
    stop();
    tried = true;
    onPicture();
  }

  return {
    request(job) {
      if (!tried) start();
      want = job;
      if (!wanted() && prior && same(prior.job, job)) [last, prior] = [prior, last]; // back to the one before: a toggle undone
      if (wanted())
        next = null; // back to the picture shown: nothing in between is needed
      else if (!started) [prior, last] = [last, { job, picture: here(job) }];
      else if (busy && same(busy, job)) next = null;
      else if (busy) next = job;
      else post(job);
      return last && { image: last.picture, current: wanted() };
    },
    /** True while the picture asked for last is not yet the one there is. */
    pending: () => !!want && !wanted(),
    /** True while the worker has been asked but has not yet begun: it cannot while the page's
     * thread is busy, so the page holds its own heavy work back until then. */
    starting: () => !!started && !ready,
    paintHere,
    /** Lets the worker and the scores it holds go (a short input needs none); the next request starts another. */
    release() {
      stop();
      tried = false;
      want = last = prior = null;
    },
    destroy: stop,
  };
}
