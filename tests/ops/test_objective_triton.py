"""Triton f(P) backend (xmemory_gpu.ops.objective.triton) against the float64 reference.

Without a GPU the kernels run in the Triton interpreter (tests/conftest.py sets TRITON_INTERPRET):
shapes are small. Tolerances are the CUDA tests' (float64 throughout: rtol 1e-9).
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("triton")

from xmemory_gpu.ops.objective import Candidates, PartitionState, partition_objective, score_candidates  # noqa: E402
from xmemory_gpu.ops.objective import reference as ref  # noqa: E402
from xmemory_gpu.ops.objective import triton as ot  # noqa: E402

from .objective_cases import random_candidates, random_partition  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore:Conversion of an array with ndim > 0:DeprecationWarning")  # interpreter

DEV = "cuda" if torch.cuda.is_available() else "cpu"
TOL = dict(rtol=1e-9, atol=1e-12)


def _t(a):
    return torch.from_numpy(np.ascontiguousarray(a)).to(DEV)


def _part(x, lab, off, **kw):
    got = ot.partition_objective(_t(x), _t(lab), off, **kw)
    assert got.dtype == torch.float64 and got.device.type == DEV
    return got.cpu().numpy()


def test_partition_ragged_random_with_edge_cases(rng):
    # empty segments, a single node, themes of one node, a single theme, many themes, a zero row
    sizes = [0, 1, 5, 40, 70, 33, 0, 12, 64, 7]
    themes = [1, 1, 5, 1, 30, 12, 1, 12, 64, 1]
    x, lab, off = random_partition(rng, sizes, themes, 19)
    x[3] = x[4]  # duplicated vectors
    s = int(off[8])  # 64 singleton themes made of 4 repeated vectors: exact ties in s_k, MAD = 0
    x[s : s + 64] = x[s : s + 4][np.arange(64) % 4]
    lab[s : s + 64] = np.arange(64) * 7 + 1
    x[int(off[5])] = 0.0
    np.testing.assert_allclose(_part(x, lab, off), ref.partition_objective(x, lab, off), **TOL)


def test_partition_hand_worked_and_mad_zero():
    x = np.array([[1, 0], [1, 0], [0, 1], [0, 1]], np.float64)
    x4 = np.concatenate([x, x, x, np.zeros((1, 2))])
    lab = np.concatenate([[0, 0, 5, 5], np.zeros(4, int), np.arange(4), [3]])
    off = np.array([0, 4, 8, 12, 12, 13], np.int64)
    np.testing.assert_allclose(_part(x4, lab, off), [2.0, 1 + np.sqrt(0.5), 2.0, 0.0, 1.0], rtol=1e-12)


def test_partition_more_themes_than_a_tile(rng, monkeypatch):
    # more slots than BLOCK_T: multi-tile rows, columns and rank selection
    monkeypatch.setattr(ot, "_config", lambda: (16, 16, 16, 4))
    x, lab, off = random_partition(rng, [90, 3, 50], [45, 3, 17], 5)
    lab[:90] = np.repeat(np.arange(45), 2)
    np.testing.assert_allclose(_part(x, lab, off), ref.partition_objective(x, lab, off), **TOL)


def test_partition_empty_inputs():
    assert _part(np.zeros((0, 4)), np.zeros(0, np.int64), np.zeros(1, np.int64)).shape == (0,)
    assert _part(np.zeros((0, 4)), np.zeros(0, np.int64), np.zeros(3, np.int64)).tolist() == [0.0, 0.0]


def test_score_candidates_ragged_random(rng):
    x, lab, off = random_partition(rng, [30, 2, 60, 9, 1, 25], [6, 2, 10, 9, 1, 1], 11)
    state = PartitionState.from_labels(x, lab, off)
    cands = random_candidates(rng, state, 10)
    assert cands.n > 20
    got = ot.score_candidates(state, cands).cpu().numpy()
    np.testing.assert_allclose(got, ref.score_candidates(state, cands), **TOL)


def test_score_candidates_removing_both_top2_and_zero_candidates():
    e = np.eye(4)
    x = np.stack([e[0], e[0] + 0.9 * e[1], e[0] + 0.8 * e[2], e[3], e[3] + 0.1 * e[0], e[1] + e[2]])
    state = PartitionState.from_labels(x, np.arange(6), np.array([0, 6], np.int64))
    items = [(0, [1, 2], [np.array([1, 2])]), (0, [0, 4], [np.array([0, 4])]),
             (0, [1, 2], [np.array([2]), np.array([1])]), (0, [], [])]  # the last: a no-op edit
    cands = Candidates.from_lists(state, items)
    got = ot.score_candidates(state, cands).cpu().numpy()
    np.testing.assert_allclose(got, ref.score_candidates(state, cands), **TOL)
    assert got[3] == pytest.approx(state.f[0], rel=1e-12)
    assert ot.score_candidates(state, Candidates.from_lists(state, [])).shape == (0,)


def test_score_candidates_single_theme_memory_and_multi_tile(rng, monkeypatch):
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


def test_public_dispatch_triton(rng):
    x, lab, off = random_partition(rng, [20, 0, 9], [4, 1, 3], 7)
    got = partition_objective(x, lab, off, backend="triton")
    assert isinstance(got, np.ndarray) and got.dtype == np.float64  # NumPy in, NumPy out
    np.testing.assert_allclose(got, ref.partition_objective(x, lab, off), **TOL)
    got_t = partition_objective(torch.from_numpy(x), torch.from_numpy(lab), off, backend="triton")
    assert isinstance(got_t, torch.Tensor) and got_t.dtype == torch.float64  # torch in, torch out
    state = PartitionState.from_labels(x, lab, off)
    cands = random_candidates(rng, state, 3)
    np.testing.assert_allclose(score_candidates(state, cands, backend="triton"), ref.score_candidates(state, cands),
                               **TOL)
