"""Several texts from one model: from_transformers(model, tokenizer, [text_a, text_b, ...]) reads
each text alone, the widget switches between them as between its sentences, and difference()
gives text a's weights minus text b's. Tiny random models; nothing is downloaded."""

import base64
import json
import pathlib
import subprocess

import numpy as np
import pytest
import traitlets
from test_integrations import gpt2, gpt2_tokenizer, llama_style, tf  # (fixtures)
from test_weights import each_head

from attnwidget import AttentionWidget
from attnwidget.integrations import from_transformers

ROOT = pathlib.Path(__file__).resolve().parents[1]
# two minimal pairs (the same number of tokens) and a longer text
SAME = ["I sat on the river bank", "I sat on the bank river"]
LONGER = "the river bank sat on I sat"


@pytest.fixture(scope="module")
def models(tf, gpt2_tokenizer):
    return {"gpt2": gpt2(tf, gpt2_tokenizer), "llama": llama_style(tf, gpt2_tokenizer, "Llama", 2)}


def own_attentions(model, tokenizer, text):
    """The model's own attention probabilities on ``text`` alone (eager), layers × heads × n × n."""
    import torch

    enc = tokenizer(text, return_tensors="pt")
    with torch.no_grad():
        out = model(**enc, output_attentions=True).attentions
    return np.stack([a[0].double().numpy() for a in out])


@pytest.mark.parametrize("kind", ["gpt2", "llama"])
@pytest.mark.parametrize(
    "texts", [SAME, [SAME[0], LONGER], [SAME[0], LONGER, SAME[1]]], ids=["same-length", "two-lengths", "three"]
)
def test_every_texts_every_layer_and_head_is_the_model_on_that_text_alone(models, gpt2_tokenizer, kind, texts):
    model = models[kind]
    w = AttentionWidget.from_transformers(model, gpt2_tokenizer, texts, stage="weights")
    assert w.sentences == texts and w.sentence_index == 0
    for i, text in enumerate(texts):
        w.sentence_index = i
        alone = AttentionWidget.from_transformers(model, gpt2_tokenizer, text)
        assert w.tokens == alone.tokens and w.n_layers == alone.n_layers
        np.testing.assert_allclose(
            each_head(w), own_attentions(model, gpt2_tokenizer, text), atol=1e-5, rtol=0, err_msg=f"text {i}"
        )
        for name in ("model_q", "model_k", "model_v"):
            np.testing.assert_array_equal(getattr(w, name), getattr(alone, name))


def test_a_text_switch_keeps_layer_head_temperature_and_stage_and_comes_back_to_the_same_arrays(models, gpt2_tokenizer):
    w = AttentionWidget.from_transformers(
        models["gpt2"], gpt2_tokenizer, [SAME[0], LONGER], layer=1, head=2, stage="scores", temperature=0.5
    )
    first = {n: getattr(w, n) for n in ("tokens", "q", "k", "v", "model_q")}
    seen = []
    w.observe(lambda change: seen.append(change["new"]), names="sentence_index")
    w.sentence_index = 1
    assert seen == [1] and w.tokens != first["tokens"] and len(w.tokens) == len(gpt2_tokenizer(LONGER)["input_ids"])
    assert (w.layer, w.head, w.temperature, w.stage, w.layer_shown) == (1, 2, 0.5, "scores", True)
    assert w.q.shape[1] == len(w.tokens) and w.step == len(w.tokens) and w.focus < len(w.tokens)
    w.layer = 0  # a layer switch in the other text: that text's layer
    np.testing.assert_array_equal(w.q, w.model_q[: w.n_heads])
    w.layer, w.sentence_index = 1, 0
    for name, a in first.items():
        assert getattr(w, name) is a or getattr(w, name) == a  # the same arrays, not copies
    w.focus = 6  # "bank": the same word is focused in the other text
    w.sentence_index = 1
    assert w.tokens[w.focus] == "bank"
    with pytest.raises(traitlets.TraitError, match="'sentence_index' must be a sentence index from 0 to 1, got 2"):
        w.sentence_index = 2
    assert w.sentence_index == 1


