"""Exported pages in headless Chromium with every network request refused: the page renders,
computes what numpy computes, answers the mouse and the keyboard, and makes pictures."""

import re
import struct

import numpy as np
import pytest

from attnwidget import AttentionWidget, attention

pytestmark = pytest.mark.browser


def open_page(browser, path, **context):
    """Open an exported file with the network cut off: any request but the file itself fails the test."""
    # bypass_csp lets the test's own wait_for_function run; the page's CSP still declares no network
    ctx = browser.new_context(viewport={"width": 1100, "height": 1400}, bypass_csp=True, **context)
    page = ctx.new_page()
    problems = []
    page.on("pageerror", lambda e: problems.append(f"error: {e}"))
    page.on("console", lambda m: problems.append(f"console: {m.text}") if m.type == "error" else None)
    page.on("dialog", lambda d: (problems.append(f"dialog: {d.message}"), d.dismiss()))

    def route(r):
        if r.request.url == path.as_uri():
            return r.continue_()
        problems.append(f"request: {r.request.url}")
        return r.abort()

    page.route("**/*", route)
    page.goto(path.as_uri())
    page.wait_for_selector(".aw-root")
    return page, problems


def page_numbers(page):
    return page.evaluate("document.querySelector('.aw-root').attnwidget.numbers()")


def test_exported_page_is_live_with_no_network(browser, tmp_path, artifacts):
    w = AttentionWidget(stage="weights", focus=5)
    path = tmp_path / "lab.html"
    w.to_html(path)
    page, problems = open_page(browser, path)
    root = page.locator(".aw-root")
    assert root.locator(".aw-token-text").all_inner_texts() == w.tokens
    assert "bank reads river 0.556" in root.locator(".aw-readout").inner_text()
    # the slider changes the weights shown
    slider = root.locator(".aw-slider")
    slider.focus()
    for _ in range(40):
        page.keyboard.press("ArrowLeft")
    page.wait_for_function("!document.querySelector('.aw-readout').textContent.includes('0.556')")
    page.evaluate(
        "new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(done)))"
    )  # the last key's redraw
    t = page_numbers(page)["temperature"]
    assert root.locator(".aw-temp-value").inner_text() == f"T = {t:.2f}" and t < 1
    expected = attention(w.q, w.k, w.v, temperature=t).weights[5, 4]
    assert f"river {expected:.3f}" in root.locator(".aw-readout").inner_text()
    # clicking a token changes the focus
    root.locator(".aw-token[data-index='4']").click()
    root.locator(".aw-token[data-index='4'][aria-pressed=true]").wait_for()
    assert root.locator(".aw-readout b").inner_text() == "river"
    # the switchers that need vectors from Python work from the embedded ones
    root.screenshot(path=str(artifacts / "export-lab.png"))
    assert not problems, problems
    page.context.close()


def test_sentence_switching_in_an_exported_page(browser, tmp_path):
    w = AttentionWidget(
        ["I sat on the river bank and read", "I put my money in the bank and left"], focus=5, stage="blend"
    )
    path = tmp_path / "two.html"
    w.to_html(path)
    page, problems = open_page(browser, path)
    root = page.locator(".aw-root")
    root.locator(".aw-sentence[data-index='1']").click()
    root.locator(".aw-token-text", has_text="money").wait_for()
    assert root.locator(".aw-token[aria-pressed=true] .aw-token-text").inner_text() == "bank"
    w.sentence_index = 1  # Python's answer to the same click
    np.testing.assert_allclose(page_numbers(page)["weights"], w.weights.ravel(), atol=1e-6)
    assert not problems, problems
    page.context.close()


