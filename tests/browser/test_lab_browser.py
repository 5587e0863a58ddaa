"""The lab in a real JupyterLab, driven by headless Chromium: every stage renders, clicks and
drags reach the kernel, and Python's changes reach the page."""

import re

import pytest

pytestmark = pytest.mark.browser
STAGES = ["tokens", "qk", "scores", "weights", "blend"]


@pytest.fixture(scope="module")
def lab_nb(open_notebook):
    page, kernel, errors = open_notebook(
        "lab.ipynb", ["from attnwidget import AttentionWidget\nw = AttentionWidget()\nw"]
    )
    yield page, kernel, errors
    kernel.close()
    page.context.close()


def painted_pixels(page, selector):
    """How many pixels of the visible canvases under selector are not blank."""
    return page.evaluate(
        """(sel) => [...document.querySelectorAll(sel)].filter((c) => c.offsetParent).map((c) => {
             const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
             let n = 0; for (let i = 3; i < d.length; i += 4) if (d[i] > 0) n++;
             return n; })""",
        selector,
    )


def test_tokens_show_as_text(lab_nb):
    page, kernel, _ = lab_nb
    assert page.locator(".aw-token-text").all_inner_texts() == ["She", "sat", "by", "the", "river", "bank"]


def test_each_stage_renders_and_reaches_python(lab_nb, artifacts):
    page, kernel, errors = lab_nb
    root = page.locator(".aw-root")
    for stage in STAGES:
        page.click(f".aw-stage[data-stage={stage}]")
        page.wait_for_selector(f".aw-root[data-stage={stage}]")
        page.wait_for_function(
            f"document.querySelector('.aw-stage[data-stage={stage}]').getAttribute('aria-pressed') === 'true'"
        )
        assert kernel.wait_for("w.stage", lambda s, stage=stage: s == stage) == stage
        canvases = painted_pixels(page, ".aw-root .aw-grid")
        assert canvases and all(n > 1000 for n in canvases), f"{stage}: a matrix should be drawn, got {canvases}"
        root.screenshot(path=str(artifacts / f"lab-{stage}.png"))
    # the blend stage's own panel: the table sums to the output and the plot has a hull
    assert page.locator(".aw-blend-table .aw-out").count() == 2
    assert page.locator(".aw-plot .aw-hull").count() == 1
    # Back and Next step through the stages
    page.click(".aw-back")
    page.wait_for_selector(".aw-root[data-stage=weights]")
    page.click(".aw-next")
    page.wait_for_selector(".aw-root[data-stage=blend]")
    assert not errors


def test_click_bank_then_python_sees_focus(lab_nb):
    page, kernel, _ = lab_nb
    kernel.run("w.focus = 0")
    page.wait_for_selector(".aw-token[data-index='0'][aria-pressed=true]")
    page.locator(".aw-token", has_text="bank").click()
    page.wait_for_selector(".aw-token[data-index='5'][aria-pressed=true]")
    assert kernel.wait_for("w.focus", lambda f: f == 5) == 5


def test_slider_drag_reaches_python(lab_nb):
    page, kernel, _ = lab_nb
    kernel.run("w.temperature = 1.0")
    slider = page.locator(".aw-slider")
    box = slider.bounding_box()
    page.mouse.move(box["x"] + box["width"] * 0.5, box["y"] + box["height"] / 2)
    page.mouse.down()
    page.mouse.move(box["x"] + box["width"] * 0.9, box["y"] + box["height"] / 2, steps=8)
    page.mouse.up()
    page.wait_for_function("!document.querySelector('.aw-temp-value').textContent.includes('1.00')")
    shown = float(re.search(r"[\d.]+", page.locator(".aw-temp-value").inner_text()).group())
    assert shown > 2.0
    t = kernel.wait_for("w.temperature", lambda t: abs(t - shown) < 0.006)
    assert t == pytest.approx(shown, abs=0.006)


def test_python_temperature_reaches_the_page(lab_nb, artifacts):
    page, kernel, _ = lab_nb
    kernel.run("w.stage = 'weights'; w.focus = 5; w.temperature = 0.2")
    page.wait_for_function("document.querySelector('.aw-temp-value').textContent.includes('0.20')")
    readout = page.locator(".aw-readout").inner_text()
    assert "bank reads river 0.951" in readout and "itself 0.049" in readout, readout
    # the page's numbers are numpy's
    row = kernel.eval("w.weights[5]")
    for span in page.locator(".aw-read").all():
        j = int(span.get_attribute("data-index"))
        assert float(span.inner_text().split()[-1]) == pytest.approx(row[j], abs=5e-4)
    page.locator(".aw-root").screenshot(path=str(artifacts / "lab-weights-cold.png"))


def luminance(css_color: str) -> float:
    r, g, b = (int(x) / 255 for x in re.findall(r"\d+", css_color)[:3])
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def test_follows_jupyterlab_dark_theme(lab_nb, artifacts):
    page, kernel, _ = lab_nb
    kernel.run("w.stage = 'blend'; w.focus = 5; w.temperature = 1.0")
    colours = (
        "() => { const s = getComputedStyle(document.querySelector('.aw-root')); return [s.backgroundColor, s.color]; }"
    )
    bg, fg = page.evaluate(colours)
    assert luminance(bg) > 0.8 and luminance(fg) < 0.3
    page.evaluate("window.jupyterapp.commands.execute('apputils:change-theme', {theme: 'JupyterLab Dark'})")
    page.wait_for_selector("body[data-jp-theme-light=false]", state="attached")
    page.wait_for_function(f"({colours})()[0] !== {bg!r}")
    bg, fg = page.evaluate(colours)
    assert luminance(bg) < 0.25 and luminance(fg) > 0.7, (bg, fg)
    # the arcs are laid out again once the theme has settled (it hides the notebook for a moment)
    page.wait_for_function(
        "[...document.querySelectorAll('.aw-arc')].length > 0 && "
        "!document.querySelector('.aw-arc').getAttribute('d').startsWith('M 0 ')"
    )
    page.locator(".aw-root").screenshot(path=str(artifacts / "lab-blend-dark.png"))
    page.evaluate("window.jupyterapp.commands.execute('apputils:change-theme', {theme: 'JupyterLab Light'})")
    page.wait_for_selector("body[data-jp-theme-light=true]", state="attached")
