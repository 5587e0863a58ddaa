"""from_nnsight(..., remote=...): attention read inside nnsight's trace through the attention function's call in
each attention module (its source operation), saving only tensors, so that the trace can run on a server. Run
here with remote="local", which serialises the trace as for a server and runs it with attnwidget's own modules
hidden: every layer and head equals what the local read (transformers' attention interface) gives."""

import warnings

import numpy as np
import pytest
from test_integrations import gpt2_tokenizer, tf  # (fixtures)

from attnwidget import AttentionWidget
from attnwidget.integrations import from_nnsight

TEXT = "I sat on the riverbank and read by the water"  # longer than the sliding windows below
BASE = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4)
FAMILIES = {
    "gpt2": dict(n_embd=32, n_head=4, n_layer=2, n_positions=64),
    "llama": dict(BASE, num_key_value_heads=2),  # grouped-query heads, rotary
    "mistral": dict(BASE, num_key_value_heads=2, sliding_window=5),
    "gemma2": dict(  # a soft cap; its even layers slide a window of 5
        BASE, num_key_value_heads=2, head_dim=8, sliding_window=5, attn_logit_softcapping=5.0, query_pre_attn_scalar=8
    ),
}


def wrap(tf, tokenizer, family, implementation=None, **extra):
    nnsight = pytest.importorskip("nnsight")
    import torch

    torch.manual_seed(0)
    config = tf.AutoConfig.for_model(family, vocab_size=len(tokenizer), **{**FAMILIES.get(family, {}), **extra})
    model = tf.AutoModelForCausalLM.from_config(config, attn_implementation=implementation).eval()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return nnsight.TransformersModel(model, tokenizer=tokenizer)


@pytest.mark.parametrize(
    ("family", "implementation"),
    [(f, i) for f in FAMILIES for i in ("eager", "sdpa") if (f, i) != ("gemma2", "sdpa")],  # (Gemma 2: eager only)
)
def test_a_remote_read_equals_the_local_read_in_every_layer_and_head(tf, gpt2_tokenizer, family, implementation):
    lm = wrap(tf, gpt2_tokenizer, family, implementation)
    here = from_nnsight(lm, TEXT)
    there = from_nnsight(lm, TEXT, remote="local")
    assert there.tokens == here.tokens and len(there.layers) == len(here.layers) == 2
    assert (there.causal, there.softcap, there.architecture) == (here.causal, here.softcap, here.architecture)
    assert there.scale == here.scale
    for (q, k, v), (q0, k0, v0) in zip(there.layers, here.layers):
        for a, b in ((q, q0), (k, k0), (v, v0)):
            np.testing.assert_allclose(a, b, atol=1e-6)
    assert (there.masks is None) == (here.masks is None)
    for a, b in zip(there.masks or [], here.masks or []):
        assert (a is None and b is None) or np.array_equal(a, b)
    if family in ("mistral", "gemma2"):  # a window narrower than the text: the last token cannot read the first
        assert not there.masks[0][-1, 0]
    w, w0 = (AttentionWidget.from_nnsight(lm, TEXT, remote=r) for r in ("local", False))
    for layer in range(2):
        for head in range(4):
            w.layer, w.head, w0.layer, w0.head = layer, head, layer, head
            np.testing.assert_allclose(w.weights, w0.weights, atol=1e-6)


def overview_bytes(layers, heads, n):
    """What a remote read's overview brings back: per head a thumbnail (uint8, at most 84 × 84), its largest mean
    and five summaries (float32: the sink share too, 0 without sinks)."""
    return layers * heads * (min(n, 84) ** 2 + 4 + 5 * 4)


