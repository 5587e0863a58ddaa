"""AttentionWidget as each of its parts sees it: one interface the type checker holds every part to.

The widget is made of parts, each a class in a module of its own (shown.py, research.py,
from_models.py, live.py) that reaches the others' members through ``self``. Each part is typed
against :class:`Widget` (its base for the type checker; ``object`` at run time), so every such
reach is checked: a misspelt field or member, or a part giving a member another type than this
says, fails ``mypy``. The fields come from the state's declaration (state_types.py, generated);
the members here are those one part gives and another uses, and the traits' machinery they call.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any, Protocol

from .state_types import StateFields

if TYPE_CHECKING:
    import numpy as np

    from .inputs import Inputs
    from .sources import Sources


class Widget(StateFields, Protocol):
    """The fields, and the members the parts give each other."""

    # --- the traits' machinery (traitlets, ipywidgets, sync.py) ---
    _trait_values: dict[str, Any]
    _own: frozenset[str]

    def set_trait(self, name: str, value: Any) -> None: ...
    def hold_trait_notifications(self) -> contextlib._GeneratorContextManager[None]: ...
    def send_state(self, key: str | list[str] | None = None) -> None: ...
    def send(self, content: dict, buffers: list | None = None) -> None: ...
    def on_msg(self, callback: Any, remove: bool = False) -> None: ...
    def get_state(self, key: Any = None, drop_defaults: bool = False) -> dict: ...
    def close(self) -> None: ...
    def _preset(self, **values: Any) -> None: ...

    # --- widget.py and from_models.py: the state as the rules see it, and what a model's widget reads ---
    _sources: Sources
    _device: Any  # a model's device, where the views of its layers are computed (None: numpy's)
    _prompt_lengths: list[int | None]  # each text's opening step

    @classmethod
    def _plain(cls, values: dict) -> dict: ...

    # --- shown.py: the head shown ---
    def _rows(self) -> int: ...
    @property
    def n_heads(self) -> int: ...
    @property
    def weights(self) -> np.ndarray: ...

    # --- research.py: the views computed here, and the caches they keep ---
    _effects: dict
    _effect_mode: str

    def _start_research(self) -> None: ...
    def _inputs(self, text: int | None = None, state: dict | None = None) -> Inputs: ...
    def _answer(self, name: str, begin: bool = True) -> None: ...
    def _effect_key(self) -> tuple: ...
    def _effects_kept(self) -> Any: ...
    def _reader(self) -> Any: ...
    def _new_summary(self, summary: str, values: dict) -> None: ...
    def head_effects(self, mode: str = "zero", method: str = "exact") -> np.ndarray: ...

    # --- live.py: what a live page holds ---
    def _text_switched(self) -> None: ...
