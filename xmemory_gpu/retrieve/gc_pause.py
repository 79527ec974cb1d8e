"""CPython's cyclic garbage collector paused around one large batched search.

A batched search builds hundreds of thousands of short-lived objects (units, their score dicts and
provenance lists; 885 dev questions: ~250 K) and no reference cycles: reference counting frees them.
The cyclic collector, triggered every 700 allocations, would still traverse them again and again
while they live, and with them every long-lived object of the process (the bank's row caches): a
third of a dev batch's host time (``benchmarks/RESULTS.md``). Pausing it for the call leaves memory
use unchanged; cycles other threads make meanwhile are collected at the first collection after.

The pause nests and is shared by concurrent searches (the collector is process-wide): it ends when
the last one does, and a collector the application disabled before a search stays disabled (one it
disables during a pause is enabled again when the pause ends). Searches that keep overlapping (a
busy server) never leave the pause, so a search ending while others run collects the young
generations (where everything made during the pause is) once the collector has been off for
``MAX_PAUSE_S``: cyclic garbage waits at most that long. A process forked during a pause starts
with the collector on and no pause.
"""

from __future__ import annotations

import gc
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

MIN_QUERIES = 32  # smaller batches make too few objects for the collector to matter: no pause
MAX_PAUSE_S = 1.0  # the longest the collector stays off while searches overlap

_lock = threading.Lock()
_depth = 0  # searches inside the pause now
_ours = False  # whether the pause disabled the collector (it was enabled when the first began)
_since = 0.0  # when the collector last ran or was disabled (monotonic seconds)


@contextmanager
def gc_paused(active: bool = True) -> Iterator[None]:
    """The collector off while the block runs (``active=False``: a no-op)."""
    global _depth, _ours, _since
    if not active:
        yield
        return
    with _lock:
        if _depth == 0:
            _ours = gc.isenabled()
            if _ours:
                gc.disable()
                _since = time.monotonic()
        _depth += 1
    try:
        yield
    finally:
        collect = False
        with _lock:
            _depth -= 1
            if _ours and _depth == 0:
                gc.enable()
                _ours = False
            elif _ours and time.monotonic() - _since > MAX_PAUSE_S:
                collect, _since = True, time.monotonic()
        if collect:
            gc.collect(1)


def _after_fork_in_child() -> None:
    """The child has none of the parent's searches: no pause, the collector as before the pause."""
    global _depth, _ours, _lock
    _lock = threading.Lock()
    if _ours:
        gc.enable()
    _depth, _ours = 0, False


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
