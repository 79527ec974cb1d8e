"""The sparsity-semantics objective f(P): batched evaluation, incremental candidate scoring and the
partition state they share, kept in place under edits. Split proposals
live with the theme code (``construct/theme_split.py``, their k-means in ``ops/kmeans``)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..backends import GPU_BACKENDS, implementation, register, resolve_backend
from ..checks import (
    check_finite,
    check_float_matrix,
    check_index,
    check_labels,
    check_offsets,
    check_positive,
    check_same_segments,
)
from ..devices import as_caller, gpu_device, host, is_cuda_tensor, is_torch, to_backend
from . import cpu
from .state import Candidates, PartitionState

_ALL = {"reference": "reference", "cpu": "cpu", "triton": "triton", "cuda": "cuda"}  # backend -> module
register("partition_objective", __name__, _ALL)
register("score_candidates", __name__, _ALL)
for _op in ("theme_sums", "top2_blocks", "f_blocks"):  # the partition state's blocks (host only)
    register(_op, __name__, {"reference": "reference", "cpu": "cpu"})


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
    x = check_float_matrix("x", x, finite=not host_cpu)  # the C++ kernel's pass over x checks it
    n = int(x.shape[0])
    lab = check_labels("labels", labels, n)
    off = check_offsets("offsets", offsets, n)
    eps = check_positive("eps", eps)
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


def _check_candidates(state: PartitionState, cands: Candidates) -> None:
    """Index ranges of a candidate batch against its state (before any native code runs)."""
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


def score_candidates(state: PartitionState, candidates: Candidates, *, backend: str = "auto") -> np.ndarray:
    """f_after [C] float64 (NumPy): f(P) of the candidate's memory after applying each candidate alone.

    ``state`` holds host arrays, so ``auto`` picks the host path; ``backend="triton"`` / ``"cuda"``
    upload the state and candidates and bring the scores back.
    """
    name = resolve_backend("score_candidates", backend, on_cuda=is_cuda_tensor(state.x))
    if candidates.n == 0:
        return np.zeros(0, dtype=np.float64)
    _check_candidates(state, candidates)
    return np.asarray(host(implementation("score_candidates", name)(state, candidates)), dtype=np.float64)


def candidate_gains(state: PartitionState, candidates: Candidates, *, backend: str = "auto") -> np.ndarray:
    """f_after - f_before for each candidate."""
    return score_candidates(state, candidates, backend=backend) - state.f[candidates.memory]


__all__ = ["Candidates", "PartitionState", "candidate_gains", "partition_objective", "score_candidates"]
