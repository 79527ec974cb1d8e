"""kNN family (knn_graph, knn_search, KnnGraph) against the float64 oracle (tie-robust), every backend.

- reference / cpu / triton through the dispatcher (backend parametrised), edge cases, KnnGraph upkeep;
- triton: the kernel wrapper (xmemory_gpu.ops.knn.triton) called directly on torch tensors. Without a
  GPU it runs in the Triton interpreter (tests/conftest.py sets TRITON_INTERPRET): shapes are small;
- cuda (xmemory_gpu._cuda knn_topk via ops/knn/cuda.py): without a GPU the kernel and constants exist,
  the binding checks its tensors in C++ before any launch and a launch fails cleanly; with a GPU the
  results against the oracle.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from xmemory_gpu.ops.knn import KnnGraph, knn_graph, knn_search, reference

from .gpu import (
    FakeCuda,
    cuda_module,
    has_cuda,
    has_triton,
    requires_cuda,
    requires_cuda_module,
    requires_triton,
)
from .knn_cases import (
    GRAPH_BACKENDS,
    SEARCH_BACKENDS,
    check_knn,
    numpy_blas_loop,
    ragged,
    segment_sizes,
    torch_mm_topk_loop,
)

if has_triton():
    from xmemory_gpu.ops.knn import triton as kt

pytestmark = pytest.mark.filterwarnings(
    "ignore:Conversion of an array with ndim > 0:DeprecationWarning"
)  # interpreter

SMALL = {"triton"}  # interpreted on the CPU here: keep shapes small
DEV = "cuda" if torch.cuda.is_available() else "cpu"
_cuda = cuda_module()


# ---- every host backend through the dispatcher ----------------------------------------------------


@pytest.mark.parametrize("backend", GRAPH_BACKENDS)
@pytest.mark.parametrize("k", [1, 10])
def test_graph_ragged_random(rng, backend, k):
    sizes = [0, 1, 2, 5, 11, 0] + segment_sizes(
        rng, 3 if backend in SMALL else 12, 3, 40 if backend in SMALL else 150
    )
    x, off = ragged(rng, sizes, 24)
    idx, sim = knn_graph(x, off, k, backend=backend)
    check_knn(x, off, x, off, k, idx, sim, self_excluded=True)


@pytest.mark.parametrize("backend", GRAPH_BACKENDS)
def test_graph_k64_odd_dim_fp16(rng, backend):
    x, off = ragged(rng, [70, 3, 65], 383, dtype=np.float16)
    idx, sim = knn_graph(x, off, 64, backend=backend)
    check_knn(
        x.astype(np.float32), off, x.astype(np.float32), off, 64, idx, sim, self_excluded=True, tol=5e-3
    )


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


@pytest.mark.parametrize("baseline", [numpy_blas_loop, torch_mm_topk_loop])
def test_benchmark_baselines_are_correct(rng, baseline):
    """The loop baselines bench_knn.py times against ours compute the same graph (oracle check)."""
    x, off = ragged(rng, [0, 1, 2, 5, 40, 0] + segment_sizes(rng, 4, 10, 60), 32)
    idx, sim = baseline(x, off, 10)
    check_knn(x, off, x, off, 10, np.asarray(idx, np.int32), np.asarray(sim, np.float32), self_excluded=True)


def test_cpu_isas_are_bit_identical(rng, monkeypatch):
    """Every ISA this CPU runs (XMEM_CPU_ISA caps the run-time choice) gives the same bits: graph
    (many segments: each pair once; few large: mirrored) and search, d not a multiple of the
    micro-kernel's depth chunk."""
    _C = pytest.importorskip("xmemory_gpu._C")
    x, off = ragged(rng, segment_sizes(rng, 12, 1, 70), 300)
    big, big_off = ragged(rng, [150, 90], 200)
    q, q_off = ragged(rng, [5, 0, 9] + [3] * 9, 300)
    got = {}
    for isa in ("scalar", "avx2", "avx512"):
        monkeypatch.setenv("XMEM_CPU_ISA", isa)
        if _C.cpu_isa() != isa:
            continue  # the CPU lacks it
        got[isa] = (
            knn_graph(x, off, 10, backend="cpu"),
            knn_graph(big, big_off, 7, backend="cpu"),
            knn_search(q, q_off, x, off, 4, backend="cpu"),
        )
    assert "scalar" in got and len(got) >= 2 or _C.cpu_isa() == "scalar"
    first = next(iter(got.values()))
    for isa, res in got.items():
        for (i0, s0), (i1, s1) in zip(first, res):
            np.testing.assert_array_equal(i0, i1, err_msg=isa)
            np.testing.assert_array_equal(s0, s1, err_msg=isa)


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


