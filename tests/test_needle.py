"""The retrieval heads' harness (attnwidget.needle, Wu et al. 2024): a needle hidden in a haystack,
the model's greedy answer, and each head's retrieval score, against the definition computed here
from the model's own decoding with a cache and its weights held whole (output_attentions).

The models are GPT-2s of two layers whose weights are set by hand so that one head copies the
needle: its query for a token asks for the token that follows it in the needle, its value carries
the token it reads to the output, which writes it. Noise added to the weights makes heads copy
some of the needle's tokens; nothing is downloaded."""

import re

import numpy as np
import pytest
from test_integrations import byte_level_tokenizer

from attnwidget import needle

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"  # the needles' tokens; the fillers and the question have none
WORDS = "river bank water stone field house light small green quiet".split()
PROMPT = "\nrepeat:"  # its last token, ":", asks for the needle's first
LAYERS, HEADS, WIDTH = 2, 4, 304  # WIDTH: a dimension for each of the tokenizer's 273 tokens and each letter
COPIER = (1, 2)  # the head that copies


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """Tiny models run fastest in one thread, the more so on a busy machine."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    return byte_level_tokenizer(tmp_path_factory.mktemp("tokenizer"))


def copying_model(tokenizer, text: str, noise: float = 0.0, seed: int = 0, implementation: str = "eager"):
    """A GPT-2 (float64, no positions, no MLP) whose head COPIER copies ``text``, a needle of distinct
    letters: at ":" it reads the needle's first letter, at each letter the one after it, and its
    output makes the model write the letter read. Its neighbours read the needle without copying:
    one reads the token asked about itself, one the letter after next; the others read uniformly.
    ``noise``: Gaussian noise of that size added to every head's query, key and value weights (and a
    hundredth of it to the positions' embeddings)."""
    V = len(tokenizer)
    ids = [tokenizer.convert_tokens_to_ids(c) for c in text]
    after = dict(zip([tokenizer.convert_tokens_to_ids(":"), *ids], ids))  # token -> the needle's next
    letter = {tokenizer.convert_tokens_to_ids(c): i for i, c in enumerate(LETTERS)}  # token -> its dimension
    config = transformers.GPT2Config(
        vocab_size=V,
        n_embd=WIDTH,
        n_layer=LAYERS,
        n_head=HEADS,
        n_positions=512,
        n_inner=4,  # (its MLP does nothing: its weights are 0)
        bos_token_id=V - 1,
        eos_token_id=V - 1,
        tie_word_embeddings=False,
        attn_implementation=implementation,
    )
    model = transformers.GPT2LMHeadModel(config).double().eval()
    d = WIDTH // HEADS
    with torch.no_grad():
        for p in model.parameters():
            p.zero_()
        for m in model.modules():
            if isinstance(m, torch.nn.LayerNorm):
                m.weight.fill_(1.0)
        model.transformer.wte.weight[:, :V] = torch.eye(V, dtype=torch.float64)
        attention = model.transformer.h[COPIER[0]].attn
        q, k, v = attention.c_attn.weight.view(WIDTH, 3, HEADS, d).unbind(1)  # (views: written through)
        for t, i in letter.items():
            k[t, :3, i] = 1.0  # the letters' keys, for the copier and its two neighbours
        for x, y in after.items():
            q[x, COPIER[1], letter[y]] = 1.0  # asks for the needle's next letter
            v[y, COPIER[1], letter[y]] = 1.0  # carries the letter read
            if x in letter:
                q[x, 0, letter[x]] = 1.0  # asks for its own letter
            if y in after:
                q[x, 1, letter[after[y]]] = 1.0  # asks for the letter after next
        attention.c_proj.weight.view(HEADS, d, WIDTH)[COPIER[1], range(26), range(V, V + 26)] = 1.0
        model.lm_head.weight[list(letter), range(V, V + 26)] = 10.0  # writes the letter carried
        generator = torch.Generator().manual_seed(seed)
        for w in [block.attn.c_attn.weight for block in model.transformer.h] + [model.transformer.wpe.weight]:
            w += noise * torch.randn(w.shape, generator=generator, dtype=w.dtype)
        model.transformer.wpe.weight /= 100  # positions, faintly: no two keys of one token tie
    return model


