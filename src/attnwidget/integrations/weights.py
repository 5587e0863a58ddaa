"""Attention weights alone, as other tools give them: Hugging Face's ``output_attentions``, an
array of patterns, a TransformerLens ``ActivationCache``.

Weights determine the scores only up to a constant per row: every set of scores whose softmax is
W is log W + c_i. So a widget of weights is a model whose queries and keys are zero (width 1) and
whose scores are log W, carried as each layer's ``bias``: softmax(log W / T) is W at T = 1 and W
re-tempered at any other T, exactly as from the scores. A cell of weight 0 stays 0: closed by the
causal rule or the layer's mask where every head has it, and given a score of ``formulas.CLOSED``,
which closes a cell at every temperature, so no later mask, causal rule or temperature opens it. The
query/key and scores stages are not offered (the page and the rules refuse them), nor the blend
unless values are given.
"""

from __future__ import annotations

import numpy as np

from ..formulas import (
    CLOSED,  # the score of a cell given 0: closed at every temperature, whatever the mask or causal rule
)
from .common import ModelAttention

ROW_SUM = (
    1e-4  # how far from 1 a row's weights may sum; HALF_ROW_SUM for half precision, which a softmax is cast back to
)
HALF_ROW_SUM = 1e-2


def read(attentions, tokens, key_tokens=None, values=None) -> ModelAttention:
    """Every layer's weights (layers of heads × queries × keys), checked, as a ModelAttention."""
    layers, half = _layers(attentions)
    n, m = layers[0].shape[1:]
    for i, w in enumerate(layers[1:], 1):
        if w.shape != layers[0].shape:
            raise ValueError(
                f"layer {i} has {w.shape[0]} heads of {w.shape[1]} × {w.shape[2]} weights, but layer 0 has "
                f"{layers[0].shape[0]} of {n} × {m}: every layer of one text has the same heads and tokens"
            )
    tokens = _labels(tokens, "tokens")
    keys = None if key_tokens is None else _labels(key_tokens, "key_tokens")
    if len(tokens) != n or len(keys if keys is not None else tokens) != m:
        given = f"{len(tokens)} tokens" + ("" if keys is None else f" and {len(keys)} key_tokens")
        more = n - len(tokens)
        if keys is None and n == m and 0 < more <= 3:  # (what a tokenizer adds: tokens taken from the text alone)
            raise ValueError(
                f"the weights are {n} queries × {m} keys, but {given} were given: {more} position"
                f"{'s' if more > 1 else ''} more than the tokens, as a tokenizer's special tokens ([CLS] … [SEP], <s>) "
                'add: pass the tokens the model read, tokenizer.convert_ids_to_tokens(inputs["input_ids"][0])'
            )
        cross = " (for cross-attention, pass key_tokens= for the columns)" if keys is None and n != m else ""
        raise ValueError(
            f"the weights are {n} queries × {m} keys, but {given} were given{cross}: give one token per row and per "
            "column"
        )
    for i, w in enumerate(layers):
        _check(w, i, HALF_ROW_SUM if half else ROW_SUM)
    causal = keys is None and n == m and all(not np.triu(w, 1).any() for w in layers)
    above = np.triu(np.ones((n, m), dtype=bool), 1) if causal else np.zeros((n, m), dtype=bool)
    masks, biases = [], []
    for i, w in enumerate(layers):
        closed = (w == 0).all(axis=0) & ~above  # what the causal rule does not close: the layer's mask
        alone = (w.sum(axis=-1) == 0) & ~(w == 0).all(
            axis=(0, 2)
        )  # a row reading nothing in one head, something in another
        if alone.any():
            h, row = np.argwhere(alone)[0]
            raise ValueError(
                f"row {row} of head {h} (layer {i}) is all 0, but other heads read in that row: a row that reads "
                "nothing "
                "is shown only where every head of the layer has it (a mask); give that head the weights it had"
            )
        masks.append(None if not closed.any() else ~closed)
        with np.errstate(divide="ignore"):
            bias = np.log(w.astype(np.float64))  # (float32's own logs would move re-tempered weights by ~1e-7 / T)
        bias[np.isneginf(bias) | closed | above] = (
            CLOSED  # closed by its score too: a new mask or causal=False keeps it
        )
        biases.append(bias)
    heads = len(layers[0])
    dtype = layers[0].dtype
    q, k = np.zeros((heads, n, 1), dtype), np.zeros((heads, m, 1), dtype)
    v = k if values is None else _values(values, heads, m)
    return ModelAttention(
        tokens=tokens,
        layers=[(q, k, v)] * len(layers),
        causal=causal,
        scale=1.0,
        architecture="weights",
        model_name="attention weights",
        key_tokens=keys,
        masks=masks if any(mk is not None for mk in masks) else None,
        biases=biases,
        weights_only="weights and values" if values is not None else "weights",
    )


