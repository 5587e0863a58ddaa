"""AttentionWidget: the synced traits, each documented, and how a change settles.

Its other parts are classes it is made of, each in a module of its own: the numbers of the head
shown (shown.py), the views across layers, heads and texts and the page's requests for them
(research.py), the constructors from models (from_models.py), and what a live page gets
(live.py). The rules that follow a change live in rules/ (and, the same, in js/rules.js); the trait types
and codecs in traits.py; the whole-change machinery in sync.py; what a live page gets and asks in
live.py; what a widget can switch to in sources.py; what every computed view is computed from in
inputs.py, and the views themselves in computed_views.py; the exported page's data in payload.py; the
numbers in formulas.py and mixing.py.
"""

from __future__ import annotations

import os
import pathlib

import numpy as np
import traitlets

from . import computed_views, rules
from .from_models import FromModels
from .inputs import Inputs
from .live import LivePage, _on_page_message  # noqa: F401  (tests speak to the page's handler)
from .payload import page_payload
from .research import Research
from .rules import BLOCKS, EXERCISES, GENERATION_IS_CAUSAL, STAGES  # noqa: F401  (names users import from here)
from .shown import Shown
from .sources import opening
from .traits import (
    ARRAY_KEPT,
    ARRAY_SYNC,
    MASK_KEPT,
    MASK_SYNC,
    TEXT_SYNC,
    Checked,
    Mask,
    Matrix,
    Tokens,
    token_list,
    visible_text,
)

__all__ = ["AttentionWidget", "visible_text"]

_STATIC = pathlib.Path(__file__).parent / "static"
_VECTORS = ("tokens", "key_tokens", "q", "k", "v", "x", "mask", "bias")
_KEEP = object()  # set_vectors: "leave this one as it is"


