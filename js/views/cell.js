// One cell's arithmetic: from q·k to the weight, and the weight's share of the output.
import { CLOSED, el, fill, fmt3 } from "./dom.js";

const vec = (xs) => `(${xs.map(fmt3).join(", ")})`;

/** createCell(parent, {onClose()}) -> {update({a, reader, read} | null), destroy()} */
export function createCell(parent, { onClose }) {
  const steps = el("ol", { class: "aw-steps" });
  const title = el("span", { class: "aw-cell-title" });
  const close = el("button", { type: "button", class: "aw-cell-close", "aria-label": "Close the cell's arithmetic", onclick: onClose }, "×");
  const node = el("section", { class: "aw-cell", "aria-label": "One cell's arithmetic", hidden: true }, el("header", {}, title, close), steps);
  parent.append(node);

  const step = (name, label, value) => el("li", { "data-step": name }, el("span", {}, label), el("b", { class: "aw-step-value" }, value));
  // q·k to the score: × scale, then the model's cap (softcap · tanh(s / softcap)) and its bias, where it has them
  // (term: what the bias is called: "bias", or ALiBi's −m·|i − j| with or without a bias given)
  const scoreSteps = (a, biased, term) => {
    const last = (label) => step("score", `${label} = score`, fmt3(a.score));
    if (a.softcap == null && !biased) return [last(`× scale ${fmt3(a.scale)}`)];
    const scaled = step("scaled", `× scale ${fmt3(a.scale)} =`, fmt3(a.scale * a.dot));
    const cap = `capped: ${fmt3(a.softcap)} · tanh(… / ${fmt3(a.softcap)})`;
    if (a.softcap == null) return [scaled, last(`+ ${term} ${fmt3(a.bias)}`)];
    if (!biased) return [scaled, last(cap)];
    return [scaled, step("capped", `${cap} =`, fmt3(a.capped)), last(`+ ${term} ${fmt3(a.bias)}`)];
  };

  return {
    node,
    update(state) {
      node.hidden = !state;
      if (!state) return;
      // biased: the scores have a bias added; given: weights alone; position: the lab's RoPE or ALiBi (derived.js)
      const { a, reader, read, why, biased, given, position = null } = state;
      title.textContent = `${reader} reads ${read}`;
      if (a.masked) {
        const because = CLOSED[why].sentence(reader, read);
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
        ...scoreSteps(a, biased, position?.scheme !== "alibi" ? "bias" : position.biased ? "bias − m·|i − j| (ALiBi)" : "ALiBi's −m·|i − j|"),
        step("tempered", `÷ temperature ${fmt3(a.temperature)} =`, fmt3(a.tempered)),
        step("exp", `exp(…${shifted}) =`, fmt3(a.exp)),
        step("weight", `÷ the row's sum of exp ${fmt3(a.rowSum)} = weight`, fmt3(a.weight)),
        step("share", `× v(${read}) ${vec(a.value)} = its share of ${reader}'s output`, vec(a.share)),
      );
    },
    destroy() {
      node.remove();
    },
  };
}
