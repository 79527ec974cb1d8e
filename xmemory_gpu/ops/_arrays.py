"""Array plumbing shared by the ops: NumPy or torch in, the same kind out."""

from __future__ import annotations

from typing import Any

import numpy as np


def is_torch(x: Any) -> bool:
    return type(x).__module__.startswith("torch")


def to_numpy(x: Any, dtype: Any = None) -> np.ndarray:
    """A host NumPy view/copy of ``x`` (NumPy array, list or torch tensor on any device)."""
    if is_torch(x):
        x = x.detach()
        if x.dtype.is_floating_point and x.dtype not in (_torch().float32, _torch().float64):
            x = x.float()
        x = x.cpu().numpy()
    arr = np.asarray(x)
    if dtype is not None and arr.dtype != dtype:
        arr = arr.astype(dtype)
    return arr


def like(result: np.ndarray, ref: Any) -> Any:
    """Return ``result`` as the same kind as ``ref``: a torch tensor on ref's device, or NumPy."""
    if is_torch(ref):
        return _torch().from_numpy(np.ascontiguousarray(result)).to(ref.device)
    return result


def check_offsets(offsets: np.ndarray, n_rows: int, name: str = "offsets") -> np.ndarray:
    """Validate CSR offsets ``[B+1]`` (int64, non-decreasing, 0 .. n_rows); return them as int64."""
    off = np.asarray(offsets)
    if off.ndim != 1 or off.size < 1:
        raise ValueError(f"{name}: expected a 1-D array of B+1 offsets, got shape {off.shape}")
    if not np.issubdtype(off.dtype, np.integer):
        raise ValueError(f"{name}: expected integer offsets, got dtype {off.dtype}")
    off = off.astype(np.int64, copy=False)
    if off[0] != 0 or off[-1] != n_rows:
        raise ValueError(f"{name}: must start at 0 and end at the row count {n_rows}, got {off[0]}..{off[-1]}")
    if np.any(np.diff(off) < 0):
        raise ValueError(f"{name}: must be non-decreasing")
    return off


def _torch():
    import torch

    return torch


def csr_offsets(counts) -> np.ndarray:
    """CSR offsets [len(counts)+1] int64 from per-segment counts."""
    counts = np.asarray(counts, dtype=np.int64).reshape(-1)
    off = np.zeros(counts.size + 1, dtype=np.int64)
    np.cumsum(counts, out=off[1:])
    return off