def test_a_remote_read_brings_back_the_layer_shown_and_the_overview_then_each_layer_when_shown(tf, gpt2_tokenizer):
    lm = wrap(tf, gpt2_tokenizer, "llama", "sdpa")
    w = AttentionWidget.from_nnsight(lm, TEXT, remote="local", layer=1)
    here = AttentionWidget.from_nnsight(lm, TEXT, layer=1)
    n = len(w.tokens)
    one_layer = (4 + 2 + 2) * n * 8 * 4  # q (4 heads), k and v (2 heads each, before they are repeated), float32
    found = w._sources.model
    assert found.fetched == one_layer + overview_bytes(2, 4, n)  # sdpa's causal mask is not made: none travels
    assert found.remote.missing == {0}
    w._answer("overview")
    here._answer("overview")
    assert found.fetched == one_layer + overview_bytes(2, 4, n)  # the overview was the server's: nothing more read
    a, b = w.overview, here.overview
    assert (
        np.abs(
            np.frombuffer(a["thumbs"]["view"], np.uint8).astype(int) - np.frombuffer(b["thumbs"]["view"], np.uint8)
        ).max()
        <= 1
    )
    np.testing.assert_allclose(a["top"], b["top"], rtol=1e-5)
    assert set(a["summaries"]) == set(b["summaries"]) - {"effect"}  # (head effects need the model here)
    for name in a["summaries"]:
        np.testing.assert_allclose(a["summaries"][name], b["summaries"][name], rtol=1e-5, atol=1e-6)
    assert a["key"] == b["key"]
    np.testing.assert_allclose(w.weights, here.weights, atol=1e-6)
    w.layer, here.layer = 0, 0  # another layer: one more trace brings its q, k and v
    assert found.fetched == 2 * one_layer + overview_bytes(2, 4, n) and not found.remote.missing
    for head in range(4):
        w.head, here.head = head, head
        np.testing.assert_allclose(w.weights, here.weights, atol=1e-6)
        np.testing.assert_allclose(w.output, here.output, atol=1e-5)


def test_the_overview_at_other_settings_reads_every_layer_first(tf, gpt2_tokenizer):
    lm = wrap(tf, gpt2_tokenizer, "mistral", "eager")
    w = AttentionWidget.from_nnsight(lm, TEXT, remote="local")
    here = AttentionWidget.from_nnsight(lm, TEXT)
    assert w._sources.model.remote.missing == {1}
    w.temperature = here.temperature = 0.5  # not the model's own: the server's overview does not hold
    w._answer("overview")
    here._answer("overview")
    assert not w._sources.model.remote.missing
    assert bytes(w.overview["thumbs"]["view"]) == bytes(here.overview["thumbs"]["view"])
    assert w.overview["summaries"] == {k: v for k, v in here.overview["summaries"].items() if k != "effect"}


def test_the_bytes_a_local_read_brings_back_are_none(tf, gpt2_tokenizer):
    assert from_nnsight(wrap(tf, gpt2_tokenizer, "gpt2"), TEXT).fetched is None


def test_a_family_read_by_hand_is_refused_remotely_naming_it(tf, gpt2_tokenizer):
    lm = wrap(tf, gpt2_tokenizer, "bloom", hidden_size=32, n_layer=2, n_head=4)
    with pytest.raises(NotImplementedError, match="BloomForCausalLM.*'bloom'.*remote"):
        from_nnsight(lm, TEXT, remote="local")


def test_remote_takes_true_false_local_or_an_address(tf, gpt2_tokenizer):
    lm = wrap(tf, gpt2_tokenizer, "gpt2")
    with pytest.raises(TypeError, match="remote must be"):
        from_nnsight(lm, TEXT, remote=3)


def test_a_module_that_skips_its_attention_function_is_refused_in_words(tf, gpt2_tokenizer):
    lm = wrap(tf, gpt2_tokenizer, "gpt2", "eager", reorder_and_upcast_attn=True)  # (its own upcast attention instead)
    with pytest.raises(NotImplementedError, match="GPT2LMHeadModel.*'gpt2'.*did not call its attention function"):
        from_nnsight(lm, TEXT, remote="local")


def test_a_list_of_texts_is_read_remotely_each_alone(tf, gpt2_tokenizer):
    lm = wrap(tf, gpt2_tokenizer, "llama", "sdpa")
    both = from_nnsight(lm, [TEXT, "I sat on the riverbank"], remote="local")
    alone = from_nnsight(lm, "I sat on the riverbank", remote="local")
    assert both[1].tokens == alone.tokens and len(both[0].tokens) > len(alone.tokens)
    np.testing.assert_array_equal(both[1].layers[1][0], alone.layers[1][0])
    w = AttentionWidget.from_nnsight(lm, [TEXT, "I sat on the riverbank"], remote="local")
    assert w.tokens == both[0].tokens


