"""Inputs and a tie-robust checker for the kNN family, shared by the tests and the benchmarks."""

from __future__ import annotations

import numpy as np

from xmemory_gpu.ops import available_backends, implemented_backends
from xmemory_gpu.ops.knn.reference import normalize64


def host_backends(op: str) -> list[str]:
    """Backends of an op that run on host arrays here (the cuda backend has its own cases in test_knn.py)."""
    st = available_backends()
    return [b for b in implemented_backends(op) if b in ("reference", "cpu", "triton") and st[b].available]


GRAPH_BACKENDS = host_backends("knn_graph")
SEARCH_BACKENDS = host_backends("knn_search")


def ragged(
    rng: np.random.Generator, sizes: list[int], d: int, dtype=np.float32
) -> tuple[np.ndarray, np.ndarray]:
    """Random rows for segments of the given sizes -> x [N, d], offsets [B+1] int64."""
    off = np.zeros(len(sizes) + 1, dtype=np.int64)
    np.cumsum(sizes, out=off[1:])
    return rng.standard_normal((int(off[-1]), d)).astype(dtype), off


def segment_sizes(rng: np.random.Generator, b: int, lo: int, hi: int) -> list[int]:
    return [int(s) for s in rng.integers(lo, hi + 1, size=b)]


def check_knn(
    q, q_off, x, x_off, k, idx, sim, *, self_excluded: bool, drop_nonpositive: bool = False, tol: float = 2e-3
):
    """Tie-robust comparison with the float64 oracle.

    Per query row: the returned ids are distinct rows of the same segment (not itself when
    ``self_excluded``), each returned sim equals that pair's true cosine, the sims are descending,
    the sorted values equal the oracle's top-k values, and padding (-1, -inf) fills the rest.
    """
    idx, sim = np.asarray(idx), np.asarray(sim)
    qn, xn = normalize64(q), normalize64(x)
    assert idx.shape == (q.shape[0], k) and sim.shape == (q.shape[0], k)
    assert idx.dtype == np.int32 and sim.dtype == np.float32
    for b in range(len(q_off) - 1):
        xs, xe = int(x_off[b]), int(x_off[b + 1])
        for r in range(int(q_off[b]), int(q_off[b + 1])):
            true = xn[xs:xe] @ qn[r]
            cols = np.arange(xs, xe)
            if self_excluded:
                keep = cols != r
                true, cols = true[keep], cols[keep]
            if drop_nonpositive:
                true = true[true > 0]
            want = np.sort(true)[::-1][:k]
            got_i, got_s = idx[r], sim[r]
            m = int(np.sum(got_i >= 0))
            assert m == len(want), f"row {r}: {m} neighbours, expected {len(want)}"
            assert np.all(got_i[m:] == -1) and np.all(np.isneginf(got_s[m:])), f"row {r}: bad padding"
            ids = got_i[:m]
            assert len(set(ids.tolist())) == m, f"row {r}: duplicate neighbours {ids}"
            assert np.all((ids >= xs) & (ids < xe)), f"row {r}: neighbour outside segment {b}"
            if self_excluded:
                assert r not in ids, f"row {r}: self returned"
            np.testing.assert_allclose(
                got_s[:m], xn[ids] @ qn[r], atol=tol, err_msg=f"row {r}: sims do not match ids"
            )
            np.testing.assert_allclose(got_s[:m], want, atol=tol, err_msg=f"row {r}: not the top-{k} values")
            assert np.all(np.diff(got_s[:m]) <= tol), f"row {r}: not sorted descending"


def numpy_blas_loop(x: np.ndarray, off: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Per segment: unit rows, ``xs @ xs.T`` through BLAS (both triangles), self masked,
    ``argpartition`` then a sort of the k kept (the strongest plain-NumPy baseline)."""
    xn = x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)
    idx = np.full((x.shape[0], k), -1, np.int64)
    sim = np.full((x.shape[0], k), -np.inf, np.float32)
    for b in range(len(off) - 1):
        s, e = int(off[b]), int(off[b + 1])
        kk = min(k, e - s - 1)
        if kk <= 0:
            continue
        g = xn[s:e] @ xn[s:e].T
        np.fill_diagonal(g, -np.inf)
        part = np.argpartition(-g, kk - 1, axis=1)[:, :kk]
        ps = np.take_along_axis(g, part, axis=1)
        order = np.argsort(-ps, axis=1, kind="stable")
        idx[s:e, :kk] = np.take_along_axis(part, order, axis=1) + s
        sim[s:e, :kk] = np.take_along_axis(ps, order, axis=1)
    return idx, sim


def torch_mm_topk_loop(x: np.ndarray, off: np.ndarray, k: int):
    """Per segment: ``torch.mm`` of the unit rows with their transpose, self masked, ``topk``."""
    import torch

    xt = torch.nn.functional.normalize(torch.from_numpy(x), dim=1)
    idx = torch.full((x.shape[0], k), -1, dtype=torch.int64)
    sim = torch.full((x.shape[0], k), float("-inf"))
    for b in range(len(off) - 1):
        s, e = int(off[b]), int(off[b + 1])
        kk = min(k, e - s - 1)
        if kk <= 0:
            continue
        g = xt[s:e] @ xt[s:e].T
        g.fill_diagonal_(float("-inf"))
        v, i = torch.topk(g, kk, dim=1)
        idx[s:e, :kk], sim[s:e, :kk] = i + s, v
    return idx, sim
