"""One memory (one conversation's hierarchy): records plus the arrays kernels read.

Row i of ``sem_x`` is ``semantics[i]``; ``theme_of[i]`` is a local theme row (index into
``themes``); kNN graphs hold local row ids with ``-1`` for "no edge".
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .records import Episode, Message, SemanticNode, Theme


@dataclass
class Memory:
    memory_id: str
    messages: list[Message]
    episodes: list[Episode]
    semantics: list[SemanticNode]
    themes: list[Theme]
    msg_x: np.ndarray  # [n_msg, d] float32, unit norm
    epi_x: np.ndarray  # [n_epi, d] float32, unit norm
    sem_x: np.ndarray  # [n_sem, d] float32, unit norm
    theme_of: np.ndarray  # [n_sem] int32, local theme row
    sem_knn_idx: np.ndarray  # [n_sem, k] int32 local rows, -1 = none
    sem_knn_sim: np.ndarray  # [n_sem, k] float32, -inf where none
    theme_knn_idx: np.ndarray  # [K, k] int32 local rows, -1 = none
    theme_knn_sim: np.ndarray  # [K, k] float32
    stats: dict[str, Any] = field(default_factory=dict)  # f(P), reassignment ratio, timings, ...

    @property
    def dim(self) -> int:
        return int(self.sem_x.shape[1]) if self.sem_x.ndim == 2 else int(self.msg_x.shape[1])

    @property
    def theme_count(self) -> np.ndarray:
        """[K] int32 members per theme."""
        return np.bincount(self.theme_of, minlength=len(self.themes)).astype(np.int32)

    @property
    def theme_sum(self) -> np.ndarray:
        """[K, d] float32 sum of member embeddings per theme."""
        out = np.zeros((len(self.themes), self.sem_x.shape[1]), dtype=np.float64)
        np.add.at(out, self.theme_of, self.sem_x.astype(np.float64))
        return out.astype(np.float32)

    @property
    def theme_x(self) -> np.ndarray:
        """[K, d] float32 unit-norm theme centroids (zero rows for empty themes)."""
        s = self.theme_sum.astype(np.float64)
        n = np.linalg.norm(s, axis=1, keepdims=True)
        return np.divide(s, n, out=np.zeros_like(s), where=n > 0).astype(np.float32)

    def theme_members(self, t: int) -> np.ndarray:
        return np.flatnonzero(self.theme_of == t)

    def arrays(self) -> dict[str, np.ndarray]:
        """The array fields by name (what the store writes as .npy)."""
        return {name: getattr(self, name) for name in ARRAY_FIELDS}


ARRAY_FIELDS: dict[str, tuple[Any, int]] = {
    # name: (dtype, ndim)
    "msg_x": (np.float32, 2),
    "epi_x": (np.float32, 2),
    "sem_x": (np.float32, 2),
    "theme_of": (np.int32, 1),
    "sem_knn_idx": (np.int32, 2),
    "sem_knn_sim": (np.float32, 2),
    "theme_knn_idx": (np.int32, 2),
    "theme_knn_sim": (np.float32, 2),
}
