"""A bank: many memories in struct-of-arrays form with CSR offsets, so one kernel launch sees
all of them (DESIGN section 3). Graph ids in a bank are global rows."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..ops._arrays import csr_offsets
from .hierarchy import Memory


def _globalise(idx: np.ndarray, base: int) -> np.ndarray:
    return np.where(idx >= 0, idx + base, -1).astype(np.int32)


@dataclass
class Bank:
    memory_ids: list[str]
    memories: list[Memory]
    sem_x: np.ndarray  # [N, d] float32
    sem_offsets: np.ndarray  # [B+1] int64
    epi_x: np.ndarray  # [E, d] float32
    epi_offsets: np.ndarray  # [B+1] int64
    msg_x: np.ndarray  # [M, d] float32
    msg_offsets: np.ndarray  # [B+1] int64
    theme_of: np.ndarray  # [N] int32 global theme rows
    theme_sum: np.ndarray  # [K, d] float32
    theme_count: np.ndarray  # [K] int32
    theme_x: np.ndarray  # [K, d] float32 unit-norm centroids
    theme_offsets: np.ndarray  # [B+1] int64
    sem_knn_idx: np.ndarray  # [N, k] int32 global rows
    sem_knn_sim: np.ndarray  # [N, k] float32
    theme_knn_idx: np.ndarray  # [K, k] int32 global rows
    theme_knn_sim: np.ndarray  # [K, k] float32

    @classmethod
    def from_memories(cls, memories: list[Memory], dim: int | None = None) -> Bank:
        if not memories and dim is None:
            raise ValueError("Bank.from_memories: no memories and no dim given")
        d = dim if dim is not None else memories[0].dim
        sem_off = csr_offsets([m.sem_x.shape[0] for m in memories])
        th_off = csr_offsets([len(m.themes) for m in memories])

        def cat(arrs: list[np.ndarray], shape_tail: tuple[int, ...], dtype) -> np.ndarray:
            arrs = [a for a in arrs if a.shape[0]]
            return np.concatenate(arrs).astype(dtype, copy=False) if arrs else np.zeros((0, *shape_tail), dtype)

        def knn(name: str, offs: np.ndarray) -> np.ndarray:
            parts = [_globalise(getattr(m, name), int(offs[b])) for b, m in enumerate(memories)]
            k = max([p.shape[1] for p in parts if p.ndim == 2] + [0])
            parts = [np.pad(p.reshape(p.shape[0], -1), ((0, 0), (0, k - p.reshape(p.shape[0], -1).shape[1])), constant_values=-1) for p in parts]
            return cat(parts, (k,), np.int32)

        def knn_sim(name: str) -> np.ndarray:
            parts = [getattr(m, name).reshape(getattr(m, name).shape[0], -1) for m in memories]
            k = max([p.shape[1] for p in parts] + [0])
            parts = [np.pad(p, ((0, 0), (0, k - p.shape[1])), constant_values=-np.inf) for p in parts]
            return cat(parts, (k,), np.float32)

        return cls(
            memory_ids=[m.memory_id for m in memories],
            memories=list(memories),
            sem_x=cat([m.sem_x for m in memories], (d,), np.float32),
            sem_offsets=sem_off,
            epi_x=cat([m.epi_x for m in memories], (d,), np.float32),
            epi_offsets=csr_offsets([m.epi_x.shape[0] for m in memories]),
            msg_x=cat([m.msg_x for m in memories], (d,), np.float32),
            msg_offsets=csr_offsets([m.msg_x.shape[0] for m in memories]),
            theme_of=cat([(m.theme_of + th_off[b]).astype(np.int32) for b, m in enumerate(memories)], (), np.int32),
            theme_sum=cat([m.theme_sum for m in memories], (d,), np.float32),
            theme_count=cat([m.theme_count for m in memories], (), np.int32),
            theme_x=cat([m.theme_x for m in memories], (d,), np.float32),
            theme_offsets=th_off,
            sem_knn_idx=knn("sem_knn_idx", sem_off),
            sem_knn_sim=knn_sim("sem_knn_sim"),
            theme_knn_idx=knn("theme_knn_idx", th_off),
            theme_knn_sim=knn_sim("theme_knn_sim"),
        )

    def index_of(self, memory_id: str) -> int:
        try:
            return self.memory_ids.index(memory_id)
        except ValueError:
            raise KeyError(f"memory {memory_id!r} is not in this bank ({len(self.memory_ids)} memories)") from None
