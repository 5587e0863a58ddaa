"""How a whole change settles: every follow-up made, or the change refused (the twin of the
second half of js/rules.js: validate, settle, settleChecked)."""

from __future__ import annotations

import math

from ..formulas import overflow_message
from .layers import _check_layer, held_layer, layer_index
from .values import (
    DIFFERENCE_EXERCISE,
    FIELDS,
    GENERATION_IS_CAUSAL,
    GUESS_TOLERANCE,
    MODEL_SINKS,
    NO_DIFFERENCE,
    NO_EFFECT,
    NO_INDUCTION,
    NO_QK_MAP,
    NO_SINKS,
    POSITION_TRAITS,
    POSITIONS,
    READS_BOTH_WAYS,
    ROW_TRAITS,
    SINK_EXERCISE,
    STACK,
    TWO_TEXTS,
    WEIGHTS_BIAS,
    WEIGHTS_ONLY,
    WRITABLE,
    Refused,
    _in_range,
    _one_of,
    _so_far,
    check,
    closed_keys,
    keys_read,
    n_heads,
    num,
    rows,
    same,
    shape,
    show,
    writing,
)


def validate(state, change, sources=None, *, page=False):
    """The message that refuses ``change``, or None when it is accepted."""
    try:
        settle(state, change, sources, page=page)
    except Refused as err:
        return str(err)
    return None


def page_may_set(keys) -> None:
    """Refuse the keys a page may not set: read-only, private or unknown."""
    refused = [k for k in keys if k not in WRITABLE]
    if refused:
        raise Refused(f"the page may not set {', '.join(map(repr, refused))} (read-only, private or unknown)")


def settle_checked(state, change, sources=None, *, page=False):
    """settle(), then the numbers' own check: scores of the new q, k, scale and bias must be
    computable in float64 (formulas.overflow_message). What Python and both pages run for a change."""
    s = settle(state, change, sources, page=page)
    if any(not same(s.get(n), state.get(n)) for n in ("q", "k", "scale", "bias")):
        problem = overflow_message(s["q"], s["k"], s["scale"], s["bias"])
        if problem:
            raise Refused(problem)
    return s


def may_write(state) -> bool:
    """A text may be written one token at a time: the numbers of its first `step` tokens are the
    prefix's own (your own arrays and the lab's, also set on a model's widget; a model's layers
    only where the model, or the block shown, reads causally)."""
    return not state.get("n_layers") or not state.get("layer_shown") or bool(state.get("model_causal"))


def differential(state) -> bool:
    """A differential attention model's layer is shown (its λ known): the difference map can be."""
    return bool(state.get("model_lambda")) and bool(state.get("layer_shown"))


def other_text(lengths, shown) -> int:
    """The text the difference compares text ``shown`` with: the next of as many tokens (``lengths``:
    each text's), or Refused saying why there is none."""
    if len(lengths) < 2:
        raise Refused(TWO_TEXTS)
    for i in range(1, len(lengths)):
        t = (shown + i) % len(lengths)  # the next text on, round to those before
        if lengths[t] == lengths[shown]:
            return t
    raise Refused(
        f"difference needs another text of {lengths[shown]} tokens, as text {shown} has "
        f"(the texts have {', '.join(map(str, lengths))}): it compares the weights cell by cell, "
        "so give a minimal pair."
    )


def settle(state, change, sources=None, *, page=False):
    """The complete state after ``change`` and every follow-up, or Refused. ``page``: the change
    came from a page, which may set only the writable traits."""
    if page:
        page_may_set(change)
    s, before = dict(state), state
    for name, value in change.items():
        s[name] = check(name, value)
    asked = {n for n in change if not same(s[n], before.get(n))}  # a value as it was is no change (traitlets' rule too)
    if "bias" in asked and s.get("weights_only"):
        raise Refused(WEIGHTS_BIAS)
    if "summary" in asked and s["summary"] == "effect" and not s.get("next_token"):
        raise Refused(NO_EFFECT)
    if "summary" in asked and s["summary"] in ("induction", "retrieval") and not s.get("reads_model"):
        raise Refused(NO_INDUCTION)
    if "qk_map" in asked and s["qk_map"] and s.get("weights_only"):
        raise Refused(NO_QK_MAP)
    if "summary" in asked and s["summary"] == "sink_share" and s.get("sinks") is None:
        raise Refused(NO_SINKS)
    if "sinks" in asked and s.get("sinks") is not None and s.get("layer_shown") and s.get("model_sinks") is None:
        if not asked & {"q", "k", "v"}:  # (your own arrays with them: not the model's layer any more)
            raise Refused(MODEL_SINKS)
    _position(s, before, asked)
    if "key_tokens" in asked:  # the columns' own labels: cross-attention; None: self-attention again
        s["cross"] = s["key_tokens"] is not None
    _bring_in(s, before, asked, sources)
    if not s.get("cross"):
        s["key_tokens"] = s["tokens"]  # the columns are the tokens themselves
    changed = asked | {n for n in FIELDS if n in s and not same(s.get(n), before.get(n))}
    _fit(s, before, asked, changed, sources)
    _check_state(s, asked)
    if "measure" in asked and s["measure"] == "difference":  # two texts of as many tokens (the panel's reason)
        other_text(s.get("text_lengths") or [], s["sentence_index"])
    return s


