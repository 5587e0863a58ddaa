"""AttentionWidget: the widget made of its state and its parts, and how a change settles.

Its state is declared in state.py (each field's kind, default, travel and docstring), whose traits
traits.declared makes. Its other parts are classes it is made of, each in a module of its own: the numbers of the head
shown (shown.py), the views across layers, heads and texts and the page's requests for them
(research.py), the constructors from models (from_models.py), and what a live page gets
(live.py). The rules that follow a change live in rules/ (and, the same, in js/rules.js); the trait types
and codecs in traits.py; the whole-change machinery in sync.py; what a live page gets and asks in
live.py; what a widget can switch to in sources.py; what every computed view is computed from in
inputs.py, and the views themselves in computed_views.py; the exported page's data in payload.py; the
numbers in formulas.py and mixing.py.
"""

from __future__ import annotations

import difflib
import inspect
import os
import pathlib
from typing import TYPE_CHECKING, Any

import numpy as np
import traitlets

from . import computed_views, dense, rules, traits
from .from_models import FromModels
from .inputs import Inputs
from .live import LivePage, _on_page_message  # noqa: F401  (tests speak to the page's handler)
from .payload import page_payload
from .research import Research
from .rules import BLOCKS, EXERCISES, GENERATION_IS_CAUSAL, STAGES  # noqa: F401  (names users import from here)
from .shown import Shown
from .sources import opening
from .state import BY_NAME, INIT
from .sync import WholeChanges
from .traits import token_list, visible_text

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from .parts import Widget
    from .state_types import Options

    _State = WholeChanges
else:  # every field's trait (state.py), on the whole-change machinery
    _State = type("_State", (WholeChanges,), traits.declared())

__all__ = ["AttentionWidget", "visible_text"]

_STATIC = pathlib.Path(__file__).parent / "static"
_VECTORS = ("tokens", "key_tokens", "q", "k", "v", "x", "mask", "bias")
_KEEP = object()  # set_vectors: "leave this one as it is"
# the constructor's arguments it decides from the others: the text's (sources.opening), the focus, stage and step
_CHOSEN = ("tokens", "key_tokens", "q", "k", "v", "x", "value_axes", "sentence_index", "focus", "stage", "step")
# a keyword not given: its declared default, or None where the widget chooses (from the other arguments)
_UNSET = {n: None if n in _VECTORS or BY_NAME[n].init_none else BY_NAME[n].default for n in INIT}


