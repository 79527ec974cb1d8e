"""Eq. 4 greedy coverage selection (coverage_select), every backend (reference, cpu, triton, cuda).

Against a verbatim port of the authors' ``_pick_representatives`` (the default "count" stop rule)
and against the float64 reference (picks exactly, values to float32), on fresh random ragged batches
and the edge cases, backends parametrised (cuda joins them on a GPU); input validation at the
dispatcher. The cuda backend's own cases: without a GPU the compiled module's kernel and constants,
the binding's C++ tensor checks and the wrapper's no-pick path; with a GPU the kernel against the
reference (bit-equal values) and its global-state path. Without a GPU the triton kernel runs in the
Triton interpreter (tests/conftest.py sets TRITON_INTERPRET): shapes are small.
"""

from __future__ import annotations

import numpy as np
import pytest

from xmemory_gpu.ops import available_backends, implemented_backends
from xmemory_gpu.ops import backends as bk
from xmemory_gpu.ops.coverage import coverage_select
from xmemory_gpu.ops.coverage import reference as cov_ref

from .authors_coverage import authors_select
from .coverage_cases import SETTINGS, random_problem, varied_problem
from .gpu import FakeCuda, cuda_module, has_cuda, requires_cuda, requires_cuda_module
from .knn_cases import segment_sizes

HOST = [b for b in ("reference", "cpu") if available_backends()[b].available]
FAST = [
    b
    for b in ("cpu", "triton")
    if b in implemented_backends("coverage_select") and available_backends()[b].available
]
if has_cuda() and available_backends()["cuda"].available:
    FAST.append("cuda")
ALL = ["reference", *FAST]


def picks(sel_off, sel) -> list[list[int]]:
    return [sel[sel_off[q] : sel_off[q + 1]].tolist() for q in range(len(sel_off) - 1)]


def same_as_reference(args, backend, **kw):
    want = coverage_select(*args, backend="reference", **kw)
    got = coverage_select(*args, backend=backend, **kw)
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_array_equal(got[1], want[1])
    np.testing.assert_allclose(got[2], want[2], rtol=1e-6)
    return want


def against_authors(rng, backend: str, n_queries: int, k: int, settings, max_n: int = 40) -> int:
    """Random batches, one call per (alpha, target): every query's picks equal the authors'. Returns
    the number of queries compared."""
    n = 0
    for alpha, target in settings:
        off, idx, w, rel, bud = varied_problem(rng, n_queries, k, max_n=max_n)
        sel_off, sel, _ = coverage_select(
            off, idx, w, rel, alpha=alpha, budget=bud, target=target, backend=backend
        )
        want = authors_select(off, idx, w, rel, alpha, bud, target)
        got = picks(sel_off, sel)
        bad = [q for q in range(n_queries) if got[q] != want[q]]
        assert not bad, (backend, alpha, target, bad[:5], [(got[q], want[q]) for q in bad[:3]])
        n += n_queries
    return n


# ---- the authors' rule ----------------------------------------------------------------------------


@pytest.mark.parametrize("backend", [b for b in ALL if b in HOST or b == "cuda"])
def test_authors_port_agrees_on_2400_random_cases(rng, backend):
    assert against_authors(rng, backend, 400, 6, SETTINGS) == 2400


@pytest.mark.skipif("triton" not in FAST, reason="triton not usable here")
def test_triton_agrees_with_authors(rng):
    # the interpreter is slow (~0.3 s per query): 2 x 40 queries here, the bulk on the host backends
    against_authors(rng, "triton", 40, 4, [(0.7, 1.0), (0.5, 0.6)], max_n=24)


