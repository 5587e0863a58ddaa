// The current view as a picture: a vector SVG redrawn from the widget's layout, and a PNG drawn
// from that SVG. Text becomes <text>, boxes <rect>, each matrix its cells, labels and outlines
// (replayed from the grid's own drawing), and the plots copies of their SVG with every style
// written out as attributes: renderers other than browsers (librsvg, cairo) read neither the
// page's stylesheet nor its CSS variables. The controls are left out: a picture has nothing to press.

const NS = "http://www.w3.org/2000/svg";
// what can be pressed, dragged or chosen, and the hover tip
const CHROME = ".aw-controls, .aw-tip, .aw-toggle, .aw-cell-close, .aw-ex-reveal, input:not(.aw-ex-input), select, label:has(select)";
/** Past this many cells a matrix is one PNG <image> in the SVG: as rects it would take megabytes.
 * (Long inputs past 512 tokens are painted as an image on the page too.) */
export const CELL_BUDGET = 40000;

/**
 * A picture being made: where it starts on the page, its <defs>, a counter for ids, the fonts'
 * ascents and the markers made, and the root's font family.
 * @typedef {{ x0: number, y0: number, defs: SVGElement, ids: number, fonts: Map<string, number>, markers: Map<string, boolean>, family: string }} Pic
 */
/** @typedef {string | number | false | null | undefined} AttrValue */
/** @typedef {import("./views/grid.js").Recorder} Recorder */
/**
 * What a recorder offers of a canvas's context (what the grid uses).
 * @typedef {Pick<CanvasRenderingContext2D, "font" | "lineWidth" | "textAlign" | "textBaseline" | "imageSmoothingEnabled" | "measureText" | "save"
 *   | "restore" | "translate" | "rotate" | "setTransform" | "setLineDash" | "clearRect" | "beginPath" | "moveTo" | "lineTo" | "stroke"
 *   | "fillRect" | "strokeRect" | "fillText"> & { fillStyle: string, strokeStyle: string, vectorCells: number,
 *   drawImage(image: HTMLCanvasElement, x: number, y: number, width: number, height: number): void }} Pen
 */

// Characters XML cannot hold (C0 controls but tab, LF and CR; lone surrogates; U+FFFE/U+FFFF),
// and DEL and C1 controls, which show as nothing. Text from Python arrives without them, but
// the page can still make some: a name cut short in the middle of a surrogate pair. They get
// the stand-ins Python's visible_text gives: control pictures for C0 and DEL, else U+FFFD.
const NOT_XML = /[\0-\x08\x0B\x0C\x0E-\x1F\x7F-\x9F\uD800-\uDFFF\uFFFE\uFFFF]/gu;
/** @param {string} c */
const standIn = (c) => (c < " " ? String.fromCharCode(0x2400 + c.charCodeAt(0)) : c === "\x7F" ? "\u2421" : "\uFFFD");

/** @param {number} v */
const num = (v) => String(Math.round(v * 100) / 100);
/** @type {CanvasRenderingContext2D | null} */
let scratch = null; // a 2-D context: it normalises colours and measures text
const context = () => /** @type {CanvasRenderingContext2D} */ ((scratch ??= document.createElement("canvas").getContext("2d")));

/** @param {string} tag  @param {Record<string, AttrValue>} [attrs]  @param {string | null} [text] */
function make(tag, attrs = {}, text = null) {
  const node = document.createElementNS(NS, tag);
  for (const [k, v] of Object.entries(attrs)) if (v != null && v !== false) node.setAttribute(k, typeof v === "number" ? num(v) : v);
  if (text != null) node.textContent = text; // a text node: escaped when serialised, never markup
  return node;
}

/** A CSS colour as [#rrggbb, alpha]; alpha 0 for none or transparent.
 * @param {string} css  @returns {[string, number]} */
function colour(css) {
  if (!css || css === "none") return ["#000000", 0];
  const ctx = context();
  ctx.fillStyle = "#000";
  ctx.fillStyle = css;
  const c = /** @type {string} */ (ctx.fillStyle); // "#rrggbb", or "rgba(r, g, b, a)" when not opaque
  if (c.startsWith("#")) return [c, 1];
  const [r, g, b, a] = /** @type {RegExpMatchArray} */ (c.match(/[\d.]+/g)).map(Number);
  return [`#${[r, g, b].map((v) => v.toString(16).padStart(2, "0")).join("")}`, a];
}

