"""The kNN family's input contracts: the checks its dispatchers run before any backend (and that
``csrc/cpu/knn.cpp`` / ``objective.cpp`` make again: d agreeing, offsets of one length ending at the
row counts, k >= 1, the upkeep's shapes and buffers), as ``accepts`` predicates (None in contract,
else a one-line reason naming the argument) and as the checks that return the checked inputs."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..backends import GPU_BACKENDS
from ..checks import (
    check_float_matrix,
    check_ids,
    check_k,
    check_offsets,
    check_same_segments,
    reason,
)

MAX_K_GPU = 64  # the GPU kernels keep a register top-k of at most 64 (ops/knn/triton.py MAX_K, kKnnMaxK)


def graph_inputs(x: Any, offsets: Any, k: Any, *, gpu: bool = False) -> tuple[Any, np.ndarray, int]:
    """(x [N, d] real finite, offsets [B+1] int64 CSR over N, k >= 1; at most ``MAX_K_GPU`` on a GPU)."""
    k = check_k("k", k, MAX_K_GPU if gpu else None)
    x = check_float_matrix("x", x)
    return x, check_offsets("offsets", offsets, int(x.shape[0])), k


def search_inputs(q: Any, q_offsets: Any, x: Any, x_offsets: Any, k: Any) -> tuple:
    """(q [Q, d], q_offsets [B+1], x [N, d], x_offsets [B+1], k >= 1): both real and finite, one d, one B."""
    k = check_k("k", k)
    q, x = check_float_matrix("q", q), check_float_matrix("x", x)
    if q.shape[1] != x.shape[1]:
        raise ValueError(f"q, x: must agree on d, got q {tuple(q.shape)} and x {tuple(x.shape)}")
    qo = check_offsets("q_offsets", q_offsets, int(q.shape[0]))
    xo = check_offsets("x_offsets", x_offsets, int(x.shape[0]))
    check_same_segments("q_offsets", qo, "x_offsets", xo)
    return q, qo, x, xo, k


def accepts_knn_graph(
    x: Any, offsets: Any, k: Any, *, drop_nonpositive: bool = False, backend: str = "auto"
) -> str | None:
    """x [N, d] real finite, offsets [B+1] integer CSR from 0 to N, k an integer >= 1 (<= 64 on a GPU)."""
    return reason(graph_inputs, x, offsets, k, gpu=backend in GPU_BACKENDS)


def accepts_knn_search(
    q: Any,
    q_offsets: Any,
    x: Any,
    x_offsets: Any,
    k: Any,
    *,
    drop_nonpositive: bool = False,
    backend: str = "auto",
) -> str | None:
    """q [Q, d] and x [N, d] real finite of one d, q_offsets / x_offsets CSR of one length, k >= 1."""
    return reason(search_inputs, q, q_offsets, x, x_offsets, k)


def _real_matrix(name: str, a: Any) -> np.ndarray:
    a = np.asarray(a)
    if a.ndim != 2:
        raise ValueError(f"{name}: expected a 2-D array, got shape {a.shape}")
    if a.dtype.kind not in "fiu":
        raise ValueError(f"{name}: expected a real array, got dtype {a.dtype}")
    return a


def _ints(name: str, a: Any, ndim: int) -> np.ndarray:
    a = np.asarray(a)
    if a.ndim != ndim:
        raise ValueError(f"{name}: expected {ndim} dimension(s), got shape {a.shape}")
    if a.size and a.dtype.kind not in "iu":
        raise ValueError(f"{name}: expected integers, got dtype {a.dtype}")
    return a


def topk_select_inputs(sims: Any, ids: Any, k: Any, drop_nonpositive: Any) -> None:
    """sims [r, c] real; ids [c] shared or [r, c] per row, integers (-1 empty); k >= 1; a bool."""
    sims = _real_matrix("sims", sims)
    ids = np.asarray(ids)
    if ids.shape not in ((sims.shape[1],), sims.shape):
        raise ValueError(f"ids: expected [c={sims.shape[1]}] or [r, c]={sims.shape}, got shape {ids.shape}")
    _ints("ids", ids, ids.ndim)
    check_k("k", k)
    if not isinstance(drop_nonpositive, (bool, np.bool_)):
        raise ValueError(f"drop_nonpositive: expected a bool, got {type(drop_nonpositive).__name__}")


def accepts_topk_select(sims: Any, ids: Any, k: Any, drop_nonpositive: Any) -> str | None:
    """sims [r, c] real, ids integer [c] or [r, c], k an integer >= 1, drop_nonpositive a bool."""
    return reason(topk_select_inputs, sims, ids, k, drop_nonpositive)


def offer_rows_inputs(dots: Any, others: Any, cand: Any, idx: Any, sim: Any, drop_nonpositive: Any) -> None:
    """dots [O, C] real; others [O], cand [C] integer rows in [0, n); idx [n, k] int32 and sim [n, k]
    float32 writable C-contiguous buffers (the lists, edited in place), k >= 1; a bool."""
    for name, a, dtype in (("idx", idx, np.int32), ("sim", sim, np.float32)):
        if not (
            isinstance(a, np.ndarray)
            and a.dtype == dtype
            and a.ndim == 2
            and a.flags.c_contiguous
            and a.flags.writeable
        ):
            raise ValueError(
                f"{name}: expected a writable C-contiguous {np.dtype(dtype).name} [n, k] buffer, "
                f"got {getattr(a, 'dtype', type(a).__name__)} of shape {np.shape(a)}"
            )
    if idx.shape != sim.shape or idx.shape[1] < 1:
        raise ValueError(f"idx, sim: expected one shape [n, k >= 1], got {idx.shape} and {sim.shape}")
    n = idx.shape[0]
    others, cand = _ints("others", others, 1), _ints("cand", cand, 1)
    dots = _real_matrix("dots", dots)
    if dots.shape != (others.shape[0], cand.shape[0]):
        raise ValueError(
            f"dots: expected [len(others), len(cand)] = {(others.shape[0], cand.shape[0])}, got {dots.shape}"
        )
    check_ids("others", others, n)
    check_ids("cand", cand, n)
    if not isinstance(drop_nonpositive, (bool, np.bool_)):
        raise ValueError(f"drop_nonpositive: expected a bool, got {type(drop_nonpositive).__name__}")


def accepts_offer_rows(
    dots: Any, others: Any, cand: Any, idx: Any, sim: Any, drop_nonpositive: Any
) -> str | None:
    """dots [O, C] real, others [O] / cand [C] rows in [0, n), idx [n, k] int32 / sim [n, k] float32
    writable C-contiguous, drop_nonpositive a bool."""
    return reason(offer_rows_inputs, dots, others, cand, idx, sim, drop_nonpositive)


__all__ = [
    "MAX_K_GPU",
    "accepts_knn_graph",
    "accepts_knn_search",
    "accepts_offer_rows",
    "accepts_topk_select",
    "graph_inputs",
    "offer_rows_inputs",
    "search_inputs",
    "topk_select_inputs",
]