@pytest.mark.parametrize("d", [3, 8, 97])
def test_cpu_search_bits_do_not_depend_on_how_many_rows_ask(rng, d):
    """A search of a few rows (each key tile normalised as the item reads it) and one of many (one
    normalised copy of the keys) give a row the same list, bit for bit, as the graph gives it."""
    x = rng.standard_normal((300, d)).astype(np.float32)
    x[7] = 0.0  # a zero row stays zero either way
    x[11] = x[3]  # a tie, to the lower row
    x[200] = x[150]
    off = np.array([0, 120, 300])  # two memories
    g_idx, g_sim = knn_graph(x, off, 6, backend="cpu")
    for rows in (np.array([3, 150]), np.arange(0, 300, 9), np.arange(300)):  # 1, 14 / 20, 120 / 180
        q_off = np.searchsorted(rows, off)
        idx, sim = knn_search(x[rows], q_off, x, off, 7, backend="cpu")
        for j, r in enumerate(rows.tolist()):
            keep = idx[j] != r  # the search meets the row itself; the graph skips it
            np.testing.assert_array_equal(idx[j][keep][:6], g_idx[r])
            np.testing.assert_array_equal(sim[j][keep][:6], g_sim[r])


def test_cpu_rows_of_no_depth_score_zero(rng):
    """d = 0: every row is a zero row, so every similarity is 0 and ties go to the lower row (the
    reference's lists), on the graph's paths and the search's."""
    x = np.zeros((40, 0), np.float32)
    for off in (np.array([0, 40]), np.arange(0, 41, 5)):
        got = knn_graph(x, off, 3, backend="cpu")
        want = knn_graph(x, off, 3, backend="reference")
        for a, b in zip(got, want):
            np.testing.assert_array_equal(a, b)
        got = knn_search(x[:2], np.array([0, 2] + [2] * (len(off) - 2)), x, off, 3, backend="cpu")
        want = knn_search(x[:2], np.array([0, 2] + [2] * (len(off) - 2)), x, off, 3, backend="reference")
        for a, b in zip(got, want):
            np.testing.assert_array_equal(a, b)


_THREADS_SCRIPT = """
import sys
import numpy as np
from xmemory_gpu import _C
rng = np.random.default_rng(1)
out = []
for nseg, n in ((1, 132), (1, 400), (6, 165), (60, 20), (3, 7)):
    x = rng.standard_normal((nseg * n, 97)).astype(np.float32)
    x[3] = x[5]
    off = np.arange(nseg + 1) * n
    out += list(_C.knn_topk(x, off, x, off, 10, True, True))
    q = rng.standard_normal((nseg * 3, 97)).astype(np.float32)
    out += list(_C.knn_topk(q, np.arange(nseg + 1) * 3, x, off, 10, False, False))
sys.stdout.write("".join(a.tobytes().hex() for a in out))
"""


def test_cpu_lists_do_not_depend_on_the_thread_count():
    """Small calls run on one thread, larger ones on all (``kParallelWork``); graph and search lists,
    the symmetric, mirrored and query-tile paths, are the same bits with one OpenMP thread or two."""
    import os
    import subprocess
    import sys

    pytest.importorskip("xmemory_gpu._C")
    got = [
        subprocess.run(
            [sys.executable, "-c", _THREADS_SCRIPT],
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ, "OMP_NUM_THREADS": str(t)},
        ).stdout
        for t in (1, 2)
    ]
    assert got[0] and got[0] == got[1]


