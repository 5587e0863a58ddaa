"""Head scores of real models' widgets (w.head_scores(), atlas.py): each score equals one computed
here from the model's own ``output_attentions`` on each text (GPT-2, Llama with grouped-query
heads, BERT), the induction score on the model's own run of the repeated random tokens, and
TransformerLens's own patterns. Tiny randomly initialised models (and one small BERT shipped as a
package); nothing is downloaded."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from test_effects import WIDE
from test_integrations import TINY, gpt2, gpt2_tokenizer, hooked, minilm, random_model, tf

from attnwidget import AttentionWidget, atlas
from attnwidget.integrations.common import specials

TEXTS = ["I sat on the riverbank.", "the river, the bank and the river again", "on on on"]


def models(tf, tokenizer):
    return {
        "gpt2": lambda: gpt2(tf, tokenizer, **WIDE),
        "llama": lambda: random_model(  # grouped-query attention: 4 query heads share 2 keys and values
            tf, "LlamaForCausalLM", "LlamaConfig", len(tokenizer), intermediate_size=128, num_key_value_heads=2, **TINY
        ),
    }


def own_scores(model, tokenizer, texts) -> dict[str, np.ndarray]:
    """Each score from the model's output_attentions, text by text, with plain numpy on token ids."""
    import torch

    per_text = []
    for text in texts:
        enc = tokenizer(text, return_tensors="pt")
        ids = enc["input_ids"][0].tolist()
        with torch.no_grad():
            layers = [a[0].double().numpy() for a in model(**enc, output_attentions=True).attentions]
        W = np.stack(layers)  # layers × heads × n × n
        n = len(ids)
        logs = np.log(np.where(W > 0, W, 1.0))
        repeated = [i for i in range(n) if ids[i] in ids[:i]]
        copies = [W[..., i, [j for j in range(i) if ids[j] == ids[i]]].sum(-1) for i in repeated]
        per_text.append(
            {
                "sink": W[..., :, 0].mean(-1),
                "previous": np.mean([W[..., i, i - 1] for i in range(1, n)], axis=0),
                "self": np.mean([W[..., i, i] for i in range(n)], axis=0),
                "duplicate": np.mean(copies, axis=0) if copies else np.full(W.shape[:2], np.nan),
                "entropy": (-(W * logs).sum(-1)).mean(-1),
            }
        )
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # (a text with no repeated token: NaN, left out)
        return {k: np.nanmean([s[k] for s in per_text], axis=0) for k in per_text[0]}


def own_induction(model, sequences, start, m) -> np.ndarray:
    """The induction score from the model's own attentions on the repeated sequences."""
    import torch

    rows = np.arange(start + m, start + 2 * m)
    each = []
    for ids in sequences:
        with torch.no_grad():
            att = model(input_ids=torch.tensor([ids]), output_attentions=True).attentions
        each.append([a[0].double().numpy()[:, rows, rows - m + 1].mean(-1) for a in att])
    return np.mean(each, axis=0)


@pytest.mark.parametrize("kind", ["gpt2", "llama"])
def test_every_score_is_the_models_own_attention_averaged_over_the_texts(tf, gpt2_tokenizer, kind):
    model = models(tf, gpt2_tokenizer)[kind]()
    w = AttentionWidget.from_transformers(model, gpt2_tokenizer, TEXTS)
    got = w.head_scores()
    assert set(got) == set(atlas.SCORES) - {"retrieval"} and w.reads_model  # (retrieval only when asked)
    want = own_scores(model, gpt2_tokenizer, TEXTS)
    for name, value in want.items():
        np.testing.assert_allclose(got[name], value, atol=1e-6, rtol=0, err_msg=name)
    sequences, start, m = atlas.repeated(w._reader())
    # GPT-2's tokenizer adds no BOS: the sequences begin with its <|endoftext|>, as TransformerLens's do
    assert start == 1 and sequences[0][0] == gpt2_tokenizer.bos_token_id
    assert all(ids[start : start + m] == ids[start + m : start + 2 * m] for ids in sequences)
    assert not set().union(*sequences[1:]) & set(gpt2_tokenizer.all_special_ids) - {gpt2_tokenizer.bos_token_id}
    np.testing.assert_allclose(got["induction"], own_induction(model, sequences, start, m), atol=1e-6, rtol=0)


def test_an_encoders_scores_with_its_cls_and_sep(minilm):
    model, tokenizer = minilm
    w = AttentionWidget.from_transformers(model, tokenizer, TEXTS[:2])
    got = w.head_scores()
    for name, value in own_scores(model, tokenizer, TEXTS[:2]).items():
        np.testing.assert_allclose(got[name], value, atol=1e-6, rtol=0, err_msg=name)
    sequences, start, m = atlas.repeated(w._reader())
    prefix, suffix = specials(tokenizer)
    assert sequences[0][:start] == prefix == [tokenizer.cls_token_id] and sequences[0][-1:] == suffix
    np.testing.assert_allclose(got["induction"], own_induction(model, sequences, start, m), atol=1e-6, rtol=0)


