// A vision model's image: drawn as the model saw it, with a row over its patch grid (the focused
// token's weights, or the row of the measure shown) as a tint on each patch, the focused patch
// outlined. A click or the arrow keys focus a patch. The same pixels make the token strip's tiles.
import { rgb } from "d3-color";
import { format } from "d3-format";
import { el, fill, legend } from "./dom.js";

const SIDE = 320; // the image's longer side on the page, in CSS pixels
const TOP_ALPHA = 0.8; // the tint of the row's largest value: the image still shows through
const TILE = { full: 30, condensed: 18 }; // a tile's height in the token strip
const TINT = "#08519c"; // the tint of a row of weights (deep blue), the same in both themes

/** @typedef {import("./dom.js").Palette} Palette */
/**
 * A vision model's image as the widget holds it (the `image` trait): a PNG data URL, its patch grid,
 * the index of its first patch token, a patch's side (or [height, width]) and [height, width] in pixels.
 * @typedef {{ src: string, rows: number, cols: number, first: number, patch: number | [number, number], size: [number, number] }} ImageSpec
 */
/** The image once decoded: its pixels on a canvas, and a patch's [height, width].
 * @typedef {Omit<ImageSpec, "patch"> & { source: HTMLCanvasElement, patch: [number, number] }} Picture */
/** @typedef {((image: ImageSpec | null) => Picture | null) & { settled: () => boolean, failed: () => string }} PictureReader */
/** @typedef {import("./measure.js").FocusedRow} FocusedRow */
/**
 * @typedef {object} ImageView
 * @property {Picture | null} image  null until its pixels are read, or for no image
 * @property {string} failed  why it could not be read
 * @property {string[]} tokens
 * @property {number} focus
 * @property {number[] | null} weights  the focused row, or null while the stage or an exercise keeps it
 * @property {FocusedRow | null} measure  the measure drawn, or null
 * @property {number} layer
 * @property {number} head
 * @property {string | null} secret  what an exercise hides
 * @property {Palette} pal
 * @property {number} maxWidth
 */
/**
 * For scripts and tests: the map drawn.
 * @typedef {{ shown: string, focus: number | null, values: number[], specials: [string, number][], lo: number, hi: number, outlined: number | null }} ImageNumbers
 */
/** @typedef {{ node: HTMLElement, update(view: ImageView): void, numbers(): ImageNumbers, destroy(): void }} ImageMap */
/** The row drawn over the image: the weights, or the measure's. @typedef {{ name: string, row: number[], label?: string, title?: string, signed?: boolean, reads?: string, state?: string }} Shown */
/**
 * What is drawn: the picture, the map's values (one a patch) and its colour scale.
 * @typedef {{ image: Picture, tokens: string[], focus: number, shown: string, values: Float64Array | null, lo: number, hi: number,
 *   specials: [string, number][], tint: (v: number) => string, pal: Palette }} Drawn
 */

/** createPicture(onLoad) -> picture(image): the widget's `image` with `source` (a canvas of its
 * pixels) and `patch` as [height, width] once its PNG is decoded; null before, or for no image.
 * The same object while the image is, so views can tell when to draw their tiles again.
 * @param {() => void} onLoad
 * @returns {PictureReader} */
