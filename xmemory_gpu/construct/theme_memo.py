"""The last growth's themes of the large memories a live engine writes, per memory id, so that the
next growth's theme stage pays for what changed:

- ``HeldThemes``, a memory grown alone (the live engine's add and delete): its whole f(P) state, so
  the next growth extends it by the new statements instead of building it again over every statement
  (at nine public 1M-token conversations, 31k statements, that build cost an add about 90 ms);
- ``ThemeTop2``, a memory grown in a batch: its themes' two nearest others, so the next growth
  compares only the themes that changed with the others, not every pair (at 10M tokens of one chat,
  1,700 themes, every pair would cost an add 70 ms).

Bounded (least recently used first out, by bytes; a state too large for the bound is held as its
``ThemeTop2``). An entry is checked bit for bit where it is read (a state: the statement rows and
theme labels it was built on; a ``ThemeTop2``: the themes' labels and sums), so one that is stale (a
write this engine did not see) or dropped costs speed, never a different memory (but for a delete's
recorded f(P): the held state's where there is one, within a relative 1e-12 of a fresh score). A
growth's entries wait (``put``) until its write is stored (``publish``): a write that fails leaves
none of what it would have written."""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np

from ..ops.objective import PartitionState, ThemeTop2


@dataclass(frozen=True)
class HeldThemes:
    """One memory's f(P) state as its last growth left it (a ``PartitionState`` of that memory alone,
    ``detached``) and the statement rows it was built on, ``rows [n, d]`` float32 (the growth's own
    array, not a copy). The next growth starts from a shallow copy of ``state`` where the memory's
    first n statement rows and their theme labels are these, bit for bit (``themes._held``)."""

    state: PartitionState
    rows: np.ndarray

    @property
    def labels(self) -> np.ndarray:
        """[K] the themes' labels, ascending (as ``ThemeTop2.labels``)."""
        return self.state.theme_label

    @property
    def nbytes(self) -> int:
        base = self.rows.base if isinstance(self.rows.base, np.ndarray) else self.rows  # what the view keeps
        return int(self.state.nbytes + max(self.rows.nbytes, base.nbytes))

    def top2(self) -> ThemeTop2:
        """The state's themes as a ``ThemeTop2`` hint (for a growth it no longer fits, or a batch)."""
        return self.state.block_top2(0)


Held = HeldThemes | ThemeTop2  # what the memo holds for a memory


class ThemeMemo:
    """Memory id -> its themes after its last growth (``HeldThemes`` or ``ThemeTop2``). Entries of
    fewer than ``min_themes`` themes are not kept (building their state costs them little), and a
    memory of fewer than ``min_state_rows`` statements keeps its ``ThemeTop2`` only (its state would
    cost RAM, about 2.5x its statement vectors, for a few ms an add); at most ``max_bytes`` in all.
    Safe to share between threads."""

    def __init__(self, max_bytes: int = 256 << 20, min_themes: int = 64, min_state_rows: int = 8192) -> None:
        self.max_bytes, self.min_themes = int(max_bytes), int(min_themes)
        self.min_state_rows = int(min_state_rows)
        self._held: OrderedDict[str, tuple[Held, int]] = (
            OrderedDict()
        )  # memory id -> (entry, its bytes when held)
        self._pending: dict[str, Held | None] = {}
        self._bytes = 0
        self._lock = threading.Lock()

    def get(self, memory_id: str) -> Held | None:
        with self._lock:
            entry = self._held.get(memory_id)
            if entry is None:
                return None
            self._held.move_to_end(memory_id)
            return entry[0]

    def keeps_state(self, n_statements: int) -> bool:
        """Whether a memory of ``n_statements`` would have its whole state held (not its ``ThemeTop2``)."""
        return int(n_statements) >= self.min_state_rows

    def put(self, memory_id: str, hint: Held | None) -> None:
        """``hint`` as the memory's once its write is stored (``publish``); a state of fewer than
        ``min_state_rows`` statements (cheap to build again: a few ms) or too large for the bound
        waits as its ``ThemeTop2``."""
        if isinstance(hint, HeldThemes) and (
            not self.keeps_state(len(hint.rows)) or hint.nbytes > self.max_bytes
        ):
            hint = hint.top2()
        with self._lock:
            self._pending[memory_id] = hint

    def publish(self, memory_ids) -> None:
        """The written memories' entries put since the last call become theirs; the others put are dropped
        (a write that failed)."""
        with self._lock:
            pending, self._pending = self._pending, {}
            for m in memory_ids:
                if m in pending:
                    self._hold(m, pending[m])

    def discard(self) -> None:
        """Drop the entries put since the last ``publish`` (their write failed)."""
        with self._lock:
            self._pending = {}

    def _hold(self, memory_id: str, hint: Held | None) -> None:
        """Hold ``hint`` as the memory's (``put`` made a state too large a ``ThemeTop2``; None, too few
        themes or too large: forget the memory's); the caller holds the lock."""
        old = self._held.pop(memory_id, None)
        self._bytes -= 0 if old is None else old[1]
        if hint is None or len(hint.labels) < self.min_themes or hint.nbytes > self.max_bytes:
            return
        # a state's bytes as held now: a later growth of a copy of it may move its row buffer on
        size = hint.nbytes
        self._held[memory_id] = (hint, size)
        self._bytes += size
        while self._bytes > self.max_bytes:
            _, out = self._held.popitem(last=False)
            self._bytes -= out[1]

    def drop(self, memory_ids=None) -> None:
        """Forget these memories' entries (all when None), held or put."""
        with self._lock:
            if memory_ids is None:
                self._pending = {}
            for m in list(self._held) if memory_ids is None else memory_ids:
                self._pending.pop(m, None)
                out = self._held.pop(m, None)
                self._bytes -= 0 if out is None else out[1]

    @property
    def nbytes(self) -> int:
        return self._bytes

    def __len__(self) -> int:
        return len(self._held)
