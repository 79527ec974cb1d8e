"""The storage seam: what construction, the engine, retrieval and the CLI need from where memories live.

:class:`MemoryBackend` is the protocol; :class:`~.store.Store` (SQLite catalogue plus one file per
memory) is the durable implementation and :class:`InMemoryBackend` keeps the same encoded files in
a dict (tests, throwaway engines, and the reference for what a backend must do). A backend holds
memories as bank slices: ``commit`` writes slices and deletions atomically with their log entries,
``load_bank`` reads a set of them into one bank, ``versions`` names each memory's current content
(so a reader can tell what changed).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from .bank import Bank, MemorySlice
from .codec import FORMAT, EncodedSlice, SliceFormatError, check_slice, encode_slice, slice_from_bytes
from .engine_state import without_state
from .hierarchy import Memory, memory_from_slice, slice_from_memory


class CommitHandle(Protocol):
    """A commit started and not yet visible (``MemoryBackend.start_commit``): ``finish`` makes it
    (or raises, leaving no trace of it), ``abandon`` drops it. Exactly one of the two is called."""

    def finish(self) -> None: ...
    def abandon(self) -> None: ...


@runtime_checkable
class MemoryBackend(Protocol):
    """Where memories live. ``dim``, ``embedder`` and ``config`` describe how they were built;
    ``quarantined`` (memory id -> reason) is set by ``load_bank(quarantine=True)``. A backend may
    also set ``takes_previous = True``: its ``commit`` then takes ``previous=`` (the engine's copies
    of the stored versions, ``Store.commit``) and says the rows each commit changed in ``changed``."""

    path: Path | None
    dim: int
    embedder: str
    config: dict[str, Any]
    quarantined: dict[str, str]

    def memory_ids(self) -> list[str]: ...
    def versions(self, memory_ids: list[str] | None = None) -> dict[str, str]: ...
    def has(self, memory_id: str, *, intact: bool = False) -> bool: ...
    def check(self, memory_id: str) -> str | None: ...
    def stats(self, memory_id: str) -> dict[str, Any]: ...
    def counts(self, memory_id: str) -> dict[str, int]: ...
    def find_message(self, message_id: str) -> list[str]: ...
    def history(self, memory_id: str) -> list[dict[str, Any]]: ...
    def get_slice(self, memory_id: str) -> MemorySlice: ...
    def get(self, memory_id: str) -> Memory: ...
    def load_bank(self, memory_ids: list[str] | None = None, *, quarantine: bool = False) -> Bank: ...
    def commit(
        self,
        units: list[MemorySlice | Memory | EncodedSlice],
        *,
        replace: bool = False,
        delete: list[str] = (),
        log: list[tuple[str, str, list[str]]] = (),
        redact: dict[str, set[str]] | None = None,
    ) -> None: ...
    def start_commit(
        self,
        units: list[MemorySlice | Memory | EncodedSlice],
        *,
        replace: bool = False,
        delete: list[str] = (),
        log: list[tuple[str, str, list[str]]] = (),
        redact: dict[str, set[str]] | None = None,
    ) -> CommitHandle: ...
    def put(self, unit: MemorySlice | Memory, *, replace: bool = False) -> None: ...
    def put_slice(self, unit: MemorySlice | Memory, *, replace: bool = False) -> None: ...
    def delete(self, memory_id: str) -> None: ...
    def upgrade(self) -> list[str]: ...
    def formats(self) -> dict[str, int]: ...
    def collect_garbage(self) -> list[str]: ...
    def maybe_compact(self) -> bool: ...
    def close(self) -> None: ...


class _DeferredCommit:
    """A commit made by ``finish`` (``InMemoryBackend.start_commit``, or a backend with no
    ``start_commit`` of its own: ``start_commit_on``), dropped by ``abandon``; one of the two, once."""

    def __init__(self, run) -> None:
        self._run = run

    def finish(self) -> None:
        run, self._run = self._run, None
        if run is None:
            raise ValueError("this commit was already finished or abandoned")
        run()

    def abandon(self) -> None:
        if self._run is None:
            raise ValueError("this commit was already finished or abandoned")
        self._run = None


def start_commit_on(
    backend: MemoryBackend, units: list[MemorySlice | Memory | EncodedSlice], *, replace: bool = False
) -> CommitHandle:
    """``backend.start_commit``, or, for a backend written before it existed, its ``commit`` deferred
    to the handle's ``finish``."""
    start = getattr(backend, "start_commit", None)
    if start is not None:
        return start(units, replace=replace)
    units = list(units)
    return _DeferredCommit(lambda: backend.commit(units, replace=replace))


