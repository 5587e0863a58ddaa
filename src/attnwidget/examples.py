"""Built-in sentences and their vectors."""

from __future__ import annotations

import json
import pathlib
from dataclasses import dataclass

import numpy as np

_DATA = pathlib.Path(__file__).parent / "data"

LAB_SENTENCE = "She sat by the river bank"


@dataclass(frozen=True)
class Example:
    tokens: list
    q: np.ndarray
    k: np.ndarray
    v: np.ndarray
    value_axes: list


def lab() -> Example:
    """The lab's six tokens: Q and K of width 4 and two-dimensional values whose
    axes are the river sense and the money sense of "bank".

    The numbers are fitted (``scripts/fit_lab_vectors.py``) so that the widget
    reproduces every figure the lab's text quotes.
    """
    d = json.loads((_DATA / "lab.json").read_text(encoding="utf-8"))
    arr = lambda key: np.array(d[key], dtype=float)  # noqa: E731
    return Example(list(d["tokens"]), arr("q"), arr("k"), arr("v"), ["river sense", "money sense"])


def sentence_example(sentence=None) -> Example:
    """The vectors for a built-in sentence (None means the lab sentence)."""
    if sentence is None or " ".join(str(sentence).split()) == LAB_SENTENCE:
        return lab()
    raise ValueError(
        f"No built-in vectors for {sentence!r}; the built-in sentence is {LAB_SENTENCE!r}. "
        "For your own sentence pass tokens=, q=, k= and v= arrays."
    )
