"""One memory restricted to some of its messages: what a filtered search runs over.

``restrict(mem, keep)`` keeps the messages whose ids are in ``keep`` and every derived unit all of
whose source messages are kept: an episode when all its messages are, a statement when all its
source messages are, a theme when all its statements are. Unit ids, texts and vectors are the
memory's own, so what a search over the restriction returns is addressable in the whole memory;
the kNN graphs lose their edges to dropped rows (the rest keep their order and similarities).
Nothing is re-derived: a restriction costs array slicing only.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from .hierarchy import Memory


def _kept_rows(n: int, keep: np.ndarray) -> np.ndarray:
    """Old row -> new row (or -1) for a boolean ``keep`` [n]."""
    out = np.full(n, -1, np.int64)
    out[keep] = np.arange(int(keep.sum()))
    return out


def _graph(idx: np.ndarray, sim: np.ndarray, keep: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A kNN graph [n, k] restricted to the kept rows: edges to dropped rows removed, the rest
    moved left in their order, padded with -1 / -inf."""
    new_of = _kept_rows(keep.shape[0], keep)
    idx, sim = idx[keep], sim[keep]
    mapped = np.where(idx >= 0, new_of[np.maximum(idx, 0)], -1)
    order = np.argsort(mapped < 0, axis=1, kind="stable")  # kept edges first, in graph order
    mapped = np.take_along_axis(mapped, order, axis=1)
    sim = np.take_along_axis(sim, order, axis=1)
    return mapped.astype(np.int32), np.where(mapped >= 0, sim, -np.inf).astype(np.float32)


def restrict(mem: Memory, keep: set[str], summarize: Callable[[list[str], np.ndarray], str]) -> Memory:
    """``mem`` with only the messages whose ids are in ``keep`` and the units derived from them
    alone; ``summarize(texts, x [n, d])`` writes the summary of a theme that lost statements."""
    msg_keep = np.array([m.id in keep for m in mem.messages], bool)
    epi_keep = np.array([all(i in keep for i in e.message_ids) for e in mem.episodes], bool)
    sem_keep = np.array([all(i in keep for i in s.message_ids) for s in mem.semantics], bool)
    n_th = len(mem.themes)
    theme_of = np.asarray(mem.theme_of, np.int64)
    whole = np.ones(n_th, bool)
    if theme_of.size:
        np.logical_and.at(whole, theme_of, sem_keep)
    theme_keep = (
        np.bincount(theme_of[sem_keep], minlength=n_th) > 0 if theme_of.size else np.zeros(n_th, bool)
    )
    themes = []
    for r in np.flatnonzero(theme_keep).tolist():
        t = mem.themes[r]
        if not whole[r]:
            rows = np.flatnonzero((theme_of == r) & sem_keep)
            t = type(t)(
                t.id, summarize([mem.semantics[i].text for i in rows], mem.sem_x[rows]), list(t.parents)
            )
        themes.append(t)
    epi_ids = {e.id for e, k in zip(mem.episodes, epi_keep) if k}
    semantics = []
    for s, k in zip(mem.semantics, sem_keep):
        if k:
            s2 = type(s)(**vars(s))
            s2.episode_ids = [i for i in s.episode_ids if i in epi_ids]
            semantics.append(s2)
    sem_idx, sem_sim = _graph(np.asarray(mem.sem_knn_idx), np.asarray(mem.sem_knn_sim), sem_keep)
    th_idx, th_sim = _graph(np.asarray(mem.theme_knn_idx), np.asarray(mem.theme_knn_sim), theme_keep)
    psg_msg = np.asarray(mem.psg_msg, np.int64)
    psg_keep = msg_keep[psg_msg] if psg_msg.size else np.zeros(0, bool)
    return Memory(
        mem.memory_id,
        [m for m, k in zip(mem.messages, msg_keep) if k],
        [e for e, k in zip(mem.episodes, epi_keep) if k],
        semantics,
        themes,
        mem.msg_x[msg_keep],
        mem.epi_x[epi_keep],
        mem.sem_x[sem_keep],
        _kept_rows(n_th, theme_keep)[theme_of[sem_keep]].astype(np.int32),
        sem_idx,
        sem_sim,
        th_idx,
        th_sim,
        dict(mem.stats),
        mem.psg_x[psg_keep],
        _kept_rows(len(mem.messages), msg_keep)[psg_msg[psg_keep]].astype(np.int32),
        mem.engine,
    )


__all__ = ["restrict"]
