"""w.head_effects(): each head's effect on a causal language model's next token, ablated alone at
its own output slot. Checked against a hand-made ablation: a forward pre-hook on the layer's
output projection that zeroes (or mean-replaces) that head's slice of its input, one head and one
pass at a time. Tiny randomly initialised models; nothing is downloaded."""

import numpy as np
import pytest
import traitlets
from test_integrations import TEXT, TINY, gpt2, gpt2_tokenizer, hooked, random_model, tf
from test_widget import RecordingComm

from attnwidget import AttentionWidget
from attnwidget.widget import _on_page_message

WIDE = dict(initializer_range=0.25)  # weights large enough that every head moves the next token


def models(tf, tokenizer):
    return {
        "gpt2": lambda: gpt2(tf, tokenizer, **WIDE),
        # grouped-query attention: 4 query heads share 2 keys and values
        "llama": lambda: random_model(
            tf,
            "LlamaForCausalLM",
            "LlamaConfig",
            len(tokenizer),
            intermediate_size=128,
            num_key_value_heads=2,
            **TINY,
            **WIDE,
        ),
    }


def projections(model):
    """Each layer's output projection, whose input is the heads' outputs side by side."""
    if model.config.model_type == "gpt2":
        return [block.attn.c_proj for block in model.transformer.h]
    return [layer.self_attn.o_proj for layer in model.model.layers]


def by_hand(model, ids, mode):
    """layers × heads: log p(next) with head h of layer l ablated at the output projection's
    input, minus log p(next) of the model's own pass; next is the clean pass's most likely token."""
    import torch

    heads = model.config.num_attention_heads
    ids = torch.tensor([ids])
    with torch.no_grad():
        clean = torch.log_softmax(model(input_ids=ids).logits[0, -1].double(), dim=-1)
        best = int(clean.argmax())
        out = np.zeros((len(projections(model)), heads))
        for layer, proj in enumerate(projections(model)):
            for h in range(heads):

                def ablate(module, args, h=h):
                    x = args[0].clone()
                    d = x.shape[-1] // heads
                    part = x[..., h * d : (h + 1) * d]
                    x[..., h * d : (h + 1) * d] = 0.0 if mode == "zero" else part.mean(dim=1, keepdim=True)
                    return (x, *args[1:])

                handle = proj.register_forward_pre_hook(ablate)
                try:
                    ablated = torch.log_softmax(model(input_ids=ids).logits[0, -1].double(), dim=-1)
                finally:
                    handle.remove()
                out[layer, h] = float(ablated[best] - clean[best])
    return out


def ids_of(tokenizer, text=TEXT):
    return tokenizer(text)["input_ids"]


@pytest.mark.parametrize("mode", ["zero", "mean"])
@pytest.mark.parametrize("kind", ["gpt2", "llama"])
def test_each_heads_effect_is_a_hand_made_ablation_at_the_output_projection(tf, gpt2_tokenizer, kind, mode):
    model = models(tf, gpt2_tokenizer)[kind]()
    w = AttentionWidget.from_transformers(model, gpt2_tokenizer, TEXT)
    got = w.head_effects(mode=mode)
    want = by_hand(model, ids_of(gpt2_tokenizer), mode)
    assert got.shape == (2, 4) and got.dtype == np.float64
    assert np.abs(want).max() > 1e-2  # heads that matter: the comparison means something
    np.testing.assert_allclose(got, want, atol=1e-5, rtol=0)


