"""Eq. 4 greedy coverage/relevance selection over ragged batches of queries."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..backends import GPU_BACKENDS, implementation, register, resolve_backend
from ..checks import check_budgets, check_finite, check_finite_scalar, check_index, check_offsets, check_real
from ..devices import as_caller, gpu_device, host, is_cuda_tensor, is_torch, to_backend
from .reference import STOP_RULES

register(
    "coverage_select", __name__, {"reference": "reference", "cpu": "cpu", "triton": "triton", "cuda": "cuda"}
)


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


def coverage_select(
    cand_offsets: Any,
    nbr_idx: Any,
    nbr_w: Any,
    relevance: Any,
    *,
    alpha: float = 0.7,
    budget: Any,
    target: float = 1.0,
    stop: str = "count",
    backend: str = "auto",
) -> tuple[Any, Any, Any]:
    """Greedy Eq. 4 selection per query (semantics and stop rules in ``reference``'s docstring).

    cand_offsets [Q+1] int64; nbr_idx [M, k] integer positions local to the query's candidate list
    (-1 none; 0 <= id < n_q); nbr_w [M, k] finite weights (> 0 where nbr_idx >= 0); relevance [M]
    finite raw similarities; budget an integer >= 0, scalar or [Q]; alpha and target in [0, 1];
    stop ``"count"`` (the authors': covered candidates reach ``target`` of all, 1.0 = all covered)
    or ``"weight"`` (credited weight share reaches ``target``). Inputs are validated here, for every
    backend, before any native code runs (one-line ``ValueError`` naming the argument); the device
    backends (triton, cuda) then get nbr_idx, nbr_w and relevance as torch tensors on the device.
    Returns sel_offsets [Q+1] int64, selected [S] int32 local positions in pick order, and
    values [S] float32, the objective value of each pick; NumPy, or torch on the caller's device.
    """
    name = resolve_backend("coverage_select", backend, on_cuda=is_cuda_tensor(relevance))
    off, idx, w, rel, alpha, budgets, target = coverage_inputs(
        cand_offsets, nbr_idx, nbr_w, relevance, alpha, budget, target, stop
    )
    if (
        name in GPU_BACKENDS
    ):  # device backends get device tensors; offsets and budgets size the launch on the host
        dev = gpu_device(name, relevance)
        idx, w, rel = (to_backend(a, name, device=dev) for a in (idx, w, rel))
    else:
        idx, w, rel = host(idx), host(w), host(rel)
    sel_off, sel, vals = implementation("coverage_select", name)(
        off, idx, w, rel, alpha, budgets, target, stop
    )
    sel_off, sel, vals = host(sel_off, np.int64), host(sel, np.int32), host(vals, np.float32)
    return as_caller(sel_off, relevance), as_caller(sel, relevance), as_caller(vals, relevance)


__all__ = ["STOP_RULES", "coverage_inputs", "coverage_select"]
