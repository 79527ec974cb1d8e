"""``xmemory build --ray``: the store built on Ray Data equals the local build's; a worker killed
mid-shard and a driver killed mid-run still end with every memory exactly once.

One local Ray instance per module (``num_cpus=2``, a 500 MB object store); the hashing embedder."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from xmemory_gpu.cli import main
from xmemory_gpu.config import XMemoryConfig
from xmemory_gpu.construct.pipeline import build_store
from xmemory_gpu.datasets.locomo import load_locomo
from xmemory_gpu.datasets.synthetic import generate_conversations, write_json
from xmemory_gpu.distributed.ray_build import (
    load_conversations,
)
from xmemory_gpu.embed import load_embedder
from xmemory_gpu.memory.store import Store

SPEC = "hashing:256"
N = 9


def _cfg() -> XMemoryConfig:
    cfg = XMemoryConfig()
    cfg.embed.model = SPEC
    return cfg


def _dump(path: Path) -> dict:
    """Every memory's records, arrays (exact bytes) and stats but timings; f(P) is one of the stats."""
    st = Store.open(path)
    out = {}
    for mid in st.memory_ids():
        m = st.get(mid)
        out[mid] = (
            [x.__dict__ for x in m.messages],
            [e.__dict__ for e in m.episodes],
            [s.__dict__ for s in m.semantics],
            [t.__dict__ for t in m.themes],
            {k: v.tobytes() for k, v in m.arrays().items()},
            {k: v for k, v in m.stats.items() if k != "timings"},
            st.counts(mid),
        )
    st.close()
    return out


def _rows(path: Path) -> list[str]:
    with sqlite3.connect(path / "memory.sqlite") as con:
        return [r[0] for r in con.execute("SELECT memory_id FROM memories")]


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("ray")
    return write_json(generate_conversations(N, seed=4, sessions=(2, 5)), d / "d.json")


