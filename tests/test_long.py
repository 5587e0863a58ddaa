"""A model read on a long text (attnwidget.long): its own attention kernel runs, each layer's q, k and
v are kept as it made them, and every row, tile, pooled map, summary and output computed from them
block by block equals the model's own eager attention (output_attentions) and its own output."""

import numpy as np
import pytest
from test_interface import BASE, FAMILIES

from attnwidget.formulas import head_summaries
from attnwidget.integrations.long import capture_long, open_rows
from attnwidget.long import LongAttention, LongLayer

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

N = 40  # tokens: several times every sliding window below
CAUSAL = ["llama", "mistral", "gemma2", "gemma3_text", "qwen2", "qwen3", "gpt2", "gpt_neox", "phi3", "starcoder2"]


def tiny(family, implementation):
    torch.manual_seed(0)
    config = transformers.AutoConfig.for_model(
        family, **{**BASE, "max_position_embeddings": 128, **FAMILIES.get(family, {})}
    )
    if family == "gpt2":
        config.n_positions = 128
    return transformers.AutoModel.from_config(config, attn_implementation=implementation).eval()


def ids(n=N, seed=1):
    return torch.randint(1, 60, (1, n), generator=torch.Generator().manual_seed(seed))


def read(model, tokens, samples=256):
    layers = capture_long(model, samples=samples, input_ids=tokens)
    return LongAttention([str(t) for t in tokens[0].tolist()], layers)


@pytest.mark.parametrize("family", CAUSAL)
def test_every_row_of_every_layer_and_head_is_the_models_own(family):
    """Read through SDPA (eager where the family needs it: Gemma 2's soft cap), against the eager model's weights."""
    implementation = "eager" if family == "gemma2" else "sdpa"
    model, tokens = tiny(family, implementation), ids()
    with torch.no_grad():
        want = tiny(family, "eager")(input_ids=tokens, output_attentions=True).attentions
        before = model(input_ids=tokens).last_hidden_state
    long = read(model, tokens, samples=12)
    assert long.layers == list(range(len(want)))
    for layer, weights in zip(long.layers, want):
        got = long.rows(layer, range(N)).weights
        np.testing.assert_allclose(got, weights[0].numpy(), atol=1e-5)
        h = weights.shape[1] - 1
        np.testing.assert_allclose(long.tile(layer, h, (5, 31), (2, 17)).weights, weights[0, h, 5:31, 2:17], atol=1e-5)
        dense = weights[0, h].double().numpy()
        np.testing.assert_allclose(long.map(layer, h, size=(7, 5), how="max"), _pooled(dense, 7, 5, np.max), atol=1e-5)
        summaries, x = long.summaries(layer), long._layers[layer]
        allowed = open_rows(range(N), N, x.causal, x.window)  # ("first": over the rows that may read it)
        for name, values in head_summaries(weights[0].double().numpy(), allowed).items():
            np.testing.assert_allclose(summaries[name], values, atol=1e-4, err_msg=name)
    with torch.no_grad():  # the pass was the model's own
        np.testing.assert_array_equal(model(input_ids=tokens).last_hidden_state.numpy(), before.numpy())
    assert model.config._attn_implementation == implementation
    if family in ("mistral", "starcoder2"):
        assert all(long._layers[x].window == 5 for x in long.layers)


