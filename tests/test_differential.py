"""Differential attention (DiffLlama: Ye et al., "Differential Transformer"): each layer calls attention
twice with the same queries and keys over two halves of the values, and mixes head h's result minus λ
times head h + heads/2's. Read exactly: every head's own softmax is the model's output_attentions, λ is
the layer's own, and the pair's signed difference @ the values is what the model feeds its group norm,
in every layer and pair, within 1e-5 in float32."""

import numpy as np
import pytest
import traitlets

from attnwidget import AttentionWidget
from attnwidget.formulas import pair_heads
from attnwidget.integrations.interface import capture

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from test_interface import BASE, TEXT, tokenizer  # noqa: E402  (the fixture)

TOL = 1e-5
SHAPES = {
    "grouped": dict(num_attention_heads=4, num_key_value_heads=2),
    "eight": dict(num_attention_heads=8, num_key_value_heads=4, hidden_size=64),
}


def diffllama(vocab: int = 64, shape: str = "grouped"):
    config = transformers.AutoConfig.for_model(
        "diffllama", **{**BASE, **SHAPES[shape], "vocab_size": vocab, "initializer_range": 0.2, "lambda_std_dev": 0.3}
    )
    torch.manual_seed(0)
    return transformers.AutoModel.from_config(config, attn_implementation="eager").eval()


def own_pass(model, ids):
    """The model's own attention weights and, per layer, what it mixes (its group norm's input: queries ×
    pairs × 2·d_head) and its λ, as the model computes them."""
    mixed, hooks = {}, []
    for i, layer in enumerate(model.layers):
        keep = lambda module, args, i=i: mixed.__setitem__(i, args[0][0].double().numpy())
        hooks.append(layer.self_attn.groupnorm.register_forward_pre_hook(keep))
    try:
        with torch.no_grad():
            out = model(input_ids=ids, output_attentions=True)
    finally:
        for h in hooks:
            h.remove()
    lambdas = []
    for layer in model.layers:
        a = layer.self_attn
        pairs = ((a.lambda_q1, a.lambda_k1), (a.lambda_q2, a.lambda_k2))
        one, two = (torch.exp(torch.sum(x.detach() * y.detach(), dtype=torch.float32)) for x, y in pairs)
        lambdas.append(float(one - two) + a.lambda_init)
    return [a[0].double().numpy() for a in out.attentions], [mixed[i] for i in range(len(model.layers))], lambdas


