"""Words and numbers as they are meant to read: maths and counts keep their case, the query dial's
labels stand apart, and a grid of small weights writes enough figures to tell them apart."""

import itertools
import pathlib

import numpy as np
import pytest

from attnwidget import AttentionWidget

pytestmark = pytest.mark.browser

ROOT = "document.querySelector('.aw-root').attnwidget"


def opened(browser, w, path: pathlib.Path, width=1100, record=False):
    """The widget's exported page, ready; ``record``: every text drawn on a canvas kept (RECORD_CANVAS_TEXT)."""
    w.to_html(path, theme="light")
    page = browser.new_context(viewport={"width": width, "height": 1000}, bypass_csp=True).new_page()
    if record:
        page.add_init_script(RECORD_CANVAS_TEXT)
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(path.as_uri())
    page.wait_for_function(f"{ROOT}.ready()")
    return page, errors


def test_captions_keep_the_case_they_are_written_in(browser, tmp_path):
    """ALiBi's ramp is −m·|i − j|, not −M·|I − J|; the map is of "all 2 texts", not "ALL 2 TEXTS"."""
    w = AttentionWidget(["I sat by the river bank", "I put my money in the bank"], position="alibi", stage="scores")
    w.qk_map = True
    page, errors = opened(browser, w, tmp_path / "alibi.html")
    try:
        captions = page.locator(".aw-root figcaption")
        shown = [c for c in captions.all() if c.is_visible()]
        assert shown, "captions drawn"
        for c in shown:  # what the reader sees is what was written
            assert c.evaluate("(e) => getComputedStyle(e).textTransform") == "none"
            if not c.locator("select").count():
                assert c.inner_text() == c.evaluate("(e) => e.textContent")
        ramp = page.locator(".aw-root figcaption", has_text="ALiBi's ramp")
        assert "−m·|i − j|, m = " in ramp.inner_text()
        page.wait_for_selector(".aw-qk:not([hidden]) figcaption")
        assert "all 2 texts" in page.locator(".aw-qk figcaption").inner_text()
        assert errors == []
    finally:
        page.context.close()


# The dial's labels, each with its box, its arrow's tip and its leader (if any); the turn arc's points;
# every arrow's tip (the arrowheads). An arrow comes right before its label, a leader right before that.
DIAL = """() => {
  const plot = document.querySelector('.aw-dial');
  const box = (t) => { const b = t.getBBox(); return [b.x, b.y, b.x + b.width, b.y + b.height]; };
  const ends = (l, a = 'x2', b = 'y2') => [Number(l.getAttribute(a)), Number(l.getAttribute(b))];
  const labels = [...plot.querySelectorAll('text')].map((t) => {
    const arrow = t.previousElementSibling, leader = arrow?.previousElementSibling;
    const led = leader?.classList.contains('aw-leader');
    return {
      text: t.textContent, box: box(t), key: t.classList.contains('aw-key-label'), tip: ends(arrow),
      leader: led ? [...ends(leader, 'x1', 'y1'), ...ends(leader)] : null,
    };
  });
  const arc = plot.querySelector('.aw-turn'), along = (i) => arc.getPointAtLength((i / 60) * arc.getTotalLength());
  const turn = arc ? Array.from({ length: 61 }, (_, i) => [along(i).x, along(i).y]) : [];
  const tips = [...plot.querySelectorAll('line.aw-key, line.aw-query, line.aw-query-given')].map((l) => ends(l));
  return { labels, turn, tips };
}"""


def apart(a, b, gap=2):
    return a[2] + gap <= b[0] or b[2] + gap <= a[0] or a[3] + gap <= b[1] or b[3] + gap <= a[1]


def covers(box, point, pad=0):
    return box[0] - pad <= point[0] <= box[2] + pad and box[1] - pad <= point[1] <= box[3] + pad


def crosses(segment, box):
    """Does the segment pass through the box (sampled finely: boxes are text, segments leaders)?"""
    x1, y1, x2, y2 = segment
    return any(covers(box, (x1 + (x2 - x1) * t / 50, y1 + (y2 - y1) * t / 50), -1) for t in range(51))


def distance(box, point):
    dx, dy = max(box[0] - point[0], 0, point[0] - box[2]), max(box[1] - point[1], 0, point[1] - box[3])
    return (dx * dx + dy * dy) ** 0.5


def dial_problems(got):
    """What makes the dial's labels hard to read: two touching, one on the turn's arc or an arrowhead,
    one whose arrow is not plain (its leader crosses another label; without one, another tip is nearer)."""
    labels, found = got["labels"], []
    for a, b in itertools.combinations(labels, 2):
        if not apart(a["box"], b["box"]):
            found.append(f"{a['text']!r} and {b['text']!r} overlap")
    for label in labels:
        name, others = repr(label["text"]), [t for t in got["tips"] if t != label["tip"]]
        if any(covers(label["box"], p, 1) for p in got["turn"]):
            found.append(f"{name} on the turn")
        if any(covers(label["box"], t, 4) for t in others):
            found.append(f"{name} on an arrowhead")
        if label["leader"]:
            if not covers([*label["tip"], *label["tip"]], label["leader"][:2], 10):
                found.append(f"{name}'s leader starts away from its arrow")
            found += [
                f"{name}'s leader crosses {o['text']!r}"
                for o in labels
                if o is not label and crosses(label["leader"], o["box"])
            ]
        elif not all(distance(label["box"], label["tip"]) < distance(label["box"], t) for t in others):
            found.append(f"{name} is nearer another arrow")
    return found


