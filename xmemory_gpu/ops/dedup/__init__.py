"""The statements' de-duplication, its sequential part: within a block of new rows, in order, each
row merges into the most similar earlier row kept so far when the cosine exceeds the threshold,
else it is kept (``construct/semantic.py::match_duplicates`` runs it block by block). Candidates are
screened on the block's BLAS gram (its float32 entries compared in float64) and re-scored exactly (float64 products of the float32 entries
summed left to right, the first of equals winning), so every backend takes the same decisions on
any CPU. Host only: ``reference`` (NumPy, ``reference.py``) and ``cpu`` (C++,
``csrc/cpu/dedup.cpp``), equal decision for decision."""

from __future__ import annotations

import numpy as np

from ..backends import host_implementation, register
from .contract import accepts_dedup_block, dedup_inputs
from .reference import TIE_TOL, exact_cosines, first_best

register("dedup_block", __name__, {"reference": "reference", "cpu": "cpu"}, accepts=accepts_dedup_block)


def dedup_block(
    inner: np.ndarray,
    rows: np.ndarray,
    best: np.ndarray,
    arg: np.ndarray,
    threshold: float,
    base: int,
    *,
    tie_tol: float = TIE_TOL,
    backend: str = "auto",
) -> np.ndarray:
    """The rule over one block: rows [m, d] (float32 for the ``cpu`` pass), inner [m, m] their gram
    (``rows @ rows.T``), best [m] (taken as float64) and arg [m] (int64) each row's best cosine and
    target against earlier rows (-inf and -1 none), ``base`` the target of the block's first kept row.
    ``threshold`` and ``tie_tol`` are taken as float64, and every comparison of the screen is made in
    float64 on every backend. Returns target [m] int64: where each row merges, -1 when kept."""
    best, arg, threshold, tie_tol, base = dedup_inputs(inner, rows, best, arg, threshold, base, tie_tol)
    return host_implementation("dedup_block", backend)(inner, rows, best, arg, threshold, tie_tol, base)


__all__ = ["TIE_TOL", "dedup_block", "exact_cosines", "first_best"]
