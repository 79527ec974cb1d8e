"""f(P) (partition_objective, score_candidates, their helpers) against the float64 reference, every backend.

- a hand-worked case on every backend; reference / cpu / triton through the dispatcher (backend
  parametrised): incremental scoring equals from-scratch, candidate building, split proposals;
- triton: the kernels (xmemory_gpu.ops.objective.triton) called directly on torch tensors, float64
  throughout (rtol 1e-9). Without a GPU they run in the Triton interpreter (tests/conftest.py sets
  TRITON_INTERPRET): shapes are small;
- cuda (xmemory_gpu._cuda objective kernels via ops/objective/cuda.py): without a GPU the kernels and
  constants exist, empty inputs need no device, the bindings check their tensors in C++ and launches
  fail cleanly, and the wrapper's plumbing (dense relabelling, chunking, shared / global state
  offsets) is checked against the reference through a host emulation of the three kernels; with a
  GPU the kernels against the reference.
"""

from __future__ import annotations

import numpy as np
import pytest

from xmemory_gpu.ops import available_backends, implemented_backends
from xmemory_gpu.ops.objective import (
    Candidates,
    PartitionState,
    candidate_gains,
    partition_objective,
    score_candidates,
)
from xmemory_gpu.ops.objective import reference as ref
from xmemory_gpu.ops.objective.reference import objective_one
from xmemory_gpu.ops.rows import add_rows_in_order

from .gpu import (
    FakeCuda,
    cuda_module,
    has_cuda,
    has_triton,
    requires_cuda,
    requires_cuda_module,
    requires_triton,
)
from .objective_cases import numpy_closed_form, random_candidates, random_partition

try:
    import torch
except ImportError:  # the host backends need no torch
    torch = None
if has_triton():
    from xmemory_gpu.ops.objective import triton as ot

pytestmark = pytest.mark.filterwarnings(
    "ignore:Conversion of an array with ndim > 0:DeprecationWarning"
)  # interpreter

OBJ_BACKENDS = [
    b
    for b in implemented_backends("partition_objective")
    if b in ("cpu", "triton") and available_backends()[b].available
]
SCORE_BACKENDS = [
    b for b in implemented_backends("score_candidates") if available_backends()[b].available and b != "cuda"
]
HOST_BACKENDS = [b for b in ("reference", "cpu") if available_backends()[b].available]
DEV = "cuda" if has_cuda() else "cpu"
TOL = dict(rtol=1e-9, atol=1e-12)
_cuda = cuda_module()


def _ocuda():
    from xmemory_gpu.ops.objective import cuda as ocuda

    return ocuda


# ---- shared cases ----------------------------------------------------------------------------------


def _partition_case(rng, d=19, big=120):
    # empty segments, a single node, themes of 1, one theme per memory, many themes
    sizes = [0, 1, 5, 40, big, 33, 0, 12, 64, 7]
    themes = [1, 1, 5, 1, 30, 12, 1, 12, 64, 1]
    x, lab, off = random_partition(rng, sizes, themes, d)
    x[3] = x[4]  # duplicated vectors
    s = int(off[8])  # 64 singleton themes made of 4 repeated vectors: exact ties in s_k, MAD = 0
    x[s : s + 64] = x[s : s + 4][np.arange(64) % 4]
    lab[s : s + 64] = np.arange(64) * 7 + 1
    x[int(off[5])] = 0.0  # a zero row: normalised to zero, cos 0
    return x, lab, off


def _both_top2_state(noop=False):
    # theme 0's two nearest themes are 1 and 2; merging them removes both of its kept top-2
    e = np.eye(4)
    x = np.stack([e[0], e[0] + 0.9 * e[1], e[0] + 0.8 * e[2], e[3], e[3] + 0.1 * e[0], e[1] + e[2]])
    state = PartitionState.from_labels(x, np.arange(6), np.array([0, 6], np.int64))
    items = [
        (0, [1, 2], [np.array([1, 2])]),
        (0, [0, 4], [np.array([0, 4])]),
        (0, [1, 2], [np.array([2]), np.array([1])]),
    ]
    if noop:
        items.append((0, [], []))  # a no-op edit
    return state, Candidates.from_lists(state, items)


def _score_case(rng, per_memory=15):
    x, lab, off = random_partition(rng, [30, 2, 60, 9, 1, 25], [6, 2, 10, 9, 1, 1], 11)
    state = PartitionState.from_labels(x, lab, off)
    cands = random_candidates(rng, state, per_memory)
    assert cands.n > 20
    return state, cands


def _large_k_case(rng, n_themes=2100, d=8):
    # more theme slots than fit in shared memory: the kernel's state goes to global scratch
    x, lab, off = random_partition(rng, [2 * n_themes, 50], [n_themes, 5], d)
    lab[: 2 * n_themes] = np.repeat(np.arange(n_themes), 2)
    return x, lab, off


# ---- the host backends through the dispatcher; the hand-worked case on every backend ------------


def test_hand_worked():
    # two themes of two identical unit vectors each, orthogonal to each other:
    # sparsity = 16 / (2 * 8) = 1; cohesion = 1; s = (0, 0) -> m = 0, MAD = 0, g = 1 -> f = 2
    x = np.array([[1, 0], [1, 0], [0, 1], [0, 1]], np.float64)
    assert objective_one(x, np.array([0, 0, 5, 5])) == pytest.approx(2.0)
    # one theme: s = 0, g = 1, sparsity 1, cohesion = |(1,1)/2| / ... = cos 45 deg
    assert objective_one(x, np.zeros(4, int)) == pytest.approx(1 + np.sqrt(0.5))
    # singleton themes: sparsity 16 / (4 * 4) = 1, cohesion 1, s = (1, 1, 1, 1) -> g = 1
    assert objective_one(x, np.arange(4)) == pytest.approx(2.0)
    assert objective_one(np.zeros((0, 2)), np.zeros(0, int)) == 0.0


def test_benchmark_baseline_numpy_closed_form(rng):
    """The vectorised NumPy closed form bench_objective.py times against ours equals the reference."""
    x, lab, off = random_partition(rng, [0, 1, 7, 40, 0, 90], [1, 1, 3, 5, 1, 12], 24)
    np.testing.assert_allclose(
        numpy_closed_form(x, lab, off),
        partition_objective(x, lab, off, backend="reference"),
        rtol=1e-5,
        atol=1e-6,
    )


