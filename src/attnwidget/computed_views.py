"""Every view the kernel computes, declared once: what it depends on (its key), whether it is
signed, where its answer is held, when it is available and why not, and its computation.

The page asks for each the same way ({"kind": "compute", "view": name}, live.py), learns these
declarations from Python (``VIEWS_FOR_PAGE``, sent with the rules' constants), and decides with
one function whether what it holds is current (js/requests.js: ``current``). Adding a view is
its computation (a module of its own), an entry here, and its view in the page.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from . import atlas, kvcache, measures, qkmap, rules, why
from .formulas import pair_heads
from .inputs import ARRAYS, KEY, Inputs
from .inputs import stale as inputs_stale
from .mixing import rollout

_OWN = ("q", "k", "v", "x")  # a measure of the layer shown is computed from its arrays


@dataclass(frozen=True)
class View:
    name: str
    depends: tuple  # the state it is computed from: plain values are its key, arrays are compared here
    held_in: str  # the trait that holds its answer: "overview", or "measure_data" or "computed" (by name)
    signed: bool = False  # drawn on a diverging scale from a neutral 0
    why_not: Callable[[Inputs], str] = lambda inputs: ""  # "" where the widget can show it, else why not
    matrix: Callable | None = None  # a measure's queries × keys (and extra numbers for the page)
    compute: Callable | None = None  # a view held in "computed": its answer's numbers, from Inputs
    # {trait: values}: the page asks for it while every trait has one of its values (None: any value but None)
    asked_when: dict | None = None
    # a measure's: the choices an exported page's answer follows ("layer" where the widget has layers, "head"), its
    # matrix at every value of them (leading axes in that order), and its words in the page: its button (label), a
    # sentence under the buttons (about), its figure's title ({layer}, {head}, {other}: the other text) and an
    # image's caption of its focused row ({t}: the token); across_layers: only the causal rule closes its cells
    follows: tuple = ()
    every_matrix: Callable | None = None
    label: str = ""
    about: str = ""
    title: str = ""
    reads: str = ""
    across_layers: bool = False
    unasked_every: bool = True  # an exported page carries it at every value it follows when not the one shown too

    def __post_init__(self):
        if self.follows and self.every_matrix is None:
            raise ValueError(f"{self.name} follows {self.follows}: give its every_matrix (its matrix at each of them)")

    def key(self, inputs: Inputs, every: tuple = ()) -> dict:
        """What the page compares with its own state to know whether this view's answer is current;
        ``every``: the choices ("layer", "head") an answer holds every value of, so not in its key."""
        names = tuple(n for n in self.depends if n not in every)
        return inputs.key(names, **({"measure": self.name} if self.held_in == "measure_data" else {}))


def _texts_differ(inputs: Inputs) -> str:
    """Why the text shown has no difference from another ("" when it has)."""
    try:
        measures.pair(inputs.sources, inputs.state["sentence_index"])
    except ValueError as e:
        return str(e)
    return ""


def _why(name: str) -> Callable[[Inputs], str]:
    return lambda inputs: available(inputs)[name]


def _rollout(inputs):
    return rollout(inputs.across("rollout", measures.shown(inputs)[0]), last=True), {}


def _flow(inputs):
    return measures.across(inputs, "flow", measures.shown(inputs)[0]), {}


def _norms(inputs):
    return measures.norms(inputs)[measures.shown(inputs)[1]], {}


def _difference(inputs, every: bool = False):
    matrix, largest = measures.difference(inputs, every)
    other = measures.pair(inputs.sources, inputs.state["sentence_index"])[1]
    return matrix, {"other": other, "largest": [float(v) for v in largest.reshape(-1)]}


def _every_difference(inputs, axes):
    stack, extra = _difference(inputs, every=True)
    return (stack if "layer" in axes else stack[0]), extra


def _head_scores(inputs: Inputs) -> dict:
    best: dict = {}
    scores = atlas.head_scores(inputs.texts(), None, best)
    plain = {name: [None if np.isnan(v) else float(v) for v in a.ravel()] for name, a in scores.items()}
    return {
        "summaries": plain,
        # each head's text where its score is highest (a click on it shows it there); none for induction's own texts
        "best": {name: [int(t) for t in a.ravel()] for name, a in best.items()},
        "texts": max(1, len(inputs.state["sentences"] or ())),
        "sink_heads": atlas.sink_heads(scores),
    }


def _buffer(a, dtype) -> dict:
    a = np.ascontiguousarray(a, dtype=dtype)
    return {"shape": list(a.shape), "dtype": np.dtype(dtype).name, "view": memoryview(a.reshape(-1).data)}


def _query_key_map(inputs: Inputs) -> dict:
    s = inputs.state
    layer, head = qkmap.check(
        inputs, s["layer"] if s["layer_shown"] else 0, min(s["head"], rules.n_heads(s) - 1), "pca"
    )
    found = qkmap.query_key_map(inputs, layer, head)
    return {
        "points": _buffer(found["points"], np.float32),
        "text": _buffer(found["text"], np.int32),
        "position": _buffer(found["position"], np.int32),
        "query": _buffer(found["kind"] == "query", np.uint8),
        "token": [str(t) for t in found["token"]],
        "explained": [float(v) for v in found["explained"]],
        "scale": found["scale"],
    }


def _pair(inputs: Inputs) -> dict:
    """The other head of a differential pair (a live page holds the head shown alone): its queries and keys as
    the model made them, every token's, for the page to compute that map at any temperature."""
    s = inputs.state
    heads = rules.n_heads(s)
    one, two = pair_heads(min(s["head"], heads - 1), heads)
    other = two if min(s["head"], heads - 1) == one else one
    return {"head": other, **{n: _buffer(s[n][other], s[n].dtype) for n in ("q", "k")}}