def test_generate_with_texts_writes_each_text_on_from_its_own_prompt(models, gpt2_tokenizer):
    model = models["gpt2"]
    texts = ["I sat", LONGER]
    w = AttentionWidget.from_transformers(model, gpt2_tokenizer, texts, generate=3)
    for i, text in enumerate(texts):
        w.sentence_index = i
        alone = AttentionWidget.from_transformers(model, gpt2_tokenizer, text, generate=3)
        assert w.tokens == alone.tokens and w.prompt_length == alone.prompt_length == len(
            gpt2_tokenizer(text)["input_ids"]
        )
        assert w.step == alone.step == w.prompt_length and w.causal  # each text opens at its own prompt's length
        np.testing.assert_array_equal(w.model_q, alone.model_q)
    w.step = len(w.tokens)
    w.sentence_index = 0
    assert w.step == w.prompt_length  # the other text opens as it did


def test_difference_is_text_a_minus_text_b_as_the_model_computes_them(models, gpt2_tokenizer):
    model = models["gpt2"]
    assert len(gpt2_tokenizer(SAME[0])["input_ids"]) == len(gpt2_tokenizer(SAME[1])["input_ids"])
    w = AttentionWidget.from_transformers(model, gpt2_tokenizer, [SAME[0], LONGER, SAME[1]])
    a, b = (own_attentions(model, gpt2_tokenizer, t) for t in SAME)
    d = w.difference(a=0, b=2)
    assert d.dtype == np.float64 and d.shape == a.shape
    np.testing.assert_allclose(d, a - b, atol=1e-5, rtol=0)
    np.testing.assert_allclose(w.largest_difference(0, 2), np.abs(a - b).max(axis=(2, 3)), atol=1e-5, rtol=0)
    np.testing.assert_allclose(w.difference(2, 0), -d, atol=0, rtol=0)

    # at another temperature and with the sink: each row re-tempered, its first column closed
    # (independently: from the model's weights)
    def tempered(p, t):
        with np.errstate(divide="ignore"):
            e = np.where(p > 0, np.exp(np.log(p) / t), 0.0)
        e[..., 0] = 0
        total = e.sum(axis=-1, keepdims=True)
        return np.divide(e, total, out=np.zeros_like(e), where=total > 0)

    w.temperature, w.sink = 0.5, True
    w.sentence_index = 1  # the text shown does not matter
    np.testing.assert_allclose(w.difference(0, 2), tempered(a, 0.5) - tempered(b, 0.5), atol=1e-5, rtol=0)


def test_difference_refuses_texts_of_other_lengths_one_text_and_indexes_out_of_range(models, gpt2_tokenizer):
    w = AttentionWidget.from_transformers(models["gpt2"], gpt2_tokenizer, [SAME[0], LONGER])
    n0, n1 = (len(gpt2_tokenizer(t)["input_ids"]) for t in (SAME[0], LONGER))
    with pytest.raises(
        ValueError, match=rf"text 0 has {n0} tokens and text 1 has {n1}: the difference needs the same number of tokens"
    ):
        w.difference(0, 1)
    for a, b in ((0, 2), (-1, 0), (1, 1)):
        with pytest.raises(ValueError, match=r"a and b must be two different text indexes from 0 to 1"):
            w.difference(a, b)
    one = AttentionWidget.from_transformers(models["gpt2"], gpt2_tokenizer, SAME[0])
    with pytest.raises(ValueError, match="difference needs two texts"):
        one.difference()


def test_lists_that_are_refused_say_why(models, gpt2_tokenizer, tf):
    model = models["gpt2"]
    with pytest.raises(ValueError, match="the list of texts is empty"):
        AttentionWidget.from_transformers(model, gpt2_tokenizer, [])
    with pytest.raises(TypeError, match="texts must be strings; got int"):
        from_transformers(model, gpt2_tokenizer, ["a", 3])
    with pytest.raises(ValueError, match="sentence_index must be from 0 to 1, got 2"):
        AttentionWidget.from_transformers(model, gpt2_tokenizer, SAME, sentence_index=2)
    from test_integrations import random_model

    t5 = random_model(
        tf,
        "T5ForConditionalGeneration",
        "T5Config",
        len(gpt2_tokenizer),
        d_model=32,
        d_ff=64,
        d_kv=8,
        num_layers=1,
        num_heads=2,
    )
    with pytest.raises(ValueError, match="one text and one target"):
        AttentionWidget.from_transformers(t5, gpt2_tokenizer, SAME, target="the bank")


