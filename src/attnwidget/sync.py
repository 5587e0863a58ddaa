"""Whole changes: the one place that touches ipywidgets' and traitlets' private names.

Every change to a widget's own traits, from Python or from the page, is a transaction: the
values asked are gathered, the widget settles them (its rules), and then either every trait is
put back exactly as it was, or the page gets one complete message and the observers are told.
tests/test_sync.py pins the private names used here; `make compat` runs it on the oldest versions allowed.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator

import anywidget
import traitlets
from ipywidgets.widgets.widget import JUPYTER_WIDGETS_ECHO, _remove_buffers

from . import rules


class WholeChanges(anywidget.AnyWidget):
    """An anywidget whose own traits change whole. A subclass gives ``_settle(before, changed)``
    (write the follow-ups of the traits in ``changed``, or raise TraitError or rules.Refused) and
    may give ``_to_send(names)`` (which of the changed names the page needs)."""

    _own: frozenset = frozenset()
    _holding, _committed, _page_keys = False, False, ()  # (class defaults: read before __init__ has run)

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        cls._own = frozenset(cls.class_trait_names()) - frozenset(anywidget.AnyWidget.class_trait_names())

    def _settle(self, before: dict, changed: list, values: dict) -> None:
        """The widget's own follow-ups to the traits in ``changed``, written into ``values`` (every trait's,
        as they stand)."""

    def _to_send(self, names: set) -> set:
        return names

    @contextlib.contextmanager
    def hold_trait_notifications(self) -> Iterator[None]:
        """Every change made inside is applied whole or not at all.

        Validation runs on the final values together; the widget's own derived state is settled
        before anyone is told; on any error every trait is put back exactly as it was. Then the
        page is sent one complete message (at once, unless an outer hold_sync gathers more), and
        then observers run: one that raises cannot stop the rest of them, nor the page, from
        seeing the change.
        """
        if self._holding:  # nested: the outermost one does the work
            yield
            return
        values = self._trait_values
        before, changed = dict(values), dict[str, object]()
        with self.hold_sync():
            self.notify_change = lambda change: changed.setdefault(change.name, change.old)
            self._holding = self._cross_validation_lock = True
            try:
                yield
                try:
                    self._settle(before, list(changed), values)
                except traitlets.TraitError:
                    raise
                except rules.Refused as err:
                    raise traitlets.TraitError(str(err)) from None
                except Exception as err:  # numpy failing on values it was given: a refusal like any other
                    raise traitlets.TraitError(
                        f"this change could not be applied ({type(err).__name__}: {err}); nothing was changed."
                    ) from err
                for name in self._own:  # what the follow-ups changed is news too
                    if (
                        name not in changed
                        and name in values
                        and (name not in before or not rules.same(values[name], before[name]))
                    ):
                        changed[name] = before.get(name)
                for name in [
                    n for n in changed if n not in self._own
                ]:  # other traits (layout and such): traitlets' own checks
                    getattr(type(self), name)._cross_validate(self, values[name])
            except BaseException:
                for name in changed:  # every trait back to its value before, exactly
                    if name in before:
                        values[name] = before[name]
                    else:
                        values.pop(name, None)
                raise
            finally:
                self._holding = self._cross_validation_lock = False
                del self.notify_change
            self._committed = True
            news = [(n, old, values.get(n)) for n, old in changed.items()]
            news = [(n, old, new) for n, old, new in news if not rules.same(old, new)]
            # queued for the one message: every change, and every key the page sent whose value is
            # not the page's (ipywidgets compares each with what the page sent: no echoes)
            for name in self._to_send({n for n, _, _ in news} | set(self._page_keys)):
                if name in self.keys:
                    self._should_send_property(name, getattr(self, name))
        errors = []
        for name, old, new in news:
            if not rules.same(values.get(name), new):
                continue  # an earlier observer changed it again, and that change told its own news
            try:
                # straight to the observers: ipywidgets' own notify_change would send it a second time
                traitlets.HasTraits.notify_change(
                    self, traitlets.Bunch(name=name, old=old, new=new, owner=self, type="change")
                )
            except Exception as err:  # an observer's bug: the others still run
                errors.append(err)
        for other in errors[1:]:
            self.log.error("Another observer raised too: %r", other, exc_info=other)
        if errors:
            raise errors[0]

    def _whole(self, name):
        """A change to one of the widget's own traits is a whole change (above); others, as they are."""
        own = (
            name in self._own and not self._holding and not self._cross_validation_lock
        )  # (traitlets' own __init__ holds)
        return self.hold_trait_notifications() if own else contextlib.nullcontext()

    def __setattr__(self, name, value):
        with self._whole(name):
            super().__setattr__(name, value)

    def set_trait(self, name, value):  # set_trait skips only the read-only check
        with self._whole(name):
            super().set_trait(name, value)

    def set_state(self, sync_data):
        """Apply a message from the page, an untrusted source. Read-only, private, unknown and
        ipywidgets' own keys are refused, and so is a value that cannot be read or validated:
        a refused message changes nothing, and the page is put back on Python's state for the
        keys it sent. A value the widget settles otherwise (e.g. a cell outside the focused
        row) is sent back too."""
        self._committed = False
        if JUPYTER_WIDGETS_ECHO:  # the page's own values, acknowledged first, as ipywidgets does
            echo, paths, buffers = _remove_buffers({k: v for k, v in sync_data.items() if k in self.keys})
            if echo:
                self._send({"method": "echo_update", "state": echo, "buffer_paths": paths}, buffers=buffers)
        try:
            rules.page_may_set(sync_data)
            values = {
                k: self.trait_metadata(k, "from_json", self._trait_from_json)(v, self) for k, v in sync_data.items()
            }
            self._page_keys = list(values)
            with self._page_values(sync_data), self.hold_trait_notifications():
                for name, value in values.items():
                    setattr(self, name, value)
        except Exception as err:
            if self._committed:  # the change was made; an observer of it raised
                self.log.error(
                    "An observer raised on a change from the page (the change was kept): %r", err, exc_info=err
                )
            else:
                self.send_state([k for k in sync_data if k in self.keys])
                self.log.warning("attnwidget refused a message from the page: %s", err)
        finally:
            self._page_keys = ()

    @contextlib.contextmanager
    def _page_values(self, sync_data):
        """ipywidgets' lock on the page's own values (so they are not echoed back), set without
        telling observers: an observer of every trait is the user's, and this is bookkeeping."""
        values = self._trait_values
        values["_property_lock"] = sync_data
        try:
            yield
        finally:
            values["_property_lock"] = {}

    def _preset(self, **values):
        """Values in place before the widget is made (read-only ones the first change is checked against)."""
        self._trait_values.update(values)

    def close(self):
        """Close the widget and the layout ipywidgets made for it, which would outlive it otherwise."""
        layout = self._trait_values.get("layout")
        try:
            super().close()
        finally:  # (an observer of the widget's comm that raises: the layout is closed, then its error told)
            if layout is not None:
                layout.close()

    def __del__(self, _finalizing=sys.is_finalizing):  # bound now: at exit the module's globals are gone
        # Closed widgets are freed, some only at interpreter exit, when ipywidgets' own registry
        # is already gone and its close() would fail: nothing is left to close then.
        if not _finalizing():
            super().__del__()


def store_new(obj, name, new) -> None:
    """Store an array trait's new value and tell of it, without comparing it element by element
    (traitlets compares old and new with ==, which for arrays is a pass over every number)."""
    old = obj._trait_values.get(name)
    obj._trait_values[name] = new
    if new is not old:
        obj._notify_trait(name, old, new)