def gradient_times_activation(model, ids, mode):
    """layers × heads: attribution patching written here: the output projection's input (the heads'
    outputs side by side) captured with its gradient of log p(next), and each head's slice of
    (ablated − actual) · gradient summed."""
    import torch

    heads = model.config.num_attention_heads
    ids = torch.tensor([ids])
    seen = []

    def keep(module, args):
        x = args[0]
        x.retain_grad()
        seen.append(x)

    handles = [proj.register_forward_pre_hook(keep) for proj in projections(model)]
    try:
        with torch.enable_grad():
            logp = torch.log_softmax(model(input_ids=ids).logits[0, -1].double(), dim=-1)
            logp[int(logp.argmax())].backward()
    finally:
        for handle in handles:
            handle.remove()
        model.zero_grad(set_to_none=True)
    out = np.zeros((len(seen), heads))
    for layer, x in enumerate(seen):
        d = x.shape[-1] // heads
        for h in range(heads):
            part, grad = x[0, :, h * d : (h + 1) * d].detach(), x.grad[0, :, h * d : (h + 1) * d]
            target = torch.zeros_like(part) if mode == "zero" else part.mean(dim=0, keepdim=True).expand_as(part)
            out[layer, h] = float(((target - part) * grad).sum())
    return out


@pytest.mark.parametrize("mode", ["zero", "mean"])
@pytest.mark.parametrize("kind", ["gpt2", "llama"])
def test_the_attribution_estimate_is_gradient_times_activation_and_the_exact_effects_stay(
    tf, gpt2_tokenizer, kind, mode
):
    model = models(tf, gpt2_tokenizer)[kind]()
    w = AttentionWidget.from_transformers(model, gpt2_tokenizer, TEXT)
    exact = w.head_effects(mode=mode)
    got = w.head_effects(mode=mode, method="attribution")
    want = gradient_times_activation(model, ids_of(gpt2_tokenizer), mode)
    assert got.shape == (2, 4) and got.dtype == np.float64 and np.abs(want).max() > 1e-2
    np.testing.assert_allclose(got, want, atol=1e-5, rtol=0)
    np.testing.assert_array_equal(w.head_effects(mode=mode), exact)  # the exact effects: unchanged, the default
    np.testing.assert_allclose(exact, by_hand(model, ids_of(gpt2_tokenizer), mode), atol=1e-5, rtol=0)
    assert all(p.grad is None for p in model.parameters())  # nothing left on the model
    with pytest.raises(ValueError, match="method must be 'exact' or 'attribution'"):
        w.head_effects(method="guess")


def test_the_estimate_is_the_same_inside_torch_inference_mode(tf, gpt2_tokenizer):
    import torch

    model = models(tf, gpt2_tokenizer)["gpt2"]()
    w = AttentionWidget.from_transformers(model, gpt2_tokenizer, TEXT)
    outside = w.head_effects(method="attribution")
    with torch.inference_mode():
        inside = w.head_effects(method="attribution", mode="mean")
        np.testing.assert_array_equal(w.head_effects(method="attribution"), outside)
    np.testing.assert_array_equal(inside, w.head_effects(method="attribution", mode="mean"))
    assert all(p.grad is None for p in model.parameters())
    with torch.inference_mode():  # a model made inside it: its weights are inference tensors, with no gradient
        made = models(tf, gpt2_tokenizer)["gpt2"]()
    w = AttentionWidget.from_transformers(made, gpt2_tokenizer, TEXT)
    with pytest.raises(ValueError, match=r"inference_mode.*outside it.*method=\"exact\""):
        w.head_effects(method="attribution")
    np.testing.assert_allclose(w.head_effects(), by_hand(made, ids_of(gpt2_tokenizer), "zero"), atol=1e-5, rtol=0)


def test_a_transformer_lens_models_estimate_is_gradient_times_its_hook_z(gpt2_tokenizer):
    tl = pytest.importorskip("transformer_lens")
    import torch

    model = hooked(tl, gpt2_tokenizer, "rotary-gqa", initializer_range=0.25)
    w = AttentionWidget.from_transformer_lens(model, TEXT)
    tokens = model.to_tokens(TEXT)
    seen = []

    def keep(z, hook):
        z.retain_grad()
        seen.append(z)
        return z  # (a bridge goes on with what its hook returns)

    with torch.enable_grad():
        logits = model.run_with_hooks(tokens, return_type="logits", fwd_hooks=[(lambda n: n.endswith("hook_z"), keep)])
        logp = torch.log_softmax(logits[0, -1].double(), dim=-1)
        logp[int(logp.argmax())].backward()
    model.zero_grad(set_to_none=True)
    want = np.stack([(-(z.detach() * z.grad)).sum(dim=(0, 1, 3)).double().numpy() for z in seen])
    np.testing.assert_allclose(w.head_effects(method="attribution"), want, atol=1e-5, rtol=0)
    with torch.inference_mode():
        np.testing.assert_allclose(w.head_effects(method="attribution"), want, atol=1e-5, rtol=0)


