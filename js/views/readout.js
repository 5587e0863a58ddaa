// What the page says in words: the focused row's strongest reads, and, when rounding could make
// the page's numbers differ from Python's, that it can't show them exactly and why.
import * as A from "../attention.js";
import { el, figuresTo, fmt2, fmt3, fmtE, fmtT } from "./dom.js";

/**
 * The focused row as describeRow reads it (a part of the stages' view).
 * @typedef {object} RowView
 * @property {string} stage
 * @property {string[]} tokens
 * @property {string[]} keys
 * @property {number} focus
 * @property {boolean} cross
 * @property {string | null} secret
 * @property {boolean} hint
 * @property {() => Float32Array | Float64Array} scores  every row's, rows × keys
 * @property {(i: number) => Float32Array | Float64Array} weightRow
 * @property {(i: number, j: number) => boolean} closed
 * @property {(i: number) => { chosen: number, kept: number, dense: Float64Array } | null} [selection]  sparse attention's choice in row i
 * @property {(i: number, j: number) => [string, number][] | null} [scoreTerms]  a cell's score as the model's terms
 * @property {number | null} [sink]  the head's learnt sink's logit, or null
 * @property {import("../types").Pair | null} [pair]  a differential pair's (derived.js's)
 * @property {() => Float64Array | null} [difference]  its map 1 − λ·map 2, rows × keys (null while its other map comes)
 */

/** The rounding warning for how far the page's numbers may be from Python's (derived.js's
 * agreement()), or null when they are exact.
 * @param {{ exact: boolean, scoreError: number, weightError: number, top: number }} agree  @param {number} temperature */
export function roundingWarning(agree, temperature) {
  return agree.exact
    ? null
    : `These numbers are too sensitive to rounding to show exactly: a score here can differ from ` +
        `Python's by up to ${fmtE(agree.scoreError)} (scores reach ${fmtE(agree.top)}), which at T = ${fmtT(temperature)} can move ` +
        `a weight by up to ${fmtE(agree.weightError)}. Python's w.scores and w.weights are the reference; ` +
        "raise the temperature, or scale q and k down, to see them here.";
}

/** The focused row in words: "bank reads river 0.556, itself 0.306, … — 3.13 effective tokens".
 * view: as the stages' (stage, tokens, keys, focus, cross, secret, scores(), weightRow(i), closed(i, j));
 * secret: what an exercise keeps hidden until its reveal ("row": the weights, "eff": the effective tokens).
 * @param {RowView} view  @returns {(string | HTMLElement)[]} */
export function describeRow({
  stage,
  tokens,
  keys,
  focus,
  cross,
  secret,
  hint,
  scores,
  weightRow,
  closed,
  selection,
  scoreTerms,
  sink = null,
  pair = null,
  difference,
}) {
  const n = tokens.length,
    name = tokens[focus],
    m = keys.length,
    self = !cross;
  if (stage === "tokens" || stage === "qk") return [`Focus: ${name}, token ${focus} (the tokens are 0 to ${n - 1}).`];
  if (secret === "row" && stage !== "scores") return [el("b", {}, name), "'s weights stay hidden until you reveal them."];
  if (secret === "row" && !hint) return [el("b", {}, name), "'s scores stay hidden until you reveal: they rank the tokens as its weights will."];
  // a differential pair's difference, where shown: its largest parts either way, and its budget 1 − λ
  const D = stage !== "scores" && pair?.shown === "difference" && difference ? difference() : null;
  const row = stage === "scores" ? scores().subarray(focus * m, focus * m + m) : D ? D.subarray(focus * m, focus * m + m) : weightRow(focus);
  const order = Array.from({ length: m }, (_, j) => j).filter((j) => !closed(focus, j));
  order.sort(D ? (a, b) => Math.abs(row[b]) - Math.abs(row[a]) : (a, b) => row[b] - row[a]);
  // weights to three decimals, or, where the largest is below 0.01 (a long row's), two significant figures of it
  const largest = row[order[0]] ?? 0,
    weight = largest > 0 && largest < 0.01 ? figuresTo(largest) : fmt3;
  const top = order
    .slice(0, 6)
    .map((j) =>
      el("span", { class: "aw-read", "data-index": j }, `${self && j === focus ? "itself" : keys[j]} ${stage === "scores" ? fmt2(row[j]) : weight(row[j])}`),
    );
  const verb = stage === "scores" ? " scores " : D ? " mixes " : " reads ";
  // a learnt sink takes a share of the budget no token gets: said, and the effective tokens are of what the row keeps
  const learnt = sink != null && stage !== "scores";
  let kept = 0;
  for (let j = 0; j < m; j++) kept += row[j];
  const taken = learnt ? [el("span", { class: "aw-sink-share" }, `; its sink takes ${fmt3(1 - kept)} (no token gets it)`)] : [];
  const among = learnt ? " among what it keeps" : "";
  const budget = D ? [` — its row sums to ${fmt3(Array.from(row).reduce((a, b) => a + b, 0))}, 1 − λ (map 1 − λ·map 2)`] : null;
  /** @type {(string | HTMLElement)[]} */
  const tail = budget || (stage === "scores" || secret === "eff" ? [] : [` — ${fmt2(A.effectiveTokens(row, m, 0))} effective tokens${among}`]);
  // sparse attention: the keys the indexer chose, and what dense attention would have given them
  const chose = stage === "scores" || secret ? null : (selection?.(focus) ?? null);
  if (chose)
    tail.push(
      el(
        "span",
        { class: "aw-selection", "data-kept": chose.kept },
        ` · sparse attention: it reads the ${chose.chosen} key${chose.chosen === 1 ? "" : "s"} its indexer chose, which dense attention would give ${fmt3(chose.kept)} of the row (the rest, ${fmt3(1 - chose.kept)}, goes to keys not chosen)`,
      ),
    );
  // the highest score as the terms the model adds it from (DeBERTa's c2c, c2p, p2c)
  const split = stage === "scores" && order.length ? scoreTerms?.(focus, order[0]) : null;
  if (split) {
    const said = split.map(([n, v]) => `${n} ${fmt2(v)}`).join(" + ");
    tail.push(" — ", el("span", { class: "aw-terms" }, `${self && order[0] === focus ? "itself" : keys[order[0]]} ${fmt2(row[order[0]])} = ${said}`));
  }
  return [el("b", {}, name), verb, ...top.flatMap((s, i) => (i ? [", ", s] : [s])), order.length > 6 ? ", …" : "", ...taken, ...tail];
}