def test_keyboard_only(browser, tmp_path, artifacts):
    w = AttentionWidget(stage="tokens")
    path = tmp_path / "keys.html"
    w.to_html(path)
    page, problems = open_page(browser, path)
    root = page.locator(".aw-root")
    # Tab from the top of the page reaches the controls, each with an accessible name
    names = []
    for _ in range(12):
        page.keyboard.press("Tab")
        names.append(
            page.evaluate(
                "(() => { const e = document.activeElement; return e.getAttribute('aria-label') || "
                "e.textContent.trim(); })()"
            )
        )
    assert "Previous stage" in names or "Next stage" in names
    assert "Temperature" in names
    # the stepper from the keyboard
    root.locator(".aw-stage[data-stage=weights]").focus()
    page.keyboard.press("Enter")
    root.locator(".aw-root[data-stage=weights], .aw-stage[data-stage=weights][aria-pressed=true]").first.wait_for()
    assert root.get_attribute("data-stage") == "weights"
    # arrow keys move the focus between tokens; the live summary follows
    root.locator(".aw-token[aria-pressed=true]").focus()
    for _ in range(5):
        page.keyboard.press("ArrowRight")
    root.locator(".aw-token[data-index='5'][aria-pressed=true]").wait_for()
    assert page.evaluate("document.activeElement.dataset.index") == "5"
    assert root.locator(".aw-readout[aria-live]").inner_text().startswith("bank reads river")
    page.keyboard.press("Home")
    root.locator(".aw-token[data-index='0'][aria-pressed=true]").wait_for()
    # the slider from the keyboard
    root.locator(".aw-slider").focus()
    page.keyboard.press("End")
    page.wait_for_function("document.querySelector('.aw-temp-value').textContent === 'T = 5.00'")
    assert root.locator(".aw-slider").get_attribute("aria-valuetext") == "5.00"
    root.screenshot(path=str(artifacts / "export-keyboard.png"))
    assert not problems, problems
    page.context.close()


@pytest.mark.parametrize("theme, dark", [("light", False), ("dark", True)])
def test_theme_option(browser, tmp_path, theme, dark):
    path = tmp_path / f"{theme}.html"
    AttentionWidget(stage="scores").to_html(path, theme=theme)
    page, problems = open_page(browser, path, color_scheme="light")
    bg = page.evaluate("getComputedStyle(document.querySelector('.aw-root')).backgroundColor")
    r, g, b = (int(x) for x in re.findall(r"\d+", bg)[:3])
    assert (r + g + b < 200) == dark, bg
    assert not problems
    page.context.close()


def png_size(data: bytes):
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", data[16:24])


def test_pictures_from_python(tmp_path):
    w = AttentionWidget(stage="blend", focus=5)
    w.save_svg(tmp_path / "lab.svg")
    w.save_png(tmp_path / "lab.png", scale=2)
    svg = (tmp_path / "lab.svg").read_text()
    width, height = (int(x) for x in re.search(r'<svg[^>]* width="(\d+)" height="(\d+)"', svg).groups())
    assert width > 600 and height > 500
    for token in w.tokens:
        assert f">{token}<" in svg
    assert "<foreignObject" not in svg and "data:image" not in svg  # vector: cells as rects, labels as text
    assert svg.count("<rect") >= len(w.tokens) ** 2
    assert png_size((tmp_path / "lab.png").read_bytes()) == (2 * width, 2 * height)


def test_picture_buttons_in_the_page(browser, tmp_path, artifacts):
    path = tmp_path / "buttons.html"
    AttentionWidget(stage="weights", focus=5).to_html(path, theme="light")
    page, problems = open_page(browser, path)
    size = None  # the SVG's, saved first
    for kind in ("svg", "png"):
        with page.expect_download() as info:
            page.click(f".aw-save-{kind}")
        saved = tmp_path / info.value.suggested_filename
        info.value.save_as(saved)
        assert saved.name == f"attention-weights.{kind}"
        if kind == "png":  # the SVG's picture at twice its size
            data = saved.read_bytes()
            assert png_size(data) == (2 * size[0], 2 * size[1])
            (artifacts / "export-button.png").write_bytes(data)
        else:
            svg = saved.read_text()
            assert ">river<" in svg and "<foreignObject" not in svg
            size = tuple(int(x) for x in re.search(r'<svg[^>]* width="(\d+)" height="(\d+)"', svg).groups())
    assert not problems, problems
    page.context.close()