def filler(seed: int, count: int = 40) -> list[str]:
    rng = np.random.default_rng(seed)
    return [" ".join(rng.choice(WORDS, 8)) + "." for _ in range(count)]


def by_definition(model, tokenizer, text: str, ids: list[int], start: int, end: int) -> tuple[np.ndarray, list]:
    """Each head's retrieval score on one prompt, straight from Wu et al.'s definition: the model decodes
    greedily with its cache, each step's weights held whole; a head copies at a step writing w when its
    largest weight is on a key inside the needle whose token is w; its score is the share of the
    needle's tokens it copied. And the tokens written."""
    steps = len(tokenizer(text, add_special_tokens=False)["input_ids"]) + needle.EXTRA
    with torch.no_grad():
        out = model.generate(
            torch.tensor([ids]),
            attention_mask=torch.ones(1, len(ids), dtype=torch.long),
            max_new_tokens=steps,
            do_sample=False,
            num_beams=1,
            output_attentions=True,
            return_dict_in_generate=True,
            pad_token_id=model.config.eos_token_id,
        )
    tokens = out.sequences[0].tolist()
    written = tokens[len(ids) :]
    layers, heads = len(out.attentions[0]), out.attentions[0][0].shape[1]
    copied = [[set() for _ in range(heads)] for _ in range(layers)]
    for step, every in enumerate(out.attentions):  # step t: the query is the last token read
        for layer, weights in enumerate(every):
            for head in range(heads):
                j = int(weights[0, head, -1].argmax())
                if start <= j < end and tokens[j] == written[step]:
                    copied[layer][head].add(j)
    return np.array([[len(c) / (end - start) for c in layer] for layer in copied]), written


def lcs(a, b) -> int:
    """The length of the longest common subsequence of a and b."""
    row = [0] * (len(b) + 1)
    for x in a:
        before = row[:]
        for j, y in enumerate(b):
            row[j + 1] = before[j] + 1 if x == y else max(row[j], before[j + 1])
    return row[-1]


def test_the_haystack_holds_the_needle_at_its_depth_in_the_filler_cut_to_length(tokenizer):
    texts = filler(0)
    cut = tokenizer(" ".join(texts * 3), add_special_tokens=False)["input_ids"]  # the texts, repeated as needed
    pin = tokenizer("QXJ", add_special_tokens=False)["input_ids"]
    question = tokenizer(PROMPT, add_special_tokens=False)["input_ids"]
    for length, depth in [(30, 0.0), (30, 1.0), (57, 0.5), (900, 0.3), (4, 0.7)]:
        stack = needle.haystack(tokenizer, length, depth, needle="QXJ", filler=texts, prompt=PROMPT)
        ids, (start, end) = stack.ids, stack.span
        assert ids[0] == tokenizer.bos_token_id and ids[-len(question) :] == question
        body = ids[1 : -len(question)]
        assert len(body) == length and ids[start:end] == pin
        assert start - 1 == round(depth * (length - 3))
        rest = body[: start - 1] + body[end - 1 :]
        assert rest == cut[: length - 3]
    built = needle.haystack(tokenizer, 500, 0.5)  # the built-in filler and needle: the same every time
    assert built == needle.haystack(tokenizer, 500, 0.5)
    words = tokenizer.decode(built.ids[1 : built.span[0]]).split()
    assert len(set(words)) > 20 and all(re.fullmatch(r"[A-Za-z]+[.,]?", w) for w in words[:-1])


