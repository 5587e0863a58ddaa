"""Command line: python -m attnwidget export "some sentence" -o lab.html

Writes a self-contained page (or, by the output's extension, a .png or .svg picture) for
authors without a notebook.
"""

from __future__ import annotations

import argparse
import sys

import traitlets

from . import examples
from .widget import STAGES, AttentionWidget

PRESETS = {
    "lab": lambda: AttentionWidget(stage="weights", focus=5),
    "visually": lambda: AttentionWidget(["I sat on the river bank and read", "I put my money in the bank and left"], focus=5, stage="weights"),
    "dial": examples.query_dial,
}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m attnwidget", description="Export an attention widget without a notebook.")
    commands = parser.add_subparsers(dest="command", required=True)
    export = commands.add_parser("export", help="write a standalone HTML page, or a PNG or SVG picture")
    export.add_argument("sentences", nargs="*", help="one sentence, or several to switch between")
    export.add_argument("-o", "--output", required=True, help="where to write: .html, .png or .svg")
    export.add_argument("--preset", choices=sorted(PRESETS), help="a built-in example instead of sentences")
    export.add_argument("--stage", choices=STAGES, help="the stage to open on")
    export.add_argument("--focus", help="the token to focus (its text or its index)")
    export.add_argument("--temperature", type=float)
    export.add_argument("--causal", action="store_true", help="each token reads only itself and earlier tokens")
    export.add_argument("--theme", choices=("auto", "light", "dark"), default="auto", help="for .html pages")
    args = parser.parse_args(argv)

    if bool(args.sentences) == bool(args.preset):
        parser.error("give one or more sentences, or --preset, not both")
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
                lowered = [t.lower() for t in w.tokens]
                w.focus = int(args.focus) if args.focus.isdigit() else lowered.index(args.focus.lower())
    except (ValueError, traitlets.TraitError) as err:
        parser.error(f"{err}" if "not in list" not in str(err) else f"--focus {args.focus!r} is not one of the tokens {w.tokens}")

    out = args.output
    if out.lower().endswith(".png"):
        w.save_png(out)
    elif out.lower().endswith(".svg"):
        w.save_svg(out)
    else:
        w.to_html(out, theme=args.theme)
    print(f"wrote {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
