"""The code's shape, as the project holds it: no import circle; nothing but the widget's own parts
reads the widget's private members (everything computed takes an inputs.Inputs instead); and
sizes a reader can hold. Read from the source, so a change that breaks one of these fails here."""

from __future__ import annotations

import ast
import pathlib

import pytest

SRC = pathlib.Path(__file__).resolve().parents[1] / "src" / "attnwidget"
# AttentionWidget and the parts it is made of (its bases), and the whole-change machinery
WIDGET_PARTS = {"widget.py", "shown.py", "research.py", "from_models.py", "live.py", "sync.py"}


def modules(root: pathlib.Path = SRC) -> dict[str, pathlib.Path]:
    out = {}
    for path in root.rglob("*.py"):
        parts = path.relative_to(root.parent).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def imports(name: str, path: pathlib.Path, known) -> set[str]:
    """The package's modules ``name`` imports, at its top or inside a function (not for type checks only)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    typing_only = {
        id(n)
        for block in ast.walk(tree)
        if isinstance(block, ast.If) and getattr(block.test, "id", "") == "TYPE_CHECKING"
        for n in ast.walk(block)
    }
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found = set()
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.ImportFrom):
            base = package
            for _ in range(node.level - 1):
                base = base.rsplit(".", 1)[0]
            module = (f"{base}.{node.module}" if node.module else base) if node.level else node.module
            found |= {f"{module}.{a.name}" if f"{module}.{a.name}" in known else module for a in node.names}
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
    return {m for m in found if m in known and m != name}


def circles(root: pathlib.Path = SRC) -> list[list[str]]:
    known = modules(root)
    graph = {n: imports(n, p, known) for n, p in known.items()}
    found, done = [], set()

    def visit(node, path):
        for nxt in sorted(graph[node]):
            if nxt in path:
                found.append(path[path.index(nxt) :] + [nxt])
            elif nxt not in done:
                visit(nxt, path + [nxt])
        done.add(node)

    for n in sorted(graph):
        if n not in done:
            visit(n, [n])
    return found


def test_no_module_imports_one_that_imports_it_back():
    assert circles() == []


def test_the_import_circle_check_finds_a_circle(tmp_path):
    pkg = tmp_path / "attnwidget" / "integrations"
    pkg.mkdir(parents=True)
    (tmp_path / "attnwidget" / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "hf.py").write_text("from .ablation import Rerun\n")
    (pkg / "ablation.py").write_text("def f():\n    from .hf import _evaluating\n")
    assert circles(tmp_path / "attnwidget") == [
        ["attnwidget.integrations.ablation", "attnwidget.integrations.hf", "attnwidget.integrations.ablation"]
    ]


def private_reads(path: pathlib.Path) -> list[str]:
    """Where ``path`` reads or calls a private member of a widget (``widget._x``, ``w._x``)."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in ("widget", "w", "owner")
            and node.attr.startswith("_")
            and not node.attr.startswith("__")
        ):
            out.append(f"{path.name}:{node.lineno} {node.value.id}.{node.attr}")
    return out


def test_only_the_widgets_own_parts_read_its_private_members():
    others = [p for p in SRC.rglob("*.py") if p.name not in WIDGET_PARTS or p.parent != SRC]
    assert [r for p in others for r in private_reads(p)] == []


def test_the_private_member_check_finds_a_read(tmp_path):
    module = tmp_path / "overview.py"
    module.write_text("def f(widget):\n    return widget._rows(), widget.layer\n")
    assert private_reads(module) == ["overview.py:2 widget._rows"]


def lines_of_class(path: pathlib.Path, name: str) -> int:
    (cls,) = [
        n for n in ast.parse(path.read_text(encoding="utf-8")).body if isinstance(n, ast.ClassDef) and n.name == name
    ]
    return cls.end_lineno - cls.lineno + 1


@pytest.mark.parametrize("path", sorted(SRC.rglob("*.py")), ids=lambda p: str(p.relative_to(SRC)))
def test_every_module_is_at_most_500_lines(path):
    assert len(path.read_text(encoding="utf-8").splitlines()) <= 500


def test_the_widget_module_and_class_fit_a_reader():
    assert len((SRC / "widget.py").read_text(encoding="utf-8").splitlines()) <= 600
    assert lines_of_class(SRC / "widget.py", "AttentionWidget") <= 450
