"""Queries, keys and values read out of real transformer models.

``from_transformers`` (Hugging Face) and ``from_transformer_lens`` (TransformerLens)
run a model once on a text (a vision transformer: on an image) and return every layer's
per-head Q, K and V, computed with the model's own projections, so that
``attnwidget.attention(q[h], k[h], v[h], causal=ma.causal, scale=ma.scale).weights`` is
that head's own attention pattern.

torch, transformers and transformer_lens are optional: they are imported only when
one of these functions is called.
"""

from __future__ import annotations

import importlib
from typing import cast

from .common import ModelAttention, readable_tokens

__all__ = [
    "ModelAttention",
    "from_nnsight",
    "from_transformer_lens",
    "from_transformers",
    "implicit_attention",
    "readable_tokens",
]


def from_transformers(
    model, tokenizer, text: str | list[str], *, target: str | None = None, generate: int = 0, lazy: bool = False
) -> ModelAttention | dict[str, ModelAttention] | list[ModelAttention]:
    """Q, K, V of every layer and head of a Hugging Face model on ``text``; for a list of texts,
    a list with each text's, each read alone (its own forward pass, and with ``generate`` its
    own writing), so each is what the model computes on that text by itself.

    Accepts a base model (``BertModel``, ``GPT2Model``, ``LlamaModel``, ...), one with a
    head (``GPT2LMHeadModel``, ``LlamaForCausalLM``, ...) or a sentence-transformers
    model wrapping one. Supported: every model whose attention goes through transformers'
    attention interface, read there during one forward pass of the model's own (q, k and v
    after rotary, grouped-query heads repeated; the model's mask as ``causal`` and per-layer
    ``masks``; its scaling, ``softcap``, T5's position bias as ``bias`` and gpt-oss's learnt sinks as
    ``sinks``, one logit per head and layer), whatever attention kernel it was loaded with; and
    BLOOM, MPT, XGLM and DeBERTa, which compute attention their own way, read by hand
    (integrations/byhand.py): BLOOM's and MPT's ALiBi as ``bias``, DeBERTa's content-to-position
    and position-to-content terms as each layer's ``biases`` (its ``terms`` split them). Other
    models raise NotImplementedError naming them.

    Encoder–decoder models (bart, mbart, marian and t5; ``...ForConditionalGeneration``
    or the base ``...Model``) read ``text`` as the source and ``target`` as the text the
    decoder writes. The decoder reads ``config.decoder_start_token_id`` followed by the
    tokenizer's ids of ``target`` (``tokenizer(text_target=target)``), as in training with
    teacher forcing: each decoder row is the step that predicts the next target token.
    The result is then a dict of three ``ModelAttention``:

    - ``"encoder"``: the source's self-attention (rows and columns the source tokens);
    - ``"decoder"``: the target's self-attention, causal (rows and columns the start
      token and the target tokens);
    - ``"cross"``: the decoder's queries (``tokens``, q of shape heads × n_decoder × d,
      n_decoder counting the start token) reading the encoder's output (``key_tokens``,
      k and v heads × n_source × d).

    T5's encoder and decoder carry their relative position bias in ``bias``; its
    cross-attention has none. Without ``target``, T5 gives its encoder alone, and
    BART-family models raise ValueError.

    ``generate=k`` lets a causal language model (``AutoModelForCausalLM``:
    ``GPT2LMHeadModel``, ``LlamaForCausalLM``, ...) write k tokens
    after ``text``, greedily (each its most likely next token; fewer if it writes its
    end-of-text token, as ``model.generate`` stops there), then reads Q, K and V over the
    prompt and those tokens, by their ids. ``tokens`` are then the prompt's followed by the
    written ones and ``prompt_length`` says how many were the prompt's. The model being
    causal, the attention of the first s tokens alone is the top-left s × s block of the
    whole text's, so each step of the writing is there. Other models raise ValueError (no
    language-model head) or NotImplementedError.

    Raises ValueError, before the model runs, when ``text`` (or ``target``) has more
    tokens than the model reads (with ``generate``, counting the tokens to write), gives none,
    or the tokenizer gives ids outside the model's vocabulary; and when ``target`` is given to a
    model with no decoder. A list of texts with ``target`` raises ValueError: an encoder–decoder
    model reads one text and one target.

    ``lazy`` (a list of texts, without ``generate``): each text checked now and read when first
    needed (common.LazyText), so that a widget of many texts holds only those it uses.

    Vision transformers (ViT, DeiT, DINOv2, ...) read an image instead, with their image processor:
    ``from_transformers(model, image_processor, image)``, ``image`` a PIL image or a numpy array
    (height × width × 3 or height × width, uint8 or floats in [0, 1]); one image at a time. See
    ``vision.py`` for the tokens and ``ModelAttention.image``.
    """
    _require(("torch", "transformers"), "transformers")
    from . import hf, vision

    _check_loaded(model)
    if vision.wanted(model, tokenizer, text):  # an image, with the model's image processor
        if target is not None or generate:
            raise ValueError("target= and generate= are for text models: a vision model reads one image as it is")
        return vision.extract(model, tokenizer, text)
    if not callable(tokenizer):
        raise TypeError(
            f"tokenizer must be the model's tokenizer (AutoTokenizer.from_pretrained(name), called on the text), got "
            f"{type(tokenizer).__name__}: from_transformers(model, tokenizer, text)"
        )
    if isinstance(text, str):
        return hf.extract(model, tokenizer, text, target=target, generate=generate)
    texts = texts_of(text)
    if target is not None:
        raise ValueError(
            "target= reads one text and one target (an encoder–decoder model's source and what its decoder writes): "
            "pass one text, and make one widget for each pair"
        )
    if lazy and not generate:
        shared = hf.reader(model, tokenizer)
        return [cast(ModelAttention, hf.lazy(model, tokenizer, t, shared=shared)) for t in texts]
    return [
        cast(ModelAttention, hf.extract(model, tokenizer, t, generate=generate)) for t in texts
    ]  # (no target: one block)


