// The kernel-less adapter (exported pages): a model that lives in the page alone, over the
// payload. It answers the same get/set/on/off/save_changes calls as a live widget model, and
// settles every change with the same rules as Python (rules.js): a change Python would refuse
// changes nothing here either, and says why.
import { decodePayload } from "./payload.js";
import { ARRAYS, Refused, same, settleChecked } from "./rules.js";

/** @typedef {import("./state").State} State */
/** @typedef {import("./types").Change} Change */
/** @typedef {import("./types").Listener} Listener */
/** @typedef {import("./rules.js").OwnArray} OwnArray */
/** An exported page's data (payload.py's schema, checked by payload.js), or its JSON text; `theme`: "light", "dark" or "auto".
 * @typedef {string | { theme?: string, [key: string]: unknown }} Payload */

/** @type {WeakMap<object, string>} */
const prints = new WeakMap();
/** An array's contents in one string (its dtype, shape and an FNV-1a hash of its bytes), once per array object.
 * @param {State[OwnArray] | undefined} a */
function fingerprint(a) {
  if (!a?.view) return a ?? null;
  if (!prints.has(a)) {
    const bytes = new Uint8Array(a.view.buffer, a.view.byteOffset, a.view.byteLength);
    let h = 0x811c9dc5;
    for (let i = 0; i < bytes.length; i++) h = Math.imul(h ^ bytes[i], 0x01000193);
    prints.set(a, `${a.dtype}:${a.shape}:${h >>> 0}`);
  }
  return prints.get(a);
}

/** localModel(payload) -> an anywidget-style model whose changes the rules settle.
 * @param {unknown} payload  @returns {import("./types").LocalModel} */
export function localModel(payload) {
  const { state: initial, sources } = decodePayload(/** @type {import("./payload.js").RawPayload} */ (payload)); // (checked there)

  let state = initial;
  /** @type {Partial<Record<OwnArray, State[OwnArray]>>} */
  const before = {}; // each array changed here, as brought in: what the page's exported measures are of
  /** @type {Map<string, Listener[]>} */
  const listeners = new Map();
  /** @param {string} name */
  const emit = (name) => (listeners.get(name) || []).slice().forEach((f) => f());

  /** Apply `change` whole, with every follow-up, as a page message to Python would be: null, or the refusal's message.
   * @param {Change} change */
  function propose(change) {
    let next;
    // the arrays a switch brings in are those the sources give (a text's, a block's, a layer's own)
    /** @type {Set<OwnArray>} */
    const brought = new Set();
    /** @template {unknown[]} A  @param {(...args: A) => import("./rules.js").Brought} f */
    const watch =
      (f) =>
      (/** @type {A} */ ...args) => {
        const found = f(...args);
        for (const k of ARRAYS) if (found && k in found) brought.add(k);
        return found;
      };
    const seen = { ...sources, sentence: watch(sources.sentence), block: watch(sources.block), layer: watch(sources.layer) };
    try {
      next = settleChecked(state, change, seen, true);
    } catch (err) {
      if (!(err instanceof Refused)) throw err;
      console.warn(`attnwidget refused a change: ${err.message}`);
      return err.message;
    }
    const changed = /** @type {(keyof State)[]} */ (Object.keys(next)).filter((k) => !same(next[k], state[k]));
    // what a switch brings in is as exported; every other array a change alters (one set here, or a mask
    // dropped as it no longer fits the text switched to) is a change since the export
    for (const k of brought) delete before[k];
    for (const k of ARRAYS) if (changed.includes(k) && !brought.has(k) && !(k in before)) before[k] = state[k];

    state = next;
    for (const k of changed) emit(`change:${k}`);
    if (changed.length) emit("change"); // once for the whole change, as a live model does
    return null;
  }

  return {
    get: (name) => state[name],
    /** The arrays changed here (not brought in by a switch) whose numbers differ from those brought in. */
    edited: () => /** @type {OwnArray[]} */ (Object.keys(before)).filter((k) => fingerprint(state[k]) !== fingerprint(before[k])),
    /** One trait, settled; a refused value throws, with Python's message, and changes nothing. */
    set(name, value) {
      const refused = propose(/** @type {Change} */ ({ [name]: value }));
      if (refused) throw new Refused(refused);
    },
    propose,
    save_changes() {},
    send() {},
    on(event, f) {
      if (!listeners.has(event)) listeners.set(event, []);
      /** @type {Listener[]} */ (listeners.get(event)).push(f);
    },
    off(event, f) {
      const list = listeners.get(event) || [];
      if (f)
        listeners.set(
          event,
          list.filter((g) => g !== f),
        );
      else listeners.delete(event);
    },
  };
}

