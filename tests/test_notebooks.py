"""Every course notebook runs from top to bottom without an error and shows a widget, with no more
than the one command its first cell names installs, and prints every figure its text quotes.

Each notebook is executed once per test session (``executed``); the tests in
``test_notebook_patterns.py`` read the same execution: what the cells printed, and the
state of every widget the notebook left in its kernel.

A notebook's kernel sees only what its command installs (``view``): the other packages of this
environment are not there for it, as on a learner's machine. With ATTNWIDGET_KERNEL_PYTHON set,
the notebooks run in that Python's environment instead, whole: the one ``make demo`` made, for
instance, which must run every notebook it opens (``ATTNWIDGET_KERNEL_PYTHON=.venv/bin/python``
in a clone after ``make .venv/.demo-installed``; there no notebook is skipped).
"""

import functools
import json
import os
import pathlib
import pickle
import re
import shlex
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from importlib import metadata

import nbformat
import pytest
import tomllib
from jupyter_client import KernelManager
from jupyter_client.kernelspec import KernelSpecManager
from nbclient import NotebookClient
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parents[0]
NOTEBOOK_DIR = ROOT / "notebooks"
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
EXTRAS = PROJECT["optional-dependencies"]
KERNEL_PYTHON = os.environ.get("ATTNWIDGET_KERNEL_PYTHON")
NOTEBOOKS = sorted(NOTEBOOK_DIR.glob("*.ipynb"))
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"

# Run after the notebook's own cells, in its kernel: the state of every AttentionWidget the
# notebook holds in a global, with the weights of every head, pickled to a file.
PROBE = """
import pickle as _pickle
import numpy as _np
from attnwidget import AttentionWidget as _AW, attention as _attention

def _array(a):
    return None if a is None else _np.array(a)

def _refused(read):  # what a widget of attention weights alone refuses (its scores, its output): None
    try:
        return _array(read())
    except ValueError:
        return None

def _heads(w):
    if w.weights_only:  # no q and k to recompute them from
        return None
    q, k, v = (_np.asarray(a) for a in (w.q, w.k, w.v))
    if q.ndim == 2:
        q, k, v = q[None], k[None], v[None]
    return _np.stack([_attention(q[h], k[h], v[h], temperature=w.temperature, causal=w.causal,
                                 scale=w.scale, mask=w.mask, sink=None if w.sinks is None else w.sinks[h]).weights
                      for h in range(q.shape[0])])

_found = {}
for _name, _w in list(globals().items()):
    if isinstance(_w, _AW) and not _name.startswith("_"):
        _found[_name] = dict(
            model_id=_w.model_id,
            tokens=list(_w.tokens), q=_array(_w.q), k=_array(_w.k), v=_array(_w.v), x=_array(_w.x),
            mask=_array(_w.mask), temperature=_w.temperature, causal=_w.causal, scale=_w.scale,
            focus=_w.focus, stage=_w.stage, head=_w.head, cell=_w.cell, residual=_w.residual,
            sentences=list(_w.sentences), sentence_index=_w.sentence_index,
            layer=_w.layer, n_layers=_w.n_layers, n_heads=_w.n_heads, sink=_w.sink, summary=_w.summary, \
measure=_w.measure,
            scores=_refused(lambda: _w.scores), weights=_array(_w.weights), output=_refused(lambda: _w.output),
            residual_output=_array(_w.residual_output), effective_tokens=_array(_w.effective_tokens),
            sense_resolved=_refused(lambda: _w.sense_resolved), output_spread=_refused(lambda: _w.output_spread),
            cell_arithmetic=_w.cell_arithmetic, head_weights=_heads(_w),
            exercise=_w.exercise, guess=_w.guess, revealed=_w.revealed, score=_w.score, goal=_w.goal, step=_w.step,
            model_lambda=_w.model_lambda, difference_map=_w.difference_map,
            layer_numbers=list(_w.layer_numbers), layer_kinds=list(_w.layer_kinds),
            sparse_layers=list(_w.sparse_layers),
        )
with open({path!r}, "wb") as _f:
    _pickle.dump(_found, _f)
"""


