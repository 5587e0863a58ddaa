// The detail view of a long matrix: a window of it, with its labels and numbers, that a drag,
// the arrow keys, a pinch or Ctrl + wheel move and zoom. The window is the page's own, not synced.
import { el } from "./dom.js";
import { createGrid } from "./grid.js";

/** @typedef {import("./grid.js").GridSpec} GridSpec */
/**
 * The detail views' window on a rows × cols matrix, shared by both and moved in place. size, r0
 * and c0 are set by follow() before it is drawn or moved; exact: the zoom as turned, not rounded;
 * seen: the focus and cell it last followed.
 * @typedef {{ rows: number, cols: number, size: number, r0: number, c0: number, exact?: number | null, seen?: string | null }} DetailWindow
 */
/**
 * @typedef {object} DetailOptions
 * @property {DetailWindow} win
 * @property {(i: number, j: number | null) => void} onPickCell  a cell of the matrix (j null: its row)
 * @property {(i: number, j: number) => string} describe
 * @property {() => void} onMove  the window moved or zoomed
 */
/** @typedef {{ node: HTMLElement, update(spec: GridSpec): void, destroy(): void }} Detail */

/**
 * A detail view beside a long matrix: a window of it with its labels and numbers, moved by a
 * drag or the arrow keys, zoomed by Ctrl (or ⌘) and the wheel or a pinch, or + and -; a click
 * picks that cell. The window follows the focused row and the picked cell; it is the page's
 * own, not synced. A plain wheel still scrolls the notebook.
 * @param {HTMLElement} panel
 * @param {DetailOptions} options
 * @returns {Detail}
 */
export function createDetail(panel, { win, onPickCell, describe, onMove }) {
  const grid = createGrid(panel, {
    title: "detail",
    onPick: (i, j) => !dragged && onPickCell(win.r0 + i, j == null ? null : win.c0 + j),
    describe: (i, j) => describe(win.r0 + i, win.c0 + j),
  });
  const note = el("p", { class: "aw-detail-note" });
  grid.node.append(note);
  const canvas = /** @type {HTMLCanvasElement} */ (grid.node.querySelector("canvas")); // (the grid's own)
  canvas.tabIndex = 0;
  canvas.classList.add("aw-detail");
  canvas.setAttribute("data-lm-suppress-shortcuts", ""); // JupyterLab's command-mode keys (D D, A, B) are not for it
  /** @type {{ x: number, y: number, r0: number, c0: number } | null} */
  let drag = null,
    dragged = false;
  const cells = () => [Number(canvas.dataset.cellWidth) || 20, Number(canvas.dataset.cellHeight) || 20];
  const listeners = {
    /** @param {WheelEvent} ev */
    wheel(ev) {
      if (!(ev.ctrlKey || ev.metaKey) || !ev.deltaY) return; // Chrome sends a pinch as Ctrl + wheel
      ev.preventDefault();
      zoom(win, Math.exp(Math.max(-1, Math.min(1, ev.deltaY / 200)) * 0.5)); // by how far it turned
      onMove();
    },
    /** @param {PointerEvent} ev */
    pointerdown(ev) {
      drag = { x: ev.clientX, y: ev.clientY, r0: win.r0, c0: win.c0 };
      dragged = false;
      canvas.setPointerCapture(ev.pointerId); // the drag goes on outside the canvas, and ends wherever it ends
    },
    /** @param {PointerEvent} ev */
    pointermove(ev) {
      if (!drag || !(ev.buttons & 1)) return;
      const [w, h] = cells(),
        dc = Math.round((drag.x - ev.clientX) / w),
        dr = Math.round((drag.y - ev.clientY) / h);
      if (!dc && !dr) return;
      dragged = true;
      move(win, drag.r0 + dr - win.r0, drag.c0 + dc - win.c0);
      onMove();
    },
    pointerup() {
      drag = null;
      setTimeout(() => {
        dragged = false;
      });
    }, // the click that ends a drag picks nothing
    pointercancel() {
      drag = null;
      dragged = false;
    },
    /** @param {KeyboardEvent} ev */
    keydown(ev) {
      if (ev.ctrlKey || ev.metaKey || ev.altKey) return; // the browser's and the notebook's own keys
      const by = ev.shiftKey ? Math.max(1, win.size >> 1) : 1;
      const step = /** @type {Partial<Record<string, [number, number]>>} */ ({
        ArrowUp: [-by, 0],
        ArrowDown: [by, 0],
        ArrowLeft: [0, -by],
        ArrowRight: [0, by],
      })[ev.key];
      if (step) move(win, ...step);
      else if (ev.key === "+" || ev.key === "=") zoom(win, 0.8);
      else if (ev.key === "-") zoom(win, 1.25);
      else return;
      ev.preventDefault();
      onMove();
    },
  };
  // (each listener takes its own event's type: the names are the events')
  for (const [name, f] of Object.entries(listeners)) canvas.addEventListener(name, /** @type {EventListener} */ (f));
  return {
    node: grid.node,
    update(spec) {
      grid.update(spec);
      note.textContent =
        `rows ${win.r0}–${win.r0 + spec.rows - 1}, columns ${win.c0}–${win.c0 + spec.cols - 1} of ${win.rows === win.cols ? win.rows : `${win.rows} × ${win.cols}`}: ` +
        "a drag or the arrow keys move the window; Ctrl + wheel, a pinch, or + and − zoom it";
    },
    destroy() {
      for (const [name, f] of Object.entries(listeners)) canvas.removeEventListener(name, /** @type {EventListener} */ (f));
      grid.destroy();
    },
  };
}

