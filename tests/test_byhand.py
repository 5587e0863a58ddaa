"""Families that compute attention their own way, read by hand (integrations/byhand.py): BLOOM and MPT
(ALiBi), XGLM (sinusoidal positions, its own scaled dot product) and DeBERTa v1, v2 and v3 (disentangled
attention: content and relative-position terms). On tiny random configs of each, every layer and head the
widget shows is the model's own ``output_attentions`` within 1e-5; a reading gone wrong is refused, never
shown; DeBERTa's scores split into their three terms as the model adds them."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_integrations import gpt2_tokenizer, tf  # (fixtures)

from attnwidget import AttentionWidget

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

TEXT = "I sat on the riverbank and the river sat on the bank."
WIDE = dict(initializer_range=0.2)  # (rows far from uniform: 1e-5 tells weights apart)
BERT = dict(hidden_size=32, num_attention_heads=4, num_hidden_layers=2, intermediate_size=64, **WIDE)
# each family's tiny configs: the options that change how it computes attention
CONFIGS = {
    "bloom": ("bloom", dict(hidden_size=32, n_layer=2, n_head=4, **WIDE)),
    "mpt": ("mpt", dict(d_model=32, n_heads=4, n_layers=2, max_seq_len=64, **WIDE)),
    "mpt-clipped": (
        "mpt",
        dict(d_model=32, n_heads=4, n_layers=2, max_seq_len=64, attn_config={"clip_qkv": 0.3, "softmax_scale": 0.7}),
    ),
    "xglm": ("xglm", dict(d_model=32, attention_heads=4, num_layers=2, ffn_dim=64, init_std=0.2)),
    # DeBERTa-v3's: shared keys, log buckets, normed relative embeddings, no absolute positions
    "deberta-v3": (
        "deberta-v2",
        dict(
            BERT,
            relative_attention=True,
            pos_att_type="p2c|c2p",
            position_buckets=4,
            max_relative_positions=16,
            share_att_key=True,
            norm_rel_ebd="layer_norm",
            position_biased_input=False,
        ),
    ),
    # DeBERTa-v2's: keys and queries of positions of their own, a convolution after the first layer
    "deberta-v2": (
        "deberta-v2",
        dict(BERT, relative_attention=True, pos_att_type="c2p|p2c", max_relative_positions=5, conv_kernel_size=3),
    ),
    "deberta-v2-c2p": ("deberta-v2", dict(BERT, relative_attention=True, pos_att_type="c2p", max_relative_positions=5)),
    "deberta-v2-p2c": (
        "deberta-v2",
        dict(BERT, relative_attention=True, pos_att_type="p2c", position_buckets=6, max_relative_positions=20),
    ),
    "deberta-v2-absolute": ("deberta-v2", dict(BERT)),  # no relative attention: a plain dot product
    "deberta": ("deberta", dict(BERT, relative_attention=True, pos_att_type="c2p|p2c", max_relative_positions=4)),
}


def build(name, vocab, head=False):
    kind, options = CONFIGS[name]
    torch.manual_seed(0)
    config = transformers.AutoConfig.for_model(kind, vocab_size=vocab, **options)
    auto = transformers.AutoModelForCausalLM if head else transformers.AutoModel
    return auto.from_config(config, attn_implementation="eager").eval()


def own_weights(model, tokenizer, text):
    with torch.no_grad():
        return model(**tokenizer(text, return_tensors="pt"), output_attentions=True).attentions


def assert_exact(w, reference):
    assert w.n_layers == len(reference)
    for layer, want in enumerate(reference):
        w.layer = layer
        assert w.n_heads == want.shape[1]
        for head in range(w.n_heads):
            w.head = head
            np.testing.assert_allclose(
                w.weights, want[0, head].double().numpy(), atol=1e-5, rtol=0, err_msg=f"layer {layer} head {head}"
            )


@pytest.mark.parametrize("name", CONFIGS)
def test_every_layer_and_head_is_the_models_own(name, gpt2_tokenizer):
    model = build(name, len(gpt2_tokenizer))
    w = AttentionWidget.from_transformers(model, gpt2_tokenizer, TEXT)
    assert_exact(w, own_weights(model, gpt2_tokenizer, TEXT))
    decoder = CONFIGS[name][0] in ("bloom", "mpt", "xglm")
    assert w.causal is decoder and w.model_causal is decoder
    found = w._sources.found("")
    assert (found.bias is not None) == (CONFIGS[name][0] in ("bloom", "mpt"))  # ALiBi: one bias for every layer
    relative = "relative_attention" in CONFIGS[name][1]
    assert (found.biases is not None) == relative  # DeBERTa's position terms: each layer's own
    position = {"bloom": "alibi", "mpt": "alibi", "xglm": "sinusoidal"}.get(CONFIGS[name][0])
    assert w.position == (position or ("relative" if relative else "learned"))


def test_debertas_own_sizes_past_its_buckets(gpt2_tokenizer):
    """DeBERTa-v3's own options (256 buckets, relative positions up to 512) on a text long enough for its
    log-scaled buckets (distances past 128)."""
    v3 = dict(CONFIGS["deberta-v3"][1], position_buckets=256, max_relative_positions=-1, max_position_embeddings=512)
    torch.manual_seed(0)
    config = transformers.DebertaV2Config(vocab_size=len(gpt2_tokenizer), **v3)
    model = transformers.DebertaV2Model(config).eval()
    text = " ".join(TEXT.split() * 16)  # (192 words)
    w = AttentionWidget.from_transformers(model, gpt2_tokenizer, text)
    assert len(w.tokens) > 160
    assert_exact(w, own_weights(model, gpt2_tokenizer, text))


@pytest.mark.parametrize("name", ["mpt", "xglm", "deberta-v3", "deberta"])
@given(length=st.integers(1, 30), seed=st.integers(0, 2**16))
@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_any_length(name, length, seed, gpt2_tokenizer):
    """Any length, shorter and longer than the relative positions' span and buckets."""
    model = build(name, len(gpt2_tokenizer))
    words = TEXT.rstrip(".").split()
    text = " ".join(np.random.default_rng(seed).choice(words, length))
    assert_exact(
        AttentionWidget.from_transformers(model, gpt2_tokenizer, text), own_weights(model, gpt2_tokenizer, text)
    )


