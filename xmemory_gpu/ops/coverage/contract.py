"""``coverage_select``'s input contract: every check its dispatcher runs before any backend
(``csrc/cpu/coverage.cpp`` checks ``stop`` only and trusts the rest: CSR offsets, local neighbour ids,
positive weights, finite relevance), as the checks returning the checked inputs and as the ``accepts``
predicate (None in contract, else a one-line reason naming the argument)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..checks import (
    check_budgets,
    check_finite,
    check_finite_scalar,
    check_index,
    check_offsets,
    check_real,
    reason,
)
from ..devices import host, is_torch
from .reference import STOP_RULES


def coverage_inputs(cand_offsets, nbr_idx, nbr_w, relevance, alpha, budget, target, stop):
    """Every check of ``coverage_select``'s inputs, before any backend runs (its arguments, positional):
    ``(cand_offsets int64, nbr_idx int32 [M, k], nbr_w float32 [M, k], relevance float64 [M], alpha,
    budgets int64 [Q], target)``, or a one-line ``ValueError``. Offsets and budgets come back on the host
    (they size the launch); torch ``nbr_idx``, ``nbr_w`` and ``relevance`` are checked where they are and
    come back there (a GPU caller's arrays never make a round trip through the host), others as NumPy."""
    if stop not in STOP_RULES:
        raise ValueError(f"stop: expected one of {STOP_RULES}, got {stop!r}")
    alpha = check_finite_scalar("alpha", alpha)
    target = check_finite_scalar("target", target)
    if not 0.0 <= alpha <= 1.0:
        raise ValueError(f"alpha: must be in [0, 1], got {alpha}")
    if not 0.0 <= target <= 1.0:
        raise ValueError(f"target: must be in [0, 1], got {target}")
    rel = relevance.detach() if is_torch(relevance) else host(relevance)
    if rel.ndim != 1:
        raise ValueError(f"relevance: expected a 1-D array [M], got shape {tuple(rel.shape)}")
    check_real("relevance", rel)
    check_finite("relevance", rel)
    m = rel.shape[0]
    off = check_offsets("cand_offsets", cand_offsets, m)
    idx, w = (a.detach() if is_torch(a) else host(a) for a in (nbr_idx, nbr_w))
    if tuple(idx.shape) != tuple(w.shape):
        raise ValueError(f"nbr_idx {tuple(idx.shape)} and nbr_w {tuple(w.shape)}: must have the same shape")
    if idx.ndim == 1 and idx.shape[0] == m:
        idx, w = idx.reshape(m, 1), w.reshape(m, 1)
    if idx.ndim != 2 or idx.shape[0] != m:
        raise ValueError(f"nbr_idx: expected shape [M, k] with M = {m} candidates, got {tuple(idx.shape)}")
    check_real("nbr_w", w)
    check_finite("nbr_w", w)
    sizes = np.diff(off)
    # local ids < n_q (the kernels' int32)
    idx32 = check_index("nbr_idx", idx, np.repeat(sizes, sizes), dtype=np.int32, in_place=True)
    if is_torch(idx32):
        import torch

        w32 = (w if is_torch(w) else torch.from_numpy(np.ascontiguousarray(w))).to(
            idx32.device, torch.float32
        )
        bad = (idx32 >= 0) & (w32 <= 0)  # w is finite (checked above)
        if bool(bad.any()):
            r, c = (int(v) for v in torch.nonzero(bad)[0].tolist())
            raise ValueError(
                f"nbr_w: edge weights must be > 0 where nbr_idx >= 0, got {float(w32[r, c])} at ({r}, {c})"
            )
        rel64 = (rel if is_torch(rel) else torch.from_numpy(np.ascontiguousarray(rel))).to(
            idx32.device, torch.float64
        )
        idx32, w32, rel64 = idx32.contiguous(), w32.contiguous(), rel64.contiguous()
    else:
        w32 = np.ascontiguousarray(host(w), dtype=np.float32)
        bad = (idx32 >= 0) & (w32 <= 0)  # w is finite (checked above)
        if bad.any():
            r, c = (int(v) for v in np.argwhere(bad)[0])
            raise ValueError(
                f"nbr_w: edge weights must be > 0 where nbr_idx >= 0, got {w32[r, c]} at ({r}, {c})"
            )
        idx32, rel64 = np.ascontiguousarray(idx32), np.ascontiguousarray(host(rel), dtype=np.float64)
    budgets = check_budgets("budget", budget, off.size - 1)
    return off, idx32, w32, rel64, alpha, budgets, target


def accepts_coverage_select(
    cand_offsets: Any,
    nbr_idx: Any,
    nbr_w: Any,
    relevance: Any,
    *,
    alpha: Any = 0.7,
    budget: Any,
    target: Any = 1.0,
    stop: Any = "count",
    backend: str = "auto",
) -> str | None:
    """cand_offsets [Q+1] CSR over M; nbr_idx [M, k] local ids (-1 none, else < n_q); nbr_w [M, k] finite,
    > 0 where nbr_idx >= 0; relevance [M] finite; budget integers >= 0 (scalar or [Q]); alpha and target
    in [0, 1]; stop one of ``STOP_RULES``."""
    return reason(coverage_inputs, cand_offsets, nbr_idx, nbr_w, relevance, alpha, budget, target, stop)


__all__ = ["accepts_coverage_select", "coverage_inputs"]