def _retrieval(inputs: Inputs) -> dict:
    """The retrieval score alone: the model writes a needle from long texts of its own (needle.py), once."""
    reader = inputs.extra.get("reader")
    if reader is None:
        raise ValueError(atlas.NO_WRITER + ": it needs a widget made from a model")
    scores = atlas.read_needle(reader)
    return {"summaries": {"retrieval": [None if np.isnan(v) else float(v) for v in scores.ravel()]}, "best": {}}


def _induction(inputs: Inputs) -> dict:
    """The induction score alone: the model run on its own repeated texts (once), not the widget's texts."""
    scores = atlas.head_scores((), lambda: atlas.read_repeated(inputs))
    return {"summaries": {"induction": [float(v) for v in scores["induction"].ravel()]}, "best": {}}


def kv_keep(inputs: Inputs, method: str = "", budget: int | None = None, **options) -> dict:
    """The layer shown's compressed KV cache (kvcache.of_layer): the widget's kv_method and kv_budget unless
    given, its focused row, every head its own cache unless ``group`` says how many share one."""
    s = inputs.state
    method = method or s["kv_method"]
    if not method:
        raise ValueError(f"say which keys to keep: method one of {', '.join(map(repr, kvcache.METHODS))}")
    if inputs.cross:
        raise ValueError(kvcache.NO_CROSS)
    options = kvcache.options_of(options, ("group",))
    weights = measures.layer_weights(inputs)
    v = s["v"]
    v = None if v is None else (v if v.ndim == 3 else v[None])
    row = min(s["focus"], inputs.rows - 1)
    budget = s["kv_budget"] if budget is None else budget
    found = kvcache.of_layer(weights, v, row, method, budget, keys=s["kv_keys"], causal=inputs.causal, **options)
    return {**found, "row": row, "method": method, "budget": budget}


def _kv_cache(inputs: Inputs) -> dict:
    found = kv_keep(inputs)

    def plain(a):
        return [None if np.isnan(x) else float(x) for x in np.ravel(a)]

    return {
        "kept": _buffer(found["kept"], np.uint8),
        "retained": plain(found["retained"]),
        "change": plain(found["change"]),
        **{n: plain(found[n])[0] for n in ("layer_retained", "layer_change")},
        "row": found["row"],
    }


