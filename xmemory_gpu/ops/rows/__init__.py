"""Row-wise helpers on host arrays (the construction's exact-bit arithmetic), each an op of the
registry with a ``reference`` (NumPy, ``reference.py``) and a ``cpu`` backend (C++, ``cpu.py``: one
pass where the inputs are of the types the kernel takes, else the NumPy steps), equal to the bit. Sums
that decide something take one fixed order, ``sum4`` / ``dot4`` (``csrc/include/xmemory/dot4.inc``),
written alike in both.
``backend="auto"`` runs ``cpu`` when built (``XMEMORY_BACKEND`` overrides it, a GPU name meaning the
host's best), ``"reference"`` the NumPy steps."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..backends import host_implementation, register
from ..checks import refuse
from ..devices import host
from .contract import ACCEPTS
from .reference import dot4, sum4

_ALL = {"reference": "reference", "cpu": "cpu"}
OPS = (
    "add_rows_in_order",
    "live_rows",
    "take_rows2",
    "row_norms",
    "segment_sums",
    "unit_rows",
    "dot4_gram",
    "drift_runs",
)
for _op in OPS:
    register(_op, __name__, _ALL, accepts=ACCEPTS[_op])


def add_rows_in_order(
    sums: np.ndarray, group: np.ndarray, x: np.ndarray, rows: np.ndarray, *, backend: str = "auto"
) -> None:
    """``np.add.at(sums, group, x[rows])``, bit for bit, in place: each group's sum continues from its
    current value with its rows in the given order. sums float64 [k, d], group [m] in [0, k) (the C++
    pass refuses another index with ``ValueError``, where add.at would wrap a negative one), x [N, d]
    float32 or float64, rows [m] in [0, N). ``cpu``: one C++ pass; ``reference``: step i adds the i-th
    row of every group that has one."""
    refuse(ACCEPTS["add_rows_in_order"](sums, group, x, rows))
    if group.size == 0:
        return
    host_implementation("add_rows_in_order", backend)(sums, group, x, rows)


def live_rows(
    items: list[tuple[np.ndarray, np.ndarray, int]], d: int, *, backend: str = "auto"
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The live slots of many column sets, each ``(alive [cap] bool, sums [cap, d] float64, n_slots)``:
    (slots [L] int64, item b's the live s < n_slots ascending at ``slots[off[b]:off[b+1]]``; off [B+1]
    int64; rows [L, d] float64 their sums), the bits of concatenating each item's
    ``sums[np.flatnonzero(alive[:n_slots])]``. ``cpu``: one C++ pass when the columns are C-contiguous
    bool / float64."""
    refuse(ACCEPTS["live_rows"](items, d))
    return host_implementation("live_rows", backend)(items, d)


def take_rows2(a: np.ndarray, b: np.ndarray, take: np.ndarray, *, backend: str = "auto") -> np.ndarray:
    """``np.concatenate([a, b])[take]`` (a [na, ...], b [nb, ...] of one numeric dtype and row shape,
    take [n] in [0, na + nb)) without forming the concatenation on ``cpu``: one copy of the rows taken."""
    refuse(ACCEPTS["take_rows2"](a, b, take))
    return host_implementation("take_rows2", backend)(a, b, take)


def row_norms(x: Any, *, keepdims: bool = False, backend: str = "auto") -> np.ndarray:
    """Euclidean norms of the rows of a real x [m, d] (taken as float64): [m] (or [m, 1]) float64,
    ``sqrt(dot4(x_i, x_i))``, the same bits on every CPU. ``cpu``: one C++ pass; ``reference``: NumPy
    ``dot4``."""
    refuse(ACCEPTS["row_norms"](x))
    x = _matrix("row_norms", x)
    return host_implementation("row_norms", backend)(x, keepdims)


def segment_sums(v: np.ndarray, off: np.ndarray, *, backend: str = "auto") -> np.ndarray:
    """The sum of every segment b of v [n] float64, ``v[off[b]:off[b + 1]]`` (off [nb+1]), in ``sum4``'s
    fixed order: [nb], the same bits on every CPU. ``cpu``: one C++ call; ``reference``: NumPy ``sum4``
    per segment."""
    refuse(ACCEPTS["segment_sums"](v, off))
    v = np.ascontiguousarray(v, dtype=np.float64)
    off = np.ascontiguousarray(off, dtype=np.int64)
    return host_implementation("segment_sums", backend)(v, off)


def unit_rows(x: Any, *, dtype: Any = np.float64, backend: str = "auto") -> np.ndarray:
    """[n, d] rows divided by their ``row_norms`` in float64 (zero rows stay zero), returned as
    ``dtype`` (float64, or float32 rounded from them); x any real array, host or device. ``cpu``: one
    C++ pass; ``reference``: the NumPy steps."""
    refuse(ACCEPTS["unit_rows"](x, dtype=dtype))
    x = _matrix("unit_rows", x)
    dtype = np.dtype(dtype)
    return host_implementation("unit_rows", backend)(x, dtype)


def _matrix(op: str, x: Any) -> np.ndarray:
    """x as a C-contiguous float64 [m, d] host array, else ``ValueError`` naming the op."""
    x = np.ascontiguousarray(host(x), dtype=np.float64)
    if x.ndim != 2:
        raise ValueError(f"{op}: x must be [m, d], got shape {x.shape}")
    return x


def row_sum_in_order(m: np.ndarray) -> np.ndarray:
    """The rows of m [r, d] added one after another from zero in float64: [d], the k-means centre sums
    as the C++ loop adds them (``csrc/cpu/kmeans_runs.inc``)."""
    acc = np.zeros(m.shape[1])
    for row in np.asarray(m, np.float64):
        acc += row
    return acc


def dot4_gram(a: Any, b: Any, *, backend: str = "auto") -> np.ndarray:
    """``dot4`` of every row of a [n, d] with every row of b [m, d] (real, taken as float64): [n, m]
    float64, the same bits on every CPU (a BLAS product's depend on its kernel). ``cpu``: one C++ call;
    ``reference``: NumPy ``dot4``."""
    refuse(ACCEPTS["dot4_gram"](a, b))
    a = np.ascontiguousarray(host(a), dtype=np.float64)
    b = np.ascontiguousarray(host(b), dtype=np.float64)
    return host_implementation("dot4_gram", backend)(a, b)


def drift_runs(
    x: Any, hard: np.ndarray, min_messages: int, drift_threshold: float, *, backend: str = "auto"
) -> np.ndarray:
    """The starts [r] int64 (0 first) of runs of x [n, d] unit rows (n >= 1): a run is cut before
    row i when ``hard[i]`` or, once it holds ``min_messages`` rows, when the cosine of x_i to the run's
    float64 sum, ``dot4(x_i, s) / sqrt(dot4(s, s))``, is below ``drift_threshold``. ``cpu``: one C++
    pass when x is float32 and ``min_messages`` an int, else the loop of ``reference`` (rows of another
    real dtype are read as they are, not cast to float32)."""
    refuse(ACCEPTS["drift_runs"](x, hard, min_messages, drift_threshold))
    x = np.asarray(host(x))
    hard = np.ascontiguousarray(hard, dtype=bool)
    return host_implementation("drift_runs", backend)(x, hard, min_messages, drift_threshold)


__all__ = [
    "OPS",
    "add_rows_in_order",
    "dot4",
    "dot4_gram",
    "drift_runs",
    "live_rows",
    "row_norms",
    "row_sum_in_order",
    "segment_sums",
    "sum4",
    "take_rows2",
    "unit_rows",
]