@pytest.mark.parametrize(
    "backend",
    [
        *HOST_BACKENDS,
        pytest.param("triton", marks=requires_triton),
        pytest.param("cuda", marks=[requires_cuda_module, requires_cuda]),
    ],
)
def test_partition_hand_worked_and_mad_zero(backend):
    # the host backends through the dispatcher, triton and cuda through their wrappers
    x = np.array([[1, 0], [1, 0], [0, 1], [0, 1]], np.float64)
    x4 = np.concatenate([x, x, x, np.zeros((1, 2))])
    lab = np.concatenate([[0, 0, 5, 5], np.zeros(4, int), np.arange(4), [3]])
    off = np.array([0, 4, 8, 12, 12, 13], np.int64)
    if backend == "triton":
        got = _tpart(x4, lab, off)
    elif backend == "cuda":
        got = _ocuda().partition_objective(x4, lab, off)
    else:
        got = partition_objective(x4, lab, off, backend=backend)
    np.testing.assert_allclose(
        got, [2.0, 1 + np.sqrt(0.5), 2.0, 0.0, 1.0], rtol=1e-12
    )  # zero row: cohesion 0


@pytest.mark.parametrize("backend", OBJ_BACKENDS)
def test_backend_matches_reference(rng, backend):
    sizes = [0, 1, 5, 40, 120, 33]
    x, lab, off = random_partition(rng, sizes, [1, 1, 5, 1, 30, 12], 17)
    x[3] = x[4]  # duplicated vectors
    want = partition_objective(x, lab, off, backend="reference")
    got = partition_objective(x, lab, off, backend=backend)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-12)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_partition_objective_isas_are_bit_identical(rng, monkeypatch, dtype):
    """The per-segment loop is compiled once per ISA (objective_segments.inc): every ISA this CPU runs
    gives the same bits, float32 and float64 input, d not a multiple of the 32-wide partial sums."""
    _C = pytest.importorskip("xmemory_gpu._C")
    x, lab, off = random_partition(rng, [0, 1, 5, 40, 120, 33, 300], [1, 1, 5, 1, 30, 12, 64], 391)
    x = x.astype(dtype)
    x[7] = 0  # a zero row
    got = {}
    for isa in ("scalar", "avx2", "avx512"):
        monkeypatch.setenv("XMEM_CPU_ISA", isa)
        if _C.cpu_isa() == isa:
            got[isa] = partition_objective(x, lab, off, backend="cpu")
    assert "scalar" in got
    for isa, f in got.items():
        np.testing.assert_array_equal(f, got["scalar"], err_msg=isa)
    np.testing.assert_allclose(
        got["scalar"], partition_objective(x, lab, off, backend="reference"), rtol=1e-5, atol=1e-12
    )


def test_row_sums_in_order_equal_add_at_bit_for_bit(rng):
    """The f(P) state's sums continue row by row as ``np.add.at`` adds them (the build's decisions rest on
    their bits): random themes, repeated rows, magnitudes 1e-8 to 1e8, empty input, float32 and float64
    rows, the C++ pass and the NumPy steps."""
    for _ in range(100):
        k, d, n = int(rng.integers(1, 30)), int(rng.integers(1, 50)), int(rng.integers(0, 300))
        x = rng.standard_normal((n + 5, d)) * rng.choice([1e-8, 1.0, 1e8], size=(n + 5, 1))
        sums = rng.standard_normal((k, d)) * rng.choice([0.0, 1.0, 1e6], size=(k, 1))
        theme, rows = rng.integers(0, k, n), rng.integers(0, n + 5, n)
        for backend, xs in (
            ("auto", x),
            ("reference", x),
            ("auto", x.astype(np.float32)),
            ("reference", x.astype(np.float32)),
        ):
            want = sums.copy()
            np.add.at(want, theme, xs[rows])
            got = sums.copy()
            add_rows_in_order(got, theme, xs, rows, backend=backend)  # C++ (when built) and the NumPy steps
            np.testing.assert_array_equal(got.view(np.int64), want.view(np.int64))


def test_score_candidates_isas_are_bit_identical(rng, monkeypatch):
    """Candidate scoring's loop is compiled once per ISA too (``score_candidates_loop``): the construction's
    split and merge choices must not depend on the CPU, so every ISA this CPU runs gives the same bits,
    with d not a multiple of the partial sums, and the float64 reference's values to rounding."""
    _C = pytest.importorskip("xmemory_gpu._C")
    x, lab, off = random_partition(rng, [30, 2, 60, 9, 400], [6, 2, 10, 9, 90], 397)
    state = PartitionState.from_labels(x, lab, off)
    cands = random_candidates(rng, state, 25)
    got = {}
    for isa in ("scalar", "avx2", "avx512"):
        monkeypatch.setenv("XMEM_CPU_ISA", isa)
        if _C.cpu_isa() == isa:
            got[isa] = score_candidates(state, cands, backend="cpu")
    assert "scalar" in got and cands.n > 50
    for isa, f in got.items():
        np.testing.assert_array_equal(f, got["scalar"], err_msg=isa)
    np.testing.assert_allclose(
        got["scalar"], score_candidates(state, cands, backend="reference"), rtol=1e-9, atol=1e-12
    )


@pytest.mark.parametrize("backend", SCORE_BACKENDS)
def test_score_candidates_equals_from_scratch(rng, backend):
    x, lab, off = random_partition(rng, [30, 2, 60, 9], [6, 2, 10, 9], 11)
    state = PartitionState.from_labels(x, lab, off)
    np.testing.assert_allclose(state.f, partition_objective(x, lab, off, backend="reference"), rtol=1e-9)
    cands = random_candidates(rng, state, 15)
    assert cands.n > 20
    want = score_candidates(state, cands, backend="reference")
    got = score_candidates(state, cands, backend=backend)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-12)
    np.testing.assert_allclose(
        candidate_gains(state, cands, backend=backend), want - state.f[cands.memory], atol=1e-9
    )


@pytest.mark.parametrize("backend", SCORE_BACKENDS)
def test_removing_both_top2_neighbours(backend):
    # theme A's two nearest themes are B and C; merging B and C removes both of A's kept top-2,
    # so A's s_k must be found again among all the others.
    e = np.eye(4)
    x = np.stack([e[0], e[0] + 0.9 * e[1], e[0] + 0.8 * e[2], e[3], e[3] + 0.1 * e[0], e[1] + e[2]])
    lab = np.array([0, 1, 2, 3, 4, 5])
    off = np.array([0, 6], np.int64)
    state = PartitionState.from_labels(x, lab, off)
    c = Candidates.from_lists(state, [(0, [1, 2], [np.array([1, 2])]), (0, [0, 4], [np.array([0, 4])])])
    np.testing.assert_allclose(
        score_candidates(state, c, backend=backend),
        score_candidates(state, c, backend="reference"),
        rtol=1e-9,
    )


