"""The peers' retrieval strategies, batched over queries and memories, in the same harness.

``memory-only``: similarity top-k over the hierarchy's semantics and episodes (no selection).
``naive-rag``: top-k chunks of raw messages (``chunk_messages`` consecutive turns of one session;
a chunk's embedding is the normalised mean of its messages' embeddings).
``chunk-rag``: messages cut into passages of at most N words (``chunk_rag.py``).
``tir``: Nano-Memory's turn-isolation retrieval: each session scored by its single best turn,
the top sessions returned whole.
"""

from __future__ import annotations

import numpy as np

from ..config import BaselinesConfig
from ..embed.base import normalize_rows
from ..memory.bank import Bank, Level
from ..memory.segments import Segments
from .context import (
    as_fill,
    episode_rows,
    episode_unit,
    message_rows,
    messages_unit,
    semantic_rows,
    semantic_unit,
)
from .grouped import search_by_memory
from .result import RetrievedUnit


def memory_only(
    bank: Bank, q_x, mem_idx, cfg: BaselinesConfig, backend: str = "auto"
) -> list[list[RetrievedUnit]]:
    si, ss = search_by_memory(q_x, mem_idx, bank.sem, cfg.memory_only_semantics, backend=backend)
    ei, es = search_by_memory(q_x, mem_idx, bank.epi, cfg.memory_only_episodes, backend=backend)
    out, sem_rows, epi_rows = [], semantic_rows(bank), episode_rows(bank)
    for q in range(len(mem_idx)):
        units = [
            semantic_unit(bank, int(r), float(s), {"relevance": float(s)}, sem_rows)
            for r, s in zip(si[q], ss[q])
            if r >= 0
        ]
        units += [
            episode_unit(bank, int(r), float(s), {"similarity": float(s)}, epi_rows)
            for r, s in zip(ei[q], es[q])
            if r >= 0
        ]
        out.append(units)
    return out


def session_runs(bank: Bank, b: int) -> tuple[np.ndarray, np.ndarray]:
    """(starts, ends) global message rows of memory b's sessions, in conversation order."""
    rows = bank.msg.seg.rows(b)
    sessions = bank.msg["session"][rows]
    cut = np.flatnonzero(np.r_[True, sessions[1:] != sessions[:-1]]) if len(rows) else np.zeros(0, np.int64)
    starts = rows[cut] if len(rows) else cut
    ends = np.r_[starts[1:], rows[-1] + 1] if len(rows) else cut
    return starts, ends


class Chunks:
    """Naive-RAG chunks of every memory of a bank as a searchable level: ``level["x"]`` [C, d],
    segments per memory, and the global message rows of each chunk."""

    def __init__(self, bank: Bank, chunk_messages: int) -> None:
        if chunk_messages < 1:
            raise ValueError(f"baselines.chunk_messages must be >= 1, got {chunk_messages}")
        sums, counts, self.rows = [], [], []
        for b in range(bank.n_memories):
            mine = []
            for s, e in zip(*session_runs(bank, b)):
                mine += [
                    np.arange(a, min(a + chunk_messages, e)) for a in range(int(s), int(e), chunk_messages)
                ]
            self.rows.append(mine)
            counts.append(len(mine))
            sums += [bank.msg["x"][r].mean(axis=0) for r in mine]
        x = normalize_rows(np.stack(sums)) if sums else np.zeros((0, bank.dim), np.float32)
        self.level = Level({"x": x}, Segments.from_lengths(counts))


def naive_rag(
    bank: Bank, chunks: Chunks, q_x, mem_idx, cfg: BaselinesConfig, backend: str = "auto", parts=None
) -> list[list[RetrievedUnit]]:
    """The top ``naive_rag_k`` chunks; under a token budget the next ones up to ``naive_rag_fill``
    in all are taken while they fit (as many chunks as fit). ``parts`` (a ``passages.Parts``): a
    single-message chunk too long for what is left gives its best passage instead."""
    k = max(cfg.naive_rag_k, cfg.naive_rag_fill)
    ci, cs = search_by_memory(q_x, mem_idx, chunks.level, k, backend=backend)
    starts = chunks.level.seg.starts
    out, lines = [], message_rows(bank)
    for q, b in enumerate(mem_idx):
        c0 = int(starts[b])
        units: list[RetrievedUnit] = []
        for j, (r, s) in enumerate(zip(ci[q], cs[q])):
            if r < 0:
                continue
            rows = chunks.rows[b][int(r) - c0]
            u = messages_unit(
                "chunk", str(int(r) - c0), bank, rows, float(s), {"similarity": float(s)}, lines
            )
            units.append(u if j < cfg.naive_rag_k else as_fill(u))
            if parts is not None and len(rows) == 1:
                units += parts.passage_parts(
                    int(rows[0]), q_x[q], q, 0
                )  # its passages, best first (built where the chunk does not fit)
        out.append(units)
    return out


def tir(bank: Bank, q_x, mem_idx, cfg: BaselinesConfig) -> list[list[RetrievedUnit]]:
    out: list[list[RetrievedUnit]] = [[] for _ in range(len(mem_idx))]
    lines = message_rows(bank)
    for b in np.unique(mem_idx):
        starts, ends = session_runs(bank, int(b))
        if not len(starts):
            continue
        qs = np.flatnonzero(mem_idx == b)
        rows = bank.msg.seg.rows(int(b))
        sims = q_x[qs].astype(np.float64) @ bank.msg["x"][rows].astype(np.float64).T  # [q_b, n_msg]
        best = np.maximum.reduceat(
            sims, starts - rows[0], axis=1
        )  # [q_b, n_sessions]: each session by its best turn
        for j, q in enumerate(qs):
            top = np.lexsort((np.arange(len(starts)), -best[j]))[: cfg.tir_sessions]
            out[q] = [
                messages_unit(
                    "session",
                    str(int(bank.msg["session"][starts[s]])),
                    bank,
                    np.arange(starts[s], ends[s]),
                    float(best[j, s]),
                    {"best_turn": float(best[j, s])},
                    lines,
                )
                for s in top
            ]
    return out
