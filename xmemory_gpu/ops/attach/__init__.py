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

_ALL = {"reference": "reference", "cpu": "cpu"}
register("attach_rows", __name__, _ALL)
register("attach_rows_batch", __name__, _ALL)
register("merge_pairs", __name__, _ALL)
register("merge_pairs_batch", __name__, _ALL)


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
    item = _checked(x, rows, sums, counts, alive, ids, label, n_slots, next_id)
    n_slots, next_id, joined = implementation("attach_rows", name)(
        *item, float(attach_threshold), float(lenient_floor), int(size_cap)
    )
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
    items = [_checked(*item) for item in items]
    held = [id(a) for item in items for a in item[2:7]]
    if len(set(held)) != len(held):
        raise ValueError("attach_rows_batch: two items share a column array (one item per memory)")
    out = implementation("attach_rows_batch", name)(
        items, float(attach_threshold), float(lenient_floor), int(size_cap)
    )
    return [(int(n), int(i), bool(j)) for n, i, j in out]


_COLUMNS = (
    ("sums", np.float64, 2),
    ("counts", np.int64, 1),
    ("alive", np.bool_, 1),
    ("ids", np.int64, 1),
    ("label", np.int64, 1),
)  # the columns edited in place: (name, dtype, ndim)


def _checked(x, rows, sums, counts, alive, ids, label, n_slots, next_id) -> tuple:
    """One memory's attach arguments, checked alike for every backend before anything is edited (rows
    as int64, the slot counts as ints); ``ValueError`` naming the argument otherwise."""
    rows = np.ascontiguousarray(rows, dtype=np.int64).reshape(-1)
    if not isinstance(x, np.ndarray) or x.ndim != 2 or x.dtype != np.float32:
        raise ValueError(
            f"x: expected [n, d] float32, got {getattr(x, 'dtype', type(x).__name__)} of shape {np.shape(x)}"
        )
    for (name, dtype, ndim), a in zip(_COLUMNS, (sums, counts, alive, ids, label)):
        if not (
            isinstance(a, np.ndarray)
            and a.dtype == dtype
            and a.ndim == ndim
            and a.flags.c_contiguous
            and a.flags.writeable
        ):
            raise ValueError(
                f"{name}: expected a writable C-contiguous {np.dtype(dtype).name} array of {ndim} dimension(s) "
                f"(edited in place), got {getattr(a, 'dtype', type(a).__name__)} of shape {np.shape(a)}"
            )
    cap = sums.shape[0]
    if sums.shape[1] != x.shape[1] or counts.shape[0] != cap or alive.shape[0] != cap or ids.shape[0] != cap:
        raise ValueError(
            f"sums [cap, d], counts, alive and ids [cap] must agree with x [n, d={x.shape[1]}]: got sums "
            f"{sums.shape}, counts {counts.shape}, alive {alive.shape}, ids {ids.shape}"
        )
    if label.shape[0] != x.shape[0]:
        raise ValueError(f"label: expected [n={x.shape[0]}], got {label.shape}")
    if rows.size and (rows.min() < 0 or rows.max() >= x.shape[0]):
        raise ValueError(f"rows: expected node rows in [0, {x.shape[0]})")
    if not 0 <= n_slots <= cap or n_slots + rows.size > cap:
        raise ValueError(f"sums: {cap} slots cannot take {rows.size} new ones after {n_slots}")
    return x, rows, sums, counts, alive, ids, label, int(n_slots), int(next_id)


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
    _check_below_2_31("merge_pairs", counts, n_slots)
    return host_implementation("merge_pairs", backend)(
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
    for b, item in enumerate(items):
        if len(item) == 7:
            _check_below_2_31(f"merge_pairs_batch: item {b}", item[3], item[5])
    return host_implementation("merge_pairs_batch", backend)(
        items,
        tiny_size=tiny_size,
        merge_candidates=merge_candidates,
        size_cap=size_cap,
        pair_threshold=pair_threshold,
    )


def _check_below_2_31(where: str, counts: np.ndarray, n_slots: int) -> None:
    """counts strictly within +-2**31 and n_slots below 2**31, else ``ValueError`` naming the field."""
    if int(n_slots) >= 2**31:
        raise ValueError(f"{where}: n_slots must be below 2**31, got {int(n_slots)}")
    c = np.asarray(counts)
    if c.size and (c.min() <= -(2**31) or c.max() >= 2**31):
        raise ValueError(f"{where}: counts must lie strictly within +-2**31, got {c.min()} to {c.max()}")


__all__ = ["attach_rows", "attach_rows_batch", "merge_pairs", "merge_pairs_batch"]
