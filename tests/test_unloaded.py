"""A model whose weights are not loaded (on torch's "meta" device: shapes without numbers) is refused
before it runs, saying so and how to load it, by every reader of models: from_transformers on a text
or an image, and from_transformer_lens. Tiny random models; nothing is downloaded."""

import warnings

import pytest
from test_bridge import configs
from test_integrations import TEXT, gpt2, gpt2_tokenizer, has_hooked, hooked, tf  # (fixtures too)
from test_vision import picture, vit, vit_processor

from attnwidget import AttentionWidget
from attnwidget.integrations import from_transformer_lens, from_transformers

ADVICE = ("not loaded", "meta device", "from_pretrained", "to_empty")


def on_meta(make):
    import torch

    with torch.device("meta"):
        return make()


def refused(call, *advice):
    with pytest.raises(ValueError) as e:
        call()
    for words in (*ADVICE, *advice):
        assert words in str(e.value), str(e.value)


def test_a_text_model_on_the_meta_device_is_refused(tf, gpt2_tokenizer):
    model = on_meta(lambda: gpt2(tf, gpt2_tokenizer))
    refused(lambda: from_transformers(model, gpt2_tokenizer, TEXT), "GPT2LMHeadModel")
    refused(lambda: AttentionWidget.from_transformers(model, gpt2_tokenizer, [TEXT, "I sat"]))
    real = gpt2(tf, gpt2_tokenizer)
    assert from_transformers(real, gpt2_tokenizer, TEXT).tokens  # loaded: read


def test_a_vision_model_on_the_meta_device_is_refused(tf):
    pytest.importorskip("PIL")
    model = on_meta(lambda: vit(tf))
    refused(lambda: from_transformers(model, vit_processor(tf), picture()), "ViTForImageClassification")


def test_a_transformer_lens_model_on_the_meta_device_is_refused(tf, gpt2_tokenizer):
    tl = pytest.importorskip("transformer_lens")
    bridge_module = pytest.importorskip("transformer_lens.model_bridge")
    import torch

    cls, cfg = configs(tf, gpt2_tokenizer)["llama"]  # (GPT-2's fused q, k and v: TransformerLens refuses to boot it)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        bridge = bridge_module.TransformerBridge.boot_transformers(
            "llama", hf_model=on_meta(lambda: cls(cfg)), tokenizer=gpt2_tokenizer, device="cpu"
        )
    assert any(p.is_meta for p in bridge.parameters())
    refused(lambda: from_transformer_lens(bridge, TEXT), "TransformerBridge")
    if has_hooked(tl):  # (TransformerLens 4 has none)
        lens = hooked(tl, gpt2_tokenizer, "gpt2-like")
        torch.nn.Module.to(lens, "meta")  # (its own .to moves its config's device too)
        refused(lambda: from_transformer_lens(lens, TEXT), "HookedTransformer")
