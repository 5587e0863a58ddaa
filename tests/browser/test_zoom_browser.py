"""Long inputs a person can read: beside a matrix of hundreds of tokens, a detail view of a
window of it, moved by the wheel, a drag and the keys; a click in it picks that cell, in the
page and in Python."""

import re

import numpy as np
import pytest

pytestmark = pytest.mark.browser

N = 300
SETUP = f"""
import numpy as np
from attnwidget import AttentionWidget
rng = np.random.default_rng(0)
z = AttentionWidget(tokens=[f"w{{i}}" for i in range({N})], q=rng.normal(size=({N}, 8)), k=rng.normal(size=({N}, 8)),
                    v=rng.normal(size=({N}, 2)), stage="weights", focus=120)
z
"""


def detail(root):
    canvas = root.locator(".aw-panel:visible canvas.aw-grid").nth(1)
    note = root.locator(".aw-panel:visible .aw-detail-note")
    return canvas, note


def window(note):
    r0, r1, c0, c1 = map(int, re.findall(r"\d+", note.inner_text())[:4])
    return r0, r1 - r0 + 1, c0  # first row, size, first column


def click_cell(canvas, i, j):
    d = canvas.evaluate("(c) => ({...c.dataset})")
    canvas.click(
        position={
            "x": float(d["left"]) + (j + 0.5) * float(d["cellWidth"]),
            "y": float(d["top"]) + (i + 0.5) * float(d["cellHeight"]),
        }
    )


def exported(browser, tmp_path, seed, viewport, **kwargs):
    """An exported page of N random tokens: the widget, the page (its errors in page.errors) and its root."""
    from attnwidget import AttentionWidget

    rng = np.random.default_rng(seed)
    w = AttentionWidget(q=rng.normal(size=(N, 4)), k=rng.normal(size=(N, 4)), v=rng.normal(size=(N, 2)), **kwargs)
    path = tmp_path / f"zoom-{seed}.html"
    w.to_html(path)
    page = browser.new_context(viewport=viewport, bypass_csp=True).new_page()
    page.errors = []
    page.on("pageerror", lambda e: page.errors.append(str(e)))
    page.goto(path.as_uri())
    return w, page, page.locator(".aw-root")


def test_the_detail_window_moves_and_a_click_picks_its_cell_in_python(open_notebook, artifacts):
    page, kernel, errors = open_notebook("zoom.ipynb", [SETUP])
    try:
        root = page.locator(".aw-root")
        canvas, note = detail(root)
        r0, size, c0 = window(note)
        assert r0 <= 120 < r0 + size  # the focused row is in the window
        labels = canvas.get_attribute("aria-label")
        assert f"rows {r0} to {r0 + size - 1}" in labels
        # the keys move it, the wheel zooms it
        canvas.focus()
        page.keyboard.press("ArrowDown")
        page.keyboard.press("ArrowRight")
        page.wait_for_function(
            "(want) => [...document.querySelectorAll('.aw-detail-note')].some((e) => e.textContent.startsWith(want))",
            arg=f"rows {r0 + 1}–{r0 + size}, columns {c0 + 1}–",
        )
        canvas.hover()
        page.keyboard.down("Control")
        page.mouse.wheel(0, -200)  # Ctrl + wheel zooms in
        page.keyboard.up("Control")
        page.wait_for_function(
            "(was) => [...document.querySelectorAll('.aw-detail-note')].some((e) => e.offsetParent && "
            "!e.textContent.includes(was))",
            arg=f"columns {c0 + 2}–{c0 + size + 1} ",
        )
        assert window(note)[1] < size
        # a click in the detail picks that cell, in Python too
        r0, size, c0 = window(note)
        click_cell(canvas, 2, 3)
        assert kernel.wait_for("z.cell", lambda c: c == [r0 + 2, c0 + 3]) == [r0 + 2, c0 + 3]
        assert kernel.eval("z.focus") == r0 + 2
        root.screenshot(path=str(artifacts / "zoom-live.png"))
        assert not errors, errors
    finally:
        kernel.close()
        page.context.close()


