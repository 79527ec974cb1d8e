"""The memory-bounded engine: open time, RSS, first-touch and resident search latency,
and ``delete_all`` time of an engine over N synthetic memories, with and without
``max_resident_bytes``. Each configuration runs in a fresh process (RSS is the process's own);
the stores are built once (``hashing:384``, 6 messages per memory, ``add_batch`` of 100 users)
and reused from ``--dir``.

    python benchmarks/bench_residency.py --sizes 1000,10000 --budget 16777216 --out residency.json
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

EMBEDDER = "hashing:384"
TOPICS = [
    "tulips",
    "Lisbon",
    "cello",
    "marathon",
    "pottery",
    "sourdough",
    "chess",
    "kayak",
    "Denver",
    "violin",
]


def _talk(u: int) -> list[dict]:
    rnd = random.Random(u)
    return [
        {
            "speaker": "User" if j % 2 else "Ana",
            "content": f"I went to {rnd.choice(TOPICS)} with {rnd.choice(TOPICS)} on day {j}.",
        }
        for j in range(6)
    ]


def build(root: Path, n: int) -> None:
    from xmemory_gpu.engine import MemoryEngine

    if (root / "memory.sqlite").exists():
        return
    with MemoryEngine.open(root, embedder=EMBEDDER) as eng:
        for start in range(0, n, 100):
            eng.add_batch(
                [{"user_id": f"u{i}", "messages": _talk(i)} for i in range(start, min(n, start + 100))]
            )


def _rss_mb() -> float:
    import psutil

    return psutil.Process().memory_info().rss / 2**20


def measure(root: Path, n: int, budget: int | None, searches: int) -> dict:
    """One configuration, in this process; RSS figures are after an engine on an empty store warmed
    the process (``rss_base_mb``), so their difference is the store's."""
    import tempfile

    from xmemory_gpu.engine import MemoryEngine

    with tempfile.TemporaryDirectory() as tmp:  # imports, kernels and the embedder warmed on an empty store
        MemoryEngine.open(Path(tmp) / "s", embedder=EMBEDDER).close()
    base = _rss_mb()
    t0 = time.perf_counter()
    eng = MemoryEngine.open(root, embedder=EMBEDDER, read_only=True, max_resident_bytes=budget)
    open_s = time.perf_counter() - t0
    rss_open = _rss_mb()
    rnd = random.Random(3)
    users = [f"u{rnd.randrange(n)}" for _ in range(searches)]
    first, again, peak = [], [], rss_open
    for u in users:
        t0 = time.perf_counter()
        eng.search("Who went to the marathon?", user_id=u)
        first.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        eng.search("Who went to the marathon?", user_id=u)  # now resident
        again.append(time.perf_counter() - t0)
        peak = max(peak, _rss_mb())
    eng.close()
    copy = root.parent / f"{root.name}-copy"
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(root, copy)
    eng = MemoryEngine.open(copy, embedder=EMBEDDER, max_resident_bytes=budget)
    times = []
    for u in users[:5]:
        t0 = time.perf_counter()
        eng.delete_all(user_id=u)
        times.append(time.perf_counter() - t0)
    eng.close()
    shutil.rmtree(copy, ignore_errors=True)
    ms = lambda xs: round(1000 * statistics.median(xs), 2)  # noqa: E731
    return {
        "memories": n,
        "budget": budget,
        "open_s": round(open_s, 3),
        "rss_base_mb": round(base, 1),
        "rss_after_open_mb": round(rss_open, 1),
        "rss_peak_searching_mb": round(peak, 1),
        "search_first_touch_p50_ms": ms(first),
        "search_resident_p50_ms": ms(again),
        "delete_all_p50_ms": ms(times),
        "searches": searches,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1000,10000")
    ap.add_argument("--budget", type=int, default=16 * 2**20)
    ap.add_argument("--searches", type=int, default=200)
    ap.add_argument(
        "--dir", type=Path, default=None, help="where the stores go (default: a new temporary folder)"
    )
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--one", nargs=3, metavar=("ROOT", "N", "BUDGET"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        root, n, budget = Path(args.one[0]), int(args.one[1]), int(args.one[2])
        print(json.dumps(measure(root, n, budget if budget >= 0 else None, args.searches)))
        return
    rows = []
    base = args.dir or Path(tempfile.mkdtemp(prefix="xmem-residency-"))
    for n in map(int, args.sizes.split(",")):
        root = base / f"n{n}"
        t0 = time.perf_counter()
        build(root, n)
        print(f"store of {n} memories ready ({time.perf_counter() - t0:.1f} s)", flush=True)
        for budget in (-1, args.budget):
            out = subprocess.run(
                [
                    sys.executable,
                    __file__,
                    "--one",
                    str(root),
                    str(n),
                    str(budget),
                    "--searches",
                    str(args.searches),
                ],
                capture_output=True,
                text=True,
                check=True,
                env={**os.environ, "HF_HUB_OFFLINE": "1"},
            )
            rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
            print(json.dumps(rows[-1]), flush=True)
    if args.out:
        from _record import write_record

        write_record(args.out, {"runs": rows})


if __name__ == "__main__":
    main()