def _position(s, before, asked):
    """The lab chooses where position enters; a model's q and k carry its own (set as it loads)."""
    turned = [n for n in POSITION_TRAITS if n in asked]
    if turned and (s.get("n_layers") or s.get("weights_only")) and "model_q" not in asked:
        raise Refused(
            f"'{turned[0]}' is for your own queries and keys: this model's carry its own position already "
            f"({before.get('position') or 'unknown'}). Try 'rope' or 'alibi' on a widget of your own arrays "
            "(AttentionWidget(), or tokens=, q=, k=, v=)."
        )
    if "position" in asked and not s.get("n_layers") and s["position"] not in POSITIONS:
        raise Refused(f"'position' must be one of {_one_of(POSITIONS)}; got {show(s['position'])}.")


def _bring_in(s, before, asked, sources):
    """A sentence's, block's or layer's arrays, with what goes with them."""
    if "sentence_index" in asked and sources is not None and 0 <= s["sentence_index"] < len(s.get("sentences") or ()):
        ex = sources.sentence(s["sentence_index"])
        old = before.get("tokens") or []
        word = old[s["focus"]].lower() if 0 <= s["focus"] < len(old) else None
        lowered = [t.lower() for t in ex["tokens"]]
        s["cross"] = False  # a sentence is self-attention, whatever came before
        if "model_q" in ex:  # a model's text: its every layer, brought in as a block's are
            s["tokens"] = ex["tokens"]
            for name in STACK:
                s[name] = ex[name]
            for name in (
                "bias",
                "step",
            ):  # its own position bias, and the step it opens at, unless this change sets them
                if name not in asked:
                    s[name] = ex[name]
            if "layer" not in asked:
                s["layer"] = held_layer(s)
            asked = asked | {"layer"}
        else:
            for name in ("tokens", "q", "k", "v", "x", "value_basis"):
                s[name] = ex[name]
        if word in lowered and "focus" not in asked:
            s["focus"] = lowered.index(word)  # the same word in the new sentence
        s["cell"] = None
    # (a block set while the widget is made is loaded already, with the rules it was given)
    if "block" in asked and sources is not None and s["block"] in (s.get("blocks") or ()) and before.get("block"):
        found = sources.block(s["block"])
        for name in STACK:
            s[name] = found[name]
        if "step" not in asked:
            s["step"] = len(found["tokens"])  # another text: shown written whole
        for name in ("causal", "scale", "softcap", "bias"):  # the block's own rules, unless this change sets them
            if name not in asked:
                s[name] = found[name]
        s["model_causal"] = bool(found["causal"])  # (what the block itself reads, whatever the widget's causal)
        if "layer" not in asked:
            s["layer"] = held_layer(s)  # the same layer, where the block has it
        asked = asked | {"layer"}
    blocks, texts = s.get("blocks") or (), len(s.get("sentences") or ())
    known = s.get("block", "") in blocks if blocks else not s.get("block")  # (an unknown block is refused below)
    text = s["sentence_index"] if texts else 0  # a model's text shown (the sentences are its texts)
    if (
        ("layer" in asked or "model_q" in asked)
        and sources is not None
        and known
        and 0 <= layer_index(s) < s.get("n_layers", 0)
        and 0 <= text < max(1, texts)
    ):  # (a model loaded: its layer shown)
        found = sources.layer(s.get("block", ""), layer_index(s), text)
        s["tokens"], s["cross"] = found["tokens"], found["key_tokens"] is not None
        if s["cross"]:
            s["key_tokens"] = found["key_tokens"]
        for name in ("q", "k", "v") + (() if "value_basis" in asked else ("value_basis",)):
            s[name] = found[name]
        if "mask" in found and "mask" not in asked:
            s["mask"] = found["mask"]  # the layer's own mask (a sliding window, local attention)
        if "bias" in found and "bias" not in asked:
            s["bias"] = found["bias"]  # the layer's own bias (attention weights alone: their logarithms)
        if "terms" in found:
            s["terms"] = found["terms"]  # the first term of that bias (DeBERTa's c2p)
        if "sinks" in found and "sinks" not in asked:
            s["sinks"] = found["sinks"]  # the layer's own learnt sinks (None: a model without)
        s["layer_shown"] = True
    elif any(name in asked for name in ("q", "k", "v")) and s.get("layer_shown"):
        s["layer_shown"] = False  # your own arrays now, not the layer's