def test_each_heads_score_is_the_share_of_the_needle_it_copies_while_the_model_decodes(tokenizer):
    """Random needles, fillers, lengths, depths and weights: the harness's one long pass equals the
    definition's cached decoding with every weight held, step by step."""
    rng = np.random.default_rng(7)
    between = 0  # scores strictly between 0 and 1: the cases are not all or nothing
    for case in range(5):
        text = "".join(rng.choice(list(LETTERS), int(rng.integers(3, 9)), replace=False))
        texts = filler(case)
        lengths = sorted(set(rng.integers(len(text) + 1, 120, 2).tolist()))
        depths = [float(x) for x in rng.choice([0.0, 1.0, *rng.random(3)], 2, replace=False)]
        noise = float(rng.choice([0.0, 0.3, 0.6]))
        eager = copying_model(tokenizer, text, noise, seed=case)
        sdpa = copying_model(tokenizer, text, noise, seed=case, implementation="sdpa")
        got = needle.retrieval_scores(
            sdpa, tokenizer, needle=text, filler=texts, lengths=lengths, depths=depths, prompt=PROMPT
        )
        runs = [(n, d) for n in lengths for d in depths]
        assert got["lengths"] == [n for n, _ in runs] and got["depths"] == [d for _, d in runs]
        assert got["layers"] == list(range(LAYERS)) and got["each"].shape == (len(runs), LAYERS, HEADS)
        for r, (n, d) in enumerate(runs):
            stack = needle.haystack(tokenizer, n, d, needle=text, filler=texts, prompt=PROMPT)
            want, written = by_definition(eager, tokenizer, text, stack.ids, *stack.span)
            np.testing.assert_array_equal(got["each"][r], want, err_msg=f"case {case}, run {r}")
            assert got["spans"][r] == stack.span and got["written"][r] == written
            pin = stack.ids[slice(*stack.span)]
            assert got["recall"][r] == lcs(written, pin) / len(pin)
            assert got["answers"][r] == tokenizer.decode(written, skip_special_tokens=True)
            between += int(((want > 0) & (want < 1)).sum())
        np.testing.assert_allclose(got["retrieval"], got["each"].mean(axis=0))
    assert between > 5


def test_a_rotary_model_with_grouped_heads_scores_as_its_own_decoding(tokenizer):
    """Random Llamas (rotary positions, two query heads to each key-value head) that write only A, B
    or C, on a needle of those letters filling most of the haystack: heads copy some by chance."""
    keep = tokenizer.convert_tokens_to_ids(list("ABC"))

    def llama(seed, implementation):
        torch.manual_seed(seed)
        config = transformers.LlamaConfig(
            vocab_size=len(tokenizer),
            hidden_size=64,
            intermediate_size=64,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            max_position_embeddings=512,
            eos_token_id=len(tokenizer) - 1,
            attn_implementation=implementation,
        )
        model = transformers.LlamaForCausalLM(config).double().eval()
        with torch.no_grad():
            w = model.lm_head.weight
            letters = w[keep].clone()
            w.zero_()
            w[keep] = 10 * letters
        return model

    text, texts, seen = "ABCCABACBA", ["xyz qrs"], 0
    for seed in range(2):
        got = needle.retrieval_scores(
            llama(seed, "sdpa"), tokenizer, needle=text, filler=texts, lengths=(14, 20), depths=(0.2, 0.9), prompt=":"
        )
        for r, (n, d) in enumerate(zip(got["lengths"], got["depths"])):
            stack = needle.haystack(tokenizer, n, d, needle=text, filler=texts, prompt=":")
            want, written = by_definition(llama(seed, "eager"), tokenizer, text, stack.ids, *stack.span)
            np.testing.assert_array_equal(got["each"][r], want, err_msg=f"seed {seed}, run {r}")
            assert got["written"][r] == written
            seen += int((want > 0).sum())
    assert seen > 5


