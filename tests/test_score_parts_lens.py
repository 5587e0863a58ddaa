"""score_parts against TransformerLens's own residual decomposition, on a tiny random GPT-2.

TransformerLens's TransformerBridge (booted on the model, its raw weights) splits the stream that feeds a
layer with ``get_full_resid_decomposition`` (each head's result, each MLP's output, the embeddings and the
summed output biases) and ``decompose_resid`` (each layer's attention and MLP outputs). Checked here:

- ``Stream.parts`` gives the same parts, number for number;
- the score table computed TransformerLens's way (the stack through ``apply_ln_to_stack``, the layer
  norm's weight and bias, the bridge's W_Q, b_Q, W_K, b_K, over √d_head) is ``Stream.cell``'s table, pair
  for pair, and both sum to the bridge's own ``hook_attn_scores``;
- ``ScoreParts.by_layer`` and ``Stream.row`` give the by-layer tables made from ``decompose_resid``.

The biases are randomised too (GPT-2 starts them at zero). In float64 the two agree to 1e-10 of the
magnitudes, in float32 to 1e-5. Nothing is downloaded; tests skip without torch, transformers or
transformer_lens.
"""

import warnings

import numpy as np
import pytest
from test_bridge import wordpiece
from test_integrations import tf  # (a fixture)

from attnwidget.integrations import score_parts

TEXT = "the cat sat on the mat and the dog sat on the log"
CELLS = [(7, 3), (5, 5), (14, 0), (12, 11)]  # (query, key), causal: query ≥ key
TOLERANCE = {"float64": 1e-10, "float32": 1e-5}  # relative to the largest magnitude compared


@pytest.fixture(scope="module", params=["float64", "float32"])
def lensed(request, tf, wordpiece):
    """(our Stream, the bridge, its cache, the tolerance) of one tiny random GPT-2 (3 layers, 4 heads,
    width 32), read by score_parts on a copy and run by TransformerLens's bridge."""
    import torch

    pytest.importorskip("transformer_lens")
    bridge_cls = pytest.importorskip("transformer_lens.model_bridge").TransformerBridge
    dtype = getattr(torch, request.param)
    end = len(wordpiece) - 1
    config = tf.GPT2Config(
        n_layer=3,
        n_head=4,
        n_embd=32,
        n_positions=64,
        vocab_size=len(wordpiece),
        bos_token_id=end,
        eos_token_id=end,
        attn_implementation="eager",
        initializer_range=0.25,
    )
    torch.manual_seed(0)
    model = tf.GPT2LMHeadModel(config).eval().to(dtype)
    with torch.no_grad():  # biases, and norms' weights and biases, away from their starting 0 and 1
        for name, p in model.named_parameters():
            if name.endswith("bias") or ".ln_" in name:
                p.add_(0.3 * torch.randn_like(p))
    ours = tf.GPT2LMHeadModel(config).eval().to(dtype)  # the bridge rewrites the model it wraps
    ours.load_state_dict(model.state_dict())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        bridge = bridge_cls.boot_transformers("gpt2", hf_model=model, tokenizer=wordpiece, device="cpu", dtype=dtype)
    ids = wordpiece(TEXT)["input_ids"]
    assert len(ids) == 15
    with torch.no_grad():
        _, cache = bridge.run_with_cache(torch.tensor([ids]))
    stream = score_parts.read(ours, ids, wordpiece.convert_ids_to_tokens(ids))
    return stream, bridge, cache, TOLERANCE[request.param]


def near(ours, theirs, tolerance, scale=None):
    theirs = np.asarray(theirs, dtype=np.float64)
    scale = np.abs(theirs).max() if scale is None else scale
    np.testing.assert_allclose(ours, theirs, rtol=0, atol=tolerance * scale)


def label(name: str) -> str:
    """TransformerLens's label of one of our parts (an output bias: its layer's b_O, which TransformerLens
    keeps in its summed "bias" row)."""
    if name == "embedding":
        return "embed"
    if name == "position embedding":
        return "pos_embed"
    _, layer, what, *head = name.split()
    return {"head": f"L{layer}H{head[0] if head else ''}", "MLP": f"{layer}_mlp_out", "output": f"b_O {layer}"}[what]


def lens_parts(bridge, cache, layer: int) -> tuple[dict, list]:
    """TransformerLens's parts of the stream feeding ``layer``, by label (1 × n × width each), its "bias" row
    split into each earlier layer's b_O; and get_full_resid_decomposition's labels."""
    stack, labels = cache.get_full_resid_decomposition(layer=layer, expand_neurons=False, return_labels=True)
    found = {lab: stack[i].detach() for i, lab in enumerate(labels)}
    for earlier in range(layer):
        found[f"b_O {earlier}"] = bridge.blocks[earlier].attn.b_O.detach().expand_as(found["embed"])
    return found, labels


def lens_table(bridge, cache, layer, head, stack, row, column) -> np.ndarray:
    """The score's (query part, key part) table TransformerLens's way: the stack (parts × 1 × n × width)
    through the layer's norm at its cached scale (apply_ln_to_stack), its weight, then W_Q and W_K of the
    head; the norm's bias and b_Q, b_K as one more part; over √d_head."""
    import torch

    normed = cache.apply_ln_to_stack(stack, layer)[:, 0]  # centred and over the cached scale
    ln, attn = bridge.blocks[layer].ln1, bridge.blocks[layer].attn
    w, b = ln.w.detach(), ln.b.detach()
    wq, wk, bq, bk = (t[head].detach() for t in (attn.W_Q, attn.W_K, attn.b_Q, attn.b_K))
    q = torch.cat([(normed[:, row] * w) @ wq, (b @ wq + bq)[None]])
    k = torch.cat([(normed[:, column] * w) @ wk, (b @ wk + bk)[None]])
    # the reference is the bridge's own: its parts' queries and keys sum to its hook_q and hook_k
    torch.testing.assert_close(q.sum(0), cache[f"blocks.{layer}.attn.hook_q"][0, row, head])
    torch.testing.assert_close(k.sum(0), cache[f"blocks.{layer}.attn.hook_k"][0, column, head])
    return (q @ k.T / bridge.cfg.d_head**0.5).double().numpy()


