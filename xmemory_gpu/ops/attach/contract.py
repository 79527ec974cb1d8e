"""The attach family's input contracts, checked by each op's dispatcher before anything is edited (the
checks ``csrc/cpu/attach.cpp`` makes again: x [n, d], the columns writable C-contiguous arrays of their
dtypes that agree on cap and d, label [n], rows in [0, n), room for a new slot per row; the theme
graph's shapes, live slots inside the columns, neighbours inside the live slots, counts strictly
within +-2**31 and n_slots below 2**31). As the checks and the ``accepts`` predicates (None in
contract, else a one-line reason naming the argument)."""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np

from ..checks import check_finite_scalar, check_ids, reason

_COLUMNS = (
    ("sums", np.float64, 2),
    ("counts", np.int64, 1),
    ("alive", np.bool_, 1),
    ("ids", np.int64, 1),
    ("label", np.int64, 1),
)  # the columns edited in place: (name, dtype, ndim)


def _int(name: str, v: Any, lo: int | None = None) -> int:
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, numbers.Integral):
        raise ValueError(f"{name}: expected an integer, got {v!r} ({type(v).__name__})")
    if lo is not None and v < lo:
        raise ValueError(f"{name}: must be >= {lo}, got {int(v)}")
    return int(v)


def _threshold(name: str, v: Any) -> float:
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, numbers.Real) or np.isnan(float(v)):
        raise ValueError(f"{name}: expected a number, got {v!r}")
    return float(v)


def attach_item(x, rows, sums, counts, alive, ids, label, n_slots, next_id) -> tuple:
    """One memory's attach arguments, checked alike for every backend before anything is edited (rows
    as int64, the slot counts as ints); ``ValueError`` naming the argument otherwise."""
    r = np.asarray(rows)
    if r.size and r.dtype.kind not in "iu":
        raise ValueError(f"rows: expected integer node rows, got dtype {r.dtype}")
    rows = np.ascontiguousarray(r, dtype=np.int64).reshape(-1)
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
    n_slots, next_id = _int("n_slots", n_slots), _int("next_id", next_id)
    if not 0 <= n_slots <= cap or n_slots + rows.size > cap:
        raise ValueError(f"sums: {cap} slots cannot take {rows.size} new ones after {n_slots}")
    return x, rows, sums, counts, alive, ids, label, n_slots, next_id


def attach_rule(attach_threshold: Any, lenient_floor: Any, size_cap: Any) -> tuple[float, float, int]:
    """The rule's parameters: two finite numbers and an integer."""
    return (
        check_finite_scalar("attach_threshold", attach_threshold),
        check_finite_scalar("lenient_floor", lenient_floor),
        _int("size_cap", size_cap),
    )


def _attach_rows(x, rows, sums, counts, alive, ids, label, n_slots, next_id, rule) -> None:
    attach_rule(*rule)
    attach_item(x, rows, sums, counts, alive, ids, label, n_slots, next_id)


def accepts_attach_rows(
    x: Any,
    rows: Any,
    sums: Any,
    counts: Any,
    alive: Any,
    ids: Any,
    label: Any,
    n_slots: Any,
    next_id: Any,
    *,
    attach_threshold: Any,
    lenient_floor: Any,
    size_cap: Any,
    backend: str = "auto",
) -> str | None:
    """x [n, d] float32; rows [m] integers in [0, n); sums [cap, d] float64, counts / ids [cap] int64,
    alive [cap] bool, label [n] int64, all writable C-contiguous; 0 <= n_slots and n_slots + m <= cap;
    next_id an integer; thresholds finite, size_cap an integer."""
    rule = (attach_threshold, lenient_floor, size_cap)
    return reason(_attach_rows, x, rows, sums, counts, alive, ids, label, n_slots, next_id, rule)


def attach_batch_items(items: Any) -> list[tuple]:
    """Every item checked (``attach_item``) and no column array shared by two items."""
    out = []
    for b, item in enumerate(items):
        if len(item) != 9:
            raise ValueError(
                f"items[{b}]: expected (x, rows, sums, counts, alive, ids, label, n_slots, next_id), "
                f"got {len(item)} values"
            )
        out.append(attach_item(*item))
    held = [id(a) for item in out for a in item[2:7]]
    if len(set(held)) != len(held):
        raise ValueError("attach_rows_batch: two items share a column array (one item per memory)")
    return out


def _attach_batch(items, rule) -> None:
    attach_rule(*rule)
    attach_batch_items(items)


def accepts_attach_rows_batch(
    items: Any, *, attach_threshold: Any, lenient_floor: Any, size_cap: Any, backend: str = "auto"
) -> str | None:
    """Each item ``attach_rows``' nine arguments in contract, no two items sharing a column array."""
    return reason(_attach_batch, items, (attach_threshold, lenient_floor, size_cap))


