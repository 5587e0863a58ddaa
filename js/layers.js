import { byHead } from "./rules.js";

/** @typedef {import("./state").State} State */
/** @typedef {import("./state").ArrayValue} ArrayValue */
/** @typedef {import("./state").MaskValue} MaskValue */
/** @typedef {import("./types").PageState} PageState */
/** anywidget's model of the widget. @typedef {import("@anywidget/types").AnyModel<State>} AnyModel */
/** One head's arrays as kept: q, k, v and value axes (and weights alone's bias). @typedef {Record<string, ArrayValue | MaskValue | null>} Kept */

// A live model's heads, kept by one view of the widget once fetched (while they fit in KEEP
// bytes): the kernel sends the head shown of a layer, a switch back to one draws it at once, and
// the kernel, told which heads each view keeps (by the view's name), does not send a head every
// view keeps again. The kernel says whose arrays it sent (layer_arrays: block, layer, head). The
// keeper lives and dies with its view: its listeners go, and the kernel forgets it, at cleanup.
const KEEP = 512 * 2 ** 20;
// what travels a head at a time (rules.js byHead: the layered arrays, and weights alone's bias)
/** @param {AnyModel} model */
const layered = (model) => byHead({ weights_only: model.get("weights_only") }, model.get("_constants"));

/** createLayers(model, view) -> the widget model as one view reads it (a layer it keeps is served
 * from here), with holds(block, layer, head) and destroy(); `view` names this view to the kernel.
 * @param {AnyModel} model  @param {string} view  @returns {import("./types").LiveModel} */
export function createLayers(model, view) {
  /** @type {Map<string, Kept>} */
  const held = new Map(); // "block|layer|head" -> that head's q, k, v and value axes, the least recently shown first
  /** @param {string} block  @param {number} layer  @param {number} head */
  const name = (block, layer, head) => `${block || ""}|${layer}|${head}`;
  const shownName = () => name(model.get("block"), model.get("layer"), model.get("head"));
  /** @param {Kept} entry */
  const size = (entry) => Object.values(entry).reduce((sum, a) => sum + (a?.view?.byteLength || 0), 0);
  /** @param {(string | number)[][] | null} layers  [block, layer, head] of each head kept; null: this view is gone */
  const tell = (layers) => {
    try {
      model.send({ kind: "holding", view, layers });
    } catch {} // (a widget closed in the kernel has no one to tell)
  };
  const named = () => [...held.keys()].map((k) => k.split("|").map((p, i) => (i ? Number(p) : p)));
  // the kernel's arrays arrive with the name of their layer (layer_arrays, set in the same message)
  function record() {
    const whose = model.get("layer_arrays");
    if (!whose) return;
    const key = name(...whose);
    held.delete(key);
    held.set(key, /** @type {Kept} */ (Object.fromEntries(layered(model).map((n) => [n, model.get(n)]))));
    // over KEEP, the least recently shown go; never the head just come, nor the one the page shows
    let total = [...held.values()].reduce((sum, e) => sum + size(e), 0);
    const showing = shownName();
    for (const [k, e] of [...held]) {
      if (total <= KEEP) break;
      if (k === key || k === showing) continue;
      held.delete(k);
      total -= size(e);
    }
    tell(named());
  }
  // another text of a model: the heads kept are the last text's, under the same names
  const newText = () => {
    held.clear();
    record();
  };
  const newBias = () => model.get("weights_only") && record(); // weights alone: every layer's q is the same zeros
  model.on("change:q", record); // (a layer the page keeps comes with no arrays: nothing to record)
  model.on("change:sentence_index", newText);
  model.on("change:bias", newBias);
  // A new view keeps nothing yet: the arrays the model holds may be another head's than the one
  // layer_arrays names (a switch to a head every other view kept sent its name alone). The kernel,
  // told of a new view, sends the head shown again where they are, then says they are its ({kind: "heads"}).
  /** @param {{ kind?: string } | null | undefined} msg  the kernel's */
  const onMessage = (msg) => msg?.kind === "heads" && record();
  model.on("msg:custom", onMessage);
  tell([]);
  const shown = () => held.get(shownName());
  /** @template {keyof PageState} K  @param {K} n  @returns {PageState[K]} */
  const get = (n) =>
    /** @type {PageState[K]} */ (
      layered(model).includes(/** @type {keyof State} */ (n)) && model.get("layer_shown") && shown()
        ? /** @type {Kept} */ (shown())[n]
        : model.get(/** @type {keyof State} */ (n))
    ); // (a live model has no exported page's fields: undefined)
  return {
    get,
    /** Whether this view keeps this head's arrays (a switch to it needs nothing from the kernel). */
    holds: (block, layer, head) => held.has(name(block, layer, head)),
    set: (...a) => model.set(...a),
    save_changes: () => model.save_changes(),
    send: (...a) => model.send(...a),
    on: (...a) => model.on(...a),
    off: (...a) => model.off(...a),

    destroy() {
      model.off("change:q", record);
      model.off("change:sentence_index", newText);
      model.off("change:bias", newBias);
      model.off("msg:custom", onMessage);
      held.clear();
      tell(null);
    },
  };
}