@pytest.mark.parametrize("name", ["mpt", "deberta-v3"])
def test_the_overview_reads_each_layers_own_bias(name, gpt2_tokenizer):
    """What is computed across layers (the overview, head_summary) adds each layer's own position terms (DeBERTa)
    or the model's one bias (ALiBi) to its q · k, as the model does."""
    from attnwidget.formulas import head_summaries

    model = build(name, len(gpt2_tokenizer))
    w = AttentionWidget.from_transformers(model, gpt2_tokenizer, TEXT)
    want = [head_summaries(a[0].double().numpy()) for a in own_weights(model, gpt2_tokenizer, TEXT)]
    np.testing.assert_allclose(w.head_summary()["effective_tokens"], [s["effective_tokens"] for s in want], rtol=1e-4)


def test_a_language_models_body_is_read(gpt2_tokenizer):
    for name in ("mpt", "xglm", "bloom"):
        model = build(name, len(gpt2_tokenizer), head=True)
        w = AttentionWidget.from_transformers(model, gpt2_tokenizer, TEXT, layer=1)
        assert_exact(w, own_weights(model, gpt2_tokenizer, TEXT))


@pytest.mark.parametrize("name", ["bloom", "mpt", "xglm", "deberta-v3", "deberta"])
def test_a_reading_gone_wrong_is_refused(name, gpt2_tokenizer, monkeypatch):
    """Read by hand, so held to the model's own weights as every family is: a hand reading gone wrong
    (here each layer's scale 1% off) is refused, naming the family, not shown."""
    from attnwidget.integrations import byhand

    kind = CONFIGS[name][0]
    own = byhand.FAMILIES[kind].read
    monkeypatch.setitem(
        byhand.FAMILIES,
        kind,
        byhand.FAMILIES[kind]._replace(read=lambda *a: own(*a)._replace(scale=own(*a).scale * 1.01)),
    )
    model = build(name, len(gpt2_tokenizer))
    with pytest.raises(NotImplementedError, match=rf"\(model_type '{kind}'\) computes attention at layer 0"):
        AttentionWidget.from_transformers(model, gpt2_tokenizer, TEXT)


