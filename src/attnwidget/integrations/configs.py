"""What a Hugging Face model's config says about its attention: where position enters it (its scheme, in
the page's words), how many tokens and which token ids it reads, and whether it reads images.

A model of text and images (or audio) such as LLaVA says its vocabulary and positions in its language
model's config (``config.get_text_config()``), read here in its place.
"""

from __future__ import annotations

import math

SINUSOIDAL = ("marian", "fsmt", "m2m_100", "pegasus", "speech_to_text", "xglm")  # fixed sine tables, not learned
# each scheme in the page's words (position_of, and tlens._position for a HookedTransformer's)
ALIBI = ("alibi", "ALiBi: −m·distance added to the scores")
LEARNED = ("learned", "learned positions, added to the tokens")
LEARNED_PATCHES = ("learned", "learned positions, added to the patches")  # ViT, DeiT, DINOv2


def rope(bases, part: float) -> tuple[str, str]:
    """RoPE at these bases, rotating ``part`` of each head's width."""
    said = " and ".join(f"{b:,.0f}" for b in bases)
    return "rope", f"RoPE, base {said}" + ("" if part == 1 else f", {part:.0%} of each head rotated")


def position_of(config) -> tuple[str, str]:
    """Where position enters a model's attention, from its own config: ("rope", "RoPE, base 10,000,
    25% of each head rotated"), ("alibi", ...), ("relative", ...), ("learned", ...), ("sinusoidal",
    ...), or ("", "") where the config does not say."""
    config = _text_config(config)
    kind = getattr(config, "model_type", "")
    if kind == "bloom" or getattr(config, "alibi", False) or getattr(getattr(config, "attn_config", None), "alibi", 0):
        return ALIBI
    given = getattr(config, "rope_parameters", None) or {}
    kinds = (
        [given] if "rope_theta" in given else [p for p in given.values() if isinstance(p, dict)]
    )  # (per attention kind)
    bases = sorted({float(p["rope_theta"]) for p in kinds if "rope_theta" in p})
    if bases or kind == "gptj":
        # (a heterogeneous config's per-layer head_dim is asked only where no factor says the part)
        head = lambda: getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
        part = kinds[0].get("partial_rotary_factor", 1.0) if kinds else getattr(config, "rotary_dim", head()) / head()
        return rope(bases or [10000.0], part)
    relative = getattr(config, "relative_attention", False)  # (DeBERTa)
    relative = relative or getattr(config, "use_relative_position_bias", False)  # (BEiT)
    relative = relative or getattr(config, "use_shared_relative_position_bias", False)
    if (
        relative
        or _relative(config)
        or getattr(config, "position_embedding_type", "") in ("relative_key", "relative_key_query")
    ):
        return "relative", "relative positions, added to the scores"
    if kind in SINUSOIDAL:
        return "sinusoidal", "sinusoidal positions, added to the tokens"
    if getattr(config, "max_position_embeddings", None) or getattr(config, "n_positions", None):
        return LEARNED
    if is_vision(config) and getattr(config, "use_absolute_position_embeddings", True):  # (BEiT's may be off)
        return LEARNED_PATCHES
    return "", ""


def is_vision(config) -> bool:
    """A vision transformer's config: it cuts images into patches, and says how many channels they have
    or has no vocabulary (BEiT has both: a vocabulary of visual tokens for its pre-training). A model of
    text and images whose config holds its language model's (Fuyu, MiniCPM-V) reads its text."""
    if _text_config(config) is not config:
        return False
    patches = hasattr(config, "image_size") and hasattr(config, "patch_size")
    return patches and (hasattr(config, "num_channels") or not hasattr(config, "vocab_size"))


def _relative(config) -> bool:
    """T5 and its kin: relative positions (buckets of distance), no table of positions to run past."""
    return hasattr(config, "relative_attention_num_buckets")


def _text_config(config):
    """A model of text and images (or audio), such as LLaVA: its language model's config, which says
    its vocabulary and positions; any other model's own."""
    text = getattr(config, "get_text_config", None)
    return text() if callable(text) else config


def _vocabulary(config) -> tuple[float, str]:
    """The model's vocabulary and the config attribute that says so (CANINE reads characters: none)."""
    text = _text_config(config)
    size = getattr(text, "vocab_size", None)
    if size is None:
        return math.inf, "no vocabulary in its config"
    return size, "config.vocab_size" if text is config else "config.get_text_config().vocab_size"


def _positions(config, kind):
    """How many tokens the model reads, and the config attribute that says so."""
    text = _text_config(config)
    said = "config." if text is config else "config.get_text_config()."
    config = text
    if kind == "bloom":  # ALiBi has no table of positions to run past
        return float("inf"), "ALiBi"
    if kind == "mpt":  # (its ALiBi is made for max_seq_len positions)
        return config.max_seq_len, f"{said}max_seq_len"
    if _relative(config):
        return float("inf"), "relative positions"
    if kind in ("roberta", "xlm-roberta", "camembert"):  # positions are numbered from pad_token_id + 1
        return (
            config.max_position_embeddings - config.pad_token_id - 1,
            "config.max_position_embeddings - config.pad_token_id - 1",
        )
    for attribute in ("n_positions", "max_position_embeddings"):
        limit = getattr(config, attribute, None)
        if isinstance(limit, int) and limit > 0:  # (XLNet's -1: no limit)
            return limit, f"{said}{attribute}"
    return float("inf"), "no position limit"
