"""Words and numbers as they are meant to read: maths and counts keep their case, the query dial's
labels stand apart, and a grid of small weights writes enough figures to tell them apart."""

import itertools
import pathlib

import pytest

from attnwidget import AttentionWidget

pytestmark = pytest.mark.browser

ROOT = "document.querySelector('.aw-root').attnwidget"


def opened(browser, w, path: pathlib.Path, width=1100):
    w.to_html(path, theme="light")
    page = browser.new_context(viewport={"width": width, "height": 1000}, bypass_csp=True).new_page()
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
