// The page's changes, sent to Python. A dragged control redraws the page at once but talks to
// Python at most every SEND_MS, so a slow observer in the kernel never has a backlog of stale
// values; the release sends the last.
const SEND_MS = 150;

/** createSender(model) -> {save(name, value), saveSoon(name, value, final), destroy()} */
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
    save(name, value) {
      model.set(name, value);
      model.save_changes();
    },
    saveSoon(name, value, final) {
      model.set(name, value);
      if (final || performance.now() - last > SEND_MS) flush();
      else if (!timer) timer = setTimeout(flush, SEND_MS);
    },
    destroy: () => clearTimeout(timer),
  };
}
