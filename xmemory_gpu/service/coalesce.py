"""Request coalescing: concurrent requests arriving within a small window are answered by one
batched engine call (one embedding call, one kernel launch per stage), run in a worker thread so
the event loop keeps accepting. A batch that fails is retried item by item, so one bad request
never fails its neighbours. ``workers`` batches may run at once (searches: as many as cores, so
one batch's Python work overlaps another's kernels); writes use one, so they stay single-writer."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any


class Coalescer:
    def __init__(
        self,
        call: Callable[[list[Any]], list[Any]],
        *,
        window_s: float,
        max_batch: int,
        on_batch: Callable[[int], None] | None = None,
        workers: int = 1,
    ) -> None:
        self.call = call
        self.window_s = window_s
        self.max_batch = max(1, max_batch)
        self.on_batch = on_batch
        self.queue: asyncio.Queue[tuple[Any, asyncio.Future]] = asyncio.Queue()
        self.workers = max(1, workers)
        self._tasks: list[asyncio.Task] = []
        self._closing = False

    @property
    def depth(self) -> int:
        return self.queue.qsize()

    def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._tasks = [loop.create_task(self._run()) for _ in range(self.workers)]

    async def submit(self, item: Any) -> Any:
        if self._closing:
            raise RuntimeError("the server is shutting down")
        fut: asyncio.Future = asyncio.get_running_loop().create_future()
        await self.queue.put((item, fut))
        return await fut

    async def drain(self) -> None:
        """Finish every queued request, then stop the worker (graceful shutdown)."""
        self._closing = True
        await self.queue.join()
        for t in self._tasks:
            t.cancel()

    async def _run(self) -> None:
        while True:
            first = await self.queue.get()
            batch = [first]
            deadline = time.monotonic() + self.window_s
            while len(batch) < self.max_batch:
                timeout = deadline - time.monotonic()
                if timeout <= 0:
                    if self.queue.empty():
                        break
                    batch.append(self.queue.get_nowait())
                    continue
                try:
                    batch.append(await asyncio.wait_for(self.queue.get(), timeout))
                except asyncio.TimeoutError:
                    break
            await self._serve(batch)
            for _ in batch:
                self.queue.task_done()

    async def _serve(self, batch: list[tuple[Any, asyncio.Future]]) -> None:
        if self.on_batch:
            self.on_batch(len(batch))
        try:
            results = await asyncio.to_thread(self.call, [item for item, _ in batch])
        except Exception:  # noqa: BLE001 - isolate: retry one by one, each gets its own outcome
            if len(batch) == 1:
                results = None
            else:
                for one in batch:
                    await self._serve([one])
                return
        if results is None:
            item, fut = batch[0]
            try:
                res = await asyncio.to_thread(self.call, [item])
                fut.set_result(res[0]) if not fut.done() else None
            except Exception as exc:  # noqa: BLE001 - handed to the request
                fut.set_exception(exc) if not fut.done() else None
            return
        for (_, fut), res in zip(batch, results):
            if not fut.done():
                fut.set_result(res)
