"""Command line: python -m attnwidget export "some sentence" -o lab.html

Writes a self-contained page (or, by the output's extension, a .png, .svg or .pdf picture) for
authors without a notebook.
"""

from __future__ import annotations

import argparse
import os
import sys

import traitlets

from .presets import PRESETS
from .widget import STAGES, AttentionWidget


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m attnwidget", description="Export an attention widget without a notebook.")
    commands = parser.add_subparsers(dest="command", required=True)
    export = commands.add_parser("export", help="write a standalone HTML page, or a PNG, SVG or PDF picture")
    export.add_argument("sentences", nargs="*", help="one sentence, or several to switch between")
    export.add_argument("-o", "--output", required=True, help="where to write: .html, .png, .svg or .pdf; - writes the page to standard output")
    export.add_argument("--preset", choices=sorted(PRESETS), help="a built-in example instead of sentences")
    export.add_argument("--stage", choices=STAGES, help="the stage to open on")
    export.add_argument("--focus", help="the token to focus (its text or its index)")
    export.add_argument("--temperature", type=float)
    export.add_argument("--causal", action="store_true", help="each token reads only itself and earlier tokens")
    export.add_argument("--theme", choices=("auto", "light", "dark"), default="auto", help="the page's, or the picture's (auto: light)")
    args = parser.parse_args(argv)

    if bool(args.sentences) == bool(args.preset):
        parser.error("give one or more sentences, or --preset, not both")
    if args.output != "-":
        _check_output(parser, args.output)  # before the slower work
    try:
        if args.preset:
            w = PRESETS[args.preset]()
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
    except (ValueError, traitlets.TraitError) as err:
        parser.error(str(err))

    out, picture_theme = args.output, "light" if args.theme == "auto" else args.theme
    if out == "-":
        sys.stdout.write(w.to_html(theme=args.theme))
        return 0
    try:
        if out.lower().endswith(".png"):
            w.save_png(out, theme=picture_theme)
        elif out.lower().endswith(".svg"):
            w.save_svg(out, theme=picture_theme)
        elif out.lower().endswith(".pdf"):
            w.save_pdf(out, theme=picture_theme)
        else:
            w.to_html(out, theme=args.theme)
    except ImportError as err:  # an optional dependency (the images extra): what to install, not a traceback
        print(f"{parser.prog}: error: {err}", file=sys.stderr)
        sys.exit(1)
    print(f"wrote {out}", file=sys.stderr)
    return 0


def _check_output(parser, out: str) -> None:
    """A usage error now, rather than a traceback after the work, if ``out`` cannot be written."""
    folder = os.path.dirname(os.path.abspath(out))
    if os.path.isdir(out):
        parser.error(f"-o {out!r} is a folder; name a file inside it, e.g. {os.path.join(out, 'lab.html')!r}")
    if not os.path.isdir(folder):
        parser.error(f"-o {out!r}: there is no folder {folder!r} to write into; create it or choose another path")
    existed = os.path.lexists(out)
    try:  # permission bits alone do not tell (root writes anyway, some file systems refuse anyway)
        open(out, "a").close()  # "a" leaves an existing file as it is
    except OSError as err:
        parser.error(f"-o {out!r} cannot be written ({err.strerror}); choose another path")
    if not existed:
        os.remove(out)  # leave nothing behind if a later step fails


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
