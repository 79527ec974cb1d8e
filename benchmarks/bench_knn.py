"""kNN graph build and upkeep, CPU: ours (cpu) vs the float64 reference, faiss-cpu and torch in one run.

(a) 1,000 segments of 200-600 rows, d = 384, k = 10 (a bank of memories' semantic graphs);
(b) one segment of 50,000 rows, d = 384, k = 10 (no reference: it materialises N x N in float64);
(c) one insert into a 10,000-row KnnGraph, d = 384, k = 10.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from ops.knn_cases import ragged, segment_sizes

from xmemory_gpu.ops.knn import KnnGraph, knn_graph

K, D = 10, 384


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
    return ragged(rng, segment_sizes(rng, 1000, 200, 600), D)


@pytest.mark.parametrize("impl", ["cpu", "reference", "faiss-cpu loop", "torch padded bmm"])
def test_a_1000_segments(benchmark, case_a, impl):
    x, off = case_a
    benchmark.group = "knn (a) 1000 segments x 200-600 rows, d=384, k=10"
    benchmark.extra_info.update(rows=int(x.shape[0]), segments=1000)
    fn = {
        "cpu": lambda: knn_graph(x, off, K, backend="cpu"),
        "reference": lambda: knn_graph(x, off, K, backend="reference"),
        "faiss-cpu loop": lambda: faiss_loop(x, off, K),
        "torch padded bmm": lambda: torch_padded_bmm(x, off, K),
    }[impl]
    benchmark.pedantic(fn, rounds=1 if impl == "reference" else 3, iterations=1, warmup_rounds=0 if impl == "reference" else 1)


@pytest.mark.parametrize("impl", ["cpu", "faiss-cpu"])
def test_b_one_large_segment(benchmark, impl):
    rng = np.random.default_rng(1)
    x, off = ragged(rng, [50_000], D)
    benchmark.group = "knn (b) one segment of 50,000 rows, d=384, k=10"
    fn = {"cpu": lambda: knn_graph(x, off, K, backend="cpu"), "faiss-cpu": lambda: faiss_loop(x, off, K)}[impl]
    benchmark.pedantic(fn, rounds=2, iterations=1, warmup_rounds=0)


def test_c_single_insert(benchmark):
    rng = np.random.default_rng(2)
    base = rng.standard_normal((10_000, D)).astype(np.float32)
    g = KnnGraph(base, K)
    new = rng.standard_normal((200, D)).astype(np.float32)
    it = iter(range(200))
    benchmark.group = "knn (c) one insert into a 10,000-row KnnGraph, d=384, k=10"
    benchmark.pedantic(lambda: g.insert(new[next(it)][None]), rounds=100, iterations=1, warmup_rounds=1)
