"""AttentionWidget: the synced traits, each documented, and the public methods.

The rules that follow a change live in rules.py (and, the same, in js/rules.js); the trait types
and codecs in traits.py; the whole-change machinery in sync.py; what a live page gets and asks in
live.py; what a widget can switch to in sources.py; what every computed view is computed from in
inputs.py, and the views themselves in views.py; the exported page's data in payload.py; the
numbers in core.py.
"""

from __future__ import annotations

import os
import pathlib

import numpy as np
import traitlets

from . import measures, rules, views
from .core import Attention, attention_flow, head_grams, head_summaries, head_vectors, overflow_message, rollout
from .inputs import Inputs, head_of, reading_mask
from .integrations import ablation
from .live import OPENING, LivePage, _on_page_message  # noqa: F401  (tests speak to the page's handler)
from .overview import Background
from .payload import page_payload
from .rules import BLOCKS, EXERCISES, GENERATION_IS_CAUSAL, STAGES  # noqa: F401  (names users import from here)
from .sources import Sources, opening, opening_step
from .traits import ARRAY_KEPT, ARRAY_SYNC, MASK_KEPT, MASK_SYNC, TEXT_SYNC, Checked, Mask, Matrix, Tokens, token_list, visible_text

__all__ = ["AttentionWidget", "visible_text"]

_STATIC = pathlib.Path(__file__).parent / "static"
_VECTORS = ("tokens", "key_tokens", "q", "k", "v", "x", "mask", "bias")
_KEEP = object()  # set_vectors: "leave this one as it is"


