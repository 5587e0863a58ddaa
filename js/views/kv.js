// The compressed KV cache in words, for the focused row: "H2O, 16 keys a head: head 0 keeps 16 of 72 keys ·
// retained mass 0.823 · output moves 12%", and the same over the layer's heads (the kernel's numbers, when
// they are for the state shown). Each term carries a tooltip that says what it means.
import { format } from "d3-format";
import { KV_METHODS } from "./controls.js";
import { el, fmt3, short } from "./dom.js";

/**
 * @typedef {object} KvView
 * @property {import("../types").KvCache} kv  the head shown's cache (derived.js kv())
 * @property {{ retained: number, change: number, kept: number } | null} row  what the focused row loses (kvRow)
 * @property {string} reader  the focused token
 * @property {number} m  the keys read
 * @property {number} head
 * @property {number} heads  the layer's heads
 * @property {{ retained: number | null, change: number | null } | string} layer  the layer's numbers, or why not here
 */

const pct0 = format(".0%"),
  pct1 = format(".1%");
/** A change of output as a percentage: whole above 10%, one decimal below, "under 0.1%" for less. @param {number} x */
export const fmtMove = (x) => (x === 0 ? "0%" : x < 0.001 ? "under 0.1%" : x < 0.1 ? pct1(x) : pct0(x));

/** The method's name as the menu says it. @param {string} method */
export const methodName = (method) => KV_METHODS.find(([m]) => m === method)?.[1] ?? method;

/** The terms' tooltips: what retained mass and output change mean, for token `t`. @param {string} t */
const RETAINED = (t) =>
  `Retained mass: the share of ${t}'s attention weight on the keys the cache keeps (1 = nothing lost). Reading only those, ${t}'s weights are renormalised to sum to 1 again.`;
/** @param {string} t */
const MOVES = (t) =>
  `Output moves: how far ${t}'s output moves when it reads only the kept keys, ‖o′ − o‖ / ‖o‖, where o blends every value and o′ only the kept ones' (their weights renormalised). 0% is no change.`;

/** The retained mass and output change, each with its tooltip. @param {number | null} retained  @param {number | null} change  @param {string} t */
function terms(retained, change, t) {
  const moved =
    change != null && Number.isFinite(change)
      ? `output moves ${fmtMove(change)}`
      : retained === 0
        ? "no output (no kept key holds weight)"
        : "output change: none to say (the output is 0)";
  return [
    el("span", { class: "aw-kv-retained", title: RETAINED(t) }, `retained mass ${retained == null ? "–" : fmt3(retained)}`),
    " · ",
    el("span", { class: "aw-kv-change", title: MOVES(t) }, moved),
  ];
}

/** The focused row's compressed cache in words. @param {KvView} view  @returns {(string | HTMLElement)[]} */
export function describeKv({ kv, row, reader, m, head, heads, layer }) {
  const t = `“${short(reader)}”`;
  const what = kv.method === "mask" ? "your keys" : `${methodName(kv.method)}, ${kv.budget} key${kv.budget === 1 ? "" : "s"} a head`;
  const intro = [el("b", {}, "KV cache"), ` (${what}): `];
  if (kv.error || !row) return [...intro, kv.error || ""];
  const keeps = row.kept === m ? `keeps all ${m} keys` : `keeps ${row.kept} of ${m} keys (the others struck out)`;
  const who = heads > 1 ? `head ${head} ` : "";
  /** @type {(string | HTMLElement)[]} */
  const out = [...intro, `${who}${keeps} · for ${t}: `, ...terms(row.retained, row.change, t)];
  if (heads > 1) {
    const over = `layer (all ${heads} heads): `;
    out.push(
      " — ",
      typeof layer === "string"
        ? el("span", { class: "aw-kv-layer" }, over, layer)
        : el("span", { class: "aw-kv-layer" }, over, ...terms(layer.retained, layer.change, t)),
    );
  }
  return out;
}
