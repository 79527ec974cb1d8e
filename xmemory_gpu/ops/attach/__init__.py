"""Theme attach: a memory's new semantic rows join, in order, the live theme whose centroid is most
similar (cosine >= ``attach_threshold``, or >= ``lenient_floor`` when that theme holds fewer than
``size_cap`` rows; ties to the earliest slot) or open a new theme, each decision on the sums as the
rows before it left them (``construct/theme_state.py``). A cosine is dot(sum, x) / |sum| in float64
by ``dot4``, the fixed order of the f(P) and k-means kernels (``csrc/include/xmemory/dot4.inc``), so
``reference`` (NumPy) and ``cpu`` (C++, ``csrc/cpu/attach.cpp``) decide alike to the last bit, on any
ISA. The theme columns are edited in place. Host only."""

from __future__ import annotations

import numpy as np

from ..backends import host_backend, implementation, register, resolve_backend

_ALL = {"reference": "reference", "cpu": "cpu"}
register("attach_rows", __name__, _ALL)


def attach_rows(x: np.ndarray, rows: np.ndarray, sums: np.ndarray, counts: np.ndarray, alive: np.ndarray,
                ids: np.ndarray, label: np.ndarray, n_slots: int, next_id: int, *, attach_threshold: float,
                lenient_floor: float, size_cap: int, backend: str = "auto") -> tuple[int, int, bool]:
    """Attach node rows ``rows`` [m] of x [n, d] float32 (unit rows) in order. The columns, edited in
    place: ``sums`` [cap, d] float64, ``counts`` [cap] int64, ``alive`` [cap] bool, ``ids`` [cap] int64
    (slots in opening order; ``n_slots`` used, cap >= n_slots + m), ``label`` [n] int64 (theme id per
    node). A joined theme adds the row to its sum; an opened one takes slot ``n_slots``, id ``next_id``
    and the next ones after. Returns (n_slots, next_id, whether a row joined an existing theme)."""
    name = resolve_backend("attach_rows", host_backend(backend) if backend == "auto" else backend, on_cuda=False)
    rows = np.ascontiguousarray(rows, dtype=np.int64).reshape(-1)
    if x.ndim != 2 or x.dtype != np.float32:
        raise ValueError(f"x: expected [n, d] float32, got {x.dtype} of shape {x.shape}")
    if rows.size and (rows.min() < 0 or rows.max() >= x.shape[0]):
        raise ValueError(f"rows: expected node rows in [0, {x.shape[0]})")
    if n_slots + rows.size > sums.shape[0]:
        raise ValueError(f"sums: {sums.shape[0]} slots cannot take {rows.size} new ones after {n_slots}")
    n_slots, next_id, joined = implementation("attach_rows", name)(
        x, rows, sums, counts, alive, ids, label, int(n_slots), int(next_id), float(attach_threshold),
        float(lenient_floor), int(size_cap))
    return int(n_slots), int(next_id), bool(joined)


__all__ = ["attach_rows"]
