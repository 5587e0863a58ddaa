"""Tiny models of every family transformers lists whose models have attention (tests/test_families.py
sorts them): which families, and each one's default config at tiny sizes.

Which families: every model type of transformers' ``CONFIG_MAPPING_NAMES`` with a base model class
(``MODEL_MAPPING_NAMES``; a sub-model's config of its own, such as ``clip_text_model``, is read in its
family) whose default config, or one of its sub-configs, has ``num_attention_heads`` (directly, or
through the config's attribute map: ``n_head``, ``num_heads``, ``encoder_attention_heads``, ...).

The tiny sizes: 2 layers, width 32, 4 heads of 8, 2 key-value heads where the family has them, the test
tokenizer's vocabulary, given under every name a family may use where its config has that name and
takes a number there (its sub-configs' too); a family whose layers are of several kinds gets one of each
(a hybrid: another kind, then attention); ``OVERRIDES`` for families that name or check their sizes
their own way (and test_interface.py's FAMILIES, with their sliding windows and soft caps).
"""

from __future__ import annotations

from test_interface import BASE, FAMILIES
from transformers.models.auto.configuration_auto import CONFIG_MAPPING, CONFIG_MAPPING_NAMES
from transformers.models.auto.modeling_auto import MODEL_MAPPING_NAMES

# the tiny sizes, under each name a family may use (only the names its config has are given)
TINY = dict(
    BASE,
    num_key_value_heads=2,
    head_dim=8,
    n_positions=64,
    max_seq_len=64,
    max_sequence_length=64,
    embedding_size=32,
    d_model=32,
    d_ff=64,
    d_kv=8,
    n_inner=64,
    ffn_dim=64,
    num_layers=2,
    num_heads=4,
    encoder_layers=2,
    decoder_layers=2,
    encoder_attention_heads=4,
    decoder_attention_heads=4,
    encoder_ffn_dim=64,
    decoder_ffn_dim=64,
    num_experts=4,
    num_local_experts=4,
    n_routed_experts=4,
    n_shared_experts=1,
    num_experts_per_tok=2,
    moe_intermediate_size=32,
    kv_lora_rank=16,
    q_lora_rank=16,
    qk_rope_head_dim=4,
    qk_nope_head_dim=4,
    v_head_dim=8,
    rotary_dim=4,
    image_size=32,
    patch_size=8,
    initializer_range=0.2,  # (ten times the usual: rows far from uniform, so that 1e-5 tells weights apart)
    init_std=0.2,
)
SPECIAL = ("pad_token_id", "bos_token_id", "eos_token_id", "decoder_start_token_id")
LEAVE = object()  # an override that leaves a size out (the family's config refuses it)
MAMBA = dict(mamba_n_heads=4, mamba_d_head=16, mamba_d_state=8, mamba_chunk_size=8)
# family -> what it needs besides (its own names for sizes, sizes its config checks against each other, a
# hybrid's attention layer placed second among the two)
OVERRIDES: dict[str, dict] = {
    **FAMILIES,
    "bamba": dict(MAMBA, attn_layer_indices=[1]),
    "dbrx": dict(attn_config={"kv_n_heads": 2, "rope_theta": 10000.0, "clip_qkv": 8.0}),
    "esm": dict(pad_token_id=1, mask_token_id=2),
    "funnel": dict(
        architectures=["FunnelModel"],
        num_hidden_layers=LEAVE,
        block_sizes=[1, 1],
        block_repeats=[1, 1],
        num_decoder_layers=1,
        n_head=4,
        d_head=8,
        d_inner=64,
    ),
    "gemma3n_text": dict(num_kv_shared_layers=0),
    "gpt_neo": dict(attention_types=[[["global", "local"], 1]], window_size=4),
    "granitemoehybrid": dict(MAMBA, layer_types=["linear_attention", "full_attention"]),
    "jamba": dict(attn_layer_period=2, attn_layer_offset=1, expert_layer_period=2, expert_layer_offset=1),
    "lfm2": dict(layer_types=["conv", "full_attention"]),
    "lfm2_moe": dict(layer_types=["conv", "full_attention"], num_dense_layers=1),
    "prophetnet": dict(
        num_hidden_layers=LEAVE,
        num_encoder_layers=2,
        num_decoder_layers=2,
        num_encoder_attention_heads=4,
        num_decoder_attention_heads=4,
    ),
    "recurrent_gemma": dict(block_types=["recurrent", "attention"], attention_window_size=4),
    "reformer": dict(
        attn_layers=["local", "local"],
        attention_head_size=8,
        axial_pos_shape=[8, 8],
        axial_pos_embds_dim=[16, 16],
        local_attn_chunk_length=8,
        feed_forward_size=64,
    ),
    "xlnet": dict(max_position_embeddings=LEAVE, n_layer=2, d_head=8, d_inner=64),
    "xmod": dict(default_language="en_XX"),
    "yolos": dict(image_size=[32, 32]),
}