/** fill or stroke attributes for a CSS colour (times an opacity); none when invisible.
 * @param {string} prop  @param {string} css  @returns {Record<string, string | null>} */
function paint(prop, css, times = 1) {
  const [hex, alpha] = colour(css),
    opacity = alpha * times;
  if (!(opacity > 0)) return { [prop]: "none" };
  return { [prop]: hex, [`${prop}-opacity`]: opacity < 1 ? String(Math.round(opacity * 1000) / 1000) : null };
}

/** @param {HTMLElement} root */
function picture(root) {
  const box = root.getBoundingClientRect(),
    css = getComputedStyle(root);
  // the picture starts where the content does, below the controls, with the root's padding kept
  const first = [...root.children].find((c) => !c.matches(CHROME) && c.getClientRects().length);
  const top = first ? Math.max(0, first.getBoundingClientRect().top - box.top - parseFloat(css.paddingTop)) : 0;
  const width = Math.ceil(box.width),
    height = Math.ceil(box.height - top);
  /** @type {Pic} */
  const pic = { x0: box.left, y0: box.top + top, defs: make("defs"), ids: 0, fonts: new Map(), markers: new Map(), family: css.fontFamily };
  const bg = colour(css.backgroundColor)[1] > 0 ? css.backgroundColor : css.getPropertyValue("--aw-panel") || "#fff";
  const svg = make("svg", { width, height, viewBox: `0 0 ${width} ${height}`, "font-family": css.fontFamily });
  svg.append(make("rect", { width, height, ...paint("fill", bg) }));
  walk(root, svg, pic);
  if (pic.defs.children.length) svg.prepend(pic.defs);
  return { text: new XMLSerializer().serializeToString(svg).replace(NOT_XML, standIn), width, height };
}

/** @param {Node} parent  @param {Element} out  @param {Pic} pic */
function walk(parent, out, pic) {
  // (text nodes too, told apart by nodeType)
  for (const node of /** @type {NodeListOf<HTMLElement>} */ (parent.childNodes)) {
    if (node.nodeType === Node.TEXT_NODE) {
      text(/** @type {Text} */ (/** @type {Node} */ (node)), out, pic);
      continue;
    }
    if (node.nodeType !== Node.ELEMENT_NODE || node.matches(CHROME)) continue;
    if (!node.getClientRects().length) {
      if (getComputedStyle(node).display === "contents") walk(node, out, pic); // no box of its own (an exercise's row): its children have
      continue;
    }
    if (node.matches("input")) {
      field(/** @type {HTMLInputElement} */ (node), out, pic); // an exercise's typed share: its number is part of the picture, its box is not
      continue;
    }
    const css = getComputedStyle(node),
      seen = css.visibility === "visible";
    if (node.namespaceURI === NS) {
      if (seen) out.append(vector(/** @type {SVGSVGElement} */ (/** @type {Element} */ (node)), pic));
      continue;
    }
    if (seen) boxOf(node, css, out, pic);
    if (seen && css.display === "list-item" && css.listStyleType === "decimal") number(/** @type {HTMLLIElement} */ (node), css, out, pic);
    if (node.tagName === "CANVAS" || node.tagName === "IMG") {
      if (seen) canvasOf(node.tagName === "IMG" ? asCanvas(/** @type {HTMLImageElement} */ (node)) : /** @type {HTMLCanvasElement} */ (node), out, pic, node);
      continue;
    }
    walk(node, clip(node, css, out, pic), pic);
  }
}

// --- boxes: backgrounds, borders, outlines ---

