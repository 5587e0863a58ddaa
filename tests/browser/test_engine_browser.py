"""The page engine at length: from 512 tokens the weights picture is painted by a worker, off
the main thread, and is the very picture the page paints itself where no worker may run; a
burst of changes ends on the picture of the last; the numbers the page shows stay its own."""

import numpy as np
import pytest

pytestmark = pytest.mark.browser

N = 600
SETTLED = "(c) => !c.hasAttribute('data-pending')"
# the canvas's pixels, as a hash (a few megabytes would be slow to bring back)
PIXELS = """(c) => { const px = new Uint32Array(c.getContext('2d').getImageData(0, 0, c.width, c.height).data.buffer);
                      let h = 2166136261; for (let p = 0; p < px.length; p++) h = Math.imul(h ^ px[p], 16777619);
                      return [c.width, c.height, h >>> 0]; }"""


def exported_page(browser, path, *, worker=True):
    """The exported page with its own Content-Security-Policy (no bypass: the worker must be allowed by it)."""
    page = browser.new_context(viewport={"width": 1100, "height": 900}).new_page()
    page.errors = []
    page.on("pageerror", lambda e: page.errors.append(str(e)))
    page.on("console", lambda m: page.errors.append(m.text) if m.type == "error" else None)
    if not worker:
        page.add_init_script("delete window.Worker")  # a host that allows no workers
    page.goto(path.as_uri())
    return page


def weights_canvas(page):
    canvas = page.locator(".aw-panel:visible canvas.aw-grid").first
    page.wait_for_function(SETTLED, arg=canvas.element_handle())
    return canvas


def widget(**kwargs):
    from attnwidget import AttentionWidget

    rng = np.random.default_rng(5)
    q, k, v = (rng.normal(size=(N, 8)) for _ in range(3))
    return AttentionWidget(q=q, k=k, v=v, stage="weights", tokens=[f"w{i}" for i in range(N)], **kwargs)


def test_the_worker_paints_the_picture_the_page_would_and_a_burst_ends_on_the_last(browser, tmp_path):
    path = tmp_path / "long.html"
    widget(temperature=1.3, causal=True).to_html(path)
    painted, here = exported_page(browser, path), exported_page(browser, path, worker=False)
    try:
        assert [w.url[:5] for w in painted.workers] == ["blob:"]  # allowed by the page's own policy
        assert here.workers == []
        first = weights_canvas(painted).evaluate(PIXELS)
        assert first == weights_canvas(here).evaluate(PIXELS)
        # a burst of temperatures, faster than pictures are painted: both end on the last one
        for page in (painted, here):
            page.evaluate(
                """(ts) => { const m = document.querySelector('.aw-root').attnwidget.model;
                                       for (const t of ts) m.set('temperature', t); }""",
                [0.2 + 0.05 * i for i in range(30)] + [0.45],
            )
            page.evaluate("new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(done)))")
        last = weights_canvas(painted).evaluate(PIXELS)
        assert last != first
        assert last == weights_canvas(here).evaluate(PIXELS)
        assert painted.locator(".aw-legend").first.inner_text() == here.locator(".aw-legend").first.inner_text()
        assert painted.errors == [] and here.errors == []
    finally:
        painted.context.close()
        here.context.close()


def test_what_the_page_says_of_a_cell_and_a_row_is_pythons_number(browser, tmp_path):
    w = widget(temperature=0.8, focus=321)
    path = tmp_path / "numbers.html"
    w.to_html(path)
    page = exported_page(browser, path)
    try:
        canvas = weights_canvas(page)
        d = canvas.evaluate("(c) => ({...c.dataset})")
        i, j = 400, 123
        canvas.hover(
            position={
                "x": float(d["left"]) + (j + 0.5) * float(d["cellWidth"]),
                "y": float(d["top"]) + (i + 0.5) * float(d["cellHeight"]),
            }
        )
        tip = page.locator(".aw-tip:visible").inner_text()
        assert f"w{i} reads w{j}" in tip
        assert f"weight {w.weights[i, j]:.3f}" in tip
        readout = page.locator(".aw-readout").inner_text()
        assert f"{w.effective_tokens[321]:.2f} effective tokens" in readout
        top = int(np.argmax(w.weights[321]))
        assert readout.startswith(f"w321 reads w{top} {w.weights[321, top]:.3f}")
    finally:
        page.context.close()


