"""The numbers of the head shown, as read-only numpy views that always agree with the traits:
scores, weights, output, effective tokens and the lab's readouts, computed by formulas.py for the
current state (one :class:`~attnwidget.formulas.Attention`, kept while its inputs are the same
objects), and refused past the widget's ``dense_limit`` (dense.py). A part of :class:`~attnwidget.AttentionWidget`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

import numpy as np

from . import dense, rules
from .formulas import Attention, Differential, differential, pair_heads
from .inputs import head_of, reading_mask
from .position import positioned
from .position import slopes as slopes_of

if TYPE_CHECKING:  # a part of AttentionWidget, typed against the interface of its fields and parts
    from .parts import Widget as _Widget
else:
    _Widget = object


class Shown(_Widget):
    """The current head's numbers (``attention`` and the properties read from it)."""

    _results: dict | None = None  # head -> (its inputs, the Attention computed at them): the head shown's, its pair's

    def _rows(self) -> int:
        """How many tokens there are: all of them, or while generating the first `step`."""
        return rules.rows({"tokens": self.tokens, "step": self.step})

    def _keys_read(self) -> int:
        """How many tokens a row reads: the tokens written, or cross-attention's own."""
        return rules.keys_read(
            {"tokens": self.tokens, "step": self.step, "cross": self.cross, "key_tokens": self.key_tokens}
        )

    @property
    def written_tokens(self) -> list[str]:
        """The tokens every array is over, which label its rows (and, in self-attention, its columns): all of
        ``tokens``, or while a text is written (``step`` below their number) the first ``step``."""
        return list(self.tokens[: self._rows()])

    @property
    def n_heads(self) -> int:
        """How many heads q, k and v carry (1 for 2-D arrays)."""
        q = self.q
        return 1 if q is None or q.ndim == 2 else q.shape[0]

    def _head(self, a):
        return head_of(a, self.head)

    def _dense_check(self, what: str) -> None:
        """Refuse ``what`` past ``dense_limit``: it is computed from the whole tokens × keys matrices."""
        dense.check(what, self._rows(), self._keys_read(), self.dense_limit)

    @property
    def attention(self) -> Attention:
        """The full :class:`~attnwidget.Attention` result for the current state and head."""
        return self._attention("w.attention")

    def _attention(self, what: str, head: int | None = None) -> Attention:
        """``attention``, asked for by ``what`` (named when it is refused past ``dense_limit``); ``head``: another
        head's at the same state (a differential pair's other map)."""
        self._dense_check(what)
        head = self.head if head is None else head
        # Keyed on the inputs themselves (arrays by identity: each assignment stores a new one),
        # so even an observer called in the middle of set_vectors never sees stale numbers.
        key = (
            self.q,
            self.k,
            self.v,
            self.temperature,
            self.causal,
            self.scale,
            self.mask,
            self.sink,
            self.bias,
            self.step,
            self.softcap,
            self.position,
            self.rope_base,
            self.alibi_slopes,
            self.sinks,
        )
        fresh = lambda kept: all(rules.same(a, b) for a, b in zip(kept, key))
        # kept: the head asked for and, of the rest, those a differential pair of the head shown needs (at most two
        # heads' matrices are held, not one per head ever shown)
        wanted = {head, self.head, *(pair_heads(self.head, self.n_heads) if self._lambda() is not None else ())}
        results = {h: r for h, r in (self._results or {}).items() if h in wanted and fresh(r[0])}
        if head not in results:
            results[head] = (key, self._computed(self.mask, head))
        self._results = results
        return results[head][1]

    def _computed(self, mask, head: int | None = None) -> Attention:
        """A head's attention (the head shown's by default) at the state as it stands, with ``mask`` for
        the widget's own."""
        head = self.head if head is None else head
        n, m = self._rows(), self._keys_read()  # while generating: the tokens written so far
        q, k, v = (head_of(a, head)[:r].astype(float) for a, r in zip((self.q, self.k, self.v), (n, m, m)))  # float64
        bias = None if self.bias is None else head_of(self.bias, head)[:n, :m]
        q, k, bias = positioned(q, k, bias, self._position_state(head))
        mask = reading_mask(mask, self.sink, len(self.tokens), len(cast(list, self.key_tokens)))
        return Attention(
            q,
            k,
            v,
            temperature=self.temperature,
            causal=self.causal,
            scale=self.scale,
            mask=None if mask is None else mask[:n, :m],
            bias=bias,
            softcap=self.softcap,
            sink=self._sink(head),
        )

    def _sink(self, head: int | None = None) -> float | None:
        """A head's learnt sink's logit (the head shown's by default), or None."""
        head = self.head if head is None else head
        return None if self.sinks is None else self.sinks[min(head, len(self.sinks) - 1)]

    def selection(self) -> dict[str, np.ndarray]:
        """What sparse attention's choice keeps, in a layer of ``sparse_layers`` (DeepSeek V3.2's: each
        query reads the few keys its indexer chose, the rest closed in the layer's mask): ``"chosen"``,
        how many keys each row reads; ``"dense"``, the weights dense attention would give (the same
        scores and temperature, every key the causal rule allows); ``"kept"``, each row's share of
        those dense weights on the keys chosen. At the head shown; rows read, as ``weights``."""
        if not self.sparse_layers:
            raise ValueError(
                "selection() is for a layer of sparse attention, whose queries each read the keys an indexer chose "
                "(DeepSeek V3.2's): this widget's model has none"
            )
        said = ", ".join(map(str, self.sparse_layers))
        if not (self.layer_shown and self.layer in self.sparse_layers):
            raise ValueError(
                f"selection() is for a layer of sparse attention: set w.layer to one of {said} (or set it again to "
                "bring the model's arrays back, after arrays of your own)"
            )
        texts = len(self.sentences) > 1 and not self.blocks
        own = self._sources.layer(
            self.block,
            self._place(),
            self.sentence_index if texts else 0,
        ).get("mask")
        if self.mask is not own or self.causal != self.model_causal or self.sink:
            raise ValueError(
                "selection() reads the indexer's choice from the layer's own mask, under the model's causal rule: "
                "set w.layer again to bring its mask back, causal to the model's and sink to False"
            )
        self._dense_check("w.selection()")
        allowed, dense = self.attention.allowed, self._computed(None).weights
        chosen = np.ones(dense.shape, dtype=bool) if allowed is None else allowed
        return {"chosen": chosen.sum(axis=1), "dense": dense, "kept": np.where(chosen, dense, 0.0).sum(axis=1)}

    @property
    def differential(self) -> Differential | None:
        """Differential attention (a model with ``model_lambda``: DiffLlama) at the head shown and the
        current state: its pair's two heads (``heads``: p and p + heads/2), their own softmaxes ``map1``
        and ``map2``, the layer's λ, their signed ``difference`` map1 − λ·map2 (rows sum to 1 − λ),
        ``output`` = difference @ v (the model's mix of the pair, before its group norm), and ``shown``,
        the map the weights stage shows ("map 1", "map 2", or with ``difference_map`` "difference").
        The temperature divides both maps' scores. None for other widgets, and for your own arrays."""
        lam = self._lambda()
        if lam is None:
            return None
        heads = pair_heads(self.head, self.n_heads)
        one, two = (self._attention("w.differential", h) for h in heads)
        shown = "difference" if self.difference_map else ("map 1", "map 2")[heads.index(self.head)]
        return differential(one, two, lam, heads, shown)

    def _lambda(self) -> float | None:
        """The λ of the layer shown, for a differential attention model's layer (None otherwise)."""
        lambdas = self.model_lambda
        if not lambdas or not self.layer_shown:
            return None
        return lambdas[self._place()]

    def _place(self) -> int:
        """The layer shown's place among the layers held (``layer`` is the model's own number)."""
        return rules.layer_index({"layer": self.layer, "layer_numbers": self.layer_numbers})

    def _position_state(self, head: int) -> dict:
        """What position.positioned reads for ``head``: the lab's scheme (a model's is in its q and k)."""
        every = self.alibi_slopes or slopes_of(self.n_heads)
        one = [every[min(head, len(every) - 1)]]  # (the head's own slope)
        return {"position": self.position, "rope_base": self.rope_base, "alibi_slopes": one, "n_layers": self.n_layers}

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
        return self._frozen(self._attention("w.scores").scores)

    def score_terms(self) -> dict[str, np.ndarray]:
        """The head shown's scores (n × n each, float64) split into the terms a DeBERTa model
        (``from_transformers``) adds them from: "c2c", content to content (scale · q · kᵀ); "c2p",
        content to position (each query · the key of its relative position to each token); "p2c",
        position to content (each key · the query of its relative position to each query); each
        scaled by 1/√(d · (1 + the position terms)), those the model has (its ``pos_att_type``). The
        position terms are the layer's ``bias``; together the terms are ``scores``."""
        self._dense_check("w.score_terms()")
        found = self._sources.found(self.block, self.sentence_index) if self.n_layers else None
        terms = getattr(found, "terms", None)
        if terms is None:
            raise ValueError(
                "score_terms() splits a DeBERTa model's scores into their content and position terms (c2c, c2p, p2c; "
                "from_transformers of a DeBERTa model); this widget's scores are scale · q · kᵀ"
                + ("" if self.bias is None else " plus its bias")
            )
        own = self._sources.layer(self.block, self._place(), self.sentence_index)
        if not self.layer_shown or not all(
            rules.same(getattr(self, n), own.get(n, getattr(found, n, None))) for n in ("q", "k", "bias")
        ):
            raise ValueError(
                "score_terms() splits the scores of the q, k and bias the model made; this widget's have been set "
                "since: set w.layer again to show the model's"
            )
        n = self._rows()
        return terms.of(self._place(), self._head(self.q)[:n], self._head(self.k)[:n], self.head)

    @property
    def weights(self) -> np.ndarray:
        """Row-wise softmax of scores / temperature (n×n); rows read, columns are read from. With a
        learnt sink (``sinks``), its logit is one more column of the softmax, dropped: each row sums to
        1 − the sink's share."""
        return self._frozen(self._attention("w.weights").weights)

    @property
    def output(self) -> np.ndarray:
        """The mix, weights · V (n×d_v)."""
        self._needs("blend", "output")
        return self._frozen(self._attention("w.output").output)

    @property
    def residual_output(self) -> np.ndarray | None:
        """x + weights · V: each token's own embedding with the mix added (None without x)."""
        return (
            None
            if self.x is None
            else self._frozen(self.x[: self._rows()] + self._attention("w.residual_output").output)
        )

    @property
    def effective_tokens(self) -> np.ndarray:
        """exp(entropy) of each row's weights divided by the row's sum (formulas.effective_tokens): how many
        tokens the row spreads what it reads over; with a learnt sink, what it keeps."""
        return self._frozen(self._attention("w.effective_tokens").effective_tokens)

    @property
    def sense_resolved(self) -> np.ndarray:
        self._needs("blend", "sense_resolved")
        return self._frozen(self._attention("w.sense_resolved").sense_resolved)

    @property
    def output_spread(self) -> float:
        self._needs("blend", "output_spread")
        return self._attention("w.output_spread").output_spread

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
        "score") to the weight, with no q·k, scale or cap (and no share without values). With
        position="rope" the "dot" is of the query and key turned; with "alibi" the "bias" holds ``−m·|i − j|``."""
        if self.cell is None:
            return None
        steps = self._attention("w.cell_arithmetic").cell(*self.cell)
        if not self.weights_only:
            return steps
        dropped = ("dot", "scale", "softcap", "capped", "bias") + (
            ("value", "share") if self.weights_only == "weights" else ()
        )
        return {
            "given": 0.0 if steps["masked"] else float(np.exp(steps["score"])),
            **{k: v for k, v in steps.items() if k not in dropped},
        }
