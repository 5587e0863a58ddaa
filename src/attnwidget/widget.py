"""AttentionWidget: the synced state, its validation, and numpy-derived read-only views."""

from __future__ import annotations

import pathlib

import anywidget
import numpy as np
import traitlets

from . import examples
from .core import Attention

_STATIC = pathlib.Path(__file__).parent / "static"
STAGES = ("tokens", "qk", "scores", "weights", "blend")


def _array_to_json(a, widget):
    """numpy -> {shape, dtype, view}: one binary buffer on the wire, never a JSON list."""
    if a is None:
        return None
    a = np.ascontiguousarray(a, dtype=np.float32)
    return {"shape": list(a.shape), "dtype": "float32", "view": memoryview(a.reshape(-1))}


def _array_from_json(value, widget):
    if value is None:
        return None
    dtype = np.dtype(value.get("dtype", "float32"))
    return np.frombuffer(value["view"], dtype=dtype).reshape(value["shape"]).astype(float)


_ARRAY_SYNC = {"sync": True, "to_json": _array_to_json, "from_json": _array_from_json}


class Matrix(traitlets.TraitType):
    """A non-empty, finite, real 2-D float array (tokens × width), stored read-only."""

    default_value = None
    info_text = "a non-empty 2-D array of finite real numbers (tokens × width)"

    def validate(self, obj, value):
        name = f"'{self.name}'"
        if isinstance(value, (str, bytes)):
            raise traitlets.TraitError(f"{name} must be an array of numbers, got text")
        try:
            a = np.asarray(value)
        except Exception as err:  # ragged lists and the like
            raise traitlets.TraitError(f"{name} could not be read as an array: {err}") from None
        if a.dtype == object or not (np.issubdtype(a.dtype, np.number) or a.dtype == bool):
            raise traitlets.TraitError(f"{name} must hold real numbers, got dtype {a.dtype}")
        if np.iscomplexobj(a):
            raise traitlets.TraitError(f"{name} must hold real numbers, got complex values; pass the real part (np.real) if that is what you mean")
        if a.ndim != 2:
            raise traitlets.TraitError(f"{name} must be 2-D (tokens × width), got {a.ndim}-D with shape {a.shape}")
        if 0 in a.shape:
            raise traitlets.TraitError(f"{name} must not be empty, got shape {a.shape}")
        a = np.array(a, dtype=float)  # a private copy: later edits to the caller's array cannot reach the widget
        if not np.isfinite(a).all():
            bad = np.argwhere(~np.isfinite(a))[0]
            raise traitlets.TraitError(f"{name} must be finite; found {a[tuple(bad)]} at row {bad[0]}, column {bad[1]}")
        a.setflags(write=False)
        return a


