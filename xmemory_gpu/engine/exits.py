"""The interpreter's exit while engine calls run in daemon threads.

CPython before 3.14 ends a thread that takes the GIL back during finalisation (a daemon thread whose
native call returns after the main thread has exited) with ``pthread_exit``: a forced unwind, which
aborts the process (``terminate called without an active exception``, exit status 134) when it meets
a C++ frame that may not throw: a pybind11 GIL release (``csrc/include/xmemory/gil.h`` makes ours
safe), NumPy's hash-based ``unique``, an encoder's torch bindings. So every public call of a
``MemoryEngine`` runs through one ``ExitGate`` (``gate_calls``): when the interpreter exits
(``atexit``: after the non-daemon threads are joined, before finalisation starts) the gate closes,
waits at most ``EXIT_WAIT_S`` for the calls in flight, and holds a daemon thread that starts a call
after that for good, in Python, with no native frame on its stack.
"""

from __future__ import annotations

import atexit
import functools
import inspect
import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

EXIT_WAIT_S = 10.0  # the longest the exit waits for engine calls in flight

C = TypeVar("C", bound=type)


class ExitGate:
    """Engine calls in flight per thread; closed once, at exit."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._calls: dict[int, int] = {}  # thread id -> its calls in flight (a call within a call counts too)
        self._closed = False

    @contextmanager
    def call(self) -> Iterator[None]:
        """The block as one call in flight. After ``close``, a daemon thread's new call never starts
        (its thread waits for the process to end); a call within a call in flight goes on."""
        me = threading.get_ident()
        with self._cond:
            hold = self._closed and me not in self._calls and threading.current_thread().daemon
            if not hold:
                self._calls[me] = self._calls.get(me, 0) + 1
        if hold:
            while True:
                threading.Event().wait()
        try:
            yield
        finally:
            with self._cond:
                n = self._calls.get(me, 1) - 1
                if n > 0:
                    self._calls[me] = n
                else:
                    self._calls.pop(me, None)
                self._cond.notify_all()

    def close(self, timeout: float = EXIT_WAIT_S) -> bool:
        """No new call in a daemon thread from now on; wait up to ``timeout`` seconds for the other
        threads' calls in flight. True when none is left."""
        me = threading.get_ident()
        end = time.monotonic() + timeout
        with self._cond:
            self._closed = True
            while set(self._calls) - {me}:
                left = end - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)
        return True

    def forked(self) -> None:
        """In a forked child: only the forking thread is left (its call in flight, if any, goes on)."""
        me = threading.get_ident()
        self._cond = threading.Condition()
        self._calls = {me: self._calls[me]} if me in self._calls else {}


GATE = ExitGate()
atexit.register(GATE.close)
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=GATE.forked)


def gated(fn: Callable) -> Callable:
    """``fn`` run as one call of ``GATE``."""

    @functools.wraps(fn)
    def call(*args, **kwargs):
        with GATE.call():
            return fn(*args, **kwargs)

    call.__exit_gated__ = True  # type: ignore[attr-defined]
    return call


def gate_calls(cls: C) -> C:
    """Class decorator: every public method of ``cls``, its own or inherited (class methods too),
    runs through ``GATE``."""
    for name in dir(cls):
        value = inspect.getattr_static(cls, name)
        if name.startswith("_"):
            continue
        if inspect.isfunction(value) and not hasattr(value, "__exit_gated__"):
            setattr(cls, name, gated(value))
        elif isinstance(value, classmethod) and not hasattr(value.__func__, "__exit_gated__"):
            setattr(cls, name, classmethod(gated(value.__func__)))
    return cls
