"""The objective family's input contracts: the checks ``partition_objective`` and ``score_candidates``
run before any backend (``csrc/cpu/objective.cpp`` checks x [N, d], labels [N] and offsets ending at
N again), as ``accepts`` predicates (None in contract, else a one-line reason naming the argument);
the partition state's blocks' in ``state_contract``."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..checks import (
    check_float_matrix,
    check_index,
    check_labels,
    check_offsets,
    check_positive,
    check_same_segments,
    reason,
)
from .state import Candidates, PartitionState
from .state_contract import (
    accepts_f_blocks,
    accepts_theme_sums,
    accepts_top2_blocks,
    accepts_top2_update,
    f_blocks_inputs,
    theme_sums_inputs,
    top2_inputs,
    top2_update_inputs,
)


def partition_inputs(x: Any, labels: Any, offsets: Any, eps: Any, *, finite: bool = True) -> tuple:
    """(x [N, d] real (finite unless ``finite=False``: the kernel's pass counts), labels [N] int64 in
    [0, 2**31), offsets [B+1] int64 CSR, eps > 0)."""
    x = check_float_matrix("x", x, finite=finite)
    n = int(x.shape[0])
    lab = check_labels("labels", labels, n)
    off = check_offsets("offsets", offsets, n)
    return x, lab, off, check_positive("eps", eps)


def accepts_partition_objective(
    x: Any, labels: Any, offsets: Any, *, eps: Any = 1e-8, backend: str = "auto"
) -> str | None:
    """x [N, d] real finite, labels [N] integers in [0, 2**31), offsets [B+1] CSR over N, eps > 0."""
    return reason(partition_inputs, x, labels, offsets, eps)


def candidate_inputs(state: Any, cands: Any) -> None:
    """A ``PartitionState`` and a ``Candidates`` batch whose ids lie in it: memories in [0, B), removed
    theme rows of the candidate's own memory, CSR offsets over the rows and groups, members < N."""
    if not isinstance(state, PartitionState):
        raise ValueError(f"state: expected a PartitionState, got {type(state).__name__}")
    if not isinstance(cands, Candidates):
        raise ValueError(f"candidates: expected a Candidates, got {type(cands).__name__}")
    if cands.n == 0:
        return
    n_mem = len(state.offsets) - 1
    k = int(state.theme_sum.shape[0])
    c = cands.n
    mem = check_index("candidates.memory", cands.memory, n_mem, allow_missing=False)
    if mem.shape != (c,):
        raise ValueError(f"candidates.memory: expected shape ({c},), got {mem.shape}")
    ro = check_offsets("candidates.rem_offsets", cands.rem_offsets, int(np.size(cands.rem_rows)))
    ao = check_offsets("candidates.add_offsets", cands.add_offsets, int(np.size(cands.group_offsets)) - 1)
    check_same_segments("candidates.rem_offsets", ro, "candidates.add_offsets", ao)
    if len(ro) != c + 1:
        raise ValueError(f"candidates.rem_offsets: expected {c + 1} entries, got {len(ro)}")
    rr = check_index("candidates.rem_rows", cands.rem_rows, k, allow_missing=False)
    t_off = np.asarray(state.theme_offsets, dtype=np.int64)
    owner = np.repeat(mem, np.diff(ro))
    if rr.size and (np.any(rr < t_off[owner]) or np.any(rr >= t_off[owner + 1])):
        bad = int(np.flatnonzero((rr < t_off[owner]) | (rr >= t_off[owner + 1]))[0])
        raise ValueError(
            f"candidates.rem_rows: theme row {int(rr[bad])} (entry {bad}) is not a theme of its candidate's memory"
        )
    check_offsets("candidates.group_offsets", cands.group_offsets, int(np.size(cands.members)))
    check_index("candidates.members", cands.members, int(np.asarray(state.x).shape[0]), allow_missing=False)


def accepts_score_candidates(state: Any, candidates: Any, *, backend: str = "auto") -> str | None:
    """state a PartitionState; candidates a Candidates whose memories, theme rows and members lie in it."""
    return reason(candidate_inputs, state, candidates)


__all__ = [
    "accepts_f_blocks",
    "accepts_partition_objective",
    "accepts_score_candidates",
    "accepts_theme_sums",
    "accepts_top2_blocks",
    "accepts_top2_update",
    "candidate_inputs",
    "f_blocks_inputs",
    "partition_inputs",
    "theme_sums_inputs",
    "top2_inputs",
    "top2_update_inputs",
]
