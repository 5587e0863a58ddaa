// Builds the page's bundle (src/attnwidget/static/widget.js and .css). The painting worker is
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

if (dev) {
  // the worker's source changes rarely: restart the watch to pick a change of it up
  const ctx = await esbuild.context(await widget());
  await ctx.watch();
} else {
  await esbuild.build(await widget());
}
