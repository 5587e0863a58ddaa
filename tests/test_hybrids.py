"""Hybrid models (attention in some layers; a state-space scan, linear attention or a convolution in the
rest) keep the model's own layer numbers: Jamba's attention layers 1 and 3 are w.layer 1 and 3, the
others are named for what they are, and every layer held is the model's own attention there."""

import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from test_interface import tokenizer  # noqa: E402  (a fixture)
from tiny_families import tiny_config  # noqa: E402

from attnwidget import AttentionWidget  # noqa: E402

TEXT = "I sat on the riverbank and the river sat on the bank."
HYBRIDS = {  # four layers, attention in 1 and 3 (the others: what the family mixes tokens with otherwise)
    "jamba": ({"attn_layer_period": 2, "attn_layer_offset": 1}, "Mamba-1 selective state space"),
    "bamba": ({"attn_layer_indices": [1, 3]}, "Mamba-2 state space"),
    "lfm2": ({"layer_types": ["conv", "full_attention"] * 2}, "gated short convolution"),
    "qwen3_next": ({"layer_types": ["linear_attention", "full_attention"] * 2}, "gated DeltaNet"),
    "minimax": (
        {"layer_types": ["linear_attention", "full_attention"] * 2},
        "lightning attention (linear attention with a fixed decay per head)",
    ),
}


def hybrid(kind, vocab):
    config = tiny_config(kind, vocab)
    given = {k: v for k, v in config.to_dict().items() if k not in ("layer_types", "layers_block_type")}
    torch.manual_seed(0)
    config = type(config)(**{**given, "num_hidden_layers": 4, **HYBRIDS[kind][0]})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return transformers.AutoModel.from_config(config, attn_implementation="eager").eval()


@pytest.fixture(scope="module")
def jamba(tokenizer):
    model = hybrid("jamba", len(tokenizer))
    return model, AttentionWidget.from_transformers(model, tokenizer, TEXT)


@pytest.mark.parametrize("kind", HYBRIDS)
def test_a_hybrids_attention_layers_keep_the_models_numbers(kind, tokenizer):
    model = hybrid(kind, len(tokenizer))
    w = AttentionWidget.from_transformers(model, tokenizer, TEXT)
    assert w.layer_numbers == [1, 3] and w.n_layers == 2
    assert w.layer == 1  # the first with attention
    assert w.layer_kinds == [HYBRIDS[kind][1], "", HYBRIDS[kind][1], ""]
    with torch.no_grad():
        out = model(**tokenizer(TEXT, return_tensors="pt"), output_attentions=True)
    every = [a for a in out.attentions if a is not None]
    theirs = dict(zip([1, 3], every if len(every) == 2 else [every[1], every[3]]))
    for layer in (3, 1):
        w.layer = layer
        for head in range(w.n_heads):
            w.head = head
            np.testing.assert_allclose(w.weights, theirs[layer][0, head].double().numpy(), atol=1e-5, rtol=0)


def test_a_layer_without_attention_is_refused_by_what_it_is(jamba):
    model, w = jamba
    w.layer = 3
    before = w.weights.copy()
    with pytest.raises(Exception, match=r"1, 3; got 2 \(the model's layer 2 is Mamba-1 selective state space"):
        w.layer = 2
    assert w.layer == 3 and np.array_equal(w.weights, before)
    w.set_state({"layer": 0})  # (from the page: refused, and the page set back)
    assert w.layer == 3


def test_constructors_and_exports_take_the_models_numbers(jamba, tokenizer):
    model, w = jamba
    assert AttentionWidget.from_transformers(model, tokenizer, TEXT, layer=3).layer == 3
    with pytest.raises(ValueError, match="layer 0 is Mamba-1 selective state space, which computes no attention"):
        AttentionWidget.from_transformers(model, tokenizer, TEXT, layer=0)
    assert w.query_key_map(layer=3)["layer"] == 3
    with pytest.raises(ValueError, match=r"\(1, 3\), got 0"):
        w.query_key_map(layer=0)
    page = w.to_html(layers=[3], max_mb=1)
    assert '"layer_numbers": [1, 3]' in page or '"layer_numbers":[1,3]' in page
    with pytest.raises(ValueError, match=r"by the model.s numbers \(1, 3\); got \[2\]"):
        w.to_html(layers=[2])


