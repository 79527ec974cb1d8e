"""Stage I: greedy coverage/relevance selection (Eq. 4) of themes, then of semantics, for a
batch of queries over many memories at once.

Per query: the top-``semantic_pool`` semantics of its memory by cosine (one ``knn_search`` for the
batch); their themes are the theme candidates (relevance = cos(query, centroid), or cos(query, summary
embedding) with ``theme_relevance = "summary"``), selected by
``coverage_select`` with neighbours from the theme kNN graph restricted to the candidates
(budget ``theme_budget``); then the pool semantics inside the selected themes are selected the
same way with the semantic kNN graph (budget ``semantic_budget``); with no theme selected, the
whole pool competes. Every step is one call for the whole batch.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..config import Stage1Config
from ..memory.bank import Bank
from ..ops.checks import csr_offsets
from ..ops.coverage import coverage_select
from .grouped import search_by_memory


@dataclass
class Stage1Output:
    """Per query q, CSR slices ``*_offsets[q]:*_offsets[q+1]`` of global bank rows in pick order."""

    theme_offsets: np.ndarray  # [Q+1] int64
    themes: np.ndarray  # [T] int64 global theme rows
    theme_value: np.ndarray  # [T] float32 Eq. 4 value at pick time
    theme_rel: np.ndarray  # [T] float32 cos(query, centroid or summary embedding)
    sem_offsets: np.ndarray  # [Q+1] int64
    semantics: np.ndarray  # [S] int64 global semantic rows
    sem_value: np.ndarray  # [S] float32
    sem_rel: np.ndarray  # [S] float32 cos(query, statement)
    fallback: np.ndarray  # [Q] bool: no theme selected, semantics chosen from the whole pool (in the notes)


def restrict_graph(
    cand_q: np.ndarray,
    cand_row: np.ndarray,
    cand_offsets: np.ndarray,
    knn_idx: np.ndarray,
    knn_sim: np.ndarray,
    n_rows: int,
) -> tuple[np.ndarray, np.ndarray]:
    """Neighbour lists restricted to each query's candidates, as local positions.

    cand_q [M], cand_row [M] global rows (query-major, CSR ``cand_offsets``); knn_idx/knn_sim [n_rows, k].
    Returns nbr_idx [M, k] int32 positions local to the query (-1 where the neighbour is not a
    candidate or the weight is <= 0) and nbr_w [M, k] float32.
    """
    m = cand_row.shape[0]
    k = knn_idx.shape[1] if knn_idx.ndim == 2 else 0
    if m == 0 or k == 0:
        return np.full((m, max(k, 1)), -1, np.int32), np.zeros((m, max(k, 1)), np.float32)
    key = cand_q.astype(np.int64) * n_rows + cand_row
    order = np.argsort(key, kind="stable")
    skey = key[order]
    nb = knn_idx[cand_row].astype(np.int64)
    w = knn_sim[cand_row].astype(np.float32)
    nkey = cand_q[:, None].astype(np.int64) * n_rows + np.maximum(nb, 0)
    pos = np.minimum(np.searchsorted(skey, nkey), m - 1)
    hit = (skey[pos] == nkey) & (nb >= 0) & (w > 0)
    local = order[pos] - cand_offsets[cand_q][:, None]
    return np.where(hit, local, -1).astype(np.int32), np.where(hit, w, 0.0).astype(np.float32)


def _select(cand_q, cand_row, cand_rel, n_q, knn_idx, knn_sim, n_rows, budget, cfg, backend):
    off = csr_offsets(np.bincount(cand_q, minlength=n_q))
    nbr_idx, nbr_w = restrict_graph(cand_q, cand_row, off, knn_idx, knn_sim, n_rows)
    sel_off, sel, val = coverage_select(
        off,
        nbr_idx,
        nbr_w,
        cand_rel,
        alpha=cfg.alpha,
        budget=budget,
        target=cfg.coverage_target,
        stop=cfg.coverage_stop,
        backend=backend,
    )
    q_of_pick = np.repeat(np.arange(n_q), np.diff(sel_off))
    pick = off[q_of_pick] + sel.astype(np.int64)
    return sel_off, cand_row[pick], val.astype(np.float32), cand_rel[pick].astype(np.float32)


def run_stage1(
    bank: Bank,
    q_x: np.ndarray,
    mem_idx: np.ndarray,
    cfg: Stage1Config,
    *,
    backend: str = "auto",
    theme_vectors: Callable[[np.ndarray], np.ndarray] | None = None,
) -> Stage1Output:
    """q_x [Q, d] unit query embeddings; mem_idx [Q] bank memory index of each query.

    theme_vectors(rows [n] global theme rows) -> [n, d] unit rows that theme relevance is measured
    against; default the centroids (``bank.theme_x``)."""
    q_x = np.asarray(q_x, np.float32)
    mem_idx = np.asarray(mem_idx, np.int64)
    n_q = q_x.shape[0]
    # 1. the semantic pool: one segment-restricted search for the batch
    pool_idx, pool_sim = search_by_memory(q_x, mem_idx, bank.sem, cfg.semantic_pool, backend=backend)
    pq, pj = np.nonzero(pool_idx >= 0)  # query-major, each query's pool in descending similarity
    p_row = pool_idx[pq, pj].astype(np.int64)
    p_rel = pool_sim[pq, pj].astype(np.float64)

    # 2. theme candidates: the distinct themes of each query's pool, by descending relevance
    n_th = bank.theme.rows_allocated
    tkey = np.unique(pq * n_th + bank.theme_of[p_row].astype(np.int64))
    tq, trow = tkey // n_th, tkey % n_th
    t_x = bank.theme_x[trow] if theme_vectors is None else theme_vectors(trow)
    trel = np.einsum("ij,ij->i", np.asarray(t_x, np.float64), q_x[tq].astype(np.float64))
    o = np.lexsort((trow, -trel, tq))
    tq, trow, trel = tq[o], trow[o], trel[o]
    th_off, th_sel, th_val, th_rel = _select(
        tq, trow, trel, n_q, bank.theme_knn_idx, bank.theme_knn_sim, n_th, cfg.theme_budget, cfg, backend
    )

    # 3. semantic candidates: pool semantics inside the selected themes (the whole pool if none)
    th_q = np.repeat(np.arange(n_q), np.diff(th_off))
    chosen = np.isin(pq * n_th + bank.theme_of[p_row].astype(np.int64), th_q * n_th + th_sel)
    fallback = np.diff(th_off) == 0
    keep = chosen | fallback[pq]
    n_sem = bank.sem.rows_allocated
    se_off, se_sel, se_val, se_rel = _select(
        pq[keep],
        p_row[keep],
        p_rel[keep],
        n_q,
        bank.sem_knn_idx,
        bank.sem_knn_sim,
        n_sem,
        cfg.semantic_budget,
        cfg,
        backend,
    )
    return Stage1Output(th_off, th_sel, th_val, th_rel, se_off, se_sel, se_val, se_rel, fallback)
