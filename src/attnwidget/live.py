"""What a live page gets of a widget and what it asks of the kernel.

A model's layer travels one head at a time (the head shown: ``get_state``); the page says which
heads it keeps ({"kind": "holding", "view": its name, "layers": [[block, layer, head], ...]}, or
"layers": null when it closes), and a head every view keeps is not sent again. Everything computed
across layers, heads or texts comes through one request:
{"kind": "compute", "view": name}, answered by the widget's ``_answer(name)`` (computed_views.py declares
each view).
"""

from __future__ import annotations

import contextvars
from typing import TYPE_CHECKING, cast

from . import rules
from .computed_views import VIEWS
from .traits import one_head

if TYPE_CHECKING:  # a part of AttentionWidget, typed against the interface of its fields and parts
    from .parts import Widget as _Widget
else:
    _Widget = object

# A model's widget being made: the arrays it is made with are not sent, as they would be whole
# (they go one head at a time once the widget knows them for a model's layer: get_state)
OPENING: contextvars.ContextVar[bool] = contextvars.ContextVar("attnwidget_opening", default=False)


def _on_page_message(widget, content, buffers):
    widget._on_page(content)


class LivePage(_Widget):
    """What a widget's live page holds: the layer shown, one head at a time, and the views it asks
    for (research.py's ``_answer``). Before sync.WholeChanges among the widget's bases: its
    ``_to_send`` and ``get_state`` are the ones the whole-change machinery calls."""

    def __init__(self, **kwargs):
        self._page_holds: dict = {}  # each view's (block, layer, head) whose arrays it keeps: not sent again
        # after a switch of a model's text: the heads sent since (the page's others are another text's)
        self._fresh: set | None = None
        self._raw: tuple | None = None  # whose arrays the page's model holds: the head last sent whole
        super().__init__(**kwargs)
        self.on_msg(_on_page_message)

    def _on_page(self, content) -> None:
        """A message from the page (untrusted): which heads it keeps, or a view it asks for."""
        if not isinstance(content, dict):
            return
        view = content.get("view", "")
        if content.get("kind") == "holding" and isinstance(view, str) and content.get("layers") is None:
            self._page_holds.pop(view, None)  # a view closed
        elif content.get("kind") == "holding" and isinstance(view, str) and isinstance(content["layers"], list):
            if view not in self._page_holds and self.layer_shown:  # a new view: whose arrays the model holds
                shown = tuple(cast(list, self.layer_arrays))  # (set with layer_shown)
                if self._raw != shown:  # another head's (a switch to one every view kept): the head shown, whole
                    self.send_state(["layer_arrays", *(n for n in self._by_head() if getattr(self, n) is not None)])
                    self._raw = shown
                    if self._fresh is not None:
                        self._fresh.add(shown)
                self.send({"kind": "heads", "arrays": list(shown)})
            named = [
                p
                for p in content["layers"]
                if isinstance(p, list) and len(p) == 3 and isinstance(p[0], str) and all(map(rules._is_int, p[1:]))
            ]
            self._page_holds[view] = {(block, int(layer), int(head)) for block, layer, head in named}
        if content.get("kind") == "compute" and isinstance(content.get("view"), str) and content["view"] in VIEWS:
            self._answer(content["view"])

    def _text_switched(self) -> None:
        """Another of a model's texts is shown: what the page keeps, named by (block, layer, head), is the other
        text's."""
        self._fresh = set()

    def _by_head(self) -> tuple:
        """What a live page gets of a model one head at a time: q, k, v, the value axes, and a bias of heads."""
        return rules.by_head({"weights_only": self.weights_only})

    def _to_send(self, names):
        # a head the page keeps: it has the arrays already (layer_arrays tells it which to show);
        # another head shown: its arrays, though Python's (the layer's) are the same
        shown = None if self.layer_arrays is None else tuple(self.layer_arrays)
        kept = bool(self._page_holds) and all(shown in held for held in self._page_holds.values())
        if OPENING.get() or (kept and (self._fresh is None or shown in self._fresh)):
            return names - set(self._by_head())
        sent = names | (
            {n for n in self._by_head() if getattr(self, n) is not None} if "layer_arrays" in names else set()
        )
        if shown is not None and sent & set(self._by_head()):
            self._raw = shown
            if self._fresh is not None:
                self._fresh.add(shown)  # the page keeps this text's arrays of this head now
        return sent

    def get_state(self, key=None, drop_defaults=False):
        """The state as a live page gets it: a model's layer one head at a time (the head shown;
        the rest stay here until the page shows them). Exported pages get whole layers."""
        state = super().get_state(key, drop_defaults=drop_defaults)  # type: ignore[safe-super]  # (sync.WholeChanges')
        if self.layer_shown:
            h = cast(list, self.layer_arrays)[2]
            if set(self._by_head()) & set(state):
                self._raw = tuple(cast(list, self.layer_arrays))
            for name in set(self._by_head()) & set(state):
                state[name] = one_head(state[name], h)
        return state
