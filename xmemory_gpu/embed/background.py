"""Models loaded once per process, in a background thread or by the first caller that needs them.

``shared_load(key, loader)`` gives the one ``ModelLoad`` of ``key`` in this process (two engines, or a
server and an MCP endpoint in one process, share a model): ``start()`` runs ``loader`` in a thread and
returns at once; ``result()`` waits for it (or runs it in the calling thread when nothing started it)
and returns its value, or raises ``EmbedderLoadError`` naming the model and the cause. A load that
ends runs at most once: a loader's exception is the model's answer until the process restarts. A
load cut short (``KeyboardInterrupt``, ``SystemExit``) is re-raised to the thread that ran it and
the load goes back to not begun, so a later call loads afresh; a waiter takes the load over.

A process forked while a load is unfinished gets it back as not begun (no thread in the child runs
it), and fresh locks, so its first use loads the model in the child.

The thread is not a daemon: a process that exits while a model loads waits for the load to end
instead of stopping the thread inside a C extension (torch's import, a forward).
"""

from __future__ import annotations

import os
import threading
import weakref
from collections.abc import Callable, Hashable
from typing import Any


class EmbedderLoadError(RuntimeError):
    """Loading an embedder's model failed (in the background or in the caller)."""


class ModelLoad:
    """One model's load: ``loader()`` run until it returns or raises an ``Exception``; its value or
    that error kept."""

    def __init__(self, label: str, loader: Callable[[], Any]) -> None:
        self.label = label
        self._loader: Callable[[], Any] | None = loader
        self._lock = threading.Lock()
        self._attempt = threading.Event()  # set when the current attempt ends or is cut short
        self._started = False  # an attempt is running
        self._finished = False  # a value or an error is kept
        self._runner: int | None = None  # the thread running the attempt
        self._value: Any = None
        self._error: Exception | None = None
        with _LOADS_LOCK:
            _ALL.add(self)

    def _claim(self) -> tuple[bool, threading.Event]:
        """(True for the one caller that is to run the loader, the current attempt's event)."""
        with self._lock:
            if self._started or self._finished:
                return False, self._attempt
            self._started = True
            return True, self._attempt

    def _run(self, attempt: threading.Event) -> None:
        self._runner = threading.get_ident()
        loader = self._loader
        assert loader is not None  # only an unfinished load is claimed
        try:
            value = loader()
        except Exception as exc:  # kept and raised to every caller of result()
            self._end(attempt, None, exc)
        except BaseException:  # cut short: not the model's answer
            self._reset(attempt)
            raise
        else:
            self._end(attempt, value, None)

    def _end(self, attempt: threading.Event, value: Any, error: Exception | None) -> None:
        with self._lock:
            if not self._finished:
                self._value, self._error, self._finished = value, error, True
                self._loader = None  # its closure need not outlive the load
            self._started = False
            current = self._attempt
        attempt.set()
        current.set()

    def _reset(self, attempt: threading.Event) -> None:
        """Back to not begun after an attempt cut short; its waiters wake and one of them loads."""
        with self._lock:
            if attempt is not self._attempt:  # a stale attempt (reset by a fork): nothing to undo
                return
            self._started = False
            self._runner = None
            self._attempt = threading.Event()
        attempt.set()

    def _after_fork_in_child(self) -> None:
        self._lock = threading.Lock()
        if self._finished or not self._started or self._runner == threading.get_ident():
            return  # ended, not begun, or run by the thread that forked (it goes on in the child)
        self._started = False
        self._runner = None
        self._attempt = threading.Event()

    def start(self) -> None:
        """Begin loading in a background thread (nothing when a load began already); returns at once."""
        mine, attempt = self._claim()
        if mine:
            threading.Thread(
                target=self._run, args=(attempt,), name=f"xmemory-load {self.label}", daemon=False
            ).start()

    @property
    def started(self) -> bool:
        """True while a load runs or once it ended."""
        return self._started or self._finished

    @property
    def ready(self) -> bool:
        """True once the load ended (loaded or failed)."""
        return self._finished

    @property
    def state(self) -> str:
        """``idle`` (not begun), ``loading``, ``ready`` or ``failed``: for a health check."""
        if not self._finished:
            return "loading" if self._started else "idle"
        return "failed" if self._error is not None else "ready"

    def result(self) -> Any:
        """The loaded value; waits for a load in progress, runs the loader here when none began (or
        when the one waited for was cut short)."""
        while not self._finished:
            mine, attempt = self._claim()
            if mine:
                self._run(attempt)
            else:
                attempt.wait()
        if self._error is not None:
            exc = self._error
            raise EmbedderLoadError(
                f"embedder {self.label}: loading the model failed: {type(exc).__name__}: {exc}"
            ) from exc
        return self._value


_LOADS: dict[Hashable, ModelLoad] = {}
_LOADS_LOCK = threading.Lock()
_ALL: weakref.WeakSet[ModelLoad] = weakref.WeakSet()  # every load alive, for the fork hook


def shared_load(key: Hashable, label: str, loader: Callable[[], Any]) -> ModelLoad:
    """The process's ``ModelLoad`` for ``key`` (created with ``loader`` the first time ``key`` is asked
    for; later callers' ``loader`` is not used)."""
    with _LOADS_LOCK:
        load = _LOADS.get(key)
    if load is None:
        candidate = ModelLoad(label, loader)
        with _LOADS_LOCK:
            load = _LOADS.setdefault(key, candidate)
    return load


def forget_loads() -> None:
    """Drop every shared load (tests; a model still referenced by an embedder stays alive)."""
    with _LOADS_LOCK:
        _LOADS.clear()


def _after_fork_in_child() -> None:
    global _LOADS_LOCK
    _LOADS_LOCK = threading.Lock()
    for load in list(_ALL):
        load._after_fork_in_child()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


__all__ = ["EmbedderLoadError", "ModelLoad", "forget_loads", "shared_load"]
