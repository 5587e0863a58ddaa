// The weights picture of a long input, painted by a worker: a temperature drag never waits for a
// million exponentials on the page's main thread. Only the newest request waits while one is
// painted, so a fast drag skips the values in between. Where no worker can start (a host that
// forbids them) the page paints with the same code itself.
import { weightPicture } from "./picture.js";

/* global PAINT_WORKER_SOURCE */ // the worker's bundle, as text (scripts/build.mjs)
function startWorker() {
  try {
    const url = URL.createObjectURL(new Blob([PAINT_WORKER_SOURCE], { type: "text/javascript" }));
    return { worker: new Worker(url), url };
  } catch {
    return null;
  }
}

// Two requests ask for the same picture when every input is the same object or value.
const KEYS = ["q", "k", "scale", "n", "temperature", "causal", "mask", "stretch", "colours"];
const copy = (m) => ({ data: m.data.slice(), rows: m.rows, cols: m.cols }); // a head alone, not every head's buffer
const same = (a, b) => !!a && !!b && KEYS.every((k) => a[k] === b[k]);

/**
 * createPainter(onPicture) -> {request(job), pending(), destroy()}.
 * job: {q, k (one head's, kept by identity), scale, scores() (the page's scores: used only where
 * no worker runs, which then computes its own), n, temperature, causal, mask, stretch, lut,
 * closedPixel, colours (a key naming the lut)}. request returns the newest picture, {pixels, width, height,
 * top, current}: current is false while the one asked for is still being painted (null before
 * the first). onPicture() is called when a picture arrives, and when the worker has started or
 * failed (a worker cannot start while the page's thread is busy: the page waits for it).
 */
export function createPainter(onPicture) {
  let started = null, tried = false, ready = false; // the worker, started at the first request
  let held = null, busy = null, next = null, last = null, id = 0;
  const here = (job) => weightPicture({ ...job, scores: job.scores() });

  function start() {
    tried = true;
    started = typeof Worker === "function" ? startWorker() : null;
    if (!started) return;
    started.worker.onmessage = ({ data }) => {
      if (data.ready) { ready = true; return onPicture(); } // running: the page may busy itself now
      if (!busy || data.id !== busy.id) return;
      last = { job: busy, picture: data };
      busy = null;
      if (next) post(next);
      next = null;
      onPicture();
    };
    // a worker that cannot run (a policy, a script error): paint here from now on
    started.worker.onerror = (ev) => {
      ev.preventDefault();
      stop();
      busy = next = null;
      onPicture();
    };
  }
  function post(job) {
    busy = { ...job, id: ++id };
    // q, k and the mask travel only when they change: the worker keeps the last ones
    const fresh = !held || held.q !== job.q || held.k !== job.k || held.scale !== job.scale, newMask = !held || held.mask !== job.mask;
    const { n, temperature, causal, stretch, lut, closedPixel, scale } = job;
    started.worker.postMessage({
      id, n, temperature, causal, stretch, lut, closedPixel, scale,
      q: fresh ? copy(job.q) : null, k: fresh ? copy(job.k) : null, newMask, mask: newMask && job.mask ? job.mask.slice() : null,
    });
    held = job;
  }
  function stop() {
    started?.worker.terminate();
    if (started) URL.revokeObjectURL(started.url);
    started = null;
  }

  return {
    request(job) {
      if (!tried) start();
      if (!(last && same(last.job, job))) {
        if (!started) last = { job, picture: here(job) };
        else if (busy && same(busy, job)) next = null;
        else if (busy) next = job;
        else post(job);
      }
      return last && { ...last.picture, current: same(last.job, job) };
    },
    /** True while a picture is being painted. */
    pending: () => !!busy,
    /** True while the worker has been asked but has not yet begun: it cannot while the page's
     * thread is busy, so the page holds its own heavy work back until then. */
    starting: () => !!started && !ready,
    destroy: stop,
  };
}