@pytest.mark.parametrize("shape", SHAPES)
def test_each_layer_is_caught_once_with_both_halves_of_its_values_and_its_lambda(shape):
    model = diffllama(shape=shape)
    ids = torch.randint(1, 60, (1, 9), generator=torch.Generator().manual_seed(1))
    weights, mixed, lambdas = own_pass(model, ids)
    calls = capture(model, input_ids=ids)
    assert len(calls) == len(model.layers)
    heads, d = model.config.num_attention_heads, model.config.head_dim
    for i, c in enumerate(calls):
        assert c.layer == i and c.v.shape == (heads, 9, 2 * d)
        assert c.lam == pytest.approx(lambdas[i], abs=1e-6) and abs(c.lam) > 0.01
        np.testing.assert_allclose(c.weights(), weights[i], atol=TOL, rtol=0)
        # head p (map 1) minus λ · head p + heads/2 (map 2), @ the pair's values: the model's own mix
        w = c.weights()
        for p in range(heads // 2):
            np.testing.assert_array_equal(c.v[p], c.v[p + heads // 2])  # the two maps of a pair read the same values
            np.testing.assert_allclose((w[p] - c.lam * w[p + heads // 2]) @ c.v[p], mixed[i][:, p], atol=TOL, rtol=0)


def test_a_layer_that_mixes_its_heads_otherwise_is_refused():
    """The mix is held to what the model feeds its group norm: pairs mixed another way are refused."""
    model = diffllama()
    swapped = lambda module, args: (args[0].flip(2),)  # the pairs in the other order
    handle = model.layers[1].self_attn.groupnorm.register_forward_pre_hook(swapped)
    ids = torch.randint(1, 60, (1, 9), generator=torch.Generator().manual_seed(1))
    try:
        with pytest.raises(NotImplementedError, match=r"DiffLlamaModel \(model_type 'diffllama'\).*layer 1.*λ"):
            capture(model, input_ids=ids)
    finally:
        handle.remove()
    assert "eager" not in transformers.AttentionInterface._global_mapping


def test_a_module_that_computes_attention_twice_without_a_lambda_is_refused(monkeypatch):
    from attnwidget.integrations import differential

    monkeypatch.setattr(differential, "LAMBDAS", ("lambda_a", "lambda_b", "lambda_c", "lambda_d"))
    ids = torch.randint(1, 60, (1, 9), generator=torch.Generator().manual_seed(1))
    with pytest.raises(NotImplementedError, match=r"DiffLlamaModel \(model_type 'diffllama'\).*twice.*not one softmax"):
        capture(diffllama(), input_ids=ids)


# --- the widget: both maps, λ and their signed difference, in every layer and head -------------


def test_the_widget_shows_both_maps_lambda_and_their_difference_as_the_model_mixes(tokenizer):
    model = diffllama(len(tokenizer))
    ids = tokenizer(TEXT, return_tensors="pt")["input_ids"]
    weights, mixed, lambdas = own_pass(model, ids)
    w = AttentionWidget.from_transformers(model, tokenizer, TEXT)
    heads = w.n_heads
    assert w.model_lambda == pytest.approx(lambdas, abs=1e-6) and w.causal
    for layer in range(w.n_layers):
        w.layer = layer
        for head in range(heads):
            w.head = head
            np.testing.assert_allclose(w.weights, weights[layer][head], atol=TOL, rtol=0)  # its own softmax
            d = w.differential
            p = head % (heads // 2)
            assert d.heads == (p, p + heads // 2) and d.shown == ("map 1" if head < heads // 2 else "map 2")
            assert d.lam == pytest.approx(lambdas[layer], abs=1e-6)
            np.testing.assert_allclose(d.map1, weights[layer][p], atol=TOL, rtol=0)
            np.testing.assert_allclose(d.map2, weights[layer][p + heads // 2], atol=TOL, rtol=0)
            np.testing.assert_allclose(d.difference, d.map1 - d.lam * d.map2, atol=1e-12, rtol=0)
            np.testing.assert_allclose(d.difference.sum(axis=1), 1 - d.lam, atol=1e-12)  # the row budget: 1 − λ
            np.testing.assert_allclose(d.output, mixed[layer][:, p], atol=TOL, rtol=0)  # what the model mixes
    w.difference_map = True
    assert w.differential.shown == "difference"
    # the temperature divides both maps' scores: each is softmax(scores / T) of its own head, then the difference
    w.temperature = 0.5
    d = w.differential
    for h, got in zip(d.heads, (d.map1, d.map2)):
        w.head = h
        np.testing.assert_allclose(got, w.weights, atol=1e-12)
    np.testing.assert_allclose(d.difference, d.map1 - d.lam * d.map2, atol=1e-12)


def test_the_difference_is_a_differential_models_own_and_not_an_exercise(tokenizer):
    from traitlets import TraitError

    plain = AttentionWidget(tokens=list("abc"), q=np.eye(3), k=np.eye(3), v=np.eye(3))
    assert plain.model_lambda is None and plain.differential is None
    with pytest.raises(TraitError, match="differential attention model"):
        plain.difference_map = True
    assert not plain.difference_map
    w = AttentionWidget.from_transformers(diffllama(len(tokenizer)), tokenizer, TEXT, difference_map=True)
    assert w.difference_map and w.differential.shown == "difference"
    with pytest.raises(TraitError, match="exercise"):
        w.exercise = "predict"
    assert w.exercise == "" and w.difference_map
    w.set_vectors(q=w.q.copy(), k=w.k.copy(), v=w.v.copy())  # your own arrays: no layer's λ
    assert not w.difference_map and w.differential is None


def test_what_a_pair_does_not_give_is_refused_with_why(tokenizer):
    """A head is half of a pair: zeroing it alone is no ablation the model's mix defines, and the group norm between
    the mix and the output projection leaves no linear map of a head's values for norms()."""
    config = diffllama(len(tokenizer)).config
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(config, attn_implementation="eager").eval()
    w = AttentionWidget.from_transformers(model, tokenizer, TEXT)
    with pytest.raises(ValueError, match="a head is half of a pair, so it cannot be ablated alone"):
        w.head_effects()
    with pytest.raises(ValueError, match="differential attention: a pair of heads' mix is normalised"):
        w.norms()


def test_the_widget_holds_at_most_the_head_shown_and_its_pair(tokenizer):
    from test_byhand import build

    w = AttentionWidget.from_transformers(build("deberta-v2", len(tokenizer)), tokenizer, "I sat on the river bank")
    for head in range(w.n_heads):
        w.head = head
        w.weights  # noqa: B018  (computed, and kept)
    assert set(w._results) == {w.n_heads - 1}  # (not one matrix per head ever shown)
    d = AttentionWidget.from_transformers(diffllama(len(tokenizer)), tokenizer, "I sat on the river bank")
    for head in range(d.n_heads):
        d.head = head
        d.differential  # noqa: B018
    assert set(d._results) == set(pair_heads(d.head, d.n_heads))


def test_head_effects_say_a_head_is_half_of_a_pair(tokenizer):
    import transformers

    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(diffllama(len(tokenizer)).config).eval()
    w = AttentionWidget.from_transformers(model, tokenizer, "I sat on the river bank")
    assert not w.next_token  # (the page offers no "effect" summary)
    with pytest.raises(traitlets.TraitError, match="summary='effect'"):
        w.summary = "effect"