def test_a_hybrids_texts_keep_the_layer_shown(tokenizer):
    model = hybrid("lfm2", len(tokenizer))
    w = AttentionWidget.from_transformers(model, tokenizer, [TEXT, "The bank sat on the river."], layer=3)
    w.sentence_index = 1
    assert w.layer == 3 and len(w.tokens) == len(tokenizer("The bank sat on the river.")["input_ids"])
    with torch.no_grad():
        out = model(**tokenizer("The bank sat on the river.", return_tensors="pt"), output_attentions=True)
    np.testing.assert_allclose(w.weights, out.attentions[-1][0, w.head].double().numpy(), atol=1e-5, rtol=0)


@pytest.mark.parametrize("kind", ["jamba", "lfm2", "qwen3_next"])
def test_a_hybrids_other_layers_offer_their_implicit_attention(kind, tokenizer):
    w = AttentionWidget.from_transformers(hybrid(kind, len(tokenizer)), tokenizer, TEXT, layer=3)
    for layer in (0, 2):
        found = w.implicit_attention(layer)
        assert found.layer == layer and found.kind == w.layer_kinds[layer]
        alphas = found.alphas()  # each channel's (head's) α: y = α · x, causal
        assert alphas.shape[-2:] == (len(w.tokens), len(w.tokens)) and not np.triu(alphas, 1).any()
        np.testing.assert_allclose(alphas.astype(float) @ found.x, found.y, atol=1e-5, rtol=0)
    assert w.implicit_attention().layer == 0
    with pytest.raises(ValueError, match=r"with implicit attention: 0 \(.*\), 2 \(.*\); got 3 \(the model's layer 3: "):
        w.implicit_attention(3)


@pytest.mark.parametrize("kind", ["falcon_h1", "zamba2"])
def test_a_scan_beside_attention_offers_its_implicit_attention_too(kind, tokenizer):
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = transformers.AutoModel.from_config(tiny_config(kind, len(tokenizer)), attn_implementation="eager")
    w = AttentionWidget.from_transformers(model.eval(), tokenizer, TEXT)
    found = w.implicit_attention(1)  # (layer 1 holds attention and a Mamba-2 scan)
    np.testing.assert_allclose(found.alphas().astype(float) @ found.x, found.y, atol=1e-5, rtol=0)


def test_implicit_attention_is_refused_where_every_layer_is_attention(tokenizer):
    config = tiny_config("llama", len(tokenizer))
    model = transformers.AutoModel.from_config(config, attn_implementation="eager").eval()
    w = AttentionWidget.from_transformers(model, tokenizer, TEXT)
    with pytest.raises(ValueError, match="this widget's model has none read here"):
        w.implicit_attention()


def test_a_hybrids_head_effects_are_its_attention_layers_by_place(tokenizer):
    config = hybrid("jamba", len(tokenizer)).config
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(config, attn_implementation="eager").eval()
    w = AttentionWidget.from_transformers(model, tokenizer, TEXT)
    effects = w.head_effects()  # row i: layer w.layer_numbers[i]
    assert effects.shape == (2, w.n_heads) and np.isfinite(effects).all()
    ids = tokenizer(TEXT, return_tensors="pt")["input_ids"]
    with torch.no_grad():
        clean = torch.log_softmax(model(ids).logits[0, -1].double(), -1)
    best, width = int(clean.argmax()), config.hidden_size // config.num_attention_heads
    for place, number in enumerate(w.layer_numbers):  # each head's output zeroed before the output projection
        for head in range(w.n_heads):
            cut = lambda m, args, h=head: (args[0].index_fill(-1, torch.arange(h * width, (h + 1) * width), 0.0),)
            handle = model.model.layers[number].self_attn.o_proj.register_forward_pre_hook(cut)
            try:
                with torch.no_grad():
                    ablated = torch.log_softmax(model(ids).logits[0, -1].double(), -1)
            finally:
                handle.remove()
            assert effects[place, head] == pytest.approx(float(ablated[best] - clean[best]), abs=1e-5)


def test_a_model_of_scans_alone_is_pointed_to_its_implicit_attention(tokenizer):
    model = transformers.AutoModel.from_config(tiny_config("mamba", len(tokenizer))).eval()
    with pytest.raises(NotImplementedError, match=r"computes no attention: .*integrations.implicit_attention"):
        AttentionWidget.from_transformers(model, tokenizer, TEXT)
