"""The bulk build in worker processes: ``build_store(workers=N)``, ``xmemory build --workers N``.

Each worker is a fresh Python process (``python -m xmemory_gpu.construct.build_worker``) that loads the
store's embedder and the build's settings, builds the shards of conversations it is handed
(``build_slices``, the one construction call) and encodes each memory as the store would
(``memory.codec.encode_slice``); a worker holds only the shard it builds. The pool is one of the
build's executors (``construct.commit``): the calling process stays the store's only writer and its
ordered committer commits the shards whole and in the plan's order, so
the store is the one a single-process build writes (the same files, catalogue and positions), and
an interrupted build resumes as one does. The wire is plain bytes, nothing pickled:

- to a worker (its stdin): one JSON line of settings (the embedder to load: the builder's by the
  name and dimension a store records, or, when the builder loads none, its spec), then one JSON
  line per shard, ``{"shard": K, "conversations": [...]}`` (``memory.records.conversation_to_wire``);
  end of input stops it;
- from a worker (its stdout; whatever else it prints goes to its stderr): once its embedder is
  loaded, ``{"ready": {"name": ..., "dim": ...}}`` (the store's embedder name and dimension); then per
  shard ``{"progress": K}`` lines as its stages finish conversations (``construct.progress``: K
  conversations' worth of work) and one JSON line
  (the shard, its stage seconds, per memory its id, sha256, dimension, byte size, stats, rows per
  level and message ids) followed by the memories' bytes; or ``{"error": "..."}`` and a non-zero exit.
  The commit checks each memory's dimension and sha256 (``EncodedSlice.verify``).

The pool is its own, not ``concurrent.futures.ProcessPoolExecutor``, whose builds take the same time:
that pool pickles its calls and results, has no channel for a shard's progress while it builds, and
its workers outlive a builder that is killed (here a worker dies with the builder, and its input
ending stops it).

Stage seconds of a worker build are summed over the workers (CPU seconds, which can exceed the
wall time); ``receive`` is the workers' reading of their conversations, ``encode`` their encoding,
``commit`` this process's writes.
"""

from __future__ import annotations

import json
import os
import queue
import site
import subprocess
import sys
import threading
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import IO, Any

from ..config import XMemoryConfig
from ..memory.backend import MemoryBackend
from ..memory.codec import EncodedSlice
from ..memory.records import Conversation, conversation_to_wire
from .commit import OrderedCommitter, ShardResult
from .plan import Shard

WORKER_MODULE = "xmemory_gpu.construct.build_worker"  # a worker's entry point (run by name: no import here)
PACKAGE = str(Path(__file__).resolve().parents[1])  # the xmemory_gpu folder a worker must import
PARENT_VAR = "XMEM_BUILD_PARENT"  # the builder's pid: a worker asks to be killed when it dies
_THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")


class WorkerError(RuntimeError):
    """A build worker failed or exited; says which and why (nothing of its shard was committed)."""


