"""Throughput of ``xmemory serve --ray``: 1 vs 2 shards, beside the single-process service, on this machine.

N adds, then N searches, from CONC client threads over 16 users, the hashing:64 embedder, coalescing 2 ms
(the service's default); a local Ray instance on 127.0.0.1 with 2 CPUs, each shard ``num_cpus = 2 / shards``.
Every server binds 127.0.0.1 and every loop is bounded.

    N=400 CONC=8 python benchmarks/ray_serve_load.py [OUT.json]
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import requests

N, CONC = int(os.environ.get("N", 200)), int(os.environ.get("CONC", 8))
USERS = [f"user-{i}" for i in range(16)]


def _request(s: requests.Session, url: str, kind: str, i: int) -> int:
    u = USERS[i % len(USERS)]
    if kind == "add":
        text = f"{u} note {i}: went hiking near lake {i % 7} with friend {i % 5}"
        return s.post(
            url + "/v1/memories", json={"user_id": u, "messages": [{"speaker": u, "text": text}]}
        ).status_code
    return s.post(url + "/v1/search", json={"user_id": u, "query": f"where did {u} go hiking?"}).status_code


def load(url: str) -> dict:
    """{kind: requests/s, p50 / p99 ms, errors} for N adds, then N searches."""
    out = {}
    for kind in ("add", "search"):
        todo = iter(range(N))
        lock = threading.Lock()
        lat: list[float] = []
        bad = [0]

        def worker(kind: str = kind, todo=todo, lock=lock, lat=lat, bad=bad) -> None:
            with requests.Session() as s:
                while True:
                    with lock:
                        i = next(todo, None)
                    if i is None:
                        return
                    t = time.perf_counter()
                    ok = _request(s, url, kind, i) == 200
                    lat.append(time.perf_counter() - t)
                    bad[0] += not ok

        t0 = time.perf_counter()
        threads = [threading.Thread(target=worker) for _ in range(CONC)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        dt = time.perf_counter() - t0
        lat.sort()
        out[kind] = {
            "req_s": round(N / dt, 1),
            "p50_ms": round(1e3 * lat[len(lat) // 2], 1),
            "p99_ms": round(1e3 * lat[int(len(lat) * 0.99)], 1),
            "errors": bad[0],
        }
    return out


def warm(url: str) -> None:
    with requests.Session() as s:
        for u in USERS:
            s.post(url + "/v1/memories", json={"user_id": u, "messages": [{"speaker": u, "text": "warm up"}]})
            s.post(url + "/v1/search", json={"user_id": u, "query": "warm"})


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def single_process(root: Path) -> dict:
    port = free_port()
    p = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "xmemory_gpu",
            "serve",
            str(root / "single"),
            "--embedder",
            "hashing:64",
            "--port",
            str(port),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(240):  # bounded wait for the port
            try:
                if requests.get(url + "/health", timeout=1).status_code == 200:
                    break
            except requests.RequestException:
                time.sleep(0.5)
        warm(url)
        return load(url)
    finally:
        p.terminate()
        p.wait(60)


def sharded(root: Path) -> dict:
    import ray
    from ray import serve

    from xmemory_gpu.distributed.ray_serve import APP_NAME, deploy, init_ray

    init_ray("local", num_cpus=2)
    out = {}
    try:
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        for n in (1, 2):
            deploy(str(root / f"set-{n}"), shards=n, port=port, embedder="hashing:64", shard_cpus=2 / n)
            warm(url)
            out[f"ray serve, {n} shard(s)"] = load(url)
            serve.delete(APP_NAME)
    finally:
        serve.shutdown()
        ray.shutdown()
    return out


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        res = {"single process (xmemory serve)": single_process(Path(tmp))} | sharded(Path(tmp))
    print(json.dumps(res, indent=1))
    if len(sys.argv) > 1:
        from _record import write_record

        write_record(sys.argv[1], {"n": N, "clients": CONC, "embedder": "hashing:64", "per_s": res})
    return 0


if __name__ == "__main__":
    sys.exit(main())
