"""Built-in sentences and their vectors: the lab, and a toy lexicon for any sentence."""

from __future__ import annotations

import hashlib
import json
import pathlib
import re
from dataclasses import dataclass

import numpy as np

_DATA = pathlib.Path(__file__).parent / "data"

LAB_SENTENCE = "She sat by the river bank"
SENSE_AXES = ["river sense", "money sense"]


@dataclass(frozen=True)
class Example:
    tokens: list
    q: np.ndarray
    k: np.ndarray
    v: np.ndarray
    value_axes: list
    x: np.ndarray | None = None  # each token's own embedding, for the residual view


def lab() -> Example:
    """The lab's six tokens: Q and K of width 4 and two-dimensional values whose
    axes are the river sense and the money sense of "bank".

    The numbers are fitted (``scripts/fit_lab_vectors.py``) so that the widget
    reproduces every figure the lab's text quotes.
    """
    d = json.loads((_DATA / "lab.json").read_text(encoding="utf-8"))
    arr = lambda key: np.array(d[key], dtype=float)
    return Example(list(d["tokens"]), arr("q"), arr("k"), arr("v"), SENSE_AXES)


# --- the toy lexicon ---------------------------------------------------------------
# Every vector has two numbers. Values (and embeddings) sit on two axes: a river/water
# sense and a money sense. A key says what a word offers, a query what it looks for:
# content words offer their sense strongly; "bank" offers little of its own and looks for
# both senses, so whichever sense word is near it takes its attention; function words
# offer a negative key, so nobody reads them much.
#                 value           key            query
_WATER = {
    "river": ((1.00, 0.00), (1.60, 0.00), (0.60, 0.00)),
    "water": ((0.90, 0.05), (1.50, 0.00), (0.60, 0.00)),
    "stream": ((0.85, 0.00), (1.40, 0.00), (0.60, 0.00)),
    "shore": ((0.80, 0.00), (1.30, 0.00), (0.60, 0.00)),
    "boat": ((0.75, 0.05), (1.20, 0.10), (0.60, 0.00)),
    "fish": ((0.70, 0.00), (1.20, 0.00), (0.60, 0.00)),
    "swim": ((0.60, 0.00), (1.00, 0.00), (0.50, 0.00)),
}
_MONEY = {
    "money": ((0.00, 1.00), (0.00, 1.60), (0.00, 0.60)),
    "cash": ((0.00, 0.90), (0.00, 1.50), (0.00, 0.60)),
    "loan": ((0.05, 0.90), (0.00, 1.40), (0.00, 0.60)),
    "deposit": ((0.10, 0.85), (0.10, 1.30), (0.00, 0.60)),
    "account": ((0.00, 0.80), (0.00, 1.30), (0.00, 0.60)),
    "paid": ((0.00, 0.70), (0.00, 1.10), (0.00, 0.50)),
}
_AMBIGUOUS = {
    "bank": ((0.50, 0.50), (0.25, 0.25), (1.80, 1.80)),
}
_FUNCTION_VECTORS = ((0.10, 0.10), (-0.30, -0.30), (0.30, 0.30))
_FUNCTION_WORDS = (
    "the a an i she he we they it my your his her our their on in by of at to from with and or but sat put read left "
    "is was are were"
).split()

LEXICON = {**_WATER, **_MONEY, **_AMBIGUOUS, **{w: _FUNCTION_VECTORS for w in _FUNCTION_WORDS}}
"""word -> (value, key, query), each two numbers; the embedding is the value."""

_TOKEN = re.compile(r"\w+(?:['’]\w+)*|[^\w\s]")


def tokenize(sentence: str) -> list:
    """Words, with punctuation split off as tokens of its own."""
    return _TOKEN.findall(sentence)


def word_vectors(word: str):
    """(value, key, query) for a word: from the lexicon, or a deterministic fallback.

    An unknown word gets small vectors near a function word's, derived from a hash of the
    lower-cased word, so the same word gives the same vectors on every run and machine.
    """
    found = LEXICON.get(word.lower())
    if found is not None:
        return tuple(np.array(x, dtype=float) for x in found)
    digest = hashlib.sha256(word.lower().encode("utf-8", "surrogatepass")).digest()  # any str, lone surrogates too
    jitter = np.frombuffer(digest[:12], dtype=">u2").astype(float) / 65535 * 2 - 1  # six numbers in [-1, 1]
    base = np.array(_FUNCTION_VECTORS, dtype=float)
    return tuple(base[i] + np.array([0.1, 0.1]) * jitter[2 * i : 2 * i + 2] for i in range(3))


def from_lexicon(sentence: str) -> Example:
    """Tokens and toy vectors for any sentence."""
    tokens = tokenize(sentence)
    if not tokens:
        raise ValueError(f"The sentence {sentence!r} has no tokens: give at least one word.")
    value, key, query = (np.array(m) for m in zip(*(word_vectors(t) for t in tokens)))
    return Example(tokens, query, key, value, SENSE_AXES, x=value.copy())


def sentence_example(sentence=None) -> Example:
    """The vectors for a sentence: the lab's own for the lab sentence (or None), else the toy lexicon's."""
    if sentence is None or " ".join(str(sentence).split()) == LAB_SENTENCE:
        return lab()
    if not isinstance(sentence, str):
        raise TypeError(f"A sentence must be a string, got {type(sentence).__name__}.")
    return from_lexicon(sentence)
