"""The finalise step of construction, shared by the bulk build (``construct.pipeline``) and growth
(``construct.incremental``): a memory's slice from its construction state (each theme's extractive
gist, the memory's stats and columns), and f(P) of the memories' final partitions in one call.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..config import XMemoryConfig
from ..memory.bank import MemorySlice
from ..memory.engine_state import EngineState
from ..memory.hierarchy import slice_of_records
from ..memory.records import Conversation, Episode, SemanticNode, Theme
from ..ops.devices import host
from ..ops.objective import partition_objective
from ..ops.rows import add_rows_in_order, dot4, dot4_gram
from .segment import MessageVectors
from .semantic import ONE_SOURCE
from .theme_state import ThemeState

SUMMARY_STATEMENTS = 2  # statements in a theme's gist
SUMMARY_WORDS = 24  # words kept of each


def theme_summary(texts: list[str], x: np.ndarray) -> str:
    """Extractive gist that reads as a sentence: the ``SUMMARY_STATEMENTS`` member statements
    closest to the theme's centroid (distinct texts, in member order, each cut to ``SUMMARY_WORDS``
    words) joined by "; ". texts [n], x [n, d] their unit rows."""
    picked = summary_picks(texts, x, np.zeros(len(texts), np.int32), 1)[1] if texts else []
    return gist([texts[i] for i in picked])


def gist(picked: list[str]) -> str:
    """The picked statements (in member order) as one sentence: each cut to ``SUMMARY_WORDS`` words,
    joined by "; ", a full stop unless it ends in "..." ("" for none)."""
    if not picked:
        return ""
    parts = []
    for t in picked:
        ws = t.split()
        parts.append(" ".join(ws[:SUMMARY_WORDS]) + " ..." if len(ws) > SUMMARY_WORDS else t.rstrip(" .;"))
    out = "; ".join(parts)
    return out if out.endswith("...") else out + "."


_GRAM_MAX = 1 << 12  # members x themes up to which summary_picks scores the whole gram


def summary_picks(
    texts: list[str], x: np.ndarray, theme_of: np.ndarray, n_themes: int
) -> tuple[np.ndarray, np.ndarray]:
    """Per theme r (rows ``theme_of == r``), the ``SUMMARY_STATEMENTS`` members nearest its float64
    sum (its members added in row order) by ``dot4`` (ties: the earlier; a NaN score last) whose
    texts differ (``!=``) from those picked before, ascending: (offsets [n_themes + 1], rows).
    texts [n], x [n, d] float32 or float64, theme_of [n] in [0, n_themes). Every theme's sum and
    scores in one pass; the texts compared theme by theme."""
    theme_of = np.asarray(theme_of, np.int64)
    order = np.argsort(theme_of, kind="stable")  # each theme's members, ascending
    group = theme_of[order]
    sums = np.zeros((n_themes, x.shape[1]))
    add_rows_in_order(sums, group, x, order)
    xs = x[order]
    if len(xs) * n_themes <= _GRAM_MAX:  # a small memory: every member against every sum, one C++ call
        score = dot4_gram(xs, sums)[np.arange(len(xs)), group]
    else:
        score = dot4(xs, sums[group])  # dot4's bits either way: the same pick on every CPU
    ranked = order[np.lexsort((-score, group))].tolist()  # theme by theme, the nearest first (a stable sort)
    bounds = np.searchsorted(group, np.arange(n_themes + 1)).tolist()
    offsets, rows = [0], []
    for r in range(n_themes):
        picked: list[int] = []
        for i in ranked[bounds[r] : bounds[r + 1]]:
            if all(texts[i] != texts[j] for j in picked):
                picked.append(i)
            if len(picked) == SUMMARY_STATEMENTS:
                break
        rows += sorted(picked)
        offsets.append(len(rows))
    return np.asarray(offsets, np.int64), np.asarray(rows, np.int64)


@dataclass(frozen=True)
class PreviousThemes:
    """A memory's themes before a growth: ``labels [n]`` int64 the theme id of each of its n statements
    (-1 none; a growth keeps every statement's row and adds rows after them), ``ids [K]`` its theme
    ids in row order and ``summaries``, theme id -> its summary (a theme ``forget`` left without one
    is not in it)."""

    labels: np.ndarray
    ids: list[int]
    summaries: dict[int, str]

    def unchanged(self, labels: np.ndarray) -> set[int]:
        """The ids of the themes whose member rows are the same under the grown memory's ``labels
        [S]`` (S >= n): no row left or joined them."""
        old = np.asarray(self.labels, np.int64)
        new = np.asarray(labels, np.int64)
        if len(new) < len(old):
            return set()
        moved = old != new[: len(old)]
        changed = np.unique(np.concatenate([old[moved], new[: len(old)][moved], new[len(old) :]]))
        return set(self.ids).difference(changed.tolist())

    def kept(self, labels: np.ndarray) -> set[int]:
        """The ids of the themes whose summary stands under ``labels``: unchanged, with a summary."""
        return self.unchanged(labels).intersection(self.summaries)


def theme_summaries(
    texts: list[str],
    sem_x: np.ndarray,
    theme_of: np.ndarray,
    theme_ids: list[int],
    previous: PreviousThemes | None = None,
) -> list[str]:
    """Each theme's summary (``gist`` of its ``summary_picks``), in ``theme_ids`` order; texts [S] and
    sem_x [S, d] the statements, theme_of [S] their theme rows. ``previous``: the themes of a memory
    being grown; a theme whose members are unchanged keeps its summary."""
    theme_of = np.asarray(theme_of, np.int64)
    n = len(theme_ids)
    order = np.argsort(theme_of, kind="stable")  # each theme's members, ascending
    m_off = np.searchsorted(theme_of[order], np.arange(n + 1)).tolist()
    out: list[str | None] = [None] * n
    if previous is not None and n:
        kept = previous.kept(np.asarray(theme_ids, np.int64)[theme_of])
        for r, t in enumerate(theme_ids):
            if t in kept:
                out[r] = previous.summaries[t]
    todo = [r for r in range(n) if out[r] is None]
    if todo:  # the picks of the themes to summarise only: each theme's are its own
        rows = np.concatenate([order[m_off[r] : m_off[r + 1]] for r in todo]).astype(np.int64)
        local = np.repeat(np.arange(len(todo)), [m_off[r + 1] - m_off[r] for r in todo])
        p_off, p_rows = summary_picks([texts[i] for i in rows.tolist()], sem_x[rows], local, len(todo))
        p_off, p_rows = p_off.tolist(), rows[p_rows].tolist()
        for j, r in enumerate(todo):
            out[r] = gist([texts[i] for i in p_rows[p_off[j] : p_off[j + 1]]])
    return out


def partition_stats(st: ThemeState, theme_of: np.ndarray, n_themes: int, cfg: XMemoryConfig) -> dict:
    """The stats of a memory's theme partition (sizes, reassignment, splits and merges, lineage)."""
    sizes = np.bincount(theme_of, minlength=n_themes) if n_themes else np.zeros(0, int)
    return {
        "n_themes": n_themes,
        "mean_theme_size": float(sizes.mean()) if len(sizes) else 0.0,
        "max_theme_size": int(sizes.max()) if len(sizes) else 0,
        "reassignment_ratio": float(st.reassigned.mean()) if len(st.reassigned) else 0.0,
        "n_splits": st.n_splits,
        "n_merges": st.n_merges,
        "split": cfg.theme.split,
        "merge": cfg.theme.merge,
        "lineage": st.lineage(),
    }


def finalize(
    conv: Conversation,
    episodes: list[Episode],
    semantics: list[SemanticNode],
    msg: MessageVectors,
    epi_x: np.ndarray,
    sem_x: np.ndarray,
    sem_idx: np.ndarray,
    sem_sim: np.ndarray,
    st: ThemeState,
    cfg: XMemoryConfig,
    n_raw: int,
    previous: PreviousThemes | None = None,
    engine: EngineState | None = None,
) -> MemorySlice:
    """The memory's slice from its construction state. ``previous``: the themes of a memory being
    grown; a theme whose members are unchanged keeps its summary (only changed themes are
    re-summarised). ``engine``: the live engine's state of a grown memory."""
    theme_ids, parents, theme_of, t_idx, t_sim = st.final()
    texts = [n.text for n in semantics]
    summaries = theme_summaries(texts, sem_x, theme_of, theme_ids, previous)
    themes = [Theme(id=t, summary=sm, parents=par) for t, sm, par in zip(theme_ids, summaries, parents)]
    stats = {
        "builder": "llm-free",
        ONE_SOURCE: True,
        "n_messages": len(conv.messages),
        "n_episodes": len(episodes),
        "n_statements": n_raw,
        "n_semantics": len(semantics),
        **partition_stats(st, theme_of, len(themes), cfg),
    }
    arrays = {
        "msg_x": msg.x,
        "epi_x": epi_x,
        "sem_x": sem_x,
        "theme_of": theme_of,
        "sem_knn_idx": sem_idx,
        "sem_knn_sim": sem_sim,
        "theme_knn_idx": t_idx,
        "theme_knn_sim": t_sim,
        "psg_x": msg.psg_x,
        "psg_msg": msg.psg_msg,
    }
    return slice_of_records(conv.sample_id, conv.messages, episodes, semantics, themes, arrays, stats, engine)


def record_objective(
    memories: list[MemorySlice], x, offs: np.ndarray, cfg: XMemoryConfig, backend: str
) -> None:
    """f(P) of every memory's final partition, in one batched call; x [N, d] the memories'
    semantic rows in order (CSR ``offs``), on the host or, for a GPU backend, already on the device."""
    if not memories:
        return
    labels = np.concatenate([m.cols["sem"]["theme"] for m in memories]).astype(np.int64)
    f = host(partition_objective(x, labels, offs, eps=cfg.theme.eps, backend=backend))
    for m, fb in zip(memories, f):
        m.stats["f_P"] = float(fb)