/** An exported page's JSON text, parsed; text JSON cannot read is refused with what is wrong and where: a bare
 * NaN or infinity (which JSON has not, but a hand-made or altered page may hold) named in its place.
 * @param {string} text  @returns {unknown} */
function parsed(text) {
  try {
    return JSON.parse(text);
  } catch (err) {
    if (!(err instanceof SyntaxError)) throw err;
    const at = bareNumber(text);
    if (at < 0) throw new Refused(`its data is not valid JSON (${err.message})`);
    const word = /** @type {RegExpExecArray} */ (/^-?(NaN|Infinity)/.exec(text.slice(at, at + 9)))[0]; // (bareNumber found one there)
    throw new Refused(
      `its data is not valid JSON: it holds ${word} at character ${at} (…${text.slice(Math.max(0, at - 24), at + word.length + 8)}…), and JSON has no NaN or infinity: every number must be finite`,
    );
  }
}

/** Where the first NaN, Infinity or -Infinity stands outside a string in `text`, or -1. @param {string} text */
function bareNumber(text) {
  let quoted = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (quoted) {
      if (c === "\\") i++;
      else if (c === '"') quoted = false;
    } else if (c === '"') quoted = true;
    else if ((c === "N" || c === "I" || c === "-") && /^-?(NaN|Infinity)/.test(text.slice(i, i + 9))) return i;
  }
  return -1;
}

/** A widget's mount(el, model, propose) on embedded state (exported pages: the payload, or its JSON
 * text); payload.theme is "light", "dark" or "auto" (the reader's setting). Returns the cleanup.
 * @param {typeof import("./app.js").mount} mount  @param {HTMLElement} el  @param {Payload} payload  @returns {() => void} */
export function standalone(mount, el, payload) {
  const started = performance.now();
  /** @type {import("./types").LocalModel} */
  let model;
  /** @type {() => void} */
  let app;
  try {
    if (typeof payload === "string") payload = /** @type {Payload} */ (parsed(payload)); // (an exported page's: parsed here, to say what is wrong)
    model = localModel(payload);
    app = mount(el, model, { propose: (change) => model.propose(change), flush() {} });
  } catch (err) {
    // said in the page (not only in the console), and nothing drawn from numbers it could not trust
    const why = err instanceof Refused ? err.message.replace(/\.$/, "") : `its data is not in the form this page reads (${/** @type {Error} */ (err).name})`;
    const box = document.createElement("p");
    box.className = "aw-page-error";
    box.setAttribute("role", "alert");
    box.textContent = `This page's data cannot be shown: ${why}. Export it again from the notebook (w.to_html) to get a page that works.`;
    el.replaceChildren(box);
    console.error(err);
    return () => box.remove();
  }
  const root = /** @type {import("./types").AppRoot} */ (el.querySelector(".aw-root")), // (mount made it)
    dark = window.matchMedia("(prefers-color-scheme: dark)");
  const setTheme = () => {
    const { theme } = /** @type {{ theme?: string }} */ (payload); // (parsed by now)
    const isDark = theme === "dark" || (theme !== "light" && dark.matches);
    root.classList.toggle("aw-dark", isDark);
    document.body.classList.toggle("aw-page-dark", isDark);
  };
  setTheme();
  dark.addEventListener("change", setTheme);
  root.attnwidget.renderStart = started; // when the page's script began: decoding, then drawing
  return () => {
    dark.removeEventListener("change", setTheme);
    app();
  };
}
