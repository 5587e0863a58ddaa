"""Head scores over a widget's texts: which heads are attention sinks, which read the previous
token, themselves or the earlier copies of their own token, and how spread their rows are. Each
is one number per layer and head, a mean over the widget's texts (every text counted alike), at
the widget's temperature, causal rule, masks and sink, computed one text's layers at a time from
an :class:`~attnwidget.inputs.Inputs` per text, so many texts cost the memory of one.
"""

from __future__ import annotations

import numpy as np

SCORES = ("sink", "previous", "self", "duplicate", "entropy")
SINK_HEAD = 0.3  # a head whose sink score passes this is a sink head (Gu et al., ICLR 2025)


def text_scores(weights: np.ndarray, tokens, cross: bool = False) -> dict[str, np.ndarray]:
    """One text's scores of one layer's heads (weights: heads × n × m, rows read; in
    cross-attention, ``cross``, a row and a column of one number are different texts' tokens, so
    "previous", "self" and "duplicate" are NaN):

    - ``"sink"``: the mean over rows i of W[i, 0], the weight on the first token;
    - ``"previous"``: the mean over rows i ≥ 1 of W[i, i − 1] (NaN for one token);
    - ``"self"``: the mean over rows of W[i, i];
    - ``"duplicate"``: over rows whose token appeared earlier, the mean of the weight on its
      earlier copies, summed (NaN when no token repeats);
    - ``"entropy"``: the mean over rows of the row's entropy in nats (0·ln 0 = 0).
    """
    n = weights.shape[-2]
    nan = np.full(weights.shape[:-2], np.nan)
    logw = np.log(np.where(weights > 0, weights, 1.0))
    if cross or weights.shape[-1] != n:
        return {
            "sink": weights[..., :, 0].mean(axis=-1),
            "previous": nan,
            "self": nan,
            "duplicate": nan,
            "entropy": -(weights * logw).sum(axis=-1).mean(axis=-1),
        }
    rows = np.arange(n)
    text = np.array([str(t) for t in tokens[:n]], dtype=object)
    earlier = np.tril(text[:, None] == text[None, :], -1)  # (i, j): j < i holds row i's token
    repeats = earlier.any(axis=1)
    return {
        "sink": weights[..., :, 0].mean(axis=-1),
        "previous": weights[..., rows[1:], rows[1:] - 1].mean(axis=-1) if n > 1 else nan,
        "self": weights[..., rows, rows].mean(axis=-1),
        "duplicate": (weights * earlier).sum(axis=-1)[..., repeats].mean(axis=-1) if repeats.any() else nan,
        "entropy": -(weights * logw).sum(axis=-1).mean(axis=-1),
    }


def head_scores(texts) -> dict[str, np.ndarray]:
    """The mean of each score over ``texts`` (an iterable of (tokens, Inputs) pairs, read one at a
    time), layers × heads; a text without a score (no repeated token) leaves it out of that mean."""
    sums: dict[str, np.ndarray] = {}
    counts: dict[str, np.ndarray] = {}
    for tokens, inputs in texts:
        layers = [text_scores(w, tokens, inputs.cross) for w, _ in inputs.weights()]
        for name in SCORES:
            got = np.array([s[name] for s in layers], dtype=float)
            if name in sums and np.shape(sums[name]) != got.shape:
                raise ValueError(
                    f"head scores average each head over the texts, but the texts have {got.shape} and "
                    f"{np.shape(sums[name])} layers × heads: give every text the same layers and heads"
                )
            seen = ~np.isnan(got)
            sums[name] = sums.get(name, 0) + np.where(seen, got, 0)
            counts[name] = counts.get(name, 0) + seen
    with np.errstate(invalid="ignore", divide="ignore"):
        return {name: np.where(counts[name] > 0, sums[name] / np.maximum(counts[name], 1), np.nan) for name in SCORES}


def sink_heads(scores: dict[str, np.ndarray]) -> int:
    """How many heads are sink heads: their sink score passes SINK_HEAD."""
    return int((scores["sink"] > SINK_HEAD).sum())