# ---- triton: the kernel wrapper called directly ---------------------------------------------------


def _t(a: np.ndarray):
    return torch.from_numpy(np.ascontiguousarray(a)).to(DEV)


def _tnp(r):
    idx, sim = r
    assert idx.device.type == DEV and sim.device.type == DEV
    assert idx.dtype == torch.int32 and sim.dtype == torch.float32
    return idx.cpu().numpy(), sim.cpu().numpy()


def _tgraph(x, off, k, **kw):
    return _tnp(kt.knn_graph(_t(x), off, k, **kw))


def _tsearch(q, qo, x, xo, k, **kw):
    return _tnp(kt.knn_search(_t(q), qo, _t(x), xo, k, **kw))


@requires_triton
@pytest.mark.parametrize("k", [1, 10])
def test_triton_graph_ragged_random(rng, k):
    sizes = [0, 1, 2, 5, 11, 0] + segment_sizes(rng, 3, 3, 80)
    x, off = ragged(rng, sizes, 24)
    idx, sim = _tgraph(x, off, k)
    check_knn(x, off, x, off, k, idx, sim, self_excluded=True)


@requires_triton
def test_triton_graph_k64_multi_tile(rng):
    # 70 rows: several query tiles and two key tiles; k = 64 < 69 neighbours; a segment of < k+1 rows
    x, off = ragged(rng, [70, 3, 0, 1], 20)
    idx, sim = _tgraph(x, off, 64)
    check_knn(x, off, x, off, 64, idx, sim, self_excluded=True)


@requires_triton
def test_triton_graph_odd_dim_fp16(rng):
    x, off = ragged(rng, [19, 3, 1, 0, 7], 383, dtype=np.float16)
    idx, sim = _tgraph(x, off, 5)
    check_knn(x.astype(np.float32), off, x.astype(np.float32), off, 5, idx, sim, self_excluded=True, tol=5e-3)


@requires_triton
def test_triton_graph_k64_odd_dim_fp16(rng):
    x, off = ragged(rng, [70, 3, 65], 383, dtype=np.float16)
    xt = torch.from_numpy(x).to(DEV)
    assert xt.dtype == torch.float16
    idx, sim = _tnp(kt.knn_graph(xt, off, 64))
    check_knn(
        x.astype(np.float32), off, x.astype(np.float32), off, 64, idx, sim, self_excluded=True, tol=5e-3
    )


@requires_triton
@pytest.mark.parametrize("drop", [False, True])
def test_triton_graph_duplicates_zero_rows_and_drop(rng, drop):
    x, off = ragged(rng, [9, 7, 2], 16)
    x[3] = x[1]
    x[4] = x[1]  # exact ties
    x[5] = 0.0  # zero vector: similarity 0 with everything
    x[10] = -x[9]
    x[16] = -x[17]  # a pair with only a negative neighbour
    idx, sim = _tgraph(x, off, 4, drop_nonpositive=drop)
    check_knn(x, off, x, off, 4, idx, sim, self_excluded=True, drop_nonpositive=drop)
    if drop:
        assert np.all(idx[16:18] == -1) and np.all(np.isneginf(sim[16:18]))
        assert np.all(idx[5] == -1)  # the zero row has only zero similarities


@requires_triton
def test_triton_exact_ties_lower_id_first(rng):
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
        idx, sim = _tgraph(x, off, 8, drop_nonpositive=drop)
        ridx, rsim = reference.knn_graph(x, off, 8, drop_nonpositive=drop)
        np.testing.assert_array_equal(idx, ridx)
        np.testing.assert_array_equal(sim, rsim)
    q = x[rng.permutation(n)[:12]]
    qo = np.array([0, 5, 12], dtype=np.int64)
    idx, sim = _tsearch(q, qo, x, off, 16)
    ridx, rsim = reference.knn_search(q, qo, x, off, 16)
    np.testing.assert_array_equal(idx, ridx)
    np.testing.assert_array_equal(sim, rsim)


