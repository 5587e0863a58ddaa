"""Pictures from Python show what the page shows: a picture is taken once every part it draws is
drawn (a condition the page states: every head's thumbnail loaded), and the pictures of one
session share one headless Chromium instead of starting one each."""

import re

import pytest
from test_overview_browser import HEADS, LAYERS, fake_model

from attnwidget import AttentionWidget, export

pytestmark = pytest.mark.browser


def test_every_thumbnail_is_in_every_picture_and_one_browser_takes_them_all(tmp_path):
    w = AttentionWidget._from_model(fake_model(5), 0, 0, {"stage": "weights"})
    launched = []
    real = export._launch
    export._PICTURES.close()  # a browser of its own for this test, counted
    export._launch = lambda playwright: launched.append(1) or real(playwright)
    try:
        for i in range(4):
            w.save_svg(tmp_path / f"model{i}.svg")
            svg = (tmp_path / f"model{i}.svg").read_text()
            heads = re.findall(r'<g transform="[^"]*" role="img"><image ', svg)  # (the matrices are shapes)
            assert len(heads) == LAYERS * HEADS, f"picture {i}: {len(heads)} of {LAYERS * HEADS} thumbnails drawn"
        w.save_png(tmp_path / "model.png", scale=1)
        assert launched == [1]  # one browser for five pictures
    finally:
        export._launch = real
