"""``attach_rows`` in NumPy: the per-node rule, one node at a time, cosines by ``dot4`` (the C++ order);
``merge_pairs`` in vectorised steps."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..rows import dot4


def _norm(s: np.ndarray) -> np.ndarray:
    """|row| of each sum [L, d], 1 for a zero sum (its cosines are then 0)."""
    v = np.sqrt(dot4(s, s))
    return np.where(v > 0, v, 1.0)


def attach_rows(
    x, rows, sums, counts, alive, ids, label, n_slots, next_id, attach_threshold, lenient_floor, size_cap
):
    attached = False
    for i in rows.tolist():
        live = np.flatnonzero(alive[:n_slots])
        slot, best = -1, -np.inf
        if live.size:
            s = sums[live]
            cos = dot4(s, x[i]) / _norm(s)
            # the first slot, unless a later one is strictly more similar (a NaN cosine never is; the
            # C++ loop's comparison): np.argmax alone would pick a NaN
            j = 0 if np.isnan(cos[0]) else int(np.argmax(np.where(np.isnan(cos), -np.inf, cos)))
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


def attach_rows_batch(items, attach_threshold, lenient_floor, size_cap):
    """``attach_rows`` of each item (x, rows, sums, counts, alive, ids, label, n_slots, next_id) in turn."""
    return [attach_rows(*item, attach_threshold, lenient_floor, size_cap) for item in items]


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
    """``ops.attach.merge_pairs`` in vectorised NumPy steps (the rule ``_C.merge_pairs`` is tested against)."""
    empty = np.zeros(0, np.int64)
    if live.size == 0:
        return empty, empty
    idx = idx.astype(np.int64)  # [L, k] positions in live, -1 none
    sim = sim.astype(np.float64)  # compared in float64, as float(sim) is
    j = np.where(idx >= 0, live[np.maximum(idx, 0)], -1)
    cnt = counts[live]
    tiny = cnt <= tiny_size
    lim = np.where(tiny, max(merge_candidates, 1), k)
    ok = (np.arange(idx.shape[1])[None, :] < lim[:, None]) & (idx >= 0)
    ok &= cnt[:, None] + counts[np.maximum(j, 0)] <= size_cap
    ok &= tiny[:, None] | (sim >= pair_threshold)
    ti, ri = np.nonzero(ok)  # row-major: t in opening order, then graph order
    t_s, j_s = live[ti], j[ti, ri]
    key = np.minimum(t_s, j_s) * n_slots + np.maximum(t_s, j_s)
    first = np.sort(np.unique(key, return_index=True)[1])
    return t_s[first], j_s[first]


def merge_pairs_batch(
    items: list[tuple],
    *,
    tiny_size: int,
    merge_candidates: int,
    size_cap: int,
    pair_threshold: float,
    pairs: Callable[..., tuple[np.ndarray, np.ndarray]] = merge_pairs,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``ops.attach.merge_pairs_batch``: ``pairs`` (default ``merge_pairs``) item by item, as theme ids."""
    owner, t_ids, j_ids = [np.zeros(0, np.int64)], [np.zeros(0, np.int64)], [np.zeros(0, np.int64)]
    for b, (live, idx, sim, counts, ids, n_slots, k) in enumerate(items):
        t, j = pairs(
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
        owner.append(np.full(t.size, b, np.int64))
        t_ids.append(np.asarray(ids[t], np.int64))
        j_ids.append(np.asarray(ids[j], np.int64))
    return np.concatenate(owner), np.concatenate(t_ids), np.concatenate(j_ids)