@requires_triton
def test_triton_large_segment_small_k_skips(rng):
    # 150 keys in 64-row tiles: later tiles mostly fail the k-th-best test (merge skipped)
    x, off = ragged(rng, [150], 8)
    idx, sim = _tgraph(x, off, 2)
    check_knn(x, off, x, off, 2, idx, sim, self_excluded=True)


@requires_triton
@pytest.mark.parametrize("drop", [False, True])
def test_triton_search_ragged_empty_segments(rng, drop):
    q, qo = ragged(rng, [0, 3, 5, 4, 2], 24)
    x, xo = ragged(rng, [6, 0, 9, 1, 0], 24)
    q[4] = x[6]  # a query equal to a key
    q[5] = 0.0  # zero query
    for k in (1, 4, 12):
        idx, sim = _tsearch(q, qo, x, xo, k, drop_nonpositive=drop)
        check_knn(q, qo, x, xo, k, idx, sim, self_excluded=False, drop_nonpositive=drop)
    assert np.all(idx[0:3] == -1) and np.all(idx[12:14] == -1)  # segments 1 and 4 have no keys


@requires_triton
def test_triton_search_k64_torch_offsets(rng):
    q, qo = ragged(rng, [4, 3], 40)
    x, xo = ragged(rng, [80, 2], 40)
    idx, sim = _tsearch(q, torch.from_numpy(qo), x, torch.from_numpy(xo), 64)
    check_knn(q, qo, x, xo, 64, idx, sim, self_excluded=False)


@requires_triton
@pytest.mark.parametrize("drop", [False, True])
def test_gpu_search_above_the_register_top_k(rng, drop):
    """k > MAX_K_GPU on a GPU backend (retrieval asks for up to 100 chunks): the per-segment matmul
    and stable sort on the device, against the oracle, with segments shorter than k, an empty one,
    a zero query and ties (a repeated key)."""
    from xmemory_gpu.ops.knn import MAX_K_GPU

    k = MAX_K_GPU + 36
    q, qo = ragged(rng, [3, 0, 2, 4], 24)
    x, xo = ragged(rng, [150, 5, 0, 120], 24)
    x[3] = x[7] = q[1]  # query 1's best key, repeated: a tie at the top, the lower row first
    q[0] = 0.0
    idx, sim = knn_search(q, qo, x, xo, k, drop_nonpositive=drop, backend="triton")
    check_knn(q, qo, x, xo, k, idx, sim, self_excluded=False, drop_nonpositive=drop)
    assert np.all(idx[3:5] == -1)  # segment 2 has no keys
    assert idx[1][0] == 3 and idx[1][1] == 7  # the repeated key follows the original
    with pytest.raises(ValueError, match="k must be <="):
        knn_graph(x, xo, k, backend="triton")  # the graph keeps the kernels' bound


@requires_triton
def test_triton_gpu_block_config(rng, monkeypatch):
    # GPU-like tile shapes (BLOCK_M 64 / 32, BLOCK_D 32: several d chunks) on the same kernel
    monkeypatch.setattr(kt, "_config", lambda kp, d: (32, 64, 32, 8) if kp > 16 else (64, 64, 32, 8))
    x, off = ragged(rng, [40, 1, 6], 70)
    for k in (3, 33):
        idx, sim = _tgraph(x, off, k)
        check_knn(x, off, x, off, k, idx, sim, self_excluded=True)


@requires_triton
def test_triton_empty_inputs_and_bad_k(rng):
    x, off = ragged(rng, [0, 0], 8)
    idx, sim = _tgraph(x, off, 3)
    assert idx.shape == (0, 3) and sim.shape == (0, 3)
    q, qo = ragged(rng, [2, 1], 8)
    x, xo = ragged(rng, [0, 0], 8)
    idx, sim = _tsearch(q, qo, x, xo, 3)
    assert np.all(idx == -1) and np.all(np.isneginf(sim))
    with pytest.raises(
        ValueError, match="k must be >= 1"
    ):  # checked by the dispatcher, not the kernel wrapper
        knn_graph(q, qo, 0, backend="triton")
    with pytest.raises(ValueError, match="k must be <= 64"):
        knn_graph(q, qo, 65, backend="triton")
    with pytest.raises(ValueError, match="same length"):
        knn_search(q, qo, x, np.array([0, 0, 0, 0]), 2, backend="triton")


