"""The input contracts of the partition state's blocks (``state.theme_sums``, ``top2_blocks``,
``top2_update``, ``f_blocks``): what ``csrc/cpu/partition.cpp`` and ``rows.cpp`` refuse (shapes, CSR offsets from 0 to
their rows' count, rows in range, labels >= 0, n below 2**31) and labels below 2**31, as ``accepts``
predicates (None in contract, else a one-line reason naming the argument), checked by each block's
dispatcher before any backend. x of another dtype than C-contiguous float64 is in contract (the NumPy
steps take it)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..checks import LABEL_BOUND, check_finite_scalar, check_ids, check_labels, check_offsets, reason


def _vector(name: str, a: Any, n: int | None, kinds: str) -> np.ndarray:
    a = np.asarray(a)
    if a.ndim != 1 or (n is not None and a.shape[0] != n):
        raise ValueError(f"{name}: expected shape ({'n' if n is None else n},), got {a.shape}")
    if a.size and a.dtype.kind not in kinds:
        raise ValueError(
            f"{name}: expected {'integers' if kinds == 'iu' else 'real values'}, got dtype {a.dtype}"
        )
    return a


def _real_matrix(name: str, a: Any) -> np.ndarray:
    a = np.asarray(a)
    if a.ndim != 2 or a.dtype.kind not in "fiu":
        raise ValueError(f"{name}: expected a real [n, d] array, got {a.dtype} of shape {a.shape}")
    return a


def theme_sums_inputs(x: Any, rows: Any, labels: Any, row_off: Any, kept: Any = None) -> None:
    """x [N, d] real; rows [M] in [0, N); labels [M] in [0, 2**31); row_off [nb+1] CSR over M; kept None or
    its theme_off [nb+1] CSR over T0, theme_label [T0], theme_sum [T0, d], keep [T0] bool, tail [nb]."""
    x = _real_matrix("x", x)
    rows = _vector("rows", rows, None, "iu")
    m = rows.shape[0]
    check_ids("rows", rows, x.shape[0])
    check_labels("labels", labels, m, bound=LABEL_BOUND)
    off = check_offsets("row_off", row_off, m)
    if kept is None:
        return
    nb = len(off) - 1
    t0 = int(np.size(kept.theme_label))
    ko = check_offsets("kept.theme_off", kept.theme_off, t0)
    if len(ko) != nb + 1:
        raise ValueError(
            f"kept.theme_off: expected {nb + 1} entries (one block per row_off's), got {len(ko)}"
        )
    _vector("kept.theme_label", kept.theme_label, t0, "iu")
    ts = _real_matrix("kept.theme_sum", kept.theme_sum)
    if ts.shape != (t0, x.shape[1]):
        raise ValueError(f"kept.theme_sum: expected shape ({t0}, {x.shape[1]}), got {ts.shape}")
    if np.asarray(kept.keep).shape != (t0,) or np.asarray(kept.keep).dtype != np.bool_:
        raise ValueError(
            f"kept.keep: expected ({t0},) bool, got {np.asarray(kept.keep).dtype} {np.shape(kept.keep)}"
        )
    _vector("kept.tail", kept.tail, nb, "iu")


def accepts_theme_sums(
    x: Any, rows: Any, labels: Any, row_off: Any, kept: Any = None, *, backend: str = "auto"
) -> str | None:
    """x [N, d] real, rows [M] in [0, N), labels [M] in [0, 2**31), row_off [nb+1] CSR over M, kept None or
    blocks of one count with sums of x's d."""
    return reason(theme_sums_inputs, x, rows, labels, row_off, kept)


def top2_inputs(unit: Any, theme_off: Any) -> None:
    """unit [T, d] real, theme_off [nb+1] CSR over T."""
    unit = _real_matrix("unit", unit)
    check_offsets("theme_off", theme_off, unit.shape[0])


def accepts_top2_blocks(unit: Any, theme_off: Any, *, backend: str = "auto") -> str | None:
    """unit [T, d] real, theme_off [nb+1] CSR over T."""
    return reason(top2_inputs, unit, theme_off)


def top2_update_inputs(unit: Any, theme_off: Any, fresh: Any, prev_idx: Any, prev_cos: Any) -> None:
    """``top2_inputs``, and fresh [T] bool, prev_idx [T, 2] integers each -1 or a local row of its
    block, prev_cos [T, 2] real."""
    unit = _real_matrix("unit", unit)
    t = unit.shape[0]
    off = check_offsets("theme_off", theme_off, t)
    fr = np.asarray(fresh)
    if fr.shape != (t,) or fr.dtype != np.bool_:
        raise ValueError(f"fresh: expected ({t},) bool, got {fr.dtype} of shape {fr.shape}")
    pi = np.asarray(prev_idx)
    if pi.shape != (t, 2) or (pi.size and pi.dtype.kind not in "iu"):
        raise ValueError(f"prev_idx: expected ({t}, 2) integers, got {pi.dtype} of shape {pi.shape}")
    pc = np.asarray(prev_cos)
    if pc.shape != (t, 2) or (pc.size and pc.dtype.kind not in "fiu"):
        raise ValueError(f"prev_cos: expected ({t}, 2) real values, got {pc.dtype} of shape {pc.shape}")
    k = np.repeat(np.diff(off), np.diff(off))[:, None]
    if pi.size and ((pi < -1) | (pi >= k)).any():
        raise ValueError("prev_idx: each entry must be -1 or a local row of its block")


def accepts_top2_update(
    unit: Any, theme_off: Any, fresh: Any, prev_idx: Any, prev_cos: Any, *, backend: str = "auto"
) -> str | None:
    """unit [T, d] real, theme_off [nb+1] CSR over T, fresh [T] bool, prev_idx [T, 2] -1 or local rows,
    prev_cos [T, 2] real."""
    return reason(top2_update_inputs, unit, theme_off, fresh, prev_idx, prev_cos)


def f_blocks_inputs(norms: Any, counts: Any, s: Any, theme_off: Any, n: Any, eps: Any) -> None:
    """norms, counts (integers), s [T]; theme_off [nb+1] CSR over T; n [nb] integers in [0, 2**31);
    eps a finite number."""
    t = _vector("norms", norms, None, "fiu").shape[0]
    _vector("counts", counts, t, "iu")
    _vector("s", s, t, "fiu")
    off = check_offsets("theme_off", theme_off, t)
    nv = _vector("n", n, len(off) - 1, "iu")
    if nv.size and int(nv.max()) >= 2**31:
        raise ValueError(f"n: node counts must be below 2**31 (n * n exact in int64), got {int(nv.max())}")
    if nv.size and int(nv.min()) < 0:
        raise ValueError(f"n: node counts must be >= 0, got {int(nv.min())}")
    check_finite_scalar("eps", eps)


def accepts_f_blocks(
    norms: Any, counts: Any, s: Any, theme_off: Any, n: Any, eps: Any, *, backend: str = "auto"
) -> str | None:
    """norms, counts, s [T]; theme_off [nb+1] CSR over T; n [nb] integers in [0, 2**31); eps finite."""
    return reason(f_blocks_inputs, norms, counts, s, theme_off, n, eps)


__all__ = [
    "accepts_f_blocks",
    "accepts_theme_sums",
    "accepts_top2_blocks",
    "accepts_top2_update",
    "f_blocks_inputs",
    "theme_sums_inputs",
    "top2_inputs",
    "top2_update_inputs",
]
