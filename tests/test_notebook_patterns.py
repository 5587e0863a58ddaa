"""What the course notebooks say is what their widgets show.

Every pattern a notebook's text names (a head that reads the previous word, a token that
scores highest against itself, words after bank that get nothing, ...) is checked against
the weights of the widget it names, and every figure the source articles quote is checked
where the notebook prints it. Each notebook is executed once, shared with
``test_notebooks.py`` (``executed``).
"""

import re

import numpy as np
import pytest
from test_notebooks import executed

from attnwidget import AttentionWidget
from attnwidget.examples import from_lexicon

LAB, VISUALLY, REAL = "01_attention_lab.ipynb", "02_attention_visually.ipynb", "03_real_model.ipynb"
SHE, SAT, BY, THE, RIVER, BANK = range(6)
WORDS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6}


def plain(text: str) -> str:
    """Markdown as a reader reads it: no emphasis marks or quotes, one space between words."""
    text = re.sub(r"[*_`\"“”]", "", text)
    return " ".join(text.split())


def rebuild(state):
    """The same widget, built again in this process from a notebook widget's state."""
    kwargs = dict(
        temperature=state["temperature"],
        causal=state["causal"],
        scale=state["scale"],
        focus=state["focus"],
        stage=state["stage"],
        head=state["head"],
        cell=state["cell"],
        residual=state["residual"],
    )
    if state["sentences"]:
        w = AttentionWidget(state["sentences"], sentence_index=state["sentence_index"], **kwargs)
    else:
        w = AttentionWidget(
            tokens=state["tokens"], q=state["q"], k=state["k"], v=state["v"], x=state["x"], mask=state["mask"], **kwargs
        )
    np.testing.assert_array_equal(w.weights, state["weights"])  # it is the same widget
    return w


def reads(weights, i):
    """The column row i gives the largest share of its budget."""
    return int(np.argmax(weights[i]))


# --- 01: the lab ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def lab():
    return executed(LAB)


def test_lab_text_keeps_every_figure_the_lab_quotes(lab):
    text = plain(lab.markdown)
    for figure in ["−1.0 to 2.8", "3.13", "0.556", "0.306", "(0.69, 0.23)", "0.049", "0.503", "0.951"]:
        assert figure in text, figure


def test_lab_prints_every_figure_it_quotes(lab):
    out = lab.all_printed
    assert "scores run from -1.0 to 2.8" in out
    assert "bank: river 0.556, itself 0.306, effective tokens 3.13" in out
    assert "bank's output: (0.69, 0.23)" in out
    assert re.search(r"output spread at T=5: 0\.049 .*at T=1: 0\.503", out)
    assert "bank at T=0.2: river 0.951, itself 0.049" in out


def test_lab_diagonal(lab):
    """She, sat, by and river score highest against themselves; the and bank against river."""
    s = lab.widgets["scores"]
    assert s["stage"] == "scores" and s["tokens"] == ["She", "sat", "by", "the", "river", "bank"]
    for i in (SHE, SAT, BY, RIVER):
        assert reads(s["scores"], i) == i
    assert reads(s["scores"], THE) == RIVER and reads(s["scores"], BANK) == RIVER
    out = lab.printed_by("scores highest against")
    assert "  the scores highest against river" in out and "  bank scores highest against river" in out
    assert "river scores highest against river" in out


def test_lab_budget_and_asymmetry(lab):
    budget = lab.widgets["budget"]
    np.testing.assert_allclose(budget["weights"].sum(axis=1), 1.0)
    asym = lab.widgets["asym"]
    w = asym["weights"]
    assert reads(w, BANK) == RIVER  # bank's query strongly matches river's key
    assert reads(w, RIVER) != BANK and w[RIVER, BANK] < w[BANK, RIVER] / 2  # river's query looks for something else


def test_lab_asymmetry_widget_opens_where_the_text_says(lab):
    # "click bank and then river" under a widget that opened on river left the reader guessing
    asym = lab.widgets["asym"]
    said = plain(next(c.source for c in lab.nb.cells if c.cell_type == "markdown" and "## Asymmetry" in c.source))
    opens = re.search(r"The widget below opens on (\w+)", said).group(1)
    assert asym["tokens"][asym["focus"]] == opens
    assert "bank gets the least of its budget" in said and reads(-asym["weights"], RIVER) == BANK
    assert re.search(r"Click (\w+)", said).group(1) != opens  # the first click moves the focus


