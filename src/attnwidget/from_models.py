"""AttentionWidget's constructors from a model's attention: from_transformers,
from_transformer_lens, from_nnsight and from_attentions (integrations/ reads the model; this
makes the widget of what it read). A part of :class:`~attnwidget.AttentionWidget`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from . import dense, rules
from .live import OPENING
from .sources import Sources, opening_step

if TYPE_CHECKING:  # a part of AttentionWidget, typed against the interface of its fields and parts
    from .parts import Widget
    from .parts import Widget as _Widget
    from .widget import AttentionWidget
else:
    _Widget = object


class FromModels(_Widget):
    """The ``from_*`` class methods, and ``prompt_length``."""

    @classmethod
    def from_transformers(
        cls,
        model,
        tokenizer,
        text: str | list[str],
        *,
        target: str | None = None,
        block: str = "cross",
        layer: int | None = None,
        head: int = 0,
        generate: int = 0,
        **kwargs,
    ) -> AttentionWidget:
        """Every head of one layer of a Hugging Face model: any model whose attention goes
        through transformers' attention interface (Llama, Mistral, Qwen, Gemma, Phi, GPT-NeoX,
        OPT, GPT-J, OLMo, StarCoder2, the BERT family, ALBERT, ModernBERT, GPT-2, T5, BART, ...),
        and BLOOM, MPT, XGLM and DeBERTa (v1, v2, v3), read by hand.

        Q, K and V are those the model's attention receives during one forward pass of the
        model's own (after rotary), so the widget's weights are the model's attention
        probabilities, also for a model loaded for SDPA or another fast kernel. The model's mask
        becomes ``causal`` and, for a layer with a sliding window or local attention, that
        layer's ``mask`` (``model_masks`` holds them); T5's position bias and BLOOM's and MPT's
        ALiBi come in as ``bias``, DeBERTa's position terms as each layer's ``bias`` (and apart in
        ``score_terms()``), Gemma 2's soft cap as ``softcap``, gpt-oss's learnt attention sinks (a
        logit per head, one more column of each row's softmax) as ``sinks``, each layer's own
        (``model_sinks``). ``layer`` is the model's own number of a layer (the first with attention
        when not given) and can be switched afterwards, in Python or in the page. A hybrid (Jamba,
        Bamba, Qwen3-Next, LFM2, ...) keeps its numbers: its attention layers are ``layer_numbers``,
        and ``layer_kinds`` says what the others are (state-space, linear attention, convolution).
        The widget opens on the weights stage (``stage=`` chooses another), as every constructor
        from a model does.

        An encoder–decoder model (BART, mBART, Marian, T5) reads ``text`` and writes
        ``target``: ``block`` chooses its "encoder" self-attention (over the text), its
        "decoder" self-attention (over the target, causal) or its "cross"-attention (each
        target token reading the text: ``tokens`` are the target's, ``key_tokens`` the text's).

        ``generate=k`` lets a causal language model (``AutoModelForCausalLM``: ``GPT2LMHeadModel``,
        ``LlamaForCausalLM``, ...) write k more tokens after
        ``text``, greedily (fewer if it writes its end-of-text token). ``tokens`` are the
        prompt's followed by the written ones, and the widget starts at ``step`` = the prompt's
        length: each "next token" (or ``w.step += 1``) shows the next written token appear,
        with the numbers the model computed for that prefix. ``w.prompt_length`` (read it, do
        not set it) says how many tokens were the prompt's; without ``generate`` it is all of
        them (None for an encoder–decoder model).

        A list of texts is read one text at a time, each alone (and with ``generate`` each writes
        on from its own prompt), each when first needed (without ``generate``: the widget holds a
        few texts' layers at a time, not every text's): ``sentences`` lists them and
        ``sentence_index`` (an argument too) chooses the one shown, in Python or in the page, with
        its tokens and every layer; the layer, head, temperature and stage stay. :meth:`difference`
        compares two of them.

        A vision transformer (ViT, DeiT, DINOv2, DINOv2 with registers, or another whose attention
        goes through the interface) reads an image with its image processor:
        ``from_transformers(model, image_processor, image)``, ``image`` a PIL image (RGB or grey)
        or a numpy array (height × width × 3 or height × width; uint8, or floats in [0, 1]), one
        image at a time. ``tokens`` are the model's own in order: "[CLS]", DeiT's "[DIST]", the
        registers "[REG1]", … then one per patch by its row and column ("r0c3"); ``image`` holds
        the image as the model saw it (the processor's output), for the page to draw under them.
        An image the model cannot read (RGBA, channels first, out of range) or a processor that
        does not fit the model (its size, patch grid or channels) is refused before the model runs.
        """
        from .integrations import from_transformers

        if callable(tokenizer):  # (else an image processor, or a reader's refusal to come)
            cls._texts_fit(text, lambda t: len(tokenizer(t)["input_ids"]), generate)
        found = from_transformers(model, tokenizer, text, target=target, generate=generate, lazy=True)
        prompt = (
            None if isinstance(found, (dict, list)) else found.prompt_length
        )  # (a list's texts: each its own, _from_model)
        if prompt is not None:
            kwargs.setdefault("step", prompt)  # the prompt written: the model's own tokens come next
        return cls._from_model(found, layer, head, kwargs, block if isinstance(found, dict) else None, texts=text)

    @classmethod
    def from_transformer_lens(
        cls, model, text: str | list[str], *, cache=None, layer: int | None = None, head: int = 0, **kwargs
    ) -> AttentionWidget:
        """Every head of one layer of a TransformerLens ``TransformerBridge`` (or the older
        ``HookedTransformer``); with ``cache`` (its
        ``run_with_cache(text)``), read from that cache's hooks, without running the model again.
        A list of texts is read a text at a time, as from_transformers reads one."""
        from .integrations import from_transformer_lens

        if callable(getattr(model, "to_tokens", None)):
            cls._texts_fit(text, lambda t: model.to_tokens(t, truncate=False).shape[-1])
        return cls._from_model(from_transformer_lens(model, text, cache, lazy=True), layer, head, kwargs, texts=text)

    @classmethod
    def from_nnsight(
        cls,
        model,
        text: str | list[str],
        *,
        layer: int | None = None,
        head: int = 0,
        remote: bool | str = False,
        **kwargs,
    ) -> AttentionWidget:
        """Every head of one layer of an nnsight-wrapped Hugging Face model (``LanguageModel``):
        the q, k, v, masks and terms ``from_transformers`` reads, caught during nnsight's own
        trace of the model (see :func:`attnwidget.integrations.from_nnsight`); a list of texts
        as from_transformers reads one. ``remote``: the trace run on a server (True, or its
        address) or serialised as for one and run here (``"local"``), attention then read inside it."""
        from .integrations import from_nnsight

        if callable(getattr(model, "tokenizer", None)):
            cls._texts_fit(text, lambda t: len(model.tokenizer(t)["input_ids"]))
        return cls._from_model(
            from_nnsight(model, text, lazy=True, remote=remote, layer=layer), layer, head, kwargs, texts=text
        )

    @classmethod
    def from_attentions(
        cls, attentions, tokens, key_tokens=None, *, values=None, layer: int | None = None, head: int = 0, **kwargs
    ) -> AttentionWidget:
        """Attention weights alone, as other tools give them: Hugging Face's ``attentions`` (a
        tuple of layers, each batch × heads × queries × keys, batch 1), a numpy array or torch
        tensor of queries × keys or heads × …, a numpy array of layers × heads × …, or a
        TransformerLens ``ActivationCache`` (its ``blocks.<layer>.attn.hook_pattern`` entries).

        A batch axis cannot be told apart from a layer axis by the numbers, so the rule is by
        kind: a torch tensor of four axes is what transformers and TransformerLens give for one
        layer, batch × heads × queries × keys, read as that layer when the batch is one text and
        refused when it holds several (give one text's: ``attentions[i][j:j + 1]``); four axes
        are layers only in a numpy array, as ``np.stack`` of one text's layers makes them.

        The weights are shown as given: at temperature 1 each row divided by its sum (which must be
        1 within 1e-4), to float64's rounding, whatever precision they came in; cells given 0 stay
        0 in every state. They are held as float64 logarithms (the scores they stand for), so float32
        weights take twice their own memory here and in an exported page. With them comes everything
        that needs weights alone: the matrix,
        arcs, row budget and effective tokens, heads and layers side by side, summaries, the
        sink, exercises, writing token by token (a causal pattern) and exported pages. A
        temperature re-tempers each row exactly: softmax(log W / T), cells of weight 0 staying 0,
        the very numbers the scores would give. There are no queries or keys, so no query/key or
        scores stage (``scores`` is refused), and no blend unless ``values`` (one vector per key:
        keys × width, or heads × keys × width) are given. Weights that are negative, not finite,
        of rows not summing to 1 (within 1e-4; a row of zeros is allowed) or not matching the
        tokens are refused with ValueError.
        """
        from .integrations.weights import read

        if hasattr(tokens, "__len__") and (key_tokens is None or hasattr(key_tokens, "__len__")):
            n = len(tokens)
            dense.check("AttentionWidget", n, n if key_tokens is None else len(key_tokens), cls.dense_limit, made=False)
        return cls._from_model(read(attentions, tokens, key_tokens, values), layer, head, kwargs)

    @classmethod
    def _texts_fit(cls, text, count, generate=0) -> None:
        """Refuse a text past ``dense_limit`` before the model reads it (which would compute its whole
        matrices), from ``count(text)`` (the tokenizer's count of its tokens) and the tokens ``generate``
        writes. What cannot be counted so (not a string, an image processor given a text) is left to the
        reader, which refuses it with its own message."""
        texts = [text] if isinstance(text, str) else list(text) if isinstance(text, (list, tuple)) else []
        more = generate if rules._is_int(generate) and generate > 0 else 0
        for i, one in enumerate(t for t in texts if isinstance(t, str)):
            try:
                n = count(one) + more
            except Exception:  # (the reader's to refuse, saying what to pass)
                return
            said = "This text" if isinstance(text, str) else f"Text {i}"
            said += f" ({n - more} tokens, and the {more} generate= writes)" if more else ""
            dense.check(said, n, n, cls.dense_limit, made=False)

    @classmethod
    def _from_model(cls, found, layer, head, kwargs, block=None, texts=None):
        turned = [n for n in rules.POSITION_TRAITS if n in kwargs]
        if turned:
            raise ValueError(
                f"{turned[0]}= is for your own queries and keys: a model's carry its own position already, which "
                "w.position names; leave it out"
            )
        blocks = found if isinstance(found, dict) else {}
        if blocks:
            if block not in blocks:
                raise ValueError(f"block must be one of {', '.join(map(repr, blocks))}, got {block!r}")
            found = blocks[block]
        each = found if isinstance(found, list) else []  # a model's texts, each read alone
        # every block and text the widget can switch to (a text's tokens are known before it is read)
        for f in each or blocks.values() or [found]:
            n = len(f.tokens)
            keys = None if each else getattr(f, "key_tokens", None)
            dense.check("AttentionWidget", n, n if keys is None else len(keys), cls.dense_limit, made=False)
        index = kwargs.pop("sentence_index", 0) if each else 0
        if each:
            if not (rules._is_int(index) and 0 <= index < len(each)):
                raise ValueError(f"sentence_index must be from 0 to {len(each) - 1}, got {index!r}")
            found = each[index]
            if found.prompt_length is not None:
                kwargs.setdefault("step", found.prompt_length)  # the text shown opens as one text would
        numbers = getattr(found, "layer_numbers", None) or list(range(len(found.layers)))  # (the model's own)
        layer = numbers[0] if layer is None else layer
        if layer not in numbers and not getattr(found, "layer_numbers", None):
            raise ValueError(f"layer must be from 0 to {len(found.layers) - 1} for this model, got {layer}")
        if layer not in numbers:
            kinds = getattr(found, "layer_kinds", None) or []
            kind = kinds[layer] if rules._is_int(layer) and 0 <= layer < len(kinds) else ""
            raise ValueError(
                f"layer must be one of this model's layers with attention weights, by its own number "
                f"({', '.join(map(str, numbers))}), got {layer!r}"
                + (f": the model's layer {layer} is {kind}, which computes no attention weights" if kind else "")
            )
        step = kwargs.get("step")
        if not found.causal and found.key_tokens is None and rules._is_int(step) and 0 < step < len(found.tokens):
            raise ValueError(rules.READS_BOTH_WAYS)  # (said before the causal rule it would turn on is blamed)
        kwargs.setdefault("stage", "weights")  # where a model's numbers are drawn (the tokens stage has none yet)
        kwargs.setdefault("causal", found.causal)
        kwargs.setdefault("scale", found.scale)
        kwargs.setdefault("softcap", getattr(found, "softcap", None))
        if getattr(found, "bias", None) is not None:
            kwargs.setdefault("bias", found.bias)  # a position bias, the same in every layer
        sources = Sources(model=None if blocks else found, blocks=blocks, texts=each)
        first = sources.layer(
            block or "", numbers.index(layer), index
        )  # views of every layer's stacked arrays, made once: sent once
        if "mask" in first:
            kwargs.setdefault("mask", first["mask"])  # the layer's own: a sliding window, local attention
        if "bias" in first:
            kwargs.setdefault("bias", first["bias"])  # the layer's own (attention weights alone: their logarithms)
        if first.get("sinks") is not None:
            kwargs.setdefault("sinks", first["sinks"])  # the layer's own learnt sinks (gpt-oss)
        summary = kwargs.pop("summary", "")  # set once the widget has its model: "effect" needs it
        measure = kwargs.pop("measure", "")  # (as summary: the difference needs its texts)
        qk_map = kwargs.pop("qk_map", False)  # (as summary: refused once it is known to have no queries and keys)
        difference_map = kwargs.pop("difference_map", False)  # (as summary: a differential model's, once known)
        made = OPENING.set(True)  # its layer goes to the page once it is the model's (below): one head of it
        try:
            w: Widget = cast("type[AttentionWidget]", cls)(
                tokens=found.tokens,
                key_tokens=first["key_tokens"],
                q=first["q"],
                k=first["k"],
                v=first["v"],
                head=head,
                **kwargs,
            )
        finally:
            OPENING.reset(made)
        w._sources = sources
        sources.tell = lambda text: w.send({"kind": "remote", "text": text})  # (a remote model's layer being read)
        w._device = getattr(found, "device", None)  # where the overview is computed: the model's own device
        with w.hold_trait_notifications():
            w.set_trait("model_name", found.model_name)
            scheme, about = getattr(found, "position", ("", ""))  # (a reader of one's own may not say)
            w.set_trait("position", scheme)
            w.set_trait("position_about", about)
            w.set_trait("image", getattr(found, "image", None))  # a vision model's image (None: a text)
            w.set_trait("weights_only", getattr(found, "weights_only", ""))
            w.set_trait("blocks", list(blocks))
            w.set_trait("term_names", list(getattr(getattr(found, "terms", None), "names", ())))  # (DeBERTa's)
            w.set_trait("model_causal", bool(found.causal))  # the model's own rule: writing token by token needs it
            w.set_trait("layer_numbers", list(getattr(found, "layer_numbers", None) or []))
            w.set_trait("layer_kinds", list(getattr(found, "layer_kinds", None) or []))
            w.set_trait("sparse_layers", list(getattr(found, "sparse", None) or []))
            w.set_trait("model_lambda", getattr(found, "lambdas", None))  # differential attention's λ per layer
            for name, value in w._sources.stack(block or "", index).items():
                w.set_trait(name, value)
            w._sources.adopt(block or "", {n: getattr(w, n) for n in rules.STACK}, index)
            if each:
                w.set_trait("sentences", list(texts))
                w.set_trait("text_lengths", [len(f.tokens) for f in each])
                w.set_trait("sentence_index", index)
            w.block = block or ""
            w.layer = layer  # the layer's arrays: views of the stacked ones
        w._prompt_lengths = [None if blocks else opening_step(f) for f in each or [found]]  # tokens not the model's own
        w.set_trait(
            "next_token", w._effects_kept() is not None
        )  # a causal language model, which head_effects can run again
        w.set_trait("reads_model", w._reader() is not None)  # the induction score reads it on tokens of its own
        try:
            w.summary = summary
            w.measure = measure
            w.qk_map = qk_map
            w.difference_map = difference_map
        except BaseException:
            w.close()
            raise
        return w

    @property
    def prompt_length(self) -> int | None:
        """How many of a model's tokens (the text shown's) were the text given, the rest the
        model's own (generate=); all of them without generate; None for an encoder–decoder model."""
        lengths = getattr(self, "_prompt_lengths", None)
        if lengths is None:
            raise AttributeError("prompt_length is a model's (from_transformers and the like); this widget has none")
        return lengths[self.sentence_index if len(lengths) > 1 else 0]
