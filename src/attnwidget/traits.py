"""Trait types and the codecs that carry them to the page.

Each type owns its validation and its error text: arrays (finite, real, a private read-only
copy), token lists, masks, and the scalars whose kinds and ranges the rules check
(:func:`attnwidget.rules.check`, the same checks the page runs). Arrays travel as one binary
buffer each, float32 when that holds them exactly, else float64; text as the page can show it.
"""

from __future__ import annotations

import weakref
from typing import Any

import numpy as np
import traitlets

from . import rules, state
from .formulas import SCORE_LIMIT as ENTRY_LIMIT
from .formulas import _as_mask


def _array_to_json(a, widget):
    """numpy -> {shape, dtype, view}: one binary buffer on the wire, never a JSON list.

    float32 when that holds the array exactly (a real model's Q/K/V, anything passed as
    float32), else float64: the page always computes on the very numbers Python holds.
    """
    if a is None:
        return None
    with np.errstate(over="ignore"):  # a value beyond float32's range becomes inf: not exact
        small = np.ascontiguousarray(a, dtype=np.float32)
        exact = np.array_equal(small, a)
    b = small if exact else np.ascontiguousarray(a, dtype=np.float64)
    return {"shape": list(b.shape), "dtype": b.dtype.name, "view": memoryview(b.reshape(-1))}


def one_head(value, h: int):
    """A heads × … array as sent ({shape, dtype, view}) cut to head ``h``'s numbers alone: shape
    still the whole array's, and "head" naming the one the view holds."""
    if value is None or len(value["shape"]) != 3:
        return value
    size = value["shape"][1] * value["shape"][2]
    return {**value, "view": value["view"][h * size : (h + 1) * size], "head": h}


def _array_from_json(value, widget):
    """The page's {shape, dtype, view} back into numpy; anything else is refused."""
    if value is None:
        return None
    try:
        dtype, shape = np.dtype(value["dtype"]), [int(n) for n in value["shape"]]
        if dtype not in (np.float32, np.float64):
            raise ValueError(f"dtype {dtype} is not float32 or float64")
        return np.frombuffer(value["view"], dtype=dtype).reshape(shape).copy()
    except Exception as err:  # a message from the page is untrusted: any failure is a refusal
        raise traitlets.TraitError(
            f"an array from the page could not be read ({err}); expected {{shape, dtype: float32 or float64, view}}"
        ) from None


ARRAY_SYNC = {"sync": True, "to_json": _array_to_json, "from_json": _array_from_json}
# kept in the kernel, never sent to a live page (a model's every layer); an exported page carries them
ARRAY_KEPT = {"to_json": _array_to_json}

# Text as the page shows it: C0 controls and DEL as their Unicode control pictures (NUL → ␀,
# ESC → ␛), other control characters, lone surrogates and the non-characters U+FFFE/U+FFFF as
# U+FFFD. Python keeps the text as given; every page, SVG, PNG and file gets text it can hold.
_VISIBLE = str.maketrans(
    {
        **{c: chr(0x2400 + c) for c in range(0x20)},
        0x7F: "\u2421",
        **{c: "\ufffd" for c in (*range(0x80, 0xA0), *range(0xD800, 0xE000), 0xFFFE, 0xFFFF)},
    }
)


_OWNED: weakref.WeakValueDictionary = weakref.WeakValueDictionary()  # id -> an array the widget made


def own(a: np.ndarray) -> np.ndarray:
    """``a`` made read-only and known as the widget's own: no trait copies it again."""
    a.setflags(write=False)
    _OWNED[id(a)] = a
    return a


def owned(a) -> bool:
    return isinstance(a, np.ndarray) and _OWNED.get(id(a)) is a


def visible_text(text: str) -> str:
    """``text`` with every character a page or an XML file cannot show as itself replaced by a visible stand-in."""
    return text.translate(_VISIBLE)


TEXT_SYNC = {"sync": True, "to_json": lambda value, widget: None if value is None else [visible_text(t) for t in value]}


