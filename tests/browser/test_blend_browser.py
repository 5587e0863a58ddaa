"""The blend's arithmetic laid out as the lab describes it: "Multiply down each column of the two
aligned grids, sum across, and the answer is the column on the right." One column per token (the
focused row's weight above that token's value), the products, and the output on the right."""

import numpy as np
import pytest

from attnwidget import AttentionWidget

pytestmark = pytest.mark.browser

RIVER = "I sat on the river bank and read"
MONEY = "I put my money in the bank and left"
GRID = """() => [...document.querySelectorAll('.aw-blend-table tr')].map((r) => [...r.children].map((c) => \
c.textContent))"""


def opened(browser, w, path, width):
    w.to_html(path)
    page = browser.new_context(viewport={"width": width, "height": 1000}).new_page()
    page.goto(path.as_uri())
    page.wait_for_selector(".aw-root[data-stage=blend] .aw-blend-table tr")
    return page


def num(text):
    return float(text.replace("\u2212", "-"))


@pytest.mark.parametrize("temperature", [1.0, 0.2, 5.0])
def test_one_column_per_token_products_down_and_the_output_on_the_right(browser, tmp_path, temperature):
    w = AttentionWidget(stage="blend", focus=5, temperature=temperature)
    page = opened(browser, w, tmp_path / "blend.html", 1200)
    try:
        rows = page.evaluate(GRID)
        header, weights, values, products = rows[0], rows[1], rows[2:4], rows[4:6]
        n = len(w.tokens)
        assert header[1 : n + 1] == list(w.tokens) and header[n + 1] == "output", header
        row = w.weights[5]
        assert [num(t) for t in weights[1 : n + 1]] == pytest.approx(np.round(row, 3), abs=1e-9)
        for c in range(2):
            assert [num(t) for t in values[c][1 : n + 1]] == pytest.approx(np.round(w.v[:, c], 2), abs=1e-9)
            # down each column: weight × value; across: the sum, in the column on the right
            assert [num(t) for t in products[c][1 : n + 1]] == pytest.approx(np.round(row * w.v[:, c], 3), abs=1e-9)
            assert num(products[c][n + 1]) == pytest.approx(round(w.output[5, c], 2), abs=1e-9)
        if temperature == 1.0:
            assert [products[0][n + 1], products[1][n + 1]] == ["0.69", "0.23"]  # the lab's (0.69, 0.23)
        assert len(header) == n + 2  # nothing after the output without the residual
    finally:
        page.context.close()


def test_the_residual_is_two_more_columns_on_the_right(browser, tmp_path):
    w = AttentionWidget([RIVER, MONEY], causal=True, focus=5, stage="blend", residual=True)
    page = opened(browser, w, tmp_path / "mix.html", 1200)
    try:
        rows = page.evaluate(GRID)
        n = len(w.tokens)
        assert rows[0][n + 2 :] == ["+ x(bank)", "= x + mix"], rows[0]
        for c in range(2):
            products = rows[2 + w.v.shape[1] + c]
            assert products[0] == f"a·v{chr(0x2080 + c)}", products
            assert num(products[n + 2]) == pytest.approx(round(w.x[5, c], 2), abs=1e-9)
            assert num(products[n + 3]) == pytest.approx(round(w.residual_output[5, c], 2), abs=1e-9)
    finally:
        page.context.close()


@pytest.mark.parametrize("theme, width", [("light", 700), ("dark", 700), ("light", 600)])
def test_a_nine_token_blend_keeps_its_numbers_at_700_px(browser, tmp_path, theme, width, artifacts):
    # notebook 02's mix widget
    mix = AttentionWidget([RIVER, MONEY], causal=True, focus=RIVER.split().index("bank"), stage="blend", residual=True)
    mix.to_html(tmp_path / "mix.html", theme=theme)
    page = browser.new_context(viewport={"width": width, "height": 1100}).new_page()
    page.goto((tmp_path / "mix.html").as_uri())
    page.wait_for_selector(".aw-root[data-stage=blend] .aw-blend-table tr")
    try:
        matrix = page.locator(".aw-panel:not([hidden]) canvas.aw-grid").first.evaluate("c => ({...c.dataset})")
        # the weights matrix beside the blend keeps a number in every cell, and upright labels
        assert float(matrix["cellWidth"]) >= 34 and float(matrix["cellHeight"]) >= 18, matrix
        assert matrix["slanted"] == "false", matrix
        # and the table fits the widget at 700 px; narrower, it scrolls inside it: nothing runs past the widget
        fits = page.evaluate("""() => { const f = document.querySelector('.aw-figure:has(> .aw-blend-table)');
            return [f.scrollWidth <= f.clientWidth, document.documentElement.scrollWidth <= window.innerWidth]; }""")
        assert fits == [width >= 700, True], fits
        page.locator(".aw-root").screenshot(path=str(artifacts / f"blend-{width}-{theme}.png"))
    finally:
        page.context.close()