class AttentionWidget(LivePage):
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
    _constants = traitlets.Dict({**rules.CONSTANTS, "views": views.VIEWS_FOR_PAGE}, read_only=True).tag(sync=True)
    """The names and limits the page's rules need (rules.CONSTANTS), and each computed view's key, sign and trait
    (views.py): sent from here, so there is no copy to keep in step."""

    # --- what is computed on ---
    tokens = Tokens().tag(**TEXT_SYNC)
    """The rows' tokens, one string per row of q."""
    key_tokens = Tokens(read_only=True, allow_none=True).tag(**TEXT_SYNC)
    """The columns' tokens: the tokens themselves in self-attention; in cross-attention the text read (a translation model's source)."""
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
    """Cells a row may read besides the causal rule (queries × keys, True = may read), e.g. to leave out padding; or None."""
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
    """Soft-capping: each scale·q·k becomes softcap·tanh(s/softcap), so no score passes ±softcap (Gemma 2); None for no cap."""

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
    """The sentences the page can switch between, or a model's texts (from_transformers with a list); empty for one sentence, your own arrays or a model of one text."""
    sentence_index = Checked(0).tag(sync=True)
    """The sentence (or model's text) shown, an index into sentences: a model's text comes with its tokens and every layer."""
    value_axes = Tokens(default_value=["v₁", "v₂"]).tag(**TEXT_SYNC)
    """Names of the blend plot's two value axes (the built-in ones are senses of "bank")."""
    value_basis = Matrix(heads=True, allow_none=True, read_only=True).tag(**ARRAY_SYNC)
    """Values wider than two are plotted on their first two principal axes: (heads ×) d_v × 2; None when the values are 2-D."""

    # --- a real model's layers, heads and blocks ---
    layer = Checked(0).tag(sync=True)
    """The model's layer shown."""
    n_layers = traitlets.Int(0, read_only=True).tag(sync=True)
    """How many layers the model has (0 for your own arrays)."""
    # A model's every layer stays in the kernel: the page gets the layer shown (q, k, v, mask) and
    # the overview; an exported page carries them (payload.py).
    model_q = Matrix(heads=True, allow_none=True, read_only=True).tag(**ARRAY_KEPT)
    """Every layer's queries, (layers · heads) × tokens × width, kept here: a layer switch brings that layer's in as q."""
    model_k = Matrix(heads=True, allow_none=True, read_only=True).tag(**ARRAY_KEPT)
    """Every layer's keys, as model_q."""
    model_v = Matrix(heads=True, allow_none=True, read_only=True).tag(**ARRAY_KEPT)
    """Every layer's values, as model_q."""
    model_basis = Matrix(heads=True, allow_none=True, read_only=True).tag(**ARRAY_KEPT)
    """Every layer's value axes, (layers · heads) × d_v × 2; None when the values are 2-D."""
    model_masks = Mask(stack=True, read_only=True).tag(**MASK_KEPT)
    """A model's masks, each once, masks × queries × keys: the cells a layer's rows may read besides the causal rule (a sliding window, local attention); None when no layer has one."""
    mask_of_layer = traitlets.List(traitlets.Int(), read_only=True)
    """Each layer's mask, an index into model_masks (-1: none); empty when no layer has one. A layer switch brings its mask in as `mask`."""
    model_bias = Matrix(heads=True, allow_none=True, read_only=True).tag(**ARRAY_KEPT)
    """A bias per layer, (layers · heads) × queries × keys (attention weights alone: their logarithms); None for a bias the same in every layer, or none. A layer switch brings its own in as `bias`."""
    next_token = traitlets.Bool(False, read_only=True).tag(sync=True)
    """A causal language model's widget: head_effects() and the overview's "effect" summary (its effect on the next token)."""
    weights_only = traitlets.Unicode("", read_only=True).tag(sync=True)
    """"weights" (or "weights and values") for a widget of attention weights alone (from_attentions): no q and k, so no query/key or scores stage (and no blend without values); "" otherwise."""
    layer_arrays: traitlets.List = traitlets.List(None, allow_none=True, read_only=True).tag(sync=True)
    """[block, layer, head] whose arrays a live page has been sent: the head shown of q, k and v (the page keeps those it fetched by it); None for your own arrays."""
    overview = traitlets.Dict(None, allow_none=True, read_only=True).tag(sync=True)
    """A model's every layer and head at a glance, computed here when the page asks (overview.compute): thumbnails and summaries at the inputs in its "key"; None until asked, and again when those inputs change."""
    layer_shown = traitlets.Bool(False, read_only=True).tag(sync=True)
    """q, k and v are the current layer's (not your own arrays): a layer switch brings them in from model_q, model_k and model_v."""
    summary = Checked("").tag(sync=True)
    """The heads' overview coloured by one of head_summary()'s names, or a causal language model's "effect" (head_effects(), computed when asked); "" for none."""
    measure = Checked("").tag(sync=True)
    """The panel beyond one head's weights (measures.py): "norms" (weight × ‖value‖, the head shown), "rollout" or "flow" (up to the layer shown), "difference" (two texts), or "" for none."""
    measures = traitlets.Dict(read_only=True).tag(sync=True)
    """Each measure's name -> "" where this widget can show it, else why not."""
    measure_data = traitlets.Dict(None, allow_none=True, read_only=True).tag(sync=True)
    """{measure: its matrix for the page, at the state in its "key"} (measures.entry), computed here when the page asks; None until then, and again when the arrays change."""
    model_name = traitlets.Unicode("", read_only=True).tag(sync=True, to_json=lambda value, widget: visible_text(value))
    """The model's name, for the page's title."""
    blocks = traitlets.List(traitlets.Unicode(), read_only=True).tag(sync=True)
    """An encoder–decoder model's blocks ("encoder", "decoder", "cross"); empty for other widgets."""
    block = Checked("").tag(sync=True)
    """The block shown: one of blocks ("" for other widgets)."""

    # --- teaching: writing token by token, exercises ---
    step = Checked(0).tag(sync=True)
    """How many tokens are written so far (1 to n; n shows them all): below n only the first `step` tokens exist and the causal rule is on."""
    exercise = Checked("").tag(sync=True)
    """"predict" (spread a guess over the focused row, then reveal it), "temperature" (set T for `goal` effective tokens), or "" for none."""
    guess = Checked(None, allow_none=True).tag(sync=True)
    """The learner's guess at the focused row's weights (one per token read, summing to 1), or None."""
    revealed = Checked(False).tag(sync=True)
    """The exercise's answer is shown."""
    goal = Checked(2.0).tag(sync=True)
    """The temperature exercise's target: the effective tokens the focused row should reach."""
    scores_hint = Checked(False).tag(sync=True)
    """The predict exercise shows the focused row's scores before the reveal (a hint: they rank the tokens as the weights will)."""

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
        head=0,
        cell=None,
        residual=False,
        sentence_index=0,
        value_axes=None,
        step=None,
        exercise="",
        goal=2.0,
        scores_hint=False,
    ):
        self._result = None
        self._overview = Background()
        self._grams: dict = {}  # (block, layer) -> (its values, their per-key Gram matrices): norms() at any temperature
        self._effects: dict = {}  # (mode, step, text) -> head_effects' layers × heads: a model's own passes, at any temperature
        self._effect_mode = "zero"  # the mode the overview's "effect" summary shows: the last asked of head_effects
        state = dict(
            temperature=temperature,
            causal=bool(causal),
            sink=sink,
            summary=summary,
            measure=measure,
            scale=scale,
            softcap=softcap,
            head=head,
            cell=cell,
            residual=residual,
            mask=mask,
            bias=bias,
            exercise=exercise,
            goal=goal,
            scores_hint=scores_hint,
        )
        arrays = dict(tokens=tokens, key_tokens=key_tokens, q=q, k=k, v=v, x=x)
        self._sources, given, sentences, own_keys = opening(sentence, arrays, value_axes, sentence_index)
        state.update(given)
        if cell is not None and focus is not None and np.ndim(cell) == 1 and len(cell) == 2 and cell[0] != focus:
            raise ValueError(
                f"cell {tuple(cell)} is in row {cell[0]}, but focus is {focus}: a cell is shown in the focused row; pass focus={cell[0]}, or leave focus out."
            )
        state["focus"] = (cell[0] if cell is not None and np.ndim(cell) == 1 and len(cell) == 2 else 0) if focus is None else focus
        state["stage"] = STAGES[0] if stage is None else stage
        # read-only for users, and checked against by the rest: in place before the first change
        self._preset(sentences=sentences, cross=own_keys is not None, key_tokens=own_keys, q=None, k=None, v=None, step=None)
        super().__init__()  # the comm opens on the defaults; everything given arrives as one change
        n = len(state["tokens"])
        if step is not None and rules._is_int(step) and 0 < step < n:  # what was asked, said back if it cannot be
            if causal is False:
                raise ValueError(GENERATION_IS_CAUSAL + " Leave causal out with step=.")
            if focus is not None and focus >= step:
                raise ValueError(
                    f"focus {focus} is not written yet at step {step}: pass a focus from 0 to {step - 1}, or leave it out (the last token written)."
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

    # --- every change: the rules settle it (rules.py), then one message (sync.py) ---

    @classmethod
    def _plain(cls, values) -> dict:
        """The state as the rules see it: every field, its default where it was never set."""
        traits = cls.class_traits()
        return {n: values[n] if n in values else traits[n].default() for n in rules.FIELDS}

    def _settle(self, before, changed, values):
        state, asked = self._plain(before), [n for n in changed if n in rules.FIELDS]
        after = rules.settle(state, {n: values[n] for n in asked}, self._sources)
        if any(not rules.same(after[n], state[n]) for n in ("q", "k", "scale", "bias")):
            problem = overflow_message(after["q"], after["k"], after["scale"], after["bias"])
            if problem:
                raise rules.Refused(problem)
        current = self._plain(values)
        for name, value in after.items():
            if not rules.same(value, current[name]):
                values[name] = value
        values["layer_arrays"] = [after["block"], after["layer"], min(after["head"], len(after["q"]) - 1)] if after["layer_shown"] else None
        if after["n_layers"] and after["sentence_index"] != state["sentence_index"]:
            self._text_switched()
        # the views computed here: an answer for the state before is out of date (the page asks again)
        if values.get("overview") is not None and views.stale("overview", state, after):
            values["overview"] = None
        held = values.get("measure_data") or {}
        if any(views.stale(name, state, after) for name in held):
            values["measure_data"] = None
        values["measures"] = views.available(Inputs(after, self._sources))
        if after["summary"] != state["summary"]:
            self._new_summary(after["summary"], values)

    def _inputs(self, text: int | None = None, state: dict | None = None) -> Inputs:
        """What every computed view is computed from, now (or of another ``text``: difference)."""
        state = self._plain(self._trait_values) if state is None else state
        other = lambda: self._inputs(measures.pair(self._sources, state["sentence_index"])[1], state)
        extra = dict(effect=self._effects_kept(), device=getattr(self, "_device", None), grams=self._head_grams, other=other)
        return Inputs(state, self._sources, text, **extra)

    def _answer(self, name: str, begin: bool = True) -> None:
        """The page asks for view ``name`` (live.py): computed unless the answer held is current;
        a large model's overview on a thread (the page asks again until it has it)."""
        view = views.VIEWS[name]
        if view.held_in == "measure_data":
            if name != self.measure:
                return
            inputs = self._inputs()
            if not views.current(name, (self.measure_data or {}).get(name), inputs):
                self.set_trait("measure_data", {name: views.entry(name, inputs)})
        elif name == "overview" and self.n_layers and self.layer_shown and not views.current(name, self.overview, self._inputs()):
            done = self._overview_now(begin)
            if done is not None:
                self.set_trait("overview", done)

    def _overview_now(self, begin: bool = True) -> dict | None:
        """The overview for the widget as it stands, or None while it is being computed (or, not
        ``begin``, when it is too large to begin while the page draws its first picture)."""
        if self.summary == "effect" and self._effects_kept() is False:  # asked for: the model's passes, first
            if not begin:
                return None  # (not while the page draws its first picture)
            try:  # on the kernel's own thread: they swap transformers' attention function, which nothing may use meanwhile
                self.head_effects(self._effect_mode)
            except Exception as err:  # said once, in the page, instead of computed again at each ask
                return {"error": f"head effects: {type(err).__name__}: {err}", "key": views.VIEWS["overview"].key(self._inputs())}
        return self._overview.ask(self._inputs(), begin)

    def _rows(self) -> int:
        """How many tokens there are: all of them, or while generating the first `step`."""
        return rules.rows({"tokens": self.tokens, "step": self.step})

    def _keys_read(self) -> int:
        """How many tokens a row reads: the tokens written, or cross-attention's own."""
        return rules.keys_read({"tokens": self.tokens, "step": self.step, "cross": self.cross, "key_tokens": self.key_tokens})

    def page_state(self, layers=None, budget: float = 50e6) -> dict:
        """Everything a page with no kernel needs, as plain data (the payload, payload.py): a
        model's every layer while under ``budget`` bytes, else those ``layers`` names (to_html)."""
        if self.summary == "effect" and self._effects_kept() is False:
            self.head_effects(self._effect_mode)  # shown coloured by them: computed now (a forward pass per layer)
        kept = self._effects_kept()
        return page_payload(self, self._inputs(), None if kept is None or kept is False else kept, layers, budget)

    def _repr_mimebundle_(self, **kwargs):
        """The widget view, as anywidget gives it; with ATTNWIDGET_STATIC_HTML set (a docs
        build) also the widget as HTML that draws itself with no kernel (export.embed_html)."""
        self._answer("overview", begin=False)  # a small one goes with the widget; a larger one is begun, a very large one when asked
        bundle = super()._repr_mimebundle_(**kwargs)
        data = bundle[0] if isinstance(bundle, tuple) else bundle  # (data, metadata), or data alone
        if os.environ.get("ATTNWIDGET_STATIC_HTML") and isinstance(data, dict):
            from .export import embed_html

            data["text/html"] = embed_html(self.page_state())
        return bundle

    def _title(self, title):
        return visible_text(title or "Attention: " + " ".join(self.tokens)[:80])

    def to_html(self, path: str | os.PathLike | None = None, *, theme: str = "auto", title: str | None = None, layers=None, max_mb: float = 50) -> str:
        """One self-contained HTML page of this widget (no kernel, no network); written to
        ``path`` when given, and returned. ``theme``: "auto", "light" or "dark".

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
                new[name] = token_list(new[name], traitlets.TraitError)
        if new.get("key_tokens") == []:
            raise traitlets.TraitError("'key_tokens' must not be empty: give one string per row of k and v.")
        with self.hold_trait_notifications():
            for name, value in new.items():
                self.set_trait(name, value)  # key_tokens is read-only to users: here the columns' own labels

    @classmethod
    def from_transformers(
        cls,
        model,
        tokenizer,
        text: str | list[str],
        *,
        target: str | None = None,
        block: str = "cross",
        layer: int = 0,
        head: int = 0,
        generate: int = 0,
        **kwargs,
    ) -> AttentionWidget:
        """Every head of one layer of a Hugging Face model: any model whose attention goes
        through transformers' attention interface (Llama, Mistral, Qwen, Gemma, Phi, GPT-NeoX,
        OPT, GPT-J, OLMo, StarCoder2, the BERT family, ALBERT, ModernBERT, GPT-2, T5, BART, ...),
        and BLOOM.

        Q, K and V are those the model's attention receives during one forward pass of the
        model's own (after rotary), so the widget's weights are the model's attention
        probabilities, also for a model loaded for SDPA or another fast kernel. The model's mask
        becomes ``causal`` and, for a layer with a sliding window or local attention, that
        layer's ``mask`` (``model_masks`` holds them); T5's and BLOOM's position biases come in
        as ``bias``, Gemma 2's soft cap as ``softcap``. ``layer`` can be switched afterwards, in
        Python or in the page.

        An encoder–decoder model (BART, mBART, Marian, T5) reads ``text`` and writes
        ``target``: ``block`` chooses its "encoder" self-attention (over the text), its
        "decoder" self-attention (over the target, causal) or its "cross"-attention (each
        target token reading the text: ``tokens`` are the target's, ``key_tokens`` the text's).

        ``generate=k`` lets a causal language model (``AutoModelForCausalLM``: ``GPT2LMHeadModel``,
        ``LlamaForCausalLM``, ...) write k more tokens after
        ``text``, greedily (fewer if it writes its end-of-text token). ``tokens`` are the
        prompt's followed by the written ones, and the widget starts at ``step`` = the prompt's
        length: each "next token" (or ``w.step += 1``) shows the next written token appear,
        with the numbers the model computed for that prefix. ``w.prompt_length`` (read it, do
        not set it) says how many tokens were the prompt's; without ``generate`` it is all of
        them (None for an encoder–decoder model).

        A list of texts is read one text at a time, each alone (and with ``generate`` each writes
        on from its own prompt): ``sentences`` lists them and ``sentence_index`` (an argument too)
        chooses the one shown, in Python or in the page, with its tokens and every layer; the
        layer, head, temperature and stage stay. :meth:`difference` compares two of them.
        """
        from .integrations import from_transformers

        found = from_transformers(model, tokenizer, text, target=target, generate=generate)
        prompt = None if isinstance(found, (dict, list)) else found.prompt_length  # (a list's texts: each its own, _from_model)
        if prompt is not None:
            kwargs.setdefault("step", prompt)  # the prompt written: the model's own tokens come next
        return cls._from_model(found, layer, head, kwargs, block if isinstance(found, dict) else None, texts=text)

    @classmethod
    def from_transformer_lens(cls, model, text: str | list[str], *, cache=None, layer: int = 0, head: int = 0, **kwargs) -> AttentionWidget:
        """Every head of one layer of a TransformerLens ``HookedTransformer``; with ``cache`` (its
        ``run_with_cache(text)``), read from that cache's hooks, without running the model again.
        A list of texts is read a text at a time, as from_transformers reads one."""
        from .integrations import from_transformer_lens

        return cls._from_model(from_transformer_lens(model, text, cache), layer, head, kwargs, texts=text)

    @classmethod
    def from_nnsight(cls, model, text: str | list[str], *, layer: int = 0, head: int = 0, **kwargs) -> AttentionWidget:
        """Every head of one layer of an nnsight-wrapped Hugging Face model (``LanguageModel``):
        the q, k, v, masks and terms ``from_transformers`` reads, caught during nnsight's own
        trace of the model (see :func:`attnwidget.integrations.from_nnsight`); a list of texts
        as from_transformers reads one."""
        from .integrations import from_nnsight

        return cls._from_model(from_nnsight(model, text), layer, head, kwargs, texts=text)

    @classmethod
    def from_attentions(cls, attentions, tokens, key_tokens=None, *, values=None, layer: int = 0, head: int = 0, **kwargs) -> AttentionWidget:
        """Attention weights alone, as other tools give them: Hugging Face's ``attentions`` (a
        tuple of layers, each batch × heads × queries × keys, batch 1), a numpy array or torch
        tensor of queries × keys, heads × … or layers × heads × …, or a TransformerLens
        ``ActivationCache`` (its ``blocks.<layer>.attn.hook_pattern`` entries).

        The weights are shown as given, with everything that needs weights alone: the matrix,
        arcs, row budget and effective tokens, heads and layers side by side, summaries, the
        sink, exercises, writing token by token (a causal pattern) and exported pages. A
        temperature re-tempers each row exactly: softmax(log W / T), cells of weight 0 staying 0,
        the very numbers the scores would give. There are no queries or keys, so no query/key or
        scores stage (``scores`` is refused), and no blend unless ``values`` (one vector per key:
        keys × width, or heads × keys × width) are given. Weights that are negative, not finite,
        of rows not summing to 1 (within 1e-4; a row of zeros is allowed) or not matching the
        tokens are refused with ValueError.
        """
        from .integrations.weights import read

        return cls._from_model(read(attentions, tokens, key_tokens, values), layer, head, kwargs)

    @classmethod
    def _from_model(cls, found, layer, head, kwargs, block=None, texts=None):
        blocks = found if isinstance(found, dict) else {}
        if blocks:
            if block not in blocks:
                raise ValueError(f"block must be one of {', '.join(map(repr, blocks))}, got {block!r}")
            found = blocks[block]
        each = found if isinstance(found, list) else []  # a model's texts, each read alone
        index = kwargs.pop("sentence_index", 0) if each else 0
        if each:
            if not (rules._is_int(index) and 0 <= index < len(each)):
                raise ValueError(f"sentence_index must be from 0 to {len(each) - 1}, got {index!r}")
            found = each[index]
            if found.prompt_length is not None:
                kwargs.setdefault("step", found.prompt_length)  # the text shown opens as one text would
        if not 0 <= layer < len(found.layers):
            raise ValueError(f"layer must be from 0 to {len(found.layers) - 1} for this model, got {layer}")
        kwargs.setdefault("causal", found.causal)
        kwargs.setdefault("scale", found.scale)
        kwargs.setdefault("softcap", getattr(found, "softcap", None))
        if getattr(found, "bias", None) is not None:
            kwargs.setdefault("bias", found.bias)  # a position bias, the same in every layer
        sources = Sources(model=None if blocks else found, blocks=blocks, texts=each)
        first = sources.layer(block or "", layer, index)  # views of every layer's stacked arrays, made once: sent once
        if "mask" in first:
            kwargs.setdefault("mask", first["mask"])  # the layer's own: a sliding window, local attention
        if "bias" in first:
            kwargs.setdefault("bias", first["bias"])  # the layer's own (attention weights alone: their logarithms)
        summary = kwargs.pop("summary", "")  # set once the widget has its model: "effect" needs it
        made = OPENING.set(True)  # its layer goes to the page once it is the model's (below): one head of it
        try:
            w = cls(tokens=found.tokens, key_tokens=first["key_tokens"], q=first["q"], k=first["k"], v=first["v"], head=head, **kwargs)
        finally:
            OPENING.reset(made)
        w._sources = sources
        w._device = getattr(found, "device", None)  # where the overview is computed: the model's own device
        with w.hold_trait_notifications():
            w.set_trait("model_name", found.model_name)
            w.set_trait("weights_only", getattr(found, "weights_only", ""))
            w.set_trait("blocks", list(blocks))
            for name, value in w._sources.stack(block or "", index).items():
                w.set_trait(name, value)
            w._sources.adopt(block or "", {n: getattr(w, n) for n in rules.STACK}, index)
            if each:
                w.set_trait("sentences", list(texts))
                w.set_trait("sentence_index", index)
            w.block = block or ""
            w.layer = layer  # the layer's arrays: views of the stacked ones
        w._prompt_lengths = [None if blocks else opening_step(f) for f in each or [found]]  # tokens not the model's own
        w.set_trait("next_token", w._effects_kept() is not None)  # a causal language model, which head_effects can run again
        try:
            w.summary = summary
        except BaseException:
            w.close()
            raise
        return w

    @property
    def prompt_length(self) -> int | None:
        """How many of a model's tokens (the text shown's) were the text given, the rest the
        model's own (generate=); all of them without generate; None for an encoder–decoder model."""
        lengths = getattr(self, "_prompt_lengths", None)
        if lengths is None:
            raise AttributeError("prompt_length is a model's (from_transformers and the like); this widget has none")
        return lengths[self.sentence_index if len(lengths) > 1 else 0]

    # --- derived, read-only numpy views of the current head ---

    @property
    def n_heads(self) -> int:
        """How many heads q, k and v carry (1 for 2-D arrays)."""
        q = self.q
        return 1 if q is None or q.ndim == 2 else q.shape[0]

    def _head(self, a):
        return head_of(a, self.head)

    @property
    def attention(self) -> Attention:
        """The full :class:`~attnwidget.Attention` result for the current state and head."""
        # Keyed on the inputs themselves (arrays by identity: each assignment stores a new one),
        # so even an observer called in the middle of set_vectors never sees stale numbers.
        key = (self.q, self.k, self.v, self.temperature, self.causal, self.scale, self.head, self.mask, self.sink, self.bias, self.step, self.softcap)
        cached = self._result
        if cached is None or not all(rules.same(a, b) for a, b in zip(cached[0], key)):
            n, m = self._rows(), self._keys_read()  # while generating: the tokens written so far
            q, k, v = (self._head(a)[:r].astype(float) for a, r in zip(key[:3], (n, m, m)))  # float64, as the page computes
            bias = None if self.bias is None else self._head(self.bias)[:n, :m]
            mask = reading_mask(self.mask, self.sink, len(self.tokens), len(self.key_tokens))
            cached = self._result = (
                key,
                Attention(
                    q,
                    k,
                    v,
                    temperature=self.temperature,
                    causal=self.causal,
                    scale=self.scale,
                    mask=None if mask is None else mask[:n, :m],
                    bias=bias,
                    softcap=self.softcap,
                ),
            )
        return cached[1]

    def rollout(self) -> np.ndarray:
        """Attention rollout (Abnar & Zuidema, 2020), layers × n × n: at each layer Â = ½ · the
        heads' mean weights + ½ · I (the residual path), rows renormalised, and the rollout up to
        layer l is Â_l · … · Â_0; row i of layer l: how much of each input token reaches token i
        there (each row sums to 1). At the current temperature, causal rule, masks and sink; a
        widget of your own arrays is one layer of its heads. See :func:`attnwidget.core.rollout`."""
        return rollout(self._inputs().across("rollout"))

    def flow(self) -> np.ndarray:
        """Attention flow (Abnar & Zuidema, 2020), n × n: entry (i, j) is the maximum flow from
        input token j to token i at the last layer through the graph of every layer whose
        capacities are the Â of :meth:`rollout`; exact, a maximum flow for each pair, so for a text
        of a few dozen tokens (see :func:`attnwidget.core.attention_flow`)."""
        return attention_flow(self._inputs().across("flow"))

    def norms(self, combined: bool = False) -> np.ndarray:
        """Norm-based attention (Kobayashi et al., 2020), heads × queries × keys at the current layer
        (and block): entry [h, i, j] is ‖α^h_ij · f_h(x_j)‖ = α^h_ij‖f_h(x_j)‖, f_h(x_j) the vector
        head h adds to token i's output for key j: its value through the layer's output projection
        (a model's), or the value itself (your own arrays, built-in sentences, from_attentions'
        ``values``). ``combined``: queries × keys, ‖Σ_h α^h_ij f_h(x_j)‖, the whole layer's vector
        for the pair (without a projection each head's value is in a slot of its own). α are the
        widget's weights at its temperature, causal rule, masks, sink and step (``weights`` for
        the head shown). New float64 arrays; each layer's per-key Gram matrices of its heads'
        vectors are kept, so another temperature or mask costs only the weights."""
        return measures.norms(self._inputs(), combined)

    def _projection(self):
        """The current layer's output projection (integrations.interface.Projection), or None when
        the values are what the heads add."""
        if self.weights_only == "weights":
            raise ValueError(measures.NO_VALUES.replace("weight × ‖value‖", "norms()") + ".")
        found = self._sources.found(self.block) if self.layer_shown else None
        projections = getattr(found, "projections", None)
        if projections is None:
            return None
        if isinstance(projections[self.layer], str):
            raise ValueError(f"norms() needs layer {self.layer}'s output projection, which attnwidget could not read: {projections[self.layer]}.")
        return projections[self.layer]

    def _head_grams(self) -> np.ndarray:
        """The current layer's per-key Gram matrices of its heads' vectors (core.head_grams), kept
        per block and layer while its values are the same arrays."""
        kept = self._grams
        found = kept.get((self.block, self.layer))
        if found is None or found[0] is not self.v:
            projection = self._projection()
            v = self.v if self.v.ndim == 3 else self.v[None]
            found = kept[self.block, self.layer] = (self.v, head_grams(v, None if projection is None else projection.arrays()[0]))
        return found[1]

    def _head_outputs(self) -> tuple[np.ndarray, np.ndarray | None]:
        """The current layer's f_h(x_j), heads × keys × width (core.head_vectors), and the
        projection's bias (None without one): Σ_j Σ_h α^h_ij f_h(x_j) + bias is the layer's output."""
        projection = self._projection()
        w, b = (None, None) if projection is None else projection.arrays()
        return head_vectors(self.v if self.v.ndim == 3 else self.v[None], w), None if b is None else b.astype(float)

    def difference(self, a: int = 0, b: int = 1) -> np.ndarray:
        """Text ``a``'s attention weights minus text ``b``'s, layers × heads × n × n in float64, for
        a widget of several texts of one model (``from_transformers(model, tokenizer, [text_a,
        text_b, ...])``) or several sentences. Each text's every layer is read whole, at the current
        temperature, causal rule, mask, sink and step (the first ``step`` tokens while writing), as head_summary computes weights (each layer's own
        mask and bias where the model has them; the text shown at the widget's bias, the others at
        their own). The texts must have the same number of tokens (a minimal pair); cell (i, j) is
        then how much more token i of text a reads token j than token i of text b does."""
        layers = self._differences(a, b)
        first = next(layers)
        out = np.empty((max(1, self.n_layers), *first.shape))  # filled a layer at a time: held once, not twice
        out[0] = first
        for i, d in enumerate(layers, 1):
            out[i] = d
        return out

    def largest_difference(self, a: int = 0, b: int = 1) -> np.ndarray:
        """The largest absolute value of difference(a, b) in each layer and head, over its cells, layers × heads (as
        head_summary's numbers are shaped): the heads where the two texts differ most."""
        return np.stack([np.abs(d).max(axis=(1, 2)) for d in self._differences(a, b)])

    def _differences(self, a, b):
        """Each layer's difference of the weights of texts a and b, heads × n × n."""
        measures.check_pair(self._sources, a, b)
        return measures.differences(self._inputs(a), self._inputs(b))

    def head_effects(self, mode: str = "zero") -> np.ndarray:
        """Each head's effect on the model's next token, layers × heads (float64): log p(next) with
        that head's output set to zero (``mode="zero"``) or to its mean over the text's positions
        (``mode="mean"``), the head ablated alone and the rest the model's own forward pass, minus
        log p(next) of the model's own pass; negative where the head helped. The next token is the
        one the model finds most likely after the tokens written so far (all of them, or the first
        ``step``), and the head is ablated at its own output, before the output projection mixes
        the heads. For a causal language model's widget (``from_transformers``, ``from_nnsight``
        or ``from_transformer_lens``); others raise ValueError. It runs the model once per layer,
        its heads a batch; each (mode, step) is computed once (the temperature does not change it),
        and the overview's "effect" summary shows it."""
        rerun = self._rerun()
        key = (ablation.check_mode(mode), self._rows(), self.sentence_index)  # (a model's several texts: the one shown)
        if key not in self._effects:
            self._effects[key] = ablation.effects(rerun, key[1], mode)
        shown = (self.overview or {}).get("summaries", {}).get("effect")
        if mode != self._effect_mode and shown is not None and any(v is not None for v in shown):
            self.set_trait("overview", None)  # the other mode's: the page asks again
        self._effect_mode = mode
        return self._effects[key].copy()

    def _rerun(self):
        """What running the model again needs, or ValueError saying why this widget cannot."""
        found = None if self.blocks else self._sources.found("", self.sentence_index)  # the text shown
        rerun = getattr(found, "rerun", None) if self.layer_shown else None
        problem = ablation.TWO_BLOCKS.format(name=self.model_name) if self.blocks else ablation.refusal(rerun)
        if problem:
            raise ValueError(problem)
        return rerun

    def _effects_kept(self):
        """The overview's "effect" summary: head_effects kept for this step in the mode last asked,
        False when not computed, None for a widget with no next token."""
        try:
            self._rerun()
        except ValueError:
            return None
        return self._effects.get((self._effect_mode, self._rows(), self.sentence_index), False)

    def _new_summary(self, summary: str, values) -> None:
        """summary = "effect" (the rules refuse it without a next token): an overview without the
        effects is out of date (the page asks again, and they are computed then); another summary
        leaves the effects' failure behind."""
        overview = values.get("overview") or {}
        if summary == "effect":
            shown = overview.get("summaries", {}).get("effect")
            if shown is not None and all(v is None for v in shown):
                values["overview"] = None
        elif str(overview.get("error", "")).startswith("head effects:"):
            values["overview"] = None

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
        rows = [head_summaries(weights, allowed, cross=self.cross) for weights, allowed in self._inputs().weights()]
        return {name: np.array([r[name] for r in rows], dtype=float) for name in rows[0]}

    def _frozen(self, a):
        a = np.asarray(a)
        a.setflags(write=False)
        return a

    def _needs(self, stage: str, what: str) -> None:
        """Refuse what a widget of attention weights alone cannot give (rules.WEIGHTS_ONLY)."""
        if stage in rules.WEIGHTS_ONLY.get(self.weights_only, {}):
            raise ValueError(rules.WEIGHTS_ONLY[self.weights_only][stage].replace(f"'{stage}' stage", what))

    @property
    def scores(self) -> np.ndarray:
        """scale·QKᵀ (n×n), before temperature and mask."""
        self._needs("scores", "scores")
        return self._frozen(self.attention.scores)

    @property
    def weights(self) -> np.ndarray:
        """Row-wise softmax of scores / temperature (n×n); rows read, columns are read from."""
        return self._frozen(self.attention.weights)

    @property
    def output(self) -> np.ndarray:
        """The mix, weights · V (n×d_v)."""
        self._needs("blend", "output")
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
        self._needs("blend", "sense_resolved")
        return self._frozen(self.attention.sense_resolved)

    @property
    def output_spread(self) -> float:
        self._needs("blend", "output_spread")
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
        """The steps from q·k to the weight and its share of the output for ``cell`` (None when no
        cell). Of attention weights alone: from the weight given ("given", whose logarithm is the
        "score") to the weight, with no q·k, scale or cap (and no share without values)."""
        if self.cell is None:
            return None
        steps = self.attention.cell(*self.cell)
        if not self.weights_only:
            return steps
        dropped = ("dot", "scale", "softcap", "capped", "bias") + (("value", "share") if self.weights_only == "weights" else ())
        return {"given": 0.0 if steps["masked"] else float(np.exp(steps["score"])), **{k: v for k, v in steps.items() if k not in dropped}}
