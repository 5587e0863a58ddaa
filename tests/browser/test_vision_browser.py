"""A vision model's page: its patches drawn as the image's own tiles in the token strip, the focused
row's weights (or a measure's row) as a map over the image, a click on the image focusing that
patch, a 224 × 224 image at patch 16 as live as a text of 197 tokens, and pictures that hold the
image. Small ViTs from random configs (nothing is downloaded) on a synthetic gradient image."""

import base64
import io
import re

import numpy as np
import pytest

from attnwidget import AttentionWidget

pytestmark = pytest.mark.browser

ROOT = "document.querySelector('.aw-root').attnwidget"
READY = f"{ROOT}.ready()"
FRAMES = "new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)))"
# each tile's pixels, in the main strip's order: [index, width, height, RGBA...]
TILES = """() => [...document.querySelectorAll('.aw-root > .aw-strip .aw-token')].flatMap((b) => {
  const c = b.querySelector('canvas.aw-tile');
  if (!c) return [];
  const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
  return [[Number(b.dataset.index), c.width, c.height, Array.from(d)]];
})"""


@pytest.fixture(scope="module")
def tf():
    pytest.importorskip("torch")
    pytest.importorskip("PIL")
    return pytest.importorskip("transformers")


def gradient(side):
    """An RGB image (uint8): gradients, so every patch differs from every other."""
    y, x = np.mgrid[0:side, 0:side]
    return np.stack([x * 255 // side, y * 255 // side, (3 * x + 5 * y) % 256], axis=-1).astype(np.uint8)


def vit_widget(tf, side=32, patch=8, hidden=32):
    import torch

    torch.manual_seed(0)
    config = tf.ViTConfig(
        attn_implementation="eager", image_size=side, patch_size=patch, hidden_size=hidden, num_hidden_layers=2,
        num_attention_heads=2, intermediate_size=2 * hidden,
    )  # fmt: skip
    model = tf.ViTForImageClassification(config).eval()
    processor = tf.ViTImageProcessorPil(size={"height": side, "width": side})
    return AttentionWidget.from_transformers(model, processor, gradient(side))


def seen(w):
    """The image as the model saw it (the widget's own PNG), height × width × 3."""
    from PIL import Image

    data = base64.b64decode(w.image["src"].partition(",")[2])
    return np.asarray(Image.open(io.BytesIO(data)).convert("RGB"))


def opened(browser, w, path, width=1100, theme="auto"):
    w.to_html(path, theme=theme)
    page = browser.new_context(viewport={"width": width, "height": 1000}, bypass_csp=True).new_page()
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(path.as_uri())
    page.wait_for_function(READY)
    return page, errors


def click_patch(page, w, r, c):
    box = page.locator(".aw-image-map").bounding_box()
    rows, cols = w.image["rows"], w.image["cols"]
    page.mouse.click(box["x"] + (c + 0.5) * box["width"] / cols, box["y"] + (r + 0.5) * box["height"] / rows)
    focus = w.image["first"] + r * cols + c
    page.wait_for_function(f"{ROOT}.model.get('focus') === {focus} && {ROOT}.image().focus === {focus}")
    return focus


def test_the_strip_draws_each_patch_as_its_tile_and_the_map_follows_the_focused_row(browser, tmp_path, tf):
    w = vit_widget(tf)
    w.focus = 6  # r1c1
    first, rows, cols, patch = (w.image[k] for k in ("first", "rows", "cols", "patch"))
    page, errors = opened(browser, w, tmp_path / "vit.html")
    try:
        # one tile a patch, each the patch of the image the model saw; [CLS] stays a text chip
        image, tiles = seen(w), page.evaluate(TILES)
        assert [t[0] for t in tiles] == list(range(first, first + rows * cols))
        for index, width, height, data in tiles:
            r, c = divmod(index - first, cols)
            assert (width, height) == (patch, patch)
            got = np.reshape(data, (height, width, 4))
            want = image[r * patch : (r + 1) * patch, c * patch : (c + 1) * patch]
            assert np.abs(got[..., :3].astype(int) - want).max() <= 2 and (got[..., 3] == 255).all()
        cls = page.locator(".aw-root > .aw-strip .aw-token[data-index='0']")
        assert cls.locator("canvas").count() == 0 and cls.locator(".aw-token-text").text_content() == "[CLS]"
        # an image is not written token by token, and the tokens stage says they are its patches
        assert not page.locator(".aw-gen-control").is_visible()
        page.evaluate("document.querySelector('.aw-root').attnwidget.model.set('stage', 'tokens')")
        page.wait_for_function("document.querySelector('.aw-caption').textContent.startsWith('The image as tokens')")
        page.evaluate("document.querySelector('.aw-root').attnwidget.model.set('stage', 'weights')")
        page.wait_for_function(f"{ROOT}.image().shown === 'weights'")
        # the map over the image: the page's own row of weights, which is Python's
        n = len(w.tokens)
        for click in (None, (2, 3)):
            focus = click_patch(page, w, *click) if click else 6
            w.focus = focus
            got = page.evaluate(f"{ROOT}.image()")
            row = np.reshape(page.evaluate(f"{ROOT}.numbers()")["weights"], (n, n))[focus]
            assert got["shown"] == "weights" and got["outlined"] == focus - first
            np.testing.assert_allclose(got["values"], row[first:], rtol=0, atol=1e-12)
            np.testing.assert_allclose(got["values"], w.weights[focus][first:], rtol=0, atol=1e-6)
            assert got["specials"] == [["[CLS]", pytest.approx(w.weights[focus][0], abs=1e-6)]]
            said = re.search(r"\[CLS\] ([\d.]+)", page.locator(".aw-image-specials").inner_text())
            assert float(said[1]) == pytest.approx(w.weights[focus][0], rel=5e-3)  # three figures
            assert f"{w.tokens[focus]}" in page.locator(".aw-image-caption").inner_text()
        # [CLS] focused from the strip: its row over the image, no patch outlined
        cls.click()
        page.wait_for_function(f"{ROOT}.image().focus === 0")
        got, w.focus = page.evaluate(f"{ROOT}.image()"), 0
        assert got["outlined"] is None
        np.testing.assert_allclose(got["values"], w.weights[0][first:], rtol=0, atol=1e-6)
        # the arrow keys move across the image's patches
        page.locator(".aw-image-map").focus()
        page.keyboard.press("ArrowRight")
        page.wait_for_function(f"{ROOT}.model.get('focus') === {first}")
        page.keyboard.press("ArrowDown")
        page.wait_for_function(f"{ROOT}.model.get('focus') === {first + cols}")
        # before the weights stage the image is drawn bare: the weights wait for their stage
        page.evaluate(f"{ROOT}.model.set('stage', 'qk')")
        page.evaluate(FRAMES)
        assert page.evaluate(f"{ROOT}.image()")["shown"] == ""
        assert page.locator(".aw-image-map").is_visible()
        assert errors == []
    finally:
        page.context.close()


def test_with_rollout_shown_the_map_is_pythons_rollout_row(browser, tmp_path, tf):
    w = vit_widget(tf)
    w.set_state({"focus": 9, "layer": 1, "measure": "rollout"})
    first = w.image["first"]
    page, errors = opened(browser, w, tmp_path / "rollout.html")
    try:
        page.wait_for_selector(".aw-measure[data-state='current']")
        for layer in (1, 0):
            page.locator("select.aw-layer").select_option(str(layer))
            page.wait_for_function(f"{ROOT}.model.get('layer') === {layer}")
            page.evaluate(FRAMES)
            got = page.evaluate(f"{ROOT}.image()")
            w.layer = layer
            assert got["shown"] == "rollout"
            np.testing.assert_allclose(got["values"], w.rollout()[layer][9][first:], rtol=0, atol=1e-5)
            assert [t for t, _ in got["specials"]] == ["[CLS]"]
            assert got["specials"][0][1] == pytest.approx(w.rollout()[layer][9][0], abs=1e-5)
            caption = page.locator(".aw-image-caption").inner_text()
            assert f"rollout up to layer {layer}" in caption and w.tokens[9] in caption
        # the weights again, by the view's own switch, and back
        page.locator(".aw-image-switch button[data-map='weights']").click()
        page.wait_for_function(f"{ROOT}.image().shown === 'weights'")
        np.testing.assert_allclose(page.evaluate(f"{ROOT}.image()")["values"], w.weights[9][first:], atol=1e-6)
        page.locator(".aw-image-switch button[data-map='rollout']").click()
        page.wait_for_function(f"{ROOT}.image().shown === 'rollout'")
        # the measure closed: the weights
        page.locator(".aw-measure-choice[data-measure='rollout']").click()
        page.wait_for_function(f"{ROOT}.image().shown === 'weights'")
        assert page.locator(".aw-image-switch").is_hidden()
        assert errors == []
    finally:
        page.context.close()


def test_a_224_image_at_patch_16_draws_as_a_text_of_197_tokens_does(browser, tmp_path, tf):
    w = vit_widget(tf, side=224, patch=16, hidden=64)
    assert len(w.tokens) == 197
    page, errors = opened(browser, w, tmp_path / "big.html")
    try:
        assert page.locator(".aw-root > .aw-strip canvas.aw-tile").count() == 196
        got = page.evaluate(f"{ROOT}.image()")
        np.testing.assert_allclose(got["values"], w.weights[w.focus][1:], atol=1e-6)
        focus = click_patch(page, w, 13, 0)
        w.focus = focus
        np.testing.assert_allclose(page.evaluate(f"{ROOT}.image()")["values"], w.weights[focus][1:], atol=1e-6)
        # the strip keeps the focused tile in view
        assert page.locator(f".aw-root > .aw-strip .aw-token[data-index='{focus}']").is_visible()
        assert errors == []
    finally:
        page.context.close()


def test_pictures_hold_the_image(browser, tmp_path, tf):
    from PIL import Image

    w = vit_widget(tf)
    w.stage = "tokens"  # the image bare: its pixels can be compared
    page, _ = opened(browser, w, tmp_path / "picture.html", width=1100, theme="light")
    try:
        svg = page.evaluate(f"{ROOT}.snapshot('svg')")
    finally:
        page.context.close()
    # the image view in the SVG: a group at its place holding the image as a PNG data URL
    group = r'<g transform="translate\(([\d.]+) ([\d.]+)\)" role="img" aria-label="The image[^"]*">(.*?)</g>'
    found = re.search(group, svg)
    assert found, "no image view in the SVG"
    x, y, inner = float(found[1]), float(found[2]), found[3]
    size = re.search(r'<image[^>]*width="([\d.]+)" height="([\d.]+)"[^>]*href="data:image/png;base64,', inner)
    assert size, "the image view's group holds no image"
    width, height = float(size[1]), float(size[2])
    assert svg.count("data:image/png") >= 1 + 16  # the view's, and each tile's in the strip
    w.save_png(tmp_path / "vit.png", scale=1)
    png = np.asarray(Image.open(tmp_path / "vit.png").convert("RGB")).astype(int)
    region = png[round(y) + 2 : round(y + height) - 2, round(x) + 2 : round(x + width) - 2]
    assert region.std() > 20  # not blank
    want = np.asarray(Image.fromarray(seen(w)).resize((region.shape[1], region.shape[0]), Image.BILINEAR)).astype(int)
    assert np.abs(region - want).mean() < 12  # the image itself, where it is on the page


def test_in_jupyterlab_a_224_image_is_live_and_a_click_on_it_reaches_the_kernel(open_notebook, tf):
    setup = """
import numpy as np, torch, transformers as tf
from attnwidget import AttentionWidget
torch.manual_seed(0)
config = tf.ViTConfig(attn_implementation="eager", image_size=224, patch_size=16, hidden_size=64,
                      num_hidden_layers=2, num_attention_heads=2, intermediate_size=128)
y, x = np.mgrid[0:224, 0:224]
image = np.stack([x, y, (x + y) // 2], axis=-1).astype(np.uint8)
w = AttentionWidget.from_transformers(tf.ViTModel(config).eval(), tf.ViTImageProcessorPil(size={"height": 224,
                                      "width": 224}), image, stage="weights")
w
"""
    page, kernel, errors = open_notebook("vision.ipynb", [setup])
    try:
        page.wait_for_function(READY, timeout=60_000)
        assert page.locator(".aw-root > .aw-strip canvas.aw-tile").count() == 196
        box = page.locator(".aw-image-map").bounding_box()
        page.mouse.click(box["x"] + 2.5 * box["width"] / 14, box["y"] + 1.5 * box["height"] / 14)  # r1c2
        assert kernel.wait_for("w.focus", lambda f: f == 1 + 14 + 2) == 17
        want = np.array(kernel.eval("w.weights[17].tolist()"))
        page.wait_for_function(f"{ROOT}.image().focus === 17")
        np.testing.assert_allclose(page.evaluate(f"{ROOT}.image()")["values"], want[1:], atol=1e-6)
        assert [e for e in errors if "favicon" not in e] == []
    finally:
        page.context.close()
