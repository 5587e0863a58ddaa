"""Pictures as true vector SVG: the matrices as <rect> cells in the page's own colours, text as
<text>, arcs and plots as <path>, no <foreignObject> and none of the controls; librsvg and
Chromium draw the same picture from it, in either theme; a PDF is made from the same SVG; token
text stays text, whatever it holds."""

import base64
import re
import shutil
import subprocess
import sys
import xml.dom.minidom
import xml.etree.ElementTree as ET

import numpy as np
import pytest
from test_export_browser import open_page

from attnwidget import AttentionWidget
from attnwidget.widget import visible_text

pytestmark = pytest.mark.browser

NS = "http://www.w3.org/2000/svg"
ET.register_namespace("", NS)
RSVG = shutil.which("rsvg-convert") or "/usr/bin/rsvg-convert"
CHROME = ["Next ›", "‹ Back", "PNG", "SVG", "Temperature", "Query · Key", "strongest first"]
# What a picture of the lab may hold: shapes, text and what they need; no HTML, no script.
TAGS = {
    "svg",
    "defs",
    "g",
    "rect",
    "text",
    "path",
    "line",
    "circle",
    "clipPath",
    "linearGradient",
    "stop",
    "marker",
    "image",
}
# librsvg against Chromium: fonts are hinted and smoothed a little differently, so pixels at the
# edges of letters differ; blocks of 8 × 8 pixels hide that, and not a missing matrix or panel.
MEAN_DIFF, BLOCK_DIFF = 2.0, 32.0


def need_rsvg():
    if not shutil.which(RSVG):
        pytest.fail(f"librsvg's rsvg-convert not found at {RSVG}; install it (apt-get install librsvg2-bin)")


def tag(e):
    return e.tag.rpartition("}")[2]


def texts(root):
    return ["".join(t.itertext()) for t in root.iter(f"{{{NS}}}text")]


def matrix(root, name):
    """The group a grid canvas became, found by its accessible name."""
    found = [g for g in root.iter(f"{{{NS}}}g") if (g.get("aria-label") or "").startswith(name)]
    assert len(found) == 1, [g.get("aria-label") for g in root.iter(f"{{{NS}}}g")]
    return found[0]


def cells(group):
    """The filled rects of a matrix, as (y, x, fill), in reading order."""
    return sorted(
        (float(r.get("y")), float(r.get("x")), r.get("fill"))
        for r in group.iter(f"{{{NS}}}rect")
        if r.get("fill") not in (None, "none")
    )


def background(root):
    first = next(e for e in root if tag(e) == "rect")
    return tuple(int(first.get("fill")[i : i + 2], 16) for i in (1, 3, 5))


def check_vector(data: bytes, n: int):
    """What every picture of the lab holds; returns its XML tree."""
    text = data.decode("utf-8")
    assert "foreignObject" not in text and "<image" not in text and "<script" not in text
    root = ET.fromstring(data)
    xml.dom.minidom.parseString(data)
    assert {tag(e) for e in root.iter()} <= TAGS, {tag(e) for e in root.iter()} - TAGS
    weights = matrix(root, "weights")
    assert len(cells(weights)) == n * n
    shown = texts(root)
    assert not [c for c in CHROME if any(c in t for t in shown)], shown
    return root


def page_cell_colours(page):
    """The weights matrix's colour in each cell, read off the page's canvas (clear of its number)."""
    return page.evaluate("""() => {
        const c = [...document.querySelectorAll('canvas.aw-grid')].find((c) => (c.getAttribute('aria-label') || \
'').startsWith('weights') && c.offsetParent);
        const d = c.dataset, k = devicePixelRatio, ctx = c.getContext('2d'), out = [];
        for (let i = 0; i < 6; i++) for (let j = 0; j < 6; j++) {
            const p = ctx.getImageData(Math.round((+d.left + j * d.cellWidth + 4) * k), \
Math.round((+d.top + i * d.cellHeight + 4) * k), 1, 1).data;
            out.push('#' + [p[0], p[1], p[2]].map((v) => v.toString(16).padStart(2, '0')).join(''));
        }
        return out; }""")