class _Worker:
    """One worker process, its two pipes, and a thread that reads its ready line."""

    def __init__(self, index: int, settings: bytes, env: dict[str, str]) -> None:
        self.index = index
        # a session of its own: the terminal's Ctrl-C goes to the builder, which stops its workers (one
        # signalled mid-import would print a traceback)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", WORKER_MODULE],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env,
            start_new_session=True,
        )
        self.on_progress: Callable[[float], None] | None = None  # the pool's, while it builds
        self._ready = threading.Event()
        self._loaded: tuple[str, int] | WorkerError | None = None  # (embedder name, dim), or why not
        self._send(settings)
        threading.Thread(target=self._read_ready, daemon=True, name=f"xmemory-build-ready-{index}").start()

    def _read_ready(self) -> None:
        """The worker's first line: the embedder it loaded, or its error (this thread alone reads it)."""
        try:
            line = self.proc.stdout.readline()
            try:
                msg = json.loads(line) if line else None
                ready = msg["ready"] if isinstance(msg, dict) and "ready" in msg else None
                self._loaded = (str(ready["name"]), int(ready["dim"])) if ready is not None else None
            except (ValueError, KeyError, TypeError):
                msg = None
            if self._loaded is None:
                error = msg.get("error") if isinstance(msg, dict) else None
                self._loaded = self._fail(
                    error if isinstance(error, str) else "exited while loading its embedder", read=False
                )
        except BaseException as exc:  # noqa: BLE001 - the pipe closed under a killed worker
            self._loaded = WorkerError(f"build worker {self.index}: {exc}")
        finally:
            self._ready.set()

    def loaded(self, *, wait: bool = True) -> tuple[str, int] | None:
        """(name, dim) of the embedder the worker loaded; None when not yet loaded and not ``wait``.
        Raises :class:`WorkerError` when the worker failed before it was ready."""
        if not (self._ready.wait() if wait else self._ready.is_set()):
            return None
        if isinstance(self._loaded, WorkerError):
            raise self._loaded
        return self._loaded

    def _fail(self, why: str, *, read: bool = True) -> WorkerError:
        """The error to raise: ``why``, or the worker's own error line when it wrote one and exited
        (one that fails after its ready line, e.g. while reading a task, may have closed its input,
        so the send fails first); ``read``: look for that line on its output (not when the caller
        has just read it)."""
        try:
            code = self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            code = None
        if code is not None and read:
            try:
                for line in reversed(self.proc.stdout.read().splitlines()):
                    msg = json.loads(line)
                    if isinstance(msg, dict) and isinstance(msg.get("error"), str):
                        why = msg["error"]
                        break
            except (OSError, ValueError):
                pass
        return WorkerError(f"build worker {self.index}: {why} (exit code {code})")

    def _send(self, line: bytes) -> None:
        try:
            self.proc.stdin.write(line)
            self.proc.stdin.flush()
        except OSError:
            raise self._fail("exited before its task was sent") from None

    def end_input(self) -> None:
        """No more shards: the worker exits once its input is read (meanwhile the last shards commit)."""
        _close(self.proc.stdin)

    def build(self, shard: int, convs: list[Conversation]) -> tuple[dict[str, float], list[EncodedSlice]]:
        """Shard ``shard`` (conversations ``convs``) built and encoded: (stage seconds, memories);
        ``on_progress(k)`` (the pool's) as the worker reports its stages' progress."""
        body = b",".join(conversation_to_wire(c).encode() for c in convs)  # JSON objects without a line break
        self._send(b'{"shard": %d, "conversations": [%s]}\n' % (shard, body))
        out: IO[bytes] = self.proc.stdout
        try:
            while True:
                head = out.readline()
                if not head:
                    raise self._fail(f"exited while building shard {shard}")
                msg = json.loads(head)
                if not (isinstance(msg, dict) and "progress" in msg):
                    break
                if self.on_progress is not None:
                    self.on_progress(float(msg["progress"]))
            if "error" in msg:
                raise self._fail(msg["error"])
            if msg["shard"] != shard:
                raise self._fail(f"answered shard {msg['shard']} for shard {shard}")
            memories = []
            for m in msg["memories"]:
                data = out.read(m["size"])
                if len(data) != m["size"]:
                    raise self._fail(f"exited while sending shard {shard}")
                memories.append(
                    EncodedSlice(
                        m["id"], data, m["sha256"], m["dim"], m["stats"], m["counts"], m["message_ids"]
                    )
                )
            return msg["timings"], memories
        except (ValueError, KeyError, TypeError) as exc:
            raise self._fail(
                f"sent an unreadable answer for shard {shard} ({type(exc).__name__}: {exc})"
            ) from None

    def stop(self, *, kill: bool) -> None:
        """End the worker: its input closed (it stops after its shard) or, with ``kill``, killed
        first (so no thread waits on a pipe a busy worker holds)."""
        if kill:
            self.proc.kill()
        else:
            _close(self.proc.stdin)
        try:
            self.proc.wait(timeout=None if kill else 30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        _close(self.proc.stdin)
        _close(self.proc.stdout)


def _close(pipe: IO[bytes] | None) -> None:
    try:
        if pipe is not None:
            pipe.close()
    except OSError:
        pass


def _cpus() -> int:
    """The CPUs this process may run on (its affinity, where the platform has one)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def worker_threads(workers: int) -> int:
    """Each worker's share of this process's CPUs."""
    return max(1, _cpus() // workers)


def worker_env(workers: int) -> dict[str, str]:
    """The workers' environment: the math libraries' threads shared out among them
    (``OMP/MKL/OPENBLAS_NUM_THREADS``, where not set already), this process's id (a worker dies with
    it), and this package's folder on their path when it is not on the default one."""
    env = dict(os.environ)
    root = str(Path(PACKAGE).parent)
    if root not in {*site.getsitepackages(), site.getusersitepackages()}:  # a source tree: first on the path
        env["PYTHONPATH"] = os.pathsep.join([root, *filter(None, [env.get("PYTHONPATH")])])
    for var in _THREAD_VARS:
        env.setdefault(var, str(worker_threads(workers)))
    env[PARENT_VAR] = str(os.getpid())
    return env


