import { byHead } from "./rules.js";

// A live model's heads, kept by one view of the widget once fetched (while they fit in KEEP
// bytes): the kernel sends the head shown of a layer, a switch back to one draws it at once, and
// the kernel, told which heads each view keeps (by the view's name), does not send a head every
// view keeps again. The kernel says whose arrays it sent (layer_arrays: block, layer, head). The
// keeper lives and dies with its view: its listeners go, and the kernel forgets it, at cleanup.
const KEEP = 512 * 2 ** 20;
// what travels a head at a time (rules.js byHead: the layered arrays, and weights alone's bias)
const layered = (model) => byHead({ weights_only: model.get("weights_only") }, model.get("_constants"));

/** createLayers(model, view) -> the widget model as one view reads it (a layer it keeps is served
 * from here), with holds(block, layer, head) and destroy(); `view` names this view to the kernel. */
export function createLayers(model, view) {
  const held = new Map(); // "block|layer|head" -> that head's q, k, v and value axes, the least recently shown first
  const name = (block, layer, head) => `${block || ""}|${layer}|${head}`;
  const shownName = () => name(model.get("block"), model.get("layer"), model.get("head"));
  const size = (entry) => Object.values(entry).reduce((sum, a) => sum + (a?.view?.byteLength || 0), 0);
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
    held.set(key, Object.fromEntries(layered(model).map((n) => [n, model.get(n)])));
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
  const onMessage = (msg) => msg?.kind === "heads" && record();
  model.on("msg:custom", onMessage);
  tell([]);
  const shown = () => held.get(shownName());
  return {
    get: (n) => (layered(model).includes(n) && model.get("layer_shown") && shown() ? shown()[n] : model.get(n)),
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