def test_candidates_must_cover_removed_members():
    x = np.eye(3)
    state = PartitionState.from_labels(x, np.array([0, 0, 1]), np.array([0, 3], np.int64))
    with pytest.raises(ValueError, match="cover exactly"):
        Candidates.from_lists(state, [(0, [0], [np.array([0])])])
    with pytest.raises(ValueError, match="no theme labelled"):
        Candidates.from_lists(state, [(0, [7], [])])


# ---- triton: the kernels called directly -----------------------------------------------------------


def _t(a):
    return torch.from_numpy(np.ascontiguousarray(a)).to(DEV)


def _tpart(x, lab, off, **kw):
    got = ot.partition_objective(_t(x), _t(lab), off, **kw)
    assert got.dtype == torch.float64 and got.device.type == DEV
    return got.cpu().numpy()


@requires_triton
def test_triton_partition_ragged_random_with_edge_cases(rng):
    # empty segments, a single node, themes of one node, a single theme, many themes, a zero row
    x, lab, off = _partition_case(rng, 19, big=70)
    np.testing.assert_allclose(_tpart(x, lab, off), ref.partition_objective(x, lab, off), **TOL)


@requires_triton
def test_triton_partition_more_themes_than_a_tile(rng, monkeypatch):
    # more slots than BLOCK_T: multi-tile rows, columns and rank selection
    monkeypatch.setattr(ot, "_config", lambda: (16, 16, 16, 4))
    x, lab, off = random_partition(rng, [90, 3, 50], [45, 3, 17], 5)
    lab[:90] = np.repeat(np.arange(45), 2)
    np.testing.assert_allclose(_tpart(x, lab, off), ref.partition_objective(x, lab, off), **TOL)


@requires_triton
def test_triton_partition_empty_inputs():
    assert _tpart(np.zeros((0, 4)), np.zeros(0, np.int64), np.zeros(1, np.int64)).shape == (0,)
    assert _tpart(np.zeros((0, 4)), np.zeros(0, np.int64), np.zeros(3, np.int64)).tolist() == [0.0, 0.0]


@requires_triton
def test_triton_score_candidates_ragged_random(rng):
    state, cands = _score_case(rng, per_memory=10)
    got = ot.score_candidates(state, cands).cpu().numpy()
    np.testing.assert_allclose(got, ref.score_candidates(state, cands), **TOL)


@requires_triton
def test_triton_score_candidates_removing_both_top2_and_zero_candidates():
    state, cands = _both_top2_state(noop=True)
    got = ot.score_candidates(state, cands).cpu().numpy()
    np.testing.assert_allclose(got, ref.score_candidates(state, cands), **TOL)
    assert got[3] == pytest.approx(state.f[0], rel=1e-12)
    assert ot.score_candidates(state, Candidates.from_lists(state, [])).shape == (0,)


@requires_triton
def test_triton_score_candidates_single_theme_memory_and_multi_tile(rng, monkeypatch):
    monkeypatch.setattr(ot, "_config", lambda: (16, 16, 16, 4))
    x, lab, off = random_partition(rng, [70, 8], [40, 1], 6)
    state = PartitionState.from_labels(x, lab, off)
    t1 = int(state.theme_offsets[1])
    one = state.members_of(t1)
    items = [(1, [int(state.theme_label[t1])], [one[:3], one[3:]])]  # split the lone theme
    ts = int(state.theme_offsets[0])
    big = [int(state.theme_label[t]) for t in range(ts, ts + 20)]
    items.append((0, big, [np.concatenate([state.members_of(ts + j) for j in range(20)])]))  # a 20-way merge
    cands = Candidates.from_lists(state, items + [it for it in _splits(state, 0, 6)])
    got = ot.score_candidates(state, cands).cpu().numpy()
    np.testing.assert_allclose(got, ref.score_candidates(state, cands), **TOL)


def _splits(state, b, n):
    ts, te = int(state.theme_offsets[b]), int(state.theme_offsets[b + 1])
    out = []
    for t in range(ts, te):
        m = state.members_of(t)
        if m.size >= 2:
            out.append((b, [int(state.theme_label[t])], [m[:1], m[1:]]))
        if len(out) == n:
            break
    return out


@requires_triton
def test_public_dispatch_triton(rng):
    x, lab, off = random_partition(rng, [20, 0, 9], [4, 1, 3], 7)
    got = partition_objective(x, lab, off, backend="triton")
    assert isinstance(got, np.ndarray) and got.dtype == np.float64  # NumPy in, NumPy out
    np.testing.assert_allclose(got, ref.partition_objective(x, lab, off), **TOL)
    got_t = partition_objective(torch.from_numpy(x), torch.from_numpy(lab), off, backend="triton")
    assert isinstance(got_t, torch.Tensor) and got_t.dtype == torch.float64  # torch in, torch out
    state = PartitionState.from_labels(x, lab, off)
    cands = random_candidates(rng, state, 3)
    np.testing.assert_allclose(
        score_candidates(state, cands, backend="triton"), ref.score_candidates(state, cands), **TOL
    )


# ---- cuda: the compiled module without a GPU --------------------------------------------------------


@requires_cuda_module
def test_cuda_module_exposes_objective_kernels():
    for name in (
        "objective_row_norms",
        "objective_group_sums",
        "objective_score_candidates",
        "objective_score_segments",
    ):
        assert callable(getattr(_cuda, name)), name
    assert _cuda.OBJECTIVE_SLOT_BYTES == 17
    assert _cuda.OBJECTIVE_SHARED_MAX_SLOTS >= 1024
    assert _cuda.OBJECTIVE_SHARED_MAX_SLOTS * _cuda.OBJECTIVE_SLOT_BYTES <= 48 * 1024 - 1024


@requires_cuda_module
def test_cuda_wrapper_signatures_match_cpu():
    import inspect

    from xmemory_gpu.ops.objective import cpu

    oc = _ocuda()
    for name in ("partition_objective", "score_candidates"):
        assert inspect.signature(getattr(oc, name)) == inspect.signature(getattr(cpu, name)), name


