// Runs js/rules.js on the cases tests/test_rules_contract.py sends, one JSON line in, one out.
// Arrays travel as {$a: id, shape, dtype, data} and stand for one object each (rules compare
// arrays by identity); sources are plain lists and maps of such states.
import { createInterface } from "node:readline";
import { overflow, settleChecked } from "../../js/rules.js";

function decoder() {
  const table = new Map();
  const array = (a) => {
    if (!table.has(a.$a)) {
      const Type = a.dtype === "uint8" ? Uint8Array : Float64Array;
      const data = Type.from(a.data);
      table.set(a.$a, { shape: a.shape, dtype: a.dtype, view: new DataView(data.buffer), id: a.$a });
    }
    return table.get(a.$a);
  };
  const decode = (v) => {
    if (Array.isArray(v)) return v.map(decode);
    if (v && typeof v === "object") {
      if ("$a" in v) return array(v);
      if ("$f" in v) return Number(v.$f === "nan" ? NaN : v.$f === "inf" ? Infinity : -Infinity);
      return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, decode(x)]));
    }
    return v;
  };
  return { decode, table };
}

function encode(v) {
  if (v && typeof v === "object" && v.view instanceof DataView) return { $a: v.id };
  if (Array.isArray(v)) return v.map(encode);
  if (typeof v === "number" && !Number.isFinite(v)) return { $f: Number.isNaN(v) ? "nan" : v > 0 ? "inf" : "-inf" };
  return v;
}

const lines = createInterface({ input: process.stdin });
for await (const line of lines) {
  const { decode } = decoder();
  const c = decode(JSON.parse(line));
  if (c.overflow) {
    process.stdout.write(`${JSON.stringify({ overflow: overflow(c.overflow) })}\n`);
    continue;
  }
  const sources = {
    sentence: (i) => c.sources.sentences[i],
    block: (name) => c.sources.blocks[name],
    layer: (block, i, text) => (c.sources.texts ? c.sources.texts[text][i] : c.sources.layers[block][i]),
    basis: (v) =>
      v.shape[v.shape.length - 1] <= 2 ? null : { shape: [...v.shape.slice(0, -2), v.shape[v.shape.length - 1], 2], dtype: "float64", view: new DataView(new ArrayBuffer(0)), id: `basis:${v.id}` },
  };
  let out;
  try {
    const s = settleChecked(c.state, c.change, sources, c.page);
    out = { state: Object.fromEntries(c.fields.map((n) => [n, encode(s[n] ?? null)])) };
  } catch (err) {
    out = err.constructor.name === "Refused" ? { refused: err.message } : { error: String(err.stack) };
  }
  process.stdout.write(`${JSON.stringify(out)}\n`);
}