def test_the_sink_rule_and_causal_rule_change_the_scores_as_they_change_the_weights(tf, gpt2_tokenizer):
    model = models(tf, gpt2_tokenizer)["gpt2"]()
    w = AttentionWidget.from_transformers(model, gpt2_tokenizer, TEXTS[:2], sink=True)
    got = w.head_scores()
    assert np.all(got["sink"] == 0)  # no row reads the first token
    import torch

    sequences, start, m = atlas.repeated(w._reader())
    rows = np.arange(start + m, start + 2 * m)
    each = []
    for ids in sequences:
        with torch.no_grad():
            att = model(input_ids=torch.tensor([ids]), output_attentions=True).attentions
        # the first column left out and every row renormalised over the rest
        with np.errstate(invalid="ignore"):  # (row 0 reads only the first token: nothing left)
            kept = [a[0].double().numpy()[:, :, 1:] for a in att]
            renorm = [k / k.sum(-1, keepdims=True) for k in kept]
        each.append([r[:, rows, rows - m].mean(-1) for r in renorm])  # column j is j + 1 of the whole
    np.testing.assert_allclose(got["induction"], np.mean(each, axis=0), atol=1e-6, rtol=0)


def test_a_transformer_lens_models_induction_is_its_own_patterns(gpt2_tokenizer):
    tl = pytest.importorskip("transformer_lens")
    import torch

    model = hooked(tl, gpt2_tokenizer, "rotary-gqa")
    w = AttentionWidget.from_transformer_lens(model, TEXTS[:2])
    got = w.head_scores("induction")
    assert set(got) == {"induction"}
    sequences, start, m = atlas.repeated(w._reader())
    assert start == (1 if model.cfg.default_prepend_bos else 0)
    rows = np.arange(start + m, start + 2 * m)
    each = []
    for ids in sequences:
        with torch.no_grad():
            _, cache = model.run_with_cache(torch.tensor([ids]))
        each.append([cache["pattern", layer][0].double().numpy()[:, rows, rows - m + 1].mean(-1) for layer in range(2)])
    np.testing.assert_allclose(got["induction"], np.mean(each, axis=0), atol=1e-6, rtol=0)


def test_the_model_is_read_on_the_repeated_tokens_once(tf, gpt2_tokenizer, monkeypatch):
    w = AttentionWidget.from_transformers(gpt2(tf, gpt2_tokenizer), gpt2_tokenizer, TEXTS[:2])
    reads = []
    reader = w._reader()
    read = reader.read
    monkeypatch.setattr(reader, "read", lambda ids: reads.append(ids) or read(ids))
    first = w.head_scores("induction")["induction"]
    w.temperature = 0.5
    second = w.head_scores("induction")["induction"]
    assert len(reads) == atlas.COUNT and not np.allclose(first, second)  # another temperature, the same reading


def test_induction_is_refused_where_there_is_no_model_to_read():
    from test_across_layers import model_widget

    for w in (AttentionWidget("She sat by the river bank"), model_widget(seed=1, n=4, layers=2, heads=2)):
        assert not w.reads_model and "induction" not in w.head_scores()
        with pytest.raises(ValueError, match="made from a model"):
            w.head_scores("induction")
        with pytest.raises(Exception, match="needs a widget made from a model"):
            w.summary = "induction"
        assert w.summary == ""
    with pytest.raises(ValueError, match="head scores are"):
        AttentionWidget("a b").head_scores(["sink", "nope"])


def test_a_click_on_a_head_goes_to_the_text_where_its_score_is_highest(tf, gpt2_tokenizer):
    from attnwidget.widget import _on_page_message

    w = AttentionWidget.from_transformers(gpt2(tf, gpt2_tokenizer), gpt2_tokenizer, TEXTS)
    w.summary = "duplicate"
    _on_page_message(w, {"kind": "compute", "view": "head_scores"}, [])
    sent = w.computed["head_scores"]
    per_text = [own_scores(w._sources.texts[0].rerun.model, gpt2_tokenizer, [t])["duplicate"] for t in TEXTS]
    with np.errstate(invalid="ignore"):
        want = np.where(np.isnan(per_text).all(0), -1, np.nanargmax(np.where(np.isnan(per_text), -1, per_text), 0))
    assert sent["best"]["duplicate"] == want.ravel().tolist()
    assert "induction" not in sent["best"]  # its texts are its own


