"""AttentionWidget: the synced state, its validation, and numpy-derived read-only views."""

from __future__ import annotations

import base64
import contextlib
import os
import pathlib
import sys

import anywidget
import numpy as np
import traitlets
from ipywidgets.widgets.widget import JUPYTER_WIDGETS_ECHO, _remove_buffers

from . import examples
from .core import SCORE_LIMIT as ENTRY_LIMIT
from .core import SUMMARIES, Attention, _as_mask, _softmax_rows, allowed_cells, head_summaries, overflow_message, principal_axes, scores_of

_STATIC = pathlib.Path(__file__).parent / "static"
STAGES = ("tokens", "qk", "scores", "weights", "blend")


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


def _array_from_json(value, widget):
    """The page's {shape, dtype, view} back into numpy; anything else is refused."""
    if value is None:
        return None
    try:
        dtype, shape = np.dtype(value["dtype"]), [int(n) for n in value["shape"]]
        if dtype not in (np.float32, np.float64):
            raise ValueError(f"dtype {dtype} is not float32 or float64")
        return np.frombuffer(value["view"], dtype=dtype).reshape(shape).astype(float)
    except Exception as err:  # a message from the page is untrusted: any failure is a refusal
        raise traitlets.TraitError(f"an array from the page could not be read ({err}); expected {{shape, dtype: float32 or float64, view}}") from None


_ARRAY_SYNC = {"sync": True, "to_json": _array_to_json, "from_json": _array_from_json}

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


def visible_text(text: str) -> str:
    """``text`` with every character a page or an XML file cannot show as itself replaced by a visible stand-in."""
    return text.translate(_VISIBLE)


_TEXT_SYNC = {"sync": True, "to_json": lambda value, widget: [visible_text(t) for t in value]}


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
            raise traitlets.TraitError(f"{name} must hold real numbers, got complex values; pass the real part (np.real) if that is what you mean")
        if a.dtype == object or not (np.issubdtype(a.dtype, np.number) or a.dtype == bool):
            raise traitlets.TraitError(f"{name} must hold real numbers, got dtype {a.dtype}")
        if a.ndim not in self.ndims:
            raise traitlets.TraitError(f"{name} must be {'-D or '.join(map(str, self.ndims))}-D ({shape_name}), got {a.ndim}-D with shape {a.shape}")
        if 0 in a.shape:
            raise traitlets.TraitError(f"{name} must not be empty, got shape {a.shape}")
        a = np.array(a, dtype=float)  # a private copy: later edits to the caller's array cannot reach the widget
        if not np.isfinite(a).all():
            bad = tuple(np.argwhere(~np.isfinite(a))[0])
            raise traitlets.TraitError(f"{name} must be finite; found {a[bad]} at index {list(map(int, bad))}")
        if np.abs(a).max() > ENTRY_LIMIT:  # sums of such numbers (outputs, x + mix) would overflow float64
            bad = tuple(np.argwhere(np.abs(a) > ENTRY_LIMIT)[0])
            raise traitlets.TraitError(
                f"{name} entries must be at most {ENTRY_LIMIT:.0e} in size; found {a[bad]:.3g} at index {list(map(int, bad))}: divide the array by a constant."
            )
        a.setflags(write=False)
        return a

    def set(self, obj, value):
        # traitlets compares old and new values with ==, which for arrays is an elementwise
        # pass over every number (and then an error); a new array is simply a change.
        new = self._validate(obj, value)
        old = obj._trait_values.get(self.name, self.default_value)
        obj._trait_values[self.name] = new
        if new is not old:
            obj._notify_trait(self.name, old, new)


class Index(traitlets.Int):
    """A position: an int, and not a bool (True is 1 to Python, but a mask to numpy)."""

    def validate(self, obj, value):
        if isinstance(value, bool):
            raise traitlets.TraitError(f"'{self.name}' must be an integer index, got {value}.")
        return super().validate(obj, value)


class Tokens(traitlets.List):
    """One string per token."""

    def __init__(self, **kwargs):
        super().__init__(traitlets.Unicode(), **kwargs)

    def set(self, obj, value):
        # read once (a generator is spent after that), and never a string, which traitlets' List would take as [string]
        super().set(obj, _token_list(value, traitlets.TraitError))

    def validate(self, obj, value):
        value = _token_list(value, traitlets.TraitError)
        bad = next((t for t in value if not isinstance(t, str)), None)
        if bad is not None:
            name = self.name or "tokens"
            raise traitlets.TraitError(f"'{name}' must be strings, one per token; got {_kind(bad)}. Convert them with [str(t) for t in {name}].")
        return super().validate(obj, value)


class Mask(traitlets.TraitType):
    """Which cells each row may read: queries × keys booleans (True = may read), or None for every cell.
    Numbers are taken only when they are exactly 0 and 1. Stored as a private read-only copy."""

    default_value = None
    allow_none = True

    def validate(self, obj, value):
        if value is None:
            return None
        try:
            if np.ndim(value) != 2:
                raise ValueError(f"mask must be queries × keys booleans (True where a row may read), got shape {np.shape(value)}")
            m = _as_mask(value, *np.shape(value))
        except ValueError as err:
            raise traitlets.TraitError(f"'mask' {str(err).removeprefix('mask ')}") from None
        m = m.copy()
        m.setflags(write=False)
        return m

    set = Matrix.set  # a new array is a change, without comparing element by element


def _mask_to_json(m, widget):
    return None if m is None else {"shape": list(m.shape), "dtype": "uint8", "view": memoryview(np.ascontiguousarray(m, dtype=np.uint8).reshape(-1))}


def _mask_from_json(value, widget):
    if value is None:
        return None
    try:
        if value["dtype"] != "uint8":
            raise ValueError(f"dtype {value['dtype']} is not uint8")
        return np.frombuffer(value["view"], dtype=np.uint8).reshape([int(n) for n in value["shape"]])
    except Exception as err:  # untrusted: any failure is a refusal
        raise traitlets.TraitError(f"a mask from the page could not be read ({err}); expected {{shape, dtype: uint8, view}}") from None


_VECTORS = ("tokens", "key_tokens", "q", "k", "v", "x", "mask", "bias")
BLOCKS = ("encoder", "decoder", "cross")
_KEEP = object()  # set_vectors: "leave this one as it is"
EXERCISES = ("", "predict", "temperature")
GENERATION_IS_CAUSAL = "A text written one token at a time is causal: causal=False needs every token written (step = the number of tokens)."
# What an exercise's row depends on: a change to any of them starts a new try.
_ROW_TRAITS = (
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
    "step",
    "exercise",
)