def test_the_layers_before_the_one_ablated_run_once_for_every_copy(tf, gpt2_tokenizer):
    model = models(tf, gpt2_tokenizer)["llama"]()
    w = AttentionWidget.from_transformers(model, gpt2_tokenizer, TEXT)
    rows = {0: 0, 1: 0}  # copies of the text each layer's block gave out
    handles = [
        layer.register_forward_hook(lambda module, args, out, i=i: rows.__setitem__(i, rows[i] + _batch(out)))
        for i, layer in enumerate(model.model.layers)
    ]
    try:
        w.head_effects()
    finally:
        for handle in handles:
            handle.remove()
    # the clean pass; then layer 0's pass, its 4 heads and one unablated copy; then layer 1's, its first block once
    assert rows == {0: 1 + 5 + 1, 1: 1 + 5 + 4}


def _batch(out):
    return (out[0] if isinstance(out, tuple) else out).shape[0]


def test_a_model_whose_blocks_cannot_be_widened_runs_whole_for_every_copy(tf, gpt2_tokenizer, monkeypatch):
    from attnwidget.integrations import ablation

    model = models(tf, gpt2_tokenizer)["gpt2"]()
    w = AttentionWidget.from_transformers(model, gpt2_tokenizer, TEXT)
    widen = ablation._widen

    def wrong(copies, n):  # a block that does not take its hidden states as given: the unablated copy differs
        hook = widen(copies, n)
        return lambda module, args, kwargs: ((2 * hook(module, args, kwargs)[0][0], *args[1:]), kwargs)

    monkeypatch.setattr(ablation, "_widen", wrong)
    np.testing.assert_allclose(w.head_effects(), by_hand(model, ids_of(gpt2_tokenizer), "zero"), atol=1e-5, rtol=0)


def test_a_model_loaded_for_sdpa_is_ablated_as_its_eager_self(tf, gpt2_tokenizer):
    import torch

    torch.manual_seed(0)
    config = tf.GPT2Config(
        vocab_size=len(gpt2_tokenizer),
        n_embd=64,
        n_layer=2,
        n_head=4,
        n_positions=64,
        attn_implementation="sdpa",
        **WIDE,
    )
    model = tf.GPT2LMHeadModel(config).eval()
    w = AttentionWidget.from_transformers(model, gpt2_tokenizer, TEXT)
    np.testing.assert_allclose(w.head_effects(), by_hand(model, ids_of(gpt2_tokenizer), "zero"), atol=1e-5, rtol=0)
    assert model.config._attn_implementation == "sdpa"  # set back after


@pytest.mark.parametrize("kind", ["gpt2", "llama"])
def test_while_writing_the_effects_are_on_the_next_token_after_the_step_shown(tf, gpt2_tokenizer, kind):
    model = models(tf, gpt2_tokenizer)[kind]()
    w = AttentionWidget.from_transformers(model, gpt2_tokenizer, TEXT, generate=3)
    ids = gpt2_tokenizer.convert_tokens_to_ids(gpt2_tokenizer.convert_ids_to_tokens(ids_of(gpt2_tokenizer)))
    written = ids + [int(t) for t in _written(model, ids, 3)]
    assert w.step == w.prompt_length == len(ids) < len(w.tokens)
    np.testing.assert_allclose(w.head_effects(), by_hand(model, written[: w.step], "zero"), atol=1e-5, rtol=0)
    w.step = w.prompt_length + 1  # a step below the end: the first step tokens, and the token after them
    assert w.step < len(w.tokens)
    np.testing.assert_allclose(
        w.head_effects(mode="mean"), by_hand(model, written[: w.step], "mean"), atol=1e-5, rtol=0
    )