export function createPicture(onLoad) {
  /** @type {ImageSpec | null} */
  let spec = null;
  /** @type {Picture | null} */
  let out = null,
    failed = ""; // why the image could not be read
  /** @param {ImageSpec | null} image */
  const picture = (image) => {
    if (!image?.src) return null;
    if (image !== spec) {
      spec = image;
      [out, failed] = [null, ""];
      const img = new Image();
      img.src = image.src;
      img
        .decode()
        .then(() => {
          if (spec !== image) return;
          const [h, w] = image.size;
          if (img.naturalHeight !== h || img.naturalWidth !== w) {
            // its patches would be cut from the wrong pixels: the weights of one drawn over another
            failed = `the image is ${img.naturalHeight} × ${img.naturalWidth} pixels, but its ${image.rows} × ${image.cols} patches need ${h} × ${w}: it is not drawn`;
            return onLoad();
          }
          const source = Object.assign(document.createElement("canvas"), { width: img.naturalWidth, height: img.naturalHeight });
          /** @type {CanvasRenderingContext2D} */ (source.getContext("2d")).drawImage(img, 0, 0);
          const patch = /** @type {[number, number]} */ (Array.isArray(image.patch) ? image.patch : [image.patch, image.patch]);
          out = { ...image, source, patch };
          onLoad();
        })
        .catch((err) => {
          if (spec !== image) return; // (another image came meanwhile)
          failed = `the image could not be read (${err.message})`;
          onLoad();
        });
    }
    return out;
  };
  /** Drawn, or known not to draw: pictures wait for it. */
  picture.settled = () => !spec || !!out || !!failed;
  picture.failed = () => failed;
  return picture;
}

/** The strip's tile for token i: a canvas of its patch at the image's own pixels (shown smaller in
 * a condensed strip); null for a token that is no patch ([CLS], [DIST], a register).
 * @param {Picture} image  @param {number} i  @param {boolean} condensed */
export function tileOf(image, i, condensed) {
  const at = i - image.first;
  if (!(at >= 0 && at < image.rows * image.cols)) return null;
  const [ph, pw] = image.patch,
    r = Math.floor(at / image.cols),
    c = at % image.cols,
    h = condensed ? TILE.condensed : TILE.full;
  const canvas = el("canvas", { class: "aw-tile", width: pw, height: ph, style: `width:${(h * pw) / ph}px;height:${h}px`, "aria-hidden": "true" });
  /** @type {CanvasRenderingContext2D} */ (canvas.getContext("2d")).drawImage(image.source, c * pw, r * ph, pw, ph, 0, 0, pw, ph);
  return canvas;
}

const fmtEnd = format(".3r"); // three figures: a long row's values are small, and near alike

/** The image smoothed to `width` × `height` pixels, on a canvas of its own.
 * @param {HTMLCanvasElement} source  @param {number} width  @param {number} height */
function shownAt(source, width, height) {
  if (source.width === width && source.height === height) return source;
  const out = Object.assign(document.createElement("canvas"), { width, height });
  const ctx = /** @type {CanvasRenderingContext2D} */ (out.getContext("2d"));
  ctx.imageSmoothingQuality = "high";
  ctx.drawImage(source, 0, 0, width, height);
  return out;
}

/** What the head's own weights over the image say (a measure's words come with it: its `reads`). @param {string} t */
const readsWeights = (t) => `how much ${t} reads each patch`;

/** createImage(parent, {onFocus(i), onChange()}) -> {node, update(view), numbers(), destroy()};
 * onChange: the reader switched what is drawn over the image (the view's own choice).
 * @param {HTMLElement} parent
 * @param {{ onFocus: (i: number) => void, onChange: () => void }} options
 * @returns {ImageMap} */
