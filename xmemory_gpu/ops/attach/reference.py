"""``attach_rows`` in NumPy: the per-node rule, one node at a time, cosines by ``dot8`` (the C++ order)."""

from __future__ import annotations

import numpy as np


def dot8(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Row-wise sums over the last axis of a [L, d] * b [d] (float64 products): lanes j = 0..7 take
    k = 8t + j in order (np.cumsum: sequential), combined ((l0 + l1) + (l2 + l3)) + ((l4 + l5) + (l6 + l7)),
    then the tail k >= 8q added in order; the order of ``csrc/cpu/attach.cpp``."""
    p = a * b.astype(np.float64)
    d = p.shape[-1]
    q = d // 8
    total = np.zeros(p.shape[:-1])
    if q:
        lanes = np.cumsum(p[..., : 8 * q].reshape(*p.shape[:-1], q, 8), axis=-2)[..., -1, :]
        total = ((lanes[..., 0] + lanes[..., 1]) + (lanes[..., 2] + lanes[..., 3])) + \
                ((lanes[..., 4] + lanes[..., 5]) + (lanes[..., 6] + lanes[..., 7]))
    for k in range(8 * q, d):
        total = total + p[..., k]
    return total


def _norm(s: np.ndarray) -> np.ndarray:
    """|row| of each sum [L, d], 1 for a zero sum (its cosines are then 0)."""
    v = np.sqrt(dot8(s, s))
    return np.where(v > 0, v, 1.0)


def attach_rows(x, rows, sums, counts, alive, ids, label, n_slots, next_id, attach_threshold, lenient_floor, size_cap):
    attached = False
    for i in rows.tolist():
        live = np.flatnonzero(alive[:n_slots])
        slot, best = -1, -np.inf
        if live.size:
            s = sums[live]
            cos = dot8(s, x[i]) / _norm(s)
            j = int(np.argmax(cos))
            slot, best = int(live[j]), float(cos[j])
        if slot >= 0 and (best >= attach_threshold or (counts[slot] < size_cap and best >= lenient_floor)):
            sums[slot] += x[i]
            counts[slot] += 1
            label[i] = ids[slot]
            attached = True
        else:
            sums[n_slots] = x[i].astype(np.float64)
            counts[n_slots], ids[n_slots], alive[n_slots], label[i] = 1, next_id, True, next_id
            n_slots += 1
            next_id += 1
    return n_slots, next_id, attached
