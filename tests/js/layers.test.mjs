// The page's kept layers (js/layers.js): served in place of the model's arrays, told to the
// kernel, and the least recently shown dropped past the budget, never the one on show.
import assert from "node:assert/strict";
import test from "node:test";
import { createLayers } from "../../js/layers.js";

const MB = 2 ** 20;

// what Python sends of its rules (rules.CONSTANTS): the layered arrays' names
const _constants = { layered: { q: "model_q", k: "model_k", v: "model_v", value_basis: "model_basis" } };

function fakeModel(values) {
  const state = { _constants, ...values };
  const handlers = {},
    sent = [];
  return {
    get: (n) => state[n],
    set: (n, v) => {
      state[n] = v;
    },
    on: (ev, f) => {
      handlers[ev] = f;
    },
    off: (ev, f) => {
      if (handlers[ev] === f) delete handlers[ev];
    },
    handlers,
    send: (m) => sent.push(m),
    save_changes() {},
    sent,
    // the kernel's message: every key at once, then the events (as a widget model does)
    arrive(values) {
      Object.assign(state, values);
      if ("q" in values) handlers["change:q"]?.();
    },
  };
}

const arrays = (layer, mb, head = 0) => ({ q: { layer, head, view: { byteLength: mb * MB } }, k: { layer }, v: { layer }, value_basis: null });

test("a head fetched once is served from the page, and the kernel is told which are kept", () => {
  const m = fakeModel({ layer_shown: true, block: "", layer: 0, head: 0, layer_arrays: ["", 0, 0], ...arrays(0, 1) });
  const page = createLayers(m, "view-1");
  assert.deepEqual(m.sent.at(-1), { kind: "holding", view: "view-1", layers: [] }); // new: keeps nothing yet
  m.arrive({ layer_arrays: ["", 0, 0], ...arrays(0, 1) }); // the kernel sends the head shown for it
  assert.deepEqual(m.sent.at(-1), { kind: "holding", view: "view-1", layers: [["", 0, 0]] });
  m.set("layer", 1); // asked; the kernel sends layer 1's head shown, named
  m.arrive({ layer_arrays: ["", 1, 0], ...arrays(1, 1) });
  m.set("head", 1); // another head of it: sent too
  m.arrive({ layer_arrays: ["", 1, 1], ...arrays(1, 1, 1) });
  assert.deepEqual(m.sent.at(-1).layers, [
    ["", 0, 0],
    ["", 1, 0],
    ["", 1, 1],
  ]);
  m.set("head", 0); // kept: the kernel names it and sends no arrays
  m.arrive({ layer_arrays: ["", 1, 0] });
  assert.equal(page.get("q").head, 0);
  m.set("layer", 0);
  m.arrive({ layer_arrays: ["", 0, 0] });
  assert.equal(page.get("q").layer, 0);
  assert.equal(page.holds("", 1, 1), true);
  assert.equal(page.holds("", 0, 1), false); // a head never shown
  m.set("layer_shown", false); // your own arrays: the model's, as they are
  assert.equal(page.get("q").head, 1);
});

test("past the budget the least recently shown goes, never the head on show", () => {
  const m = fakeModel({ layer_shown: true, block: "", layer: 0, head: 0, layer_arrays: ["", 0, 0], ...arrays(0, 200) });
  const page = createLayers(m, "view-1");
  m.arrive({ layer_arrays: ["", 0, 0], ...arrays(0, 200) });
  m.set("layer", 1);
  m.arrive({ layer_arrays: ["", 1, 0], ...arrays(1, 200) });
  m.set("layer", 0); // back to 0, kept; then a late layer 2 arrives while 0 is on show
  m.arrive({ layer_arrays: ["", 0, 0] });
  m.arrive({ layer_arrays: ["", 2, 0], ...arrays(2, 200) }); // 600 MB: one must go
  assert.equal(page.holds("", 0, 0), true); // on show
  assert.equal(page.holds("", 1, 0), false); // the least recently shown
  assert.equal(page.holds("", 2, 0), true);
  assert.equal(page.get("q").layer, 0);
});

test("a view that closes stops listening and tells the kernel it keeps nothing", () => {
  const m = fakeModel({ layer_shown: true, block: "", layer: 0, head: 0, layer_arrays: ["", 0, 0], ...arrays(0, 1) });
  const page = createLayers(m, "view-2");
  page.destroy();
  assert.deepEqual(m.sent.at(-1), { kind: "holding", view: "view-2", layers: null });
  assert.equal(Object.keys(m.handlers).length, 0); // nothing it registered outlives it
});

test("a view opened after a switch to a kept head does not take the model's stale arrays for it", () => {
  // the model holds head 1's arrays, but layer_arrays names head 0 (a switch back sent its name alone)
  const m = fakeModel({ layer_shown: true, block: "", layer: 0, head: 0, layer_arrays: ["", 0, 0], ...arrays(0, 1, 1) });
  const page = createLayers(m, "view-3");
  assert.equal(page.holds("", 0, 0), false); // not recorded under head 0's name
  assert.deepEqual(m.sent.at(-1).layers, []);
  m.arrive({ layer_arrays: ["", 0, 0], ...arrays(0, 1, 0) }); // the kernel's answer to a new view: head 0's own
  assert.equal(page.get("q").head, 0);
});
