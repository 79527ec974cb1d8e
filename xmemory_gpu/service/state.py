"""One app's running parts: its ``ServiceConfig``, its metrics, its engine (open from start-up to
shutdown) and, with coalescing on, the coalescers that answer concurrent searches (and adds) with
one batched engine call. The routes reach it as ``request.app.state.service``."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .. import api
from ..engine import MemoryEngine
from .coalesce import Coalescer
from .framing import MAX_BODY_BYTES
from .metrics import Metrics
from .schemas import MAX_ITEMS, MAX_MESSAGES, MAX_QUERIES

KINDS = ("add", "search")  # the coalesced calls


def search_answer(engine: MemoryEngine, result: Any) -> dict[str, Any]:
    """One query's answer over HTTP (``api.search_answer``: its units as mem0's results)."""
    return api.search_answer(result, engine.hits(result))


@dataclass
class ServiceConfig:
    api_keys: dict[str, frozenset[str] | None] = field(
        default_factory=dict
    )  # key -> allowed user ids (None: all)
    coalesce_ms: float = 2.0
    max_batch: int = 64  # requests per coalesced call
    search_workers: int = max(1, min(4, os.cpu_count() or 1))  # coalesced search batches in flight at once
    max_body_bytes: int = MAX_BODY_BYTES
    max_messages: int = MAX_MESSAGES  # per add request (at most the schema's MAX_MESSAGES)
    max_items: int = MAX_ITEMS  # per batch request (at most MAX_ITEMS)
    max_queries: int = MAX_QUERIES  # per search request (at most MAX_QUERIES)

    def __post_init__(self) -> None:
        for name, ceiling in (
            ("max_messages", MAX_MESSAGES),
            ("max_items", MAX_ITEMS),
            ("max_queries", MAX_QUERIES),
        ):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= ceiling:
                raise ValueError(f"{name}: expected an integer from 1 to {ceiling} (the HTTP schema's cap)")


class Service:
    """The engine (``engine``: an open one, or a factory called at start-up) behind one app, with
    its config and metrics."""

    def __init__(self, engine: MemoryEngine | Callable[[], MemoryEngine], cfg: ServiceConfig) -> None:
        self.cfg = cfg
        self.metrics = Metrics()
        self._source = engine
        self._engine: MemoryEngine | None = None
        self._coalescers: dict[str, Coalescer] = {}

    @property
    def engine(self) -> MemoryEngine:
        if self._engine is None:
            raise RuntimeError("the server is not serving (not started, or shut down)")
        return self._engine

    def search_batch(self, items: list[dict]) -> list[list[dict]]:
        """Search requests' items as one engine call; their answers, in order."""
        e = self.engine
        res = e.search_batch(items)
        self.metrics.inc("engine_search_calls_total")
        self.metrics.inc("searched_queries_total", sum(len(r) for r in res))
        return [[search_answer(e, x) for x in r] for r in res]

    def add_batch(self, items: list[dict]) -> list[dict]:
        """Add requests' items as one engine call (one commit); mem0's answer per item."""
        out = self.engine.add_batch(items, events=True)
        self.metrics.inc("engine_add_calls_total")
        self.metrics.inc("ingested_messages_total", sum(len(a["ids"]) for a in out))
        return out

    async def run(self, kind: str, item: dict) -> Any:
        """``kind`` (add or search) for one request: through its coalescer when coalescing is on,
        else one engine call of its own (in a worker thread)."""
        if kind in self._coalescers:
            return await self._coalescers[kind].submit(item)
        call = self.search_batch if kind == "search" else self.add_batch
        return (await asyncio.to_thread(call, [item]))[0]

    def start(self) -> None:
        """Open the engine (a factory is called) and start the coalescers on the running loop."""
        src = self._source
        self._engine = src() if callable(src) and not isinstance(src, MemoryEngine) else src
        if self.cfg.coalesce_ms <= 0:
            return
        for kind, call, workers in (
            ("search", self.search_batch, self.cfg.search_workers),
            ("add", self.add_batch, 1),
        ):
            self._coalescers[kind] = c = Coalescer(
                call,
                window_s=self.cfg.coalesce_ms / 1e3,
                max_batch=self.cfg.max_batch,
                on_batch=lambda n, kind=kind: self.metrics.inc(f"coalesced_{kind}_requests_total", n),
                workers=workers,
            )
            c.start()
            self.metrics.gauges[f"queue_depth_{kind}"] = lambda c=c: c.depth

    async def stop(self) -> None:
        """Graceful: finish what was accepted (adds first), then commit and close the engine."""
        for kind in KINDS:
            if kind in self._coalescers:
                await self._coalescers[kind].drain()
        if self._engine is not None:
            self._engine.close()
