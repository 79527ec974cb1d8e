"""The compiled CUDA module (xmemory_gpu._cuda): knn and coverage kernels.

Without a GPU: the module imports, the functions and constants exist, the bindings check their
tensors (device, dtype, shape, contiguity) in C++ before any launch, and a launch fails with a
clean RuntimeError. With a GPU: results against the float64
references (kNN tie-robust; coverage picks and values exactly).
"""

from __future__ import annotations

import numpy as np
import pytest

from xmemory_gpu.ops.coverage import reference as cov_ref
from xmemory_gpu.ops.knn import reference as knn_ref

from .coverage_cases import random_problem
from .gpu import FakeCuda, has_cuda, requires_cuda
from .knn_cases import check_knn, ragged, segment_sizes

_cuda = pytest.importorskip("xmemory_gpu._cuda", reason="xmemory_gpu._cuda not built (no nvcc at build time)")


# ---- no GPU needed -------------------------------------------------------------------------------


def test_module_exposes_kernels():
    for name in ("knn_topk", "coverage_select", "device_count", "runtime_version"):
        assert callable(getattr(_cuda, name)), name
    assert _cuda.KNN_QUERY_TILE == 64 and _cuda.KNN_MAX_K == 64
    assert _cuda.COVERAGE_STATE_BYTES == 10
    assert _cuda.COVERAGE_SHARED_MAX_N * _cuda.COVERAGE_STATE_BYTES <= 48 * 1024 - 1024
    assert _cuda.runtime_version() >= 12000


def test_wrappers_exist():
    from xmemory_gpu.ops.coverage import cuda as cov_cuda
    from xmemory_gpu.ops.knn import cuda as knn_cuda

    assert callable(knn_cuda.knn_graph) and callable(knn_cuda.knn_search)
    assert callable(cov_cuda.coverage_select)


def test_knn_wrapper_validates_before_launch():
    torch = pytest.importorskip("torch")
    from xmemory_gpu.ops.knn import cuda as knn_cuda

    x = torch.randn(10, 8)
    off = np.array([0, 4, 10], np.int64)
    with pytest.raises(ValueError, match="k must be"):
        knn_cuda.knn_graph(x, off, 65)
    with pytest.raises(ValueError, match="k must be"):
        knn_cuda.knn_graph(x, off, 0)
    with pytest.raises(ValueError, match="CUDA tensors"):
        knn_cuda.knn_graph(x, off, 3)  # host tensor


def test_coverage_wrapper_without_picks_needs_no_device():
    from xmemory_gpu.ops.coverage import cuda as cov_cuda

    off = np.array([0, 3, 3, 5], np.int64)
    idx = np.full((5, 2), -1, np.int32)
    w = np.zeros((5, 2), np.float32)
    rel = np.linspace(0, 1, 5)
    sel_off, sel, gains = cov_cuda.coverage_select(off, idx, w, rel, 0.7, np.array([0, 4, -1], np.int64), 1.0)
    assert sel_off.tolist() == [0, 0, 0, 0] and sel.dtype == np.int32 and gains.dtype == np.float64
    assert sel.size == 0 and gains.size == 0
    empty = cov_cuda.coverage_select(np.zeros(1, np.int64), idx[:0], w[:0], rel[:0], 0.7, np.zeros(0, np.int64), 1.0)
    assert empty[0].tolist() == [0] and empty[1].size == 0


def _knn_args(nq=5, nx=7, d=8, k=4, b=2, **over):
    """Well-formed knn_topk arguments as fake CUDA arrays; ``over`` replaces some."""
    args = dict(q=FakeCuda((nq, d), "<f4"), q_offsets=FakeCuda((b + 1,), "<i8"), x=FakeCuda((nx, d), "<f4"),
                x_offsets=FakeCuda((b + 1,), "<i8"), tile_start=FakeCuda((b + 1,), "<i8"), num_tiles=b,
                exclude_self=False, drop_nonpositive=False, out_idx=FakeCuda((nq, k), "<i4"),
                out_sim=FakeCuda((nq, k), "<f4"), stream=0)
    args.update(over)
    return args


@pytest.mark.skipif(has_cuda(), reason="checks the no-GPU error path")
def test_launch_without_gpu_raises_runtime_error():
    with pytest.raises(RuntimeError, match="CUDA error"):  # every check passes; the launch fails
        _cuda.knn_topk(**_knn_args())
    with pytest.raises(ValueError, match="k must be"):  # argument checks come first
        _cuda.knn_topk(**_knn_args(out_idx=FakeCuda((5, 65), "<i4"), out_sim=FakeCuda((5, 65), "<f4")))


