"""'Attention, Visually' in a real JupyterLab: the sentence switcher, the causal toggle, the
query dial, one cell's arithmetic and the heads, each checked from the kernel."""

import numpy as np
import pytest

pytestmark = pytest.mark.browser

SETUP = """
import numpy as np
from attnwidget import AttentionWidget
from attnwidget.presets import query_dial
s = AttentionWidget(["I sat on the river bank and read", "I put my money in the bank and left"], \
focus=5, stage="weights")
display(s)
d = query_dial()
display(d)
rng = np.random.default_rng(0)
h = AttentionWidget(tokens="a b c d e".split(), q=rng.normal(size=(4, 5, 3)), k=rng.normal(size=(4, 5, 3)), \
v=rng.normal(size=(4, 5, 2)), stage="weights")
display(h)
"""


@pytest.fixture(scope="module")
def nb(open_notebook):
    page, kernel, errors = open_notebook("visually.ipynb", [SETUP])
    page.wait_for_function("document.querySelectorAll('.aw-root').length === 3", timeout=60_000)
    roots = page.locator(".aw-root")
    yield page, kernel, errors, roots.nth(0), roots.nth(1), roots.nth(2)
    kernel.close()
    page.context.close()


def test_sentence_switcher(nb, artifacts):
    page, kernel, errors, s, _, _ = nb
    assert s.locator(".aw-sentence").all_inner_texts() == [
        "I sat on the river bank and read",
        "I put my money in the bank and left",
    ]
    s.locator(".aw-sentence[data-index='1']").click()
    s.locator(".aw-token-text", has_text="money").wait_for()
    assert kernel.wait_for("s.sentence_index", lambda i: i == 1) == 1
    assert kernel.eval("s.tokens[s.focus]") == "bank"
    assert s.locator(".aw-token[aria-pressed=true] .aw-token-text").inner_text() == "bank"
    assert "bank reads money" in s.locator(".aw-readout").inner_text()
    s.screenshot(path=str(artifacts / "visually-switched.png"))
    s.locator(".aw-sentence[data-index='0']").click()
    s.locator(".aw-token-text", has_text="river").wait_for()
    assert kernel.wait_for("s.sentence_index", lambda i: i == 0) == 0 and not errors


def test_causal_toggle(nb, artifacts):
    page, kernel, errors, s, _, _ = nb
    s.locator(".aw-causal").check()
    page.wait_for_function(
        "document.querySelector('.aw-root .aw-token[data-index=\"6\"] .aw-token-weight').textContent === '0%'"
    )
    assert kernel.wait_for("s.causal", bool) is True
    assert kernel.eval("s.weights[5, 6:].sum()") == 0
    assert s.locator(".aw-token[data-index='6'] .aw-token-weight").inner_text() == "0%"
    s.screenshot(path=str(artifacts / "visually-causal.png"))
    s.locator(".aw-causal").uncheck()
    page.wait_for_function(
        "document.querySelector('.aw-root .aw-token[data-index=\"6\"] .aw-token-weight').textContent !== '0%'"
    )
    assert kernel.wait_for("s.causal", lambda c: not c) is False


