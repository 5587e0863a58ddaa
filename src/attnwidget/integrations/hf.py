"""Hugging Face transformers models, read where they compute attention.

Every model built on transformers' attention interface is read through it (interface.capture):
during one forward pass of the model's own, each layer's q, k and v after rotary, the mask the
model built (causal, sliding window, local attention), its scaling, soft cap and position bias
are caught as its attention function receives them. BLOOM, MPT, XGLM and DeBERTa compute attention
their own way; they are read by hand (byhand.py), each layer from what its attention module is handed.

Imported only by ``attnwidget.integrations.from_transformers``, after torch and
transformers are known to be importable.
"""

from __future__ import annotations

import inspect
import math
import numbers
import os
import pathlib
from typing import Literal, cast, overload

import numpy as np
import torch

from ..progress import progress
from . import byhand, layers
from .ablation import Rerun
from .common import LazyText, ModelAttention, Reader, _check_readable, _evaluating, _tokens_of
from .configs import _positions, _relative, _vocabulary, position_of
from .interface import capture

SUPPORTED = (
    "every model whose attention goes through transformers' attention interface (BERT family, GPT-2, "
    "Llama, Mistral, Qwen, Gemma, Phi, GPT-NeoX, OPT, GPT-J, OLMo, StarCoder2, ModernBERT, T5, BART, ...), "
    "and BLOOM, MPT, XGLM and DeBERTa (v1, v2, v3) by hand"
)
# how models name cross-attention (NLLB-MoE: cross_attention)
CROSS = ("encoder_attn", "EncDecAttention", "crossattention", "cross_attn", "cross_attention")


@overload
def extract(
    model,
    tokenizer,
    text: str,
    target: str | None = ...,
    generate: int = ...,
    run=...,
    ids=...,
    *,
    check_only: Literal[True],
) -> tuple[list[int], list[str]]: ...
@overload
def extract(
    model,
    tokenizer,
    text: str,
    target: str | None = ...,
    generate: int = ...,
    run=...,
    ids=...,
    check_only: Literal[False] = ...,
) -> ModelAttention | dict[str, ModelAttention]: ...
def extract(
    model, tokenizer, text: str, target: str | None = None, generate: int = 0, run=None, ids=None, check_only=False
) -> ModelAttention | dict[str, ModelAttention] | tuple[list[int], list[str]]:
    """(run: run(inputs) makes the forward pass on the tokenizer's inputs, instead of the model: nnsight's trace;
    ids: read these token ids, not the text's; check_only: the text's (ids, tokens), checked, without running.)"""
    if not isinstance(text, str):  # (a tokenizer takes a list as a batch: only its first text would be read)
        raise TypeError(
            f"text must be a string; got {type(text).__name__} (a list of texts is read one text at a time by "
            "from_transformers)"
        )
    if isinstance(generate, bool) or not isinstance(generate, numbers.Integral):
        raise TypeError(f"generate must be a whole number of tokens to write, got {generate!r}")
    if generate < 0:
        raise ValueError(f"generate must be 0 or more tokens to write, got {generate}")
    generate = int(generate)
    base = _base_model(model)
    config = base.config
    kind = getattr(config, "model_type", None)
    name = _display_name(config, model)
    if generate:
        _check_writer(model, kind)
    if target is not None:
        return _extract_seq2seq(model, base, tokenizer, text, target)
    two = getattr(config, "is_encoder_decoder", False)
    if two and not _relative(config):
        raise ValueError(
            f'{type(model).__name__} ({kind}) is an encoder–decoder model: pass target="…", the text '
            "its decoder writes, to read its encoder, decoder and cross-attention"
        )

    if ids is None:
        enc = tokenizer(text, return_tensors="pt")
    else:  # ids of the caller's own (Reader): read as they are
        enc = {"input_ids": torch.tensor([list(ids)]), "attention_mask": torch.ones(1, len(ids), dtype=torch.long)}
        text = f"a sequence of {len(ids)} token ids"
    ids = enc["input_ids"]
    prompt = ids.shape[1]
    if prompt == 0:
        raise ValueError(f"{text!r} gives no tokens")
    _check_readable(text, ids[0].tolist(), name, _positions(config, kind), _vocabulary(config), generate)
    if check_only:
        return ids[0].tolist(), _tokens_of(tokenizer, ids[0].tolist())
    if generate:  # then read the whole text, the prompt and what the model wrote, by its ids
        ids = _greedy(model, ids, generate)
        enc = {"input_ids": ids, "attention_mask": torch.ones_like(ids)}

    body = base.get_encoder() if two else base  # T5 without a target: its encoder's self-attention
    found = read(base, body, enc, _tokens_of(tokenizer, ids[0].tolist()), name, run)
    if generate and not found.causal:
        raise NotImplementedError(_NOT_A_WRITER.format(name=type(model).__name__, kind=kind))
    found.prompt_length = prompt if generate else None
    found.rerun = Rerun(model, ids[0].tolist(), found.causal)  # head effects run it again (ablation.py)
    found.reader = reader(model, tokenizer, run)
    return found


