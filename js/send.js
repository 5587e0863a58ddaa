// The page's changes, sent to Python. A dragged control redraws the page at once but talks to
// Python at most every SEND_MS, so a slow observer in the kernel never has a backlog of stale
// values; the release sends the last.
const SEND_MS = 150;

/** @typedef {import("./state").State} State */

/** createSender(model) -> {send(change, {soon, later}), flush(), destroy()}
 * @param {import("./types").Model} model */
export function createSender(model) {
  let timer = 0,
    last = 0;
  const flush = () => {
    clearTimeout(timer);
    timer = 0;
    last = performance.now();
    model.save_changes();
  };
  return {
    /** Set every key of `change` (one message); `soon`: within SEND_MS; `later`: at the next flush.
     * @param {import("./types").Change} change  @param {import("./types").How} [how] */
    send(change, { soon = false, later = false } = {}) {
      for (const [name, value] of /** @type {[keyof State, State[keyof State]][]} */ (Object.entries(change))) model.set(name, value);

      if (later) return;
      if (!soon || performance.now() - last > SEND_MS) flush();
      else if (!timer) timer = setTimeout(flush, SEND_MS);
    },
    flush,
    destroy: () => clearTimeout(timer),
  };
}