def test_lab_blend_columns_and_sense_resolved(lab):
    text = plain(lab.markdown).lower()
    assert "multiply down each column of the two aligned grids" in text and "sum across" in text
    assert (
        "how far the blend moved from the average of all the values, as a fraction of the furthest a single token "
        "could have moved it" in text
    )
    blend = lab.widgets["blend"]
    assert blend["stage"] == "blend" and blend["focus"] == BANK and blend["temperature"] == 1.0
    v, out = blend["v"], blend["output"][BANK]
    np.testing.assert_allclose((blend["weights"][BANK][:, None] * v).sum(axis=0), out)
    centre = v.mean(axis=0)
    resolved = np.linalg.norm(out - centre) / np.linalg.norm(v - centre, axis=1).max()
    assert resolved == pytest.approx(blend["sense_resolved"][BANK])
    printed = lab.all_printed
    assert f"sense resolved: {resolved:.2f}" in printed
    assert "sum: (0.69, 0.23)" in printed  # the column on the right


def test_lab_hot_rows_go_uniform(lab):
    hot = lab.widgets["hot"]
    assert hot["temperature"] == AttentionWidget.temperature_range[1] == 5.0
    assert (hot["effective_tokens"] > 5.7).all()  # of 6


def test_lab_cold_blend_copies_rivers_value(lab):
    """T = 0.2 at the blend stage: bank's output becomes (nearly) a copy of river's value."""
    cold = [s for s in lab.shown if s["stage"] == "blend" and s["temperature"] == 0.2 and s["focus"] == BANK]
    assert cold, "no blend-stage widget at T = 0.2 focused on bank"
    cold = cold[0]
    assert round(cold["weights"][BANK, RIVER], 3) == 0.951 and round(cold["weights"][BANK, BANK], 3) == 0.049
    assert cold["effective_tokens"][BANK] < 1.3
    out, river = cold["output"][BANK], cold["v"][RIVER]
    assert np.linalg.norm(out - river) < 0.05
    printed = lab.all_printed
    assert f"bank's output at T=0.2: ({out[0]:.2f}, {out[1]:.2f})" in printed
    assert f"river's value: ({river[0]:.2f}, {river[1]:.2f})" in printed


def test_lab_take_away(lab):
    text = plain(lab.markdown)
    assert (
        "enough concentration to resolve something, enough spread to still be reading a sentence "
        "rather than a single word" in text
    )


# --- 02: Attention, Visually ---------------------------------------------------------


@pytest.fixture(scope="module")
def visually():
    return executed(VISUALLY)


def test_visually_quotes_the_article(visually):
    text = plain(visually.markdown)
    for quote in [
        "I sat on the river bank",
        "I put money in the bank",
        "Notice the words after bank: they get nothing.",
        "Real models have hundreds or thousands of numbers per word.",
    ]:
        assert quote in text, quote


def test_visually_says_real_sizes_where_the_toy_vectors_come_in(visually):
    cells = [plain(c.source) for c in visually.nb.cells if c.cell_type == "markdown"]
    assert any("two numbers" in c and "Real models have hundreds or thousands of numbers per word." in c for c in cells)


def test_visually_first_widget_is_the_causal_demo(visually):
    first = visually.shown[0]
    assert first["causal"] and first["stage"] == "weights" and first["tokens"][first["focus"]] == "bank"
    assert len(first["sentences"]) == 2
    w = rebuild(first)
    for index, context in enumerate(["river", "money"]):
        w.sentence_index = index
        bank = w.focus
        assert w.tokens[bank] == "bank" and bank < len(w.tokens) - 1, "the sentence needs words after bank"
        assert (w.weights[bank, bank + 1 :] == 0).all()  # they get nothing
        assert (w.weights[np.triu_indices(len(w.tokens), 1)] == 0).all()
        np.testing.assert_allclose(w.weights.sum(axis=1), 1.0)  # renormalised
        assert w.tokens[reads(w.weights, bank)] == context


def test_visually_non_causal_contrast_comes_later(visually):
    later = [s for s in visually.shown[1:] if not s["causal"] and s["sentences"]]
    assert later, "no non-causal view of the sentences"
    s = later[0]
    assert s["weights"][s["focus"], s["focus"] + 1 :].sum() > 0


