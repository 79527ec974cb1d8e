"""One user, a long memory: what a write and a search cost as the memory grows.

One long synthetic user-assistant chat (``xmemory synth --long``: sessions of long assistant answers)
streamed through ``MemoryEngine.add`` as an app would send it, two turns per add with their session
numbers: the first ``--adds`` adds timed on an empty memory, the middle of the chat added in larger
batches (untimed, to save time), then the last ``--adds`` adds timed on the full memory. Then searches
at 600 tokens and deletes of single messages spread over the memory. Prints p50 / max per phase and
the ratio last / first: a write that costs what is new keeps it near 1.

    python benchmarks/bench_long_memory.py [--target-tokens 1000000] [--embedder hashing:384] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from xmemory_gpu.datasets.synthetic import generate_long_chats
from xmemory_gpu.embed import load_embedder
from xmemory_gpu.engine import MemoryEngine


def _turns(conv: dict) -> list[dict]:
    c = conv["conversation"]
    keys = sorted(
        (k for k in c if k.startswith("session_") and not k.endswith("date_time")), key=lambda s: int(s[8:])
    )
    return [
        {
            "role": "user" if t["speaker"] == c["speaker_a"] else "assistant",
            "content": t["text"],
            "session": int(k[8:]),
        }
        for k in keys
        for t in c[k]
    ]


def _p(xs: list[float]) -> dict:
    return {
        "p50_ms": round(1000 * statistics.median(xs), 1),
        "max_ms": round(1000 * max(xs), 1),
        "n": len(xs),
    }


def _cpu() -> str:
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=False).stdout
        return next(ln.split(":", 1)[1].strip() for ln in out.splitlines() if ln.startswith("Model name"))
    except (OSError, StopIteration):
        return platform.processor() or "unknown"


def run(target_tokens: int, embedder: str, adds: int, seed: int) -> dict:
    turns = _turns(generate_long_chats(1, seed=seed, target_tokens=target_tokens)[0])
    n = len(turns)
    emb = load_embedder(embedder)
    out: dict = {"embedder": embedder, "target_tokens": target_tokens, "turns": n, "cpu": _cpu()}
    with tempfile.TemporaryDirectory() as tmp, MemoryEngine.open(Path(tmp) / "s", embedder=emb) as eng:

        def timed_adds(lo: int) -> list[float]:
            ts = []
            for i in range(lo, min(lo + 2 * adds, n), 2):
                t = time.perf_counter()
                eng.add(turns[i : i + 2], user_id="u")
                ts.append(time.perf_counter() - t)
            return ts

        first = timed_adds(0)
        mid_end = max(2 * adds, n - 2 * adds)
        t = time.perf_counter()
        for i in range(2 * adds, mid_end, 50):
            eng.add(turns[i : min(i + 50, mid_end)], user_id="u")
        out["middle_s"] = round(time.perf_counter() - t, 1)
        last = timed_adds(mid_end)
        stats = eng.stats()
        searches = []
        for q in (
            "What did we discuss about the budget?",
            "Which trip am I planning?",
            "What is my job?",
        ) * 3:
            t = time.perf_counter()
            eng.search(q, user_id="u", budget_tokens=600)
            searches.append(time.perf_counter() - t)
        ids = [u["id"] for u in eng.get_all(user_id="u") if u["type"] == "message"]
        deletes = []
        for mid in ids[:: max(1, len(ids) // 5)][:5]:
            t = time.perf_counter()
            eng.delete(mid, user_id="u")
            deletes.append(time.perf_counter() - t)
    out |= {
        "statements": stats["semantics"],
        "themes": stats["themes"],
        "add_first": _p(first),
        "add_last": _p(last),
        "last_over_first": round(statistics.median(last) / statistics.median(first), 2),
        "search_600": _p(searches),
        "delete": _p(deletes),
    }
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--target-tokens", type=int, default=1_000_000)
    ap.add_argument("--embedder", default="hashing:384")
    ap.add_argument("--adds", type=int, default=20, help="adds timed at each end")
    ap.add_argument("--seed", type=int, default=3)
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    res = run(args.target_tokens, args.embedder, args.adds, args.seed)
    print(json.dumps(res, indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps(res, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