def test_knn_binding_checks_tensors_before_launch():
    """Host tensors, wrong dtypes, non-contiguous and mis-shaped tensors are refused in C++, naming the
    argument, before any launch (no GPU needed)."""
    torch = pytest.importorskip("torch")
    cases = [
        (dict(q=torch.zeros(5, 8)), "q: expected a CUDA tensor, got host memory"),
        (dict(x=np.zeros((7, 8), np.float32)), "x: expected a CUDA tensor, got host memory"),
        (dict(q=FakeCuda((5, 8), "<f8")), "q: expected float32, got float64"),
        (dict(q_offsets=FakeCuda((3,), "<i4")), "q_offsets: expected int64, got int32"),
        (dict(x=FakeCuda((7, 8), "<f4", strides=(4, 28))), "x: expected a contiguous"),
        (dict(x=FakeCuda((7, 9), "<f4")), r"x: expected shape \[\*, 8\], got \[7, 9\]"),
        (dict(x_offsets=FakeCuda((4,), "<i8")), r"x_offsets: expected shape \[3\]"),
        (dict(out_sim=FakeCuda((5, 3), "<f4")), r"out_sim: expected shape \[5, 4\]"),
        (dict(out_idx=FakeCuda((5, 4), "<i8")), "out_idx: expected int32, got int64"),
        (dict(q=12345), "q: expected a CUDA tensor .*got int"),  # the old raw-pointer ABI is gone
        (dict(tile_start=None), "tile_start: expected a CUDA tensor, got None"),
    ]
    for over, msg in cases:
        with pytest.raises(ValueError, match=msg):
            _cuda.knn_topk(**_knn_args(**over))


# ---- GPU: knn against the float64 reference ------------------------------------------------------


def _knn():
    from xmemory_gpu.ops.knn import cuda as knn_cuda

    return knn_cuda


def _np(t):
    return t.cpu().numpy()


@requires_cuda
@pytest.mark.parametrize("d", [383, 384, 1536])
@pytest.mark.parametrize("k", [1, 5, 32, 33, 64])
def test_cuda_knn_graph_vs_reference(rng, d, k):
    import torch

    sizes = [0, 1, 2, 65, 0, 130, 7] + segment_sizes(rng, 3, 1, 200)
    x, off = ragged(rng, sizes, d)
    idx, sim = _knn().knn_graph(torch.from_numpy(x).cuda(), off, k)
    assert idx.is_cuda and idx.dtype == torch.int32 and sim.dtype == torch.float32
    check_knn(x, off, x, off, k, _np(idx), _np(sim), self_excluded=True, tol=1e-4)


@requires_cuda
@pytest.mark.parametrize("k", [4, 40])
def test_cuda_knn_graph_ties_zero_rows_drop(rng, k):
    import torch

    protos = rng.standard_normal((5, 48)).astype(np.float32)
    x = protos[rng.integers(0, 5, 150)] * rng.uniform(0.5, 2.0, (150, 1)).astype(np.float32)  # exact cosine ties
    x[7] = 0.0  # zero row: similarity 0 with everything
    off = np.array([0, 90, 150], np.int64)
    xt = torch.from_numpy(x).cuda()
    for drop in (False, True):
        idx, sim = _knn().knn_graph(xt, torch.from_numpy(off), k, drop_nonpositive=drop)
        check_knn(x, off, x, off, k, _np(idx), _np(sim), self_excluded=True, drop_nonpositive=drop, tol=1e-4)
    # scaled copies normalise equal only up to rounding: compare padding and sorted sims position-wise
    ref_idx, ref_sim = knn_ref.knn_graph(x, off, k, drop_nonpositive=True)
    idx, sim = _knn().knn_graph(xt, off, k, drop_nonpositive=True)
    assert np.array_equal(_np(idx) >= 0, ref_idx >= 0)
    np.testing.assert_allclose(_np(sim), ref_sim, atol=1e-5)


@requires_cuda
def test_cuda_knn_graph_exact_duplicates_tie_to_lower_id(rng):
    import torch

    protos = rng.standard_normal((4, 32)).astype(np.float32)
    x = protos[rng.integers(0, 4, 200)]  # exact duplicates: identical float32 rows and dots
    off = np.array([0, 200], np.int64)
    ref_idx, ref_sim = knn_ref.knn_graph(x, off, 16)
    idx, sim = _knn().knn_graph(torch.from_numpy(x).cuda(), off, 16)
    assert np.array_equal(_np(idx), ref_idx)
    np.testing.assert_allclose(_np(sim), ref_sim, atol=1e-5)