def test_visually_query_dial_table(visually):
    text = plain(visually.markdown)
    assert "dot product" in text and "multiplied by 3" in text
    for row in ["river | 0.99 | 81%", "money | 0.48 | 18%", "the | -0.45 | 1%"]:
        assert row in text.replace("−", "-"), row
    dial = visually.widgets["dial"]
    bank = dial["focus"]
    assert dial["tokens"][bank] == "bank" and dial["scale"] == 3
    out = visually.printed_by("dial.weights")
    for word, score, pct in [("river", 0.99, 81), ("money", 0.48, 18), ("the", -0.45, 1)]:
        j = dial["tokens"].index(word)
        dot = dial["q"][bank] @ dial["k"][j]
        assert round(dot, 2) == score and round(100 * dial["weights"][bank, j]) == pct
        assert re.search(rf"{word}\s+{score:.2f}\s+× 3 =\s+{3 * dot:.2f}\s+{pct}%", out), (word, out)


def test_visually_mix_uses_the_first_demos_weights(visually):
    mix = visually.widgets["mix"]
    assert mix["causal"] and mix["residual"] and mix["stage"] == "blend"
    w = rebuild(mix)
    for index, sense in [(0, 0), (1, 1)]:  # bank carries a bit of river, then a bit of money
        w.sentence_index = index
        moved = w.residual_output[w.focus] - w.x[w.focus]
        assert w.tokens[w.focus] == "bank" and moved[sense] > moved[1 - sense]


def test_visually_one_cell_is_the_focused_row(visually):
    cells = [s for s in visually.shown if s["cell"] is not None]
    assert cells, "no widget shows a cell"
    for s in cells:
        row, col = s["cell"]
        assert s["focus"] == row, f"cell {s['cell']} shown with the focus on {s['tokens'][s['focus']]!r}"
        assert s["cell_arithmetic"]["weight"] == pytest.approx(s["weights"][row, col])


def test_visually_heads_read_what_the_text_says(visually):
    text = plain(visually.markdown)
    assert "reads the previous word" in text and "reads itself" in text
    heads = visually.widgets["heads"]
    lexicon, previous, itself = heads["head_weights"]
    n = len(heads["tokens"])
    bank = heads["tokens"].index("bank")
    assert heads["tokens"][reads(lexicon, bank)] == "river"
    assert [reads(previous, i) for i in range(1, n)] == list(range(n - 1))  # every word reads the one before it
    assert reads(previous, 0) == 0  # the first word has none: it reads itself
    assert [reads(itself, i) for i in range(n)] == list(range(n))
    assert (previous[np.arange(1, n), np.arange(n - 1)] > 0.9).all() and (np.diag(itself) > 0.9).all()


def test_visually_caution(visually):
    text = plain(visually.markdown)
    assert "in a real model they do not always explain why it gave an answer" in text
    assert "one set of weights shows only a small part of the story" in text


# --- 03: a real model ------------------------------------------------------------------


def test_real_model_river_head_reads_the_previous_word():
    real = executed(REAL)
    best, other = real.widgets["best_river"], real.widgets["other"]
    assert (best["layer"], best["head"]) == (other["layer"], other["head"])
    for s in (best, other):
        w, n = s["weights"], len(s["tokens"])
        assert [reads(w, i) for i in range(1, n)] == list(range(n - 1)), s["tokens"]
        assert (w[np.arange(1, n), np.arange(n - 1)] > 0.9).all()  # almost the whole budget
        assert reads(w, 0) == 0  # [CLS] has nothing before it: it reads itself
    assert "{'the': 1.0}" in real.printed_by("other.weights")
    out = real.printed_by("argmax(axis=1)")  # what each token reads, in both sentences
    for s in (best, other):
        assert " ".join(f"{t}→{s['tokens'][i - 1]}" for i, t in enumerate(s["tokens"]) if i) in out
    assert "This head reads the previous word" in plain(real.markdown)  # said, not only asked


def test_real_model_finds_the_head_it_discusses_with_the_summaries():
    real = executed(REAL)
    best = real.widgets["best_river"]
    assert f"reads the previous token most: layer {best['layer']}, head {best['head']}" in real.printed_by(
        "head_summary()"
    )
    assert real.widgets["river"]["summary"] == "previous"  # the overview, coloured by it
    assert "`w.head_summary()`" in real.markdown  # said in the text, not only run


