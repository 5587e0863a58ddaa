"""The course exporter's maths (course.mathml) and the text a page without the widget shows."""

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from attnwidget import AttentionWidget
from attnwidget.course import mathml
from attnwidget.export import PLAIN_LINE

pytest.importorskip("latex2mathml")


@pytest.mark.parametrize(
    ("source", "inline", "display"),
    [
        ("$QK^\\top$ and $$\\sum_j a_j$$", 1, 1),
        ("It costs $5 and $10.", 0, 0),  # money
        ("`$x$` and ```\n$y$\n``` and ``a `$z$` b``", 0, 0),  # code keeps its dollars
        ("an escaped \\$ sign and $x$", 1, 0),
        ("$ x$ and $x $", 0, 0),  # a formula neither starts nor ends with a space
        ("the $i$th row", 1, 0),
        ("\\(QK^\\top\\) and \\[\\sum_j a_j\\]", 1, 1),  # Jupyter's other delimiters
        ("\\begin{equation}x = 1\\end{equation} then $y$", 1, 1),  # an environment, displayed whole
        ("costs $10; code `$x$` stays", 0, 0),  # code first, even after a lone dollar
        ("[a link](http://x.org/?a=$p$) and <span title='$a$'>b</span>", 0, 0),  # link targets and tags keep theirs
    ],
)
def test_formulas_are_found_as_jupyter_reads_them(source, inline, display):
    text, formulas = mathml(source)
    assert sum('display="inline"' in f for f, _ in formulas) == inline
    assert sum('display="block"' in f for f, _ in formulas) == display
    assert re.findall(r"AWMATH(\d+)X", text) == [str(i) for i in range(len(formulas))]


@given(st.text(alphabet=st.characters(blacklist_characters="$")))
def test_text_without_dollars_is_left_as_it_is(source):
    assert mathml(source) == (source, [])


def test_a_formula_mathml_cannot_express_stays_as_its_tex():
    _, formulas = mathml("$x^$ then $a<b$")
    assert formulas[0] == ("<code>x^</code>", "x^")
    assert "<b" not in formulas[1][0]  # and the TeX's own "<" is never markup


def test_a_page_without_the_widget_says_how_to_get_the_live_page(monkeypatch):
    monkeypatch.delenv("ATTNWIDGET_PICTURES", raising=False)
    monkeypatch.delenv("ATTNWIDGET_STATIC_HTML", raising=False)
    data, _ = AttentionWidget()._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in data  # the live widget stays first
    assert PLAIN_LINE in data["text/html"] and "<img" not in data["text/html"]  # no browser started at each display


def test_a_heading_with_maths_keeps_its_markup_whole():
    """A heading's id and anchor are made from its text: there the formula is its TeX, escaped,
    and the MathML is in the heading's text alone; text that looks like a placeholder stays text."""
    import nbformat

    from attnwidget.course import CourseExporter

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell('## Softmax $\\sigma(x)$ here\n\nAWMATH0X and "$a$"')]
    page, _ = CourseExporter(execute=False).from_notebook_node(nb)
    heading = re.search(r"<h2[^>]*>(.*?)</h2>", page, re.S)
    assert heading[0].startswith('<h2 id="Softmax-\\sigma(x)-here">')
    assert heading[1].startswith("Softmax <math ") and 'href="#Softmax-\\sigma(x)-here"' in heading[1]
    assert "AWMATH0X and" in page
