// The token strip across the top, and the arcs from the focused token to the tokens it reads. In
// cross-attention the text read is a second row below, and the links run down from the focused
// token to the tokens of that text. A vision model's patches are drawn as the image's own tiles.
import { chipTint } from "../colours.js";
import { el, fill, inkOn, percentages, svg } from "./dom.js";
import { tileOf } from "./image.js";

const ARC_H = 64;
const MAX_ARCS = 40; // past this many, only the strongest arcs are drawn (and the page says so)
const CONDENSE = 150; // past this many tokens the strip drops the percentages under each token
const LINK_H = 56;
const EVICTED_TAIL = ": it holds no key or value for it"; // (a struck-out token's title ends so)

/** @typedef {import("./dom.js").Palette} Palette */
/** @typedef {import("./image.js").Picture} Picture */
/**
 * @typedef {object} StripView
 * @property {string[]} tokens  the tokens that read (the rows)
 * @property {string[] | null} [keys]  cross-attention: the text read (the columns); null in self-attention
 * @property {number} focus
 * @property {number[] | null} row  the focused row's weights, or null for none shown
 * @property {object | null} [rowKey]  the same object exactly while the row's numbers are (the store's row)
 * @property {(j: number) => boolean} [closed]  the focused row may not read token j
 * @property {Palette} pal
 * @property {number[] | null} [span]  [first, count] of a detail window's columns, kept in view
 * @property {Picture | null} [image]  a vision model's picture: its patches drawn as tiles
 * @property {{ keys: Uint8Array, said: string } | null} [evicted]  the keys a compressed KV cache evicts (1 each), and
 *   whose cache: struck out, and said in their titles
 */
/** @typedef {{ node: HTMLElement, list: HTMLElement, update(view: StripView): boolean, destroy(): void }} TokenStrip */
/** @typedef {{ tokens: string[], keys: string[] | null, focus: number, span: number[] | null, image: Picture | null, condensed: boolean }} Drawn */

/** createTokenStrip(parent, {onFocus(i), onPick(j)}) -> {update({tokens, keys, focus, row}), destroy()}: the arrow
 * keys move the focus; a click picks a token (focuses it, or in the text read below, nothing), `onPick` says what it does.
 * @param {HTMLElement} parent
 * @param {{ onFocus: (i: number) => void, onPick?: (j: number, read: boolean) => void }} options
 * @returns {TokenStrip} */
