"""f(P) on the CPU. (1) ``partition_objective`` over 1,000 segments of 200-400 rows, d = 384, 64
labels each, float32 input: ours (cpu) against the vectorised NumPy closed form
(``tests/ops/objective_cases.numpy_closed_form``: one-hot sums through BLAS, then norms and the
centroid cosine matrix), interleaved rounds, min and median of each.
(2) Candidate scoring: 10,000 candidates over 1,000 memories of ~300 nodes and 64
themes at d = 384. Ours (incremental, from kept sums and top-2; cpu) against recomputing f(P)
from scratch per candidate: the float64 reference (loops written from the equations) and a
vectorised NumPy closed form (the authors' style: re-stack and recompute per evaluation).
The from-scratch baselines are timed on the first 200 candidates (their per-candidate cost does
not depend on which candidates; the full 10,000 would take minutes); compare per-candidate times.
"""

from __future__ import annotations

import numpy as np
import pytest
from ops.objective_cases import numpy_closed_form, random_candidates, random_partition
from scale import scaled

from xmemory_gpu.ops.objective import PartitionState, partition_objective, score_candidates
from xmemory_gpu.ops.objective.state import closed_form

N_MEM, NODES, THEMES, D, PER_MEM = scaled(1000, 20), 300, 64, 384, 10
SEGMENTS = scaled(1000, 20)
SAMPLE = scaled(200, 20)


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
    assert problem[1].n >= 9 * N_MEM


@pytest.mark.parametrize(
    "impl",
    [
        "cpu (all candidates)",
        f"numpy closed form from scratch ({SAMPLE})",
        f"reference from scratch ({SAMPLE})",
    ],
)
def test_score_candidates(benchmark, problem, impl):
    state, cands = problem
    benchmark.group = (
        f"f(P) scoring: {cands.n} candidates, {N_MEM} memories x {NODES} nodes x {THEMES} themes, d={D}"
    )
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

        g = int(cands.add_offsets[SAMPLE])  # the first SAMPLE candidates, their arrays cut to them
        sub = Candidates(
            cands.memory[:SAMPLE],
            cands.rem_offsets[: SAMPLE + 1],
            cands.rem_rows[: int(cands.rem_offsets[SAMPLE])],
            cands.add_offsets[: SAMPLE + 1],
            cands.group_offsets[: g + 1],
            cands.members[: int(cands.group_offsets[g])],
        )
        fn = lambda: score_candidates(state, sub, backend="reference")  # noqa: E731
        rounds = 1
    result = benchmark.pedantic(fn, rounds=rounds, iterations=1, warmup_rounds=0)
    benchmark.extra_info["seconds_per_candidate_note"] = "divide the time by candidates_timed"
    assert len(result) == n


@pytest.fixture(scope="module")
def labelled():
    rng = np.random.default_rng(3)
    sizes = rng.integers(200, 401, SEGMENTS).tolist()
    x, lab, off = random_partition(rng, sizes, [64] * SEGMENTS, D)
    return x.astype(np.float32), lab, off


def _on_isa(isa: str, fn):
    """``fn`` with the CPU kernels capped at ``isa`` (XMEM_CPU_ISA is read on every call)."""
    import os

    def run():
        old = os.environ.get("XMEM_CPU_ISA")
        os.environ["XMEM_CPU_ISA"] = isa
        try:
            return fn()
        finally:
            os.environ.pop("XMEM_CPU_ISA") if old is None else os.environ.__setitem__("XMEM_CPU_ISA", old)

    return run


def test_partition_objective_interleaved(benchmark, labelled):
    """Ours (on each ISA this CPU runs: ``scalar`` is the loop a portable build ran before it was
    compiled per ISA) and the NumPy closed form alternated for 7 rounds on the same float32 input."""
    import statistics
    import time

    from xmemory_gpu import _C

    x, lab, off = labelled
    ours = lambda: partition_objective(x, lab, off, backend="cpu")  # noqa: E731
    impls = {"cpu": ours}
    for isa in ("avx2", "scalar"):
        if _on_isa(isa, _C.cpu_isa)() == isa and isa != _C.cpu_isa():
            impls[f"cpu {isa}"] = _on_isa(isa, ours)
    impls["numpy closed form"] = lambda: numpy_closed_form(x, lab, off)
    np.testing.assert_allclose(impls["cpu"](), impls["numpy closed form"](), rtol=1e-6, atol=1e-6)
    benchmark.extra_info["cpu_isa"] = _C.cpu_isa()
    times: dict[str, list[float]] = {n: [] for n in impls}
    for _ in range(7):
        for n, fn in impls.items():
            t0 = time.perf_counter()
            fn()
            times[n].append(time.perf_counter() - t0)
    info = {
        f"{n} {stat}": round(f(t), 4)
        for n, t in times.items()
        for stat, f in (("min_s", min), ("median_s", statistics.median))
    }
    for n in impls:
        if n.startswith("cpu"):
            tag = "" if n == "cpu" else f" ({n[4:]})"
            info[f"speedup_min{tag}"] = round(min(times["numpy closed form"]) / min(times[n]), 2)
            info[f"speedup_median{tag}"] = round(
                statistics.median(times["numpy closed form"]) / statistics.median(times[n]), 2
            )
    benchmark.group = f"partition_objective: {SEGMENTS} segments x 200-400 rows, 64 labels, d=384"
    benchmark.extra_info.update(info)
    benchmark.pedantic(impls["cpu"], rounds=1, iterations=1)
    print("\n" + "\n".join(f"{k}: {v}" for k, v in info.items()))
