// A labelled heatmap drawn on one canvas: fast for thousands of cells, crisp on high-DPI screens.
// Rows and columns carry token labels; extra text columns (row sum, effective tokens) sit on the right.
import { rgb } from "d3-color";
import { lookupTable, pack, paint } from "../picture.js";
import { el, inkOn, palette, short } from "./dom.js";

const LABEL_FONT = 12,
  CELL_FONT = 11;
// generation: the rows (or columns) kept from earlier steps and the new one are named, not faded:
// a cached number keeps its colour
const TAG_CACHED = "cached",
  TAG_NEW = "new";

/** @typedef {import("./dom.js").Palette} Palette */
/** @typedef {import("../picture.js").Painted} Painted */
/** A colour for a value: a function, or a d3 scale (whose domain the cell image's colours span). */
/** @typedef {((v: number) => string) & { domain?: () => number[] }} Colour */
/** @typedef {{ axis: "rows" | "cols", fresh: number }} Cached */
/**
 * What a grid draws (see createGrid).
 * @typedef {object} GridSpec
 * @property {number} rows
 * @property {number} cols
 * @property {(i: number, j: number) => number} value
 * @property {Colour | null} [color]
 * @property {((v: number) => string) | null} [text]
 * @property {string[]} rowLabels
 * @property {string[]} colLabels
 * @property {number | null} [focusRow]
 * @property {Palette} [pal]
 * @property {((i: number, j: number) => boolean) | null} [masked]
 * @property {{ title: string, value: (i: number) => string }[] | null} [extra]
 * @property {number} [maxWidth]
 * @property {string} [ariaLabel]
 * @property {Float32Array | Float64Array | null} [data]
 * @property {boolean} [causal]
 * @property {unknown} [key]
 * @property {boolean} [readsAhead]
 * @property {unknown} [maskData]
 * @property {{ r0: number, c0: number, rows: number, cols: number } | null} [frame]
 * @property {string[] | null} [measure]
 * @property {Painted | null} [picture]
 * @property {boolean} [pending]
 * @property {number} [maxCellHeight]
 * @property {Cached | null} [cached]
 * @property {number} [written]
 * @property {readonly [number, number] | number[] | null} [cell]
 * @property {Uint8Array | null} [evicted]  the columns a compressed KV cache evicts (1 each): dimmed, their labels muted
 */
/** Where the cells, labels and extra columns lie (layout()). */
/**
 * @typedef {{ left: number, top: number, cell: number, cellH: number, rotate: boolean, extraW: number[], rowFont: number,
 *   colFont: number, showRows: boolean, showCols: boolean, tagW: number, width: number, height: number }} Box
 */
/** A stand-in context that records what is drawn (snapshot.js), asking for cells one by one up to vectorCells. */
/** @typedef {CanvasRenderingContext2D & { vectorCells: number }} Recorder */
/** The grid's canvas: drawOn draws the same on a recorder. */
/** @typedef {HTMLCanvasElement & { drawOn?: (record: Recorder) => void }} GridCanvas */
/** @typedef {{ node: HTMLElement, update(spec: GridSpec): void, destroy(): void }} Grid */

// cell borders, when cells are large enough to need them
/** @param {CanvasRenderingContext2D} ctx  @param {GridSpec} s  @param {Box} b  @param {Palette} pal */
function borders(ctx, s, b, pal) {
  if (b.cell >= 12) {
    ctx.strokeStyle = pal.bg;
    ctx.lineWidth = 1;
    ctx.beginPath();
    for (let i = 0; i <= s.rows; i++) {
      ctx.moveTo(b.left, b.top + i * b.cellH);
      ctx.lineTo(b.left + s.cols * b.cell, b.top + i * b.cellH);
    }
    for (let j = 0; j <= s.cols; j++) {
      ctx.moveTo(b.left + j * b.cell, b.top);
      ctx.lineTo(b.left + j * b.cell, b.top + s.rows * b.cellH);
    }
    ctx.stroke();
  }
}