def _fit(s, before, asked, changed, sources):
    """Everything else made to fit the new tokens, heads and values."""
    n, m = len(s["tokens"]), len(s["key_tokens"])
    x, v, q = s.get("x"), s.get("v"), s.get("q")
    if x is not None and "x" not in changed and v is not None and shape(x) != (n, v.shape[-1]):
        s["x"] = None  # embeddings for other tokens or values
    mask = s.get("mask")
    if mask is not None and "mask" not in changed and shape(mask) != (n, m):
        s["mask"] = None  # a mask for other tokens
    b = s.get("bias")
    if (
        b is not None
        and "bias" not in changed
        and (shape(b)[-2:] != (n, m) or (len(b.shape) == 3 and (len(q.shape) != 3 or q.shape[0] != b.shape[0])))
    ):
        s["bias"] = None  # a bias for other tokens, or other heads
    if s.get("terms") is not None and ("bias" in asked or s.get("bias") is None):
        s["terms"] = None  # the terms of the model's own bias only
    if s.get("x") is None and s.get("residual") and "residual" not in changed:
        s["residual"] = False  # nothing to add the mix to
    if s.get("difference_map") and not differential(s) and "difference_map" not in asked:
        s["difference_map"] = False  # your own arrays: no layer's λ
    old_n, stepped = len(before.get("tokens") or []), "step" in asked
    brought = s["step"] is not None and s["step"] != before.get("step")  # a model's text opens at its own step
    if not stepped and (s["step"] is None or (not brought and n != old_n and (s["step"] == old_n or s["step"] > n))):
        s["step"] = n  # every token written stays so (a new widget's: all); a step past the new tokens, the last
    if s.get("cross") and 0 < s["step"] < n and not stepped:
        s["step"] = n  # cross-attention reads the whole source: written whole
    if s["step"] != before.get("step") or stepped:
        if 0 < s["step"] < n:
            if not s["causal"] and "causal" in asked:
                raise Refused(GENERATION_IS_CAUSAL)
            s["causal"] = True  # a text written one token at a time: no token reads ahead
    elif "causal" in asked and not s["causal"] and 0 < s["step"] < n:
        raise Refused(GENERATION_IS_CAUSAL)
    if stepped and "focus" not in changed and (before.get("step") or s["focus"] >= rows(s)):
        s["focus"] = rows(s) - 1  # the row the new token adds
    r, m = rows(s), keys_read(s)
    if r and "focus" not in asked and s["focus"] >= r:
        s["focus"] = r - 1
    cell = s.get("cell")
    if "cell" not in changed and cell is not None and (cell[0] >= r or cell[1] >= m):
        s["cell"] = cell = None
    # the cell shown is always in the focused row: the arcs and readout are about its reader
    if cell is not None and cell[0] != s["focus"]:
        if "cell" in changed and "focus" not in changed:
            s["focus"] = cell[0]
        else:
            s["cell"] = None
    slopes = s.get("alibi_slopes")
    if slopes is not None and "alibi_slopes" not in asked and len(slopes) != n_heads(s):
        s["alibi_slopes"] = None  # slopes for other heads: the default's again
    sinks = s.get("sinks")
    if sinks is not None and "sinks" not in asked and len(sinks) != n_heads(s):
        s["sinks"] = None  # sinks of other heads: none
    if s.get("sinks") is None and s.get("summary") == "sink_share" and "summary" not in asked:
        s["summary"] = ""  # no sinks left to colour the heads by
    if "head" not in changed and s["head"] >= n_heads(s):
        s["head"] = n_heads(s) - 1
    if "v" in changed and "value_basis" not in changed and not same(s.get("v"), before.get("v")):
        s["value_basis"] = None if sources is None else sources.basis(s["v"])
    # an exercise is about one row as it is: anything that changes that row starts a new try; a
    # new guess after a reveal is a new try too (a guess sent with the change is for the new row;
    # the temperature exercise's reveal sent with the slider's last value is of that value)
    kept = "guess" in asked or (
        s["exercise"] == "temperature" and "revealed" in asked and before.get("exercise") == "temperature"
    )
    if (
        (s["exercise"] or before.get("exercise"))
        and not kept
        and any(not same(s.get(k), before.get(k)) for k in ROW_TRAITS)
    ):
        s["guess"], s["revealed"] = None, False
    elif "guess" in changed and "revealed" not in asked:
        s["revealed"] = False


