"""The sparsity-semantics objective f(P): batched evaluation, incremental candidate scoring, and
split proposals (DESIGN sections 1 and 4)."""

from __future__ import annotations

from typing import Any

import numpy as np

from .._arrays import check_offsets, to_numpy
from .._backend import is_cuda_tensor, resolve_backend
from . import cpu, cuda, reference
from .proposals import split_proposals
from .state import Candidates, PartitionState

_OBJECTIVE = {"reference": reference.partition_objective, "cpu": cpu.partition_objective, "cuda": cuda.partition_objective}
_SCORE = {"reference": reference.score_candidates, "cpu": cpu.score_candidates, "cuda": cuda.score_candidates}


def partition_objective(x: Any, labels: Any, offsets: Any, *, eps: float = 1e-8, backend: str = "auto") -> np.ndarray:
    """f [B] float64: f(P) of each CSR segment's partition. x [N, d]; labels [N] non-negative ints
    local to each segment (unused values ignored); offsets [B+1]."""
    name = resolve_backend("partition_objective", backend, tuple(_OBJECTIVE), on_cuda=is_cuda_tensor(x))
    xs = to_numpy(x, np.float64)
    lab = to_numpy(labels, np.int64)
    if xs.ndim != 2 or lab.shape != (xs.shape[0],):
        raise ValueError(f"partition_objective: x [N, d] and labels [N] expected, got {xs.shape} and {lab.shape}")
    if lab.size and lab.min() < 0:
        raise ValueError("partition_objective: labels must be non-negative")
    off = check_offsets(to_numpy(offsets), xs.shape[0])
    return np.asarray(_OBJECTIVE[name](xs, lab, off, eps=eps), dtype=np.float64)


def score_candidates(state: PartitionState, candidates: Candidates, *, backend: str = "auto") -> np.ndarray:
    """f_after [C] float64: f(P) of the candidate's memory after applying each candidate alone."""
    name = resolve_backend("score_candidates", backend, tuple(_SCORE), on_cuda=False)
    if candidates.n == 0:
        return np.zeros(0, dtype=np.float64)
    return np.asarray(_SCORE[name](state, candidates), dtype=np.float64)


def candidate_gains(state: PartitionState, candidates: Candidates, *, backend: str = "auto") -> np.ndarray:
    """f_after - f_before for each candidate."""
    return score_candidates(state, candidates, backend=backend) - state.f[candidates.memory]


__all__ = ["Candidates", "PartitionState", "candidate_gains", "partition_objective", "score_candidates", "split_proposals"]
