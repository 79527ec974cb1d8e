"""The residency half of ``MemoryEngine`` under a byte budget (``max_resident_bytes``): a memory's
slice loaded from the store on first touch, pinned while a request uses it, evicted least recently
used (``engine.residency.Residency`` keeps the accounting); a write section keeps loads and evictions
out while a write reads the bank's memory numbers. Without a budget every memory is resident and
these are no-ops. ``compact`` reclaims the rows a growing memory leaves behind when it moves."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from contextlib import contextmanager
from typing import Any

from ..construct.incremental import stored_themes
from ..construct.theme_memo import HeldThemes
from ..construct.themes import held_themes
from ..memory.store import StoreError
from .keys import (
    QuarantinedError,
)
from .residency import slice_bytes

COMPACT_WASTE = 1.0  # a write compacts the bank once its wasted rows exceed this many times its live rows
COMPACT_MIN_ROWS = 4096  # ... and this many rows (a small bank's slack is not worth a copy)


class Paging:
    """Mixin of :class:`~.engine.MemoryEngine`: its bank as a cache over the store."""

    def _note_resident(self, sl) -> None:
        if self._residency is not None:
            self._residency.note(sl.memory_id, slice_bytes(sl))

    def _drop(self, keys: set[str]) -> None:
        """Take ``keys`` out of the bank (caller holds the rw write lock)."""
        gone = keys & set(self.bank.index)
        self._theme_memo.drop(keys)  # a memory out of the bank keeps nothing beside it
        for k in keys:
            self._warmed.pop(k, None)
        if gone:
            old, self.bank = self.bank, self.bank.without(gone)
            old.release()  # its columns go now, not at the next full garbage collection
            self.retriever.bank = self.bank  # its derived caches follow the bank (``Bank.version``)
        if self._residency is not None:
            self._residency.forget(keys)

    def compact(self) -> int:
        """Reclaim the bank's holes now (the rows a memory that outgrew its segment left behind) and
        its slack: the bank becomes a compact copy; a write in progress finishes first, readers wait
        for the swap. Returns the hole rows reclaimed. A write (and ``refresh``) calls it itself
        once the holes outnumber the live rows (``COMPACT_WASTE``)."""
        self._check_open()
        with self._writer, self._res_lock, self._rw.write():
            return self._compact()

    def _compact(self) -> int:
        """``compact``'s swap (caller holds the writer and the rw write lock)."""
        holes, _ = self.bank.wasted_rows()
        if holes or not all(level.seg.is_compact for level in self.bank.levels.values()):
            old, self.bank = self.bank, self.bank.compact()
            old.release()
            self.retriever.bank = self.bank
        return holes

    def _maybe_compact(self) -> None:
        """Compact when the bank's holes outnumber its live rows ``COMPACT_WASTE`` times and
        ``COMPACT_MIN_ROWS`` (caller holds the writer and the rw write lock). Amortised: a hole is
        what a memory leaves when it moves, each move grows its room by a quarter, so holes pass the
        live rows only after the moved memories have grown by a share of their size since the last
        compaction."""
        holes, live = self.bank.wasted_rows()
        if holes > max(COMPACT_MIN_ROWS, COMPACT_WASTE * live):
            self._compact()

    def _evict(self) -> None:
        """Drop least recently used unpinned memories while over the budget (caller holds _res_lock).
        Not while another thread's write section runs: the writer reads the bank's memory numbers
        outside the rw lock, and an eviction renumbers them (its section's end evicts)."""
        if self._write_owner not in (None, threading.get_ident()):
            return
        victims = self._residency.victims() if self._residency is not None else []
        if victims:
            with self._rw.write():
                self._drop(set(victims))

    def _load(self, key: str):
        """Memory ``key``'s slice from the store; read again once if it fails, as a writer in another
        process may have replaced its file between the catalogue read and the file read."""
        try:
            return self.store.get_slice(key)
        except (StoreError, KeyError):
            return self.store.get_slice(key)

    @contextmanager
    def _write_section(self):
        """A write's span. What it put in the theme memo and did not publish (it failed before its
        commit stored it) goes when it ends. Under a residency budget no other thread loads or evicts
        a memory until it ends (the write reads the bank's memory numbers outside the rw lock); then
        it evicts."""
        try:
            if self._residency is None:
                yield
                return
            with self._res_lock:
                self._write_owner = threading.get_ident()
            try:
                yield
            finally:
                with self._res_lock:
                    self._write_owner = None
                    self._res_cond.notify_all()
                    self._evict()
        finally:
            self._theme_memo.discard()

    @contextmanager
    def _using(self, keys: Sequence[str]):
        """Memories ``keys`` resident (loaded from the store if need be) and pinned for the block; a
        memory that fails to load is quarantined. Without a budget every memory is resident already."""
        if self._residency is None:
            yield
            return
        keys = list(dict.fromkeys(keys))
        with self._res_lock:
            self._residency.pin(keys)
            try:

                def missing() -> list[str]:
                    return [
                        k
                        for k in keys
                        if k not in self.bank.index and k in self._loaded and k not in self.quarantined
                    ]

                # a load changes the bank a writer reads outside the rw lock: it waits for the write section
                while missing() and self._write_owner not in (None, threading.get_ident()):
                    self._res_cond.wait()
                slices = []
                for k in missing():
                    try:
                        slices.append(self._load(k))
                    except (StoreError, KeyError) as exc:
                        self.quarantined[k] = str(exc.args[0] if isinstance(exc, KeyError) else exc)
                if slices:
                    with self._rw.write():
                        for sl in slices:
                            self.bank.put_slice(sl)
                            self._note_resident(sl)
                self._residency.touch(keys)
                self._evict()
            except BaseException:
                self._residency.unpin(keys)
                raise
        try:
            yield
        finally:
            with self._res_lock:
                self._residency.unpin(keys)
                self._evict()

    def warm(self, *, user_id: Any = None, agent_id: Any = None, run_id: Any = None) -> dict:
        """Make the memory of exactly this scope ready for its next requests, so that its first write
        and searches after the engine opens cost what the later ones cost: the memory read into RAM
        where it is not resident (``max_resident_bytes``); the caches its searches fill on first use
        filled, as a search fills them (``Retriever.prime``: its messages' passages, its rows' norms,
        its words' token counts; they last until the bank replaces them, as on an eviction); then,
        under the writer lock (a write waits for it, as for another write), its themes' f(P) state
        built and held, the state a write to a large memory otherwise builds first. For an app that
        knows a user is about to talk (a chat session opens): call it then, on any thread. Returns
        ``{"memory": a memory is stored for this scope, "loaded": this call read it from the store,
        "themes_held": its f(P) state is held when the call returns, "words_counted": words counted
        ahead}``; a call repeated with no write between does nothing; a read-only engine fills the
        search caches only. A quarantined memory raises ``QuarantinedError``, as a search does."""
        self._check_open()
        key = self._usable(self._exact(user_id, agent_id, run_id))
        out = {"memory": key in self._loaded, "loaded": False, "themes_held": False, "words_counted": 0}
        if not out["memory"]:
            return out
        out["loaded"] = key not in self.bank.index
        with self._using([key]), self._rw.read():  # as a search: writes and other searches go on
            self._usable(key)  # it failed to load just now
            if key not in self.bank.index:
                return out
            done = self._warmed.get(key) == (id(self.bank), self.bank.version)
            if not done:
                out["words_counted"] = self.retriever.prime(key)
        if not self.read_only and not done:
            with self._writer, self._write_section(), self._using([key]):
                mem = self._current(key) if key in self.bank.index else None
                if mem is not None and mem.n("theme") >= self._theme_memo.min_themes:  # else not kept
                    state = stored_themes(mem, self.config)
                    state.x = state.x.copy()  # held past the bank's next write, which may reuse its rows
                    self._theme_memo.put(
                        key, held_themes(state, self.config.theme, self._theme_memo.get(key))
                    )
                    self._theme_memo.publish([key])
                    self._warmed[key] = (id(self.bank), self.bank.version)
        elif self.read_only:
            self._warmed[key] = (id(self.bank), self.bank.version)
        out["themes_held"] = isinstance(self._theme_memo.get(key), HeldThemes)
        return out

    def _usable(self, key: str) -> str:
        """``key``, unless its memory is quarantined."""
        if key in self.quarantined:
            raise QuarantinedError(
                f"memory {key}: quarantined, it failed to load "
                f"({self.quarantined[key]}); the other memories are served; delete_all removes it"
            )
        return key
