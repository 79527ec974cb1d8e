"""``xmemory build --ray``: the bulk build on Ray Data, with the driver as the store's single writer.

Flow: the driver loads the conversations (as the local build does), drops those already committed,
and hands the rest to Ray as a Dataset of plain JSON rows. ``map_batches`` runs
:class:`ShardBuilder` on an actor pool (``ray.data.ActorPoolStrategy``): each actor loads the
embedder (and the LLM builder's generator) once, and each call builds one shard of conversations
with one construction call. Built memories come back encoded as the store writes them (``memory/codec.py``:
the memory's columns as plain bytes, no pickle, checked and hashed by the actor) plus JSON stats, streamed
to the driver, which commits them as they are (the commit checks each one's sha256 and dimension) (``EncodedSlice``: not
decoded and encoded again), a shard's worth at a time (one atomic commit per group, as the local build commits a shard); so the store's resume and
crash rules are the local build's:

- a worker killed mid-shard: Ray restarts the actor and retries the shard (``max_restarts`` /
  ``max_task_retries``); the driver commits a memory only once (a retried shard's repeat is
  dropped), so the store ends with every memory exactly once;
- a driver killed mid-run: what it committed stays (a worker's failure first commits what was
  delivered); re-running the same command skips it.

The two places that touch the construction and the store API are marked ``CONSTRUCTION`` and
``COMMIT`` below.
"""

from __future__ import annotations

