"""kNN family: every host backend against the float64 oracle (tie-robust), edge cases, KnnGraph upkeep."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from xmemory_gpu.ops.knn import KnnGraph, knn_graph, knn_search

from .knn_cases import GRAPH_BACKENDS, SEARCH_BACKENDS, check_knn, ragged, segment_sizes

SMALL = {"triton"}  # interpreted on the CPU here: keep shapes small


@pytest.mark.parametrize("backend", GRAPH_BACKENDS)
@pytest.mark.parametrize("k", [1, 10])
def test_graph_ragged_random(rng, backend, k):
    sizes = [0, 1, 2, 5, 11, 0] + segment_sizes(rng, 3 if backend in SMALL else 12, 3, 40 if backend in SMALL else 150)
    x, off = ragged(rng, sizes, 24)
    idx, sim = knn_graph(x, off, k, backend=backend)
    check_knn(x, off, x, off, k, idx, sim, self_excluded=True)


@pytest.mark.parametrize("backend", GRAPH_BACKENDS)
def test_graph_k64_odd_dim_fp16(rng, backend):
    x, off = ragged(rng, [70, 3, 65], 383, dtype=np.float16)
    idx, sim = knn_graph(x, off, 64, backend=backend)
    check_knn(x.astype(np.float32), off, x.astype(np.float32), off, 64, idx, sim, self_excluded=True, tol=5e-3)


@pytest.mark.parametrize("backend", GRAPH_BACKENDS)
def test_graph_duplicates_zero_rows_and_drop(rng, backend):
    x, off = ragged(rng, [9, 7], 16)
    x[3] = x[1]
    x[4] = x[1]  # exact ties
    x[5] = 0.0  # zero vector: similarity 0 with everything
    x[10] = -x[9]
    idx, sim = knn_graph(x, off, 4, backend=backend)
    check_knn(x, off, x, off, 4, idx, sim, self_excluded=True)
    idx, sim = knn_graph(x, off, 4, backend=backend, drop_nonpositive=True)
    check_knn(x, off, x, off, 4, idx, sim, self_excluded=True, drop_nonpositive=True)
    assert np.all(idx[5] == -1), "a zero row has no positive neighbour"


@pytest.mark.parametrize("backend", SEARCH_BACKENDS)
def test_search_ragged(rng, backend):
    b = 4 if backend in SMALL else 10
    xs = [0] + segment_sizes(rng, b - 1, 1, 60)
    qs = [3] + segment_sizes(rng, b - 1, 0, 5)
    x, xo = ragged(rng, xs, 32)
    q, qo = ragged(rng, qs, 32)
    idx, sim = knn_search(q, qo, x, xo, 8, backend=backend)
    check_knn(q, qo, x, xo, 8, idx, sim, self_excluded=False)
    assert np.all(idx[:3] == -1), "queries of an empty segment get padding only"


def test_torch_in_torch_out(rng):
    x, off = ragged(rng, [12, 9], 8)
    idx, sim = knn_graph(torch.from_numpy(x), torch.from_numpy(off), 3)
    assert isinstance(idx, torch.Tensor) and idx.dtype == torch.int32 and sim.dtype == torch.float32
    check_knn(x, off, x, off, 3, idx.numpy(), sim.numpy(), self_excluded=True)


def test_bad_inputs(rng):
    x, off = ragged(rng, [4, 4], 8)
    with pytest.raises(ValueError, match="k must be"):
        knn_graph(x, off, 0)
    with pytest.raises(ValueError, match="offsets"):
        knn_graph(x, np.array([0, 5], np.int64), 2)
    with pytest.raises(ValueError, match="must agree on d"):
        knn_search(x[:, :4], off, x, off, 2)
    with pytest.raises(ValueError, match="not implemented|unknown|not usable|has no"):
        knn_graph(x, off, 2, backend="nonsense")


def test_knngraph_matches_rebuild_after_random_edits(rng):
    d, k = 12, 5
    base = rng.standard_normal((60, d)).astype(np.float32)
    seg = rng.integers(0, 3, size=60)
    g = KnnGraph(base, k, segment_of=seg)
    for _ in range(40):
        op = rng.integers(0, 3)
        alive = np.flatnonzero(g.alive)
        if op == 0:
            n = int(rng.integers(1, 4))
            g.insert(rng.standard_normal((n, d)).astype(np.float32), segment=rng.integers(0, 3, size=n))
        elif op == 1 and alive.size > 5:
            g.remove(rng.choice(alive, size=int(rng.integers(1, 3)), replace=False))
        elif alive.size:
            rows = rng.choice(alive, size=int(rng.integers(1, 3)), replace=False)
            g.update(rows, rng.standard_normal((len(rows), d)).astype(np.float32))
    alive = np.flatnonzero(g.alive)
    # from scratch over the alive rows, segment by segment
    segs = g.segment_of[alive]
    order = alive[np.argsort(segs, kind="stable")]
    sizes = np.bincount(g.segment_of[order], minlength=3)
    off = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    pos = np.full(g.n_rows, -1, np.int64)
    pos[order] = np.arange(order.size)
    got_idx = g.idx[order]
    local = np.where(got_idx >= 0, pos[np.maximum(got_idx, 0)], -1).astype(np.int32)
    assert np.all(local[got_idx >= 0] >= 0), "a dead row is still a neighbour"
    xo = g.x[order]
    check_knn(xo, off, xo, off, k, local, g.sim[order], self_excluded=True, tol=1e-5)
    assert not np.any(np.isin(g.idx[g.alive], np.flatnonzero(~g.alive))), "a dead row is still a neighbour"


@pytest.mark.parametrize("backend", [b for b in GRAPH_BACKENDS if b == "cpu"])
def test_cpu_results_do_not_depend_on_batching(rng, backend):
    # many segments take the symmetric per-segment path, one segment the query-tile path: same bits
    sizes = segment_sizes(rng, 20, 1, 90)
    x, off = ragged(rng, sizes, 40)
    idx, sim = knn_graph(x, off, 7, backend=backend)
    for b in range(len(sizes)):
        s, e = int(off[b]), int(off[b + 1])
        i1, s1 = knn_graph(x[s:e], np.array([0, e - s]), 7, backend=backend)
        np.testing.assert_array_equal(s1, sim[s:e])
        np.testing.assert_array_equal(np.where(i1 >= 0, i1 + s, -1), idx[s:e])
