"""The state declared once (state.py): the traits, the constructor's keywords, the rules' lists,
the page's constants, the docs' table and the generated types all come from it, and the type
checkers hold the widget's parts and the page's code to it."""

from __future__ import annotations

import importlib.util
import inspect
import os
import pathlib
import shutil
import subprocess

import numpy as np
import pytest

from attnwidget import AttentionWidget, parts, rules, state, state_types, traits

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _generator():
    spec = importlib.util.spec_from_file_location("state_types_script", ROOT / "scripts" / "state_types.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_generated_types_are_those_of_the_declaration():
    stale = _generator().stale()
    assert stale == [], f"{[str(p) for p in stale]} stale: run python scripts/state_types.py"


@pytest.mark.parametrize("f", state.FIELDS, ids=lambda f: f.name)
def test_each_field_is_a_trait_as_declared(f):
    trait = AttentionWidget.class_traits()[f.name]
    assert trait.read_only == (not f.writable) and trait.allow_none == f.nullable
    assert trait.help == " ".join(f.doc.split())
    assert trait.default() == (list(f.default) if isinstance(f.default, tuple) else f.default)
    # synced to the page as it changes; kept: only an exported page carries it; the kernel's alone: neither
    assert trait.metadata.get("sync", False) == (f.travel == "synced")
    # arrays as binary buffers, and the text the page shows as it can show it (traits.visible_text)
    coded = f.kind in ("array", "mask", "masks", "texts") or (f.kind == "text" and not f.writable)
    assert ("to_json" in trait.metadata) == (f.travel != "kernel" and coded)


def test_the_rules_lists_and_the_pages_constants_come_from_the_declaration():
    assert rules.WRITABLE == tuple(f.name for f in state.FIELDS if f.writable)
    assert set(rules.FIELDS) == {f.name for f in state.FIELDS if f.rules}
    assert set(rules.INDICES) == {f.name for f in state.FIELDS if f.writable and f.kind == "index"}
    assert set(rules.FLAGS) == {f.name for f in state.FIELDS if f.writable and f.kind == "flag"}
    w = AttentionWidget()
    for key, names in (("writable", rules.WRITABLE), ("read_only", rules.READ_ONLY), ("indices", rules.INDICES)):
        assert w._constants[key] == list(names)
    assert w._constants["stages"] == list(state.STAGES)


def test_the_constructor_takes_the_declared_keywords_and_names_a_misspelt_one():
    params = inspect.signature(AttentionWidget).parameters
    assert list(params) == ["sentence", *state.INIT]
    assert params["temperature"].default == 1.0 and params["focus"].default is None
    before = AttentionWidget.class_traits()  # nothing is made of a refused call
    with pytest.raises(TypeError, match="'temprature': did you mean 'temperature'"):
        AttentionWidget("a b c", temprature=2.0)
    with pytest.raises(TypeError, match="'layer'.*it takes tokens, key_tokens"):
        AttentionWidget(layer=1)
    assert AttentionWidget.class_traits() == before
    w = AttentionWidget("a b c", **{n: v for n, v in (("temperature", 2.0), ("causal", True), ("sink", True))})
    assert (w.temperature, w.causal, w.sink) == (2.0, True, True)


def test_a_field_added_to_the_declaration_is_a_trait_a_keyword_and_a_type_on_both_sides(monkeypatch):
    """What a newcomer's new field gets from its one declaration (state.py)."""
    added = state.Field("arc_scale", "number", 1.5, writable=True, doc="How thick the arcs are drawn.")
    monkeypatch.setattr(state, "FIELDS", (*state.FIELDS, added))
    monkeypatch.setitem(state.BY_NAME, "arc_scale", added)
    made = traits.declared()["arc_scale"]
    assert isinstance(made, traits.Checked) and made.metadata["sync"] and made.default_value == 1.5
    generator = _generator()
    assert "  arc_scale: number;" in generator.page_types()
    assert "    arc_scale: float\n" in generator.python_types()  # StateFields, and Options (writable: a keyword)
    assert generator.python_types().count("arc_scale: float") == 2


def _copy(tmp_path, *parts):
    for part in parts:
        src = ROOT / part
        (shutil.copytree if src.is_dir() else shutil.copy)(src, tmp_path / part)


@pytest.mark.skipif(not (ROOT / ".venv" / "bin" / "mypy").exists(), reason="mypy not installed")
def test_mypy_finds_a_misspelt_field_or_member_reached_by_a_part(tmp_path):
    """The parts are typed against parts.Widget, not Any: a reach that is wrong fails the type check
    (make lint runs mypy on the tree as it is, which passes)."""
    _copy(tmp_path, "src", "pyproject.toml")
    research = tmp_path / "src" / "attnwidget" / "research.py"
    wrong = {  # a reach from one part -> what mypy says of it
        "self.temprature": '"Research" has no attribute "temprature"',
        "self._inputz()": '"Research" has no attribute "_inputz"',
        "self.n_heads + 'x'": 'Unsupported operand types for + ("int" and "str")',
        "self.tokens.upper()": '"list[str]" has no attribute "upper"',
    }
    body = "".join(f"    {reach}\n" for reach in wrong)
    research.write_text(research.read_text(encoding="utf-8") + f"\n\ndef _wrong(self: Research) -> None:\n{body}")
    if (ROOT / ".mypy_cache").is_dir():  # make lint's cache, where there is one: only what changed is checked again
        shutil.copytree(ROOT / ".mypy_cache", tmp_path / ".mypy_cache")
    done = subprocess.run([str(ROOT / ".venv" / "bin" / "mypy")], cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 1
    for said in wrong.values():
        assert said in done.stdout, done.stdout


@pytest.mark.skipif(not (ROOT / "node_modules" / ".bin" / "tsc").exists(), reason="npm packages not installed")
def test_tsc_finds_a_misspelt_state_field_and_a_type_error_in_a_view(tmp_path):
    """(make lint runs tsc on the tree as it is, which passes.)"""
    _copy(tmp_path, "js", "tsconfig.json")
    os.symlink(ROOT / "node_modules", tmp_path / "node_modules")
    wrong = {  # file -> (what is there, what it becomes), and what tsc says of it
        "app.js": ('get("temperature")', 'get("temprature")', '"temprature"'),
        "views/controls.js": ("export function", 'el("p").textContent = 1;\nexport function', "error TS2322"),
        "rules.js": ('s.summary === "effect"', 's.summry === "effect"', "'summry'"),  # the rules' state is typed too
    }
    for name, (old, new, _) in wrong.items():
        path = tmp_path / "js" / name
        text = path.read_text(encoding="utf-8")
        assert old in text
        path.write_text(text.replace(old, new, 1), encoding="utf-8")
    tsc = [str(ROOT / "node_modules" / ".bin" / "tsc"), "-p", "."]
    done = subprocess.run(tsc, cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode != 0
    for name, (*_, said) in wrong.items():
        assert any(line.startswith(f"js/{name}(") and said in line for line in done.stdout.splitlines()), done.stdout


def test_the_generator_refuses_a_constant_it_cannot_type(monkeypatch):
    monkeypatch.setitem(rules.CONSTANTS, "odd", object())
    with pytest.raises(TypeError, match="give it a type"):
        _generator().page_types()


def test_a_field_of_an_unknown_kind_is_refused_where_it_is_declared():
    with pytest.raises(ValueError, match="kind 'vector'"):
        state.Field("odd", "vector", None, doc="?")


def test_the_widget_has_every_member_its_parts_are_typed_against():
    """parts.Widget names what one part reaches in another: the widget must have each (the type checker
    cannot see it through anywidget's untyped bases)."""
    members = set()
    for proto in (parts.Widget, state_types.StateFields):
        members |= set(proto.__annotations__) | {n for n in vars(proto) if not n.startswith("__")}
    members -= {"_is_protocol", "_is_runtime_protocol", "_abc_impl"}
    lab = AttentionWidget()
    model = AttentionWidget.from_attentions(np.full((2, 1, 3, 3), 1 / 3), ["a", "b", "c"])  # a model's widget
    assert sorted(n for n in members if not hasattr(model, n)) == []
    assert sorted(n for n in members if not hasattr(lab, n)) == ["_device", "_prompt_lengths"]  # (a model's alone)
    assert set(state_types.StateFields.__annotations__) == {f.name for f in state.FIELDS}


def test_the_formulas_old_home_still_imports_and_says_where_they_are_now():
    import importlib
    import sys

    sys.modules.pop("attnwidget.core", None)
    with pytest.warns(DeprecationWarning, match="attnwidget.formulas"):
        core = importlib.import_module("attnwidget.core")
    from attnwidget import formulas, mixing

    assert core.rollout is mixing.rollout and core.attention_flow is mixing.attention_flow
    assert core.head_summaries is formulas.head_summaries and core.attention is formulas.attention


def test_the_generator_refuses_a_list_of_fields_with_one_misspelt(monkeypatch):
    """A list of field names the page receives is typed (keyof State)[]: with one misspelt it would
    be string[], and the page's use of it unchecked."""
    monkeypatch.setitem(rules.CONSTANTS, "stack", [*rules.CONSTANTS["stack"], "model_qq"])
    with pytest.raises(TypeError, match="model_qq"):
        _generator().page_types()