@requires_cuda_module
def test_cuda_empty_inputs_need_no_device():
    oc = _ocuda()
    assert oc.partition_objective(np.zeros((0, 4)), np.zeros(0, np.int64), np.zeros(1, np.int64)).shape == (
        0,
    )
    f = oc.partition_objective(np.zeros((0, 4)), np.zeros(0, np.int64), np.zeros(3, np.int64))
    assert f.dtype == np.float64 and f.tolist() == [0.0, 0.0]
    state, cands = _both_top2_state()
    empty = Candidates.from_lists(state, [])
    assert oc.score_candidates(state, empty).shape == (0,)


@requires_cuda_module
def test_cuda_pow2_matches_kernel():
    p = _ocuda()._pow2(np.array([0, 1, 2, 3, 4, 5, 1023, 1024, 1025, 2**40 + 1]))
    assert p.tolist() == [1, 1, 2, 4, 4, 8, 1024, 1024, 2048, 2**41]


@requires_cuda_module
@pytest.mark.skipif(has_cuda(), reason="checks the no-GPU error path")
def test_cuda_no_gpu_raises_clean_errors():
    f8, i8 = "<f8", "<i8"
    with pytest.raises(RuntimeError, match="CUDA error"):  # checks pass, the launch fails
        _cuda.objective_row_norms(FakeCuda((1, 4), f8), FakeCuda((1,), f8), 0)
    with pytest.raises(RuntimeError, match="CUDA error"):
        _cuda.objective_group_sums(
            FakeCuda((3, 4), f8),
            None,
            FakeCuda((2,), i8),
            FakeCuda((3,), i8),
            FakeCuda((1, 4), f8),
            FakeCuda((1,), f8),
            0,
        )
    seg = [
        FakeCuda((2,), i8),
        FakeCuda((2,), i8),
        FakeCuda((2,), i8),
        FakeCuda((1, 4), f8),
        FakeCuda((1,), f8),
    ]
    with pytest.raises(RuntimeError, match="CUDA error"):
        _cuda.objective_score_segments(*seg, 1e-8, 4, None, None, FakeCuda((1,), f8), 0)
    with pytest.raises(ValueError, match="shared-memory limit"):  # argument checks come first
        _cuda.objective_score_segments(
            *seg, 1e-8, _cuda.OBJECTIVE_SHARED_MAX_SLOTS + 1, None, None, FakeCuda((1,), f8), 0
        )
    pytest.importorskip("torch")
    x, lab, off = random_partition(np.random.default_rng(0), [5], [2], 3)
    with pytest.raises(RuntimeError, match="CUDA device"):
        _ocuda().partition_objective(x, lab, off)
    state, cands = _both_top2_state()
    with pytest.raises(RuntimeError, match="CUDA device"):
        _ocuda().score_candidates(state, cands)


@requires_cuda_module
def test_cuda_bindings_check_tensors_before_launch():
    """Host tensors, wrong dtypes, non-contiguous and mis-shaped tensors are refused in C++, naming
    the argument, before any launch (no GPU needed)."""
    torch = pytest.importorskip("torch")
    f8, i8 = "<f8", "<i8"
    with pytest.raises(ValueError, match="a: expected a CUDA tensor, got host memory"):
        _cuda.objective_row_norms(torch.zeros(2, 4, dtype=torch.float64), FakeCuda((2,), f8), 0)
    with pytest.raises(ValueError, match="a: expected a CUDA tensor, got host memory"):
        _cuda.objective_row_norms(np.zeros((2, 4)), FakeCuda((2,), f8), 0)
    with pytest.raises(ValueError, match="a: expected a CUDA tensor, got host memory"):  # a DLPack capsule
        _cuda.objective_row_norms(torch.zeros(2, 4, dtype=torch.float64).__dlpack__(), FakeCuda((2,), f8), 0)
    with pytest.raises(ValueError, match="a: expected float64, got float32"):
        _cuda.objective_row_norms(FakeCuda((2, 4), "<f4"), FakeCuda((2,), f8), 0)
    with pytest.raises(ValueError, match="a: expected a contiguous"):
        _cuda.objective_row_norms(FakeCuda((2, 4), f8, strides=(8, 16)), FakeCuda((2,), f8), 0)
    with pytest.raises(ValueError, match=r"out: expected shape \[2\], got \[3\]"):
        _cuda.objective_row_norms(FakeCuda((2, 4), f8), FakeCuda((3,), f8), 0)
    with pytest.raises(ValueError, match="expected a CUDA tensor .*got int"):
        _cuda.objective_row_norms(0, FakeCuda((2,), f8), 0)  # the old raw-pointer ABI is gone
    with pytest.raises(ValueError, match="members: expected int64, got int32"):
        _cuda.objective_group_sums(
            FakeCuda((3, 4), f8),
            None,
            FakeCuda((2,), i8),
            FakeCuda((3,), "<i4"),
            FakeCuda((1, 4), f8),
            FakeCuda((1,), f8),
            0,
        )
    with pytest.raises(ValueError, match="state_scratch, state_offsets: pass both or neither"):
        _cuda.objective_score_segments(
            FakeCuda((2,), i8),
            FakeCuda((2,), i8),
            FakeCuda((2,), i8),
            FakeCuda((1, 4), f8),
            FakeCuda((1,), f8),
            1e-8,
            4,
            FakeCuda((64,), "|u1"),
            None,
            FakeCuda((1,), f8),
            0,
        )
    k = 3
    cand = dict(
        memory=FakeCuda((1,), i8),
        node_offsets=FakeCuda((2,), i8),
        theme_sum=FakeCuda((k, 4), f8),
        theme_norm=FakeCuda((k,), f8),
        theme_count=FakeCuda((k,), i8),
        theme_offsets=FakeCuda((2,), i8),
        top_idx=FakeCuda((k, 2), i8),
        top_cos=FakeCuda((k, 2), f8),
        rem_offsets=FakeCuda((2,), i8),
        rem_rows=FakeCuda((1,), i8),
        add_offsets=FakeCuda((2,), i8),
        group_offsets=FakeCuda((3,), i8),
        gsum=FakeCuda((2, 4), f8),
        gnorm=FakeCuda((2,), f8),
        eps=1e-8,
        max_slots=8,
        state_scratch=None,
        state_offsets=None,
        out=FakeCuda((1,), f8),
        stream=0,
    )
    if not has_cuda():  # well-formed fake views pass the checks; the launch then fails cleanly (on a GPU it
        with pytest.raises(RuntimeError, match="CUDA error"):  # would read the fake address: a sticky fault)
            _cuda.objective_score_candidates(**cand)
    with pytest.raises(ValueError, match=r"top_idx: expected shape \[3, 2\]"):
        _cuda.objective_score_candidates(**{**cand, "top_idx": FakeCuda((k, 3), i8)})
    with pytest.raises(ValueError, match="top_cos: expected a CUDA tensor, got host memory"):
        _cuda.objective_score_candidates(**{**cand, "top_cos": torch.zeros(k, 2, dtype=torch.float64)})
    with pytest.raises(ValueError, match="theme_count: expected int64, got float64"):
        _cuda.objective_score_candidates(**{**cand, "theme_count": FakeCuda((k,), f8)})