// the window (size × size cells, fewer where the matrix has fewer), kept inside the matrix
/** @param {DetailWindow} win  @returns {[number, number]} */
export const extent = (win) => [Math.min(win.size, win.rows), Math.min(win.size, win.cols)];
/** @param {DetailWindow} win  @param {number} dr  @param {number} dc */
function move(win, dr, dc) {
  const [h, w] = extent(win);
  win.r0 = Math.max(0, Math.min(win.rows - h, win.r0 + dr));
  win.c0 = Math.max(0, Math.min(win.cols - w, win.c0 + dc));
}
/** @param {DetailWindow} win  @param {number} by */
function zoom(win, by) {
  win.exact = Math.max(4, Math.min(64, Math.max(win.rows, win.cols), (win.exact ?? win.size) * by)); // small turns add up
  const size = Math.round(win.exact),
    d = win.size - size;
  // about the middle, or held at an edge of the matrix it touches
  /** @param {number} start  @param {number} n */
  const shift = (start, n) => (start === 0 ? 0 : start + win.size >= n ? d : d >> 1);
  const [dr, dc] = [shift(win.r0, win.rows), shift(win.c0, win.cols)];
  win.size = size;
  move(win, dr, dc); // clamped with the new size
}
/** Keeps the focused row, and the picked cell, inside the window when either changes.
 * @param {DetailWindow} win  @param {number} rows  @param {number} cols  @param {number} focus
 * @param {[number, number] | null} cell */
export function follow(win, rows, cols, focus, cell) {
  if (win.rows !== rows || win.cols !== cols)
    Object.assign(win, { rows, cols, size: Math.min(16, Math.max(rows, cols)), exact: null, r0: 0, c0: null, seen: null });
  const seen = `${focus}|${cell}`;
  if (seen === win.seen) return;
  win.seen = seen;
  /** @param {number} start  @param {number} at */
  const into = (start, at) => (at >= start && at < start + win.size ? start : at - (win.size >> 1));
  const first = win.c0 == null;
  win.r0 = into(win.r0, cell ? cell[0] : focus);
  // columns move only for a cell (or to start on the diagonal): a new focused row keeps them
  if (cell || first) win.c0 = into(first ? 0 : win.c0, cell ? cell[1] : win.r0 + (win.size >> 1));
  move(win, 0, 0);
}
