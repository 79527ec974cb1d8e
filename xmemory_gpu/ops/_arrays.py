"""Array plumbing shared by the ops: NumPy or torch in, the same kind out.

Thin aliases over ``_dispatch`` (the one I/O contract), kept for the modules that import them here.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from . import _dispatch
from ._dispatch import csr_offsets, is_torch

__all__ = ["check_offsets", "csr_offsets", "is_torch", "like", "to_numpy"]


def to_numpy(x: Any, dtype: Any = None) -> np.ndarray:
    """A host NumPy view/copy of ``x`` (NumPy array, list or torch tensor on any device)."""
    return _dispatch.host(x, dtype)


def like(result: np.ndarray, ref: Any) -> Any:
    """Return ``result`` as the same kind as ``ref``: a torch tensor on ref's device, or NumPy."""
    return _dispatch.as_caller(result, ref)


def check_offsets(offsets: Any, n_rows: int, name: str = "offsets") -> np.ndarray:
    """Validate CSR offsets ``[B+1]`` (integers, non-decreasing, 0 .. n_rows); return them as int64."""
    return _dispatch.check_offsets(name, offsets, n_rows)