_MEASURE = KEY + ARRAYS + _OWN + ("layer",)
VIEWS = {
    v.name: v
    for v in (
        View("overview", KEY + ARRAYS + ("model_q", "layer_shown"), "overview"),
        # a causal language model's head effects: a summary within the overview (its answer), computed by running the
        # model when the summary asks (research._overview_now); kept per step and text, at any temperature
        View("effect", ("step", "sentence_index"), "overview", signed=True),
        View(
            "norms",
            (*_MEASURE, "head"),
            "measure_data",
            why_not=_why("norms"),
            matrix=_norms,
            follows=("head",),
            every_matrix=lambda inputs, axes: (measures.norms(inputs), {}),
            label="weight × ‖value‖",
            about="Weight × ‖value‖: each cell is ‖α · f(x_j)‖, the length of the vector this head actually adds to the"
            " row's token for that key (f(x) = (x W_V + b_V) W_O, a model's value through its output projection; "
            "your own arrays' value itself). It differs from the weight where a value is short: a large weight on"
            " a token whose value is near zero moves nothing.",
            title="weight × ‖value‖, head {head}",
            reads="what each patch moves {t} by",
        ),
        View(
            "mean",
            _MEASURE,
            "measure_data",
            matrix=lambda inputs: (measures.heads_mean(inputs), {}),
            follows=("layer",),
            every_matrix=lambda inputs, axes: (measures.heads_mean(inputs, every=True), {}),
            label="heads' mean",
            unasked_every=False,  # (at every layer only when chosen: as much again as rollout's in a page)
            about="The heads' mean: each cell is the mean of this layer's heads' weights for that pair, so a row "
            "sums to what each head's row does (1). It is what the layer reads as a whole, before each head's values "
            "weigh in: a head that reads sharply is blurred by the others, so compare it with the head's own weights "
            "above.",
            title="the mean of layer {layer}'s heads",
            reads="how much {t} reads each patch, on average over the layer's heads",
        ),
        View(
            "rollout",
            _MEASURE,
            "measure_data",
            why_not=_why("rollout"),
            matrix=_rollout,
            follows=("layer",),
            every_matrix=lambda inputs, axes: (measures.across_every(inputs, "rollout"), {}),
            label="rollout",
            about="Rollout up to this layer: at each layer Â = ½ · the heads' mean weights + ½ · I (the residual path),"
            " rows renormalised, and Â_l · … · Â_0 says how much of each input token (the columns) reaches each "
            "token (the rows) this far up. Each row sums to 1. Move the layer to go further up.",
            title="rollout up to layer {layer}",
            reads="how much of each patch reaches {t}",
            across_layers=True,
        ),
        View(
            "flow",
            _MEASURE,
            "measure_data",
            why_not=_why("flow"),
            matrix=_flow,
            follows=("layer",),
            every_matrix=lambda inputs, axes: (measures.across_every(inputs, "flow"), {}),
            label="flow",
            about="Flow up to this layer: the maximum flow from each input token (the columns) to each token (the rows)"
            " through every layer so far, the Â of rollout as capacities. Exact, a maximum flow for each pair, so"
            " only for short texts. A row's flows do not sum to 1 (each pair's is its own maximum): the "
            "percentages under the tokens are each flow's share of the focused row's total. Move the layer to go "
            "further up.",
            title="flow up to layer {layer}",
            reads="the flow from each patch to {t}",
            across_layers=True,
        ),
        View(
            "difference",
            (*_MEASURE, "head"),
            "measure_data",
            signed=True,
            why_not=_why("difference"),
            matrix=_difference,
            follows=("layer", "head"),
            every_matrix=_every_difference,
            label="difference",
            about="The difference of two texts, head by head: this text's weights minus the other's, cell by cell. "
            "Purple: this text's row reads that token more; orange: less.",
            title="this text − “{other}”, head {head}",
            reads="how much more {t} reads each patch here than in the other text",
        ),
        # head scores over every text (atlas.py): the overview's summaries "sink", "duplicate", "entropy", "streaming"
        View(
            "head_scores",
            KEY + ARRAYS + ("q", "k", "model_q", "layer_shown"),
            "computed",
            compute=_head_scores,
            asked_when={"summary": ["sink", "duplicate", "entropy", "streaming"]},
        ),
        # a model's induction score (atlas.py), on texts of its own: asked for alone, as running the model is not cheap
        View(
            "induction",
            ("temperature", "causal", "sink", "scale", "softcap", "block", "layer_shown"),  # (not the texts shown)
            "computed",
            compute=_induction,
            asked_when={"summary": ["induction"]},
        ),
        # a model's retrieval score (atlas.py, needle.py): the model writes a needle out of long texts of its own
        View("retrieval", ("layer_shown",), "computed", compute=_retrieval, asked_when={"summary": ["retrieval"]}),
        # a differential pair's other head, for the page's difference map (its q and k: a live page holds one head)
        View(
            "pair",
            ("block", "sentence_index", "layer", "head", "layer_shown"),
            "computed",
            compute=_pair,
            asked_when={"difference_map": [True]},
        ),
        # the layer shown's compressed KV cache (kvcache.py): every head's kept keys and the focused row's losses
        View(
            "kv_cache",
            (*KEY, *ARRAYS, *_OWN, "model_q", "layer_shown", "layer", "focus", "kv_method", "kv_budget", "kv_keys"),
            "computed",
            compute=_kv_cache,
            asked_when={"kv_method": list(kvcache.METHODS)},
        ),
        # the cell shown's score split into residual parts (why.py), under its arithmetic, for a model the kernel runs
        View(
            "score_parts",
            ("sentence_index", "layer", "head", "cell", "step", "layer_shown"),
            "computed",
            compute=why.for_page,
            asked_when={"reads_model": [True], "cell": None},
        ),
        # one head's queries and keys of every text in 2-D (qkmap.py), beside the overview while qk_map is on
        View(
            "query_key_map",
            ("step", "block", "layer", "head", "tokens", "q", "k", "model_q", "layer_shown"),
            "computed",
            compute=_query_key_map,
            asked_when={"qk_map": [True]},
        ),
    )
}
MEASURES = tuple(n for n, v in VIEWS.items() if v.held_in == "measure_data")
COMPUTED = tuple(n for n, v in VIEWS.items() if v.held_in == "computed")
# what the page learns of each view (sent with the rules' constants): whether it is signed, where its answer is
# held, when the page asks for it (an answer's own "key" says which state it is for)
VIEWS_FOR_PAGE = {
    n: {
        "signed": v.signed,
        "held_in": v.held_in,
        "asked_when": v.asked_when,
        **(
            {
                "follows": list(v.follows),
                **{n: getattr(v, n) for n in ("label", "about", "title", "reads", "across_layers")},
            }
            if v.held_in == "measure_data"
            else {}
        ),
    }
    for n, v in VIEWS.items()
}


