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
    ],
)
def test_formulas_are_found_as_jupyter_reads_them(source, inline, display):
    text, formulas = mathml(source)
    assert sum('display="inline"' in f for f in formulas) == inline
    assert sum('display="block"' in f for f in formulas) == display
    assert re.findall(r"AWMATH(\d+)X", text) == [str(i) for i in range(len(formulas))]


@given(st.text(alphabet=st.characters(blacklist_characters="$")))
def test_text_without_dollars_is_left_as_it_is(source):
    assert mathml(source) == (source, [])


def test_a_formula_mathml_cannot_express_stays_as_its_tex():
    _, formulas = mathml("$x^$ then $a<b$")
    assert formulas[0] == "<code>x^</code>"
    assert "&lt;" in formulas[1] or "&#x0003C;" in formulas[1]  # and the TeX's own "<" is never markup


def test_a_page_without_the_widget_says_how_to_get_the_live_page(monkeypatch):
    monkeypatch.delenv("ATTNWIDGET_PICTURES", raising=False)
    monkeypatch.delenv("ATTNWIDGET_STATIC_HTML", raising=False)
    data, _ = AttentionWidget()._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in data  # the live widget stays first
    assert PLAIN_LINE in data["text/html"] and "<img" not in data["text/html"]  # no browser started at each display
