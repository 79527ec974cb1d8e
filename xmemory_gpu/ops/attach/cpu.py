"""C++ CPU paths of ``attach_rows`` and ``attach_rows_batch`` (``xmemory_gpu._C``: the columns edited in place),
``merge_pairs`` and ``merge_pairs_batch``."""

from __future__ import annotations

import numpy as np

from ... import _C
from . import reference


def attach_rows(
    x, rows, sums, counts, alive, ids, label, n_slots, next_id, attach_threshold, lenient_floor, size_cap
):
    return _C.attach_rows(
        x, rows, sums, counts, alive, ids, label, n_slots, next_id, attach_threshold, lenient_floor, size_cap
    )


def attach_rows_batch(items, attach_threshold, lenient_floor, size_cap):
    return _C.attach_rows_batch(items, attach_threshold, lenient_floor, size_cap)


def merge_pairs(
    live: np.ndarray,
    idx: np.ndarray,
    sim: np.ndarray,
    counts: np.ndarray,
    n_slots: int,
    *,
    k: int,
    tiny_size: int,
    merge_candidates: int,
    size_cap: int,
    pair_threshold: float,
) -> tuple[np.ndarray, np.ndarray]:
    """``_C.merge_pairs`` when the inputs are of the types it takes, else ``reference.merge_pairs``."""
    if (
        live.dtype != np.int64
        or idx.dtype != np.int32
        or sim.dtype != np.float32
        or counts.dtype != np.int64
        or not all(type(v) is int for v in (n_slots, k, tiny_size, merge_candidates, size_cap))
        or type(pair_threshold) is not float
    ):
        return reference.merge_pairs(
            live,
            idx,
            sim,
            counts,
            n_slots,
            k=k,
            tiny_size=tiny_size,
            merge_candidates=merge_candidates,
            size_cap=size_cap,
            pair_threshold=pair_threshold,
        )
    return _C.merge_pairs(
        live, idx, sim, counts, n_slots, k, tiny_size, merge_candidates, size_cap, pair_threshold
    )


def merge_pairs_batch(
    items: list[tuple], *, tiny_size: int, merge_candidates: int, size_cap: int, pair_threshold: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``_C.merge_pairs_batch`` when every item is of the types ``_C.merge_pairs`` takes, else
    ``merge_pairs`` (this module's) item by item."""
    if (
        type(pair_threshold) is float
        and all(type(v) is int for v in (tiny_size, merge_candidates, size_cap))
        and all(
            live.dtype == np.int64
            and idx.dtype == np.int32
            and sim.dtype == np.float32
            and counts.dtype == np.int64
            and ids.dtype == np.int64
            and type(n_slots) is int
            and type(k) is int
            for live, idx, sim, counts, ids, n_slots, k in items
        )
    ):
        return _C.merge_pairs_batch(items, tiny_size, merge_candidates, size_cap, pair_threshold)
    return reference.merge_pairs_batch(
        items,
        tiny_size=tiny_size,
        merge_candidates=merge_candidates,
        size_cap=size_cap,
        pair_threshold=pair_threshold,
        pairs=merge_pairs,
    )