/** @param {HTMLElement} node  @param {CSSStyleDeclaration} css  @param {Element} out  @param {Pic} pic */
function boxOf(node, css, out, pic) {
  const r = node.getBoundingClientRect(),
    x = r.left - pic.x0,
    y = r.top - pic.y0,
    rx = parseFloat(css.borderTopLeftRadius) || 0;
  if (!r.width || !r.height) return;
  const at = { x, y, width: r.width, height: r.height, rx: rx || null };
  if (colour(css.backgroundColor)[1] > 0) out.append(make("rect", { ...at, ...paint("fill", css.backgroundColor) }));
  const gradient = css.backgroundImage.startsWith("linear-gradient(") && linear(css.backgroundImage, pic);
  if (gradient) out.append(make("rect", { ...at, fill: `url(#${gradient})` }));
  // borders: one stroke when the four sides match, else each side as a thin filled rect
  const sides = /** @type {const} */ (["Top", "Right", "Bottom", "Left"]).map(
    (s) =>
      /** @type {[number, string]} */ ([
        css[/** @type {const} */ (`border${s}Style`)] === "none" ? 0 : parseFloat(css[/** @type {const} */ (`border${s}Width`)]),
        css[/** @type {const} */ (`border${s}Color`)],
      ]),
  );
  const [w, c] = sides[0];
  if (sides.every(([w2, c2]) => w2 === w && c2 === c)) {
    if (w > 0)
      out.append(
        make("rect", {
          x: x + w / 2,
          y: y + w / 2,
          width: r.width - w,
          height: r.height - w,
          rx: rx ? Math.max(0, rx - w / 2) : null,
          fill: "none",
          "stroke-width": w,
          ...paint("stroke", c),
        }),
      );
  } else {
    sides.forEach(([w, c], i) => {
      if (w > 0)
        out.append(
          make("rect", {
            x: i === 1 ? x + r.width - w : x,
            y: i === 2 ? y + r.height - w : y,
            width: i % 2 ? w : r.width,
            height: i % 2 ? r.height : w,
            ...paint("fill", c),
          }),
        );
    });
  }
  // the focused token's outline, and the chosen head's ring (a box shadow of spread only)
  /** @param {number} offset  @param {number} width  @param {string} c  @param {boolean} [dashed] */
  const ring = (offset, width, c, dashed = false) => {
    const d = offset + width / 2;
    out.append(
      make("rect", {
        x: x - d,
        y: y - d,
        width: r.width + 2 * d,
        height: r.height + 2 * d,
        rx: rx ? rx + d : null,
        fill: "none",
        "stroke-width": width,
        "stroke-dasharray": dashed ? `${num(3 * width)} ${num(2 * width)}` : null, // (a token a compressed cache evicts)
        ...paint("stroke", c),
      }),
    );
  };
  if (css.outlineStyle !== "none" && parseFloat(css.outlineWidth) > 0)
    ring(parseFloat(css.outlineOffset) || 0, parseFloat(css.outlineWidth), css.outlineColor, css.outlineStyle === "dashed");
  const shadow = css.boxShadow.match(/^(rgba?\([^)]*\)) 0px 0px 0px ([\d.]+)px$/);
  if (shadow) ring(0, parseFloat(shadow[2]), shadow[1]);
}

/** A left-to-right or top-to-bottom linear-gradient as an SVG gradient; its id, or null.
 * @param {string} image  @param {Pic} pic */
