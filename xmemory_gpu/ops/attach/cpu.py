"""C++ CPU paths of ``attach_rows`` and ``attach_rows_batch`` (``xmemory_gpu._C``: the columns edited in place)."""

from __future__ import annotations


def attach_rows(
    x, rows, sums, counts, alive, ids, label, n_slots, next_id, attach_threshold, lenient_floor, size_cap
):
    from ... import _C

    return _C.attach_rows(
        x, rows, sums, counts, alive, ids, label, n_slots, next_id, attach_threshold, lenient_floor, size_cap
    )


def attach_rows_batch(items, attach_threshold, lenient_floor, size_cap):
    from ... import _C

    return _C.attach_rows_batch(items, attach_threshold, lenient_floor, size_cap)
