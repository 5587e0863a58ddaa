"""The page for a long text (LongWidget) in a real JupyterLab and as an exported page: the head's
map arrives pooled, zooms down to exact cells asked of the kernel, a click focuses a row in Python,
the token strip keeps the same few chips at any length and finds tokens, and an exported page says
what it holds."""

import re

import numpy as np
import pytest

pytestmark = pytest.mark.browser

N = 32_768
SETUP = f"""
import numpy as np
from attnwidget import LongWidget
rng = np.random.default_rng(0)
words = ["<b>bold</b>", "river", "bank", "the"] + [f"w{{i}}" for i in range(60)]
tokens = [words[i % len(words)] for i in range({N})]
q = rng.normal(size=(2, {N}, 16)).astype(np.float32)
k = rng.normal(size=(1, {N}, 16)).astype(np.float32)
w = LongWidget(tokens=tokens, q=q, k=k, v=k, window=4096, focus=20_000)
short = LongWidget(tokens=tokens[:1024], q=q[:, :1024], k=k[:, :1024], v=k[:, :1024])
w
"""


@pytest.fixture(scope="module")
def live(open_notebook):
    page, kernel, errors = open_notebook("long.ipynb", [SETUP, "short", "w"], viewport=(1200, 1800))
    roots = page.locator(".aw-long")
    roots.nth(2).wait_for()  # (the third: a second view of w)
    canvas = roots.first.locator("canvas.aw-long-canvas")
    page.wait_for_function("(c) => c.dataset.shows === 'map'", arg=canvas.element_handle(), timeout=60_000)
    yield page, kernel, errors, roots.first
    kernel.close()
    page.context.close()


def shows(canvas):
    return canvas.evaluate("(c) => c.dataset.shows")


def test_zoomed_in_the_cells_are_asked_of_the_kernel_and_are_its_own(live, artifacts):
    page, kernel, errors, root = live
    canvas = root.locator("canvas.aw-long-canvas")
    canvas.focus()
    for _ in range(24):  # from 32,768 rows on a side to the fewest, by the keys
        page.keyboard.press("+")
    page.wait_for_function("(c) => c.dataset.shows === 'cells'", arg=canvas.element_handle(), timeout=30_000)
    r0, r1, c0, c1 = map(int, canvas.evaluate("(c) => c.dataset.view").split(","))
    assert r1 - r0 <= 8 and c1 - c0 <= 8
    assert "each cell's weight, exact, written in it" in root.locator(".aw-long-status").inner_text()
    page.keyboard.press("ArrowDown")  # a pan step, then its cells again
    page.wait_for_function(
        "([c, r]) => c.dataset.shows === 'cells' && +c.dataset.view.split(',')[0] > r",
        arg=[canvas.element_handle(), r0],
        timeout=30_000,
    )
    r0, r1, c0, c1 = map(int, canvas.evaluate("(c) => c.dataset.view").split(","))
    root.screenshot(path=str(artifacts / "long-cells.png"))
    box = canvas.bounding_box()
    d = canvas.evaluate("(c) => ({w: c.clientWidth, h: c.clientHeight})")
    side = d["h"] - 22 - 4  # TOP and the bottom margin (long-matrix.js)
    left = d["w"] - 24 - side
    i, j = r0 + 1, c0  # (a cell inside the window, read through its tooltip)
    span = (r1 - r0) if (r1 - r0) else 1
    canvas.hover(position={"x": left + (j - c0 + 0.5) * side / span, "y": 22 + (i - r0 + 0.5) * side / span})
    tip = root.locator(".aw-tip")
    tip.wait_for()
    text = tip.inner_text()
    want = kernel.eval(f"w.long.tile(0, 0, ({i}, {i + 1}), ({j}, {j + 1})).weights[0, 0]")
    if "closed" in text:  # (outside the window or ahead: then the kernel's cell is exactly 0)
        assert want == 0
    else:
        got = float(re.search(r"weight ([\d.e+-]+)", text).group(1))
        assert got == pytest.approx(want, rel=1e-3)
        assert f"row {i:,}" in text and f"column {j:,}" in text
    assert box and not errors