function linear(image, pic) {
  const across = /^linear-gradient\((to right|90deg)/.test(image);
  if (!across && /^linear-gradient\((to |-?[\d.]+deg)/.test(image)) return null; // another direction: not drawn
  const stops = [...image.matchAll(/(rgba?\([^)]*\))\s+([\d.]+)%/g)];
  if (!stops.length) return null;
  const id = `aw-gradient-${++pic.ids}`,
    g = make("linearGradient", { id, x2: across ? "1" : "0", y2: across ? "0" : "1" });
  for (const [, c, at] of stops) {
    const [hex, alpha] = colour(c);
    g.append(make("stop", { offset: `${at}%`, "stop-color": hex, "stop-opacity": alpha < 1 ? alpha : null }));
  }
  pic.defs.append(g);
  return id;
}

/** Content cut by its box (a scrolled token strip, a long token) is cut in the picture too.
 * @param {HTMLElement} node  @param {CSSStyleDeclaration} css  @param {Element} out  @param {Pic} pic  @returns {Element} */
function clip(node, css, out, pic) {
  if (css.overflowX === "visible" && css.overflowY === "visible") return out;
  if (node.scrollWidth <= node.clientWidth && node.scrollHeight <= node.clientHeight) return out;
  const r = node.getBoundingClientRect(),
    id = `aw-clip-${++pic.ids}`;
  const path = make("clipPath", { id });
  path.append(make("rect", { x: r.left - pic.x0, y: r.top - pic.y0, width: r.width, height: r.height }));
  pic.defs.append(path);
  const g = make("g", { "clip-path": `url(#${id})` });
  out.append(g);
  return g;
}

// --- text ---

/** The font's ascent, as the page lays out lines: a text box's top plus this is its baseline.
 * @param {CSSStyleDeclaration} css  @param {Pic} pic */
function ascent(css, pic) {
  const font = `${css.fontStyle} ${css.fontWeight} ${css.fontSize} ${css.fontFamily}`;
  if (!pic.fonts.has(font)) {
    const ctx = context();
    ctx.font = font;
    ctx.textBaseline = "alphabetic";
    pic.fonts.set(font, Math.round(ctx.measureText("x").fontBoundingBoxAscent));
  }
  return /** @type {number} */ (pic.fonts.get(font));
}

/** An ordered list's number ("1."), drawn by the page outside the item's box, before its first line.
 * @param {HTMLLIElement} li  @param {CSSStyleDeclaration} css  @param {Element} out  @param {Pic} pic */
function number(li, css, out, pic) {
  const first = document
    .createTreeWalker(li, NodeFilter.SHOW_TEXT, (t) => (/** @type {Text} */ (t).data.trim() ? NodeFilter.FILTER_ACCEPT : NodeFilter.FILTER_SKIP))
    .nextNode();
  const line =
    first &&
    [
      ...(() => {
        const r = document.createRange();
        r.selectNodeContents(first);
        return r.getClientRects();
      })(),
    ][0];
  if (!line) return;
  const list = /** @type {HTMLOListElement} */ (li.parentElement); // (a decimal list item's)
  const n = [...list.children].filter((c) => c.tagName === "LI").indexOf(li) + (list.start || 1);
  context().font = `${css.fontWeight} ${css.fontSize} ${css.fontFamily}`;
  const x = li.getBoundingClientRect().left - context().measureText(" ").width - pic.x0; // the page's marker ends with a space
  out.append(
    make(
      "text",
      {
        x,
        y: line.top - pic.y0 + ascent(getComputedStyle(/** @type {Element} */ (first.parentElement)), pic),
        "text-anchor": "end",
        "font-size": parseFloat(css.fontSize),
        ...paint("fill", css.color),
      },
      `${n}.`,
    ),
  );
}

/** @type {Record<string, (t: string) => string>} */
const CASE = { uppercase: (t) => t.toUpperCase(), lowercase: (t) => t.toLowerCase() };

/** A text node as one <text> per line it takes, where the page put it, in its font and colour.
 * @param {Text} node  @param {Element} out  @param {Pic} pic */
function text(node, out, pic) {
  const el = /** @type {HTMLElement} */ (node.parentElement),
    css = getComputedStyle(el);
  if (css.visibility !== "visible" || !node.data.trim()) return;
  // kept spaces: one piece a line; else words, joined again on each line
  const pre = /^(pre|break-spaces)/.test(css.whiteSpace),
    range = document.createRange(),
    /** @type {{ text: string, start: number, left: number, right: number, top: number }[]} */
    lines = [];
  for (const m of node.data.matchAll(pre ? /[^\n]+/g : /\S+/g)) {
    range.setStart(node, m.index);
    range.setEnd(node, m.index + m[0].length);
    const r = [...range.getClientRects()].find((b) => b.width > 0);
    if (!r) continue;
    const line = lines.at(-1);
    if (line && !pre && Math.abs(line.top - r.top) < 1) Object.assign(line, { text: `${line.text} ${m[0]}`, right: r.right });
    else lines.push({ text: m[0], start: m.index, left: r.left, right: r.right, top: r.top });
  }
  const align = /** @type {Record<string, string>} */ ({ right: "end", end: "end", center: "middle" })[css.textAlign] || "start";
  const font = {
    "font-size": parseFloat(css.fontSize),
    "font-weight": css.fontWeight === "400" ? null : css.fontWeight,
    "font-style": css.fontStyle === "normal" ? null : css.fontStyle,
    "font-family": css.fontFamily === pic.family ? null : css.fontFamily,
    "letter-spacing": css.letterSpacing === "normal" ? null : parseFloat(css.letterSpacing),
    ...paint("fill", css.color),
  };
  const base = ascent(css, pic);
  for (const line of lines) {
    if (!line.text.trim()) continue;
    let words = line.text,
      anchor = align,
      x = /** @type {Record<string, number>} */ ({ start: line.left, middle: (line.left + line.right) / 2, end: line.right })[align];
    // cut short with an ellipsis on the page: the characters shown, then "…"
    if (css.textOverflow === "ellipsis" && el.scrollWidth > el.clientWidth) {
      context().font = `${css.fontWeight} ${css.fontSize} ${css.fontFamily}`;
      const limit = el.getBoundingClientRect().right - context().measureText("…").width;
      let end = line.start;
      for (const ch of line.text) {
        range.setEnd(node, end + ch.length);
        if (range.getBoundingClientRect().right > limit) break;
        end += ch.length;
      }
      if (end < line.start + line.text.length) [words, anchor, x] = [`${node.data.slice(line.start, end)}…`, "start", line.left];
    }
    words = (CASE[css.textTransform] || String)(words);
    const t = make("text", { x: x - pic.x0, y: line.top - pic.y0 + base, "text-anchor": anchor === "start" ? null : anchor, ...font }, words);
    if (/^\s|\s$|\s\s/.test(words)) t.setAttributeNS("http://www.w3.org/XML/1998/namespace", "xml:space", "preserve");
    out.append(t);
    if (css.textDecorationLine.includes("line-through")) {
      // struck out (a token a compressed cache evicts): a line through the middle of its letters
      const y = line.top - pic.y0 + base - parseFloat(css.fontSize) * 0.3;
      const width = parseFloat(css.textDecorationThickness) || 1;
      out.append(
        make("line", { x1: line.left - pic.x0, x2: line.right - pic.x0, y1: y, y2: y, "stroke-width": width, ...paint("stroke", css.textDecorationColor) }),
      );
    }
  }
}

/** A number box's value as text, where the box shows it (right-aligned, as typed).
 * @param {HTMLInputElement} node  @param {Element} out  @param {Pic} pic */
function field(node, out, pic) {
  const css = getComputedStyle(node),
    r = node.getBoundingClientRect();
  if (css.visibility !== "visible" || !node.value) return;
  const right = r.right - parseFloat(css.paddingRight) - parseFloat(css.borderRightWidth);
  const y = r.top + (r.height - parseFloat(css.fontSize)) / 2 + ascent(css, pic);
  out.append(
    make("text", { x: right - pic.x0, y: y - pic.y0, "text-anchor": "end", "font-size": parseFloat(css.fontSize), ...paint("fill", css.color) }, node.value),
  );
}

// --- the page's own SVG: arcs, the value plot, the dial, legend marks ---

const SHAPE = ["stroke-width", "stroke-dasharray", "stroke-linecap", "stroke-linejoin", "opacity"];
const FONT = ["font-family", "font-size", "font-weight", "font-style", "text-anchor", "letter-spacing"];
/** @type {Record<string, string>} */
const DEFAULT = {
  "stroke-width": "1px",
  "stroke-dasharray": "none",
  "stroke-linecap": "butt",
  "stroke-linejoin": "miter",
  opacity: "1",
  "font-weight": "400",
  "font-style": "normal",
  "text-anchor": "start",
  "letter-spacing": "normal",
};
const OWN = /^(class|style|id|role|tabindex|aria-.*|marker-.*|fill|stroke.*|opacity|font-.*|text-anchor)$/; // replaced by the resolved styles

/** An inline <svg> as a group at its place, every element's used style written out.
 * @param {SVGSVGElement} src  @param {Pic} pic */
function vector(src, pic) {
  const r = src.getBoundingClientRect(),
    vb = /** @type {DOMRect | undefined} */ (src.hasAttribute("viewBox") && src.viewBox.baseVal); // (false: no viewBox)
  let transform = `translate(${num(r.left - pic.x0)} ${num(r.top - pic.y0)})`;
  if (vb?.width && vb.height) transform += ` scale(${num(r.width / vb.width)} ${num(r.height / vb.height)}) translate(${num(-vb.x)} ${num(-vb.y)})`;
  const g = make("g", { transform });
  copy(src, g, pic, null);
  return g;
}

/** Copies src's children into dst; `context`: the computed style that context-fill and context-stroke name (a marker's).
 * @param {Element} src  @param {Element} dst  @param {Pic} pic  @param {CSSStyleDeclaration | null} context */
function copy(src, dst, pic, context) {
  // (text nodes too, told apart by nodeType)
  for (const child of /** @type {NodeListOf<Element>} */ (src.childNodes)) {
    if (child.nodeType === Node.TEXT_NODE) {
      if (dst.tagName === "text" || dst.tagName === "tspan") dst.append(/** @type {Text} */ (/** @type {Node} */ (child)).data);
      continue;
    }
    if (child.nodeType !== Node.ELEMENT_NODE || child.tagName === "defs" || child.tagName === "title") continue;
    const css = getComputedStyle(child);
    if (css.display === "none" || css.visibility !== "visible") continue;
    const node = make(child.tagName);
    for (const a of child.attributes) if (!OWN.test(a.name)) node.setAttribute(a.name, a.value);
    for (const p of ["fill", "stroke"]) {
      let v = css.getPropertyValue(p);
      if (v.startsWith("context-")) v = context ? context.getPropertyValue(v.slice(8)) : "none";
      const attrs = paint(p, v, parseFloat(css.getPropertyValue(`${p}-opacity`)));
      if (p === "fill" || attrs.stroke !== "none") for (const [k, value] of Object.entries(attrs)) if (value != null) node.setAttribute(k, value);
    }
    const text = child.tagName === "text" || child.tagName === "tspan";
    for (const p of text ? [...SHAPE, ...FONT] : SHAPE) {
      const v = css.getPropertyValue(p);
      if (v === DEFAULT[p] || (p === "font-family" && v === pic.family) || (p.startsWith("stroke-") && !node.hasAttribute("stroke"))) continue;
      node.setAttribute(p, p.startsWith("font-") ? v : v.replace(/px\b/g, "").replace(/,\s*/g, " ")); // "4px, 3px": 4 3
    }
    const marker = css.markerEnd !== "none" && markerFor(child, css, pic);
    if (marker) node.setAttribute("marker-end", `url(#${marker})`);
    copy(child, node, pic, context);
    dst.append(node);
  }
}

/** One marker per colour: librsvg does not draw context-stroke.
 * @param {Element} el  @param {CSSStyleDeclaration} css  @param {Pic} pic */
function markerFor(el, css, pic) {
  const id = css.markerEnd.match(/#([^")]+)/)?.[1],
    src = id && el.ownerDocument.getElementById(id);
  if (!src) return null;
  const key = `${id}-${colour(css.stroke)[0].slice(1)}`;
  if (!pic.markers.has(key)) {
    const marker = make("marker", { id: key });
    for (const a of src.attributes) if (a.name !== "id") marker.setAttribute(a.name, a.value);
    copy(src, marker, pic, css);
    pic.defs.append(marker);
    pic.markers.set(key, true);
  }
  return key;
}

// --- canvases: the matrices replayed as shapes, the head thumbnails as images ---

/** A PNG of a canvas shown `width` × `height`; one shown with sharp pixels is scaled up by whole
 * pixels first, since librsvg and cairo smooth every image whatever image-rendering says.
 * @param {HTMLCanvasElement} source  @param {number} width  @param {number} height  @param {boolean} sharp */
function png(source, width, height, sharp) {
  const k = sharp ? Math.min(Math.ceil(Math.max(width / source.width, height / source.height)), Math.floor(4096 / Math.max(source.width, source.height))) : 1;
  if (k <= 1) return source.toDataURL("image/png");
  const big = Object.assign(document.createElement("canvas"), { width: source.width * k, height: source.height * k });
  const ctx = /** @type {CanvasRenderingContext2D} */ (big.getContext("2d"));
  ctx.imageSmoothingEnabled = false;
  ctx.drawImage(source, 0, 0, big.width, big.height);
  return big.toDataURL("image/png");
}

/** An image's pixels on a canvas of its own size (a head's thumbnail; nothing drawn before it has loaded).
 * @param {HTMLImageElement} image */
function asCanvas(image) {
  const canvas = Object.assign(document.createElement("canvas"), {
    width: image.complete ? image.naturalWidth : 0,
    height: image.complete ? image.naturalHeight : 0,
  });
  if (canvas.width) /** @type {CanvasRenderingContext2D} */ (canvas.getContext("2d")).drawImage(image, 0, 0);
  return canvas;
}

/** A canvas as SVG, where `shown` (the canvas, or the image it was made from) is laid out.
 * @param {import("./views/grid.js").GridCanvas} canvas  @param {Element} out  @param {Pic} pic  @param {Element} [shown] */
function canvasOf(canvas, out, pic, shown = canvas) {
  const r = shown.getBoundingClientRect();
  const g = make("g", { transform: `translate(${num(r.left - pic.x0)} ${num(r.top - pic.y0)})`, role: "img", "aria-label": shown.getAttribute("aria-label") });
  if (canvas.drawOn) {
    const rec = recorder();
    canvas.drawOn(rec.ctx);
    g.append(...rec.nodes);
  } else {
    if (!canvas.width || !canvas.height) return; // nothing painted yet
    const sharp = getComputedStyle(shown).imageRendering === "pixelated";
    g.append(
      make("image", {
        width: r.width,
        height: r.height,
        href: png(canvas, r.width, r.height, sharp),
        preserveAspectRatio: "none",
        style: sharp ? "image-rendering:pixelated" : null,
      }),
    );
  }
  out.append(g);
}

/** @type {Record<string, string>} */
const ANCHOR = { center: "middle", right: "end", end: "end" };

/** A stand-in for a canvas's 2-D context that turns what is drawn on it into SVG elements, in
 * the canvas's CSS pixels. It offers what the grid uses, and asks for the cells one by one.
 * @returns {{ ctx: Recorder, nodes: SVGElement[] }} */
function recorder() {
  /** @type {SVGElement[]} */
  const nodes = [],
    real = context(),
    /** @type {[DOMMatrix, number[], Partial<Pen>][]} */
    stack = [];
  let m = new DOMMatrix(),
    /** @type {number[]} */
    dash = [],
    /** @type {string[]} */
    path = [];
  const at = (t = m) => (t.isIdentity ? null : `matrix(${[t.a, t.b, t.c, t.d, t.e, t.f].map(num).join(" ")})`);
  const lines = () => ({
    fill: "none",
    ...paint("stroke", ctx.strokeStyle),
    "stroke-width": ctx.lineWidth,
    "stroke-dasharray": dash.length ? dash.join(" ") : null,
  });
  /** @param {number} x  @param {number} y */
  const point = (x, y) => {
    const p = m.transformPoint({ x, y });
    return `${num(p.x)} ${num(p.y)}`;
  };
  /** @type {Pen} */
  const ctx = {
    font: "10px sans-serif",
    fillStyle: "#000",
    strokeStyle: "#000",
    lineWidth: 1,
    textAlign: "start",
    textBaseline: "alphabetic",
    imageSmoothingEnabled: true,
    vectorCells: CELL_BUDGET,
    measureText(t) {
      real.font = ctx.font;
      return real.measureText(t);
    },
    save() {
      stack.push([m, dash, { ...ctx }]);
    },
    restore() {
      const s = stack.pop();
      if (s) {
        [m, dash] = s;
        Object.assign(ctx, s[2]);
      }
    },
    translate(x, y) {
      m = m.translate(x, y);
    },
    rotate(a) {
      m = m.rotate((a * 180) / Math.PI);
    },
    setTransform() {
      m = new DOMMatrix();
    }, // the screen's device pixels: a picture is in CSS pixels
    /** @param {number[]} d */
    setLineDash(d) {
      dash = d;
    },
    clearRect() {},
    beginPath() {
      path = [];
    },
    moveTo(x, y) {
      path.push(`M${point(x, y)}`);
    },
    lineTo(x, y) {
      path.push(`L${point(x, y)}`);
    },
    stroke() {
      if (path.length) nodes.push(make("path", { d: path.join(""), ...lines() }));
    },
    fillRect(x, y, width, height) {
      nodes.push(make("rect", { x, y, width, height, transform: at(), ...paint("fill", ctx.fillStyle) }));
    },
    strokeRect(x, y, width, height) {
      nodes.push(make("rect", { x, y, width, height, transform: at(), ...lines() }));
    },
    fillText(t, x, y, maxWidth) {
      // the canvas's baseline (middle, top…) moved to the alphabetic one SVG uses
      real.font = ctx.font;
      real.textBaseline = "alphabetic";
      const alpha = real.measureText(t);
      real.textBaseline = ctx.textBaseline;
      let place = m.translate(x, y + alpha.fontBoundingBoxAscent - real.measureText(t).fontBoundingBoxAscent);
      if (maxWidth != null && alpha.width > maxWidth) place = place.scale(maxWidth / alpha.width, 1); // the canvas squeezes a long label
      const moved = place.a === 1 && place.b === 0 && place.c === 0 && place.d === 1;
      const font = real.font,
        size = parseFloat(/** @type {RegExpMatchArray} */ (font.match(/([\d.]+)px/))[1]),
        weight = font.match(/\b(bold|[1-9]00)\b(?=.*px)/);
      nodes.push(
        make(
          "text",
          {
            x: moved ? place.e : null,
            y: moved ? place.f : null,
            transform: moved ? null : at(place),
            "text-anchor": ANCHOR[ctx.textAlign],
            "font-size": size,
            "font-weight": weight ? weight[1] : null,
            "font-family": font.slice(font.indexOf("px ") + 3),
            ...paint("fill", ctx.fillStyle),
          },
          t,
        ),
      );
    },
    /** @param {HTMLCanvasElement} image  @param {number} x  @param {number} y  @param {number} width  @param {number} height */
    drawImage(image, x, y, width, height) {
      nodes.push(
        make("image", {
          x,
          y,
          width,
          height,
          href: png(image, width, height, !ctx.imageSmoothingEnabled),
          preserveAspectRatio: "none",
          transform: at(),
          style: ctx.imageSmoothingEnabled ? null : "image-rendering:pixelated",
        }),
      );
    },
  };
  // (a stand-in: it offers what the grid draws with, not the whole of a context)
  return { ctx: /** @type {Recorder} */ (/** @type {unknown} */ (ctx)), nodes };
}

/** SVG markup of the view as it is now drawn: well-formed XML whatever its text.
 * @param {HTMLElement} root */
export function snapshotSVG(root) {
  return picture(root).text;
}

/** A PNG (data URL) of the view, at `scale` times its CSS size: the SVG picture, rasterised.
 * @param {HTMLElement} root */
export async function snapshotPNG(root, scale = 2) {
  const { text, width, height } = picture(root);
  const img = new Image();
  img.src = `data:image/svg+xml;charset=utf-8,${encodeURIComponent(text)}`;
  await img.decode();
  const canvas = document.createElement("canvas");
  canvas.width = Math.round(width * scale);
  canvas.height = Math.round(height * scale);
  const ctx = /** @type {CanvasRenderingContext2D} */ (canvas.getContext("2d"));
  ctx.scale(scale, scale);
  ctx.drawImage(img, 0, 0, width, height);
  const png = canvas.toDataURL("image/png");
  // a canvas larger than the browser can hold gives "data:," rather than an error
  if (!png.startsWith("data:image/png")) throw new Error(`a ${canvas.width}×${canvas.height} PNG is too large for one canvas; use a smaller scale`);
  return png;
}

/** Offer the view as an "svg" or "png" file download named `name`; rejects when it cannot be made.
 * @param {HTMLElement} root  @param {"svg" | "png"} kind  @param {string} name */
export async function savePicture(root, kind, name) {
  if (kind === "svg") download(`${name}.svg`, snapshotSVG(root), "image/svg+xml");
  else download(`${name}.png`, await snapshotPNG(root), "image/png");
}

/** Offer a data URL or text as a file download.
 * @param {string} name  @param {string} data  @param {string} type */
function download(name, data, type) {
  const a = document.createElement("a");
  a.href = data.startsWith("data:") ? data : URL.createObjectURL(new Blob([data], { type }));
  a.download = name;
  a.click();
  if (!data.startsWith("data:")) setTimeout(() => URL.revokeObjectURL(a.href), 1000);
}