def families() -> list[str]:
    """The model types kept (the rule in the module's docstring), in transformers' order."""
    return [kind for kind in CONFIG_MAPPING_NAMES if kind in MODEL_MAPPING_NAMES and _has_heads(_default(kind))]


def _default(kind):
    try:
        return CONFIG_MAPPING[kind]()
    except Exception:
        return None


def _has(config, name) -> bool:
    own = getattr(type(config), getattr(config, "attribute_map", {}).get(name, name), None)
    if isinstance(own, property) and own.fset is None:  # (worked out from others: not given)
        return False
    try:
        return hasattr(config, name)
    except Exception:  # (a per-layer attribute asked of the whole model: it has it)
        return True


def _has_heads(config) -> bool:
    if config is None:
        return False
    try:
        if getattr(config, "num_attention_heads", None) is not None:
            return True
    except Exception:  # (a per-layer attribute asked of the whole model: it has it)
        return True
    return any(_has_heads(_sub(config, name)) for name in getattr(config, "sub_configs", {}) or {})


def _sub(config, name):
    sub = getattr(config, name, None)
    return sub if hasattr(sub, "to_dict") and not isinstance(sub, type) else None


def tiny_config(kind: str, vocab: int):
    """The family's default config at the tiny sizes, its sub-configs too."""
    cls = CONFIG_MAPPING[kind]
    default = cls()
    given = _tiny(default, vocab)
    if getattr(default, "is_encoder_decoder", False) and getattr(default, "decoder_start_token_id", None) is None:
        bos = getattr(default, "bos_token_id", None)  # (as a checkpoint's config says: its BOS token, or 0)
        given["decoder_start_token_id"] = bos if isinstance(bos, int) and bos < vocab else 0
    return cls(**{k: v for k, v in {**given, **OVERRIDES.get(kind, {})}.items() if v is not LEAVE})


def _tiny(config, vocab: int) -> dict:
    """What a config is given: the tiny sizes it has (where it takes a number there), its sub-configs'
    in full (their own values, less per-layer lists), each at the tiny sizes in turn."""
    sizes = {**TINY, "vocab_size": vocab, "vocab_size_per_layer_input": vocab, "hidden_size_per_layer_input": 8}
    given = {k: v for k, v in sizes.items() if _has(config, k) and not isinstance(_get(config, k), (list, tuple))}
    given.update(_two_kinds(config))
    if "qk_rope_head_dim" in given:  # multi-head latent attention: a key per head; head_dim is rotary's width
        given.update(num_key_value_heads=4, **({"head_dim": 4} if "head_dim" in given else {}))
    rope = _get(config, "rope_parameters")  # multimodal RoPE (Qwen2-VL): three sections of head_dim / 2
    mrope = "mrope_section" in getattr(config, "ignore_keys_at_rope_validation", ())  # (its default otherwise)
    if isinstance(rope, dict) and ("mrope_section" in rope or mrope):
        given["rope_parameters"] = {**rope, "mrope_section": [1, 1, 2]}
    for name in SPECIAL:  # (an embedding's padding row, and the decoder's first token, inside the vocabulary)
        if isinstance(_get(config, name), int) and _get(config, name) >= vocab:
            given[name] = 0
    for name in getattr(type(config), "sub_configs", {}) or {}:
        sub = _sub(config, name)
        if sub is not None:
            layers = _get(sub, "num_hidden_layers")
            own = {k: v for k, v in sub.to_dict().items() if not (isinstance(v, list) and len(v) == layers)}
            given[name] = {**own, **_tiny(sub, vocab)}
    return given


def _get(config, name):
    try:
        return getattr(config, name, None)
    except Exception:  # (a per-layer attribute asked of the whole model)
        return None


def _two_kinds(default) -> dict:
    """A family whose layers are of several kinds (sliding and full attention; a hybrid's attention and
    others): two layers of its first two kinds, a layer of another kind before an attention layer."""
    out = {}
    for name in ("layer_types", "layers_block_type"):
        if not _has(default, name):
            continue
        kinds = list(dict.fromkeys(k for k in getattr(default, name, None) or () if isinstance(k, str)))
        if len(kinds) > 1:
            softmax = [k for k in kinds if "attention" in k and "linear" not in k]
            other = [k for k in kinds if k not in softmax]
            out[name] = other[:1] + softmax[:1] if other and softmax else kinds[:2]
    return out
