"""End to end on a GPU: the bulk build and one batched search per strategy, GPU backend against the CPU.

1. **build**: N synthetic conversations (``datasets.synthetic``, seed given) built by ``xmemory build`` in a fresh
   process per backend with the same encoder, each stage's seconds from the build's own report: how much of
   a GPU build is still host work. The stores are compared (memory count, theme count, f(P) per memory).
2. **search**: the questions of those conversations, tiled to ``--queries``, searched in one
   ``Retriever.search`` call per strategy with the query embeddings given and the bank device-resident on the
   GPU backend: host ms per query (median of ``--repeat``) and, on a GPU, the device kernels' ms per query
   (sum of CUDA kernel time in one search under ``torch.profiler``); the share of queries whose retrieved
   units equal the CPU backend's.

  python benchmarks/gpu/end_to_end.py --out DIR [--synthetic 1000] [--queries 10000] [--backends cpu,cuda]
``--dry-run``: tiny sizes on the CPU (Triton under the interpreter), so the script is exercised here.
Writes ``end_to_end.json`` and prints a markdown block.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: bench_search's question batch

_LINE = re.compile(r"^\s+(\w+)\s+([0-9.]+) s$")
_BUILT = re.compile(r"built \d+ memories.*?([0-9.]+) s$", re.M)


def build(data: Path, out: Path, backend: str, embedder: str, workers: int = 1) -> dict[str, Any]:
    """One ``xmemory build`` in a fresh process (``workers`` build processes): {stage: s, 'build': s,
    'wall': s}."""
    cmd = [
        sys.executable,
        "-c",
        "import sys; from xmemory_gpu.cli import main; sys.exit(main(sys.argv[1:]))",
        "build",
        str(data),
        "--out",
        str(out),
        "--embedder",
        embedder,
        "--backend",
        backend,
        "--workers",
        str(workers),
        "--no-progress",
    ]
    t0 = (
        time.perf_counter()
    )  # run outside any source tree, so the installed package (its compiled modules) loads
    p = subprocess.run(cmd, capture_output=True, text=True, cwd=out.parent)
    wall = time.perf_counter() - t0
    if p.returncode != 0:
        raise RuntimeError(f"build --backend {backend} failed: {p.stderr.strip()[-800:]}")
    stages = {m.group(1): float(m.group(2)) for m in map(_LINE.match, p.stdout.splitlines()) if m}
    built = _BUILT.search(p.stdout)
    return {**stages, "build": float(built.group(1)) if built else float("nan"), "wall": wall}


def store_summary(path: Path) -> dict[str, tuple[str, dict]]:
    """memory id -> (content-addressed arrays file, catalogue stats) from the store's catalogue."""
    import sqlite3

    con = sqlite3.connect(f"file:{path}/memory.sqlite?mode=ro", uri=True)
    try:
        return {
            m: (f, json.loads(s))
            for m, f, s in con.execute("select memory_id, arrays_file, stats from memories")
        }
    finally:
        con.close()


def compare_stores(a: dict[str, tuple[str, dict]], b: dict[str, tuple[str, dict]]) -> dict[str, Any]:
    """Same ids; memories with the same bytes; memories with the same theme structure (every catalogue
    stat but f(P) equal: theme counts and sizes, merges, splits, lineage) and the largest relative f(P)
    difference among those; the largest among the others."""
    common = sorted(set(a) & set(b))
    same_structure, fp_same, fp_other = 0, 0.0, 0.0
    for m in common:
        sa, sb = a[m][1], b[m][1]
        rel = abs(sa["f_P"] - sb["f_P"]) / max(abs(sa["f_P"]), abs(sb["f_P"]), 1e-12)
        if all(sa.get(k) == sb.get(k) for k in set(sa) | set(sb) if k != "f_P"):
            same_structure += 1
            fp_same = max(fp_same, rel)
        else:
            fp_other = max(fp_other, rel)
    return {
        "same_ids": set(a) == set(b),
        "memories": len(a),
        "same_bytes": sum(a[m][0] == b[m][0] for m in common),
        "same_structure": same_structure,
        "max_rel_fP_same_structure": fp_same,
        "max_rel_fP_other": fp_other,
    }


def device_kernel_ms(fn) -> float | None:
    """Sum of CUDA kernel time (ms) of one call of fn, from torch.profiler; None where it is unavailable."""
    import torch

    if not torch.cuda.is_available():
        return None
    try:
        from torch.profiler import ProfilerActivity, profile

        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            fn()
            torch.cuda.synchronize()
        return sum(e.self_device_time_total for e in prof.key_averages()) / 1e3
    except Exception as exc:  # CUPTI missing or refused: say so, keep the host figures
        print(f"profiler unavailable: {type(exc).__name__}: {exc}", flush=True)
        return None


def unit_keys(res) -> list[tuple]:
    return [tuple((u.type, u.id) for u in r.units) for r in res]