@pytest.mark.parametrize("layer", [1, 2])
def test_the_parts_are_transformer_lens_residual_decomposition(lensed, layer):
    stream, bridge, cache, tolerance = lensed
    positions = [0, 3, 7, 14]
    names, groups, parts = stream.parts(layer, positions)
    found, labels = lens_parts(bridge, cache, layer)
    assert parts.shape == (len(names), len(positions), 32) and parts.dtype == np.float64
    assert len(names) == 2 + layer * (4 + 2) and len(set(names)) == len(names)
    # every part of TransformerLens's but its summed biases is one of ours, and the other way round
    assert sorted(label(n) for n in names if "output bias" not in n) == sorted(x for x in labels if x != "bias")
    assert groups == ["embedding", "position", *(f"layer {lay}" for lay in range(layer) for _ in range(6))]
    resid = cache[f"blocks.{layer}.hook_resid_pre"][0, positions].double().numpy()
    for name, part in zip(names, parts):
        near(part, found[label(name)][0, positions], tolerance, np.abs(resid).max())
    # the output biases sum to TransformerLens's "bias" row; all the parts to the stream the layer reads
    biases = parts[["output bias" in n for n in names]].sum(0)
    near(biases, found["bias"][0, positions], tolerance, np.abs(resid).max())
    near(parts.sum(0), resid, tolerance)
    assert np.abs(parts[names.index("layer 0 head 1")] - parts[names.index("layer 0 head 2")]).max() > 0.1

    # decompose_resid's layer outputs: each layer's heads and output bias are its attention's output
    stack, outputs = cache.decompose_resid(layer=layer, return_labels=True)
    assert outputs == ["embed", "pos_embed", *(f"{lay}_{w}_out" for lay in range(layer) for w in ("attn", "mlp"))]
    for lay in range(layer):
        attention = parts[[n.startswith(f"layer {lay} ") and "MLP" not in n for n in names]].sum(0)
        near(attention, stack[outputs.index(f"{lay}_attn_out"), 0, positions], tolerance, np.abs(resid).max())
        near(parts[names.index(f"layer {lay} MLP")], stack[outputs.index(f"{lay}_mlp_out"), 0, positions], tolerance)


@pytest.mark.parametrize("layer", [1, 2])
def test_the_score_table_is_transformer_lens_own(lensed, layer):
    import torch

    stream, bridge, cache, tolerance = lensed
    found, _ = lens_parts(bridge, cache, layer)
    scores = cache[f"blocks.{layer}.attn.hook_attn_scores"][0].double().numpy()
    for head in range(4):
        for row, column in CELLS:
            cell = stream.cell(layer, head, row, column)
            assert (cell.query[0], cell.key[0]) == tuple(
                f"the embedding of {stream.tokens[i]!r}" for i in (row, column)
            )
            assert cell.query[1:] == cell.key[1:] and cell.query[-1] == f"biases (layer {layer}'s norm and projections)"
            names = ["embedding", *cell.key[1:-1]]
            stack = torch.stack([found[label(n)] for n in names])
            want = lens_table(bridge, cache, layer, head, stack, row, column)
            assert cell.table.shape == want.shape == (len(names) + 1, len(names) + 1)
            near(cell.table, want, tolerance)
            near(cell.score, scores[head, row, column], tolerance, np.abs(want).max())
            near(cell.table.sum(), scores[head, row, column], tolerance, np.abs(want).max())
            near(want.sum(), scores[head, row, column], tolerance, np.abs(want).max())
            assert (np.abs(want) > 0.01 * np.abs(want).max()).mean() > 0.5  # most pairs count: a real check


@pytest.mark.parametrize("layer", [1, 2])
def test_by_layer_and_a_row_are_transformer_lens_decompose_resid(lensed, layer):
    import torch

    stream, bridge, cache, tolerance = lensed
    stack, outputs = cache.decompose_resid(layer=layer, return_labels=True)
    part = {o: s.detach() for o, s in zip(outputs, stack)}  # embed, pos_embed, each layer's attn_out and mlp_out
    layers = (part[f"{lay}_attn_out"] + part[f"{lay}_mlp_out"] for lay in range(layer))
    by_layer = torch.stack([part["embed"], part["pos_embed"], *layers])
    scores = cache[f"blocks.{layer}.attn.hook_attn_scores"][0].double().numpy()
    head, row, keys = 3, 12, [0, 4, 11, 12]
    for column in keys:
        want = lens_table(bridge, cache, layer, head, by_layer, row, column)
        near(stream.cell(layer, head, row, column).by_layer().table, want, tolerance)
    got = stream.row(layer, head, row, keys)
    assert got.terms.shape == (layer + 3, layer + 3, len(keys)) and got.keys == keys
    for j, column in enumerate(keys):
        want = lens_table(bridge, cache, layer, head, by_layer, row, column)
        near(got.terms[:, :, j], want, tolerance)
    near(got.terms.sum((0, 1)), scores[head, row, keys], tolerance, np.abs(got.terms).max())
    near(got.score, scores[head, row, keys].sum(), tolerance, np.abs(got.terms).max())
