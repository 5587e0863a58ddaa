"""Views beyond one head's weights, drawn by the page's panel "Beyond one head": what a head's
pairs move (weight × ‖value‖), the mean of a layer's heads, rollout and flow up to the layer shown,
and the difference between two texts. Each is computed from an :class:`~attnwidget.inputs.Inputs`,
a queries × keys matrix for the state in its key (computed_views.py declares each one and makes its entry for the page).
"""

from __future__ import annotations

import functools
import itertools
import math

import numpy as np

from . import rules, threads
from .inputs import ACROSS_CROSS, NEAR_LIMIT, Inputs, largest_score, layout_of
from .maxflow import compiled_flow
from .mixing import attention_flow, attention_norms, rollout

# the reasons a widget cannot show a measure, each said once (the difference's are the rules': measure= refuses them)
NO_VALUES = (
    "weight × ‖value‖ needs each key's value, and this widget has attention weights alone: "
    "pass values= (one vector per key) to from_attentions"
)
# tokens² · layers: about a second of flow's maximum flows through causal layers on two cores, with igraph's
# routine or with the one written here (benchmarks/views.py); a two-way layer's pair takes the whole text's
# graph rather than its window, and its cell costs about TWO_WAY times as much
FLOW_CELLS = (60 if compiled_flow() else 28) ** 2 * 12
CHUNK = 64  # rows of a difference not kept, taken at a time (a few hundred kB)
TWO_WAY = ((60 / 44) if compiled_flow() else (28 / 16)) ** 2


def shown(inputs: Inputs) -> tuple[int, int]:
    """(the layer shown, the head shown): a widget of your own arrays is one layer of its heads."""
    s = inputs.state
    heads = len(inputs.layers[0][0]) if inputs.layers[0][0].ndim == 3 else 1
    return (rules.layer_index(s) if s["layer_shown"] else 0), min(s["head"], heads - 1)


def layer_weights(inputs: Inputs) -> np.ndarray:
    """The layer shown's heads' weights, heads × n × m, as head_summary computes them."""
    return next(itertools.islice(inputs.weights(), shown(inputs)[0], None))[0]


def heads_mean(inputs: Inputs, every: bool = False) -> np.ndarray:
    """The mean of the layer shown's heads' weights, rows × cols (``every``: of each layer, layers ×
    rows × cols): what the layer reads as a whole, before its heads' values weigh in."""
    layer = shown(inputs)[0]
    weights = enumerate(inputs.weights(None if every else layer))
    means = (w.mean(axis=0) for at, (w, _) in weights if every or at == layer)
    return np.stack(list(means)) if every else next(means)


def norms(inputs: Inputs, combined: bool = False) -> np.ndarray:
    """Weight × ‖value‖ of every head of the layer shown (mixing.attention_norms), from the widget's
    per-key Gram matrices of its heads' vectors (``inputs.extra["grams"]()``)."""
    weights = layer_weights(inputs)
    return attention_norms(weights, inputs.extra["grams"]()[: weights.shape[-1]], combined)


def across(inputs: Inputs, name: str, up_to: int | None = None, step=lambda row: None) -> np.ndarray:
    """Rollout (every layer's, up to ``up_to``) or flow (up to ``up_to``; ``step(i)`` before its row i)."""
    layers = inputs.across(name, up_to)
    return rollout(layers) if name == "rollout" else attention_flow(layers, step)


def across_every(inputs: Inputs, name: str) -> np.ndarray:
    """Rollout or flow up to each layer in turn, layers × rows × rows."""
    if name == "rollout":
        return across(inputs, name)
    layers = [w.copy() for w in inputs.across(name)]  # (each layer's weights are written over the last's)
    return np.stack([attention_flow(layers[: up + 1]) for up in range(len(layers))])


def flow_cells(causal: bool) -> float:
    """How many cells (tokens² · layers) flow computes in about a second."""
    return FLOW_CELLS if causal else FLOW_CELLS / TWO_WAY


def flow_seconds(n: int, layers: int, causal: bool = True) -> float:
    """About how long flow takes on n tokens through ``layers`` layers: flow_cells cells take a second, and each
    maximum flow grows with the graph (about n³ · layers in all, as benchmarks/views.py measures)."""
    cells = flow_cells(causal)
    return n * n * layers / cells * max(1.0, n / math.sqrt(cells / layers))


