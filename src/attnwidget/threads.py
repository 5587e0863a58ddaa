"""Sharing the machine's cores: the research views split their work among threads of their own, with
numpy's BLAS in one thread under each. BLAS threads of its own would crowd the cores, and they keep
spinning for a while after each product, slowing what comes next (12 layers' weights with a 1,024-token
product between each: 1.4 s with BLAS's threads, 1.0 s without)."""

from __future__ import annotations

import contextlib
import os
import threading
from concurrent.futures import ThreadPoolExecutor

LEAST = 256  # fewer rows than this are not worth a thread


@contextlib.contextmanager
def one_blas_thread():
    """A block in which numpy's BLAS runs in one thread (threadpoolctl's limit; nothing without it). The
    limit is the process's: set by the first block to enter (on the BLAS libraries loaded then) and
    lifted by the last to leave, so blocks running at once in several threads (the overview's layers)
    leave BLAS as they found it."""
    global _LIMITED, _INSIDE
    with _LOCK:
        if _INSIDE == 0:
            controller = _controller()
            _LIMITED = None if controller is None else controller.limit(limits=1, user_api="blas")
        _INSIDE += 1
    try:
        yield
    finally:
        with _LOCK:
            _INSIDE -= 1
            if _INSIDE == 0 and _LIMITED is not None:
                _LIMITED.restore_original_limits()
                _LIMITED = None


_LIMITED, _INSIDE, _LOCK = None, 0, threading.Lock()  # the limit set, and how many blocks are in it


def _controller():
    """threadpoolctl's view of the BLAS libraries loaded now, or None: found again each time (a few ms), as
    a library may have loaded another BLAS since (scipy's own OpenBLAS), with or without a new module."""
    try:
        from threadpoolctl import ThreadpoolController
    except ImportError:
        return None
    return ThreadpoolController()


def count() -> int:
    """The cores this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def each(fn, items) -> list:
    """fn of each item, the items shared among the cores (in one BLAS thread each), in order."""
    items = list(items)
    if len(items) < 2 or count() < 2:
        return [fn(item) for item in items]
    with one_blas_thread(), ThreadPoolExecutor(min(len(items), count())) as pool:
        return list(pool.map(fn, items))


def by_rows(n: int, fn) -> None:
    """fn(r0, r1) over a part of range(n) for each core, at once (for sums and products row by row)."""
    parts = min(count(), max(1, n // LEAST))
    bounds = [n * p // parts for p in range(parts + 1)]
    each(lambda p: fn(bounds[p], bounds[p + 1]), range(parts))
