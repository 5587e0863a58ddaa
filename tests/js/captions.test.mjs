// The stages' captions: an image's tokens stage says they are its patches, and an exercise's
// hidden-scores and secret captions still apply on an image's page.
import assert from "node:assert/strict";
import { test } from "node:test";
import { captionOf } from "../../js/views/stages.js";

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