def _check_state(s, asked):
    """The settled state holds together, or the change is refused with what did not fit."""
    tokens, key_tokens, cross = s["tokens"], s["key_tokens"], s.get("cross")
    q, k, v, x, mask, bias = (s.get(n) for n in ("q", "k", "v", "x", "mask", "bias"))
    for name in ("tokens", "key_tokens"):
        if len(s[name]) == 0:
            raise Refused(
                f"'{name}' must not be empty: give one string per row of {'q' if name == 'tokens' else 'k and v'}."
            )
    if bias is not None and (
        (not cross and bias.shape[-1] != bias.shape[-2])
        or (len(bias.shape) == 3 and (len(q.shape) != 3 or bias.shape[0] != q.shape[0]))
    ):
        raise Refused(
            f"'bias' must be tokens × tokens, or heads × tokens × tokens with q's heads; got {shape(bias)} beside q "
            f"{shape(q)}."
        )
    if mask is not None and not cross and mask.shape[0] != mask.shape[1]:
        raise Refused(
            f"'mask' must be n×n booleans (True where a row may read), tokens × tokens; got shape {shape(mask)}."
        )
    arrays = [(n, a) for n, a in (("q", q), ("k", k), ("v", v))]
    if len({len(a.shape) for _, a in arrays}) > 1 or len({a.shape[0] for _, a in arrays if len(a.shape) == 3}) > 1:
        told = ", ".join(f"{n} {shape(a)}" for n, a in arrays)
        raise Refused(f"q, k and v must all be 2-D, or all 3-D with the same number of heads; got {told}.")
    if q.shape[-1] != k.shape[-1]:
        raise Refused(
            f"'q' and 'k' must have the same width (they are compared by dot product), got q {shape(q)} and k "
            f"{shape(k)}."
        )
    dim = lambda a, i: None if a is None else a.shape[i]
    row_counts = [
        (n, c)
        for n, c in (
            ("tokens", len(tokens)),
            ("q", q.shape[-2]),
            ("x", dim(x, 0)),
            ("mask", dim(mask, 0)),
            ("bias", dim(bias, -2)),
        )
        if c is not None
    ]
    keys = (("key_tokens", len(key_tokens)),) if cross else ()
    col_counts = [
        (n, c)
        for n, c in (*keys, ("k", k.shape[-2]), ("v", v.shape[-2]), ("mask", dim(mask, 1)), ("bias", dim(bias, -1)))
        if c is not None
    ]
    if not cross and len({c for _, c in row_counts + col_counts}) > 1:
        told = ", ".join(f"{n}: {c}" for n, c in row_counts) + "".join(
            f", {n}: {c}" for n, c in col_counts if n not in dict(row_counts)
        )
        told += "".join(f", {n} columns: {a.shape[-1]}" for n, a in (("mask", mask), ("bias", bias)) if a is not None)
        raise Refused(
            f"tokens, q, k, v (and x, mask, bias) must agree on the number of tokens, got {told}. "
            "To change the number of tokens, replace them together with set_vectors(tokens=, q=, k=, v=); "
            "for keys from another text (cross-attention), pass key_tokens= too."
        )
    for group, told, what in (
        (row_counts, "tokens, q (and x, mask and bias rows)", "rows (queries)"),
        (col_counts, "key_tokens, k, v (and mask and bias columns)", "columns (keys)"),
    ):
        if cross and len({c for _, c in group}) > 1:
            raise Refused(
                f"In cross-attention {told} must agree on the number of {what}, got "
                + ", ".join(f"{n}: {c}" for n, c in group)
                + ". Replace them together with set_vectors(tokens=, key_tokens=, q=, k=, v=)."
            )
    if s.get("position") in ("rope", "alibi") and not s.get("n_layers") and cross:
        raise Refused(
            f"position={show(s['position'])} counts the rows and the columns as places in one text; in cross-attention "
            "the columns are another text's tokens: set position='none' for it."
        )
    if s.get("position") == "rope" and not s.get("n_layers") and q.shape[-1] % 2:
        raise Refused(
            f"position='rope' turns pairs of numbers: q and k need an even width, got {q.shape[-1]}. Give vectors of "
            "an even width, or set position='none' or 'alibi'."
        )
    slopes = s.get("alibi_slopes")
    if slopes is not None and len(slopes) != n_heads(s):
        raise Refused(f"'alibi_slopes' must have one slope per head ({n_heads(s)}), got {len(slopes)}.")
    sinks = s.get("sinks")
    if sinks is not None and len(sinks) != n_heads(s):
        raise Refused(f"'sinks' must have one sink logit per head ({n_heads(s)}), got {len(sinks)}.")
    if x is not None and x.shape[1] != v.shape[-1]:
        raise Refused(f"'x' must have the width of the values (the mix is added to it): v {shape(v)}, x {shape(x)}.")
    n = len(tokens)
    if not 1 <= s["step"] <= n:
        raise Refused(
            f"'step' must be the number of tokens written so far, from 1 to {n} ({n} shows them all); got {s['step']}."
        )
    if writing(s) and cross:
        raise Refused(
            "'step' below the number of tokens is for self-attention (a text written one token at a time); in "
            "cross-attention set it to the number of tokens."
        )
    if writing(s) and not may_write(s):
        raise Refused(READS_BOTH_WAYS)
    r, m = rows(s), keys_read(s)
    cell = s.get("cell")
    if cell is not None and not (0 <= cell[0] < r and 0 <= cell[1] < m):
        span = f"both from 0 to {r - 1}" if r == m else f"row from 0 to {r - 1} and column from 0 to {m - 1}"
        raise Refused(f"'cell' must be (row, column) with {span}, or None; got ({cell[0]}, {cell[1]}).")
    _in_range("focus", s["focus"], r, "a token index" + _so_far(s))
    _in_range("head", s["head"], n_heads(s), "a head index")
    _check_layer(s)
    _in_range("sentence_index", s["sentence_index"], max(1, len(s.get("sentences") or ())), "a sentence index")
    blocks = s.get("blocks") or ()
    if (s["block"] not in blocks) if blocks else s["block"] != "":
        have = f"one of {_one_of(blocks)}" if blocks else "'' (only an encoder–decoder model has blocks)"
        raise Refused(f"'block' must be {have}; got {show(s['block'])}.")
    if s["residual"] and x is None:
        raise Refused("'residual' needs token embeddings: pass x= (tokens × value width) first.")
    if s.get("difference_map") and not differential(s):
        raise Refused(NO_DIFFERENCE)
    if s.get("difference_map") and s["exercise"]:
        raise Refused(DIFFERENCE_EXERCISE)
    sinks = s.get("sinks")
    if s["exercise"] == "predict" and sinks is not None and sinks[min(s["head"], len(sinks) - 1)] > -1e29:
        raise Refused(SINK_EXERCISE)
    unknown = WEIGHTS_ONLY.get(s.get("weights_only") or "", {})
    if s["stage"] in unknown:
        raise Refused(unknown[s["stage"]])
    _check_exercise(s, m)