def available(inputs: Inputs) -> dict[str, str]:
    """Each measure's name -> "" where the widget can show it, else why not (measures.available)."""
    return measures.available(inputs.state, _texts_differ(inputs))


def offered(state: dict) -> list[str]:
    """The measures the page offers a button for: none for one head of one text (unless one is
    chosen); difference only with several texts (the others are offered, marked where not available)."""
    texts = len(state["sentences"] or ())
    many = texts > 1 or state["n_layers"] > 0 or rules.n_heads(state) > 1 or bool(state["measure"])
    return [n for n in MEASURES if n != "difference" or texts > 1] if many else []


def every(name: str, inputs: Inputs) -> tuple:
    """The choices an exported page switches among for measure ``name`` with every value held (its
    ``follows``; a widget of one layer has no layer to follow)."""
    return tuple(a for a in VIEWS[name].follows if a != "layer" or inputs.state["layer_shown"])


def entry(name: str, inputs: Inputs, every: tuple = ()) -> dict:
    """What the page draws for measure ``name``: {matrix (float32, rows × cols; with ``every``, one
    for each value of those choices first, as an exported page switches among them), lo, hi, key,
    every, and what the view adds}, or {error, key} when it cannot be computed."""
    view = VIEWS[name]
    why = view.why_not(inputs)
    if why:
        return {"error": why, "key": view.key(inputs)}
    try:
        with np.errstate(all="ignore"):  # numbers past float32 are said below, not warned of
            assert view.matrix is not None  # (a measure's)
            m, extra = view.every_matrix(inputs, every) if every and view.every_matrix else view.matrix(inputs)
            m = np.ascontiguousarray(m, dtype=np.float32)
    except (
        ValueError
    ) as e:  # what a model's layer cannot give (an output projection it could not read): said in the panel
        return {"error": str(e), "key": view.key(inputs)}
    if every and not np.isfinite(m).all():
        return entry(name, inputs)  # (the state shown alone: another head's numbers too large need not hide it)
    if not np.isfinite(m).all():
        problem = f"{name} has numbers too large to draw (past float32's range): scale the values down to see it"
        return {"error": problem, "key": view.key(inputs)}
    top = float(np.abs(m).max()) if m.size else 0.0
    return {
        **extra,
        "matrix": {"shape": list(m.shape), "dtype": "float32", "view": memoryview(m.reshape(-1).data)},
        "lo": -top if view.signed else 0.0,
        "hi": top,
        "key": view.key(inputs, every),
        "every": list(every),
    }


