"""The documentation site (`make docs`, into build/site/): served by a plain static server with
every other host blocked, each page draws its widgets, and the slider and clicks work."""

import os
import pathlib
import re
import sys

import pytest
from playwright.sync_api import expect

pytestmark = pytest.mark.browser

SITE = pathlib.Path(__file__).resolve().parents[2] / "build" / "site"
NOTEBOOKS = [
    "01_attention_lab",
    "02_attention_visually",
    "03_real_model",
    "04_cross_attention",
    "04_practice",
    "05_head_atlas",
]
PAGES = ["index", "getting-started", "computes", "courses", "hosts", "guarantees", "api", "changelog"]


@pytest.fixture(scope="module")
def site(server_process):
    if not (SITE / "index.html").exists():
        pytest.fail("the documentation site is not built: run `make docs` (make test does)")
    server = server_process(
        "site",
        lambda port: [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1"],
        SITE,
        dict(os.environ),
        "/index.html",
    )
    yield f"http://127.0.0.1:{server.port}"
    server.stop()


def open_offline(browser, url, width=1200, scheme="light"):
    """The page, with every request to another host refused (and counted)."""
    context = browser.new_context(viewport={"width": width, "height": 1000}, color_scheme=scheme)
    page = context.new_page()
    page.elsewhere, page.errors = [], []
    own = url.split("/", 3)[:3]

    def route(r):
        if r.request.url.split("/", 3)[:3] == own:
            return r.continue_()
        page.elsewhere.append(r.request.url)
        return r.abort()

    page.route("**/*", route)
    page.on("pageerror", lambda e: page.errors.append(str(e)))
    page.goto(url)
    return page


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_every_notebook_page_draws_its_widgets_with_no_kernel_and_no_network(browser, site, name):
    page = open_offline(browser, f"{site}/notebooks/{name}.html")
    try:
        hosts = page.locator(".attnwidget-static")
        assert hosts.count() >= 1, f"{name}: no widget on the page"
        page.wait_for_function(
            """() => [...document.querySelectorAll('.attnwidget-static')]
            .every((h) => h.querySelector('.aw-root')?.attnwidget?.firstPaint > 0)""",
            timeout=60_000,
        )
        assert page.locator(".attnwidget-static .aw-root").count() == hosts.count()
        assert not page.errors, page.errors
        # nothing the widgets need comes from elsewhere (the site itself loads nothing from elsewhere either)
        assert page.elsewhere == [], page.elsewhere
    finally:
        page.context.close()


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_every_notebook_page_shows_its_maths_typeset_and_no_progress_noise(browser, site, name):
    page = open_offline(browser, f"{site}/notebooks/{name}.html")
    try:
        text = page.locator("main").inner_text()
        # no TeX left as text: maths is typeset at build time (MathML, drawn by the browser itself)
        for raw in ("$", "\\top", "\\sqrt", "\\cdot", "\\exp"):
            assert raw not in text, f"{name}: raw TeX {raw!r} on the page"
        maths = page.locator("main math")
        if name == "01_attention_lab":
            assert maths.count() >= 3, "the lab's QKᵀ/√d, exp(H) and A·V"
        assert all(m.bounding_box() and m.bounding_box()["width"] > 0 for m in maths.all())
        # the widget's captions read as text, not centred by the site's theme
        aligned = page.evaluate(
            "() => [...document.querySelectorAll('.aw-root figcaption')].map((f) => getComputedStyle(f).textAlign)"
        )
        assert set(aligned) <= {"left", "start"}, (name, set(aligned))
        # executed outputs carry what the notebook computed, not a download's or a loader's progress
        assert not re.search(r"Loading|[0-9]+%\|", " ".join(page.locator(".cell_output").all_inner_texts())), name
        assert page.elsewhere == [], page.elsewhere
    finally:
        page.context.close()


def test_the_lab_page_slider_and_clicks_work(browser, site):
    page = open_offline(browser, f"{site}/notebooks/01_attention_lab.html")
    try:
        page.wait_for_function("document.querySelector('.attnwidget-static .aw-root')?.attnwidget?.firstPaint > 0")
        root = page.locator(".attnwidget-static .aw-root").first
        root.scroll_into_view_if_needed()
        weights = lambda: page.evaluate(
            "document.querySelector('.attnwidget-static .aw-root').attnwidget.numbers().weights"
        )
        root.locator(".aw-stage[data-stage=weights]").click()
        before = weights()
        slider = root.locator(".aw-slider")
        slider.focus()
        for _ in range(5):
            page.keyboard.press("ArrowRight")
        page.wait_for_function(
            "(t) => !document.querySelector('.attnwidget-static .aw-temp-value').textContent.includes(t)",
            arg="T = 1.00",
        )
        assert weights() != before  # the page computed the new temperature itself
        root.locator(".aw-token", has_text="river").click()
        expect(root.locator(".aw-token[aria-pressed=true] .aw-token-text")).to_have_text("river")
        expect(root.locator(".aw-readout")).to_contain_text("river reads")
        assert not page.errors, page.errors
    finally:
        page.context.close()


@pytest.mark.parametrize("name", PAGES)
def test_the_sites_pages_are_there(browser, site, name):
    page = open_offline(browser, f"{site}/{name}.html")
    try:
        text = page.locator("main").inner_text()
        want = {
            "index": "AttentionWidget",
            "getting-started": "pip install",
            "computes": "effective tokens",
            "courses": "to_html",
            "hosts": "marimo",
            "guarantees": "TraitError",
            "api": "from_transformers",
            "changelog": "Unreleased",
        }[name]
        assert want in text, f"{name}.html lacks {want!r}"
        assert not page.errors, page.errors
    finally:
        page.context.close()


def test_the_site_follows_the_readers_theme_switch_without_losing_state(browser, site):
    page = open_offline(browser, f"{site}/notebooks/01_attention_lab.html", scheme="dark")
    try:
        page.wait_for_function("document.querySelector('.attnwidget-static .aw-root')?.attnwidget?.firstPaint > 0")
        root = page.locator(".attnwidget-static .aw-root").first
        root.locator(".aw-token", has_text="river").click()
        expect(root.locator(".aw-token[aria-pressed=true] .aw-token-text")).to_have_text("river")
        page.evaluate(
            "document.documentElement.dataset.theme = "
            "document.documentElement.dataset.theme === 'dark' ? 'light' : 'dark'"
        )
        want = page.evaluate("document.documentElement.dataset.theme === 'dark'")
        page.wait_for_function(
            "(d) => document.querySelector('.attnwidget-static .aw-root').classList.contains('aw-dark') === d", arg=want
        )
        expect(root.locator(".aw-token[aria-pressed=true] .aw-token-text")).to_have_text("river")  # the focus is kept
    finally:
        page.context.close()


def test_the_home_page_shows_the_live_lab_above_the_sentence_that_says_it_is_live(browser, site):
    page = open_offline(browser, f"{site}/index.html")
    try:
        page.wait_for_selector(".aw-root")
        assert page.locator("main img[src*='lab.png']").count() == 0  # the widget itself, not a picture of it
        said = page.get_by_text("Every widget on this site is live")
        assert page.locator(".aw-root").bounding_box()["y"] < said.bounding_box()["y"]
        model = "document.querySelector('.aw-root').attnwidget.model"
        stage, tokens, focus = page.evaluate(f"[{model}.get('stage'), {model}.get('tokens'), {model}.get('focus')]")
        assert stage == "blend" and tokens[focus] == "bank"
        assert not page.elsewhere and not page.errors, (page.elsewhere, page.errors)
    finally:
        page.context.close()