export function createImage(parent, { onFocus, onChange }) {
  // drawOn: for pictures (snapshot.js), the same drawing on a recorder of shapes
  const canvas = /** @type {HTMLCanvasElement & { drawOn?: (ctx: CanvasRenderingContext2D) => void }} */ (
    el("canvas", { class: "aw-image-map", tabindex: "0", role: "img", "aria-label": "The image" })
  );
  const tip = el("div", { class: "aw-tip", hidden: true });
  const caption = el("p", { class: "aw-image-caption" });
  const specials = el("p", { class: "aw-image-specials" });
  const switcher = el("div", { class: "aw-image-switch", role: "group", "aria-label": "Drawn over the image", hidden: true });
  const legendNode = el("div", { class: "aw-legend" });
  const node = el(
    "figure",
    { class: "aw-figure aw-image", hidden: true },
    el("figcaption", {}, "the image"),
    caption,
    el("div", { class: "aw-canvas-wrap" }, canvas, tip), // (hidden with the rest when the image cannot be read)
    specials,
    legendNode,
    switcher,
  );
  parent.append(node);
  /** @type {Drawn | null} */
  let at = null; // what is drawn: {image, tokens, focus, shown, values, lo, hi, specials}
  let cursor = 0, // the focus last drawn or asked for here: keys can come faster than redraws
    prefer = "", // the map the reader chose with the switch ("weights"), kept while its measure is shown
    offeredKey = "";

  /** The patch under a pointer event, as its index among the patches, or -1.
   * @param {MouseEvent} ev */
  function patchAt(ev) {
    if (!at) return -1;
    const r = canvas.getBoundingClientRect(),
      { rows, cols } = at.image;
    const c = Math.floor(((ev.clientX - r.left) / r.width) * cols),
      row = Math.floor(((ev.clientY - r.top) / r.height) * rows);
    const p = row * cols + c; // (while a text is written token by token, only the patches written so far)
    return c >= 0 && c < cols && row >= 0 && row < rows && at.image.first + p < at.tokens.length ? p : -1;
  }
  // (a patch found under the pointer: `at` is drawn)
  canvas.addEventListener("click", (ev) => {
    const p = patchAt(ev);
    if (p >= 0) onFocus(/** @type {Drawn} */ (at).image.first + p);
  });
  canvas.addEventListener("mousemove", (ev) => {
    const p = patchAt(ev);
    tip.hidden = p < 0;
    if (p < 0) return;
    const { tokens, image, values } = /** @type {Drawn} */ (at);
    const name = tokens[image.first + p];
    tip.textContent = values ? `${name}: ${fmtEnd(values[p])}` : name;
    tip.style.left = `${ev.offsetX + 14}px`;
    tip.style.top = `${ev.offsetY + 10}px`;
  });
  canvas.addEventListener("mouseleave", () => {
    tip.hidden = true;
  });
  canvas.addEventListener("keydown", (ev) => {
    const step = /** @type {Partial<Record<string, [number, number]>>} */ ({ ArrowRight: [0, 1], ArrowLeft: [0, -1], ArrowDown: [1, 0], ArrowUp: [-1, 0] })[
      ev.key
    ];
    if (!at || !step) return;
    ev.preventDefault();
    const { rows, cols, first } = at.image,
      p = cursor - first;
    const r = Math.min(rows - 1, Math.max(0, Math.floor(p / cols) + step[0])),
      c = Math.min(cols - 1, Math.max(0, (p % cols) + step[1]));
    cursor = p >= 0 && p < rows * cols ? first + r * cols + c : first; // from [CLS]: onto the image
    onFocus(cursor);
  });

  /** The picture in CSS pixels, on the page's canvas or on a picture's recorder (snapshot.js).
   * @param {CanvasRenderingContext2D} ctx  @param {number} width  @param {number} height  @param {HTMLCanvasElement} [source] */
  function drawOn(ctx, width, height, source = /** @type {Drawn} */ (at).image.source) {
    const drawn = /** @type {Drawn} */ (at), // (drawn once `at` is set)
      { image, values, focus } = drawn,
      { rows, cols } = image,
      cw = width / cols,
      ch = height / rows;
    ctx.imageSmoothingEnabled = true;
    ctx.drawImage(source, 0, 0, width, height);
    if (values) {
      for (let p = 0; p < values.length; p++) {
        if (!Number.isFinite(values[p])) continue; // (a patch not written yet)
        ctx.fillStyle = drawn.tint(values[p]);
        ctx.fillRect((p % cols) * cw, Math.floor(p / cols) * ch, cw, ch);
      }
    }
    const p = focus - image.first;
    if (p >= 0 && p < rows * cols) {
      // two rings, the theme's background under the accent: seen on any image
      const x = (p % cols) * cw,
        y = Math.floor(p / cols) * ch;
      ctx.lineWidth = 4;
      ctx.strokeStyle = drawn.pal.bg;
      ctx.strokeRect(x + 2, y + 2, cw - 4, ch - 4);
      ctx.lineWidth = 2;
      ctx.strokeStyle = drawn.pal.accent;
      ctx.strokeRect(x + 2, y + 2, cw - 4, ch - 4);
    }
  }

  /** @param {string} name */
  const choose = (name) => {
    prefer = name;
    onChange();
  };

  /** The map to draw: the measure's row while one is shown (unless the reader chose the weights).
   * @param {ImageView} view  @returns {Shown | null} */
  function chosen(view) {
    const { weights, measure } = view;
    const names = /** @type {string[]} */ ([weights && "weights", measure?.name].filter(Boolean));
    const key = names.join();
    if (key !== offeredKey) [offeredKey, prefer] = [key, ""]; // a new measure: its row first
    switcher.hidden = names.length < 2;
    if (!switcher.hidden && switcher.dataset.key !== key) {
      switcher.dataset.key = key;
      fill(
        switcher,
        el("span", {}, "over the image:"),
        names.map((n) =>
          el("button", { type: "button", "data-map": n, onclick: () => choose(n) }, n === "weights" ? "weights" : /** @type {FocusedRow} */ (measure).label),
        ),
      );
    }
    const name = names.includes(prefer) ? prefer : names.at(-1) || "";
    for (const b of switcher.querySelectorAll("button")) b.setAttribute("aria-pressed", String(b.dataset.map === name));
    const m = /** @type {FocusedRow} */ (measure); // (a name other than "weights" is the measure's)
    return name === "weights"
      ? { name, row: /** @type {number[]} */ (weights) }
      : name
        ? { name, row: m.row, label: m.label, title: m.title, signed: m.signed, state: m.state }
        : null;
  }

  return {
    node,
    /** For scripts and tests: the map drawn, {shown ("" for the image bare), focus, values (one a
     * patch, row by row), specials ([token, value] for the tokens beside the patches), lo and hi (the colour scale's ends), outlined
     * (the focused patch's index among the patches, or null)}. */
    numbers() {
      if (!at) return { shown: "", focus: null, values: [], specials: [], lo: 0, hi: 0, outlined: null };
      const p = at.focus - at.image.first,
        outlined = p >= 0 && p < at.image.rows * at.image.cols ? p : null;
      return { shown: at.shown, focus: at.focus, values: at.values ? Array.from(at.values) : [], specials: at.specials, lo: at.lo, hi: at.hi, outlined };
    },
    /** view: {image (a picture's, or null), failed (why it could not be read), tokens, focus,
     * weights (the focused row, or null while the stage or an exercise keeps it), measure ({name,
     * label, title, row, signed, state} of the measure drawn, or null), layer, head, secret (what an
     * exercise hides), pal, maxWidth} */
    update(view) {
      const { image, tokens, focus, pal } = view;
      node.hidden = !image && !view.failed;
      /** @type {HTMLElement} */ (canvas.parentNode).hidden = !image;
      if (!image) {
        for (const part of [specials, legendNode, switcher]) part.hidden = true;
        at = null;
        caption.textContent = view.failed || "";
        return;
      }
      const map = chosen(view),
        { first, rows, cols, patch } = image,
        n = rows * cols;
      const values = map ? Float64Array.from({ length: n }, (_, p) => map.row[first + p] ?? NaN) : null;
      const known = values ? values.filter(Number.isFinite) : new Float64Array(0);
      const shown = /** @type {Shown} */ (map); // (read below only where there are values: a map's)
      // the scale spans the row's patches, smallest to largest (a signed row: ±its largest size), so
      // a row that reads the patches nearly alike still shows which it reads more; the legend says the range
      const top = known.reduce((a, v) => Math.max(a, Math.abs(v)), 0);
      const lo = !known.length ? 0 : shown.signed ? -top : known.reduce((a, v) => Math.min(a, v), Infinity),
        hi = top,
        flat = !(hi - lo > 1e-9 * Math.max(1, hi));
      // one deep blue in both themes: the dark theme's pale weight colour would fade into a light photo
      /** @param {number} v */
      const colourOf = (v) => (shown.signed && v < 0 ? pal.neg : shown.signed ? pal.pos : TINT);
      /** @param {number} v */
      const share = (v) => (flat ? 0 : shown.signed ? Math.abs(v) / hi : (v - lo) / (hi - lo));
      // the tint's opacity: none at the bottom of the scale (the image as it is), TOP_ALPHA at its top
      /** @param {number} v */
      const tint = (v) =>
        rgb(colourOf(v))
          .copy({ opacity: TOP_ALPHA * Math.min(1, Math.max(0, share(v))) })
          .formatRgb();
      const special = map ? tokens.slice(0, first).map((t, i) => /** @type {[string, number]} */ ([t, map.row[i]])) : [];
      cursor = focus;
      at = { image, tokens, focus, shown: map?.name || "", values, lo, hi, specials: special, tint, pal };
      // sized to the page: the longer side SIDE pixels at most
      const [h0, w0] = image.size,
        k = Math.min(SIDE, view.maxWidth - 24) / Math.max(h0, w0),
        width = Math.round(w0 * k),
        height = Math.round(h0 * k),
        dpr = window.devicePixelRatio || 1;
      if (canvas.width !== Math.round(width * dpr) || canvas.height !== Math.round(height * dpr)) {
        Object.assign(canvas, { width: Math.round(width * dpr), height: Math.round(height * dpr) });
        Object.assign(canvas.style, { width: `${width}px`, height: `${height}px` });
      }
      const ctx = /** @type {CanvasRenderingContext2D} */ (canvas.getContext("2d"));
      ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
      drawOn(ctx, width, height);
      // a picture's copy: the image at the size shown (cairo would blur a small one's edges into the
      // page when scaling it up), and each patch's tint as a shape
      canvas.drawOn = (rec) => drawOn(rec, width, height, shownAt(image.source, width, height));
      const size = patch[0] === patch[1] ? `${patch[0]}` : `${patch[0]} × ${patch[1]}`;
      const grid = `${rows} × ${cols} patches of ${size} px`;
      canvas.setAttribute(
        "aria-label",
        `The image as the model saw it, ${grid}${map ? `, tinted by ${map.name}` : ""}: click a patch, or move with the arrow keys, to focus it`,
      );
      const reader = tokens[focus];
      const what = !map
        ? `The image as the model saw it, ${h0} × ${w0} px in ${grid}. ${view.secret === "row" ? "The weights wait for the reveal." : "From the weights stage on, the focused token's weights are drawn over it."}`
        : map.name === "weights"
          ? `${reader}'s weights (layer ${view.layer}, head ${view.head}): ${readsWeights(reader)}.`
          : `${map.title}: ${map.reads ? map.reads.replaceAll("{t}", () => reader) : readsWeights(reader)}.${map.state === "exported" ? " As exported: the panel below says at which state." : map.state === "updating" ? " Updating: this is the last state's, until the kernel's answer comes." : ""}`;
      caption.textContent = `${what} Click a patch to focus it.`;
      specials.hidden = !special.length;
      specials.textContent = special.length ? `beside the patches: ${special.map(([t, v]) => `${t} ${fmtEnd(v)}`).join(" · ")}` : "";
      legendNode.hidden = !map;
      const label = map?.name === "weights" ? "weight" : map?.label;
      if (map && flat) fill(legendNode, `every patch's ${label} is ${fmtEnd(hi)}: the image is left untinted`);
      else if (map) legend(legendNode, `${label}, the patches' range:`, tint, lo, hi, fmtEnd);
    },
    destroy() {
      node.remove();
    },
  };
}