def test_real_model_across_layers_says_what_rollout_and_norms_print():
    real = executed(REAL)
    out = real.printed_by("layers.rollout()")
    assert real.widgets["layers"]["measure"] == "rollout" and real.widgets["moves"]["measure"] == "norms"
    reached = re.search(r"rollout, what reaches bank at the last layer: (.*)", out).group(1).split(", ")
    first, second = (r.rsplit(" ", 1) for r in reached[:2])
    assert {first[0], second[0]} == {"[CLS]", "[SEP]"} and float(first[1]) + float(
        second[1]
    ) > 0.5  # "most of what reaches it"
    own = [float(x) for x in re.search(r"bank's own share, layer by layer: +(.*)", out).group(1).split()]
    assert own == sorted(own, reverse=True) and len(own) == 6  # "layer by layer, bank keeps less of itself"
    rows = re.findall(r"^ +(\d) +(\d+)% +(\d+)%$", real.printed_by("moves.norms()"), flags=re.M)
    assert len(rows) == 6
    for _, by_weight, by_norm in rows:  # "most of the weight, or close to it, and much less of what moves"
        assert int(by_weight) >= 45 and int(by_norm) <= 0.6 * int(by_weight)
    text = plain(real.markdown)
    assert "a large weight on a token whose value is near zero moves nothing" in text.lower()


def test_real_model_two_texts_say_what_their_difference_prints():
    real = executed(REAL)
    pair = real.widgets["pair"]
    assert (
        pair["sentences"] == ["I sat on the river bank", "I sat in the money bank"] and pair["measure"] == "difference"
    )
    out = real.printed_by("largest_difference")
    layer, head = (int(x) for x in re.search(r"layer (\d+), head (\d+)", out).groups())
    assert (pair["layer"], pair["head"]) == (layer, head)
    row = dict((t, float(d)) for t, d in re.findall(r"(\S+) ([+-]\d\.\d\d)", out.split("river − money:")[1]))
    assert row["river"] > 0.3 and row["river"] == max(row.values())  # "much more when that word is river"
    assert row["[CLS]"] < 0 and row["[SEP]"] < 0  # "with money, more of its budget stays on [CLS] and [SEP]"


def test_real_model_weights_you_have_are_the_weights_read():
    # "The same weights, every layer and head": the printed difference, over every layer and head
    real = executed(REAL)
    out = real.printed_by("from_attentions")
    worst = float(re.search(r"over every layer and head: (\S+)", out).group(1))
    assert worst < 1e-5 and "The same weights, every layer and head" in plain(real.markdown)


def test_real_model_learnt_sinks_say_what_they_print():
    real = executed(REAL)
    out = real.printed_by('head_summary()["sink_share"]')
    assert float(re.search(r"over every layer and head: (\S+)", out).group(1)) < 1e-5  # the model's own
    shares = [float(x) for x in re.findall(r"head \d (\d\.\d\d)", out)]
    assert shares == sorted(shares) and shares[-1] > 0.5  # "the larger a head's sink, the more ... head 3's takes most"
    rows = {
        float(t): (float(keeps), float(takes), float(effective))
        for t, keeps, takes, effective in re.findall(
            r"T = (\S+): bank keeps (\S+) and its sink takes (\S+); (\S+) effective tokens", real.printed_by("for T in")
        )
    }
    assert rows[0.5][1] > rows[1.0][1] > rows[2.0][1]  # the sink above every score: a colder row gives it more
    assert all(abs(keeps + takes - 1) < 0.011 and abs(effective - 7) < 0.1 for keeps, takes, effective in rows.values())
    assert f"{rows[1.0][1]:.2f}" in real.printed_by("np.e / (np.e + 7)")  # "as the arithmetic says"
    sunk = real.widgets["sunk"]
    assert (sunk["layer"], sunk["head"], sunk["temperature"], sunk["summary"]) == (0, 2, 1.0, "sink_share")
    np.testing.assert_allclose(sunk["weights"], sunk["head_weights"][2])  # the widget shows the sink's head
    assert (sunk["weights"].sum(axis=1) < 1).all()  # "its weights sum to less than 1"


# --- 04: practice ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def practice():
    return executed("04_practice.ipynb")


