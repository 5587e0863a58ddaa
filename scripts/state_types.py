"""Writes the types made from the state's declaration (src/attnwidget/state.py): the Python
attributes and constructor options (src/attnwidget/state_types.py) and the page's type of its
state (js/state.d.ts). `python scripts/state_types.py` rewrites both; `--check` exits 1 when
either is stale (tests/test_state.py runs the same comparison)."""

from __future__ import annotations

import difflib
import json
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from attnwidget import computed_views, rules, state  # noqa: E402

PYTHON_OUT = ROOT / "src" / "attnwidget" / "state_types.py"
PAGE_OUT = ROOT / "js" / "state.d.ts"
NOTICE = "generated from src/attnwidget/state.py by scripts/state_types.py: do not edit"

# kind -> (the attribute's Python type, the constructor's, the page's)
TYPES = {
    "index": ("int", "int", "number"),
    "count": ("int", "int", "number"),
    "flag": ("bool", "bool", "boolean"),
    "number": ("float", "float", "number"),
    "numbers": ("Sequence[float]", "Sequence[float]", "number[]"),
    "choice": ("str", "str", ""),  # the page's: the union of its choices
    "text": ("str", "str", "string"),
    "texts": ("list[str]", "Sequence[str]", "string[]"),
    "counts": ("list[int]", "Sequence[int]", "number[]"),
    "cell": ("tuple[int, int]", "Sequence[int]", "[number, number]"),
    "array": ("np.ndarray", "ArrayLike", "ArrayValue"),
    "mask": ("np.ndarray", "ArrayLike", "MaskValue"),
    "masks": ("np.ndarray", "ArrayLike", "MaskValue"),
    "answer": ("dict", "dict", "Answer"),
}


def _or_none(t: str, f: state.Field, none: str) -> str:
    return f"{t} | {none}" if f.nullable else t


def python_types() -> str:
    attrs = [f"    {f.name}: {f.py or _or_none(TYPES[f.kind][0], f, 'None')}" for f in state.FIELDS]
    options = []
    for f in state.FIELDS:
        if f.in_init:
            t = _or_none(TYPES[f.kind][1], f, "None")
            options.append(f"    {f.name}: {t + ' | None' if f.init_none and not f.nullable else t}")
    return "\n".join(
        [
            f'"""The widget\'s state as Python types\n({NOTICE})."""',
            "",
            "from __future__ import annotations",
            "",
            "from collections.abc import Sequence",
            "from typing import TYPE_CHECKING, Protocol, TypedDict",
            "",
            "if TYPE_CHECKING:",
            "    import numpy as np",
            "    from numpy.typing import ArrayLike",
            "",
            "",
            "class StateFields(Protocol):",
            '    """Every piece of the widget\'s state, as its trait holds it."""',
            "",
            *attrs,
            "",
            "",
            "class Options(TypedDict, total=False):",
            '    """AttentionWidget\'s keyword arguments (None, where allowed beyond the field\'s own values: the',
            '    widget chooses)."""',
            "",
            *options,
            "",
        ]
    )


def _page_type(f: state.Field) -> str:
    if f.ts:
        return f.ts
    t = " | ".join(json.dumps(c) for c in dict.fromkeys(f.choices)) if f.kind == "choice" else TYPES[f.kind][2]
    return _or_none(t, f, "null")


