// The stages' captions: an image's tokens stage says they are its patches, and an exercise's
// hidden-scores and secret captions still apply on an image's page.
import assert from "node:assert/strict";
import { test } from "node:test";
import { captionOf, mapTitles } from "../../js/views/stages.js";

test("an image's captions keep the exercises' own", () => {
  assert.match(captionOf({ stage: "tokens", image: true }), /^The image as tokens/);
  for (const image of [false, true]) {
    assert.equal(captionOf({ stage: "scores", hint: false, image }), captionOf({ stage: "scores", hint: false }));
    assert.equal(captionOf({ stage: "weights", secret: "eff", hint: true, image }), captionOf({ stage: "weights", secret: "eff", hint: true }));
  }
});

test("position's words name the focused token and its turn", () => {
  const rope = captionOf({ stage: "qk", hint: true, position: { scheme: "rope" }, reader: "bank", focus: 5 });
  assert.match(rope, /bank's query turned 5 × θ/);
  const alibi = captionOf({ stage: "scores", hint: true, position: { scheme: "alibi", slope: 1 / 256, biased: false }, bias: true });
  assert.match(alibi, /m = 0\.00391 for this head/);
  assert.doesNotMatch(alibi, /Here each score also has a bias added/);
});

test("a differential pair's stages say which map they show, and the difference's budget", () => {
  const pair = { head: 2, heads: [0, 2], lam: 0.25, shown: "map 2" };
  assert.match(captionOf({ stage: "weights", hint: true, pair }), /head 2's softmax is map 2 of the pair of heads 0 and 2/);
  assert.match(captionOf({ stage: "weights", hint: true, pair }), /every row sums to exactly 1/); // (its own softmax)
  const difference = { ...pair, shown: "difference" };
  const weights = captionOf({ stage: "weights", hint: true, pair: difference });
  assert.match(weights, /Each row sums to 1 − λ = 0\.750, not 1/);
  assert.doesNotMatch(weights, /exactly 1/);
  assert.match(captionOf({ stage: "blend", hint: true, pair: difference }), /can land outside the values' hull/);
  assert.match(captionOf({ stage: "scores", hint: true, pair: difference }), /head 2's own scores \(map 2 of the pair\)/);
  // a live page waiting for the other head says so, and does not claim the difference
  const waiting = captionOf({ stage: "weights", hint: true, pair: difference, waiting: true });
  assert.match(waiting, /while head 0's, the pair's other map, comes from the kernel/);
  assert.match(waiting, /every row sums to exactly 1/);
  assert.deepEqual(mapTitles(null, false), { scores: "scores", weights: "weights" });
  assert.equal(mapTitles(difference, true).weights, "map 1 − λ·map 2: head 0's weights − 0.250 × head 2's");
  assert.equal(mapTitles(pair, false).scores, "scores of head 2 (map 2 of the pair of heads 0 and 2)");
});