def test_hand_worked_case():
    # 3 candidates; 0 covers {1 (w .5), 0 (1)}, 1 covers {1}, 2 covers {0 (w .25), 2}; Z = 1.5 + 1 + 1.25 = 3.75
    off = np.array([0, 3], np.int64)
    idx = np.array([[1, -1], [-1, -1], [0, -1]], np.int32)
    w = np.array([[0.5, 0], [0, 0], [0.25, 0]], np.float32)
    rel = np.array([0.9, 0.5, 0.1], np.float32)  # rel~ = 1, .5, 0
    for backend in ALL:
        sel_off, sel, val = coverage_select(off, idx, w, rel, alpha=0.7, budget=3, backend=backend)
        # step 1: v0 = .7*1.5/3.75 + .3*1 = .58, v1 = .7/3.75 + .15, v2 = .7*1.25/3.75 -> 0
        # step 2: 0 and 1 covered; v1 = .15, v2 = .7*1/3.75 = .1867 -> 2; now all 3 covered: stop (count rule)
        assert sel.tolist() == [0, 2] and sel_off.tolist() == [0, 2], backend
        np.testing.assert_allclose(val, [0.58, 0.7 / 3.75], rtol=1e-6)
        # our earlier rule: credited 1.5 + 1 of Z 3.75 < 1, so it goes on by relevance to the budget
        _, sel, val = coverage_select(off, idx, w, rel, alpha=0.7, budget=3, stop="weight", backend=backend)
        assert sel.tolist() == [0, 2, 1]
        np.testing.assert_allclose(val, [0.58, 0.7 / 3.75, 0.15], rtol=1e-6)


def test_repeated_neighbour_keeps_largest_weight_and_self_listing():
    off = np.array([0, 3], np.int64)
    # 0 lists 1 twice (.25 then .75: .75 counts) and itself at .5 (replaces its implicit 1.0)
    idx = np.array([[1, 1, 0], [-1, -1, -1], [-1, -1, -1]], np.int32)
    w = np.array([[0.25, 0.75, 0.5], [0, 0, 0], [0, 0, 0]], np.float32)
    rel = np.array([0.2, 0.2, 0.2])  # constant: rel~ = 0.5
    for backend in ALL:
        _, sel, val = coverage_select(off, idx, w, rel, alpha=1.0, budget=3, backend=backend)
        # Z = (.75 + .5) + 1 + 1 = 3.25; v0 = 1.25 / 3.25 > v1 = v2 = 1 / 3.25 -> 0, then 2
        assert sel.tolist() == [0, 2], backend
        np.testing.assert_allclose(val, [1.25 / 3.25, 1 / 3.25], rtol=1e-6)
    assert authors_select(off, idx, w, rel, 1.0, [3], 1.0) == [[0, 2]]


def test_count_target_below_one():
    off = np.array([0, 4], np.int64)
    idx = np.array([[1, -1], [-1, -1], [-1, -1], [-1, -1]], np.int32)
    w = np.array([[0.5, 0], [0, 0], [0, 0], [0, 0]], np.float32)
    rel = np.array([0.9, 0.8, 0.7, 0.1])
    for backend in ALL:
        # the first pick covers 2 of 4 = 0.5 >= 0.5: stop
        _, sel, _ = coverage_select(off, idx, w, rel, budget=4, target=0.5, backend=backend)
        assert sel.tolist() == [0]
        _, sel, _ = coverage_select(off, idx, w, rel, budget=4, target=0.6, backend=backend)
        assert sel.tolist() == [0, 2]
        _, sel, _ = coverage_select(off, idx, w, rel, budget=4, target=0.0, backend=backend)
        assert sel.tolist() == [0]  # target 0: one pick, as the authors' loop


# ---- every backend against the reference, both stop rules -----------------------------------------


@pytest.mark.parametrize("backend", FAST)
@pytest.mark.parametrize("stop", ["count", "weight"])
def test_random_ragged(rng, backend, stop):
    n_q = 12 if backend == "triton" else 40
    sizes = [0, 1, 2] + [int(s) for s in rng.integers(3, 30 if backend == "triton" else 120, size=n_q)]
    args = random_problem(rng, sizes, 4 if backend == "triton" else 10)
    budgets = rng.integers(0, 25, size=len(sizes))
    same_as_reference(args, backend, budget=budgets, stop=stop)
    same_as_reference(args, backend, budget=5, alpha=0.3, target=0.5, stop=stop)