def texts_of(texts) -> list[str]:
    """A list (or tuple) of texts, checked: at least one, every one a string."""
    if not isinstance(texts, (list, tuple)):
        raise TypeError(f"text must be a string, or a list of strings for several texts; got {type(texts).__name__}")
    if not texts:
        raise ValueError("the list of texts is empty: give at least one text")
    bad = next((t for t in texts if not isinstance(t, str)), None)
    if bad is not None:
        raise TypeError(f"texts must be strings; got {type(bad).__name__} {bad!r}")
    return list(texts)


def from_nnsight(
    model, text: str | list[str], lazy: bool = False, remote: bool | str = False, layer: int | None = None
) -> ModelAttention | dict[str, ModelAttention] | list[ModelAttention]:
    """Q, K, V of every layer and head of an nnsight-wrapped Hugging Face model (``LanguageModel``
    or its successor ``TransformersModel``) on ``text`` (or, for a list, on each text alone): read
    through transformers' attention interface as ``from_transformers`` reads them, during a trace
    of nnsight's own (``model.trace``), so the forward pass is nnsight's, with the model's tokenizer.

    ``remote`` (passed to ``model.trace``): True (the NDIF server nnsight is configured for), a
    server's address, or ``"local"`` (the trace serialised as for a server and run here). Only the
    trace's body runs there, so attention is read inside it instead (integrations/remote.py): each
    attention module's call to its attention function, one of nnsight's source operations. The server
    checks every layer against the attention's own output and computes the overview
    (integrations/on_server.py); what comes back is the layer ``layer`` (the model's number; None: the
    first): its q, k and v in the model's dtype (keys and values before grouped-query heads are
    repeated), each layer's mask once (none for the causal rule alone), and per head a thumbnail and its
    summaries. Every other layer is read when first needed (one more trace: a widget's layer switch, or
    anything computed across layers); ``fetched`` counts the bytes. Families read by hand (BLOOM, MPT,
    XGLM, DeBERTa), encoder–decoders and models loaded with another kernel than eager or sdpa are refused
    remotely; docs/remote.md says what travels and what it costs.
    Head effects and norms need the model here: a remote read has neither.
    """
    _require(("torch", "transformers", "nnsight"), "nnsight")
    from . import hf

    if not (hasattr(model, "_module") and hasattr(model, "tokenizer") and hasattr(model, "trace")):
        raise TypeError(
            "from_nnsight takes an nnsight model of a Hugging Face model (nnsight.TransformersModel), got "
            f"{type(model).__name__}"
        )
    if remote is not False and remote != "local":  # the server holds the weights: the model stays as it is here
        return _from_nnsight_remote(model, text, lazy, remote, layer)
    if getattr(model, "dispatched", True) is False:  # a model nnsight has not loaded yet (meta tensors): load it first
        model.dispatch()
    module, tokenizer = model._module, model.tokenizer
    if remote is not False:
        return _from_nnsight_remote(model, text, lazy, remote, layer)
    _check_loaded(module)

    def run(inputs):  # nnsight's own pass: an empty trace runs the model on the inputs
        with model.trace(dict(inputs)):
            pass

    if isinstance(text, str):
        return hf.extract(module, tokenizer, text, run=run)
    if lazy:  # (as from_transformers reads a list lazily)
        shared = hf.reader(module, tokenizer, run)
        return [cast(ModelAttention, hf.lazy(module, tokenizer, t, run, shared)) for t in texts_of(text)]
    return [cast(ModelAttention, hf.extract(module, tokenizer, t, run=run)) for t in texts_of(text)]