def _written(model, ids, k):
    import torch

    with torch.no_grad():
        out = model.generate(
            torch.tensor([ids]), max_new_tokens=k, do_sample=False, num_beams=1, pad_token_id=model.config.eos_token_id
        )
    return out[0, len(ids) :].tolist()


def test_effects_are_kept_per_mode_and_step_and_do_not_follow_the_temperature(tf, gpt2_tokenizer):
    model = models(tf, gpt2_tokenizer)["gpt2"]()
    w = AttentionWidget.from_transformers(model, gpt2_tokenizer, TEXT)
    passes = []
    handle = model.register_forward_pre_hook(lambda module, args: passes.append(1))
    try:
        first = w.head_effects()
        ran = len(passes)
        assert 0 < ran <= 1 + 2  # the clean pass and one per layer (its heads a batch)
        first[0, 0] = 99.0  # the caller's own copy
        w.temperature = 3.0
        again = w.head_effects()
        assert len(passes) == ran and again[0, 0] != 99.0
        w.head_effects(mode="mean")
        assert len(passes) == 2 * ran  # another mode: computed
        w.step = 3
        w.head_effects()
        assert len(passes) == 3 * ran  # another step: computed
    finally:
        handle.remove()


def test_what_cannot_be_ablated_is_refused(tf, gpt2_tokenizer):
    with pytest.raises(ValueError, match="made from a model"):
        AttentionWidget().head_effects()
    with pytest.raises(ValueError, match="made from a model"):
        AttentionWidget(["one two", "three four"]).head_effects()
    with pytest.raises(ValueError, match="made from a model"):
        AttentionWidget(tokens=["a", "b"], q=np.eye(2), k=np.eye(2), v=np.eye(2)).head_effects()
    with pytest.raises(ValueError, match="made from a model"):
        AttentionWidget.from_attentions(np.full((2, 2, 3, 3), 1 / 3), ["a", "b", "c"]).head_effects()
    bert = random_model(tf, "BertModel", "BertConfig", len(gpt2_tokenizer), intermediate_size=128, **TINY)
    with pytest.raises(ValueError, match="next token"):
        AttentionWidget.from_transformers(bert, gpt2_tokenizer, TEXT).head_effects()
    body = gpt2(tf, gpt2_tokenizer).transformer  # GPT-2 without its language-model head
    with pytest.raises(ValueError, match="language-model head"):
        AttentionWidget.from_transformers(body, gpt2_tokenizer, TEXT).head_effects()
    t5 = random_model(
        tf,
        "T5ForConditionalGeneration",
        "T5Config",
        len(gpt2_tokenizer),
        d_model=32,
        d_kv=8,
        d_ff=64,
        num_layers=1,
        num_heads=4,
        decoder_start_token_id=0,
    )
    with pytest.raises(ValueError, match="encoder–decoder"):
        AttentionWidget.from_transformers(t5, gpt2_tokenizer, TEXT, target="the river").head_effects()
    bloom = random_model(
        tf, "BloomForCausalLM", "BloomConfig", len(gpt2_tokenizer), hidden_size=64, n_layer=2, n_head=4
    )  # read by hand
    with pytest.raises(ValueError, match="without transformers' attention interface"):
        AttentionWidget.from_transformers(bloom, gpt2_tokenizer, TEXT).head_effects()
    w = AttentionWidget.from_transformers(gpt2(tf, gpt2_tokenizer), gpt2_tokenizer, TEXT)
    for mode in ("mean-ablate", "", None, 0):
        with pytest.raises(ValueError, match="'zero' or 'mean'"):
            w.head_effects(mode=mode)


