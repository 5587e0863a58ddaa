// The painting worker: a long matrix's scores (once per head or input), then its weights at each
// new temperature and their picture, off the page's main thread; or one head's thumbnail. It keeps what it was last sent:
// q, k and the bias arrive only when they change, and so does the mask.
import { scores } from "./attention.js";
import { weightPicture } from "./picture.js";
import { thumbOf } from "./thumbs.js";

let S = null,
  mask = null;
self.onmessage = ({ data: job }) => {
  if (job.kind === "thumb") {
    // a head's thumbnail and summaries (thumbs.js), and its scores when the page keeps them: nothing kept here
    const S = scores(job.q, job.k, job.scale, job.bias, job.softcap),
      thumb = thumbOf(S, job.q.rows, job);
    return self.postMessage({ thumb, scores: job.keep ? S : null }, job.keep ? [thumb.data.buffer, S.buffer] : [thumb.data.buffer]);
  }
  if (job.q) S = scores(job.q, job.k, job.scale, job.bias, job.softcap); // the page's own arithmetic: the same numbers it shows
  if (job.newMask) mask = job.mask;
  const { pixels, width, height, top } = weightPicture({ ...job, scores: S, mask });
  self.postMessage({ id: job.id, pixels, width, height, top }, [pixels.buffer]);
};
self.postMessage({ ready: true }); // a worker starts only when the page's thread is free: say when it has
