"""'Attention, Visually': any sentence, switching, the causal rule, scale, the query dial,
the residual mix, heads and one cell's arithmetic — the Python side."""

import subprocess
import sys

import numpy as np
import pytest
import traitlets

from attnwidget import AttentionWidget, attention
from attnwidget.examples import LEXICON, from_lexicon, tokenize, word_vectors
from attnwidget.presets import query_dial

RIVER = "I sat on the river bank and read"
MONEY = "I put my money in the bank and left"


def test_tokenize_splits_punctuation_and_keeps_contractions():
    assert tokenize("Don't sit by the bank, please!") == ["Don't", "sit", "by", "the", "bank", ",", "please", "!"]
    assert tokenize("  spaced   out ") == ["spaced", "out"]


def test_any_sentence_gets_one_vector_per_token():
    w = AttentionWidget("I put my money in the bank.")
    assert w.tokens == ["I", "put", "my", "money", "in", "the", "bank", "."]
    assert w.q.shape == (8, 2) and w.v.shape == (8, 2) and w.x.shape == (8, 2)


def test_lexicon_words_and_case():
    value, key, query = word_vectors("River")
    np.testing.assert_array_equal(value, LEXICON["river"][0])
    assert value[0] > 0.9 and value[1] == 0  # the river sense
    assert word_vectors("money")[0][1] > 0.9  # the money sense


def test_unknown_words_get_the_same_vectors_in_a_fresh_process():
    here = [a.tolist() for a in word_vectors("zanzibar")]
    code = "from attnwidget.examples import word_vectors; print([a.tolist() for a in word_vectors('zanzibar')])"
    there = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert repr(here) == there.strip()
    assert [a.tolist() for a in word_vectors("zanzibar")] != [a.tolist() for a in word_vectors("zanzibaR!")]


@pytest.mark.parametrize("sentence, sense, word", [(RIVER, 0, "river"), (MONEY, 1, "money")])
def test_bank_resolves_toward_its_context(sentence, sense, word):
    w = AttentionWidget(sentence)
    bank = w.tokens.index("bank")
    assert w.tokens[int(w.weights[bank].argmax())] == word
    out = w.output[bank]
    assert out[sense] > 2 * out[1 - sense]
    moved = w.residual_output[bank] - w.x[bank]
    assert moved[sense] > moved[1 - sense]


def test_switching_sentences_keeps_the_focus_on_the_same_word():
    w = AttentionWidget([RIVER, MONEY], focus=5)
    assert w.sentences == [RIVER, MONEY] and w.sentence_index == 0 and w.tokens[w.focus] == "bank"
    river_out = w.output[w.focus].copy()
    seen = []
    w.observe(lambda ch: seen.append(ch["name"]), names=["tokens", "focus"])
    w.set_state({"sentence_index": 1})  # what the page's switcher sends
    assert w.tokens == tokenize(MONEY) and w.tokens[w.focus] == "bank"
    assert {"tokens", "focus"} <= set(seen)
    money_out = w.output[w.focus]
    assert river_out[0] > river_out[1] and money_out[1] > money_out[0]
    with pytest.raises(traitlets.TraitError, match="sentence_index"):
        w.sentence_index = 2
    assert w.sentence_index == 1


def test_causal_rule_renormalises_every_row():
    w = AttentionWidget(RIVER, causal=True)
    n = len(w.tokens)
    assert (w.weights[np.triu_indices(n, 1)] == 0).all()
    np.testing.assert_allclose(w.weights.sum(axis=1), 1.0)
    assert w.weights[0, 0] == 1.0
    bank = w.tokens.index("bank")
    assert w.weights[bank, bank + 1 :].sum() == 0  # words after bank get nothing


def test_scale_multiplies_the_scores():
    w = AttentionWidget(RIVER, scale=3)
    np.testing.assert_allclose(w.scores, 3 * w.q @ w.k.T)
    w.scale = None
    np.testing.assert_allclose(w.scores, w.q @ w.k.T / np.sqrt(2))


def test_query_dial_is_the_articles_example():
    w = query_dial()
    bank = w.tokens.index("bank")
    assert w.scale == 3 and w.focus == bank and w.q.shape[1] == 2
    raw = w.scores[bank] / w.scale
    assert [round(raw[w.tokens.index(t)], 2) for t in ("river", "money", "the")] == [0.99, 0.48, -0.45]
    pct = [round(100 * w.weights[bank, w.tokens.index(t)]) for t in ("river", "money", "the")]
    assert pct == [81, 18, 1]