def test_the_one_head_that_copies_is_found_and_no_other(tokenizer):
    model = copying_model(tokenizer, "HQWDNAKT", implementation="sdpa")
    told = []
    got = needle.retrieval_scores(
        model,
        tokenizer,
        needle="HQWDNAKT",
        filler=filler(3),
        lengths=(40, 200),
        depths=(0.0, 0.5, 1.0),
        prompt=PROMPT,
        progress=told.append,
    )
    scores = got["retrieval"]
    assert scores[COPIER] == 1.0
    scores[COPIER] = 0.0
    assert (scores == 0).all()
    assert (got["recall"] == 1.0).all() and all(a.startswith("HQWDNAKT") for a in got["answers"])
    assert told == sorted(told) and told[-1] == 1.0


def test_a_model_that_copies_nothing_scores_zero_and_recalls_little(tokenizer):
    model = copying_model(tokenizer, "QXJ")
    got = needle.retrieval_scores(model, tokenizer, needle="BCDEF", filler="one text", lengths=(30,), depths=(0.5,))
    assert (got["retrieval"] == 0).all() and got["recall"][0] < 0.5


@pytest.mark.parametrize(
    "options, message",
    [
        (dict(needle="ABCDEFGH", lengths=(8,)), r"needle is 8 tokens .* lengths of 9 tokens or more"),
        (dict(depths=(0.5, 1.5)), r"depths must be fractions from 0 to 1 .* got 1.5"),
        (dict(depths=(float("nan"),)), r"depths must be fractions from 0 to 1 .* got nan"),
        (dict(depths=()), r"depths must hold at least one depth"),
        (dict(lengths=()), r"lengths must hold at least one length"),
        (dict(lengths=(20.5,)), r"lengths must be whole numbers of tokens .* got 20.5"),
        (dict(filler=[]), r"filler must hold at least one text"),
        (dict(filler=["", ""]), r"filler has no words"),
        (dict(filler=[3]), r"filler must be texts .* got int"),
        (dict(needle=""), r"needle gives no tokens"),
        (dict(prompt=5), r"prompt must be a text .* got int"),
        (dict(lengths=(600,)), r"reads at most 512 positions"),
    ],
)
def test_bad_input_is_refused_with_what_to_change(tokenizer, options, message):
    model = copying_model(tokenizer, "QXJ")
    with pytest.raises(ValueError, match=message):
        needle.retrieval_scores(model, tokenizer, **{"lengths": (20,), "needle": "QXJ", **options})


def test_a_model_without_a_language_model_head_is_refused(tokenizer):
    model = copying_model(tokenizer, "QXJ").transformer
    with pytest.raises(ValueError, match="language-model head"):
        needle.retrieval_scores(model, tokenizer, needle="QXJ", lengths=(20,))


def test_a_widgets_retrieval_score_finds_the_copying_head_and_colours_the_overview(tokenizer):
    from attnwidget import AttentionWidget, computed_views

    model = copying_model(tokenizer, "HQWDNAKT", implementation="sdpa")
    w = AttentionWidget.from_transformers(model, tokenizer, "a b c", layer=1)
    options = dict(needle="HQWDNAKT", filler=filler(3), lengths=(60,), depths=(0.0, 1.0), prompt=PROMPT)
    scores = w.head_scores(["retrieval"], needle=options)["retrieval"]
    want = needle.retrieval_scores(model, tokenizer, **options)["retrieval"]
    assert np.array_equal(scores, want) and scores[COPIER] == 1.0 and scores.sum() == 1.0
    assert "retrieval" not in w.head_scores()  # (only when asked: the model writes many long texts)
    w.summary = "retrieval"  # the overview's colours: the score kept, not read again
    answer = computed_views.answer("retrieval", w._inputs())
    assert answer["summaries"]["retrieval"] == [float(v) for v in want.ravel()]
    with pytest.raises(ValueError, match="retrieval score has the model write"):
        AttentionWidget("a b").head_scores(["retrieval"])