@requires_cuda
@pytest.mark.parametrize("k", [3, 64])
def test_cuda_knn_search_vs_reference(rng, k):
    import torch

    qsizes = [3, 0, 70, 5, 1, 129]
    xsizes = [100, 4, 0, 64, 2, 300]  # includes queries with no rows (all padding)
    q, qo = ragged(rng, qsizes, 96)
    x, xo = ragged(rng, xsizes, 96)
    for drop in (False, True):
        idx, sim = _knn().knn_search(torch.from_numpy(q).cuda(), qo, torch.from_numpy(x).cuda(), xo, k, drop_nonpositive=drop)
        check_knn(q, qo, x, xo, k, _np(idx), _np(sim), self_excluded=False, drop_nonpositive=drop, tol=1e-4)


@requires_cuda
def test_cuda_knn_empty_inputs():
    import torch

    x = torch.zeros((0, 16), device="cuda")
    idx, sim = _knn().knn_graph(x, np.array([0], np.int64), 5)
    assert idx.shape == (0, 5) and sim.shape == (0, 5)
    q = torch.randn(3, 16, device="cuda")
    idx, sim = _knn().knn_search(q, np.array([0, 3]), x, np.array([0, 0]), 2)
    assert (_np(idx) == -1).all() and np.isneginf(_np(sim)).all()


# ---- GPU: coverage against the float64 reference (exact) -----------------------------------------


def _cov_check(off, idx, w, rel, alpha, budgets, target):
    from xmemory_gpu.ops.coverage import cuda as cov_cuda

    want = cov_ref.coverage_select(off, idx, w, np.asarray(rel, np.float64), alpha, budgets, target)
    got = cov_cuda.coverage_select(off, idx, w, np.asarray(rel, np.float64), alpha, budgets, target)
    assert got[0].dtype == np.int64 and got[1].dtype == np.int32 and got[2].dtype == np.float64
    assert np.array_equal(got[0], want[0])
    assert np.array_equal(got[1], want[1])
    assert np.array_equal(got[2], want[2])  # bit-equal: same double arithmetic


@requires_cuda
@pytest.mark.parametrize("alpha", [0.0, 0.7, 1.0])
@pytest.mark.parametrize("target", [0.6, 1.0, 2.0])  # 2.0: never reached
def test_cuda_coverage_vs_reference(rng, alpha, target):
    sizes = [0, 1, 2, 17, 64, 300, 1024] + segment_sizes(rng, 6, 1, 120)
    off, idx, w, rel = random_problem(rng, sizes, 8)
    s = int(off[5])
    idx[s, :3], w[s, :3] = [0, 5, 5], [0.5, 0.25, 0.75]  # self listed, a repeated neighbour: counted once
    idx[s + 1, 0], w[s + 1, 0] = 10**6, 0.5  # out of range: ignored
    budgets = rng.integers(-1, 40, size=len(sizes)).astype(np.int64)
    budgets[4] = 10**9  # unlimited: runs to the target or to a value <= 0
    _cov_check(off, idx, w, rel, alpha, budgets, target)


@requires_cuda
def test_cuda_coverage_constant_relevance_ties_and_no_neighbours(rng):
    off, idx, w, rel = random_problem(rng, [40, 40, 3], 4)
    rel[:40] = 0.3  # constant: rel~ = 0.5 for all
    idx[40:80] = -1  # no neighbours: every gain 1, ties to the lowest position
    budgets = np.array([10, 50, 3], np.int64)
    _cov_check(off, idx, w, rel, 0.5, budgets, 1.0)
    off0, idx0, w0, rel0 = off, idx[:, :0].copy(), w[:, :0].copy(), rel  # k = 0
    _cov_check(off0, idx0, w0, rel0, 0.7, budgets, 1.0)


@requires_cuda
def test_cuda_coverage_long_list_uses_global_state(rng):
    n = int(_cuda.COVERAGE_SHARED_MAX_N) + 700
    off, idx, w, rel = random_problem(rng, [n, 50], 4, edge_p=0.5)
    _cov_check(off, idx, w, rel, 0.7, np.array([12, 8], np.int64), 1.0)
