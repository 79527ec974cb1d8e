"""The de-duplication's sequential rule over one block of new rows in NumPy (``ops.dedup``): the
steps ``csrc/cpu/dedup.cpp`` is tested against, decision for decision. Screens and candidate floors
are float64 (the float32 gram entries widened exactly), on both sides."""

from __future__ import annotations

import numpy as np

TIE_TOL = 1e-4  # BLAS cosines this close to a row's best are re-scored exactly


def exact_cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Row-wise dot products of ``a`` [k, d] and ``b`` [k, d] (float32) as float64 [k]: exact
    products, summed left to right. The same two vectors give the same value wherever they sit,
    which a BLAS product does not promise (its edge tiles may add in another order: on AMD's AVX2
    kernels two identical columns can differ in the last bit)."""
    return (
        np.cumsum(a.astype(np.float64) * b.astype(np.float64), axis=1)[:, -1]
        if a.shape[1]
        else np.zeros(len(a))
    )


def first_best(
    sims: np.ndarray, rows: np.ndarray, cols: np.ndarray, tie_tol: float = TIE_TOL
) -> tuple[np.ndarray, np.ndarray]:
    """Per row of ``sims`` [m, n] (``rows @ cols.T`` from BLAS): the largest exact cosine
    (:func:`exact_cosines`, over the columns within ``tie_tol`` of the row's BLAS best, compared in
    float64) and its column, the first of equals: ([m] float64, [m] int64); -inf and -1 when there are
    no columns."""
    m, n = sims.shape
    best, arg = np.full(m, -np.inf), np.full(m, -1, np.int64)
    if n == 0 or m == 0:
        return best, arg
    # in float64: each row's best entry less tie_tol, the entries (float32 widened exactly) against it
    r, j = np.nonzero(sims.astype(np.float64) >= (sims.max(axis=1).astype(np.float64) - tie_tol)[:, None])
    if r.size == 0:  # every row's similarities NaN: no candidate
        return best, arg
    exact = exact_cosines(rows[r], cols[j])
    order = np.lexsort((j, -exact, r))  # per row: the largest value, then the first column
    head = order[np.r_[True, r[order][1:] != r[order][:-1]]]
    best[r[head]], arg[r[head]] = exact[head], j[head]
    return best, arg


def dedup_block(
    inner: np.ndarray,
    rows: np.ndarray,
    best: np.ndarray,
    arg: np.ndarray,
    threshold: float,
    tie_tol: float,
    base: int,
) -> np.ndarray:
    """Row i of the block merges into the most similar earlier kept row: its best against earlier
    blocks (``best`` [m] float64, ``arg`` [m] int64) or a row of this block kept before it (screened
    on ``inner`` [m, m], the block's gram, re-scored exactly: :func:`first_best`; target ``base`` +
    its position among the block's kept rows), when the cosine exceeds ``threshold``. Returns
    target [m] int64, -1 kept."""
    target = np.full(len(rows), -1, np.int64)
    local: list[int] = []  # rows of this block kept so far
    for li in range(len(rows)):
        b, t = float(best[li]), int(arg[li])
        if local:
            sims = inner[li : li + 1, local]
            # exact scores only where they can decide: a candidate clearly below both the best so far
            # and the threshold changes nothing (most rows: no duplicate in the block); the screen in
            # float64 (a NaN entry fails it)
            if float(sims.max()) >= max(b, threshold) - tie_tol:
                w, k = first_best(sims, rows[li : li + 1], rows[local], tie_tol)
                if w[0] > b:
                    b, t = w[0], base + int(k[0])
        if t >= 0 and b > threshold:
            target[li] = t
        else:
            local.append(li)
    return target
