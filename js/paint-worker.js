// The painting worker: a long matrix's scores (once per head or input), then its weights at each
// new temperature and their picture, off the page's main thread; or one head's thumbnail. It keeps what it was last sent:
// q, k and the bias arrive only when they change, and so does the mask.
import { scores } from "./attention.js";
import { weightPicture } from "./picture.js";
import { thumbOf } from "./thumbs.js";

/** @typedef {import("./painter.js").PictureMessage} PictureMessage */
/** @typedef {import("./types").Matrix} Matrix */
/** @typedef {import("./thumbs.js").ThumbMessage} ThumbMessage */
/** Said once, when the worker has started. */
/** @typedef {{ ready: true }} WorkerReady */
/** @typedef {import("./picture.js").Painted & { ready?: undefined, id: number }} PictureAnswer */
/** @typedef {{ ready?: undefined, thumb: import("./thumbs.js").Thumb, scores: Float64Array | null }} ThumbAnswer */
/**
 * The part of a worker's global scope this module uses (the page's types are the DOM's, where
 * `self` is a window).
 * @typedef {object} WorkerScope
 * @property {((ev: MessageEvent<PictureMessage | ThumbMessage>) => void) | null} onmessage
 * @property {(message: WorkerReady | PictureAnswer | ThumbAnswer, transfer?: Transferable[]) => void} postMessage
 */
const scope = /** @type {WorkerScope} */ (/** @type {unknown} */ (self));

/** @type {Float64Array | null} */
let S = null,
  /** @type {Uint8Array | null} */
  mask = null;
scope.onmessage = (/** @type {MessageEvent<PictureMessage | ThumbMessage>} */ { data: job }) => {
  if (job.kind === "thumb") {
    // a head's thumbnail and summaries (thumbs.js), and its scores when the page keeps them: nothing kept here
    // (a head's numbers come without `heads`, which scores() does not read)
    const S = scores(/** @type {Matrix} */ (job.q), /** @type {Matrix} */ (job.k), job.scale, /** @type {Matrix | null} */ (job.bias), job.softcap),
      thumb = thumbOf(S, job.q.rows, job);
    return scope.postMessage({ thumb, scores: job.keep ? S : null }, job.keep ? [thumb.data.buffer, S.buffer] : [thumb.data.buffer]);
  }
  // the page's own arithmetic: the same numbers it shows (q and k come together; no `heads`, which scores() does not read)
  if (job.q) S = scores(/** @type {Matrix} */ (job.q), /** @type {Matrix} */ (job.k), job.scale, /** @type {Matrix | null} */ (job.bias), job.softcap);
  if (job.newMask) mask = job.mask;
  // (the first message of a worker brings q and k: there are scores from then on)
  const { pixels, width, height, top } = weightPicture({ ...job, scores: /** @type {Float64Array} */ (S), mask });
  scope.postMessage({ id: job.id, pixels, width, height, top }, [pixels.buffer]);
};
scope.postMessage({ ready: true }); // a worker starts only when the page's thread is free: say when it has
