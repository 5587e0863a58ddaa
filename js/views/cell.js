// One cell's arithmetic: from q·k to the weight, and the weight's share of the output.
import { CLOSED, el, fill, fmt3 } from "./dom.js";

/** @typedef {import("../types").CellArithmetic} Arithmetic */
/** @typedef {import("../types").ClosedWhy} ClosedWhy */
/**
 * The cell shown: its arithmetic, the reader's and the read token's text, why it is closed (if
 * it is), whether the scores have a bias, the lab's RoPE or ALiBi, and what was given ("" for q and k).
 * @typedef {object} CellView
 * @property {Arithmetic} a
 * @property {ClosedWhy | null} why
 * @property {boolean} biased
 * @property {import("../types").Position | null} [position]
 * @property {string} given
 * @property {string} reader
 * @property {string} read
 * @property {[string, number][] | null} [terms]  the score as the terms the model adds it from (DeBERTa's c2c, c2p, p2c)
 * @property {Parts | string | null} [parts]  a model's score split into residual parts (the kernel's), or what is said instead
 */
/** One (query part, key part) pair and its term of the score. @typedef {{ query: string, key: string, value: number }} Pair */
/**
 * The kernel's score_parts (why.py): the largest pairs with heads apart and by layer, how many pairs each has, the
 * pairs' sum and the model's own score.
 * @typedef {{ pairs: Pair[], layers: Pair[], count: number, layer_count: number, total: number, score: number }} Parts
 */
/** @typedef {{ node: HTMLElement, update(state: CellView | null): void, destroy(): void }} Cell */

/** A term with its sign: "+1.234", "−0.567". @param {number} x */
const signed = (x) => (x < 0 ? `−${fmt3(-x)}` : `+${fmt3(x)}`);
/** @param {number[]} xs */
const vec = (xs) => `(${xs.map(fmt3).join(", ")})`;
/** The row's sum of exp with a learnt sink: the sink's own exp(z / T) is one of its terms.
 * @param {Arithmetic} a */
const sunk = (a) => (a.sink == null ? "" : `, the sink's exp(${fmt3(a.sink)} / T) among them,`);

/** createCell(parent, {onClose()}) -> {update({a, reader, read} | null), destroy()}
 * @param {HTMLElement} parent  @param {{ onClose: () => void }} options  @returns {Cell} */
