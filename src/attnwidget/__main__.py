"""Command line: python -m attnwidget export "some sentence" -o lab.html

Writes a self-contained page (or, by the output's extension, a .png, .svg or .pdf picture) for
authors without a notebook. With --model, a Hugging Face model's attention on the sentence
(a local folder saved with save_pretrained, or a model's name on the Hub); its page carries
the layers --layers names and the one shown, or without --layers every layer while under
--max-mb, else the layer shown and its nearest that fit.
"""

from __future__ import annotations

import argparse
import math
import os
import sys

import traitlets

from .presets import PRESETS
from .widget import STAGES, AttentionWidget


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m attnwidget", description="Export an attention widget without a notebook."
    )
    commands = parser.add_subparsers(dest="command", required=True)
    export = commands.add_parser("export", help="write a standalone HTML page, or a PNG, SVG or PDF picture")
    export.add_argument("sentences", nargs="*", help="one sentence, or several to switch between")
    export.add_argument(
        "-o",
        "--output",
        required=True,
        help="where to write: .html, .png, .svg or .pdf; - writes the page to standard output",
    )
    export.add_argument("--preset", choices=sorted(PRESETS), help="a built-in example instead of sentences")
    export.add_argument("--stage", choices=STAGES, help="the stage to open on")
    export.add_argument("--focus", help="the token to focus (its text or its index)")
    export.add_argument("--temperature", type=float)
    export.add_argument("--causal", action="store_true", help="each token reads only itself and earlier tokens")
    export.add_argument(
        "--theme", choices=("auto", "light", "dark"), default="auto", help="the page's, or the picture's (auto: light)"
    )
    model = export.add_argument_group("a model's attention")
    model.add_argument(
        "--model", help="a Hugging Face model: a folder saved with save_pretrained, or its name on the Hub"
    )
    model.add_argument("--target", help="an encoder–decoder model's: the text its decoder writes")
    model.add_argument(
        "--layer", type=int, help="the layer to open on, by the model's number (default: its first with attention)"
    )
    model.add_argument("--head", type=int, default=0, help="the head to open on")
    model.add_argument(
        "--layers",
        help="the layers the page holds (and the one shown), e.g. 0,3,5-7; without it, every layer under --max-mb",
    )
    model.add_argument(
        "--max-mb",
        type=float,
        default=50,
        help="the page holds every layer while it stays under this size (default 50)",
    )
    args = parser.parse_args(argv)

    if bool(args.sentences) == bool(args.preset):
        parser.error("give one or more sentences, or --preset, not both")
    if args.model is not None and not args.model.strip():
        parser.error("--model '': give a folder saved with save_pretrained, or a model's name on the Hub")
    if not (math.isfinite(args.max_mb) and args.max_mb > 0):
        parser.error(f"--max-mb {args.max_mb}: give a size in megabytes above 0, e.g. 50")
    if args.model and (args.preset or len(args.sentences) != 1):
        parser.error("--model reads one sentence: give it alone, without --preset")
    if not args.model and args.target is not None:
        parser.error("--target is for an encoder–decoder model's page: give --model")
    if not args.model and (args.layers is not None or args.max_mb != 50 or args.layer is not None or args.head):
        parser.error("--layer, --head, --layers and --max-mb are for a model's page: give --model")
    ranges, layers = _layer_list(parser, args.layers) if args.layers is not None else None, None
    if args.output != "-":
        _check_output(parser, args.output)  # before the slower work
    try:
        if args.preset:
            w = PRESETS[args.preset]()
        elif args.model:
            w = _from_model(parser, args.model, args.sentences[0], args.target)
            layer = w.layer if args.layer is None else args.layer
            layers = _check_layers(parser, w, layer, args.head, ranges)
            w.layer, w.head = layer, args.head
        else:
            w = AttentionWidget(args.sentences[0] if len(args.sentences) == 1 else args.sentences)
        with w.hold_sync():
            if args.stage:
                w.stage = args.stage
            if args.temperature is not None:
                w.temperature = args.temperature
            if args.causal:
                w.causal = True
            if args.focus is not None:
                w.focus = _focus_index(parser, args.focus, w.tokens)
    except (
        ValueError,
        NotImplementedError,
        traitlets.TraitError,
    ) as err:  # (a model family not read: said, not a traceback)
        parser.error(str(err))

    out, picture_theme = args.output, "light" if args.theme == "auto" else args.theme
    page = {"theme": args.theme, "layers": layers, "max_mb": args.max_mb} if args.model else {"theme": args.theme}
    try:
        if out == "-":
            sys.stdout.write(w.to_html(**page))
            return 0
        if out.lower().endswith(".png"):
            w.save_png(out, theme=picture_theme)
        elif out.lower().endswith(".svg"):
            w.save_svg(out, theme=picture_theme)
        elif out.lower().endswith(".pdf"):
            w.save_pdf(out, theme=picture_theme)
        else:
            w.to_html(out, **page)
    except ImportError as err:  # an optional dependency (the images extra): what to install, not a traceback
        print(f"{parser.prog}: error: {err}", file=sys.stderr)
        sys.exit(1)
    except ValueError as err:  # (an encoder–decoder model's page holds every layer: no --layers)
        parser.error(str(err).replace("layers=", "--layers"))
    print(f"wrote {out}", file=sys.stderr)
    return 0


SUFFIXES = (".html", ".htm", ".png", ".svg", ".pdf")