@pytest.mark.parametrize("backend", FAST)
def test_edge_cases(rng, backend):
    sizes = [1, 7, 40, 0]
    off, idx, w, rel = random_problem(rng, sizes, 4)
    for stop in ("count", "weight"):
        same_as_reference((off, np.full_like(idx, -1), np.zeros_like(w), rel), backend, budget=10, stop=stop)
        same_as_reference((off, idx, w, np.full_like(rel, 0.3)), backend, budget=10, stop=stop)  # ties
        same_as_reference((off, idx, w, rel), backend, budget=1000, stop=stop)  # budget > candidates
        same_as_reference((off, idx, w, rel), backend, budget=[0, 3, 0, 2], stop=stop)  # zero budgets
        same_as_reference((off, idx[:, :0], w[:, :0], rel), backend, budget=5, stop=stop)  # k = 0
    dup = idx.copy()
    dup[:, 1] = dup[:, 0]  # repeated neighbours
    dup[off[2], 2] = 0  # self listed
    same_as_reference((off, dup, np.where(dup >= 0, w + 0.1, 0).astype(np.float32), rel), backend, budget=8)


@pytest.mark.parametrize("backend", ALL)
def test_zero_candidate_batches(backend):
    for q in (1, 3):  # every query empty: M = 0
        off = np.zeros(q + 1, np.int64)
        for idx, w in (
            (np.zeros((0, 10), np.int32), np.zeros((0, 10), np.float32)),
            (np.zeros(0, np.int32), np.zeros(0, np.float32)),
        ):
            sel_off, sel, val = coverage_select(
                off, idx, w, np.zeros(0, np.float32), budget=5, backend=backend
            )
            assert sel_off.tolist() == [0] * (q + 1) and sel.shape == (0,) and val.shape == (0,)
            assert sel.dtype == np.int32 and val.dtype == np.float32
    off = np.array([0, 0, 2, 2], np.int64)  # some queries empty
    sel_off, sel, _ = coverage_select(
        off,
        np.array([[1], [0]], np.int32),
        np.ones((2, 1), np.float32),
        np.array([0.5, 0.1]),
        budget=5,
        backend=backend,
    )
    assert sel_off.tolist() == [0, 0, 1, 1] and sel.tolist() == [0]
    off = np.zeros(1, np.int64)  # no query at all
    sel_off, sel, _ = coverage_select(
        off,
        np.zeros((0, 4), np.int32),
        np.zeros((0, 4), np.float32),
        np.zeros(0),
        budget=np.zeros(0, np.int64),
        backend=backend,
    )
    assert sel_off.tolist() == [0] and sel.size == 0


def test_torch_inputs_return_torch():
    torch = pytest.importorskip("torch")
    off, idx, w, rel = random_problem(np.random.default_rng(0), [5, 3], 3)
    sel_off, sel, val = coverage_select(
        torch.from_numpy(off), torch.from_numpy(idx), torch.from_numpy(w), torch.from_numpy(rel), budget=3
    )
    want = coverage_select(off, idx, w, rel, budget=3, backend="reference")
    assert isinstance(sel, torch.Tensor) and sel.dtype == torch.int32 and val.dtype == torch.float32
    assert sel.tolist() == want[1].tolist() and sel_off.tolist() == want[0].tolist()


# ---- validation at the dispatcher (every backend, before any native code) ------------------------


def _ok():
    return (
        np.array([0, 2, 3], np.int64),
        np.array([[1], [0], [-1]], np.int32),
        np.ones((3, 1), np.float32),
        np.array([0.5, 0.2, 0.9]),
    )


