"""Course notebooks exported for a site: `jupyter nbconvert --to attnwidget` gives a page whose
widgets stay live and whose maths is drawn with the network blocked; a plain nbconvert export
shows a picture of each widget and the line that says how to get the live page."""

import os
import subprocess
import sys

import nbformat
import pytest

pytestmark = pytest.mark.browser

JUPYTER = [sys.executable, "-m", "jupyter"]
MARKDOWN = (
    "Scores are $QK^\\top/\\sqrt{d}$, then $$\\mathrm{softmax}(x)_i = e^{x_i} / \\sum_j e^{x_j}$$ "
    "Prices: $5 and $10; code `$x$` stays."
)
CODE = """from attnwidget import AttentionWidget
from IPython.display import display
display(AttentionWidget(stage="weights"))
AttentionWidget(stage="scores")"""


@pytest.fixture(scope="module")
def notebook(tmp_path_factory):
    folder = tmp_path_factory.mktemp("course")
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell(MARKDOWN), nbformat.v4.new_code_cell(CODE)]
    nbformat.write(nb, folder / "lesson.ipynb")
    return folder / "lesson.ipynb"


def convert(notebook, *args, env=None):
    subprocess.run([*JUPYTER, "nbconvert", *args, str(notebook)], check=True, capture_output=True, env=env, timeout=300)


def offline(browser, path, theme="light"):
    """The page opened with every request to anywhere but the file itself refused, and those requests."""
    page = browser.new_context(bypass_csp=True, color_scheme=theme).new_page()
    asked = []

    def route(r):
        asked.append(r.request.url)
        r.continue_() if r.request.url.startswith(("file:", "data:", "blob:")) else r.abort()

    page.route("**/*", route)
    page.goto(path.as_uri())
    return page, asked


def test_a_course_page_is_live_offline_with_its_maths(browser, notebook):
    convert(notebook, "--to", "attnwidget", "--output", "offline")
    page, asked = offline(browser, notebook.with_name("offline.html"))
    page.wait_for_function("document.querySelectorAll('.aw-root').length === 2")
    assert [u for u in asked if not u.startswith(("file:", "data:", "blob:"))] == []
    assert page.locator("script[src], link[href^='http']").count() == 0
    assert page.locator(".aw-page-error").count() == 0
    # maths drawn by the browser itself: one inline formula, one display formula; money and code keep their dollars
    assert page.locator("math[display='inline']").count() == 1 and page.locator("math[display='block']").count() == 1
    assert page.locator("math").first.get_attribute("alttext") == "QK^\\top/\\sqrt{d}"
    text = page.locator(".jp-MarkdownOutput").first.text_content()
    assert "$5 and $10" in text and "$x$" in text
    # the page computes: a click on a token moves the first widget's focus
    first = page.locator(".aw-root").first
    first.locator(".aw-token").nth(4).click()
    page.wait_for_function(
        "document.querySelector('.aw-root').querySelectorAll('.aw-token')[4].getAttribute('aria-pressed') === 'true'"
    )
    page.context.close()


def test_a_dark_course_page_draws_its_widgets_dark(browser, notebook):
    convert(notebook, "--execute", "--to", "attnwidget", "--theme", "dark", "--output", "dark")  # (run once, not twice)
    page, _ = offline(browser, notebook.with_name("dark.html"), "light")  # the reader's setting does not override it
    page.wait_for_function("document.querySelectorAll('.aw-root.aw-dark').length === 2")
    page.context.close()


def test_a_plain_export_shows_a_picture_and_how_to_get_the_live_page(browser, notebook):
    env = {**os.environ, "ATTNWIDGET_PICTURES": "1"}
    convert(
        notebook,
        "--to",
        "html",
        "--execute",
        "--ExecutePreprocessor.store_widget_state=False",
        "--output",
        "plain",
        env=env,
    )
    page, _ = offline(browser, notebook.with_name("plain.html"))
    pictures = page.locator(".attnwidget-plain img")
    assert pictures.count() == 2
    page.wait_for_function(
        "[...document.querySelectorAll('.attnwidget-plain img')].every(i => i.complete && i.naturalWidth > 300)"
    )
    line = page.locator(".attnwidget-plain small").first.text_content()
    assert "jupyter nbconvert --to attnwidget" in line
    page.context.close()
