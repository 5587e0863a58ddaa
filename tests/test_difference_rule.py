"""The difference compares two texts of as many tokens, cell by cell: Python refuses measure="difference"
where there is no such pair, with the words the page's panel gives, and keeps its state."""

import pytest
import traitlets
from test_step import fake_model

from attnwidget import AttentionWidget


def test_difference_of_texts_of_other_lengths_is_refused_with_the_pages_reason():
    w = AttentionWidget(["She sat by the river bank", "The cat sat"], stage="weights")
    why = w.measures["difference"]  # what the page's panel says
    assert "needs another text of 6 tokens" in why
    with pytest.raises(traitlets.TraitError) as err:
        w.measure = "difference"
    assert why in str(err.value)
    assert (w.measure, w.sentence_index) == ("", 0)
    w.set_state({"measure": "difference"})  # a page's message: refused, nothing changes
    assert w.measure == ""
    with pytest.raises((ValueError, traitlets.TraitError), match="needs another text of 6 tokens"):
        AttentionWidget(["She sat by the river bank", "The cat sat"], measure="difference")


def test_one_text_has_no_difference():
    for w in (AttentionWidget(), AttentionWidget._from_model(fake_model(True), 0, 0, {})):
        with pytest.raises(traitlets.TraitError, match="difference needs two texts"):
            w.measure = "difference"
        assert w.measure == ""


def test_a_minimal_pair_has_its_difference_and_keeps_it_on_a_text_without_one():
    texts = ["She sat by the river bank", "I put money in the bank", "The cat sat"]
    w = AttentionWidget(texts, measure="difference")
    assert w.measure == "difference" and w.measures["difference"] == ""
    w.sentence_index = 2  # another text: the panel says why it has none, the choice stays
    assert w.measure == "difference" and "needs another text of 3 tokens" in w.measures["difference"]
    w.measure = ""
    with pytest.raises(traitlets.TraitError, match="needs another text of 3 tokens"):
        w.measure = "difference"
    w.set_state({"sentence_index": 1, "measure": "difference"})  # asked together: judged on the text asked for
    assert (w.sentence_index, w.measure) == (1, "difference")
    found = fake_model(True, texts=2)
    m = AttentionWidget._from_model(found, 0, 0, {"measure": "difference"}, texts=["a", "b"])
    assert m.measure == "difference"