def read(base, body, inputs: dict, tokens: list[str], name: str, run=None) -> ModelAttention:
    """One forward pass of ``body`` (the base model, or T5's encoder) on ``inputs``, each layer caught
    where it computes attention (byhand.BY_HAND's by hand): a text's (extract) or an image's (vision.extract)."""
    config = base.config
    kind = getattr(config, "model_type", None)
    device = next(base.parameters()).device
    accepted = inspect.signature(body.forward).parameters  # DistilBERT takes no token_type_ids
    inputs = {key: val.to(device) for key, val in inputs.items() if key in accepted}
    with _evaluating(base), torch.no_grad(), progress(f"reading {name}'s attention: layer", _count(config)) as step:
        if kind in byhand.BY_HAND:
            found = byhand.read(base, inputs, tokens, name, on_call=step)
        else:
            calls = capture(body, on_call=step, run=run and (lambda: run(inputs)), **inputs)
            found = _assemble(calls, tokens, name, kind)
            names = [c.name for c in calls]
            found.layer_numbers = layers.numbers(names)  # a hybrid's attention layers keep the model's numbers
            if found.layer_numbers is not None:
                found.layer_kinds = layers.kinds(body, names, found.layer_numbers)
            found.sparse = layers.sparse(body, names, found.layer_numbers or list(range(len(calls)))) or None
    found.position = position_of(config)
    found.device = str(device)
    return found


def reader(model, tokenizer, run=None) -> Reader:
    """How to read the model again on token ids of one's own (the induction score's)."""
    config = _base_model(model).config
    read = lambda ids: cast(ModelAttention, extract(model, tokenizer, "", run=run, ids=ids))
    positions = _positions(config, getattr(config, "model_type", None))[0]
    size = _vocabulary(config)[0]
    return Reader(read, tokenizer, int(size) if math.isfinite(size) else len(tokenizer), positions, model=model)


def lazy(model, tokenizer, text: str, run=None, shared: Reader | None = None) -> LazyText:
    """One of several texts, checked now (its tokens) and read when first needed."""
    ids, tokens = extract(model, tokenizer, text, check_only=True)
    return LazyText(lambda: cast(ModelAttention, extract(model, tokenizer, text, run=run)), tokens, ids, shared)


_NOT_A_WRITER = (
    "generate= needs a decoder-only model that writes one token at a time, each reading only the tokens before it "
    "(a causal language model: AutoModelForCausalLM, such as gpt2 or llama); got {name} (model_type {kind!r})"
)