@pytest.mark.parametrize(
    "text, position, focuses",
    [
        ("I sat by the river bank", "rope", range(6)),
        ("I sat by the river bank", "none", [5]),
        ("I put my money in the bank", "rope", [6, 3]),
        ("I sat on the river bank and read a book by the water", "rope", [5, 12]),
    ],
)
def test_the_query_dials_labels_stand_apart_each_by_its_own_arrow(browser, tmp_path, text, position, focuses):
    """RoPE's short keys meet round the origin with the turn's arc: their labels stand out round it."""
    w = AttentionWidget(text, position=position, stage="qk")
    page, errors = opened(browser, w, tmp_path / "dial.html")
    try:
        for focus in focuses:
            page.evaluate(f"{ROOT}.model.set('focus', {focus})")
            drawn = f"document.querySelector('.aw-dial').ariaLabel.startsWith({w.tokens[focus] + chr(39)!r})"
            page.wait_for_function(f"{ROOT}.ready() && {drawn}")
            got, where = page.evaluate(DIAL), f"{text!r}, {position}, focus {focus}"
            assert dial_problems(got) == [], where
            # every key named where there are few; the heaviest where a long text's crowd them (a label
            # that would cover another is left out)
            arrows, named = page.locator(".aw-dial line.aw-key").count(), sum(label["key"] for label in got["labels"])
            assert named == arrows if arrows <= 8 else named >= 8, where
        assert errors == []
    finally:
        page.context.close()


# every text drawn on a canvas, by the canvas's classes: what the reader sees in a grid's cells
RECORD_CANVAS_TEXT = """(() => {
  window.__drawn = [];
  const fillText = CanvasRenderingContext2D.prototype.fillText;
  CanvasRenderingContext2D.prototype.fillText = function (text, ...rest) {
    window.__drawn.push([this.canvas.className, String(text)]);
    return fillText.call(this, text, ...rest);
  };
})()"""


def test_a_long_rows_small_weights_are_written_with_figures_enough(browser, tmp_path):
    """A ViT's 197 tokens: each weight near 1/197. The detail grid's cells, the colour bar's ends and
    its title write them to the same two significant figures of the largest, not "0.00" and "0.01"."""
    tf = pytest.importorskip("transformers")
    pytest.importorskip("torch")
    pytest.importorskip("PIL")
    from test_vision_browser import vit_widget

    w = vit_widget(tf, side=224, patch=16, hidden=64)
    w.stage = "weights"
    page, _ = opened(browser, w, tmp_path / "vit.html", record=True)
    try:
        page.evaluate("window.__drawn = []")
        page.evaluate(f"{ROOT}.model.set('focus', 3)")  # a redraw, recorded
        page.wait_for_function(f"{ROOT}.ready() && window.__drawn.length > 0")
        drawn = [t for cls, t in page.evaluate("window.__drawn") if "aw-detail" in cls]
        cells = [t for t in drawn if t.replace(".", "", 1).isdigit()]
        assert len(cells) >= 16 * 16, drawn[:20]  # the window's cells, with their Σ row and eff. columns
        weights = np.asarray(page.evaluate(f"Array.from({ROOT}.numbers().weights)")).reshape(197, 197)
        top = weights.max()
        decimals = max(2, 1 - int(np.floor(np.log10(top))))
        assert top < 0.05 and decimals >= 3
        window = weights[:16, :16]  # rows 0–15, columns 0–15: the detail's window
        written = {t for t in cells if len(t.split(".")[1]) == decimals}  # (the grid may draw more than once)
        assert written == {f"{v:.{decimals}f}" for v in window.ravel()}, sorted(written)
        assert len(written) > 1  # they tell the weights apart
        # the colour bar's ends and its title say the largest as the cells do
        legend = page.locator(".aw-panel:not([hidden]) .aw-legend").last.inner_text()
        largest = f"{top:.{decimals}f}"
        assert f"colour stretched to the largest, {largest})" in legend and legend.rstrip().endswith(largest), legend
        # and the row in words: two figures of its largest (the focused row's own, below 0.01)
        row = weights[3]
        places = 1 - int(np.floor(np.log10(row.max())))
        read = page.locator(".aw-read").all_inner_texts()
        assert read and all(len(t.split()[-1].split(".")[1]) == places for t in read), read
        assert read[0].split()[-1] == f"{row.max():.{places}f}", read
    finally:
        page.context.close()


def test_the_measure_panels_small_numbers_are_written_with_figures_enough(browser, tmp_path):
    """weight × ‖value‖ of short values (‖v‖ near 0.01): the panel's cells and its colour bar write two
    significant figures of the largest, as the weights grid does, not a grid of "0.00"."""
    rng = np.random.default_rng(4)
    n = 6
    q, k, v = rng.normal(size=(n, 4)), rng.normal(size=(n, 4)), rng.normal(size=(n, 2)) * 0.01
    w = AttentionWidget(tokens=list("abcdef"), q=q, k=k, v=v, stage="weights", measure="norms")
    norms = w.norms()[0]
    top = norms.max()
    decimals = 1 - int(np.floor(np.log10(top)))
    assert top < 0.05 and decimals >= 3
    page, _ = opened(browser, w, tmp_path / "norms.html", record=True)
    try:
        page.wait_for_function("window.__drawn.length > 0")
        page.locator(".aw-measure .aw-legend").first.wait_for()
        drawn = {t for _, t in page.evaluate("window.__drawn")}
        want = {f"{x:.{decimals}f}" for x in norms.ravel()}
        assert want <= drawn, sorted(want - drawn)[:10]
        legend = page.locator(".aw-measure .aw-legend").first.inner_text()
        assert legend.rstrip().endswith(f"{top:.{decimals}f}"), legend
    finally:
        page.context.close()