export function createCell(parent, { onClose }) {
  const steps = el("ol", { class: "aw-steps" });
  const title = el("span", { class: "aw-cell-title" });
  const close = el("button", { type: "button", class: "aw-cell-close", "aria-label": "Close the cell's arithmetic", onclick: onClose }, "×");
  const node = el("section", { class: "aw-cell", "aria-label": "One cell's arithmetic", hidden: true }, el("header", {}, title, close), steps);
  const parts = el("div", { class: "aw-parts", hidden: true });
  node.append(parts);
  parent.append(node);
  let byLayer = false; // the pairs with each layer's heads, output bias and MLP summed (a page-local choice)

  /** Why the score is what it is: the model's score as (query part, key part) pairs, largest first.
   * @param {Parts | string | null} found  @param {string} reader  @param {string} read */
  const drawParts = (found, reader, read) => {
    parts.hidden = !found;
    if (!found) return;
    const head = el("span", { class: "aw-parts-title" }, `Why this score: what q(${reader}) and k(${read}) were made of`);
    if (typeof found === "string") {
      fill(parts, el("header", {}, head), el("p", { class: "aw-parts-note" }, found));
      return;
    }
    const list = byLayer ? found.layers : found.pairs,
      count = byLayer ? found.layer_count : found.count;
    const rest = found.total - list.reduce((sum, pair) => sum + pair.value, 0);
    const toggle = el(
      "button",
      {
        type: "button",
        class: "aw-parts-toggle",
        "aria-pressed": String(byLayer),
        title: "Sum each layer's heads, output bias and MLP into one part, or show them apart",
        onclick: () => {
          byLayer = !byLayer;
          drawParts(found, reader, read);
        },
      },
      "by layer",
    );
    fill(
      parts,
      el("header", {}, head, toggle),
      el(
        "ol",
        { class: "aw-parts-list" },
        list.map((pair) => el("li", {}, el("span", {}, `query: ${pair.query} × key: ${pair.key}`), el("b", { class: "aw-step-value" }, signed(pair.value)))),
      ),
      el(
        "p",
        { class: "aw-parts-sum" },
        `${count > list.length ? `the other ${count - list.length === 1 ? "pair" : `${count - list.length} pairs`} ${signed(rest)} · ` : ""}all ${count} sum to ${fmt3(found.total)}, the model's score ${fmt3(found.score)} (before the temperature)`,
      ),
    );
  };

  /** @param {string} name  @param {string} label  @param {string} value */
  const step = (name, label, value) => el("li", { "data-step": name }, el("span", {}, label), el("b", { class: "aw-step-value" }, value));
  // q·k to the score: × scale, then the model's cap (softcap · tanh(s / softcap)) and its bias, where it has them
  // (term: what the bias is called: "bias", or ALiBi's −m·|i − j| with or without a bias given)
  // (terms: the model's names for the score's terms, the first scale · q · k, the others its bias: DeBERTa's)
  /** @param {Arithmetic} a  @param {boolean} biased  @param {string} term  @param {[string, number][] | null} terms */
  const scoreSteps = (a, biased, term, terms) => {
    /** @param {string} label */
    const last = (label) => step("score", `${label} = score`, fmt3(a.score));
    if (a.softcap == null && !biased) return [last(`× scale ${fmt3(a.scale)}`)];
    const scaled = step("scaled", `× scale ${fmt3(a.scale)} =${terms ? ` ${terms[0][0]}` : ""}`, fmt3(a.scale * a.dot));
    if (terms && a.softcap == null)
      return [
        scaled,
        last(
          terms
            .slice(1)
            .map(([name, value]) => `+ ${name} ${fmt3(value)}`)
            .join(" "),
        ),
      ];
    // (read only where there is a cap)
    const cap = `capped: ${fmt3(/** @type {number} */ (a.softcap))} · tanh(… / ${fmt3(/** @type {number} */ (a.softcap))})`;
    if (a.softcap == null) return [scaled, last(`+ ${term} ${fmt3(a.bias)}`)];
    if (!biased) return [scaled, last(cap)];
    return [scaled, step("capped", `${cap} =`, fmt3(/** @type {number} */ (a.capped))), last(`+ ${term} ${fmt3(a.bias)}`)];
  };

  return {
    node,
    update(state) {
      node.hidden = !state;
      if (!state) return;
      // biased: the scores have a bias added; given: weights alone; position: the lab's RoPE or ALiBi (derived.js)
      const { a, reader, read, why, biased, given, position = null, terms = null, parts = null } = state;
      title.textContent = `${reader} reads ${read}`;
      drawParts(a.masked ? null : parts, reader, read);
      if (a.masked) {
        // (a masked cell has its reason; one closed by a score at the closed value alone has none)
        const because = CLOSED[/** @type {ClosedWhy} */ (why)].sentence(reader, read);
        fill(steps, step("weight", `${because}, weight =`, "0"));
        return;
      }
      const shifted = a.shift ? ` − ${fmt3(a.shift)} (row max, against overflow)` : "";
      if (given) {
        // weights given as they are: their logarithm is the score (up to the row's constant)
        fill(
          steps,
          step("given", "the weight given =", fmt3(Math.exp(a.bias))),
          step("score", "its logarithm =", fmt3(a.bias)),
          step("tempered", `÷ temperature ${fmt3(a.temperature)} =`, fmt3(a.tempered)),
          step("exp", `exp(…${shifted}) =`, fmt3(a.exp)),
          step("weight", `÷ the row's sum of exp ${fmt3(a.rowSum)} = weight`, fmt3(a.weight)),
          ...(given === "weights and values" ? [step("share", `× v(${read}) ${vec(a.value)} = its share of ${reader}'s output`, vec(a.share))] : []),
        );
        return;
      }
      fill(
        steps,
        step("dot", position?.scheme === "rope" ? `q(${reader}) · k(${read}), both turned by RoPE =` : `q(${reader}) · k(${read}) =`, fmt3(a.dot)),
        ...scoreSteps(a, biased, position?.scheme !== "alibi" ? "bias" : position.biased ? "bias − m·|i − j| (ALiBi)" : "ALiBi's −m·|i − j|", terms),
        step("tempered", `÷ temperature ${fmt3(a.temperature)} =`, fmt3(a.tempered)),
        step("exp", `exp(…${shifted}) =`, fmt3(a.exp)),
        step("weight", `÷ the row's sum of exp${sunk(a)} ${fmt3(a.rowSum)} = weight`, fmt3(a.weight)),
        step("share", `× v(${read}) ${vec(a.value)} = its share of ${reader}'s output`, vec(a.share)),
      );
    },
    destroy() {
      node.remove();
    },
  };
}
