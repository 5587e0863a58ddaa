"""from_transformers(..., generate=k): a decoder writes k tokens greedily after the prompt, and
the widget at every step shows the model's own attention over the tokens written so far.
Tiny randomly initialised models; nothing is downloaded."""

import re

import numpy as np
import pytest
from test_integrations import TEXT, gpt2, gpt2_tokenizer, llama_style, minilm, random_model, text_of, tf

import attnwidget
from attnwidget.integrations import from_transformers
from attnwidget.integrations.common import _tokens_of

K = 4


def models(tf, tokenizer):
    return {
        "gpt2": lambda: gpt2(tf, tokenizer),
        "llama": lambda: llama_style(tf, tokenizer, "Llama", 2),  # grouped-query attention
        "bloom": lambda: random_model(
            tf, "BloomForCausalLM", "BloomConfig", len(tokenizer), hidden_size=64, n_layer=2, n_head=4
        ),
    }


def greedy(model, tokenizer, text=TEXT, k=K):
    """The model's own greedy writing: transformers' generate."""
    enc = tokenizer(text, return_tensors="pt")
    pad = model.generation_config.pad_token_id
    pad = model.config.eos_token_id if pad is None else pad
    return model.generate(**enc, max_new_tokens=k, do_sample=False, num_beams=1, pad_token_id=pad)[0]


@pytest.mark.parametrize("kind", ["gpt2", "llama", "bloom"])
def test_every_step_is_the_models_own_attention_on_that_prefix(tf, gpt2_tokenizer, kind):
    import torch

    model = models(tf, gpt2_tokenizer)[kind]()
    ids = greedy(model, gpt2_tokenizer)
    prompt = len(gpt2_tokenizer(TEXT)["input_ids"])
    assert len(ids) == prompt + K  # the random models write no end-of-text token here

    ma = from_transformers(model, gpt2_tokenizer, TEXT, generate=K)
    assert ma.tokens == _tokens_of(gpt2_tokenizer, ids.tolist()) and ma.prompt_length == prompt and ma.causal

    w = attnwidget.AttentionWidget.from_transformers(model, gpt2_tokenizer, TEXT, generate=K)
    assert w.tokens == ma.tokens and w.prompt_length == prompt
    assert w.step == prompt and w.focus == prompt - 1  # the prompt written; "next token" shows the model's first
    for s in range(prompt, len(ids) + 1):
        with torch.no_grad():
            reference = model(input_ids=ids[None, :s], output_attentions=True).attentions
        w.step = s
        for layer in range(2):
            w.layer = layer
            for head in range(4):
                w.head = head
                assert w.weights.shape == (s, s)
                np.testing.assert_allclose(
                    w.weights,
                    reference[layer][0, head].double().numpy(),
                    atol=1e-5,
                    rtol=0,
                    err_msg=f"step {s} layer {layer} head {head}",
                )


def test_without_generate_nothing_changes(tf, gpt2_tokenizer):
    model = gpt2(tf, gpt2_tokenizer)
    a, b = from_transformers(model, gpt2_tokenizer, TEXT), from_transformers(model, gpt2_tokenizer, TEXT, generate=0)
    assert a.tokens == b.tokens and a.prompt_length is b.prompt_length is None
    w = attnwidget.AttentionWidget.from_transformers(model, gpt2_tokenizer, TEXT)
    assert w.step == len(w.tokens) == w.prompt_length


def test_writing_stops_at_the_end_of_text_token_as_generate_does(tf, gpt2_tokenizer):
    model = gpt2(tf, gpt2_tokenizer)
    ids = greedy(model, gpt2_tokenizer, k=1)
    model.generation_config.eos_token_id = int(ids[-1])  # its first token written now ends the text
    assert len(greedy(model, gpt2_tokenizer)) == len(ids)
    w = attnwidget.AttentionWidget.from_transformers(model, gpt2_tokenizer, TEXT, generate=K)
    assert len(w.tokens) == len(ids) and w.step == w.prompt_length == len(ids) - 1


