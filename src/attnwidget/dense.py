"""How long a text AttentionWidget computes whole: its ``dense_limit``, and the refusal past it.

The widget's numbers are whole tokens × keys matrices (scores, weights, and the views made of them),
in Python and in its page: 8 bytes a cell in float64, 134 MB at 4,096 tokens, 3.2 GB at 20,000. Past the
limit the widget refuses instead of computing, and says what reads a long text without them
(attnwidget.LongAttention and its page, LongWidget).
"""

from __future__ import annotations

import numbers

import traitlets

LIMIT = 4096  # AttentionWidget.dense_limit's default: 134 MB a matrix of float64


class TooLong(traitlets.TraitError, ValueError):
    """A text past the widget's dense_limit: a ValueError, and a TraitError as every refused change is."""


def checked(limit) -> int:
    """The limit as a number of tokens, or ValueError saying what it must be."""
    if isinstance(limit, bool) or not isinstance(limit, numbers.Integral) or limit < 1:
        raise ValueError(
            f"dense_limit must be a whole number of tokens, 1 or more; got {limit!r}. Set it with "
            "AttentionWidget.dense_limit = 4096 (every widget), or w.dense_limit = 4096 (one)."
        )
    return int(limit)


def size(count: int) -> str:
    """A number of bytes as a reader takes it in: 648 bytes, 800 MB, 3.2 GB."""
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if count >= scale:
            return f"{count / scale:.3g} {unit}"
    return f"{count} bytes"


def refusal(what: str, n: int, m: int, limit: int, made: bool = True) -> str:
    """Why ``what`` is refused at n tokens × m keys past ``limit``, and what to do instead. ``made``:
    said of a widget that exists (whose own limit can be raised), not of one being made."""
    need = max(n, m)
    raise_it = (
        f"w.dense_limit = {need} (this widget), or AttentionWidget.dense_limit = {need} (every widget)"
        if made
        else f"AttentionWidget.dense_limit = {need}, then make the widget again"
    )
    return (
        f"{what} would compute whole tokens × keys matrices of {n:,} × {m:,}, past the widget's dense_limit = "
        f"{limit:,} tokens: each would take {size(n * m * 8)} (n × m × 8 bytes of float64), and the widget makes "
        "several. For a long text use attnwidget.LongAttention, whose rows(), tile(), map() and overview() compute "
        "nothing n × n (LongAttention.from_transformers(model, tokenizer, text), or LongAttention(tokens, "
        "{0: attnwidget.long.LongLayer(q, k, v)}) for arrays of your own; see docs/long.md), and "
        f"attnwidget.LongWidget(long) to see it in a page. To compute the whole matrices anyway, raise the limit: "
        f"{raise_it}."
    )


def problem(what: str, n: int, m: int, limit, made: bool = True) -> str:
    """refusal() when ``what``'s tokens ``n`` or keys ``m`` are past ``limit``, else ""."""
    limit = checked(limit)
    return refusal(what, n, m, limit, made) if max(n, m) > limit else ""


def check(what: str, n: int, m: int, limit, made: bool = True) -> None:
    """Refuse ``what`` (TooLong) when its tokens ``n`` or keys ``m`` are past ``limit``."""
    said = problem(what, n, m, limit, made)
    if said:
        raise TooLong(said)