class Matrix(traitlets.TraitType):
    """A non-empty, finite, real float array: tokens × width, or heads × tokens × width
    when ``heads`` is true. Stored as a private read-only copy."""

    default_value = None

    def __init__(self, heads=False, **kwargs):
        self.ndims = (2, 3) if heads else (2,)
        super().__init__(**kwargs)

    def validate(self, obj, value):
        if value is None and self.allow_none:
            return None
        name = f"'{self.name}'"
        shape_name = " or ".join(("tokens × width", "heads × tokens × width")[: len(self.ndims)])
        if isinstance(value, (str, bytes)):
            raise traitlets.TraitError(f"{name} must be an array of numbers ({shape_name}), got text")
        try:
            a = np.asarray(value)
        except Exception as err:  # ragged lists and the like
            raise traitlets.TraitError(f"{name} could not be read as an array ({shape_name}): {err}") from None
        if np.iscomplexobj(a):
            raise traitlets.TraitError(
                f"{name} must hold real numbers, got complex values; pass the real part (np.real) if that is what you "
                "mean"
            )
        if a.dtype == object or not (np.issubdtype(a.dtype, np.number) or a.dtype == bool):
            raise traitlets.TraitError(f"{name} must hold real numbers, got dtype {a.dtype}")
        if self.name in rules.DIMS:  # what the page may send too: the rules say it, for both
            try:
                rules._dims(self.name, a.shape)
            except rules.Refused as err:
                raise traitlets.TraitError(str(err)) from None
        elif a.ndim not in self.ndims:
            raise traitlets.TraitError(
                f"{name} must be {'-D or '.join(map(str, self.ndims))}-D ({shape_name}), got {a.ndim}-D with shape "
                f"{a.shape}"
            )
        if 0 in a.shape:
            raise traitlets.TraitError(f"{name} must not be empty, got shape {a.shape}")
        # a private copy (later edits to the caller's array cannot reach the widget), in float32 when
        # that is what was given (a model's own precision, half the memory), else float64; an array
        # the widget made itself read-only (a model's layers, stacked once) is kept as it is
        dtype = np.float32 if a.dtype == np.float32 else np.float64
        a = a if a.dtype == dtype and owned(a) else np.array(a, dtype=dtype)
        if not np.isfinite(a).all():
            bad = tuple(np.argwhere(~np.isfinite(a))[0])
            how = ""
            if self.name == "bias" and a[bad] == -np.inf:  # how models close cells; here a mask says it
                how = (
                    ": to close cells, pass mask= (False where a row may not read), or use a large finite negative "
                    "bias such as np.finfo(np.float32).min, as models do"
                )
            raise traitlets.TraitError(f"{name} must be finite; found {a[bad]} at index {list(map(int, bad))}{how}")
        if float(np.abs(a).max()) > ENTRY_LIMIT:  # sums of such numbers (outputs, x + mix) would overflow float64
            bad = tuple(np.argwhere(np.abs(a) > ENTRY_LIMIT)[0])
            raise traitlets.TraitError(
                f"{name} entries must be at most {ENTRY_LIMIT:.0e} in size; found {a[bad]:.3g} at index "
                f"{list(map(int, bad))}: divide the array by a constant."
            )
        a.setflags(write=False)
        return a

    def set(self, obj, value):
        from .sync import store_new  # a new array is simply a change

        store_new(obj, self.name, self._validate(obj, value))


class Tokens(traitlets.List):
    """One string per token (or None, where ``allow_none``)."""

    def __init__(self, **kwargs):
        super().__init__(traitlets.Unicode(), **kwargs)

    def set(self, obj, value):
        # read once (a generator is spent after that), and never a string, which traitlets' List would take as [string]
        super().set(obj, value if value is None and self.allow_none else token_list(value, traitlets.TraitError))

    def validate(self, obj, value):
        if value is None and self.allow_none:
            return None
        value = token_list(value, traitlets.TraitError)
        bad = next((t for t in value if not isinstance(t, str)), None)
        if bad is not None:
            name = self.name or "tokens"
            raise traitlets.TraitError(
                f"'{name}' must be strings, one per token; got {_kind(bad)}. Convert them with [str(t) for t in "
                f"{name}]."
            )
        return super().validate(obj, value)


class Mask(traitlets.TraitType):
    """Which cells each row may read: queries × keys booleans (True = may read), or None for every cell.
    Numbers are taken only when they are exactly 0 and 1. Stored as a private read-only copy."""

    default_value = None
    allow_none = True

    def __init__(self, stack=False, **kwargs):
        self.stack = stack  # several masks, one after another (a model's layers' masks)
        super().__init__(**kwargs)

    def validate(self, obj, value):
        if value is None:
            return None
        try:
            if np.ndim(value) != (3 if self.stack else 2):
                raise ValueError(
                    f"mask must be queries × keys booleans (True where a row may read), got shape {np.shape(value)}"
                )
            m = (
                np.stack([_as_mask(one, *np.shape(one)) for one in value])
                if self.stack
                else _as_mask(value, *np.shape(value))
            )
        except ValueError as err:
            raise traitlets.TraitError(f"'mask' {str(err).removeprefix('mask ')}") from None
        if not owned(value):  # an array the widget made itself (a model's layer's) is kept as it is
            m = m.copy()
            m.setflags(write=False)
        return m

    set = Matrix.set  # a new array is a change, without comparing element by element


