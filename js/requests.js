// One path from the page to the kernel for every view the kernel computes (Python's computed_views.py
// declares them, and the page learns each one's key, sign and trait from _constants.views): the
// page asks {kind: "compute", view} once the state it is for has settled (not at each step of a
// drag), and again every so often until the answer it holds is current; one function decides that.
const SETTLE_MS = 150; // a drag's steps come closer than this: ask once it stops
const AGAIN_MS = 300; // a large model's overview is computed on a thread and handed over when asked

/** @typedef {import("./types").Get} Get */
/** @typedef {import("./state").Answer} Answer */

/** The answer held for view `name` (its trait's value, or its entry in measure_data), or null.
 * @param {Get} get  @param {string} name  @param {import("./state").ViewSpec} spec  @returns {Answer | null} */
export function held(get, name, spec) {
  const value = get(spec.held_in);
  return (spec.held_in === "overview" ? value : value?.[name]) ?? null;
}

/** An answer is current when every part of its key is the state shown (a measure's name is the measure chosen).
 * @param {Answer | null | undefined} answer  @param {Get} get  @returns {boolean} */
export const current = (answer, get) =>
  !!answer?.key &&
  Object.entries(answer.key).every(([k, v]) => same(v, get(/** @type {keyof import("./types").PageState} */ (k)) ?? (typeof v === "string" ? "" : null))); // (a key names fields of the state)
/** A key's value and the state's: equal, a list (kv_keys) by its items. @param {unknown} a  @param {unknown} b */
const same = (a, b) => a === b || (Array.isArray(a) && Array.isArray(b) && a.length === b.length && a.every((x, i) => x === b[i]));

/** createRequests(model, get, still) -> {want(name), destroy()}: `want` says the page needs view
 * `name` now; it is asked for (one timer for every view) until what the page holds is current, or
 * `still(name)` says the page no longer shows it (another measure, another summary).
 * @param {import("./types").Model} model  @param {Get} get  @param {(name: string) => boolean} still
 * @returns {{ want(name: string): void, destroy(): void }} */
export function createRequests(model, get, still) {
  const views = get("_constants").views;
  /** @type {Set<string>} */
  const wanted = new Set();

  let timer = 0,
    first = true; // the first ask goes at once: no drag to wait for
  function ask() {
    timer = 0;
    for (const name of wanted) {
      if (!still(name) || current(held(get, name, views[name]), get)) wanted.delete(name);
      else model.send({ kind: "compute", view: name });
    }
    if (wanted.size) timer = setTimeout(ask, AGAIN_MS);
  }
  return {
    want(name) {
      if (current(held(get, name, views[name]), get)) return;
      wanted.add(name);
      clearTimeout(timer); // (while the state moves, nothing is asked)
      timer = setTimeout(ask, first ? 0 : SETTLE_MS);
      first = false;
    },
    destroy: () => clearTimeout(timer),
  };
}
