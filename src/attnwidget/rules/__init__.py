"""The widget's rules, on plain state: what a change may be, and what follows from it.

No traitlets, no widget, no numpy arithmetic: a state is a dict of every trait's value (arrays
are only looked at for their shape, and compared by identity), and a change is a dict of the
values asked for. ``settle(state, change, sources)`` returns the complete new state, with every
follow-up made (arrays that no longer fit dropped, indices moved inside, a sentence's or layer's
arrays swapped in, causal on while writing, an exercise restarted), or raises :class:`Refused`
with the message a user reads. ``validate`` gives that message, or None; ``settle_checked``
also refuses numbers whose scores would overflow float64.

``values.py`` holds the names, limits and messages and the checks of one value; ``layers.py`` a
model's layers by their own numbers; ``settle.py`` the whole change. ``js/rules.js`` is the same
module for the page, with the same names and the same messages; a differential test
(tests/test_rules_contract.py) runs both on generated cases and compares every field. A rule
changed on one side only fails it.

``sources`` gives what a follow-up brings in (None when there is nothing to bring):
``sentence(i)`` → dicts of traits (a model's text: its tokens, bias, opening step and every
layer's stacked arrays, as a block's), ``layer(block, i, text)`` → a layer's traits (``text``: the
model's text shown, 0 when it has one), ``block(name)`` → the block's traits and its model
arrays, ``basis(v)`` → the value axes of new values.
"""

from __future__ import annotations

from .layers import held_layer as held_layer
from .layers import layer_index as layer_index
from .layers import layer_number as layer_number
from .settle import may_write as may_write
from .settle import other_text as other_text
from .settle import page_may_set as page_may_set
from .settle import settle as settle
from .settle import settle_checked as settle_checked
from .settle import validate as validate
from .values import *  # noqa: F403  (the names, limits, messages and one-value checks)
from .values import _dims as _dims  # (traits.Matrix checks an array's dimensions with the rules' own)
from .values import _is_int as _is_int  # (other modules check indices with it)
