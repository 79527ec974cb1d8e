"""Where a GPU op call spends its time: wall ms of the public call against the CUDA kernels'
ms inside it (torch.profiler), for the calls whose host-to-host figure in validate.py is far above
the kernel's floor: ``coverage_select`` (10,000 queries x 40-500 candidates, k = 10; inputs on the
host, then already on the device) and ``score_candidates`` (100,000 candidates over 10,000 memories),
and the input validation alone.

  python benchmarks/gpu/host_share.py --out DIR [--reps 5]     # on the GPU machine
  python benchmarks/gpu/host_share.py --out DIR --dry-run      # tiny sizes, CPU + Triton interpreter
Writes ``host_share.json`` and prints a markdown table.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parents[1] / "tests")]

from end_to_end import device_kernel_ms  # noqa: E402
from validate import ragged_sizes  # noqa: E402


def wall_ms(fn, reps: int, sync) -> float:
    fn()
    sync()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        sync()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--dry-run", action="store_true")
    args = ap.parse_args(argv)
    import torch
    from ops.coverage_cases import random_problem
    from ops.objective_cases import random_candidates, random_partition

    from xmemory_gpu.ops import available_backends
    from xmemory_gpu.ops.coverage import coverage_inputs, coverage_select
    from xmemory_gpu.ops.objective import PartitionState, score_candidates

    cuda = torch.cuda.is_available() and not args.dry_run
    dev = torch.device("cuda" if cuda else "cpu")
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    status = available_backends()
    gpu = [b for b in ("cuda", "triton") if status[b].available]
    rng = np.random.default_rng(7)
    rows: list[dict[str, Any]] = []

    def row(op: str, case: str, impl: str, fn) -> None:
        w = wall_ms(fn, args.reps, sync)
        k = device_kernel_ms(fn) if cuda and impl.split()[0] in gpu else None
        rows.append({"op": op, "case": case, "impl": impl, "wall_ms": w, "kernel_ms": k})
        print(
            f"{op:18s} {impl:34s} wall {w:9.3f} ms  kernels {k if k is None else round(k, 3)} ms", flush=True
        )

    n_q = 8 if args.dry_run else 10_000
    sizes = ragged_sizes(rng, n_q, 40 if not args.dry_run else 5, 500 if not args.dry_run else 30, edge=False)
    off, idx, w, rel = random_problem(rng, sizes, 10)
    case = f"{n_q} queries x 40-500 candidates, k=10, budget 20"
    row(
        "coverage_select",
        case,
        "input validation alone",
        lambda: coverage_inputs(off, idx, w, rel, 0.7, 20, 1.0, "count"),
    )
    for b in gpu + ["cpu"]:
        row(
            "coverage_select",
            case,
            f"{b} host inputs",
            lambda b=b: coverage_select(off, idx, w, rel, budget=20, backend=b),
        )
    idx_t, w_t, rel_t = (torch.from_numpy(a).to(dev) for a in (idx, w, rel))
    for b in gpu:
        row(
            "coverage_select",
            case,
            f"{b} device inputs",
            lambda b=b: coverage_select(off, idx_t, w_t, rel_t, budget=20, backend=b),
        )

    n_mem, nodes, themes = (3, 40, 6) if args.dry_run else (10_000, 100, 16)
    x, lab, poff = random_partition(rng, [nodes] * n_mem, [themes] * n_mem, 384 if not args.dry_run else 16)
    state = PartitionState.from_labels(x, lab, poff)
    cands = random_candidates(rng, state, 10)
    case = f"{cands.n} candidates over {n_mem} memories x {nodes} nodes x {themes} themes"
    for b in gpu + ["cpu"]:
        row(
            "score_candidates", case, f"{b} host state", lambda b=b: score_candidates(state, cands, backend=b)
        )

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "host_share.json").write_text(json.dumps(rows, indent=2) + "\n")
    print("\n| op | case | call | wall ms (median) | CUDA kernels ms |\n|---|---|---|---|---|")
    for r in rows:
        k = "-" if r["kernel_ms"] is None else f"{r['kernel_ms']:.3f}"
        print(f"| `{r['op']}` | {r['case']} | {r['impl']} | {r['wall_ms']:.3f} | {k} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
