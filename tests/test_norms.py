"""Norm-based analysis (Kobayashi et al., 2020): w.norms() is ‖α^h_ij · f_h(x_j)‖, f_h(x) the vector
head h adds to a row's output for key j, against hand-written forward hooks on real models' value
and output projections, and against the formula for your own arrays and attention weights alone."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_integrations import gpt2_tokenizer, tf  # (fixtures)
from test_nnsight import wrapped  # (a fixture)
from test_weights import Tokens, heads_of

from attnwidget import AttentionWidget

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

IDS = [3, 14, 15, 9, 26, 5, 35, 8]
N = len(IDS)


def tiny(family):
    torch.manual_seed(0)
    if family == "gpt2":
        config = transformers.GPT2Config(
            n_embd=32, n_layer=2, n_head=4, n_positions=64, vocab_size=64, bos_token_id=0, eos_token_id=0
        )
    else:  # grouped-query attention: 2 key/value heads for 4 query heads
        config = transformers.LlamaConfig(
            vocab_size=64,
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            max_position_embeddings=64,
        )
    return transformers.AutoModel.from_config(config).eval()


def hooked_pass(model, family):
    """The model's own pass with hand-written hooks: per layer, each head's values (the value
    projection's output, heads × n × d, key/value heads repeated to the query heads), the output
    projection's weight as x @ W (heads·d × width) and bias, and its input and output."""
    found, hooks = [], []
    for block in model.h if family == "gpt2" else model.layers:
        rec: dict = {}
        found.append(rec)
        if family == "gpt2":
            value, out = block.attn.c_attn, block.attn.c_proj
            rec["W"], rec["b"] = out.weight.detach().double().numpy(), out.bias.detach().double().numpy()
        else:
            value, out = block.self_attn.v_proj, block.self_attn.o_proj
            rec["W"], rec["b"] = out.weight.detach().double().numpy().T, np.zeros(out.weight.shape[0])

        def on_value(module, args, output, rec=rec):
            v = output[0].double().numpy()
            v = v[:, 2 * v.shape[1] // 3 :] if family == "gpt2" else v  # GPT-2's c_attn gives q, k, v side by side
            heads = v.reshape(N, -1, 8).transpose(1, 0, 2)  # head_dim 8
            rec["v"] = np.repeat(heads, 4 // len(heads), axis=0)

        def on_out(module, args, output, rec=rec):
            rec["x"], rec["y"] = args[0][0].double().numpy(), output[0].double().numpy()

        hooks += [value.register_forward_hook(on_value), out.register_forward_hook(on_out)]
    try:
        with torch.no_grad():
            model(input_ids=torch.tensor([IDS]))
    finally:
        for h in hooks:
            h.remove()
    for rec in found:  # f_h(x_j) = v^h_j W_O^h: head h's rows of the projection
        rec["f"] = np.stack([rec["v"][h] @ rec["W"][8 * h : 8 * (h + 1)] for h in range(4)])
    return found


@pytest.fixture(scope="module", params=["gpt2", "llama"])
def model(request):
    model = tiny(request.param)
    widget = AttentionWidget.from_transformers(model, Tokens(IDS), "eight tokens")
    return request.param, model, widget, hooked_pass(model, request.param)


def direct(alpha, f):
    """‖α^h_ij f_h(x_j)‖ and ‖Σ_h α^h_ij f_h(x_j)‖, written out."""
    per_head = alpha * np.linalg.norm(f, axis=-1)[:, None, : alpha.shape[-1]]
    combined = np.linalg.norm(np.einsum("hij,hjd->ijd", alpha, f[:, : alpha.shape[-1]]), axis=-1)
    return per_head, combined


def reset(w, layer=0):
    with w.hold_trait_notifications():
        w.step, w.temperature, w.sink, w.mask, w.layer = N, 1.0, False, None, layer


def test_the_heads_vectors_and_bias_sum_to_the_models_attention_output(model):
    family, _, w, hooked = model
    for layer, rec in enumerate(hooked):
        reset(w, layer)
        f, b = w._head_outputs()
        assert f.shape == (4, N, 32) and f.dtype == np.float64
        np.testing.assert_allclose(f, rec["f"], atol=1e-5)
        out = np.einsum("hij,hjd->id", heads_of(w), f) + (0 if b is None else b)
        np.testing.assert_allclose(out, rec["y"], atol=1e-5)  # the projection's own output
        np.testing.assert_allclose(b if b is not None else 0 * rec["b"], rec["b"], atol=1e-7)


@settings(max_examples=25, deadline=None)
@given(st.floats(0.1, 5), st.booleans(), st.integers(1, N), st.integers(0, 1), st.integers(0, 2**31))
def test_norms_are_each_heads_weighted_vector_length_at_the_widgets_weights(
    model, temperature, sink, step, layer, seed
):
    family, _, w, hooked = model
    rng = np.random.default_rng(seed)
    mask = rng.random((N, N)) < 0.7 if seed % 2 else None
    reset(w, layer)
    with w.hold_trait_notifications():
        w.temperature, w.sink, w.mask, w.step = temperature, sink, mask, step
    alpha = heads_of(w)
    assert alpha.shape == (4, step, step)
    per_head, combined = direct(alpha, hooked[layer]["f"])
    got = w.norms()
    assert got.shape == (4, step, step) and got.dtype == np.float64
    np.testing.assert_allclose(got, per_head, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(w.norms(combined=True), combined, rtol=1e-6, atol=1e-9)
    np.testing.assert_array_equal(alpha[w.head], w.weights)  # α of the shown head is w.weights itself


def test_norms_are_new_arrays_and_a_layer_switch_gives_that_layers(model):
    _, _, w, hooked = model
    reset(w, 0)
    first = w.norms()
    first[:] = -1  # the caller's own: the next call is not changed
    assert (w.norms() >= 0).all()
    for layer in (1, 0, 1):
        w.layer = layer
        np.testing.assert_allclose(w.norms(), direct(heads_of(w), hooked[layer]["f"])[0], rtol=1e-6, atol=1e-9)
    assert not np.allclose(w.norms(), direct(heads_of(w), hooked[0]["f"])[0])


def test_every_familys_output_projection_is_found_and_its_heads_vectors_sum_to_its_output():
    """On each family's random tiny model: the module fed the attention output is the family's own
    projection, and Σ_j Σ_h α f_h(x_j) + b is what that module returns."""
    from test_interface import FAMILIES
    from test_interface import tiny as tiny_family

    from attnwidget.integrations.interface import capture

    named = {
        "gpt2": "attn.c_proj",
        "phi": "self_attn.dense",
        "gpt_neox": "attention.dense",
        "opt": "self_attn.out_proj",
        "gptj": "attn.out_proj",
    }
    named |= {"albert": "attention.dense", "modernbert": "attn.Wo"}
    for family in FAMILIES:
        model = tiny_family(family)
        ids = torch.randint(1, 60, (1, 9), generator=torch.Generator().manual_seed(1))
        caught = capture(model, input_ids=ids)
        outputs: dict = {}  # each module's outputs, in order (ALBERT runs one layer's modules again and again)

        def record(module, args, output, outputs=outputs):
            outputs.setdefault(module, []).append(output[0].double().numpy())

        hooks = [m.register_forward_hook(record) for m in {model.get_submodule(c.out.name) for c in caught}]
        with torch.no_grad():
            model(input_ids=ids)
        for h in hooks:
            h.remove()
        for c in caught:
            assert c.out.name.endswith(named.get(family, "self_attn.o_proj")), (family, c.out.name)
            w, b = (None if a is None else a.astype(float) for a in c.out.arrays())
            d = c.v.shape[-1]
            f = np.stack([c.v[h].astype(float) @ w[d * h : d * (h + 1)] for h in range(len(c.v))])
            out = np.einsum("hij,hjd->id", c.weights(), f) + (0 if b is None else b)
            np.testing.assert_allclose(out, outputs[model.get_submodule(c.out.name)].pop(0), atol=2e-5, err_msg=family)


def test_bert_t5_and_barts_projections_in_every_block(tf, gpt2_tokenizer):
    """BERT's sits outside its self-attention module (output.dense); T5's has no bias; cross-attention's
    keys are the source's."""
    from test_seq2seq import seq2seq

    bert = transformers.BertModel(
        transformers.BertConfig(
            vocab_size=64, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64
        )
    ).eval()
    w = AttentionWidget.from_transformers(bert, Tokens(IDS[:5]), "five")
    for layer in range(2):
        w.layer = layer
        module = bert.encoder.layer[layer].attention.output.dense
        f, b = w._head_outputs()
        np.testing.assert_allclose(b, module.bias.detach().numpy(), rtol=1e-7)
        np.testing.assert_allclose(
            f[1], w.v[1].astype(float) @ module.weight.detach().double().numpy().T[8:16], atol=1e-6
        )
    for kind, where in (("t5", "EncDecAttention.o"), ("bart", "encoder_attn.out_proj")):
        model = seq2seq(tf, gpt2_tokenizer, kind)
        w = AttentionWidget.from_transformers(
            model, gpt2_tokenizer, "I sat on the riverbank.", target="I sat", block="cross", layer=1
        )
        assert w.norms().shape == (w.n_heads, len(w.tokens), len(w.key_tokens)) and w.norms(combined=True).shape == (
            len(w.tokens),
            len(w.key_tokens),
        )
        found = w._sources.found("cross").projections[1]
        assert found.name.endswith(where) and (found.bias is None) == (kind == "t5")
        f, _ = w._head_outputs()
        np.testing.assert_allclose(w.norms(), heads_of(w) * np.linalg.norm(f, axis=-1)[:, None, :], rtol=1e-9)


def test_bloom(tf, gpt2_tokenizer):
    from test_integrations import random_model

    model = random_model(tf, "BloomModel", "BloomConfig", len(gpt2_tokenizer), hidden_size=32, n_layer=2, n_head=4)
    w = AttentionWidget.from_transformers(model, gpt2_tokenizer, "I sat on the riverbank.", layer=1)
    seen = {}
    hook = model.h[1].self_attention.dense.register_forward_hook(lambda m, a, o: seen.update(y=o[0].double().numpy()))
    with torch.no_grad():
        model(**gpt2_tokenizer("I sat on the riverbank.", return_tensors="pt"))
    hook.remove()
    f, b = w._head_outputs()
    np.testing.assert_allclose(np.einsum("hij,hjd->id", heads_of(w), f) + b, seen["y"], atol=1e-5)


def test_transformer_lens_uses_each_layers_w_o_and_b_o(gpt2_tokenizer):
    tl = pytest.importorskip("transformer_lens")
    from test_integrations import hooked

    model = hooked(tl, gpt2_tokenizer, "rotary-gqa")
    text = "I sat on the riverbank"
    w = AttentionWidget.from_transformer_lens(model, text, layer=1)
    with torch.no_grad():
        _, cache = model.run_with_cache(text)
    f, b = w._head_outputs()
    np.testing.assert_allclose(
        np.einsum("hij,hjd->id", heads_of(w), f) + b, cache["blocks.1.hook_attn_out"][0].double().numpy(), atol=1e-5
    )
    np.testing.assert_allclose(
        w.norms(combined=True), np.linalg.norm(np.einsum("hij,hjd->ijd", heads_of(w), f), axis=-1), rtol=1e-9
    )


def test_nnsight_gives_the_same_norms_as_transformers(wrapped, gpt2_tokenizer):
    lm, model = wrapped
    text = "I sat on the riverbank."
    w, want = (
        AttentionWidget.from_nnsight(lm, text, layer=2),
        AttentionWidget.from_transformers(model, gpt2_tokenizer, text, layer=2),
    )
    np.testing.assert_allclose(w.norms(), want.norms(), rtol=1e-6)
    np.testing.assert_allclose(w.norms(combined=True), want.norms(combined=True), rtol=1e-6)


# --- no projection: the values are what each head adds ---


def test_your_own_arrays_values_are_the_heads_vectors_each_in_its_own_slot():
    rng = np.random.default_rng(3)
    q, k, v = rng.normal(size=(3, 5, 4)), rng.normal(size=(3, 5, 4)), rng.normal(size=(3, 5, 6))
    w = AttentionWidget(tokens=list("abcde"), q=q, k=k, v=v, causal=True, temperature=0.7)
    alpha = heads_of(w)
    np.testing.assert_allclose(w.norms(), alpha * np.linalg.norm(v, axis=-1)[:, None, :], rtol=1e-12)
    placed = np.zeros((3, 5, 18))  # f_h(x_j): v^h_j in head h's slot
    for h in range(3):
        placed[h, :, 6 * h : 6 * (h + 1)] = v[h]
    np.testing.assert_allclose(w.norms(combined=True), direct(alpha, placed)[1], rtol=1e-12)
    np.testing.assert_allclose(
        w.norms(combined=True), np.sqrt((alpha**2 * (v**2).sum(-1)[:, None, :]).sum(0)), rtol=1e-12
    )
    w.set_vectors(v=2 * v)  # new values: new norms
    np.testing.assert_allclose(w.norms(), 2 * alpha * np.linalg.norm(v, axis=-1)[:, None, :], rtol=1e-12)


def test_a_built_in_sentence_and_cross_attention():
    from test_cross import fake_seq2seq

    w = AttentionWidget("I sat on the river bank", temperature=2.0)
    want = w.weights * np.linalg.norm(w.v, axis=-1)[None, :]
    np.testing.assert_allclose(w.norms(), want[None], rtol=1e-12)
    np.testing.assert_allclose(w.norms(combined=True), want, rtol=1e-12)
    found = fake_seq2seq()
    w = AttentionWidget._from_model(found, 2, 0, {}, "cross")
    v = found["cross"].layers[2][2]
    np.testing.assert_allclose(w.norms(), heads_of(w) * np.linalg.norm(v, axis=-1)[:, None, :], rtol=1e-12)
    assert w.norms(combined=True).shape == (3, 5)


def test_attention_weights_alone_need_their_values():
    rng = np.random.default_rng(0)
    weights = rng.random((2, 3, 4, 4))
    weights /= weights.sum(-1, keepdims=True)
    values = rng.normal(size=(3, 4, 5))
    w = AttentionWidget.from_attentions(weights, list("abcd"), values=values, layer=1)
    np.testing.assert_allclose(w.norms(), weights[1] * np.linalg.norm(values, axis=-1)[:, None, :], rtol=1e-9)
    alone = AttentionWidget.from_attentions(weights, list("abcd"))
    with pytest.raises(ValueError, match="values="):
        alone.norms()
    with pytest.raises(ValueError, match="values="):
        alone.norms(combined=True)


def test_a_layer_whose_output_projection_cannot_be_read_refuses_and_the_rest_work():
    """A gate before the projection, a Linear of another kind, or a hook changing its output: no linear
    map of the values is there, so that layer's norms are refused, saying why."""

    class Gate(torch.nn.Module):
        def forward(self, x):
            return 2 * x

    class Other(torch.nn.Linear):
        pass

    model = tiny("llama")
    first = model.layers[0].self_attn
    first.o_proj = torch.nn.Sequential(Gate(), first.o_proj)
    model.layers[1].self_attn.o_proj.__class__ = Other
    w = AttentionWidget.from_transformers(model, Tokens(IDS), "eight tokens")
    with pytest.raises(
        ValueError, match="layer 0's output projection, which attnwidget could not read: no module of the model took"
    ):
        w.norms()
    w.layer = 1
    with pytest.raises(ValueError, match="layer 1's .* goes to a Other, not a linear map"):
        w.norms(combined=True)
    assert w.weights.shape == (N, N)  # the rest of the widget is as before

    model = tiny("gpt2")
    model.h[1].attn.c_proj.register_forward_hook(lambda m, a, o: o + 1)
    w = AttentionWidget.from_transformers(model, Tokens(IDS), "eight tokens", layer=1)
    with pytest.raises(ValueError, match=r"h.1.attn.c_proj does not give its input @ its weight \+ its bias"):
        w.norms()
    w.layer = 0
    assert w.norms().shape == (4, N, N)


def test_a_layer_whose_norms_cannot_be_read_says_why_in_the_pages_panel_and_still_exports():
    from test_measures import ask

    class Other(torch.nn.Linear):
        pass

    model = tiny("llama")
    model.layers[1].self_attn.o_proj.__class__ = Other
    w = AttentionWidget.from_transformers(model, Tokens(IDS), "eight tokens", layer=1, measure="norms")
    assert "goes to a Other, not a linear map" in ask(w)["error"]  # said in the panel, not raised at the page's ask
    state = w.page_state()["state"]  # an export carries the reason, and the measures that work
    assert "error" in state["measure_data"]["norms"] and "matrix" in state["measure_data"]["rollout"]


def test_an_exported_page_computes_norms_only_where_nothing_it_can_switch_to_has_a_projection(model):
    """Own arrays, built-in sentences and a model read without projections: the page computes weight ×
    ‖value‖ ({"in_page": true}). A model's widget whose values were set by hand shows them unprojected,
    but its page can switch back to the model's layers, which have projections: it carries the matrix."""
    carried = lambda w: w.page_state()["state"]["measure_data"]["norms"]
    rng = np.random.default_rng(0)
    assert carried(
        AttentionWidget(
            tokens=list("abcd"),
            q=rng.normal(size=(2, 4, 3)),
            k=rng.normal(size=(2, 4, 3)),
            v=rng.normal(size=(2, 4, 3)),
        )
    ) == {"in_page": True}
    assert carried(AttentionWidget(["She sat by the river bank", "He sat by it"])) == {"in_page": True}
    long = AttentionWidget(
        tokens=[f"t{i}" for i in range(300)],
        q=rng.normal(size=(300, 2)),
        k=rng.normal(size=(300, 2)),
        v=rng.normal(size=(300, 2)),
    )
    assert long.measure == "" and carried(long) == {
        "in_page": True
    }  # (offered at any length: it costs the page nothing)
    from test_layers import fake_model

    assert carried(AttentionWidget._from_model(fake_model(), 0, 0, {})) == {"in_page": True}  # (no projections)
    _, _, w, _ = model
    reset(w)
    assert "matrix" in carried(w)  # the model's own layer: turned by its projection
    w.v = np.array(w.v)  # values set by hand: no projection here, but the page can go back to the model's layers
    try:
        assert not w.layer_shown
        np.testing.assert_allclose(w.norms()[w.head], w.weights * np.linalg.norm(w.v[w.head], axis=-1))
        assert "matrix" in carried(w)
    finally:
        w.layer = 1
        reset(w)