class AttentionWidget(Research, FromModels, Shown, LivePage, _State):
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

    temperature_range = rules.TEMPERATURE_RANGE
    stages = STAGES
    _constants = traitlets.Dict({**rules.CONSTANTS, "views": computed_views.VIEWS_FOR_PAGE}, read_only=True).tag(
        sync=True
    )
    """The names and limits the page's rules need (rules.CONSTANTS), and each computed view's key, sign and trait
    (computed_views.py): sent from here, so there is no copy to keep in step."""

    dense_limit: int = dense.LIMIT
    """The most query tokens, or key tokens, whose whole matrices the widget computes (4096 by default:
    134 MB a tokens × keys matrix of float64, n × m × 8 bytes; the widget and its page make several).
    A widget of more (own arrays, a sentence, a model's text, any of its texts or blocks) is refused with
    ValueError, and so is a change that brings in more (set_vectors, another sentence, layer or block),
    the widget kept as it was; for long texts use :class:`attnwidget.LongAttention` (docs/long.md) and
    its page, ``attnwidget.LongWidget``. Set it on the class for every widget
    (``AttentionWidget.dense_limit = 8192``) or on one widget (``w.dense_limit = 8192``). Lowered below
    a widget's size, everything computed from its whole matrices refuses the same way rather than
    computing them (``weights``, ``scores``, ``output``, ``effective_tokens``, ``cell_arithmetic``,
    ``rollout()``, ``flow()``, ``norms()``, ``head_summary()``, ``head_scores()``, ``difference()``,
    an exported page, and the views the page asks for), even those of one row or one cell, which are
    read from the whole matrix; the tokens, arrays and settings stay, and a change that brings in no
    arrays is taken. While a text is written (``step``), the tokens written so far are counted."""

    def __init__(self, sentence=None, **options: Unpack[Options]):
        unknown = sorted(set(options) - set(INIT))
        if unknown:
            near = difflib.get_close_matches(unknown[0], INIT, n=1)
            raise TypeError(
                f"AttentionWidget() got an unexpected keyword argument {unknown[0]!r}"
                + (f": did you mean {near[0]!r}?" if near else f"; it takes {', '.join(INIT)}.")
            )
        asked: dict[str, Any] = {
            n: options.get(n, None if n in _VECTORS or BY_NAME[n].init_none else BY_NAME[n].default) for n in INIT
        }
        focus, cell, step = asked["focus"], asked["cell"], asked["step"]
        self._start_research()
        state = {n: asked[n] for n in INIT if n not in _CHOSEN} | {"causal": bool(asked["causal"])}
        arrays = {n: asked[n] for n in ("tokens", "key_tokens", "q", "k", "v", "x")}
        self._sources, given, sentences, own_keys = opening(
            sentence, arrays, asked["value_axes"], asked["sentence_index"]
        )
        n = max([len(given["tokens"]), *(len(e.tokens) for e in self._sources.examples)])  # (any text it switches to)
        dense.check("AttentionWidget", n, n if own_keys is None else len(own_keys), self.dense_limit, made=False)
        state.update(given)
        if cell is not None and focus is not None and np.ndim(cell) == 1 and len(cell) == 2 and cell[0] != focus:
            raise ValueError(
                f"cell {tuple(cell)} is in row {cell[0]}, but focus is {focus}: a cell is shown in the focused row; "
                f"pass focus={cell[0]}, or leave focus out."
            )
        state["focus"] = (
            (cell[0] if cell is not None and np.ndim(cell) == 1 and len(cell) == 2 else 0) if focus is None else focus
        )
        state["stage"] = STAGES[0] if asked["stage"] is None else asked["stage"]
        # read-only for users, and checked against by the rest: in place before the first change
        self._preset(
            sentences=sentences,
            text_lengths=[len(e.tokens) for e in self._sources.examples] if sentences else [],
            cross=own_keys is not None,
            key_tokens=own_keys,
            q=None,
            k=None,
            v=None,
            step=None,
        )
        super().__init__()  # the comm opens on the defaults; everything given arrives as one change
        n = len(state["tokens"])
        if step is not None and rules._is_int(step) and 0 < step < n:  # what was asked, said back if it cannot be
            if asked["causal"] is False:
                raise ValueError(GENERATION_IS_CAUSAL + " Leave causal out with step=.")
            if focus is not None and focus >= step:
                raise ValueError(
                    f"focus {focus} is not written yet at step {step}: pass a focus from 0 to {step - 1}, "
                    "or leave it out (the last token written)."
                )
        try:
            with self.hold_trait_notifications():
                for name, value in state.items():
                    setattr(self, name, value)
                if step is not None:
                    self.step = step  # checked; the causal rule follows
                    if focus is None and cell is None and rules._is_int(step):
                        self.focus = max(0, step - 1)  # the row the last token written added
        except BaseException:
            self.close()
            raise

    # --- every change: the rules settle it (rules/), then one message (sync.py) ---

    @classmethod
    def _plain(cls, values) -> dict:
        """The state as the rules see it: every field, its default where it was never set."""
        traits = cls.class_traits()
        return {n: values[n] if n in values else traits[n].default() for n in rules.FIELDS}

    def _settle(self: Widget, before, changed, values):
        state, asked = self._plain(before), [n for n in changed if n in rules.FIELDS]
        text, lengths = values.get("sentence_index"), state["text_lengths"]
        if "sentence_index" in asked and rules._is_int(text) and 0 <= text < len(lengths):  # (before a model reads it)
            dense.check(f"Text {text}", lengths[text], lengths[text], self.dense_limit)
        after = rules.settle_checked(state, {n: values[n] for n in asked}, self._sources)
        if any(not rules.same(after[n], state[n]) for n in ("tokens", "key_tokens", "q", "k", "v")):
            n, m = len(after["tokens"]), len(after["key_tokens"] or after["tokens"])  # (all of them: step may grow)
            dense.check("AttentionWidget", n, m, self.dense_limit)
        current = self._plain(values)
        for name, value in after.items():
            if not rules.same(value, current[name]):
                values[name] = value
        values["layer_arrays"] = (
            [after["block"], after["layer"], min(after["head"], len(after["q"]) - 1)] if after["layer_shown"] else None
        )
        if after["n_layers"] and after["sentence_index"] != state["sentence_index"]:
            self._sources.show(after["block"], after["sentence_index"])
            self._text_switched()
        # the views computed here: an answer for the state before is out of date (the page asks again)
        if values.get("overview") is not None and computed_views.stale("overview", state, after):
            values["overview"] = None
        held = values.get("measure_data") or {}
        if any(computed_views.stale(name, state, after) for name in held):
            values["measure_data"] = None
        held = values.get("computed") or {}
        if any(computed_views.stale(name, state, after) for name in held):
            values["computed"] = {n: a for n, a in held.items() if not computed_views.stale(n, state, after)} or None
        values["measures"], values["offered_measures"] = (
            computed_views.available(Inputs(after, self._sources)),
            computed_views.offered(after),
        )
        if after["summary"] != state["summary"]:
            self._new_summary(after["summary"], values)

    def page_state(self: Widget, layers=None, budget: float = 50e6) -> dict:
        """Everything a page with no kernel needs, as plain data (the payload, payload.py): a
        model's every layer while under ``budget`` bytes, else those ``layers`` names (to_html)."""
        self._dense_check("An exported page (page_state, to_html, save_png, save_svg, save_pdf)")  # (it computes them)
        kept = self._effects_kept()
        if self.summary == "effect" and kept is not None and self._effect_key() not in self._effects:
            self.head_effects(self._effect_mode)  # shown coloured by them: every head exact (a forward pass per layer)
        effects = self._effects.get(self._effect_key()) if kept is not None else None
        return page_payload(self, self._inputs(), self._own, effects, layers, budget)

    def _repr_mimebundle_(self, **kwargs):
        """The widget view, as anywidget gives it, and a ``text/html`` copy for pages without the
        widget's script: with ATTNWIDGET_STATIC_HTML set (a docs build, a course page) the widget as
        HTML that draws itself with no kernel (export.embed_html), otherwise one line on how to get
        the live page, under a picture of it with ATTNWIDGET_PICTURES set (export.plain_html)."""
        self._answer(
            "overview", begin=False
        )  # a small one goes with the widget; a larger one is begun, a very large one when asked
        bundle = super()._repr_mimebundle_(**kwargs)
        data = bundle[0] if isinstance(bundle, tuple) else bundle  # (data, metadata), or data alone
        if isinstance(data, dict):
            from .export import embed_html, plain_html

            if os.environ.get("ATTNWIDGET_STATIC_HTML"):
                data["text/html"] = embed_html(self.page_state())
            else:
                data["text/html"] = plain_html(self.page_state if os.environ.get("ATTNWIDGET_PICTURES") else None)
        return bundle

    def _title(self: Widget, title):
        return visible_text(title or "Attention: " + " ".join(self.tokens)[:80])

    def to_html(
        self,
        path: str | os.PathLike | None = None,
        *,
        theme: str = "auto",
        title: str | None = None,
        layers=None,
        max_mb: float = 50,
    ) -> str | None:
        """One self-contained HTML page of this widget (no kernel, no network): written to
        ``path`` when given (returning None, so a notebook cell ending in it prints nothing), else
        returned as a string. ``theme``: "auto", "light" or "dark".

        A model's page holds the layers ``layers`` names (and the one shown); without ``layers``,
        every layer while it stays under ``max_mb`` megabytes, otherwise the layer shown and those
        nearest it that fit. A page that holds some layers says which, shows every layer's
        overview as exported, and switches only between the layers it holds."""
        from .export import to_html

        return to_html(self.page_state(layers=layers, budget=max_mb * 1e6), path, theme=theme, title=self._title(title))

    def save_png(self, path: str | os.PathLike, *, scale: float = 2, theme: str = "light") -> None:
        """Save the current view as a PNG picture (for slides and papers), rendered headless;
        ``scale`` (0.25 to 8) times its on-screen size; ``theme`` "light" or "dark"."""
        from .export import save_png

        save_png(self.page_state, path, scale=scale, theme=theme)

    def save_svg(self, path: str | os.PathLike, *, theme: str = "light") -> None:
        """Save the current view as a vector SVG picture, rendered headless; ``theme`` "light"
        or "dark". Text stays text and each matrix cell is a shape; a matrix of more than
        40 000 cells is embedded as one PNG image (see export.save_svg)."""
        from .export import save_svg

        save_svg(self.page_state, path, theme=theme)

    def save_pdf(self, path: str | os.PathLike, *, theme: str = "light") -> None:
        """Save the current view as a one-page vector PDF, for LaTeX: the SVG picture, converted
        by CairoSVG (in the images extra)."""
        from .export import save_pdf

        save_pdf(self.page_state, path, theme=theme)

    def set_vectors(
        self: Widget, *, tokens=_KEEP, key_tokens=_KEEP, q=_KEEP, k=_KEEP, v=_KEEP, x=_KEEP, mask=_KEEP, bias=_KEEP
    ) -> None:
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
                new[name] = token_list(new[name], traitlets.TraitError)
        if new.get("key_tokens") == []:
            raise traitlets.TraitError("'key_tokens' must not be empty: give one string per row of k and v.")
        count = len(self.tokens)
        with self.hold_trait_notifications():
            for name, value in new.items():
                self.set_trait(name, value)  # key_tokens is read-only to users: here the columns' own labels
            if self.image is not None and len(self.tokens) != count:
                self.set_trait("image", None)  # other tokens: no longer the image's patches


# The constructor's keywords as help() and a notebook's call tips show them: the declared ones (state.INIT).
AttentionWidget.__init__.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
    [
        inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD),
        inspect.Parameter("sentence", inspect.Parameter.POSITIONAL_OR_KEYWORD, default=None),
        *(inspect.Parameter(n, inspect.Parameter.KEYWORD_ONLY, default=_UNSET[n]) for n in INIT),
    ]
)