@dataclass
class Executed:
    """One notebook, executed: its cells with their outputs, and its widgets' final state."""

    nb: nbformat.NotebookNode
    widgets: dict  # global name -> state (see PROBE)

    @property
    def code_cells(self):
        return [c for c in self.nb.cells if c.cell_type == "code"]

    def printed(self, cell) -> str:
        return "".join(
            o.get("text", "")
            for o in cell.get("outputs", [])
            if o.get("output_type") == "stream" and o.get("name") == "stdout"
        )

    def printed_by(self, fragment: str) -> str:
        """What the code cells whose source contains ``fragment`` printed."""
        cells = [c for c in self.code_cells if fragment in c.source]
        assert cells, f"no code cell contains {fragment!r}"
        return "".join(self.printed(c) for c in cells)

    @property
    def all_printed(self) -> str:
        return "".join(self.printed(c) for c in self.code_cells)

    @property
    def shown(self) -> list:
        """The widgets the notebook shows, in order: their states (a widget shown twice, twice)."""
        by_id = {s["model_id"]: s for s in self.widgets.values()}
        ids = [
            o["data"][WIDGET_VIEW]["model_id"]
            for c in self.code_cells
            for o in c.get("outputs", [])
            if WIDGET_VIEW in o.get("data", {})
        ]
        return [by_id[i] for i in ids if i in by_id]

    @property
    def markdown(self) -> str:
        return "\n\n".join(c.source for c in self.nb.cells if c.cell_type == "markdown")


def command(path) -> list:
    """The requirements of the one `pip install ...` the notebook's first markdown cell names."""
    first = next(c for c in nbformat.read(path, as_version=4).cells if c.cell_type == "markdown")
    commands = re.findall(r"`pip install ([^`]+)`", first.source)
    assert len(commands) == 1, f"{path.name}'s first markdown cell names {len(commands)} pip commands, not one"
    return shlex.split(commands[0])


def installed_by(requirements) -> set:
    """The distributions these requirements install, names normalised: attnwidget's own extras as
    pyproject.toml declares them, every other distribution's requirements as installed here."""
    names, seen, todo = set(), set(), [Requirement(r) for r in requirements]
    while todo:
        req = todo.pop()
        name = canonicalize_name(req.name)
        names.add(name)
        for extra in ("", *req.extras):
            if (name, extra) in seen:
                continue
            seen.add((name, extra))
            if name == "attnwidget":
                todo += map(Requirement, EXTRAS[extra] if extra else PROJECT["dependencies"])
                continue
            try:
                wanted = metadata.requires(name) or []
            except metadata.PackageNotFoundError:
                wanted = []
            todo += [r for r in map(Requirement, wanted) if r.marker is None or r.marker.evaluate({"extra": extra})]
    return names


def needs(path):
    """Skip a notebook whose command installs something missing here, saying the command; in the
    environment ATTNWIDGET_KERNEL_PYTHON names nothing is skipped (make demo's must run them all)."""
    if KERNEL_PYTHON:
        return
    wanted = command(path)
    named = set()  # what the command names, attnwidget's extras opened
    for r in map(Requirement, wanted):
        named |= {Requirement(d).name for e in r.extras for d in EXTRAS[e]} if r.name == "attnwidget" else {r.name}
    for name in sorted(named):
        try:
            metadata.version(name)
        except metadata.PackageNotFoundError:
            pytest.skip(f"{path.name} needs {name}: pip install {shlex.join(wanted)}")


def view(requirements, folder: pathlib.Path) -> pathlib.Path:
    """A folder of links to the installed files of what these requirements install, and of the
    kernel's own: a Python started with -S and this folder (and src/) as its path imports nothing else."""
    site = folder / "site"
    site.mkdir()
    for name in sorted(installed_by([*requirements, "ipykernel"]) - {"attnwidget"}):
        try:
            files = metadata.distribution(name).files or []
        except metadata.PackageNotFoundError:
            continue  # (a requirement whose marker holds, not installed here: needs() skips on a missing one)
        base = pathlib.Path(metadata.distribution(name).locate_file(""))
        for top in {f.parts[0] for f in files} - {"..", "__pycache__"}:  # (.. holds its scripts)
            if not top.endswith(".pth") and not (site / top).exists() and (base / top).exists():
                (site / top).symlink_to(base / top)
    return site


def kernel(path, folder: pathlib.Path) -> KernelManager:
    """A kernel that sees only what the notebook's command installs (see view), or one of
    ATTNWIDGET_KERNEL_PYTHON's, whole; its spec in folder."""
    if KERNEL_PYTHON:
        argv, env = [KERNEL_PYTHON], {}
    else:
        argv = [sys.executable, "-S"]
        env = {"PYTHONPATH": os.pathsep.join([str(view(command(path), folder)), str(ROOT / "src")])}
    spec = folder / "kernels" / "notebook"
    spec.mkdir(parents=True)
    argv += ["-m", "ipykernel_launcher", "-f", "{connection_file}"]
    (spec / "kernel.json").write_text(json.dumps({"argv": argv, "env": env, "display_name": path.name}))
    return KernelManager(kernel_name="notebook", kernel_spec_manager=KernelSpecManager(kernel_dirs=[str(spec.parent)]))


