"""Ready-made widgets: the lab, the first demo of "Attention, Visually", and its query dial.
They build widgets, so they live apart from the data in examples.py, which the widget uses."""

from __future__ import annotations

from .examples import SENSE_AXES
from .widget import AttentionWidget


def lab():
    """The lab's sentence at the weights stage, focused on "bank"."""
    return AttentionWidget(stage="weights", focus=5)


def visually():
    """The article's first demo: the causal rule on, so the words after "bank" get nothing."""
    return AttentionWidget(
        ["I sat on the river bank and read", "I put my money in the bank and left"],
        focus=5,
        stage="weights",
        causal=True,
    )


def query_dial():
    """The query you can turn, as in "Attention, Visually": bank's two-number query against
    the keys of river, money and the. The scores (dot products) are 0.99, 0.48 and -0.45;
    multiplied by 3, softmax makes them 81%, 18% and 1%.

    bank reads exactly those three keys: the mask closes its own cell, so its weights add up
    to 100% over the article's table. Drag the query's tip in the query/key stage.
    """
    tokens = ["river", "money", "the", "bank"]
    q = [[0.60, 0.00], [0.00, 0.60], [0.30, 0.30], [0.60, 0.80]]
    k = [
        [0.73, 0.69],
        [0.80, 0.00],
        [-0.35, -0.30],
        [-0.60, -0.80],
    ]  # dot products with bank's query: 0.99, 0.48, -0.45
    v = [[1.00, 0.00], [0.00, 1.00], [0.10, 0.10], [0.50, 0.50]]
    mask = [[True] * 4, [True] * 4, [True] * 4, [True, True, True, False]]  # bank does not read itself
    return AttentionWidget(
        tokens=tokens, q=q, k=k, v=v, x=v, mask=mask, scale=3.0, focus=3, stage="qk", value_axes=SENSE_AXES
    )


PRESETS = {"lab": lab, "visually": visually, "dial": query_dial}