@pytest.mark.parametrize("name", ["mpt", "xglm", "deberta-v3", "deberta"])
def test_each_layers_output_projection_is_found(name, gpt2_tokenizer):
    """norms() maps each head's values by the layer's own output projection: the heads' outputs through it
    are what the model's projection gives."""
    from test_weights import heads_of

    model = build(name, len(gpt2_tokenizer))
    w = AttentionWidget.from_transformers(model, gpt2_tokenizer, TEXT, layer=1)
    where = w._sources.found("").projections[1].name
    seen = {}
    hook = model.get_submodule(where).register_forward_hook(lambda m, a, o: seen.update(y=o[0].double().numpy()))
    with torch.no_grad():
        model(**gpt2_tokenizer(TEXT, return_tensors="pt"))
    hook.remove()
    f, b = w._head_outputs()
    np.testing.assert_allclose(np.einsum("hij,hjd->id", heads_of(w), f) + (0 if b is None else b), seen["y"], atol=1e-5)


# --- DeBERTa's three terms ----------------------------------------------------


@pytest.mark.parametrize("name", ["deberta-v3", "deberta-v2", "deberta-v2-c2p", "deberta-v2-p2c", "deberta"])
def test_debertas_scores_split_into_its_terms(name, gpt2_tokenizer):
    model = build(name, len(gpt2_tokenizer))
    w = AttentionWidget.from_transformers(model, gpt2_tokenizer, TEXT, stage="scores")
    types = CONFIGS[name][1]["pos_att_type"].split("|")
    d = w.q.shape[-1]
    assert w.scale == pytest.approx(1 / np.sqrt(d * (1 + len(types))), rel=1e-6)
    for layer in range(w.n_layers):
        w.layer = layer
        for head in range(w.n_heads):
            w.head = head
            terms = w.score_terms()
            assert list(terms) == ["c2c", *sorted(types)]
            q, k = (a[head].astype(float) for a in (w.q, w.k))
            np.testing.assert_allclose(terms["c2c"], w.scale * q @ k.T, rtol=1e-12)
            np.testing.assert_allclose(sum(terms.values()), w.scores, rtol=0, atol=1e-5)
            for t in types:
                assert np.abs(terms[t]).max() > 1e-3  # (the position terms are there)
    # each position term is the model's own, computed by its own code with only that term switched on
    att = model.encoder.layer[1].attention.self
    enc = gpt2_tokenizer(TEXT, return_tensors="pt")
    seen = {}
    hook = att.register_forward_pre_hook(lambda m, a, kw: seen.update(args=a, kw=kw), with_kwargs=True)
    with torch.no_grad():
        model(**enc)
    hook.remove()
    w.layer = 1
    for t in types:
        with torch.no_grad(), pytest.MonkeyPatch.context() as mp:
            mp.setattr(att, "pos_att_type", [t])
            h = seen["args"][0]
            if CONFIGS[name][0] == "deberta":  # (v1: q divided by the scale first, its fused projection)
                qp = att.transpose_for_scores(att.in_proj(h))
                q, k, _ = qp.chunk(3, dim=-1)
                q = (q + att.transpose_for_scores(att.q_bias[None, None, :])) / np.sqrt(d * (1 + len(types)))
                theirs = att.disentangled_att_bias(q, k, seen["kw"]["relative_pos"], seen["kw"]["rel_embeddings"], 3)
            else:
                q = att.transpose_for_scores(att.query_proj(h), att.num_attention_heads)
                k = att.transpose_for_scores(att.key_proj(h), att.num_attention_heads)
                theirs = att.disentangled_attention_bias(
                    q, k, seen["kw"]["relative_pos"], seen["kw"]["rel_embeddings"], 1 + len(types)
                )
        for head in range(w.n_heads):
            w.head = head
            np.testing.assert_allclose(
                w.score_terms()[t], theirs.reshape(-1, *w.scores.shape)[head].double().numpy(), rtol=0, atol=1e-5
            )