def test_a_new_query_from_the_page_reaches_python():
    w = query_dial()
    seen = []
    w.observe(lambda ch: seen.append(ch["new"]), names="q")
    q = np.array(w.q, dtype=np.float32)
    q[3] = [1.0, -0.25]  # turned toward money's key
    w.set_state({"q": {"shape": [4, 2], "dtype": "float32", "view": memoryview(q.tobytes())}})
    assert len(seen) == 1 and w.q[3].tolist() == [1.0, -0.25]
    assert w.weights[3].argmax() == w.tokens.index("money")


def test_residual_adds_the_mix_to_the_word():
    w = AttentionWidget(RIVER)
    np.testing.assert_allclose(w.residual_output, w.x + w.output)
    w.residual = True
    q, k, v = (np.ones((2, 2)),) * 3
    plain = AttentionWidget(q=q, k=k, v=v)
    assert plain.residual_output is None
    with pytest.raises(traitlets.TraitError, match="x="):
        plain.residual = True
    with pytest.raises(traitlets.TraitError, match="width of the values"):
        AttentionWidget(q=q, k=k, v=v, x=np.ones((2, 3)))


def test_heads_side_by_side():
    rng = np.random.default_rng(3)
    q, k, v = rng.normal(size=(3, 5, 4)), rng.normal(size=(3, 5, 4)), rng.normal(size=(3, 5, 2))
    w = AttentionWidget(q=q, k=k, v=v)
    assert w.n_heads == 3 and w.head == 0
    for h in range(3):
        w.set_state({"head": h})  # a click on a small multiple
        np.testing.assert_allclose(w.weights, attention(q[h], k[h], v[h]).weights)
    with pytest.raises(traitlets.TraitError, match="from 0 to 2"):
        w.head = 3
    with pytest.raises(traitlets.TraitError, match="same number of heads"):
        w.v = rng.normal(size=(2, 5, 2))
    w.set_vectors(q=q[:2], k=k[:2], v=v[:2])
    assert w.n_heads == 2 and w.head == 1


@pytest.mark.parametrize("causal", [False, True])
def test_one_cells_arithmetic_equals_numpys(causal):
    w = AttentionWidget(RIVER, temperature=0.7, causal=causal)
    n = len(w.tokens)
    for i, j in [(5, 4), (0, 0), (2, 6), (n - 1, 0)]:
        w.cell = (i, j)
        a = w.cell_arithmetic
        assert a["dot"] == pytest.approx(w.q[i] @ w.k[j])
        assert a["score"] == pytest.approx(a["dot"] * a["scale"]) == pytest.approx(w.scores[i, j])
        assert a["tempered"] == pytest.approx(w.scores[i, j] / 0.7)
        assert a["weight"] == pytest.approx(w.weights[i, j])
        if a["masked"]:
            assert causal and j > i and a["weight"] == 0
        else:
            assert a["exp"] / a["row_sum"] == pytest.approx(w.weights[i, j])
        np.testing.assert_allclose(a["share"], w.weights[i, j] * w.v[j])
    with pytest.raises(traitlets.TraitError, match="cell"):
        w.cell = (n, 0)
    w.cell = None
    assert w.cell_arithmetic is None


def test_cell_arithmetic_survives_huge_scores():
    q = np.array([[1e3, 0.0], [0.0, 1.0]])
    w = AttentionWidget(q=q, k=q, v=np.eye(2), temperature=0.5, scale=1.0)
    w.cell = (0, 0)
    a = w.cell_arithmetic
    assert np.isfinite(a["exp"]) and a["shift"] > 0
    assert a["exp"] / a["row_sum"] == pytest.approx(w.weights[0, 0])


def test_from_lexicon_rejects_an_empty_sentence():
    with pytest.raises(ValueError, match="no tokens"):
        from_lexicon("   ")


def test_cell_arithmetic_at_a_tiny_temperature_shows_finite_steps():
    w = AttentionWidget(RIVER, temperature=1e-6, causal=True, cell=(0, 0))
    a = w.cell_arithmetic
    assert a["shift"] != 0 and a["row_sum"] > 0
    assert a["exp"] / a["row_sum"] == pytest.approx(a["weight"]) == pytest.approx(1.0)
    w.cell = (5, 4)
    a = w.cell_arithmetic
    assert a["exp"] / a["row_sum"] == pytest.approx(w.weights[5, 4])
