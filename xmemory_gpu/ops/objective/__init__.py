"""The sparsity-semantics objective f(P): batched evaluation, incremental candidate scoring and the
partition state they share, kept in place under edits (DESIGN sections 1 and 4). Split proposals
live with the theme code (``construct/themes/split.py``)."""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import _dispatch as dp
from . import cpu, cuda, reference
from .state import Candidates, PartitionState


def _triton_objective(*args: Any, **kw: Any):
    from . import triton as impl  # imported on first use: importing triton is slow and optional

    return impl.partition_objective(*args, **kw)


def _triton_score(*args: Any, **kw: Any):
    from . import triton as impl

    return impl.score_candidates(*args, **kw)


_OBJECTIVE = {"reference": reference.partition_objective, "cpu": cpu.partition_objective, "cuda": cuda.partition_objective,
              "triton": _triton_objective}
_SCORE = {"reference": reference.score_candidates, "cpu": cpu.score_candidates, "cuda": cuda.score_candidates,
          "triton": _triton_score}


def partition_objective(x: Any, labels: Any, offsets: Any, *, eps: float = 1e-8, backend: str = "auto") -> Any:
    """f [B] float64: f(P) of each CSR segment's partition, in the kind of ``x`` (NumPy, or a torch
    tensor on x's device).

    x [N, d] real, finite; labels [N] integers in [0, 2**31) local to each segment (unused values
    ignored); offsets [B+1] CSR; eps > 0. Bad input raises ``ValueError`` naming the argument.
    """
    name = dp.resolve_backend("partition_objective", backend, tuple(_OBJECTIVE), on_cuda=dp.is_cuda_tensor(x))
    host_cpu = name == "cpu" and not dp.is_torch(x)
    x = dp.check_float_matrix("x", x, finite=not host_cpu)  # the C++ kernel's pass over x checks it
    n = int(x.shape[0])
    lab = dp.check_labels("labels", labels, n)
    off = dp.check_offsets("offsets", offsets, n)
    eps = dp.check_positive("eps", eps)
    if host_cpu:
        f, nonfinite = cpu.partition_objective_counted(x, lab, off, eps=eps)
        if nonfinite:
            dp.check_finite("x", x)  # names the rows (a float64 overflow of finite rows passes, as before)
    elif name == "triton" or (name == "cuda" and dp.is_cuda_tensor(x)):  # device tensors stay on the device
        dev = dp.gpu_device(name, x)
        f = _OBJECTIVE[name](dp.to_backend(x, name, device=dev), dp.to_backend(lab, name, device=dev), off, eps=eps)
    elif name == "cpu":  # float32 or float64 read in place, accumulated in float64 inside the kernel
        f = _OBJECTIVE[name](dp.host(x), lab, off, eps=eps)
    else:  # the reference takes float64; cuda.py uploads host input itself
        f = _OBJECTIVE[name](dp.host(x, np.float64), lab, off, eps=eps)
    return dp.as_caller(np.asarray(f, dtype=np.float64) if not dp.is_torch(f) else f, x)


def _check_candidates(state: PartitionState, cands: Candidates) -> None:
    """Index ranges of a candidate batch against its state (before any native code runs)."""
    n_mem = len(state.offsets) - 1
    k = int(state.theme_sum.shape[0])
    c = cands.n
    mem = dp.check_index("candidates.memory", cands.memory, n_mem, allow_missing=False)
    if mem.shape != (c,):
        raise ValueError(f"candidates.memory: expected shape ({c},), got {mem.shape}")
    ro = dp.check_offsets("candidates.rem_offsets", cands.rem_offsets, int(np.size(cands.rem_rows)))
    ao = dp.check_offsets("candidates.add_offsets", cands.add_offsets, int(np.size(cands.group_offsets)) - 1)
    dp.check_same_segments("candidates.rem_offsets", ro, "candidates.add_offsets", ao)
    if len(ro) != c + 1:
        raise ValueError(f"candidates.rem_offsets: expected {c + 1} entries, got {len(ro)}")
    rr = dp.check_index("candidates.rem_rows", cands.rem_rows, k, allow_missing=False)
    t_off = np.asarray(state.theme_offsets, dtype=np.int64)
    owner = np.repeat(mem, np.diff(ro))
    if rr.size and (np.any(rr < t_off[owner]) or np.any(rr >= t_off[owner + 1])):
        bad = int(np.flatnonzero((rr < t_off[owner]) | (rr >= t_off[owner + 1]))[0])
        raise ValueError(f"candidates.rem_rows: theme row {int(rr[bad])} (entry {bad}) is not a theme of its candidate's memory")
    dp.check_offsets("candidates.group_offsets", cands.group_offsets, int(np.size(cands.members)))
    dp.check_index("candidates.members", cands.members, int(np.asarray(state.x).shape[0]), allow_missing=False)


def score_candidates(state: PartitionState, candidates: Candidates, *, backend: str = "auto") -> np.ndarray:
    """f_after [C] float64 (NumPy): f(P) of the candidate's memory after applying each candidate alone.

    ``state`` holds host arrays, so ``auto`` picks the host path; ``backend="triton"`` / ``"cuda"``
    upload the state and candidates and bring the scores back.
    """
    name = dp.resolve_backend("score_candidates", backend, tuple(_SCORE), on_cuda=dp.is_cuda_tensor(state.x))
    if candidates.n == 0:
        return np.zeros(0, dtype=np.float64)
    _check_candidates(state, candidates)
    return np.asarray(dp.host(_SCORE[name](state, candidates)), dtype=np.float64)


def candidate_gains(state: PartitionState, candidates: Candidates, *, backend: str = "auto") -> np.ndarray:
    """f_after - f_before for each candidate."""
    return score_candidates(state, candidates, backend=backend) - state.f[candidates.memory]


__all__ = ["Candidates", "PartitionState", "candidate_gains", "partition_objective", "score_candidates"]