@pytest.mark.parametrize(
    "change, kw, msg",
    [
        ({"w": np.zeros((3, 1), np.float32)}, {}, "nbr_w: edge weights must be > 0"),
        ({"w": np.ones((3, 2), np.float32)}, {}, "same shape"),
        ({"off": np.array([0, 4])}, {}, "cand_offsets"),
        ({"rel": np.array([0.5, np.nan, 0.9])}, {}, r"relevance: NaN or inf in entries \[1\]"),
        ({"rel": np.array([0.5, 1j, 0.9])}, {}, "relevance: expected a real"),
        ({"w": np.array([[np.inf], [1], [1]], np.float32)}, {}, "nbr_w: NaN or inf"),
        ({"idx": np.array([[2], [0], [-1]], np.int32)}, {}, r"nbr_idx: id 2 at \(0, 0\) outside \[0, 2\)"),
        ({"idx": np.array([[1], [0], [7]], np.int32)}, {}, r"nbr_idx: id 7 .* outside \[0, 1\)"),
        ({"idx": np.array([[1], [2**30], [-1]], np.int64)}, {}, "nbr_idx: id 1073741824"),
        (
            {"idx": np.array([[2**32 + 1], [0], [-1]], np.int64)},
            {},
            "nbr_idx: id 4294967297",
        ),  # wraps to 1 in int32
        ({"idx": np.array([[-2], [0], [-1]], np.int32)}, {}, "nbr_idx: id -2"),
        ({"idx": np.array([[1.0], [0], [-1]])}, {}, "nbr_idx: expected integer ids"),
        ({}, {"budget": -1}, "budget: must be >= 0"),
        ({}, {"budget": [1, 2, 3]}, r"budget: expected a scalar or shape \(2,\)"),
        ({}, {"budget": 2.5}, "budget: expected integers"),
        ({}, {"alpha": 1.5}, r"alpha: must be in \[0, 1\]"),
        ({}, {"alpha": float("nan")}, "alpha: expected a finite number"),
        ({}, {"target": -0.1}, r"target: must be in \[0, 1\]"),
        ({}, {"target": 2.0}, r"target: must be in \[0, 1\]"),
        ({}, {"stop": "ratio"}, "stop: expected one of"),
    ],
)
@pytest.mark.parametrize("backend", ["reference", "cpu", "triton", "cuda"])
def test_bad_inputs_refused_before_any_backend(change, kw, msg, backend, monkeypatch):
    off, idx, w, rel = _ok()
    off, idx, w, rel = (
        change.get("off", off),
        change.get("idx", idx),
        change.get("w", w),
        change.get("rel", rel),
    )
    called = []
    import xmemory_gpu.ops.coverage as cov

    monkeypatch.setattr(bk, "is_available", lambda name: True)  # every backend, GPU ones too: none is reached
    monkeypatch.setattr(cov, "implementation", lambda op, name: lambda *a: called.append(a))
    kw = {"budget": 2, **kw}
    with pytest.raises(ValueError, match=msg) as err:
        coverage_select(off, idx, w, rel, backend=backend, **kw)
    assert "\n" not in str(err.value) and not called