@functools.cache
def executed(name: str) -> Executed:
    """Execute notebooks/<name> once (per test session) and return what it did."""
    path = NOTEBOOK_DIR / name
    needs(path)
    nb = nbformat.read(path, as_version=4)
    with tempfile.TemporaryDirectory() as tmp:
        dump = pathlib.Path(tmp) / "widgets.pickle"
        nb.cells.append(nbformat.v4.new_code_cell(PROBE.replace("{path!r}", repr(str(dump)))))
        km = kernel(path, pathlib.Path(tmp))
        try:
            NotebookClient(nb, km=km, timeout=600, resources={"metadata": {"path": str(path.parent)}}).execute()
        finally:
            if km.has_kernel:
                km.shutdown_kernel(now=True)
        nb.cells.pop()  # the probe is not the notebook's
        with open(dump, "rb") as f:
            widgets = pickle.load(f)
    return Executed(nb, widgets)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_runs(path):
    run = executed(path.name)  # raises CellExecutionError on any failing cell
    views = [o for c in run.code_cells for o in c.get("outputs", []) if WIDGET_VIEW in o.get("data", {})]
    assert views, f"{path.name} shows no widget"
    errors = [o for c in run.code_cells for o in c.get("outputs", []) if o.get("output_type") == "error"]
    assert not errors


def test_the_course_notebooks_are_all_here():
    assert [p.name for p in NOTEBOOKS] == [
        "01_attention_lab.ipynb",
        "02_attention_visually.ipynb",
        "03_real_model.ipynb",
        "04_cross_attention.ipynb",
        "04_practice.ipynb",
        "05_head_atlas.ipynb",
        "06_position_and_images.ipynb",
        "07_differential_attention.ipynb",
        "08_hybrid_and_sparse_attention.ipynb",
        "09_long_context.ipynb",
        "10_why_a_head_attends.ipynb",
    ]


# --- what each notebook needs, and the environment make demo makes -----------------------------


def test_a_notebook_sees_only_what_its_command_installs():
    # notebook 06's image processor needs Pillow: a kernel that sees only `pip install attnwidget`
    # finds no PIL, as on a machine where nothing else was installed
    with tempfile.TemporaryDirectory() as tmp:
        site = view(["attnwidget"], pathlib.Path(tmp))
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(ROOT / "src")])}
        code = "import importlib.util as u, attnwidget, ipykernel; print(u.find_spec('PIL'), u.find_spec('torch'))"
        run = subprocess.run([sys.executable, "-S", "-c", code], env=env, capture_output=True, text=True, check=True)
    assert run.stdout.split() == ["None", "None"]


