"""``xmemory build --ray``: the bulk build on Ray Data, with the driver as the store's single writer.

Ray is one of the build's executors: the driver loads the conversations (as the local build
does), plans the build (``construct.plan``: the same resume rule and shards as the local build) and
hands the shards to Ray as a Dataset of plain JSON rows, one per shard. ``map_batches`` runs
:class:`ShardBuilder` on an actor pool (``ray.data.ActorPoolStrategy``): each actor loads the
embedder (and the LLM builder's generator) once, and each call builds one shard with one
construction call. Built memories come back encoded as the store writes them (``memory/codec.py``:
the memory's columns as plain bytes, no pickle, checked and hashed by the actor) plus JSON stats,
streamed to the driver, whose ordered committer (``construct.commit``) commits each shard whole and
in the plan's order, as they are (the commit checks each one's sha256 and dimension); so the store,
its resume and crash rules are the local build's:

- a worker killed mid-shard: Ray restarts the actor and retries the shard (``max_restarts`` /
  ``max_task_retries``); the driver takes a memory only once (a retried shard's repeat is
  dropped), so the store ends with every memory exactly once;
- a driver killed mid-run: the shards it committed stay (a worker's failure first commits the
  shards before it); re-running the same command skips them.
"""

from __future__ import annotations

import json
import os
import time
import warnings
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..config import XMemoryConfig
from ..construct.commit import BuildReport, Finish, OrderedCommitter, ShardResult, build_target, build_with
from ..construct.plan import Shard, check_counts
from ..construct.progress import Timings
from ..memory.codec import EncodedSlice
from ..memory.records import Conversation, conversation_from_wire, conversation_to_wire

INSTALL_HINT = "pip install 'xmemory-gpu[dist]'"


class RayNotInstalled(RuntimeError):
    """``--ray`` was asked for and Ray (with Ray Data) cannot be imported."""


def import_ray() -> Any:
    """``ray`` with ``ray.data`` imported, or :class:`RayNotInstalled` with a one-line message."""
    try:
        import ray
        import ray.data  # noqa: F401
    except ImportError as exc:
        raise RayNotInstalled(
            f"--ray: Ray Data is not installed ({exc.name or exc}); {INSTALL_HINT}"
        ) from None
    return ray


# -- loading: the local build's rules -----------------------------------------------------------
def load_conversations(
    inputs: list[str | Path] | str | Path, *, limit: int | None = None, max_sessions: int | None = None
) -> list[Conversation]:
    """Conversations as ``build_store`` loads them: every file, duplicate sample ids refused,
    ``limit`` first conversations, each cut to its first ``max_sessions`` sessions (bounds checked
    here with this entry point's name)."""
    from ..construct.pipeline import load_conversations as load

    check_counts("build_store_ray", limit=limit, max_sessions=max_sessions)
    return load(inputs, limit=limit, max_sessions=max_sessions)


# -- the actor ------------------------------------------------------------------------------------
def _columns() -> dict[str, Any]:
    """The columns of an actor's answer and their Arrow types."""
    import pyarrow as pa

    return {
        "shard": pa.int64(),
        "memory_id": pa.string(),
        "arrays": pa.large_binary(),
        "sha256": pa.string(),
        "dim": pa.int64(),
        "stats": pa.large_string(),
        "counts": pa.string(),
        "message_ids": pa.large_string(),
        "timings": pa.string(),
    }


