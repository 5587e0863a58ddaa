"""The widget's views across layers, heads and texts, for research: rollout, flow, weight ×
‖value‖, the difference of two texts, head effects and head summaries, and the one request path
by which the page asks for them (``_answer``). Each is a short delegate: the numbers are computed
from an :class:`~attnwidget.inputs.Inputs` (the widget's state read once) by measures.py,
overview.py, formulas.py, mixing.py and integrations/ablation.py; computed_views.py declares each one for the page.

A part of :class:`~attnwidget.AttentionWidget`, whose caches (Gram matrices, head effects, the
overview's background computation) it keeps.
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING

import numpy as np

from . import atlas, computed_views, dense, measures, qkmap, rules, why
from .formulas import head_summaries
from .inputs import Inputs
from .integrations import ablation
from .mixing import head_grams, head_vectors, rollout
from .overview import Background
from .progress import progress

if TYPE_CHECKING:  # a part of AttentionWidget, typed against the interface of its fields and parts
    from .parts import Widget as _Widget

else:
    _Widget = object


EXACT = 12  # the page's effect summary ablates exactly the heads whose estimates are largest, this many
# the page's views computed without the text's whole matrices: answered past dense_limit too
NOT_WHOLE = ("query_key_map", "induction", "pair", "score_parts")


class Research(_Widget):
    """rollout(), flow(), norms(), difference(), largest_difference(), head_effects(),
    head_summary(), and the computed views the page asks for."""

    def _start_research(self) -> None:
        self._overview = Background()
        # (block, layer) -> (its values, their per-key Gram matrices): norms() at any temperature
        self._grams: dict = {}
        # (mode, step, text) -> head_effects' layers × heads: a model's own passes, at any temperature
        self._effects: dict = {}
        # (mode, step, text) -> (the page's effects: estimates, the EXACT largest ablated; which are exact)
        self._estimates: dict = {}
        self._effect_mode = "zero"  # the mode the overview's "effect" summary shows: the last asked of head_effects

    def _inputs(self, text: int | None = None, state: dict | None = None) -> Inputs:
        """What every computed view is computed from, now (or of another ``text``: difference)."""
        state = self._plain(self._trait_values) if state is None else state
        other = lambda: self._inputs(measures.pair(self._sources, state["sentence_index"])[1], state)
        shown = self._effects_kept()
        extra = dict(
            effect=shown,
            effect_exact=self._estimates.get(self._effect_key(), (None, None))[1]
            if shown is not None and shown is not False and self._effect_key() not in self._effects
            else None,
            device=getattr(self, "_device", None),
            grams=self._head_grams,
            unprojected=self._unprojected,
            other=other,
            reader=self._reader(),
        )
        return Inputs(state, self._sources, text, **extra)

    def _answer(self, name: str, begin: bool = True) -> None:
        """The page asks for view ``name`` (live.py): computed unless the answer held is current;
        a large model's overview on a thread (the page asks again until it has it). Past ``dense_limit``,
        the refusal is the answer (the page says it), and nothing is computed."""
        view = computed_views.VIEWS[name]
        if name not in NOT_WHOLE and self._refuse_view(name, view):
            return
        if view.held_in == "measure_data":
            if name != self.measure:
                return
            inputs = self._inputs()
            if not computed_views.current(name, (self.measure_data or {}).get(name), inputs):
                self.set_trait("measure_data", {name: computed_views.entry(name, inputs)})
        elif view.held_in == "computed":
            inputs = self._inputs()
            if computed_views.asked(name, inputs.state) and not computed_views.current(
                name, (self.computed or {}).get(name), inputs
            ):
                self.set_trait("computed", {**(self.computed or {}), name: computed_views.answer(name, inputs)})
        elif (
            name == "overview"
            and self.n_layers
            and self.layer_shown
            and not computed_views.current(name, self.overview, self._inputs())
        ):
            done = self._overview_now(begin)
            if done is not None:
                self.set_trait("overview", done)

    def _refuse_view(self, name: str, view) -> bool:
        """Past ``dense_limit``: the page's view ``name`` answered with the refusal (True), not computed."""
        said = dense.problem(f"The page's {name}", self._rows(), self._keys_read(), self.dense_limit)
        if not said:
            return False
        inputs = self._inputs()
        answer = {"error": said, "key": view.key(inputs)}
        if view.held_in == "measure_data" and name == self.measure:
            self.set_trait("measure_data", {name: answer})
        elif view.held_in == "computed" and computed_views.asked(name, inputs.state):
            self.set_trait("computed", {**(self.computed or {}), name: answer})
        elif name == "overview" and self.n_layers and self.layer_shown:
            self.set_trait("overview", answer)
        return True

    def _overview_now(self, begin: bool = True) -> dict | None:
        """The overview for the widget as it stands, or None while it is being computed (or, not
        ``begin``, when it is too large to begin while the page draws its first picture)."""
        if self.summary == "effect" and self._effects_kept() is False:  # asked for: the model's passes, first
            if not begin:
                return None  # (not while the page draws its first picture)
            # on the kernel's own thread: they swap transformers' attention function, which nothing may use meanwhile
            try:
                self._page_effects()
            except Exception as err:  # said once, in the page, instead of computed again at each ask
                return {
                    "error": f"head effects: {type(err).__name__}: {err}",
                    "key": computed_views.VIEWS["overview"].key(self._inputs()),
                }
        return self._overview.ask(self._inputs(), begin)

    def _page_effects(self) -> None:
        """The overview's "effect" summary on a model of more than EXACT heads: every head's estimate
        (attribution patching, one backward pass) drawn at once, then the EXACT heads whose estimates
        are largest ablated exactly in their place, the page told which are which (effect_exact)."""
        rerun, key, mode = self._rerun(), self._effect_key(), self._effect_mode
        if self.n_layers * self.n_heads <= EXACT:
            self.head_effects(mode)
            return
        estimate = ablation.effects(rerun, key[1], mode, "attribution")
        try:
            self._estimates[key] = (estimate, np.zeros(estimate.shape, dtype=bool))
            inputs = self._inputs()
            if inputs.cells < self._overview.SMALL:  # (a larger one would be begun on a thread, to be dropped)
                self.set_trait("overview", self._overview.ask(inputs))  # the estimates, drawn while the ablations run
            exact = np.zeros(estimate.shape, dtype=bool)
            exact.flat[np.argsort(-np.abs(estimate), axis=None, kind="stable")[:EXACT]] = True
            values = ablation.effects(rerun, key[1], mode, only=exact)
            self._estimates[key] = (np.where(exact, values, estimate), exact)
        except BaseException:
            self._estimates.pop(key, None)  # (never estimates said to be exact, nor kept as if the page's answer)
            raise

    def rollout(self) -> np.ndarray:
        """Attention rollout (Abnar & Zuidema, 2020), layers × n × n: at each layer Â = ½ · the
        heads' mean weights + ½ · I (the residual path), rows renormalised, and the rollout up to
        layer l is Â_l · … · Â_0; row i of layer l: how much of each input token reaches token i
        there (each row sums to 1). At the current temperature, causal rule, masks and sink; a
        widget of your own arrays is one layer of its heads. See :func:`attnwidget.mixing.rollout`."""
        self._dense_check("w.rollout()")
        return rollout(self._inputs().across("rollout"))

    def flow(self) -> np.ndarray:
        """Attention flow (Abnar & Zuidema, 2020), n × n: entry (i, j) is the maximum flow from
        input token j to token i at the last layer through the graph of every layer whose
        capacities are the Â of :meth:`rollout`; exact, a maximum flow for each pair, so for a text
        of a few dozen tokens (at 12 layers in about a second with igraph installed: 60 through
        causal layers, 44 through two-way ones; see :func:`attnwidget.mixing.attention_flow`):
        progress is said row by row, and a run estimated past ten seconds warns first."""
        self._dense_check("w.flow()")
        inputs = self._inputs()
        n, layers = inputs.rows, len(inputs.layers)
        seconds = measures.flow_seconds(n, layers, inputs.causal)
        if seconds > 10:
            warnings.warn(
                f"attention flow of {n} tokens through {layers} layer{'s' if layers > 1 else ''} takes about "
                f"{seconds:.0f} s (a maximum flow for each pair of tokens); rollout() is its fast approximation",
                stacklevel=2,
            )
        with progress("attention flow: row", n) as step:
            return measures.across(inputs, "flow", step=step)

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
        self._dense_check("w.norms()")
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
        found = projections[rules.layer_index({"layer": self.layer, "layer_numbers": self.layer_numbers})]
        if isinstance(found, str):
            raise ValueError(
                f"norms() needs layer {self.layer}'s output projection, which attnwidget could not read: {found}."
            )
        return found

    def _unprojected(self) -> bool:
        """The heads add their values as they are (no output projection turns them) here and in every
        layer, block and text the widget, and so its exported page, can switch to: weight × ‖value‖
        needs only the arrays shown. (Values set by hand on a model's widget are shown unprojected,
        but its page can go back to the model's layers.)"""
        if self.weights_only == "weights":
            return False
        s = self._sources  # (a model's texts share its projections: the text shown speaks for them)
        reachable = [*s.blocks.values(), s.found("", self.sentence_index) if s.texts else s.model]
        return all(getattr(found, "projections", None) is None for found in reachable)

    def _head_grams(self) -> np.ndarray:
        """The current layer's per-key Gram matrices of its heads' vectors (mixing.head_grams), kept
        per block and layer while its values are the same arrays."""
        kept = self._grams
        found = kept.get((self.block, self.layer))
        if found is None or found[0] is not self.v:
            projection = self._projection()
            v = self.v if self.v.ndim == 3 else self.v[None]
            found = kept[self.block, self.layer] = (
                self.v,
                head_grams(v, None if projection is None else projection.arrays()[0]),
            )
        return found[1]

    def _head_outputs(self) -> tuple[np.ndarray, np.ndarray | None]:
        """The current layer's f_h(x_j), heads × keys × width (mixing.head_vectors), and the
        projection's bias (None without one): Σ_j Σ_h α^h_ij f_h(x_j) + bias is the layer's output."""
        projection = self._projection()
        w, b = (None, None) if projection is None else projection.arrays()
        return head_vectors(self.v if self.v.ndim == 3 else self.v[None], w), None if b is None else b.astype(float)

    def difference(self, a: int = 0, b: int = 1) -> np.ndarray:
        """Text ``a``'s attention weights minus text ``b``'s, layers × heads × n × n in float64, for
        a widget of several texts of one model (``from_transformers(model, tokenizer, [text_a,
        text_b, ...])``) or several sentences. Each text's every layer is read whole, at the current
        temperature, causal rule, mask, sink and step (the first ``step`` tokens while writing), as
        head_summary computes weights (each layer's own mask and bias where the model has them; the
        text shown at the widget's bias, the others at their own). The texts must have the same
        number of tokens (a minimal pair); cell (i, j) is then how much more token i of text a reads
        token j than token i of text b does."""
        measures.check_pair(self._sources, a, b)
        self._dense_check("w.difference()")
        return measures.every_difference(self._inputs(a), self._inputs(b))

    def largest_difference(self, a: int = 0, b: int = 1) -> np.ndarray:
        """The largest absolute value of difference(a, b) in each layer and head, over its cells, layers × heads (as
        head_summary's numbers are shaped): the heads where the two texts differ most."""
        measures.check_pair(self._sources, a, b)
        self._dense_check("w.largest_difference()")
        return np.stack([most for _, most in measures.differences(self._inputs(a), self._inputs(b), lambda at: False)])

    def head_effects(self, mode: str = "zero", method: str = "exact") -> np.ndarray:
        """Each head's effect on the model's next token, layers × heads (float64): log p(next) with
        that head's output set to zero (``mode="zero"``) or to its mean over the text's positions
        (``mode="mean"``), the head ablated alone and the rest the model's own forward pass, minus
        log p(next) of the model's own pass; negative where the head helped. The next token is the
        one the model finds most likely after the tokens written so far (all of them, or the first
        ``step``), and the head is ablated at its own output, before the output projection mixes
        the heads. For a causal language model's widget (``from_transformers``, ``from_nnsight``
        or ``from_transformer_lens``); others raise ValueError. It runs the model once per layer,
        its heads a batch; each (mode, step) is computed once (the temperature does not change it),
        and the overview's "effect" summary shows it.

        ``method="attribution"``: the standard linear estimate instead (attribution patching), from
        one forward and one backward pass for every head at once: (z' − z) · ∂ log p(next) / ∂z over
        each head's output slot z, z' its ablated value. Fast on long texts, and an estimate: the
        exact ablation stays the default and the truth (the overview shows the exact values)."""
        rerun = self._rerun()
        method = ablation.check_method(method)
        key = (ablation.check_mode(mode), self._rows(), self.sentence_index)  # (a model's several texts: the one shown)
        if method == "attribution":
            return ablation.effects(rerun, key[1], mode, method)
        if key not in self._effects:
            self._effects[key] = ablation.effects(rerun, key[1], mode)
        shown = (self.overview or {}).get("summaries", {}).get("effect")
        estimated = "effect_exact" in (self.overview or {}) and mode == self._effect_mode
        if (mode != self._effect_mode or estimated) and shown is not None and any(v is not None for v in shown):
            self.set_trait("overview", None)  # the other mode's, or estimates where all are exact now: asked again
        self._effect_mode = mode
        return self._effects[key].copy()

    def _rerun(self):
        """What running the model again needs, or ValueError saying why this widget cannot."""
        found = None if self.blocks else self._sources.found("", self.sentence_index)  # the text shown
        rerun = getattr(found, "rerun", None) if self.layer_shown else None
        vision = self.model_name if self.image is not None else ""  # (an image's patches: no next token)
        problem = ablation.TWO_BLOCKS.format(name=self.model_name) if self.blocks else ablation.refusal(rerun, vision)
        if problem:
            raise ValueError(problem)
        return rerun

    def _reader(self):
        """How to read the model on tokens of one's own (integrations.common.Reader): the first text's
        (one for every text, so what it read is kept once); None for a widget not from a model."""
        found = None if self.blocks or not self.layer_shown else self._sources.found("", 0)
        return getattr(found, "reader", None)

    def _effect_key(self) -> tuple:
        return (self._effect_mode, self._rows(), self.sentence_index)

    def _effects_kept(self):
        """The overview's "effect" summary: head_effects kept for this step in the mode last asked
        (else the page's, estimated and exact for the heads estimated largest), False when not
        computed, None for a widget with no next token."""
        try:
            self._rerun()
        except ValueError:
            return None
        key = self._effect_key()
        return self._effects[key] if key in self._effects else self._estimates.get(key, (False,))[0]

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

    def head_scores(self, names=None, *, needle: dict | None = None) -> dict[str, np.ndarray]:
        """What each head does over every text of the widget (its sentences, or a model's texts;
        the one it has otherwise): ``"sink"`` (the mean over rows of the weight on the first
        token), ``"previous"`` (on token i − 1, rows i ≥ 1), ``"self"``, ``"duplicate"`` (over rows
        whose token appeared earlier, the weight on its earlier copies, summed), ``"entropy"`` (of
        each row, in nats) and ``"streaming"`` (each row's weight on the first 4 tokens and its 64
        nearest, what a streaming cache keeps: near 1 for a head that reads only those), each a
        layers × heads array, the mean over the texts (see
        :func:`attnwidget.atlas.text_scores`), at the current temperature, causal rule, masks, sink
        and step. One text's layers are scored at a time; a model's texts are kept while they fit
        ``sources.HOLD`` bytes, past it read again when needed; progress is said on long runs.

        A widget from a model has ``"induction"`` too: the model read on random tokens of its
        tokenizer's ordinary vocabulary, repeated twice (``atlas.COUNT`` seeded sequences of
        ``atlas.COPY`` tokens, after the tokens a text begins with), each head's mean over the second
        copy's rows i of W[i, i − m + 1], m the length of a copy (Olsson et al., 2022); read once,
        kept for other temperatures. A widget from_transformers of a model that writes has
        ``"retrieval"`` when asked (not by default: the model writes a needle out of long texts, 15 runs
        of up to 4,000 tokens): attnwidget.needle.retrieval_scores at its defaults, or at ``needle``
        (its keyword arguments: your needle, filler texts, lengths, depths, prompt), read once and kept
        (the overview's "retrieval" shows the last).
        ``names``: the scores to compute (every one the widget has but "retrieval" by default);
        "induction" or "retrieval" on a widget not from a model raises ValueError.

        A head is a sink head when its ``"sink"`` passes ``attnwidget.atlas.SINK_HEAD`` (0.3, Gu et
        al. 2025); ``atlas.sink_heads`` counts them."""
        self._dense_check("w.head_scores()")
        names = atlas.check_names(names, self._reader() is not None)
        inputs = self._inputs()
        count = max(1, len(self.sentences)) if set(names) - set(atlas.OWN_TEXTS) else 0
        reads = atlas.COUNT if "induction" in names and not atlas.read_already(self._reader()) else 0
        with progress("head scores: text", count + reads) as step:
            texts = (step(t) or pair for t, pair in enumerate(inputs.texts(), 1)) if count else ()
            repeats = (lambda: atlas.read_repeated(inputs, lambda i: step(count + i))) if "induction" in names else None
            scores = atlas.head_scores(texts, repeats)
        if "retrieval" in names:
            with progress("retrieval score (the model copies a needle), per cent done:", 100) as step:
                scores["retrieval"] = atlas.read_needle(
                    self._reader(), lambda f: step(round(100 * f)), **(needle or {})
                )
        return {n: scores[n] for n in names}

    def kv_keep(self, method: str = "", budget: int | None = None, **options) -> dict[str, np.ndarray]:
        """A compressed KV cache of the layer shown (attnwidget.kvcache): the keys each head keeps for a budget of
        ``budget`` keys (default: kv_budget), chosen by ``method`` (default: kv_method): "streaming"
        (StreamingLLM: the first ``sinks`` = 4 tokens and the most recent), "h2o" (H2O: the ``window`` most
        recent, default half the budget, and the largest column sums Σ_i w_ij over every row read;
        ``normalise=True`` divides each by the rows that read it), "snapkv" (SnapKV: the last ``window``
        rows, half the budget and at most 64, vote with their mean weights, pooled over ``kernel`` = 5 keys)
        or "mask" (the keys in kv_keys). Each head has a cache of its own unless ``group`` heads share one
        (a model's grouped-query heads: their scores averaged). Computed at the widget's temperature, rules,
        masks and step. Returns {"kept": heads × keys booleans, for the focused row ``"row"``: "retained"
        (each head's weight on the kept keys), "change" (‖o′ − o‖ / ‖o‖, o′ the output from the kept keys
        alone, their weights renormalised; NaN without values), "layer_retained" (the heads' mean) and
        "layer_change" (of every head's output side by side)}."""
        self._dense_check("w.kv_keep()")
        return computed_views.kv_keep(self._inputs(), method, budget, **options)

    def score_parts(self, row: int | None = None, column: int | None = None, *, layer=None, head=None):
        """Why head ``head`` of ``layer`` (those shown unless given) scores key ``column`` from query ``row``
        (the focused row unless given) as it does: the model's score split into (query part, key part)
        pairs, a ScoreParts (attnwidget.integrations.score_parts). The stream feeding the layer is the sum
        of the token and position embeddings, each earlier layer's heads, output bias and MLP; with the
        layer's input norm held at this pass's scale, each part has a query and a key, and ``table[a, b]``
        (query part a, key part b, scaling included) sums to ``score``, the model's own. ``.by_layer()``
        sums each layer's parts, ``.largest(k)`` lists the largest pairs. Without ``column``: the row's,
        by layer, ``terms`` per key and ``table`` each pair's share of their magnitude. The first call
        runs the model once on the text; a widget of a transformers model's pre-norm family only."""
        return why.of(self._inputs(), row, column, layer, head)

    def implicit_attention(self, layer: int | None = None):
        """The implicit attention of one of a hybrid model's state-space, linear-attention or
        convolution layers (``layer_kinds`` names those without attention; Falcon-H1 and Zamba2 run
        one beside attention), on the text shown, by the model's own layer number (the first read by
        default): an :class:`~attnwidget.integrations.implicit.ImplicitLayer`, whose ``alpha()`` is
        the matrix α with y = α · x for the layer's scan input x and output y (``alpha(c)``: one
        channel's or head's). α is not a softmax: its entries are signed and its rows do not sum to
        1. The model runs again once per text."""
        rerun = getattr(self._sources.found("", self.sentence_index), "rerun", None) if not self.blocks else None
        if rerun is None or rerun.library != "transformers":
            raise ValueError("implicit_attention() reads the model again: make the widget with from_transformers")
        kept = self.__dict__.setdefault("_implicit_kept", {})
        if self.sentence_index not in kept:
            from .integrations import implicit_attention

            kept[self.sentence_index] = implicit_attention(rerun.model, input_ids=rerun.ids)
        read = kept[self.sentence_index]
        offered = {one.layer: one for one in read.layers}
        if not offered:
            raise ValueError(
                "implicit_attention() is for a hybrid model's state-space, linear-attention or convolution layers; "
                f"this widget's model has none read here (attention layers are shown as they are): {read.skipped}"
            )
        layer = min(offered) if layer is None else layer
        if layer not in offered:
            said = ", ".join(f"{i} ({one.kind})" for i, one in sorted(offered.items()))
            why = f" (the model's layer {layer}: {read.skipped[layer]})" if layer in read.skipped else ""
            raise ValueError(
                f"layer must be one of the model's layers with implicit attention: {said}; got {layer!r}{why}"
            )
        return offered[layer]

    def query_key_map(self, layer: int | None = None, head: int | None = None, method: str = "pca") -> dict:
        """One head's every query and key of every text of the widget in one 2-D picture (after
        AttentionViz): the queries scaled by c and the keys by 1/c so that their mean norms are
        equal, the keys then moved so that their centroid is the queries' (neither changes any
        weight), and the union projected on its first two principal components (``method="tsne"``
        or ``"umap"`` where scikit-learn or umap-learn is installed). ``layer`` and ``head``: the
        widget's by default. Returns {"points": N × 2, "text", "position", "kind" ("query" or
        "key"), "token": one each per point, "scale": c, "shift": the keys' move, "explained": the
        variance share of each axis, "layer", "head", "method"}; the rows read (the first ``step``
        tokens while writing) of each text. See :mod:`attnwidget.qkmap`. A widget of attention weights
        alone (from_attentions) has no queries or keys: ValueError, saying what has them."""
        inputs = self._inputs()
        layer = (self.layer if self.layer_shown else 0) if layer is None else layer
        layer, head = qkmap.check(inputs, layer, self.head if head is None else head, method)
        return qkmap.query_key_map(inputs, layer, head, method)

    def head_summary(self) -> dict[str, np.ndarray]:
        """One number per layer and head for each of ``"first"`` (the weight on token 0),
        ``"self"``, ``"previous"`` (the weight on token i − 1), ``"effective_tokens"`` and, with learnt
        sinks (``sinks``), ``"sink_share"`` (the share of each row the head's sink takes, 1 − the row's sum):
        arrays of layers × heads (one row when the widget has no model layers), computed with
        numpy (torch, in float64, for a model on a GPU) at the current temperature, causal rule,
        mask and ``sink`` (with which no row reads token 0, and ``"first"`` is NaN). Each is a
        mean over the rows where it exists (see :func:`attnwidget.formulas.head_summaries`), so a causal model's
        ``"previous"`` leaves out the first row, which has no previous token; in cross-attention
        no row reads itself, and ``"self"`` and ``"previous"`` are NaN. A new dict of new
        arrays every call."""
        self._dense_check("w.head_summary()")
        inputs = self._inputs()
        rows = [
            head_summaries(weights, allowed, cross=self.cross, sinks=inputs.has_sinks)
            for weights, allowed in inputs.weights()
        ]
        return {name: np.array([r[name] for r in rows], dtype=float) for name in rows[0]}