class AttentionWidget(anywidget.AnyWidget):
    """One self-attention computation, in five stages, that a person can play with.

    ``AttentionWidget()`` shows the lab sentence "She sat by the river bank";
    ``AttentionWidget("any sentence")`` uses the built-in toy lexicon;
    ``AttentionWidget(["sentence one", "sentence two"])`` adds a switcher;
    ``AttentionWidget(tokens=..., q=..., k=..., v=...)`` shows your own arrays, which may
    carry several heads (heads × tokens × width).
    Scores, weights, outputs and metrics are read-only numpy properties for the current
    head, always consistent with the current traits.
    """

    # The bundle's text, not its path: anywidget watches a path (for hot reloading) with a
    # callback that keeps every widget alive. ANYWIDGET_HMR=1 asks for the path, in development.
    _esm, _css = (
        (_STATIC / "widget.js", _STATIC / "widget.css")
        if os.environ.get("ANYWIDGET_HMR")
        else ((_STATIC / "widget.js").read_text(encoding="utf-8"), (_STATIC / "widget.css").read_text(encoding="utf-8"))
    )

    temperature_range = (0.1, 5.0)
    stages = STAGES
    # Constants the page needs, sent from here so there is no copy to keep in step.
    _constants = traitlets.Dict({"stages": list(STAGES), "temperature_range": list(temperature_range), "row_traits": list(_ROW_TRAITS)}, read_only=True).tag(
        sync=True
    )

    tokens = Tokens().tag(**_TEXT_SYNC)
    # The columns' tokens: the same as tokens in self-attention; in cross-attention the text read
    # (a translation model's source), while tokens are the rows (the target).
    key_tokens = Tokens(read_only=True).tag(**_TEXT_SYNC)
    q = Matrix(heads=True).tag(**_ARRAY_SYNC)
    k = Matrix(heads=True).tag(**_ARRAY_SYNC)
    v = Matrix(heads=True).tag(**_ARRAY_SYNC)
    # Each token's own embedding (tokens × d_v): the blend stage can add the mix to it.
    x = Matrix(allow_none=True).tag(**_ARRAY_SYNC)
    residual = traitlets.Bool(False).tag(sync=True)
    # Cells a row may read besides the causal rule (n×n, True = may read), e.g. to leave out padding.
    mask = Mask().tag(sync=True, to_json=_mask_to_json, from_json=_mask_from_json)
    # Added to the scores, (heads ×) tokens × tokens: a model's position bias (T5, ALiBi), or None.
    bias = Matrix(heads=True, allow_none=True).tag(**_ARRAY_SYNC)
    temperature = traitlets.Float(1.0).tag(sync=True)
    focus = Index(0).tag(sync=True)
    stage = traitlets.Unicode("tokens").tag(sync=True)
    causal = traitlets.Bool(False).tag(sync=True)
    # Attention sinks: the first token's column left out and every row renormalised over the rest.
    sink = traitlets.Bool(False).tag(sync=True)
    scale = traitlets.Float(None, allow_none=True).tag(sync=True)
    head = Index(0).tag(sync=True)
    # The cell whose arithmetic is shown: (row, column), or None.
    cell = traitlets.Tuple(Index(), Index(), default_value=None, allow_none=True).tag(sync=True)
    # Sentences the page can switch between (empty for a single sentence or custom arrays).
    sentences = traitlets.List(traitlets.Unicode(), read_only=True).tag(**_TEXT_SYNC)
    sentence_index = Index(0).tag(sync=True)
    # Names of the two value axes in the blend plot (the built-in ones are senses of "bank").
    value_axes = traitlets.List(traitlets.Unicode(), default_value=["v₁", "v₂"]).tag(**_TEXT_SYNC)
    # Values wider than two are plotted on their first two principal axes: (heads ×) d_v × 2,
    # computed here with numpy whenever v changes; None when the values are already 2-D.
    value_basis = Matrix(heads=True, allow_none=True, read_only=True).tag(**_ARRAY_SYNC)
    # A real model's layers: the page offers a layer switcher when there are several.
    layer = Index(0).tag(sync=True)
    n_layers = traitlets.Int(0, read_only=True).tag(sync=True)
    # Every layer's arrays, (layers · heads) × tokens × width, sent to the page once: it switches
    # layers (and draws every layer's heads) by itself. layer_shown says q, k and v are the current
    # layer's (not your own arrays), so the page takes them from these.
    model_q = Matrix(heads=True, allow_none=True, read_only=True).tag(**_ARRAY_SYNC)
    model_k = Matrix(heads=True, allow_none=True, read_only=True).tag(**_ARRAY_SYNC)
    model_v = Matrix(heads=True, allow_none=True, read_only=True).tag(**_ARRAY_SYNC)
    model_basis = Matrix(heads=True, allow_none=True, read_only=True).tag(**_ARRAY_SYNC)
    layer_shown = traitlets.Bool(False, read_only=True).tag(sync=True)
    # The heads' overview coloured by one of head_summary()'s names ("" for none).
    summary = traitlets.Unicode("").tag(sync=True)
    model_name = traitlets.Unicode("", read_only=True).tag(sync=True, to_json=lambda value, widget: visible_text(value))
    # An encoder–decoder model's attention shown: "encoder", "decoder" or "cross" ("" for other widgets).
    block = traitlets.Unicode("").tag(sync=True)
    # Generation, one token at a time: how many tokens are written so far (1 to n; n shows them all).
    # Below n only the first `step` tokens exist (rows and keys), the causal rule is on, and the
    # numbers are those of that prefix.
    step = traitlets.Int(0).tag(sync=True)
    # Exercises: "predict" (spread a guess over the focused row's tokens, then reveal the real
    # row) or "temperature" (set T so the focused row has `goal` effective tokens); "" for none.
    exercise = traitlets.Unicode("").tag(sync=True)
    # The learner's guess at the focused row's weights (one per token read, summing to 1), or None.
    guess = traitlets.List(traitlets.Float(), default_value=None, allow_none=True).tag(sync=True)
    revealed = traitlets.Bool(False).tag(sync=True)
    # The temperature exercise's target: the effective tokens the focused row should reach.
    goal = traitlets.Float(2.0).tag(sync=True)

    def __init__(
        self,
        sentence=None,
        *,
        tokens=None,
        key_tokens=None,
        q=None,
        k=None,
        v=None,
        x=None,
        mask=None,
        bias=None,
        temperature=1.0,
        focus=None,
        stage=None,
        causal=None,
        sink=False,
        summary="",
        scale=None,
        head=0,
        cell=None,
        residual=False,
        sentence_index=0,
        value_axes=None,
        step=None,
        exercise="",
        goal=2.0,
    ):
        self._result = None
        self._examples = []
        self._layers, self._layer_tokens = [], ([], None)  # a model's layers, and their (tokens, key tokens)
        self._blocks = {}  # an encoder–decoder model's ModelAttention for each block
        self._own_keys = None  # cross-attention's key_tokens (the columns' own labels); None: the tokens
        self._shown = ()  # q, k, v as a layer switch set them: layer_shown while they are still these
        self._committed, self._page_keys = False, ()
        state = dict(
            temperature=temperature,
            causal=bool(causal),
            sink=sink,
            summary=summary,
            scale=scale,
            head=head,
            cell=cell,
            residual=residual,
            mask=mask,
            bias=bias,
            exercise=exercise,
            goal=goal,
        )
        if sentence is not None and any(a is not None for a in (tokens, key_tokens, q, k, v, x)):
            raise TypeError("Pass either a sentence or tokens/q/k/v arrays, not both.")
        if q is None and k is None and v is None:
            if tokens is not None or key_tokens is not None or x is not None:
                raise TypeError("tokens=, key_tokens= and x= need q=, k= and v= arrays too (or pass a sentence instead).")
            many = not isinstance(sentence, str) and sentence is not None
            if many and not (isinstance(sentence, (list, tuple)) and all(isinstance(t, str) for t in sentence)):
                raise TypeError(f"Pass a sentence as a string, or several as a list of strings; got {_kind(sentence)}.")
            texts = list(sentence) if many else [sentence]
            if many and not texts:
                raise ValueError("The list of sentences is empty: give at least one sentence.")
            self._examples = [examples.sentence_example(t) for t in texts]
            if not 0 <= sentence_index < len(texts):
                raise ValueError(f"sentence_index must be from 0 to {len(texts) - 1}, got {sentence_index}")
            ex = self._examples[sentence_index]
            state.update(tokens=ex.tokens, q=ex.q, k=ex.k, v=ex.v, x=ex.x, value_axes=value_axes or ex.value_axes)
            if many:
                # read-only for users; set before the traits that are checked against it
                self.set_trait("sentences", [" ".join(e.tokens) if t is None else t for e, t in zip(self._examples, texts)])
                state.update(sentence_index=sentence_index)
        elif q is None or k is None or v is None:
            missing = [name for name, a in (("q", q), ("k", k), ("v", v)) if a is None]
            raise TypeError(f"Custom vectors need q, k and v together; missing {', '.join(missing)}.")
        else:
            n = np.shape(q)[-2] if np.ndim(q) >= 2 else 0
            state.update(tokens=[str(i) for i in range(n)] if tokens is None else _token_list(tokens), q=q, k=k, v=v, x=x)
            m = np.shape(k)[-2] if np.ndim(k) >= 2 else 0
            if key_tokens is not None or m != n:  # cross-attention: the columns are other tokens
                self._own_keys = [str(j) for j in range(m)] if key_tokens is None else _token_list(key_tokens)
                if not self._own_keys:
                    raise ValueError("'key_tokens' must not be empty: give one string per row of k and v.")
            if value_axes is not None:
                state["value_axes"] = list(value_axes)
        if cell is not None and focus is not None and np.ndim(cell) == 1 and len(cell) == 2 and cell[0] != focus:
            raise ValueError(
                f"cell {tuple(cell)} is in row {cell[0]}, but focus is {focus}: a cell is shown in the focused row; pass focus={cell[0]}, or leave focus out."
            )
        state["focus"] = (cell[0] if cell is not None and np.ndim(cell) == 1 and len(cell) == 2 else 0) if focus is None else focus
        state["stage"] = STAGES[0] if stage is None else stage
        super().__init__(**state)
        self.set_trait("key_tokens", self.tokens if self._own_keys is None else self._own_keys)
        n = len(self.tokens)
        if step is not None and isinstance(step, int) and 0 < step < n:  # what was asked, said back if it cannot be
            if causal is False:
                raise ValueError(GENERATION_IS_CAUSAL + " Leave causal out with step=.")
            if focus is not None and focus >= step:
                raise ValueError(
                    f"focus {focus} is not written yet at step {step}: pass a focus from 0 to {step - 1}, or leave it out (the last token written)."
                )
        with self.hold_trait_notifications():
            self.step = n if step is None else step  # validated; the causal rule follows
            if step is not None and focus is None and cell is None:
                self.focus = self.step - 1  # the row the last token written added

    # --- validation: every message says what was wrong and what is expected ---

    @traitlets.validate(*_VECTORS)
    def _check_shapes(self, proposal):
        name, value = proposal["trait"].name, proposal["value"]
        cur = {n: self._trait_values.get(n) for n in _VECTORS}
        cur[name] = value
        tokens, key_tokens, q, k, v, x, mask, bias = (cur[n] for n in _VECTORS)
        if name in ("tokens", "key_tokens") and len(value) == 0:
            raise traitlets.TraitError(f"'{name}' must not be empty: give one string per row of {'q' if name == 'tokens' else 'k and v'}.")
        if bias is not None and (
            (self._own_keys is None and bias.shape[-1] != bias.shape[-2]) or (bias.ndim == 3 and q is not None and (q.ndim != 3 or len(bias) != len(q)))
        ):
            raise traitlets.TraitError(
                f"'bias' must be tokens × tokens, or heads × tokens × tokens with q's heads; got {bias.shape} beside q {None if q is None else q.shape}."
            )
        if mask is not None and self._own_keys is None and mask.shape[0] != mask.shape[1]:
            raise traitlets.TraitError(f"'mask' must be n×n booleans (True where a row may read), tokens × tokens; got shape {mask.shape}.")
        if name in ("q", "k", "bias") and q is not None and k is not None:
            self._check_overflow(q, k, self._trait_values.get("scale"), bias)
        arrays = {n: cur[n] for n in ("q", "k", "v") if cur[n] is not None}
        if len({a.ndim for a in arrays.values()}) > 1 or len({a.shape[0] for a in arrays.values() if a.ndim == 3}) > 1:
            told = ", ".join(f"{n} {a.shape}" for n, a in arrays.items())
            raise traitlets.TraitError(f"q, k and v must all be 2-D, or all 3-D with the same number of heads; got {told}.")
        if q is not None and k is not None and q.shape[-1] != k.shape[-1]:
            raise traitlets.TraitError(f"'q' and 'k' must have the same width (they are compared by dot product), got q {q.shape} and k {k.shape}.")
        rows = {
            n: (len(a) if n == "tokens" else a.shape[-2] if n in ("q", "bias") else a.shape[0])
            for n, a in (("tokens", tokens), ("q", q), ("x", x), ("mask", mask), ("bias", bias))
            if a is not None
        }
        cols = {
            n: (len(a) if n == "key_tokens" else a.shape[-1] if n in ("mask", "bias") else a.shape[-2])
            for n, a in (("key_tokens", key_tokens if self._own_keys is not None else None), ("k", k), ("v", v), ("mask", mask), ("bias", bias))
            if a is not None
        }
        if self._own_keys is None and len(set(rows.values()) | set(cols.values())) > 1:
            told = ", ".join(f"{n}: {c}" for n, c in rows.items()) + "".join(f", {n}: {c}" for n, c in cols.items() if n not in rows)
            if mask is not None or bias is not None:  # their columns count too
                told += "".join(f", {n} columns: {a.shape[-1]}" for n, a in (("mask", mask), ("bias", bias)) if a is not None)
            raise traitlets.TraitError(
                f"tokens, q, k, v (and x, mask, bias) must agree on the number of tokens, got {told}. "
                "To change the number of tokens, replace them together with set_vectors(tokens=, q=, k=, v=); "
                "for keys from another text (cross-attention), pass key_tokens= too."
            )
        for group, told, what in (
            (rows, "tokens, q (and x, mask and bias rows)", "rows (queries)"),
            (cols, "key_tokens, k, v (and mask and bias columns)", "columns (keys)"),
        ):
            if self._own_keys is not None and len(set(group.values())) > 1:
                raise traitlets.TraitError(
                    f"In cross-attention {told} must agree on the number of {what}, got "
                    + ", ".join(f"{n}: {c}" for n, c in group.items())
                    + ". Replace them together with set_vectors(tokens=, key_tokens=, q=, k=, v=)."
                )
        if x is not None and v is not None and x.shape[1] != v.shape[-1]:
            raise traitlets.TraitError(f"'x' must have the width of the values (the mix is added to it): v {v.shape}, x {x.shape}.")
        return value

    @traitlets.validate("temperature")
    def _check_temperature(self, proposal):
        t = proposal["value"]
        if not (np.isfinite(t) and t > 0):
            lo, hi = self.temperature_range
            raise traitlets.TraitError(f"'temperature' must be a finite number > 0 (the slider spans {lo} to {hi}), got {t}.")
        return t

    @traitlets.validate("scale")
    def _check_scale(self, proposal):
        s = proposal["value"]
        if s is not None and not (np.isfinite(s) and abs(s) <= 1e10):
            raise traitlets.TraitError(f"'scale' must be a finite number no larger than 1e10 in size, or None for 1/√d; got {s}.")
        q, k = self._trait_values.get("q"), self._trait_values.get("k")
        if q is not None and k is not None:
            self._check_overflow(q, k, s, self._trait_values.get("bias"))
        return s

    @staticmethod
    def _check_overflow(q, k, scale, bias=None):
        problem = overflow_message(q, k, scale, bias)
        if problem:
            raise traitlets.TraitError(problem)

    def _check_index(self, name, value, count, what):
        if not 0 <= value < count:
            raise traitlets.TraitError(f"'{name}' must be {what} from 0 to {count - 1}, got {value}.")
        return value

    @traitlets.validate("focus")
    def _check_focus(self, proposal):
        return self._check_index("focus", proposal["value"], self._rows(), "a token index" + self._so_far())

    def _rows(self) -> int:
        """How many tokens there are: all of them, or while generating the first `step`."""
        n = len(self.tokens)
        return self.step if 0 < self.step < n else n

    def _so_far(self) -> str:
        """Said in a refusal while generating: the later tokens are not written yet."""
        n = len(self.tokens)
        return f" written so far (step {self.step} of {n}: advance step to reach later tokens)" if 0 < self.step < n else ""

    @traitlets.validate("step")
    def _check_step(self, proposal):
        s, n = proposal["value"], len(self.tokens)
        if not 1 <= s <= n:
            raise traitlets.TraitError(f"'step' must be the number of tokens written so far, from 1 to {n} ({n} shows them all); got {s}.")
        if s < n and self._own_keys is not None:
            raise traitlets.TraitError(
                "'step' below the number of tokens is for self-attention (a text written one token at a time); in cross-attention set it to the number of tokens."
            )
        return s

    @traitlets.validate("exercise")
    def _check_exercise(self, proposal):
        if proposal["value"] not in EXERCISES:
            raise traitlets.TraitError(f"'exercise' must be one of {', '.join(map(repr, EXERCISES))} ('' for none); got {proposal['value']!r}.")
        return proposal["value"]

    @traitlets.validate("guess")
    def _check_guess(self, proposal):
        g = proposal["value"]
        if g is None:
            return g
        if self.exercise != "predict":
            raise traitlets.TraitError("'guess' belongs to the predict exercise: set exercise='predict' first.")
        a, m = np.asarray(g, dtype=float), self._keys_read()
        if len(a) != m:
            raise traitlets.TraitError(f"'guess' must have one weight per token the focused row reads ({m}), got {len(a)}.")
        if not np.isfinite(a).all() or (a < 0).any():
            raise traitlets.TraitError(f"'guess' must be finite weights ≥ 0; got {[float(x) for x in a]}.")
        if abs(a.sum() - 1) > 1e-6:
            raise traitlets.TraitError(
                f"'guess' must spend the whole budget: its weights must sum to 1 (within 1e-6), got {a.sum():.9g}. Divide it by its sum."
            )
        return [float(x) for x in a]

    @traitlets.validate("revealed")
    def _check_revealed(self, proposal):
        if proposal["value"] and not self.exercise:
            raise traitlets.TraitError("'revealed' belongs to an exercise: set exercise='predict' or 'temperature' first.")
        if proposal["value"] and self.exercise == "predict" and self.guess is None:
            raise traitlets.TraitError("Make a guess before revealing: set guess (one weight per token, summing to 1), or spread the bars in the page.")
        return proposal["value"]

    @traitlets.validate("goal")
    def _check_goal(self, proposal):
        g = proposal["value"]
        if not (np.isfinite(g) and g >= 1):
            raise traitlets.TraitError(f"'goal' is a number of effective tokens, at least 1 (one token takes the whole budget); got {g}.")
        return g

    def _keys_read(self) -> int:
        """How many tokens a row reads: the tokens written, or cross-attention's own."""
        return self._rows() if self._own_keys is None else self._n_keys()

    @traitlets.validate("head")
    def _check_head(self, proposal):
        return self._check_index("head", proposal["value"], self.n_heads, "a head index")

    @traitlets.validate("summary")
    def _check_summary(self, proposal):
        if proposal["value"] not in ("", *SUMMARIES):
            raise traitlets.TraitError(f"'summary' must be one of {', '.join(map(repr, SUMMARIES))}, or '' for none; got {proposal['value']!r}")
        return proposal["value"]

    def _n_keys(self) -> int:
        """How many tokens the rows read: the tokens themselves, or cross-attention's own."""
        return len(self.tokens if self._own_keys is None else self._own_keys)

    @traitlets.validate("block")
    def _check_block(self, proposal):
        b = proposal["value"]
        if b != "" if not self._blocks else b not in self._blocks:
            have = f"one of {', '.join(map(repr, self._blocks))}" if self._blocks else "'' (only an encoder–decoder model has blocks)"
            raise traitlets.TraitError(f"'block' must be {have}; got {b!r}.")
        return b

    @traitlets.validate("layer")
    def _check_layer(self, proposal):
        return self._check_index("layer", proposal["value"], max(1, self.n_layers), "a layer index")

    @traitlets.validate("sentence_index")
    def _check_sentence_index(self, proposal):
        return self._check_index("sentence_index", proposal["value"], max(1, len(self.sentences)), "a sentence index")

    @traitlets.validate("cell")
    def _check_cell(self, proposal):
        c, n, m = proposal["value"], self._rows(), self._keys_read()
        if c is not None and not (0 <= c[0] < n and 0 <= c[1] < m):
            span = f"both from 0 to {n - 1}" if n == m else f"row from 0 to {n - 1} and column from 0 to {m - 1}"
            raise traitlets.TraitError(f"'cell' must be (row, column) with {span}, or None; got {c}.")
        return c

    @traitlets.validate("residual")
    def _check_residual(self, proposal):
        if proposal["value"] and self.x is None:
            raise traitlets.TraitError("'residual' needs token embeddings: pass x= (tokens × value width) first.")
        return proposal["value"]

    @traitlets.validate("stage")
    def _check_stage(self, proposal):
        s = proposal["value"]
        if s not in STAGES:
            raise traitlets.TraitError(f"'stage' must be one of {', '.join(STAGES)}; got {s!r}.")
        return s

    # --- changes: validated together, the widget's own follow-ups settled, then one message ---

    @contextlib.contextmanager
    def hold_trait_notifications(self):
        """Every change made inside is applied whole or not at all.

        Validation runs on the final values together; the widget's own derived state (value
        basis, residual, fitted indices, a layer's or sentence's arrays) is settled before
        anyone is told; on any error every trait is put back exactly as it was. Then the page
        is sent one complete message (at once, unless an outer hold_sync gathers more), and
        then observers run: one that raises cannot stop the rest of them, nor the page, from
        seeing the change.
        """
        if self._cross_validation_lock:  # nested: the outermost one does the work
            yield
            return
        before, changed, kept = dict(self._trait_values), {}, (self._shown, self._own_keys, self._layers, self._layer_tokens)
        with self.hold_sync():
            self.notify_change = lambda change: changed.setdefault(change.name, change.old)
            self._cross_validation_lock = True
            try:
                yield
                try:
                    self._settle(before, set(changed))
                except traitlets.TraitError:
                    raise
                except Exception as err:  # numpy failing on values it was given: a refusal like any other
                    raise traitlets.TraitError(f"this change could not be applied ({type(err).__name__}: {err}); nothing was changed.") from err
                for name in list(changed):
                    getattr(type(self), name)._cross_validate(self, self._trait_values[name])
            except BaseException:
                for name in changed:  # every trait back to its value before, exactly
                    if name in before:
                        self._trait_values[name] = before[name]
                    else:
                        self._trait_values.pop(name, None)
                self._shown, self._own_keys, self._layers, self._layer_tokens = kept
                raise
            finally:
                self._cross_validation_lock = False
                del self.notify_change
            self._committed = True
            news = [(n, old, self._trait_values.get(n)) for n, old in changed.items()]
            news = [(n, old, new) for n, old, new in news if not _same(old, new)]
            # queued for the one message: every change, and every key the page sent whose value
            # is not the page's (ipywidgets compares each with what the page sent: no echoes)
            # a layer's own arrays are not sent: the page has every layer's (model_q, ...) already;
            # once they are not the layer's any more, the page needs all of them, not just the one changed
            layered = {"q", "k", "v", "value_basis"}
            extra = layered if before.get("layer_shown") and not self.layer_shown else set()
            for name in ({n for n, _, _ in news} | set(self._page_keys) | extra) - (layered if self.layer_shown else set()):
                if name in self.keys:
                    self._should_send_property(name, getattr(self, name))
        errors = []
        for name, old, new in news:
            if not _same(self._trait_values.get(name), new):
                continue  # an earlier observer changed it again, and that change told its own news
            try:
                # straight to the observers: ipywidgets' own notify_change would send it a second time
                traitlets.HasTraits.notify_change(self, traitlets.Bunch(name=name, old=old, new=new, owner=self, type="change"))
            except Exception as err:  # an observer's bug: the others still run
                errors.append(err)
        for other in errors[1:]:
            self.log.error("Another observer raised too: %r", other, exc_info=other)
        if errors:
            raise errors[0]

    def _whole(self, name):
        """The change one of the widget's own traits makes is a whole change (above); others, as they are."""
        own = name in _OWN_TRAITS and not self._cross_validation_lock
        return self.hold_trait_notifications() if own else contextlib.nullcontext()

    def __setattr__(self, name, value):
        with self._whole(name):
            super().__setattr__(name, value)

    def set_trait(self, name, value):  # set_trait skips only the read-only check
        with self._whole(name):
            super().set_trait(name, value)

    def _settle(self, before, changed):
        """The widget's own follow-ups to the changed traits, made before anyone is told."""
        values, asked = self._trait_values, set(changed)  # asked: what the change itself set
        # (an index out of range is left for validation to refuse, with its message)
        if "sentence_index" in changed and 0 <= self.sentence_index < len(self._examples):
            ex = self._examples[self.sentence_index]
            old_tokens = before.get("tokens") or []
            word = old_tokens[self.focus].lower() if self.focus < len(old_tokens) else None
            lowered = [t.lower() for t in ex.tokens]
            self._own_keys = None  # a sentence is self-attention, whatever set_vectors made before
            self.tokens, self.q, self.k, self.v, self.x = ex.tokens, ex.q, ex.k, ex.v, ex.x
            if word in lowered and "focus" not in changed:
                self.focus = lowered.index(word)  # the same word in the new sentence
            self.cell = None
        # (a block set while the widget is made is loaded already, with the rules it was given)
        if "block" in changed and self.block in self._blocks and before.get("block"):
            found = self._blocks[self.block]
            self._load(found)
            if "step" not in changed:
                self.step = len(self._layer_tokens[0])  # another text: shown written whole
            for name in ("causal", "scale", "bias"):  # the block's own rules, unless this change sets them
                if name not in changed:
                    setattr(self, name, getattr(found, name))
            if "layer" not in changed:
                self.layer = min(self.layer, self.n_layers - 1)  # the same layer, where the block has it
            changed = changed | {"layer"}
        if "layer" in changed and 0 <= self.layer < len(self._layers):
            self._show_layer(self.layer, basis="value_basis" not in changed)
            changed = changed | {"value_basis"}
        keys = self.tokens if self._own_keys is None else self._own_keys
        if keys and values.get("key_tokens") != keys:  # (none yet while the widget is being made)
            self.set_trait("key_tokens", keys)  # the columns' labels: the tokens themselves, unless cross-attention's own
        changed = changed | {n for n in _OWN_TRAITS if not _same(values.get(n), before.get(n))}
        n, m, x, v = len(self.tokens), len(keys), values.get("x"), values.get("v")
        if x is not None and "x" not in changed and v is not None and x.shape != (n, v.shape[-1]):
            self.x = None  # the embeddings no longer fit the new tokens or values
        if values.get("mask") is not None and "mask" not in changed and self.mask.shape != (n, m):
            self.mask = None  # a mask for other tokens
        b, q = values.get("bias"), self._trait_values.get("q")
        if b is not None and "bias" not in changed and (b.shape[-2:] != (n, m) or (b.ndim == 3 and (q.ndim != 3 or len(q) != len(b)))):
            self.bias = None  # a bias for other tokens, or other heads
        if self.x is None and self.residual and "residual" not in changed:
            self.residual = False  # nothing to add the mix to
        old_n, stepped = len(before.get("tokens") or []), "step" in asked
        if not stepped and n != old_n and (self.step == old_n or self.step > n):
            self.step = n  # every token written stays so; a step past the new tokens, the last
        if self._own_keys is not None and 0 < self.step < n and "step" not in asked:
            self.step = n  # cross-attention reads the whole source: written whole
        if "step" in changed and 0 < self.step < n:
            if not self.causal and "causal" in changed:
                raise traitlets.TraitError(GENERATION_IS_CAUSAL)
            self.causal = True  # a text written one token at a time: no token reads ahead
        elif "causal" in changed and not self.causal and 0 < self.step < n:
            raise traitlets.TraitError(GENERATION_IS_CAUSAL)
        if stepped and "focus" not in changed and (before.get("step") or self.focus >= self._rows()):
            self.focus = self._rows() - 1  # the row the new token adds
        n, m = self._rows(), self._keys_read()
        if n and "focus" not in asked and self.focus >= n:
            self.focus = n - 1  # (the same word in a new sentence may not be written yet)
        if "cell" not in changed and self.cell is not None and (self.cell[0] >= n or self.cell[1] >= m):
            self.cell = None
        # the cell shown is always in the focused row: the arcs and readout are about its reader
        if self.cell is not None and self.cell[0] != self.focus:
            if "cell" in changed and "focus" not in changed:
                self.focus = self.cell[0]
            else:
                self.cell = None
        if "head" not in changed and self.head >= self.n_heads:
            self.head = self.n_heads - 1
        if ("v" in changed and "value_basis" not in changed) or "value_basis" not in values:
            self.set_trait("value_basis", principal_axes(v))
        self.set_trait("layer_shown", self.model_q is not None and len(self._shown) == 3 and all(a is b for a, b in zip((self.q, self.k, self.v), self._shown)))
        # an exercise is about one row as it is: anything that changes that row starts a new try;
        # a new guess after a reveal is a new try too
        # (a guess sent with the change is for the new row, and is validated; one kept from before is
        # not; the temperature exercise's reveal sent with the slider's last value is of that value)
        kept = "guess" in asked or (self.exercise == "temperature" and "revealed" in asked and before.get("exercise") == "temperature")
        if (self.exercise or before.get("exercise")) and not kept and any(not _same(values.get(name), before.get(name)) for name in _ROW_TRAITS):
            self.guess, self.revealed = None, False
        elif "guess" in changed and "revealed" not in changed:
            self.revealed = False

    def set_state(self, sync_data):
        """Apply a message from the page, an untrusted source. Read-only, private, unknown and
        ipywidgets' own keys are refused, and so is a value that cannot be read or validated:
        a refused message changes nothing, and the page is put back on Python's state for the
        keys it sent. A value the widget settles otherwise (e.g. a cell outside the focused
        row) is sent back too."""
        # the widget's own writable traits: the page has no business with ipywidgets' layout and such
        writable = {n for n in _OWN_TRAITS if n in self.keys and not self.traits()[n].read_only}
        self._committed = False
        if JUPYTER_WIDGETS_ECHO:  # the page's own values, acknowledged first, as ipywidgets does
            echo, paths, buffers = _remove_buffers({k: v for k, v in sync_data.items() if k in self.keys})
            if echo:
                self._send({"method": "echo_update", "state": echo, "buffer_paths": paths}, buffers=buffers)
        try:
            refused = [k for k in sync_data if k not in writable]
            if refused:
                raise traitlets.TraitError(f"the page may not set {', '.join(map(repr, refused))} (read-only, private or unknown)")
            values = {k: self.trait_metadata(k, "from_json", self._trait_from_json)(v, self) for k, v in sync_data.items()}
            self._page_keys = list(values)
            with self._lock_property(**sync_data), self.hold_trait_notifications():
                for name, value in values.items():
                    setattr(self, name, value)
        except Exception as err:
            if self._committed:  # the change was made; an observer of it raised
                self.log.error("An observer raised on a change from the page (the change was kept): %r", err, exc_info=err)
            else:
                self.send_state([k for k in sync_data if k in self.keys])
                self.log.warning("attnwidget refused a message from the page: %s", err)
        finally:
            self._page_keys = ()

    def __del__(self, _finalizing=sys.is_finalizing):  # bound now: at exit the module's globals are gone
        # Closed widgets are freed, some only at interpreter exit, when ipywidgets' own registry
        # is already gone and its close() would fail: nothing is left to close then.
        if not _finalizing():
            super().__del__()

    def page_state(self) -> dict:
        """Everything a page with no kernel needs, as plain data: the synced traits as the page
        receives them (arrays in base64 where the live widget sends buffers), and the vectors
        behind every sentence and layer the page can switch to."""

        def encoded(values):
            out = {}
            for name, value in values.items():
                to_json = self.trait_metadata(name, "to_json")
                data = to_json(value, self) if to_json else value
                if isinstance(data, dict) and "view" in data:
                    data = {**data, "view": None, "base64": base64.b64encode(bytes(data["view"])).decode("ascii")}
                out[name] = data
            return out

        # a layer's own q, k, v and value axes are in the model's arrays already: not twice
        names = [n for n in self.keys if n in _OWN_TRAITS and not (self.layer_shown and n in ("q", "k", "v", "value_basis"))]
        variants: dict[str, object] = {}
        if len(self._examples) > 1:
            variants["sentence_index"] = [
                encoded(dict(tokens=e.tokens, key_tokens=e.tokens, q=e.q, k=e.k, v=e.v, x=e.x, value_basis=principal_axes(e.v))) for e in self._examples
            ]
        if self._layers:  # a layer brings the model's tokens back; its arrays are all in model_q, model_k, model_v
            tokens, keys = self._layer_tokens
            most = max([len(self._layers), *(len(f.layers) for f in self._blocks.values())])  # every block's layers
            variants["layer"] = [encoded(dict(tokens=tokens, key_tokens=keys or tokens, layer_shown=True))] * most
        if self._blocks:  # each block's tokens, rules and every layer's arrays (layer variants take their tokens from it)
            variants["block"] = {
                name: encoded(
                    dict(
                        tokens=f.tokens,
                        key_tokens=f.key_tokens or f.tokens,
                        causal=f.causal,
                        scale=f.scale,
                        bias=f.bias,
                        layer_shown=True,
                        # the block shown has its arrays in the state already: not twice
                        **(self._model_arrays(f) if name != self.block else {"n_layers": len(f.layers)}),
                    )
                )
                for name, f in self._blocks.items()
            }
        return {"state": encoded({n: getattr(self, n) for n in names}), "variants": variants}

    def _repr_mimebundle_(self, **kwargs):
        """The widget view, as anywidget gives it; with ATTNWIDGET_STATIC_HTML set (a docs
        build) also the widget as HTML that draws itself with no kernel (export.embed_html)."""
        bundle = super()._repr_mimebundle_(**kwargs)
        data = bundle[0] if isinstance(bundle, tuple) else bundle  # (data, metadata), or data alone
        if os.environ.get("ATTNWIDGET_STATIC_HTML") and isinstance(data, dict):
            from .export import embed_html

            data["text/html"] = embed_html(self.page_state())
        return bundle

    def _title(self, title):
        return visible_text(title or "Attention: " + " ".join(self.tokens)[:80])

    def to_html(self, path: str | os.PathLike | None = None, *, theme: str = "auto", title: str | None = None) -> str:
        """One self-contained HTML page of this widget (no kernel, no network); written to
        ``path`` when given, and returned. ``theme``: "auto", "light" or "dark"."""
        from .export import to_html

        return to_html(self.page_state(), path, theme=theme, title=self._title(title))

    def save_png(self, path: str | os.PathLike, *, scale: float = 2, theme: str = "light") -> None:
        """Save the current view as a PNG picture (for slides and papers), rendered headless;
        ``scale`` (0.25 to 8) times its on-screen size; ``theme`` "light" or "dark"."""
        from .export import save_png

        save_png(self.page_state(), path, scale=scale, theme=theme)

    def save_svg(self, path: str | os.PathLike, *, theme: str = "light") -> None:
        """Save the current view as a vector SVG picture, rendered headless; ``theme`` "light"
        or "dark". Text stays text and each matrix cell is a shape; a matrix of more than
        40 000 cells is embedded as one PNG image (see export.save_svg)."""
        from .export import save_svg

        save_svg(self.page_state(), path, theme=theme)

    def save_pdf(self, path: str | os.PathLike, *, theme: str = "light") -> None:
        """Save the current view as a one-page vector PDF, for LaTeX: the SVG picture, converted
        by CairoSVG (in the images extra)."""
        from .export import save_pdf

        save_pdf(self.page_state(), path, theme=theme)

    def set_vectors(self, *, tokens=_KEEP, key_tokens=_KEEP, q=_KEEP, k=_KEEP, v=_KEEP, x=_KEEP, mask=_KEEP, bias=_KEEP) -> None:
        """Replace tokens and vectors together (the number of tokens or heads may change).

        One message to the page; if any part is invalid nothing changes. ``x=None`` removes
        the embeddings (and the residual view); embeddings, a mask and a bias that no longer fit
        the new tokens (or heads) are removed too. Focus, head and cell are kept where they still
        fit and moved inside the new range otherwise. ``key_tokens`` labels the rows of k and v
        when they are another text's (cross-attention); ``key_tokens=None`` makes the widget
        self-attention again, its columns the tokens.
        """
        new = {n: a for n, a in zip(_VECTORS, (tokens, key_tokens, q, k, v, x, mask, bias)) if a is not _KEEP}
        for name in ("tokens", "key_tokens"):
            if new.get(name) is not None:
                new[name] = _token_list(new[name], traitlets.TraitError)
        with self.hold_trait_notifications():
            if "key_tokens" in new:  # read-only to users: the columns follow the own labels (settled)
                if new["key_tokens"] is not None and not new["key_tokens"]:
                    raise traitlets.TraitError("'key_tokens' must not be empty: give one string per row of k and v.")
                self._own_keys = new.pop("key_tokens")
            for name, value in new.items():
                setattr(self, name, value)

    @classmethod
    def from_transformers(
        cls,
        model,
        tokenizer,
        text: str,
        *,
        target: str | None = None,
        block: str = "cross",
        layer: int = 0,
        head: int = 0,
        generate: int = 0,
        **kwargs,
    ) -> AttentionWidget:
        """Every head of one layer of a Hugging Face model (BERT family, GPT-2, LLaMA-style,
        BLOOM and T5's encoder, whose position bias comes in as ``bias``).

        Q, K and V come from the model's own projections of that layer's input, so the
        widget's weights are the model's attention probabilities. ``layer`` can be switched
        afterwards, in Python or in the page.

        An encoder–decoder model (BART, mBART, Marian, T5) reads ``text`` and writes
        ``target``: ``block`` chooses its "encoder" self-attention (over the text), its
        "decoder" self-attention (over the target, causal) or its "cross"-attention (each
        target token reading the text: ``tokens`` are the target's, ``key_tokens`` the text's).

        ``generate=k`` lets a decoder-only model with a language-model head (GPT-2, LLaMA-style
        or BLOOM: ``GPT2LMHeadModel``, ``LlamaForCausalLM``, ...) write k more tokens after
        ``text``, greedily (fewer if it writes its end-of-text token). ``tokens`` are the
        prompt's followed by the written ones, and the widget starts at ``step`` = the prompt's
        length: each "next token" (or ``w.step += 1``) shows the next written token appear,
        with the numbers the model computed for that prefix. ``w.prompt_length`` (read it, do
        not set it) says how many tokens were the prompt's; without ``generate`` it is all of
        them (None for an encoder–decoder model).
        """
        from .integrations import from_transformers

        found = from_transformers(model, tokenizer, text, target=target, generate=generate)
        prompt = None if isinstance(found, dict) else found.prompt_length
        if prompt is not None:
            kwargs.setdefault("step", prompt)  # the prompt written: the model's own tokens come next
        return cls._from_model(found, layer, head, kwargs, block if isinstance(found, dict) else None)

    @classmethod
    def from_transformer_lens(cls, model, text: str, *, layer: int = 0, head: int = 0, **kwargs) -> AttentionWidget:
        """Every head of one layer of a TransformerLens ``HookedTransformer``."""
        from .integrations import from_transformer_lens

        return cls._from_model(from_transformer_lens(model, text), layer, head, kwargs)

    @classmethod
    def _from_model(cls, found, layer, head, kwargs, block=None):
        blocks = found if isinstance(found, dict) else {}
        if blocks:
            if block not in blocks:
                raise ValueError(f"block must be one of {', '.join(map(repr, blocks))}, got {block!r}")
            found = blocks[block]
        if not 0 <= layer < len(found.layers):
            raise ValueError(f"layer must be from 0 to {len(found.layers) - 1} for this model, got {layer}")
        kwargs.setdefault("causal", found.causal)
        kwargs.setdefault("scale", found.scale)
        if getattr(found, "bias", None) is not None:
            kwargs.setdefault("bias", found.bias)  # a position bias, the same in every layer
        q, k, v = found.layers[layer]
        w = cls(tokens=found.tokens, key_tokens=getattr(found, "key_tokens", None), q=q, k=k, v=v, head=head, **kwargs)
        with w.hold_trait_notifications():
            w.set_trait("model_name", found.model_name)
            w._blocks = blocks
            w._load(found)
            w.layer = layer
            w._show_layer(layer)
            if blocks:
                w.block = block
        w.prompt_length = None if blocks else getattr(found, "prompt_length", None) or len(found.tokens)  # tokens not the model's own
        return w

    @staticmethod
    def _model_arrays(found) -> dict:
        """A model's (or one block's) every layer's heads, stacked: sent to the page once."""
        arrays: dict[str, np.ndarray | None] = {name: np.concatenate([a[i] for a in found.layers]) for i, name in enumerate(("model_q", "model_k", "model_v"))}
        wide = found.layers[0][2].shape[-1] > 2  # values wider than the plot: their principal axes
        arrays["model_basis"] = np.concatenate([principal_axes(lv) for _, _, lv in found.layers]) if wide else None
        return {**arrays, "n_layers": len(found.layers)}

    def _load(self, found):
        """Take a model's layers (an encoder–decoder model's: one block's) as the layers shown."""
        for name, value in self._model_arrays(found).items():
            self.set_trait(name, value)
        # each layer's arrays: views of the widget's own stacked copies, not a second copy
        heads = len(self.model_q) // self.n_layers
        self._layers = [tuple(m[i * heads : (i + 1) * heads] for m in (self.model_q, self.model_k, self.model_v)) for i in range(self.n_layers)]
        keys = getattr(found, "key_tokens", None)
        self._layer_tokens = (list(found.tokens), None if keys is None else list(keys))

    def _show_layer(self, layer, basis=True):
        """q, k, v (and the value axes) of a model's layer; its tokens with them."""
        self.tokens, self._own_keys = self._layer_tokens  # the layer's arrays belong to the model's tokens
        self.q, self.k, self.v = self._layers[layer]
        self._shown = (self.q, self.k, self.v)  # the widget's own copies of them
        if basis and self.model_basis is not None:
            heads = len(self.model_basis) // len(self._layers)
            self.set_trait("value_basis", self.model_basis[layer * heads : (layer + 1) * heads])

    @traitlets.default("value_basis")
    def _value_basis_default(self):
        return principal_axes(self._trait_values.get("v"))

    # --- derived, read-only numpy views of the current head ---

    @property
    def n_heads(self) -> int:
        """How many heads q, k and v carry (1 for 2-D arrays)."""
        q = self._trait_values.get("q")
        return 1 if q is None or q.ndim == 2 else q.shape[0]

    def _head(self, a):
        return self._head_of(a, self.head)

    @staticmethod
    def _head_of(a, head):
        return a if a.ndim == 2 else a[min(head, a.shape[0] - 1)]

    @property
    def attention(self) -> Attention:
        """The full :class:`~attnwidget.Attention` result for the current state and head."""
        # Keyed on the inputs themselves (arrays by identity: each assignment stores a new one),
        # so even an observer called in the middle of set_vectors never sees stale numbers.
        key = (self.q, self.k, self.v, self.temperature, self.causal, self.scale, self.head, self.mask, self.sink, self.bias, self.step)
        cached = self._result
        if cached is None or not all(_same(a, b) for a, b in zip(cached[0], key)):
            n, m = self._rows(), self._keys_read()  # while generating: the tokens written so far
            q, k, v = (self._head(a)[:r] for a, r in zip(key[:3], (n, m, m)))
            bias = None if self.bias is None else self._head(self.bias)[:n, :m]
            mask = self._reading_mask()
            cached = self._result = (
                key,
                Attention(q, k, v, temperature=self.temperature, causal=self.causal, scale=self.scale, mask=None if mask is None else mask[:n, :m], bias=bias),
            )
        return cached[1]

    def _reading_mask(self):
        """The cells the numbers let rows read besides the causal rule: the mask, and with
        ``sink`` every cell of the first token's column closed (so each row is renormalised
        over the other tokens)."""
        if not self.sink:
            return self.mask
        closed = np.ones((len(self.tokens), self._n_keys()), dtype=bool) if self.mask is None else np.array(self.mask, dtype=bool)
        closed[:, 0] = False
        return closed

    def head_summary(self) -> dict[str, np.ndarray]:
        """One number per layer and head for each of ``"first"`` (the weight on token 0),
        ``"self"``, ``"previous"`` (the weight on token i − 1) and ``"effective_tokens"``:
        arrays of layers × heads (one row when the widget has no model layers), computed with
        numpy at the current temperature, causal rule, mask and ``sink`` (with which no row
        reads token 0, and ``"first"`` is NaN). Each is a mean over the rows
        where it exists (see :func:`attnwidget.core.head_summaries`), so a causal model's
        ``"previous"`` leaves out the first row, which has no previous token; in cross-attention
        no row reads itself, and ``"self"`` and ``"previous"`` are NaN. A new dict of new
        arrays every call."""
        layers = self._layers if self.layer_shown else [(self.q, self.k, self.v)]  # a model's, or your own arrays
        n, m = self._rows(), self._keys_read()  # while generating: the tokens written so far
        mask = self._reading_mask()
        allowed = allowed_cells(n, self.causal, None if mask is None else mask[:n, :m], m)
        rows = []
        for q, k, _ in layers:
            q, k = (a[..., :r, :] if a.ndim == 3 else a[None, :r] for a, r in ((q, n), (k, m)))
            bias = [None if self.bias is None else self._head_of(self.bias, h)[:n, :m] for h in range(len(q))]
            weights = np.stack([_softmax_rows(scores_of(q[h], k[h], self.scale, bias[h]), self.temperature, allowed) for h in range(len(q))])
            rows.append(head_summaries(weights, allowed, cross=self.key_tokens != self.tokens))  # the page's rule too
        return {name: np.array([r[name] for r in rows], dtype=float) for name in rows[0]}

    def _frozen(self, a):
        a = np.asarray(a)
        a.setflags(write=False)
        return a

    @property
    def scores(self) -> np.ndarray:
        """scale·QKᵀ (n×n), before temperature and mask."""
        return self._frozen(self.attention.scores)

    @property
    def weights(self) -> np.ndarray:
        """Row-wise softmax of scores / temperature (n×n); rows read, columns are read from."""
        return self._frozen(self.attention.weights)

    @property
    def output(self) -> np.ndarray:
        """The mix, weights · V (n×d_v)."""
        return self._frozen(self.attention.output)

    @property
    def residual_output(self) -> np.ndarray | None:
        """x + weights · V: each token's own embedding with the mix added (None without x)."""
        return None if self.x is None else self._frozen(self.x[: self._rows()] + self.attention.output)

    @property
    def effective_tokens(self) -> np.ndarray:
        return self._frozen(self.attention.effective_tokens)

    @property
    def sense_resolved(self) -> np.ndarray:
        return self._frozen(self.attention.sense_resolved)

    @property
    def output_spread(self) -> float:
        return self.attention.output_spread

    @property
    def score(self) -> float | None:
        """How close the exercise came, from 0 to 1, once revealed (None before): for "predict"
        ``1 − ½·Σ|guess − weights[focus]|`` (1 = the real row, 0 = no weight in common); for
        "temperature" ``1 − |effective_tokens[focus] − goal| / goal``, at least 0."""
        if not self.revealed:
            return None
        if self.exercise == "predict" and self.guess is not None:
            return float(1 - 0.5 * np.abs(np.asarray(self.guess) - self.weights[self.focus]).sum())
        if self.exercise == "temperature":
            return max(0.0, 1 - abs(float(self.effective_tokens[self.focus]) - self.goal) / self.goal)
        return None

    @property
    def cell_arithmetic(self) -> dict | None:
        """The steps from q·k to the weight and its share of the output for ``cell`` (None when no cell)."""
        return None if self.cell is None else self.attention.cell(*self.cell)


# The traits AttentionWidget adds: assigning one is a whole change (hold_trait_notifications).
_OWN_TRAITS = frozenset(AttentionWidget.class_trait_names()) - frozenset(anywidget.AnyWidget.class_trait_names())


def _same(a, b) -> bool:
    """Unchanged: the same array object (each assignment stores a new one), or an equal value."""
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return a is b
    return type(a) is type(b) and a == b


def _kind(value) -> str:
    return f"a {type(value).__name__}" + (f" ({value!r:.40})" if isinstance(value, (int, float, dict)) else "")


def _token_list(tokens, error=TypeError) -> list:
    """One string per token, in order; a single string would silently become its characters,
    a dict its keys and a set an arbitrary order."""
    if isinstance(tokens, (str, bytes)):
        raise error(f"tokens must be a list with one string per token, got the single string {tokens!r:.40}; pass tokens=text.split() or tokens=[text].")
    if isinstance(tokens, (dict, set, frozenset)):
        raise error(f"tokens must be a list with one string per token, in order; got {_kind(tokens)}.")
    try:
        return list(tokens)
    except TypeError:
        raise error(f"tokens must be a list with one string per token, got {_kind(tokens)}.") from None