def test_practice_exercises_start_unanswered_on_the_rows_they_name(practice):
    shown = {name: practice.widgets[name] for name in ("budget", "dial", "senses", "writer", "needed")}
    budget, dial, senses, writer, needed = shown.values()
    assert (
        budget["exercise"] == "predict" and budget["tokens"][budget["focus"]] == "bank" and budget["stage"] == "weights"
    )
    assert budget["guess"] is None and not budget["revealed"] and budget["score"] is None
    assert dial["exercise"] == "temperature" and dial["goal"] == 2 and dial["tokens"][dial["focus"]] == "bank"
    assert senses["causal"] and senses["tokens"][senses["focus"]] == "bank"
    assert writer["step"] == 1 and writer["weights"].shape == (1, 1)
    assert (
        needed["tokens"][needed["focus"]] == "the" and needed["stage"] == "weights"
    )  # the row that writes the next word
    assert [s["model_id"] for s in practice.shown] == [s["model_id"] for s in shown.values()]  # shown, in this order


def test_practice_text_matches_the_numbers(practice):
    text = plain(practice.markdown)
    dial = rebuild(practice.widgets["dial"])
    assert "from 1 (one token takes everything) to 6 (an even split)" in text and len(dial.tokens) == 6
    t = float(re.search(r"T ≈ ([\d.]+) gives 2.000 effective tokens", practice.all_printed).group(1))
    assert AttentionWidget("She sat by the river bank", temperature=t).effective_tokens[BANK] == pytest.approx(
        2, abs=5e-3
    )
    assert "The words after bank get 0% of its budget" in practice.all_printed
    demo = practice.widgets["demo"]  # the teacher's example: all on river scores river's real weight
    assert demo["score"] == pytest.approx(demo["weights"][BANK, RIVER])
    assert f"Score {demo['score']:.2f}" in practice.printed_by("demo.guess")


def test_practice_asks_the_cache_question_before_the_widget_answers_it(practice):
    cells = practice.nb.cells
    asked = next(
        i
        for i, c in enumerate(cells)
        if c.cell_type == "markdown" and "why do the earlier rows never change" in c.source
    )
    shown = next(i for i, c in enumerate(cells) if c.cell_type == "code" and "writer = AttentionWidget" in c.source)
    assert asked < shown, "the writer widget prints the answer: the question comes first"
    intro = plain(cells[0].source)
    assert "Each asks you to commit to an answer in the widget" not in intro  # the fourth is answered in words
    assert "fourth" in intro


# --- every notebook: numbers and colours as the page shows them ----------------------

ALL = [
    "01_attention_lab.ipynb",
    VISUALLY,
    REAL,
    "04_cross_attention.ipynb",
    "04_practice.ipynb",
    "05_head_atlas.ipynb",
    "06_position_and_images.ipynb",
    "07_differential_attention.ipynb",
    "08_hybrid_and_sparse_attention.ipynb",
    "09_long_context.ipynb",
    "10_why_a_head_attends.ipynb",
]


@pytest.mark.parametrize("name", ALL)
def test_heads_and_layers_the_text_names_are_python_numbers_of_its_widgets(name):
    run = executed(name)
    heads = max([s["n_heads"] for s in run.widgets.values()] + [0])
    # (a hybrid's layers by the model's own numbers: every one of its layers, attention or not)
    layers = max([max(s["n_layers"], len(s.get("layer_kinds") or ())) for s in run.widgets.values()] + [0])
    text = plain(run.markdown)
    # counted from 0, as w.head and w.layer are (and as the page now labels them)
    for word, limit in (("head", heads), ("layer", layers)):
        for n in map(int, re.findall(rf"\b{word} (\d+)\b", text, re.I)):
            assert n < limit, f"{name} names {word} {n}, but its widgets have {word}s 0 to {limit - 1}"


@pytest.mark.parametrize("name", ALL)
def test_what_the_text_says_of_tints_holds_in_both_themes(name):
    # the dark theme draws more weight brighter, the light one darker: a sentence that says
    # one of them says both
    for sentence in re.split(r"(?<=[.;])\s", plain(executed(name).markdown)):
        if re.search(r"\b(darker|lighter|paler|brighter)\b", sentence):
            assert re.search(r"\bdark (page|theme|one)\b", sentence) and re.search(
                r"\blight (page|theme|one)\b", sentence
            ), sentence