def _pooled(dense, rows, cols, f):
    r = -(-np.arange(rows + 1) * dense.shape[0] // rows)
    c = -(-np.arange(cols + 1) * dense.shape[1] // cols)
    return np.array([[f(dense[r[p] : r[p + 1], c[q] : c[q + 1]]) for q in range(cols)] for p in range(rows)])


def test_weights_times_values_are_the_models_attention_output():
    """Each head's output, a band at a time, is what the model's own attention returned for it."""
    model, tokens = tiny("llama", "sdpa"), ids(seed=4)
    seen = {}  # each layer's attention output as its output projection receives it
    hooks = [
        m.o_proj.register_forward_pre_hook(lambda mod, a, i=i: seen.__setitem__(i, a[0]))
        for i, m in enumerate(model.layers[x].self_attn for x in range(len(model.layers)))
    ]
    try:
        long = read(model, tokens)
    finally:
        for h in hooks:
            h.remove()
    for layer in long.layers:
        heads = long.heads(layer)
        merged = seen[layer][0].reshape(N, heads.heads, -1)
        for h in range(heads.heads):
            np.testing.assert_allclose(long.output(layer, h), merged[:, h].numpy(), atol=1e-5)


def test_a_layer_read_wrong_is_refused_by_name():
    """A kernel that scores with another scale than the one it is handed: its layers are not the softmax of
    the q·k caught, the sampled rows say so, and nothing is returned."""
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    def doubled(module, query, key, value, attention_mask, scaling=None, **kwargs):
        return sdpa_attention_forward(module, query, key, value, attention_mask, scaling=2 * scaling, **kwargs)

    transformers.AttentionInterface.register("doubled", doubled)
    model = tiny("llama", "sdpa")
    model.set_attn_implementation("doubled")
    with pytest.raises(NotImplementedError, match="at layer 0 .*differ beyond rounding"):
        read(model, ids(n=2048))
    assert transformers.AttentionInterface._global_mapping.get("doubled") is doubled  # put back as it was


def test_a_kernel_wrapped_in_transformers_own_table_is_read_through_its_wrapper():
    """A library that wraps a kernel in the table models read (kvpress does at import:
    ALL_ATTENTION_FUNCTIONS[name] = wrapped, an entry of that table alone, read before the registered
    one): the reading records around the wrapper, reads what it read without it, and leaves it there."""
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS as table

    model, tokens = tiny("llama", "sdpa"), ids(seed=6)
    plain = read(model, tokens)
    own, calls = table["sdpa"], []

    def wrapped(*args, **kwargs):
        calls.append(1)
        return own(*args, **kwargs)

    table["sdpa"] = wrapped
    try:
        long = read(model, tokens)
        assert table["sdpa"] is wrapped
    finally:
        del table["sdpa"]
    assert len(calls) == len(long.layers) == len(plain.layers)
    for x in long.layers:
        np.testing.assert_array_equal(long.rows(x, range(N)).weights, plain.rows(x, range(N)).weights)


@pytest.mark.parametrize(
    ("inputs", "said"),
    [
        (lambda: dict(input_ids=ids(), attention_mask=torch.tensor([[0] * 3 + [1] * (N - 3)])), "padding"),
        (lambda: dict(input_ids=torch.cat([ids(), ids(seed=2)])), "one text at a time: the batch has 2"),
    ],
)
@pytest.mark.parametrize("implementation", ["eager", "sdpa"])
def test_what_a_long_reading_does_not_hold_is_refused_saying_what(inputs, said, implementation):
    with pytest.raises((NotImplementedError, ValueError), match=said):
        capture_long(tiny("llama", implementation), **inputs())


def test_an_encoder_reads_both_ways_and_cross_attention_is_refused_by_name():
    model, tokens = tiny("bert", "sdpa"), ids()
    with torch.no_grad():
        want = tiny("bert", "eager")(input_ids=tokens, output_attentions=True).attentions
    long = read(model, tokens)
    assert not any(long._layers[x].causal for x in long.layers)
    for layer, weights in zip(long.layers, want):
        np.testing.assert_allclose(long.rows(layer, range(N)).weights, weights[0].numpy(), atol=1e-5)
    torch.manual_seed(0)
    config = transformers.AutoConfig.for_model(
        "bart",
        vocab_size=64,
        d_model=32,
        encoder_layers=1,
        decoder_layers=1,
        encoder_attention_heads=2,
        decoder_attention_heads=2,
        encoder_ffn_dim=32,
        decoder_ffn_dim=32,
        max_position_embeddings=64,
    )
    bart = transformers.AutoModel.from_config(config, attn_implementation="sdpa").eval()
    with pytest.raises(NotImplementedError, match="cross-attention|two attention calls"):
        capture_long(bart, input_ids=tokens, decoder_input_ids=tokens[:, :7])


def test_the_temperature_divides_every_score_and_the_rows_follow():
    model, tokens = tiny("qwen2", "sdpa"), ids(seed=5)
    long = read(model, tokens)
    scores = long.rows(0, [N - 1]).scores[:, 0]
    long.temperature = 0.5
    hot = long.rows(0, [N - 1]).weights[:, 0]
    z = np.exp((scores - scores.max(-1, keepdims=True)) / 0.5)
    np.testing.assert_allclose(hot, z / z.sum(-1, keepdims=True), atol=1e-6)
    with pytest.raises(ValueError, match="temperature must be finite and > 0"):
        long.temperature = 0
    assert long.temperature == 0.5


def test_layers_given_as_arrays_and_a_whole_overview():
    rng = np.random.default_rng(0)
    n = 50
    layers = {
        3: LongLayer(rng.normal(size=(4, n, 8)), rng.normal(size=(2, n, 8)), rng.normal(size=(2, n, 8))),
        7: LongLayer(rng.normal(size=(4, n, 8)), rng.normal(size=(2, n, 8)), rng.normal(size=(2, n, 8)), window=6),
    }
    long = LongAttention([f"t{i}" for i in range(n)], layers)
    seen = []
    overview = long.overview(size=8, progress=seen.append)
    assert overview["layers"] == [3, 7] and overview["thumbnails"].shape == (2, 4, 8, 8)
    assert seen and seen[-1] == pytest.approx(1.0)
    np.testing.assert_allclose(overview["summaries"]["self"][1], long.summaries(7)["self"])
    np.testing.assert_allclose(overview["thumbnails"][0, 2], long.map(3, 2, size=8))
    with pytest.raises(ValueError, match="layer 5 is not one of the layers held: \\[3, 7\\]"):
        long.rows(5, [0])
    with pytest.raises(ValueError, match="one row per token \\(49\\)"):
        LongAttention([f"t{i}" for i in range(n - 1)], layers)
    np.testing.assert_allclose(long.rows(3, [-1]).weights, long.rows(3, [n - 1]).weights)


@pytest.mark.parametrize(
    ("ask", "said"),
    [
        (lambda long: long.rows(0, [1.7]), "positions must be whole numbers from -50 to 49"),
        (lambda long: long.rows(0, [-100]), "positions must be whole numbers from -50 to 49"),
        (lambda long: long.rows(0, [50]), "positions must be whole numbers"),
        (lambda long: long.tile(0, [1, 2], (0, 4), (0, 4)), "head must be a whole number"),
        (lambda long: long.map(0, 0, size=2.5), "size must be a whole number of pixels"),
        (lambda long: long.map(0, 0, size=10**6), "from 1 to 4096"),
        (lambda long: long.map(0, 0, size=[3, 0]), "size must be"),
        (lambda long: setattr(long, "temperature", "2"), "temperature must be finite and > 0"),
    ],
)
def test_a_question_it_cannot_answer_says_what_was_wrong(ask, said):
    rng = np.random.default_rng(1)
    n = 50
    long = LongAttention(list(range(n)), {0: LongLayer(*(rng.normal(size=(2, n, 4)) for _ in range(3)))})
    with pytest.raises(ValueError, match=said):
        ask(long)
    assert long.temperature == 1.0 and long.rows(0, [3]).weights.shape == (2, 1, n)  # nothing changed


def test_rows_beyond_what_it_gives_at_once_point_to_tile_and_map(monkeypatch):
    from attnwidget import long as module

    monkeypatch.setattr(module, "MAX_CELLS", 1000)
    rng = np.random.default_rng(1)
    long = LongAttention(list(range(50)), {0: LongLayer(*(rng.normal(size=(2, 50, 4)) for _ in range(3)))})
    assert long.rows(0, range(10)).weights.shape == (2, 10, 50)
    with pytest.raises(ValueError, match=r"more than rows\(\) gives at once .*tile\(\) a region, or map\(\)"):
        long.rows(0, range(11))


def test_a_layers_options_are_checked_when_it_is_given():
    rng = np.random.default_rng(1)
    q = rng.normal(size=(2, 10, 4))
    with pytest.raises(ValueError, match="window must be a whole number ≥ 1, with causal=True"):
        LongAttention(list(range(10)), {0: LongLayer(q, q, q, causal=False, window=4)})


MEMORY = """
import resource, sys, torch, transformers
from attnwidget.long import LongAttention
from attnwidget.integrations.long import capture_long
n = int(sys.argv[1])
torch.manual_seed(0)
config = transformers.LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=32, num_hidden_layers=2,
    num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=n)
model = transformers.AutoModel.from_config(config, attn_implementation="sdpa").eval()
ids = torch.randint(1, 60, (1, n), generator=torch.Generator().manual_seed(0))
with torch.no_grad():
    model(input_ids=ids)  # the model's own peak first
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
long = LongAttention([str(i) for i in range(n)], capture_long(model, input_ids=ids))
long.map(1, 1, size=256)
long.summaries(0)
row = long.rows(1, [n - 1]).weights
assert abs(float(row.sum()) - 2) < 1e-4, row.sum()
print((resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) * 1024)
"""


def test_a_text_whose_n_by_n_weights_would_not_fit_the_limit_is_read_within_it():
    """16,384 tokens: one n × n float32 matrix is 1 GiB (and n × n booleans 256 MiB). The read, a pooled
    map, the summaries and a row (in a process of their own, so its peak is theirs) stay within 200 MB
    beyond the model's own forward pass, the q, k and v kept (a few MB here) included."""
    import subprocess
    import sys

    n = 16384
    done = subprocess.run([sys.executable, "-c", MEMORY, str(n)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    beyond = int(done.stdout.split()[-1])
    limit = 200 * 2**20
    assert n * n * 4 > 3 * limit and beyond < limit, f"{beyond / 2**20:.0f} MB beyond the forward pass"


def test_a_long_widget_of_a_model_reads_it_with_its_own_kernel_and_shows_each_layer():
    from attnwidget import LongWidget

    class Words:  # a tokenizer of whole words, called as transformers' are (no Hub)
        def __call__(self, text, return_tensors):
            return {"input_ids": torch.tensor([[1 + hash(w) % 50 for w in text.split()]])}

        def convert_ids_to_tokens(self, ids):
            return [f"w{i}" for i in ids]

        def decode(self, ids):
            return " ".join(f"w{i}" for i in ids)

    model = tiny("llama", "sdpa")
    w = LongWidget.from_transformers(model, Words(), " ".join(["a", "b", "c"] * 10), head=1, focus=-1)
    assert len(w.tokens) == 30 and w.focus == 29 and w.head == 1 and list(w.layers) == ["0", "1"]
    ids = torch.tensor([[1 + hash(x) % 50 for x in ["a", "b", "c"] * 10]])
    with torch.no_grad():
        want = tiny("llama", "eager")(input_ids=ids, output_attentions=True).attentions
    np.testing.assert_allclose(w.row(), want[0][0, :, -1].numpy(), atol=1e-5)
    w.layer = 1
    np.testing.assert_allclose(w.tile((0, 30), (0, 30)), want[1][0, 1].numpy(), atol=1e-5)