def test_transformer_lens_and_nnsight_take_a_list_the_same_way(gpt2_tokenizer, models):
    tl = pytest.importorskip("transformer_lens")
    import torch
    from test_integrations import hooked

    model = hooked(tl, gpt2_tokenizer, "gpt2-like")
    w = AttentionWidget.from_transformer_lens(model, [SAME[0], LONGER], stage="weights")
    for i, text in enumerate((SAME[0], LONGER)):
        w.sentence_index = i
        with torch.no_grad():
            _, cache = model.run_with_cache(text)
        want = np.stack([cache["pattern", layer][0].double().numpy() for layer in range(2)])
        np.testing.assert_allclose(each_head(w), want, atol=1e-5, rtol=0)
    with pytest.raises(ValueError, match="cache= is a run of the model on one text"):
        AttentionWidget.from_transformer_lens(model, SAME, cache=cache)
    nnsight = pytest.importorskip("nnsight")
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        lm = nnsight.LanguageModel(models["gpt2"], tokenizer=gpt2_tokenizer)
    traced = AttentionWidget.from_nnsight(lm, [SAME[0], LONGER], sentence_index=1)
    direct = AttentionWidget.from_transformers(models["gpt2"], gpt2_tokenizer, [SAME[0], LONGER], sentence_index=1)
    assert traced.sentences == direct.sentences and traced.tokens == direct.tokens
    np.testing.assert_allclose(traced.model_q, direct.model_q, atol=1e-6)


def test_a_list_given_to_the_reader_itself_is_not_cut_to_its_first_text(models, gpt2_tokenizer):
    from attnwidget.integrations import hf

    with pytest.raises(TypeError, match="text must be a string; got list"):
        hf.extract(models["gpt2"], gpt2_tokenizer, SAME)
    found = from_transformers(models["gpt2"], gpt2_tokenizer, SAME)
    assert [f.tokens for f in found] == [from_transformers(models["gpt2"], gpt2_tokenizer, t).tokens for t in SAME]


def test_the_overview_and_head_summary_follow_the_text_shown(models, gpt2_tokenizer):
    w = AttentionWidget.from_transformers(models["gpt2"], gpt2_tokenizer, [SAME[0], LONGER])
    w._repr_mimebundle_()  # (a small model's overview goes with the widget)
    first = w.overview
    w.sentence_index = 1
    assert w.overview is None  # out of date: the page asks again
    alone = AttentionWidget.from_transformers(models["gpt2"], gpt2_tokenizer, LONGER)
    for name, a in alone.head_summary().items():
        np.testing.assert_array_equal(w.head_summary()[name], a)
    w._repr_mimebundle_()
    alone._repr_mimebundle_()
    assert w.overview["summaries"] == alone.overview["summaries"] != first["summaries"]


def test_the_built_in_sentences_have_a_difference_too():
    w = AttentionWidget(["She sat by the river bank", "She sat by the money bank"], causal=True)
    a, b = (AttentionWidget(t, causal=True).weights for t in w.sentences)
    np.testing.assert_allclose(w.difference(), (a - b)[None, None], atol=1e-12)
    with pytest.raises(ValueError, match="text 0 has 6 tokens and text 1 has 3"):
        AttentionWidget(["She sat by the river bank", "the river bank"]).difference()


def test_a_widget_opens_at_the_text_asked(models, gpt2_tokenizer):
    w = AttentionWidget.from_transformers(models["gpt2"], gpt2_tokenizer, [SAME[0], LONGER], sentence_index=1)
    alone = AttentionWidget.from_transformers(models["gpt2"], gpt2_tokenizer, LONGER)
    assert w.sentence_index == 1 and w.tokens == alone.tokens
    np.testing.assert_array_equal(w.q, alone.q)
    w.sentence_index = 0
    assert w.tokens == AttentionWidget.from_transformers(models["gpt2"], gpt2_tokenizer, SAME[0]).tokens


