"""Giving the C heap's freed pages back to the system: after an encoder call with large activations,
and after writes to large memories.

A transformer's activations on long texts (attention maps of [batch, heads, T, T]) are freed after
the call, but glibc's allocator keeps the pages: a long-lived process that once embedded long
messages holds hundreds of MB it does not use (measured: 817 MB resident after embedding 1,600 long
passages with all-MiniLM-L6-v2, 414 MB after ``malloc_trim``). A write to a large memory frees its
temporaries the same way (a two-turn add to a memory of 1 M tokens leaves about 60 MB, default
embedder about 80 MB). ``release_freed`` and ``release_after_write`` return them; they are no-ops where
the C library has no ``malloc_trim`` (musl, macOS, Windows)."""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import threading
import time

RELEASE_BYTES = 32 << 20  # activations of at least this size in one batch are worth a trim
# a write whose memories hold at least this many bytes of arrays may be followed by a trim
WRITE_BYTES = 8 << 20
WRITE_INTERVAL_S = 1.0  # ... at most once a second (a trim takes 2-6 ms at 1 M tokens)
_last_write_trim = [float("-inf")]
_write_lock = threading.Lock()


@functools.cache
def _trim():
    name = ctypes.util.find_library("c")
    try:
        fn = ctypes.CDLL(name).malloc_trim if name else None
    except (OSError, AttributeError):
        return None
    if fn is not None:
        fn.argtypes, fn.restype = [ctypes.c_size_t], ctypes.c_int
    return fn


def release_now() -> bool:
    """Return the heap's free pages to the system now; True when the C library could."""
    fn = _trim()
    if fn is None:
        return False
    fn(0)
    return True


def release_freed(activation_bytes: int) -> bool:
    """Return the heap's free pages to the system when a call's largest batch had at least
    ``RELEASE_BYTES`` of activations (smaller calls leave little behind); True when it trimmed."""
    fn = _trim() if activation_bytes >= RELEASE_BYTES else None
    if fn is None:
        return False
    fn(0)
    return True


def release_after_write(nbytes: int) -> bool:
    """After a write whose memories hold ``nbytes`` of arrays: return the heap's free pages when
    ``nbytes`` >= ``WRITE_BYTES`` and no write trimmed in the last ``WRITE_INTERVAL_S`` seconds (the
    cost stays a few ms a second however fast the writes come); True when it trimmed."""
    fn = _trim() if nbytes >= WRITE_BYTES else None
    if fn is None:
        return False
    with _write_lock:
        now = time.monotonic()
        if now - _last_write_trim[0] < WRITE_INTERVAL_S:
            return False
        _last_write_trim[0] = now
    fn(0)
    return True
