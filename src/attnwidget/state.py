"""The widget's state, declared once: every piece of it, with its kind, default, whether the page
may write it, how it travels, its constraint and its docstring.

Everything else is made from this list: the traits on AttentionWidget (traits.declared), the
constructor's keyword arguments (``Options``, the generated ``state_types.py``), the rules' lists
(rules.WRITABLE, READ_ONLY, INDICES, FLAGS), the names the page receives (rules.CONSTANTS), the
docs' table of traits, and the page's type of its state (the generated ``js/state.d.ts``).
``scripts/state_types.py`` writes the generated files; a test fails when they are stale.

The rule a trait obeys beyond its own kind and range lives in the rules' twins (rules/, js/rules.js).
No imports from the package: the rules, the traits and the generator all read this module.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# The strings some fields may be (their constraint), and the page's names for them (rules.CONSTANTS).
STAGES = ("tokens", "qk", "scores", "weights", "blend")
BLOCKS = ("encoder", "decoder", "cross")
EXERCISES = ("", "predict", "temperature")
# the overview's colours: head_summary()'s (the text shown), a causal language model's head_effects() ("effect"),
# and head_scores()'s over every text ("sink", "duplicate", "entropy", and a model's "induction")
SUMMARIES = (
    "first",
    "self",
    "previous",
    "effective_tokens",
    "sink_share",  # a model's learnt sinks' share of each row (head_summary()'s, with sinks)
    "effect",
    "sink",
    "duplicate",
    "induction",
    "entropy",
    "streaming",
    "retrieval",
)
MEASURES = ("norms", "mean", "rollout", "flow", "difference")  # the panel beyond one head (measures.py)
KV_METHODS = ("streaming", "h2o", "snapkv", "mask")  # a compressed KV cache's choices of keys (kvcache.py)
# where position enters: the lab's choices, and the schemes a model's widget names (configs.position_of; "": unknown)
POSITIONS = ("none", "rope", "alibi")
MODEL_POSITIONS = ("rope", "alibi", "relative", "learned", "sinusoidal", "")
WEIGHTS_ONLY_KINDS = ("", "weights", "weights and values")

# A field's kind says what it holds, which trait type holds it and how it is typed in Python and in the page.
KINDS = (
    "index",  # an integer index (focus, head, ...): rules.check's own range checks
    "count",  # a number of things, set by the widget
    "flag",  # True or False
    "number",  # a float (or None where nullable)
    "numbers",  # a list of floats (or None)
    "choice",  # one of `choices`
    "text",  # one string
    "texts",  # one string per token (or per sentence, block, ...)
    "counts",  # a list of integers
    "cell",  # (row, column), or None
    "array",  # a float array: tokens × width, or heads × tokens × width where `heads`
    "mask",  # queries × keys booleans
    "masks",  # several masks, one after another
    "answer",  # a kernel's answer for the page (plain data), the key it is for inside
)
# how it travels: "synced" to the page as it changes; "kept" in the kernel (an exported page carries it);
# "kernel": held by the kernel alone
TRAVELS = ("synced", "kept", "kernel")


@dataclass(frozen=True)
class Field:
    """One piece of the widget's state."""

    name: str
    kind: str
    default: Any
    doc: str
    writable: bool = False  # a user or the page may set it; otherwise the widget derives it (read-only)
    nullable: bool = False  # None is a value of it
    travel: str = "synced"
    rules: bool = True  # part of the state the rules settle (rules.FIELDS); False for the kernel's answers
    init: bool | None = None  # a keyword argument of AttentionWidget(...); None: when writable
    init_none: bool = False  # the constructor takes None too: the widget chooses (from the other arguments)
    choices: tuple = ()  # a choice's strings
    heads: bool = False  # an array that may carry heads (heads × …)
    py: str = ""  # its Python type, where the kind's is not enough
    ts: str = ""  # its type in the page, where the kind's is not enough

    def __post_init__(self):
        if self.kind not in KINDS or self.travel not in TRAVELS:
            raise ValueError(
                f"{self.name}: kind {self.kind!r} or travel {self.travel!r} is not one of {KINDS}, {TRAVELS}"
            )

    @property
    def in_init(self) -> bool:
        return self.writable if self.init is None else self.init