@pytest.mark.parametrize("backend", ["reference", "cpu", "triton", "cuda"])
def test_device_backends_get_device_tensors(backend, monkeypatch):
    """The dispatcher checks on the host, then hands triton / cuda nbr_idx, nbr_w and relevance as
    torch tensors on the device (offsets and budgets stay on the host: they size the launch), and
    reference / cpu host arrays. The device is the CPU here (no GPU), as for interpreted Triton."""
    torch = pytest.importorskip("torch")
    import xmemory_gpu.ops.coverage as cov

    seen = {}

    def spy(off, idx, w, rel, alpha, budgets, target, stop):
        seen.update(off=off, idx=idx, w=w, rel=rel, budgets=budgets)
        return np.zeros(len(off), np.int64), np.zeros(0, np.int32), np.zeros(0, np.float64)

    monkeypatch.setattr(bk, "is_available", lambda name: True)
    monkeypatch.setattr(cov, "implementation", lambda op, name: spy)
    monkeypatch.setattr(cov, "gpu_device", lambda name, ref=None: torch.device("cpu"))
    off, idx, w, rel = _ok()
    sel_off, sel, vals = coverage_select(
        off, idx[:, 0], w[:, 0], rel, budget=2, backend=backend
    )  # [M] -> [M, 1]
    assert sel_off.tolist() == [0, 0, 0] and isinstance(sel, np.ndarray)  # NumPy in, NumPy out
    assert isinstance(seen["off"], np.ndarray) and isinstance(seen["budgets"], np.ndarray)
    assert seen["off"].dtype == seen["budgets"].dtype == np.int64
    kinds = {torch.Tensor} if backend in ("triton", "cuda") else {np.ndarray}
    assert {type(seen[a]) for a in ("idx", "w", "rel")} == kinds
    got = {a: str(seen[a].dtype).removeprefix("torch.") for a in ("idx", "w", "rel")}
    assert got == {"idx": "int32", "w": "float32", "rel": "float64"}
    assert tuple(seen["idx"].shape) == tuple(seen["w"].shape) == (3, 1)
    np.testing.assert_array_equal(np.asarray(seen["idx"]), idx)


# ---- cuda: the compiled module without a GPU --------------------------------------------------------


def _cuda_args(**over):
    m, k, q, s = 5, 3, 2, 4
    a = dict(
        cand_offsets=FakeCuda((q + 1,), "<i8"),
        nbr_idx=FakeCuda((m, k), "<i4"),
        nbr_w=FakeCuda((m, k), "<f4"),
        relevance=FakeCuda((m,), "<f8"),
        cap_offsets=FakeCuda((q + 1,), "<i8"),
        idx_scratch=FakeCuda((m, k), "<i4"),
        w_scratch=FakeCuda((m, k), "<f4"),
        state_scratch=None,
        selected=FakeCuda((s,), "<i4"),
        values=FakeCuda((s,), "<f8"),
        counts=FakeCuda((q,), "<i4"),
        alpha=0.7,
        target=1.0,
        stop="count",
        max_n=3,
        stream=0,
    )
    a.update(over)
    return a


def test_cuda_binding_checks_tensors_before_launch():
    _cuda = pytest.importorskip("xmemory_gpu._cuda", reason="xmemory_gpu._cuda not built")
    torch = pytest.importorskip("torch")
    cases = [
        (
            dict(relevance=torch.zeros(5, dtype=torch.float64)),
            "relevance: expected a CUDA tensor, got host memory",
        ),
        (dict(nbr_idx=np.zeros((5, 3), np.int32)), "nbr_idx: expected a CUDA tensor, got host memory"),
        (dict(nbr_w=FakeCuda((5, 3), "<f8")), "nbr_w: expected float32, got float64"),
        (dict(relevance=FakeCuda((5,), "<f4")), "relevance: expected float64, got float32"),
        (dict(cand_offsets=FakeCuda((3,), "<i4")), "cand_offsets: expected int64, got int32"),
        (dict(nbr_idx=FakeCuda((5, 3), "<i4", strides=(4, 20))), "nbr_idx: expected a contiguous"),
        (dict(nbr_w=FakeCuda((5, 4), "<f4")), r"nbr_w: expected shape \[5, 3\]"),
        (dict(counts=FakeCuda((3,), "<i4")), r"counts: expected shape \[2\]"),
        (dict(values=FakeCuda((3,), "<f8")), r"values: expected shape \[4\]"),
        (dict(max_n=10**6), "state_scratch: needed"),
        (dict(state_scratch=FakeCuda((7,), "|u1")), r"state_scratch: expected shape \[50\]"),
        (dict(stop="ratio"), "stop: expected 'count' or 'weight'"),
        (dict(alpha=2.0), r"alpha: must be in \[0, 1\]"),
        (dict(target=2.0), r"target: must be in \[0, 1\]"),
        (dict(nbr_idx=12345), "nbr_idx: expected a CUDA tensor"),  # the raw-pointer ABI is gone
    ]
    for over, msg in cases:
        with pytest.raises(ValueError, match=msg):
            _cuda.coverage_select(**_cuda_args(**over))
    if not has_cuda():  # well-formed views pass the checks; the launch then fails cleanly
        with pytest.raises(RuntimeError, match="CUDA error"):
            _cuda.coverage_select(**_cuda_args())


