"""Every model family transformers lists whose models have attention (tiny_families.py says which, and
builds each from its default config at tiny sizes), run with ``output_attentions`` (eager) and read
through ``AttentionWidget.from_transformers`` on a text (an encoder–decoder model: a text and a target;
a vision transformer: an image, with an image processor), is sorted into exactly one of:

- "exact": every layer and head the widget shows (every block of an encoder–decoder) within 1e-5 of the
  model's own attention weights (a hybrid's attention layers matched to the model's by their modules);
- "refused": attnwidget raises NotImplementedError or ValueError naming the family, with why;
- "not buildable small": the model alone, without attnwidget, cannot be built or run at tiny sizes on
  token ids or an image (it reads audio or time series, needs images besides its text, a library not
  installed, sizes its config names its own way, ...), with the reason.

Anything else (weights that differ, a crash inside attnwidget, a refusal that does not name the family)
fails. The table of results is docs/families.md: ``python tests/test_families.py`` writes it, and
``test_the_docs_table_is_current`` fails when it is stale.
"""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
import io
import pathlib
import re
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from test_interface import tokenizer  # noqa: E402
from tiny_families import families, tiny_config  # noqa: E402

from attnwidget.integrations.configs import is_vision  # noqa: E402
from attnwidget.integrations.interface import capture  # noqa: E402

DOCS = pathlib.Path(__file__).resolve().parents[1] / "docs" / "families.md"
TEXT = "I sat on the riverbank and the river sat on the bank."
TARGET = "The bank sat on the river."
TOL = 1e-5
LARGEST = 5_000_000  # parameters: past this the tiny config did not take (sizes the family names its own way)
EXACT, REFUSED, NOT_BUILT = "exact", "refused", "not buildable small"


@dataclasses.dataclass
class Result:
    result: str
    note: str = ""


def _short(e: BaseException) -> str:
    return f"{type(e).__name__}: {_cut(str(e))}"


def _cut(text: str, limit: int = 160) -> str:
    """One line of at most ``limit`` characters, with no object's repr (a module's holds where it is installed)."""
    text = re.sub(r"<(?:class|module) '([^']*)'[^>]*>", r"\1", " ".join(text.split()))
    return text if len(text) <= limit else text[: limit - 1] + "…"


READS = {  # a base model's main input, when not token ids
    "pixel_values": "images",
    "pixel_values_videos": "videos",
    "input_features": "audio features",
    "input_values": "audio",
    "past_values": "time series",
}


def _why_not(e: BaseException) -> str:
    """Why the model alone did not build or run, in the table's words."""
    text = str(e)
    for name, what in READS.items():
        if re.search(rf"\b{name}\b", text):
            return f"needs {name} ({what})"
    lib = re.search(r"requires the (\w+) library", text)
    if lib:
        return f"needs the {lib.group(1)} library"
    return _short(e)


def _attention_layers(model, inputs: dict, count: int) -> list[int]:
    """Which of the model's layers compute attention: each call's module's layer_idx, else the first number
    in its name (Zamba 2's shared block says -1); every layer where attnwidget reads by hand (BLOOM)."""
    try:
        calls = capture(model, **inputs)
        return [c.layer if c.layer >= 0 else int(re.search(r"\d+", c.name).group()) for c in calls]
    except NotImplementedError:
        return list(range(count))


def _build(kind: str, vocab: int):
    """The family's tiny model, or the Result saying why it cannot be built."""
    try:
        config = tiny_config(kind, vocab)
    except Exception as e:
        return Result(NOT_BUILT, f"its config refuses the tiny sizes: {_short(e)}")
    try:
        with torch.device("meta"):
            size = sum(p.numel() for p in transformers.AutoModel.from_config(config).parameters())
        if size > LARGEST:
            return Result(NOT_BUILT, f"{size / 1e6:.0f}M parameters at the tiny sizes: sizes named its own way")
        torch.manual_seed(0)
        return transformers.AutoModel.from_config(config, attn_implementation="eager").eval()
    except Exception as e:
        return Result(NOT_BUILT, _why_not(e))