def test_lab_says_the_cold_end_as_the_numbers_are(lab):
    # at T = 0.10 the collapse holds for bank and sat, not for every row (She still reads 3.43 tokens)
    text = plain(lab.markdown)
    cold = AttentionWidget(temperature=0.1)
    eff = dict(zip(cold.tokens, cold.effective_tokens))
    assert "One token takes nearly the whole budget" not in text  # said of every row, and false of She
    for word in ("bank", "sat"):
        assert eff[word] < 1.1
    assert f"She still reads {eff['She']:.2f} effective tokens" in text, text
    assert f"bank {eff['bank']:.2f}" in text and f"sat {eff['sat']:.2f}" in text


def test_practice_which_head_the_next_word_needs_is_revealed_as_the_teacher_says(practice):
    assert "i put my money in the → bank" in practice.printed_by("next_word = ")
    training = next(c for c in practice.code_cells if "next_word = " in c.source)
    warned = [o.get("text", "") for o in training.get("outputs", []) if o.get("name") == "stderr"]
    assert not any("[transformers]" in text for text in warned), warned  # the model's config is its own
    needed = practice.widgets["needed"]
    # Run All clicks no head and reveals nothing: the learner's check cell asks for a head, and the
    # teacher's cells read widgets of their own, so the learner's stays on the head its cell set
    assert practice.printed_by("print(check_head(needed))").startswith(
        "Click the head you think the next word needs most, in the overview, then run this cell again.\n"
    )
    made = next(c.source for c in practice.code_cells if "needed = AttentionWidget" in c.source)
    assert needed["summary"] != "effect" and f"layer={needed['layer']}, head={needed['head']}" in made
    assert practice.widgets["clicked"]["summary"] == "effect"  # the teacher's click is revealed, in its own widget
    rows = [(int(layer), int(head), float(money), float(effect)) for layer, head, money, effect in re.findall(
        r"^ +(\d) +(\d) +(\d\.\d\d) +([+-]\d\.\d+)$", practice.printed_by("teacher.head_effects()"), flags=re.M,
    )]  # fmt: skip
    assert len(rows) == 8
    best = min(rows, key=lambda r: r[3])
    reading = [r for r in rows if r[2] >= 0.5]  # "two heads read money from the with most of their budget"
    assert len(reading) == 2 and best in reading
    other = next(r for r in reading if r is not best)
    assert abs(other[3]) * 5 < abs(best[3])  # "only one of them is needed"
    said = practice.printed_by("print(check_head(clicked))")
    assert (
        said.startswith("You chose layer 1, head 3")
        and f"The head it needs most is layer {best[0]}, head {best[1]}" in said
    )


# --- 05: the head atlas ------------------------------------------------------------------


@pytest.fixture(scope="module")
def head_atlas():
    return executed("05_head_atlas.ipynb")


def test_atlas_finds_the_heads_the_text_names(head_atlas):
    text = plain(head_atlas.markdown)
    steps = int(re.search(r"trained for (\d+) steps", head_atlas.all_printed).group(1))
    assert steps <= 2000 and "the cell prints how many steps that took" in text
    out = head_atlas.printed_by("scores = w.head_scores()")
    table = {
        name: [[float(v) for v in layer.split()] for layer in row.split("|")[:2]]
        for name, row in re.findall(r"^ *(\w+): (.*)$", out, flags=re.M)
        if name in ("previous", "induction", "sink")
    }
    previous, induction = np.array(table["previous"]), np.array(table["induction"])
    # "In layer 0, two heads give more than half ... to the word just before it", one of them more than any head
    said = re.search(
        r"In layer 0, (\w+) heads? gives? more than half of each row's weight to the word just before", text
    )
    assert WORDS[said.group(1)] == (previous[0] > 0.5).sum()
    assert "the previous-token head, more than any other head does" in text and previous[0].max() == previous.max()
    # layer 0 has no induction head; every head of layer 1 is one
    assert "each induction score is below 0.1" in text and (induction[0] < 0.1).all()
    assert "In layer 1 every head is an induction head: each scores above 0.5" in text and (induction[1] > 0.5).all()
    head = int(re.search(r"induction head: layer 1, head (\d)", out).group(1))
    assert induction[1, head] == induction[1].max() and head_atlas.widgets["w"]["head"] == head
    assert head_atlas.widgets["w"]["layer"] == 1
    # the map: "More than half of the keys nearest a second-copy query are the first copy's"
    share = int(re.search(r"(\d+)% are the first copy's", head_atlas.printed_by("found = w.query_key_map()")).group(1))
    assert "More than half of the keys nearest a second-copy query are the first copy's" in text and share > 50
    # "...but not those around the key the head reads: they lie a median of 7 positions from it"
    median = int(
        re.search(r"a median (\d+) positions from the key", head_atlas.printed_by("found = w.query_key_map()")).group(1)
    )
    assert f"they lie a median of {median} positions from it" in text


