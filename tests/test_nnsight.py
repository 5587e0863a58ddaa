"""from_nnsight: an nnsight-wrapped model read during nnsight's own trace, as from_transformers
reads the model itself."""

import warnings

import numpy as np
import pytest
from test_integrations import gpt2_tokenizer, tf  # (fixtures)

from attnwidget import AttentionWidget


@pytest.fixture(scope="module", params=["TransformersModel", "LanguageModel"])
def wrapped(request, tf, gpt2_tokenizer):
    """nnsight's current entry point (TransformersModel), and LanguageModel, which it deprecates."""
    nnsight = pytest.importorskip("nnsight")
    if not hasattr(nnsight, request.param):
        pytest.skip(f"this nnsight has no {request.param}")
    import torch

    torch.manual_seed(0)
    model = tf.GPT2LMHeadModel(
        tf.GPT2Config(n_embd=32, n_layer=3, n_head=4, n_positions=64, vocab_size=len(gpt2_tokenizer))
    ).eval()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (LanguageModel's successor is announced)
        return getattr(nnsight, request.param)(model, tokenizer=gpt2_tokenizer), model


def test_an_nnsight_model_is_read_during_its_trace_and_equals_its_own_attentions(wrapped, gpt2_tokenizer):
    import torch

    lm, model = wrapped
    traced = []
    forward = model.forward
    model.forward = lambda *a, **k: (traced.append(1), forward(*a, **k))[1]  # nnsight's trace runs the model's forward
    try:
        w = AttentionWidget.from_nnsight(lm, "I sat on the riverbank", layer=1, stage="weights")
    finally:
        model.forward = forward
    assert traced and w.tokens == ["I", "sat", "on", "the", "river", "·bank"] and w.causal
    ids = gpt2_tokenizer("I sat on the riverbank", return_tensors="pt")
    model.set_attn_implementation("eager")
    with torch.no_grad():
        want = model(**ids, output_attentions=True).attentions
    for layer in range(3):
        for head in range(4):
            w.layer, w.head = layer, head
            np.testing.assert_allclose(w.weights, want[layer][0, head].numpy(), atol=1e-5)


def test_from_nnsight_takes_an_nnsight_model():
    pytest.importorskip("nnsight")
    with pytest.raises(TypeError, match="from_nnsight takes an nnsight model"):
        AttentionWidget.from_nnsight(object(), "a text")
