"""The last growth's themes of the large memories a live engine writes (``ThemeTop2`` per memory id),
so that the next growth's theme stage compares only the themes that changed with the others, not every
pair: at 10M tokens of one chat (1,700 themes) every pair would cost an add 70 ms. Bounded (least recently
used first out, by bytes); an entry's labels and sums are checked bit for bit where it is read, so one
that is stale (a write this engine did not see) or dropped costs speed, never a different memory.
A growth's entries wait (``put``) until its write is stored (``publish``): a write that fails leaves
none of what it would have written."""

from __future__ import annotations

import threading
from collections import OrderedDict

from ..ops.objective import ThemeTop2


class ThemeMemo:
    """Memory id -> its themes' ``ThemeTop2`` after its last growth. Entries of fewer than
    ``min_themes`` themes are not kept (a whole comparison costs them little); at most ``max_bytes``
    in all. Safe to share between threads."""

    def __init__(self, max_bytes: int = 64 << 20, min_themes: int = 64) -> None:
        self.max_bytes, self.min_themes = int(max_bytes), int(min_themes)
        self._held: OrderedDict[str, ThemeTop2] = OrderedDict()
        self._pending: dict[str, ThemeTop2 | None] = {}
        self._bytes = 0
        self._lock = threading.Lock()

    def get(self, memory_id: str) -> ThemeTop2 | None:
        with self._lock:
            hint = self._held.get(memory_id)
            if hint is not None:
                self._held.move_to_end(memory_id)
            return hint

    def put(self, memory_id: str, hint: ThemeTop2 | None) -> None:
        """``hint`` as the memory's once its write is stored (``publish``)."""
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

    def _hold(self, memory_id: str, hint: ThemeTop2 | None) -> None:
        """Hold ``hint`` as the memory's (None, too few themes or too large: forget the memory's); the
        caller holds the lock."""
        old = self._held.pop(memory_id, None)
        self._bytes -= 0 if old is None else old.nbytes
        if hint is None or len(hint.labels) < self.min_themes or hint.nbytes > self.max_bytes:
            return
        self._held[memory_id] = hint
        self._bytes += hint.nbytes
        while self._bytes > self.max_bytes:
            _, out = self._held.popitem(last=False)
            self._bytes -= out.nbytes

    def drop(self, memory_ids=None) -> None:
        """Forget these memories' entries (all when None), held or put."""
        with self._lock:
            if memory_ids is None:
                self._pending = {}
            for m in list(self._held) if memory_ids is None else memory_ids:
                self._pending.pop(m, None)
                out = self._held.pop(m, None)
                self._bytes -= 0 if out is None else out.nbytes

    @property
    def nbytes(self) -> int:
        return self._bytes

    def __len__(self) -> int:
        return len(self._held)
