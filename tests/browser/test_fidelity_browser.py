"""The page teaches what the articles say: the temperature shown is the temperature used, and a
row shown as whole percentages adds up to 100, as the text says."""

import re

import numpy as np
import pytest

from attnwidget import AttentionWidget

pytestmark = pytest.mark.browser

SWEEP = """() => {
  const root = document.querySelector('.aw-root'), slider = root.querySelector('.aw-slider');
  const out = [];
  for (let p = 0; p <= Number(slider.max); p++) {
    slider.value = String(p);
    slider.dispatchEvent(new Event('input', { bubbles: true }));
    root.attnwidget.redraw();
    out.push([root.attnwidget.model.get('temperature'), root.querySelector('.aw-temp-value').textContent]);
  }
  return out;
}"""


def open_page(browser, w, tmp_path, name="page.html"):
    path = tmp_path / name
    w.to_html(path)
    page = browser.new_context(viewport={"width": 1100, "height": 900}, bypass_csp=True).new_page()
    page.goto(path.as_uri())
    page.wait_for_selector(".aw-root")
    return page


def test_every_slider_position_uses_the_temperature_it_shows(browser, tmp_path):
    page = open_page(browser, AttentionWidget(stage="weights", focus=5), tmp_path)
    swept = page.evaluate(SWEEP)
    for t, text in swept:
        assert text == f"T = {t:.2f}" and round(t, 2) == t, (t, text)
    used = {t for t, _ in swept}
    assert {0.1, 0.2, 1.0, 5.0} <= used  # the lab's temperatures are reachable by dragging
    assert len(used) > 300  # and the log feel is kept: every shown value a position of its own
    # a drag that crosses T = 1.00 (the default, the lab's reference) can stop on it, as on 0.20
    on = {t: sum(1 for u, _ in swept if u == t) for t in (0.2, 1.0)}
    assert on[1.0] >= 8 and on[0.2] >= 8, on
    page.context.close()


def test_the_lab_figures_by_dragging_and_by_keys(browser, tmp_path):
    page = open_page(browser, AttentionWidget(stage="weights", focus=5), tmp_path)
    root = page.locator(".aw-root")
    slider = root.locator(".aw-slider")
    slider.focus()
    page.keyboard.press("ArrowRight")  # 1.00 → 1.1, then back
    assert page.evaluate("document.querySelector('.aw-root').attnwidget.model.get('temperature')") == 1.1
    page.keyboard.press("ArrowLeft")
    page.keyboard.press("ArrowLeft")
    assert page.evaluate("document.querySelector('.aw-root').attnwidget.model.get('temperature')") == 0.99
    page.keyboard.press("ArrowRight")
    page.wait_for_function("document.querySelector('.aw-temp-value').textContent === 'T = 1.00'")
    assert "3.13 effective tokens" in root.locator(".aw-readout").inner_text()
    # drag to the position labelled 0.20
    p = page.evaluate("""() => { const s = document.querySelector('.aw-slider');
      for (let p = 0; p <= 1000; p++) { s.value = String(p); s.dispatchEvent(new Event('input', {bubbles: true}));
        if (document.querySelector('.aw-root').attnwidget.model.get('temperature') === 0.2) return p; } return -1; }""")
    assert p >= 0
    page.wait_for_function("document.querySelector('.aw-temp-value').textContent === 'T = 0.20'")
    assert "river 0.951" in root.locator(".aw-readout").inner_text()
    for key, want in [("ArrowRight", 0.21), ("ArrowLeft", 0.2), ("Home", 0.1), ("End", 5.0)]:
        page.keyboard.press(key)
        assert page.evaluate("document.querySelector('.aw-root').attnwidget.model.get('temperature')") == want
    page.context.close()


def test_a_temperature_set_from_python_is_shown_as_it_is(browser, tmp_path):
    page = open_page(browser, AttentionWidget(stage="weights", temperature=0.2371), tmp_path)
    assert page.locator(".aw-temp-value").inner_text() == "T = 0.2371"
    page.context.close()


@pytest.mark.parametrize("sentence", [None, "I put my money in the bank and left"])
def test_the_token_strip_percentages_add_up_to_100(browser, tmp_path, sentence):
    w = AttentionWidget(sentence, stage="weights")
    page = open_page(browser, w, tmp_path)
    model = "document.querySelector('.aw-root').attnwidget"
    for t in (0.1, 0.2, 0.5, 1.0, 2.0, 5.0):
        for focus in range(len(w.tokens)):
            page.evaluate(
                f"{model}.model.set('temperature', {t}); {model}.model.set('focus', {focus}); {model}.redraw()"
            )
            shown = [int(re.sub(r"\D", "", s)) for s in page.locator(".aw-token-weight").all_inner_texts()]
            assert sum(shown) == 100, (t, focus, shown)
            w.temperature, w.focus = t, focus
            assert max(abs(np.array(shown) - 100 * w.weights[focus])) < 1  # each within a point of the truth
    page.context.close()