def _assemble(calls, tokens, name: str, kind, key_tokens=None) -> ModelAttention:
    """One block's layers from the calls caught: the model's mask as the causal rule plus, per
    layer, the cells it closes besides and its heads' learnt sinks; its scale, soft cap and additive
    term, one per block."""
    n, m = calls[0].q.shape[1], calls[0].k.shape[1]
    d_head = calls[0].q.shape[-1]
    shapes = [(c.q.shape[0], c.q.shape[-1], c.v.shape[-1]) for c in calls]
    if len(set(shapes)) > 1:  # (Gemma 4's global layers have wider heads than its sliding ones)
        said = ", ".join(
            f"layer {c.layer}: {h} heads of width {d}" + (f", values {dv} wide" if dv != d else "")
            for c, (h, d, dv) in zip(calls, shapes)
        )
        raise NotImplementedError(
            f"{name} (model_type {kind!r}) has layers of different shapes ({said}): attnwidget holds every layer in "
            "one shape. Pass its own attention weights, one layer at a time, to AttentionWidget.from_attentions "
            '(the model loaded with attn_implementation="eager", run with output_attentions=True)'
        )
    odd = next(((i, c.k.shape[1]) for i, c in enumerate(calls) if c.k.shape[1] != (m if key_tokens else n)), None)
    if odd is not None:  # (DeepSeek-V4's compressed keys, after its tokens' own)
        raise NotImplementedError(
            f"{name} (model_type {kind!r}) reads {odd[1]} keys at layer {odd[0]} where its text has {n} tokens: keys "
            "of its own beside the tokens' (compressed or memory keys), which attnwidget has no tokens to label; it "
            "shows nothing rather than columns it cannot name"
        )
    for what, values in (
        ("scales its attention scores", [c.scaling for c in calls]),
        ("caps its attention scores", [c.softcap for c in calls]),
    ):
        if len(set(values)) > 1:
            hint = " (GPT-2's scale_attn_by_inverse_layer_idx)" if kind == "gpt2" and what.startswith("scales") else ""
            raise NotImplementedError(
                f"{name} {what} differently in each layer{hint}: {sorted(set(values), key=str)}; attnwidget takes one "
                "per model"
            )
    bias = calls[0].bias
    if any(not _equal(c.bias, bias) for c in calls[1:]):
        raise NotImplementedError(
            f"{name} adds a different term to its scores in each layer; attnwidget takes one bias per model"
        )
    # causal: every layer's mask closes every cell above the diagonal (and perhaps more)
    causal = key_tokens is None and n == m and all(c.open is not None and not np.triu(c.open, 1).any() for c in calls)
    ahead = np.triu(np.ones((n, m), dtype=bool), 1)
    masks: list[np.ndarray | None] = []
    seen: list[np.ndarray] = []
    for c in calls:
        mask = None if c.open is None else (c.open | ahead if causal else c.open)  # what the causal rule does not close
        if mask is not None and mask.all():
            mask = None
        same = next((s for s in seen if np.array_equal(s, mask)), None) if mask is not None else None
        if mask is not None and same is None:
            seen.append(mask)
        masks.append(same if same is not None else mask)  # layers with one mask share one array
    lambdas = [c.lam for c in calls]
    if len({lam is None for lam in lambdas}) > 1:
        raise NotImplementedError(
            f"{name} (model_type {kind!r}) has differential attention in some layers only: attnwidget holds every "
            "layer in one form"
        )
    scale = calls[0].scaling
    return ModelAttention(
        tokens=tokens,
        layers=[(c.q, c.k, c.v) for c in calls],
        causal=causal,
        scale=None if math.isclose(scale, d_head**-0.5, rel_tol=1e-9) else float(scale),
        architecture=kind,
        model_name=name,
        bias=None if bias is None else (bias if len(bias) > 1 else bias[0]),
        key_tokens=key_tokens,
        softcap=calls[0].softcap,
        masks=masks if any(mk is not None for mk in masks) else None,
        projections=[c.out for c in calls],
        sinks=[c.sinks for c in calls] if any(c.sinks is not None for c in calls) else None,
        lambdas=None if lambdas[0] is None else cast(list, lambdas),
    )


def _equal(a, b) -> bool:
    return (a is None and b is None) or (
        a is not None and b is not None and a.shape == b.shape and np.array_equal(a, b)
    )


def _check_writer(model, kind) -> None:
    """generate= writes with the model's own head: a decoder-only model that predicts the next token."""
    name = type(model).__name__
    head = getattr(model, "get_output_embeddings", None)
    if not callable(head) or head() is None:
        raise ValueError(
            "generate= needs a model with a language-model head, such as GPT2LMHeadModel or LlamaForCausalLM "
            f"(AutoModelForCausalLM); got {name}"
        )
    writes = getattr(model, "can_generate", lambda: False)()
    if not writes or getattr(model.config, "is_encoder_decoder", False):
        raise NotImplementedError(_NOT_A_WRITER.format(name=name, kind=kind))


def _greedy(model, ids, k: int):
    """``ids`` and then the model's own most likely next token, k times (greedy decoding: no
    sampling, beams or penalties), each read from the whole text so far. Stops early after an
    end-of-text token, as ``model.generate`` does."""
    config = getattr(model, "generation_config", None) or model.config
    eos = getattr(config, "eos_token_id", None)
    stop = set() if eos is None else {eos} if isinstance(eos, int) else set(eos)
    ids = ids.to(next(model.parameters()).device)
    with _evaluating(model), torch.no_grad():
        for _ in range(k):
            logits = model(input_ids=ids, attention_mask=torch.ones_like(ids), use_cache=False).logits
            ids = torch.cat([ids, logits[:, -1].argmax(dim=-1, keepdim=True)], dim=1)
            if ids[0, -1].item() in stop:
                break
    return ids.cpu()


