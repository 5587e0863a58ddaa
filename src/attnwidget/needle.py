"""Retrieval heads (Wu et al., "Retrieval Head Mechanistically Explains Long-Context Factuality",
2024): the heads that copy a needle out of a long haystack while the model repeats it.

    from attnwidget import needle
    found = needle.retrieval_scores(model, tokenizer, lengths=(1000, 4000), depths=(0, 0.5, 1))
    found["retrieval"]       # layers × heads: each head's retrieval score, the mean over the runs
    found["layers"]          # the model's own numbers of those layers
    found["recall"], found["answers"]   # each run's

A run is one length and one depth: a haystack of ``length`` tokens, the filler with the needle's
tokens inside it from token round(depth · (length − needle's tokens)), then a question asking for
the needle. The model answers greedily, writing at most the needle's tokens + EXTRA.

Copying, as the paper defines it: at the decoding step that writes token w, head h copies when the
key its row weights most (the argmax) lies inside the needle and is the token w. With g_h the set
of the needle's tokens (its positions) that h copies during a run and k the needle's tokens, h's
retrieval score on the run is |g_h ∩ k| / |k|: the share of the needle it copied, a token copied
at several steps counted once. (The code published with the paper adds 1/|k| at every copying
step instead: the same number while no token of the needle is copied twice.) Its retrieval score
is the mean over the runs, every length at every depth.

Recall: the share of the needle's tokens the answer reproduces in order, the longest common
subsequence of the answer's and the needle's tokens over the needle's tokens (ROUGE-L's recall, on
tokens). The paper's code averages only the runs whose answer recalls more than half the needle:
``found["each"][found["recall"] > 0.5].mean(axis=0)``.

One pass for the weights, not a decoding loop holding them. The model writes its answer with its
own cache and kernel, asked for no weights; then it reads the prompt and the answer once, through
the long reading (integrations.long.capture_long: its own kernel, each layer's q, k and v kept,
held to its own result), and every decoding step's row is computed block by block
(blockwise.Heads.rows, heads × n at a time, nothing n × n). The step that writes the answer's
token t reads from position P − 1 + t (P: the prompt's tokens), the token it was given. In a
causal model that row is the cached step's own: the query, keys and values of a position depend
only on the tokens up to it, the same tokens in both, so the cache holds exactly the keys the one
pass makes, and the row reads them under the same mask. The two differ only in rounding (another
kernel, sums in another order, float32 here where the model may compute in bfloat16), which can
move an argmax only between keys whose weights tie within it.
"""

from __future__ import annotations

import numbers
from typing import Callable, NamedTuple

import numpy as np

from .long import MAX_CELLS, LongAttention

__all__ = ["EXTRA", "NEEDLE", "PROMPT", "Haystack", "filler_text", "haystack", "recall", "retrieval_scores"]

NEEDLE = "The best thing to do in San Francisco is eat a sandwich and sit in Dolores Park on a sunny day."
PROMPT = (
    "\n\nQuestion: one sentence in the text above does not belong to it. Repeat that sentence word for word.\nAnswer:"
)
EXTRA = 5  # tokens the model may write past the needle's length
SEED = 0  # the built-in filler's
LENGTHS = (1000, 2000, 4000)
DEPTHS = (0.0, 0.25, 0.5, 0.75, 1.0)
# the built-in filler's words: ordinary ones, drawn at random into sentences (none of NEEDLE's own: a sandwich, a park)
WORDS = tuple(
    """the a of and to in on at by with from for as it was is were had has this that there they we you he she
    people town river road hill field house window door garden morning evening winter summer year day week
    letter book paper table chair wall bridge boat train station market street village farm tree stone water
    rain wind light sound voice story question answer name friend family teacher doctor child neighbour
    walked looked found kept brought carried opened closed wrote read talked waited turned followed built
    small large old new quiet busy long short early late warm cold bright dark simple careful slow quick
    often never always again later sometimes slowly carefully almost still only nearly already soon""".split()
)


class Haystack(NamedTuple):
    """One run's prompt: the ids a text of the tokenizer begins with (its BOS), the haystack (``length``
    tokens: the filler with the needle inside), then the question; the needle is ids[span[0]:span[1]]."""

    ids: list[int]
    span: tuple[int, int]