def _constant_type(value) -> str:
    """The page's type of one of rules.CONSTANTS' values, read from the value itself."""
    fields = set(state.BY_NAME)
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, (list, tuple)):
        if value and all(isinstance(v, str) and v in fields for v in value):
            return "(keyof State)[]"
        chosen = [f.name for f in state.FIELDS if f.kind == "choice" and value and set(value) <= set(f.choices)]
        if chosen:  # a field's choices (the stages, the measures, ...): typed as that field is
            return f'State["{chosen[0]}"][]'
        # a list of fields with one misspelt would be typed string[] (unchecked in the page): refused instead
        near = {
            v: difflib.get_close_matches(v, fields, 1, 0.8) for v in value if isinstance(v, str) and v not in fields
        }
        misspelt = {v: found[0] for v, found in near.items() if found and any(x in fields for x in value)}
        if misspelt:
            raise TypeError(f"rules.CONSTANTS lists fields and {misspelt} (name: the field it is near): misspelt?")
        inner = {_constant_type(v) for v in value}
        return f"{inner.pop()}[]" if len(inner) == 1 else "unknown[]"
    if isinstance(value, dict):
        if value and all(isinstance(v, str) and v in fields for v in value.values()):
            return "Record<string, keyof State>"
        inner = {_constant_type(v) for v in value.values()}
        return f"Record<string, {inner.pop()}>" if len(inner) == 1 else "Record<string, unknown>"
    raise TypeError(f"rules.CONSTANTS holds a {type(value).__name__}: give it a type in scripts/state_types.py")


def page_types() -> str:
    doc = lambda f: "  /** " + " ".join(f.doc.split()).replace("*/", "* /") + " */"
    held = " | ".join(sorted({json.dumps(v["held_in"]) for v in computed_views.VIEWS_FOR_PAGE.values()}))
    lines = [
        f"// The widget's state as the page holds it ({NOTICE}).",
        "",
        "/** An array as it travels: its shape, its numbers' type, its bytes (one head's, where `head` says which). */",
        'export type ArrayValue = { shape: number[]; dtype: "float32" | "float64"; view: DataView; head?: number };',
        "/** Booleans as bytes, 1 where a row may read. */",
        'export type MaskValue = { shape: number[]; dtype: "uint8"; view: DataView };',
        "/** A kernel's answer for the page: plain data, with the state it is for in its key. */",
        "// biome-ignore lint/suspicious/noExplicitAny: each view checks the answer it draws (overview, measures, ...)",
        "export type Answer = Record<string, any>;",
        "/** A view the kernel computes (computed_views.py): its sign, where its answer is held, when it is asked;",
        " * a measure's also the choices an exported page's answer follows and its words. */",
        "export type ViewSpec = {",
        "  signed: boolean;",
        f"  held_in: {held};",
        "  asked_when: { [K in keyof State]?: State[K][] | null } | null; // (null: any value but null)",
        "} & Partial<MeasureWords>;",
        'export type MeasureWords = { follows: ("layer" | "head")[]; label: string; about: string; title: string; '
        "reads: string; across_layers: boolean };",
        "",
        "/** The names and limits the page's rules need (rules.CONSTANTS), and the computed views. */",
        "export interface Constants {",
        *(f"  {k}: {_constant_type(v)};" for k, v in rules.CONSTANTS.items()),
        "  views: Record<string, ViewSpec>;",
        "}",
        "",
        "/** Every piece of the widget's state (src/attnwidget/state.py), and the constants. */",
        "export interface State {",
    ]
    for f in state.FIELDS:
        # kept in the kernel (an exported page carries it): a live page's model has no such field
        line = f"  {f.name}{'' if f.travel == 'synced' else '?'}: {_page_type(f)};"
        if len(line) > 160 and f.kind == "choice":  # (past biome's line width: one choice a line, as it writes them)
            line = (
                line[: line.index(": ") + 1]
                + "".join(f"\n    | {c}" for c in line[line.index(": ") + 2 : -1].split(" | "))
                + ";"
            )
        lines += [doc(f), line]
    lines += ["  _constants: Constants;", "}", ""]
    return "\n".join(lines)


def outputs() -> dict[pathlib.Path, str]:
    return {PYTHON_OUT: python_types(), PAGE_OUT: page_types()}


def stale() -> list[pathlib.Path]:
    return [p for p, text in outputs().items() if not p.exists() or p.read_text(encoding="utf-8") != text]


if __name__ == "__main__":
    if "--check" in sys.argv:
        old = stale()
        for p in old:
            print(f"{p.relative_to(ROOT)} is stale: run python scripts/state_types.py", file=sys.stderr)
        sys.exit(1 if old else 0)
    for p, text in outputs().items():
        p.write_text(text, encoding="utf-8")