def test_the_demo_extra_installs_what_every_notebook_needs():
    demo = installed_by(["attnwidget[demo]"])
    assert "jupyterlab" in demo
    for path in NOTEBOOKS:
        wanted = command(path)
        assert installed_by(wanted) <= demo, f"{path.name} needs {sorted(installed_by(wanted) - demo)}"
    # torch pinned as the test environment pins it: an open range lets pip choose a multi-GB CUDA build
    torch = lambda extra: [str(r.specifier) for r in map(Requirement, EXTRAS[extra]) if r.name == "torch"]
    assert torch("demo") == torch("test") == ["==2.13.0"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_no_cell_writes_in_the_error_style_or_draws_a_progress_bar(path):
    # a model's loading bar written to stderr reads as an error in a notebook
    for i, cell in enumerate(executed(path.name).code_cells):
        for out in cell.get("outputs", []):
            assert out.get("name") != "stderr", f"{path.name}, code cell {i}: {out.get('text', '')[:300]}"
            shown = out.get("data", {}).get("text/plain", "")
            assert not re.search(r"\d+%\|", shown), f"{path.name}, code cell {i} shows a progress bar: {shown}"


# Figures the text gives rather than finds (a temperature, a slope, a threshold, a product of them):
# each is written in a cell's code; every other figure the text quotes is one its cells print.
GIVEN = {
    "01_attention_lab.ipynb": {"0.1", "0.10", "0.20"},  # the temperatures the text sets
    "05_head_atlas.ipynb": {"0.5", "0.1"},  # thresholds, checked in test_notebook_patterns.py
    "06_position_and_images.ipynb": {"2.5"},  # five places × the slope 0.5
}
FIGURE = r"(?<![\w.])[−-]?\d+\.\d+(?![\w.]*\d)"  # a number with decimals, not part of a longer one


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_every_figure_the_text_quotes_is_one_its_cells_print(path):
    run = executed(path.name)
    minus = lambda figures: [f.replace("-", "−") for f in figures]  # the text writes a minus sign
    printed = set(minus(re.findall(FIGURE, run.all_printed)))
    quoted = minus(re.findall(FIGURE, run.markdown))
    missing = [f for f in quoted if f not in printed and f not in GIVEN.get(path.name, set())]
    assert not missing, f"{path.name} quotes {missing}, which none of its cells prints"


def test_notebook_10_says_what_makes_bank_read_river_as_its_cells_print():
    run = executed("10_why_a_head_attends.ipynb")
    text = " ".join(re.sub(r"[*_`\"“”]", "", run.markdown).split())  # as a reader reads it
    minus = lambda figure: figure.replace("-", "−")  # the text writes a minus sign
    w = run.widgets["w"]
    bank, river, money = (w["tokens"].index(t) for t in ("bank", "river", "money"))
    assert (w["layer"], w["focus"], tuple(w["cell"])) == (1, bank, (bank, river))
    # every head of layer 1 gives river all of bank's weight and money none; the one shown is the first
    reads = w["head_weights"][:, bank]
    assert (reads[:, river] > 0.995).all() and (reads[:, money] < 0.005).all()
    assert w["head"] == int(reads[:, river].argmax()) == 0
    assert "In layer 1 every head gives river all of bank's weight (1.00, to two decimals)" in text
    assert f"we follow head {w['head']}, the first of them" in text
    expects = dict(re.findall(r"(\w+) (\d\.\d\d)", run.printed_by("TEXT = ").splitlines()[0]))
    assert f"The model expects fish ({expects['fish']}) or water ({expects['water']})" in text
    # the pairs add up to the model's score, the one the widget shows at the cell
    said = run.printed_by("parts = w.score_parts")
    total, score, shown = re.search(r"pairs sum to (\S+); the model's score (\S+), the widget's (\S+)", said).groups()
    assert total == score == shown == f"{w['scores'][bank, river]:.4f}"
    assert f"The 49 pairs add up to {total}" in text and "7 query parts × 7 key parts" in said
    largest = re.search(r"score \S+\n  (\S+)  query: layer 0 head 2 × key: layer 0 MLP\n", said).group(1)
    assert f"layer 0 head 2 in bank's query times layer 0's MLP in river's key, {largest}" in text
    by_layer = run.printed_by("parts.by_layer()")
    pair = lambda query, key: re.search(rf"\n  (\S+)  query: {query} × key: {key}\n", by_layer).group(1)
    assert f"layer 0 × layer 0 gives {pair('layer 0', 'layer 0')}" in text
    river_part, bank_part = (pair("layer 0", "the embedding of 'river'"), pair("the embedding of 'bank'", "layer 0"))
    assert f"river's embedding times layer 0's parts of the query gives {river_part}" in text
    assert f"bank's embedding times layer 0's parts of the key {bank_part}" in text
    # river, not money: every query part turns sign; the keys' layer 0 MLP and head 3 parts make the difference
    compared = run.printed_by("against = ")
    against = f"{w['scores'][bank, money]:.2f}"
    assert re.search(rf"query {bank} × key {money}: score (\S+)", compared).group(1) == against
    assert f"money scores {minus(against)}" in text
    query, key = (
        {name: (a, b) for name, a, b in re.findall(r"^  (.+?)\s+([+-]\d+\.\d+)\s+([+-]\d+\.\d+)$", side, re.M)}
        for side in compared.split("each part, summed over the other side")[1].split("the key's parts:")
    )
    assert len(query) == len(key) == 7 and all(float(a) > 0 > float(b) for a, b in query.values())
    assert max(query.values(), key=lambda ab: float(ab[0])) == query["layer 0 head 2"]
    assert "layer 0 head 2's part {} and {}, its largest".format(*map(minus, query["layer 0 head 2"])) in text
    mlp, head3, own = key["layer 0 MLP"], key["layer 0 head 3"], key["the embedding of the key"]
    assert float(mlp[0]) > 0 > float(mlp[1]) and float(head3[0]) > 0 > float(head3[1])
    assert "river's layer 0 MLP part gives {}, money's {}".format(*map(minus, mlp)) in text
    assert "layer 0 head 3's part {} and {}".format(*map(minus, head3)) in text
    assert "The keys' own embeddings give {} and {}".format(*map(minus, own)) in text
    # what layer 0 read just before bank, river and money
    before = run.printed_by("w.layer = 0").splitlines()
    at = lambda word: dict(re.findall(r"head (\d) (\d\.\d\d)", next(s for s in before if s.startswith(f"at {word},"))))
    assert f"At river, layer 0 head 3 puts {at('river')['3']} on the; at money, {at('money')['3']} on no" in text
    assert f"heads 0 and 2 read the ({at('bank')['0']} and {at('bank')['2']})" in text
    own_query = query["the embedding of 'bank'"][0]
    assert f"bank's own embedding gives {own_query}" in text
    # the whole row
    share = re.search(r"(\S+)%  query: layer 0 × key: layer 0", run.printed_by("row = w.score_parts(bank)")).group(1)
    assert f"layer 0 × layer 0 makes {share}% of the terms" in text
