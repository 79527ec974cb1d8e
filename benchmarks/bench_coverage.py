"""Eq. 4 greedy coverage selection, CPU: 10,000 queries with 40-500 candidates each, k = 10,
budget 20, under both stop rules (``count``: the authors', the default; ``weight``: ours before).
Ours (cpu, lazy greedy, exact picks) against the float64 reference (plain loops), the reference
timed on the first 200 queries (the full set would take minutes): compare per-query times.
"""

from __future__ import annotations

import numpy as np
import pytest
from ops.coverage_cases import random_problem
from scale import label, scaled

from xmemory_gpu.ops.coverage import coverage_select

N_Q, SAMPLE, BUDGET = scaled(10_000, 50), scaled(200, 20), 20


@pytest.fixture(scope="module")
def problem():
    rng = np.random.default_rng(0)
    sizes = [int(s) for s in rng.integers(40, 501, size=N_Q)]
    return sizes, random_problem(rng, sizes, 10)


@pytest.mark.parametrize("stop", ["count", "weight"])
@pytest.mark.parametrize("impl", [f"cpu ({label(N_Q)} queries)", f"reference ({SAMPLE} queries)"])
def test_coverage(benchmark, problem, impl, stop):
    sizes, (off, idx, w, rel) = problem
    benchmark.group = (
        f"coverage_select ({stop} stop): {N_Q} queries x 40-500 candidates, k=10, budget {BUDGET}"
    )
    if impl.startswith("cpu"):
        args, rounds, backend = (off, idx, w, rel), 5, "cpu"
    else:
        m = int(off[SAMPLE])
        args, rounds, backend = (off[: SAMPLE + 1], idx[:m], w[:m], rel[:m]), 1, "reference"
    benchmark.extra_info["queries_timed"] = len(args[0]) - 1
    sel_off, _, _ = coverage_select(*args, budget=BUDGET, stop=stop, backend=backend)
    benchmark.extra_info["mean_picks"] = float(np.diff(sel_off).mean())
    benchmark.pedantic(
        lambda: coverage_select(*args, budget=BUDGET, stop=stop, backend=backend), rounds=rounds, iterations=1
    )