@pytest.mark.parametrize("budgets", [[0, 4, 0], pytest.param([0, 4, -1], marks=requires_cuda_module)])
def test_cuda_wrapper_without_picks_needs_no_device(budgets):
    from xmemory_gpu.ops.coverage import cuda as cov_cuda

    off = np.array([0, 3, 3, 5], np.int64)
    idx = np.full((5, 2), -1, np.int32)
    w = np.zeros((5, 2), np.float32)
    rel = np.linspace(0, 1, 5)
    sel_off, sel, vals = cov_cuda.coverage_select(off, idx, w, rel, 0.7, np.array(budgets, np.int64), 1.0)
    assert sel_off.tolist() == [0, 0, 0, 0] and sel.dtype == np.int32 and vals.dtype == np.float64
    assert sel.size == 0 and vals.size == 0
    empty = cov_cuda.coverage_select(
        np.zeros(1, np.int64), idx[:0], w[:0], rel[:0], 0.7, np.zeros(0, np.int64), 1.0
    )
    assert empty[0].tolist() == [0] and empty[1].size == 0


@requires_cuda_module
def test_cuda_module_exposes_coverage_kernel():
    _cuda = cuda_module()
    assert callable(_cuda.coverage_select)
    assert _cuda.COVERAGE_STATE_BYTES == 10
    assert _cuda.COVERAGE_SHARED_MAX_N * _cuda.COVERAGE_STATE_BYTES <= 48 * 1024 - 1024


@requires_cuda_module
def test_cuda_coverage_wrapper_exists():
    from xmemory_gpu.ops.coverage import cuda as cov_cuda

    assert callable(cov_cuda.coverage_select)


# ---- cuda on a GPU: against the float64 reference ----------------------------------------------


@requires_cuda
def test_cuda_long_list_uses_global_state(rng):
    _cuda = pytest.importorskip("xmemory_gpu._cuda")
    n = int(_cuda.COVERAGE_SHARED_MAX_N) + 700
    off, idx, w, rel = random_problem(rng, [n, 50], 4, edge_p=0.5)
    for stop in ("count", "weight"):
        same_as_reference((off, idx, w, rel), "cuda", budget=[12, 8], stop=stop)


def _cov_check(off, idx, w, rel, alpha, budgets, target):
    from xmemory_gpu.ops.coverage import cuda as cov_cuda

    want = cov_ref.coverage_select(off, idx, w, np.asarray(rel, np.float64), alpha, budgets, target)
    got = cov_cuda.coverage_select(off, idx, w, np.asarray(rel, np.float64), alpha, budgets, target)
    assert got[0].dtype == np.int64 and got[1].dtype == np.int32 and got[2].dtype == np.float64
    assert np.array_equal(got[0], want[0])
    assert np.array_equal(got[1], want[1])
    assert np.array_equal(got[2], want[2])  # bit-equal: same double arithmetic


@requires_cuda_module
@requires_cuda
@pytest.mark.parametrize("alpha", [0.0, 0.7, 1.0])
@pytest.mark.parametrize("target", [0.0, 0.6, 1.0])  # the binding refuses a target outside [0, 1], as the API
def test_cuda_coverage_vs_reference(rng, alpha, target):
    sizes = [0, 1, 2, 17, 64, 300, 1024] + segment_sizes(rng, 6, 1, 120)
    off, idx, w, rel = random_problem(rng, sizes, 8)
    s = int(off[5])
    idx[s, :3], w[s, :3] = [0, 5, 5], [0.5, 0.25, 0.75]  # self listed, a repeated neighbour: counted once
    idx[s + 1, 0], w[s + 1, 0] = 10**6, 0.5  # out of range: ignored
    budgets = rng.integers(-1, 40, size=len(sizes)).astype(np.int64)
    budgets[4] = 10**9  # unlimited: runs to the target or to a value <= 0
    _cov_check(off, idx, w, rel, alpha, budgets, target)


