"""Head scores over a widget's texts: which heads are attention sinks, which read the previous
token, themselves or the earlier copies of their own token, which are induction heads, and how
spread their rows are. Each is one number per layer and head, a mean over the widget's texts
(every text counted alike), at the widget's temperature, causal rule, masks and sink, computed
one text's layers at a time from an :class:`~attnwidget.inputs.Inputs` per text; a model's texts
are read while they fit ``sources.HOLD`` bytes, past it a few at a time (``sources.KEEP``), so
memory stays bounded however many texts there are. The induction score reads the model on
texts of its own: random tokens repeated twice.
"""

from __future__ import annotations

import numpy as np

from .inputs import Inputs
from .kvcache import STREAMING
from .sources import Sources

SCORES = ("sink", "previous", "self", "duplicate", "induction", "entropy", "streaming", "retrieval")
OWN_TEXTS = ("induction", "retrieval")  # read on texts of the score's own, by running the model again
SINK_HEAD = 0.3  # a head whose sink score passes this is a sink head (Gu et al., ICLR 2025)
# the induction score's texts: COUNT sequences of COPY random ordinary tokens, each repeated twice (seeded)
COPY, COUNT, SEED = 50, 4, 0
NOT_A_MODEL = (
    "the induction score runs the model on repeated random tokens: it needs a widget made from a model "
    "(AttentionWidget.from_transformers, from_nnsight or from_transformer_lens), not your own arrays, sentences "
    "or attention weights alone"
)


def text_scores(weights: np.ndarray, tokens, cross: bool = False) -> dict[str, np.ndarray]:
    """One text's scores of one layer's heads (weights: heads × n × m, rows read; in
    cross-attention, ``cross``, a row and a column of one number are different texts' tokens, so
    "previous", "self" and "duplicate" are NaN):

    - ``"sink"``: the mean over rows i of W[i, 0], the weight on the first token;
    - ``"previous"``: the mean over rows i ≥ 1 of W[i, i − 1] (NaN for one token);
    - ``"self"``: the mean over rows of W[i, i];
    - ``"duplicate"``: over rows whose token appeared earlier, the mean of the weight on its
      earlier copies, summed (NaN when no token repeats);
    - ``"entropy"``: the mean over rows of the row's entropy in nats (0·ln 0 = 0);
    - ``"streaming"``: the mean over rows of the row's weight on the first kvcache.STREAMING[0] tokens
      and its neighbours, ``|i − j| < STREAMING[1]`` (under the causal rule: the most recent), what a
      streaming cache keeps (DuoAttention's split: near 1 a streaming head, lower a head that reads
      far back); NaN in cross-attention.
    """
    if weights.ndim < 2 or 0 in weights.shape[-2:]:  # (no row or no column: no weight to score)
        raise ValueError(
            f"a layer's weights are heads × queries × keys, with at least one query and one key; got shape "
            f"{weights.shape}: score a text that has tokens"
        )
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
            "streaming": nan,
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
        "streaming": (weights * streamed(n, weights.shape[-1])).sum(axis=-1).mean(axis=-1),
    }


def streamed(n: int, m: int) -> np.ndarray:
    """The cells a streaming cache keeps for each row (n × m): the first STREAMING[0] columns and those
    within STREAMING[1] of the row."""
    sinks, local = STREAMING
    i, j = np.arange(n)[:, None], np.arange(m)[None, :]
    return (j < sinks) | (np.abs(i - j) < local)


