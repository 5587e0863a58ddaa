"""The exported page's first paint shows the stage before the head thumbnails: the grid is drawn
in the first frame while every thumbnail's room is already taken, and the thumbnails (your own
heads, or a model's every layer × head) are drawn after it, in the same boxes, so nothing moves."""

from types import SimpleNamespace

import numpy as np
import pytest

from attnwidget import AttentionWidget

pytestmark = pytest.mark.browser

# Runs before the page's own script: at the start of every frame, until the weights grid has a
# pixel, it notes what that frame shows: the thumbnails drawn, whether the page says they are
# complete, and where every part is. The first frame with the grid is the first paint.
WATCH = """(() => {
  const box = (e) => { const r = e.getBoundingClientRect(); return [r.left, r.top, r.width, r.height]; };
  const drawn = (c) => c.width > 0
    && new Uint32Array(c.getContext('2d').getImageData(0, 0, c.width, c.height).data.buffer).some((p) => p !== 0);
  const tick = () => {
    const grid = [...document.querySelectorAll('.aw-root canvas.aw-grid')].find((c) => c.offsetWidth > 0);
    if (!grid || !drawn(grid)) return requestAnimationFrame(tick);
    const heads = document.querySelector('.aw-heads');
    window.firstPaint = {
      thumbs: [...heads.querySelectorAll('img.aw-thumb')].map((i) => !!i.getAttribute('src')),
      complete: heads.dataset.complete,
      boxes: window.boxes(),
    };
  };
  window.boxes = () => Object.fromEntries(
    ['.aw-controls', '.aw-heads', '.aw-head', '.aw-thumb', '.aw-strip', '.aw-token', '.aw-caption', '.aw-body',
     '.aw-readout', '.aw-measure']
      .map((sel) => [sel, [...document.querySelectorAll(`.aw-root ${sel}`)]
        .filter((e) => e.offsetWidth > 0).map(box)]));
  requestAnimationFrame(tick);
})();"""

# Every thumbnail drawn: an image of its bitmap, loaded, with a pixel that is not blank.
THUMBS_DRAWN = """() => [...document.querySelectorAll('.aw-heads img.aw-thumb')].map((i) => {
  if (!(i.complete && i.naturalWidth > 0)) return false;
  const c = document.createElement('canvas');
  [c.width, c.height] = [i.naturalWidth, i.naturalHeight];
  const ctx = c.getContext('2d');
  ctx.drawImage(i, 0, 0);
  return new Uint32Array(ctx.getImageData(0, 0, c.width, c.height).data.buffer).some((p) => p !== 0);
})"""


def first_paint_and_after(browser, w, path, width=1100):
    """w exported to path and opened: (what its first paint showed, the boxes once every part is drawn,
    whether each thumbnail is drawn then)."""
    w.to_html(path, theme="light")
    context = browser.new_context(viewport={"width": width, "height": 900}, bypass_csp=True)
    try:
        context.add_init_script(WATCH)
        page = context.new_page()
        page.goto(path.as_uri())
        page.wait_for_function("window.firstPaint !== undefined")
        page.wait_for_function("document.querySelector('.aw-root').attnwidget.ready()")
        return page.evaluate("window.firstPaint"), page.evaluate("window.boxes()"), page.evaluate(THUMBS_DRAWN)
    finally:
        context.close()


def assert_same_boxes(before, after):
    assert before.keys() == after.keys()
    for sel in before:
        assert len(before[sel]) == len(after[sel]), sel
        for a, b in zip(before[sel], after[sel]):
            assert a == pytest.approx(b, abs=0.5), f"{sel} moved: {a} at the first paint, {b} once all is drawn"


def test_your_own_heads_thumbnails_come_after_the_first_paint_in_the_room_kept_for_them(browser, tmp_path):
    rng = np.random.default_rng(0)
    q, k, v = rng.normal(size=(3, 12, 64, 16)).astype(np.float32)
    w = AttentionWidget(tokens=[f"t{i}" for i in range(64)], q=q, k=k, v=v, stage="weights")
    first, after, drawn = first_paint_and_after(browser, w, tmp_path / "heads.html")
    # the first paint: the grid, and 12 thumbnails' room with no picture yet
    assert first["thumbs"] == [False] * 12
    assert first["complete"] != "true"
    assert len(first["boxes"][".aw-thumb"]) == 12
    assert all(width >= 84 and height >= 84 for _, _, width, height in first["boxes"][".aw-thumb"])
    # then every thumbnail, each in the box it had at the first paint; nothing else moved either
    assert drawn == [True] * 12
    assert_same_boxes(first["boxes"], after)


def test_a_models_overview_comes_after_the_first_paint_without_moving_the_stages(browser, tmp_path):
    layers, heads, n = 3, 4, 10
    rng = np.random.default_rng(1)
    found = SimpleNamespace(
        tokens=[f"t{i}" for i in range(n)],
        layers=[tuple(rng.normal(size=(heads, n, 8)) for _ in range(3)) for _ in range(layers)],
        causal=True,
        scale=None,
        model_name="fake",
    )
    w = AttentionWidget._from_model(found, 0, 0, {"stage": "weights"})
    first, after, drawn = first_paint_and_after(browser, w, tmp_path / "overview.html", width=700)
    assert first["thumbs"] == [False] * (layers * heads)
    assert drawn == [True] * (layers * heads)
    assert_same_boxes(first["boxes"], after)