def _mask_to_json(m, widget):
    return (
        None
        if m is None
        else {
            "shape": list(m.shape),
            "dtype": "uint8",
            "view": memoryview(np.ascontiguousarray(m, dtype=np.uint8).reshape(-1)),
        }
    )


def _mask_from_json(value, widget):
    if value is None:
        return None
    try:
        if value["dtype"] != "uint8":
            raise ValueError(f"dtype {value['dtype']} is not uint8")
        return np.frombuffer(value["view"], dtype=np.uint8).reshape([int(n) for n in value["shape"]])
    except Exception as err:  # untrusted: any failure is a refusal
        raise traitlets.TraitError(
            f"a mask from the page could not be read ({err}); expected {{shape, dtype: uint8, view}}"
        ) from None


MASK_SYNC = {"sync": True, "to_json": _mask_to_json, "from_json": _mask_from_json}
MASK_KEPT = {"to_json": _mask_to_json}


class Checked(traitlets.TraitType):
    """A value of the kind and range the rules allow for this trait (rules.check): the same
    kinds, and the same messages, as the page's checks."""

    def validate(self, obj, value):
        try:
            return rules.check(self.name, value)
        except rules.Refused as err:
            raise traitlets.TraitError(str(err)) from None


def _kind(value) -> str:
    return f"a {type(value).__name__}" + (f" ({value!r:.40})" if isinstance(value, (int, float, dict)) else "")


def token_list(tokens, error=TypeError) -> list:
    """One string per token, in order; a single string would silently become its characters,
    a dict its keys and a set an arbitrary order."""
    if isinstance(tokens, (str, bytes)):
        raise error(
            f"tokens must be a list with one string per token, got the single string {tokens!r:.40}; pass "
            "tokens=text.split() or tokens=[text]."
        )
    if isinstance(tokens, (dict, set, frozenset)):
        raise error(f"tokens must be a list with one string per token, in order; got {_kind(tokens)}.")
    try:
        return list(tokens)
    except TypeError:
        raise error(f"tokens must be a list with one string per token, got {_kind(tokens)}.") from None


# --- the traits of the state's declaration (state.py) ---

_SIMPLE = {"count": traitlets.Int, "flag": traitlets.Bool, "text": traitlets.Unicode, "choice": traitlets.Unicode}


def trait(f: state.Field) -> traitlets.TraitType:
    """The trait that holds field ``f``: a page or a user sets a writable one through the rules' checks
    of its kind (``Checked``) or an array's, token list's or mask's own type; the widget sets the rest."""
    how: dict[str, Any] = {"read_only": not f.writable, "allow_none": f.nullable, "help": " ".join(f.doc.split())}
    t: traitlets.TraitType
    tags: dict[str, Any]
    default = list(f.default) if isinstance(f.default, tuple) else f.default
    kept = f.travel == "kept"
    if f.kind == "array":
        t, tags = Matrix(heads=f.heads, **how), ARRAY_KEPT if kept else ARRAY_SYNC
    elif f.kind in ("mask", "masks"):
        t, tags = Mask(stack=f.kind == "masks", **how), MASK_KEPT if kept else MASK_SYNC
    elif f.kind == "texts":
        t, tags = Tokens(default_value=default, **how), TEXT_SYNC
    elif f.writable:
        t, tags = Checked(default, **how), {"sync": True}
    elif f.kind in ("counts", "numbers"):
        each = traitlets.Int() if f.kind == "counts" else traitlets.Float()
        t, tags = traitlets.List(each, default_value=default, **how), {"sync": True}
    elif f.kind == "answer":
        t = (
            traitlets.List(default_value=default, **how)
            if isinstance(default, list)
            else traitlets.Dict(default_value=default, **how)
        )
        tags = {"sync": True}
    else:
        t, tags = _SIMPLE[f.kind](default, **how), {"sync": True}
        if f.kind == "text":
            tags = {"sync": True, "to_json": lambda value, widget: visible_text(value)}
    return t.tag(**tags) if f.travel != "kernel" else t


def declared() -> dict[str, traitlets.TraitType]:
    """Every field's trait, by name: the body of the class that holds the state."""
    return {f.name: trait(f) for f in state.FIELDS}
