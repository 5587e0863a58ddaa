"""The plots read cleanly: in the value plot, the mix plot and the query dial no two labels
overlap and none leaves its plot, at every temperature, focus, sentence and dial position;
both value axes carry numbers and a legend names every kind of mark; the dial's table reads
the article's numbers (its Score is the dot product, q · k here), with the scale as a step of its own."""

import re

import numpy as np
import pytest

from attnwidget import AttentionWidget
from attnwidget.presets import query_dial

pytestmark = pytest.mark.browser

TWO_SENTENCES = ["I sat on the river bank and read", "I put my money in the bank and left"]

# Every <text> of the visible value plot and dial, as page boxes, with the box of its <svg>.
LABELS = """() => [...document.querySelectorAll('.aw-panel:not([hidden]) svg.aw-plot, \
.aw-panel:not([hidden]) svg.aw-dial')]
  .filter((s) => s.getBoundingClientRect().width > 0)
  .map((s) => {
    const box = (e) => { const r = e.getBoundingClientRect(); return [r.left, r.top, r.right, r.bottom]; };
    return { plot: s.getAttribute('class'), edge: box(s),
             labels: [...s.querySelectorAll('text')].filter((t) => t.textContent.trim()).map((t) => ({ text: \
t.textContent, box: box(t) })) };
  })"""


def set_state(page, **state):
    """Change the exported page's model and draw at once."""
    page.evaluate(
        """(state) => { const a = document.querySelector('.aw-root').attnwidget;
        for (const [k, v] of Object.entries(state)) a.model.set(k, v); a.redraw(); }""",
        state,
    )


def set_query(page, focus, vec):
    """Set one token's query (two numbers) through the page's model, as a drag does."""
    page.evaluate(
        """([focus, vec]) => { const a = document.querySelector('.aw-root').attnwidget, q = a.model.get('q');
        const n = q.shape[0], data = new Float64Array(2 * n);
        for (let i = 0; i < 2 * n; i++) data[i] = \
q.dtype === 'float64' ? q.view.getFloat64(8 * i, true) : q.view.getFloat32(4 * i, true);
        data.set(vec, 2 * focus);
        a.model.set('q', { shape: [n, 2], dtype: 'float64', view: new DataView(data.buffer) }); a.redraw(); }""",
        [focus, list(vec)],
    )


def missing_value_names(page, where, distinct):
    """The value plot names every distinct value (tokens on one spot share a label)."""
    shown = page.evaluate("() => document.querySelectorAll('.aw-plot .aw-value-label').length")
    return [] if shown == distinct else [f"{where}: {shown} value labels for {distinct} values"]


def label_problems(page, where):
    """Overlapping labels and labels crossing their plot's edge, described for the report."""
    problems = []
    plots = page.evaluate(LABELS)
    assert plots, f"{where}: no plot shown"
    for p in plots:
        e = p["edge"]
        for i, a in enumerate(p["labels"]):
            x0, y0, x1, y1 = a["box"]
            if x0 < e[0] - 0.5 or y0 < e[1] - 0.5 or x1 > e[2] + 0.5 or y1 > e[3] + 0.5:
                problems.append(
                    f"{where} {p['plot']}: {a['text']!r} crosses the edge ({x0:.0f},{y0:.0f},{x1:.0f},{y1:.0f} in {e})"
                )
            for b in p["labels"][i + 1 :]:
                w = min(x1, b["box"][2]) - max(x0, b["box"][0])
                h = min(y1, b["box"][3]) - max(y0, b["box"][1])
                if w > 0.5 and h > 0.5:
                    problems.append(f"{where} {p['plot']}: {a['text']!r} overlaps {b['text']!r} by {w:.0f}×{h:.0f}px")
    return problems


def exported(browser, tmp_path, w, name, theme="light", width=1100):
    """An exported page of the widget, opened with the network cut off; (page, its errors)."""
    path = tmp_path / f"{name}.html"
    w.to_html(path, theme=theme)
    page = browser.new_context(viewport={"width": width, "height": 1400}, bypass_csp=True).new_page()
    errors = []
    page.on("pageerror", lambda e: errors.append(f"error: {e}"))
    page.on("console", lambda m: errors.append(f"console: {m.text}") if m.type == "error" else None)
    page.route(
        "**/*", lambda r: r.continue_() if r.request.url == path.as_uri() else (errors.append(r.request.url), r.abort())
    )
    page.goto(path.as_uri())
    page.wait_for_selector(".aw-root")
    return page, errors


