"""``attach_rows`` in NumPy: the per-node rule, one node at a time, cosines by ``dot4`` (the C++ order)."""

from __future__ import annotations

import numpy as np


def dot4(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Row-wise dot products over the last axis of a [..., d] and b [d] (or [..., d]) in float64, in the
    order of ``dot4`` in ``csrc/include/xmemory/dot4.inc``: 4 x 8 lanes from zero, lane (u, l) taking
    k = 32t + 8u + l in order (np.cumsum: sequential), the tail k >= 32q added in order from zero, then
    per l in order the lanes' ((u0 + u1) + (u2 + u3))."""
    p = a * b.astype(np.float64)
    lead, d = p.shape[:-1], p.shape[-1]
    q = d // 32
    lanes = np.zeros((*lead, 1, 4, 8))
    if q:
        lanes = np.concatenate([lanes, p[..., : 32 * q].reshape(*lead, q, 4, 8)], axis=-3)
    acc = np.cumsum(lanes, axis=-3)[..., -1, :, :]  # [..., 4, 8]
    total = np.zeros(lead)
    for k in range(32 * q, d):
        total = total + p[..., k]
    for lane in range(8):
        total = total + ((acc[..., 0, lane] + acc[..., 1, lane]) + (acc[..., 2, lane] + acc[..., 3, lane]))
    return total


def _norm(s: np.ndarray) -> np.ndarray:
    """|row| of each sum [L, d], 1 for a zero sum (its cosines are then 0)."""
    v = np.sqrt(dot4(s, s))
    return np.where(v > 0, v, 1.0)


def attach_rows(x, rows, sums, counts, alive, ids, label, n_slots, next_id, attach_threshold, lenient_floor, size_cap):
    attached = False
    for i in rows.tolist():
        live = np.flatnonzero(alive[:n_slots])
        slot, best = -1, -np.inf
        if live.size:
            s = sums[live]
            cos = dot4(s, x[i]) / _norm(s)
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
