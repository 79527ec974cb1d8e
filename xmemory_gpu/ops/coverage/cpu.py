"""C++ CPU path for Eq. 4 coverage selection (``xmemory_gpu._C``: OpenMP across queries, lazy greedy)."""

from __future__ import annotations

import numpy as np


def coverage_select(
    cand_offsets: np.ndarray,
    nbr_idx: np.ndarray,
    nbr_w: np.ndarray,
    relevance: np.ndarray,
    alpha: float,
    budgets: np.ndarray,
    target: float,
    stop: str = "count",
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Host arrays in (validated by the dispatcher), (sel_offsets int64, selected int32, values float64) out."""
    from ... import _C

    return _C.coverage_select(cand_offsets, nbr_idx, nbr_w, relevance, alpha, budgets, target, stop)


__all__ = ["coverage_select"]