# ---- cuda: the compiled module without a GPU --------------------------------------------------------


@requires_cuda_module
def test_cuda_module_exposes_knn_kernels():
    for name in ("knn_topk", "device_count", "runtime_version"):
        assert callable(getattr(_cuda, name)), name
    assert _cuda.KNN_QUERY_TILE == 64 and _cuda.KNN_MAX_K == 64
    assert _cuda.runtime_version() >= 12000


@requires_cuda_module
def test_cuda_knn_wrapper_exists():
    from xmemory_gpu.ops.knn import cuda as knn_cuda

    assert callable(knn_cuda.knn_graph) and callable(knn_cuda.knn_search)


@pytest.mark.parametrize("backend", ["reference", "cpu", "triton", "cuda"])
def test_dispatcher_checks_before_any_backend(backend, monkeypatch):
    """k, shapes and offsets are checked once by the dispatcher, for every backend (GPU ones too:
    none is reached); the kernel wrappers do not check again."""
    import xmemory_gpu.ops.knn as knn_mod
    from xmemory_gpu.ops import backends as bk

    called = []
    monkeypatch.setattr(bk, "is_available", lambda name: True)
    monkeypatch.setattr(knn_mod, "implementation", lambda op, name: lambda *a, **kw: called.append(a))
    x = np.ones((10, 8), np.float32)
    off = np.array([0, 4, 10], np.int64)
    gpu = backend in ("triton", "cuda")
    for k, msg in ((0, "k must be >= 1"), (65, "k must be <= 64" if gpu else None)):
        if msg:
            with pytest.raises(ValueError, match=msg):
                knn_graph(x, off, k, backend=backend)
    with pytest.raises(ValueError, match="x_offsets"):
        knn_search(x, off, x, np.array([0, 4, 9]), 3, backend=backend)
    with pytest.raises(ValueError, match="must agree on d"):
        knn_search(x, off, x[:, :4], off, 3, backend=backend)
    assert not called


def _knn_args(nq=5, nx=7, d=8, k=4, b=2, **over):
    """Well-formed knn_topk arguments as fake CUDA arrays; ``over`` replaces some."""
    args = dict(
        q=FakeCuda((nq, d), "<f4"),
        q_offsets=FakeCuda((b + 1,), "<i8"),
        x=FakeCuda((nx, d), "<f4"),
        x_offsets=FakeCuda((b + 1,), "<i8"),
        tile_start=FakeCuda((b + 1,), "<i8"),
        num_tiles=b,
        exclude_self=False,
        drop_nonpositive=False,
        out_idx=FakeCuda((nq, k), "<i4"),
        out_sim=FakeCuda((nq, k), "<f4"),
        stream=0,
    )
    args.update(over)
    return args


@requires_cuda_module
@pytest.mark.skipif(has_cuda(), reason="checks the no-GPU error path")
def test_cuda_launch_without_gpu_raises_runtime_error():
    with pytest.raises(RuntimeError, match="CUDA error"):  # every check passes; the launch fails
        _cuda.knn_topk(**_knn_args())
    with pytest.raises(ValueError, match="k must be"):  # argument checks come first
        _cuda.knn_topk(**_knn_args(out_idx=FakeCuda((5, 65), "<i4"), out_sim=FakeCuda((5, 65), "<f4")))


@requires_cuda_module
def test_cuda_knn_binding_checks_tensors_before_launch():
    """Host tensors, wrong dtypes, non-contiguous and mis-shaped tensors are refused in C++, naming the
    argument, before any launch (no GPU needed)."""
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


# ---- cuda on a GPU: against the float64 reference ---------------------------------------------------


def _knn():
    from xmemory_gpu.ops.knn import cuda as knn_cuda

    return knn_cuda


def _np(t):
    return t.cpu().numpy()