def _check_exercise(s, m):
    guess = s.get("guess")
    if guess is not None:
        if s["exercise"] != "predict":
            raise Refused("'guess' belongs to the predict exercise: set exercise='predict' first.")
        if len(guess) != m:
            raise Refused(f"'guess' must have one weight per token the focused row reads ({m}), got {len(guess)}.")
        if not all(math.isfinite(g) and g >= 0 for g in guess):
            raise Refused(f"'guess' must be finite weights ≥ 0; got {show(guess)}.")
        total = math.fsum(guess)
        if abs(total - 1) > GUESS_TOLERANCE:
            raise Refused(
                "'guess' must spend the whole budget: its weights must sum to 1 (within 1e-6), got "
                f"{num(float(f'{total:.9g}'))}. Divide it by its sum."
            )
        shut = [j for j in closed_keys(s, s["focus"]) if guess[j] != 0]
        if shut:
            raise Refused(
                "'guess' puts weight on tokens the focused row cannot read (the causal rule, the mask or the sink "
                f"close them): {', '.join(str(j) for j in shut)}. Give them 0."
            )
    if s["revealed"] and not s["exercise"]:
        raise Refused("'revealed' belongs to an exercise: set exercise='predict' or 'temperature' first.")
    if s["revealed"] and s["exercise"] == "predict" and guess is None:
        raise Refused(
            "Make a guess before revealing: set guess (one weight per token, summing to 1), or spread the bars in "
            "the page."
        )
