// The exercises of the weights stage. "predict": the learner spreads a budget of 100% over the
// tokens the focused row reads (drag a bar, or type a percentage: the others make room, so the
// guess always spends exactly the whole budget), then presses Reveal to see the real row beside
// the guess, and a score. "temperature": set T so the focused row spends its budget on about
// `goal` tokens; Reveal says how many it reached. The page computes the score itself, with
// Python's formula, so an exported page with no kernel keeps the exercise working.
import * as A from "../attention.js";
import { CLOSED, el, fill, fmt2, percentages } from "./dom.js";

/** @typedef {import("./dom.js").ClosedWhy} ClosedWhy */
/**
 * What the exercise is drawn from: the state, and the focused row's weights and why each key is
 * closed to it (given while an exercise is on).
 * @typedef {object} ExerciseView
 * @property {string} stage
 * @property {string[]} tokens
 * @property {string[]} keys
 * @property {number} focus
 * @property {ArrayLike<number>} [row]  the focused row's weights
 * @property {(ClosedWhy | null)[]} [why]  why each key is closed to it (derived.js closedWhy), or null
 * @property {boolean} cross
 * @property {string} exercise  "predict", "temperature" or "" for none
 * @property {number[] | null} guess
 * @property {boolean} revealed
 * @property {number} goal
 */
/** What update returns: what the page keeps secret until the reveal. @typedef {"row" | "eff" | null} Secret */
/** @typedef {{ node: HTMLElement, update(view: ExerciseView): Secret, destroy(): void }} Exercise */
/** @typedef {{ exercise: string, guess: number[] | null, revealed: boolean, row: ArrayLike<number>, open: boolean[], focus: number }} Last */

/** What a closed cell says instead of a bar (why it is closed: derived.js closedWhy). */

/** The guess with entry j set to `value` (0…1) and the other open entries making room so the whole
 * sums to 1. `held`: the entries the learner set before, which keep their values while the others
 * can make room (those share what is left in proportion, equally when they held nothing); only a
 * value larger than what is left takes from the held ones, in proportion. Closed entries stay 0.
 * The entry set takes 1 − the sum of the others, so the sum is 1 in floating point too.
 * @param {number[]} guess  @param {number} j  @param {number} value  @param {boolean[]} [open]  @param {number[]} [held]
 * @returns {number[]} */
export function rebalance(guess, j, value, open = guess.map(() => true), held = []) {
  if (!open[j]) return guess.slice();
  const others = guess.map((_, i) => i).filter((i) => i !== j && open[i]);
  const x = others.length ? Math.min(1, Math.max(0, Number(value) || 0)) : 1;
  const at = (/** @type {number} */ i) => Math.max(0, guess[i] || 0);
  const kept = others.filter((i) => held.includes(i)),
    free = others.filter((i) => !held.includes(i));
  const keptSum = kept.reduce((a, i) => a + at(i), 0);
  // share `total` over `among` in proportion to what they held (equally when they held nothing)
  /** @param {number[]} among  @param {number} total */
  const share = (among, total) => {
    const had = among.reduce((a, i) => a + at(i), 0);
    for (const i of among) out[i] = had > 0 ? (at(i) * total) / had : total / among.length;
  };
  const out = guess.map(() => 0);
  if (free.length && x + keptSum <= 1) {
    for (const i of kept) out[i] = at(i);
    share(free, 1 - x - keptSum);
  } else share(kept.length ? kept : free, 1 - x); // nothing free to make room, or not enough: the held ones give
  out[j] = Math.max(0, 1 - others.reduce((a, i) => a + out[i], 0));
  return out;
}

/** Equal shares over the open entries: where the bars start, before any guess.
 * @param {boolean[]} open  @returns {number[]} */
export function evenGuess(open) {
  const k = open.filter(Boolean).length;
  return open.map((o) => (o && k ? 1 / k : 0));
}

/** The predict exercise's score, as Python's w.score: 1 − ½·Σ|guess − row| (1: the real row; 0: nothing in common).
 * @param {ArrayLike<number>} guess  @param {ArrayLike<number>} row */
export function predictScore(guess, row) {
  let d = 0;
  for (let j = 0; j < guess.length; j++) d += Math.abs(guess[j] - row[j]);
  return 1 - 0.5 * d;
}