def search(
    store: Path,
    data: Path,
    backend: str,
    n_queries: int,
    repeat: int,
    budget: int | None,
    reference: dict[str, list] | None,
) -> dict[str, Any]:
    from bench_search import load_batch

    from xmemory_gpu.retrieve import STRATEGIES

    r, questions, mems, q_x = load_batch(str(store), str(data), backend=backend, n_queries=n_queries)
    rows, keys = {}, {}
    for strategy in STRATEGIES:

        def once(strategy=strategy):
            return r.search(questions, mems, strategy=strategy, budget_tokens=budget, query_x=q_x)

        res = once()  # warm-up: device copies of the bank, kernel compilation
        times = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            res = once()
            times.append((time.perf_counter() - t0) * 1e3 / len(questions))
        keys[strategy] = unit_keys(res)
        kern = device_kernel_ms(once) if backend in ("cuda", "triton") else None
        same = None
        if reference is not None and strategy in reference:
            same = sum(a == b for a, b in zip(keys[strategy], reference[strategy])) / len(questions)
        rows[strategy] = {
            "host_ms_per_query_median": statistics.median(times),
            "host_ms_per_query_min": min(times),
            "kernel_ms_per_query": None if kern is None else kern / len(questions),
            "same_units_as_first": same,
        }
        print(f"search {backend:6s} {strategy:12s} {rows[strategy]}", flush=True)
    return {"queries": len(questions), "rows": rows, "keys": keys}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--synthetic", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=11)
    ap.add_argument("--embedder", default="hashing:384")
    ap.add_argument(
        "--backends",
        default="cpu,cuda",
        help="the first is the reference for store and unit equality; BACKEND@N builds in N worker processes",
    )
    ap.add_argument("--queries", type=int, default=10_000, help="0: builds only, no search")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--budget", type=int, default=600)
    ap.add_argument("--dry-run", action="store_true", help="tiny sizes (5 conversations, 50 queries)")
    args = ap.parse_args(argv)
    if args.dry_run:
        args.synthetic, args.queries, args.repeat = 5, 50, 1
    from xmemory_gpu.datasets.synthetic import generate_conversations, write_json

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    res: dict[str, Any] = {
        "synthetic": args.synthetic,
        "seed": args.seed,
        "embedder": args.embedder,
        "builds": {},
        "search": {},
    }
    with tempfile.TemporaryDirectory() as tmp:
        data = write_json(generate_conversations(args.synthetic, seed=args.seed), Path(tmp) / "synth.json")
        ref_keys = None
        ref_summary = None
        for b in args.backends.split(","):
            backend, _, workers = b.partition("@")
            store = Path(tmp) / f"store_{b.replace('@', '_')}"
            try:
                res["builds"][b] = build(data, store, backend, args.embedder, int(workers or 1))
                summ = store_summary(store)
                if ref_summary is None:
                    ref_summary = summ
                res["builds"][b]["vs_first"] = compare_stores(ref_summary, summ)
                print(f"build {b}: {res['builds'][b]}", flush=True)
                if args.queries > 0:
                    s = search(store, data, backend, args.queries, args.repeat, args.budget, ref_keys)
                    if ref_keys is None:
                        ref_keys = s["keys"]
                    res["search"][b] = {"queries": s["queries"], "rows": s["rows"]}
            except Exception as exc:  # one backend failing must not hide the others
                import traceback

                traceback.print_exc()
                res["builds"].setdefault(b, {})["error"] = f"{type(exc).__name__}: {exc}"[:800]
            (out / "end_to_end.json").write_text(json.dumps(res, indent=2, default=str) + "\n")  # after each
    print(markdown(res))
    return 0 if all("error" not in v for v in res["builds"].values()) else 1


def markdown(res: dict[str, Any]) -> str:
    lines = [
        f"End to end: {res['synthetic']} synthetic conversations (seed {res['seed']}), {res['embedder']}.",
        "",
        "| backend | build s | stages (s) | store against the first backend's |",
        "|---|---|---|---|",
    ]
    for b, v in res["builds"].items():
        st = ", ".join(
            f"{k} {x:.2f}"
            for k, x in v.items()
            if k not in ("build", "wall", "vs_first", "error") and isinstance(x, float)
        )
        lines.append(
            f"| {b} | {v.get('build', float('nan')):.2f} | {st} | {v.get('vs_first', v.get('error'))} |"
        )
    lines += [
        "",
        "| backend | strategy | queries | host ms/query (median, min) | kernel ms/query | same units as first |",
        "|---|---|---|---|---|---|",
    ]
    for b, s in res["search"].items():
        for strat, row in s["rows"].items():
            k = row["kernel_ms_per_query"]
            lines.append(
                f"| {b} | {strat} | {s['queries']} | {row['host_ms_per_query_median']:.4f}, "
                f"{row['host_ms_per_query_min']:.4f} | {'-' if k is None else f'{k:.5f}'} | "
                f"{row['same_units_as_first']} |"
            )
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    raise SystemExit(main())
