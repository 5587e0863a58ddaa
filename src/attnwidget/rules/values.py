"""The rules' names, limits and messages, and the checks of one value: whether a trait can hold
it, and how a value is said in a message (the twin of the first half of js/rules.js)."""

from __future__ import annotations

import math
import numbers

# The fields, their kinds and their choices are the state's declaration (state.py).
from ..state import (
    BLOCKS,
    EXERCISES,
    FLAGS,
    INDICES,
    KV_METHODS,
    MEASURES,
    MODEL_POSITIONS,
    POSITIONS,
    READ_ONLY,
    RULED,
    STAGES,
    SUMMARIES,
    WRITABLE,
)
from ..state import FIELDS as DECLARED

FIELDS = RULED  # the state as the rules see it: what a page or a user may set, and what follows from it
TEMPERATURE_RANGE = (0.1, 5.0)
POSITION_TRAITS = ("position", "rope_base", "alibi_slopes")  # the lab's own: a model's q and k carry its position
SCALE_LIMIT = 1e10
ENTRY_LIMIT = 1e300  # the largest size of an array's entry, or a sink's logit: sums of such numbers stay finite
GUESS_TOLERANCE = 1e-6
# What an exercise's row depends on: a change to any of them starts a new try.
ROW_TRAITS = (
    "focus",
    "sentence_index",
    "temperature",
    "tokens",
    "key_tokens",
    "q",
    "k",
    "v",
    "head",
    "layer",
    "block",
    "causal",
    "mask",
    "bias",
    "sink",
    "scale",
    "softcap",
    "sinks",
    "position",
    "rope_base",
    "alibi_slopes",
    "step",
    "exercise",
)
ARRAYS = tuple(f.name for f in DECLARED if f.kind in ("array", "mask", "masks"))
# A layer's own arrays, each a slice (of that layer's heads) of the model's stack of every layer
LAYERED = {"q": "model_q", "k": "model_k", "v": "model_v", "value_basis": "model_basis"}
# A model's (or block's) every layer, as the widget holds it: what a block switch brings in.
STACK = (
    "model_q",
    "model_k",
    "model_v",
    "model_basis",
    "model_masks",
    "mask_of_layer",
    "model_bias",
    "model_terms",
    "model_sinks",
    "n_layers",
)
# What a widget of attention weights alone (from_attentions) cannot show, and why: stage -> message
_NO_QK = (
    "This widget has attention weights alone (from_attentions): no queries or keys, so no {what}. "
    "Read the model with from_transformers, or pass q=, k=, v=, to see them."
)
_NO_VALUES = (
    "This widget has attention weights alone (from_attentions): the blend needs values; pass values= (one vector per "
    "key) to from_attentions."
)
WEIGHTS_ONLY = {
    "weights": {
        "qk": _NO_QK.format(what="'qk' stage"),
        "scores": _NO_QK.format(what="'scores' stage"),
        "blend": _NO_VALUES,
    },
    "weights and values": {"qk": _NO_QK.format(what="'qk' stage"), "scores": _NO_QK.format(what="'scores' stage")},
}
WEIGHTS_BIAS = (
    "A widget of attention weights alone (from_attentions) carries the weights' logarithms as its bias, each layer its "
    "own: it cannot take another; pass other weights to from_attentions instead."
)
NO_EFFECT = (
    "summary='effect' colours the heads by their effect on the next token (head_effects()), which needs a causal "
    "language model's widget: from_transformers, from_nnsight or from_transformer_lens of a model with a "
    "language-model head (AutoModelForCausalLM, HookedTransformer)."
)
NO_INDUCTION = (
    "summary='induction' or 'retrieval' colours the heads by a score read by running the model again (on repeated "
    "random tokens; on a needle in a long text): it needs a widget made from a model (from_transformers, …)."
)
NO_SINKS = (
    "summary='sink_share' colours the heads by the share of each row their learnt attention sinks take: this widget "
    "has none. Read a model with learnt sinks (gpt-oss and its kin) with from_transformers, or give your own arrays "
    "sinks= (one logit per head)."
)
MODEL_SINKS = (
    "'sinks' on a model's layer are the model's own learnt sinks, and this model has none: its weights are what it "
    "computes without them. To try sinks, give the widget your own q, k and v first (w.set_vectors(q=..., k=..., "
    "v=...)), then set w.sinks."
)
NO_QK_MAP = _NO_QK.format(what="query–key map (qk_map, query_key_map()): every point would be at (0, 0)")
NO_DIFFERENCE = (
    "'difference_map' shows a differential attention model's pair of maps, map 1 − λ·map 2: it needs a widget of "
    "such a model's layer (from_transformers of a DiffLlama model, whose model_lambda holds each layer's λ)."
)
DIFFERENCE_EXERCISE = (
    "An exercise is about one head's softmax, whose rows sum to 1, and the difference map's rows sum to 1 − λ: set "
    "difference_map=False or exercise='' first."
)
SINK_EXERCISE = (
    "The predict exercise asks for a row that sums to 1, and this head's learnt sink takes part of every row: choose "
    "a head without a sink (its logit −1e30), or set exercise='' first."
)
GENERATION_IS_CAUSAL = (
    "A text written one token at a time is causal: causal=False needs every token written (step = the number of "
    "tokens)."
)
READS_BOTH_WAYS = (
    "This model reads both ways (each token reads the tokens after it too), so its numbers for a text's first tokens "
    "are not what it computes on those tokens alone: 'step' below the number of tokens is for a causal model (a "
    "decoder, a causal language model). To see a prefix, give the model its text alone: "
    "AttentionWidget.from_transformers(model, tokenizer, prefix) (or the constructor you used)."
)
TWO_TEXTS = (
    "difference needs two texts: make the widget with several, such as "
    "AttentionWidget.from_transformers(model, tokenizer, [text_a, text_b]); this widget has one."
)
# The names both sides need, sent to the page from here (AttentionWidget._constants, the payload).
CONSTANTS = {
    "stages": list(STAGES),
    "blocks": list(BLOCKS),
    "exercises": list(EXERCISES),
    "summaries": list(SUMMARIES),
    "measures": list(MEASURES),
    "kv_methods": list(KV_METHODS),
    "positions": list(POSITIONS),
    "model_positions": list(MODEL_POSITIONS),
    "temperature_range": list(TEMPERATURE_RANGE),
    "row_traits": list(ROW_TRAITS),
    "writable": list(WRITABLE),
    "read_only": list(READ_ONLY),
    "indices": list(INDICES),
    "flags": list(FLAGS),
    "stack": list(STACK),
    "layered": LAYERED,
    "weights_only": WEIGHTS_ONLY,
    "weights_bias": WEIGHTS_BIAS,
    "no_effect": NO_EFFECT,
    "no_induction": NO_INDUCTION,
    "no_sinks": NO_SINKS,
    "model_sinks": MODEL_SINKS,
    "no_qk_map": NO_QK_MAP,
    "no_difference": NO_DIFFERENCE,
    "difference_exercise": DIFFERENCE_EXERCISE,
    "sink_exercise": SINK_EXERCISE,
    "scale_limit": SCALE_LIMIT,
    "guess_tolerance": GUESS_TOLERANCE,
    "entry_limit": ENTRY_LIMIT,
    "generation_is_causal": GENERATION_IS_CAUSAL,
    "reads_both_ways": READS_BOTH_WAYS,
    "two_texts": TWO_TEXTS,
}


