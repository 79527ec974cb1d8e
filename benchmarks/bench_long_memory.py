"""One user, a long memory: what a write, a search and a delete cost as the memory grows.

One long synthetic user-assistant chat (``xmemory synth --long``: sessions of long assistant answers)
streamed through ``MemoryEngine.add`` as an app would send it, two turns per add with their session
numbers. ``--adds`` adds are timed on the empty memory, then at 10%, 50% and 100% of the chat (the
turns between added in larger batches, untimed); at each of those points ``--searches`` searches at
600 tokens (beside the query's encoder time alone: the floor a search cannot go under) and
``--deletes`` deletes of single messages spread over the memory, with the memory's statements and
themes, its size on disk and the process's resident memory (RSS; also after the first adds, so
what the memory adds to it shows apart from the encoder's share). p50 and p99 per phase (p99 of a
few samples is near their maximum); ``add / empty`` compares an add with the same add to an empty
memory: a write that costs what is new keeps it near 1. Every search asks a question not asked
before in the run (``QUERIES``): a search keeps what it counted for the units it met, so a question
asked again would cost less than a user's next one. At the end the stored memory is opened in a
fresh process that adds two turns, searches three times and returns the C heap's free pages
(``malloc_trim``), and an empty memory the same way: the difference of their RSS is what holding the
memory costs a process at rest (``reopened``), without the streaming process's history of freed
temporaries and encoder batches; the first add and searches of that process are timed, and again in
a second fresh process that calls ``MemoryEngine.warm`` first (``reopened_warm``: the warm-up's
seconds, and what the first requests cost after it).

    python benchmarks/bench_long_memory.py [--target-tokens 1000000] [--embedder hashing:384] [--json OUT]
        [--backend cuda]   # the kernels and the encoder on the GPU
        [--beam BEAM/chats/1M --limit N]   # public text: BEAM's first N conversations, one after another

With ``--beam`` the chat is not the synthetic one but a public split's conversations (``datasets.beam``)
streamed one after another into the one memory, their session numbers kept increasing: text nobody here
wrote, with its own repetition (the synthetic chat repeats a handful of sentences hundreds of times, which
makes one statement's row of sources hundreds wide). The searches ask the same general questions either
way: what a search costs, not what it finds.

As a pytest-benchmark suite (``scripts/bench.sh``) it streams ``1,000,000 x XMEM_BENCH_SCALE``
tokens with the ``hashing:384`` encoder and puts the figures in the table's ``extra_info``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _record import cpu_name, write_record

from xmemory_gpu.datasets.beam import load_beam
from xmemory_gpu.datasets.locomo import DatasetError
from xmemory_gpu.datasets.synthetic import generate_long_chats
from xmemory_gpu.embed import encode_queries, load_embedder
from xmemory_gpu.engine import MemoryEngine
from xmemory_gpu.heap import release_now
from xmemory_gpu.ops.devices import encoder_device


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


def public_turns(path: str | Path, limit: int | None = None) -> tuple[list[dict], list[str]]:
    """BEAM's conversations under ``path`` (at most ``limit``) as one stream of turns (role, content,
    timestamp and a session number that keeps increasing from one conversation to the next) and the
    conversations' names, in order."""
    out: list[dict] = []
    chats = load_beam(path, limit)
    for chat in chats:
        base = out[-1]["session"] + 1 if out else 0
        first = None
        for m in chat.messages():
            first = m["session"] if first is None else first
            turn = {"role": m["role"], "content": m["content"], "session": base + m["session"] - first}
            if m.get("timestamp"):
                turn["timestamp"] = m["timestamp"]
            out.append(turn)
    return out, [c.user_id for c in chats]


def _p(xs: list[float]) -> dict:
    """p50 and p99 (interpolated over the samples) in ms, and the number of samples."""
    ms = sorted(1000 * x for x in xs)
    p99 = statistics.quantiles(ms, n=100, method="inclusive")[98] if len(ms) > 1 else ms[0]
    return {"p50_ms": round(statistics.median(ms), 1), "p99_ms": round(p99, 1), "n": len(ms)}