# ---- host emulation of the kernels: checks the wrapper's plumbing without a GPU -------------------


def _n(t, dtype) -> np.ndarray:
    """The NumPy view of a CPU tensor handed to the emulated binding, checked as the C++ binding would."""
    assert t.is_contiguous(), "the binding refuses non-contiguous tensors"
    a = t.numpy()
    assert a.dtype == np.dtype(dtype), (a.dtype, dtype)
    return a


def _finish(norm, cnt, s, n, eps):
    k = len(cnt)
    m = float(np.median(s))
    sigma = float(np.median(np.abs(s - m))) + eps
    return n * n / (k * float(np.sum(cnt**2))) + float(
        np.mean(norm / cnt * np.exp(-((s - m) ** 2) / (2 * sigma**2)))
    )


def _cos(a, na, b, nb):
    return float(a @ b / (na * nb)) if na > 0 and nb > 0 else 0.0


class _HostExt:
    """The kernels of csrc/cuda/objective.cu in NumPy, on the CPU tensors the wrapper passes."""

    OBJECTIVE_SLOT_BYTES = 17

    def __init__(self, shared_max: int):
        self.OBJECTIVE_SHARED_MAX_SLOTS = shared_max
        self.launches = []  # (items, max_slots, items using global state)

    def objective_row_norms(self, a, out, stream):
        assert stream == 0
        a_ = _n(a, np.float64)
        _n(out, np.float64)[:] = np.sqrt((a_ * a_).sum(axis=1))

    def objective_group_sums(self, x, row_norm, group_offsets, members, gsum, gnorm, stream):
        go, mb = _n(group_offsets, np.int64), _n(members, np.int64)
        xs = _n(x, np.float64)
        rn = _n(row_norm, np.float64) if row_norm is not None else None
        gs, gn = _n(gsum, np.float64), _n(gnorm, np.float64)
        assert go.shape == (gs.shape[0] + 1,) and gs.shape[1] == xs.shape[1]
        for g in range(gs.shape[0]):
            rows = mb[go[g] : go[g + 1]]
            v = xs[rows]
            if rn is not None:
                keep = rn[rows] > 0
                v = v[keep] / rn[rows][keep][:, None]
            gs[g] = v.sum(axis=0)
            gn[g] = np.linalg.norm(gs[g])

    def objective_score_segments(
        self,
        node_offsets,
        add_offsets,
        group_offsets,
        gsum,
        gnorm,
        eps,
        max_slots,
        state_scratch,
        state_offsets,
        out,
        stream,
    ):
        self._score(
            None,
            node_offsets,
            None,
            None,
            None,
            None,
            None,
            None,
            None,
            None,
            add_offsets,
            group_offsets,
            gsum,
            gnorm,
            eps,
            max_slots,
            state_scratch,
            state_offsets,
            out,
        )

    def objective_score_candidates(
        self,
        memory,
        node_offsets,
        theme_sum,
        theme_norm,
        theme_count,
        theme_offsets,
        top_idx,
        top_cos,
        rem_offsets,
        rem_rows,
        add_offsets,
        group_offsets,
        gsum,
        gnorm,
        eps,
        max_slots,
        state_scratch,
        state_offsets,
        out,
        stream,
    ):
        self._score(
            memory,
            node_offsets,
            theme_sum,
            theme_norm,
            theme_count,
            theme_offsets,
            top_idx,
            top_cos,
            rem_offsets,
            rem_rows,
            add_offsets,
            group_offsets,
            gsum,
            gnorm,
            eps,
            max_slots,
            state_scratch,
            state_offsets,
            out,
        )

    def _score(
        self,
        memory,
        node_offsets,
        theme_sum,
        theme_norm,
        theme_count,
        theme_offsets,
        top_idx,
        top_cos,
        rem_offsets,
        rem_rows,
        add_offsets,
        group_offsets,
        gsum,
        gnorm,
        eps,
        max_slots,
        state,
        state_offsets,
        out,
    ):
        f = _n(out, np.float64)
        num_items = f.shape[0]
        ao, go = _n(add_offsets, np.int64), _n(group_offsets, np.int64)
        gs, gn = _n(gsum, np.float64), _n(gnorm, np.float64)
        assert ao.shape == (num_items + 1,)
        cand = memory is not None
        mem = _n(memory, np.int64) if cand else np.arange(num_items)
        no = _n(node_offsets, np.int64)
        if cand:
            to = _n(theme_offsets, np.int64)
            ts, tn = _n(theme_sum, np.float64), _n(theme_norm, np.float64)
            cnt, ti, tc = _n(theme_count, np.int64), _n(top_idx, np.int64), _n(top_cos, np.float64)
            ro, rr = _n(rem_offsets, np.int64), _n(rem_rows, np.int64)
        regions = []
        for c in range(num_items):
            b = int(mem[c])
            t0, kb = (int(to[b]), int(to[b + 1] - to[b])) if cand else (0, 0)
            removed = set(rr[ro[c] : ro[c + 1]].tolist()) if cand else set()
            g0, ng = int(ao[c]), int(ao[c + 1] - ao[c])
            p = int(_ocuda()._pow2(np.array([kb + ng]))[0])
            assert p <= max_slots or kb + ng == 0
            if p > self.OBJECTIVE_SHARED_MAX_SLOTS:
                assert state is not None and state_offsets is not None
                start = int(_n(state_offsets, np.int64)[c])
                assert start % 8 == 0 and start + p * self.OBJECTIVE_SLOT_BYTES <= state.numel()
                regions.append((start, start + p * self.OBJECTIVE_SLOT_BYTES))
            kept = [t0 + t for t in range(kb) if t0 + t not in removed]
            norm, count, s = [], [], []
            gbest = np.full(ng, -np.inf)
            for u in kept:
                n1, n2 = ti[u]
                best = -np.inf
                if n1 >= 0 and n1 not in removed:
                    best = tc[u, 0]
                elif n2 >= 0 and n2 not in removed:
                    best = tc[u, 1]
                elif n1 >= 0:
                    best = max([_cos(ts[u], tn[u], ts[q], tn[q]) for q in kept if q != u], default=-np.inf)
                for g in range(ng):
                    cg = _cos(ts[u], tn[u], gs[g0 + g], gn[g0 + g])
                    best, gbest[g] = max(best, cg), max(gbest[g], cg)
                norm.append(tn[u]), count.append(cnt[u]), s.append(best)
            for g in range(ng):
                for h in range(ng):
                    if h != g:
                        gbest[g] = max(gbest[g], _cos(gs[g0 + g], gn[g0 + g], gs[g0 + h], gn[g0 + h]))
                norm.append(gn[g0 + g]), count.append(go[g0 + g + 1] - go[g0 + g]), s.append(gbest[g])
            n = float(no[b + 1] - no[b])
            s = np.where(np.isneginf(s), 0.0, np.array(s, dtype=np.float64))
            f[c] = (
                0.0
                if not s.size or n == 0
                else _finish(np.array(norm), np.array(count, np.float64), s, n, eps)
            )
        regions.sort()
        assert all(a[1] <= b[0] for a, b in zip(regions, regions[1:])), "state regions overlap"
        self.launches.append((num_items, max_slots, len(regions)))


