// Draws every widget on a page of the site from its embedded state (attnwidget.export.embed_html):
// the widget's own bundle computes, as in an exported page, so no kernel and no network are needed.
// The widgets take the site's theme, and follow the reader's switch without losing their state.
import { renderStandalone } from "./attnwidget.js";

const dark = () => document.documentElement.dataset.theme === "dark";

for (const host of document.querySelectorAll(".attnwidget-static")) {
  const payload = JSON.parse(host.querySelector("script[type='application/json']").textContent);
  renderStandalone(host, { ...payload, theme: dark() ? "dark" : "light" });
  const root = host.querySelector(".aw-root");
  new MutationObserver(() => {
    if (root.classList.contains("aw-dark") === dark()) return;
    root.classList.toggle("aw-dark", dark());
    root.attnwidget.redraw(); // the canvases take the new colours
  }).observe(document.documentElement, { attributes: true, attributeFilter: ["data-theme"] });
}
