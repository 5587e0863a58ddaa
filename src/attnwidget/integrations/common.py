"""What both integrations share: the result they return, the check that a model can read the
tokens, and readable labels for tokenizer pieces. No torch here."""

from __future__ import annotations

import contextlib
import re
from dataclasses import dataclass, field
from typing import Callable

import numpy as np


@dataclass
class ModelAttention:
    """Everything the widget needs to redraw one model's attention on one text."""

    tokens: list[str]  # readable token pieces, one per query position (row)
    layers: list[tuple[np.ndarray, ...]]  # per layer (q, k, v), each float64 (heads, n, d_head)
    causal: bool  # True for decoders: position i reads only j <= i
    scale: float | None  # None means 1/sqrt(d_head); a float only where the model uses another
    architecture: str  # e.g. "bert", "gpt2", "llama"
    model_name: str  # for display
    bias: np.ndarray | None = None  # heads × n × n added to the scores (BLOOM's ALiBi), or None
    # column (key) labels where they are not the rows' tokens: the source tokens of
    # cross-attention, whose k and v are then (heads, len(key_tokens), d_head); None for self-attention
    key_tokens: list[str] | None = None
    # how many of the tokens were the text given when the rest were the model's own (generate=); None: all
    prompt_length: int | None = None
    softcap: float | None = None  # scores capped to softcap·tanh(s/softcap) (Gemma 2), or None
    # per layer, the cells its rows may read besides the causal rule (queries × keys booleans: a
    # sliding window, local attention), or None for every cell; None: no layer has a mask
    masks: list[np.ndarray | None] | None = None
    device: str | None = None  # the torch device the model ran on (its overview is computed there), or None
    # per layer, heads × n × n_keys added to its scores (attention weights alone: their logarithms); None: bias above
    biases: list[np.ndarray] | None = None
    weights_only: str = (
        ""  # "weights" or "weights and values": no q and k, only what they gave (integrations/weights.py)
    )
    # per layer, its output projection (interface.Projection: what each head's values are mapped
    # by, a reference to the model's own weights) or a sentence saying why it could not be read;
    # None: the values are what the heads add (your own arrays, attention weights alone)
    projections: list | None = None
    rerun: object | None = (
        None  # what running the model again needs (ablation.Rerun: the model, by reference, and its ids), or None
    )
    reader: Reader | None = None  # how to read the model on token ids of one's own (the induction score's), or None
    # where position enters its attention (configs.position_of): its scheme and the page's words; ("", ""): unknown
    position: tuple[str, str] = ("", "")
    # a vision model's image as it saw it, for the page to draw under its patches (vision.py); None for a text
    image: dict | None = None
    # the model's own number of each layer in layers, where they are not 0, 1, 2, ... (a hybrid's attention layers)
    layer_numbers: list[int] | None = None
    # what each of the model's layers is, by number: "" for one in layers, else its kind in words; None: all are there
    layer_kinds: list[str] | None = None
    # the numbers of the layers whose mask is a sparse attention's choice of keys (DeepSeek V3.2's indexer), or None
    sparse: list[int] | None = None
    terms: object | None = None  # DeBERTa's scores split into its terms (byhand.Terms: c2c, c2p, p2c), or None
    # per layer, each head's learnt attention sink (a logit: one more column of every row's softmax, dropped
    # after it), or None for a layer without; None: no layer has one
    sinks: list[np.ndarray | None] | None = None
    # differential attention's λ, per layer in layers (DiffLlama: each layer's v holds both halves of the values, and
    # head p's map − λ · head p + heads/2's is what it mixes them with); None for every other model
    lambdas: list[float] | None = None
    fetched: int | None = None  # the bytes a remote trace (from_nnsight's remote=) brought back, or None
    # a remote read's: what reads its layers not read yet (remote.Remote; they are stand-ins until then), and the
    # overview its server computed (thumbs, top, summaries: per layer); None for every other read
    remote: object | None = None
    served: dict | None = None
    ids: list | None = None  # the token ids read, where nothing else holds them (a remote read has no rerun)


@dataclass
class Reader:
    """How a model's widget reads its model again on token ids of its own choosing: the induction
    score's repeated random tokens. ``read(ids)`` is a ModelAttention of those ids (a reference to
    the model, not a copy); the ids a text begins and ends with (``ends()``: a BOS token or [CLS]
    before, [SEP] after) are added by the caller."""

    read: Callable[[list], ModelAttention]
    tokenizer: object
    size: int  # the model's vocabulary: ids past it are the tokenizer's only
    positions: float  # how many tokens the model reads at most
    fixed: tuple | None = None  # (prefix, suffix) where the model says (TransformerLens); else the tokenizer's
    kept: dict = field(default_factory=dict)  # what was read on the repeated tokens, once per (copy, count, seed)
    model: object = None  # the model itself where it can write (transformers): the retrieval score's needle

    def ends(self) -> tuple[list, list]:
        """The ids a text begins and ends with (see ``specials``)."""
        return self.fixed if self.fixed is not None else specials(self.tokenizer)

    def ordinary(self) -> np.ndarray:
        """The ids of the tokenizer's ordinary vocabulary: neither special nor added tokens."""
        size = min(self.size, len(self.tokenizer)) if hasattr(self.tokenizer, "__len__") else self.size
        special = set(getattr(self.tokenizer, "all_special_ids", ()) or ())
        special |= set(getattr(self.tokenizer, "added_tokens_decoder", {}) or {})
        return np.array([i for i in range(size) if i not in special], dtype=np.int64)