@pytest.fixture(scope="module")
def local_store(data, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("local") / "s"
    build_store(data, out, embedder=load_embedder(SPEC), config=_cfg(), shard_size=4, progress=False)
    return out


@pytest.fixture(scope="module")
def ray_cluster():
    ray = pytest.importorskip("ray")
    pytest.importorskip("ray.data")
    ray.init(num_cpus=2, object_store_memory=500 * 2**20, include_dashboard=False, log_to_driver=False)
    yield ray
    ray.shutdown()


def test_loading_matches_the_local_build(data):
    convs = load_conversations([data], limit=5, max_sessions=1)
    assert [c.sample_id for c in convs] == [c.sample_id for c in load_locomo(data)[:5]]
    assert all(len({m.session for m in c.messages}) == 1 for c in convs)
    with pytest.raises(ValueError, match="also appears"):
        load_conversations([data, data])


def test_cli_without_ray_is_one_line(data, tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` fails as if it were not installed
    rc = main(
        ["build", str(data), "--out", str(tmp_path / "s"), "--embedder", SPEC, "--ray", "--no-progress"]
    )
    err = capsys.readouterr().err.strip()
    assert rc == 2 and "\n" not in err
    assert "Ray Data is not installed" in err and "xmemory-gpu[dist]" in err


def test_cli_refuses_an_input_taken_for_the_address(data, tmp_path, capsys):
    rc = main(["build", "--ray", str(data), "--out", str(tmp_path / "s")])
    err = capsys.readouterr().err
    assert rc == 2 and "argument --ray" in err and "after the inputs" in err
    assert not (tmp_path / "s").exists()


def test_cli_refuses_ray_workers_without_ray(data, tmp_path, capsys):
    rc = main(["build", str(data), "--out", str(tmp_path / "s"), "--embedder", SPEC, "--ray-workers", "2"])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and err == "xmemory build: error: --ray-workers needs --ray (it sizes the Ray actor pool)"
    assert not (tmp_path / "s").exists()


_LOOPBACK = {"127.0.0.1", "::ffff:127.0.0.1", "::1"}


def test_local_ray_listens_on_loopback_only_and_stops_on_ctrl_c(data, tmp_path, monkeypatch):
    """Before the module's own Ray instance: ``address="local"`` starts Ray here. Every socket its
    processes listen on is bound to 127.0.0.1; a Ctrl-C mid-build shuts it down (no process left)."""
    ray = pytest.importorskip("ray")
    pytest.importorskip("ray.data")
    psutil = pytest.importorskip("psutil")
    from xmemory_gpu.distributed import ray_build

    assert not ray.is_initialized()
    seen: dict[int, list] = {}

    def interrupted(*args, **kwargs):
        for p in psutil.Process().children(recursive=True):
            try:
                seen[p.pid] = [
                    c.laddr for c in p.net_connections(kind="inet") if c.status == psutil.CONN_LISTEN
                ]
            except psutil.NoSuchProcess:
                pass
        raise KeyboardInterrupt

    monkeypatch.setattr(ray_build, "_run", interrupted)
    with pytest.raises(KeyboardInterrupt):
        ray_build.build_store_ray(
            data,
            tmp_path / "s",
            config=_cfg(),
            progress=False,
            workers=1,
            init_kwargs={"num_cpus": 1, "object_store_memory": 100 * 2**20, "log_to_driver": False},
        )
    assert not ray.is_initialized()
    listening = [a for addrs in seen.values() for a in addrs]
    assert len(listening) >= 3, seen  # GCS, raylet (node manager and object manager), ...
    assert all(a.ip in _LOOPBACK for a in listening), seen

    def alive() -> list[str]:
        out = []
        for pid in seen:
            try:
                p = psutil.Process(pid)
                if p.status() != psutil.STATUS_ZOMBIE:
                    out.append(p.name())
            except psutil.NoSuchProcess:
                pass
        return out

    for _ in range(600):  # bounded: Ray's processes end by themselves once it is shut down
        if not alive():
            break
        time.sleep(0.5)
    assert not alive()


# -- on a local Ray instance ---------------------------------------------------------------------
def test_ray_build_equals_local_build(ray_cluster, data, local_store, tmp_path):
    from xmemory_gpu.distributed import build_store_ray

    rep = build_store_ray(data, tmp_path / "s", config=_cfg(), shard_size=2, workers=2, progress=False)
    assert sorted(rep.built) == sorted(_rows(local_store)) and not rep.skipped
    assert -(-N // 2) <= rep.shards <= N and rep.workers == 2 and rep.repeats_dropped == 0
    assert {"embed_messages", "themes", "commit", "encode"} <= set(rep.timings)
    ray_dump, local_dump = _dump(tmp_path / "s"), _dump(local_store)
    assert ray_dump == local_dump
    assert all(np.isfinite(v[5]["f_P"]) for v in ray_dump.values())


def test_worker_killed_mid_shard_gives_every_memory_once(ray_cluster, data, local_store, tmp_path):
    from xmemory_gpu.distributed import build_store_ray

    marker = tmp_path / "crashed"
    rep = build_store_ray(
        data, tmp_path / "s", config=_cfg(), shard_size=3, workers=2, progress=False, crash_marker=str(marker)
    )
    assert marker.exists()  # a worker did die after building a shard, before returning it
    rows = _rows(tmp_path / "s")
    assert len(rows) == len(set(rows)) == N
    assert _dump(tmp_path / "s") == _dump(local_store)
    assert sorted(rep.built) == sorted(rows)


def test_resume_skips_committed_memories_via_cli(ray_cluster, data, local_store, tmp_path, capsys):
    out = tmp_path / "s"
    build_store(
        data, out, embedder=load_embedder(SPEC), config=_cfg(), limit=4, progress=False
    )  # a run cut short
    # Ray is already initialised in this process: --ray uses it as it is
    rc = main(
        [
            "build",
            str(data),
            "--out",
            str(out),
            "--embedder",
            SPEC,
            "--ray",
            "--ray-workers",
            "2",
            "--shard-size",
            "2",
            "--no-progress",
        ]
    )
    text = capsys.readouterr().out
    assert rc == 0, text
    assert f"built {N - 4} memories, skipped 4 already in" in text and "ray: 2 actors" in text
    rows = _rows(out)
    assert len(rows) == len(set(rows)) == N
    assert _dump(out) == _dump(local_store)


DRIVER = """
import pathlib, sys, time
from xmemory_gpu.memory.store import Store
_commit = Store.commit  # the driver commits groups of memories; once 2 are in, it says so and waits to be killed
def stopping_commit(self, *a, **kw):
    _commit(self, *a, **kw)
    if len(self.memory_ids()) >= 2:
        pathlib.Path(sys.argv[3]).touch()
        time.sleep(3600)  # killed here by the test (bounded all the same)
Store.commit = stopping_commit
from xmemory_gpu.config import XMemoryConfig
from xmemory_gpu.distributed import build_store_ray
cfg = XMemoryConfig()
cfg.embed.model = "hashing:256"
build_store_ray(sys.argv[1], sys.argv[2], config=cfg, shard_size=2, workers=1, progress=False,
                init_kwargs={"num_cpus": 1, "object_store_memory": 200 * 2**20, "log_to_driver": False})
"""


@pytest.mark.slow
def test_driver_killed_mid_run_resumes(ray_cluster, data, local_store, tmp_path):
    from xmemory_gpu.distributed import build_store_ray

    out = tmp_path / "s"
    paused = tmp_path / "paused"
    env = dict(os.environ, HF_HUB_OFFLINE="1")
    proc = subprocess.Popen(
        [sys.executable, "-c", DRIVER, str(data), str(out), str(paused)],
        env=env,
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        for _ in range(6000):  # bounded: the driver commits 2 memories, then waits to be killed
            if paused.exists() or proc.poll() is not None:
                break
            time.sleep(0.2)
        assert proc.poll() is None and paused.exists(), (
            proc.stderr.read().decode()[-2000:] if proc.poll() is not None else ""
        )
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the driver and the Ray instance it started
        proc.wait()
    committed = _rows(out)
    assert 2 <= len(committed) < N
    rep = build_store_ray(data, out, config=_cfg(), shard_size=2, workers=2, progress=False)
    assert sorted(rep.skipped) == sorted(committed) and len(rep.built) == N - len(committed)
    rows = _rows(out)
    assert len(rows) == len(set(rows)) == N
    assert _dump(out) == _dump(local_store)


def test_the_driver_refuses_a_memory_whose_bytes_do_not_match_the_workers_sha256(tmp_path):
    import hashlib
    import json

    from xmemory_gpu.construct.pipeline import build_slices
    from xmemory_gpu.distributed.ray_build import _received
    from xmemory_gpu.memory.codec import encode_slice
    from xmemory_gpu.memory.store import StoreError

    emb = load_embedder("hashing:64")
    convs = load_conversations(write_json(generate_conversations(1, seed=4), tmp_path / "c.json"))
    enc = encode_slice(build_slices(convs, emb)[0], emb.dim)
    row = {
        "arrays": enc.data,
        "sha256": enc.sha256,
        "dim": emb.dim,
        "stats": json.dumps(enc.stats),
        "counts": json.dumps(enc.counts),
        "message_ids": json.dumps(enc.message_ids),
    }
    assert _received(enc.memory_id, row) == enc
    store = Store.open_or_create(tmp_path / "s", dim=emb.dim, embedder=emb.name, config={})
    damaged = enc.data[:-1] + bytes([enc.data[-1] ^ 1])
    with pytest.raises(StoreError, match="do not match their sha256"):
        store.commit([_received(enc.memory_id, {**row, "arrays": damaged})])
    assert hashlib.sha256(damaged).hexdigest() != enc.sha256 and store.memory_ids() == []
    store.commit([_received(enc.memory_id, row)])
    assert store.memory_ids() == [enc.memory_id]