def test_a_live_page_is_sent_the_other_texts_arrays_though_it_keeps_a_head_of_the_same_name(models, gpt2_tokenizer):
    """The page keeps heads by (block, layer, head); after a text switch those it kept are another text's."""
    w = AttentionWidget.from_transformers(models["gpt2"], gpt2_tokenizer, [SAME[0], LONGER])
    every = {("", layer, head) for layer in range(2) for head in range(4)}
    sent, to_send = [], w._to_send
    w._to_send = lambda names: sent.append(to_send(names)) or sent[-1]
    w._page_holds = {"": set(every)}
    w.layer = 1
    assert not {"q", "k", "v"} & sent[-1]  # a head the page keeps: not sent again
    w.sentence_index = 1
    assert {"q", "k", "v"} <= sent[-1]
    w._page_holds = {"": set(every)}  # (the page tells again what it keeps, this text's head among the other's)
    w.layer = 0
    assert {"q", "k", "v"} <= sent[-1]
    w.layer = 1
    assert not {"q", "k", "v"} & sent[-1]  # sent since the switch: the page keeps this text's now


# --- exported pages: the page's own rules and payload (js/payload.js), run in node ---

PAGE = """
import { decodePayload } from "%s/js/payload.js";
import { settleChecked } from "%s/js/rules.js";
import { readFileSync } from "node:fs";
const { state, sources } = decodePayload(JSON.parse(readFileSync(0, "utf8")));
const out = [];
let s = state;
const heads = (a) => a.shape[0];
for (const change of %s) {
  try {
    s = settleChecked(s, change, sources, true);
    const q = new Float32Array(s.q.view.buffer, s.q.view.byteOffset, s.q.view.byteLength / 4);
    out.push({ tokens: s.tokens, layer: s.layer, heads: heads(s.q), q: Array.from(q.slice(0, 4)) });
  } catch (err) {
    out.push({ refused: err.message });
  }
}
console.log(JSON.stringify(out));
"""


