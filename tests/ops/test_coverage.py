"""Eq. 4 greedy coverage selection: every host backend returns exactly the reference's picks."""

from __future__ import annotations

import numpy as np
import pytest

from xmemory_gpu.ops._backend import available_backends
from xmemory_gpu.ops.coverage import _IMPLS, coverage_select

from .coverage_cases import random_problem

BACKENDS = [b for b in _IMPLS if b in ("cpu", "triton") and available_backends()[b].available]


def same_as_reference(args, backend, **kw):
    want = coverage_select(*args, backend="reference", **kw)
    got = coverage_select(*args, backend=backend, **kw)
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_array_equal(got[1], want[1])
    np.testing.assert_allclose(got[2], want[2], rtol=1e-5)
    return want


def test_hand_worked_case():
    # 3 candidates; 0 covers {0, 1 (w .5)}, 1 covers {1}, 2 covers {2, 0 (w .25)}; Z = 1.5 + 1 + 1.25 = 3.75
    off = np.array([0, 3], np.int64)
    idx = np.array([[1, -1], [-1, -1], [0, -1]], np.int32)
    w = np.array([[0.5, 0], [0, 0], [0.25, 0]], np.float32)
    rel = np.array([0.9, 0.5, 0.1], np.float32)  # rel~ = 1, .5, 0
    sel_off, sel, val = coverage_select(off, idx, w, rel, alpha=0.7, budget=3, backend="reference")
    # step 1: v0 = .7*1.5/3.75 + .3*1 = .58, v1 = .7/3.75 + .15 = .3367, v2 = .7*1.25/3.75 = .2333
    # step 2: 0 and 1 covered; v1 = 0 + .15, v2 = .7*1/3.75 = .1867 -> 2; step 3: v1 = .15
    assert sel.tolist() == [0, 2, 1]
    np.testing.assert_allclose(val, [0.58, 0.7 / 3.75, 0.15], rtol=1e-6)
    assert sel_off.tolist() == [0, 3]


def test_target_and_nonpositive_stop():
    off = np.array([0, 3], np.int64)
    idx = np.array([[1, 2], [-1, -1], [-1, -1]], np.int32)
    w = np.array([[1, 1], [0, 0], [0, 0]], np.float32)
    rel = np.array([0.9, 0.5, 0.1], np.float32)
    # candidate 0 covers everything it can: credited 3 of Z = 5
    _, sel, _ = coverage_select(off, idx, w, rel, budget=3, target=0.6, backend="reference")
    assert sel.tolist() == [0]
    # alpha = 1: once all is covered every value is 0 -> stop
    _, sel, _ = coverage_select(off, idx, w, rel, alpha=1.0, budget=3, backend="reference")
    assert sel.tolist() == [0, 1, 2][: len(sel)] and len(sel) == 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_random_ragged(rng, backend):
    sizes = [0, 1, 2] + [int(s) for s in rng.integers(3, 120, size=30)]
    args = random_problem(rng, sizes, 10)
    budgets = rng.integers(0, 25, size=len(sizes))
    same_as_reference(args, backend, budget=budgets)
    same_as_reference(args, backend, budget=5, alpha=0.3, target=0.5)


@pytest.mark.parametrize("backend", BACKENDS)
def test_edge_cases(rng, backend):
    sizes = [1, 7, 40]
    off, idx, w, rel = random_problem(rng, sizes, 6)
    same_as_reference((off, np.full_like(idx, -1), np.zeros_like(w), rel), backend, budget=10)  # no edges
    same_as_reference((off, idx, w, np.full_like(rel, 0.3)), backend, budget=10)  # all-equal relevance
    same_as_reference((off, idx, w, rel), backend, budget=1000)  # budget > candidates
    same_as_reference((off, idx, w, rel), backend, budget=10, target=0.2)  # target reached early
    dup = idx.copy()
    dup[:, 1] = dup[:, 0]  # a neighbour listed twice counts once
    dup[off[2], 2] = 0  # self listed as a neighbour is ignored
    same_as_reference((off, dup, np.where(dup >= 0, w + 0.1, 0).astype(np.float32), rel), backend, budget=8)


def test_bad_inputs():
    off = np.array([0, 2], np.int64)
    idx = np.array([[1], [0]], np.int32)
    with pytest.raises(ValueError, match="weights must be > 0"):
        coverage_select(off, idx, np.zeros((2, 1), np.float32), np.ones(2), budget=2)
    with pytest.raises(ValueError, match="same shape"):
        coverage_select(off, idx, np.ones((2, 2), np.float32), np.ones(2), budget=2)
    with pytest.raises(ValueError, match="cand_offsets"):
        coverage_select(np.array([0, 3]), idx, np.ones((2, 1), np.float32), np.ones(2), budget=2)
