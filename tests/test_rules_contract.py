"""The rules' twins agree: src/attnwidget/rules/ and js/rules.js settle the same generated
(state, change) pairs to the same state, field by field, and refuse the same ones with the
same message. A rule changed on one side only fails here.

ATTNWIDGET_FUZZ=N (make fuzz) runs N cases instead of the suite's few thousand.
"""

import json
import os
import pathlib
import subprocess

import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from attnwidget import rules

ROOT = pathlib.Path(__file__).resolve().parents[1]
CASES = int(os.environ.get("ATTNWIDGET_FUZZ", "2000"))


@pytest.fixture(scope="module")
def js():
    """One node process for every case: a JSON line in, a JSON line out."""
    proc = subprocess.Popen(
        ["node", str(ROOT / "tests" / "contract" / "harness.mjs")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        bufsize=1,
    )

    def ask(case):
        proc.stdin.write(json.dumps(case) + "\n")
        return json.loads(proc.stdout.readline())

    yield ask
    proc.stdin.close()
    proc.wait(timeout=10)


# --- cases: arrays are numpy arrays here and {$a: id, ...} on the wire ---


class Arrays:
    """Names every array of a case, so both sides see one object per name."""

    def __init__(self):
        self.ids, self.keep = {}, []

    def new(self, shape, dtype="float64", rng=None, data=None):
        a = np.zeros(shape, dtype=dtype) if data is None else np.asarray(data, dtype=dtype).reshape(shape)
        if rng is not None and dtype != "uint8":
            a = rng.normal(size=shape)
        self.ids[id(a)] = f"a{len(self.ids)}"
        self.keep.append(a)
        return a

    def register(self, a, name):
        self.ids[id(a)] = name
        self.keep.append(a)

    def name(self, a, made=None):
        return self.ids.get(id(a)) or (made or {}).get(id(a))

    def wire(self, v):
        if isinstance(v, np.ndarray):
            return {
                "$a": self.ids[id(v)],
                "shape": list(v.shape),
                "dtype": "uint8" if v.dtype == np.uint8 else "float64",
                "data": v.reshape(-1).tolist(),
            }
        if isinstance(v, float) and not np.isfinite(v):
            return {"$f": "nan" if np.isnan(v) else ("inf" if v > 0 else "-inf")}
        if isinstance(v, (list, tuple)):
            return [self.wire(x) for x in v]
        if isinstance(v, dict):
            return {k: self.wire(x) for k, x in v.items()}
        return v


class PySources:
    def __init__(self, plain, arrays):
        self.plain, self.arrays, self.made = plain, arrays, {}

    def sentence(self, i):
        return self.plain["sentences"][i]

    def block(self, name):
        return self.plain["blocks"][name]

    def layer(self, block, i, text=0):
        return self.plain["texts"][text][i] if self.plain.get("texts") else self.plain["layers"][block][i]

    def basis(self, v):
        if v.shape[-1] <= 2:
            return None
        b = np.zeros((*v.shape[:-2], v.shape[-1], 2))
        self.made[id(b)] = f"basis:{self.arrays.name(v)}"
        self.arrays.keep.append(b)
        return b


WORDS = ["She", "sat", "by", "the", "river", "bank", "Bank", "money", "a"]


@st.composite
def texts(draw, n):
    return [draw(st.sampled_from(WORDS)) for _ in range(n)]


@st.composite
def cases(draw):
    A = Arrays()
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    heads = draw(st.sampled_from([None, 1, 2, 3]))
    n, d, dv = draw(st.integers(1, 5)), draw(st.integers(1, 3)), draw(st.integers(1, 3))
    kind = draw(st.sampled_from(["own", "sentences", "model", "blocks", "cross", "texts"]))
    cross = kind == "cross"
    m = draw(st.integers(1, 5)) if cross else n
    h = (heads,) if heads else ()
    block_names = list(rules.BLOCKS) if kind == "blocks" else []

    def qkv(n, m, heads=h):
        return A.new((*heads, n, d), rng=rng), A.new((*heads, m, d), rng=rng), A.new((*heads, m, dv), rng=rng)

    def basis_for(v):
        return A.new((*v.shape[:-2], v.shape[-1], 2)) if v.shape[-1] > 2 else None

    q, k, v = qkv(n, m)
    state = {name: None for name in rules.FIELDS}
    state.update(
        tokens=draw(texts(n)),
        cross=cross,
        q=q,
        k=k,
        v=v,
        value_basis=basis_for(v),
        temperature=draw(st.sampled_from([1.0, 0.2, 3.5])),
        causal=draw(st.booleans()),
        sink=draw(st.booleans()),
        scale=draw(st.sampled_from([None, 0.5])),
        softcap=draw(st.sampled_from([None, None, 5.0])),
        stage=draw(st.sampled_from(rules.STAGES)),
        summary="",
        measure="",
        next_token=draw(st.booleans()),
        reads_model=draw(st.booleans()),
        sentences=[],
        sentence_index=0,
        value_axes=["v₁", "v₂"],
        layer=0,
        n_layers=0,
        layer_numbers=[],
        layer_kinds=[],
        layer_shown=False,
        model_name="",
        blocks=block_names,
        block="",
        exercise=draw(st.sampled_from(rules.EXERCISES)),
        guess=None,
        revealed=False,
        goal=2.0,
        residual=False,
        scores_hint=draw(st.booleans()),
        position="none",
        rope_base=draw(st.sampled_from([10000.0, 100.0])),
        alibi_slopes=None,
        model_causal=False,
        text_lengths=[],
        model_lambda=None,
        difference_map=False,
        kv_method=draw(st.sampled_from(["", *rules.KV_METHODS])),
        kv_budget=draw(st.integers(1, 6)),
        kv_keys=[],
    )
    state["key_tokens"] = draw(texts(m)) if cross else state["tokens"]
    sources = {"sentences": [], "blocks": {}, "layers": {}}
    if kind == "sentences":
        count = draw(st.integers(2, 3))
        for i in range(count):
            t = draw(texts(draw(st.integers(1, 5)))) if i else state["tokens"]
            sq, sk, sv = qkv(len(t), len(t), ())
            sources["sentences"].append(
                dict(
                    tokens=t,
                    q=sq,
                    k=sk,
                    v=sv,
                    x=draw(st.sampled_from([None, A.new((len(t), dv))])),
                    value_basis=basis_for(sv),
                )
            )
        state["sentences"] = [" ".join(e["tokens"]) for e in sources["sentences"]]
        state["text_lengths"] = [len(e["tokens"]) for e in sources["sentences"]]
        first = sources["sentences"][0]
        state.update(q=first["q"], k=first["k"], v=first["v"], x=first["x"], value_basis=first["value_basis"])

    def model_stack(name, layers, bn, bm, toks, keys, hh):
        """A model's (or block's, or text's) every layer: its stacked arrays and each layer's views of them."""
        arrays = {
            f"model_{c}": A.new((layers * hh, bn if c == "q" else bm, dv if c == "v" else d), rng=rng) for c in "qkv"
        }
        arrays["model_basis"] = A.new((layers * hh, dv, 2)) if dv > 2 else None
        # layers with masks of their own (a sliding window, local attention), sometimes
        count = draw(st.sampled_from([0, 0, 1, 2]))
        arrays["model_masks"] = (
            A.new((count, bn, bm), dtype="uint8", data=[draw(st.booleans()) for _ in range(count * bn * bm)])
            if count
            else None
        )
        arrays["mask_of_layer"] = [draw(st.integers(-1, count - 1)) for _ in range(layers)] if count else []
        # a bias per layer (attention weights alone: their logarithms), sometimes
        biased = draw(st.integers(0, 3)) == 0
        arrays["model_bias"] = A.new((layers * hh, bn, bm), rng=rng) if biased else None
        termed = biased and draw(st.booleans())  # and its first term (DeBERTa's), sometimes
        arrays["model_terms"] = A.new((layers * hh, bn, bm), rng=rng) if termed else None
        # learnt sinks (gpt-oss): one logit per layer and head, sometimes; every layer of a model brings its own in
        sunk = draw(st.integers(0, 2)) == 0
        arrays["model_sinks"] = A.new((layers, hh), rng=rng) if sunk else None
        each = [
            dict(
                tokens=toks,
                key_tokens=keys,
                q=arrays["model_q"][i * hh : (i + 1) * hh],
                k=arrays["model_k"][i * hh : (i + 1) * hh],
                v=arrays["model_v"][i * hh : (i + 1) * hh],
                value_basis=None if arrays["model_basis"] is None else arrays["model_basis"][i * hh : (i + 1) * hh],
                **(
                    {
                        "mask": None
                        if arrays["mask_of_layer"][i] < 0
                        else arrays["model_masks"][arrays["mask_of_layer"][i]]
                    }
                    if count
                    else {}
                ),
                **({"bias": arrays["model_bias"][i * hh : (i + 1) * hh]} if biased else {}),
                **({"terms": arrays["model_terms"][i * hh : (i + 1) * hh]} if termed else {}),
                sinks=tuple(float(z) for z in arrays["model_sinks"][i]) if sunk else None,
            )
            for i in range(layers)
        ]
        for i, lay in enumerate(each):
            for c in ("q", "k", "v", "value_basis", "mask", "bias", "terms"):
                if lay.get(c) is not None:
                    A.register(lay[c], f"{name}:{i}:{c}")
        return arrays, each

    def show_layer(arrays, each, toks, keys, layers):
        shown = draw(st.integers(0, layers - 1))
        first = each[shown]
        state.update(n_layers=layers, layer=shown, layer_shown=True, tokens=toks, **arrays)
        state.update(q=first["q"], k=first["k"], v=first["v"], value_basis=first["value_basis"], cross=keys is not None)
        if "mask" in first:
            state["mask"] = first["mask"]  # the layer's own, as the widget starts with it
        if "bias" in first:
            state["bias"] = first["bias"]
        if "terms" in first:
            state["terms"] = first["terms"]
        state["sinks"] = first["sinks"]

    if kind == "texts":  # a model's several texts, each read alone: its own tokens and every layer
        layers, hh, count = draw(st.integers(1, 3)), heads or 1, draw(st.integers(2, 3))
        shown = draw(st.integers(0, count - 1))
        state["model_causal"] = draw(st.booleans())  # a model that reads both ways writes no text token by token
        sources["texts"] = []
        for t in range(count):
            tn = n if t == shown else draw(st.integers(1, 5))
            toks = draw(texts(tn))
            arrays, each = model_stack(f"text{t}", layers, tn, tn, toks, None, hh)
            own_bias = (
                A.new((hh, tn, tn), rng=rng) if draw(st.integers(0, 3)) == 0 else None
            )  # a position bias (T5's, ALiBi)
            step = draw(
                st.sampled_from([tn, tn, draw(st.integers(1, tn))] if state["model_causal"] else [tn])
            )  # generate=: it opens at its prompt's length
            sources["sentences"].append(
                dict(tokens=toks, key_tokens=None, bias=own_bias, step=step, n_layers=layers, **arrays)
            )
            sources["texts"].append(each)
            if t == shown:
                show_layer(arrays, each, toks, None, layers)
                state["bias"] = state["bias"] if state["bias"] is not None else own_bias
        state.update(
            sentences=[" ".join(e["tokens"]) for e in sources["sentences"]],
            text_lengths=[len(e["tokens"]) for e in sources["sentences"]],
            sentence_index=shown,
            key_tokens=state["tokens"],
        )
    if kind in ("model", "blocks"):
        start = draw(st.sampled_from(block_names or [""]))  # the block shown at first
        for block in block_names or [""]:
            layers = draw(st.integers(1, 3))
            bn = n if block == start else draw(st.integers(1, 5))
            bm = draw(st.integers(1, 5)) if block == "cross" else bn
            toks, keys = draw(texts(bn)), (draw(texts(bm)) if block == "cross" else None)
            hh = heads or 1
            arrays, sources["layers"][block] = model_stack(block, layers, bn, bm, toks, keys, hh)
            if block_names:
                sources["blocks"][block] = dict(
                    tokens=toks,
                    key_tokens=keys,
                    causal=block == "decoder",
                    scale=draw(st.sampled_from([None, 1.0])),
                    softcap=draw(st.sampled_from([None, 3.0])),
                    bias=None,
                    n_layers=layers,
                    **arrays,
                )
            if block == start:
                show_layer(arrays, sources["layers"][block], toks, keys, layers)
                state["block"] = block
                state["model_causal"] = block == "decoder" if block_names else draw(st.booleans())
                if kind == "model":  # attention weights alone: no query/key or scores stage (nor blend without values)
                    state["weights_only"] = draw(st.sampled_from(["", "", "weights", "weights and values"]))
                    if state["stage"] in rules.WEIGHTS_ONLY.get(state["weights_only"], {}):
                        state["stage"] = "weights"
                state["key_tokens"] = keys if keys is not None else toks
                if draw(st.integers(0, 3)) == 0:  # your own arrays over a model's: not the layer's any more
                    own = qkv(len(toks), len(state["key_tokens"]), (hh,))
                    state.update(q=own[0], k=own[1], v=own[2], value_basis=basis_for(own[2]), layer_shown=False)
            if block_names and draw(st.booleans()):
                sources["blocks"][block]["bias"] = A.new((hh, bn, bm), rng=rng)  # a block's own position bias
    if kind in ("model", "texts") and state["layer_shown"] and draw(st.booleans()):
        # a hybrid: its attention layers by the model's own numbers, among layers of other kinds
        total = 2 * state["n_layers"] + 1
        numbers = draw(
            st.lists(st.integers(0, total - 1), min_size=state["n_layers"], max_size=state["n_layers"], unique=True)
        )
        state["layer_numbers"] = sorted(numbers)
        state["layer"] = state["layer_numbers"][state["layer"]]
        state["layer_kinds"] = [
            "" if i in numbers else draw(st.sampled_from(["Mamba-2 state space", "short convolution"]))
            for i in range(total)
        ]
    if kind in ("model", "texts") and draw(st.booleans()):  # differential attention: each layer's λ
        state["model_lambda"] = [0.25 * (i + 1) for i in range(state["n_layers"])]
        state["difference_map"] = state["layer_shown"] and not state["exercise"] and draw(st.booleans())
    n, m = len(state["tokens"]), len(state["key_tokens"])
    if state["n_layers"]:  # a model's own scheme, which it carries in its q and k
        state["position"] = draw(st.sampled_from(rules.MODEL_POSITIONS))
    else:
        turns = ["alibi"] + (["rope"] if state["q"].shape[-1] % 2 == 0 else [])
        state["position"] = draw(st.sampled_from(["none"] + ([] if cross else turns)))  # (one text's places only)
        if draw(st.booleans()):
            count = state["q"].shape[0] if state["q"].ndim == 3 else 1
            state["alibi_slopes"] = tuple(0.5 / (h + 1) for h in range(count))
        if draw(st.booleans()):  # your own learnt sinks, one per head
            count = state["q"].shape[0] if state["q"].ndim == 3 else 1
            state["sinks"] = tuple(float(h) - 1.0 for h in range(count))
    if state["sinks"] is not None and draw(st.booleans()):
        state["summary"] = "sink_share"
    if kind in ("own", "cross") and draw(st.booleans()):
        state["x"] = A.new((n, state["v"].shape[-1]))
        state["residual"] = draw(st.booleans())
    if draw(st.booleans()):
        state["mask"] = A.new((n, m), dtype="uint8", data=[draw(st.booleans()) for _ in range(n * m)])
    if draw(st.booleans()):
        hb = state["q"].shape[0] if state["q"].ndim == 3 and draw(st.booleans()) else None
        state["bias"] = A.new(((hb,) if hb else ()) + (n, m), rng=rng)
    whole = cross or not rules.may_write(state)  # (a model that reads both ways: every token, always)
    state["step"] = n if whole or not draw(st.booleans()) else draw(st.integers(1, n))
    if state["step"] < n:
        state["causal"] = True
    r = state["step"]
    state["focus"] = draw(st.integers(0, r - 1))
    state["head"] = draw(st.integers(0, (state["q"].shape[0] if state["q"].ndim == 3 else 1) - 1))
    if draw(st.booleans()):
        state["cell"] = (state["focus"], draw(st.integers(0, (m if cross else r) - 1)))
    sinks = state["sinks"]
    if state["exercise"] == "predict" and sinks is not None and sinks[min(state["head"], len(sinks) - 1)] > -1e29:
        state["exercise"] = ""  # (a head whose sink takes a share has no row of 1 to predict)
    if state["exercise"] == "predict" and draw(st.booleans()):
        state["guess"] = _even_guess(state)
        state["revealed"] = state["guess"] is not None and draw(st.booleans())
    elif state["exercise"] == "temperature":
        state["revealed"] = draw(st.booleans())
    state["_constants"] = rules.CONSTANTS
    page = draw(st.booleans())
    change = draw(changes(state, A, rng, page))
    return A, state, change, sources, page


def _even_guess(state):
    reads = rules.keys_read(state)
    shut = set(rules.closed_keys(state, state["focus"]))
    open_ = [j for j in range(reads) if j not in shut]
    return [1 / len(open_) if j in open_ else 0.0 for j in range(reads)] if open_ else None


JUNK = st.one_of(
    st.none(),
    st.booleans(),
    st.sampled_from([0, 1, 1.5, -0.5, float("nan"), float("inf"), -float("inf")]),
    st.text("ab'\"\\\n\x85\xa0\xad\u200bé ", max_size=3),  # quotes, escapes and characters repr does not print
    st.just([1, 2]),
    st.just(["a", None]),
)


@st.composite
def changes(draw, state, A, rng, page):
    n, m = len(state["tokens"]), len(state["key_tokens"])
    # a page may send anything; Python's own code sets the read-only traits with values of their kind
    # (key_tokens: set_vectors)
    names = list(rules.WRITABLE) + (["key_tokens", "n_layers", "layer_shown", "nonsense"] if page else ["key_tokens"])
    out = {}
    if (
        state.get("sentences") and state.get("n_layers") and draw(st.integers(0, 1)) == 0
    ):  # a model's text switch, often
        names = ["sentence_index", *draw(st.lists(st.sampled_from(names), max_size=1))]
    elif state.get("blocks") and draw(st.integers(0, 2)) == 0:  # a block switch, often: each block its own rules
        names = ["block", *draw(st.lists(st.sampled_from(names), max_size=1))]
    elif (
        state.get("n_layers") and draw(st.integers(0, 2)) == 0
    ):  # a model's layer switch, often: what it brings in is the most varied
        names = ["layer", *draw(st.lists(st.sampled_from(names), max_size=1))]
    else:
        names = draw(
            st.lists(st.sampled_from(names), min_size=1, max_size=draw(st.sampled_from([1, 1, 2, 3])), unique=True)
        )
    for name in dict.fromkeys(names):
        if draw(st.integers(0, 14)) == 0:
            out[name] = draw(JUNK)
            continue
        heads = state["q"].shape[:-2]
        rows = draw(st.sampled_from([n, n, n, n + 1, max(1, n - 1)]))
        if name in ("focus", "head", "layer", "sentence_index", "step"):
            top = {"focus": n - 1, "head": 2, "layer": 2 * 3, "sentence_index": 2, "step": n}[name]
            out[name] = draw(st.one_of(st.integers(0, top), st.integers(0, top), st.integers(-1, 6)))
        elif name in (*rules.FLAGS, "layer_shown"):
            out[name] = draw(st.booleans())
        elif name == "temperature":
            out[name] = draw(st.sampled_from([0.0, -1.0, 1e-300, 0.5, 2.0, 1e300]))
        elif name == "scale":
            out[name] = draw(st.sampled_from([None, 0.25, 1e11, -2.0]))
        elif name == "softcap":
            out[name] = draw(st.sampled_from([None, 2.5, 0.0, -1.0, 1e11, float("inf")]))
        elif name == "goal":
            out[name] = draw(st.sampled_from([0.5, 1.0, 2.5]))
        elif name == "position":
            out[name] = draw(st.sampled_from([*rules.POSITIONS, *rules.POSITIONS, "learned", "", "ROPE"]))
        elif name == "rope_base":
            out[name] = draw(st.sampled_from([10000.0, 500000.0, 1.0, 0.5, float("inf")]))
        elif name == "alibi_slopes":
            count = state["q"].shape[0] if state["q"].ndim == 3 else 1
            out[name] = draw(
                st.one_of(
                    st.none(),
                    st.lists(st.sampled_from([0.5, 0.25, 0.0, -0.5, float("nan")]), min_size=count, max_size=count),
                    st.lists(st.sampled_from([0.5, 0.125]), min_size=1, max_size=4),
                    st.just([0.5, "a"]),
                )
            )
        elif name == "sinks":
            count = state["q"].shape[0] if state["q"].ndim == 3 else 1
            out[name] = draw(
                st.one_of(
                    st.none(),
                    st.lists(st.sampled_from([0.5, -2.0, -1e30, 1e301, float("nan")]), min_size=count, max_size=count),
                    st.lists(st.sampled_from([0.5, 3.0]), min_size=1, max_size=4),
                    st.just([0.5, "a"]),
                )
            )
        elif name == "stage":
            out[name] = draw(st.sampled_from([*rules.STAGES, "softmax"]))
        elif name == "exercise":
            out[name] = draw(st.sampled_from([*rules.EXERCISES, "quiz"]))
        elif name == "summary":
            out[name] = draw(st.sampled_from(["", *rules.SUMMARIES, "mean"]))
        elif name == "measure":
            out[name] = draw(st.sampled_from(["", *rules.MEASURES, "weights"]))
        elif name == "kv_method":
            out[name] = draw(st.sampled_from(["", *rules.KV_METHODS, "H2O", None]))
        elif name == "kv_budget":
            out[name] = draw(st.sampled_from([1, 4, 100, 0, -1, 2.5, True]))
        elif name == "kv_keys":
            out[name] = draw(st.one_of(st.lists(st.integers(-1, 6), max_size=4), st.just([1, "a"]), st.just(3)))
        elif name == "block":
            out[name] = draw(st.sampled_from(["", *rules.BLOCKS, *(state.get("blocks") or ()), "middle"]))
        elif name == "cell":
            out[name] = draw(st.one_of(st.none(), st.tuples(st.integers(-1, 6), st.integers(-1, 6)).map(list)))
        elif name == "guess":
            even = _even_guess(state)
            reads = rules.keys_read(state)
            out[name] = draw(
                st.one_of(
                    st.none(),
                    st.just(even),
                    st.just([1.0 / reads] * reads),
                    st.lists(st.sampled_from([0.0, 0.25, 0.5, 1.0, -0.5]), min_size=1, max_size=6),
                )
            )
        elif name in ("tokens", "key_tokens", "value_axes"):
            out[name] = draw(
                st.one_of(texts(rows if name != "value_axes" else 2), st.just([1, "a"]))
                if name != "key_tokens"
                else st.one_of(st.none(), texts(rows))
            )
        elif name in ("q", "k", "v"):
            width = dict(q=state["q"].shape[-1], k=state["k"].shape[-1], v=state["v"].shape[-1])[name]
            width = draw(st.sampled_from([width, width, width, width + 1]))
            count = rows if name == "q" or not state["cross"] else draw(st.sampled_from([m, m + 1]))
            hh = draw(st.sampled_from([heads, heads, heads, (), (3,)]))
            shape = draw(
                st.sampled_from([(*hh, count, width)] * 6 + [(width,), (1, 1, count, width)])
            )  # now and then 1-D or 4-D
            out[name] = A.new(shape, rng=rng)
        elif name == "x":
            out[name] = draw(st.sampled_from([None, "new"]))
            if out[name] == "new":
                out[name] = A.new((rows, draw(st.sampled_from([state["v"].shape[-1], 4]))))
        elif name == "mask":
            cols = rows if not state["cross"] else m
            out[name] = draw(st.sampled_from([None, "new"]))
            if out[name] == "new":
                out[name] = A.new((rows, cols), dtype="uint8", data=[draw(st.booleans()) for _ in range(rows * cols)])
        elif name == "bias":
            cols = rows if not state["cross"] else m
            out[name] = draw(st.sampled_from([None, "new"]))
            if out[name] == "new":
                out[name] = A.new((*draw(st.sampled_from([(), heads])), rows, cols), rng=rng)
        else:
            out[name] = draw(JUNK)
    if "sentence_index" in out and state.get("n_layers") and state.get("sentences") and draw(st.booleans()):
        out["sentence_index"] = draw(
            st.integers(0, len(state["sentences"]) - 1)
        )  # a model's other text: what it brings in is varied too
    return out


def python_side(A, state, change, sources, page):
    src = PySources(sources, A)
    try:
        s = rules.settle_checked(state, change, src, page=page)
    except rules.Refused as err:
        return {"refused": str(err)}

    def wire(v):
        if isinstance(v, np.ndarray):
            return {"$a": A.name(v, src.made)}
        if isinstance(v, tuple):
            return list(v)
        if isinstance(v, float) and not np.isfinite(v):
            return A.wire(v)
        return v

    return {"state": {n: wire(s.get(n)) for n in rules.FIELDS}}


@settings(max_examples=CASES, deadline=None, suppress_health_check=list(HealthCheck), database=None)
@given(cases())
def test_python_and_js_settle_every_case_alike(js, case):
    A, state, change, sources, page = case
    assert rules.validate(state, {}, PySources(sources, A)) is None, "the generator made a state the rules refuse"
    mine = python_side(A, state, change, sources, page)
    theirs = js(
        {
            "state": A.wire(state),
            "change": A.wire(change),
            "sources": A.wire(sources),
            "page": page,
            "fields": list(rules.FIELDS),
        }
    )
    assert "error" not in theirs, theirs.get("error")
    event("refused" if "refused" in mine else "accepted")
    if "refused" in mine or "refused" in theirs:
        assert mine.get("refused") == theirs.get("refused"), (change, mine, theirs)
        return
    diff = {n: (mine["state"][n], theirs["state"][n]) for n in rules.FIELDS if mine["state"][n] != theirs["state"][n]}
    assert not diff, (change, diff)


def test_a_rule_changed_on_one_side_fails_the_contract(js):
    """The contract has teeth: the JS twin with one follow-up removed disagrees on cases it generates."""
    source = (ROOT / "js" / "rules.js").read_text(encoding="utf-8")
    broken = source.replace(
        "s.cell = null;\n  }\n  // (a block", "}\n  // (a block"
    )  # a new sentence no longer drops the cell
    assert broken != source
    folder = ROOT / "tests" / "contract"
    patched = folder / "rules_broken.js"
    harness = folder / "harness_broken.mjs"
    patched.write_text(broken, encoding="utf-8")
    harness.write_text(
        (folder / "harness.mjs").read_text(encoding="utf-8").replace("../../js/rules.js", "./rules_broken.js"),
        encoding="utf-8",
    )
    try:
        A = Arrays()
        state = {n: None for n in rules.FIELDS}
        q = A.new((2, 2))
        sentence = dict(tokens=["a", "b"], q=q, k=q, v=q, x=None, value_basis=None)
        other = dict(tokens=["c", "d"], q=A.new((2, 2)), k=A.new((2, 2)), v=A.new((2, 2)), x=None, value_basis=None)
        state.update(
            tokens=["a", "b"], key_tokens=["a", "b"], cross=False, q=q, k=q, v=q, temperature=1.0, causal=False,
            sink=False, stage="weights", summary="", sentences=["a b", "c d"], sentence_index=0, value_axes=["x", "y"],
            layer=0, n_layers=0, layer_shown=False, model_name="", blocks=[], block="", exercise="", revealed=False,
            goal=2.0, residual=False, scores_hint=False, step=2, focus=1, head=0, cell=(1, 0),
        )  # fmt: skip
        state["_constants"] = rules.CONSTANTS
        sources = {"sentences": [sentence, other], "blocks": {}, "layers": {}}
        wire = {
            "state": A.wire(state),
            "change": {"sentence_index": 1},
            "sources": A.wire(sources),
            "page": True,
            "fields": list(rules.FIELDS),
        }
        proc = subprocess.run(
            ["node", str(harness)], input=json.dumps(wire) + "\n", capture_output=True, text=True, check=True
        )
        assert json.loads(proc.stdout)["state"]["cell"] == [1, 0]  # the broken twin keeps the cell
        assert python_side(A, state, {"sentence_index": 1}, sources, True)["state"]["cell"] is None
        assert js(wire)["state"]["cell"] is None
    finally:
        patched.unlink(missing_ok=True)
        harness.unlink(missing_ok=True)


@settings(max_examples=max(200, CASES // 10), deadline=None, suppress_health_check=list(HealthCheck), database=None)
@given(
    d=st.integers(1, 4),
    heads=st.sampled_from([(), (2,)]),
    size=st.sampled_from([1.0, 1e100, 1e149, 1e150, 1e151, 1e200]),
    scale=st.sampled_from([None, 1e-10, 1.0, 1e10]),
    bias=st.sampled_from([None, 1.0, 1e299, 1e300]),
    seed=st.integers(0, 99),
)
def test_python_and_js_refuse_the_same_overflowing_scores(js, d, heads, size, scale, bias, seed):
    """core.overflow_message and rules.js's overflow(), the numbers' own check both pages run."""
    from attnwidget.formulas import overflow_message

    A, rng = Arrays(), np.random.default_rng(seed)
    q, k = A.new((*heads, 3, d)), A.new((*heads, 3, d))
    q[...], k[...] = rng.normal(size=q.shape) * size, rng.normal(size=k.shape)
    b = None if bias is None else A.new((3, 3), data=np.full(9, bias))
    theirs = js({"overflow": A.wire({"q": q, "k": k, "scale": scale, "bias": b})})
    assert theirs["overflow"] == overflow_message(q, k, scale, b)
