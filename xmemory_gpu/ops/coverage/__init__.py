"""Eq. 4 greedy coverage/relevance selection over ragged batches of queries."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..backends import GPU_BACKENDS, implementation, register, resolve_backend
from ..devices import as_caller, gpu_device, host, is_cuda_tensor, to_backend
from .contract import accepts_coverage_select, coverage_inputs
from .reference import STOP_RULES

register(
    "coverage_select",
    __name__,
    {"reference": "reference", "cpu": "cpu", "triton": "triton", "cuda": "cuda"},
    accepts=accepts_coverage_select,
)


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
