"""Long work in the kernel says how far it is in the notebook, and leaves nothing behind."""

import warnings

import pytest
from test_interface import TEXT, model_for, tokenizer

from attnwidget import progress


class Shown:
    def __init__(self, text):
        self.said = [text]

    def update(self, data, raw=False):
        self.said.append(data["text/plain"])


@pytest.fixture
def shown(monkeypatch):
    handles = []

    def display(text):
        handles.append(Shown(text))
        return handles[-1]

    monkeypatch.setattr(progress, "_display", display)
    monkeypatch.setattr(progress, "AFTER", 0.0)
    monkeypatch.setattr(progress, "EVERY", 0.0)
    return handles


def test_reading_a_model_says_each_layer_then_clears(shown, tokenizer):
    from attnwidget.integrations import from_transformers

    from_transformers(model_for("llama", tokenizer), tokenizer, TEXT)
    (handle,) = shown
    assert handle.said == [
        "reading LlamaModel's attention: layer 1 of 2",
        "reading LlamaModel's attention: layer 2 of 2",
        "",
    ]


def test_short_work_and_scripts_say_nothing(monkeypatch):
    seen = []
    monkeypatch.setattr(progress, "_display", lambda text: seen.append(text) or False)
    with progress.progress("quick", 3) as step:  # under a second: nothing
        step(1)
    assert seen == []
    assert progress._display("no kernel here") is False  # (a script: no notebook to say it in)


def test_head_scores_say_each_text_and_each_induction_sequence_then_clear(shown, tokenizer):
    from attnwidget import AttentionWidget, atlas

    AttentionWidget(["a b a", "c d c", "e f"]).head_scores()
    (handle,) = shown
    assert handle.said == [f"head scores: text {i} of 3" for i in (1, 2, 3)] + [""]
    shown.clear()
    w = AttentionWidget.from_transformers(model_for("llama", tokenizer), tokenizer, [TEXT, TEXT + " again"])
    shown.clear()  # (reading the text shown)
    w.head_scores()
    total = 2 + atlas.COUNT
    (scores,) = [h for h in shown if h.said[0].startswith("head scores")]
    assert scores.said == [f"head scores: text {i} of {total}" for i in range(1, total + 1)] + [""]
    shown.clear()
    w.head_scores()  # the repeated sequences read before: only the texts are counted
    (scores,) = [h for h in shown if h.said[0].startswith("head scores")]
    assert scores.said == ["head scores: text 1 of 2", "head scores: text 2 of 2", ""]


def test_flow_says_each_row_and_warns_before_a_long_run(shown, monkeypatch):
    from attnwidget import AttentionWidget, measures

    w = AttentionWidget("one two three four five six")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a short run: no warning
        w.flow()
    (handle,) = shown
    assert handle.said == [f"attention flow: row {i} of 6" for i in range(1, 7)] + [""]
    monkeypatch.setattr(measures, "FLOW_CELLS", 2)  # (as if the machine took a second for two cells)
    with pytest.warns(UserWarning, match=r"attention flow of 6 tokens through 1 layer takes about \d+ s"):
        w.flow()
