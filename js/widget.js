// The anywidget adapter: mounts the app core (app.js) on a live widget model. A proposed change
// is settled here by the same rules as Python's (rules.js), drawn at once, and sent; Python
// settles it again (the same, by the rules' contract) and user code sees it.
import "./widget.css";
import { mount } from "./app.js";
import { createLayers } from "./layers.js";
import { BRINGS_IN, Refused, same, settleChecked } from "./rules.js";
import { createSender } from "./send.js";
import { standalone } from "./standalone.js";

/** @typedef {import("./state").State} State */
/** @typedef {import("./types").Change} Change */

let views = 0; // each view's name to the kernel: which heads it keeps (layers.js)

/** @param {import("@anywidget/types").RenderProps<State>} props */
function render({ model: widget, el }) {
  // the heads this view keeps, read from there; they live and die with the view
  const model = createLayers(widget, `${Date.now().toString(36)}-${++views}`);
  const C = model.get("_constants");
  const sender = createSender(model);
  // the state as the rules see it (a model's other layers stay in the kernel: only the layer shown is here)
  const state = () =>
    /** @type {State} */ (
      /** @type {unknown} */ (Object.fromEntries(/** @type {(keyof State)[]} */ (["_constants", ...C.writable, ...C.read_only]).map((k) => [k, model.get(k)])))
    );
  /** @type {import("./types").Propose} */
  function propose(change, how = {}) {
    let settled = change;
    // (only the kernel can bring in another sentence's, layer's or block's arrays)
    if (!BRINGS_IN.some((k) => k in change)) {
      try {
        const before = state(),
          after = settleChecked(before, change, null, true);
        // the traits the page may set; Python settles the derived ones itself
        settled = /** @type {Change} */ (Object.fromEntries(C.writable.filter((k) => k in change || !same(after[k], before[k])).map((k) => [k, after[k]])));
      } catch (err) {
        if (!(err instanceof Refused)) throw err;
        console.warn(`attnwidget refused a change: ${err.message}`);
        return err.message;
      }
    }
    sender.send(settled, how);
    return null;
  }
  const cleanup = mount(el, model, { propose, flush: sender.flush });
  return () => {
    sender.destroy();
    cleanup();
    model.destroy();
  };
}

export default { render };

/** Render from embedded state with no kernel (exported pages); theme is "light", "dark" or "auto".
 * @param {HTMLElement} el  @param {import("./standalone.js").Payload} payload */
export const renderStandalone = (el, payload) => standalone(mount, el, payload);