def test_a_click_on_the_map_focuses_its_row_in_python_and_the_strip_and_row_follow(live):
    page, kernel, errors, root = live
    canvas = root.locator("canvas.aw-long-canvas")
    root.get_by_role("button", name="whole map").click()
    page.wait_for_function("(c) => c.dataset.view === '0,32768,0,32768'", arg=canvas.element_handle())
    d = canvas.evaluate("(c) => ({w: c.clientWidth, h: c.clientHeight})")
    side = d["h"] - 26
    left = d["w"] - 24 - side
    canvas.click(position={"x": left + side / 2, "y": 22 + side * 0.75})
    row = kernel.wait_for("w.focus", lambda f: abs(f - 0.75 * N) < N / side + 2)
    assert abs(row - 0.75 * N) < N / side + 2
    page.wait_for_function(
        "([r, f]) => r.querySelector('.aw-long-row-title').textContent.startsWith(`Row ${f.toLocaleString('en-US')} `)",
        arg=[root.element_handle(), row],
        timeout=20_000,
    )
    chip = root.locator('.aw-long-chip[aria-selected="true"]')
    assert chip.locator(".aw-long-pos").inner_text() == f"{row:,}"
    weights = kernel.eval("w.row()[0]")  # the strongest keys the page names are the kernel's own
    top = int(np.argsort(-np.asarray(weights), kind="stable")[0])
    assert f"#{top:,}" in root.locator(".aw-long-key").first.inner_text()
    assert not errors


def test_the_strip_holds_the_same_chips_at_1024_and_32768_tokens_and_finds_tokens(live):
    page, kernel, errors, root = live
    long_chips = root.locator(".aw-long-chip").count()
    short_chips = page.locator(".aw-long").nth(1).locator(".aw-long-chip").count()
    assert long_chips == short_chips and 5 <= long_chips <= 30
    search = root.get_by_role("searchbox")
    search.fill("#12,345")
    search.press("Enter")
    assert kernel.wait_for("w.focus", lambda f: f == 12_345) == 12_345
    search.fill("<b>bold</b>")  # a token that looks like HTML is found, and shown as text
    search.press("Enter")
    found = kernel.wait_for("w.focus", lambda f: f > 12_345 and f % 64 == 0)
    assert found == 12_352  # the next one after 12,345 (every 64th token)
    chip = root.locator('.aw-long-chip[aria-selected="true"]')
    chip.wait_for()
    assert chip.locator(".aw-long-tok").inner_text() == "<b>bold</b>" and root.locator("b:text('bold')").count() == 0
    assert re.match(r"“<b>bold</b>”: \d+ of 512, at position 12,352", root.locator(".aw-long-found").inner_text())
    assert root.locator(".aw-long-chip").count() == long_chips  # (scrolled far: still the same chips)
    assert not errors