def test_an_8b_shaped_read_brings_back_one_layer_in_its_dtype_and_the_overview(tf, gpt2_tokenizer):
    """Llama 3.1 8B's attention shape (32 query heads, 8 key-value heads, 128 wide, bfloat16) with 2 of its 32
    layers: the first read brings back one layer's q, k and v in bfloat16 and the overview, exactly; at 2,048
    tokens that is about 25 MB, where its 32 layers in float32 are 32 · (32 + 8 + 8) · 2048 · 128 · 4 B, 1.6 GB."""
    import torch

    shape = dict(hidden_size=4096, num_attention_heads=32, num_key_value_heads=8, head_dim=128)
    lm = wrap(tf, gpt2_tokenizer, "llama", "sdpa", **shape, intermediate_size=64, max_position_embeddings=4096)
    lm._module.to(torch.bfloat16)
    found = from_nnsight(lm, gpt2_tokenizer.decode(list(range(1, 200))), remote="local")
    n = len(found.tokens)
    first = lambda n: (32 + 8 + 8) * n * 128 * 2 + overview_bytes(2, 32, n)
    assert found.fetched == first(n)
    assert first(2048) < 26e6 and 32 * (32 + 8 + 8) * 2048 * 128 * 4 > 1.6e9
    assert found.layers[0][0].shape == (32, n, 128) and found.remote.missing == {1}


def test_an_exported_remote_page_reads_every_layer_first(tf, gpt2_tokenizer, tmp_path):
    lm = wrap(tf, gpt2_tokenizer, "gemma2", "eager")
    here = AttentionWidget.from_nnsight(lm, TEXT)
    w = AttentionWidget.from_nnsight(lm, TEXT, remote="local", layer=1)
    assert w._sources.model.remote.missing == {0}
    w.to_html(tmp_path / "all.html")  # its measures need every layer: the other one read first, into the stacks
    assert not w._sources.model.remote.missing
    for name in ("model_q", "model_k", "model_v", "model_basis"):
        np.testing.assert_allclose(getattr(w, name), getattr(here, name), atol=1e-6, err_msg=name)


def test_a_remote_model_with_learnt_sinks_has_the_servers_overview_and_the_same_weights(tf, gpt2_tokenizer):
    import torch

    lm = wrap(
        tf,
        gpt2_tokenizer,
        "gpt_oss",
        "eager",
        **dict(BASE, intermediate_size=32),
        num_key_value_heads=2,
        head_dim=8,
        num_local_experts=2,
        num_experts_per_tok=1,
        sliding_window=5,
        layer_types=["sliding_attention", "full_attention"],
    )
    with torch.no_grad():
        for layer in lm._module.model.layers:
            layer.self_attn.sinks.normal_(0, 2)  # (learnt sinks that take a share)
    text = gpt2_tokenizer.decode(list(range(1, 120)))  # past 84 tokens: the thumbnails are block means
    w, here = AttentionWidget.from_nnsight(lm, text, remote="local"), AttentionWidget.from_nnsight(lm, text)
    w._answer("overview")
    here._answer("overview")
    assert w._sources.model.remote.missing == {1}  # (the server's overview)
    a, b = w.overview, here.overview
    assert bytes(a["thumbs"]["view"]) == bytes(b["thumbs"]["view"])
    for name in ("first", "self", "previous", "effective_tokens", "sink_share"):
        np.testing.assert_allclose(a["summaries"][name], b["summaries"][name], rtol=1e-5, atol=1e-6, err_msg=name)
    for layer in range(2):
        w.layer, here.layer = layer, layer
        for head in range(4):
            w.head, here.head = head, head
            np.testing.assert_allclose(w.weights, here.weights, atol=1e-6)


def test_a_layer_read_on_two_threads_at_once_is_read_once(tf, gpt2_tokenizer):
    import threading

    lm = wrap(tf, gpt2_tokenizer, "llama", "sdpa", num_hidden_layers=4)
    found = from_nnsight(lm, TEXT, remote="local")
    reads = []
    slow = found.remote.read
    found.remote.read = lambda places: (reads.append(places), slow(places))[1]
    threads = [threading.Thread(target=found.remote.ensure, args=(range(4),)) for _ in range(2)]
    for t in threads:
        t.start()
    found.remote.ensure([2])
    for t in threads:
        t.join()
    assert not found.remote.missing and sorted(p for places in reads for p in places) == [1, 2, 3]
    local = from_nnsight(lm, TEXT)
    for there, here in zip(found.layers, local.layers):
        for a, b in zip(there, here):
            np.testing.assert_allclose(a, b, atol=1e-6)