class AttentionWidget(anywidget.AnyWidget):
    """One self-attention computation, in five stages, that a person can play with.

    ``AttentionWidget()`` shows the lab sentence "She sat by the river bank";
    ``AttentionWidget(tokens=..., q=..., k=..., v=...)`` shows your own arrays.
    Scores, weights, outputs and metrics are read-only numpy properties, always
    consistent with the current traits.
    """

    _esm = _STATIC / "widget.js"
    _css = _STATIC / "widget.css"

    temperature_range = (0.1, 5.0)
    stages = STAGES

    tokens = traitlets.List(traitlets.Unicode()).tag(sync=True)
    q = Matrix().tag(**_ARRAY_SYNC)
    k = Matrix().tag(**_ARRAY_SYNC)
    v = Matrix().tag(**_ARRAY_SYNC)
    temperature = traitlets.Float(1.0).tag(sync=True)
    focus = traitlets.Int(0).tag(sync=True)
    stage = traitlets.Unicode("tokens").tag(sync=True)
    causal = traitlets.Bool(False).tag(sync=True)
    scale = traitlets.Float(None, allow_none=True).tag(sync=True)
    # Names of the two value axes in the blend plot (the lab's are senses of "bank").
    value_axes = traitlets.List(traitlets.Unicode(), default_value=["v₁", "v₂"]).tag(sync=True)

    def __init__(
        self,
        sentence=None,
        *,
        tokens=None,
        q=None,
        k=None,
        v=None,
        temperature=1.0,
        focus=None,
        stage=None,
        causal=False,
        scale=None,
        value_axes=None,
    ):
        if sentence is not None and any(x is not None for x in (tokens, q, k, v)):
            raise TypeError("Pass either a sentence or tokens/q/k/v arrays, not both.")
        if q is None and k is None and v is None:
            if tokens is not None:
                raise TypeError("tokens= needs q=, k= and v= arrays too (or pass a sentence instead).")
            ex = examples.sentence_example(sentence)
            tokens, q, k, v = ex.tokens, ex.q, ex.k, ex.v
            value_axes = value_axes or ex.value_axes
        elif q is None or k is None or v is None:
            missing = [name for name, x in (("q", q), ("k", k), ("v", v)) if x is None]
            raise TypeError(f"Custom vectors need q, k and v together; missing {', '.join(missing)}.")
        elif tokens is None:
            tokens = [str(i) for i in range(np.shape(q)[0])]
        self._result = None
        state = dict(tokens=list(tokens), q=q, k=k, v=v, temperature=temperature, causal=causal, scale=scale)
        state["focus"] = 0 if focus is None else focus
        state["stage"] = STAGES[0] if stage is None else stage
        if value_axes is not None:
            state["value_axes"] = list(value_axes)
        super().__init__(**state)

    # --- validation: every message says what was wrong and what is expected ---

    @traitlets.validate("tokens", "q", "k", "v")
    def _check_shapes(self, proposal):
        name, value = proposal["trait"].name, proposal["value"]
        cur = {n: self._trait_values.get(n) for n in ("tokens", "q", "k", "v")}
        cur[name] = value
        tokens, q, k, v = cur["tokens"], cur["q"], cur["k"], cur["v"]
        if name == "tokens" and len(value) == 0:
            raise traitlets.TraitError("'tokens' must not be empty: give one string per row of q, k and v.")
        if q is not None and k is not None and q.shape[1] != k.shape[1]:
            raise traitlets.TraitError(
                f"'q' and 'k' must have the same width (they are compared by dot product), "
                f"got q {q.shape} and k {k.shape}."
            )
        counts = {n: (len(x) if n == "tokens" else x.shape[0]) for n, x in cur.items() if x is not None}
        if len(set(counts.values())) > 1:
            told = ", ".join(f"{n}: {c}" for n, c in counts.items())
            raise traitlets.TraitError(
                f"tokens, q, k and v must agree on the number of tokens, got {told}. "
                "To change the number of tokens, replace them together with set_vectors(tokens=, q=, k=, v=)."
            )
        return value

    @traitlets.validate("temperature")
    def _check_temperature(self, proposal):
        t = proposal["value"]
        if not (np.isfinite(t) and t > 0):
            lo, hi = self.temperature_range
            raise traitlets.TraitError(
                f"'temperature' must be a finite number > 0 (the slider spans {lo} to {hi}), got {t}."
            )
        return t

    @traitlets.validate("scale")
    def _check_scale(self, proposal):
        s = proposal["value"]
        if s is not None and not np.isfinite(s):
            raise traitlets.TraitError(f"'scale' must be a finite number, or None for 1/√d, got {s}.")
        return s

    @traitlets.validate("focus")
    def _check_focus(self, proposal):
        i, n = proposal["value"], len(self.tokens)
        if not 0 <= i < n:
            raise traitlets.TraitError(f"'focus' must be a token index from 0 to {n - 1}, got {i}.")
        return i

    @traitlets.validate("stage")
    def _check_stage(self, proposal):
        s = proposal["value"]
        if s not in STAGES:
            raise traitlets.TraitError(f"'stage' must be one of {', '.join(STAGES)}; got {s!r}.")
        return s

    def set_vectors(self, *, tokens=None, q=None, k=None, v=None):
        """Replace tokens and vectors together (the number of tokens may change).

        One message to the page; if any part is invalid nothing changes.
        """
        new = {n: x for n, x in (("tokens", tokens), ("q", q), ("k", k), ("v", v)) if x is not None}
        if tokens is not None:
            new["tokens"] = list(tokens)
        n = len(new["tokens"]) if "tokens" in new else None
        with self.hold_sync(), self.hold_trait_notifications():
            for name, value in new.items():
                setattr(self, name, value)
            if n is not None and self.focus >= n:
                self.focus = n - 1

    # --- derived, read-only numpy views ---

    @traitlets.observe("q", "k", "v", "temperature", "causal", "scale")
    def _invalidate(self, change):
        self._result = None

    @property
    def attention(self) -> Attention:
        """The full :class:`~attnwidget.Attention` result for the current state."""
        if self._result is None:
            self._result = Attention(self.q, self.k, self.v, temperature=self.temperature, causal=self.causal, scale=self.scale)
        return self._result

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
        """weights · V (n×d_v)."""
        return self._frozen(self.attention.output)

    @property
    def effective_tokens(self) -> np.ndarray:
        return self._frozen(self.attention.effective_tokens)

    @property
    def sense_resolved(self) -> np.ndarray:
        return self._frozen(self.attention.sense_resolved)

    @property
    def output_spread(self) -> float:
        return self.attention.output_spread