def test_terms_are_a_debertas_and_of_its_own_arrays(gpt2_tokenizer):
    w = AttentionWidget.from_transformers(build("xglm", len(gpt2_tokenizer)), gpt2_tokenizer, TEXT)
    with pytest.raises(ValueError, match="score_terms.*DeBERTa"):
        w.score_terms()
    w = AttentionWidget.from_transformers(build("deberta-v3", len(gpt2_tokenizer)), gpt2_tokenizer, TEXT)
    w.q = w.q * 2
    with pytest.raises(ValueError, match="q, k and bias the model made"):
        w.score_terms()


# --- what is refused, and said --------------------------------------------------


def test_options_transformers_does_not_apply_are_refused(gpt2_tokenizer):
    for option, value in (("qk_ln", True), ("alibi", False), ("alibi_bias_max", 4)):
        torch.manual_seed(0)
        config = transformers.MptConfig(
            d_model=32,
            n_heads=4,
            n_layers=2,
            max_seq_len=64,
            vocab_size=len(gpt2_tokenizer),
            attn_config={option: value},
        )
        model = transformers.MptModel(config).eval()
        with pytest.raises(NotImplementedError, match=rf"MptModel \(model_type 'mpt'\).*{option}"):
            AttentionWidget.from_transformers(model, gpt2_tokenizer, TEXT)


def test_talking_heads_are_refused(gpt2_tokenizer):
    torch.manual_seed(0)
    config = transformers.DebertaConfig(vocab_size=len(gpt2_tokenizer), talking_head=True, **BERT)
    with pytest.raises(NotImplementedError, match=r"DebertaModel \(model_type 'deberta'\).*talking_head"):
        AttentionWidget.from_transformers(transformers.DebertaModel(config).eval(), gpt2_tokenizer, TEXT)


def test_a_model_of_its_own_code_is_refused(gpt2_tokenizer):
    model = build("mpt", len(gpt2_tokenizer))
    own = type("MPTModel", (type(model),), {"__module__": "transformers_modules.mosaicml.modeling_mpt"})
    model.__class__ = own
    with pytest.raises(NotImplementedError, match="trust_remote_code"):
        AttentionWidget.from_transformers(model, gpt2_tokenizer, TEXT)


def test_mpt_reads_at_most_its_max_seq_len(gpt2_tokenizer):
    model = build("mpt", len(gpt2_tokenizer))
    with pytest.raises(ValueError, match=r"reads at most 64 positions \(config.max_seq_len\)"):
        AttentionWidget.from_transformers(model, gpt2_tokenizer, "a " * 70)


def test_head_effects_say_why_not(gpt2_tokenizer):
    w = AttentionWidget.from_transformers(build("mpt", len(gpt2_tokenizer), head=True), gpt2_tokenizer, TEXT)
    with pytest.raises(ValueError, match="without transformers' attention interface, where heads are ablated"):
        w.head_effects()


def test_the_widget_holds_the_first_term_of_each_layer(gpt2_tokenizer):
    """What the page splits the bias with: term_names, and the layer shown's first term, the bias less it the second;
    a layer switch brings its own, a bias of one's own drops it."""
    model = build("deberta-v3", len(gpt2_tokenizer))
    w = AttentionWidget.from_transformers(model, gpt2_tokenizer, TEXT, layer=1, stage="scores")
    assert w.term_names == ["c2p", "p2c"]
    for layer in (1, 0):
        w.layer = layer
        for head in range(w.n_heads):
            w.head = head
            terms = w.score_terms()
            np.testing.assert_allclose(w.terms[head], terms["c2p"], rtol=0, atol=1e-6)
            np.testing.assert_allclose(w.bias[head] - w.terms[head], terms["p2c"], rtol=0, atol=1e-6)
    w.bias = np.zeros_like(w.bias)
    assert w.terms is None
    w.layer = 1
    assert w.terms is not None
    one = AttentionWidget.from_transformers(build("deberta-v2-p2c", len(gpt2_tokenizer)), gpt2_tokenizer, TEXT)
    assert one.term_names == ["p2c"] and np.array_equal(one.terms, one.bias)  # (the only term: the bias itself)
    none = AttentionWidget.from_transformers(build("mpt", len(gpt2_tokenizer)), gpt2_tokenizer, TEXT)
    assert none.term_names == [] and none.terms is None