def same_colours(svg_fills, page_fills):
    rgb = lambda h: np.array([int(h[i : i + 2], 16) for i in (1, 3, 5)])
    assert len(svg_fills) == len(page_fills)
    worst = max(np.abs(rgb(a) - rgb(b)).max() for a, b in zip(svg_fills, page_fills))
    assert worst <= 1, list(zip(svg_fills, page_fills))


def pixels(page, png_or_svg: bytes, kind: str):
    """RGB pixels of a PNG, or of an SVG drawn by Chromium at its own size (as an <img>)."""
    mime = "image/png" if kind == "png" else "image/svg+xml"
    w, h, raw = page.evaluate(
        """async ([src]) => {
        const img = new Image(); img.src = src; await img.decode();
        const c = document.createElement('canvas'); c.width = img.naturalWidth; c.height = img.naturalHeight;
        const ctx = c.getContext('2d'); ctx.drawImage(img, 0, 0);
        const d = ctx.getImageData(0, 0, c.width, c.height).data;
        let s = ''; \
for (let i = 0; i < d.length; i += 0x8000) s += String.fromCharCode.apply(null, d.subarray(i, i + 0x8000));
        return [c.width, c.height, btoa(s)]; }""",
        [f"data:{mime};base64,{base64.b64encode(png_or_svg).decode()}"],
    )
    return np.frombuffer(base64.b64decode(raw), np.uint8).reshape(h, w, 4)[..., :3].astype(float)


def rsvg(svg: bytes, tmp_path, name="out") -> bytes:
    (tmp_path / f"{name}.svg").write_bytes(svg)
    subprocess.run(
        [RSVG, "-o", str(tmp_path / f"{name}.png"), str(tmp_path / f"{name}.svg")],
        check=True,
        capture_output=True,
        timeout=60,
    )
    return (tmp_path / f"{name}.png").read_bytes()


