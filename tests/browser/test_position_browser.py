"""Where position enters a model's attention, named in its page beside the model's name, in the
words Python gives (position_about); a widget of your own arrays says nothing of it."""

import pytest
from test_interface import model_for, tokenizer  # (a fixture)

from attnwidget import AttentionWidget

pytestmark = pytest.mark.browser


@pytest.mark.parametrize("family", ["gpt_neox", "gpt2"])
def test_a_models_page_names_where_position_enters(browser, tmp_path, tokenizer, family):
    w = AttentionWidget.from_transformers(model_for(family, tokenizer), tokenizer, "I sat on the riverbank.")
    own = AttentionWidget()
    pages = []
    try:
        for widget, name in ((w, "model.html"), (own, "own.html")):
            widget.to_html(tmp_path / name)
            page = browser.new_context(bypass_csp=True).new_page()
            pages.append(page)
            page.goto((tmp_path / name).as_uri())
            page.wait_for_selector(".aw-root")
        shown = pages[0].locator(".aw-position")
        assert shown.is_visible() and shown.text_content() == w.position_about
        assert w.position_about.startswith({"gpt_neox": "RoPE, base 10,000, 25% of", "gpt2": "learned"}[family])
        assert not pages[1].locator(".aw-position").is_visible()
    finally:
        for page in pages:
            page.context.close()