def test_atlas_counts_the_sink_heads_of_the_real_model(head_atlas):
    count, total = (int(x) for x in re.search(r"(\d+) of (\d+) heads are sink heads", head_atlas.all_printed).groups())
    real = head_atlas.widgets["real"]
    assert total == 72 and 0 < count <= total and real["summary"] == "sink"
    assert "more than 0.3 of each row's weight to the first token" in plain(head_atlas.markdown)


def test_atlas_focus_reads_the_word_after_the_first_occurrence(head_atlas):
    shown = head_atlas.widgets["w"]
    m, focus = 20, shown["focus"]
    tokens = shown["tokens"]
    assert m < focus <= 2 * m and tokens[focus] == tokens[focus - m]  # "a word of the second copy"
    assert int(np.argmax(shown["weights"][focus])) == focus - m + 1 == focus - 19  # "19 tokens back"
    assert "19 tokens back" in plain(head_atlas.markdown)
    # "the second copy's rows make a diagonal 19 cells to the left of the main one"
    rows = range(m + 1, 2 * m + 1)
    on = np.mean([np.argmax(shown["weights"][i]) == i - 19 for i in rows])
    assert "a diagonal 19 cells to the left of the main one" in plain(head_atlas.markdown) and on > 0.75


# --- 06: where position enters ------------------------------------------------------

POSITION = "06_position_and_images.ipynb"


def _bank_reads_river(sentence, **position):
    w = AttentionWidget(sentence, **position)
    bank, river = w.tokens.index("bank"), w.tokens.index("river")
    return w.scores[bank, river], w.weights[bank, river]


def test_position_says_what_rope_and_alibi_do_to_bank_reading_river():
    run = executed(POSITION)
    text, printed = plain(run.markdown), run.all_printed
    said = lambda x: f"{x:.3f}".replace("-", "−")  # (as the text writes a minus)
    near, far = "I sat by the river bank", "river I sat by the bank"
    plain_near, plain_far = _bank_reads_river(near), _bank_reads_river(far)
    assert plain_near[0] == plain_far[0] and f"the same in both sentences, {said(plain_near[0])}" in text
    rope = [_bank_reads_river(s, position="rope") for s in (near, far)]
    assert f"falls from {said(plain_near[0])} to {said(rope[0][0])}" in text
    assert f"the score is {said(rope[1][0])}" in text
    alibi = [_bank_reads_river(s, position="alibi", alibi_slopes=[0.5]) for s in (near, far)]
    assert alibi[0][0] == pytest.approx(plain_near[0] - 0.5) and alibi[1][0] == pytest.approx(plain_near[0] - 2.5)
    assert f"{said(plain_near[0])} − 0.5 = {said(alibi[0][0])} one place apart" in text
    assert f"{said(plain_near[0])} − 2.5 = {said(alibi[1][0])} five places apart" in text
    assert f"falls from {said(alibi[0][1])} to {said(alibi[1][1])}" in text
    for score, weight in (plain_near, plain_far, *rope, *alibi):  # every pair is printed as the text reads it
        assert f"score {score:6.3f}  weight {weight:.3f}" in printed
    shown = run.shown
    assert [s["stage"] for s in shown[:2]] == ["qk", "scores"] and shown[0]["focus"] == 5


def test_position_says_how_wide_its_vectors_are():
    # the lab's own vectors (AttentionWidget()) are four numbers wide; this section's are the lexicon's
    run = executed(POSITION)
    text = plain(run.markdown)
    width = WORDS[re.search(r"toy lexicon's queries and keys have (\w+) numbers each", text).group(1)]
    for s in run.shown[:2]:  # the RoPE and ALiBi widgets
        np.testing.assert_array_equal(s["q"], from_lexicon(" ".join(s["tokens"])).q)
        assert s["q"].shape[-1] == width
    assert width == 2 and "are one pair, so θ = 1 radian" in text