def repeated(reader, copy: int = COPY, count: int = COUNT, seed: int = SEED) -> tuple[list[list[int]], int, int]:
    """The induction score's texts for the model ``reader`` reads (integrations.common.Reader):
    ``count`` sequences, each the tokenizer's specials around ``copy`` random ordinary tokens
    written twice (fewer when the model reads fewer positions), seeded; and where the first copy
    starts and how long a copy is."""
    prefix, suffix = reader.ends()
    room = int(min(reader.positions, 10**9)) - len(prefix) - len(suffix)
    m = min(copy, room // 2)
    vocabulary = reader.ordinary()
    if m < 2 or len(vocabulary) < 2:
        raise ValueError(
            f"the induction score repeats random tokens twice, but this model reads {reader.positions} positions "
            f"and its tokenizer has {len(vocabulary)} ordinary tokens: it needs at least 4 positions and 2 tokens"
        )
    rng = np.random.default_rng(seed)
    sequences = []
    for _ in range(count):
        r = rng.choice(vocabulary, m).tolist()
        sequences.append([*prefix, *r, *r, *suffix])
    return sequences, len(prefix), m


def induction(weights: np.ndarray, start: int, m: int) -> np.ndarray:
    """One layer's induction scores on one repeated sequence (weights: heads × n × n; the first
    copy of m tokens starts at ``start``): the mean over the second copy's rows i of W[i, i − m + 1],
    the weight on the token that followed this token's earlier copy (Olsson et al., 2022)."""
    rows = np.arange(start + m, start + 2 * m)
    return weights[..., rows, rows - m + 1].mean(axis=-1)


def check_names(names, model: bool) -> tuple:
    """The scores asked for (for None every one a widget has, ``model``: "induction" too; "retrieval"
    only when asked, as the model writes many long texts), checked."""
    if names is None:
        return tuple(n for n in SCORES if n != "retrieval" and (model or n != "induction"))
    names = (names,) if isinstance(names, str) else tuple(names)
    if not names:
        raise ValueError(
            f"no scores asked for (the list of names is empty): pass some of {', '.join(map(repr, SCORES))}, or "
            "names=None for every one the widget has"
        )
    bad = [n for n in names if n not in SCORES]
    if bad:
        raise ValueError(f"head scores are {', '.join(map(repr, SCORES))}; got {bad[0]!r}")
    if "induction" in names and not model:
        raise ValueError(NOT_A_MODEL)
    if "retrieval" in names and not model:
        raise ValueError(NOT_A_MODEL.replace("the induction score runs the model on repeated random tokens", NO_WRITER))
    return names


NO_WRITER = "the retrieval score has the model write (a needle in a long text, needle.py)"


def read_needle(reader, step=lambda fraction: None, **options) -> np.ndarray:
    """Each head's retrieval score (needle.retrieval_scores, layers × heads) for the model ``reader``
    reads, at ``options`` (needle.retrieval_scores'; by default its own, with the needle.LENGTHS that
    fit the model's positions, else the longest that fits), kept by the reader: the last read is the
    one the overview shows."""
    from . import needle

    if options or "retrieval" not in reader.kept:
        if reader.model is None or not hasattr(reader.model, "generate"):
            raise ValueError(
                f"{NO_WRITER}: it needs a widget from_transformers of a model that generates (a causal language "
                "model); call attnwidget.needle.retrieval_scores(model, tokenizer) for other models"
            )
        room = int(min(reader.positions, 10**6)) - 200  # (the BOS, the needle, the question and the answer)
        options.setdefault("lengths", [n for n in needle.LENGTHS if n <= room] or [room])
        reader.kept["retrieval"] = needle.retrieval_scores(reader.model, reader.tokenizer, progress=step, **options)
    return reader.kept["retrieval"]["retrieval"]


def read_already(reader) -> bool:
    """The model's repeated sequences were read before (by ``reader``): the induction score reads nothing."""
    return (COPY, COUNT, SEED) in reader.kept


def read_repeated(inputs: Inputs, step=lambda done: None):
    """(start, m, each sequence's Inputs) for the induction score: the model read once on its
        repeated sequences (kept by its reader; ``step(i)`` before the i-th is read, not called when
    they were read before), each at the widget's
        temperature, causal rule, scale and sink, with the model's own masks and bias on those
        tokens; or ValueError for a widget not from a model."""
    reader = inputs.extra.get("reader")
    if reader is None:
        raise ValueError(NOT_A_MODEL)
    key = (COPY, COUNT, SEED)
    if not read_already(reader):
        sequences, start, m = repeated(reader)
        reader.kept[key] = (start, m, [step(i) or reader.read(ids) for i, ids in enumerate(sequences, 1)])
    start, m, found = reader.kept[key]
    # each sequence as a text of its own, not the one shown (index -1), every token read
    state = {**inputs.state, "sentences": [""], "sentence_index": -1, "step": 0, "block": "", "mask": None}
    return start, m, (Inputs({**state, "n_layers": len(f.layers)}, Sources(texts=[f]), 0) for f in found)


def head_scores(texts, repeats=None, best: dict | None = None) -> dict[str, np.ndarray]:
    """The mean of each score over ``texts`` (an iterable of (tokens, Inputs) pairs, read one at a
    time), layers × heads; a text without a score (no repeated token) leaves it out of that mean.
    ``repeats``: a call giving read_repeated's, for "induction", made once the texts are scored
    (without it, "induction" is left out). ``best``:
    filled with each score's text where each head's is highest (layers × heads indices, -1: none)."""
    sums: dict[str, np.ndarray] = {}
    counts: dict[str, np.ndarray] = {}
    tops: dict[str, np.ndarray] = {}
    best = {} if best is None else best
    names = [n for n in SCORES if n not in OWN_TEXTS]
    for t, (tokens, inputs) in enumerate(texts):
        layers = [text_scores(w, tokens, inputs.cross) for w, _ in inputs.weights()]
        for name in names:
            got = np.array([s[name] for s in layers], dtype=float)
            if name in sums and np.shape(sums[name]) != got.shape:
                raise ValueError(
                    f"head scores average each head over the texts, but the texts have {got.shape} and "
                    f"{np.shape(sums[name])} layers × heads: give every text the same layers and heads"
                )
            seen = ~np.isnan(got)
            higher = seen & ~(got <= tops.get(name, -np.inf))
            tops[name] = np.where(higher, got, tops.get(name, -np.inf))
            best[name] = np.where(higher, t, best.get(name, -1))
            sums[name] = sums.get(name, 0) + np.where(seen, got, 0)
            counts[name] = counts.get(name, 0) + seen
    with np.errstate(invalid="ignore", divide="ignore"):
        out = {n: np.where(counts[n] > 0, sums[n] / np.maximum(counts[n], 1), np.nan) for n in names if n in sums}
    if repeats is not None:
        start, m, sequences = repeats()
        each = [np.array([induction(w, start, m) for w, _ in s.weights()]) for s in sequences]
        out["induction"] = np.mean(each, axis=0)
    return {name: out[name] for name in SCORES if name in out}


def sink_heads(scores: dict[str, np.ndarray]) -> int:
    """How many heads are sink heads: their sink score passes SINK_HEAD."""
    return int((scores["sink"] > SINK_HEAD).sum())
