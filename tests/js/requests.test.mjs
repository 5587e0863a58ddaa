// The page's one request path (js/requests.js): a view is asked for until what the page holds is
// current, and no longer once the page stops showing it.
import assert from "node:assert/strict";
import test from "node:test";
import { createRequests, current } from "../../js/requests.js";

const views = { norms: { held_in: "measure_data" }, overview: { held_in: "overview" } };
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function page(state) {
  const sent = [];
  return { sent, get: (n) => (n === "_constants" ? { views } : state[n]), model: { send: (m) => sent.push(m) } };
}

test("an answer is current when every part of its key is the state shown", () => {
  const { get } = page({ temperature: 0.5, block: "", measure: "norms", scale: null });
  assert.equal(current({ key: { temperature: 0.5, block: "", measure: "norms", scale: null } }, get), true);
  assert.equal(current({ key: { temperature: 1, block: "" } }, get), false);
  assert.equal(current(null, get), false);
});

test("a key's list (the compressed cache's own keys) is current when its items are the state's", () => {
  const { get } = page({ focus: 3, kv_method: "mask", kv_keys: [0, 4] });
  assert.equal(current({ key: { focus: 3, kv_method: "mask", kv_keys: [0, 4] } }, get), true);
  assert.equal(current({ key: { focus: 3, kv_method: "mask", kv_keys: [0] } }, get), false);
  assert.equal(current({ key: { focus: 2, kv_method: "mask", kv_keys: [0, 4] } }, get), false);
});

test("a view the page no longer shows is not asked for again", async () => {
  const state = { measure: "norms", measure_data: null };
  const p = page(state);
  const requests = createRequests(p.model, p.get, (name) => state.measure === name);
  requests.want("norms");
  await sleep(20); // the first ask goes at once
  assert.equal(p.sent.length, 1);
  state.measure = "rollout"; // another measure chosen before the answer came
  await sleep(700);
  assert.equal(p.sent.length, 1);
  requests.destroy();
});

test("a view still shown is asked for again until its answer is current", async () => {
  const state = { temperature: 1, overview: null };
  const p = page(state);
  const requests = createRequests(p.model, p.get, () => true);
  requests.want("overview");
  await sleep(650); // computed on a thread: asked again every so often
  assert.ok(p.sent.length >= 2);
  state.overview = { key: { temperature: 1 } };
  const asked = p.sent.length;
  await sleep(650);
  assert.equal(p.sent.length, asked);
  requests.destroy();
});