def test_the_vision_section_prints_what_its_widget_holds():
    run = executed(POSITION)
    vision = [s for s in run.shown if s["tokens"][0] == "[CLS]"]
    assert len(vision) == 1 and len(vision[0]["tokens"]) == 197 and vision[0]["tokens"][-1] == "r13c13"
    printed = run.printed_by("vision.rollout()")
    # the rollout printed is the one the widget shows: up to its layer, the last, as the text says
    layer = int(re.search(r"up to layer (\d+)", printed).group(1))
    assert layer == vision[0]["layer"] == vision[0]["n_layers"] - 1 and "the widget opens on the last" in plain(
        run.markdown
    )
    kept, shared = map(float, re.findall(r"keeps (\d\.\d+) of its own; the patches share (\d\.\d+)", printed)[0])
    assert kept + shared == pytest.approx(1, abs=2e-3)  # rollout's rows add up to 1, as the text says
    assert "learned positions" in run.printed_by("vision.position_about")
    assert "196 patches" in plain(run.markdown) and "r0c0 is the top-left patch" in plain(run.markdown)


# --- 07: differential attention ---------------------------------------------------------

DIFFERENTIAL = "07_differential_attention.ipynb"


def test_differential_says_lambda_the_budget_and_the_mix_as_its_widgets_hold():
    run = executed(DIFFERENTIAL)
    text = plain(run.markdown)
    lambdas = run.shown[0]["model_lambda"]
    said = lambda x: f"{x:.3f}".replace("-", "−")
    assert f"{said(lambdas[0])} in layer 0 and {said(lambdas[1])} in layer 1" in text
    assert (run.shown[0]["layer"], run.shown[0]["head"], run.shown[0]["difference_map"]) == (1, 0, False)
    assert f"the difference spends 1 − λ, {said(1 - lambdas[1])} here" in text
    printed = run.printed_by("w.differential")
    assert f"sums to {1 - lambdas[1]:.3f} = 1 − λ = {1 - lambdas[1]:.3f}" in printed
    river = float(re.search(r"river (-\d\.\d+)", printed).group(1))  # bank's weight on river, in the difference
    assert river < 0 and f"river comes out at {said(river)}" in text
    worst = float(re.search(r"every layer and pair: (\S+)", run.printed_by("register_forward_pre_hook")).group(1))
    assert worst < 1e-5  # "Float32's rounding, nothing more"
    last = run.shown[-1]
    assert last["difference_map"] and last["stage"] == "weights" and last["temperature"] == 1.0
    hot = re.search(r"T = 0.5: .*difference (-\d\.\d+); most negative: river", run.printed_by("diff.temperature"))
    assert hot and f"falls from {said(river)} to {said(float(hot.group(1)))}" in text


# --- 08: hybrid models and sparse attention ---------------------------------------------

HYBRID = "08_hybrid_and_sparse_attention.ipynb"


def test_hybrid_and_sparse_say_the_layers_and_the_choice_as_its_widgets_hold():
    run = executed(HYBRID)
    text = plain(run.markdown)
    jamba, sparse = run.widgets["w"], run.widgets["s"]
    assert jamba["layer_numbers"] == [1, 3] and jamba["layer"] == 1  # "the model's own numbers, 1 and 3"
    assert [i for i, kind in enumerate(jamba["layer_kinds"]) if kind.startswith("Mamba")] == [0, 2]
    assert "own numbers, 1 and 3, and opens on layer 1" in text and "Layers 0 and 2 are Mamba layers" in text
    assert "the layer shown is still 1" in run.printed_by("w.layer = 0")
    assert sparse["sparse_layers"] == [0, 1] and sparse["tokens"][sparse["focus"]] == "book"
    printed = run.printed_by("s.selection()")
    reads, kept = re.search(r"book reads (\d+) keys; dense attention would give them (\d\.\d+)", printed).groups()
    assert f"book reads {reads} of its {sparse['focus'] + 1} keys" in text and f"only {kept} of its row" in text
    said = re.search(r"river (\S+) = c2c (\S+) \+ c2p (\S+) \+ p2c (\S+)", run.printed_by("d.score_terms()")).groups()
    score, c2c, c2p, p2c = (x.replace("-", "−") for x in said)
    assert f"c2c alone is {c2c}, but c2p adds {c2p} and p2c {p2c}, for a score of {score}" in text
