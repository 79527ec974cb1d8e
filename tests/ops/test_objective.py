"""f(P): every host backend against the float64 reference; incremental scoring equals from-scratch."""

from __future__ import annotations

import numpy as np
import pytest

from xmemory_gpu.ops._backend import available_backends
from xmemory_gpu.ops.objective import (
    _OBJECTIVE,
    _SCORE,
    Candidates,
    PartitionState,
    candidate_gains,
    partition_objective,
    score_candidates,
    split_proposals,
)
from xmemory_gpu.ops.objective.reference import objective_one

from .objective_cases import random_candidates, random_partition

OBJ_BACKENDS = [b for b in _OBJECTIVE if b in ("cpu", "triton") and available_backends()[b].available]
SCORE_BACKENDS = [b for b in _SCORE if available_backends()[b].available and b != "cuda"]


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


@pytest.mark.parametrize("backend", OBJ_BACKENDS)
def test_backend_matches_reference(rng, backend):
    sizes = [0, 1, 5, 40, 120, 33]
    x, lab, off = random_partition(rng, sizes, [1, 1, 5, 1, 30, 12], 17)
    x[3] = x[4]  # duplicated vectors
    want = partition_objective(x, lab, off, backend="reference")
    got = partition_objective(x, lab, off, backend=backend)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-12)


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
    np.testing.assert_allclose(candidate_gains(state, cands, backend=backend), want - state.f[cands.memory], atol=1e-9)


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
    np.testing.assert_allclose(score_candidates(state, c, backend=backend), score_candidates(state, c, backend="reference"), rtol=1e-9)


def test_candidates_must_cover_removed_members():
    x = np.eye(3)
    state = PartitionState.from_labels(x, np.array([0, 0, 1]), np.array([0, 3], np.int64))
    with pytest.raises(ValueError, match="cover exactly"):
        Candidates.from_lists(state, [(0, [0], [np.array([0])])])
    with pytest.raises(ValueError, match="no theme labelled"):
        Candidates.from_lists(state, [(0, [7], [])])


def test_split_proposals_valid_and_seeded(rng):
    x, _, _ = random_partition(rng, [40], [3], 8)
    moff = np.array([0, 1, 2, 14, 40], np.int64)
    props = split_proposals(x, moff, ks=(2, 3, 4), n_init=3)
    assert props[0] == [] and len(props[1]) == 0  # one member: nothing to split
    for t, plist in enumerate(props):
        n = int(moff[t + 1] - moff[t])
        for lab in plist:
            assert lab.shape == (n,) and lab.min() == 0 and set(np.unique(lab)) == set(range(lab.max() + 1))
            assert 2 <= lab.max() + 1 <= 4 or lab.max() + 1 <= n  # k-means up to 4, components any
    again = split_proposals(x, moff, ks=(2, 3, 4), n_init=3)
    assert all(len(a) == len(b) and all(np.array_equal(p, q) for p, q in zip(a, b)) for a, b in zip(props, again))