@requires_cuda_module
@requires_cuda
@pytest.mark.parametrize("d", [383, 384, 1536])
@pytest.mark.parametrize("k", [1, 5, 32, 33, 64])
def test_cuda_knn_graph_vs_reference(rng, d, k):
    sizes = [0, 1, 2, 65, 0, 130, 7] + segment_sizes(rng, 3, 1, 200)
    x, off = ragged(rng, sizes, d)
    idx, sim = _knn().knn_graph(torch.from_numpy(x).cuda(), off, k)
    assert idx.is_cuda and idx.dtype == torch.int32 and sim.dtype == torch.float32
    check_knn(x, off, x, off, k, _np(idx), _np(sim), self_excluded=True, tol=1e-4)


@requires_cuda_module
@requires_cuda
@pytest.mark.parametrize("k", [4, 40])
def test_cuda_knn_graph_ties_zero_rows_drop(rng, k):
    protos = rng.standard_normal((5, 48)).astype(np.float32)
    x = protos[rng.integers(0, 5, 150)] * rng.uniform(0.5, 2.0, (150, 1)).astype(
        np.float32
    )  # exact cosine ties
    x[7] = 0.0  # zero row: similarity 0 with everything
    off = np.array([0, 90, 150], np.int64)
    xt = torch.from_numpy(x).cuda()
    for drop in (False, True):
        idx, sim = _knn().knn_graph(xt, torch.from_numpy(off), k, drop_nonpositive=drop)
        check_knn(x, off, x, off, k, _np(idx), _np(sim), self_excluded=True, drop_nonpositive=drop, tol=1e-4)
    # scaled copies normalise equal only up to rounding: compare padding and sorted sims position-wise
    ref_idx, ref_sim = reference.knn_graph(x, off, k, drop_nonpositive=True)
    idx, sim = _knn().knn_graph(xt, off, k, drop_nonpositive=True)
    assert np.array_equal(_np(idx) >= 0, ref_idx >= 0)
    np.testing.assert_allclose(_np(sim), ref_sim, atol=1e-5)


@requires_cuda_module
@requires_cuda
def test_cuda_knn_graph_exact_duplicates_tie_to_lower_id(rng):
    protos = rng.standard_normal((4, 32)).astype(np.float32)
    x = protos[rng.integers(0, 4, 200)]  # exact duplicates: identical float32 rows and dots
    off = np.array([0, 200], np.int64)
    ref_idx, ref_sim = reference.knn_graph(x, off, 16)
    idx, sim = _knn().knn_graph(torch.from_numpy(x).cuda(), off, 16)
    assert np.array_equal(_np(idx), ref_idx)
    np.testing.assert_allclose(_np(sim), ref_sim, atol=1e-5)


@requires_cuda_module
@requires_cuda
@pytest.mark.parametrize("k", [3, 64])
def test_cuda_knn_search_vs_reference(rng, k):
    qsizes = [3, 0, 70, 5, 1, 129]
    xsizes = [100, 4, 0, 64, 2, 300]  # includes queries with no rows (all padding)
    q, qo = ragged(rng, qsizes, 96)
    x, xo = ragged(rng, xsizes, 96)
    for drop in (False, True):
        idx, sim = _knn().knn_search(
            torch.from_numpy(q).cuda(), qo, torch.from_numpy(x).cuda(), xo, k, drop_nonpositive=drop
        )
        check_knn(q, qo, x, xo, k, _np(idx), _np(sim), self_excluded=False, drop_nonpositive=drop, tol=1e-4)


@requires_cuda_module
@requires_cuda
def test_cuda_knn_empty_inputs():
    x = torch.zeros((0, 16), device="cuda")
    idx, sim = _knn().knn_graph(x, np.array([0], np.int64), 5)
    assert idx.shape == (0, 5) and sim.shape == (0, 5)
    q = torch.randn(3, 16, device="cuda")
    idx, sim = _knn().knn_search(q, np.array([0, 3]), x, np.array([0, 0]), 2)
    assert (_np(idx) == -1).all() and np.isneginf(_np(sim)).all()