PLOT = """() => {
  const plot = document.querySelector('.aw-plot'), r0 = plot.getBoundingClientRect();
  const box = (e) => { const b = e.getBoundingClientRect(); \
return [b.left - r0.left, b.top - r0.top, b.right - r0.left, b.bottom - r0.top]; };
  const centre = (e) => { const b = box(e); return [(b[0] + b[2]) / 2, (b[1] + b[3]) / 2]; };
  const labels = [...plot.querySelectorAll('text.aw-value-label, text.aw-mean-label, \
text.aw-output-label')].map((t) => ({ text: t.textContent, cls: t.getAttribute('class'), box: box(t) }));
  const axes = [...plot.querySelectorAll('line.aw-axis')].map((l) => \
['x1', 'y1', 'x2', 'y2'].map((a) => +l.getAttribute(a)));
  const mean = centre(plot.querySelector('.aw-mean')), dots = [...plot.querySelectorAll('circle.aw-value')].map(centre);
  const leaders = plot.querySelectorAll('line.aw-leader').length;
  return { labels, axes, mean, dots, leaders };
}"""


def distance(p, b):
    return float(np.hypot(min(max(p[0], b[0]), b[2]) - p[0], min(max(p[1], b[1]), b[3]) - p[1]))


@pytest.mark.parametrize(
    "make",
    [
        lambda: AttentionWidget(stage="blend", focus=5, temperature=5.0),
        lambda: AttentionWidget(stage="blend", focus=5, temperature=0.1),
        lambda: AttentionWidget(stage="blend", focus=5),
        lambda: AttentionWidget([RIVER, MONEY], causal=True, focus=5, stage="blend", residual=True),
        lambda: AttentionWidget([RIVER, MONEY], focus=6, stage="blend", residual=True, temperature=5.0),
    ],
)
def test_the_value_plot_labels_read_as_labels(browser, tmp_path, make):
    page = opened(browser, make(), tmp_path / "plot.html", 1200)
    try:
        p = page.evaluate(PLOT)
        boxes = [lab["box"] for lab in p["labels"]]
        for lab in p["labels"]:
            # no label runs across an axis
            for x1, y1, x2, y2 in p["axes"]:
                b = lab["box"]
                if x1 == x2:
                    assert not (b[0] < x1 < b[2] and b[1] < max(y1, y2) and b[3] > min(y1, y2)), (
                        lab,
                        "crosses the y axis",
                    )
                else:
                    assert not (b[1] < y1 < b[3] and b[0] < max(x1, x2) and b[2] > min(x1, x2)), (
                        lab,
                        "crosses the x axis",
                    )
        # two labels on one line are far enough apart not to read as one phrase
        for i, a in enumerate(boxes):
            for b in boxes[i + 1 :]:
                if min(a[3], b[3]) - max(a[1], b[1]) > 2:  # side by side
                    assert max(b[0] - a[2], a[0] - b[2]) >= 8, (p["labels"][i], b)
        # "mean" sits nearer its own mark than any value's dot
        for lab in p["labels"]:
            if "aw-mean-label" in lab["cls"]:
                assert distance(p["mean"], lab["box"]) < min(distance(d, lab["box"]) for d in p["dots"]), (
                    lab,
                    p["mean"],
                )
    finally:
        page.context.close()


def test_the_legend_and_caption_say_what_the_plot_draws(browser, tmp_path):
    page = opened(
        browser,
        AttentionWidget([RIVER, MONEY], causal=True, focus=5, stage="blend", residual=True),
        tmp_path / "mix.html",
        1200,
    )
    try:
        legend = page.locator(".aw-plot-legend, .aw-legend-list, .aw-blend ul").first.inner_text()
        assert "bank's value to its output" in legend, legend  # the dashed line
        caption = page.locator(".aw-caption").inner_text()
        assert "x + mix" in caption and "outside the hull" in caption, caption
    finally:
        page.context.close()
