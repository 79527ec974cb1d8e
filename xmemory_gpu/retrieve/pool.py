"""Stage II's episode pool and priority, batched over queries.

The pool of a query is the source episodes of its selected semantics (a gather through the
bank's semantic -> episode column) plus its top ``episode_sim_topk`` episodes by cosine;
priority = minmax over the pool of cos(q, e) + ``parent_weight`` * the max relevance of the
episode's selected parent semantics (0 if none).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..config import Stage2Config
from ..memory.bank import Bank
from .grouped import search_by_memory
from .stage1 import Stage1Output


@dataclass(slots=True)
class EpisodePick:
    row: int  # global episode row in the bank
    priority: float
    similarity: float  # cos(query, episode)
    parent_relevance: float  # max relevance of its selected parent semantics (0 if none)


def episode_pools(
    bank: Bank,
    q_x: np.ndarray,
    mem_idx: np.ndarray,
    s1: Stage1Output,
    cfg: Stage2Config,
    *,
    backend: str = "auto",
) -> list[list[EpisodePick]]:
    """Per query, the episode pool sorted by descending priority (ties to the lower row)."""
    n_q = q_x.shape[0]
    top, _ = search_by_memory(q_x, mem_idx, bank.epi, cfg.episode_sim_topk, backend=backend)
    # parents: (query, episode row, relevance) for every source episode of every selected semantic
    sel_q = np.repeat(np.arange(n_q), np.diff(s1.sem_offsets))
    epis = bank.sem["epis"][s1.semantics] if len(s1.semantics) else np.zeros((0, 1), np.int32)
    pq = np.repeat(sel_q, epis.shape[1])
    pe = epis.reshape(-1).astype(np.int64)
    prel = np.repeat(s1.sem_rel.astype(np.float64), epis.shape[1])
    ok = pe >= 0
    pq, pe, prel = pq[ok], pe[ok], prel[ok]
    # top episodes by cosine join with relevance 0 (no parent)
    tq, tj = np.nonzero(top >= 0)
    cq = np.concatenate([pq, tq])
    ce = np.concatenate([pe, top[tq, tj].astype(np.int64)])
    has_parent = np.concatenate([np.ones(len(pq), bool), np.zeros(len(tq), bool)])
    crel = np.concatenate([prel, np.zeros(len(tq))])
    n_e = max(int(bank.epi.rows_allocated), 1)
    key = cq * n_e + ce
    uniq, inv = np.unique(key, return_inverse=True)  # sorted by (query, row)
    rel = np.zeros(len(uniq))
    np.maximum.at(rel, inv[has_parent], crel[has_parent])
    uq, ue = uniq // n_e, uniq % n_e
    bounds = np.searchsorted(uq, np.arange(n_q + 1))
    out: list[list[EpisodePick]] = []
    for q in range(n_q):
        s, e = bounds[q], bounds[q + 1]
        if s == e:
            out.append([])
            continue
        qs = bank.epi["x"][ue[s:e]].astype(np.float64) @ q_x[q].astype(np.float64)
        lo, hi = float(qs.min()), float(qs.max())
        norm = np.full_like(qs, 0.5) if hi == lo else (qs - lo) / (hi - lo)
        prio = norm + cfg.parent_weight * rel[s:e]
        order = np.lexsort((ue[s:e], -prio))
        out.append(
            list(
                map(
                    EpisodePick,
                    ue[s:e][order].tolist(),
                    prio[order].tolist(),
                    qs[order].tolist(),
                    rel[s:e][order].tolist(),
                )
            )
        )
    return out