def answer(name: str, inputs: Inputs) -> dict:
    """A view held in "computed": its numbers at ``inputs``, and the key they are for."""
    view = VIEWS[name]
    assert view.compute is not None  # (a computed view's)
    try:
        with np.errstate(all="ignore"):
            return {**view.compute(inputs), "key": view.key(inputs)}
    except ValueError as e:  # what these texts cannot give: said in the page, once (not asked again)
        return {"error": str(e), "key": view.key(inputs)}


def asked(name: str, state: dict) -> bool:
    """The page asks for view ``name`` in ``state`` (its asked_when)."""
    when = VIEWS[name].asked_when or {}
    return bool(when) and all(
        state.get(trait) is not None if values is None else state.get(trait) in values for trait, values in when.items()
    )


def current(name: str, held, inputs: Inputs) -> bool:
    """What the widget holds for view ``name`` is its answer at ``inputs``."""
    return held is not None and held.get("key") == VIEWS[name].key(inputs, tuple(held.get("every", ())))


def stale(name: str, before: dict, after: dict) -> bool:
    """A change from state ``before`` to ``after`` leaves view ``name``'s answer out of date."""
    return inputs_stale(VIEWS[name].depends, before, after)


PAGE_BYTES = 4e6  # an exported page carries a measure at every layer (and head) within this
OTHERS_CELLS = (
    256 * 256
)  # queries × keys: up to this an exported page also carries the measures not shown (each well under a second)


def for_page(inputs: Inputs, in_base64) -> dict:
    """The measures an exported page carries, at the state exported: the one shown, and for a
    short text every other the widget can show (flow while it takes under a quarter second). Each
    at every layer and head it follows (every()) while that fits PAGE_BYTES (flow: while every
    layer's takes under half a second), so the layer and head controls go on working. Weight ×
    ‖value‖ of values no output projection turns ({"in_page": true}) the page computes itself."""
    out, s = {}, inputs.state
    cells, layers = inputs.rows * inputs.keys, max(1, s["n_layers"])
    heads = rules.n_heads(s)
    why = available(inputs)
    for name in MEASURES:
        if name == "norms" and not why[name] and inputs.extra.get("unprojected", lambda: False)():
            # each head adds its values as they are: the page computes weight × ‖value‖ from its own
            # arrays, at any state and length (every head's, carried, would be about half a long text's page)
            out[name] = {"in_page": True}
            continue
        slow = name == "flow" and inputs.rows**2 * layers > measures.flow_cells(inputs.causal) / 4
        if name != s["measure"] and (slow or why[name] or cells > OTHERS_CELLS):
            continue
        axes = every(name, inputs) if name == s["measure"] or VIEWS[name].unasked_every else ()
        size = cells * 4 * (layers if "layer" in axes else 1) * (heads if "head" in axes else 1)
        fits = size <= PAGE_BYTES and (
            name != "flow"
            or sum(measures.flow_seconds(inputs.rows, up, inputs.causal) for up in range(1, layers + 1)) <= 0.5
        )
        e = entry(name, inputs, axes if fits else ())
        out[name] = {**e, "matrix": in_base64(e["matrix"])} if "matrix" in e else e
    return out
