// A live model's heads, kept in the page once fetched (while they fit in KEEP bytes): the kernel
// sends the head shown of a layer, a switch back to one draws it at once, and the kernel, told
// which heads the page keeps, does not send them again. The kernel says whose arrays it sent
// (layer_arrays: block, layer, head); every view of a widget on the page shares its model, so
// they share this too.
const KEEP = 512 * 2 ** 20;
const LAYERED = ["q", "k", "v", "value_basis"];
// attention weights alone: each head's bias (the weights' logarithms) is the head's own too
const layered = (model) => (model.get("weights_only") ? [...LAYERED, "bias"] : LAYERED);
const kept = new WeakMap();

/** The widget model as the app reads it: a layer the page keeps is served from here. */
export function withLayers(model) {
  if (!kept.has(model)) kept.set(model, keep(model));
  return kept.get(model);
}

function keep(model) {
  const held = new Map(); // "block|layer|head" -> that head's q, k, v and value axes, the least recently shown first
  const name = (block, layer, head) => `${block || ""}|${layer}|${head}`;
  const shownName = () => name(model.get("block"), model.get("layer"), model.get("head"));
  const size = (entry) => Object.values(entry).reduce((sum, a) => sum + (a?.view?.byteLength || 0), 0);
  const tell = () => model.send({ kind: "holding", layers: [...held.keys()].map((k) => k.split("|").map((p, i) => (i ? Number(p) : p))) });
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
    tell();
  }
  model.on("change:q", record); // (a layer the page keeps comes with no arrays: nothing to record)
  // another text of a model: the heads kept are the last text's, under the same names
  model.on("change:sentence_index", () => {
    held.clear();
    record();
  });
  model.on("change:bias", () => model.get("weights_only") && record()); // weights alone: every layer's q is the same zeros
  record(); // the layer shown at first; and the kernel forgets what an earlier page kept
  const shown = () => held.get(shownName());
  return {
    get: (n) => (layered(model).includes(n) && model.get("layer_shown") && shown() ? shown()[n] : model.get(n)),
    /** Whether the page keeps this head's arrays (a switch to it needs nothing from the kernel). */
    holds: (block, layer, head) => held.has(name(block, layer, head)),
    set: (...a) => model.set(...a),
    save_changes: () => model.save_changes(),
    send: (...a) => model.send(...a),
    on: (...a) => model.on(...a),
    off: (...a) => model.off(...a),
  };
}