# Every visible piece of text in the widget, with its colour and what is behind it (the nearest
# painted background, composited over the page), as WCAG contrast ratios. Canvas cell text has its
# own rule (ink by the cell's colour); disabled buttons are exempt, as WCAG exempts them.
CONTRAST = """() => {
  const parse = (c) => { const m = c.match(/[\\d.]+/g).map(Number); \
return [m[0], m[1], m[2], m.length > 3 ? m[3] : 1]; };
  const over = ([r, g, b, a], [R, G, B]) => [r * a + R * (1 - a), g * a + G * (1 - a), b * a + B * (1 - a)];
  const lum = (c) => { const [r, g, b] = c.map((x) => { x /= 255; \
return x <= 0.03928 ? x / 12.92 : ((x + 0.055) / 1.055) ** 2.4; });
    return 0.2126 * r + 0.7152 * g + 0.0722 * b; };
  const behind = (el) => {
    const layers = [];
    for (let e = el; e; e = e.parentElement) {
      const c = parse(getComputedStyle(e).backgroundColor);
      if (c[3] > 0) layers.push(c);
      if (c[3] >= 1) break;
    }
    let color = parse(getComputedStyle(document.body).backgroundColor).slice(0, 3);
    if (parse(getComputedStyle(document.body).backgroundColor)[3] === 0) color = [255, 255, 255];
    for (const c of layers.reverse()) color = over(c, color);
    return color;
  };
  const root = document.querySelector('.aw-root'), bad = [];
  const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    const el = node.parentElement, text = node.textContent.trim();
    if (!text || !el.getClientRects().length || el.closest('button:disabled, [hidden], option, select')) continue;
    const style = getComputedStyle(el);
    if (style.visibility === 'hidden') continue;
    let alpha = 1;
    for (let e = el; e; e = e.parentElement) alpha *= Number(getComputedStyle(e).opacity);
    const isSvg = el instanceof SVGElement;
    const ink = parse(isSvg ? style.fill : style.color);
    ink[3] *= alpha * (isSvg ? Number(style.fillOpacity) : 1);
    const bg = behind(isSvg ? el.closest('svg').parentElement : el), fg = over(ink, bg);
    const [hi, lo] = [lum(fg), lum(bg)].sort((a, b) => b - a), ratio = (hi + 0.05) / (lo + 0.05);
    if (ratio < 4.5) bad.push(`${text.slice(0, 30)} (${el.className.baseVal ?? el.className}): ${ratio.toFixed(2)}`);
  }
  return bad;
}"""


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_every_text_meets_wcag_aa_contrast(browser, tmp_path, theme, artifacts):
    from attnwidget.presets import query_dial

    widgets = {
        "lab": AttentionWidget(focus=5),
        "visually": AttentionWidget(
            ["I sat on the river bank and read", "I put my money in the bank and left"],
            focus=5,
            residual=True,
            causal=True,
        ),
        "dial": query_dial(),
    }
    problems = []
    for name, w in widgets.items():
        path = tmp_path / f"{name}-{theme}.html"
        w.to_html(path, theme=theme)
        page = browser.new_context(viewport={"width": 1200, "height": 1000}, bypass_csp=True).new_page()
        page.goto(path.as_uri())
        page.wait_for_selector(".aw-root")
        for stage in ["tokens", "qk", "scores", "weights", "blend"]:
            for t in (0.1, 1.0, 5.0):
                page.evaluate(
                    "(() => { const a = document.querySelector('.aw-root').attnwidget; "
                    f"a.model.set('stage', '{stage}'); a.model.set('temperature', {t}); a.model.set('cell', [0, 0]); "
                    "a.redraw(); })()"
                )
                problems += [f"{name} {stage} T={t}: {p}" for p in page.evaluate(CONTRAST)]
        page.locator(".aw-root").screenshot(path=str(artifacts / f"contrast-{name}-{theme}.png"))
        page.context.close()
    assert not problems, "\n".join(sorted(set(problems))[:40])