def lengths(sources) -> list[int]:
    """How many tokens each of a widget's texts (or sentences) has."""
    return [len(t.tokens) for t in (sources.texts or sources.examples)]


def pair(sources, shown_text: int) -> tuple[int, int]:
    """(the text shown, the next text of as many tokens): the pair the page's difference draws
    (rules.other_text: a ValueError saying why there is none)."""
    return shown_text, rules.other_text(lengths(sources), shown_text)


def check_pair(sources, a, b) -> None:
    """Refuse a pair of texts that difference(a, b) cannot compare, saying why."""
    counts = lengths(sources)
    if len(counts) < 2:
        raise ValueError(rules.TWO_TEXTS)
    if not (rules._is_int(a) and rules._is_int(b) and 0 <= a < len(counts) and 0 <= b < len(counts) and a != b):
        raise ValueError(
            f"a and b must be two different text indexes from 0 to {len(counts) - 1}; got a={a!r}, b={b!r}."
        )
    if counts[a] != counts[b]:
        raise ValueError(
            f"text {a} has {counts[a]} tokens and text {b} has {counts[b]}: "
            "the difference needs the same number of tokens "
            "in both, cell by cell (a minimal pair, such as two texts that differ in one word of one token)."
        )


def shared_rows(first: tuple, second: tuple) -> int:
    """How many leading rows of a layer read the same in two texts (their weights the same where both
    texts' layers are scored in the same blocks, as paired sees to): those whose query, bias and mask
    are the same and, where rows read only earlier keys (a causal model), whose keys up to their own
    are (in a minimal pair, the words before the one that differs). ``first``, ``second``: (q, k,
    allowed, bias, sinks) of each text's layer, as Inputs.each_layer gives them."""
    (qa, ka, aa, ba, _), (qb, kb, ab, bb, _) = first, second
    if qa.shape != qb.shape or ka.shape != kb.shape or (aa is None) != (ab is None) or (ba is None) != (bb is None):
        return 0

    def from_row(x, y) -> int:  # the first row (axis -2) where x and y differ; how many rows where none does
        if np.shape(x) != np.shape(y):
            return 0
        differs = np.asarray(x != y)
        rows = differs.any(axis=tuple(i for i in range(differs.ndim) if i != differs.ndim - 2))
        return int(rows.argmax()) if rows.any() else differs.shape[-2]

    earlier_only = aa is not None and not np.triu(aa, 1).any()
    keys = from_row(ka, kb)
    if keys < ka.shape[-2] and not earlier_only:
        return 0  # (every row reads every key)
    return min(from_row(qa, qb), keys, *(from_row(x, y) for x, y in ((aa, ab), (ba, bb)) if x is not None))


def paired(a: Inputs, b: Inputs):
    """Each layer's weights of the texts of ``a`` and ``b`` in turn, (wa, wb, skipped), heads × n × n,
    each written over the last's (write nothing into them: the cells they leave 0 stay so for the next).
    The blocks of rows within those both texts share (shared_rows) are not computed: their ``skipped``
    rows are 0 in both (their difference, 0, is that of the whole weights)."""
    held: list = [None, None]
    last: list = [None, None]
    for first, second in zip(a.each_layer(), b.each_layer()):
        largest = [largest_score(q, k) for q, k, *_ in (first, second)]
        # (a text whose scores near float64's limit has its layer scored whole, in other blocks: no row skipped)
        start = shared_rows(first, second) if all(x < NEAR_LIMIT for x in largest) else 0  # (NaN: not below)
        for i, (x, (q, k, allowed, bias, sinks)) in enumerate(zip((a, b), (first, second))):
            layout = layout_of(q, k, allowed, start, largest[i])
            held[i] = x.weights_of(q, k, allowed, bias, sinks, out=held[i], layout=layout, after=last[i])
            last[i] = layout
        yield held[0], held[1], min(last[0].skipped, last[1].skipped)