F = Field
# A table, a field to an entry, in the order the docs list them.
# fmt: off
FIELDS: tuple[Field, ...] = (
    # --- what is computed on ---
    F("tokens", "texts", (), writable=True, doc="The rows' tokens, one string per row of q."),
    F("key_tokens", "texts", (), nullable=True, init=True,
      doc="""The columns' tokens: the tokens themselves in self-attention; in cross-attention the text read (a
      translation model's source)."""),
    F("cross", "flag", False, doc="Cross-attention: the columns are another text's tokens (key_tokens of their own)."),
    F("q", "array", None, writable=True, heads=True, doc="Queries: tokens × width, or heads × tokens × width."),
    F("k", "array", None, writable=True, heads=True, doc="Keys: one row per key token, q's width (and heads)."),
    F("v", "array", None, writable=True, heads=True, doc="Values: one row per key token, any width (and q's heads)."),
    F("x", "array", None, writable=True, nullable=True,
      doc="Each token's own embedding (tokens × value width), which the blend stage can add the mix to; or None."),
    F("residual", "flag", False, writable=True, doc="Show x + the mix in the blend stage (needs x)."),
    F("mask", "mask", None, writable=True, nullable=True,
      doc="""Cells a row may read besides the causal rule (queries × keys, True = may read), e.g. to leave out
      padding; or None."""),
    F("bias", "array", None, writable=True, heads=True, nullable=True,
      doc="Added to the scores, (heads ×) queries × keys: a model's position bias (T5, ALiBi); or None."),
    F("temperature", "number", 1.0, writable=True,
      doc="T in softmax(scores / T): any finite T > 0 (the slider spans 0.1 to 5)."),
    F("causal", "flag", False, writable=True, init_none=True,
      doc="Each token reads only itself and the tokens before it."),
    F("sink", "flag", False, writable=True,
      doc="Attention sinks: the first token's column left out and every row renormalised over the rest."),
    F("scale", "number", None, writable=True, nullable=True, doc="The factor on q·k; None for 1/√d."),
    F("softcap", "number", None, writable=True, nullable=True,
      doc="""Soft-capping: each scale·q·k becomes softcap·tanh(s/softcap), so no score passes ±softcap (Gemma 2);
      None for no cap."""),
    F("sinks", "numbers", None, writable=True, nullable=True,
      doc="""Learnt attention sinks (gpt-oss): one logit z per head, one more column of every row's softmax (divided
      by the temperature as the scores are), dropped after it, so that each row keeps 1 − the sink's share and
      no token gets the rest; None for none. A model's layer switch brings its own in (-1e30: a head, or layer,
      without one)."""),
    F("position", "choice", "none", writable=True, choices=POSITIONS + MODEL_POSITIONS,
      doc="""Where position enters the attention (position.py). Your own arrays: "none" (as given), "rope" (each
      query and key turned pair by pair by its position × θ_i, θ_i = rope_base^(−2i/width); the pairs are the
      first and second halves of each vector) or "alibi" (``−m·|i − j|`` added to the scores, one slope m per
      head). A model's widget names its own scheme, which its q and k carry already, and cannot change it:
      "rope", "alibi", "relative" (T5's bias), "learned", "sinusoidal", or "" where its config does not say."""),
    F("rope_base", "number", 10000.0, writable=True,
      doc="""RoPE's base: pair i of a width-d vector turns by position × base^(−2i/d) (position="rope")."""),
    F("alibi_slopes", "numbers", None, writable=True, nullable=True,
      doc="""ALiBi's slopes, one m per head (position="alibi"); None for the ALiBi paper's 2^(−8h/H), h = 1 … H."""),
    # --- what is shown ---
    F("focus", "index", 0, writable=True, init_none=True,
      doc="The focused token (a row): its arcs, its row of weights, its output."),
    F("stage", "choice", "tokens", writable=True, init_none=True, choices=STAGES,
      doc="""The stage shown: one of "tokens", "qk", "scores", "weights", "blend"."""),
    F("head", "index", 0, writable=True, doc="The head shown (0 for 2-D arrays)."),
    F("difference_map", "flag", False, writable=True,
      doc="""A differential attention model's widget (model_lambda): the weights and blend stages show the signed
      difference of the head shown's pair, map 1 − λ·map 2, which is what the model mixes the values with (rows sum
      to 1 − λ); False shows the head's own softmax, map 1 or map 2 of its pair (w.differential has all three)."""),
    F("cell", "cell", None, writable=True, nullable=True,
      doc="The cell whose arithmetic is shown, (row, column) in the focused row; or None."),
    F("controls", "flag", True, writable=True,
      doc="""The page's controls are shown: the stages' buttons, the temperature, the causal, sink and position
      switches, the texts', blocks' and layers' selects (with the model's name), the generation stepper and the PNG
      and SVG buttons. False for a figure, the stages alone (a slide, a course page's illustration)."""),
    F("sentences", "texts", (),
      doc="""The sentences the page can switch between, or a model's texts (from_transformers with a list); empty for
      one sentence, your own arrays or a model of one text."""),
    F("text_lengths", "counts", (),
      doc="How many tokens each of sentences has (empty with one): the difference compares two of as many."),
    F("sentence_index", "index", 0, writable=True,
      doc="""The sentence (or model's text) shown, an index into sentences: a model's text comes with its tokens and
      every layer."""),
    F("value_axes", "texts", ("v₁", "v₂"), writable=True, init_none=True,
      doc="""Names of the blend plot's two value axes (the built-in ones are senses of "bank")."""),
    F("value_basis", "array", None, heads=True, nullable=True,
      doc="""Values wider than two are plotted on their first two principal axes: (heads ×) d_v × 2; None when the
      values are 2-D."""),
    # --- a real model's layers, heads and blocks ---
    F("layer", "index", 0, writable=True, init=False,
      doc="""The model's layer shown, by the model's own number (a hybrid's attention layers keep theirs: one of
      layer_numbers)."""),
    F("n_layers", "count", 0, doc="How many layers with attention weights the widget holds (0 for your own arrays)."),
    F("layer_numbers", "counts", (),
      doc="""The model's own number of each layer held, in order, where they are not 0 to n_layers − 1: a hybrid's
      attention layers among layers of other kinds (Jamba's 1, 3, 5, ...); empty otherwise."""),
    F("layer_kinds", "texts", (),
      doc="""What each of the model's layers is, by its number: "" for a layer held, else its kind in words (a
      Mamba state-space layer, linear attention, a short convolution), which computes no attention weights; empty
      when every layer is held."""),
    F("sparse_layers", "counts", (),
      doc="""The model's layers (by number) whose mask is sparse attention's choice of keys: each query reads the
      few keys an indexer chose (DeepSeek V3.2's top index_topk), not every key its rule allows. selection() and
      the page say how much of dense attention's weight the choice keeps."""),
    F("model_lambda", "numbers", None, nullable=True,
      doc="""Differential attention's λ, one per layer held (DiffLlama; Ye et al., 2025): the model mixes a pair of
      heads' values with map 1 − λ·map 2, head p's softmax minus λ times head p + heads/2's, each row summing to
      1 − λ; None for every other model."""),
    F("model_q", "array", None, heads=True, nullable=True, travel="kept",
      doc="""Every layer's queries, (layers · heads) × tokens × width, kept here: a layer switch brings that layer's
      in as q."""),
    F("model_k", "array", None, heads=True, nullable=True, travel="kept", doc="Every layer's keys, as model_q."),
    F("model_v", "array", None, heads=True, nullable=True, travel="kept", doc="Every layer's values, as model_q."),
    F("model_basis", "array", None, heads=True, nullable=True, travel="kept",
      doc="Every layer's value axes, (layers · heads) × d_v × 2; None when the values are 2-D."),
    F("model_masks", "masks", None, nullable=True, travel="kept",
      doc="""A model's masks, each once, masks × queries × keys: the cells a layer's rows may read besides the causal
      rule (a sliding window, local attention); None when no layer has one."""),
    F("mask_of_layer", "counts", (), travel="kernel",
      doc="""Each layer's mask, an index into model_masks (-1: none); empty when no layer has one. A layer switch
      brings its mask in as `mask`."""),
    F("model_bias", "array", None, heads=True, nullable=True, travel="kept",
      doc="""A bias per layer, (layers · heads) × queries × keys (attention weights alone: their logarithms); None
      for a bias the same in every layer, or none. A layer switch brings its own in as `bias`."""),
    F("term_names", "texts", (),
      doc="""The terms a model's bias is the sum of, by name: DeBERTa's "c2p" (content to position) and "p2c"
      (position to content), those it has, beside its scale · q · k ("c2c"); empty for other widgets."""),
    F("terms", "array", None, heads=True, nullable=True,
      doc="""The first of term_names (DeBERTa's c2p, or its only one) of the layer shown, (heads ×) queries × keys:
      the bias less it is the second. None without term_names, and once a bias of your own is set."""),
    F("model_terms", "array", None, heads=True, nullable=True, travel="kept",
      doc="""Every layer's terms, (layers · heads) × queries × keys; None without term_names. A layer switch brings
      its own in as `terms`."""),
    F("model_sinks", "array", None, nullable=True, travel="kept",
      doc="""A model's learnt attention sinks, layers × heads logits (-1e30 where a layer has none); None for a model
      without. A layer switch brings its own in as `sinks`."""),
    F("next_token", "flag", False,
      doc="""A causal language model's widget: head_effects() and the overview's "effect" summary (its effect on the
      next token)."""),
    F("model_causal", "flag", False,
      doc="""A model's widget whose model (or block shown) reads causally, each token only itself and the tokens
      before it (a decoder, a causal language model, attention weights of that pattern): its numbers for a
      text's first tokens are its own on those tokens, so `step` can write the text. False for a model that
      reads both ways (an encoder, a vision transformer), whose `step` is the number of tokens, and for your
      own arrays (`causal` is the widget's rule, which you may change; this is the model's)."""),
    F("reads_model", "flag", False,
      doc="""A widget that can run its model again on tokens of its own: head_scores()'s and the overview's
      "induction"."""),
    F("weights_only", "choice", "", choices=WEIGHTS_ONLY_KINDS,
      doc=""""weights" (or "weights and values") for a widget of attention weights alone (from_attentions): no q and
      k, so no query/key or scores stage (and no blend without values); "" otherwise."""),
    F("layer_arrays", "answer", (), nullable=True, ts="[string, number, number] | null", py="list | None", rules=False,
      doc="""[block, layer, head] whose arrays a live page has been sent: the head shown of q, k and v (the page
      keeps those it fetched by it); None for your own arrays."""),
    F("overview", "answer", {}, nullable=True, rules=False,
      doc="""A model's every layer and head at a glance, computed here when the page asks (overview.compute):
      thumbnails and summaries at the inputs in its "key"; None until asked, and again when those inputs
      change."""),
    F("layer_shown", "flag", False,
      doc="""q, k and v are the current layer's (not your own arrays): a layer switch brings them in from model_q,
      model_k and model_v."""),
    F("summary", "choice", "", writable=True, choices=("", *SUMMARIES),
      doc="""The heads' overview coloured by one of head_summary()'s names ("sink_share" where the heads have learnt
      sinks), one of head_scores()'s over every text ("sink", "duplicate", "entropy", "streaming"), a model's own
      "induction" or "retrieval", or a causal language model's "effect" (head_effects()), each computed when asked;
      "" for none."""),
    F("qk_map", "flag", False, writable=True,
      doc="""Beside the overview, the head shown's every query and key of every text in one 2-D map
      (query_key_map()), computed when the page shows it."""),
    F("measure", "choice", "", writable=True, choices=("", *MEASURES),
      doc="""The panel beyond one head's weights (measures.py): "norms" (weight × ‖value‖, the head shown), "mean"
      (the layer's heads' mean weights), "rollout" or "flow" (up to the layer shown), "difference" (two texts), or ""
      for none."""),
    F("measures", "answer", {}, ts="Record<string, string>", py="dict", rules=False,
      doc="""Each measure's name -> "" where this widget can show it, else why not."""),
    F("offered_measures", "texts", (), rules=False,
      doc="""The measures the page offers a button for (computed_views.offered): none for one head of one text,
      difference only with several texts."""),
    F("measure_data", "answer", {}, nullable=True, rules=False,
      doc="""{measure: its matrix for the page, at the state in its "key"} (computed_views.entry), computed here when
      the page asks; None until then, and again when the arrays change."""),
    F("computed", "answer", {}, nullable=True, rules=False,
      doc="""{view: its answer for the page, at the state in its "key"} for the other views computed_views.py
      declares (head_scores), computed here when the page asks; a view's answer is dropped when the state it
      is for changes."""),
    F("kv_method", "choice", "", writable=True, choices=("", *KV_METHODS),
      doc="""A compressed KV cache shown over the head's weights and the tokens (kvcache.py, w.kv_keep()): the keys
      "streaming" (StreamingLLM: the first tokens and the most recent), "h2o" (heavy hitters: the largest column
      sums, and the most recent), "snapkv" (the last queries' votes) or "mask" (kv_keys) keeps, kv_budget per head,
      and what the focused row loses without the rest; "" for none."""),
    F("kv_budget", "index", 16, writable=True,
      doc="The keys each head's compressed cache keeps (kv_method), a whole number ≥ 1; past the keys read, all."),
    F("kv_keys", "counts", (), writable=True,
      doc="""The keys kv_method "mask" keeps, by position (the same in every head); empty for none."""),
    F("model_name", "text", "", doc="The model's name, for the page's title."),
    F("position_about", "text", "",
      doc="""The page's words for a model's scheme ("RoPE, base 500,000"), shown beside its name."""),
    F("image", "answer", None, nullable=True, rules=False,
      ts="{ src: string; rows: number; cols: number; first: number; patch: number; size: [number, number] } | null",
      doc="""A vision model's image as it saw it, to draw under its patches: {"src": a PNG data URL, "rows", "cols":
      the patch grid, "first": the index of the first patch token, "patch": a patch's side in pixels, "size":
      [height, width]}; None for other widgets."""),
    F("blocks", "texts", (),
      doc="""An encoder–decoder model's blocks ("encoder", "decoder", "cross"); empty for other widgets."""),
    F("block", "text", "", writable=True, init=False, doc="""The block shown: one of blocks ("" for other widgets)."""),
    # --- teaching: writing token by token, exercises ---
    F("step", "index", 0, writable=True, init_none=True,
      doc="""How many tokens are written so far (1 to n; n shows them all): below n only the first `step` tokens
      exist and the causal rule is on. `tokens` keeps the whole text; every array (scores, weights, output,
      effective_tokens, rollout(), norms(), ...) is over the tokens written, `written_tokens` (=
      tokens[:step]), which label its rows and columns. A model's widget writes only where its model reads
      causally (model_causal)."""),
    F("exercise", "choice", "", writable=True, choices=EXERCISES,
      doc=""""predict" (spread a guess over the focused row, then reveal it), "temperature" (set T for `goal`
      effective tokens), or "" for none."""),
    F("guess", "numbers", None, writable=True, nullable=True, init=False,
      doc="The learner's guess at the focused row's weights (one per token read, summing to 1), or None."),
    F("revealed", "flag", False, writable=True, init=False, doc="The exercise's answer is shown."),
    F("goal", "number", 2.0, writable=True,
      doc="The temperature exercise's target: the effective tokens the focused row should reach."),
    F("scores_hint", "flag", False, writable=True,
      doc="""The predict exercise shows the focused row's scores before the reveal (a hint: they rank the tokens as
      the weights will)."""),
)
# fmt: on
BY_NAME = {f.name: f for f in FIELDS}
# The rules' lists (rules.values re-exports them; the page receives them in rules.CONSTANTS).
WRITABLE = tuple(f.name for f in FIELDS if f.writable)
READ_ONLY = tuple(f.name for f in FIELDS if f.rules and not f.writable)
RULED = WRITABLE + READ_ONLY  # the state as the rules see it
INDICES = tuple(f.name for f in FIELDS if f.writable and f.kind == "index")
FLAGS = tuple(f.name for f in FIELDS if f.writable and f.kind == "flag")
INIT = tuple(f.name for f in FIELDS if f.in_init)  # AttentionWidget's keyword arguments, after the sentence