def _check_output(parser, out: str) -> None:
    """A usage error now, rather than a traceback after the work, if ``out`` cannot be written."""
    folder = os.path.dirname(os.path.abspath(out))
    if os.path.isdir(out):
        parser.error(f"-o {out!r} is a folder; name a file inside it, e.g. {os.path.join(out, 'lab.html')!r}")
    if os.path.islink(out) or (os.path.lexists(out) and not os.path.isfile(out) and not os.path.isdir(out)):
        parser.error(
            f"-o {out!r} is not a regular file (a link, a device or a pipe): the command writes only regular files, "
            "or - for standard output"
        )
    suffix = os.path.splitext(out)[1].lower()
    if suffix not in SUFFIXES:
        parser.error(
            f"-o {out!r}: the file's extension chooses what is written: .html (the page), .png, .svg or .pdf (a "
            f"picture){'; ' + suffix + ' is none of them' if suffix else ''}"
        )
    if not os.path.isdir(folder):
        parser.error(f"-o {out!r}: there is no folder {folder!r} to write into; create it or choose another path")
    existed = os.path.lexists(out)
    try:  # permission bits alone do not tell (root writes anyway, some file systems refuse anyway)
        open(out, "a").close()  # "a" leaves an existing file as it is
    except OSError as err:
        parser.error(f"-o {out!r} cannot be written ({err.strerror}); choose another path")
    if not existed:
        os.remove(out)  # leave nothing behind if a later step fails


def _layer_list(parser, text: str) -> list[list[int]]:
    """--layers "0,3,5-7" as [[0], [3], [5, 7]] (made a list of layers by _check_layers)."""
    try:
        ends = [[int(n) for n in part.split("-")] for part in text.split(",")]
        if any(len(e) not in (1, 2) or e[0] > e[-1] or e[0] < 0 for e in ends):
            raise ValueError
    except ValueError:
        parser.error(f"--layers {text!r}: give layer numbers and rising ranges, e.g. 0,3,5-7")
    return ends  # (ranges as given: checked against the model's layers before any is made)


def _from_model(parser: argparse.ArgumentParser, name: str, text: str, target: str | None) -> AttentionWidget:
    """The model and tokenizer saved at ``name`` (or named so on the Hub), read on ``text`` (and ``target``)."""
    try:
        import transformers
    except ImportError:
        print(
            f"{parser.prog}: error: --model needs transformers and torch: pip install 'attnwidget[transformers]'",
            file=sys.stderr,
        )
        sys.exit(1)
    try:
        tokenizer = transformers.AutoTokenizer.from_pretrained(name)
        model = transformers.AutoModel.from_pretrained(name)
    except ImportError as err:  # a package the model needs (its tokenizer's, say): what to install, not a bad folder
        print(f"{parser.prog}: error: {err}", file=sys.stderr)
        sys.exit(1)
    except Exception as err:  # (a missing folder, an unknown name, a cut or corrupt weights file: each its own kind)
        parser.error(
            f"--model {name!r} could not be loaded ({type(err).__name__}: {str(err)[:300]}); give a folder saved with "
            "save_pretrained, or a model's name on the Hub"
        )
    try:
        return AttentionWidget.from_transformers(model.eval(), tokenizer, text, target=target)
    except ValueError as err:  # (said in the command line's words)
        parser.error(str(err).replace('pass target="…"', 'give --target "…"').replace("target=", "--target"))


def _check_layers(parser, w: AttentionWidget, layer: int, head: int, ranges: list[list[int]] | None) -> list | None:
    """--layer, --head and --layers among the model's layers (by its own numbers: a hybrid's attention
    layers), said in the command line's words; the layers asked (a range's layers without attention left out)."""
    n, heads, numbers = w.n_layers, w.n_heads, list(w.layer_numbers)
    if not numbers and not 0 <= layer < n:
        parser.error(f"--layer {layer} is out of range: the model has {n} layers, 0 to {n - 1}")
    if numbers and layer not in numbers:
        kinds = w.layer_kinds
        why = f" (layer {layer} is {kinds[layer]}: no attention weights)" if 0 <= layer < len(kinds) else ""
        parser.error(f"--layer {layer}: the model's layers with attention are {', '.join(map(str, numbers))}{why}")
    if not 0 <= head < heads:
        parser.error(f"--head {head} is out of range: the model has {heads} heads, 0 to {heads - 1}")
    last = numbers[-1] if numbers else n - 1
    beyond = [(max(e[0], last + 1), e[-1]) for e in ranges or [] if e[-1] > last]  # (a range's part past the last)
    if beyond:
        said = ", ".join(str(a) if a == b else f"{a} to {b}" for a, b in beyond)
        parser.error(f"--layers must be layer numbers from 0 to {last}; got {said}")
    asked = None if ranges is None else sorted({i for e in ranges for i in range(e[0], e[-1] + 1)})
    if asked is not None and numbers:
        asked = [i for i in asked if i in numbers] or parser.error(
            f"--layers holds no layer with attention: the model's are {', '.join(map(str, numbers))}"
        )
    return asked


def _focus_index(parser, focus: str, tokens: list[str]) -> int:
    """--focus as a token's index, or its text in any case (the first match)."""
    if focus.removeprefix("-").isdecimal():
        n = len(tokens)
        if not 0 <= int(focus) < n:
            parser.error(f"--focus {focus} is out of range: the sentence has {n} tokens, 0 to {n - 1}")
        return int(focus)
    lowered = [t.lower() for t in tokens]
    if focus.lower() not in lowered:
        parser.error(f"--focus {focus!r} is not one of the tokens {tokens}; give one of them or its index")
    return lowered.index(focus.lower())


if __name__ == "__main__":
    sys.exit(main())