@pytest.fixture
def host_emulation(monkeypatch):
    torch = pytest.importorskip("torch")
    oc = _ocuda()
    ext = _HostExt(shared_max=int(_cuda.OBJECTIVE_SHARED_MAX_SLOTS))
    monkeypatch.setattr(oc, "_ext", lambda: ext)
    monkeypatch.setattr(oc, "_device", lambda _torch: torch.device("cpu"))
    return oc, ext


@requires_cuda_module
def test_cuda_emulated_partition_objective_plumbing(rng, host_emulation, monkeypatch):
    oc, ext = host_emulation
    x, lab, off = _partition_case(rng)
    want = ref.partition_objective(x, lab, off)
    np.testing.assert_allclose(oc.partition_objective(x, lab, off), want, rtol=1e-9, atol=1e-12)
    monkeypatch.setattr(ext, "OBJECTIVE_SHARED_MAX_SLOTS", 4)  # most segments through global state
    np.testing.assert_allclose(oc.partition_objective(x, lab, off), want, rtol=1e-9, atol=1e-12)
    assert ext.launches[-1][2] > 0
    import torch

    got = oc.partition_objective(torch.from_numpy(x), torch.from_numpy(lab), off)  # tensors in, tensor out
    assert isinstance(got, torch.Tensor) and got.dtype == torch.float64
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-9, atol=1e-12)


@requires_cuda_module
def test_cuda_emulated_score_candidates_plumbing(rng, host_emulation, monkeypatch):
    oc, ext = host_emulation
    state, cands = _score_case(rng)
    want = ref.score_candidates(state, cands)
    np.testing.assert_allclose(oc.score_candidates(state, cands), want, rtol=1e-9, atol=1e-12)
    monkeypatch.setattr(ext, "OBJECTIVE_SHARED_MAX_SLOTS", 8)
    monkeypatch.setattr(oc, "_CHUNK_BYTES", 2000)  # many launches, gsum rebased per chunk
    ext.launches.clear()
    np.testing.assert_allclose(oc.score_candidates(state, cands), want, rtol=1e-9, atol=1e-12)
    assert len(ext.launches) > 3 and sum(n for n, _, _ in ext.launches) == cands.n
    assert sum(g for _, _, g in ext.launches) > 0
    state, cands = _both_top2_state()
    np.testing.assert_allclose(
        oc.score_candidates(state, cands), ref.score_candidates(state, cands), rtol=1e-9
    )


# ---- cuda on a GPU: against the float64 reference ----------------------------------------------


@requires_cuda_module
@requires_cuda
@pytest.mark.parametrize("d", [19, 384])
def test_cuda_partition_objective_vs_reference(rng, d):
    x, lab, off = _partition_case(rng, d)
    want = ref.partition_objective(x, lab, off)
    got = _ocuda().partition_objective(x, lab, off)
    assert got.dtype == np.float64 and got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-12)
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12)  # double throughout: far tighter in practice


@requires_cuda_module
@requires_cuda
def test_cuda_partition_objective_many_themes_global_state(rng):
    x, lab, off = _large_k_case(rng)
    got = _ocuda().partition_objective(x, lab, off)
    want = PartitionState.from_labels(
        x, lab, off
    ).f  # vectorised closed form (the reference loops are slow here)
    np.testing.assert_allclose(got, want, rtol=1e-4)


@requires_cuda_module
@requires_cuda
def test_cuda_score_candidates_equals_from_scratch(rng):
    state, cands = _score_case(rng)
    want = ref.score_candidates(state, cands)
    got = _ocuda().score_candidates(state, cands)
    assert got.dtype == np.float64 and got.shape == (cands.n,)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-12)
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12)


@requires_cuda_module
@requires_cuda
def test_cuda_score_candidates_removing_both_top2():
    state, cands = _both_top2_state()
    np.testing.assert_allclose(
        _ocuda().score_candidates(state, cands), ref.score_candidates(state, cands), rtol=1e-9
    )


@requires_cuda_module
@requires_cuda
def test_cuda_score_candidates_chunked_and_global_state(rng, monkeypatch):
    oc = _ocuda()
    state, cands = _score_case(rng)
    monkeypatch.setattr(oc, "_CHUNK_BYTES", 3000)
    np.testing.assert_allclose(
        oc.score_candidates(state, cands), ref.score_candidates(state, cands), rtol=1e-9
    )
    x, lab, off = _large_k_case(rng, n_themes=2060, d=6)
    big = PartitionState.from_labels(x, lab, off)
    ts = int(big.theme_offsets[0])
    items = [
        (0, [0], [big.members_of(ts)[:1], big.members_of(ts)[1:]]),  # split: 2061 slots
        (0, [3, 4], [np.concatenate([big.members_of(ts + 3), big.members_of(ts + 4)])]),  # merge
        (
            1,
            [int(big.theme_label[big.theme_offsets[1]])],
            [big.members_of(int(big.theme_offsets[1]))],
        ),  # no-op
    ]
    cands = Candidates.from_lists(big, items)
    want = np.array([_closed(x, lab, off, items[0]), _closed(x, lab, off, items[1]), big.f[1]])
    np.testing.assert_allclose(oc.score_candidates(big, cands), want, rtol=1e-4)


