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

/** SVG markup of the view as it is now drawn. */
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
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${Math.ceil(width)}" height="${Math.ceil(height)}" viewBox="0 0 ${Math.ceil(width)} ${Math.ceil(height)}">`
    + `<foreignObject x="0" y="0" width="100%" height="100%"><div xmlns="http://www.w3.org/1999/xhtml">${style}${body}</div></foreignObject></svg>`;
}

/** A PNG (data URL) of the view, at `scale` times its CSS size. */
export async function snapshotPNG(root, scale = 2) {
  const svgText = snapshotSVG(root);
  const { width, height } = root.getBoundingClientRect();
  const img = new Image();
  img.src = `data:image/svg+xml;charset=utf-8,${encodeURIComponent(svgText)}`;
  await img.decode();
  const canvas = document.createElement("canvas");
  canvas.width = Math.ceil(width * scale);
  canvas.height = Math.ceil(height * scale);
  const ctx = canvas.getContext("2d");
  ctx.scale(scale, scale);
  ctx.drawImage(img, 0, 0);
  return canvas.toDataURL("image/png");
}

/** Offer a data URL or text as a file download. */
export function download(name, data, type) {
  const a = document.createElement("a");
  a.href = data.startsWith("data:") ? data : URL.createObjectURL(new Blob([data], { type }));
  a.download = name;
  a.click();
  if (!data.startsWith("data:")) setTimeout(() => URL.revokeObjectURL(a.href), 1000);
}
