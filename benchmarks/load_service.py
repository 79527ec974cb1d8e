"""Load test of ``xmemory serve`` on loopback: 1, 8 and 32 concurrent clients, searches and adds,
with request coalescing on (``--coalesce-ms 2``) and off (``0``: one engine call per request).
Reports throughput (requests/s) and p50 / p99 latency (ms) per case. Bounded: every client sends
``--requests`` requests, then stops; the server is stopped at the end.

  python benchmarks/load_service.py --out DIR [--users 64] [--requests 10] [--embedder all-MiniLM-L6-v2]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

import numpy as np
from _record import write_record

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from xmemory_gpu.client import MemoryClient  # noqa: E402

KEY = "load-test-key-0123456789"
TOPICS = [
    "kayak",
    "violin",
    "garden",
    "Lisbon",
    "nurse",
    "marathon",
    "pottery",
    "chess",
    "Denver",
    "sourdough",
]


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _serve(store: Path, coalesce_ms: float, embedder: str) -> tuple[subprocess.Popen, str]:
    port = _port()
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "XMEMORY_API_KEY": KEY, "PYTHONPATH": str(ROOT)}
    p = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "xmemory_gpu",
            "serve",
            str(store),
            "--port",
            str(port),
            "--coalesce-ms",
            str(coalesce_ms),
            "--embedder",
            embedder,
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    for _ in range(600):  # bounded start-up wait (60 s)
        try:
            urllib.request.urlopen(url + "/health", timeout=1).read()
            return p, url
        except OSError:
            time.sleep(0.1)
    p.kill()
    raise RuntimeError("server did not start")


def _load(url: str, clients: int, requests: int, users: int, kind: str, tag: str) -> dict:
    lat: list[float] = []
    lock = threading.Lock()

    def client(c: int) -> None:
        mc = MemoryClient(url, api_key=KEY, timeout=600)
        mine = []
        for r in range(requests):
            u = f"user{(c * requests + r) % users}"
            t = time.perf_counter()
            if kind == "search":
                mc.search(
                    f"What did I say about {TOPICS[(c + r) % len(TOPICS)]}?", user_id=u, strategy="xmemory"
                )
            else:
                mc.add(
                    [
                        {
                            "role": "user",
                            "content": f"{tag} {c}-{r}: today I practised {TOPICS[r % len(TOPICS)]} again.",
                        }
                    ],
                    user_id=u,
                )
            mine.append(time.perf_counter() - t)
        with lock:
            lat.extend(mine)

    threads = [threading.Thread(target=client, args=(c,)) for c in range(clients)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    ms = np.asarray(lat) * 1e3
    return {
        "requests": len(lat),
        "req_per_s": len(lat) / wall,
        "p50_ms": float(np.percentile(ms, 50)),
        "p99_ms": float(np.percentile(ms, 99)),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--users", type=int, default=64)
    ap.add_argument("--requests", type=int, default=10)
    ap.add_argument("--embedder", default="all-MiniLM-L6-v2")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="xmem-load-"))
    store = tmp / "store"
    rows = []
    p, url = _serve(store, 2.0, args.embedder)
    try:  # preload: every user gets a short history
        mc = MemoryClient(url, api_key=KEY, timeout=1800)
        mc.add_batch(
            [
                {
                    "user_id": f"user{u}",
                    "messages": [
                        {
                            "role": "user" if i % 2 == 0 else "assistant",
                            "content": f"I love {TOPICS[(u + i) % len(TOPICS)]}; it is my week {i} hobby.",
                        }
                        for i in range(8)
                    ],
                }
                for u in range(args.users)
            ]
        )
    finally:
        p.send_signal(signal.SIGTERM)
        p.wait(timeout=120)
    for coalesce in (0.0, 2.0):
        p, url = _serve(store, coalesce, args.embedder)
        try:
            _load(url, 4, 2, args.users, "search", "warm")  # warm-up, not reported
            for clients in (1, 8, 32):
                for kind in ("search", "add"):
                    r = _load(url, clients, args.requests, args.users, kind, f"c{coalesce}")
                    rows.append({"coalesce_ms": coalesce, "clients": clients, "kind": kind, **r})
                    print(json.dumps(rows[-1]), flush=True)
        finally:
            p.send_signal(signal.SIGTERM)
            p.wait(timeout=120)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    report = {
        "embedder": args.embedder,
        "users": args.users,
        "requests_per_client": args.requests,
        "rows": rows,
    }
    s32 = {r["coalesce_ms"]: r["req_per_s"] for r in rows if r["clients"] == 32 and r["kind"] == "search"}
    report["search_32_clients_coalesced_over_single"] = s32.get(2.0, 0) / s32[0.0] if s32.get(0.0) else None
    write_record(out / "load.json", report)
    lines = ["| coalescing | clients | kind | req/s | p50 ms | p99 ms |", "|---|---|---|---|---|---|"]
    lines += [
        f"| {'on (2 ms)' if r['coalesce_ms'] else 'off'} | {r['clients']} | {r['kind']} | {r['req_per_s']:.1f} | "
        f"{r['p50_ms']:.0f} | {r['p99_ms']:.0f} |"
        for r in rows
    ]
    (out / "load.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    print(
        "32-client search throughput, coalesced / one call per request:",
        report["search_32_clients_coalesced_over_single"],
    )


if __name__ == "__main__":
    main()
