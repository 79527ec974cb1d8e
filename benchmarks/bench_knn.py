"""kNN graph build and upkeep, CPU: ours (cpu) vs the float64 reference, a per-segment BLAS loop
(NumPy sgemm + argpartition), a per-segment torch mm + topk loop, faiss-cpu and torch padded bmm,
in one run.

(a) 1,000 segments of 200-600 rows, d = 384, k = 10 (a bank of memories' semantic graphs); also
    interleaved rounds of ours and the loop baselines (minimum and median of each, the ratio to the
    strongest, and the fraction of this machine's FMA peak, measured by ``_C.fma_peak_gflops``, at
    n^2 d FLOPs per segment);
(b) one segment of 50,000 rows, d = 384, k = 10 (no reference: it materialises N x N in float64);
(c) one insert into a 10,000-row KnnGraph, d = 384, k = 10.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from ops.knn_cases import numpy_blas_loop, ragged, segment_sizes, torch_mm_topk_loop
from scale import label, scaled

from xmemory_gpu.ops.knn import KnnGraph, knn_graph

K, D = 10, 384
SEGMENTS, LARGE, GRAPH = scaled(1000, 20), scaled(50_000, 2_000), scaled(10_000, 1_000)


def faiss_loop(x: np.ndarray, off: np.ndarray, k: int):
    """faiss-cpu IndexFlatIP per segment (the library peer); k + 1 hits, self dropped."""
    import faiss

    xn = x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)
    idx = np.full((x.shape[0], k), -1, np.int64)
    for b in range(len(off) - 1):
        s, e = int(off[b]), int(off[b + 1])
        index = faiss.IndexFlatIP(x.shape[1])
        index.add(xn[s:e])
        _, i = index.search(xn[s:e], min(k + 1, e - s))
        for r in range(e - s):
            row = [j + s for j in i[r] if j != r and j >= 0][:k]
            idx[s + r, : len(row)] = row
    return idx


def torch_padded_bmm(x: np.ndarray, off: np.ndarray, k: int):
    """Pad segments to the longest, one bmm, mask self and padding, topk (the framework peer)."""
    sizes = np.diff(off)
    b, m = len(sizes), int(sizes.max())
    xt = torch.nn.functional.normalize(torch.from_numpy(x), dim=1)
    pad = torch.zeros(b, m, x.shape[1])
    mask = torch.arange(m)[None, :] < torch.from_numpy(sizes)[:, None]
    pad[mask] = xt
    sims = torch.bmm(pad, pad.transpose(1, 2))
    sims.masked_fill_(~mask[:, None, :], float("-inf"))
    sims.diagonal(dim1=1, dim2=2).fill_(float("-inf"))
    return torch.topk(sims, k, dim=2)


@pytest.fixture(scope="module")
def case_a():
    rng = np.random.default_rng(0)
    return ragged(rng, segment_sizes(rng, SEGMENTS, 200, 600), D)


IMPLS_A = {
    "cpu": lambda x, off: knn_graph(x, off, K, backend="cpu"),
    "numpy BLAS loop": lambda x, off: numpy_blas_loop(x, off, K),
    "torch mm+topk loop": lambda x, off: torch_mm_topk_loop(x, off, K),
}


def test_a_interleaved(benchmark, case_a):
    """Ours and the two loop baselines, alternated for ROUNDS rounds (the machine is shared and
    noisy); extra_info holds each one's min and median seconds, ours against the strongest, and
    the fraction of the measured FMA peak (n^2 d FLOPs per segment: each pair once, 2 per FMA)."""
    import statistics
    import time

    from xmemory_gpu import _C

    x, off = case_a
    rounds = 7
    times: dict[str, list[float]] = {name: [] for name in IMPLS_A}
    for fn in IMPLS_A.values():
        fn(x, off)  # warm-up
    for _ in range(rounds):
        for name, fn in IMPLS_A.items():
            t0 = time.perf_counter()
            fn(x, off)
            times[name].append(time.perf_counter() - t0)
    sizes = np.diff(off).astype(np.float64)
    flops = float(np.sum(sizes * sizes) * D)
    peak = _C.fma_peak_gflops(1.0)  # measured: 12 FMA chains per thread, all threads, the kernels' ISA
    best_base = min((n for n in IMPLS_A if n != "cpu"), key=lambda n: min(times[n]))
    info = {
        f"{n} {stat}": round(f(t), 4)
        for n, t in times.items()
        for stat, f in (("min_s", min), ("median_s", statistics.median))
    }
    info.update(
        strongest_baseline=best_base,
        speedup_vs_strongest_min=round(min(times[best_base]) / min(times["cpu"]), 2),
        speedup_vs_strongest_median=round(
            statistics.median(times[best_base]) / statistics.median(times["cpu"]), 2
        ),
        gflop=round(flops / 1e9, 2),
        fma_peak_gflops=round(peak, 1),
        cpu_fraction_of_peak=round(flops / min(times["cpu"]) / 1e9 / peak, 3),
        rounds=rounds,
    )
    benchmark.group = "knn (a) interleaved: ours vs per-segment loops"
    benchmark.extra_info.update(info)
    benchmark.pedantic(lambda: IMPLS_A["cpu"](x, off), rounds=1, iterations=1)
    print("\n" + "\n".join(f"{k}: {v}" for k, v in info.items()))


@pytest.mark.parametrize(
    "impl",
    ["cpu", "reference", "numpy BLAS loop", "torch mm+topk loop", "faiss-cpu loop", "torch padded bmm"],
)
def test_a_1000_segments(benchmark, case_a, impl):
    x, off = case_a
    benchmark.group = f"knn (a) {SEGMENTS} segments x 200-600 rows, d=384, k=10"
    benchmark.extra_info.update(rows=int(x.shape[0]), segments=SEGMENTS)
    fn = {
        "cpu": lambda: knn_graph(x, off, K, backend="cpu"),
        "reference": lambda: knn_graph(x, off, K, backend="reference"),
        "numpy BLAS loop": lambda: numpy_blas_loop(x, off, K),
        "torch mm+topk loop": lambda: torch_mm_topk_loop(x, off, K),
        "faiss-cpu loop": lambda: faiss_loop(x, off, K),
        "torch padded bmm": lambda: torch_padded_bmm(x, off, K),
    }[impl]
    benchmark.pedantic(
        fn,
        rounds=1 if impl == "reference" else 3,
        iterations=1,
        warmup_rounds=0 if impl == "reference" else 1,
    )


@pytest.mark.parametrize("impl", ["cpu", "faiss-cpu"])
def test_b_one_large_segment(benchmark, impl):
    rng = np.random.default_rng(1)
    x, off = ragged(rng, [LARGE], D)
    benchmark.group = f"knn (b) one segment of {label(LARGE)} rows, d=384, k=10"
    fn = {"cpu": lambda: knn_graph(x, off, K, backend="cpu"), "faiss-cpu": lambda: faiss_loop(x, off, K)}[
        impl
    ]
    benchmark.pedantic(fn, rounds=2, iterations=1, warmup_rounds=0)


def test_c_single_insert(benchmark):
    rng = np.random.default_rng(2)
    base = rng.standard_normal((GRAPH, D)).astype(np.float32)
    g = KnnGraph(base, K)
    new = rng.standard_normal((200, D)).astype(np.float32)
    it = iter(range(200))
    benchmark.group = f"knn (c) one insert into a {label(GRAPH)}-row KnnGraph, d=384, k=10"
    benchmark.pedantic(lambda: g.insert(new[next(it)][None]), rounds=100, iterations=1, warmup_rounds=1)
