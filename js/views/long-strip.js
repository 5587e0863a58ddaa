// The token strip of a long text: only the chips on screen are in the document (a fixed pool,
// moved and relabelled as it scrolls), so 1,024 tokens and 131,072 cost the page the same. Each
// chip is tinted by the focused row's weight on it; a search finds a token by its text or its
// position and focuses it.
import { chipTint } from "../colours.js";
import { el, inkOn, short } from "./dom.js";

const CHIP = 76; // pixels a token's chip takes
let strips = 0; // (each strip's chips' ids its own)
const commas = new Intl.NumberFormat("en-US").format;

/** A token's text where a line holds it: line breaks and tabs made visible, cut to `max` characters.
 * @param {string} t */
export const visible = (t, max = 40) => short(t, max).replace(/\n/g, "↵").replace(/\t/g, "⇥").replace(/\r/g, "␍");

/**
 * @param {HTMLElement} box
 * @param {{ tokens: string[], pal: () => import("./dom.js").Palette, onFocus: (i: number) => void }} options
 */
export function createStrip(box, { tokens, pal, onFocus }) {
  const n = tokens.length,
    uid = `aw-long-strip-${++strips}`;
  const search = el("input", { type: "search", placeholder: "find a token, or #position", "aria-label": "find a token by its text, or a position" });
  const found = el("span", { class: "aw-long-found", role: "status" });
  const spacer = el("div", { class: "aw-long-spacer", style: `width: ${n * CHIP}px` });
  const scroller = el("div", { class: "aw-long-strip", tabindex: "0", role: "listbox", "aria-label": `the ${commas(n)} tokens` }, spacer);
  box.append(el("div", { class: "aw-long-find" }, search, found), scroller);
  /** @type {HTMLElement[]} */
  const chips = [];
  let shownOnce = false,
    focused = 0,
    mark = -1,
    top = 0,
    frame = 0;
  /** @type {Float32Array | null} */
  let row = null;

  function layout() {
    const want = Math.max(1, Math.ceil(scroller.clientWidth / CHIP) + 1); // (what fits, and one cut in two)
    while (chips.length < want) {
      const chip = el(
        "div",
        { class: "aw-long-chip", role: "option", id: `${uid}-${chips.length}` },
        el("span", { class: "aw-long-tok" }),
        el("span", { class: "aw-long-pos" }),
      );
      chips.push(chip);
      scroller.append(chip);
    }
    while (chips.length > want) /** @type {HTMLElement} */ (chips.pop()).remove();
    if (scroller.clientWidth && !shownOnce) {
      shownOnce = true; // (before its first layout the strip has no width to scroll the focus into)
      mark = -1;
      scroller.scrollLeft = Math.max(0, focused * CHIP - scroller.clientWidth / 2 + CHIP / 2);
    }
    draw();
  }

  function draw() {
    frame = 0;
    const first = Math.floor(scroller.scrollLeft / CHIP),
      p = pal();
    scroller.removeAttribute("aria-activedescendant"); // (the focused token's chip, when it is on screen)
    chips.forEach((chip, k) => {
      const i = first + k;
      chip.hidden = i >= n;
      if (i >= n) return;
      const [tok, pos] = /** @type {HTMLElement[]} */ ([...chip.children]);
      chip.style.transform = `translateX(${i * CHIP}px)`;
      chip.dataset.i = String(i);
      tok.textContent = visible(tokens[i]);
      pos.textContent = commas(i);
      chip.title = `${tokens[i]} (position ${commas(i)})${row ? `: weight ${row[i].toPrecision(3)} in the focused row` : ""}`;
      chip.setAttribute("aria-selected", String(i === focused));
      if (i === focused) scroller.setAttribute("aria-activedescendant", chip.id);
      chip.classList.toggle("aw-long-mark", i === mark);
      const tint = row && top > 0 ? chipTint(p, row[i] / top) : "";
      chip.style.background = tint;
      chip.style.color = tint ? inkOn(tint) : "";
    });
  }
  const later = () => (frame ||= requestAnimationFrame(draw));

  /** Scrolls position i to the middle of the strip. @param {number} i */
  function reveal(i) {
    mark = i;
    scroller.scrollLeft = Math.max(0, i * CHIP - scroller.clientWidth / 2 + CHIP / 2);
    draw();
  }

  function find() {
    const text = search.value.trim();
    if (!text) return void (found.textContent = "");
    const position = /^#?\d[\d,]*$/.test(text) ? Number(text.replace(/[#,]/g, "")) : null;
    if (position != null) {
      if (position >= n) return void (found.textContent = `there are ${commas(n)} tokens: positions 0 to ${commas(n - 1)}`);
      found.textContent = `position ${commas(position)}: ${tokens[position]}`;
      return onFocus(position);
    }
    const want = text.toLowerCase(),
      at = [];
    for (let i = 0; i < n; i++) if (tokens[i].toLowerCase().includes(want)) at.push(i);
    if (!at.length) return void (found.textContent = `no token holds “${text}”`);
    const k = at.findIndex((i) => i > focused),
      next = Math.max(k, 0); // (after the focused token, from the start once past the last)
    found.textContent = `“${text}”: ${commas(next + 1)} of ${commas(at.length)}, at position ${commas(at[next])} (Enter: the next)`;
    onFocus(at[next]);
  }

  /** @param {MouseEvent} e */
  const onClick = (e) => {
    const chip = /** @type {HTMLElement | null} */ (/** @type {Element} */ (e.target).closest(".aw-long-chip"));
    if (chip?.dataset.i) onFocus(Number(chip.dataset.i));
  };
  /** @param {KeyboardEvent} e */
  const onKey = (e) => {
    const to = { ArrowLeft: focused - 1, ArrowRight: focused + 1, Home: 0, End: n - 1 }[e.key];
    if (to == null) return;
    e.preventDefault();
    onFocus(Math.max(0, Math.min(n - 1, to)));
  };
  scroller.addEventListener("scroll", later);
  scroller.addEventListener("click", onClick);
  scroller.addEventListener("keydown", onKey);
  search.addEventListener("keydown", (e) => e.key === "Enter" && find());
  const resize = new ResizeObserver(layout);
  resize.observe(scroller);
  layout();

  return {
    /** The focused position: outlined, and scrolled to if off screen. @param {number} i */
    focus(i) {
      focused = i;
      const left = scroller.scrollLeft;
      if (i * CHIP < left || (i + 1) * CHIP > left + scroller.clientWidth) reveal(i);
      else draw();
    },
    /** The focused row's weights (null: none yet), tinting the chips relative to its largest. @param {Float32Array | null} weights */
    tint(weights) {
      row = weights;
      top = weights ? weights.reduce((a, w) => Math.max(a, w), 0) : 0;
      draw();
    },
    reveal,
    redraw: draw,
    destroy() {
      resize.disconnect();
      if (frame) cancelAnimationFrame(frame);
      box.replaceChildren();
    },
  };
}
