"""The peers' retrieval strategies, batched over queries and memories, in the same harness.

``memory-only``: similarity top-k over the hierarchy's semantics and episodes (no selection).
``naive-rag``: top-k chunks of raw messages (``chunk_messages`` consecutive turns of one session;
a chunk's embedding is the normalised mean of its messages' embeddings).
``tir``: Nano-Memory's turn-isolation retrieval: each session scored by its single best turn,
the top sessions returned whole.
"""

from __future__ import annotations

import numpy as np

from ..config import BaselinesConfig
from ..embed.base import normalize_rows
from ..memory.bank import Bank
from ..memory.records import session_windows
from ..ops._arrays import csr_offsets
from .context import episode_unit, messages_unit, semantic_unit
from .grouped import search_by_memory
from .result import RetrievedUnit


def memory_only(bank: Bank, q_x, mem_idx, cfg: BaselinesConfig, backend: str = "auto") -> list[list[RetrievedUnit]]:
    si, ss = search_by_memory(q_x, mem_idx, bank.sem_x, bank.sem_offsets, cfg.memory_only_semantics, backend=backend)
    ei, es = search_by_memory(q_x, mem_idx, bank.epi_x, bank.epi_offsets, cfg.memory_only_episodes, backend=backend)
    out = []
    for q, b in enumerate(mem_idx):
        mem, s0, e0 = bank.memories[b], int(bank.sem_offsets[b]), int(bank.epi_offsets[b])
        units = [semantic_unit(mem, int(r) - s0, float(s), {"relevance": float(s)}) for r, s in zip(si[q], ss[q]) if r >= 0]
        units += [episode_unit(mem, int(r) - e0, float(s), {"similarity": float(s)}) for r, s in zip(ei[q], es[q]) if r >= 0]
        out.append(units)
    return out


class Chunks:
    """Naive-RAG chunks of every memory of a bank: x [C, d], offsets [B+1], message rows per chunk."""

    def __init__(self, bank: Bank, chunk_messages: int) -> None:
        if chunk_messages < 1:
            raise ValueError(f"chunk_messages must be >= 1, got {chunk_messages}")
        xs, counts, self.rows = [], [], []
        for mem in bank.memories:
            rows = [np.arange(s, e) for s, e in session_windows(mem.messages, chunk_messages)]
            self.rows.append(rows)
            counts.append(len(rows))
            xs.append(np.stack([mem.msg_x[r].mean(axis=0) for r in rows]) if rows else np.zeros((0, bank.sem_x.shape[1]), np.float32))
        self.x = normalize_rows(np.concatenate(xs)) if xs else np.zeros((0, bank.sem_x.shape[1]), np.float32)
        self.offsets = csr_offsets(counts)


def naive_rag(bank: Bank, chunks: Chunks, q_x, mem_idx, cfg: BaselinesConfig, backend: str = "auto") -> list[list[RetrievedUnit]]:
    ci, cs = search_by_memory(q_x, mem_idx, chunks.x, chunks.offsets, cfg.naive_rag_k, backend=backend)
    out = []
    for q, b in enumerate(mem_idx):
        mem, c0 = bank.memories[b], int(chunks.offsets[b])
        out.append([
            messages_unit("chunk", str(int(r) - c0), mem, chunks.rows[b][int(r) - c0], float(s), {"similarity": float(s)})
            for r, s in zip(ci[q], cs[q]) if r >= 0
        ])
    return out


def tir(bank: Bank, q_x, mem_idx, cfg: BaselinesConfig) -> list[list[RetrievedUnit]]:
    out: list[list[RetrievedUnit]] = [[] for _ in range(len(mem_idx))]
    for b in np.unique(mem_idx):
        mem = bank.memories[b]
        qs = np.flatnonzero(mem_idx == b)
        if not mem.messages:
            continue
        sessions = np.array([m.session for m in mem.messages])
        starts = np.flatnonzero(np.r_[True, sessions[1:] != sessions[:-1]])
        ends = np.r_[starts[1:], len(sessions)]
        sims = q_x[qs].astype(np.float64) @ mem.msg_x.astype(np.float64).T  # [q_b, n_msg]
        best = np.maximum.reduceat(sims, starts, axis=1)  # [q_b, n_sessions]: each session by its best turn
        for j, q in enumerate(qs):
            top = np.lexsort((np.arange(len(starts)), -best[j]))[: cfg.tir_sessions]
            out[q] = [
                messages_unit("session", str(int(sessions[starts[s]])), mem, np.arange(starts[s], ends[s]), float(best[j, s]),
                              {"best_turn": float(best[j, s])})
                for s in top
            ]
    return out