class WorkerPool:
    """``workers`` worker processes, started at once (they import and load the embedder while this
    process reads the inputs), given shards by :meth:`build`; a context manager that stops them
    (kills them when leaving on an exception). ``settings``: ``device``, ``config``, ``backend``,
    and the embedder: ``name`` and ``dim`` (the builder's own, as a store records it) or ``spec``
    (a :func:`~xmemory_gpu.embed.load_embedder` spec: the builder loads none; :meth:`loaded` says what
    the workers loaded)."""

    def __init__(self, workers: int, settings: dict[str, Any]) -> None:
        self.device = str(settings["device"])  # where the workers' encoder runs
        env = worker_env(workers)
        line = (
            json.dumps({**settings, "package": PACKAGE, "threads": worker_threads(workers)}).encode() + b"\n"
        )
        self._pool: list[_Worker] = []
        self._built = False
        try:
            for i in range(workers):
                self._pool.append(_Worker(i, line, env))
        except BaseException:
            self.close(kill=True)
            raise

    def __enter__(self) -> WorkerPool:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        self.close(kill=exc_type is not None)

    def close(self, *, kill: bool) -> None:
        for w in self._pool:
            w.stop(kill=kill)
        self._pool = []

    def loaded(self, *, wait: bool = True) -> tuple[str, int] | None:
        """(name, dim) of the embedder the first worker loaded (each worker is checked against it
        before its first shard); None when it is still loading and not ``wait``."""
        if not self._pool:
            raise RuntimeError("WorkerPool.loaded: the pool is closed")
        return self._pool[0].loaded(wait=wait)

    def map(self, shards: Iterable[Shard], track: OrderedCommitter) -> Iterator[ShardResult]:
        """The executor (``construct.commit``): ``shards`` built in the workers, their results in the
        order they arrive, once per pool. ``shards`` is read here, to its end, before the first
        result is given: each shard goes to a worker as soon as it is read and its turn comes
        (``track.wait_turn``: at most two per worker built ahead of the commit); a lazy sequence may
        check its conversations as it goes, and an error it raises stops the build before anything
        is committed. A worker that fails gives its shard's error and takes no more shards; leaving
        early (an error, the caller stopped) kills the workers."""
        if not self._pool:
            raise RuntimeError("WorkerPool: the pool is closed")
        if self._built:
            raise RuntimeError("WorkerPool: a pool builds once (its workers' input is closed at the end)")
        self._built = True
        cond = threading.Condition()
        read: list[Shard] = []  # the shards read so far
        state: dict[str, Any] = {"next": 0, "stop": False, "all_read": False}
        results: queue.SimpleQueue[ShardResult | None] = queue.SimpleQueue()  # None: a worker is done
        ahead = 2 * len(self._pool)
        first = self._pool[0]

        def next_shard() -> Shard | None:
            with cond:
                while not state["stop"] and state["next"] >= len(read) and not state["all_read"]:
                    cond.wait()
                if state["stop"] or state["next"] >= len(read):
                    return None
                state["next"] += 1
                return read[state["next"] - 1]

        def drive(w: _Worker) -> None:
            checked = False
            try:
                while (shard := next_shard()) is not None and track.wait_turn(shard.index, ahead):
                    try:
                        if not checked:  # the same embedder as the first worker's (whose the store is)
                            mine, theirs = w.loaded(), first.loaded()
                            if mine != theirs:
                                raise WorkerError(
                                    f"build worker {w.index}: loaded embedder {mine}, worker 0 {theirs}"
                                )
                            checked = True
                        seconds, memories = w.build(shard.index, shard.conversations)
                    except BaseException as exc:  # noqa: BLE001 - raised by the committer in its turn
                        results.put(ShardResult(shard.index, error=exc))
                        return
                    results.put(ShardResult(shard.index, memories, seconds))
                w.end_input()  # nothing left for it: it exits while the last shards commit
            finally:
                results.put(None)

        for w in self._pool:
            w.on_progress = track.advance
        threads = [
            threading.Thread(target=drive, args=(w,), daemon=True, name=f"xmemory-build-worker-{w.index}")
            for w in self._pool
        ]
        try:
            for t in threads:
                t.start()
            for shard in shards:
                with cond:
                    read.append(shard)
                    cond.notify_all()
            with cond:
                state["all_read"] = True
                cond.notify_all()
            live = len(threads)
            while live:
                result = results.get()
                if result is None:
                    live -= 1
                else:
                    yield result
        except BaseException:  # also the caller leaving early (GeneratorExit)
            with cond:
                state["stop"] = True
                cond.notify_all()
            track.stop()
            self.close(kill=True)  # a worker busy with a shard that will not be committed stops now
            raise
        finally:
            for t in threads:
                t.join(timeout=30)

    def build(
        self,
        store: MemoryBackend,
        shards: Iterable[list[Conversation]],
        replace: set[str],
        on_commit: Callable[[list[str], dict[str, float]], None],
    ) -> None:
        """Build ``shards`` in the workers and commit each one whole, in order, into ``store``
        (memories named in ``replace`` replace their stored copies), once per pool; ``on_commit(ids,
        stage_seconds)`` after each shard's commit. A worker's failure raises :class:`WorkerError`
        once the shards before the failed one are committed; the others are not."""
        plan = (
            Shard(k, convs, replace=any(c.sample_id in replace for c in convs))
            for k, convs in enumerate(shards)
        )
        OrderedCommitter(store, on_commit=on_commit).run(self, plan)


def worker_settings(emb: Any, cfg: XMemoryConfig, backend: str) -> dict[str, Any]:
    """What the workers load: ``emb`` by its store name, or (``emb`` None) ``cfg``'s embedder spec."""
    from ..ops.devices import encoder_device

    which = {"spec": cfg.embed.model} if emb is None else {"name": emb.name, "dim": emb.dim}
    return {
        **which,
        "device": encoder_device(backend, cfg.embed.device),
        "config": cfg.to_dict(),
        "backend": backend,
    }