class InMemoryBackend:
    """A :class:`MemoryBackend` in a dict: each memory kept as the bytes the store would write
    (``memory/codec.py``), so what it returns went through the same encoding and checks. Commits
    are atomic (validated and encoded before anything changes); nothing survives the process."""

    def __init__(self, *, dim: int, embedder: str, config: dict[str, Any] | None = None) -> None:
        self.path: Path | None = None
        self.dim, self.embedder, self.config = int(dim), embedder, dict(config or {})
        self.quarantined: dict[str, str] = {}
        self._files: dict[
            str, tuple[bytes, str, dict[str, Any]]
        ] = {}  # id -> (bytes, sha256, stats), in order
        self._log: list[tuple[str, str, list[str], float]] = []

    def _row(self, memory_id: str) -> tuple[bytes, str, dict[str, Any]]:
        try:
            return self._files[memory_id]
        except KeyError:
            raise KeyError(f"in-memory backend: no memory {memory_id!r}") from None

    def memory_ids(self) -> list[str]:
        return list(self._files)

    def versions(self, memory_ids: list[str] | None = None) -> dict[str, str]:
        ids = self._files if memory_ids is None else [m for m in memory_ids if m in self._files]
        return {m: self._files[m][1] for m in ids}

    def has(self, memory_id: str, *, intact: bool = False) -> bool:
        return memory_id in self._files

    def check(self, memory_id: str) -> str | None:
        try:
            self.get_slice(memory_id)
        except (KeyError, ValueError) as exc:
            return str(exc)
        return None

    def stats(self, memory_id: str) -> dict[str, Any]:
        return without_state(json.loads(json.dumps(self._row(memory_id)[2])))

    def counts(self, memory_id: str) -> dict[str, int]:
        sl = self.get_slice(memory_id)
        return {lv: sl.n(lv) for lv in sl.cols}

    def find_message(self, message_id: str) -> list[str]:
        return [m for m in self._files if message_id in set(self.get_slice(m).cols["msg"]["id"].tolist())]

    def history(self, memory_id: str) -> list[dict[str, Any]]:
        return [{"op": op, "ids": list(ids), "time": t} for m, op, ids, t in self._log if m == memory_id]

    def get_slice(self, memory_id: str) -> MemorySlice:
        data, _, stats = self._row(memory_id)
        sl = slice_from_bytes(memory_id, data, json.loads(json.dumps(stats)))
        check_slice(sl, self.dim)
        return sl

    def get(self, memory_id: str) -> Memory:
        return memory_from_slice(self.get_slice(memory_id))

    def load_bank(self, memory_ids: list[str] | None = None, *, quarantine: bool = False) -> Bank:
        ids = self.memory_ids() if memory_ids is None else list(memory_ids)
        self.quarantined, slices = {}, []
        for m in ids:
            try:
                slices.append(self.get_slice(m))
            except ValueError as exc:  # as the store: one that fails is left out when quarantining
                if not quarantine:
                    raise
                self.quarantined[m] = str(exc)
        return Bank.from_slices(slices, self.dim, memory_ids=[sl.memory_id for sl in slices])

    def commit(
        self,
        units: list[MemorySlice | Memory | EncodedSlice],
        *,
        replace: bool = False,
        delete: list[str] = (),
        log: list[tuple[str, str, list[str]]] = (),
        redact: dict[str, set[str]] | None = None,
    ) -> None:
        self._apply(self._checked(units, replace, delete), delete, log, redact)

    def _checked(
        self, units: list[MemorySlice | Memory | EncodedSlice], replace: bool, delete: list[str]
    ) -> list[tuple[str, bytes, str, dict[str, Any]]]:
        """The units encoded and checked against the backend (``ValueError`` / ``KeyError``, nothing changed)."""
        encoded = []
        named = [u.memory_id for u in units]
        if len(set(named)) != len(named):
            raise ValueError("in-memory backend: one commit names a memory twice")
        for u in units:
            if u.memory_id in self._files and not replace:
                raise ValueError(
                    f"in-memory backend: memory {u.memory_id!r} is already stored (pass replace=True)"
                )
            try:
                if isinstance(u, EncodedSlice):
                    u.verify(self.dim)
                    enc = u
                else:
                    enc = encode_slice(u if isinstance(u, MemorySlice) else slice_from_memory(u), self.dim)
            except SliceFormatError as exc:
                raise ValueError(f"in-memory backend: {exc}") from None
            encoded.append((enc.memory_id, enc.data, enc.sha256, json.loads(json.dumps(enc.stats))))
        for mid in delete:
            self._row(mid)
        return encoded

    def _apply(
        self,
        encoded: list[tuple[str, bytes, str, dict[str, Any]]],
        delete: list[str],
        log: list[tuple[str, str, list[str]]],
        redact: dict[str, set[str]] | None,
    ) -> None:
        for mid in delete:  # nothing has changed before this point
            del self._files[mid]
        gone = set(delete)
        self._log = [(m, op, ids, t) for m, op, ids, t in self._log if m not in gone]
        for mid, drop in (redact or {}).items():
            self._log = [
                (m, op, [i for i in ids if i not in drop] if m == mid else ids, t)
                for m, op, ids, t in self._log
            ]
        for mid, data, digest, stats in encoded:
            self._files[mid] = (data, digest, stats)
        now = time.time()
        self._log += [(m, op, list(ids), now) for m, op, ids in log]

    def start_commit(
        self,
        units: list[MemorySlice | Memory | EncodedSlice],
        *,
        replace: bool = False,
        delete: list[str] = (),
        log: list[tuple[str, str, list[str]]] = (),
        redact: dict[str, set[str]] | None = None,
    ) -> CommitHandle:
        """``commit``'s checks and encoding now (what is refused raises here), its effect at the
        handle's ``finish`` (checked again there: the backend may have changed in between)."""
        units, delete, log, redact = (
            list(units),
            list(delete),
            list(log),
            dict(redact or {}),
        )  # the caller's lists may change
        self._checked(units, replace, delete)
        return _DeferredCommit(
            lambda: self.commit(units, replace=replace, delete=delete, log=log, redact=redact)
        )

    def put(self, unit: MemorySlice | Memory, *, replace: bool = False) -> None:
        self.commit([unit], replace=replace)

    put_slice = put

    def delete(self, memory_id: str) -> None:
        self.commit([], delete=[memory_id])

    def upgrade(self) -> list[str]:
        return []

    def formats(self) -> dict[str, int]:
        return dict.fromkeys(self._files, FORMAT)

    def collect_garbage(self) -> list[str]:
        return []

    def maybe_compact(self) -> bool:
        return False

    def close(self) -> None:
        """Nothing to release: the memories stay until the backend itself is dropped (an engine
        closed and opened again on the same backend finds them)."""