// closed cells' hatch over the cell image, as the cells drawn one by one have it: one path
/** @param {CanvasRenderingContext2D} ctx  @param {GridSpec} s  @param {Box} b  @param {Palette} pal */
function hatch(ctx, s, b, pal) {
  // (drawn only for a grid with closed cells)
  const closed = /** @type {(i: number, j: number) => boolean} */ (s.causal ? (/** @type {number} */ i, /** @type {number} */ j) => j > i : s.masked);
  ctx.strokeStyle = pal.muted;
  ctx.lineWidth = 1;
  ctx.beginPath();
  for (let i = 0; i < s.rows; i++)
    for (let j = 0; j < s.cols; j++) {
      if (!closed(i, j)) continue;
      const x = b.left + j * b.cell,
        y = b.top + i * b.cellH;
      ctx.moveTo(x + 2, y + b.cellH - 2);
      ctx.lineTo(x + b.cell - 2, y + 2);
    }
  ctx.stroke();
}

// the rows' and the columns' labels: smaller type for small cells, so that no two overlap (layout says which fit)
/** @param {CanvasRenderingContext2D} ctx  @param {GridSpec} s  @param {Box} b  @param {Palette} pal */
function labels(ctx, s, b, pal) {
  ctx.textBaseline = "middle";
  const { rowFont, colFont } = b;
  if (b.showRows) {
    ctx.font = `${rowFont}px ${pal.font}`;
    ctx.textAlign = "right";
    s.rowLabels.forEach((t, i) => {
      ctx.fillStyle = i === s.focusRow ? pal.accent : pal.fg;
      ctx.fillText(short(t, 18), b.left - 6, b.top + i * b.cellH + b.cellH / 2, b.left - 8);
    });
  }
  if (b.showCols) {
    ctx.font = `${colFont}px ${pal.font}`;
    s.colLabels.forEach((t, j) => {
      const cx = b.left + j * b.cell + b.cell / 2;
      const gone = !!s.evicted?.[j]; // a key the compressed KV cache evicts: muted and struck out
      ctx.fillStyle = gone ? pal.muted : pal.fg;
      const label = short(t, 18);
      /** @param {number} x0  @param {number} y  @param {number} most */
      const strike = (x0, y, most) => {
        if (!gone) return;
        const w = Math.min(most, ctx.measureText(label).width);
        ctx.strokeStyle = pal.muted;
        ctx.lineWidth = 1.2;
        ctx.beginPath();
        ctx.moveTo(x0 - (ctx.textAlign === "center" ? w / 2 : 0), y);
        ctx.lineTo(x0 + (ctx.textAlign === "center" ? w / 2 : w), y);
        ctx.stroke();
      };
      if (b.rotate) {
        ctx.save();
        ctx.translate(cx, b.top - 6);
        ctx.rotate(-Math.PI / 4);
        ctx.textAlign = "left";
        ctx.fillText(label, 0, 0, 110);
        strike(0, 0, 110);
        ctx.restore();
      } else {
        ctx.textAlign = "center";
        ctx.fillText(label, cx, b.top - LABEL_FONT / 2 - 4, b.cell - 2);
        strike(cx, b.top - LABEL_FONT / 2 - 4, b.cell - 2);
      }
    });
  }
}

// the text columns right of the cells (a row's sum, its effective tokens)
/** @param {CanvasRenderingContext2D} ctx  @param {GridSpec} s  @param {Box} b  @param {Palette} pal */
function extraColumns(ctx, s, b, pal) {
  let x0 = b.left + s.cols * b.cell;
  (s.extra || []).slice(0, b.extraW.length).forEach((col, c) => {
    const w = b.extraW[c],
      cx = x0 + w / 2 + 4;
    ctx.textAlign = "center";
    ctx.fillStyle = pal.muted;
    ctx.font = `${LABEL_FONT}px ${pal.font}`;
    ctx.fillText(col.title, cx, b.top - LABEL_FONT / 2 - 4);
    ctx.font = `${b.rowFont}px ${pal.font}`;
    if (b.cellH >= 12) {
      for (let i = 0; i < s.rows; i++) {
        ctx.fillStyle = i === s.focusRow ? pal.accent : pal.fg;
        ctx.fillText(col.value(i), cx, b.top + i * b.cellH + b.cellH / 2);
      }
    }
    x0 += w;
  });
}

