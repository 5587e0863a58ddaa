"""What an exported page refuses as Python does, said in the page before anything is drawn: a
vision model's image that does not fit its tokens (its grid, its first patch, its size, its
source), a position scheme your own arrays cannot have, and data that is not JSON (a bare NaN),
each with what was wrong and never a raw JavaScript error."""

import json

import pytest
from test_altered_browser import STATE, open_altered
from test_export import IMAGES
from test_vision_browser import tf, vit_widget

from attnwidget import AttentionWidget

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def vision_page(tf, tmp_path_factory):
    path = tmp_path_factory.mktemp("vision") / "vit.html"
    vit_widget(tf).to_html(path)
    text = path.read_text(encoding="utf-8")
    return text, json.loads(STATE.search(text).group(2))


def said_in(page, errors):
    """The page's message; nothing drawn and nothing thrown."""
    shown = page.locator(".aw-page-error")
    assert shown.count() == 1, f"no message in the page (errors: {errors})"
    assert page.locator(".aw-root").count() == 0 and errors == []
    said = shown.inner_text()
    assert "This page's data cannot be shown" in said and "export it again" in said.lower(), said
    return said


def test_an_unaltered_vision_page_draws_its_image(browser, tmp_path, vision_page):
    page, errors = open_altered(browser, tmp_path, *vision_page)
    try:
        page.wait_for_function("document.querySelector('.aw-root').attnwidget.ready()")
        assert page.evaluate("document.querySelector('.aw-root').attnwidget.image()")["outlined"] is None
        assert page.locator(".aw-image-map").is_visible() and errors == []
    finally:
        page.context.close()


@pytest.mark.parametrize("name", list(IMAGES))
def test_an_image_that_does_not_fit_its_tokens_is_refused_in_the_page(browser, tmp_path, vision_page, name):
    text, payload = vision_page
    change, words = IMAGES[name]
    payload = json.loads(json.dumps(payload))  # (a copy)
    payload["state"]["image"].update(change)
    page, errors = open_altered(browser, tmp_path, text, payload)
    try:
        said = said_in(page, errors)
        assert words in said, said
    finally:
        page.context.close()


def test_an_image_that_is_not_an_image_state_is_refused_in_the_page(browser, tmp_path, vision_page):
    text, payload = vision_page
    payload = json.loads(json.dumps(payload))
    payload["state"]["image"] = [4, 4]
    page, errors = open_altered(browser, tmp_path, text, payload)
    try:
        said = said_in(page, errors)
        assert "'image' must be a vision model's image, {src, rows, cols, first, patch, size}; got [4, 4]." in said
    finally:
        page.context.close()


@pytest.fixture(scope="module")
def own_page(tmp_path_factory):
    path = tmp_path_factory.mktemp("own") / "lab.html"
    AttentionWidget(stage="weights").to_html(path)
    text = path.read_text(encoding="utf-8")
    return text, json.loads(STATE.search(text).group(2))


@pytest.mark.parametrize("scheme", ["learned", "relative", "", "sinusoidal"])
def test_your_own_arrays_with_a_models_position_scheme_are_refused_as_python_refuses_them(
    browser, tmp_path, own_page, scheme
):
    with pytest.raises(Exception) as python:
        AttentionWidget(stage="weights").position = scheme
    text, payload = own_page
    payload = json.loads(json.dumps(payload))
    payload["state"]["position"] = scheme
    page, errors = open_altered(browser, tmp_path, text, payload)
    try:
        said = said_in(page, errors)
        assert str(python.value) in said, (str(python.value), said)
    finally:
        page.context.close()


def test_a_bare_nan_in_the_pages_json_is_named_where_it_is(browser, tmp_path, own_page):
    text, payload = own_page
    payload = json.loads(json.dumps(payload))
    payload["state"]["temperature"] = float("nan")  # json.dumps writes it bare: NaN, which JSON has not
    at = json.dumps(payload).replace("<", "\\u003c").index("NaN")  # (as open_altered writes it)
    page, errors = open_altered(browser, tmp_path, text, payload)
    try:
        said = said_in(page, errors)
        assert f"its data is not valid JSON: it holds NaN at character {at}" in said, said
        assert '"temperature":NaN' in said.replace(" ", "") and "every number must be finite" in said, said
    finally:
        page.context.close()


def test_a_picture_of_other_pixels_than_its_patches_is_not_drawn_and_says_why(browser, tmp_path, vision_page):
    import base64
    import io

    from PIL import Image

    buffer = io.BytesIO()
    Image.new("RGB", (16, 16), (200, 40, 40)).save(buffer, format="PNG")  # half the 32 × 32 its patches cover
    text, payload = vision_page
    payload = json.loads(json.dumps(payload))
    payload["state"]["image"]["src"] = "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode()
    page, errors = open_altered(browser, tmp_path, text, payload)
    try:
        page.wait_for_function("document.querySelector('.aw-root').attnwidget.ready()")
        said = page.locator(".aw-image-caption").inner_text()
        assert "the image is 16 × 16 pixels, but its 4 × 4 patches need 32 × 32: it is not drawn" in said, said
        assert not page.locator(".aw-image-map").is_visible()
        assert page.locator(".aw-strip canvas.aw-tile").count() == 0  # no patch cut from the wrong pixels
        assert errors == []
    finally:
        page.context.close()
