"""Queries and keys seen together (after AttentionViz, Yeh et al. 2023): one head's every query and
key vector of every text of the widget in one 2-D picture.

Before the projection the queries are scaled by c and the keys by 1/c so that their mean norms are
equal, and the keys are then moved so that their centroid is the queries'. Neither changes a
weight: q·k is unchanged by the scaling, and moving every key by t adds q·t to a whole row of
scores, which the softmax takes away (not under a soft cap, Gemma 2's, which bends the scores
before the softmax: there the map's moved keys would give slightly other weights; the picture is
of the vectors all the same). Then the union is projected on its first two principal
components (deterministic: each axis's sign is the one that makes its largest loading positive);
t-SNE (scikit-learn) or UMAP (umap-learn) where the user has installed them.
"""

from __future__ import annotations

import numpy as np

from . import rules
from .inputs import Inputs, head_of

METHODS = ("pca", "tsne", "umap")


def check(inputs: Inputs, layer, head, method: str) -> tuple[int, int]:
    """(layer, head), checked against the widget's layers (by the model's numbers) and heads, and the method;
    the layer returned is its place among the layers held."""
    s = inputs.state  # (vectors of one's own on a model's widget: one layer, theirs)
    if s.get("weights_only"):  # its queries and keys are zeros: every point at (0, 0)
        raise ValueError(rules.NO_QK_MAP)
    layers, heads = (max(1, s["n_layers"]) if s["layer_shown"] else 1), rules.n_heads(s)
    numbers = list(s.get("layer_numbers") or ()) if s["layer_shown"] else []
    if numbers:  # (the model's own numbers: a hybrid's attention layers)
        if not (rules._is_int(layer) and layer in numbers):
            raise ValueError(
                f"layer must be one of this model's layers with attention weights ({', '.join(map(str, numbers))}), "
                f"got {layer!r}"
            )
        layer = numbers.index(layer)
    for name, value, count in (("layer", layer, layers), ("head", head, heads)):
        if not (rules._is_int(value) and 0 <= value < count):
            raise ValueError(f"{name} must be from 0 to {count - 1} for this widget, got {value!r}")
    if method not in METHODS:
        raise ValueError(f"method must be one of {', '.join(map(repr, METHODS))}, got {method!r}")
    return int(layer), int(head)


def vectors(inputs: Inputs, layer: int, head: int):
    """Each text's (tokens, key tokens, queries, keys) of one head, the rows and keys read, one text at a time."""
    for _, each in inputs.texts():
        q, k, *_ = each.layers[layer]
        labels = each.state["tokens"] if each.other is None else each.other["tokens"]
        keys = each.state["key_tokens"] if each.other is None else each.other.get("key_tokens")
        yield (
            list(labels[: each.rows]),
            list((keys or labels)[: each.keys]),
            np.asarray(head_of(q, head), dtype=float)[: each.rows],
            np.asarray(head_of(k, head), dtype=float)[: each.keys],
        )


def balance(q: np.ndarray, k: np.ndarray) -> tuple[np.ndarray, np.ndarray, float, np.ndarray]:
    """Queries scaled by c and keys by 1/c (equal mean norms), then keys moved by t so that their
    centroid is the queries': (queries, keys, c, t). No attention weight changes."""
    nq, nk = np.linalg.norm(q, axis=1).mean(), np.linalg.norm(k, axis=1).mean()
    c = float(np.sqrt(nk / nq)) if nq > 0 and nk > 0 else 1.0
    q, k = q * c, k / c
    t = q.mean(axis=0) - k.mean(axis=0)
    return q, k + t, c, t


def principal(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """x projected on its first two principal components (points × 2; a second axis of zeros for
    one-number vectors), each axis signed so that its largest loading is positive; and the share
    of the variance each explains."""
    centred = x - x.mean(axis=0)
    _, s, axes = np.linalg.svd(centred, full_matrices=False)
    axes = axes[:2]
    axes = axes * np.sign(axes[np.arange(len(axes)), np.abs(axes).argmax(axis=1)])[:, None]
    points = centred @ axes.T
    total = float((s**2).sum())
    explained = (s[:2] ** 2) / total if total > 0 else np.zeros(len(axes))
    if points.shape[1] < 2:
        points, explained = np.pad(points, ((0, 0), (0, 2 - points.shape[1]))), np.pad(explained, (0, 1))
    return points, explained


def _embedded(x: np.ndarray, method: str) -> np.ndarray:
    """t-SNE or UMAP of x in 2-D, seeded; ImportError saying what to install."""
    try:
        if method == "tsne":
            from sklearn.manifold import TSNE

            return TSNE(2, random_state=0, perplexity=min(30.0, max(1.0, (len(x) - 1) / 3))).fit_transform(x)
        import umap

        return umap.UMAP(n_components=2, random_state=0).fit_transform(x)
    except ImportError as e:
        package = "scikit-learn" if method == "tsne" else "umap-learn"
        raise ImportError(f"method={method!r} needs {package}: pip install {package} (or the default, 'pca')") from e


def query_key_map(inputs: Inputs, layer: int, head: int, method: str = "pca") -> dict:
    """One head's queries and keys of every text in 2-D (see the module's docstring): points (N ×
    2, float64), text, position, kind ("query" or "key") and token of each, the scale c and shift
    t applied, and the variance each principal axis explains (None for t-SNE and UMAP)."""
    texts, positions, kinds, labels, qs, ks = [], [], [], [], [], []
    for t, (tokens, key_tokens, q, k) in enumerate(vectors(inputs, layer, head)):
        qs.append(q)
        ks.append(k)
        for kind, names in (("query", tokens), ("key", key_tokens)):
            texts.append(np.full(len(names), t))
            positions.append(np.arange(len(names)))
            kinds.append(np.full(len(names), kind == "query"))
            labels.extend(names)
    widths = sorted({a.shape[1] for a in qs + ks})
    if len(widths) > 1:  # (the lab's fitted sentence beside the lexicon's two-number ones)
        raise ValueError(
            f"the texts' queries and keys have different widths ({' and '.join(map(str, widths))} numbers): they are "
            "not in one space, so one map cannot hold them; make a widget of texts whose vectors have one width"
        )
    q_all, k_all, c, shift = balance(np.concatenate(qs), np.concatenate(ks))
    # the points in text order, each text's queries then its keys
    pieces, at_q, at_k = [], 0, 0
    for q, k in zip(qs, ks):
        pieces += [q_all[at_q : at_q + len(q)], k_all[at_k : at_k + len(k)]]
        at_q, at_k = at_q + len(q), at_k + len(k)
    x = np.concatenate(pieces)
    points, explained = principal(x) if method == "pca" else (_embedded(x, method), None)
    query = np.concatenate(kinds)
    return {
        "points": np.asarray(points, dtype=float),
        "text": np.concatenate(texts),
        "position": np.concatenate(positions),
        "kind": np.where(query, "query", "key"),
        "token": labels,
        "scale": c,
        "shift": shift,
        "explained": explained,
        "layer": rules.layer_number(inputs.state, layer) if inputs.state["layer_shown"] else layer,
        "head": head,
        "method": method,
    }