def test_lab_value_plot_labels_at_every_temperature_and_focus(browser, tmp_path):
    page, errors = exported(browser, tmp_path, AttentionWidget(stage="blend", focus=5), "lab")
    problems = []
    for t in (0.1, 0.2, 0.5, 1, 2, 5):
        for focus in range(6):
            set_state(page, temperature=t, focus=focus)
            problems += label_problems(page, f"T={t} focus={focus}") + missing_value_names(
                page, f"T={t} focus={focus}", 6
            )
    assert not problems, "\n".join(problems)
    assert not errors, errors
    page.context.close()


def test_mix_plot_labels_on_both_sentences(browser, tmp_path):
    w = AttentionWidget(TWO_SENTENCES, focus=5, stage="blend", residual=True)
    page, errors = exported(browser, tmp_path, w, "mix")
    problems = []
    for index in (0, 1):
        set_state(page, sentence_index=index)
        w.sentence_index = index
        distinct = len(np.unique(np.asarray(w.v).round(6), axis=0))
        n = page.evaluate("document.querySelector('.aw-root').attnwidget.model.get('tokens').length")
        for t in (0.2, 1, 5):
            for focus in range(n):
                set_state(page, temperature=t, focus=focus)
                where = f"sentence {index} T={t} focus={focus}"
                problems += label_problems(page, where) + missing_value_names(page, where, distinct)
    assert not problems, "\n".join(problems)
    assert not errors, errors
    page.context.close()


def test_dial_labels_at_every_position(browser, tmp_path):
    page, errors = exported(browser, tmp_path, query_dial(), "dial")
    problems = label_problems(page, "as exported")
    for radius in (0.3, 1.0, 1.6):
        for deg in range(0, 360, 15):
            a = np.radians(deg)
            set_query(page, 3, (radius * np.cos(a), radius * np.sin(a)))
            problems += label_problems(page, f"query at r={radius} {deg}°")
    # dragged by its tip out to the plot's corners and past them
    box = page.locator(".aw-dial").bounding_box()
    for corner in [(0, 0), (1, 0), (0, 1), (1, 1), (1.1, 0.5), (0.5, -0.1)]:
        set_query(page, 3, (0.6, 0.8))
        handle = page.locator(".aw-dial-handle").bounding_box()
        page.mouse.move(handle["x"] + handle["width"] / 2, handle["y"] + handle["height"] / 2)
        page.mouse.down()
        page.mouse.move(box["x"] + corner[0] * box["width"], box["y"] + corner[1] * box["height"], steps=6)
        problems += label_problems(page, f"dragging to {corner}")
        page.mouse.up()
        problems += label_problems(page, f"dragged to {corner}")
    assert not problems, "\n".join(problems)
    assert not errors, errors
    page.context.close()


