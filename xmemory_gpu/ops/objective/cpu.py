"""C++ CPU path for the objective family (``xmemory_gpu._C``, OpenMP across segments/candidates)."""

from __future__ import annotations

import numpy as np


def _c():
    from ... import _C

    return _C


def partition_objective(x: np.ndarray, labels: np.ndarray, offsets: np.ndarray, *, eps: float = 1e-8) -> np.ndarray:
    return _c().partition_objective(np.asarray(x, np.float64), np.asarray(labels, np.int64), np.asarray(offsets, np.int64), eps)


def score_candidates(state, cands) -> np.ndarray:
    return _c().score_candidates(
        state.x, state.theme_sum, state.theme_count, state.theme_offsets, state.offsets, state.top_idx, state.top_cos,
        cands.memory, cands.rem_offsets, cands.rem_rows, cands.add_offsets, cands.group_offsets, cands.members, state.eps,
    )
