"""float64 reference for Eq. 4 greedy coverage selection, plain loops that mirror the equation.

Query q owns candidates ``cand_offsets[q]:cand_offsets[q+1]`` (positions 0..n_q-1 local to the
query). Candidate i covers itself with weight 1 and each listed neighbour u with ``w_iu``; a
neighbour listed twice (or i listed as its own neighbour) counts once, at its first entry.
``Z = sum_i (1 + sum of i's valid neighbour weights)``. A node is covered once any selected
candidate covers it; the weight credited is that of the pick that first covers it. Each step
picks ``argmax_i alpha * gain_i / Z + (1 - alpha) * rel~_i`` over unselected i (gain_i = credited
weight of the nodes i would newly cover), ties to the lowest position; it stops when ``budget``
picks are made, when the credited share reaches ``target``, or when the best value is <= 0.
``rel~`` is relevance min-max normalised over the query's candidates (0.5 for all if constant).
"""

from __future__ import annotations

import numpy as np

from .._arrays import csr_offsets


def entries(i: int, nbr_idx: np.ndarray, nbr_w: np.ndarray, n: int) -> list[tuple[int, float]]:
    """(node, weight) pairs candidate i covers: itself (1.0) then each distinct valid neighbour."""
    out, seen = [(i, 1.0)], {i}
    for u, w in zip(nbr_idx, nbr_w):
        u = int(u)
        if 0 <= u < n and u not in seen:
            seen.add(u)
            out.append((u, float(w)))
    return out


def select_one(nbr_idx: np.ndarray, nbr_w: np.ndarray, rel: np.ndarray, alpha: float, budget: int, target: float):
    n = rel.shape[0]
    if n == 0 or budget <= 0:
        return [], []
    cover = [entries(i, nbr_idx[i], nbr_w[i], n) for i in range(n)]
    z = sum(w for c in cover for _, w in c)
    lo, hi = float(rel.min()), float(rel.max())
    rel_n = [0.5] * n if hi == lo else [(float(r) - lo) / (hi - lo) for r in rel]
    covered = [False] * n
    chosen = [False] * n
    credited = 0.0
    picks, values = [], []
    while len(picks) < budget:
        best, best_v, best_gain = -1, -np.inf, 0.0
        for i in range(n):
            if chosen[i]:
                continue
            gain = 0.0
            for u, w in cover[i]:
                if not covered[u]:
                    gain += w
            v = alpha * gain / z + (1.0 - alpha) * rel_n[i]
            if v > best_v:
                best, best_v, best_gain = i, v, gain
        if best < 0 or best_v <= 0:
            break
        chosen[best] = True
        for u, _ in cover[best]:
            covered[u] = True
        credited += best_gain
        picks.append(best)
        values.append(best_v)
        if credited / z >= target:
            break
    return picks, values


def coverage_select(cand_offsets, nbr_idx, nbr_w, relevance, alpha, budgets, target):
    sel, gains, sizes = [], [], []
    for q in range(len(cand_offsets) - 1):
        s, e = int(cand_offsets[q]), int(cand_offsets[q + 1])
        p, v = select_one(nbr_idx[s:e], nbr_w[s:e], np.asarray(relevance[s:e], np.float64), alpha, int(budgets[q]), target)
        sel.extend(p)
        gains.extend(v)
        sizes.append(len(p))
    return csr_offsets(sizes), np.array(sel, dtype=np.int32), np.array(gains, dtype=np.float64)