class LazyText:
    """One of a model's several texts, known by its tokens (the tokenizer's, checked against the
    model) and read, the model run on it, when anything else of it is first needed; ``drop()``
    lets go of what was read (read again when needed), so that a widget of 100 texts holds a
    few of them at a time. Everything of a ModelAttention reads (and writes) through."""

    _OWN = ("_read", "_found", "tokens", "ids", "reader", "prompt_length")

    def __init__(self, read: Callable[[], ModelAttention], tokens: list, ids: list, reader: Reader | None = None):
        self._read = read
        self._found: ModelAttention | None = None
        self.tokens, self.ids, self.reader, self.prompt_length = tokens, ids, reader, None

    def found(self) -> ModelAttention:
        if self._found is None:
            self._found = self._read()
        return self._found

    def drop(self) -> None:
        self._found = None

    def __getattr__(self, name):  # (only what is not its own: a ModelAttention's, read)
        if name.startswith("_"):  # (copy, pickle and the like probe these: they never run the model)
            raise AttributeError(name)
        return getattr(self.found(), name)

    def __repr__(self) -> str:
        return f"<a text of {len(self.tokens)} tokens, {'read' if self._found is not None else 'not read yet'}>"

    def __setattr__(self, name, value):
        if name in LazyText._OWN:
            object.__setattr__(self, name, value)
        else:
            setattr(self.found(), name, value)


def specials(tokenizer, bos: bool = True) -> tuple[list, list]:
    """The ids the tokenizer puts before and after a text's own ([CLS] … [SEP], <s> …), with the
    tokenizer's BOS token before when it has one but adds nothing itself (GPT-2's <|endoftext|>,
    as TransformerLens prepends it); ``bos`` False: only what the tokenizer adds. A tokenizer that
    cannot leave its specials out adds none here."""
    try:
        whole = list(tokenizer("a")["input_ids"])
        plain = list(tokenizer("a", add_special_tokens=False)["input_ids"])
    except TypeError:
        whole = plain = []
    at = next((i for i in range(len(whole) - len(plain) + 1) if whole[i : i + len(plain)] == plain), None)
    prefix, suffix = ([], []) if at is None else (whole[:at], whole[at + len(plain) :])  # (not found: none known)
    start = getattr(tokenizer, "bos_token_id", None)
    if bos and not prefix and start is not None:
        prefix = [start]
    return prefix, suffix


def _check_readable(text: str, ids, model_name: str, positions, vocab, generate: int = 0) -> None:
    """Refuse, before the model runs, tokens it cannot read: torch would fail deep inside
    with an IndexError or a size mismatch, or (rotary models) run past the trained context.
    ``positions`` and ``vocab`` are (limit, the config attribute it comes from); ``generate``
    tokens are to follow ``ids``."""
    size, source = vocab
    bad = max(ids, default=0)
    if bad >= size:
        raise ValueError(
            f"token id {bad} is outside the model's vocabulary of {size} ({source}): "
            f"the tokenizer does not match the model; use the tokenizer made for {model_name}"
        )
    limit, source = positions
    if len(ids) + generate > limit:
        shown = text if len(text) <= 40 else text[:40] + "…"
        more = f" and generate={generate} adds as many" if generate else ""
        raise ValueError(
            f"{shown!r} is {len(ids)} tokens long{more} but {model_name} reads at most {limit} positions ({source}); "
            f"shorten the text{' or generate fewer tokens' if generate else ''}"
        )


# --- readable tokens -------------------------------------------------------------


def _byte_decoder() -> dict[str, int]:
    """Byte-level BPE (GPT-2 and its descendants) writes each byte as a printable
    character: printable Latin-1 bytes stand for themselves, the rest are shifted
    to U+0100 upwards (so a space is "Ġ", a newline "Ċ"). This is the inverse map."""
    keep = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    chars = {b: chr(b) for b in keep}
    shifted = 0
    for b in range(256):
        if b not in chars:
            chars[b] = chr(256 + shifted)
            shifted += 1
    return {c: b for b, c in chars.items()}