@pytest.mark.parametrize("shape", ["one number", "eight numbers", "sixty tokens", "long names"])
def test_value_plot_labels_for_other_values(browser, tmp_path, shape):
    """Values of one number, values projected from eight, a crowd, and long token and axis names."""
    rng = np.random.default_rng(1)
    n, width, tokens, axes = {
        "one number": (5, 1, None, None),
        "eight numbers": (7, 8, None, None),
        "sixty tokens": (60, 2, None, None),
        "long names": (4, 2, ["a" * 30, "b" * 30, "river", "bank"], ["x" * 60, "y" * 60]),
    }[shape]
    w = AttentionWidget(
        tokens=tokens or [f"t{i}" for i in range(n)],
        q=rng.normal(size=(n, 4)),
        k=rng.normal(size=(n, 4)),
        v=rng.normal(size=(n, width)),
        value_axes=axes,
        stage="blend",
        focus=n - 1,
    )
    page, errors = exported(browser, tmp_path, w, shape.replace(" ", "-"))
    problems = []
    for t in (0.1, 1, 5):
        for focus in {0, n // 2, n - 1}:
            set_state(page, temperature=t, focus=focus)
            problems += label_problems(page, f"{shape} T={t} focus={focus}")
    assert not problems, "\n".join(problems)
    assert not errors, errors
    page.context.close()


def test_value_plot_has_numbers_on_both_axes_and_a_legend(browser, tmp_path):
    page, errors = exported(browser, tmp_path, AttentionWidget(stage="blend", focus=5), "axes")
    ticks = page.evaluate("""() => ['x', 'y'].map((a) => \
[...document.querySelectorAll(`.aw-plot .aw-tick-${a}`)].map((t) => {
        const r = t.getBoundingClientRect(); return [Number(t.textContent.replace('−', '-')), \
(r.left + r.right) / 2, (r.top + r.bottom) / 2, r.right]; }))""")
    xs, ys = (np.array(t) for t in ticks)
    assert len(xs) >= 3 and len(ys) >= 3, ticks
    # numbers along each axis: one unit is the same length across and up, and up is up
    sx = np.polyfit(xs[:, 0], xs[:, 1], 1)[0]
    sy = np.polyfit(ys[:, 0], ys[:, 2], 1)[0]
    assert sx > 0 and sy < 0 and abs(sx + sy) < 0.02 * sx, (sx, sy)
    assert np.ptp(xs[:, 2]) < 1 and np.ptp(ys[:, 3]) < 1  # in a row, and in a column aligned on the right

    def legend():
        return page.evaluate("""() => [...document.querySelectorAll('.aw-plot-legend li')].map((li) => ({
            text: li.textContent.trim(), marks: [...li.querySelectorAll('svg *')].map((m) => \
m.getAttribute('class')).filter(Boolean) }))""")

    items = legend()
    named = {m: i["text"] for i in items for m in i["marks"]}
    assert "value" in named.get("aw-value", ""), items
    assert "mean" in named.get("aw-mean", ""), items
    assert "output" in named.get("aw-output", "") and "other" in named["aw-output"], items
    assert "bank" in named.get("aw-output aw-focus-output", ""), items
    # every kind of mark in the plot is in the legend
    kinds = set(
        page.evaluate(
            "() => [...document.querySelectorAll('.aw-plot circle, .aw-plot path, .aw-plot rect')].map((m) => "
            "m.getAttribute('class'))"
        )
    )
    assert kinds - {"aw-hull"} <= set(named), (kinds, named)
    # with the residual, the word's own numbers and where the mix takes it are named too
    w = AttentionWidget(TWO_SENTENCES, focus=5, stage="blend", residual=True)
    page2, errors2 = exported(browser, tmp_path, w, "mix-legend")
    page = page2
    named = {m: i["text"] for i in legend() for m in i["marks"]}
    assert "own" in named.get("aw-own-point", "") and "mix" in named.get("aw-with-x-point", ""), named
    assert not errors and not errors2, errors + errors2
    page2.context.close()


def dial_table(page):
    return page.evaluate("""() => ({
        head: [...document.querySelectorAll('.aw-dial-table thead th')].map((t) => t.textContent),
        rows: [...document.querySelectorAll('.aw-dial-table tbody tr')].map((r) => [...r.children].map((c) => \
c.textContent)),
        note: document.querySelector('.aw-dial-note')?.textContent || '' })""")


def num(text):
    return float(text.replace("−", "-").rstrip("%"))


def test_dial_table_reads_as_the_article(browser, tmp_path):
    w = query_dial()
    assert w.weights[3, 3] == 0 and round(w.weights[3].sum(), 12) == 1  # bank does not read itself
    page, errors = exported(browser, tmp_path, w, "dial-table")
    t = dial_table(page)
    # one name for each quantity, as the scores stage and the cell arithmetic use them: the article's
    # 0.99 is the dot product q · k; the score is what softmax takes, 3 × q · k
    assert t["head"][:2] == ["Key", "q · k"] and t["head"][-1] == "Weight", t
    assert [r[0] for r in t["rows"]] == ["river", "money", "the"], t
    assert [r[1] for r in t["rows"]] == ["0.99", "0.48", "−0.45"], t
    assert [r[-1] for r in t["rows"]] == ["81%", "18%", "1%"], t
    # the scale is its own step: a column of score = 3 × q · k, named, and said in the note
    assert t["head"][2] == "score = 3 × q · k" and [r[2] for r in t["rows"]] == ["2.97", "1.44", "−1.35"], t
    assert "softmax" in t["note"] and "score = 3 × q · k" in t["note"], t
    assert "Score" not in t["note"] and "the article's Score" not in t["head"], t
    # the same word for the same number in the scores stage's cell arithmetic
    page.evaluate(
        "m => { const a = document.querySelector('.aw-root').attnwidget; "
        "a.model.propose({stage: 'scores', cell: [3, 0], focus: 3}); a.redraw(); }",
        None,
    )
    cell = page.locator(".aw-cell").inner_text()
    assert ") · k(" in cell and "= score" in cell and "2.970" in cell and "Score" not in cell, cell
    page.evaluate(
        "m => { const a = document.querySelector('.aw-root').attnwidget; a.model.propose({stage: 'qk', cell: null}); "
        "a.redraw(); }",
        None,
    )

    # drag the tip: every column follows the new query
    k = np.asarray(w.k)
    box = page.locator(".aw-dial").bounding_box()
    for target in [(0.8, 0.5), (0.62, 0.2), (0.3, 0.7)]:
        handle = page.locator(".aw-dial-handle").bounding_box()
        page.mouse.move(handle["x"] + handle["width"] / 2, handle["y"] + handle["height"] / 2)
        page.mouse.down()
        page.mouse.move(box["x"] + target[0] * box["width"], box["y"] + target[1] * box["height"], steps=5)
        page.mouse.up()
        q = page.evaluate("""() => { const q = document.querySelector('.aw-root').attnwidget.model.get('q');
            return [0, 1].map((c) => \
q.dtype === 'float64' ? q.view.getFloat64(8 * (6 + c), true) : q.view.getFloat32(4 * (6 + c), true)); }""")
        t = dial_table(page)
        dots = k[:3] @ np.array(q)
        # to 2 decimals (the page holds the vectors as float32: a hair's leeway at a rounding tie)
        assert np.allclose([num(r[1]) for r in t["rows"]], dots, atol=0.00501), (q, t)
        assert np.allclose([num(r[2]) for r in t["rows"]], 3 * dots, atol=0.00501), (q, t)
        assert sum(int(num(r[-1])) for r in t["rows"]) == 100, t
        weights = np.exp(3 * dots - (3 * dots).max())
        assert [int(num(r[-1])) for r in t["rows"]] == pytest.approx(100 * weights / weights.sum(), abs=1), t
    assert not errors, errors
    page.context.close()


def test_dial_without_a_scale_says_one_over_root_d(browser, tmp_path):
    w = AttentionWidget("I sat on the river bank", stage="qk", focus=5)
    page, errors = exported(browser, tmp_path, w, "dial-default")
    t = dial_table(page)
    assert t["head"][2] == "score = 1/√2 × q · k" and "1/√2" in t["note"], t
    assert len(t["rows"]) == 6 and sum(int(num(r[-1])) for r in t["rows"]) == 100, t
    assert [r[1] for r in t["rows"]] == [f"{d:.2f}".replace("-", "−") for d in w.q[5] @ w.k.T], t
    assert not errors, errors
    page.context.close()


@pytest.mark.parametrize("theme", ["light", "dark"])
@pytest.mark.parametrize("width", [700, 1200])
def test_pictures_at_two_widths(browser, tmp_path, artifacts, theme, width):
    """Screenshots to look at, and the same label check at each width and theme."""
    presets = {
        "lab": (AttentionWidget(stage="blend", focus=5), ".aw-blend"),
        "mix": (AttentionWidget(TWO_SENTENCES, focus=6, stage="blend", residual=True, sentence_index=1), ".aw-blend"),
        "dial": (query_dial(), ".aw-dial-wrap"),
    }
    problems = []
    for name, (w, view) in presets.items():
        page, errors = exported(browser, tmp_path, w, f"{name}-{theme}-{width}", theme, width)
        for t in (0.1, 1, 5) if name == "lab" else (w.temperature,):
            set_state(page, temperature=t)
            problems += label_problems(page, f"{name} {theme} {width}px T={t}")
            page.locator(view).screenshot(
                path=str(artifacts / f"quality-{name}-{theme}-{width}{f'-T{t}' if name == 'lab' else ''}.png")
            )
        assert not errors, errors
        page.context.close()
    assert not problems, "\n".join(problems)


def test_keys_that_coincide_share_a_label_that_reads_as_names(browser, tmp_path):
    w = AttentionWidget("I sat on the river bank", stage="qk", focus=5)
    page, errors = exported(browser, tmp_path, w, "dial-groups")
    labels = page.locator(".aw-dial text").evaluate_all("ts => ts.map((t) => t.textContent)")
    grouped = [t for t in labels if "," in t]
    assert grouped and all(t.startswith("keys of ") for t in grouped), labels
    assert not any(re.search(r"\+\d+ key", t) for t in labels), labels  # "+1 key" read as a number
    assert all(t.endswith(" more") for t in grouped if "+" in t), labels
    assert not errors, errors
    page.context.close()