def test_in_jupyterlab_the_worker_paints_and_a_temperature_from_python_repaints(open_notebook):
    setup = f"""
import numpy as np
from attnwidget import AttentionWidget
rng = np.random.default_rng(5)
q, k, v = (rng.normal(size=({N}, 8)) for _ in range(3))
e = AttentionWidget(q=q, k=k, v=v, stage="weights", tokens=[f"w{{i}}" for i in range({N})])
e
"""
    page, kernel, errors = open_notebook("engine.ipynb", [setup])
    try:
        canvas = weights_canvas(page)
        assert any(w.url.startswith("blob:") for w in page.workers)
        before = canvas.evaluate(PIXELS)
        kernel.run("e.temperature = 0.3")
        page.wait_for_function("(b) => document.querySelector('.aw-root').attnwidget.model.get('temperature') === 0.3")
        canvas = weights_canvas(page)
        assert canvas.evaluate(PIXELS) != before
        assert errors == []
    finally:
        page.context.close()


def test_a_change_undone_before_its_picture_arrives_never_shows_that_picture(browser, tmp_path):
    path = tmp_path / "undo.html"
    widget(temperature=0.9).to_html(path)
    page = exported_page(browser, path)
    try:
        tried = 0
        for i in range(6):  # each at its own temperature, so no picture of it is there yet
            page.evaluate(f"document.querySelector('.aw-root').attnwidget.model.set('temperature', {0.9 + 0.05 * i})")
            # that temperature's own picture, landed: the one every later frame must keep
            page.wait_for_selector(".aw-panel:not([hidden]) canvas.aw-grid:not([data-pending])", state="attached")
            page.evaluate("new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(done)))")
            first = weights_canvas(page).evaluate(PIXELS)
            pending, shown = page.evaluate(
                """async (hash) => {
                const model = document.querySelector('.aw-root').attnwidget.model, \
canvas = document.querySelector('.aw-panel:not([hidden]) canvas.aw-grid');
                const hashOf = new Function('c', `return (${hash})(c)`);
                const frame = () => new Promise((done) => requestAnimationFrame(done));
                model.set('causal', true);
                await frame();  // the causal picture is asked of the worker...
                const pending = canvas.hasAttribute('data-pending');
                model.set('causal', false);  // ...and taken back: it may still come before the next frame
                const seen = [];
                for (let i = 0; i < 40; i++) { await frame(); seen.push(hashOf(canvas)); }
                return [pending, seen];
            }""",
                PIXELS,
            )
            tried += pending
            assert all(h == first for h in shown), (i, first, shown)
        assert tried >= 1, "the causal picture always came within a frame: nothing was undone before it arrived"
    finally:
        page.context.close()


def test_a_worker_that_never_starts_is_given_up_and_the_page_paints_itself(browser, tmp_path):
    path = tmp_path / "silent.html"
    widget(causal=True).to_html(path)
    silent = browser.new_context(viewport={"width": 1100, "height": 900}).new_page()
    silent.add_init_script("window.Worker = class { postMessage() {} terminate() {} };")  # says nothing, ever
    here = exported_page(browser, path, worker=False)
    try:
        silent.goto(path.as_uri())
        silent.wait_for_selector(".aw-root")
        for _ in range(100):  # drawn once the worker is given up, after a second
            if silent.evaluate("document.querySelector('.aw-root').attnwidget.firstPaint > 0"):
                break
            silent.wait_for_timeout(50)
        assert weights_canvas(silent).evaluate(PIXELS) == weights_canvas(here).evaluate(PIXELS)
        assert silent.evaluate("document.querySelector('.aw-root').attnwidget.firstPaint") > 0
    finally:
        silent.context.close()
        here.context.close()


@pytest.mark.parametrize("width", [700, 1200])
def test_labels_are_drawn_only_where_they_cannot_overlap(browser, tmp_path, width):
    """Every size from a few tokens to past the detail view's start, in the weights and blend stages."""
    from attnwidget import AttentionWidget

    rng = np.random.default_rng(9)
    page = browser.new_context(viewport={"width": width, "height": 900}, bypass_csp=True).new_page()
    try:
        for n in (5, 9, 15, 21, 28, 34, 40, 55, 70, 90):
            for stage in ("weights", "blend"):
                path = tmp_path / f"labels-{n}-{stage}.html"
                AttentionWidget(
                    q=rng.normal(size=(n, 3)),
                    k=rng.normal(size=(n, 3)),
                    v=rng.normal(size=(n, 2)),
                    stage=stage,
                    tokens=[f"token{i}" for i in range(n)],
                ).to_html(path)
                page.goto(path.as_uri())
                d = page.locator(".aw-panel:visible canvas.aw-grid").first.evaluate("(c) => ({...c.dataset})")
                cell, row_h = float(d["cellWidth"]), float(d["cellHeight"])
                row_font, col_font = int(d["rowFont"]), int(d["colFont"])
                where = f"{n} tokens, {stage}, {width} px: {d}"
                assert row_font == 0 or (9 <= row_font <= row_h - 1), where
                assert col_font == 0 or (9 <= col_font and (d["slanted"] == "false" or col_font <= 0.71 * cell)), where
                if int(d["extraColumns"]):
                    assert row_h >= 12, where  # their numbers are drawn in every row
    finally:
        page.context.close()