def test_the_temperature_dial_sets_the_widgets_temperature_and_a_new_map_comes(live):
    page, kernel, errors, root = live
    canvas = root.locator("canvas.aw-long-canvas")
    dial = root.get_by_role("slider", name="temperature")
    dial.evaluate("(d) => { d.value = String(Math.log10(0.5)); d.dispatchEvent(new Event('change')); }")
    # the widget's own temperature (the LongAttention it shows keeps its own)
    assert kernel.wait_for("[w.temperature, w.long.temperature]", lambda t: t == [0.5, 1.0]) == [0.5, 1.0]
    page.wait_for_function(
        "(r) => r.querySelector('.aw-long-t').textContent === 'T = 0.5'"
        " && r.querySelector('canvas.aw-long-canvas').dataset.shows === 'map'",
        arg=root.element_handle(),
        timeout=60_000,
    )
    kernel.run("w.temperature = 1.0")
    page.wait_for_function("(r) => r.querySelector('.aw-long-t').textContent === 'T = 1'", arg=root.element_handle())
    assert canvas.is_visible() and not errors


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_an_exported_page_draws_what_it_holds_and_says_what_it_does_not(browser, tmp_path, scheme):
    from attnwidget import LongWidget

    n = 4096
    rng = np.random.default_rng(1)
    q = rng.normal(size=(3, n, 8)).astype(np.float32)
    w = LongWidget(tokens=[f"t{i}" for i in range(n)], q=q, k=q[:1], v=q[:1], focus=100)
    path = tmp_path / "long.html"
    w.to_html(path, heads=[0, 1], map_size=128, theme=scheme)
    page = browser.new_context(viewport={"width": 700, "height": 1600}).new_page()
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(path.as_uri())
    root = page.locator(".aw-long")
    canvas = root.locator("canvas.aw-long-canvas")
    page.wait_for_function("(c) => c.dataset.shows === 'map'", arg=canvas.element_handle())
    assert "holds layer 0's heads 0 and 1" in root.locator(".aw-long-holds").inner_text()
    assert root.locator(".aw-long-row-title").inner_text().startswith("Row 100 “t100” (layer 0, head 0), exact")
    assert ("aw-dark" in root.get_attribute("class")) == (scheme == "dark")
    assert root.get_by_role("slider", name="temperature").is_disabled()  # (the page holds one temperature's)
    root.get_by_role("combobox", name="head").select_option("2")  # a head the page does not hold
    page.wait_for_function("(c) => c.dataset.shows === 'nothing'", arg=canvas.element_handle())
    assert "This page holds no map of layer 0, head 2" in root.locator(".aw-long-status").inner_text()
    root.get_by_role("combobox", name="head").select_option("1")
    page.wait_for_function("(c) => c.dataset.shows === 'map'", arg=canvas.element_handle())
    root.get_by_role("searchbox").fill("#2000")  # a row the page does not hold
    root.get_by_role("searchbox").press("Enter")
    page.wait_for_function(
        "(r) => r.querySelector('.aw-long-row-title').textContent.includes('this page does not hold this row')",
        arg=root.element_handle(),
    )
    canvas.focus()
    for _ in range(6):
        page.keyboard.press("+")
    page.wait_for_function(
        "(r) => r.querySelector('.aw-long-status').textContent.includes('computed by a live notebook')",
        arg=root.element_handle(),
    )
    assert not errors


def test_the_wheel_zooms_about_the_pointer_and_a_drag_pans(live):
    page, kernel, errors, root = live
    canvas = root.locator("canvas.aw-long-canvas")
    root.get_by_role("button", name="whole map").click()
    view = lambda: list(map(int, canvas.evaluate("(c) => c.dataset.view").split(",")))
    d = canvas.evaluate("(c) => ({w: c.clientWidth, h: c.clientHeight})")
    side = d["h"] - 26
    left = d["w"] - 24 - side
    canvas.hover(position={"x": left + side * 0.25, "y": 22 + side * 0.25})
    page.mouse.wheel(0, -600)  # in, about the point a quarter of the way down and across
    page.wait_for_function("(c) => c.dataset.view !== '0,32768,0,32768'", arg=canvas.element_handle())
    r0, r1, c0, c1 = view()
    assert r1 - r0 < N / 2 and r0 < N / 4 < r1 and c0 < N / 4 < c1
    box = canvas.bounding_box()
    x, y = box["x"] + left + side / 2, box["y"] + 22 + side / 2
    page.mouse.move(x, y)
    page.mouse.down()
    page.mouse.move(x - side / 4, y - side / 4, steps=5)  # the picture follows the pointer: later rows and columns
    page.mouse.up()
    after = view()
    assert after[0] > r0 and after[2] > c0 and abs((after[1] - after[0]) - (r1 - r0)) <= 1  # (rounded ends)
    assert kernel.eval("w.focus") != after[0]  # (a drag is not a click: no row focused)
    assert not errors


def test_two_views_of_one_widget_each_get_their_own_answers(live):
    page, kernel, errors, root = live
    views = page.locator(".aw-long")
    first, second = views.nth(0), views.nth(2)
    first.locator("canvas.aw-long-canvas").focus()
    page.keyboard.press("+")  # (the first view zoomed: it asks a region as well as the map)
    kernel.run("w.temperature = 0.5; w.head = 1")
    for view in (first, second):
        page.wait_for_function(
            "(c) => c.dataset.shows !== 'nothing' && c.dataset.shown === '0/1/max/0.5'",
            arg=view.locator("canvas.aw-long-canvas").element_handle(),
            timeout=60_000,
        )
        page.wait_for_function(
            "(r) => r.querySelector('.aw-long-row-title').textContent.includes('head 1), exact')",
            arg=view.element_handle(),
            timeout=30_000,
        )
    kernel.run("w.temperature = 1.0; w.head = 0")
    assert not errors
