"""Eq. 4 greedy coverage/relevance selection over ragged batches of queries (DESIGN section 4)."""

from __future__ import annotations

from typing import Any

import numpy as np

from .._arrays import check_offsets, is_torch, like, to_numpy
from .._backend import is_cuda_tensor, resolve_backend
from . import cuda, reference


def _cpu(cand_offsets, nbr_idx, nbr_w, relevance, alpha, budgets, target):
    from ... import _C

    return _C.coverage_select(cand_offsets, nbr_idx, nbr_w, relevance, alpha, budgets, target)


_IMPLS = {"reference": reference.coverage_select, "cpu": _cpu, "cuda": cuda.coverage_select}


def coverage_select(
    cand_offsets: Any, nbr_idx: Any, nbr_w: Any, relevance: Any, *, alpha: float = 0.7, budget: Any,
    target: float = 1.0, backend: str = "auto",
) -> tuple[Any, Any, Any]:
    """Greedy selection per query (semantics in ``reference``'s docstring).

    cand_offsets [Q+1] int64; nbr_idx [M, k] int32 positions local to the query's candidate list
    (-1 none); nbr_w [M, k] float32 (> 0); relevance [M] raw similarities; budget scalar or [Q].
    Returns sel_offsets [Q+1] int64, selected [S] int32 local positions in pick order, and
    gains [S] float32, the objective value of each pick.
    """
    name = resolve_backend("coverage_select", backend, tuple(_IMPLS), on_cuda=is_cuda_tensor(relevance))
    rel = to_numpy(relevance, np.float64)
    off = check_offsets(to_numpy(cand_offsets), rel.shape[0], "cand_offsets")
    idx = to_numpy(nbr_idx, np.int32).reshape(rel.shape[0], -1)
    w = to_numpy(nbr_w, np.float32).reshape(rel.shape[0], -1)
    if idx.shape != w.shape:
        raise ValueError(f"coverage_select: nbr_idx {idx.shape} and nbr_w {w.shape} must have the same shape")
    valid = idx >= 0
    if np.any(w[valid] <= 0):
        raise ValueError("coverage_select: edge weights must be > 0 where nbr_idx >= 0")
    budgets = np.broadcast_to(np.asarray(to_numpy(budget), dtype=np.int64), (len(off) - 1,)).copy()
    sel_off, sel, gains = _IMPLS[name](off, idx, w, rel, float(alpha), budgets, float(target))
    sel_off, sel, gains = np.asarray(sel_off, np.int64), np.asarray(sel, np.int32), np.asarray(gains, np.float32)
    if is_torch(relevance):
        return like(sel_off, relevance), like(sel, relevance), like(gains, relevance)
    return sel_off, sel, gains


__all__ = ["coverage_select"]
