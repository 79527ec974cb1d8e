"""The bulk build's one committer: shard results from any executor (this process, the worker pool,
Ray), in whatever order they arrive, committed to the store whole and in the plan's order, with the
build's progress bar and stage timings.

An executor maps the plan's shards (``construct.plan``) to :class:`ShardResult` s: the shard's
memories as slices or encoded as the store writes them (``memory.codec``), its stage seconds, or
the error that stopped it. It reports progress through :meth:`OrderedCommitter.advance` and may
hold a shard back until the commit is near (:meth:`OrderedCommitter.wait_turn`). Shard k is
committed once shards 0..k-1 are; an error is raised when its turn comes, after the shards before
it are committed, so a stopped build leaves a prefix of the plan and a re-run resumes after it.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from ..config import XMemoryConfig
from ..memory.backend import CommitHandle, MemoryBackend, start_commit_on
from ..memory.bank import MemorySlice
from ..memory.codec import EncodedSlice, encode_slice, slice_from_bytes
from ..memory.locks import WriterLock
from ..memory.records import Conversation
from .plan import BuildPlan, Shard
from .progress import BuildProgress, Timings

Finish = Callable[[list[MemorySlice]], None]  # a shard's memories made ready to commit, in place
OnCommit = Callable[[list[str], dict[str, float]], None]  # (ids, the shard's stage seconds) once committed


@dataclass
class ShardResult:
    """Shard ``index`` built: its memories (slices, or encoded by a worker or an actor) in the shard's
    order and its stage seconds; or ``error``, what stopped it."""

    index: int
    memories: list[MemorySlice] | list[EncodedSlice] = field(default_factory=list)
    seconds: dict[str, float] = field(default_factory=dict)
    error: BaseException | None = None


class Executor(Protocol):
    """Maps shards to their results, in any order (``track``: the committer)."""

    def map(self, shards: Iterable[Shard], track: OrderedCommitter) -> Iterator[ShardResult]: ...


@dataclass
class BuildReport:
    built: list[str]
    skipped: list[str]
    timings: dict[str, float]
    wall_s: float


def finished(
    memories: list[MemorySlice] | list[EncodedSlice], finish: Finish | None, dim: int
) -> list[MemorySlice] | list[EncodedSlice]:
    """``memories`` with ``finish`` applied: slices in place, encoded ones decoded, finished and
    encoded again; as they are without one."""
    if finish is None or not memories:
        return memories
    if not isinstance(memories[0], EncodedSlice):
        finish(memories)
        return memories
    slices = [slice_from_bytes(e.memory_id, e.data, e.stats) for e in memories]
    finish(slices)
    return [encode_slice(sl, dim) for sl in slices]


class OrderedCommitter:
    """Commits shard results into ``store`` in the plan's order, each shard in one commit (one
    transaction: its memories all or none), replacing stored copies where the shard says so.

    ``overlap``: a shard's files are written while the next one builds (``start_commit``; the commit
    of shard k is finished before shard k+1's starts, also when a build fails); else each commit is
    finished at once (``commit``). ``finish(slices)``: applied to each shard's memories first (in
    this thread, timed as ``finish``). ``progress``: the build's bar; ``on_commit(ids, seconds)``
    after each shard's commit. Stage seconds of the results add to ``timings``, the commits' to its
    ``commit``."""

    def __init__(
        self,
        store: MemoryBackend,
        *,
        timings: Timings | None = None,
        progress: BuildProgress | None = None,
        finish: Finish | None = None,
        overlap: bool = False,
        on_commit: OnCommit | None = None,
    ) -> None:
        self.store = store
        self.timings = timings if timings is not None else Timings()
        self.built: list[str] = []
        self.committed = 0  # shards committed (their commit finished or, with ``overlap``, started)
        self._progress = progress
        self._finish = finish
        self._overlap = overlap
        self._on_commit = on_commit
        self._shards: list[Shard] = []  # the plan's shards handed to the executor so far
        self._held: dict[int, ShardResult] = {}  # arrived ahead of their turn
        self._pending: tuple[CommitHandle, list[str], dict[str, float]] | None = None
        self._cond = threading.Condition()
        self._stopped = False

    # -- what an executor calls -------------------------------------------------------------------
    def advance(self, k: float) -> None:
        """``k`` conversations' worth of work done (any thread)."""
        if self._progress is not None:
            self._progress.advance(k)

    def wait_turn(self, index: int, ahead: int) -> bool:
        """Block until shard ``index`` is fewer than ``ahead`` shards past the last commit (so at most
        ``ahead`` shards wait built); False when the build stopped meanwhile (any thread)."""
        with self._cond:
            while not self._stopped and index >= self.committed + ahead:
                self._cond.wait()
            return not self._stopped

    # -- the build ---------------------------------------------------------------------------------
    def run(self, executor: Executor, shards: Iterable[Shard]) -> None:
        """``shards`` built by ``executor`` and committed in order; raises the first error in plan
        order once the shards before it are committed, or when a shard never came back."""
        try:
            with closing(executor.map(self._planned(shards), self)) as results:
                for result in results:
                    self.add(result)
            with self.timings.stage("commit"):
                self._finish_pending()
            if self.committed < len(self._shards):
                missing = [i for s in self._shards[self.committed :] for i in s.ids]
                raise RuntimeError(
                    f"build: {len(missing)} memories did not come back from the executor "
                    f"(e.g. {missing[0]!r}); re-run the same command to build them"
                )
        except BaseException:
            self.stop()
            raise
        finally:
            self._finish_pending()

    def add(self, result: ShardResult) -> None:
        """One shard's result, in any order: committed with those it unblocks, in order."""
        if not 0 <= result.index < len(self._shards) or result.index < self.committed:
            raise RuntimeError(f"build: the executor returned shard {result.index}, which was not pending")
        self._held[result.index] = result
        while self.committed in self._held:
            self._commit(self._shards[self.committed], self._held.pop(self.committed))

    def stop(self) -> None:
        """The build stopped: executors waiting for their turn go on (and find it stopped)."""
        with self._cond:
            self._stopped = True
            self._cond.notify_all()

    def _planned(self, shards: Iterable[Shard]) -> Iterator[Shard]:
        for shard in shards:
            if shard.index != len(self._shards):
                raise ValueError(f"build: shard {shard.index} out of the plan's order")
            self._shards.append(shard)
            yield shard

    def _commit(self, shard: Shard, result: ShardResult) -> None:
        if result.error is not None:
            raise result.error
        ids = [m.memory_id for m in result.memories]
        if ids != shard.ids:
            raise RuntimeError(f"build: shard {shard.index} came back as memories {ids}, not {shard.ids}")
        self.timings.add(result.seconds)
        memories = result.memories
        if self._finish is not None:
            with self.timings.stage("finish"):
                memories = finished(memories, self._finish, self.store.dim)
        t0 = time.perf_counter()
        with self.timings.stage("commit"):
            if self._overlap:
                self._finish_pending()
                self._pending = (
                    start_commit_on(self.store, memories, replace=shard.replace),
                    ids,
                    result.seconds,
                )
            else:
                self.store.commit(memories, replace=shard.replace)
        with self._cond:
            self.committed += 1
            self._cond.notify_all()
        if not self._overlap:
            self._done(ids, {**result.seconds, "commit": time.perf_counter() - t0})

    def _finish_pending(self) -> None:
        if self._pending is not None:
            handle, ids, seconds = self._pending
            self._pending = None
            handle.finish()
            self._done(ids, seconds)

    def _done(self, ids: list[str], seconds: dict[str, float]) -> None:
        self.built.extend(ids)
        if self._progress is not None:
            self._progress.commit(len(ids))
        if self._on_commit is not None:
            self._on_commit(ids, seconds)