def test_a_widget_of_many_texts_reads_a_few_at_a_time_and_gives_the_same_numbers(tf, gpt2_tokenizer, monkeypatch):
    from attnwidget import sources
    from attnwidget.sources import KEEP

    monkeypatch.setattr(sources, "HOLD", 0)  # (texts past what HOLD keeps: a few at a time)
    model = gpt2(tf, gpt2_tokenizer)
    texts = [f"{'on the river ' * (i + 1)}bank" for i in range(8)]
    w = AttentionWidget.from_transformers(model, gpt2_tokenizer, texts, sentence_index=2)
    read = lambda: [i for i, t in enumerate(w._sources.texts) if t._found is not None]
    assert read() == [2]  # only the text shown was run
    got = w.head_scores()
    assert len(read()) <= KEEP + 1 and 2 in read()
    for name, value in own_scores(model, gpt2_tokenizer, texts).items():
        np.testing.assert_allclose(got[name], value, atol=1e-6, rtol=0, err_msg=name)
    weights = w.weights.copy()
    w.sentence_index = 0  # a text let go of: read again, the same numbers
    w.sentence_index = 2
    np.testing.assert_array_equal(w.weights, weights)
    w.sentence_index = 7  # the text switched to is the one never let go of
    w.head_scores(["sink"])
    assert 7 in read() and w._sources._stacks[("", 7)]["model_q"] is w.model_q
    w.layer = 1  # its layers stay views of the widget's own arrays, with their axes
    assert np.shares_memory(w.q, w.model_q) and w.value_basis is not None
    with pytest.raises(ValueError, match="reads at most 64 positions"):  # every text checked before any is run
        AttentionWidget.from_transformers(model, gpt2_tokenizer, ["a short one", "word " * 100])
    with pytest.raises(ValueError, match="the list of texts is empty: give at least one text"):
        AttentionWidget.from_transformers(model, gpt2_tokenizer, [])


def test_the_page_asks_for_the_induction_score_alone_and_the_other_scores_run_no_model(tf, gpt2_tokenizer, monkeypatch):
    from attnwidget.widget import _on_page_message

    w = AttentionWidget.from_transformers(gpt2(tf, gpt2_tokenizer), gpt2_tokenizer, TEXTS[:2])
    reads = []
    reader = w._reader()
    read = reader.read
    monkeypatch.setattr(reader, "read", lambda ids: reads.append(ids) or read(ids))
    w.summary = "sink"
    for name in ("head_scores", "induction"):
        _on_page_message(w, {"kind": "compute", "view": name}, [])
    assert reads == [] and "induction" not in (w.computed or {})  # not asked: the model is not run
    w.summary = "induction"
    _on_page_message(w, {"kind": "compute", "view": "induction"}, [])
    sent = w.computed["induction"]
    assert len(reads) == atlas.COUNT and sent["key"]["temperature"] == 1.0
    np.testing.assert_allclose(sent["summaries"]["induction"], w.head_scores("induction")["induction"].ravel())
    assert w.page_state()["state"]["computed"]["induction"]["summaries"]  # an exported page carries it
    w.sentence_index = 1  # the score is of the model's own repeated tokens: another text keeps it
    assert w.computed["induction"] is sent
    w.temperature = 2.0
    assert "induction" not in (w.computed or {})


def test_texts_that_fit_are_read_once_and_kept(tf, gpt2_tokenizer, monkeypatch):
    from attnwidget import sources

    model = gpt2(tf, gpt2_tokenizer)
    texts = [f"on the river {'bank ' * (i % 3)}" for i in range(12)]
    w = AttentionWidget.from_transformers(model, gpt2_tokenizer, texts)
    one = sum(a.nbytes for layer in w._sources.texts[0].layers for a in layer)  # a text's q, k and v
    monkeypatch.setattr(sources, "HOLD", 4 * one)  # (four texts, give or take)
    runs = []
    for text in w._sources.texts:
        read = text._read
        text._read = lambda read=read: runs.append(1) or read()
    w.head_scores(["sink"])
    first = len(runs)
    w.head_scores(["sink"])
    kept = [i for i, t in enumerate(w._sources.texts) if t._found is not None]
    again = len(runs) - first
    assert first == 11 and 0 < again < first  # the first texts read stay, and are not read again
    assert {0, 1} <= set(kept) and len(kept) < 12


def test_a_text_read_only_for_scores_gets_its_values_axes_when_shown(tf, gpt2_tokenizer):
    from attnwidget.formulas import principal_axes

    w = AttentionWidget.from_transformers(gpt2(tf, gpt2_tokenizer), gpt2_tokenizer, TEXTS, layer=1)
    w.head_scores(["sink"])  # texts 1 and 2 read without the blend's axes
    assert "model_basis" not in w._sources._stacks[("", 2)]
    w.sentence_index = 2
    np.testing.assert_allclose(w.value_basis, principal_axes(np.asarray(w.v)), atol=1e-12)
    assert w.model_basis is not None and len(w.model_basis) == len(w.model_v)


def test_vectors_of_ones_own_on_a_models_widget_are_scored_by_their_own_tokens(tf, gpt2_tokenizer):
    w = AttentionWidget.from_transformers(gpt2(tf, gpt2_tokenizer), gpt2_tokenizer, "one two three four five")
    rng = np.random.default_rng(0)
    w.set_vectors(
        tokens=["x", "y", "x"], q=rng.normal(size=(2, 3, 4)), k=rng.normal(size=(2, 3, 4)), v=rng.normal(size=(2, 3, 2))
    )
    own = AttentionWidget(tokens=["x", "y", "x"], q=w.q, k=w.k, v=w.v)
    np.testing.assert_allclose(w.head_scores(["duplicate"])["duplicate"], own.head_scores(["duplicate"])["duplicate"])