def difference(a, b):
    """(mean absolute difference, largest difference of 8 × 8 block means), 0 to 255."""
    assert a.shape == b.shape, (a.shape, b.shape)
    h, w = (s // 8 * 8 for s in a.shape[:2])
    blocks = lambda x: x[:h, :w].reshape(h // 8, 8, w // 8, 8, 3).mean(axis=(1, 3))
    return np.abs(a - b).mean(), np.abs(blocks(a) - blocks(b)).max()


def without(svg: bytes, drop=None, fill=None) -> bytes:
    """The SVG broken on purpose: the weights matrix left out, or another background."""
    root = ET.fromstring(svg)
    if drop:
        gone = matrix(root, drop)
        next(p for p in root.iter() if gone in list(p)).remove(gone)
    if fill:
        next(e for e in root if tag(e) == "rect").set("fill", fill)
    return ET.tostring(root)


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """The lab saved from Python at the weights and blend stages, in both themes."""
    folder = tmp_path_factory.mktemp("svg")
    out = {}
    for stage in ("weights", "blend"):
        for theme in ("light", "dark"):
            path = folder / f"{stage}-{theme}.svg"
            AttentionWidget(stage=stage, focus=5).save_svg(path, theme=theme)
            out[stage, theme] = path.read_bytes()
    return out


def test_save_svg_is_vector_with_the_pages_colours(saved, browser, tmp_path):
    root = check_vector(saved["weights", "light"], 6)
    weights = matrix(root, "weights")
    # bank's row: its label, and its weight on river as the cell's number
    assert "river" in texts(root) and "bank" in texts(weights)
    assert "0.56" in texts(weights) and "0.74" in texts(weights)
    # the arcs from bank are paths in the accent colour, thicker for more weight
    arcs = [p for p in root.iter(f"{{{NS}}}path") if p.get("stroke") == "#7b3fb5"]
    assert len(arcs) >= 6 and max(float(p.get("stroke-width")) for p in arcs) > 5
    # the focused row's outline
    assert any(r.get("fill") == "none" and r.get("stroke") == "#7b3fb5" for r in weights.iter(f"{{{NS}}}rect"))
    assert background(root) == (255, 255, 255)
    # the cells are the colours the page draws
    path = tmp_path / "lab.html"
    AttentionWidget(stage="weights", focus=5).to_html(path, theme="light")
    page, problems = open_page(browser, path)
    same_colours([f for _, _, f in cells(weights)], page_cell_colours(page))
    assert not problems, problems
    page.context.close()


def test_the_blend_stage_as_vector(saved):
    for theme in ("light", "dark"):
        root = check_vector(saved["blend", theme], 6)
        shown = texts(root)
        assert "bank output (0.69, 0.23)" in shown and "weights × values = output" in shown  # (in its own case)
        assert "0.556" in shown and "river" in shown  # the blend table
        paths = list(root.iter(f"{{{NS}}}path"))
        assert any(p.get("stroke-dasharray") for p in paths)  # the hull
        assert len(list(root.iter(f"{{{NS}}}circle"))) >= 12  # the values and the outputs


@pytest.mark.parametrize("stage", ["weights", "blend"])
@pytest.mark.parametrize("theme", ["light", "dark"])
def test_librsvg_and_chromium_draw_the_same_picture(saved, browser, tmp_path, stage, theme):
    need_rsvg()
    svg = saved[stage, theme]
    page = browser.new_page()
    by_chromium = pixels(page, svg, "svg")
    by_rsvg = pixels(page, rsvg(svg, tmp_path), "png")
    width, height = (float(ET.fromstring(svg).get(k)) for k in ("width", "height"))
    assert by_rsvg.shape[:2] == by_chromium.shape[:2] == (height, width)
    mean, block = difference(by_rsvg, by_chromium)
    assert mean < MEAN_DIFF and block < BLOCK_DIFF, (mean, block)
    # the theme's background, in both renderers
    corner = by_rsvg[:4, :4].mean()
    assert (corner < 60) if theme == "dark" else (corner > 240), corner
    # a broken picture would not pass: no matrix, or a black (white) background
    for broken in (without(svg, drop="weights"), without(svg, fill="#ffffff" if theme == "dark" else "#000000")):
        mean, block = difference(pixels(page, rsvg(broken, tmp_path, "broken"), "png"), by_chromium)
        assert mean >= MEAN_DIFF or block >= BLOCK_DIFF, (mean, block)
    page.close()


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_the_pages_svg_button_makes_the_same_vector_picture(browser, tmp_path, theme):
    path = tmp_path / f"{theme}.html"
    AttentionWidget(stage="weights", focus=5).to_html(path, theme=theme)
    page, problems = open_page(browser, path)
    with page.expect_download() as info:
        page.click(".aw-save-svg")
    svg = tmp_path / "button.svg"
    info.value.save_as(svg)
    root = check_vector(svg.read_bytes(), 6)
    same_colours([f for _, _, f in cells(matrix(root, "weights"))], page_cell_colours(page))
    assert "0.56" in texts(matrix(root, "weights"))
    assert (sum(background(root)) < 150) == (theme == "dark"), background(root)
    assert not problems, problems
    page.context.close()


def test_save_pdf_and_the_command_line(tmp_path):
    w = AttentionWidget(stage="weights", focus=5)
    w.save_pdf(tmp_path / "lab.pdf")
    w.save_svg(tmp_path / "lab.svg")
    svg_size = [float(ET.parse(tmp_path / "lab.svg").getroot().get(k)) for k in ("width", "height")]
    data = (tmp_path / "lab.pdf").read_bytes()
    assert data.startswith(b"%PDF-")
    assert len(re.findall(rb"/Type\s*/Page\b(?!s)", data)) == 1
    box = [float(x) for x in re.search(rb"/MediaBox\s*\[\s*([-\d.\s]+)\]", data).group(1).split()]
    assert np.allclose(
        [box[2] - box[0], box[3] - box[1]], [s * 0.75 for s in svg_size], atol=1
    )  # CSS px at 96 per inch, in points
    for out, extra in (("cli.pdf", []), ("cli.svg", ["--theme", "dark"])):
        subprocess.run(
            [sys.executable, "-m", "attnwidget", "export", "--preset", "lab", *extra, "-o", str(tmp_path / out)],
            check=True,
            capture_output=True,
            timeout=120,
        )
    assert (tmp_path / "cli.pdf").read_bytes().startswith(b"%PDF-")
    assert sum(background(ET.parse(tmp_path / "cli.svg").getroot())) < 150  # --theme dark, for pictures too


HOSTILE = ["<script>alert(1)</script>", "a&b", 'say "hi"', "x\x07y", "]]>", "<!--", "bank"]


def test_hostile_token_text_stays_text(tmp_path):
    n = len(HOSTILE)
    rng = np.random.default_rng(1)
    w = AttentionWidget(
        tokens=HOSTILE,
        q=rng.normal(size=(n, 3)),
        k=rng.normal(size=(n, 3)),
        v=rng.normal(size=(n, 2)),
        stage="weights",
        focus=n - 1,
    )
    w.save_svg(tmp_path / "hostile.svg")
    data = (tmp_path / "hostile.svg").read_bytes()
    root = check_vector(data, n)
    shown = texts(root)
    for token in HOSTILE:
        assert visible_text(token) in shown, token
    assert "x␇y" in shown and "\x07" not in data.decode("utf-8")


def test_an_exercises_picture_keeps_the_guess_and_draws_no_button(browser, tmp_path):
    path = tmp_path / "exercise.html"
    w = AttentionWidget(exercise="predict", focus=5, stage="weights")
    w.guess = [0, 0, 0, 0, 0.6, 0.4]
    w.to_html(path)
    page, problems = open_page(browser, path)
    svg = page.evaluate("document.querySelector('.aw-root').attnwidget.snapshot('svg')")
    words = texts(ET.fromstring(svg))
    assert "60" in words and "40" in words, words  # the learner's shares, as the boxes show them
    assert "Reveal" not in words  # a picture has nothing to press
    assert not problems, problems
    page.context.close()


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_cells_too_small_for_numbers_are_one_image_with_the_pictures_colours_and_hatch(browser, tmp_path, theme):
    """Cells that hold no number are painted on screen as one image: each cell still has the colour
    the vector picture gives it (drawn cell by cell), and every closed cell (the causal rule's, the
    mask's) its hatch across the middle, which no open cell has."""
    n, rng = 40, np.random.default_rng(3)
    q, k, v = rng.normal(size=(3, n, 8)) * 1.5
    mask = np.ones((n, n), bool)
    mask[30, 4:9] = False
    path = tmp_path / f"cells-{theme}.html"
    AttentionWidget(tokens=[f"w{i}" for i in range(n)], q=q, k=k, v=v, causal=True, mask=mask, stage="weights").to_html(
        path, theme=theme
    )
    page, problems = open_page(browser, path)
    with page.expect_download() as info:
        page.click(".aw-save-svg")
    svg = tmp_path / "cells.svg"
    info.value.save_as(svg)
    fills = [f for _, _, f in cells(matrix(ET.fromstring(svg.read_bytes()), "weights"))]
    assert len(fills) == n * n
    corner, middle, size = page.evaluate(
        """(n) => {
        const c = [...document.querySelectorAll('canvas.aw-grid')].find((c) => (c.getAttribute('aria-label') || \
'').startsWith('weights') && c.offsetParent);
        const d = c.dataset, k = devicePixelRatio, all = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
        const at = (x, y) => { const p = (Math.round(y * k) * c.width + Math.round(x * k)) * 4;
            return '#' + [0, 1, 2].map((i) => all[p + i].toString(16).padStart(2, '0')).join(''); };
        const corner = [], middle = [];
        for (let i = 0; i < n; i++) for (let j = 0; j < n; j++) {
            const x = +d.left + j * d.cellWidth, y = +d.top + i * d.cellHeight;
            corner.push(at(x + 3, y + 3));
            middle.push(at(x + d.cellWidth / 2, y + d.cellHeight / 2));
        }
        return [corner, middle, [+d.cellWidth, +d.cellHeight]]; }""",
        n,
    )
    assert 8 <= min(size) and max(size) < 34, size  # hatched, and too small for numbers
    same_colours(fills, corner)
    rgb = lambda h: np.array([int(h[i : i + 2], 16) for i in (1, 3, 5)])
    closed = [(i, j) for i in range(n) for j in range(n) if j > i or not mask[i, j]]
    crossed = [np.abs(rgb(middle[i * n + j]) - rgb(fills[i * n + j])).max() for i in range(n) for j in range(n)]
    assert all(crossed[i * n + j] >= 12 for i, j in closed), min(crossed[i * n + j] for i, j in closed)
    assert max(c for p, c in enumerate(crossed) if divmod(p, n) not in closed) <= 1
    assert not problems, problems
    page.context.close()
