"""float64 reference for Eq. 4 greedy coverage selection, plain loops that mirror the authors' code.

Query q owns candidates ``cand_offsets[q]:cand_offsets[q+1]`` (positions 0..n_q-1 local to the
query). As in the authors' ``_pick_representatives`` (HU-xiaobai/xMemory,
``evaluation/locomo/xMemory_search_framework.py``):

- **Coverage entries.** Candidate i covers each distinct valid neighbour u (``0 <= u < n``) with
  the largest weight listed for u, in first-occurrence order, then itself with weight 1.0 unless
  it lists itself (then its own listed weight, at that position). ``Z`` is the sum of every
  candidate's entry weights, candidate by candidate in that order.
- **Objective.** ``v_i = alpha * (gain_i / Z) + (1 - alpha) * rel~_i`` over unselected i, where
  ``gain_i`` sums (in entry order) the weights of i's entries not yet covered and ``rel~`` is
  relevance min-max normalised over the query's candidates (0.5 for all if constant); ties go
  to the lowest position. A pick covers every node of its entries.
- **Stop** after a pick when ``budget`` picks are made, when the best value is <= 0 (no pick),
  and by ``stop``: ``"count"`` (the authors'): when every candidate is covered, or when
  ``target < 1`` and the covered *count* reaches ``target`` of the n candidates; ``"weight"``
  (ours, earlier): when the credited weight (the gains of the picks) reaches ``target`` of ``Z``.

Each pick's value ``v`` is returned with it.
"""

from __future__ import annotations

import numpy as np

from ..checks import csr_offsets

STOP_RULES = ("count", "weight")


def entries(i: int, nbr_idx: np.ndarray, nbr_w: np.ndarray, n: int) -> list[tuple[int, float]]:
    """(node, weight) pairs candidate i covers, in the authors' dict order (see the module doc)."""
    wd: dict[int, float] = {}
    for u, w in zip(nbr_idx, nbr_w):
        u = int(u)
        if 0 <= u < n:
            wd[u] = max(wd[u], float(w)) if u in wd else float(w)
    if i not in wd:
        wd[i] = 1.0
    return list(wd.items())


def select_one(
    nbr_idx: np.ndarray,
    nbr_w: np.ndarray,
    rel: np.ndarray,
    alpha: float,
    budget: int,
    target: float,
    stop: str = "count",
) -> tuple[list[int], list[float]]:
    """Picks (local positions in pick order) and their values for one query."""
    n = rel.shape[0]
    if n == 0 or budget <= 0:
        return [], []
    cover = [entries(i, nbr_idx[i], nbr_w[i], n) for i in range(n)]
    z = 0.0
    for c in cover:
        for _, w in c:
            if w > 0:
                z += w
    if z <= 0.0:
        z = 1.0
    lo, hi = float(rel.min()), float(rel.max())
    rel_n = [0.5] * n if not hi > lo else [(float(r) - lo) / (hi - lo) for r in rel]
    covered = [False] * n
    chosen = [False] * n
    n_covered, credited = 0, 0.0
    picks: list[int] = []
    values: list[float] = []
    while len(picks) < budget:
        best, best_v, best_gain = -1, -np.inf, 0.0
        for i in range(n):
            if chosen[i]:
                continue
            gain = 0.0
            for u, w in cover[i]:
                if not covered[u]:
                    gain += w
            v = alpha * (gain / z) + (1.0 - alpha) * rel_n[i]
            if v > best_v:
                best, best_v, best_gain = i, v, gain
        if best < 0 or best_v <= 0:
            break
        chosen[best] = True
        for u, _ in cover[best]:
            if not covered[u]:
                covered[u] = True
                n_covered += 1
        credited += best_gain
        picks.append(best)
        values.append(best_v)
        if stop == "count":
            if n_covered == n or (target < 1.0 and n_covered / n >= target):
                break
        elif credited / z >= target:
            break
    return picks, values


def coverage_select(cand_offsets, nbr_idx, nbr_w, relevance, alpha, budgets, target, stop="count"):
    """Every query's picks: (sel_offsets [Q+1] int64, selected [S] int32, values [S] float64)."""
    sel, gains, sizes = [], [], []
    for q in range(len(cand_offsets) - 1):
        s, e = int(cand_offsets[q]), int(cand_offsets[q + 1])
        p, v = select_one(
            nbr_idx[s:e],
            nbr_w[s:e],
            np.asarray(relevance[s:e], np.float64),
            alpha,
            int(budgets[q]),
            target,
            stop,
        )
        sel.extend(p)
        gains.extend(v)
        sizes.append(len(p))
    return csr_offsets(sizes), np.array(sel, dtype=np.int32), np.array(gains, dtype=np.float64)
