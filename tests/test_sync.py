"""The private ipywidgets and traitlets names sync.py relies on (it is the only module that
touches any), pinned: each still exists and still behaves as sync.py assumes. `make compat` runs
this file, with the widget's own tests, on the oldest versions pyproject.toml allows."""

import ipywidgets
import pytest
import traitlets
from ipywidgets.widgets import widget as ipw
from test_widget import RecordingComm

from attnwidget import AttentionWidget


def test_the_private_names_sync_uses_exist():
    assert isinstance(ipw.JUPYTER_WIDGETS_ECHO, bool)
    state, paths, buffers = ipw._remove_buffers({"a": {"view": memoryview(b"xy")}, "b": 1})
    assert paths == [["a", "view"]] and state["b"] == 1 and len(buffers) == 1
    for name in ("_should_send_property", "_send", "_trait_from_json", "hold_sync", "send_state"):
        assert callable(getattr(ipywidgets.Widget, name)), name
    assert "_property_lock" in ipywidgets.Widget.class_trait_names()
    for name in ("_notify_trait", "notify_change"):
        assert callable(getattr(traitlets.HasTraits, name)), name
    assert callable(traitlets.TraitType._cross_validate)
    w = AttentionWidget()
    assert isinstance(w._trait_values, dict) and w._cross_validation_lock is False


def test_an_observer_is_told_once_and_the_page_gets_one_message():
    """sync.py replaces notify_change during a change and calls HasTraits' own afterwards."""
    w = AttentionWidget()
    w.comm = RecordingComm()
    seen = []
    w.observe(lambda c: seen.append((c.name, c.old, c.new)), names=["focus", "cell"])
    w.cell = (3, 1)  # the focus follows the cell
    assert seen == [("focus", 0, 3), ("cell", None, (3, 1))] or seen == [("cell", None, (3, 1)), ("focus", 0, 3)]
    ((data, _),) = w.comm.sent
    assert data["method"] == "update" and set(data["state"]) == {"focus", "cell"}


def test_the_pages_lock_is_set_and_cleared_without_telling_observers():
    w = AttentionWidget()
    w.comm = RecordingComm()
    told = []
    w.observe(lambda c: told.append(c.name), names=traitlets.All)
    w.set_state({"focus": 2})
    assert "_property_lock" not in told and w._property_lock == {} and w.focus == 2


def test_close_finishes_before_an_observers_error_is_reported():
    """An observer that raises on close (of the comm going) cannot leave the widget's layout open:
    close finishes, then the observer's error is reported."""
    from attnwidget import AttentionWidget

    w = AttentionWidget()
    layout = w.layout

    def bad(change):
        raise RuntimeError("an observer's bug")

    w.observe(bad, names=["comm"])
    with pytest.raises(RuntimeError, match="an observer's bug"):
        w.close()
    assert layout.comm is None and w.comm is None