def _rss_mb() -> float:
    """The process's resident memory now (MB; its peak where /proc is missing)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        pass
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def _disk_mb(root: Path) -> float:
    return round(sum(f.stat().st_size for f in root.rglob("*") if f.is_file()) / 2**20, 2)


PROBE_TURNS = (
    {"role": "user", "content": "I moved the dentist appointment to Friday at nine.", "session": 10**6},
    {"role": "assistant", "content": "Noted: the dentist is now on Friday at 9 am.", "session": 10**6},
)


def _embedder(spec: str, backend: str):
    """``spec`` loaded where ``backend`` runs its encoder (on the GPU for ``cuda`` / ``triton``)."""
    return load_embedder(spec, device=encoder_device(backend))


def probe(store: str, embedder: str, backend: str = "auto", warm: bool = False) -> dict:
    """In this (fresh) process: open ``store`` (``warm``: and warm its memory up), add two turns,
    search three times, trim the heap; its RSS in MB, and the seconds of each step (the add and the
    searches in ms)."""
    t0 = time.perf_counter()
    with MemoryEngine.open(store, embedder=_embedder(embedder, backend), backend=backend) as eng:
        out: dict = {"open_s": round(time.perf_counter() - t0, 3)}
        if warm:
            t = time.perf_counter()
            eng.warm(user_id="u")
            out["warm_s"] = round(time.perf_counter() - t, 3)
        t = time.perf_counter()
        eng.add(list(PROBE_TURNS), user_id="u")
        out["first_add_ms"] = round(1000 * (time.perf_counter() - t), 1)
        out["first_searches_ms"] = []
        for q in PROBE_QUERIES:
            t = time.perf_counter()
            eng.search(q, user_id="u", budget_tokens=600)
            out["first_searches_ms"].append(round(1000 * (time.perf_counter() - t), 1))
        release_now()
        out["rss_mb"] = _rss_mb()
        return out


PROBE_TIMEOUT_S = 1800  # a fresh process opening a 10 M-token memory takes seconds, not minutes


def _probe(store: Path | None, embedder: str, backend: str = "auto", warm: bool = False) -> dict:
    """``probe`` in a fresh interpreter on a copy of ``store`` (the original is left as it was), or
    on a new empty store where ``store`` is None."""
    import shutil

    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / "s"
        if store is not None:
            shutil.copytree(store, copy)
        cmd = [sys.executable, __file__, "--probe", str(copy), "--embedder", embedder, "--backend", backend]
        done = subprocess.run(
            cmd + ["--warm"] * warm, capture_output=True, text=True, timeout=PROBE_TIMEOUT_S
        )
        if done.returncode:
            raise RuntimeError(
                f"the RSS probe failed (exit {done.returncode}): {done.stderr.strip()[-2000:]}"
            )
        return json.loads(done.stdout.strip().splitlines()[-1])


# general questions, each asked once in a run (a point takes the next ``searches`` of them, round the
# list when a run asks more)
QUERIES = (
    "What did we discuss about the budget?",
    "Which trip am I planning?",
    "What is my job?",
    "What did I say about my family?",
    "Which tools did you recommend?",
    "When is my next deadline?",
    "What problem was I trying to solve last time?",
    "Which books or courses did I mention?",
    "What are my goals for this year?",
    "What did we decide about the schedule?",
    "Which errors did I run into?",
    "What do I do on weekends?",
    "How did the meeting with my manager go?",
    "What did I ask about testing?",
    "Which city do I live in?",
    "What changed since we last talked?",
    "What was the plan for the database?",
    "Which options did we compare?",
    "What did I say about my health?",
    "What did you suggest for the performance issue?",
    "Who did I mention from work?",
    "What is the status of my project?",
    "Which dates did I give you?",
    "What did I want to learn next?",
    "How much did I say it would cost?",
    "What did we say about security?",
    "Which version did I upgrade to?",
)
PROBE_QUERIES = ("What did I tell you about my plans?", "Which step comes next?", "What did we agree on?")
POINTS = (0.1, 0.5, 1.0)  # shares of the chat at which adds, searches and deletes are timed


def run(
    target_tokens: int,
    embedder: str,
    adds: int = 20,
    seed: int = 3,
    searches: int = 9,
    deletes: int = 5,
    backend: str = "auto",
    turns: list[dict] | None = None,
    chat: str = "synthetic",
) -> dict:
    """Stream the chat and time the phases (``backend``: the engine's kernels, and the encoder's
    device); the figures as a JSON-ready dict. ``turns``: another chat than the synthetic one of
    ``target_tokens`` (``public_turns``), named ``chat`` in the figures."""
    synthetic = turns is None
    if synthetic:
        turns = _turns(generate_long_chats(1, seed=seed, target_tokens=target_tokens)[0])
    n = len(turns)
    emb = _embedder(embedder, backend)
    out: dict = {
        "embedder": embedder,
        "backend": backend,
        "chat": chat,
        "target_tokens": target_tokens if synthetic else None,
        "turns": n,
        "characters": sum(len(t["content"]) for t in turns),
        "cpu": cpu_name(),
    }
    with (
        tempfile.TemporaryDirectory() as tmp,
        MemoryEngine.open(Path(tmp) / "s", embedder=emb, backend=backend) as eng,
    ):

        def timed_adds(lo: int) -> list[float]:
            ts = []
            for i in range(lo, min(lo + 2 * adds, n), 2):
                t = time.perf_counter()
                eng.add(turns[i : i + 2], user_id="u")
                ts.append(time.perf_counter() - t)
            return ts

        empty = timed_adds(0)
        out["add_empty"] = _p(empty)
        out["rss_empty_mb"] = _rss_mb()  # the process with its encoder and an almost empty memory
        done, asked = min(2 * adds, n), 0
        for share in POINTS:
            start = max(done, int(share * n) - 2 * adds)
            for i in range(done, start, 50):
                eng.add(turns[i : min(i + 50, start)], user_id="u")
            add = timed_adds(start)
            held_mb = round(eng._theme_memo.nbytes / 2**20, 1)  # what the engine keeps of the themes
            done = min(start + 2 * adds, n)
            search, encode = [], []
            for q in [QUERIES[(asked + j) % len(QUERIES)] for j in range(searches)]:
                t = time.perf_counter()
                encode_queries(emb, [q])
                encode.append(time.perf_counter() - t)
                t = time.perf_counter()
                eng.search(q, user_id="u", budget_tokens=600)
                search.append(time.perf_counter() - t)
            asked += searches
            ids = [u["id"] for u in eng.get_all(user_id="u") if u["type"] == "message"]
            gone = []
            for mid in ids[:: max(1, len(ids) // deletes)][:deletes]:
                t = time.perf_counter()
                eng.delete(mid, user_id="u")
                gone.append(time.perf_counter() - t)
            stats = eng.stats()
            out[f"at_{round(100 * share)}pct"] = {
                "turns": done,
                "statements": stats["semantics"],
                "themes": stats["themes"],
                "add": _p(add) if add else None,
                "add_over_empty": round(statistics.median(add) / statistics.median(empty), 2)
                if add
                else None,
                "search_600": _p(search),
                "query_encode": _p(encode),
                "delete": _p(gone),
                "disk_mb": _disk_mb(Path(tmp) / "s"),
                "rss_mb": _rss_mb(),
                # what the engine kept of the memory's themes between the adds (a delete drops it)
                "theme_memo_mb": held_mb,
            }
        release_now()
        out["at_100pct"]["rss_trimmed_mb"] = _rss_mb()
        eng.close()
        full = _probe(Path(tmp) / "s", embedder, backend)
        empty_rss = _probe(None, embedder, backend)["rss_mb"]
        share = full["rss_mb"] - empty_rss
        out["reopened"] = {
            **full,
            "rss_empty_mb": empty_rss,
            "memory_mb": round(share, 1),
            "memory_over_disk": round(share / out["at_100pct"]["disk_mb"], 2),
        }
        out["reopened_warm"] = _probe(Path(tmp) / "s", embedder, backend, warm=True)
    return out


def test_long_memory(benchmark) -> None:
    """pytest-benchmark: one stream of ``1,000,000 x XMEM_BENCH_SCALE`` tokens (hashing:384)."""
    from scale import scaled

    tokens = scaled(1_000_000, lo=20_000)
    res = benchmark.pedantic(
        run, args=(tokens, "hashing:384"), kwargs={"adds": 5, "searches": 3, "deletes": 2}, rounds=1
    )
    benchmark.extra_info.update(res)
    assert res["at_100pct"]["search_600"]["n"] == 3


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--target-tokens", type=int, default=1_000_000)
    ap.add_argument("--embedder", default="hashing:384")
    ap.add_argument("--adds", type=int, default=20, help="two-turn adds timed at each point")
    ap.add_argument("--searches", type=int, default=9)
    ap.add_argument("--deletes", type=int, default=5)
    ap.add_argument("--seed", type=int, default=3)
    ap.add_argument(
        "--backend", default="auto", help="kernel backend (cuda / triton: the encoder on the GPU too)"
    )
    ap.add_argument("--beam", default=None, help="a BEAM split folder: its conversations as the chat")
    ap.add_argument("--limit", type=int, default=None, help="with --beam: its first N conversations")
    ap.add_argument("--json", default=None)
    ap.add_argument("--probe", default=None, help=argparse.SUPPRESS)  # the fresh process of ``reopened``
    ap.add_argument("--warm", action="store_true", help=argparse.SUPPRESS)  # ... of ``reopened_warm``
    args = ap.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    if args.probe:
        print(json.dumps(probe(args.probe, args.embedder, args.backend, warm=args.warm)))
        return 0
    turns, chat = None, "synthetic"
    if args.limit is not None and not args.beam:
        print("bench_long_memory: --limit: it counts --beam's conversations; give --beam", file=sys.stderr)
        return 2
    if args.beam:
        try:
            turns, names = public_turns(args.beam, args.limit)
        except DatasetError as exc:
            print(f"bench_long_memory: {exc}", file=sys.stderr)
            return 2
        chat = " ".join(names)
    res = run(
        args.target_tokens,
        args.embedder,
        args.adds,
        args.seed,
        args.searches,
        args.deletes,
        args.backend,
        turns=turns,
        chat=chat,
    )
    print(json.dumps(res, indent=2))
    if args.json:
        write_record(args.json, res)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
