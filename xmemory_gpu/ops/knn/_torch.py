"""Input preparation shared by the GPU backends of the kNN family (cuda, triton)."""

from __future__ import annotations

from typing import Any

import numpy as np


def host_offsets(off: Any) -> np.ndarray:
    """Host int64 copy of CSR offsets [B+1] (NumPy, list or torch on any device)."""
    if type(off).__module__.startswith("torch"):
        off = off.detach().cpu().numpy()
    off = np.asarray(off, dtype=np.int64).reshape(-1)
    if off.size < 1:
        raise ValueError("offsets must have at least one entry (B+1)")
    return off


def unit_rows_f32(x):
    """x [n, d] torch, any float dtype -> float32 contiguous unit rows (zero rows stay zero)."""
    import torch

    x = x.detach().to(torch.float32)
    n = torch.linalg.vector_norm(x, dim=1, keepdim=True)
    return (x / torch.where(n > 0, n, torch.ones_like(n))).contiguous()