def _inputs(model, tokenizer):
    """What the model is run on, and what from_transformers is given (a text, or an image and its
    processor); or the Result saying why it cannot be run."""
    main = getattr(model, "main_input_name", "input_ids")
    if main == "pixel_values" and is_vision(model.config):  # a vision transformer: one image
        height, width = np.broadcast_to(model.config.image_size, 2)  # (one number, or a pair)
        processor = transformers.ViTImageProcessorPil(size={"height": int(height), "width": int(width)})
        image = np.random.default_rng(0).integers(0, 256, (height, width, 3), dtype=np.uint8)
        return {"pixel_values": processor(images=image, return_tensors="pt")["pixel_values"]}, (processor, image), {}
    if main != "input_ids":
        return Result(NOT_BUILT, f"needs {main} ({READS.get(main, main)}), not token ids")
    inputs = dict(tokenizer(TEXT, return_tensors="pt"))  # (the ids and a mask of ones, as attnwidget runs it)
    if not getattr(model.config, "is_encoder_decoder", False):
        return inputs, (tokenizer, TEXT), {}
    start = getattr(model.config, "decoder_start_token_id", None)
    inputs["decoder_input_ids"] = torch.tensor([[start or 0, *tokenizer(TARGET)["input_ids"]]])
    return inputs, (tokenizer, TEXT), {"target": TARGET}


def sort(kind: str, tokenizer) -> Result:
    """Build the family tiny, run it, read it; the result, or an AssertionError for anything else."""
    from attnwidget import AttentionWidget

    model = _build(kind, len(tokenizer))
    if isinstance(model, Result):
        return model
    given = _inputs(model, tokenizer)
    if isinstance(given, Result):
        return given
    inputs, read, options = given
    try:
        with torch.no_grad():
            out = model(**inputs, output_attentions=True)
    except Exception as e:  # (a model of text and images, or audio, fails on what it was not given: None)
        takes = inspect.signature(model.forward).parameters
        both = [f"needs {n} ({READS[n]}) besides token ids" for n in READS if n in takes and n not in inputs]
        return Result(NOT_BUILT, both[0] if both and "NoneType" in str(e) else _why_not(e))
    try:
        w = AttentionWidget.from_transformers(model, *read, **options)
    except (NotImplementedError, ValueError) as e:
        said, name = str(e), type(model).__name__
        assert name in said or kind in said, f"{kind}: refused without naming the family: {said}"
        return Result(REFUSED, said)
    two = "target" in options
    blocks = {"encoder": "encoder_attentions", "decoder": "decoder_attentions", "cross": "cross_attentions"}
    notes = ["encoder, decoder and cross-attention"] if two else ["an image"] if "pixel_values" in inputs else []
    for block, field in blocks.items() if two else {"": "attentions"}.items():
        every = getattr(out, field, None) or ()
        reference = [a for a in every if a is not None]
        assert reference, f"{kind}: the model returns no attention weights"
        layers = [] if two else _attention_layers(model, inputs, w.n_layers)
        if block:
            w.set_state({"block": block})
        numbers = list(w.layer_numbers) or list(range(w.n_layers))
        if layers != list(range(len(layers))):  # a hybrid: its attention layers among layers of other kinds
            if len(every) > len(layers):  # (every layer returned something: MiniMax's linear ones too)
                reference = [every[i] for i in layers]
            said = ", ".join(map(str, layers))
            if len(set(layers)) < len(layers):  # (HRM runs its layers in cycles: each run is a layer shown, in order)
                notes.append(f"layers run again, each run a layer shown in order: the model's {said}")
            else:
                assert numbers == layers, f"{kind}: the widget numbers its layers {numbers}, the model {layers}"
                others = sorted({k for k in w.layer_kinds if k})
                notes.append(f"attention in layer{'s' * (len(layers) > 1)} {said}; the others: {', '.join(others)}")
        assert w.n_layers == len(reference), f"{kind} {block}: {w.n_layers} layers shown, {len(reference)} run"
        for layer, want in zip(numbers, reference):
            w.set_state({"layer": layer})
            assert w.layer == layer, f"{kind} {block}: layer {layer} refused"
            assert w.n_heads == want.shape[1], f"{kind} {block} layer {layer}: {w.n_heads} heads, {want.shape[1]}"
            for head in range(w.n_heads):
                w.head = head
                np.testing.assert_allclose(
                    w.weights,
                    want[0, head].double().numpy(),
                    atol=TOL,
                    rtol=0,
                    err_msg=f"{kind} {block} {layer} {head}",
                )
    if w.model_lambda:  # (its own maps are exact, above; the pairs' mix is checked as it is read)
        notes.append("differential attention: each head's own map, and each layer's λ and pairs' difference")
    return Result(EXACT, "; ".join(notes))