def _from_nnsight_remote(model, text, lazy: bool, remote, layer) -> ModelAttention | list[ModelAttention]:
    if not (remote is True or isinstance(remote, str)):
        raise TypeError(
            f'remote must be False, True (NDIF), "local" (a serialised trace run here) or a server\'s address; '
            f"got {remote!r}"
        )
    from . import hf
    from .common import LazyText
    from .remote import read

    if isinstance(text, str):
        return read(model, text, remote, layer)

    def one(t: str) -> ModelAttention:
        if not lazy:
            return read(model, t, remote, layer)
        ids, tokens = hf.extract(model._module, model.tokenizer, t, check_only=True)
        return cast(ModelAttention, LazyText(lambda: read(model, t, remote, layer), tokens, ids, None))

    return [one(t) for t in texts_of(text)]


def implicit_attention(model, tokenizer=None, text=None, *, input_ids=None):
    """The implicit attention of a hybrid model's other layers (state-space scans, linear attention,
    short convolutions): for each layer read, α with y = α · x (integrations/implicit.py). The model
    runs once, on ``text`` read with ``tokenizer`` or on ``input_ids``."""
    _require(("torch", "transformers"), "transformers")
    from .implicit import implicit_attention as read

    return read(model, tokenizer, text, input_ids=input_ids)


def from_transformer_lens(
    model, text: str | list[str], cache=None, lazy: bool = False
) -> ModelAttention | list[ModelAttention]:
    """Q, K, V of every layer and head of a TransformerLens model on ``text`` (or, for a list, on
    each text alone): a ``TransformerBridge`` (``TransformerBridge.boot_transformers(...)``, as it
    is booted: ``enable_compatibility_mode`` folds weights and so changes V) or the deprecated
    ``HookedTransformer``; from ``cache``, when given, a ``run_with_cache`` cache of the model on
    that one text (its hooks' queries, keys and values; a bridge's also its ``hook_pattern`` or
    ``hook_z``), without running the model again.

    A bridge is read at its hooks (``hook_rot_q``/``hook_rot_k`` where the model rotates q and k),
    with the scale, soft cap and causal rule of the Hugging Face attention it wraps, and each layer
    is checked against the bridge's own pattern: a model whose attention is more than
    softmax(scale·q·kᵀ) with a causal or no mask (ALiBi, a sliding window narrower than the text,
    attention sinks, a scale per layer), or an encoder–decoder, raises NotImplementedError saying
    so; read those with ``from_transformers``.

    Raises ValueError, before the model runs, when ``text`` has more tokens than
    ``cfg.n_ctx`` or ids outside ``cfg.d_vocab``.
    """
    _require(("torch", "transformer_lens"), "transformer-lens")
    from . import tlens
    from .ablation import Rerun

    _check_loaded(model)

    def read(one: str, cache=None):
        found = tlens.extract(model, one, cache)
        found.rerun = Rerun(
            model, model.to_tokens(one, truncate=False)[0].tolist(), found.causal, "transformer_lens"
        )  # head effects run it again
        return found

    if isinstance(text, str):
        return read(text, cache)
    texts = texts_of(text)
    if cache is not None:
        raise ValueError(
            "cache= is a run of the model on one text: pass one text with it, or a list of texts without it (each is "
            "run alone)"
        )
    if lazy:  # (as from_transformers reads a list lazily)
        from .common import LazyText

        shared = tlens.reader(model)

        def lazy_text(one: str) -> LazyText:
            ids, tokens = tlens.extract(model, one, check_only=True)
            return LazyText(lambda: read(one), tokens, ids, shared)

        return [cast(ModelAttention, lazy_text(t)) for t in texts]
    return [read(t) for t in texts]


def _check_loaded(model) -> None:
    """A model whose weights are on torch's meta device (shapes without numbers: made under
    torch.device("meta") or init_empty_weights) refused before it runs; one that accelerate
    dispatched (its hooks load offloaded weights as they are needed) is left to run."""
    import torch

    if not isinstance(model, torch.nn.Module) or any(hasattr(m, "_hf_hook") for m in model.modules()):
        return
    named = (*model.named_parameters(), *model.named_buffers())
    empty = next((name for name, t in named if t.is_meta), None)
    if empty is not None:
        raise ValueError(
            f"{type(model).__name__}'s weights are not loaded: {empty} is on the meta device, which holds shapes "
            "and no numbers (a model made under torch.device('meta') or init_empty_weights). Load the model with its "
            "weights, from_pretrained(name) (on the CPU, or a GPU with device_map=), or fill it first: "
            "model.to_empty(device='cpu'), then model.load_state_dict(weights)"
        )


def _require(modules, extra: str) -> None:
    for name in modules:
        try:
            importlib.import_module(name)
        except ImportError as e:
            raise ImportError(f'this needs the optional package {name!r}: pip install "attnwidget[{extra}]"') from e