def differences(a: Inputs, b: Inputs, kept=lambda layer: True):
    """Each layer's difference of the weights of the texts of ``a`` and ``b``, heads × n × n (written
    over the last's), with each head's largest |difference| (largest). ``kept(layer)``: whether to keep
    that layer's difference; one not kept gives None and its largest values alone, taken a few rows at a
    time (its difference never written whole)."""
    d, zero = np.empty(0), 0  # (d's first ``zero`` rows are 0)
    for at, (wa, wb, skipped) in enumerate(paired(a, b)):
        keep = kept(at)
        if keep and d.shape != wa.shape:
            d, zero = np.zeros(wa.shape), len(wa[0])
        if keep:
            d[:, zero:skipped] = 0.0  # (rows the texts share now, not before)
            zero = skipped

        def head(h, wa=wa, wb=wb, skipped=skipped, keep=keep):  # (the rows skipped: 0 in both, their difference too)
            if keep:
                np.subtract(wa[h, skipped:], wb[h, skipped:], out=d[h, skipped:])  # noqa: B023
                parts = [d[h, skipped:]]  # noqa: B023
            else:  # (rows in chunks that stay in the core's cache)
                room = np.empty((CHUNK, wa.shape[-1]))
                parts = (
                    np.subtract(wa[h, r : r + CHUNK], wb[h, r : r + CHUNK], out=room[: len(wa[h, r : r + CHUNK])])
                    for r in range(skipped, len(wa[h]), CHUNK)
                )
            most = functools.reduce(np.maximum, (largest(part[None])[0] for part in parts), np.float64(-np.inf))
            return np.maximum(most, 0.0) if skipped else most

        yield (d if keep else None), np.array(threads.each(head, range(len(wa))))


def every_difference(a: Inputs, b: Inputs) -> np.ndarray:
    """Every layer's difference, layers × heads × n × n, each layer's written into its place (held once;
    the rows the texts share left as new memory's 0)."""
    out = np.empty(0)
    for at, (wa, wb, skipped) in enumerate(paired(a, b)):
        out = np.zeros((len(a.layers), *wa.shape)) if at == 0 else out
        threads.each(lambda h: np.subtract(wa[h, skipped:], wb[h, skipped:], out=out[at, h, skipped:]), range(len(wa)))  # noqa: B023
    return out


def largest(d: np.ndarray) -> np.ndarray:
    """Each head's largest |d| (heads × n × m): its largest and its smallest, with no |d| made."""
    return np.maximum(d.max(axis=(1, 2), initial=-np.inf), -d.min(axis=(1, 2), initial=np.inf)) + 0.0  # (not −0)


def difference(inputs: Inputs, every: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """The head shown's difference from the other text (``inputs.extra["other"]()``, the Inputs of
    the next text of as many tokens) at the layer shown (``every``: every head's at every layer,
    layers × heads × rows × cols), and every head's largest |difference| (layers × heads), in one
    pass over the layers."""
    layer, head = shown(inputs)
    matrix, most, kept = np.empty(0), [], []
    keep = (lambda at: True) if every else (lambda at: at == layer)
    for at, (d, largest_here) in enumerate(differences(inputs, inputs.extra["other"](), keep)):
        most.append(largest_here)
        if every:
            kept.append(d.copy())  # (each layer's is written over the last's)
        elif at == layer:
            matrix = d[head].copy()
    return (np.stack(kept) if every else matrix), np.array(most)


def available(state: dict, difference: str = rules.TWO_TEXTS) -> dict[str, str]:
    """Each measure's name -> "" where a widget in ``state`` (the rules' plain state) can show it,
    else why not (the page's tooltip); ``difference``: why the texts have no difference, or ""."""
    n, layers = rules.rows(state), max(1, state["n_layers"] if state["layer_shown"] else 1)
    cells = flow_cells(state["causal"])
    too_many = n * n * layers > cells
    flow = (
        ACROSS_CROSS.format(what="flow")
        if state["cross"]
        else f"flow is exact, a maximum flow for each pair: {n} tokens × {layers} layers is too many for the page "
        f"(about {int((cells / layers) ** 0.5)} tokens at most); w.flow() computes it in Python, or use rollout"
        if too_many
        else ""
    )
    return {
        "norms": NO_VALUES if state["weights_only"] == "weights" else "",
        "mean": "",
        "rollout": ACROSS_CROSS.format(what="rollout") if state["cross"] else "",
        "flow": flow,
        "difference": difference,
    }