def _closed(x, lab, off, item):
    """f of memory 0 after the edit, by the vectorised closed form"""
    lab = lab[: off[1]].copy()
    fresh = int(lab.max()) + 1
    for i, g in enumerate(item[2]):
        lab[g] = fresh + i
    return float(PartitionState.from_labels(x[: off[1]], lab, off[:2]).f[0])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_cpu_kernel_pass_is_the_finiteness_check(rng, dtype):
    """The C++ path checks finiteness in its own pass over x (no separate pass): NaN / inf rows are
    named as the dispatcher names them; finite float64 rows whose squares overflow pass, as before."""
    x, lab, off = random_partition(rng, [40, 0, 25], [3, 1, 4], 9)
    x = x.astype(dtype)
    x[5, 2], x[50, 0] = np.nan, -np.inf
    with pytest.raises(ValueError, match=r"x: NaN or inf in rows \[5, 50\]"):
        partition_objective(x, lab, off, backend="cpu")
    big = np.full((3, 2), 1e200)
    np.testing.assert_array_equal(
        partition_objective(big, np.zeros(3, int), [0, 3], backend="cpu"),
        partition_objective(big, np.zeros(3, int), [0, 3], backend="reference"),
    )


def test_rows_of_the_sums_themselves_are_added_as_add_at():
    """x sharing memory with the sums: add.at reads a copy of x[rows]; so does add_rows_in_order."""
    for backend in ("auto", "reference"):
        s = np.arange(6, dtype=np.float64).reshape(2, 3) + 1
        want = s.copy()
        np.add.at(want, np.array([1, 0]), want.copy()[np.array([0, 1])])
        add_rows_in_order(s, np.array([1, 0]), s, np.array([0, 1]), backend=backend)
        np.testing.assert_array_equal(s, want)


def test_add_rows_refuses_what_it_cannot_index():
    """The C++ pass checks every group and row before it adds anything (a bad index is one line, sums unchanged)."""
    pytest.importorskip("xmemory_gpu._C")
    from xmemory_gpu import _C

    sums = np.zeros((2, 3))
    x = np.ones((4, 3))
    for group, rows, what in (
        ([0, 2], [0, 1], "group outside"),
        ([0, -1], [0, 1], "group outside"),
        ([0, 1], [0, 4], "row outside"),
        ([0], [0, 1], "group and rows"),
    ):
        with pytest.raises(ValueError, match=what):
            _C.add_rows(sums, np.array(group, np.int64), x, np.array(rows, np.int64))
        assert not sums.any()
    with pytest.raises(ValueError, match="sums: expected"):
        _C.add_rows(np.zeros((2, 3), np.float32), np.zeros(1, np.int64), x, np.zeros(1, np.int64))
    with pytest.raises(ValueError, match="x: expected"):
        _C.add_rows(sums, np.zeros(1, np.int64), np.ones((4, 2)), np.zeros(1, np.int64))


@pytest.mark.skipif(not available_backends()["cpu"].available, reason="the C++ module is not built")
@pytest.mark.parametrize("seed", range(20))
def test_top2_blocks_in_cpp_are_the_numpy_steps(seed):
    """The f(P) state's two nearest centroids per theme, every block in one C++ call: the NumPy steps'
    indices and cosines to the bit, on ragged blocks (one theme, two, up to 70) with equal cosines, zero
    centroids, infinities and NaN; the cosines are dot4's fixed order, not a BLAS product's."""
    from xmemory_gpu.ops.objective.state import top2_blocks
    from xmemory_gpu.ops.rows import dot4

    rng = np.random.default_rng(seed)
    sizes = rng.integers(0, 12 if seed % 2 else 70, int(rng.integers(1, 6)))
    off = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    d = int(rng.integers(1, 5)) if seed % 3 else 384
    unit = (
        rng.choice([-1.0, 0.0, 0.5, 1.0], (int(off[-1]), d))
        if d < 8
        else rng.standard_normal((int(off[-1]), d))
    )
    if seed % 4 == 1 and len(unit):
        unit[rng.integers(0, len(unit))] = np.inf
    if seed % 4 == 2 and len(unit):
        unit[rng.integers(0, len(unit)), 0] = np.nan
    with np.errstate(invalid="ignore"):
        got, want = top2_blocks(unit, off), top2_blocks(unit, off, backend="reference")
    assert got[0].dtype == want[0].dtype == np.int64
    assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1], equal_nan=True), seed
    for b in range(len(sizes)):  # each pick's value is dot4 of its two rows
        for i in range(int(off[b]), int(off[b + 1])):
            for p in range(2):
                j = int(got[0][i, p])
                if j >= 0:
                    assert got[1][i, p] == dot4(unit[i], unit[int(off[b]) + j])


@pytest.mark.skipif(not available_backends()["cpu"].available, reason="the C++ module is not built")
@pytest.mark.parametrize("seed", range(24))
def test_theme_sums_in_cpp_are_the_numpy_steps(seed):
    """The f(P) state's block bookkeeping in one C++ pass (``csrc/cpu/partition.cpp``): the NumPy
    steps' themes, labels, counts and members, and their sums to the bit, on ragged blocks (empty,
    one node, many), sparse and large labels, with kept themes (kept, dropped, relabelled away) and
    tails anywhere in a block, as ``apply`` and ``extend`` hand them."""
    from xmemory_gpu.ops.objective.state import _Kept, theme_sums

    rng = np.random.default_rng(seed)
    sizes = rng.integers(0, 3 if seed % 5 == 0 else 40, int(rng.integers(1, 7)))
    row_off = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    m, d = int(row_off[-1]), int(rng.integers(1, 40)) if seed % 3 else 384
    x = rng.standard_normal((m + 7, d))
    rows = rng.permutation(m + 7)[:m].astype(np.int64)
    pool = np.array([0, 1, 2, 5, 9, 2**31 - 1]) if seed % 2 else np.arange(12) * 3
    labels = rng.choice(pool, m).astype(np.int64)
    kept = None
    if seed % 4:  # kept themes as apply / extend hand them (unique, ascending), or repeated and unordered
        olds = [rng.choice(pool, int(rng.integers(0, 5))) for _ in sizes]
        if seed % 3:
            olds = [np.unique(o) for o in olds]
        keep = rng.random(sum(len(o) for o in olds)) < (0.0 if seed % 7 == 3 else 0.7)
        kept = _Kept(
            np.concatenate([[0], np.cumsum([len(o) for o in olds])]).astype(np.int64),
            np.concatenate(olds).astype(np.int64),
            rng.standard_normal((len(keep), d)),
            keep,
            np.array([int(rng.integers(0, s + 3)) for s in sizes], np.int64),
        )  # a tail may pass the block
    if seed % 5 == 2:  # other integer types and a strided view: the wrapper's conversions
        rows, labels, x = rows.astype(np.int32), labels.astype(np.int32), np.asfortranarray(x)
    got = theme_sums(x, rows, labels, row_off, kept)
    want = theme_sums(x, rows, labels, row_off, kept, backend="reference")
    for name, a, b in zip(("theme_off", "theme_label", "sums", "counts", "members"), got, want):
        assert a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes(), (seed, name)


