"""The live engine under load, all on this machine's CPU with the embedded embedder
(all-MiniLM-L6-v2; ``XMEM_BENCH_EMBEDDER=hashing:384`` for a kernel-only view):

(a) streaming ingest: ``XMEM_BENCH_MEMORIES`` synthetic memories (default 1,000), one new message
    per memory per round (a round = ``add_batch`` calls of at most ``limits.max_items`` memories each, across all memories), ``XMEM_BENCH_ROUNDS``
    rounds (default 8): messages per second and round latency, against the bulk build of the same
    messages (``build_store``) in the same run;
(b) search latency p50 / p99 of 4 reader threads, idle and while the writer ingests;
(c) delete throughput (single messages, each a re-derivation and a commit).

Run: ``python -m pytest benchmarks/bench_engine.py -s`` (figures printed and in extra_info), or
``python benchmarks/bench_engine.py`` for the JSON report. Loops are bounded by the round counts.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

from xmemory_gpu.construct.pipeline import build_store
from xmemory_gpu.datasets.synthetic import generate_conversations, write_json
from xmemory_gpu.embed import load_embedder
from xmemory_gpu.engine import MemoryEngine

N_MEM = int(os.environ.get("XMEM_BENCH_MEMORIES", "1000"))
ROUNDS = int(os.environ.get("XMEM_BENCH_ROUNDS", "8"))
EMBEDDER = os.environ.get("XMEM_BENCH_EMBEDDER", "all-MiniLM-L6-v2")
READERS = 4


def _stream_data(n: int, rounds: int) -> list[dict]:
    """Synthetic conversations cut to their first ``rounds`` turns (LoCoMo format)."""
    convs = generate_conversations(
        n, seed=7, sessions=(1, 1), turns_per_session=(max(rounds, 8), max(rounds, 8) + 4)
    )
    for c in convs:
        c["conversation"]["session_1"] = c["conversation"]["session_1"][:rounds]
        for k in [
            k
            for k in c["conversation"]
            if k.startswith("session_") and k not in ("session_1", "session_1_date_time")
        ]:
            del c["conversation"][k]
        c["qa"] = c["qa"][:2]
    return convs


def _messages(conv: dict) -> list[dict]:
    return [
        {"id": t["dia_id"], "speaker": t["speaker"], "content": t["text"], "session": 1}
        for t in conv["conversation"]["session_1"]
    ]


def _pct(xs: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(xs) * 1e3, q)) if xs else float("nan")


def _add_all(eng: MemoryEngine, items: list[dict]) -> None:
    """``items`` in ``add_batch`` calls of at most the engine's item limit each."""
    step = eng.limits.max_items
    for i in range(0, len(items), step):
        eng.add_batch(items[i : i + step])


def run(n_mem: int = N_MEM, rounds: int = ROUNDS, embedder: str = EMBEDDER) -> dict:
    emb = load_embedder(embedder)
    emb.encode(["warm up the model"])
    convs = _stream_data(n_mem, rounds)
    msgs = [_messages(c) for c in convs]
    tmp = Path(tempfile.mkdtemp(prefix="xmem-bench-engine-"))
    try:
        data = write_json(convs, tmp / "stream.json")
        t0 = time.perf_counter()
        rep = build_store(data, tmp / "bulk", embedder=emb, progress=False, shard_size=256)
        bulk_s = time.perf_counter() - t0
        n_msgs = sum(len(m) for m in msgs)

        eng = MemoryEngine.open(tmp / "live", embedder=emb)
        round_s = []
        for r in range(rounds):
            t1 = time.perf_counter()
            _add_all(
                eng,
                [
                    {"user_id": c["sample_id"], "messages": m[r : r + 1]}
                    for c, m in zip(convs, msgs)
                    if r < len(m)
                ],
            )
            round_s.append(time.perf_counter() - t1)
        stream_s = sum(round_s)

        questions = [q["question"] for c in convs[:50] for q in c["qa"]][:100]
        users = [c["sample_id"] for c in convs[:50] for _ in c["qa"]][:100]
        lat_idle = _readers(eng, questions, users, None)
        extra = [
            [{"speaker": "User", "content": f"Extra note {r} for memory {i}: I bought a new lamp."}]
            for i in range(n_mem)
            for r in range(1)
        ]

        def writer():
            for r in range(3):  # bounded: three more rounds
                _add_all(
                    eng,
                    [
                        {
                            "user_id": c["sample_id"],
                            "messages": [dict(e[0], content=e[0]["content"] + f" ({r})")],
                        }
                        for c, e in zip(convs, extra)
                    ],
                )

        lat_busy = _readers(eng, questions, users, writer)
        victims = [m[0]["id"] for m in msgs[:20]]
        t2 = time.perf_counter()
        for c, v in zip(convs[:20], victims):
            eng.delete(v, user_id=c["sample_id"])
        del_s = time.perf_counter() - t2
        eng.close()
        return {
            "embedder": emb.name,
            "memories": n_mem,
            "rounds": rounds,
            "messages": n_msgs,
            "bulk_build_s": bulk_s,
            "bulk_msgs_per_s": n_msgs / bulk_s,
            "bulk_stage_s": rep.timings,
            "stream_s": stream_s,
            "stream_msgs_per_s": n_msgs / stream_s,
            "round_s_median": float(np.median(round_s)),
            "round_s_max": float(np.max(round_s)),
            "stream_over_bulk": (n_msgs / stream_s) / (n_msgs / bulk_s),
            "search_idle_ms": {"p50": _pct(lat_idle, 50), "p99": _pct(lat_idle, 99), "n": len(lat_idle)},
            "search_ingest_ms": {"p50": _pct(lat_busy, 50), "p99": _pct(lat_busy, 99), "n": len(lat_busy)},
            "deletes_per_s": len(victims) / del_s,
        }
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _readers(eng: MemoryEngine, questions: list[str], users: list[str], writer) -> list[float]:
    """Latencies (s) of single-query searches by READERS threads, each over the question list once
    (bounded), while ``writer`` (if any) runs."""
    lat: list[float] = []
    lock = threading.Lock()

    def reader(k: int) -> None:
        mine = []
        for q, u in list(zip(questions, users))[k::READERS]:
            t = time.perf_counter()
            eng.search(q, user_id=u, strategy="xmemory")
            mine.append(time.perf_counter() - t)
        with lock:
            lat.extend(mine)

    threads = [threading.Thread(target=reader, args=(k,)) for k in range(READERS)]
    w = threading.Thread(target=writer) if writer else None
    if w:
        w.start()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if w:
        w.join()
    return lat


def test_engine_ingest_search_delete(benchmark):
    """One pass (pedantic, one round): the figures go to extra_info and stdout."""
    n = int(os.environ.get("XMEM_BENCH_MEMORIES", "200"))
    res = benchmark.pedantic(lambda: run(n_mem=n), rounds=1, iterations=1)
    benchmark.extra_info.update(res)
    print(json.dumps(res, indent=2))
    assert res["messages"] == sum(1 for _ in range(n)) * res["rounds"] or res["messages"] > 0


if __name__ == "__main__":
    out = run()
    print(json.dumps(out, indent=2))
    if len(sys.argv) > 1:
        from _record import write_record

        write_record(sys.argv[1], out)
