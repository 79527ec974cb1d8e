"""Host time of a batched search per strategy: every LoCoMo question of the store's
conversations (categories 1-4, as ``xmemory eval`` asks them) in one ``Retriever.search`` call
with the query embeddings given, so the figure is retrieval alone (kernels, unit building, the
budget fit and context assembly), in ms per query.

Needs a built store and the dev split (paths are parameters):
  xmemory build locomo_dev.json --out stores/locomo_dev
  XMEM_STORE=stores/locomo_dev python -m pytest benchmarks/bench_search.py --benchmark-columns=min,median,rounds
XMEM_BENCH_BUDGETS (default 600): comma-separated token budgets, ``none`` for no budget.

As a script (interleaved comparisons of two source trees run it once per tree and round):
  python benchmarks/bench_search.py STORE [--budgets 300,600] [--strategies xmemory,naive-rag] [--repeat 5]
prints one JSON line per (strategy, budget): min and median ms per query over the repeats, and the
kernels' ms per query and share of that host time (every call into the compiled ``xmemory_gpu._C``
timed by a wrapper during the repeats; GPU backends are not counted).
``--single N``: first, N of the questions searched one at a time with the encoder (what a live
search costs: the query's embedding included), p50 / p99 ms per strategy and budget, beside the
encoder alone on the same questions (timed just before each search) and the baseline a user would
pick instead: the encoder plus faiss-cpu ``IndexFlatIP`` top-20 over the memory's messages (one
index per memory, built beforehand); each strategy starts with the process's passage cache empty
(a tree that embeds passages at search time pays for them here).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path

import pytest
from _record import write_record

STORE = os.environ.get("XMEM_STORE", "")
LOCOMO = os.environ.get("XMEM_LOCOMO", "locomo_dev.json")  # the LoCoMo file the store was built from
BUDGETS = os.environ.get("XMEM_BENCH_BUDGETS", "600")


def _budgets(s: str) -> list[int | None]:
    return [None if b.strip().lower() == "none" else int(b) for b in s.split(",") if b.strip()]


def load_batch(store: str, data: str, *, backend: str = "auto", n_queries: int | None = None):
    """(retriever, questions, memory ids, query embeddings) for every question ``xmemory eval`` asks
    (``n_queries``: those questions tiled or cut to that many), searched on ``backend``."""
    from xmemory_gpu.eval.runner import load_questions
    from xmemory_gpu.memory.store import Store
    from xmemory_gpu.retrieve import Retriever

    st = Store.open(store)
    try:
        ids = st.memory_ids()
    finally:
        st.close()
    qs = load_questions(data, ids, [1, 2, 3, 4], None)
    if n_queries is not None:
        qs = (qs * -(-n_queries // max(len(qs), 1)))[:n_queries]
    r = Retriever.from_store(store, sorted({q["sample_id"] for q in qs}), backend=backend)
    questions, mems = [q["question"] for q in qs], [q["sample_id"] for q in qs]
    return r, questions, mems, r.embedder.encode(questions)


def ms_per_query(r, questions, mems, q_x, strategy: str, budget: int | None) -> float:
    t0 = time.perf_counter()
    res = r.search(questions, mems, strategy=strategy, budget_tokens=budget, query_x=q_x)
    dt = time.perf_counter() - t0
    assert len(res) == len(questions)
    return 1000 * dt / len(questions)


if __name__ != "__main__":
    from xmemory_gpu.retrieve import STRATEGIES

    @pytest.fixture(scope="module")
    def batch():
        if not STORE or not Path(STORE).exists():
            pytest.skip("set XMEM_STORE to a built store (scripts/bench.sh builds a small one)")
        return load_batch(STORE, LOCOMO)

    @pytest.mark.parametrize("budget", _budgets(BUDGETS), ids=str)
    @pytest.mark.parametrize("strategy", STRATEGIES)
    def test_batched_search(benchmark, batch, strategy, budget):
        r, questions, mems, q_x = batch
        benchmark.group = f"one batched search of {len(questions)} questions of {Path(LOCOMO).name}, query embeddings given (host)"
        times: list[float] = []
        benchmark.pedantic(
            lambda: times.append(ms_per_query(r, questions, mems, q_x, strategy, budget)),
            rounds=5,
            iterations=1,
            warmup_rounds=1,
        )
        benchmark.extra_info.update(
            questions=len(questions),
            budget_tokens=budget,
            ms_per_query_min=min(times),
            ms_per_query_median=statistics.median(times),
        )


def single_queries(r, questions, mems, strategy: str, budget: int | None) -> tuple[list[float], list[float]]:
    """ms of each search of one question with its encoder call (a cold passage cache first), and
    of the encoder alone on the same question just before it (interleaved, so both see the same
    machine)."""
    from xmemory_gpu.embed import encode_queries
    from xmemory_gpu.retrieve import passages

    cache = getattr(passages, "_CACHE", None)  # trees that embed passages at search time keep them here
    if cache is not None:
        cache.clear()
    out, enc = [], []
    for q, m in zip(questions, mems):
        t0 = time.perf_counter()
        encode_queries(r.embedder, [q])  # what a search calls for its query
        t1 = time.perf_counter()
        r.search([q], [m], strategy=strategy, budget_tokens=budget)
        out.append(1000 * (time.perf_counter() - t1))
        enc.append(1000 * (t1 - t0))
    return out, enc


def faiss_queries(r, questions, mems, k: int = 20) -> list[float]:
    """ms of the encoder plus a faiss ``IndexFlatIP`` top-``k`` over the memory's message rows, per
    question (the indexes are built first, untimed)."""
    import numpy as np

    try:
        import faiss
    except ImportError:
        raise SystemExit(
            "bench_search.py --single: its baseline needs faiss-cpu (pip install faiss-cpu)"
        ) from None

    from xmemory_gpu.embed import encode_queries

    index = {}
    for m in dict.fromkeys(mems):
        x = np.ascontiguousarray(r.bank.msg["x"][r.bank.msg.seg.rows(r.bank.index_of(m))], np.float32)
        index[m] = faiss.IndexFlatIP(x.shape[1])
        index[m].add(x)
    out = []
    for q, m in zip(questions, mems):
        t0 = time.perf_counter()
        index[m].search(np.ascontiguousarray(encode_queries(r.embedder, [q]), np.float32), k)
        out.append(1000 * (time.perf_counter() - t0))
    return out


class KernelClock:
    """Seconds spent inside ``xmemory_gpu._C`` while active: each of its functions is wrapped by a
    timer (the ops modules look them up on the module at call time)."""

    def __init__(self) -> None:
        import xmemory_gpu._C as native

        self.native, self.seconds, self._saved = native, 0.0, {}

    def __enter__(self) -> KernelClock:
        for name in dir(self.native):
            fn = getattr(self.native, name)
            if name.startswith("_") or not callable(fn) or isinstance(fn, type):
                continue
            self._saved[name] = fn
            setattr(self.native, name, self._timed(fn))
        return self

    def _timed(self, fn):
        def call(*a, **k):
            t0 = time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                self.seconds += time.perf_counter() - t0

        return call

    def __exit__(self, *exc) -> None:
        for name, fn in self._saved.items():
            setattr(self.native, name, fn)


def _pct(t: list[float], p: float) -> float:
    s = sorted(t)
    return round(s[min(len(s) - 1, int(round(p / 100 * (len(s) - 1))))], 2)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("store")
    p.add_argument("--data", default=LOCOMO)
    p.add_argument("--strategies", default=None)
    p.add_argument("--budgets", default=BUDGETS)
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--single", type=int, default=0, help="also N questions one at a time with the encoder")
    p.add_argument("--out", default=None, help="also write every row here (JSON)")
    args = p.parse_args()
    rows: list[dict] = []

    def emit(row: dict) -> None:
        rows.append(row)
        print(json.dumps(row), flush=True)

    from xmemory_gpu.retrieve import STRATEGIES

    r, questions, mems, q_x = load_batch(args.store, args.data)
    strategies = args.strategies.split(",") if args.strategies else STRATEGIES
    if args.single:
        step = max(1, len(questions) // args.single)
        qs, ms = questions[::step][: args.single], mems[::step][: args.single]
        fq = faiss_queries(r, qs, ms)
        emit(
            {
                "single": True,
                "baseline": "encoder + faiss IndexFlatIP top-20",
                "questions": len(qs),
                "p50_ms": _pct(fq, 50),
                "p99_ms": _pct(fq, 99),
            }
        )
        for strategy in strategies:
            for budget in _budgets(args.budgets):
                t, enc = single_queries(r, qs, ms, strategy, budget)
                emit(
                    {
                        "single": True,
                        "strategy": strategy,
                        "budget": budget,
                        "questions": len(qs),
                        "p50_ms": _pct(t, 50),
                        "p99_ms": _pct(t, 99),
                        "max_ms": round(max(t), 2),
                        "encoder_p50_ms": _pct(enc, 50),
                        "encoder_p99_ms": _pct(enc, 99),
                    }
                )
    for strategy in strategies:
        for budget in _budgets(args.budgets):
            ms_per_query(r, questions, mems, q_x, strategy, budget)  # warm: caches, passage levels
            with KernelClock() as clock:
                t = [ms_per_query(r, questions, mems, q_x, strategy, budget) for _ in range(args.repeat)]
            kernel_ms = 1000 * clock.seconds / (args.repeat * len(questions))
            emit(
                {
                    "strategy": strategy,
                    "budget": budget,
                    "questions": len(questions),
                    "min_ms": round(min(t), 3),
                    "median_ms": round(statistics.median(t), 3),
                    "kernel_ms": round(kernel_ms, 4),
                    "kernel_share": round(kernel_ms / statistics.mean(t), 3),
                }
            )
    if args.out:
        write_record(args.out, {"unit": "host ms per query", "rows": rows})


if __name__ == "__main__":
    main()
