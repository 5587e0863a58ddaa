// Builds the page's bundles (src/attnwidget/static/widget.js and .css; long.js and .css, the page
// for long texts). The painting worker is
// bundled first and carried inside the widget's script as text, so the widget stays one file:
// the page starts the worker from it (anywidget loads a single ES module, with no folder to fetch
// a second script from). `node scripts/build.mjs --dev` keeps rebuilding, with source maps;
// `--plain` builds once unminified (for reading a profile).
import * as esbuild from "esbuild";

const dev = process.argv.includes("--dev"),
  plain = process.argv.includes("--plain");
const common = { bundle: true, minify: !dev && !plain, sourcemap: dev ? "inline" : false, logLevel: "warning" };

async function workerSource() {
  const out = await esbuild.build({ ...common, entryPoints: ["js/paint-worker.js"], format: "iife", write: false });
  return out.outputFiles[0].text;
}

const widget = async () => ({
  ...common,
  entryPoints: ["js/widget.js"],
  format: "esm",
  outdir: "src/attnwidget/static",
  define: { "define.amd": "false", PAINT_WORKER_SOURCE: JSON.stringify(await workerSource()) },
});

const long = { ...common, entryPoints: ["js/long.js"], format: /** @type {const} */ ("esm"), outdir: "src/attnwidget/static" };

if (dev) {
  // the worker's source changes rarely: restart the watch to pick a change of it up
  for (const options of [await widget(), long]) await (await esbuild.context(options)).watch();
} else {
  await Promise.all([esbuild.build(await widget()), esbuild.build(long)]);
}
