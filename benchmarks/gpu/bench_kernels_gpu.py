"""GPU benchmarks for the kernel families (run by benchmarks/gpu/run.sh on a GPU machine).

Times with CUDA events, median of many runs after warm-up (device/METHOD.md), and prints achieved
TFLOP/s and GB/s. kNN: 10,000 segments of ~300 rows at d = 384 and d = 1536, k = 10: ours (cuda;
triton when registered) against torch padded bmm + topk and a torch loop over segments.
Coverage: 100,000 queries of 40-500 candidates, k = 10, budget 20: cuda against cpu.
f(P): ~100,000 candidates over 1,000 memories of 300 nodes and 64 themes at d = 1536: cuda against cpu.
Written for the GPU machine; not yet run (no GPU was available when it was written).
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))
from cuda_timing import cuda_ms  # noqa: E402
from ops.coverage_cases import random_problem  # noqa: E402
from ops.objective_cases import random_candidates, random_partition  # noqa: E402

from xmemory_gpu.ops.coverage import coverage_select  # noqa: E402
from xmemory_gpu.ops.knn import knn_graph  # noqa: E402
from xmemory_gpu.ops.objective import PartitionState, score_candidates  # noqa: E402


def padded_bmm(x: torch.Tensor, sizes: torch.Tensor, k: int):
    b, m = sizes.numel(), int(sizes.max())
    pad = x.new_zeros(b, m, x.shape[1])
    mask = torch.arange(m, device=x.device)[None, :] < sizes[:, None]
    pad[mask] = torch.nn.functional.normalize(x, dim=1)
    sims = torch.bmm(pad, pad.transpose(1, 2))
    sims.masked_fill_(~mask[:, None, :], float("-inf"))
    sims.diagonal(dim1=1, dim2=2).fill_(float("-inf"))
    return torch.topk(sims, k, dim=2)


def torch_loop(x: torch.Tensor, off: np.ndarray, k: int):
    xn = torch.nn.functional.normalize(x, dim=1)
    out = []
    for s, e in zip(off[:-1], off[1:]):
        g = xn[s:e] @ xn[s:e].T
        g.fill_diagonal_(float("-inf"))
        out.append(torch.topk(g, min(k, int(e - s) - 1), dim=1))
    return out


def knn_case(d: int, n_seg: int = 10_000, k: int = 10) -> None:
    rng = np.random.default_rng(0)
    sizes = rng.integers(200, 401, size=n_seg)
    off = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    x = torch.randn(int(off[-1]), d, device="cuda")
    flops = float(2 * d * np.sum(sizes.astype(np.float64) ** 2))
    nbytes = x.numel() * 4 + int(off[-1]) * k * 8
    st = torch.from_numpy(sizes).cuda()
    rows = {
        "cuda (ours)": lambda: knn_graph(x, off, k, backend="cuda"),
        "torch padded bmm + topk": lambda: padded_bmm(x, st, k),
    }
    try:
        rows["triton (ours)"] = lambda: knn_graph(x, off, k, backend="triton")
        rows["triton (ours)"]()
    except ValueError:
        rows.pop("triton (ours)")
    print(f"\n### kNN graph: {n_seg} segments of 200-400 rows, d = {d}, k = {k} ({flops / 1e12:.2f} TFLOP of dots)\n")
    print("| impl | median ms | TFLOP/s | GB/s (inputs + outputs) |\n|---|---|---|---|")
    for name, fn in rows.items():
        ms = cuda_ms(fn, reps=20)
        print(f"| {name} | {ms:.2f} | {flops / ms / 1e9:.1f} | {nbytes / ms / 1e6:.1f} |")
    t0 = time.perf_counter()
    torch_loop(x[: int(off[1000])], off[:1001], k)
    torch.cuda.synchronize()
    print(f"| torch loop over segments (first 1,000 segments, x10) | {(time.perf_counter() - t0) * 1e4:.2f} | - | - |")


def coverage_case(n_q: int = 100_000) -> None:
    rng = np.random.default_rng(1)
    sizes = [int(s) for s in rng.integers(40, 501, size=n_q)]
    off, idx, w, rel = random_problem(rng, sizes, 10)
    print(f"\n### coverage_select: {n_q} queries x 40-500 candidates, k = 10, budget 20\n")
    print("| impl | median ms (host to host) |\n|---|---|")
    for name in ("cuda", "cpu"):
        times = []
        for _ in range(5 if name == "cuda" else 2):
            t0 = time.perf_counter()
            coverage_select(off, idx, w, rel, budget=20, backend=name)
            times.append((time.perf_counter() - t0) * 1e3)
        print(f"| {name} | {statistics.median(times):.1f} |")


def objective_case(n_mem: int = 1000, per_mem: int = 100, d: int = 1536) -> None:
    rng = np.random.default_rng(2)
    x, lab, off = random_partition(rng, [300] * n_mem, [64] * n_mem, d)
    state = PartitionState.from_labels(x, lab, off)
    cands = random_candidates(rng, state, per_mem)
    print(f"\n### f(P) scoring: {cands.n} candidates over {n_mem} memories x 300 nodes x 64 themes, d = {d}\n")
    print("| impl | median ms (host to host) |\n|---|---|")
    for name in ("cuda", "cpu"):
        times = []
        for _ in range(5 if name == "cuda" else 2):
            t0 = time.perf_counter()
            score_candidates(state, cands, backend=name)
            times.append((time.perf_counter() - t0) * 1e3)
        print(f"| {name} | {statistics.median(times):.1f} |")


if __name__ == "__main__":
    print(f"device: {torch.cuda.get_device_name()}")
    for d in (384, 1536):
        knn_case(d)
    coverage_case()
    objective_case()