export function createTokenStrip(parent, { onFocus, onPick = (j, read) => (read ? undefined : onFocus(j)) }) {
  const arcs = svg("svg", { class: "aw-arcs", height: ARC_H, "aria-hidden": "true" });
  const list = el("div", { class: "aw-tokens", role: "toolbar", "aria-label": "Tokens: click one to focus it" });
  const arcNote = el("p", { class: "aw-arc-note", hidden: true });
  // cross-attention: the text read, below, and the links down to it
  const links = svg("svg", { class: "aw-links", height: LINK_H, "aria-hidden": "true" });
  const keyList = el("div", { class: "aw-tokens aw-key-tokens", role: "list", "aria-label": "The text read (the columns)" });
  const below = el("div", { class: "aw-strip-keys", hidden: true }, links, keyList);
  const node = el("div", { class: "aw-strip" }, arcs, list, below);
  parent.append(arcNote);
  parent.append(node);
  /** @type {HTMLElement[]} */
  let buttons = [];
  /** @type {HTMLElement[]} */
  let keyItems = [];
  /** @type {Drawn | null} */
  let last = null;
  /** @type {{ rowKey: object | null, focus: number, tokens: string[] } | null} */
  let arcsFor = null; // what the arcs drawn show: redrawn only when it changes
  const resized = new ResizeObserver(() => {
    arcsFor = null;
  }); // a new width moves every token
  resized.observe(list);

  /** @param {KeyboardEvent} ev */
  function onKey(ev) {
    if (!last) return;
    const step = /** @type {Partial<Record<string, number>>} */ ({ ArrowRight: 1, ArrowLeft: -1, Home: -Infinity, End: Infinity })[ev.key];
    if (step === undefined) return;
    ev.preventDefault();
    // step from the button that has the keyboard focus: keys can come faster than redraws
    const chip = /** @type {HTMLElement | null} */ (/** @type {Element} */ (ev.target).closest(".aw-token"));
    const from = Number(chip?.dataset.index ?? last.focus);
    const n = last.tokens.length;
    const i = Math.max(0, Math.min(n - 1, Number.isFinite(step) ? from + step : step > 0 ? n - 1 : 0));
    onFocus(i);
    buttons[i].focus();
  }
  list.addEventListener("keydown", onKey);
  // cross-attention: a token of the text read, clicked (a compressed cache of your own keys keeps or evicts it)
  /** @param {MouseEvent} ev */
  const onKeyClick = (ev) => {
    const item = /** @type {HTMLElement | null} */ (/** @type {Element} */ (ev.target).closest(".aw-key-token"));
    if (item) onPick(Number(item.dataset.index), true);
  };
  keyList.addEventListener("click", onKeyClick);

  /** @param {string[]} tokens  @param {Picture | null} image  @param {boolean} condensed */
  function rebuild(tokens, image, condensed) {
    // a text being written grows (or shrinks) at its end: the buttons of the tokens kept stay
    const before = last?.tokens ?? [];
    let kept = 0;
    if (image === last?.image && (!image || condensed === last?.condensed))
      while (kept < Math.min(before.length, tokens.length, buttons.length) && before[kept] === tokens[kept]) kept++;
    const added = tokens.slice(kept).map((t, at) => {
      const i = kept + at,
        tile = image && tileOf(image, i, condensed); // (condensed, its name is hidden: the button's label and tooltip say it)
      return el(
        "button",
        {
          class: tile ? "aw-token aw-token-patch" : "aw-token",
          type: "button",
          "data-index": i,
          onclick: () => onPick(i, false),
          "aria-label": tile && condensed && t,
          title: tile && t,
        },
        tile,
        el("span", { class: "aw-token-text" }, t),
        el("span", { class: "aw-token-weight" }),
      );
    });
    for (const b of buttons.slice(kept)) b.remove();
    arcsFor = null; // (tiles come once the image is read: every token may move)
    buttons = buttons.slice(0, kept).concat(added);
    if (kept) list.append(...added);
    else fill(list, buttons);
  }

  /** @param {string[] | null} keys */
  function rebuildKeys(keys) {
    keyItems = keys
      ? keys.map((t, j) =>
          el(
            "span",
            { class: "aw-token aw-key-token", role: "listitem", "data-index": j },
            el("span", { class: "aw-token-text" }, t),
            el("span", { class: "aw-token-weight" }),
          ),
        )
      : [];
    fill(keyList, keyItems);
    below.hidden = !keys;
    node.classList.toggle("aw-cross", !!keys);
    list.setAttribute("aria-label", keys ? "Tokens that read (the rows): click one to focus it" : "Tokens: click one to focus it");
  }

  /** Links from the focused token down to the tokens of the text it reads, as thick as the weight.
   * @param {number} focus  @param {number[]} row */
  function drawLinks(focus, row) {
    const strip = node.getBoundingClientRect();
    if (!strip.width) {
      fill(links);
      return false;
    }
    links.setAttribute("width", String(Math.max(list.scrollWidth, keyList.scrollWidth)));
    /** @param {Element} b */
    const center = (b) => {
      const r = b.getBoundingClientRect();
      return r.left - strip.left + node.scrollLeft + r.width / 2;
    };
    const xf = center(buttons[focus]);
    let shown = row.map((_, j) => j).filter((j) => row[j] >= 0.005);
    if (shown.length > MAX_ARCS) shown = shown.sort((a, b) => row[b] - row[a]).slice(0, MAX_ARCS);
    arcNote.hidden = row.length <= MAX_ARCS;
    arcNote.textContent = `links: the ${shown.length} strongest of ${row.length} weights`;
    fill(
      links,
      shown.map((j) => {
        const xj = center(keyItems[j]),
          w = row[j];
        const style = `stroke-width:${(1 + 9 * w).toFixed(2)}px;opacity:${(0.25 + 0.75 * w).toFixed(3)}`;
        return svg("path", { class: "aw-arc aw-link", d: `M ${xf} 0 C ${xf} ${LINK_H / 2} ${xj} ${LINK_H / 2} ${xj} ${LINK_H}`, style });
      }),
    );
    return true;
  }

  /** @param {number} focus  @param {number[]} row */
  function drawArcs(focus, row) {
    // Positions in the strip's scrolled content, so arcs scroll with a long strip.
    const strip = node.getBoundingClientRect();
    if (!strip.width) {
      fill(arcs);
      return false;
    } // not laid out (yet): the caller retries
    arcs.setAttribute("width", String(list.scrollWidth));
    /** @param {Element} b */
    const center = (b) => {
      const r = b.getBoundingClientRect();
      return r.left - strip.left + node.scrollLeft + r.width / 2;
    };
    const xf = center(buttons[focus]);
    /** @type {SVGElement[]} */
    const paths = [];
    let shown = row.map((_, j) => j).filter((j) => row[j] >= 0.005);
    if (shown.length > MAX_ARCS) shown = shown.sort((a, b) => row[b] - row[a]).slice(0, MAX_ARCS);
    arcNote.hidden = row.length <= MAX_ARCS;
    arcNote.textContent = `arcs: the ${shown.length} strongest of ${row.length} weights`;
    shown.forEach((j) => {
      const w = row[j];
      const style = `stroke-width:${(1 + 9 * w).toFixed(2)}px;opacity:${(0.25 + 0.75 * w).toFixed(3)}`;
      if (j === focus) {
        // a loop above the token: reading itself
        const r = 7 + 8 * w;
        paths.push(svg("path", { class: "aw-arc aw-arc-self", d: `M ${xf - r} ${ARC_H} A ${r} ${r} 0 1 1 ${xf + r} ${ARC_H}`, style }));
        return;
      }
      const xj = center(buttons[j]);
      const h = Math.min(ARC_H - 6, 14 + Math.abs(xj - xf) * 0.35);
      paths.push(svg("path", { class: "aw-arc", d: `M ${xf} ${ARC_H} Q ${(xf + xj) / 2} ${ARC_H - 2 * h} ${xj} ${ARC_H}`, style }));
    });
    fill(arcs, paths);
    return true;
  }

  return {
    node,
    list, // its size follows the token buttons' layout
    /** closed(j): the focused row may not read token j (its chip's tooltip says so);
     * span: [first, count] of a detail window's columns, which the strip keeps in view, or null;
     * rowKey: an object that is the same exactly while the row's numbers are (the store's row).
     * Returns false when the arcs could not be laid out (the strip is hidden for a moment);
     * image: a vision model's picture (views/image.js), whose patches are drawn as tiles, or null. */
    update({ tokens, keys = null, focus, row, rowKey = null, closed = () => false, pal, span = null, image = null, evicted = null }) {
      // a long strip is condensed: the tint alone says how much each token is read
      const condensed = Math.max(tokens.length, keys ? keys.length : 0) > CONDENSE;
      const rebuilt = !last || last.tokens !== tokens || last.image !== image || (image && last.condensed !== condensed);
      if (rebuilt) rebuild(tokens, image, condensed);
      if (!last || last.keys !== keys) {
        rebuildKeys(keys);
        arcsFor = null;
      }
      const moved = rebuilt || /** @type {Drawn} */ (last).focus !== focus; // (new buttons, tiles among them: every token may have moved)
      const spanMoved = span && String(span) !== String(last?.span);
      last = { tokens, keys, focus, span, image, condensed };
      node.classList.toggle("aw-condensed", condensed);
      const shares = row && !condensed ? percentages(row) : null; // they add up to 100, as the text says
      // the tokens read carry the weights: the row's own in self-attention, the text below in cross-attention
      const read = keys ? keyItems : buttons,
        names = keys || tokens;
      if (keys)
        buttons.forEach((b, i) => {
          const pressed = String(i === focus);
          if (b.getAttribute("aria-pressed") !== pressed) {
            b.setAttribute("aria-pressed", pressed);
            b.tabIndex = i === focus ? 0 : -1;
          }
        });
      read.forEach((b, i) => {
        const pressed = String(i === focus);
        if (!keys && b.getAttribute("aria-pressed") !== pressed) {
          b.setAttribute("aria-pressed", pressed);
          b.tabIndex = i === focus ? 0 : -1;
        }
        // a key the compressed cache evicts: struck out (the row cannot read it from the cache)
        const gone = !!evicted?.keys[i];
        if (b.classList.contains("aw-evicted") !== gone) b.classList.toggle("aw-evicted", gone);
        // condensed: no per-token tint either, so a redraw changes no layout; the arcs carry it
        if (condensed) {
          if (gone || b.title.endsWith(EVICTED_TAIL)) b.title = gone ? `${names[i]} · ${evicted?.said}${EVICTED_TAIL}` : "";
          return;
        }
        const w = row ? row[i] : null,
          shut = w != null && closed(i); // a token the row may not read: it gets nothing (0%, as the article says), and why
        // the tint says how much the token is read; its text takes the ink that reads on it
        const tint = chipTint(pal, w);
        b.style.background = tint;
        b.style.color = inkOn(tint);
        /** @type {ChildNode} */ (b.lastChild).textContent = w == null ? "" : `${/** @type {number[]} */ (shares)[i]}%`; // (a row: its shares)
        b.title = w == null ? names[i] : shut ? `${tokens[focus]} cannot read ${names[i]}` : `${tokens[focus]} → ${names[i]}: ${w.toFixed(3)}`;
        if (gone) b.title += ` · ${evicted?.said}${EVICTED_TAIL}`;
      });
      if (spanMoved && !moved && node.scrollWidth > node.clientWidth) {
        // the detail window moved: show its columns' tokens
        const [a, b] = [buttons[span[0]], buttons[Math.min(buttons.length, span[0] + span[1]) - 1]];
        if (a && b) node.scrollLeft = (a.offsetLeft + b.offsetLeft + b.offsetWidth) / 2 - node.clientWidth / 2;
      } else if (moved && buttons[focus] && node.scrollWidth > node.clientWidth) {
        // keep the focused token (and so its arcs) in view on a long, scrolling strip
        const b = buttons[focus];
        node.scrollLeft = b.offsetLeft - node.clientWidth / 2 + b.offsetWidth / 2;
      }
      arcs.style.display = row && !keys ? "" : "none";
      links.style.visibility = row ? "" : "hidden";
      if (!row) {
        fill(arcs);
        fill(links);
        arcNote.hidden = true;
        arcsFor = null;
        return true;
      }
      // the same row read by the same token (a stage change): the arcs drawn are still right
      if (arcsFor && arcsFor.rowKey === rowKey && arcsFor.focus === focus && arcsFor.tokens === tokens && rowKey) return true;
      const drawn = keys ? drawLinks(focus, row) : drawArcs(focus, row); // false when the strip had no layout to draw on
      arcsFor = drawn ? { rowKey, focus, tokens } : null;
      return drawn;
    },
    destroy() {
      list.removeEventListener("keydown", onKey);
      keyList.removeEventListener("click", onKeyClick);
      resized.disconnect();
      node.remove();
      arcNote.remove();
    },
  };
}