_BYTE_DECODER = _byte_decoder()
_SP_BYTE = re.compile(r"<0x([0-9A-Fa-f]{2})>")  # sentencepiece byte fallback, e.g. <0x0A>
_VISIBLE = str.maketrans({"\n": "⏎", "\t": "⇥", "\r": "␍"})
# what special tokens usually look like, for callers that do not pass the tokenizer's list
_LOOKS_SPECIAL = re.compile(r"\[[A-Z_]+\]|<\|[^|]+\|>|</?s>|<(unk|pad|mask|bos|eos)>")
SCHEMES = ("wordpiece", "bytelevel", "sentencepiece", "text")


def _guess_scheme(pieces) -> str:
    if any(c in p for p in pieces for c in "ĠĊ"):
        return "bytelevel"
    if any("▁" in p for p in pieces):
        return "sentencepiece"
    if any(p.startswith(" ") for p in pieces):
        return "text"
    return "wordpiece"  # no word-start markers: each piece is a word unless it says "##"


def _to_text(piece: str, scheme: str) -> str:
    """The piece as the text it stands for (markers for a leading space become a space)."""
    if scheme == "bytelevel":
        if all(c in _BYTE_DECODER for c in piece):
            return bytes(_BYTE_DECODER[c] for c in piece).decode("utf-8", errors="replace")
        return piece
    if scheme == "sentencepiece":
        m = _SP_BYTE.fullmatch(piece)
        if m and int(m.group(1), 16) < 0x80:
            return chr(int(m.group(1), 16))
        return piece.replace("▁", " ")
    return piece


def readable_tokens(pieces, *, scheme: str | None = None, special=None) -> list[str]:
    """Tokenizer pieces as short, readable labels, one per piece.

    - ``special`` pieces are kept as they are; when None, pieces that look like
      special tokens (``[CLS]``, ``<|endoftext|>``, ``<s>``, ``<unk>``, ...) are;
    - the word-start markers of byte-level BPE ("Ġ") and sentencepiece ("▁"), or a
      leading space in already decoded text, are dropped;
    - a piece that continues a word is shown with a leading "·": word-piece "##s"
      becomes "·s"; for the other schemes, a piece with no word-start marker that
      follows an ordinary piece not ending in whitespace (whitespace itself never
      continues a word);
    - a newline shows as "⏎", a tab as "⇥", a piece that is only spaces as "␣"s;
      no label is ever empty.

    ``scheme`` is one of ``"wordpiece"``, ``"bytelevel"``, ``"sentencepiece"`` or
    ``"text"`` (decoded strings such as TransformerLens' ``to_str_tokens``); when
    None it is guessed from the markers the pieces carry.
    """
    pieces = [str(p) for p in pieces]
    scheme = scheme or _guess_scheme(pieces)
    if scheme not in SCHEMES:
        raise ValueError(f"scheme must be one of {SCHEMES} or None, got {scheme!r}")
    special = {p for p in pieces if _LOOKS_SPECIAL.fullmatch(p)} if special is None else set(special)
    out: list[str] = []
    prev_text = None  # text of the previous ordinary piece; None after a special one or at the start
    for p in pieces:
        if p in special:
            out.append(p)
            prev_text = None
            continue
        text = _to_text(p, scheme)
        if scheme == "wordpiece":
            cont = p.startswith("##") and len(p) > 2
            label = text[2:] if cont else text
        else:
            starts_word = text.startswith(" ")
            label = text[1:] if starts_word else text
            cont = not starts_word and prev_text is not None and not prev_text[-1:].isspace() and not text.isspace()
        prev_text = text
        if label == "" or label.strip(" ") == "":
            label = "␣" * max(len(label), 1)
        label = label.translate(_VISIBLE)
        out.append("·" + label if cont else label)
    return out


def _tokens_of(tokenizer, ids) -> list[str]:
    """Readable labels for token ids, using what the tokenizer says about its scheme."""
    pieces = tokenizer.convert_ids_to_tokens(ids)
    return readable_tokens(pieces, scheme=_scheme(tokenizer), special=getattr(tokenizer, "all_special_tokens", ()))


def _scheme(tokenizer) -> str | None:
    """How a Hugging Face tokenizer marks word boundaries; None lets readable_tokens guess."""
    backend = getattr(tokenizer, "backend_tokenizer", None)  # the Rust pipeline of "fast" tokenizers
    if backend is None:
        return None
    if type(backend.model).__name__ == "WordPiece":
        return "wordpiece"
    pipeline = f"{backend.pre_tokenizer} {backend.decoder}"
    if "ByteLevel" in pipeline:
        return "bytelevel"
    if "Metaspace" in pipeline or "▁" in pipeline:
        return "sentencepiece"
    return None


@contextlib.contextmanager
def _evaluating(base):
    """Dropout off, so the states are the model's real ones; each module's own mode back after."""
    modes = {m: m.training for m in base.modules()}
    base.eval()
    try:
        yield
    finally:
        for m, training in modes.items():
            m.training = training