// the columns a compressed KV cache evicts: dimmed toward the background (their cells' numbers, drawn over it in the
// muted ink, stay legible), and where there are no numbers a dashed line down each
/** @param {Palette} pal */
const veilOf = (pal) => {
  const veil = rgb(pal.bg);
  veil.opacity = 0.72;
  return veil.formatRgb();
};
/** @param {CanvasRenderingContext2D} ctx  @param {GridSpec} s  @param {Box} b  @param {Palette} pal
 * @param {boolean} veiled  its cells dimmed already (drawn one by one)  @param {boolean} numbers  the cells show their numbers */
function evictions(ctx, s, b, pal, veiled, numbers) {
  const gone = /** @type {Uint8Array} */ (s.evicted); // (drawn only where there is one)
  const h = s.rows * b.cellH;
  ctx.fillStyle = veilOf(pal);
  if (!veiled) for (let j = 0; j < s.cols; j++) if (gone[j]) ctx.fillRect(b.left + j * b.cell, b.top, b.cell, h);
  if (b.cell < 8 || numbers) return;
  ctx.strokeStyle = pal.muted;
  ctx.lineWidth = 1;
  ctx.setLineDash([3, 3]);
  ctx.beginPath();
  for (let j = 0; j < s.cols; j++)
    if (gone[j]) {
      ctx.moveTo(b.left + (j + 0.5) * b.cell, b.top);
      ctx.lineTo(b.left + (j + 0.5) * b.cell, b.top + h);
    }
  ctx.stroke();
  ctx.setLineDash([]);
}

// the focused row's outline, the window a detail view shows (on the overview) and the cell whose arithmetic is shown
/** @param {CanvasRenderingContext2D} ctx  @param {GridSpec} s  @param {Box} b  @param {Palette} pal */
function marks(ctx, s, b, pal) {
  if (s.focusRow != null && s.focusRow < s.rows) {
    ctx.strokeStyle = pal.accent;
    ctx.lineWidth = 2.5;
    ctx.strokeRect(b.left - 1, b.top + s.focusRow * b.cellH - 1, s.cols * b.cell + 2, b.cellH + 2);
  }
  // the window a detail view shows, on the overview
  if (s.frame) {
    const f = s.frame;
    ctx.strokeStyle = pal.fg;
    ctx.lineWidth = 1.5;
    ctx.setLineDash([4, 3]);
    ctx.strokeRect(b.left + f.c0 * b.cell, b.top + f.r0 * b.cellH, f.cols * b.cell, f.rows * b.cellH);
    ctx.setLineDash([]);
  }
  // the cell whose arithmetic is shown
  if (s.cell && s.cell[0] < s.rows && s.cell[1] < s.cols) {
    ctx.strokeStyle = pal.fg;
    ctx.lineWidth = 2;
    ctx.strokeRect(b.left + s.cell[1] * b.cell + 1, b.top + s.cell[0] * b.cellH + 1, b.cell - 2, b.cellH - 2);
  }
}
/**
 * createGrid(parent, {title, onPick(i, j | null), describe(i, j) -> string})
 * onPick gets the row and the column clicked (null for a row label).
 * returns {node, update(spec), destroy()}
 * spec: {rows, cols, value(i, j), color(v), text(v), rowLabels, colLabels, focusRow, pal (dom.js palette),
 *        masked(i, j), extra: [{title, value(i) -> string}], maxWidth, ariaLabel,
 *        data (optional: the values, row-major), causal (masked is j > i), key (data identity),
 *        readsAhead, maskData (what closes cells, for the cell image's cache),
 *        frame: {r0, c0, rows, cols} (the detail view's window, outlined on an overview),
 *        measure (labels to make room for, when the shown ones are a window of them),
 *        picture ({pixels, width, height} painted elsewhere, or null while it is painted: the
 *        cell image of a long input), pending (the picture shown is not yet the current one),
 *        maxCellHeight (rows no taller: a tall matrix stays short),
 *        cached: {axis: "rows" | "cols", fresh: index} (generation: the rows or columns before
 *        `fresh` are kept from earlier steps, drawn dimmed and marked "cached"; `fresh` is the one
 *        this step computed, marked "new"). Left out, a causal matrix's rows are marked so while
 *        `written` tokens are written (its number of rows); null: never.}
 */

