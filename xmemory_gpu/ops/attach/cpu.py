"""C++ CPU path of ``attach_rows`` (``xmemory_gpu._C.attach_rows``: the columns edited in place)."""

from __future__ import annotations


def attach_rows(x, rows, sums, counts, alive, ids, label, n_slots, next_id, attach_threshold, lenient_floor, size_cap):
    from ... import _C

    return _C.attach_rows(x, rows, sums, counts, alive, ids, label, n_slots, next_id, attach_threshold, lenient_floor,
                          size_cap)