def _layers(attentions) -> tuple[list[np.ndarray], bool]:
    """Layers of heads × n × m, from each form taken (float32 kept, anything else float64), and
    whether they came in half precision."""
    if hasattr(attentions, "keys") and "attentions" in attentions.keys():  # a Hugging Face output: its attentions
        attentions = attentions["attentions"]
    if hasattr(attentions, "keys") and not isinstance(
        attentions, np.ndarray
    ):  # a TransformerLens ActivationCache, or a dict of patterns
        found = sorted(
            (int(name.split(".")[1]), name)
            for name in attentions.keys()
            if name.startswith("blocks.") and name.endswith("attn.hook_pattern")
        )
        if not found:
            raise ValueError(
                "this cache has no attention patterns (blocks.<layer>.attn.hook_pattern): run_with_cache without a "
                "names_filter that leaves them out"
            )
        missing = sorted(set(range(found[-1][0] + 1)) - {i for i, _ in found})
        if missing:  # (numbered as the cache numbers them: a layer left out is not renumbered past)
            raise ValueError(
                f"this cache has no blocks.{missing[0]}.attn.hook_pattern, though it has later layers: run_with_cache "
                "with every layer's pattern (a names_filter that keeps them all)"
            )
        read = [_array(attentions[name]) for _, name in found]  # (a cache made with remove_batch_dim=True has no batch)
        return [_batch_of_one(a[None] if a.ndim == 3 else a, f"layer {i}") for (i, _), (a, _) in zip(found, read)], any(
            h for _, h in read
        )
    if isinstance(attentions, (tuple, list)):  # Hugging Face's: one batch × heads × queries × keys per layer
        if not attentions:
            raise ValueError(
                "the attentions are empty: a model loaded with SDPA or flash attention (transformers' default) "
                'gives no weights to output_attentions. Load it with attn_implementation="eager", or read it with '
                "AttentionWidget.from_transformers(model, tokenizer, text), which reads SDPA models too"
            )
        if any(a is None for a in attentions):
            raise ValueError(
                "the attentions hold None: the model ran with an attention kernel that gives no weights (SDPA, flash); "
                'load it with attn_implementation="eager" for output_attentions, or read it with from_transformers'
            )
        read = [_array(a) for a in attentions]
        return [_batch_of_one(a, f"layer {i}") for i, (a, _) in enumerate(read)], any(h for _, h in read)
    tensor = hasattr(attentions, "detach")
    a, half = _array(attentions)
    if tensor and a.ndim == 4:  # what transformers and TransformerLens give for one layer: batch first
        return [_batch_of_one(a, "this tensor (one layer's batch × heads × queries × keys)")], half
    if 2 <= a.ndim <= 4:
        return list(a.reshape((-1, *a.shape[-3:]) if a.ndim == 4 else (1, -1, *a.shape[-2:]))), half
    raise ValueError(
        f"attention weights of {a.ndim} dimensions (shape {a.shape}): give queries × keys, heads × queries × keys or "
        "layers × heads × queries × keys"
    )


def _array(a) -> tuple[np.ndarray, bool]:
    """The weights as numpy (float32 kept, anything else float64), and whether they were half precision."""
    half = False
    if hasattr(a, "detach"):  # a torch tensor, on any device; half precision widens to float32 exactly
        import torch

        a = a.detach().to("cpu")
        half = a.dtype in (torch.float16, torch.bfloat16)
        a = (a.to(torch.float32) if half else a).numpy()
    a = np.asarray(a)
    if not np.issubdtype(a.dtype, np.number) or np.issubdtype(a.dtype, np.complexfloating):
        raise ValueError(f"attention weights must be real numbers, got {a.dtype}")
    half = half or a.dtype == np.float16
    return (a if a.dtype == np.float32 else a.astype(np.float64)), half


def _batch_of_one(a: np.ndarray, where: str) -> np.ndarray:
    if a.ndim != 4:
        raise ValueError(f"{where} is of shape {a.shape}: each layer's attentions are batch × heads × queries × keys")
    if len(a) != 1:
        raise ValueError(
            f"{where} holds a batch of {len(a)} texts: give one text's weights (attentions[i][j:j + 1] for text j, or "
            "the whole tuple of layers of one text); a stack of layers goes as a numpy array, layers × heads × "
            "queries × keys"
        )
    return a[0]


def _check(w: np.ndarray, layer: int, tolerance: float) -> None:
    """Weights: finite, not negative, each row summing to 1 (or all 0, as a mask makes a row)."""
    where = f"layer {layer}"
    bad = ~np.isfinite(w)
    if bad.any():
        h, i, j = np.argwhere(bad)[0]
        raise ValueError(
            f"the weights hold {w[h, i, j]} ({where}, head {h}, row {i}, column {j}): every weight must be a finite "
            "number"
        )
    if (w < 0).any():
        h, i, j = np.argwhere(w < 0)[0]
        raise ValueError(
            f"the weights hold a negative number, {w[h, i, j]:.3g} ({where}, head {h}, row {i}, column {j}): weights "
            "are 0 or more"
        )
    sums = w.sum(axis=-1, dtype=np.float64)
    off = (np.abs(sums - 1) > tolerance) & (sums != 0)
    if off.any():
        h, i = np.argwhere(off)[0]
        short = (
            "; a model with learnt attention sinks (gpt-oss) keeps less than 1 in each row: read it with "
            "from_transformers, which reads its sinks too"
            if 0 < sums[h, i] < 1
            else ""
        )
        raise ValueError(
            f"row {i} of head {h} ({where}) sums to {sums[h, i]:.6g}: each row of weights sums to 1 (within "
            f"{tolerance:g}), or is all 0; pass the weights after the softmax, not the scores{short}"
        )


def _labels(tokens, name: str) -> list[str]:
    if isinstance(tokens, str) or not all(isinstance(t, str) for t in tokens):
        raise TypeError(f"{name} must be a list of strings, one per row (or column) of the weights")
    return list(tokens)


def _values(values, heads: int, m: int) -> np.ndarray:
    v, _ = _array(values)
    if v.ndim == 2:
        v = np.broadcast_to(v, (heads, *v.shape))
    if v.ndim != 3 or v.shape[:2] != (heads, m):
        raise ValueError(
            f"values must be one vector per key: keys × width ({m} × d), or heads × keys × width; got shape {v.shape}"
        )
    return np.ascontiguousarray(v)