import json
import os
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..config import XMemoryConfig
from ..construct.pipeline import BuildReport, Finish, Timings, finished
from ..construct.progress import BuildProgress
from ..memory.codec import EncodedSlice, encode_slice
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

    for name, value in (("limit", limit), ("max_sessions", max_sessions)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            raise ValueError(f"build_store_ray: {name}: expected an integer >= 1, got {value!r}")
    return load(inputs, limit=limit, max_sessions=max_sessions)


# -- the actor ------------------------------------------------------------------------------------
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
        """A pyarrow table of conversations (``conversation``: JSON) -> a table of built memories
        (``memory_id``, ``arrays``: the store's file bytes, ``sha256`` of them, ``dim``, ``stats``: JSON,
        ``counts`` (rows per level) and ``message_ids``: JSON, ``timings``: the shard's stage
        seconds as JSON on its first row, ``{}`` on the others)."""
        import pyarrow as pa

        from ..construct.pipeline import build_slices

        convs = [conversation_from_wire(json.loads(s)) for s in batch.column("conversation").to_pylist()]
        tm = Timings()
        usage0 = self._usage()
        t0 = time.perf_counter()
        # ---- CONSTRUCTION: the one construction call per shard --------------------------------
        slices = build_slices(
            convs, self.embedder, self.config, timings=tm, backend=self.backend, llm=self.llm
        )
        # ----------------------------------------------------------------------------------------
        with tm.stage("encode"):
            encoded = [encode_slice(sl, self.dim) for sl in slices]
        self._maybe_crash()
        shard = {
            "stages": tm.as_dict(),
            "wall": time.perf_counter() - t0,
            "pid": os.getpid(),
            "llm_usage": _usage_delta(usage0, self._usage()),
        }
        timings = ([json.dumps(shard)] + ["{}"] * (len(slices) - 1)) if slices else []
        return pa.table(
            {
                "memory_id": pa.array([e.memory_id for e in encoded], pa.string()),
                "arrays": pa.array([e.data for e in encoded], pa.large_binary()),
                "sha256": pa.array([e.sha256 for e in encoded], pa.string()),
                "dim": pa.array([e.dim for e in encoded], pa.int64()),
                "stats": pa.array([json.dumps(e.stats) for e in encoded], pa.large_string()),
                "counts": pa.array([json.dumps(e.counts) for e in encoded], pa.string()),
                "message_ids": pa.array([json.dumps(e.message_ids) for e in encoded], pa.large_string()),
                "timings": pa.array(timings, pa.string()),
            }
        )

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
    from ..memory.locks import WriterLock
    from ..memory.store import Store

    ray = import_ray()
    if isinstance(shard_size, bool) or not isinstance(shard_size, int) or shard_size < 1:
        raise ValueError(f"build_store_ray: shard_size: expected an integer >= 1, got {shard_size!r}")
    cfg = config or XMemoryConfig()
    t0 = time.perf_counter()
    tm = Timings()
    with tm.stage("load"):
        convs = load_conversations(inputs, limit=limit, max_sessions=max_sessions)
    emb = embedder if embedder is not None else load_embedder(cfg.embed.model)
    root = Path(store_path)
    if root.exists() and not root.is_dir():
        raise ValueError(f"--out {root}: is a file; expected a folder for the store")
    root.mkdir(parents=True, exist_ok=True)
    started = False
    with WriterLock(root):
        store = Store.open_or_create(root, dim=emb.dim, embedder=emb.name, config=cfg.to_dict())
        try:
            damaged = {
                c.sample_id
                for c in convs
                if store.has(c.sample_id) and not store.has(c.sample_id, intact=True)
            }
            todo = [c for c in convs if not store.has(c.sample_id) or c.sample_id in damaged]
            todo_ids = {c.sample_id for c in todo}
            skipped = [c.sample_id for c in convs if c.sample_id not in todo_ids]
            report = RayBuildReport(built=[], skipped=skipped, timings={}, wall_s=0.0)
            if todo:
                if not ray.is_initialized():
                    started = (
                        True  # from here on Ray is shut down however this ends (Ctrl-C, SIGTERM, an error)
                    )
                    with tm.stage("ray_start"):
                        kw = dict(init_kwargs or {})
                        kw.setdefault("include_dashboard", False)
                        if address not in (None, "local"):
                            ray.init(address=address, **kw)
                        else:
                            _init_local(ray, kw)
                _run(
                    ray,
                    store,
                    todo,
                    damaged,
                    report,
                    tm,
                    cfg,
                    emb,
                    shard_size=shard_size,
                    progress=progress,
                    backend=backend,
                    llm_spec=llm_spec,
                    llm_kwargs=llm_kwargs,
                    llm_retries=llm_retries,
                    workers=workers,
                    gpus_per_worker=gpus_per_worker,
                    max_retries=max_retries,
                    crash_marker=crash_marker,
                    finish=finish,
                )
        finally:
            store.close()
            if started:
                ray.shutdown()
    report.timings = tm.as_dict()
    report.wall_s = time.perf_counter() - t0
    return report


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


def _run(
    ray: Any,
    store: Any,
    todo: list[Conversation],
    damaged: set[str],
    report: RayBuildReport,
    tm: Timings,
    cfg: XMemoryConfig,
    emb: Any,
    *,
    shard_size: int,
    progress: bool,
    backend: str,
    llm_spec: str | None,
    llm_kwargs: dict[str, Any] | None,
    llm_retries: int,
    workers: int | None,
    gpus_per_worker: float | None,
    max_retries: int | None,
    crash_marker: str | None,
    finish: Finish | None = None,
) -> None:
    ctx = ray.data.DataContext.get_current()
    ctx.enable_progress_bars = False  # the driver's own bar counts committed memories
    if gpus_per_worker is None:
        gpus_per_worker = 1.0 if ray.cluster_resources().get("GPU", 0) > 0 else 0.0
    size = _pool_size(ray, workers, gpus_per_worker)
    report.workers, report.gpus_per_worker = size, float(gpus_per_worker)
    retry_args: dict[str, int] = {}
    if (
        max_retries is not None
    ):  # else Ray Data's default: restart dead actors and retry their shards without bound
        if isinstance(max_retries, bool) or not isinstance(max_retries, int) or max_retries < 0:
            raise ValueError(f"build_store_ray: max_retries: expected an integer >= 0, got {max_retries!r}")
        retry_args = {"max_restarts": max_retries, "max_task_retries": max_retries}
    rows = [{"sample_id": c.sample_id, "conversation": conversation_to_wire(c)} for c in todo]
    n_shards = -(-len(rows) // shard_size)
    ds = ray.data.from_items(rows, override_num_blocks=n_shards)
    with (
        warnings.catch_warnings()
    ):  # Ray 2.60 takes max_restarts / max_task_retries only as (deprecated) **ray_remote_args
        warnings.filterwarnings("ignore", message=".*ray_remote_args.*is deprecated")
        ds = _map(
            ds,
            ray,
            size,
            shard_size,
            gpus_per_worker,
            cfg,
            retry_args,
            {
                "backend": backend,
                "device": "cuda" if gpus_per_worker > 0 else "cpu",
                "llm_spec": llm_spec,
                "llm_kwargs": llm_kwargs,
                "llm_retries": llm_retries,
                "crash_marker": crash_marker,
                "dim": emb.dim,
            },
        )
    bar = BuildProgress(len(todo) + len(report.skipped), desc="build (ray)", enabled=progress)
    bar.skip(len(report.skipped))
    expected = {c.sample_id for c in todo}
    committed: set[str] = set()
    usage: dict[str, int] | None = None
    pending: list[EncodedSlice] = []

    def flush() -> None:
        """Commit the memories delivered since the last commit, one atomic commit for the group."""
        if not pending:
            return
        group = list(pending)
        pending.clear()  # a failed commit is not tried twice: a re-run builds its memories
        if finish is not None:
            with tm.stage("finish"):
                group = finished(group, finish, emb.dim)
        with tm.stage("commit"):
            # ---- COMMIT: the driver is the only writer; a group of memories, atomically ---------
            store.commit(group, replace=True)  # ``todo`` holds new and damaged memories only
            # ---------------------------------------------------------------------------------
        report.built.extend(e.memory_id for e in group)
        bar.commit(len(group))

    try:
        try:
            for row in ds.iter_rows():
                mid = row["memory_id"]
                if mid not in expected:
                    raise RuntimeError(f"--ray: a worker returned memory {mid!r}, which was not asked for")
                shard = json.loads(row["timings"])
                if mid in committed:  # a retried shard delivered again: the first copy is kept
                    report.repeats_dropped += 1
                    continue
                if shard:
                    report.shards += 1
                    for stage, sec in shard["stages"].items():
                        tm.seconds[stage] += sec
                    if shard.get("llm_usage"):
                        usage = {k: (usage or {}).get(k, 0) + v for k, v in shard["llm_usage"].items()}
                with tm.stage("commit"):
                    pending.append(_received(mid, row))
                committed.add(mid)
                bar.advance(1.0)  # a memory delivered: its conversation's work is done
                if len(pending) >= shard_size:
                    flush()
            flush()
        except BaseException:
            flush()  # what the workers delivered before the failure is kept: a re-run builds only the rest
            raise
    finally:
        bar.close()
    report.llm_usage = usage
    missing = expected - committed
    if missing:
        raise RuntimeError(
            f"--ray: {len(missing)} memories did not come back from the workers (e.g. {sorted(missing)[0]!r}); "
            "re-run the same command to build them"
        )


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
    shard_size: int,
    gpus_per_worker: float,
    cfg: XMemoryConfig,
    retry_args: dict[str, int],
    actor_kwargs: dict[str, Any],
) -> Any:
    """The construction stage: one actor pool, one shard of conversations per call."""
    return ds.map_batches(
        ShardBuilder,
        batch_size=shard_size,
        batch_format="pyarrow",
        compute=ray.data.ActorPoolStrategy(size=size),
        num_cpus=1,
        num_gpus=gpus_per_worker or None,
        fn_constructor_args=(cfg.embed.model, cfg.to_dict()),
        fn_constructor_kwargs=actor_kwargs,
        **retry_args,
    )
