"""The sparsity-semantics objective f(P): batched evaluation, incremental candidate scoring and the
partition state they share, kept in place under edits. Split proposals
live with the theme code (``construct/theme_split.py``, their k-means in ``ops/kmeans``)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..backends import GPU_BACKENDS, implementation, register, resolve_backend
from ..checks import check_finite
from ..devices import as_caller, gpu_device, host, is_cuda_tensor, is_torch, to_backend
from . import cpu
from .contract import (
    accepts_f_blocks,
    accepts_partition_objective,
    accepts_score_candidates,
    accepts_theme_sums,
    accepts_top2_blocks,
    accepts_top2_update,
    candidate_inputs,
    partition_inputs,
)
from .state import Candidates, PartitionState, ThemeTop2

_ALL = {"reference": "reference", "cpu": "cpu", "triton": "triton", "cuda": "cuda"}  # backend -> module
register("partition_objective", __name__, _ALL, accepts=accepts_partition_objective)
register("score_candidates", __name__, _ALL, accepts=accepts_score_candidates)
_HOST = {"reference": "reference", "cpu": "cpu"}  # the partition state's blocks (host only)
register("theme_sums", __name__, _HOST, accepts=accepts_theme_sums)
register("top2_blocks", __name__, _HOST, accepts=accepts_top2_blocks)
register("top2_update", __name__, _HOST, accepts=accepts_top2_update)
register("f_blocks", __name__, _HOST, accepts=accepts_f_blocks)


def partition_objective(
    x: Any, labels: Any, offsets: Any, *, eps: float = 1e-8, backend: str = "auto"
) -> Any:
    """f [B] float64: f(P) of each CSR segment's partition, in the kind of ``x`` (NumPy, or a torch
    tensor on x's device).

    x [N, d] real, finite; labels [N] integers in [0, 2**31) local to each segment (unused values
    ignored); offsets [B+1] CSR; eps > 0. Bad input raises ``ValueError`` naming the argument.
    """
    name = resolve_backend("partition_objective", backend, on_cuda=is_cuda_tensor(x))
    host_cpu = name == "cpu" and not is_torch(x)
    # the C++ kernel's pass over x checks finiteness (``accepts_partition_objective`` states it)
    x, lab, off, eps = partition_inputs(x, labels, offsets, eps, finite=not host_cpu)
    impl = implementation("partition_objective", name)
    if host_cpu:
        f, nonfinite = cpu.partition_objective_counted(x, lab, off, eps=eps)
        if nonfinite:
            check_finite("x", x)  # names the rows (a float64 overflow of finite rows passes, as before)
    elif name in GPU_BACKENDS:  # device backends get device tensors (host input uploaded once, here)
        dev = gpu_device(name, x)
        f = impl(to_backend(x, name, device=dev), to_backend(lab, name, device=dev), off, eps=eps)
    elif name == "cpu":  # float32 or float64 read in place, accumulated in float64 inside the kernel
        f = impl(host(x), lab, off, eps=eps)
    else:  # the reference takes float64
        f = impl(host(x, np.float64), lab, off, eps=eps)
    return as_caller(np.asarray(f, dtype=np.float64) if not is_torch(f) else f, x)


def score_candidates(state: PartitionState, candidates: Candidates, *, backend: str = "auto") -> np.ndarray:
    """f_after [C] float64 (NumPy): f(P) of the candidate's memory after applying each candidate alone.

    ``state`` holds host arrays, so ``auto`` picks the host path; ``backend="triton"`` / ``"cuda"``
    upload the state and candidates and bring the scores back.
    """
    candidate_inputs(state, candidates)
    name = resolve_backend("score_candidates", backend, on_cuda=is_cuda_tensor(state.x))
    if candidates.n == 0:
        return np.zeros(0, dtype=np.float64)
    return np.asarray(host(implementation("score_candidates", name)(state, candidates)), dtype=np.float64)


def candidate_gains(state: PartitionState, candidates: Candidates, *, backend: str = "auto") -> np.ndarray:
    """f_after - f_before for each candidate."""
    return score_candidates(state, candidates, backend=backend) - state.f[candidates.memory]


__all__ = [
    "Candidates",
    "PartitionState",
    "ThemeTop2",
    "candidate_gains",
    "partition_objective",
    "score_candidates",
]