def build_with(
    executor: Executor,
    store: MemoryBackend,
    convs: Iterable[Conversation],
    count: int,
    shard_size: int,
    timings: Timings,
    t0: float,
    *,
    progress: bool = False,
    finish: Finish | None = None,
    overlap: bool = False,
    desc: str = "build",
) -> BuildReport:
    """Build ``convs`` (``count`` of them, read lazily) into ``store`` with ``executor``: the plan's
    shards of ``shard_size`` (``construct.plan``: those stored intact skipped, a damaged one
    rebuilt) committed in order (:class:`OrderedCommitter`) under one progress bar (``desc``);
    ``t0``: when the build started (``perf_counter``), for the report's wall time."""
    with BuildProgress(count, desc=desc, enabled=progress) as bar:
        plan = BuildPlan(store, convs, count, on_skip=bar.skip)
        committer = OrderedCommitter(store, timings=timings, progress=bar, finish=finish, overlap=overlap)
        committer.run(executor, plan.shards(shard_size))
    return BuildReport(
        built=committer.built,
        skipped=plan.skipped,
        timings=timings.as_dict(),
        wall_s=time.perf_counter() - t0,
    )


@contextmanager
def build_target(
    store_path: str | Path | MemoryBackend, emb: Any, cfg: XMemoryConfig
) -> Iterator[MemoryBackend]:
    """The store a build writes: a ``MemoryBackend`` as it is (it must hold ``emb``'s name and
    dimension), or a folder's store opened (created) under its writer lock and closed at the end;
    a build that stops before its first commit leaves no store it created."""
    if not isinstance(store_path, (str, os.PathLike)):
        if (store_path.dim, store_path.embedder) != (emb.dim, emb.name):
            raise ValueError(
                f"build_store: the backend holds {store_path.embedder!r} ({store_path.dim}), "
                f"not {emb.name!r} ({emb.dim})"
            )
        yield store_path
        return
    root = Path(store_path)
    if root.exists() and not root.is_dir():
        raise ValueError(f"--out {root}: is a file; expected a folder for the store")
    root.mkdir(parents=True, exist_ok=True)
    with WriterLock(root):  # one writing process per store: a second build is refused, nothing half-created
        from ..memory.store import DB_NAME, Store, remove_if_empty

        fresh = not (root / DB_NAME).exists()
        try:
            store = Store.open_or_create(root, dim=emb.dim, embedder=emb.name, config=cfg.to_dict())
            try:
                yield store
            finally:
                store.close()
        except BaseException:
            if fresh:  # stopped before its first commit (bad input met by workers, Ctrl-C): no store is left
                remove_if_empty(root)
            raise
