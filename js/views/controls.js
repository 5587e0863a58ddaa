// The stage stepper (back, next, and each stage by name) and the log-scale temperature slider.
import { el, fmt2 } from "./dom.js";

export const STAGES = [
  ["tokens", "Tokens"],
  ["qk", "Query · Key"],
  ["scores", "Scores"],
  ["weights", "Weights"],
  ["blend", "Blend"],
];
const STEPS = 1000; // slider resolution along the log axis

/** createControls(parent, {range: [lo, hi], onStage(name), onTemperature(t)}) */
export function createControls(parent, { range, onStage, onTemperature }) {
  const [lo, hi] = range.map(Math.log);
  const toT = (p) => Math.exp(lo + (p / STEPS) * (hi - lo));
  const toP = (t) => Math.round(((Math.log(t) - lo) / (hi - lo)) * STEPS);
  let current = null;

  const back = el("button", { type: "button", class: "aw-back", "aria-label": "Previous stage" }, "‹ Back");
  const next = el("button", { type: "button", class: "aw-next", "aria-label": "Next stage" }, "Next ›");
  const stageButtons = STAGES.map(([name, label], i) =>
    el("button", { type: "button", class: "aw-stage", "data-stage": name, onclick: () => onStage(name) },
      el("span", { class: "aw-stage-num" }, i + 1), label));
  back.addEventListener("click", () => step(-1));
  next.addEventListener("click", () => step(1));
  function step(by) {
    const i = STAGES.findIndex(([name]) => name === current);
    const j = Math.max(0, Math.min(STAGES.length - 1, i + by));
    if (j !== i) onStage(STAGES[j][0]);
  }

  const slider = el("input", { type: "range", min: 0, max: STEPS, step: 1, class: "aw-slider", "aria-label": "Temperature" });
  const value = el("output", { class: "aw-temp-value" });
  slider.addEventListener("input", () => onTemperature(toT(Number(slider.value))));

  const node = el("div", { class: "aw-controls" },
    el("nav", { class: "aw-stepper", "aria-label": "Stages" }, back, stageButtons, next),
    el("label", { class: "aw-temp" }, el("span", {}, "Temperature"), slider, value));
  parent.append(node);

  return {
    node,
    update({ stage, temperature }) {
      current = stage;
      stageButtons.forEach((b) => b.setAttribute("aria-pressed", String(b.dataset.stage === stage)));
      back.disabled = stage === STAGES[0][0];
      next.disabled = stage === STAGES[STAGES.length - 1][0];
      // Python may hold a temperature outside the slider's range: pin the knob, show the true value.
      slider.value = String(Math.max(0, Math.min(STEPS, toP(temperature))));
      slider.setAttribute("aria-valuetext", fmt2(temperature));
      value.textContent = `T = ${fmt2(temperature)}`;
    },
    destroy() { node.remove(); },
  };
}