SHORT = (  # a refusal's reason, in the table's words (else its first words)
    ("without transformers' attention interface, where attnwidget reads it (", "computes attention its own way, "
     "not through transformers' attention interface"),
    ("encoder attention is computed without", "its encoder computes attention its own way"),
    ("a logit for every token", "learnt attention sinks, one per token: attnwidget reads one per head"),
    ("adds learnt attention sinks at layer", "learnt attention sinks used otherwise than gpt-oss's softmax column"),
    ("computes attention twice", "differential attention: two softmaxes combined"),
    ("layers of different shapes", "layers of different head widths"),
    ("keys of its own beside the tokens'", "keys of its own beside the tokens' (compressed keys)"),
    ("different term to its scores in each layer", "a different position bias in each layer"),
    ("self- and cross-attention merged", "its decoder's self- and cross-attention in one softmax"),
    ("windows of patches", "attends within windows of patches"),
    ("which tokens are the patches", "its tokens are not the patches and a few of its own"),
)  # fmt: skip


def note(result: Result) -> str:
    if result.result != REFUSED:
        return result.note
    return next((short for said, short in SHORT if said in result.note), _cut(result.note))


RESULTS: dict[str, Result] = {}  # what each family's test found, for the table


@pytest.mark.parametrize("kind", families())
def test_every_family_is_read_exactly_refused_or_not_buildable_small(kind, tokenizer):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = sort(kind, tokenizer)
    assert result.result in (EXACT, REFUSED, NOT_BUILT), result
    assert result.note or result.result == EXACT, f"{kind}: {result.result}, with no reason given"
    RESULTS[kind] = result


def table(results: dict[str, Result]) -> str:
    counts = {r: sum(x.result == r for x in results.values()) for r in (EXACT, REFUSED, NOT_BUILT)}
    rows = [f"| `{k}` | {results[k].result} | {note(results[k]).replace('|', '/')} |" for k in sorted(results)]
    return "\n".join(
        [
            "# Supported model families",
            "",
            "<!-- generated by tests/test_families.py (python tests/test_families.py writes it): do not edit -->",
            "",
            f"Every model family transformers {transformers.__version__} lists whose models have attention: "
            f"{len(results)} model types, each built from a tiny random config (2 layers, width 32, 4 heads) and read "
            "by `AttentionWidget.from_transformers` on a text (an encoder–decoder model: a text and a target; a "
            "vision transformer: an image). tests/test_families.py sorts each into one of three results:",
            "",
            "- **exact**: every layer and head attnwidget shows is within 1e-5 of the model's own attention "
            "weights (`output_attentions`, eager);",
            "- **refused**: attnwidget raises an error naming the family and saying why, and shows nothing;",
            "- **not buildable small**: the model alone, without attnwidget, cannot be built or run at that size "
            "on token ids or an image (the note says why); it is not tested here.",
            "",
            f"{counts[EXACT]} exact, {counts[REFUSED]} refused, {counts[NOT_BUILT]} not buildable small.",
            "",
            "| family | result | note |",
            "| --- | --- | --- |",
            *rows,
            "",
        ]
    )


def test_the_docs_table_is_current(tokenizer):
    """docs/families.md is the table these tests make (the families not run here are sorted now)."""
    said = DOCS.read_text(encoding="utf-8")
    made = re.search(r"transformers (\S+) lists", said)
    if made is None or made.group(1) != transformers.__version__:
        pytest.skip(f"docs/families.md was made with another transformers than {transformers.__version__}")
    for kind in families():
        if kind not in RESULTS:
            test_every_family_is_read_exactly_refused_or_not_buildable_small(kind, tokenizer)
    assert said == table(RESULTS), "docs/families.md is stale: python tests/test_families.py writes it again"


if __name__ == "__main__":  # write docs/families.md
    from test_integrations import gpt2_tokenizer

    class Folders:  # (what the tokenizer fixture asks of pytest's tmp_path_factory)
        def mktemp(self, name):
            import tempfile

            return pathlib.Path(tempfile.mkdtemp(prefix=name))

    transformers.logging.set_verbosity_error()
    words = gpt2_tokenizer.__wrapped__(transformers, Folders())
    with contextlib.redirect_stdout(io.StringIO()):
        for kind in families():
            test_every_family_is_read_exactly_refused_or_not_buildable_small(kind, words)
    DOCS.write_text(table(RESULTS), encoding="utf-8")
    print(f"wrote {DOCS}: {len(RESULTS)} families")
