// Another head of a live model comes from the kernel, unless the page keeps it (layers.js): the
// page says "loading head N…" while it travels, until the kernel's arrays name it (layer_arrays:
// block, layer, head), or the kernel puts the page back on another head.

/** createFetching(model, store, {propose, said, schedule}) -> {toHead(change), label(), destroy()}
 * @param {import("./types").Model} model  @param {import("./types").Store} store
 * @param {{ propose: import("./types").Propose, said: (refused: string | null) => void, schedule: () => void }} options */
export function createFetching(model, store, { propose, said, schedule }) {
  const get = store.get;
  /** @type {{ block: string, layer: number, head: number, label: string } | null} */
  let fetching = null;
  /** @param {import("./state").State["layer_arrays"]} a */
  const named = (a) => a && fetching && (a[0] || "") === fetching.block && a[1] === fetching.layer && a[2] === fetching.head;
  const arrived = () => {
    if (named(get("layer_arrays"))) fetching = null;
  };
  const refused = () => {
    if (fetching && (get("layer") !== fetching.layer || get("head") !== fetching.head)) fetching = null; // the kernel put the page back
  };
  // a remote model's layers read on its server meanwhile: the kernel says so ({kind: "remote", text}), for the
  // layer being fetched, or for every layer a view computed across layers needs, until that view comes
  let reading = "";
  /** @param {{ kind?: string, text?: string } | null | undefined} msg */
  const remote = (msg) => {
    if (msg?.kind !== "remote" || typeof msg.text !== "string") return;
    if (fetching) fetching.label = msg.text;
    else reading = msg.text;
    schedule();
  };
  const read = () => {
    reading = "";
  };
  model.on("msg:custom", remote);
  for (const name of ["overview", "measure_data", "computed"]) model.on(`change:${name}`, read); // (what needed them came)
  model.on("change:layer_arrays", arrived);
  model.on("change:layer", refused);
  model.on("change:head", refused);
  return {
    /** Propose a change of layer, head or block; a head the page does not keep is fetched. @param {import("./types").Change} change */
    toHead(change) {
      const no = propose(change);
      said(no);
      const want = { block: get("block") || "", layer: get("layer"), head: Math.min(get("head"), store.all("q").heads - 1) };
      if (!no && model.holds && get("layer_shown") && !model.holds(want.block, want.layer, want.head)) {
        const layerChanged = "layer" in change || "block" in change;
        fetching = { ...want, label: layerChanged ? `layer ${want.layer}` : `head ${want.head}` };
        schedule();
      }
    },
    /** What is on its way ("layer 3", "head 2", "layers 1, 2 from the server"), or "" when nothing is. */
    label: () => (fetching === null ? reading : fetching.label),
    destroy() {
      model.off("msg:custom", remote);
      for (const name of ["overview", "measure_data", "computed"]) model.off(`change:${name}`, read);
      model.off("change:layer_arrays", arrived);
      model.off("change:layer", refused);
      model.off("change:head", refused);
    },
  };
}
