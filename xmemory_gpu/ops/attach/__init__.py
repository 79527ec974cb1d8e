"""Theme attach: a memory's new semantic rows join, in order, the live theme whose centroid is most
similar (cosine >= ``attach_threshold``, or >= ``lenient_floor`` when that theme holds fewer than
``size_cap`` rows; ties to the earliest slot) or open a new theme, each decision on the sums as the
rows before it left them (``construct/theme_state.py``). A cosine is dot(sum, x) / |sum| in float64
by ``dot4``, the fixed order of the f(P) and k-means kernels (``csrc/include/xmemory/dot4.inc``), so
``reference`` (NumPy) and ``cpu`` (C++, ``csrc/cpu/attach.cpp``) decide alike to the last bit, on any
ISA. The theme columns are edited in place. Host only."""

from __future__ import annotations

import numpy as np

from ..backends import host_backend, host_implementation, implementation, register, resolve_backend
from ..checks import refuse
from .contract import (
    accepts_attach_rows,
    accepts_attach_rows_batch,
    accepts_merge_pairs,
    accepts_merge_pairs_batch,
    attach_batch_items,
    attach_item,
    attach_rule,
)

_ALL = {"reference": "reference", "cpu": "cpu"}
register("attach_rows", __name__, _ALL, accepts=accepts_attach_rows)
register("attach_rows_batch", __name__, _ALL, accepts=accepts_attach_rows_batch)
register("merge_pairs", __name__, _ALL, accepts=accepts_merge_pairs)
register("merge_pairs_batch", __name__, _ALL, accepts=accepts_merge_pairs_batch)


def attach_rows(
    x: np.ndarray,
    rows: np.ndarray,
    sums: np.ndarray,
    counts: np.ndarray,
    alive: np.ndarray,
    ids: np.ndarray,
    label: np.ndarray,
    n_slots: int,
    next_id: int,
    *,
    attach_threshold: float,
    lenient_floor: float,
    size_cap: int,
    backend: str = "auto",
) -> tuple[int, int, bool]:
    """Attach node rows ``rows`` [m] of x [n, d] float32 (unit rows) in order. The columns, edited in
    place: ``sums`` [cap, d] float64, ``counts`` [cap] int64, ``alive`` [cap] bool, ``ids`` [cap] int64
    (slots in opening order; ``n_slots`` used, cap >= n_slots + m), ``label`` [n] int64 (theme id per
    node). A joined theme adds the row to its sum; an opened one takes slot ``n_slots``, id ``next_id``
    and the next ones after. Returns (n_slots, next_id, whether a row joined an existing theme)."""
    name = resolve_backend(
        "attach_rows", host_backend(backend) if backend == "auto" else backend, on_cuda=False
    )
    rule = attach_rule(attach_threshold, lenient_floor, size_cap)
    item = attach_item(x, rows, sums, counts, alive, ids, label, n_slots, next_id)
    n_slots, next_id, joined = implementation("attach_rows", name)(*item, *rule)
    return int(n_slots), int(next_id), bool(joined)


def attach_rows_batch(
    items: list[tuple], *, attach_threshold: float, lenient_floor: float, size_cap: int, backend: str = "auto"
) -> list[tuple[int, int, bool]]:
    """``attach_rows`` of many memories in one call (one C++ call on the ``cpu`` backend): each item
    ``(x, rows, sums, counts, alive, ids, label, n_slots, next_id)`` as ``attach_rows`` takes them, one
    item per memory (no two items' columns may be the same arrays). Returns ``(n_slots, next_id,
    joined)`` per item, in order; every item is checked before any is edited."""
    name = resolve_backend(
        "attach_rows_batch", host_backend(backend) if backend == "auto" else backend, on_cuda=False
    )
    rule = attach_rule(attach_threshold, lenient_floor, size_cap)
    out = implementation("attach_rows_batch", name)(attach_batch_items(items), *rule)
    return [(int(n), int(i), bool(j)) for n, i, j in out]


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
    backend: str = "auto",
) -> tuple[np.ndarray, np.ndarray]:
    """A memory's merge candidates from its theme graph, as slots (t [P], j [P]) int64, in the order the
    per-theme rule meets them. Graph row r is live slot ``live[r]`` ([L] int64), its neighbours
    ``idx[r]`` ([L, k] int32 positions in ``live``, -1 none) with cosines ``sim[r]`` ([L, k] float32,
    descending); ``counts`` [cap] int64 per slot. t = live[r] offers its neighbours j in graph order (the
    first ``max(merge_candidates, 1)`` when t is tiny, ``counts[t] <= tiny_size``, else all ``k``); a
    pair counts when the two fit under ``size_cap`` and t is tiny or the cosine (as float64) reaches
    ``pair_threshold``; each unordered pair once, as first met. ``cpu``: one C++ pass when the inputs
    are of the types above (Python ints, a float threshold), else ``reference``'s vectorised steps (no
    cast that could change an answer). ``counts`` must lie strictly within +-2**31 and ``n_slots``
    below 2**31 (the pair sizes and pair keys are then exact in int64), else ``ValueError``."""
    args = (live, idx, sim, counts, n_slots)
    kw = dict(
        k=k,
        tiny_size=tiny_size,
        merge_candidates=merge_candidates,
        size_cap=size_cap,
        pair_threshold=pair_threshold,
    )
    refuse(accepts_merge_pairs(*args, **kw))
    return host_implementation("merge_pairs", backend)(*args, **kw)


def merge_pairs_batch(
    items: list[tuple],
    *,
    tiny_size: int,
    merge_candidates: int,
    size_cap: int,
    pair_threshold: float,
    backend: str = "auto",
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``merge_pairs`` of many memories, as theme ids: each item ``(live, idx, sim, counts, ids, n_slots,
    k)``, ``ids [cap]`` int64 the theme id of each slot. Returns (item [P], t ids [P], j ids [P]) int64:
    item 0's pairs in its rule's order, then item 1's, ... ``cpu``: one C++ call when every item is of
    the types ``merge_pairs`` runs in C++, else ``merge_pairs`` item by item."""
    refuse(
        accepts_merge_pairs_batch(
            items,
            tiny_size=tiny_size,
            merge_candidates=merge_candidates,
            size_cap=size_cap,
            pair_threshold=pair_threshold,
        )
    )
    return host_implementation("merge_pairs_batch", backend)(
        items,
        tiny_size=tiny_size,
        merge_candidates=merge_candidates,
        size_cap=size_cap,
        pair_threshold=pair_threshold,
    )


__all__ = ["attach_rows", "attach_rows_batch", "merge_pairs", "merge_pairs_batch"]