def test_dragging_the_query_arrow_changes_q_in_the_kernel(nb, artifacts):
    page, kernel, errors, _, d, _ = nb
    d.scroll_into_view_if_needed()
    before = kernel.eval("d.q[3]")
    rows = d.locator(".aw-dial-table tbody tr")
    assert rows.nth(0).locator(".aw-dial-weight").inner_text() == "81%"
    assert rows.nth(1).locator(".aw-dial-weight").inner_text() == "18%"
    assert rows.nth(2).locator(".aw-dial-weight").inner_text() == "1%"
    assert rows.nth(0).locator(".aw-dial-score").inner_text() == "0.99"  # the dot product, as in the article
    assert rows.nth(0).locator(".aw-dial-scaled").inner_text() == "2.97"  # × 3, its own step
    d.screenshot(path=str(artifacts / "visually-dial.png"))
    handle = d.locator(".aw-dial-handle").bounding_box()
    # drag the query's tip onto money's key arrow
    tip_x, tip_y, x0, y0 = d.evaluate("""(root) => {
        const label = [...root.querySelectorAll('.aw-key-label')].find((t) => t.textContent.startsWith('money'));
        const line = label.previousElementSibling, r = root.querySelector('.aw-dial').getBoundingClientRect();
        return ['x2', 'y2', 'x1', 'y1'].map((a, i) => (i % 2 ? r.top : r.left) + Number(line.getAttribute(a))); }""")
    page.mouse.move(handle["x"] + handle["width"] / 2, handle["y"] + handle["height"] / 2)
    page.mouse.down()
    page.mouse.move(x0 + 1.2 * (tip_x - x0), y0 + 1.2 * (tip_y - y0), steps=10)
    page.mouse.up()
    page.wait_for_function(
        "[...document.querySelectorAll('.aw-root')][1].querySelector('.aw-dial-table tbody tr:nth-child(2) "
        ".aw-dial-weight').textContent !== '18%'"
    )
    after = kernel.wait_for("d.q[3]", lambda q: q != before)
    assert after != before
    weights = kernel.eval("d.weights[3]")
    assert int(np.argmax(weights)) == 1  # now money's key wins
    shown = rows.nth(1).locator(".aw-dial-weight").inner_text()
    assert shown == f"{round(100 * weights[1])}%"
    d.screenshot(path=str(artifacts / "visually-dial-turned.png"))
    assert not errors


def test_clicking_a_cell_shows_its_arithmetic(nb, artifacts):
    page, kernel, errors, s, _, _ = nb
    kernel.run("s.stage = 'weights'; s.cell = None; s.focus = 0")
    canvas = s.locator(".aw-panel:not([hidden]) .aw-grid").first
    canvas.scroll_into_view_if_needed()
    box, at = canvas.bounding_box(), canvas.evaluate("(c) => ({...c.dataset})")
    page.mouse.click(box["x"] + 2, box["y"] + 2)  # the corner holds no cell
    assert kernel.wait_for("s.cell is None", bool)
    i, j = 5, 4  # bank reads river
    page.mouse.click(
        box["x"] + float(at["left"]) + (j + 0.5) * float(at["cellWidth"]),
        box["y"] + float(at["top"]) + (i + 0.5) * float(at["cellHeight"]),
    )
    page.wait_for_function("document.querySelector('.aw-root .aw-cell:not([hidden])')")
    assert kernel.wait_for("list(s.cell or [])", lambda c: c == [5, 4]) == [5, 4] and kernel.eval("s.focus") == 5
    panel = s.locator(".aw-cell")
    panel.wait_for()
    assert panel.locator(".aw-cell-title").inner_text() == "bank reads river"
    a = {k: kernel.eval(f"s.cell_arithmetic[{k!r}]") for k in ("dot", "score", "tempered", "exp", "weight", "share")}
    for step in ("dot", "score", "tempered", "exp", "weight"):
        shown = float(panel.locator(f"[data-step={step}] .aw-step-value").inner_text().replace("−", "-"))
        assert shown == pytest.approx(a[step], abs=6e-4), step
    share = panel.locator("[data-step=share] .aw-step-value").inner_text().strip("()").replace("−", "-").split(", ")
    np.testing.assert_allclose([float(x) for x in share], a["share"], atol=6e-4)
    s.screenshot(path=str(artifacts / "visually-cell.png"))
    panel.locator(".aw-cell-close").click()
    panel.wait_for(state="hidden")
    assert kernel.wait_for("s.cell is None", bool) and not errors


def test_clicking_a_head_selects_it(nb, artifacts):
    page, kernel, errors, _, _, h = nb
    h.scroll_into_view_if_needed()
    assert h.locator(".aw-head").count() == 4
    h.locator(".aw-head[data-head='2']").click()
    h.locator(".aw-head[data-head='2'][aria-pressed=true]").wait_for()
    assert kernel.wait_for("h.head", lambda h: h == 2) == 2
    # the page now draws head 2: its readout equals numpy's weights for that head
    row = kernel.eval("h.weights[h.focus]")
    for span in h.locator(".aw-read").all():
        j = int(span.get_attribute("data-index"))
        assert float(span.inner_text().split()[-1]) == pytest.approx(row[j], abs=5e-4)
    h.screenshot(path=str(artifacts / "visually-heads.png"))
    assert not errors
