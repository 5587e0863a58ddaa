"""Progress of long work in the kernel (reading a large model), said in the notebook while it
runs and emptied when it ends, so an executed document keeps nothing of it."""

from __future__ import annotations

import contextlib
import time

AFTER = 1.0  # seconds: shorter work says nothing
EVERY = 0.25  # seconds between two updates


@contextlib.contextmanager
def progress(what: str, total: int):
    """A ``step(done)`` that says "what done of total" in the cell's output once the work has
    taken AFTER seconds (at most every EVERY seconds), and clears it at the end."""
    start = last = time.perf_counter()
    shown = None

    def step(done: int) -> None:
        nonlocal shown, last
        now = time.perf_counter()
        if now - start < AFTER or (shown is not None and now - last < EVERY):
            return
        last, text = now, f"{what} {min(done, total)} of {total}"
        if shown is None:
            shown = _display(text)
        elif shown:
            shown.update({"text/plain": text}, raw=True)

    try:
        yield step
    finally:
        if shown:
            shown.update({"text/plain": ""}, raw=True)


def _display(text: str):
    """A display handle in a running notebook kernel, else False (a script: nothing to say it in)."""
    try:
        from IPython import get_ipython
        from IPython.display import display
    except ImportError:
        return False
    if getattr(get_ipython(), "kernel", None) is None:
        return False
    return display({"text/plain": text}, raw=True, display_id=True) or False