def run_page(payload, changes):
    script = PAGE % (ROOT.as_posix(), ROOT.as_posix(), json.dumps(changes))
    done = subprocess.run(
        ["node", "--input-type=module", "-e", script],
        input=json.dumps(payload),
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(done.stdout)


def test_an_exported_page_holds_every_text_under_its_budget_and_switches_between_them(models, gpt2_tokenizer):
    w = AttentionWidget.from_transformers(models["gpt2"], gpt2_tokenizer, [SAME[0], LONGER], layer=1)
    other = AttentionWidget.from_transformers(models["gpt2"], gpt2_tokenizer, LONGER, layer=0)
    out = run_page(w.page_state(), [{"sentence_index": 1}, {"layer": 0}, {"sentence_index": 0}])
    assert out[0]["tokens"] == other.tokens and out[0]["layer"] == 1
    assert out[1]["q"] == pytest.approx(other.q[0].reshape(-1)[:4].tolist(), abs=0)
    assert out[2]["tokens"] == w.tokens and out[2]["layer"] == 0


def test_an_exported_page_over_its_budget_holds_the_text_shown_and_refuses_the_others(models, gpt2_tokenizer):
    w = AttentionWidget.from_transformers(models["gpt2"], gpt2_tokenizer, [SAME[0], LONGER, SAME[1]], sentence_index=1)
    payload = w.page_state(budget=w.model_q.nbytes * 3 * 4 / 3 + 1e4)  # the text shown fits; not all three
    assert payload["state"]["sentence_index"] == 1 and payload["state"]["held_texts"] == [1]
    out = run_page(payload, [{"sentence_index": 0}, {"layer": 1}])
    assert out[0]["refused"] == (
        "This page holds text 1 of 3 ('the river bank sat on I sat'): the others were left out to keep it small. "
        "Export it with a larger max_mb= (and no layers=) to have every text, or switch to text 0 in the notebook "
        "(w.sentence_index = 0) and export it again."
    )
    assert out[1]["tokens"] == w.tokens and out[1]["layer"] == 1


def test_an_exported_page_of_some_layers_holds_the_text_shown_alone(models, gpt2_tokenizer):
    w = AttentionWidget.from_transformers(models["gpt2"], gpt2_tokenizer, SAME)
    payload = w.page_state(layers=[0])
    assert payload["sources"]["sentences"][1] is None and payload["state"]["held_layers"] == [0]
    assert run_page(payload, [{"sentence_index": 1}])[0]["refused"].startswith(
        "This page holds text 0 of 2 ('I sat on the river bank')"
    )


def test_the_page_switches_texts_and_a_crafted_switch_changes_nothing(models, gpt2_tokenizer):
    w = AttentionWidget.from_transformers(models["gpt2"], gpt2_tokenizer, [SAME[0], LONGER], layer=1)
    w.set_state({"sentence_index": 1})  # the page's button
    assert (
        w.sentence_index == 1
        and w.layer == 1
        and w.tokens == AttentionWidget.from_transformers(models["gpt2"], gpt2_tokenizer, LONGER).tokens
    )
    before = {n: getattr(w, n) for n in ("tokens", "q", "model_q", "sentence_index")}
    w.set_state({"sentence_index": 9})
    w.set_state({"sentences": ["a"]})
    assert all(getattr(w, n) is a or getattr(w, n) == a for n, a in before.items())


def test_the_pages_difference_is_the_text_shown_minus_the_next_of_as_many_tokens(models, gpt2_tokenizer):
    from test_measures import ask, matrix

    model = models["gpt2"]
    w = AttentionWidget.from_transformers(
        model, gpt2_tokenizer, [SAME[0], LONGER, SAME[1]], layer=1, head=1, measure="difference"
    )
    a, b = (own_attentions(model, gpt2_tokenizer, t) for t in SAME)
    got = ask(w)
    assert (
        got["other"] == 2
        and got["key"]["sentence_index"] == 0
        and (got["lo"], got["hi"]) == (-got["hi"], pytest.approx(np.abs(a - b)[1, 1].max(), abs=1e-5))
    )
    np.testing.assert_allclose(matrix(got), (a - b)[1, 1], atol=1e-5)
    np.testing.assert_allclose(
        got["largest"], np.abs(a - b).max(axis=(2, 3)).reshape(-1), atol=1e-5
    )  # the overview's colours
    w.sentence_index = 2
    np.testing.assert_allclose(matrix(ask(w)), (b - a)[1, 1], atol=1e-5)
    w.sentence_index = 1
    assert "another text of" in w.measures["difference"] and "error" in ask(w)  # no other text of its length: said why


def test_the_difference_while_writing_is_of_the_tokens_written_so_far():
    texts = ["She sat by the river bank", "He ran to the money bank"]
    w = AttentionWidget(texts, step=3)
    rows = []
    for i in range(2):
        w.sentence_index = i
        rows.append(w.weights.copy())  # the first three tokens', causal
    assert rows[0].shape == (3, 3)
    np.testing.assert_allclose(w.difference(0, 1)[0, 0], rows[0] - rows[1], atol=1e-12)


def test_an_exported_page_holds_each_measure_at_every_layer_and_head_it_follows(models, gpt2_tokenizer):
    """The page's layer and head controls go on working on the measures beyond one head: what the
    page carries at each layer and head is what Python computes when the widget is there."""
    from attnwidget import computed_views
    from attnwidget.widget import _on_page_message

    w = AttentionWidget.from_transformers(models["gpt2"], gpt2_tokenizer, [SAME[0], SAME[1]], temperature=0.8)
    w.measure = "difference"
    held = w.page_state()["state"]["measure_data"]
    assert {n: e["every"] for n, e in held.items()} == {
        "norms": ["head"],
        "mean": [],  # (not the measure shown: at the layer exported alone)
        "rollout": ["layer"],
        "flow": ["layer"],
        "difference": ["layer", "head"],
    }
    for name, e in held.items():
        got = np.frombuffer(base64.b64decode(e["matrix"]["base64"]), dtype=np.float32).reshape(e["matrix"]["shape"])
        assert not set(e["every"]) & set(e["key"])  # the page does not call it stale at another layer or head
        for layer in range(w.n_layers) if "layer" in e["every"] else [e["key"]["layer"]]:
            for head in range(w.n_heads) if "head" in e["every"] else [e["key"].get("head", 0)]:
                w.set_state({"layer": layer, "head": head, "measure": name})
                _on_page_message(w, {"kind": "compute", "view": name}, [])
                live = w.measure_data[name]
                want = np.frombuffer(bytes(live["matrix"]["view"]), dtype=np.float32).reshape(live["matrix"]["shape"])
                at = {"layer": layer, "head": head}
                np.testing.assert_allclose(got[tuple(at[a] for a in e["every"])], want, rtol=1e-5, atol=1e-7)
                assert computed_views.current(
                    name, e, w._inputs()
                )  # Python agrees: what the page holds is current here