/**
 * @param {HTMLElement} parent
 * @param {{ title?: string, onPick?: (i: number, j: number | null) => void, describe?: ((i: number, j: number) => string | null) | null }} options
 * @returns {Grid}
 */
export function createGrid(parent, { title, onPick, describe }) {
  const canvas = /** @type {GridCanvas} */ (el("canvas", { class: "aw-grid", role: "img" }));
  const tip = el("div", { class: "aw-tip", hidden: true });
  const node = el("figure", { class: "aw-figure" }, title ? el("figcaption", {}, title) : null, el("div", { class: "aw-canvas-wrap" }, canvas, tip));
  parent.append(node);
  /** @type {GridSpec | null} */
  let spec = null,
    /** @type {Box | null} */
    box = null,
    /** @type {Painted | null} */
    painted = null,
    /** @type {{ data: unknown, key: string, mask: unknown } | null} */
    paintedFor = null,
    /** @type {Painted | null} */
    shown = null; // the cell image, what it shows, what is on `pixels`
  /** @type {WeakMap<string[], number>} */
  const measured = new WeakMap(); // label list -> its widest label, in pixels
  const pixels = document.createElement("canvas"); // one pixel per cell, for large matrices

  /** @param {CanvasRenderingContext2D} ctx  @param {GridSpec} s  @param {Palette} pal  @param {Cached | null} gen  @returns {Box} */
  function layout(ctx, s, pal, gen) {
    ctx.font = `${LABEL_FONT}px ${pal.font}`;
    // generation's tags: a column on the right for rows, a line below for columns
    const tagW = gen?.axis === "rows" ? ctx.measureText(TAG_CACHED).width + 18 : 0,
      tagH = gen?.axis === "cols" ? LABEL_FONT + 10 : 0;
    /** @param {string[]} labels */
    const widest = (labels) => {
      // measured once per list of labels: long inputs have thousands
      if (!measured.has(labels))
        measured.set(
          labels,
          labels.reduce((w, t) => Math.max(w, ctx.measureText(short(t, 18)).width), 0),
        );
      return /** @type {number} */ (measured.get(labels));
    };
    /** @param {number[]} a */
    const sum = (a) => a.reduce((x, y) => x + y, 0);
    // whole pixels while cells are big enough to read; fractions when thousands must fit the width
    /** @param {number} left  @param {number[]} extraW */
    const fit = (left, extraW) => {
      const f = ((s.maxWidth || 640) - left - sum(extraW) - tagW) / s.cols,
        cell = f >= 6 ? Math.min(54, Math.floor(f)) : f;
      return [cell, Math.min(30, s.maxCellHeight ?? 30, cell)];
    };
    // Labels and the extra columns take room only where cells are big enough for them to be
    // drawn: a long input's overview is all matrix, and its thousands of labels are not measured.
    let left = 4,
      /** @type {number[]} */
      extraW = [],
      right = 0,
      [cell, cellH] = fit(left, extraW);
    if (cellH >= 10) {
      left = Math.min(120, widest(s.measure || s.rowLabels) + 10); // measure: labels to make room for, if not these
      const withExtra = (s.extra || []).map((e) => Math.max(44, ctx.measureText(e.title).width + 12));
      [cell, cellH] = fit(left, withExtra);
      if (withExtra.length && cellH >= 12)
        extraW = withExtra; // their numbers need rows of 12
      else [cell, cellH] = fit(left, extraW);
    }
    const colW = cell >= 10 ? widest(s.measure || s.colLabels) : 0;
    const rotate = colW + 6 > cell;
    if (rotate && colW) {
      // a slanted label rises to the right of its column: room for the last one's, beyond any extra columns
      right = Math.max(0, Math.min(110, colW) * 0.71 - cell / 2 - sum(extraW));
      [cell, cellH] = fit(left + right, extraW);
      if (extraW.length && cellH < 12) {
        // squeezed below their rows of 12: no extra columns, full room on the right
        extraW = [];
        right = Math.max(0, Math.min(110, colW) * 0.71 - cell / 2);
        [cell, cellH] = fit(left + right, extraW);
      }
    }
    // what the final cells hold: small type for small cells, none below 9 px, so no two labels
    // overlap (a slanted label is a cell's width × sin 45° from the next)
    const rowFont = Math.min(LABEL_FONT, Math.floor(cellH) - 1),
      showRows = left > 4 && rowFont >= 9;
    const colFont = rotate ? Math.min(LABEL_FONT, Math.floor(cell * 0.7)) : LABEL_FONT;
    const showCols = colW > 0 && cell >= 10 && colFont >= 9 && s.colLabels.length > 0;
    const top = showCols ? (rotate ? Math.min(90, colW * 0.72 + 14) : LABEL_FONT + 10) : extraW.length ? LABEL_FONT + 10 : 4;
    return {
      left,
      top,
      cell,
      cellH,
      rotate,
      extraW,
      rowFont,
      colFont,
      showRows,
      showCols,
      tagW,
      // (room for a column's "new" tag wider than its column)
      width: left + cell * s.cols + sum(extraW) + Math.max(right - tagW, tagH ? ctx.measureText(TAG_NEW).width / 2 + 2 - cell / 2 : 0, 0) + tagW + 4,
      height: top + cellH * s.rows + tagH + 4,
    };
  }

  // record: a stand-in context that keeps what is drawn (a picture's vector copy, snapshot.js);
  // it may ask for cells one by one up to record.vectorCells, where the screen takes one image
  /** @param {Recorder | null} [record] */
  function draw(record = null) {
    if (!spec) return;
    const s = spec,
      pal = s.pal || palette(node); // the caller's, read once a draw: each read here could force a style pass
    const ctx = record || /** @type {CanvasRenderingContext2D} */ (canvas.getContext("2d"));
    const gen = generation(s);
    const b = (box = layout(ctx, s, pal, gen));
    if (!record) {
      const dpr = window.devicePixelRatio || 1;
      canvas.width = Math.ceil(b.width * dpr);
      canvas.height = Math.ceil(b.height * dpr);
      canvas.style.width = `${b.width}px`;
      canvas.style.height = `${b.height}px`;
      ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
      ctx.clearRect(0, 0, b.width, b.height);
    }
    const showNumbers = s.text && b.cell >= 34 && b.cellH >= 18;

    // cells: one pixel per cell, scaled up, when cells are too small for anything else, and on
    // screen whenever they hold no number: one image, not a fill (and a colour string) per cell
    const small = b.cell < 6 || b.cellH < 6;
    const asImage =
      (s.picture !== undefined || !!s.color?.domain) && (small || (!record && !showNumbers)) && !(record && s.rows * s.cols <= record.vectorCells);
    if (asImage) {
      const image = s.picture !== undefined ? s.picture : cellImage(s, pal);
      if (image && image !== shown) {
        pixels.width = image.width;
        pixels.height = image.height;
        /** @type {CanvasRenderingContext2D} */ (pixels.getContext("2d")).putImageData(
          new ImageData(new Uint8ClampedArray(image.pixels.buffer), image.width, image.height),
          0,
          0,
        );
        shown = image;
      }
      ctx.imageSmoothingEnabled = false;
      if (image) ctx.drawImage(pixels, b.left, b.top, s.cols * b.cell, s.rows * b.cellH);
      if (!small && b.cell >= 8 && s.masked) hatch(ctx, s, b, pal);
    } else
      for (let i = 0; i < s.rows; i++) {
        for (let j = 0; j < s.cols; j++) {
          const x = b.left + j * b.cell,
            y = b.top + i * b.cellH;
          if (s.masked?.(i, j)) {
            ctx.fillStyle = pal.masked;
            ctx.fillRect(x, y, b.cell, b.cellH);
            if (b.cell >= 8) {
              // hatch: "cannot read", not a pale colour
              ctx.strokeStyle = pal.muted;
              ctx.lineWidth = 1;
              ctx.beginPath();
              ctx.moveTo(x + 2, y + b.cellH - 2);
              ctx.lineTo(x + b.cell - 2, y + 2);
              ctx.stroke();
            }
            continue;
          }
          const v = s.value(i, j),
            gone = !!s.evicted?.[j];
          ctx.fillStyle = s.color ? s.color(v) : pal.bg;
          ctx.fillRect(x, y, b.cell, b.cellH);
          const ink = s.color ? inkOn(/** @type {string} */ (ctx.fillStyle)) : pal.fg;
          if (gone) {
            ctx.fillStyle = veilOf(pal);
            ctx.fillRect(x, y, b.cell, b.cellH);
          }
          if (showNumbers) {
            ctx.font = `${CELL_FONT}px ${pal.font}`;
            ctx.fillStyle = gone ? pal.muted : ink;
            ctx.textAlign = "center";
            ctx.textBaseline = "middle";
            ctx.fillText(/** @type {(v: number) => string} */ (s.text)(v), x + b.cell / 2, y + b.cellH / 2 + 0.5, b.cell - 3); // (a long number narrowed to its cell)
          }
        }
      }
    borders(ctx, s, b, pal);
    if (s.evicted) evictions(ctx, s, b, pal, !asImage, !!showNumbers);
    labels(ctx, s, b, pal);
    extraColumns(ctx, s, b, pal);
    marks(ctx, s, b, pal);
    if (gen) tags(ctx, s, b, gen, pal);
    if (record) return;
    canvas.setAttribute("aria-label", s.ariaLabel || title || "matrix");
    canvas.toggleAttribute("data-pending", !!s.pending);
    // where the cells are, in CSS pixels: lets scripts and tests point at a cell
    Object.assign(canvas.dataset, {
      left: b.left,
      top: b.top,
      cellWidth: b.cell,
      cellHeight: b.cellH,
      rowFont: b.showRows ? b.rowFont : 0,
      colFont: b.showCols ? b.colFont : 0,
      slanted: b.rotate,
      extraColumns: b.extraW.length,
    }); // (a dataset writes each as a string)
  }

  // Generation: which rows (or columns) are kept from earlier steps, and which one is new.
  /** @param {GridSpec} s  @returns {Cached | null} */
  function generation(s) {
    if (s.cached !== undefined) return s.cached && s.cached.fresh < (s.cached.axis === "rows" ? s.rows : s.cols) ? s.cached : null;
    const written = s.written || 0;
    return written > 1 && s.readsAhead && s.rows === written ? { axis: /** @type {const} */ ("rows"), fresh: written - 1 } : null;
  }
  // "cached" beside (or under) the kept ones with a bracket, "new" beside the new one, which is outlined
  /** @param {CanvasRenderingContext2D} ctx  @param {GridSpec} s  @param {Box} b  @param {Cached} gen  @param {Palette} pal */
  function tags(ctx, s, b, gen, pal) {
    const rows = gen.axis === "rows",
      f = gen.fresh;
    ctx.font = `${LABEL_FONT}px ${pal.font}`;
    ctx.textBaseline = "middle";
    ctx.lineWidth = 1.5;
    ctx.strokeStyle = pal.accent;
    ctx.setLineDash([4, 3]);
    if (rows) ctx.strokeRect(b.left - 1, b.top + f * b.cellH - 1, s.cols * b.cell + 2, b.cellH + 2);
    else ctx.strokeRect(b.left + f * b.cell - 1, b.top - 1, b.cell + 2, s.rows * b.cellH + 2);
    ctx.setLineDash([]);
    if (rows) {
      const x = b.width - 4 - b.tagW + 6; // the tag column, after the extra columns
      ctx.textAlign = "left";
      if (f > 0) {
        ctx.strokeStyle = ctx.fillStyle = pal.muted;
        ctx.beginPath();
        ctx.moveTo(x, b.top + 2);
        ctx.lineTo(x + 4, b.top + 2);
        ctx.moveTo(x + 4, b.top + 2);
        ctx.lineTo(x + 4, b.top + f * b.cellH - 2);
        ctx.lineTo(x, b.top + f * b.cellH - 2);
        ctx.stroke();
        ctx.fillText(TAG_CACHED, x + 8, b.top + (f * b.cellH) / 2, b.tagW - 10);
      }
      ctx.fillStyle = pal.accent;
      ctx.fillText(TAG_NEW, x + 8, b.top + f * b.cellH + b.cellH / 2, b.tagW - 10);
    } else {
      const y = b.top + s.rows * b.cellH + 6;
      if (f > 0) {
        ctx.strokeStyle = ctx.fillStyle = pal.muted;
        ctx.beginPath();
        ctx.moveTo(b.left + 2, y);
        ctx.lineTo(b.left + f * b.cell - 2, y);
        ctx.stroke();
        ctx.textAlign = "center";
        ctx.fillText(TAG_CACHED, b.left + (f * b.cell) / 2, y + LABEL_FONT / 2 + 2, Math.max(f * b.cell - 2, 20));
      }
      ctx.fillStyle = pal.accent;
      ctx.textAlign = "center";
      ctx.fillText(TAG_NEW, b.left + f * b.cell + b.cell / 2, y + LABEL_FONT / 2 + 2, Math.max(b.cell + 8, 20));
    }
  }

  // The cell image is kept while the numbers and colours stay the same: a focus change only
  // redraws labels and outlines over it. Which cells are closed counts too (scores stay the same
  // when causal or the mask changes).
  /** @param {GridSpec} s  @param {Palette} pal  @returns {Painted | null} */
  function cellImage(s, pal) {
    // (asked for only where the colour is a scale with a domain)
    const color = /** @type {Colour & { domain: () => number[] }} */ (s.color);
    const domain = color.domain(),
      lo = domain[0],
      hi = domain[domain.length - 1];
    const key = [...domain, color(lo), color(hi), pal.masked, s.rows, s.cols, !!s.masked, !!s.readsAhead].join("|");
    if (!(s.key && paintedFor && s.key === paintedFor.data && key === paintedFor.key && s.maskData === paintedFor.mask)) {
      /** @type {(i: number, out: Float64Array) => ArrayLike<number>} */
      const row = s.data
        ? (i) => /** @type {Float32Array | Float64Array} */ (s.data).subarray(i * s.cols, (i + 1) * s.cols)
        : (i, out) => {
            for (let j = 0; j < s.cols; j++) out[j] = s.value(i, j);
            return out;
          };
      painted = paint({
        rows: s.rows,
        cols: s.cols,
        row,
        lo,
        hi,
        lut: lookupTable(color, lo, hi, rgb),
        closedPixel: pack(rgb(pal.masked)),
        causal: !!s.causal,
        closed: s.causal ? null : s.masked, // s.causal: causal alone, a test with no call per cell
      });
      paintedFor = { data: s.key, key, mask: s.maskData };
    }
    return painted;
  }

  /** @param {{ clientX: number, clientY: number }} ev */
  function cellAt(ev) {
    if (!box || !spec) return null;
    const r = canvas.getBoundingClientRect();
    const x = ev.clientX - r.left,
      y = ev.clientY - r.top;
    const i = Math.floor((y - box.top) / box.cellH),
      j = Math.floor((x - box.left) / box.cell);
    if (i < 0 || i >= spec.rows || y < box.top) return null;
    return { i, j: j >= 0 && j < spec.cols && x >= box.left ? j : null, x, y };
  }

  /** @type {{ clientX: number, clientY: number } | null} */
  let pointer = null; // where the pointer last was over the canvas: a redraw under it retells its cell
  /** @param {{ clientX: number, clientY: number }} ev */
  function onMove(ev) {
    pointer = { clientX: ev.clientX, clientY: ev.clientY };
    const c = cellAt(ev);
    if (!c || c.j == null || !describe) {
      tip.hidden = true;
      return;
    }
    tip.textContent = describe(c.i, c.j);
    tip.hidden = false;
    tip.style.left = `${c.x + 14}px`;
    tip.style.top = `${c.y + 12}px`;
  }
  const onLeave = () => {
    tip.hidden = true;
    pointer = null;
  };
  /** @param {MouseEvent} ev */
  function onClick(ev) {
    const c = cellAt(ev);
    if (c && onPick) onPick(c.i, c.j);
  }
  canvas.addEventListener("mousemove", onMove);
  canvas.addEventListener("mouseleave", onLeave);
  canvas.addEventListener("click", onClick);
  canvas.drawOn = (record) => draw(record); // for pictures: the same drawing, as shapes and text

  return {
    node,
    update(next) {
      spec = next;
      draw();
      if (pointer && !tip.hidden) onMove(pointer); // the window moved, or the numbers changed, under the pointer
    },
    destroy() {
      canvas.removeEventListener("mousemove", onMove);
      canvas.removeEventListener("mouseleave", onLeave);
      canvas.removeEventListener("click", onClick);
      node.remove();
    },
  };
}
