"""The default example reproduces every figure the lab's text quotes, to its decimals."""

import numpy as np
import pytest

from attnwidget import AttentionWidget

SHE, SAT, BY, THE, RIVER, BANK = range(6)


@pytest.fixture
def w():
    return AttentionWidget()


def test_default_is_the_lab_sentence(w):
    assert w.tokens == ["She", "sat", "by", "the", "river", "bank"]
    assert AttentionWidget("She sat by the river bank").tokens == w.tokens


def test_score_range(w):
    assert round(w.scores.min(), 1) == -1.0
    assert round(w.scores.max(), 1) == 2.8


def test_diagonal_and_who_scores_highest(w):
    best = w.scores.argmax(axis=1)
    for i in (SHE, SAT, BY, RIVER):
        assert best[i] == i
    assert best[THE] == RIVER and best[BANK] == RIVER


def test_bank_row_budget(w):
    assert round(w.weights[BANK, RIVER], 3) == 0.556
    assert round(w.weights[BANK, BANK], 3) == 0.306
    assert round(w.effective_tokens[BANK], 2) == 3.13
    np.testing.assert_allclose(w.weights.sum(axis=1), 1.0)


def test_bank_output(w):
    assert np.round(w.output[BANK], 2).tolist() == [0.69, 0.23]


def test_output_spread_at_default_and_top_of_slider(w):
    assert round(w.output_spread, 3) == 0.503
    w.temperature = AttentionWidget.temperature_range[1]
    assert w.temperature == 5.0
    assert round(w.output_spread, 3) == 0.049


def test_cold_bank_reads_river(w):
    w.temperature = 0.2
    assert round(w.weights[BANK, RIVER], 3) == 0.951
    assert round(w.weights[BANK, BANK], 3) == 0.049


def test_value_geometry(w):
    river, bank = w.v[RIVER], w.v[BANK]
    assert river[1] == 0 and river[0] == w.v[:, 0].max() and river[0] > 0
    assert (bank > 0).all()


def test_asymmetry(w):
    assert w.weights[BANK, RIVER] > 3 * w.weights[RIVER, BANK]


def test_figures_survive_float32_transport(w):
    """The page receives float32 buffers: its numbers round the same way."""
    from attnwidget import attention

    a = attention(*(x.astype(np.float32).astype(float) for x in (w.q, w.k, w.v)))
    assert round(a.weights[BANK, RIVER], 3) == 0.556 and round(a.output_spread, 3) == 0.503