def filler_text(words: int, seed: int = SEED) -> str:
    """``words`` ordinary words in sentences of 6 to 14, each begun with a capital and ended by a full
    stop, now and then a comma: drawn at random from WORDS, the same for the same seed."""
    rng = np.random.default_rng(seed)
    drawn = rng.choice(WORDS, words)
    out, i = [], 0
    while i < words:
        sentence = list(drawn[i : i + int(rng.integers(6, 15))])
        i += len(sentence)
        sentence[0] = sentence[0].capitalize()
        if len(sentence) > 6 and rng.random() < 0.3:
            sentence[len(sentence) // 2] += ","
        out.append(" ".join(sentence) + ".")
    return " ".join(out)


def _ids(tokenizer, text: str) -> list[int]:
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])


def _texts(filler) -> list[str] | None:
    if filler is None or isinstance(filler, str):
        return None if filler is None else [filler]
    if not isinstance(filler, (list, tuple)):
        raise ValueError(f"filler must be a list of texts, a text, or None for the built-in filler; got {filler!r}")
    if not filler:
        raise ValueError("filler must hold at least one text (or be None for the built-in filler)")
    bad = [t for t in filler if not isinstance(t, str)]
    if bad:
        raise ValueError(
            f"filler must be texts (strings), repeated and cut to each length; got {type(bad[0]).__name__}"
        )
    return list(filler)


