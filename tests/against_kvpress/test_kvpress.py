"""kvcache.kept against kvpress 0.5.5's own presses: the same model and prompt, the same keys kept in
every layer and key-value head. Run by `make test-kvpress` in .venv-kvpress (kvpress needs
transformers < 5.3); skipped where kvpress is not installed.

kvpress compresses each layer's cache right after that layer's attention has run on the whole
prompt, so its choice rests on the uncompressed q and k, which attnwidget reads from the same model
(LongAttention.from_transformers). What kvpress keeps is read from the pruned cache itself: each key
left in it is found among the layer's keys before pruning.
"""

from __future__ import annotations

import numpy as np
import pytest

kvpress = pytest.importorskip("kvpress")
torch = pytest.importorskip("torch")
tf = pytest.importorskip("transformers")

from kvpress.utils import compute_n_kept  # noqa: E402
from test_integrations import byte_level_tokenizer  # noqa: E402

from attnwidget import kvcache  # noqa: E402
from attnwidget.long import LongAttention  # noqa: E402

TEXT = "I sat on the riverbank and watched the water run past the stones. " * 8  # 336 tokens
RATIOS = (0.25, 0.5, 0.75)  # 252, 168 and 84 keys kept of 336: each at least SnapKV's window of 64
# Grouped heads (4 query heads on 2 key-value heads) and rotary positions; initializer_range 0.2 makes
# the heads far from uniform, so a kept set is decided by clear margins, not by float rounding.
CONFIG = dict(
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=16,
    max_position_embeddings=512,
    initializer_range=0.2,
)
FAMILIES = {"llama": ("LlamaForCausalLM", "LlamaConfig"), "qwen3": ("Qwen3ForCausalLM", "Qwen3Config")}

# (kvpress's press, attnwidget's method and options) that keep the same keys
PAIRS = {
    "streaming": (lambda r: kvpress.StreamingLLMPress(r), "streaming", {}),
    "snapkv": (lambda r: kvpress.SnapKVPress(r), "snapkv", dict(window=64, kernel=5)),
    "snapkv-16-7": (
        lambda r: kvpress.SnapKVPress(r, window_size=16, kernel_size=7),
        "snapkv",
        dict(window=16, kernel=7),
    ),
    # kvpress's ObservedAttentionPress: H2O's column sums, each divided by the rows that read it, no recent window
    "observed": (lambda r: kvpress.ObservedAttentionPress(r), "h2o", dict(window=0, normalise=True)),
}


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    return byte_level_tokenizer(tmp_path_factory.mktemp("tokenizer"))


@pytest.fixture(scope="module", params=sorted(FAMILIES))
def read(request, tokenizer):
    """(model, input ids, attnwidget's reading of it): eager attention, as ObservedAttentionPress needs."""
    cls, config_cls = FAMILIES[request.param]
    torch.manual_seed(0)
    config = getattr(tf, config_cls)(vocab_size=len(tokenizer), attn_implementation="eager", **CONFIG)
    model = getattr(tf, cls)(config).eval()
    ids = tokenizer(TEXT, return_tensors="pt")["input_ids"]
    return model, ids, LongAttention.from_transformers(model, tokenizer, TEXT)


def kvpress_kept(model, ids, press) -> dict[int, np.ndarray]:
    """{layer: kv_heads × n booleans}: the keys left in each layer's cache after kvpress's prefill."""
    before = {}
    compress = press.compress

    def seen(module, hidden_states, keys, values, attentions, kwargs):
        before[module.layer_idx] = keys[0].clone()
        return compress(module, hidden_states, keys, values, attentions, kwargs)

    press.compress = seen
    cache = tf.DynamicCache()
    with torch.no_grad(), press(model):
        model.model(input_ids=ids, past_key_values=cache)
    kept = {}
    for layer, keys in before.items():
        left = cache.layers[layer].keys[0]  # kv_heads × n_kept × d, in topk's order
        match = (left[:, :, None, :] == keys[:, None, :, :]).all(-1)  # kv_heads × n_kept × n
        assert (match.sum(-1) == 1).all(), "every key left in the cache is one of the layer's keys"
        kept[layer] = match.any(1).numpy()
    return kept


def attnwidget_kept(long, method, budget, options) -> dict[int, np.ndarray]:
    layers = long._layers
    return {x: kvcache.kept(method, budget, layers[x].q, layers[x].k, scale=layers[x].scale, **options) for x in layers}


def assert_same(ours, theirs, budget):
    assert sorted(ours) == sorted(theirs)
    for layer in ours:
        assert theirs[layer].sum(-1).tolist() == [budget] * theirs[layer].shape[0]
        for head, (a, b) in enumerate(zip(ours[layer], theirs[layer])):
            assert np.array_equal(a, b), (
                f"layer {layer}, kv head {head}: attnwidget alone keeps {np.flatnonzero(a & ~b).tolist()}, "
                f"kvpress alone {np.flatnonzero(b & ~a).tolist()}"
            )


@pytest.mark.parametrize("ratio", RATIOS)
@pytest.mark.parametrize("pair", sorted(PAIRS))
def test_kept_sets_equal_kvpress(read, pair, ratio):
    model, ids, long = read
    make, method, options = PAIRS[pair]
    budget = compute_n_kept(len(long), ratio)  # kvpress's own count: int(n · (1 − ratio))
    theirs = kvpress_kept(model, ids, make(ratio))
    assert_same(attnwidget_kept(long, method, budget, options), theirs, budget)


@pytest.mark.parametrize("ratio", RATIOS)
def test_snapkv_recomputing_its_window_equals_kvpress(read, tokenizer, ratio):
    """Under SDPA kvpress has no weights to read and computes the window's queries again from the
    hidden states; attnwidget reads the model under SDPA too, through kvpress's wrapper of the kernel
    (set in transformers' table at import): the same keys are kept."""
    model, ids, _ = read
    model.set_attn_implementation("sdpa")
    try:
        long = LongAttention.from_transformers(model, tokenizer, TEXT)
        budget = compute_n_kept(len(long), ratio)
        theirs = kvpress_kept(model, ids, kvpress.SnapKVPress(ratio))
    finally:
        model.set_attn_implementation("eager")
    assert_same(attnwidget_kept(long, "snapkv", budget, dict(window=64)), theirs, budget)


def test_the_methods_keep_different_keys(read):
    """The comparison has something to tell apart: at one budget the four choose differently."""
    model, ids, long = read
    budget = compute_n_kept(len(long), 0.5)
    sets = [attnwidget_kept(long, m, budget, o)[0] for _, m, o in PAIRS.values()]
    assert len({s.tobytes() for s in sets}) == len(sets)
