"""f(P) candidate scoring, CPU: 10,000 candidates over 1,000 memories of ~300 nodes and 64
themes at d = 384. Ours (incremental, from kept sums and top-2; cpu) against recomputing f(P)
from scratch per candidate: the float64 reference (loops written from the equations) and a
vectorised NumPy closed form (the authors' style: re-stack and recompute per evaluation).
The from-scratch baselines are timed on the first 200 candidates (their per-candidate cost does
not depend on which candidates; the full 10,000 would take minutes); compare per-candidate times.
"""

from __future__ import annotations

import numpy as np
import pytest
from ops.objective_cases import random_candidates, random_partition

from xmemory_gpu.ops.objective import PartitionState, score_candidates
from xmemory_gpu.ops.objective.state import closed_form

N_MEM, NODES, THEMES, D, PER_MEM = 1000, 300, 64, 384, 10
SAMPLE = 200


@pytest.fixture(scope="module")
def problem():
    rng = np.random.default_rng(0)
    x, lab, off = random_partition(rng, [NODES] * N_MEM, [THEMES] * N_MEM, D)
    state = PartitionState.from_labels(x, lab, off)
    cands = random_candidates(rng, state, PER_MEM)
    return state, cands


def numpy_from_scratch(state: PartitionState, cands, n: int) -> np.ndarray:
    """Per candidate: relabel, re-stack member sums, closed-form f(P) over the whole memory."""
    out = np.zeros(n)
    for c in range(n):
        b = int(cands.memory[c])
        s, e = int(state.offsets[b]), int(state.offsets[b + 1])
        lab = state.labels[s:e].copy()
        fresh = int(lab.max()) + 1
        for g in range(cands.add_offsets[c], cands.add_offsets[c + 1]):
            lab[cands.members[cands.group_offsets[g] : cands.group_offsets[g + 1]] - s] = fresh
            fresh += 1
        uniq, inv = np.unique(lab, return_inverse=True)
        sums = np.zeros((len(uniq), state.x.shape[1]))
        np.add.at(sums, inv, state.x[s:e])
        out[c] = closed_form(sums, np.bincount(inv).astype(np.float64), e - s, state.eps)
    return out


def test_candidates_are_many(problem):
    assert problem[1].n >= 9000


@pytest.mark.parametrize("impl", ["cpu (all candidates)", "numpy closed form from scratch (200)", "reference from scratch (200)"])
def test_score_candidates(benchmark, problem, impl):
    state, cands = problem
    benchmark.group = f"f(P) scoring: {cands.n} candidates, {N_MEM} memories x {NODES} nodes x {THEMES} themes, d={D}"
    n = cands.n if impl.startswith("cpu") else SAMPLE
    benchmark.extra_info["candidates_timed"] = n
    if impl.startswith("cpu"):
        fn = lambda: score_candidates(state, cands, backend="cpu")  # noqa: E731
        rounds = 5
    elif impl.startswith("numpy"):
        fn = lambda: numpy_from_scratch(state, cands, SAMPLE)  # noqa: E731
        rounds = 2
    else:
        from xmemory_gpu.ops.objective.state import Candidates

        sub = Candidates(cands.memory[:SAMPLE], cands.rem_offsets[: SAMPLE + 1], cands.rem_rows, cands.add_offsets[: SAMPLE + 1],
                         cands.group_offsets, cands.members)
        fn = lambda: score_candidates(state, sub, backend="reference")  # noqa: E731
        rounds = 1
    result = benchmark.pedantic(fn, rounds=rounds, iterations=1, warmup_rounds=0)
    benchmark.extra_info["seconds_per_candidate_note"] = "divide the time by candidates_timed"
    assert len(result) == n
