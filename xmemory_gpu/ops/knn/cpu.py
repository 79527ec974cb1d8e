"""C++ CPU path for the kNN family (``xmemory_gpu._C.knn_topk``: OpenMP over (segment, query
tile) items, register-blocked dot blocks, a bounded top-k per row; never N x N)."""

from __future__ import annotations

import numpy as np


def _c():
    from ... import _C

    return _C


def _f32(x) -> np.ndarray:
    return np.ascontiguousarray(x, dtype=np.float32)


def knn_graph(
    x: np.ndarray, offsets: np.ndarray, k: int, *, drop_nonpositive: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    x = _f32(x)
    return _c().knn_topk(x, offsets, x, offsets, k, True, drop_nonpositive)


def knn_search(
    q, q_offsets, x, x_offsets, k: int, *, drop_nonpositive: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    return _c().knn_topk(_f32(q), q_offsets, _f32(x), x_offsets, k, False, drop_nonpositive)


# ---- ``KnnGraph``'s upkeep steps (``graph.py``) ------------------------------------------------------


def topk_select(
    sims: np.ndarray, ids: np.ndarray, k: int, drop_nonpositive: bool
) -> tuple[np.ndarray, np.ndarray]:
    """``reference.topk_select`` in one C++ call."""
    return _c().topk_select(
        np.ascontiguousarray(sims, np.float32), np.ascontiguousarray(ids, np.int64), k, drop_nonpositive
    )


def offer_rows(
    dots: np.ndarray,
    others: np.ndarray,
    cand: np.ndarray,
    idx: np.ndarray,
    sim: np.ndarray,
    drop_nonpositive: bool,
) -> None:
    """``reference.offer_rows`` in one C++ pass, writing the lists in place."""
    _c().offer_rows(dots, others, cand, idx, sim, drop_nonpositive)