/** The temperature exercise's score, as Python's w.score: 1 − |reached − goal| / goal, at least 0.
 * @param {number} reached  @param {number} goal */
export const temperatureScore = (reached, goal) => Math.max(0, 1 - Math.abs(reached - goal) / goal);

/** Which way the temperature should go next, and why, for a row that reached `reached` effective tokens.
 * @param {number} reached  @param {number} goal */
export function way(reached, goal) {
  if (Math.abs(reached - goal) <= 0.05 * goal) return "That is on the goal.";
  return reached > goal
    ? "Next, lower T: a colder row concentrates its budget on fewer tokens."
    : "Next, raise T: a warmer row spreads its budget over more tokens.";
}

/** A goal as a person writes it: 2, 2.5, 1.75. */
export const fmtGoal = (/** @type {number} */ g) => String(Math.round(g * 100) / 100);

/** createExercise(parent, {onGuess(list), onReveal(guess or null: the even split, when nothing was guessed)}) -> {node, update(view) -> hidden, destroy()}.
 * update returns what the page must keep secret until the reveal: "row" (the focused row's
 * weights, on every stage: the predict exercise), "eff" (its effective tokens: the temperature
 * exercise) or null.
 * @param {HTMLElement} parent
 * @param {{ onGuess: (guess: number[]) => void, onReveal: (guess: number[] | null) => void }} options
 * @returns {Exercise} */