class AttentionWidget(Research, FromModels, Shown, LivePage):
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

    # --- what is computed on ---
    tokens = Tokens().tag(**TEXT_SYNC)
    """The rows' tokens, one string per row of q."""
    key_tokens = Tokens(read_only=True, allow_none=True).tag(**TEXT_SYNC)
    """The columns' tokens: the tokens themselves in self-attention; in cross-attention the text read (a translation
    model's source)."""
    cross = traitlets.Bool(False, read_only=True).tag(sync=True)
    """Cross-attention: the columns are another text's tokens (key_tokens of their own)."""
    q = Matrix(heads=True).tag(**ARRAY_SYNC)
    """Queries: tokens × width, or heads × tokens × width."""
    k = Matrix(heads=True).tag(**ARRAY_SYNC)
    """Keys: one row per key token, q's width (and heads)."""
    v = Matrix(heads=True).tag(**ARRAY_SYNC)
    """Values: one row per key token, any width (and q's heads)."""
    x = Matrix(allow_none=True).tag(**ARRAY_SYNC)
    """Each token's own embedding (tokens × value width), which the blend stage can add the mix to; or None."""
    residual = Checked(False).tag(sync=True)
    """Show x + the mix in the blend stage (needs x)."""
    mask = Mask().tag(**MASK_SYNC)
    """Cells a row may read besides the causal rule (queries × keys, True = may read), e.g. to leave out padding; or
    None."""
    bias = Matrix(heads=True, allow_none=True).tag(**ARRAY_SYNC)
    """Added to the scores, (heads ×) queries × keys: a model's position bias (T5, ALiBi); or None."""
    temperature = Checked(1.0).tag(sync=True)
    """T in softmax(scores / T): any finite T > 0 (the slider spans 0.1 to 5)."""
    causal = Checked(False).tag(sync=True)
    """Each token reads only itself and the tokens before it."""
    sink = Checked(False).tag(sync=True)
    """Attention sinks: the first token's column left out and every row renormalised over the rest."""
    scale = Checked(None, allow_none=True).tag(sync=True)
    """The factor on q·k; None for 1/√d."""
    softcap = Checked(None, allow_none=True).tag(sync=True)
    """Soft-capping: each scale·q·k becomes softcap·tanh(s/softcap), so no score passes ±softcap (Gemma 2); None for no
    cap."""
    position = Checked("none").tag(sync=True)
    """Where position enters the attention (position.py). Your own arrays: "none" (as given), "rope" (each query and
    key turned pair by pair by its position × θ_i, θ_i = rope_base^(−2i/width); the pairs are the first and second
    halves of each vector) or "alibi" (``−m·|i − j|`` added to the scores, one slope m per head). A model's widget names
    its own scheme, which its q and k carry already, and cannot change it: "rope", "alibi", "relative" (T5's bias),
    "learned", "sinusoidal", or "" where its config does not say."""
    rope_base = Checked(10000.0).tag(sync=True)
    """RoPE's base: pair i of a width-d vector turns by position × base^(−2i/d) (position="rope")."""
    alibi_slopes = Checked(None, allow_none=True).tag(sync=True)
    """ALiBi's slopes, one m per head (position="alibi"); None for the ALiBi paper's 2^(−8h/H), h = 1 … H."""

    # --- what is shown ---
    focus = Checked(0).tag(sync=True)
    """The focused token (a row): its arcs, its row of weights, its output."""
    stage = Checked("tokens").tag(sync=True)
    """The stage shown: one of "tokens", "qk", "scores", "weights", "blend"."""
    head = Checked(0).tag(sync=True)
    """The head shown (0 for 2-D arrays)."""
    cell = Checked(None, allow_none=True).tag(sync=True)
    """The cell whose arithmetic is shown, (row, column) in the focused row; or None."""
    sentences = traitlets.List(traitlets.Unicode(), read_only=True).tag(**TEXT_SYNC)
    """The sentences the page can switch between, or a model's texts (from_transformers with a list); empty for one
    sentence, your own arrays or a model of one text."""
    text_lengths = traitlets.List(traitlets.Int(), read_only=True).tag(sync=True)
    """How many tokens each of sentences has (empty with one): the difference compares two of as many."""
    sentence_index = Checked(0).tag(sync=True)
    """The sentence (or model's text) shown, an index into sentences: a model's text comes with its tokens and every
    layer."""
    value_axes = Tokens(default_value=["v₁", "v₂"]).tag(**TEXT_SYNC)
    """Names of the blend plot's two value axes (the built-in ones are senses of "bank")."""
    value_basis = Matrix(heads=True, allow_none=True, read_only=True).tag(**ARRAY_SYNC)
    """Values wider than two are plotted on their first two principal axes: (heads ×) d_v × 2; None when the values are
    2-D."""

    # --- a real model's layers, heads and blocks ---
    layer = Checked(0).tag(sync=True)
    """The model's layer shown."""
    n_layers = traitlets.Int(0, read_only=True).tag(sync=True)
    """How many layers the model has (0 for your own arrays)."""
    # A model's every layer stays in the kernel: the page gets the layer shown (q, k, v, mask) and
    # the overview; an exported page carries them (payload.py).
    model_q = Matrix(heads=True, allow_none=True, read_only=True).tag(**ARRAY_KEPT)
    """Every layer's queries, (layers · heads) × tokens × width, kept here: a layer switch brings that layer's in
    as q."""
    model_k = Matrix(heads=True, allow_none=True, read_only=True).tag(**ARRAY_KEPT)
    """Every layer's keys, as model_q."""
    model_v = Matrix(heads=True, allow_none=True, read_only=True).tag(**ARRAY_KEPT)
    """Every layer's values, as model_q."""
    model_basis = Matrix(heads=True, allow_none=True, read_only=True).tag(**ARRAY_KEPT)
    """Every layer's value axes, (layers · heads) × d_v × 2; None when the values are 2-D."""
    model_masks = Mask(stack=True, read_only=True).tag(**MASK_KEPT)
    """A model's masks, each once, masks × queries × keys: the cells a layer's rows may read besides the causal rule (a
    sliding window, local attention); None when no layer has one."""
    mask_of_layer = traitlets.List(traitlets.Int(), read_only=True)
    """Each layer's mask, an index into model_masks (-1: none); empty when no layer has one. A layer switch brings its
    mask in as `mask`."""
    model_bias = Matrix(heads=True, allow_none=True, read_only=True).tag(**ARRAY_KEPT)
    """A bias per layer, (layers · heads) × queries × keys (attention weights alone: their logarithms); None for a bias
    the same in every layer, or none. A layer switch brings its own in as `bias`."""
    next_token = traitlets.Bool(False, read_only=True).tag(sync=True)
    """A causal language model's widget: head_effects() and the overview's "effect" summary (its effect on the next
    token)."""
    model_causal = traitlets.Bool(False, read_only=True).tag(sync=True)
    """A model's widget whose model (or block shown) reads causally, each token only itself and the tokens before it
    (a decoder, a causal language model, attention weights of that pattern): its numbers for a text's first tokens are
    its own on those tokens, so `step` can write the text. False for a model that reads both ways (an encoder, a vision
    transformer), whose `step` is the number of tokens, and for your own arrays (`causal` is the widget's rule, which
    you may change; this is the model's)."""
    reads_model = traitlets.Bool(False, read_only=True).tag(sync=True)
    """A widget that can run its model again on tokens of its own: head_scores()'s and the overview's "induction"."""
    weights_only = traitlets.Unicode("", read_only=True).tag(sync=True)
    """"weights" (or "weights and values") for a widget of attention weights alone (from_attentions): no q and k, so no
    query/key or scores stage (and no blend without values); "" otherwise."""
    layer_arrays: traitlets.List = traitlets.List(None, allow_none=True, read_only=True).tag(sync=True)
    """[block, layer, head] whose arrays a live page has been sent: the head shown of q, k and v (the page keeps those
    it fetched by it); None for your own arrays."""
    overview = traitlets.Dict(None, allow_none=True, read_only=True).tag(sync=True)
    """A model's every layer and head at a glance, computed here when the page asks (overview.compute): thumbnails and
    summaries at the inputs in its "key"; None until asked, and again when those inputs change."""
    layer_shown = traitlets.Bool(False, read_only=True).tag(sync=True)
    """q, k and v are the current layer's (not your own arrays): a layer switch brings them in from model_q, model_k
    and model_v."""
    summary = Checked("").tag(sync=True)
    """The heads' overview coloured by one of head_summary()'s names, one of head_scores()'s over every text
    ("sink", "duplicate", "induction", "entropy"), or a causal language model's "effect" (head_effects()), each
    computed when asked; "" for none."""
    qk_map = Checked(False).tag(sync=True)
    """Beside the overview, the head shown's every query and key of every text in one 2-D map (query_key_map()),
    computed when the page shows it."""
    measure = Checked("").tag(sync=True)
    """The panel beyond one head's weights (measures.py): "norms" (weight × ‖value‖, the head shown), "rollout" or
    "flow" (up to the layer shown), "difference" (two texts), or "" for none."""
    measures = traitlets.Dict(read_only=True).tag(sync=True)
    """Each measure's name -> "" where this widget can show it, else why not."""
    offered_measures = traitlets.List(traitlets.Unicode(), read_only=True).tag(sync=True)
    """The measures the page offers a button for (computed_views.offered): none for one head of one text,
    difference only with several texts."""
    measure_data = traitlets.Dict(None, allow_none=True, read_only=True).tag(sync=True)
    """{measure: its matrix for the page, at the state in its "key"} (computed_views.entry), computed here when the page
    asks; None until then, and again when the arrays change."""
    computed = traitlets.Dict(None, allow_none=True, read_only=True).tag(sync=True)
    """{view: its answer for the page, at the state in its "key"} for the other views computed_views.py declares
    (head_scores), computed here when the page asks; a view's answer is dropped when the state it is for changes."""
    model_name = traitlets.Unicode("", read_only=True).tag(sync=True, to_json=lambda value, widget: visible_text(value))
    """The model's name, for the page's title."""
    position_about = traitlets.Unicode("", read_only=True).tag(sync=True)
    """The page's words for a model's scheme ("RoPE, base 500,000"), shown beside its name."""
    image = traitlets.Dict(default_value=None, allow_none=True, read_only=True).tag(sync=True)
    """A vision model's image as it saw it, to draw under its patches: {"src": a PNG data URL, "rows", "cols": the
    patch grid, "first": the index of the first patch token, "patch": a patch's side in pixels, "size": [height,
    width]}; None for other widgets."""
    blocks = traitlets.List(traitlets.Unicode(), read_only=True).tag(sync=True)
    """An encoder–decoder model's blocks ("encoder", "decoder", "cross"); empty for other widgets."""
    block = Checked("").tag(sync=True)
    """The block shown: one of blocks ("" for other widgets)."""

    # --- teaching: writing token by token, exercises ---
    step = Checked(0).tag(sync=True)
    """How many tokens are written so far (1 to n; n shows them all): below n only the first `step` tokens exist and
    the causal rule is on. `tokens` keeps the whole text; every array (scores, weights, output, effective_tokens,
    rollout(), norms(), ...) is over the tokens written, `written_tokens` (= tokens[:step]), which label its rows and
    columns. A model's widget writes only where its model reads causally (model_causal)."""
    exercise = Checked("").tag(sync=True)
    """"predict" (spread a guess over the focused row, then reveal it), "temperature" (set T for `goal` effective
    tokens), or "" for none."""
    guess = Checked(None, allow_none=True).tag(sync=True)
    """The learner's guess at the focused row's weights (one per token read, summing to 1), or None."""
    revealed = Checked(False).tag(sync=True)
    """The exercise's answer is shown."""
    goal = Checked(2.0).tag(sync=True)
    """The temperature exercise's target: the effective tokens the focused row should reach."""
    scores_hint = Checked(False).tag(sync=True)
    """The predict exercise shows the focused row's scores before the reveal (a hint: they rank the tokens as the
    weights will)."""

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
        measure="",
        scale=None,
        softcap=None,
        position="none",
        rope_base=10000.0,
        alibi_slopes=None,
        head=0,
        cell=None,
        residual=False,
        sentence_index=0,
        value_axes=None,
        step=None,
        exercise="",
        goal=2.0,
        scores_hint=False,
        qk_map=False,
    ):
        self._start_research()
        state = dict(
            temperature=temperature,
            causal=bool(causal),
            sink=sink,
            summary=summary,
            measure=measure,
            scale=scale,
            softcap=softcap,
            position=position,
            rope_base=rope_base,
            alibi_slopes=alibi_slopes,
            head=head,
            cell=cell,
            residual=residual,
            mask=mask,
            bias=bias,
            exercise=exercise,
            goal=goal,
            scores_hint=scores_hint,
            qk_map=qk_map,
        )
        arrays = dict(tokens=tokens, key_tokens=key_tokens, q=q, k=k, v=v, x=x)
        self._sources, given, sentences, own_keys = opening(sentence, arrays, value_axes, sentence_index)
        state.update(given)
        if cell is not None and focus is not None and np.ndim(cell) == 1 and len(cell) == 2 and cell[0] != focus:
            raise ValueError(
                f"cell {tuple(cell)} is in row {cell[0]}, but focus is {focus}: a cell is shown in the focused row; "
                f"pass focus={cell[0]}, or leave focus out."
            )
        state["focus"] = (
            (cell[0] if cell is not None and np.ndim(cell) == 1 and len(cell) == 2 else 0) if focus is None else focus
        )
        state["stage"] = STAGES[0] if stage is None else stage
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
            if causal is False:
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

    def _settle(self, before, changed, values):
        state, asked = self._plain(before), [n for n in changed if n in rules.FIELDS]
        after = rules.settle_checked(state, {n: values[n] for n in asked}, self._sources)
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

    def page_state(self, layers=None, budget: float = 50e6) -> dict:
        """Everything a page with no kernel needs, as plain data (the payload, payload.py): a
        model's every layer while under ``budget`` bytes, else those ``layers`` names (to_html)."""
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

    def _title(self, title):
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
        self, *, tokens=_KEEP, key_tokens=_KEEP, q=_KEEP, k=_KEEP, v=_KEEP, x=_KEEP, mask=_KEEP, bias=_KEEP
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