def _filler_ids(tokenizer, filler, count: int) -> list[int]:
    """At least ``count`` tokens of filler: the texts joined by spaces, repeated as needed (or the built-in's)."""
    texts = _texts(filler)
    if texts is None:
        return _ids(tokenizer, filler_text(count + 16))  # (a word is a token at least)
    once = _ids(tokenizer, " ".join(texts))
    if not once or not any(t.strip() for t in texts):
        raise ValueError(f"filler has no words: give texts with words in them, got {texts[:3]!r}")
    return once if len(once) >= count else _ids(tokenizer, " ".join(texts * (count // len(once) + 2)))


def _needle_ids(tokenizer, needle) -> list[int]:
    needle = NEEDLE if needle is None else needle
    if not isinstance(needle, str):
        raise ValueError(f"needle must be a text (a sentence to hide and ask for), or None for NEEDLE; got {needle!r}")
    pin = _ids(tokenizer, needle)
    if not pin:
        raise ValueError(f"needle gives no tokens ({needle!r}): give a sentence")
    return pin


def _question_ids(tokenizer, prompt) -> list[int]:
    if prompt is not None and not isinstance(prompt, str):
        raise ValueError(
            f"prompt must be a text (placed after the haystack), or None for the default question; got "
            f"{type(prompt).__name__}"
        )
    return _ids(tokenizer, PROMPT if prompt is None else prompt)


def _lengths(lengths, pin: int) -> list[int]:
    lengths = list(np.atleast_1d(lengths).tolist()) if not isinstance(lengths, (list, tuple)) else list(lengths)
    if not lengths:
        raise ValueError("lengths must hold at least one length (the haystack's tokens, needle included)")
    for n in lengths:
        if isinstance(n, bool) or not isinstance(n, numbers.Integral) or n < 1:
            raise ValueError(f"lengths must be whole numbers of tokens (the haystack's, needle included); got {n!r}")
        if n <= pin:
            raise ValueError(
                f"the needle is {pin} tokens long and a haystack holds it and some filler: ask lengths of {pin + 1} "
                f"tokens or more, or a shorter needle; got a length of {n}"
            )
    return [int(n) for n in lengths]


def _depths(depths) -> list[float]:
    depths = list(np.atleast_1d(depths).tolist()) if not isinstance(depths, (list, tuple)) else list(depths)
    if not depths:
        raise ValueError("depths must hold at least one depth (a fraction from 0 to 1)")
    for d in depths:
        if isinstance(d, bool) or not isinstance(d, numbers.Real) or not 0 <= float(d) <= 1:  # (NaN fails this too)
            raise ValueError(
                f"depths must be fractions from 0 to 1 (0: the needle first in the haystack, 1: last); got {d!r}"
            )
    return [float(d) for d in depths]


def _stack(prefix, pin, fill, question, length: int, depth: float) -> Haystack:
    at = round(depth * (length - len(pin)))
    body = fill[:at] + pin + fill[at : length - len(pin)]
    start = len(prefix) + at
    return Haystack([*prefix, *body, *question], (start, start + len(pin)))


def _prefix(tokenizer) -> list[int]:
    from .integrations.common import specials

    return specials(tokenizer)[0]


def haystack(tokenizer, length: int, depth: float, *, needle=None, filler=None, prompt=None) -> Haystack:
    """One run's prompt (see Haystack): ``needle`` (default NEEDLE) at ``depth`` in ``length`` tokens of
    ``filler`` (texts joined by spaces and repeated, or the built-in filler for None), then ``prompt``
    (default PROMPT). Tokens are joined as ids, so the needle's are exactly its own."""
    pin = _needle_ids(tokenizer, needle)
    (length,), (depth,) = _lengths([length], len(pin)), _depths([depth])
    question = _question_ids(tokenizer, prompt)
    fill = _filler_ids(tokenizer, filler, length - len(pin))
    return _stack(_prefix(tokenizer), pin, fill, question, length, depth)


def recall(answer, pin) -> float:
    """The share of ``pin``'s tokens that ``answer`` reproduces in order: their longest common
    subsequence's length over len(pin)."""
    row = [0] * (len(pin) + 1)
    for x in answer:
        before = row[:]
        for j, y in enumerate(pin):
            row[j + 1] = before[j] + 1 if x == y else max(row[j], before[j + 1])
    return row[-1] / len(pin)


def _writer(model):
    """Refuses a model that does not write one token at a time from the tokens before it."""
    head = getattr(model, "get_output_embeddings", None)
    if not callable(head) or head() is None:
        raise ValueError(
            "retrieval_scores needs a model with a language-model head, such as LlamaForCausalLM "
            f"(AutoModelForCausalLM): the model writes the answer; got {type(model).__name__}"
        )
    if not getattr(model, "can_generate", lambda: False)() or getattr(model.config, "is_encoder_decoder", False):
        raise NotImplementedError(
            f"retrieval_scores needs a decoder-only model that writes one token at a time; got {type(model).__name__}"
        )


def _answer(model, ids: list[int], steps: int) -> list[int]:
    """The model's greedy answer after ``ids``: at most ``steps`` tokens, each its most likely next one
    (model.generate: one beam, no sampling, no repetition penalty), ended by its end-of-text token."""
    import torch

    from .integrations.common import _evaluating

    config = getattr(model, "generation_config", None) or model.config
    eos = getattr(config, "eos_token_id", None)
    pad = getattr(config, "pad_token_id", None)
    pad = pad if pad is not None else eos[0] if isinstance(eos, (list, tuple)) else eos
    x = torch.tensor([ids], device=next(model.parameters()).device)
    with _evaluating(model), torch.no_grad():  # (dropout off)
        out = model.generate(
            x,
            attention_mask=torch.ones_like(x),
            max_new_tokens=steps,
            do_sample=False,
            num_beams=1,
            repetition_penalty=1.0,
            no_repeat_ngram_size=0,
            pad_token_id=pad,
        )
    return out[0, len(ids) :].tolist()


def _copied(long: LongAttention, tokens: np.ndarray, prompt: int, span: tuple[int, int]) -> list[np.ndarray]:
    """Each layer's heads' retrieval scores on one run (``tokens``: the prompt's ``prompt`` tokens and the
    answer's): the share of the needle's positions each head copied at some decoding step."""
    n, (start, end) = len(tokens), span
    steps = np.arange(prompt - 1, n - 1)  # the step writing tokens[p + 1] reads from position p
    out = []
    for layer in long.layers:
        heads = long.heads(layer).heads
        copied = np.zeros((heads, end - start), dtype=bool)
        chunk = max(1, MAX_CELLS // (heads * n))
        for a in range(0, len(steps), chunk):
            at = steps[a : a + chunk]
            top = long.rows(layer, at).weights.argmax(axis=-1)  # heads × steps: the key weighted most
            hit = (top >= start) & (top < end) & (tokens[top] == tokens[at + 1][None, :])
            h, s = np.nonzero(hit)
            copied[h, top[h, s] - start] = True
        out.append(copied.mean(axis=1))
    return out


def _read(model, ids: list[int]) -> LongAttention:
    """The model's one pass over ``ids`` through the long reading, every layer causal or refused."""
    import torch

    from .integrations.common import _evaluating
    from .integrations.hf import _base_model
    from .integrations.long import capture_long

    base = _base_model(model)
    x = torch.tensor([ids], device=next(base.parameters()).device)
    with _evaluating(base), torch.no_grad():
        layers = capture_long(base, input_ids=x)
    if not all(x.causal for x in layers.values()):
        raise NotImplementedError(f"{type(model).__name__} reads tokens after its own: it writes no answer to score")
    return LongAttention([str(i) for i in ids], layers)


def retrieval_scores(
    model,
    tokenizer,
    *,
    needle: str | None = None,
    filler: str | list[str] | None = None,
    lengths=LENGTHS,
    depths=DEPTHS,
    prompt: str | None = None,
    progress: Callable[[float], None] | None = None,
) -> dict:
    """Every head's retrieval score (see the module's docstring) over the runs: each of ``lengths``
    (the haystack's tokens, needle included) at each of ``depths`` (fractions: 0 puts the needle
    first, 1 last). ``needle``: the sentence hidden (default NEEDLE); ``filler``: your texts (a list,
    joined by spaces, repeated and cut to each length) or None for the built-in filler; ``prompt``:
    the text after the haystack asking for the needle (default PROMPT; a base model reads it as it
    is, an instruction-tuned one may want its chat template's words around it); ``progress``: told
    the fraction of runs done after each.

    Returns {"retrieval": layers × heads (the mean over runs), "layers": the model's numbers of those
    layers (a hybrid's attention layers keep theirs), "each": runs × layers × heads (each run's
    scores), "recall": each run's recall, "lengths", "depths": each run's, "answers": each run's
    answer as text, "written": its token ids, "spans": where the needle is in each run's prompt
    (start, end), "needle": the needle's tokens}. Runs go length by length, each at every depth.
    A layer with fewer heads than others has NaN for the heads it lacks."""
    from .integrations.common import _tokens_of
    from .integrations.configs import _positions, _vocabulary
    from .integrations.hf import _base_model, _display_name

    pin = _needle_ids(tokenizer, needle)
    lengths, depths = _lengths(lengths, len(pin)), _depths(depths)
    question, prefix = _question_ids(tokenizer, prompt), _prefix(tokenizer)
    _texts(filler)
    _writer(model)
    config = _base_model(model).config
    name, steps = _display_name(config, model), len(pin) + EXTRA
    (limit, source), (size, vocabulary) = _positions(config, getattr(config, "model_type", None)), _vocabulary(config)
    longest = len(prefix) + max(lengths) + len(question) + steps
    if longest > limit:
        raise ValueError(
            f"a haystack of {max(lengths)} tokens with its question and answer is {longest} tokens, but {name} reads "
            f"at most {limit} positions ({source}): ask shorter lengths"
        )
    fill = _filler_ids(tokenizer, filler, max(lengths) - len(pin))
    if max([*pin, *question, *fill[: max(lengths)]]) >= size:
        raise ValueError(f"the tokenizer's ids pass {name}'s vocabulary of {size} ({vocabulary}): use its own")
    runs = [(n, d) for n in lengths for d in depths]
    each, recalls, answers, written, spans, layers = [], [], [], [], [], None
    for r, (n, d) in enumerate(runs):
        stack = _stack(prefix, pin, fill, question, n, d)
        answer = _answer(model, stack.ids, steps)
        long = _read(model, stack.ids + answer)
        scores = _copied(long, np.array(stack.ids + answer), len(stack.ids), stack.span)
        layers = long.layers
        del long  # (its q, k and v: the next run's room)
        each.append(scores)
        recalls.append(recall(answer, pin))
        answers.append(tokenizer.decode(answer, skip_special_tokens=True))
        written.append(answer)
        spans.append(stack.span)
        if progress is not None:
            progress((r + 1) / len(runs))
    width = max(len(s) for run in each for s in run)
    table = np.full((len(runs), len(each[0]), width), np.nan)
    for r, run in enumerate(each):
        for x, s in enumerate(run):
            table[r, x, : len(s)] = s
    return {
        "retrieval": table.mean(axis=0),
        "layers": layers,
        "each": table,
        "recall": np.array(recalls),
        "lengths": [n for n, _ in runs],
        "depths": [d for _, d in runs],
        "answers": answers,
        "written": written,
        "spans": spans,
        "needle": _tokens_of(tokenizer, pin),
    }
