"""Bulk build on one machine against the same build on Ray Data (``--ray local``) on this machine.

``XMEM_BENCH_CONVERSATIONS`` synthetic conversations (default 1,000; ``xmemory synth``, seed 0),
the embedder ``XMEM_BENCH_EMBEDDER`` (default all-MiniLM-L6-v2; ``hashing:384`` for a
construction-only view), shard size 16. The local build is ``build_store`` in this process; the Ray
build is ``build_store_ray`` with a local Ray instance of ``XMEM_BENCH_RAY_CPUS`` CPUs (default 2,
a 500 MB object store) and one actor per CPU, its start-up included in its wall time. Both stores
are checked equal (memories, counts and f(P) per memory). On one small machine Ray cannot be
faster: the figures state its overhead; the point is that the same command scales out.

Run: ``python benchmarks/bench_ray_build.py [OUT.json]`` (JSON report on stdout), or
``python -m pytest benchmarks/bench_ray_build.py -s`` (``XMEM_BENCH_CONVERSATIONS`` defaults to 100 there).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

from xmemory_gpu.config import XMemoryConfig
from xmemory_gpu.construct.pipeline import build_store
from xmemory_gpu.datasets.synthetic import generate_conversations, write_json
from xmemory_gpu.embed import load_embedder
from xmemory_gpu.memory.store import Store

SHARD = 16


def _summary(path: Path) -> dict[str, tuple]:
    st = Store.open(path)
    try:
        return {
            mid: (tuple(sorted(st.counts(mid).items())), round(st.stats(mid)["f_P"], 6))
            for mid in st.memory_ids()
        }
    finally:
        st.close()


def run(n: int | None = None, embedder: str | None = None, cpus: int | None = None) -> dict:
    """Both builds of the same ``n`` conversations; wall seconds, conversations per second, Ray's overhead."""
    from xmemory_gpu.distributed import build_store_ray

    n = n or int(os.environ.get("XMEM_BENCH_CONVERSATIONS", "1000"))
    spec = embedder or os.environ.get("XMEM_BENCH_EMBEDDER", "all-MiniLM-L6-v2")
    cpus = cpus or int(os.environ.get("XMEM_BENCH_RAY_CPUS", "2"))
    cfg = XMemoryConfig()
    cfg.embed.model = spec
    tmp = Path(tempfile.mkdtemp(prefix="xmem-bench-ray-"))
    try:
        data = write_json(generate_conversations(n, seed=0), tmp / "synthetic.json")
        t0 = time.perf_counter()
        local = build_store(
            data, tmp / "local", config=cfg, embedder=load_embedder(spec), shard_size=SHARD, progress=False
        )
        local_wall = time.perf_counter() - t0
        t0 = time.perf_counter()
        ray_rep = build_store_ray(
            data,
            tmp / "ray",
            config=cfg,
            embedder=load_embedder(spec),
            shard_size=SHARD,
            progress=False,
            workers=cpus,
            init_kwargs={"num_cpus": cpus, "object_store_memory": 500 * 2**20, "log_to_driver": False},
        )
        ray_wall = time.perf_counter() - t0
        same = _summary(tmp / "local") == _summary(tmp / "ray")
        ray_start = ray_rep.timings.get("ray_start", 0.0)
        return {
            "conversations": n,
            "embedder": spec,
            "shard_size": SHARD,
            "ray_cpus": cpus,
            "ray_actors": ray_rep.workers,
            "stores_equal": same,
            "local": {
                "wall_s": round(local_wall, 2),
                "conv_per_s": round(n / local_wall, 2),
                "stages_s": local.timings,
            },
            "ray": {
                "wall_s": round(ray_wall, 2),
                "conv_per_s": round(n / ray_wall, 2),
                "wall_after_start_s": round(ray_wall - ray_start, 2),
                "conv_per_s_after_start": round(n / max(ray_wall - ray_start, 1e-9), 2),
                "shards": ray_rep.shards,
                "repeats_dropped": ray_rep.repeats_dropped,
                "stages_s (construction summed over actors)": ray_rep.timings,
            },
            "ray_overhead_s": round(ray_wall - local_wall, 2),
            "ray_overhead_after_start_s": round(ray_wall - ray_start - local_wall, 2),
        }
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def test_ray_build_against_local(benchmark):
    """One pass (pedantic, one round): the figures go to extra_info and stdout."""
    import pytest

    pytest.importorskip("ray")
    n = int(os.environ.get("XMEM_BENCH_CONVERSATIONS", "100"))
    res = benchmark.pedantic(lambda: run(n=n), rounds=1, iterations=1)
    benchmark.extra_info.update(res)
    print(json.dumps(res, indent=2))
    assert res["stores_equal"]


if __name__ == "__main__":
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    out = run()
    print(json.dumps(out, indent=2))
    if len(sys.argv) > 1:
        Path(sys.argv[1]).write_text(json.dumps(out, indent=2))