def test_the_window_follows_a_click_on_the_overview(browser, tmp_path):
    w, page, root = exported(browser, tmp_path, 1, {"width": 1200, "height": 1400}, stage="scores")
    overview = root.locator(".aw-panel:visible canvas.aw-grid").nth(0)
    canvas, note = detail(root)
    click_cell(overview, 250, 40)  # far from the window
    page.wait_for_function("document.querySelector('.aw-root').attnwidget.model.get('cell')?.[0] === 250")
    # the window follows on the redraw after the change: wait for it
    page.wait_for_function("""() => { \
const m = /rows (\\d+)–(\\d+)/.exec(document.querySelector('.aw-panel:not([hidden]) .aw-detail-note').textContent);
                                      return m && m[1] <= 250 && 250 <= m[2]; }""")
    r0, size, c0 = window(note)
    assert r0 <= 250 < r0 + size and c0 <= 40 < c0 + size
    # hovering a detail cell tells its row, column and value
    click_cell(canvas, 0, 0)
    canvas.hover(
        position={"x": float(canvas.get_attribute("data-left")) + 5, "y": float(canvas.get_attribute("data-top")) + 5}
    )
    tip = root.locator(".aw-panel:visible .aw-tip:visible")
    assert f"{w.tokens[r0]} reads {w.tokens[c0]}" in tip.inner_text()
    assert f"score {w.scores[r0, c0]:.3f}".replace("-", "−") in tip.inner_text().replace("-", "−")
    # the window moves under a still pointer: the tip tells the cell now under it
    canvas.focus()
    page.keyboard.press("ArrowDown")
    page.keyboard.press("ArrowRight")
    # (both keys' redraws: the rows move on the first, the columns on the second)
    page.wait_for_function(
        "([r, c]) => { const t = document.querySelector('.aw-panel:not([hidden]) .aw-detail-note').textContent; "
        "return t.startsWith(`rows ${r}`) && t.includes(`columns ${c}`); }",
        arg=[r0 + 1, c0 + 1],
    )
    assert f"{w.tokens[r0 + 1]} reads {w.tokens[c0 + 1]}" in tip.inner_text()
    assert not page.errors, page.errors
    page.context.close()


def test_the_token_strip_follows_the_window(browser, tmp_path):
    w, page, root = exported(browser, tmp_path, 2, {"width": 1000, "height": 1400}, stage="weights", focus=10)
    canvas, note = detail(root)
    canvas.focus()
    for _ in range(12):
        page.keyboard.press("Shift+ArrowRight")  # half a window at a time, far to the right
    page.wait_for_function(
        "() => /columns (\\d+)/.exec(document.querySelector('.aw-panel:not([hidden]) .aw-detail-note').textContent)[1] "
        "> 60"
    )
    r0, size, c0 = window(note)
    first = root.locator(f".aw-token[data-index='{c0}']").bounding_box()
    strip = root.locator(".aw-strip").bounding_box()
    assert strip["x"] <= first["x"] and first["x"] + first["width"] <= strip["x"] + strip["width"]
    assert not page.errors, page.errors
    page.context.close()


def test_the_window_is_moved_only_when_asked(browser, tmp_path):
    w, page, root = exported(browser, tmp_path, 3, {"width": 1100, "height": 900}, stage="scores", focus=0)
    overview = root.locator(".aw-panel:visible canvas.aw-grid").nth(0)
    canvas, note = detail(root)
    redrawn = "document.querySelector('.aw-root').attnwidget.redraw()"
    start = window(note)
    canvas.scroll_into_view_if_needed()
    canvas.hover()
    before = page.evaluate("window.scrollY")
    assert before > 0
    page.mouse.wheel(0, -100)  # a plain wheel scrolls the page and leaves the window alone
    page.wait_for_function("(y) => window.scrollY < y", arg=before)
    page.evaluate(redrawn)
    assert window(note) == start
    canvas.focus()
    for _ in range(3):
        page.keyboard.press("+")  # zoomed at the top edge: row 1 stays in view
    page.evaluate(redrawn)
    r0, size, c0 = window(note)
    assert r0 == 0 and size < start[1]
    page.keyboard.press("Control+-")  # the browser's key, not the window's
    page.evaluate(redrawn)
    assert window(note)[1] == size
    # panned columns stay when the focused row changes within the window
    for _ in range(4):
        page.keyboard.press("Shift+ArrowRight")
    page.evaluate(redrawn)
    r0, size, c0 = window(note)
    d = canvas.evaluate("(c) => ({...c.dataset})")
    canvas.click(
        position={"x": float(d["left"]) - 8, "y": float(d["top"]) + 2.5 * float(d["cellHeight"])}
    )  # a row label
    page.wait_for_function("document.querySelector('.aw-root').attnwidget.model.get('focus') === 2")
    page.evaluate(redrawn)
    assert window(note) == (r0, size, c0)
    # a click on the overview's cell brings the window back to it, even the cell already picked
    click_cell(overview, 250, 40)
    page.wait_for_function("document.querySelector('.aw-root').attnwidget.model.get('cell')?.[0] === 250")
    canvas.focus()
    for _ in range(10):
        page.keyboard.press("Shift+ArrowUp")
    page.evaluate(redrawn)
    assert not window(note)[0] <= 250 < window(note)[0] + window(note)[1]
    click_cell(overview, 250, 40)
    page.evaluate(redrawn)
    r0, size, c0 = window(note)
    assert r0 <= 250 < r0 + size and c0 <= 40 < c0 + size
    assert not page.errors, page.errors
    page.context.close()