def _extract_seq2seq(model, base, tokenizer, text: str, target: str) -> dict[str, ModelAttention]:
    """An encoder–decoder model's "encoder", "decoder" and "cross" attention, the decoder reading
    its start token then ``target``, caught in one forward pass of the model's own."""
    config = base.config
    kind = getattr(config, "model_type", None)
    name = _display_name(config, model)
    if getattr(base, "encoder", None) is not None and getattr(base, "decoder", None) is None:
        raise ValueError(
            f"{type(model).__name__} lacks an encoder or a decoder; target= needs the whole encoder–decoder "
            "model (e.g. T5ForConditionalGeneration, BartForConditionalGeneration)"
        )
    if not getattr(config, "is_encoder_decoder", False):
        raise ValueError(
            f"target= is for encoder–decoder models; {type(model).__name__} ({kind!r}) reads one text: call it "
            "without target="
        )

    start = getattr(config, "decoder_start_token_id", None)
    if start is None:  # recent releases keep it in the generation config
        start = getattr(getattr(model, "generation_config", None), "decoder_start_token_id", None)
    if start is None:
        raise ValueError(f"{name} does not say which token its decoder starts with: set config.decoder_start_token_id")
    src = tokenizer(text)["input_ids"]
    # text_target= switches tokenizers with their own target conventions (Marian, mBART) to them
    takes_target = "text_target" in inspect.signature(tokenizer.__call__).parameters
    tgt = list(tokenizer(text_target=target)["input_ids"] if takes_target else tokenizer(target)["input_ids"])
    for t, ids in ((text, src), (target, tgt)):
        if not ids:
            raise ValueError(f"{t!r} gives no tokens")
    dec = [start, *tgt]
    positions = _positions(config, kind)
    _check_readable(text, src, name, positions, _vocabulary(config))
    # Marian can give its decoder a vocabulary of its own
    dec_vocab = getattr(config, "decoder_vocab_size", None)
    _check_readable(
        target,
        dec,
        name,
        positions,
        (dec_vocab, "config.decoder_vocab_size") if dec_vocab else _vocabulary(config),
    )

    device = next(base.parameters()).device
    ids = torch.tensor([src], device=device)
    with _evaluating(base), torch.no_grad(), progress(f"reading {name}'s attention: call", 3 * _count(config)) as step:
        # no cache: every layer runs once, on the whole sequence
        calls = capture(
            base,
            on_call=step,
            input_ids=ids,
            attention_mask=torch.ones_like(ids),
            decoder_input_ids=torch.tensor([dec], device=device),
            use_cache=False,
        )
    blocks: dict[str, list] = {"encoder": [], "decoder": [], "cross": []}
    for c in calls:
        where = c.name.split(".", 1)[0]
        blocks["cross" if where == "decoder" and any(part in c.name for part in CROSS) else where].append(c)
    if any(c.k.shape[1] != c.q.shape[1] for c in blocks["decoder"]):
        raise NotImplementedError(
            f"attnwidget cannot read {type(model).__name__} (model_type {kind!r}): its decoder reads its own tokens "
            "and the source's in one softmax (self- and cross-attention merged), where attnwidget shows a decoder's "
            "self-attention and its cross-attention as two blocks"
        )
    for part, caught in blocks.items():
        if not caught:  # (BigBird-Pegasus's block-sparse encoder, Pegasus-X's local and global one)
            raise NotImplementedError(
                f"attnwidget cannot read {type(model).__name__} (model_type {kind!r}): its {part} attention is "
                "computed without transformers' attention interface, where attnwidget reads it, so its encoder, "
                "decoder and cross-attention cannot be shown together"
            )
    src_tokens, dec_tokens = _tokens_of(tokenizer, src), _tokens_of(tokenizer, dec)
    found = {
        "encoder": _assemble(blocks["encoder"], src_tokens, name, kind),
        "decoder": _assemble(blocks["decoder"], dec_tokens, name, kind),
        "cross": _assemble(blocks["cross"], dec_tokens, name, kind, key_tokens=src_tokens),
    }
    for block in found.values():
        block.position = position_of(config)
    return found


def _display_name(config, model) -> str:
    name = getattr(config, "_name_or_path", "") or type(model).__name__
    if os.path.isdir(name):  # loaded from a folder: its last two parts read like "org/name"
        name = "/".join(pathlib.Path(name).resolve().parts[-2:])
    return name


def _base_model(model):
    """The transformer body: unwraps task heads and sentence-transformers wrappers."""
    from transformers import PreTrainedModel

    if not isinstance(model, PreTrainedModel):
        first = model[0] if hasattr(model, "__getitem__") and hasattr(model, "_first_module") else None
        inner = getattr(first, "auto_model", None)  # sentence_transformers.SentenceTransformer
        if not isinstance(inner, PreTrainedModel):
            raise NotImplementedError(
                f"attnwidget cannot read attention from {type(model).__name__}: expected a Hugging Face "
                f"PreTrainedModel; supported: {SUPPORTED}"
            )
        model = inner
    # a head's body, which reads what the model reads (DINOv3's base model holds under its base_model_prefix an
    # encoder of hidden states: the base model itself, then)
    body = model.base_model
    main = getattr(model, "main_input_name", "input_ids")
    return body if main in inspect.signature(body.forward).parameters else model


def _count(config) -> int:
    """How many attention layers the model says it has (for a progress report)."""
    return int(getattr(config, "num_hidden_layers", None) or getattr(config, "num_layers", None) or 0) or 1