def lab_colour(rgb):
    """CIELAB of an sRGB colour (D65), for colour differences as people see them."""
    c = np.array(rgb[:3]) / 255
    c = np.where(c <= 0.04045, c / 12.92, ((c + 0.055) / 1.055) ** 2.4)
    xyz = (
        np.array([[0.4124, 0.3576, 0.1805], [0.2126, 0.7152, 0.0722], [0.0193, 0.1192, 0.9505]])
        @ c
        / [0.9505, 1.0, 1.089]
    )
    f = np.where(xyz > 0.008856, np.cbrt(xyz), 7.787 * xyz + 16 / 116)
    return np.array([116 * f[1] - 16, 500 * (f[0] - f[1]), 200 * (f[1] - f[2])])


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_small_positive_and_negative_scores_look_different(browser, tmp_path, theme):
    # scores against the first query: the largest, +2% of it, -2% of it, and exactly 0
    k = [[1.0, 0.0], [0.02, 0.0], [-0.02, 0.0], [0.0, 0.0]]
    w = AttentionWidget(tokens=list("abcd"), q=[[1.0, 0.0]] * 4, k=k, v=np.eye(4)[:, :2], stage="scores")
    path = tmp_path / f"signs-{theme}.html"
    w.to_html(path, theme=theme)
    page = browser.new_context(bypass_csp=True, device_scale_factor=1).new_page()
    page.goto(path.as_uri())
    page.wait_for_selector(".aw-root[data-stage=scores]")
    colours = page.evaluate("""() => {
      const c = [...document.querySelectorAll('canvas.aw-grid')].find((e) => e.getClientRects().length);
      const d = c.dataset, ctx = c.getContext('2d');
      return [1, 2, 3].map((j) => Array.from(ctx.getImageData(+d.left + j * +d.cellWidth + 2, +d.top + 2, 1, 1).data));
    }""")
    plus, minus, zero = (lab_colour(c) for c in colours)
    assert np.linalg.norm(plus - minus) >= 20, (theme, colours)
    assert min(np.linalg.norm(plus - zero), np.linalg.norm(minus - zero)) >= 10, (theme, colours)
    # and they are the hues the caption names, already at 2% of the largest score
    caption = page.locator(".aw-caption").inner_text()
    assert "Purple" in caption and "orange" in caption, caption
    for colour, (lo, hi) in ((plus, (280, 330)), (minus, (35, 80))):
        chroma, hue = np.hypot(colour[1], colour[2]), np.degrees(np.arctan2(colour[2], colour[1])) % 360
        assert chroma >= 10 and lo <= hue <= hi, (theme, colours, chroma, hue)
    # the legend gives one range, the matrix's own (d3 writes minus as U+2212)
    spans = page.locator(".aw-legend:visible > span").all_inner_texts()
    ends = [f"{x:.2f}".replace("-", "\u2212") for x in (w.scores.min(), w.scores.max())]
    assert [spans[1], spans[3]] == ends and " to " not in spans[0], spans
    page.context.close()


def test_the_captions_and_chips_say_what_is_drawn(browser, tmp_path):
    words = "I sat on the river bank and read".split()
    page = open_page(
        browser, AttentionWidget(" ".join(words), causal=True, focus=5, stage="tokens"), tmp_path, "causal.html"
    )
    try:
        root = page.locator(".aw-root")
        go = lambda stage: page.evaluate(
            "s => { const a = document.querySelector('.aw-root').attnwidget; "
            "a.model.propose({stage: s}); a.redraw(); }",
            stage,
        )
        # the tokens stage under the causal rule: the caption says so, and the matrix marks the closed cells
        caption = root.locator(".aw-caption").inner_text()
        assert "Every token reads every other" not in caption and "causal" in caption, caption
        grid = ".aw-panel:not([hidden]) canvas.aw-grid"
        pixel = """([sel, i, j]) => { const c = [...document.querySelectorAll(sel)].filter((e) => \
e.getClientRects().length)[0], d = c.dataset;
            const r = c.width / c.getBoundingClientRect().width;
            return Array.from(c.getContext('2d').getImageData(Math.round((+d.left + j * +d.cellWidth + 3) * r), \
Math.round((+d.top + i * +d.cellHeight + 3) * r), 1, 1).data); }"""
        closed_tokens, open_tokens = page.evaluate(pixel, [grid, 0, 7]), page.evaluate(pixel, [grid, 7, 0])
        go("weights")
        assert (
            closed_tokens == page.evaluate(pixel, [grid, 0, 7]) != open_tokens
        )  # hatched as the weights stage hatches it
        # the chips of tokens the row may not read get nothing, as the article says, and say why
        chips = root.locator(".aw-token").all()
        for j in (6, 7):
            assert chips[j].locator(".aw-token-weight").inner_text() == "0%"
            assert "cannot read" in chips[j].get_attribute("title")
        # the query/key stage's caption speaks of the matrices it shows (Q and K), not of a score matrix
        go("qk")
        assert "the matrix shows" not in root.locator(".aw-caption").inner_text()
    finally:
        page.context.close()
    # the sink view alone closes the first column: the caption speaks of that, not of the causal rule
    page = open_page(browser, AttentionWidget(sink=True, focus=5, stage="tokens"), tmp_path, "sink.html")
    try:
        caption = page.locator(".aw-caption").inner_text()
        assert "causal" not in caption and "hatched" in caption, caption
    finally:
        page.context.close()
    # the temperature exercise keeps the effective tokens hidden: so does the caption
    page = open_page(
        browser, AttentionWidget(exercise="temperature", goal=2, focus=5, stage="weights"), tmp_path, "temp.html"
    )
    try:
        assert "Effective tokens" not in page.locator(".aw-caption").inner_text()
    finally:
        page.context.close()
