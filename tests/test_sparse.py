"""Sparse attention (DeepSeek V3.2): each query reads the few keys its layer's indexer chose. The widget
reads the choice exactly (the mask the model hands its attention), and says what it keeps: the weight
dense attention would have given the keys chosen, checked against the same model run dense (an
indexer that keeps every key)."""

import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from test_interface import tokenizer  # noqa: E402  (a fixture)
from tiny_families import tiny_config  # noqa: E402

from attnwidget import AttentionWidget  # noqa: E402

TEXT = "I sat on the riverbank and the river sat on the bank."


def deepseek(vocab, topk):
    config = tiny_config("deepseek_v32", vocab)
    config.index_topk = topk
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return transformers.AutoModel.from_config(config, attn_implementation="eager").eval()


def run(model, tokenizer, text=TEXT):
    chosen = []  # each layer's indexer's top-k keys per query
    hooks = [
        layer.self_attn.indexer.register_forward_hook(lambda m, a, out: chosen.append(out[0])) for layer in model.layers
    ]
    try:
        with torch.no_grad():
            out = model(**tokenizer(text, return_tensors="pt"), output_attentions=True)
    finally:
        for h in hooks:
            h.remove()
    return out.attentions, chosen


@pytest.mark.parametrize("topk", [3, 5])
def test_sparse_attention_reads_the_keys_chosen_and_says_what_dense_attention_gave_them(topk, tokenizer):
    model = deepseek(len(tokenizer), topk)
    sparse, chosen = run(model, tokenizer)
    dense, _ = run(deepseek(len(tokenizer), 4096), tokenizer)  # the same weights, every key kept
    w = AttentionWidget.from_transformers(model, tokenizer, TEXT)
    assert w.sparse_layers == [0, 1]
    n = len(w.tokens)
    for layer in w.sparse_layers:
        w.layer = layer
        keys = np.zeros((n, n), dtype=bool)
        np.put_along_axis(keys, chosen[layer].long().numpy(), True, axis=1)
        keys &= np.tri(n, dtype=bool)  # (a query's top-k past its own position: closed by the causal rule too)
        for head in range(w.n_heads):
            w.head = head
            np.testing.assert_allclose(w.weights, sparse[layer][0, head].double().numpy(), atol=1e-5, rtol=0)
            said = w.selection()
            np.testing.assert_array_equal(said["chosen"], keys.sum(axis=1))
            if layer == 0:  # (the dense model's later layers read what its dense first layer wrote)
                theirs = dense[0][0, head].double().numpy()
                np.testing.assert_allclose(said["dense"], theirs, atol=1e-5, rtol=0)
                np.testing.assert_allclose(said["kept"], np.where(keys, theirs, 0).sum(axis=1), atol=1e-5, rtol=0)
            # what the choice keeps of dense attention, shared out again: the model's own sparse weights
            again = np.where(keys, said["dense"], 0) / said["kept"][:, None]
            np.testing.assert_allclose(again, sparse[layer][0, head].double().numpy(), atol=1e-5, rtol=0)
            assert (said["kept"][:topk] > 1 - 1e-9).all() and (said["kept"][topk:] < 1).all()


def test_selection_is_refused_where_no_indexer_chose(tokenizer):
    w = AttentionWidget.from_transformers(deepseek(len(tokenizer), 3), tokenizer, TEXT)
    chosen = w.selection()["chosen"]
    w.q = w.q.copy()  # your own arrays now: not the layer's choice any more
    with pytest.raises(ValueError, match=r"set w.layer to one of 0, 1 \(or set it again"):
        w.selection()
    w.layer = 1
    w.layer = 0  # (the layer's own arrays again)
    for name, value in (("mask", np.ones((len(w.tokens),) * 2, dtype=bool)), ("causal", False), ("sink", True)):
        setattr(w, name, value)
        with pytest.raises(ValueError, match="reads the indexer's choice from the layer's own mask"):
            w.selection()
        w.layer = 1
        w.layer = 0  # (its own mask again)
        w.causal, w.sink = True, False
        np.testing.assert_array_equal(w.selection()["chosen"], chosen)
    dense = tiny_config("llama", len(tokenizer))
    model = transformers.AutoModel.from_config(dense, attn_implementation="eager").eval()
    with pytest.raises(ValueError, match="this widget's model has none"):
        AttentionWidget.from_transformers(model, tokenizer, TEXT).selection()