def merge_graph(where: str, live: Any, idx: Any, sim: Any, counts: Any, n_slots: Any) -> None:
    """live [L] integer slots in [0, min(n_slots, cap)); idx [L, k'] integers < L (negative: none) and sim
    [L, k'] real of one shape; counts [cap] reals strictly within +-2**31; n_slots in [0, 2**31)."""
    live, idx, sim, c = (np.asarray(a) for a in (live, idx, sim, counts))
    if (
        live.ndim != 1
        or idx.ndim != 2
        or sim.shape != idx.shape
        or idx.shape[0] != live.shape[0]
        or c.ndim != 1
    ):
        raise ValueError(
            f"{where}: expected live [L], idx and sim [L, k] of one shape, counts [cap], got live {live.shape}, "
            f"idx {idx.shape}, sim {sim.shape}, counts {c.shape}"
        )
    for name, a, kinds in (
        ("live", live, "iu"),
        ("idx", idx, "iu"),
        ("sim", sim, "fiu"),
        ("counts", c, "fiu"),
    ):
        if a.size and a.dtype.kind not in kinds:
            raise ValueError(
                f"{where}: {name}: expected {'integers' if kinds == 'iu' else 'reals'}, got {a.dtype}"
            )
    n_slots = _int(f"{where}: n_slots", n_slots, lo=0)
    if n_slots >= 2**31:
        raise ValueError(f"{where}: n_slots must be below 2**31, got {n_slots}")
    if c.size and (c.min() <= -(2**31) or c.max() >= 2**31):
        raise ValueError(f"{where}: counts must lie strictly within +-2**31, got {c.min()} to {c.max()}")
    check_ids(f"{where}: live", live, min(n_slots, c.shape[0]))
    if idx.size and int(idx.max()) >= live.shape[0]:
        raise ValueError(
            f"{where}: idx: a neighbour outside the {live.shape[0]} live slots (id {int(idx.max())})"
        )


def merge_rule(tiny_size: Any, merge_candidates: Any, size_cap: Any, pair_threshold: Any) -> None:
    """Numbers, not NaN (of another type than int / float: the NumPy steps, never a cast)."""
    _threshold("tiny_size", tiny_size)
    _threshold("merge_candidates", merge_candidates)
    _threshold("size_cap", size_cap)
    _threshold("pair_threshold", pair_threshold)


def _merge_pairs(live, idx, sim, counts, n_slots, k, rule) -> None:
    merge_rule(*rule)
    _int("k", k, lo=0)
    merge_graph("merge_pairs", live, idx, sim, counts, n_slots)


def accepts_merge_pairs(
    live: Any,
    idx: Any,
    sim: Any,
    counts: Any,
    n_slots: Any,
    *,
    k: Any,
    tiny_size: Any,
    merge_candidates: Any,
    size_cap: Any,
    pair_threshold: Any,
    backend: str = "auto",
) -> str | None:
    """live [L] slots in [0, min(n_slots, cap)), idx [L, k'] below L (negative: none), sim [L, k'] real,
    counts [cap] reals within +-2**31, n_slots an integer in [0, 2**31), k an integer >= 0; tiny_size,
    merge_candidates, size_cap and pair_threshold numbers (not NaN)."""
    rule = (tiny_size, merge_candidates, size_cap, pair_threshold)
    return reason(_merge_pairs, live, idx, sim, counts, n_slots, k, rule)


def merge_batch_items(items: Any) -> None:
    for b, item in enumerate(items):
        if len(item) != 7:
            raise ValueError(
                f"merge_pairs_batch: item {b}: expected (live, idx, sim, counts, ids, n_slots, k), got {len(item)} values"
            )
        live, idx, sim, counts, ids, n_slots, k = item
        merge_graph(f"merge_pairs_batch: item {b}", live, idx, sim, counts, n_slots)
        _int(f"merge_pairs_batch: item {b}: k", k, lo=0)
        ids = np.asarray(ids)
        if ids.shape != np.shape(counts) or (ids.size and ids.dtype.kind not in "iu"):
            raise ValueError(
                f"merge_pairs_batch: item {b}: ids must be [cap] integers, got {ids.dtype} {ids.shape}"
            )


def _merge_batch(items, rule) -> None:
    merge_rule(*rule)
    merge_batch_items(items)


def accepts_merge_pairs_batch(
    items: Any,
    *,
    tiny_size: Any,
    merge_candidates: Any,
    size_cap: Any,
    pair_threshold: Any,
    backend: str = "auto",
) -> str | None:
    """Each item (live, idx, sim, counts, ids [cap] integers, n_slots, k) in ``merge_pairs``' contract."""
    return reason(_merge_batch, items, (tiny_size, merge_candidates, size_cap, pair_threshold))


__all__ = [
    "accepts_attach_rows",
    "accepts_attach_rows_batch",
    "accepts_merge_pairs",
    "accepts_merge_pairs_batch",
    "attach_batch_items",
    "attach_item",
    "attach_rule",
]
