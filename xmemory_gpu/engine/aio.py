"""``AsyncMemoryEngine``: ``MemoryEngine``'s calls awaited (mem0's ``AsyncMemory``), for an asyncio
application that keeps the memory in process::

    async with AsyncMemoryEngine.open("stores/live") as mem:
        await mem.add("I moved to Porto.", user_id="alice")
        found = await mem.search("Where does Alice live?", user_id="alice", top_k=3)

Each call runs the engine's own method, with the same arguments and answer, on a thread of a pool of
``max_workers`` threads that this object owns, so the event loop never waits for an encoder, a
kernel or the store; calls beyond the pool's size queue. The engine's locks apply as they do
to threads: searches run side by side, writes one at a time, each write one atomic commit. A
cancelled call stops waiting; its engine call runs to its end (a write is committed whole or not at
all, never half). ``aclose`` (or leaving ``async with``) waits for the calls in flight, then closes
the engine and the pool. It implements ``api.AsyncMemoryAPI`` (as ``AsyncMemoryClient`` does)."""

from __future__ import annotations

import asyncio
import functools
import inspect
import os
from collections.abc import Callable, Generator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from ..config import XMemoryConfig
from ..embed import Embedder
from ..llm import Reader
from ..memory.backend import MemoryBackend
from .engine import Limits, MemoryEngine
from .residency import AUTO

# the engine's calls offered awaited, each with the engine method's signature and answer
AWAITED = (
    "add",
    "add_batch",
    "search",
    "search_batch",
    "hits",
    "get",
    "get_all",
    "update",
    "batch_update",
    "delete",
    "batch_delete",
    "delete_all",
    "history",
    "scopes",
    "stats",
    "refresh",
    "flush",
    "reset",
    "warm",
)


class AsyncMemoryEngine:
    """An open ``MemoryEngine`` whose calls are awaited: ``add``, ``add_batch``, ``search``,
    ``search_batch``, ``hits``, ``get``, ``get_all``, ``update``, ``batch_update``, ``delete``,
    ``batch_delete``, ``delete_all``, ``history``, ``scopes``, ``stats``, ``refresh``, ``flush``,
    ``reset``, ``warm`` (each documented on ``MemoryEngine``), ``close`` / ``aclose``. ``engine``: the engine
    (it belongs to this object from now on: ``aclose`` closes it); ``max_workers``: engine calls
    running at once (default: the CPUs, at most 8)."""

    def __init__(self, engine: MemoryEngine, *, max_workers: int | None = None) -> None:
        if not isinstance(engine, MemoryEngine):
            raise ValueError(f"engine: expected a MemoryEngine, got {type(engine).__name__}")
        max_workers = _workers(max_workers)
        self.engine = engine
        self.max_workers = max_workers
        self._pool = ThreadPoolExecutor(max_workers, thread_name_prefix="xmemory-async")
        self._closed = False

    @classmethod
    def open(
        cls,
        path: str | Path | MemoryBackend,
        *,
        embedder: Embedder | str | None = None,
        config: XMemoryConfig | None = None,
        backend: str = "auto",
        read_only: bool = False,
        limits: Limits | None = None,
        stamp_arrival: bool = True,
        reader: Reader | str | None = None,
        max_resident_bytes: int | str | None = AUTO,
        max_workers: int | None = None,
    ) -> _Opening:
        """``MemoryEngine.open`` (the same arguments, documented there) on a thread, awaited:
        ``mem = await AsyncMemoryEngine.open(...)``, or ``async with AsyncMemoryEngine.open(...) as
        mem:`` (closed at the block's end). ``max_workers``: as for the constructor."""
        options = {
            "embedder": embedder,
            "config": config,
            "backend": backend,
            "read_only": read_only,
            "limits": limits,
            "stamp_arrival": stamp_arrival,
            "reader": reader,
            "max_resident_bytes": max_resident_bytes,
        }
        return _Opening(lambda: MemoryEngine.open(path, **options), _workers(max_workers))

    async def _run(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        if self._closed:
            raise RuntimeError("AsyncMemoryEngine: the engine is closed")
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool, functools.partial(fn, *args, **kwargs))

    @property
    def read_only(self) -> bool:
        return self.engine.read_only

    @property
    def quarantined(self) -> dict[str, str]:
        return self.engine.quarantined

    async def close(self) -> None:
        """Wait for the calls in flight, then close the engine and the pool; closing twice is harmless."""
        if self._closed:
            return
        self._closed = True
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, self._shutdown)

    def _shutdown(self) -> None:
        self._pool.shutdown(wait=True)
        self.engine.close()

    async def aclose(self) -> None:
        """``close`` (asyncio's name)."""
        await self.close()

    async def __aenter__(self) -> AsyncMemoryEngine:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


def _workers(max_workers: Any) -> int:
    """The pool's size: a positive integer (None: the CPUs, at most 8)."""
    if max_workers is None:
        return max(1, min(8, os.cpu_count() or 1))
    if isinstance(max_workers, bool) or not isinstance(max_workers, int) or max_workers < 1:
        raise ValueError(f"max_workers: expected a positive integer, got {max_workers!r:.40}")
    return max_workers


def _awaited(name: str) -> Callable[..., Any]:
    """``MemoryEngine.<name>`` as a coroutine method of ``AsyncMemoryEngine`` run on its pool, with
    the engine method's signature and docstring."""
    method = getattr(MemoryEngine, name)

    async def call(self: AsyncMemoryEngine, *args: Any, **kwargs: Any) -> Any:
        return await self._run(getattr(self.engine, name), *args, **kwargs)

    call.__name__ = call.__qualname__ = name
    call.__doc__ = method.__doc__
    call.__signature__ = inspect.signature(method)  # type: ignore[attr-defined]
    return call


for _name in AWAITED:
    setattr(AsyncMemoryEngine, _name, _awaited(_name))


class _Opening:
    """``AsyncMemoryEngine.open``'s answer: awaited, the open engine; as an async context manager,
    the open engine closed at the block's end."""

    def __init__(self, opener: Callable[[], MemoryEngine], max_workers: int | None) -> None:
        self._opener, self._max_workers = opener, max_workers
        self._engine: AsyncMemoryEngine | None = None

    async def _open(self) -> AsyncMemoryEngine:
        engine = await asyncio.get_running_loop().run_in_executor(None, self._opener)
        try:
            return AsyncMemoryEngine(engine, max_workers=self._max_workers)
        except BaseException:
            engine.close()
            raise

    def __await__(self) -> Generator[Any, None, AsyncMemoryEngine]:
        return self._open().__await__()

    async def __aenter__(self) -> AsyncMemoryEngine:
        self._engine = await self._open()
        return self._engine

    async def __aexit__(self, *exc: object) -> None:
        if self._engine is not None:
            await self._engine.close()


__all__ = ["AWAITED", "AsyncMemoryEngine"]
