"""Models loaded once per process, in a background thread or by the first caller that needs them.

``shared_load(key, loader)`` gives the one ``ModelLoad`` of ``key`` in this process (two engines, or a
server and an MCP endpoint in one process, share a model): ``start()`` runs ``loader`` in a thread and
returns at once; ``result()`` waits for it (or runs it in the calling thread when nothing started it)
and returns its value, or raises ``EmbedderLoadError`` naming the model and the cause. A load runs at
most once; a failed one is not retried (the error is the model's answer until the process restarts).

The thread is not a daemon: a process that exits while a model loads waits for the load to end
instead of stopping the thread inside a C extension (torch's import, a forward).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable
from typing import Any


class EmbedderLoadError(RuntimeError):
    """Loading an embedder's model failed (in the background or in the caller)."""


class ModelLoad:
    """One model's load: ``loader()`` run once, its value or its error kept."""

    def __init__(self, label: str, loader: Callable[[], Any]) -> None:
        self.label = label
        self._loader = loader
        self._lock = threading.Lock()
        self._done = threading.Event()
        self._started = False
        self._value: Any = None
        self._error: BaseException | None = None

    def _claim(self) -> bool:
        """True for the one caller that is to run the loader."""
        with self._lock:
            if self._started:
                return False
            self._started = True
            return True

    def _run(self) -> None:
        try:
            self._value = self._loader()
        except BaseException as exc:  # noqa: BLE001 - kept and raised to every caller of result()
            self._error = exc
        finally:
            self._loader = None  # type: ignore[assignment]  # its closure need not outlive the load
            self._done.set()

    def start(self) -> None:
        """Begin loading in a background thread (nothing when a load began already); returns at once."""
        if self._claim():
            threading.Thread(target=self._run, name=f"xmemory-load {self.label}", daemon=False).start()

    @property
    def started(self) -> bool:
        return self._started

    @property
    def ready(self) -> bool:
        """True once the load ended (loaded or failed)."""
        return self._done.is_set()

    @property
    def state(self) -> str:
        """``idle`` (not begun), ``loading``, ``ready`` or ``failed``: for a health check."""
        if not self._done.is_set():
            return "loading" if self._started else "idle"
        return "failed" if self._error is not None else "ready"

    def result(self) -> Any:
        """The loaded value; waits for a load in progress, runs the loader here when none began."""
        if self._claim():
            self._run()
        self._done.wait()
        if self._error is not None:
            exc = self._error
            raise EmbedderLoadError(
                f"embedder {self.label}: loading the model failed: {type(exc).__name__}: {exc}"
            ) from exc
        return self._value


_LOADS: dict[Hashable, ModelLoad] = {}
_LOADS_LOCK = threading.Lock()


def shared_load(key: Hashable, label: str, loader: Callable[[], Any]) -> ModelLoad:
    """The process's ``ModelLoad`` for ``key`` (created with ``loader`` the first time ``key`` is asked
    for; later callers' ``loader`` is not used)."""
    with _LOADS_LOCK:
        load = _LOADS.get(key)
        if load is None:
            load = _LOADS[key] = ModelLoad(label, loader)
        return load


def forget_loads() -> None:
    """Drop every shared load (tests; a model still referenced by an embedder stays alive)."""
    with _LOADS_LOCK:
        _LOADS.clear()


__all__ = ["EmbedderLoadError", "ModelLoad", "forget_loads", "shared_load"]