export function createExercise(parent, { onGuess, onReveal }) {
  const prompt = el("p", { class: "aw-ex-prompt" });
  const rows = el("div", { class: "aw-ex-rows", role: "group", "aria-label": "Your guess: the share of the budget for each token" });
  // with no guess yet, Reveal takes the even split the bars show: a guess like any other
  const reveal = el("button", { class: "aw-ex-reveal", type: "button", onclick: () => revealNow() }, "Reveal");
  const status = el("span", { class: "aw-ex-status" });
  const result = el("p", { class: "aw-ex-result", role: "status", "aria-live": "polite" });
  const key = el(
    "p",
    { class: "aw-ex-key", hidden: true },
    el("span", { class: "aw-ex-swatch aw-ex-swatch-guess" }),
    "your guess ",
    el("span", { class: "aw-ex-swatch aw-ex-swatch-real" }),
    "real weight",
  );
  const node = el(
    "section",
    { class: "aw-exercise", "aria-label": "Exercise", hidden: true },
    prompt,
    rows,
    key,
    el("div", { class: "aw-ex-bar-row" }, reveal, status),
    result,
  );
  parent.prepend(node);

  /** @type {{ row: HTMLElement, track: HTMLElement, guessBar: HTMLElement, realBar: HTMLElement, input: HTMLInputElement, real: HTMLElement }[]} */
  let items = [];
  /** @type {string | null} */
  let built = null; // the keys and closed cells the rows were built for
  /** @type {Last | null} */
  let last = null; // the view drawn last
  /** @type {number[] | null} */
  let draft = null; // the guess being dragged: drawn at once, sent on release
  /** @type {{ j: number, id: number } | null} */
  let drag = null; // {j, track} while a bar is dragged
  /** @type {number[]} */
  let held = []; // the entries the learner set, typed or dragged: they keep their values while others make room
  /** @type {number[] | null} */
  let sent = null; // the guess last committed, until a draw shows it (a Reveal may come first)
  let typing = -1; // the box the learner is typing in: nothing drawn meanwhile overwrites what it holds

  // (a bar moves, or Reveal is pressed, only with an exercise drawn: `last`)
  const shares = () => draft || /** @type {Last} */ (last).guess || evenGuess(/** @type {Last} */ (last).open);
  // a bar still held is committed first; a guess just committed counts although no draw has shown it yet
  const revealNow = () => {
    if (draft) commit();
    const shown = /** @type {Last} */ (last);
    onReveal(shown.exercise === "predict" && !(shown.guess || sent) ? evenGuess(shown.open) : null);
  };
  /** @param {number} j  @param {number} value  @param {boolean} send */
  const set = (j, value, send) => {
    draft = rebalance(shares(), j, value, /** @type {Last} */ (last).open, held);
    if (!held.includes(j)) held.push(j);
    paint();
    if (send) commit();
  };
  const commit = () => {
    const g = draft;
    draft = null;
    if (g) {
      sent = g;
      onGuess(g);
    }
  };

  /** @param {string[]} keys  @param {boolean[]} open  @param {(ClosedWhy | null)[]} why  @param {number} selfIndex */
  function build(keys, open, why, selfIndex) {
    typing = -1;
    items = keys.map((t, j) => {
      const guessBar = el("div", { class: "aw-ex-fill aw-ex-fill-guess" });
      const realBar = el("div", { class: "aw-ex-fill aw-ex-fill-real" });
      const track = el("div", { class: "aw-ex-track", role: "slider", "aria-valuemin": 0, "aria-valuemax": 100 }, guessBar, realBar);
      const input = el("input", { class: "aw-ex-input", type: "number", min: 0, max: 100, step: 1, "aria-label": `${t}: your share, percent` });
      const real = el("span", { class: "aw-ex-real" });
      const label = el("span", { class: "aw-ex-label", title: t }, t, j === selfIndex ? el("span", { class: "aw-ex-self" }, " (itself)") : null);
      const row = el("div", { class: "aw-ex-row", "data-index": j }, label, track, el("span", { class: "aw-ex-pct" }, input, "%"), real);
      if (!open[j]) {
        row.classList.add("aw-ex-closed");
        input.disabled = true;
        track.setAttribute("aria-disabled", "true");
        real.textContent = CLOSED[/** @type {ClosedWhy} */ (why[j])]?.short || "closed";
      } else {
        track.tabIndex = 0;
        track.setAttribute("aria-label", `${t}: your share`);
        /** @param {PointerEvent} ev */
        const at = (ev) => {
          const r = track.getBoundingClientRect();
          return r.width ? (ev.clientX - r.left) / r.width : 0;
        };
        track.addEventListener("pointerdown", (ev) => {
          if (ev.button !== 0) return;
          ev.preventDefault();
          track.focus();
          track.setPointerCapture?.(ev.pointerId);
          drag = { j, id: ev.pointerId };
          set(j, at(ev), false);
        });
        track.addEventListener("pointermove", (ev) => {
          if (drag?.j === j && drag.id === ev.pointerId) set(j, at(ev), false);
        });
        /** @param {PointerEvent} ev */
        const end = (ev) => {
          if (drag?.j !== j || drag.id !== ev.pointerId) return;
          drag = null;
          commit();
        };
        track.addEventListener("pointerup", end);
        track.addEventListener("pointercancel", end);
        track.addEventListener("keydown", (ev) => {
          const step = /** @type {Partial<Record<string, number>>} */ ({
            ArrowRight: 0.01,
            ArrowUp: 0.01,
            ArrowLeft: -0.01,
            ArrowDown: -0.01,
            PageUp: 0.1,
            PageDown: -0.1,
            Home: -1,
            End: 1,
          })[ev.key];
          if (step === undefined) return;
          ev.preventDefault();
          set(j, Math.round((shares()[j] + step) * 100) / 100, true);
        });
        const apply = () => {
          typing = -1;
          if (input.value === "" || !Number.isFinite(Number(input.value))) return paint(); // back to the guess as it is
          set(j, Number(input.value) / 100, true);
        };
        input.addEventListener("input", () => {
          typing = j;
        });
        input.addEventListener("change", apply);
        input.addEventListener("keydown", (ev) => {
          if (ev.key !== "Enter") return;
          ev.preventDefault();
          ev.stopPropagation(); // (a notebook would take Enter as its own)
          apply();
        });
        input.addEventListener("blur", () => {
          if (typing === j) apply();
        });
      }
      return { row, track, guessBar, realBar, input, real };
    });
    fill(
      rows,
      items.map((it) => it.row),
    );
  }

  /** The bars, inputs and real weights for the guess as it stands (the draft while dragging). */
  function paint() {
    const shown = /** @type {Last} */ (last),
      g = shares(),
      pct = percentages(g),
      { revealed, row, open } = shown;
    const realPct = revealed ? percentages(Array.from(row)) : null;
    items.forEach((it, j) => {
      it.guessBar.style.width = `${(100 * g[j]).toFixed(2)}%`;
      it.track.setAttribute("aria-valuenow", String(pct[j]));
      if (typing !== j) it.input.value = String(pct[j]);
      it.row.classList.toggle("aw-ex-tentative", !draft && !shown.guess);
      it.realBar.style.width = revealed && open[j] ? `${(100 * row[j]).toFixed(2)}%` : "0";
      if (open[j]) {
        it.real.textContent = revealed ? `real ${/** @type {number[]} */ (realPct)[j]}%` : "";
        it.real.title = revealed ? `real weight ${row[j].toFixed(3)}` : "";
      }
    });
  }

  return {
    node,
    /** view: {stage, tokens, keys, focus, row (the focused row's weights), why (why each key is closed to it, or
     *  null), cross, exercise, guess, revealed, goal}. Returns what stays secret: "row", "eff" or null. */
    update({ stage, tokens, keys, focus, row, why, cross, exercise, guess, revealed, goal }) {
      const on = (exercise === "predict" || exercise === "temperature") && keys.length > 0;
      // predict shows on the blend stage too: the blend is the row's weights times the values
      node.hidden = !on || !(stage === "weights" || (stage === "blend" && exercise === "predict"));
      node.dataset.exercise = on ? exercise : "";
      if (!on) {
        last = null;
        return null;
      }
      const m = keys.length,
        name = tokens[focus];
      // (row and why: given while an exercise is on)
      const open = /** @type {(ClosedWhy | null)[]} */ (why).map((w) => !w);
      const valid = Array.isArray(guess) && guess.length === m ? guess : null;
      if (!drag) draft = null; // Python's guess (or the one just sent) is the one shown
      if (!valid && !drag) [held, sent] = [[], null]; // a new try (the rules cleared the guess): nothing is held
      last = { exercise, guess: valid, revealed: !!revealed, row: /** @type {ArrayLike<number>} */ (row), open, focus };
      node.classList.toggle("aw-ex-revealed", !!revealed);
      rows.hidden = exercise !== "predict";
      key.hidden = exercise !== "predict" || !revealed;
      if (exercise === "predict") {
        const selfIndex = cross ? -1 : focus;
        const shape = `${keys.join("\u0000")}|${/** @type {(ClosedWhy | null)[]} */ (why).join(",")}|${selfIndex}`;
        if (built !== shape) {
          build(keys, open, /** @type {(ClosedWhy | null)[]} */ (why), selfIndex);
          built = shape;
          held = [];
        }
        fill(
          prompt,
          "Predict: how does ",
          el("b", {}, name),
          " spend its budget? Spread 100% over the tokens it reads (drag the bars or type percentages), then press Reveal.",
        );
        paint();
        reveal.disabled = !!revealed;
        status.textContent = !valid
          ? "Drag a bar or type a percentage; Reveal as it stands takes the even split as your guess."
          : revealed
            ? "Drag a bar for a new try."
            : "";
        if (revealed && valid) {
          const score = predictScore(valid, /** @type {ArrayLike<number>} */ (row));
          result.dataset.score = String(score);
          fill(result, el("b", { class: "aw-ex-score" }, `score ${fmt2(score)}`), ": 1 − half the total difference between your row and the real one");
        } else {
          delete result.dataset.score;
          fill(result);
        }
        return revealed ? null : "row"; // on every stage: the strip, the thumbnails and a cell's arithmetic show it too
      }
      // temperature: the learner moves the slider; the number reached stays hidden until Reveal
      built = null;
      fill(
        prompt,
        "Set T so that ",
        el("b", {}, name),
        `'s row spends its budget on about ${fmtGoal(goal)} token${goal === 1 ? "" : "s"}: move the temperature slider, then press Reveal.`,
      );
      reveal.disabled = !!revealed;
      status.textContent = revealed ? "Move the slider for a new try." : "";
      if (revealed) {
        const reached = A.effectiveTokens(/** @type {ArrayLike<number>} */ (row), m, 0),
          score = temperatureScore(reached, goal);
        result.dataset.score = String(score);
        result.dataset.reached = String(reached);
        fill(
          result,
          `effective tokens reached: ${fmt2(reached)} (goal ${fmtGoal(goal)}) · `,
          el("b", { class: "aw-ex-score" }, `score ${fmt2(score)}`),
          ": 1 − the distance to the goal, as a share of the goal. ",
          way(reached, goal),
        );
      } else {
        delete result.dataset.score;
        delete result.dataset.reached;
        fill(result);
      }
      return revealed ? null : "eff";
    },
    destroy() {
      node.remove();
    },
  };
}
