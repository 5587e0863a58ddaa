// The label placer: labels take the first free spot around their point, never cover each
// other or a mark, stay inside the plot, and get a leader line when they had to move away.

import assert from "node:assert/strict";
import { test } from "node:test";
import { percentages, place } from "../../js/views/labels.js";

const BOUNDS = [0, 0, 300, 200];
const overlap = (a, b) => Math.min(a[2], b[2]) - Math.max(a[0], b[0]) > 0 && Math.min(a[3], b[3]) - Math.max(a[1], b[1]) > 0;
const inside = (a, [x0, y0, x1, y1]) => a[0] >= x0 && a[1] >= y0 && a[2] <= x1 && a[3] <= y1;
const dot = (x, y, r = 4) => [x - r, y - r, x + r, y + r];

test("a free label sits up and to the right of its point, with no leader", () => {
  const [p] = place([{ x: 100, y: 100, w: 30, h: 12, r: 4 }], { bounds: BOUNDS });
  assert.ok(p.box[0] > 100 && p.box[3] < 100, `${p.box}`);
  assert.equal(p.leader, null);
});

test("at the right edge the label turns to the left, inside the plot", () => {
  const [p] = place([{ x: 295, y: 100, w: 40, h: 12, r: 4 }], { bounds: BOUNDS });
  assert.ok(p.box[2] < 295 && inside(p.box, BOUNDS), `${p.box}`);
});

test("toward: the label goes the way it is asked first", () => {
  const [p] = place([{ x: 100, y: 100, w: 30, h: 12, r: 4, toward: Math.PI / 2 }], { bounds: BOUNDS });
  assert.ok(p.box[1] > 100, `${p.box}`); // below: +y is down on screen
});

test("labels on one spot never cover each other, and the later ones get leaders", () => {
  const labels = Array.from({ length: 10 }, (_, i) => ({ x: 150, y: 100, w: 20 + 3 * i, h: 12, r: 4 }));
  const out = place(labels, { bounds: BOUNDS, marks: [dot(150, 100)] });
  out.forEach((a, i) => {
    assert.ok(inside(a.box, BOUNDS));
    out.slice(i + 1).forEach((b) => assert.ok(!overlap(a.box, b.box), `${a.box} / ${b.box}`));
  });
  assert.ok(
    out.some((a) => a.leader),
    "crowded labels move out with a leader",
  );
});

test("random scatters: no overlaps with labels or marks, all inside", () => {
  let seed = 11;
  const random = () => (seed = (seed * 16807) % 2147483647) / 2147483647;
  for (let trial = 0; trial < 200; trial++) {
    const pts = Array.from({ length: 8 }, () => [20 + 260 * random(), 20 + 160 * random()]);
    const marks = pts.map(([x, y]) => dot(x, y));
    const labels = pts.map(([x, y]) => ({ x, y, w: 15 + 40 * random(), h: 13, r: 4 }));
    const out = place(labels, { bounds: BOUNDS, marks, lines: [[0, 100, 300, 100]] });
    out.forEach((a, i) => {
      assert.ok(inside(a.box, BOUNDS), `${a.box}`);
      marks.forEach((m) => assert.ok(!overlap(a.box, m), `label ${a.box} on mark ${m}`));
      out.slice(i + 1).forEach((b) => assert.ok(!overlap(a.box, b.box), `${a.box} / ${b.box}`));
    });
  }
});

test("a label next to its point is nearer to it than to any other point", () => {
  // another point sits where the first choice (up and right) would put the label
  const marks = [dot(100, 100), dot(140, 88, 3)];
  const [p] = place([{ x: 100, y: 100, w: 30, h: 12, r: 4 }], { bounds: BOUNDS, marks });
  const d = (x, y) => Math.hypot(Math.min(Math.max(x, p.box[0]), p.box[2]) - x, Math.min(Math.max(y, p.box[1]), p.box[3]) - y);
  assert.ok(p.leader || d(100, 100) <= d(140, 88), `${p.box}`);
});

test("boxes already taken (ticks, titles) are avoided", () => {
  const taken = [[110, 70, 200, 96]];
  const [p] = place([{ x: 100, y: 100, w: 30, h: 12, r: 4 }], { bounds: BOUNDS, taken });
  assert.ok(!overlap(p.box, taken[0]), `${p.box}`);
});

test("a point outside the plot still gets a label inside it", () => {
  const [p] = place([{ x: 320, y: -15, w: 60, h: 12, r: 4 }], { bounds: BOUNDS });
  assert.ok(inside(p.box, BOUNDS), `${p.box}`);
  assert.ok(p.leader);
});

test("an optional label with no free spot is left out; a required one still shows", () => {
  const bounds = [0, 0, 40, 20],
    marks = [[0, 0, 40, 20]]; // the whole plot is covered
  const [a, b] = place(
    [
      { x: 20, y: 10, w: 30, h: 12, r: 4, optional: true },
      { x: 20, y: 10, w: 30, h: 12, r: 4 },
    ],
    { bounds, marks },
  );
  assert.equal(a, null);
  assert.ok(b && inside(b.box, bounds));
});

test("percentages: the article's row and random rows add up to 100", () => {
  const e = [Math.exp(2.97), Math.exp(1.44), Math.exp(-1.35)],
    s = e[0] + e[1] + e[2];
  assert.deepEqual(percentages(e.map((x) => x / s)), [81, 18, 1]);
  assert.deepEqual(percentages([1 / 3, 1 / 3, 1 / 3]), [34, 33, 33]);
  assert.deepEqual(percentages([0, 0]), [0, 0]);
  let seed = 5;
  const random = () => (seed = (seed * 16807) % 2147483647) / 2147483647;
  for (let t = 0; t < 500; t++) {
    const row = Array.from({ length: 1 + (t % 9) }, () => random() ** 4);
    const total = row.reduce((a, b) => a + b, 0),
      p = percentages(row.map((x) => x / total));
    assert.equal(
      p.reduce((a, b) => a + b, 0),
      100,
    );
    p.forEach((x, i) => assert.ok(Number.isInteger(x) && Math.abs(x - (100 * row[i]) / total) < 1));
  }
});
