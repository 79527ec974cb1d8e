"""Triton kNN backend (xmemory_gpu.ops.knn.triton) against the float64 oracle, called directly.

Without a GPU the kernel runs in the Triton interpreter (tests/conftest.py sets TRITON_INTERPRET):
shapes are kept small.
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("triton")

from xmemory_gpu.ops.knn import reference  # noqa: E402
from xmemory_gpu.ops.knn import triton as kt  # noqa: E402

from .knn_cases import check_knn, ragged, segment_sizes  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore:Conversion of an array with ndim > 0:DeprecationWarning")  # interpreter

DEV = "cuda" if torch.cuda.is_available() else "cpu"


def _t(a: np.ndarray):
    return torch.from_numpy(np.ascontiguousarray(a)).to(DEV)


def _np(r):
    idx, sim = r
    assert idx.device.type == DEV and sim.device.type == DEV
    assert idx.dtype == torch.int32 and sim.dtype == torch.float32
    return idx.cpu().numpy(), sim.cpu().numpy()


def graph(x, off, k, **kw):
    return _np(kt.knn_graph(_t(x), off, k, **kw))


def search(q, qo, x, xo, k, **kw):
    return _np(kt.knn_search(_t(q), qo, _t(x), xo, k, **kw))


@pytest.mark.parametrize("k", [1, 10])
def test_graph_ragged_random(rng, k):
    sizes = [0, 1, 2, 5, 11, 0] + segment_sizes(rng, 3, 3, 80)
    x, off = ragged(rng, sizes, 24)
    idx, sim = graph(x, off, k)
    check_knn(x, off, x, off, k, idx, sim, self_excluded=True)


def test_graph_k64_multi_tile(rng):
    # 70 rows: several query tiles and two key tiles; k = 64 < 69 neighbours; a segment of < k+1 rows
    x, off = ragged(rng, [70, 3, 0, 1], 20)
    idx, sim = graph(x, off, 64)
    check_knn(x, off, x, off, 64, idx, sim, self_excluded=True)


def test_graph_odd_dim_fp16(rng):
    x, off = ragged(rng, [19, 3, 1, 0, 7], 383, dtype=np.float16)
    idx, sim = graph(x, off, 5)
    check_knn(x.astype(np.float32), off, x.astype(np.float32), off, 5, idx, sim, self_excluded=True, tol=5e-3)


def test_graph_k64_odd_dim_fp16(rng):
    x, off = ragged(rng, [70, 3, 65], 383, dtype=np.float16)
    xt = torch.from_numpy(x).to(DEV)
    assert xt.dtype == torch.float16
    idx, sim = _np(kt.knn_graph(xt, off, 64))
    check_knn(x.astype(np.float32), off, x.astype(np.float32), off, 64, idx, sim, self_excluded=True, tol=5e-3)


@pytest.mark.parametrize("drop", [False, True])
def test_graph_duplicates_zero_rows_and_drop(rng, drop):
    x, off = ragged(rng, [9, 7, 2], 16)
    x[3] = x[1]
    x[4] = x[1]  # exact ties
    x[5] = 0.0  # zero vector: similarity 0 with everything
    x[10] = -x[9]
    x[16] = -x[17]  # a pair with only a negative neighbour
    idx, sim = graph(x, off, 4, drop_nonpositive=drop)
    check_knn(x, off, x, off, 4, idx, sim, self_excluded=True, drop_nonpositive=drop)
    if drop:
        assert np.all(idx[16:18] == -1) and np.all(np.isneginf(sim[16:18]))
        assert np.all(idx[5] == -1)  # the zero row has only zero similarities


def test_exact_ties_lower_id_first(rng):
    # binary rows with four ones: unit rows of 0.5 entries, every dot is an exact multiple of 0.25,
    # so ties are exact in any summation order and the ids must equal the reference's
    n, d = 40, 16
    x = np.zeros((n, d), dtype=np.float32)
    for r in range(n):
        x[r, rng.choice(d, 4, replace=False)] = 1.0
    x[7] = x[2]
    x[30] = x[2]
    off = np.array([0, 25, 40], dtype=np.int64)
    for drop in (False, True):
        idx, sim = graph(x, off, 8, drop_nonpositive=drop)
        ridx, rsim = reference.knn_graph(x, off, 8, drop_nonpositive=drop)
        np.testing.assert_array_equal(idx, ridx)
        np.testing.assert_array_equal(sim, rsim)
    q = x[rng.permutation(n)[:12]]
    qo = np.array([0, 5, 12], dtype=np.int64)
    idx, sim = search(q, qo, x, off, 16)
    ridx, rsim = reference.knn_search(q, qo, x, off, 16)
    np.testing.assert_array_equal(idx, ridx)
    np.testing.assert_array_equal(sim, rsim)


def test_large_segment_small_k_skips(rng):
    # 150 keys in 64-row tiles: later tiles mostly fail the k-th-best test (merge skipped)
    x, off = ragged(rng, [150], 8)
    idx, sim = graph(x, off, 2)
    check_knn(x, off, x, off, 2, idx, sim, self_excluded=True)


@pytest.mark.parametrize("drop", [False, True])
def test_search_ragged_empty_segments(rng, drop):
    q, qo = ragged(rng, [0, 3, 5, 4, 2], 24)
    x, xo = ragged(rng, [6, 0, 9, 1, 0], 24)
    q[4] = x[6]  # a query equal to a key
    q[5] = 0.0  # zero query
    for k in (1, 4, 12):
        idx, sim = search(q, qo, x, xo, k, drop_nonpositive=drop)
        check_knn(q, qo, x, xo, k, idx, sim, self_excluded=False, drop_nonpositive=drop)
    assert np.all(idx[0:3] == -1) and np.all(idx[12:14] == -1)  # segments 1 and 4 have no keys


def test_search_k64_torch_offsets(rng):
    q, qo = ragged(rng, [4, 3], 40)
    x, xo = ragged(rng, [80, 2], 40)
    idx, sim = search(q, torch.from_numpy(qo), x, torch.from_numpy(xo), 64)
    check_knn(q, qo, x, xo, 64, idx, sim, self_excluded=False)


def test_gpu_block_config(rng, monkeypatch):
    # GPU-like tile shapes (BLOCK_M 64 / 32, BLOCK_D 32: several d chunks) on the same kernel
    monkeypatch.setattr(kt, "_config", lambda kp, d: (32, 64, 32, 8) if kp > 16 else (64, 64, 32, 8))
    x, off = ragged(rng, [40, 1, 6], 70)
    for k in (3, 33):
        idx, sim = graph(x, off, k)
        check_knn(x, off, x, off, k, idx, sim, self_excluded=True)


def test_empty_inputs_and_bad_k(rng):
    x, off = ragged(rng, [0, 0], 8)
    idx, sim = graph(x, off, 3)
    assert idx.shape == (0, 3) and sim.shape == (0, 3)
    q, qo = ragged(rng, [2, 1], 8)
    x, xo = ragged(rng, [0, 0], 8)
    idx, sim = search(q, qo, x, xo, 3)
    assert np.all(idx == -1) and np.all(np.isneginf(sim))
    with pytest.raises(ValueError):
        kt.knn_graph(_t(q), qo, 0)
    with pytest.raises(ValueError):
        kt.knn_graph(_t(q), qo, 65)
    with pytest.raises(ValueError):
        kt.knn_search(_t(q), qo, _t(x), np.array([0, 0, 0, 0]), 2)