def test_an_nnsight_models_effects_are_its_hugging_face_models(tf, gpt2_tokenizer):
    nnsight = pytest.importorskip("nnsight")
    import warnings

    model = models(tf, gpt2_tokenizer)["gpt2"]()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (LanguageModel's successor is announced)
        lm = nnsight.LanguageModel(model, tokenizer=gpt2_tokenizer)
    w = AttentionWidget.from_nnsight(lm, TEXT)
    np.testing.assert_allclose(w.head_effects(), by_hand(model, ids_of(gpt2_tokenizer), "zero"), atol=1e-5, rtol=0)


def test_a_transformer_lens_model_is_ablated_at_its_hook_z(gpt2_tokenizer):
    tl = pytest.importorskip("transformer_lens")
    import torch

    model = hooked(tl, gpt2_tokenizer, "rotary-gqa", initializer_range=0.25)
    w = AttentionWidget.from_transformer_lens(model, TEXT)
    tokens = model.to_tokens(TEXT)
    with torch.no_grad():
        clean = torch.log_softmax(model(tokens)[0, -1].double(), dim=-1)
        best = int(clean.argmax())
        want = np.zeros((2, 4))
        for layer in range(2):
            for h in range(4):
                w_o = model.blocks[layer].attn.W_O  # heads × d_head × d_model
                saved = w_o[h].clone()
                w_o.data[h] = 0.0  # by the output projection's weights: a head with no W_O adds nothing, as a zero z
                try:
                    ablated = torch.log_softmax(model(tokens)[0, -1].double(), dim=-1)
                finally:
                    w_o.data[h] = saved
                want[layer, h] = float(ablated[best] - clean[best])
    assert np.abs(want).max() > 1e-2
    np.testing.assert_allclose(w.head_effects(), want, atol=1e-5, rtol=0)
    bidirectional = AttentionWidget.from_transformer_lens(hooked(tl, gpt2_tokenizer, "bidirectional"), TEXT)
    with pytest.raises(ValueError, match="next token"):
        bidirectional.head_effects()


# --- the heads' overview: "effect", one more summary -------------------------------------


def test_the_overview_of_a_language_models_widget_offers_the_effect_and_shows_it_once_asked(tf, gpt2_tokenizer):
    model = models(tf, gpt2_tokenizer)["gpt2"]()
    w = AttentionWidget.from_transformers(model, gpt2_tokenizer, TEXT)
    w.comm = RecordingComm()
    _on_page_message(w, {"kind": "compute", "view": "overview"}, [])
    assert w.overview["summaries"]["effect"] == [None] * 8  # offered, not computed: no forward passes at display
    w.summary = "effect"  # asked: the overview is out of date until it carries them
    assert w.overview is None
    _on_page_message(w, {"kind": "compute", "view": "overview"}, [])  # the model's passes, on the kernel's thread
    np.testing.assert_allclose(
        np.array(w.overview["summaries"]["effect"]), w.head_effects().ravel(), rtol=0, atol=1e-12
    )
    w.temperature = 2.0  # a new overview at another temperature: the effects kept
    _on_page_message(w, {"kind": "compute", "view": "overview"}, [])
    np.testing.assert_allclose(
        np.array(w.overview["summaries"]["effect"]), w.head_effects().ravel(), rtol=0, atol=1e-12
    )
    means = w.head_effects(mode="mean")  # the mode last asked for: the overview of the other is out of date
    assert w.overview is None
    _on_page_message(w, {"kind": "compute", "view": "overview"}, [])
    np.testing.assert_allclose(np.array(w.overview["summaries"]["effect"]), means.ravel(), rtol=0, atol=1e-12)
    # computed by hand first (in another mode): the overview carries them at once, in that mode
    other = AttentionWidget.from_transformers(model, gpt2_tokenizer, TEXT)
    means = other.head_effects(mode="mean")
    _on_page_message(other, {"kind": "compute", "view": "overview"}, [])
    np.testing.assert_allclose(np.array(other.overview["summaries"]["effect"]), means.ravel(), rtol=0, atol=1e-12)


def test_a_widget_with_no_next_token_has_no_effect_summary(tf, gpt2_tokenizer):
    bert = random_model(tf, "BertModel", "BertConfig", len(gpt2_tokenizer), intermediate_size=128, **TINY)
    w = AttentionWidget.from_transformers(bert, gpt2_tokenizer, TEXT)
    _on_page_message(w, {"kind": "compute", "view": "overview"}, [])
    assert "effect" not in w.overview["summaries"]
    for widget in (w, AttentionWidget()):
        with pytest.raises(traitlets.TraitError, match="next token"):
            widget.summary = "effect"
        assert widget.summary == ""
    w.summary = "self"  # the others as before


def test_a_language_models_widget_can_start_coloured_by_the_effect_and_is_not_run_until_the_page_asks(
    tf, gpt2_tokenizer
):
    model = models(tf, gpt2_tokenizer)["gpt2"]()
    passes = []
    handle = model.register_forward_pre_hook(lambda module, args: passes.append(1))
    try:
        w = AttentionWidget.from_transformers(model, gpt2_tokenizer, TEXT, summary="effect")
        read = len(passes)
        w._repr_mimebundle_()  # shown: the overview waits for the page
        assert w.summary == "effect" and w.overview is None and len(passes) == read
        _on_page_message(w, {"kind": "compute", "view": "overview"}, [])
        assert len(passes) > read and None not in w.overview["summaries"]["effect"]
    finally:
        handle.remove()


def test_effects_that_fail_are_said_once_in_the_overview(tf, gpt2_tokenizer, monkeypatch):
    from attnwidget.integrations import ablation

    w = AttentionWidget.from_transformers(models(tf, gpt2_tokenizer)["gpt2"](), gpt2_tokenizer, TEXT, summary="effect")

    def fail(*args):
        raise MemoryError("no room")

    monkeypatch.setattr(ablation, "effects", fail)
    _on_page_message(w, {"kind": "compute", "view": "overview"}, [])
    assert w.overview["error"] == "head effects: MemoryError: no room"
    w.summary = "self"  # another summary: the overview without the effects
    assert w.overview is None
    _on_page_message(w, {"kind": "compute", "view": "overview"}, [])
    assert w.overview["summaries"]["effect"] == [None] * 8


def test_a_widget_of_several_texts_gives_the_effects_on_the_text_shown(tf, gpt2_tokenizer):
    model = models(tf, gpt2_tokenizer)["gpt2"]()
    texts = [TEXT, "the bank of the river"]
    w = AttentionWidget.from_transformers(model, gpt2_tokenizer, texts)
    alone = [AttentionWidget.from_transformers(model, gpt2_tokenizer, t).head_effects() for t in texts]
    np.testing.assert_allclose(w.head_effects(), alone[0], atol=1e-6)
    w.sentence_index = 1
    np.testing.assert_allclose(w.head_effects(), alone[1], atol=1e-6)
    assert not np.allclose(alone[0], alone[1])


def test_an_estimate_of_a_model_whose_attention_is_not_routed_is_refused_as_the_exact_path_is(
    tf, gpt2_tokenizer, monkeypatch
):
    import contextlib

    from attnwidget.integrations import interface

    w = AttentionWidget.from_transformers(gpt2(tf, gpt2_tokenizer), gpt2_tokenizer, TEXT)
    monkeypatch.setattr(interface, "routed", lambda attend: contextlib.nullcontext())  # (no call reaches ours)
    for method in ("attribution", "exact"):
        with pytest.raises(NotImplementedError, match="head effects need one call per layer"):
            w.head_effects(method=method)


@pytest.mark.parametrize("lens", [False, True])
def test_a_model_of_many_heads_shows_every_estimate_at_once_then_the_largest_ablated_exactly(
    tf, gpt2_tokenizer, lens, monkeypatch
):
    """More heads than research.EXACT: the page's effect summary draws every head's estimate first
    (one backward pass), then ablates exactly the EXACT heads whose estimates are largest and
    shows those values in their place, saying which are exact; Python's head_effects() stays exact."""
    from attnwidget.integrations import ablation
    from attnwidget.research import EXACT

    if lens:
        w = AttentionWidget.from_transformer_lens(
            hooked(pytest.importorskip("transformer_lens"), gpt2_tokenizer, "gpt2-like", n_layers=4, n_heads=6), TEXT
        )
    else:
        size = dict(n_embd=48, n_layer=4, n_head=6, n_positions=64, initializer_range=0.25)
        end = dict(bos_token_id=len(gpt2_tokenizer) - 1, eos_token_id=len(gpt2_tokenizer) - 1)
        model = random_model(tf, "GPT2LMHeadModel", "GPT2Config", len(gpt2_tokenizer), **size, **end)
        w = AttentionWidget.from_transformers(model, gpt2_tokenizer, TEXT)
    w.comm = RecordingComm()
    w.summary = "effect"
    sent = []
    w.observe(lambda change: sent.append(change["new"]), names="overview")
    _on_page_message(w, {"kind": "compute", "view": "overview"}, [])
    first, last = sent[0], sent[-1]
    estimate, exact = w.head_effects(method="attribution").ravel(), w.head_effects().ravel()
    assert not any(first["effect_exact"]) and len(sent) >= 2
    np.testing.assert_allclose(first["summaries"]["effect"], estimate, rtol=0, atol=1e-12)  # at once: estimates
    chosen = np.array(last["effect_exact"])
    assert chosen.sum() == EXACT and set(np.flatnonzero(chosen)) == set(np.argsort(-np.abs(estimate))[:EXACT])
    shown = np.array(last["summaries"]["effect"])
    np.testing.assert_allclose(shown[chosen], exact[chosen], rtol=0, atol=1e-5)  # the largest: ablated (float32 passes)
    np.testing.assert_allclose(shown[~chosen], estimate[~chosen], rtol=0, atol=1e-12)
    # an exported page carries every head ablated exactly
    np.testing.assert_allclose(w.page_state()["state"]["head_effects"], exact, rtol=0, atol=1e-12)
    assert w.overview is None  # every head exact now: the estimates are no longer shown, the page asks again
    _on_page_message(w, {"kind": "compute", "view": "overview"}, [])
    assert "effect_exact" not in w.overview
    np.testing.assert_allclose(w.overview["summaries"]["effect"], exact, rtol=0, atol=1e-12)
    # ablations that fail part way leave nothing said to be exact: the page's next ask starts again
    w.step = len(w.tokens) - 1
    real = ablation.effects
    monkeypatch.setattr(
        ablation,
        "effects",
        lambda *a, only=None, **k: (_ for _ in ()).throw(KeyboardInterrupt) if only is not None else real(*a, **k),
    )
    with pytest.raises(KeyboardInterrupt):
        _on_page_message(w, {"kind": "compute", "view": "overview"}, [])
    assert w._effects_kept() is False


@pytest.mark.parametrize("method", ["exact", "attribution"])
def test_a_transformer_lens_model_whose_hook_z_never_fires_is_refused_not_read_as_zeros(
    gpt2_tokenizer, method, monkeypatch
):
    """TransformerLens skips a hook name a model lacks without a word (a bridge may have no
    hook_z): the effects are refused, never every head's 0."""
    model = hooked(pytest.importorskip("transformer_lens"), gpt2_tokenizer, "gpt2-like")
    w = AttentionWidget.from_transformer_lens(model, TEXT)
    real = model.run_with_hooks
    monkeypatch.setattr(model, "run_with_hooks", lambda *a, fwd_hooks=(), **k: real(*a, **k))
    with pytest.raises(NotImplementedError, match="has no hook_z"):
        w.head_effects(method=method)