# the fields that hold one of a list of names, or "" for none
CHOICES = (("exercise", EXERCISES[1:]), ("summary", SUMMARIES), ("measure", MEASURES), ("kv_method", KV_METHODS))


class Refused(ValueError):
    """A change the rules refuse; its message says what was wrong and how to fix it."""


# --- how values are said in messages: the same text in Python and in the page ---


def num(x) -> str:
    """A float as Python's repr writes it (JS's num() writes the same)."""
    return repr(float(x))


def show(value) -> str:
    """A value as a message shows it."""
    if value is None or isinstance(value, bool):
        return str(value)
    if isinstance(value, numbers.Integral):
        return str(int(value))
    if isinstance(value, numbers.Real):
        return num(value)
    if isinstance(value, str):
        return repr(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(show(v) for v in value) + "]"
    return kind(value)


def kind(value) -> str:
    """What sort of value it is, in the words of a message."""
    if value is None:
        return "None"
    for t, name in (
        (bool, "bool"),
        (numbers.Integral, "int"),
        (numbers.Real, "float"),
        (str, "str"),
        ((list, tuple), "list"),
        (dict, "dict"),
    ):
        if isinstance(value, t):
            return name
    return type(value).__name__


def _one_of(values) -> str:
    return ", ".join(repr(v) for v in values)


# --- one value at a time: its kind and its own range ---


def _is_int(value) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _is_number(value) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _index(name, value):
    if not _is_int(value):
        raise Refused(f"'{name}' must be an integer{'' if name == 'step' else ' index'}, got {show(value)}.")
    return int(value)


def _flag(name, value):
    if _is_int(value) and value in (0, 1):
        return bool(value)  # as traitlets' Bool takes them
    if not isinstance(value, bool):
        raise Refused(f"'{name}' must be True or False, got {show(value)}.")
    return value


def _number(name, value, what):
    if not _is_number(value):
        raise Refused(f"'{name}' must be {what}, got {kind(value)} {show(value)}.")
    try:
        return float(value)
    except OverflowError:  # an int beyond float's range: as a page's JSON reads it, infinite
        return math.inf if value > 0 else -math.inf  # (copysign would convert it to float too)


def _text_list(name, value, allow_none=False):
    if value is None and allow_none:
        return None
    if not isinstance(value, (list, tuple)):
        raise Refused(f"'{name}' must be a list with one string per token, got {kind(value)}.")
    bad = [t for t in value if not isinstance(t, str)][:1]
    if bad:
        bad = bad[0]
        raise Refused(
            f"'{name}' must be strings, one per token; got {kind(bad)} {show(bad)}. Convert them with [str(t) for t "
            f"in {name}]."
        )
    return list(value)


def check(name, value):
    """``value`` as the state holds it, or Refused: its kind and its own range, before the rest of the state
    is looked at."""
    if name == "kv_budget":
        if not _is_int(value) or value < 1:
            raise Refused(f"'kv_budget' must be a whole number ≥ 1 (the keys each head keeps), got {show(value)}.")
        return int(value)
    if name in INDICES:
        return _index(name, value)
    if name in FLAGS:
        return _flag(name, value)
    if name == "temperature":
        t = _number(name, value, "a finite number > 0")
        if not (math.isfinite(t) and t > 0):
            lo, hi = TEMPERATURE_RANGE
            raise Refused(
                f"'temperature' must be a finite number > 0 (the slider spans {num(lo)} to {num(hi)}), got {num(t)}."
            )
        return t
    if name == "scale":
        if value is None:
            return None
        s = _number(name, value, "a number, or None for 1/√d")
        if not (math.isfinite(s) and abs(s) <= SCALE_LIMIT):
            raise Refused(
                f"'scale' must be a finite number no larger than {SCALE_LIMIT:.0e} in size, or None for 1/√d; got "
                f"{num(s)}."
            )
        return s
    if name == "softcap":
        if value is None:
            return None
        c = _number(name, value, "a number > 0, or None for no cap")
        if not (math.isfinite(c) and 0 < c <= SCALE_LIMIT):
            raise Refused(
                f"'softcap' must be a finite number > 0 and no larger than {SCALE_LIMIT:.0e} (scores become "
                f"softcap·tanh(s/softcap)), or None for no cap; got {num(c)}."
            )
        return c
    if name == "position":
        if not isinstance(value, str) or value not in POSITIONS + MODEL_POSITIONS:
            raise Refused(f"'position' must be one of {_one_of(POSITIONS)}; got {show(value)}.")
        return value
    if name == "rope_base":
        b = _number(name, value, "a number > 1")
        if not (math.isfinite(b) and 1 < b <= SCALE_LIMIT):
            raise Refused(
                f"'rope_base' must be a finite number > 1 and no larger than {SCALE_LIMIT:.0e} (pair i of a vector "
                f"turns by position × base^(−2i/width)); got {num(b)}."
            )
        return b
    if name == "alibi_slopes":
        if value is None:
            return None
        if getattr(value, "ndim", None) == 1:  # a numpy array of slopes
            value = value.tolist()
        if not isinstance(value, (list, tuple)) or not all(_is_number(m) for m in value):
            raise Refused(
                f"'alibi_slopes' must be a list of numbers, one slope m per head (−m·|i − j| is added to the "
                f"scores), or None for 2^(−8h/H); got {show(value)}."
            )
        slopes = [float(m) for m in value]
        if not all(math.isfinite(m) and 0 <= m <= SCALE_LIMIT for m in slopes):
            raise Refused(
                f"'alibi_slopes' must be finite slopes ≥ 0 and no larger than {SCALE_LIMIT:.0e}; got "
                f"[{', '.join(num(m) for m in slopes)}]."
            )
        return tuple(slopes)  # (held whole: a list changed in place would leave the numbers computed from it)
    if name == "sinks":
        if value is None:
            return None
        if getattr(value, "ndim", None) == 1:  # a numpy array of logits
            value = value.tolist()
        if not isinstance(value, (list, tuple)) or not all(_is_number(z) for z in value):
            raise Refused(
                "'sinks' must be a list of numbers, one learnt sink logit per head (one more column of each row's "
                f"softmax, which no token gets), or None for none; got {show(value)}."
            )
        logits = [_number(name, z, "a number") for z in value]
        if not all(math.isfinite(z) and abs(z) <= ENTRY_LIMIT for z in logits):
            said = ", ".join(num(z) for z in logits)
            raise Refused(f"'sinks' must be finite logits, each at most 1e+300 in size; got [{said}].")
        return tuple(logits)  # (held whole, as alibi_slopes)
    if name == "goal":
        g = _number(name, value, "a number of effective tokens")
        if not (math.isfinite(g) and g >= 1):
            raise Refused(
                f"'goal' is a number of effective tokens, at least 1 (one token takes the whole budget); got {num(g)}."
            )
        return g
    if name == "stage":
        if not isinstance(value, str) or value not in STAGES:
            raise Refused(f"'stage' must be one of {', '.join(STAGES)}; got {show(value)}.")
        return value
    if name == "kv_keys":
        if not isinstance(value, (list, tuple)) or not all(_is_int(j) and j >= 0 for j in value):
            raise Refused(f"'kv_keys' must be a list of key positions (whole numbers ≥ 0), got {show(value)}.")
        return sorted({int(j) for j in value})
    for field, allowed in CHOICES:
        if name == field:
            if not isinstance(value, str) or value not in ("", *allowed):
                raise Refused(f"'{name}' must be one of {_one_of(allowed)}, or '' for none; got {show(value)}.")
            return value
    if name == "block":
        if not isinstance(value, str):
            raise Refused(f"'block' must be a block's name, got {show(value)}.")
        return value
    if name == "cell":
        if value is None:
            return None
        if not isinstance(value, (list, tuple)) or len(value) != 2 or not all(_is_int(i) for i in value):
            raise Refused(f"'cell' must be (row, column), two integer indices, or None; got {show(value)}.")
        return (int(value[0]), int(value[1]))
    if name == "guess":
        if value is None:
            return None
        if not isinstance(value, (list, tuple)) or not all(_is_number(g) for g in value):
            raise Refused(
                f"'guess' must be a list of weights, one per token the focused row reads, or None; got {show(value)}."
            )
        return [float(g) for g in value]
    if name in ("tokens", "key_tokens", "value_axes"):
        return _text_list(name, value, allow_none=name == "key_tokens")
    if name in ("q", "k", "v", "x", "mask", "bias"):  # their numbers: the trait types' own checks (traits.py)
        if value is None and name in ("q", "k", "v"):
            raise Refused(f"'{name}' must be an array of numbers, got None.")
        if value is not None and not hasattr(value, "shape"):
            raise Refused(
                "an array from the page could not be read "
                f"({kind(value)}); expected {{shape, dtype: float32 or float64, view}}"
            )
        if value is not None:
            _dims(name, value.shape)
    return value


# each array's dimensions, as the trait types say them (traits.py); the page's arrays are checked alike
DIMS = {
    "q": ((2, 3), "tokens × width or heads × tokens × width"),
    "k": ((2, 3), "tokens × width or heads × tokens × width"),
    "v": ((2, 3), "tokens × width or heads × tokens × width"),
    "bias": ((2, 3), "tokens × width or heads × tokens × width"),
    "x": ((2,), "tokens × width"),
    "mask": ((2,), "queries × keys booleans (True where a row may read)"),
}


def _dims(name, dims):
    allowed, said = DIMS[name]
    if len(dims) not in allowed:
        shown = "(" + ", ".join(map(str, dims)) + ("," if len(dims) == 1 else "") + ")"
        raise Refused(
            f"'{name}' must be {'-D or '.join(map(str, allowed))}-D ({said}), got {len(dims)}-D with shape {shown}"
        )


# --- the state's own measures ---


def shape(a):
    return None if a is None else tuple(a.shape)


def n_heads(state) -> int:
    q = state.get("q")
    return 1 if q is None or len(q.shape) == 2 else q.shape[0]


def writing(state) -> bool:
    """Still writing: only the first `step` tokens exist."""
    return 0 < (state.get("step") or 0) < len(state["tokens"])


def rows(state) -> int:
    """How many tokens read: all of them, or while writing the first `step`."""
    return state["step"] if writing(state) else len(state["tokens"])


def keys_read(state) -> int:
    """How many tokens a row reads: the tokens written, or cross-attention's own."""
    return len(state["key_tokens"]) if state.get("cross") else rows(state)


def closed_keys(state, row) -> list:
    """The tokens ``row`` may not read (the causal rule, the mask, the sink), of those it reads."""
    m, mask = keys_read(state), state.get("mask")
    out = []
    for j in range(m):
        shut = (
            (state.get("causal") and j > row)
            or (state.get("sink") and j == 0)
            or (mask is not None and not bool(mask[row][j]))
        )
        if shut:
            out.append(j)
    return out


def _so_far(state) -> str:
    n = len(state["tokens"])
    return (
        f" written so far (step {state['step']} of {n}: advance step to reach later tokens)" if writing(state) else ""
    )


def _in_range(name, value, count, what):
    if not 0 <= value < count:
        raise Refused(f"'{name}' must be {what} from 0 to {count - 1}, got {value}.")


def same(a, b) -> bool:
    """Unchanged: the same array object (each assignment stores a new one), or an equal value."""
    if hasattr(a, "shape") or hasattr(b, "shape"):
        return a is b
    return a == b and type(a) is type(b)


def by_head(state) -> tuple:
    """What a live page gets of a model's layer one head at a time (the head shown): its layered
    arrays, and of attention weights alone the bias too (their logarithms, each layer's own)."""
    return (*LAYERED, "bias") if state.get("weights_only") else tuple(LAYERED)