def test_a_model_without_a_language_model_head_is_refused(tf, gpt2_tokenizer):
    base = gpt2(tf, gpt2_tokenizer).transformer
    bert = random_model(
        tf,
        "BertModel",
        "BertConfig",
        len(gpt2_tokenizer),
        intermediate_size=128,
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
    )
    for model in (base, bert):
        with pytest.raises(
            ValueError,
            match=(
                r"generate= needs a model with a language-model head, such as GPT2LMHeadModel .*; "
                rf"got {type(model).__name__}"
            ),
        ):
            attnwidget.AttentionWidget.from_transformers(model, gpt2_tokenizer, TEXT, generate=2)


def test_a_model_that_does_not_write_one_token_at_a_time_is_refused(tf, gpt2_tokenizer):
    sizes = dict(intermediate_size=128, hidden_size=64, num_hidden_layers=2, num_attention_heads=4)
    masked = random_model(
        tf, "BertForMaskedLM", "BertConfig", len(gpt2_tokenizer), **sizes
    )  # fills blanks, reading both ways
    # a head that could write, on a model that reads both ways: refused once its mask is seen
    both_ways = random_model(tf, "BertLMHeadModel", "BertConfig", len(gpt2_tokenizer), is_decoder=False, **sizes)
    for model in (masked, both_ways):
        name = type(model).__name__
        with pytest.raises(
            NotImplementedError,
            match=rf"generate= needs a decoder-only model .*gpt2 or llama.*; got {name} \(model_type 'bert'\)",
        ):
            from_transformers(model, gpt2_tokenizer, TEXT, generate=2)


@pytest.mark.parametrize(
    "k, error, message",
    [
        (-1, ValueError, "0 or more"),
        (2.0, TypeError, "a whole number"),
        ("2", TypeError, "a whole number"),
        (True, TypeError, "a whole number"),
    ],
)
def test_generate_must_be_a_whole_number_of_tokens(tf, gpt2_tokenizer, k, error, message):
    with pytest.raises(error, match=rf"generate must be {message}.*got {re.escape(repr(k))}"):
        from_transformers(gpt2(tf, gpt2_tokenizer), gpt2_tokenizer, TEXT, generate=k)


@pytest.mark.parametrize("kind, attribute", [("gpt2", "n_positions"), ("llama", "max_position_embeddings")])
def test_prompt_and_tokens_to_write_past_the_positions_read_are_refused(tf, gpt2_tokenizer, kind, attribute):
    model = models(tf, gpt2_tokenizer)[kind]()  # each reads 64 positions
    text = text_of(gpt2_tokenizer, 62)
    assert len(from_transformers(model, gpt2_tokenizer, text, generate=2).tokens) == 64
    with pytest.raises(
        ValueError,
        match=(
            rf"is 62 tokens long and generate=3 adds as many but .* reads at most 64 positions \(config.{attribute}\); "
            r"shorten the text or generate fewer"
        ),
    ):
        from_transformers(model, gpt2_tokenizer, text, generate=3)


def test_an_encoder_is_not_written_token_by_token(minilm):
    """MiniLM reads both ways: its first tokens' numbers in a text are not what it computes on them
    alone, so a step below its tokens is refused, saying how to see a prefix, and nothing changes."""
    import traitlets

    model, tokenizer = minilm
    w = attnwidget.AttentionWidget.from_transformers(model, tokenizer, "I sat on the river bank")
    assert (w.model_causal, w.causal, w.step) == (False, False, len(w.tokens))
    with pytest.raises(traitlets.TraitError, match=r"reads both ways.*from_transformers\(model, tokenizer, "):
        w.step = 3
    assert (w.causal, w.step, w.weights.shape) == (False, len(w.tokens), (len(w.tokens),) * 2)
    with pytest.raises((ValueError, traitlets.TraitError), match="reads both ways"):
        attnwidget.AttentionWidget.from_transformers(model, tokenizer, "I sat on the river bank", step=3)
    # a prefix read through the model: its own numbers on those tokens
    prefix = attnwidget.AttentionWidget.from_transformers(model, tokenizer, "I sat")
    assert prefix.weights.shape == (len(prefix.tokens),) * 2