class ShardBuilder:
    """The ``map_batches`` callable: one per actor, holding the embedder and the LLM builder.

    ``crash_marker`` is fault injection for tests: the first call of any actor to find no file at
    that path creates it and kills its own process (``os._exit``) after building its shard and
    before returning it, so Ray must restart the actor and retry the shard."""

    def __init__(
        self,
        embedder_spec: str,
        config: dict[str, Any],
        *,
        backend: str = "auto",
        device: str = "cpu",
        llm_spec: str | None = None,
        llm_kwargs: dict[str, Any] | None = None,
        llm_retries: int = 2,
        crash_marker: str | None = None,
        dim: int | None = None,
    ) -> None:
        from ..embed import load_embedder

        self.config = XMemoryConfig.from_dict(config)
        self.embedder = load_embedder(embedder_spec, device=device)
        self.backend = backend
        self.dim = (
            self.embedder.dim if dim is None else dim
        )  # the store's: a memory of another is refused here
        self.crash_marker = crash_marker
        self.llm = None
        if llm_spec is not None:
            from ..construct.llm_stages import LLMBuilder
            from ..llm import load_reader

            self.llm = LLMBuilder(
                load_reader(llm_spec, **(llm_kwargs or {})),
                max_retries=llm_retries,
                segment=self.config.segment,
            )

    def __call__(self, batch: Any) -> Any:
        """A pyarrow table of shards (``shard``: its index, ``conversations``: a JSON list) -> a table
        of built memories (``shard``, ``memory_id``, ``arrays``: the store's file bytes, ``sha256`` of
        them, ``dim``, ``stats``: JSON, ``counts`` (rows per level) and ``message_ids``: JSON,
        ``timings``: the shard's stage seconds as JSON on its first row, ``{}`` on the others)."""
        import pyarrow as pa

        from ..construct.pipeline import build_encoded

        types = _columns()
        cols: dict[str, list] = {k: [] for k in types}
        for index, wire in zip(batch.column("shard").to_pylist(), batch.column("conversations").to_pylist()):
            convs = [conversation_from_wire(d) for d in json.loads(wire)]
            tm = Timings()
            usage0 = self._usage()
            t0 = time.perf_counter()
            encoded = build_encoded(
                convs,
                self.embedder,
                self.config,
                dim=self.dim,
                timings=tm,
                backend=self.backend,
                llm=self.llm,
            )
            self._maybe_crash()
            shard = {
                "stages": tm.as_dict(),
                "wall": time.perf_counter() - t0,
                "pid": os.getpid(),
                "llm_usage": _usage_delta(usage0, self._usage()),
            }
            for i, e in enumerate(encoded):
                for k, v in zip(
                    types,
                    (
                        index,
                        e.memory_id,
                        e.data,
                        e.sha256,
                        e.dim,
                        json.dumps(e.stats),
                        json.dumps(e.counts),
                        json.dumps(e.message_ids),
                        json.dumps(shard) if i == 0 else "{}",
                    ),
                ):
                    cols[k].append(v)
        return pa.table({k: pa.array(v, types[k]) for k, v in cols.items()})

    def _usage(self) -> dict[str, int] | None:
        if self.llm is None or not hasattr(self.llm.gen, "usage"):
            return None
        u = self.llm.gen.usage
        return {"calls": u.calls, "prompt_tokens": u.prompt_tokens, "output_tokens": u.output_tokens}

    def _maybe_crash(self) -> None:
        if self.crash_marker is None:
            return
        try:
            fd = os.open(self.crash_marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            return
        os.write(fd, str(os.getpid()).encode())
        os.close(fd)
        os._exit(17)  # a worker process lost mid-shard, as a kill -9 or an OOM kill would do


def _usage_delta(before: dict[str, int] | None, after: dict[str, int] | None) -> dict[str, int] | None:
    if before is None or after is None:
        return None
    return {k: after[k] - before[k] for k in after}


# -- the driver -------------------------------------------------------------------------------------
@dataclass
class RayBuildReport(BuildReport):
    """``BuildReport`` plus the Ray run: actors, GPUs per actor, shards, repeats dropped, LLM usage.

    ``timings``: construction stages are summed over all actors (worker seconds; above the wall
    time when actors run in parallel); ``load``, ``ray_start`` and ``commit`` are the driver's."""

    workers: int = 0
    gpus_per_worker: float = 0.0
    shards: int = 0
    repeats_dropped: int = 0
    llm_usage: dict[str, int] | None = field(default=None)


def _pool_size(ray: Any, workers: int | None, gpus_per_worker: float) -> int:
    if workers is not None:
        if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
            raise ValueError(f"--ray-workers: expected an integer >= 1, got {workers!r}")
        return workers
    res = ray.cluster_resources()
    if gpus_per_worker > 0:
        return max(1, int(res.get("GPU", 0) // gpus_per_worker))
    return max(1, int(res.get("CPU", 1)))


def build_store_ray(
    inputs: list[str | Path] | str | Path,
    store_path: str | Path,
    *,
    address: str | None = "local",
    config: XMemoryConfig | None = None,
    embedder: Any = None,
    limit: int | None = None,
    shard_size: int = 16,
    progress: bool = True,
    backend: str = "auto",
    llm_spec: str | None = None,
    llm_kwargs: dict[str, Any] | None = None,
    llm_retries: int = 2,
    max_sessions: int | None = None,
    workers: int | None = None,
    gpus_per_worker: float | None = None,
    max_retries: int | None = None,
    init_kwargs: dict[str, Any] | None = None,
    crash_marker: str | None = None,
    finish: Finish | None = None,
) -> RayBuildReport:
    """Build (or resume building) a store on Ray: the same memories as ``build_store``.

    ``inputs``: files or folders (LoCoMo), or conversations already read (``build_store``'s);
    ``finish(slices)``: applied on the driver to each delivered group before it is committed
    (``build_store``'s). The progress bar moves per memory delivered (``construct.progress``).

    ``address``: ``"local"`` starts a local Ray instance listening on 127.0.0.1 only (``init_kwargs`` go
    to ``ray.init``, e.g. ``num_cpus``, ``object_store_memory``), any other string joins that cluster
    (``"auto"``, or ``ray://host:10001``); either is shut down at the end, on an error, Ctrl-C or SIGTERM
    too. When Ray is already initialised in this process it is used as it is (and left running).
    ``embedder``: only read on the driver, for the store's name and dimension; actors load
    ``config.embed.model`` themselves. ``workers``: actors in the pool (default: one per GPU when the
    cluster has GPUs, else one per CPU). ``gpus_per_worker``: default 1 when the cluster has GPUs, else
    0 (the embedder then runs on ``cuda``).
    ``max_retries``: restarts of a dead actor and retries of its shard before the build fails (default:
    Ray Data's, without bound).
    """
    from ..embed import load_embedder

    ray = import_ray()
    check_counts("build_store_ray", shard_size=shard_size)
    cfg = config or XMemoryConfig()
    t0 = time.perf_counter()
    tm = Timings()
    with tm.stage("load"):
        convs = load_conversations(inputs, limit=limit, max_sessions=max_sessions)
    emb = embedder if embedder is not None else load_embedder(cfg.embed.model)
    executor = RayExecutor(
        ray,
        cfg,
        address=address,
        init_kwargs=init_kwargs,
        workers=workers,
        gpus_per_worker=gpus_per_worker,
        max_retries=max_retries,
        actor_kwargs={
            "backend": backend,
            "llm_spec": llm_spec,
            "llm_kwargs": llm_kwargs,
            "llm_retries": llm_retries,
            "crash_marker": crash_marker,
            "dim": emb.dim,
        },
    )
    try:
        with build_target(store_path, emb, cfg) as store:
            report = build_with(
                executor,
                store,
                convs,
                len(convs),
                shard_size,
                tm,
                t0,
                progress=progress,
                finish=finish,
                desc="build (ray)",
            )
    finally:
        executor.close()
    out = executor.report
    out.built, out.skipped, out.timings = report.built, report.skipped, report.timings
    out.wall_s = time.perf_counter() - t0
    return out


class RayExecutor:
    """Ray as the build's executor (``construct.commit``): started when the plan has shards to build
    (``address``: ``"local"`` or a cluster's; a Ray already initialised in this process is used as it
    is), and shut down by :meth:`close` when started here. ``actor_kwargs``: :class:`ShardBuilder`'s."""

    def __init__(
        self,
        ray: Any,
        cfg: XMemoryConfig,
        *,
        address: str | None,
        init_kwargs: dict[str, Any] | None,
        workers: int | None,
        gpus_per_worker: float | None,
        max_retries: int | None,
        actor_kwargs: dict[str, Any],
    ) -> None:
        self.ray, self.cfg = ray, cfg
        self.address, self.init_kwargs = address, init_kwargs
        self.workers, self.gpus_per_worker, self.max_retries = workers, gpus_per_worker, max_retries
        self.actor_kwargs = actor_kwargs
        self.report = RayBuildReport(built=[], skipped=[], timings={}, wall_s=0.0)  # its Ray figures
        self.started = False

    def map(self, shards: Iterable[Shard], track: OrderedCommitter) -> Iterator[ShardResult]:
        shards = list(shards)
        if not shards:
            return
        if not self.ray.is_initialized():
            self.started = True  # from here on Ray is shut down however this ends (Ctrl-C, SIGTERM, an error)
            with track.timings.stage("ray_start"):
                kw = dict(self.init_kwargs or {})
                kw.setdefault("include_dashboard", False)
                if self.address not in (None, "local"):
                    self.ray.init(address=self.address, **kw)
                else:
                    _init_local(self.ray, kw)
        yield from _run(self, shards, track)

    def close(self) -> None:
        if self.started:
            self.started = False
            self.ray.shutdown()


def _init_local(ray: Any, kw: dict[str, Any]) -> None:
    """A local Ray instance that listens on 127.0.0.1 only (GCS, raylet, object manager, workers).

    Ray binds its servers to the node's address, and ``ray.init`` turns ``_node_ip_address="127.0.0.1"``
    into this host's routable address unless it runs as a single-machine Ray (its Windows / macOS
    default), so that mode is switched on for the start. The address Ray ended with is checked."""
    from ray._private import ray_constants

    clusters = getattr(ray_constants, "ENABLE_RAY_CLUSTER", True)
    ray_constants.ENABLE_RAY_CLUSTER = False
    try:
        ray.init(**{**kw, "_node_ip_address": "127.0.0.1"})
    finally:
        ray_constants.ENABLE_RAY_CLUSTER = clusters
    ip = ray.util.get_node_ip_address()
    if ip != "127.0.0.1":
        raise RuntimeError(
            f"--ray local: Ray started on {ip}, not 127.0.0.1 (open to the network), so it was stopped; "
            "this Ray release is not the one tested (2.60)"
        )


def _run(ex: RayExecutor, shards: list[Shard], track: OrderedCommitter) -> Iterator[ShardResult]:
    """The shards built on an actor pool, each one's result once all its memories are delivered."""
    ray = ex.ray
    ctx = ray.data.DataContext.get_current()
    ctx.enable_progress_bars = False  # the driver's own bar counts committed memories
    gpus = ex.gpus_per_worker
    if gpus is None:
        gpus = 1.0 if ray.cluster_resources().get("GPU", 0) > 0 else 0.0
    size = _pool_size(ray, ex.workers, gpus)
    ex.report.workers, ex.report.gpus_per_worker = size, float(gpus)
    retry_args: dict[str, int] = {}
    if (
        ex.max_retries is not None
    ):  # else Ray Data's default: restart dead actors and retry their shards without bound
        if isinstance(ex.max_retries, bool) or not isinstance(ex.max_retries, int) or ex.max_retries < 0:
            raise ValueError(
                f"build_store_ray: max_retries: expected an integer >= 0, got {ex.max_retries!r}"
            )
        retry_args = {"max_restarts": ex.max_retries, "max_task_retries": ex.max_retries}
    rows = [
        {
            "shard": s.index,
            "conversations": "[" + ",".join(conversation_to_wire(c) for c in s.conversations) + "]",
        }
        for s in shards
    ]
    ds = ray.data.from_items(rows, override_num_blocks=len(rows))
    with (
        warnings.catch_warnings()
    ):  # Ray 2.60 takes max_restarts / max_task_retries only as (deprecated) **ray_remote_args
        warnings.filterwarnings("ignore", message=".*ray_remote_args.*is deprecated")
        actor_kwargs = {**ex.actor_kwargs, "device": "cuda" if gpus > 0 else "cpu"}
        ds = _map(ds, ray, size, gpus, ex.cfg, retry_args, actor_kwargs)
    got: dict[int, dict[str, EncodedSlice]] = {}
    seconds: dict[int, dict[str, float]] = {}
    taken: set[str] = set()
    for row in ds.iter_rows():
        k, mid = int(row["shard"]), row["memory_id"]
        if not 0 <= k < len(shards) or mid not in shards[k].ids:
            raise RuntimeError(f"--ray: a worker returned memory {mid!r}, which was not asked for")
        if mid in taken:  # a retried shard delivered again: the first copy is kept
            ex.report.repeats_dropped += 1
            continue
        taken.add(mid)
        shard = json.loads(row["timings"])
        if shard:
            ex.report.shards += 1
            seconds[k] = shard["stages"]
            if shard.get("llm_usage"):
                usage = ex.report.llm_usage or {}
                ex.report.llm_usage = {n: usage.get(n, 0) + v for n, v in shard["llm_usage"].items()}
        got.setdefault(k, {})[mid] = _received(mid, row)
        track.advance(1.0)  # a memory delivered: its conversation's work is done
        if len(got[k]) == len(shards[k].conversations):
            delivered = got.pop(k)
            yield ShardResult(k, [delivered[i] for i in shards[k].ids], seconds.pop(k, {}))


def _received(memory_id: str, row: dict[str, Any]) -> EncodedSlice:
    """A built memory as an actor sent it (its dimension and sha256 are checked by the commit)."""
    return EncodedSlice(
        memory_id,
        bytes(row["arrays"]),
        row["sha256"],
        int(row["dim"]),
        json.loads(row["stats"]),
        json.loads(row["counts"]),
        json.loads(row["message_ids"]),
    )


def _map(
    ds: Any,
    ray: Any,
    size: int,
    gpus_per_worker: float,
    cfg: XMemoryConfig,
    retry_args: dict[str, int],
    actor_kwargs: dict[str, Any],
) -> Any:
    """The construction stage: one actor pool, one shard of conversations per call."""
    return ds.map_batches(
        ShardBuilder,
        batch_size=1,  # one shard per call
        batch_format="pyarrow",
        compute=ray.data.ActorPoolStrategy(size=size),
        num_cpus=1,
        num_gpus=gpus_per_worker or None,
        fn_constructor_args=(cfg.embed.model, cfg.to_dict()),
        fn_constructor_kwargs=actor_kwargs,
        **retry_args,
    )