@requires_cuda_module
@requires_cuda
def test_cuda_coverage_constant_relevance_ties_and_no_neighbours(rng):
    off, idx, w, rel = random_problem(rng, [40, 40, 3], 4)
    rel[:40] = 0.3  # constant: rel~ = 0.5 for all
    idx[40:80] = -1  # no neighbours: every gain 1, ties to the lowest position
    budgets = np.array([10, 50, 3], np.int64)
    _cov_check(off, idx, w, rel, 0.5, budgets, 1.0)
    off0, idx0, w0, rel0 = off, idx[:, :0].copy(), w[:, :0].copy(), rel  # k = 0
    _cov_check(off0, idx0, w0, rel0, 0.7, budgets, 1.0)


@requires_cuda_module
@requires_cuda
def test_cuda_long_list_uses_global_state_bit_equal(rng):
    n = int(cuda_module().COVERAGE_SHARED_MAX_N) + 700
    off, idx, w, rel = random_problem(rng, [n, 50], 4, edge_p=0.5)
    _cov_check(off, idx, w, rel, 0.7, np.array([12, 8], np.int64), 1.0)


# ---- torch inputs: checked where they are ------------------------------------------------------------


def test_torch_inputs_are_checked_on_their_device_with_the_host_messages(monkeypatch, rng):
    """A GPU caller's nbr_idx / nbr_w / relevance are validated where they live (never copied to the
    host and back: on the H200 that round trip made device inputs slower than host ones), with the same
    one-line errors as NumPy inputs, and select the same."""
    torch = pytest.importorskip("torch")
    import xmemory_gpu.ops.coverage.contract as cov  # the checks, where they live

    off, idx, w, rel = random_problem(rng, [5, 0, 9, 1, 30], 3)
    big = []
    real_host = cov.host

    def spy(x, *a):
        if cov.is_torch(x) and x.numel() >= idx.size:
            big.append(tuple(x.shape))
        return real_host(x, *a)

    monkeypatch.setattr(cov, "host", spy)
    t = [torch.from_numpy(a.copy()) for a in (idx, w, rel)]
    checked = cov.coverage_inputs(off, *t, 0.7, 4, 1.0, "count")
    assert big == [] and all(cov.is_torch(a) for a in checked[1:4])
    assert [a.dtype for a in checked[1:4]] == [torch.int32, torch.float32, torch.float64]
    want = coverage_select(off, idx, w, rel, budget=4, backend="reference")
    got = coverage_select(off, *t, budget=4, backend="cpu")  # a host backend: converted after the checks
    for g, e in zip(got, want):
        assert cov.is_torch(g) and np.array_equal(g.numpy(), e)
    bad_idx = idx.copy()
    bad_idx[7, 1] = 9  # query 2 has 9 candidates: ids 0..8
    bad_w = w.copy()
    bad_w[np.argwhere(idx >= 0)[3][0], np.argwhere(idx >= 0)[3][1]] = -0.5
    bad_rel = rel.copy()
    bad_rel[4] = np.nan
    for a_idx, a_w, a_rel in (
        (bad_idx, w, rel),
        (idx.astype(np.float32), w, rel),
        (idx, bad_w, rel),
        (idx, w, bad_rel),
    ):
        with pytest.raises(ValueError) as host_err:
            coverage_select(off, a_idx, a_w, a_rel, budget=4, backend="cpu")
        with pytest.raises(ValueError) as torch_err:
            coverage_select(
                off, *(torch.from_numpy(a.copy()) for a in (a_idx, a_w, a_rel)), budget=4, backend="cpu"
            )
        assert str(torch_err.value) == str(host_err.value)
