// The current view as a picture: an SVG that carries a copy of the widget's own DOM (canvases
// as images, styles and theme colours inlined), and a PNG drawn from that SVG.

function widgetCSS() {
  const rules = [];
  for (const sheet of document.styleSheets) {
    let list;
    try { list = sheet.cssRules; } catch { continue; } // another origin's sheet: not ours
    for (const rule of list) if (rule.cssText.includes(".aw-")) rules.push(rule.cssText);
  }
  return rules.join("\n");
}

// Characters XML cannot hold (C0 controls but tab, LF and CR; lone surrogates; U+FFFE/U+FFFF),
// and DEL and C1 controls, which show as nothing. Text from Python arrives without them, but
// the page can still make some: a name cut short in the middle of a surrogate pair. They get
// the stand-ins Python's visible_text gives: control pictures for C0 and DEL, else U+FFFD.
const NOT_XML = /[\0-\x08\x0B\x0C\x0E-\x1F\x7F-\x9F\uD800-\uDFFF\uFFFE\uFFFF]/gu;
const standIn = (c) => (c < " " ? String.fromCharCode(0x2400 + c.charCodeAt(0)) : c === "\x7F" ? "\u2421" : "\uFFFD");

/** SVG markup of the view as it is now drawn: well-formed XML whatever its text. */
export function snapshotSVG(root) {
  const { width, height } = root.getBoundingClientRect();
  const clone = root.cloneNode(true);
  const canvases = root.querySelectorAll("canvas");
  clone.querySelectorAll("canvas").forEach((copy, i) => {
    const img = document.createElement("img");
    img.src = canvases[i].toDataURL("image/png");
    img.setAttribute("style", `display:block;width:${canvases[i].style.width};height:${canvases[i].style.height}`);
    copy.replaceWith(img);
  });
  // form state lives in properties, not attributes: write it down so the copy shows it
  const inputs = root.querySelectorAll("input, select");
  clone.querySelectorAll("input, select").forEach((copy, i) => {
    if (inputs[i].type === "checkbox") copy.toggleAttribute("checked", inputs[i].checked);
    else if (copy.tagName === "SELECT") [...copy.options].forEach((o) => o.toggleAttribute("selected", o.value === inputs[i].value));
    else copy.setAttribute("value", inputs[i].value);
  });
  // the theme's colours come from the notebook around the widget: freeze them on the copy
  const css = getComputedStyle(root);
  const frozen = [...css].filter((p) => p.startsWith("--aw-")).map((p) => `${p}:${css.getPropertyValue(p)}`);
  frozen.push(`color:${css.color}`, `background:${css.backgroundColor}`, `font-family:${css.fontFamily}`, `width:${width}px`, "margin:0");
  clone.setAttribute("style", frozen.join(";"));
  const body = new XMLSerializer().serializeToString(clone);
  const style = new XMLSerializer().serializeToString(Object.assign(document.createElement("style"), { textContent: widgetCSS() }));
  return (`<svg xmlns="http://www.w3.org/2000/svg" width="${Math.ceil(width)}" height="${Math.ceil(height)}" viewBox="0 0 ${Math.ceil(width)} ${Math.ceil(height)}">`
    + `<foreignObject x="0" y="0" width="100%" height="100%"><div xmlns="http://www.w3.org/1999/xhtml">${style}${body}</div></foreignObject></svg>`)
    .replace(NOT_XML, standIn);
}

/** A PNG (data URL) of the view, at `scale` times its CSS size. */
export async function snapshotPNG(root, scale = 2) {
  const svgText = snapshotSVG(root);
  const { width, height } = root.getBoundingClientRect();
  const img = new Image();
  img.src = `data:image/svg+xml;charset=utf-8,${encodeURIComponent(svgText)}`;
  await img.decode();
  const canvas = document.createElement("canvas");
  // the SVG's whole-pixel size, scaled: the PNG is exactly the SVG picture at `scale`
  canvas.width = Math.round(Math.ceil(width) * scale);
  canvas.height = Math.round(Math.ceil(height) * scale);
  const ctx = canvas.getContext("2d");
  ctx.scale(scale, scale);
  ctx.drawImage(img, 0, 0);
  const png = canvas.toDataURL("image/png");
  // a canvas larger than the browser can hold gives "data:," rather than an error
  if (!png.startsWith("data:image/png")) throw new Error(`a ${canvas.width}×${canvas.height} PNG is too large for one canvas; use a smaller scale`);
  return png;
}

/** Offer the view as an "svg" or "png" file download named `name`; rejects when it cannot be made. */
export async function savePicture(root, kind, name) {
  if (kind === "svg") download(`${name}.svg`, snapshotSVG(root), "image/svg+xml");
  else download(`${name}.png`, await snapshotPNG(root), "image/png");
}

/** Offer a data URL or text as a file download. */
function download(name, data, type) {
  const a = document.createElement("a");
  a.href = data.startsWith("data:") ? data : URL.createObjectURL(new Blob([data], { type }));
  a.download = name;
  a.click();
  if (!data.startsWith("data:")) setTimeout(() => URL.revokeObjectURL(a.href), 1000);
}
