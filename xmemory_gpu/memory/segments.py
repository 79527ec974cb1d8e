"""Per-memory row segments of one level in one arena.

Memory ``b`` owns rows ``starts[b] .. starts[b] + lengths[b]`` of the level's arrays and reserves
``capacity[b] >= lengths[b]`` rows there, so it can grow in place without moving any other memory's
rows. A memory that outgrows its capacity is moved to the end of the arena (its old rows become a
hole); ``compact`` closes holes and slack. Kernels take the segments directly: a compact arena is
plain CSR ``offsets [B+1]``; otherwise ``kernel_view`` gives CSR offsets over live parts and the
slack/holes between them (segments no query targets) and each memory's segment number.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class Segments:
    starts: np.ndarray  # [B] int64 first arena row of each memory
    lengths: np.ndarray  # [B] int64 live rows
    capacity: np.ndarray  # [B] int64 reserved rows (>= lengths)
    size: int  # arena rows in use (rows past every segment are free)

    @classmethod
    def from_lengths(cls, lengths: np.ndarray | list[int]) -> Segments:
        """Contiguous, slack-free segments (what construction and the store produce)."""
        n = np.asarray(lengths, np.int64).reshape(-1)
        starts = np.zeros(n.shape[0], np.int64)
        if n.shape[0]:
            np.cumsum(n[:-1], out=starts[1:])
        return cls(starts, n.copy(), n.copy(), int(n.sum()))

    @property
    def n_memories(self) -> int:
        return int(self.starts.shape[0])

    @property
    def is_compact(self) -> bool:
        """True when memory order equals arena order with no slack or holes (plain CSR)."""
        ends = self.starts + self.lengths
        return bool(
            np.array_equal(self.lengths, self.capacity)
            and (
                self.starts.size == 0
                or (
                    self.starts[0] == 0
                    and np.array_equal(self.starts[1:], ends[:-1])
                    and int(ends[-1]) == self.size
                )
            )
        )

    @property
    def offsets(self) -> np.ndarray:
        """[B+1] int64 CSR offsets; only for a compact arena (see ``kernel_view`` otherwise)."""
        if not self.is_compact:
            raise ValueError(
                "Segments.offsets: the arena has slack or holes; use kernel_view() or compact first"
            )
        return np.concatenate([[0], np.cumsum(self.lengths)]).astype(np.int64)

    def kernel_view(self) -> tuple[np.ndarray, np.ndarray]:
        """(offsets [S+1] int64 over the whole arena, segment [B] int64: memory b's live segment).

        Compact: plain CSR and ``arange(B)``. Otherwise the arena is cut at every live part's start
        and end; the pieces between (slack, holes) are segments that no query targets."""
        if self.is_compact:
            return self.offsets, np.arange(self.n_memories, dtype=np.int64)
        cuts, seg, cursor = [0], np.zeros(self.n_memories, np.int64), 0
        owners = np.flatnonzero(
            self.capacity > 0
        )  # a memory with no rows reserved gets an empty piece at the end
        for b in owners[np.argsort(self.starts[owners], kind="stable")]:
            s, n, c = int(self.starts[b]), int(self.lengths[b]), int(self.capacity[b])
            if s > cursor:  # a hole left by a moved memory
                cuts.append(s)
            seg[b] = len(cuts) - 1
            cuts.append(s + n)
            if c > n:  # slack reserved for growth
                cuts.append(s + c)
            cursor = s + c
        if self.size > cursor:
            cuts.append(self.size)
        for b in np.flatnonzero(self.capacity == 0):
            seg[b] = len(cuts) - 1
            cuts.append(cuts[-1])
        return np.asarray(cuts, np.int64), seg

    def rows(self, b: int) -> np.ndarray:
        """[lengths[b]] int64 arena rows of memory b."""
        s = int(self.starts[b])
        return np.arange(s, s + int(self.lengths[b]), dtype=np.int64)

    def memory_of(self, rows: np.ndarray) -> np.ndarray:
        """[R] int64 memory owning each live arena row (-1 for slack or holes)."""
        rows = np.asarray(rows, np.int64)
        owners = np.flatnonzero(self.lengths > 0)  # memories with no rows own none
        order = owners[np.argsort(self.starts[owners], kind="stable")]
        if not len(order):
            return np.full(rows.shape, -1, np.int64)
        pos = np.searchsorted(self.starts[order], rows, side="right") - 1
        out = np.where(pos >= 0, order[np.maximum(pos, 0)], -1)
        live = (out >= 0) & (rows < self.starts[np.maximum(out, 0)] + self.lengths[np.maximum(out, 0)])
        return np.where(live, out, -1)