@pytest.mark.skipif(not available_backends()["cpu"].available, reason="the C++ module is not built")
def test_theme_sums_in_cpp_refuse_what_does_not_fit():
    from xmemory_gpu import _C

    x, e = np.zeros((3, 2)), np.zeros(0, np.int64)
    kept = (np.zeros((0, 2)), np.zeros(0, bool), np.zeros(1, np.int64))  # kept_sum, keep, tail
    with pytest.raises(ValueError, match="a row outside"):
        _C.theme_blocks(x, np.array([3]), np.array([0]), np.array([0, 1]), np.array([0, 0]), e, *kept)
    with pytest.raises(ValueError, match="non-negative"):
        _C.theme_blocks(x, np.array([0]), np.array([-1]), np.array([0, 1]), np.array([0, 0]), e, *kept)
    with pytest.raises(ValueError, match="offsets"):
        _C.theme_blocks(x, np.array([0]), np.array([0]), np.array([0, 2]), np.array([0, 0]), e, *kept)


@pytest.mark.parametrize("seed", range(8))
def test_f_blocks_are_objective_from_parts_per_block(seed):
    """f(P) of many blocks at once (the C++ pass and its NumPy steps) is ``objective_from_parts`` of
    each block to the bit: blocks of one theme, none, no nodes, tied and zero cosines, odd and even sizes."""
    from xmemory_gpu.ops.objective.state import f_blocks, objective_from_parts

    rng = np.random.default_rng(seed)
    k = rng.integers(0, 9, int(rng.integers(1, 12)))
    off = np.concatenate([[0], np.cumsum(k)]).astype(np.int64)
    total = int(off[-1])
    counts = rng.integers(1, 30, total).astype(np.int64)
    norms = counts * rng.uniform(0.2, 1.0, total)
    s = (
        rng.choice(np.array([0.0, -0.0, 0.25, 0.5, 0.5, 0.9, -0.3]), total)
        if seed % 2
        else rng.uniform(-1, 1, total)
    )
    n = np.array([int(counts[a:b].sum()) for a, b in zip(off[:-1], off[1:])], np.int64)
    n[rng.random(len(n)) < 0.2] = 0  # a block whose nodes are not counted: f is 0
    eps = 1e-8
    got = [f_blocks(norms, counts, s, off, n, eps, backend=backend) for backend in ("auto", "reference")]
    for b in range(len(k)):
        a, e = int(off[b]), int(off[b + 1])
        want = (
            objective_from_parts(
                norms[a:e], counts[a:e], s[a:e] if e - a > 1 else np.zeros(1), int(n[b]), eps
            )
            if e > a and n[b]
            else 0.0
        )
        assert got[0][b] == want and got[1][b] == want, (b, got[0][b], got[1][b], want)


def test_f_blocks_count_nodes_below_2_31():
    """n * n is exact in int64 for n below 2**31 (the largest gives the same f on both backends and as
    ``objective_from_parts``' Python integers); n at 2**31 is refused with ``ValueError`` naming n."""
    from xmemory_gpu.ops.objective.state import f_blocks, objective_from_parts

    norms, counts, s, off = np.array([3.0, 2.0]), np.array([4, 3]), np.array([0.5, 0.5]), np.array([0, 2])
    big = np.array([2**31 - 1])
    want = objective_from_parts(norms, counts, s, 2**31 - 1, 1e-8)
    for backend in HOST_BACKENDS:
        assert f_blocks(norms, counts, s, off, big, 1e-8, backend=backend)[0] == want
        with pytest.raises(ValueError, match="n: node counts must be below 2"):
            f_blocks(norms, counts, s, off, big + 1, 1e-8, backend=backend)


def test_exp_fixed_is_the_kernels_and_near_the_c_librarys():
    """f(P)'s exp (``exp_fixed``) in NumPy and in C++ give the same bits on arguments over the whole
    range, tiny ones, the overflow and underflow edges, subnormal results, zeros, infinities and NaN;
    within 1 ulp of the C library's exp where that is a normal number."""
    import math

    from xmemory_gpu.ops.objective.state import exp_fixed

    rng = np.random.default_rng(0)
    v = np.concatenate(
        [
            rng.uniform(-750, 712, 200_000),
            -np.abs(rng.standard_normal(100_000)) * 10.0 ** rng.integers(-20, 4, 100_000),
            [0.0, -0.0, np.inf, -np.inf, np.nan, 5e-324, -5e-324, 1e-300, 709.782712893384],
            [709.7827128933841, -745.1332191019412, -745.1332191019413, -708.3964185322641, -744.44],
        ]
    )
    got = exp_fixed(v)
    assert got.shape == v.shape and exp_fixed(v.reshape(2, -1)).shape == (2, len(v) // 2)
    if available_backends()["cpu"].available:
        from xmemory_gpu import _C

        assert _C.exp_fixed(v).tobytes() == got.tobytes()
    fin = np.isfinite(v) & (v < 709.78)
    lib = np.array([math.exp(t) for t in v[fin].tolist()])
    normal = lib > 2.3e-308
    ulp = np.abs(got[fin][normal].view(np.int64) - lib[normal].view(np.int64))
    assert ulp.max() <= 1
    assert np.isnan(got[np.isnan(v)]).all() and got[v == np.inf][0] == np.inf and got[v == -np.inf][0] == 0.0
    assert got[v == 0.0].tolist() == [1.0, 1.0]
