"""The on-disk store: a directory with ``memory.sqlite`` (the catalogue) and each memory's files.

A memory is a base file (``arrays/<key>-<sha256[:12]>.slice``: every column of its bank slice, text
as UTF-8 bytes plus offsets; ``memory/codec.py``: a JSON header and raw arrays, nothing is
unpickled) plus an ordered chain of delta files (``<key>-<sha256[:12]>.delta``: the rows a commit
changed, column by column; ``memory/deltas.py``). SQLite holds the catalogue: per memory its
position, base file and its sha256, stats and rows per level, its deltas (table ``deltas``: order,
file, sha256, size), plus a message-id index and the operations log. A commit writes its files
first (temp, fsync, rename under a content-addressed name), then changes the catalogue in one
SQLite transaction, then removes the files it replaced: a crash leaves the store as before or as
after (an unreferenced file is ignored and collected by ``collect_garbage``).

A write costs what it changes. A commit compares each column of a memory with its last version:
the caller's copy of it when the caller passes one (``commit(previous=)``: an engine's bank, named
by the version's last file and cut to the column shapes this store last read or wrote, so the
memory is held in RAM once), else the version this store last wrote (``Store.committed``, bounded
by bytes but for its largest memory; a read keeps nothing, so readers hold no copies). When the
commit only appends messages and removes no statement, it writes a delta of the rows from each
column's first change on (or the few rows that changed), and changes the message-id index by the
ids added. Anything else is a fresh base file (the old base and deltas are removed after the
transaction): a delete or an update, so no file the catalogue still names holds what was
forgotten; a chain of ``deltas.MAX_CHAIN`` deltas or of more than ``deltas.COMPACT_SHARE`` of the
base's bytes, so a load applies a bounded chain; a memory with no last version to compare with. Within the transaction the memory's
version must still be the one the commit was planned on (another writer's commit in between refuses
this one, nothing written). The database runs with ``secure_delete`` (freed pages are zeroed, so a deleted
message id or stat leaves the file); ``compact`` (``VACUUM``) shrinks it when a quarter or more of
its pages are free.

Rows an integration keeps per memory live in the catalogue too (``SCOPED_ROWS``, created by the
integration: the LangGraph store's items, with a ``memory_id`` column): a commit that deletes a
memory deletes its rows in the same transaction, and a reset (a commit logging ``reset``) deletes
them all, so no value outlives the memory it was part of.

Loading verifies the schema version, the dimension, the checksum of the base and of every delta,
that each delta follows the file before it, then the columns rebuilt as a base file's are: every
column's dtype and shape, row references and finite values. ``load_bank(quarantine=True)`` leaves
out a memory that fails (recorded in ``Store.quarantined``), so one damaged memory never keeps the
others from loading.

Schema 6 (this release): schema 5 whose deltas may widen a ragged column (``LEVEL.NAME.width``,
``memory/deltas.py``), which a schema 5 reader would not apply; nothing else changed, and upgrading a
schema 5 store sets its version only. Schema 5 added the ``deltas`` table. Schema 4 added the passages of long
messages (a fifth level, ``psg``, in every file written now: file format 4; the catalogue's
``n_psg``). Stores of schema 1 and 2 (text in SQLite tables, ``memory/legacy.py``), 3, 4 and 5 are read
as they are and upgraded in one transaction by ``upgrade``, which the first commit and a writable
engine open call; a schema 3 store's files stay format 3 (read as "no passages stored", a search
embeds those itself) until the engine's writable open embeds their passages
(``construct.passages.store_passages``) or a write replaces them. Deltas apply to format 4 files only.
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import json
import logging
import os
import secrets
import shutil
import sqlite3
import threading
import time
from collections import OrderedDict
from collections.abc import Mapping
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from . import legacy
from .bank import COLUMNS, LEVELS, Bank, MemorySlice
from .codec import (
    FORMAT,
    MAX_TIME,
    MIN_TIME,
    EncodedSlice,
    SliceFormatError,
    catalogue_stats,
    check_shapes,
    check_slice,
    encode_slice,
    encoded_as,
    slice_from_arrays,
    slice_from_bytes,
    slice_pieces,
    stored_columns,
    unpack_arrays,
)
from .deltas import (
    COMPACT_SHARE,
    MAX_CHAIN,
    Change,
    Committed,
    CommittedCache,
    apply_chain,
    diff,
    encode_delta,
)
from .durable import read_hashed, write_durable, write_hashed
from .engine_state import without_state
from .hierarchy import Memory, memory_from_slice, slice_from_memory

__all__ = ["DB_NAME", "MAX_TIME", "MIN_TIME", "SCHEMA_VERSION", "SCOPED_ROWS", "Store", "StoreError"]

SCHEMA_VERSION = 6
READABLE_VERSIONS = (1, 2, 3, 4, 5, 6)  # older ones are read as they are and upgraded by the first commit
DB_NAME = "memory.sqlite"
WRITE_THREADS = 2  # threads writing a commit's files (page-cache copies, then one sync): more only take
# cores from the build beside them (8 slowed the next shard's first stages by ~0.1 s each on 2 cores)
COMPACT_FREE_FRACTION = 0.25  # ``maybe_compact`` rewrites the database when this share of pages is free
SCOPED_ROWS = "langgraph_items"  # an integration's rows per memory (memory_id): deleted with their memory
RESET_OP = "reset"  # the log entry of a reset: every memory and every scoped row go
log = logging.getLogger(__name__)

_CATALOGUE = """
CREATE TABLE IF NOT EXISTS message_ids (memory_id TEXT NOT NULL REFERENCES memories(memory_id) ON DELETE CASCADE,
  id TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS message_ids_by_id ON message_ids (id);
CREATE INDEX IF NOT EXISTS message_ids_by_memory ON message_ids (memory_id);
CREATE TABLE IF NOT EXISTS deltas (memory_id TEXT NOT NULL REFERENCES memories(memory_id) ON DELETE CASCADE,
  seq INTEGER NOT NULL, file TEXT NOT NULL, sha256 TEXT NOT NULL, size INTEGER NOT NULL,
  PRIMARY KEY (memory_id, seq));
CREATE INDEX IF NOT EXISTS deltas_by_file ON deltas (file);
"""
_SCHEMA = (
    """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE memories (memory_id TEXT PRIMARY KEY, position INTEGER NOT NULL, arrays_file TEXT NOT NULL,
  sha256 TEXT NOT NULL, stats TEXT NOT NULL, created REAL NOT NULL, n_msg INTEGER NOT NULL DEFAULT 0,
  n_epi INTEGER NOT NULL DEFAULT 0, n_sem INTEGER NOT NULL DEFAULT 0, n_theme INTEGER NOT NULL DEFAULT 0,
  format INTEGER NOT NULL DEFAULT 4, n_psg INTEGER NOT NULL DEFAULT 0);
"""
    + _CATALOGUE
)
# the operations log was added after the first release: created when missing
_OPLOG = """CREATE TABLE IF NOT EXISTS oplog (seq INTEGER PRIMARY KEY AUTOINCREMENT, memory_id TEXT NOT NULL,
  op TEXT NOT NULL, ids TEXT NOT NULL, time REAL NOT NULL);"""
# schema 3's indexes (created with the store or by its upgrade): no write scans the catalogue
_INDEXES = """CREATE INDEX IF NOT EXISTS oplog_by_memory ON oplog (memory_id);
CREATE INDEX IF NOT EXISTS memories_by_position ON memories (position);"""
_COUNT_COLUMNS = tuple(f"n_{lv}" for lv in LEVELS)


@dataclass(frozen=True)
class _Old:
    """A memory as the catalogue holds it before a commit: base file, position, the base's sha256 and
    format, its rows of messages and statements, and the chain of deltas after the base (file name,
    sha256), oldest first."""

    file: str
    position: int
    sha256: str
    format: int
    n_msg: int
    n_sem: int
    chain: tuple[tuple[str, str], ...] = ()

    @property
    def head(self) -> str:
        """The sha256 of the chain's last file (the version's name)."""
        return self.chain[-1][1] if self.chain else self.sha256

    def files(self) -> list[str]:
        return [self.file] + [f for f, _ in self.chain]


@dataclass
class _Plan:
    """What a commit writes for one memory: a ``base`` file (``unit``), a ``delta`` (``data``, the
    ``change`` from the version ``entry`` holds) or, when no column changed, no file (``same``)."""

    memory_id: str
    kind: str
    old: _Old | None
    name: str | None = None
    unit: EncodedSlice | None = None
    data: bytes | None = None
    sha256: str | None = None
    stats: dict[str, Any] | None = None
    counts: dict[str, int] | None = None
    new_ids: list[str] | None = None  # the message ids a delta appends
    change: Change | None = None
    entry: Committed | None = None
    cache: bool = False  # a base: remember its version for the next commit's delta
    shapes: tuple[int, ...] | None = None  # the version's ragged and kNN widths (``_widths_of``)
    against_copy: bool = False  # ``change`` is from the caller's copy (``commit(previous=)``)
    pieces: list[memoryview] | None = None  # a base streamed to its file (``_write_streamed``), not packed


# the stored ragged and kNN columns: their widths vary by version (a bank pads them wider)
_WIDE = tuple((lv, n) for lv, n, text in stored_columns() if not text and COLUMNS[lv][n][1] in ("w", "k"))
WIDTH_RECORDS = 1 << 16  # the memories whose last version's widths a store remembers (least recent out)


def _widths_of(sl: MemorySlice) -> tuple[int, ...]:
    """The widths of ``sl``'s ``_WIDE`` columns (``Store._shapes``)."""
    return tuple(int(sl.cols[lv][n].shape[1]) for lv, n in _WIDE)


def _cut_padding(name: str, a: np.ndarray, width: int) -> np.ndarray | None:
    """Ragged or kNN column ``a`` [n, w] cut to ``width`` (a view) when what is cut is all padding;
    None otherwise (another version)."""
    if a.ndim != 2 or a.shape[1] < width:
        return None
    fill = -np.inf if name == "knn_sim" else -1
    if not (a[:, width:] == fill).all():
        return None
    return a[:, :width]


class PendingCommit:
    """A commit whose files are being written (``Store.start_commit``): ``finish`` waits for them and
    commits the catalogue (``StoreError`` and no trace of the commit when a write or the transaction
    fails), ``abandon`` waits for them and removes them. One of the two is called, once (a second
    call raises ``StoreError``, having changed nothing); a forked child's copy is inert (its
    ``abandon`` does nothing, its ``finish`` raises)."""

    def __init__(
        self,
        store: Store,
        plans: list[_Plan],
        olds: dict[str, _Old | None],
        live: set[str],
        delete: list[str],
        log: list[tuple[str, str, list[str]]],
        redact: dict[str, set[str]],
        done: Future,
    ) -> None:
        self.store, self.plans, self.olds, self.live = store, plans, olds, live
        self.written = [p.name for p in plans if p.name is not None]  # the files this commit writes
        self.delete, self.log, self.redact, self.done = delete, log, redact, done
        self.pid = os.getpid()  # the process whose writer writes the files
        self.state = "pending"  # then "finished", "failed" or "abandoned"

    def finish(self) -> None:
        self.store._finish(self)

    def abandon(self) -> None:
        self.store._abandon(self)


class StoreError(ValueError):
    """A store that is missing, of another schema or dimension, or damaged; names path and field."""


class _Damaged(Exception):
    """One memory failed to load (``load_bank`` quarantines it)."""

    def __init__(self, memory_id: str, reason: str) -> None:
        super().__init__(reason)
        self.memory_id, self.reason = memory_id, reason


def _sha256(data: bytes | bytearray) -> str:
    return hashlib.sha256(data).hexdigest()


def _reason(exc: BaseException) -> str:
    return str(exc.args[0] if isinstance(exc, KeyError) and exc.args else exc)


def remove_if_empty(root: Path) -> bool:
    """Remove the store at ``root`` (its catalogue and ``arrays`` folder; the lock file and the folder
    stay) when its catalogue holds no memory: a build that stopped before its first commit leaves no
    store naming an embedder. The caller holds the store's writer lock. Returns whether it did."""
    db = root / DB_NAME
    try:
        conn = sqlite3.connect(f"{db.resolve().as_uri()}?mode=ro", uri=True)
        try:
            if conn.execute("SELECT COUNT(*) FROM memories").fetchone()[0]:
                return False
        finally:
            conn.close()
    except (sqlite3.Error, OSError):
        return False
    for name in (DB_NAME, DB_NAME + "-wal", DB_NAME + "-shm", DB_NAME + "-journal"):
        (root / name).unlink(missing_ok=True)
    shutil.rmtree(root / "arrays", ignore_errors=True)
    return True


def _key(memory_id: str) -> str:
    """The prefix of a memory's file names."""
    return hashlib.sha1(memory_id.encode()).hexdigest()[:16]


def _as_unit(unit: Memory | MemorySlice | EncodedSlice) -> MemorySlice | EncodedSlice:
    """What a commit writes: a slice (a ``Memory`` converted), or a memory already encoded."""
    return unit if isinstance(unit, (MemorySlice, EncodedSlice)) else slice_from_memory(unit)


class Store:
    """The SQLite catalogue plus each memory's base file and deltas (the module docstring has the
    rules); the first :class:`~.backend.MemoryBackend`."""

    # ``commit(previous=)`` diffs against the caller's copies (a backend without it: the engine
    # passes none); a capability, not a signature: a wrapper forwards its inner backend's answer
    takes_previous = True

    def __init__(self, path: Path, conn: sqlite3.Connection) -> None:
        self.path = path
        self._conn = conn
        self._pool: ThreadPoolExecutor | None = (
            None  # the background writer (and a streamed file's hasher), started when first needed
        )
        self._pool_pid = 0  # the process that started it
        self._pending: PendingCommit | None = None  # a commit started and not yet finished or abandoned
        meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())
        try:
            self.schema_version = int(meta["schema_version"])
            self.dim = int(meta["dim"])
            self.embedder = meta["embedder"]
            self.config: dict[str, Any] = json.loads(meta["config"])
        except (KeyError, ValueError) as exc:
            raise StoreError(f"{path / DB_NAME}: meta table is incomplete or damaged ({exc})") from None
        self._check_version()
        self._count_columns()
        self.quarantined: dict[str, str] = {}  # memory id -> why it did not load (set by load_bank)
        self.committed = CommittedCache()  # the last version of memories written here (deltas)
        # memory id -> (its head's sha256, its ragged and kNN widths) as last read or written here:
        # what a caller's copy of that version is cut to (``_previous_columns``); the most recent
        # ``WIDTH_RECORDS`` (a memory left out writes a base at its next commit)
        self._shapes: OrderedDict[str, tuple[str, tuple[int, ...]]] = OrderedDict()
        self._shapes_lock = threading.Lock()  # reads may run on several threads
        # memory id -> the rows the last commit changed against the caller's copy (``changed_rows``)
        self.changed: dict[str, dict[str, np.ndarray | int]] = {}

    def _check_version(self) -> None:
        if self.schema_version not in READABLE_VERSIONS:
            raise StoreError(
                f"{self.path / DB_NAME}: schema_version is {self.schema_version}, this xmemory_gpu reads {SCHEMA_VERSION}"
            )

    def _sync_version(self) -> None:
        """Re-read the schema version (another process may have upgraded the store since)."""
        row = self._conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        old, self.schema_version = self.schema_version, int(row[0]) if row else self.schema_version
        self._check_version()
        if self.schema_version != old:
            self._count_columns()

    def _fresh_deltas(self) -> None:
        """A reader that opened a store of schema 4 or before looks again for the deltas table
        (another process may have upgraded the store and written deltas since)."""
        if not self._deltas and not self.legacy:
            self._deltas = self._has_table("deltas")

    def _fresh_counts(self) -> None:
        """A reader that opened a schema 3 store looks again for ``n_psg`` (another process may have
        upgraded the store since; its format 4 memories then count their passages there)."""
        if len(self._counts) < len(_COUNT_COLUMNS):
            self._count_columns()

    def _count_columns(self) -> None:
        """The catalogue's rows-per-level columns this store has (a schema 3 store has no ``n_psg``),
        and whether it has the deltas table (schema 5)."""
        have = {r[1] for r in self._conn.execute("PRAGMA table_info(memories)")}
        self._counts = tuple(c for c in _COUNT_COLUMNS if c in have)
        self._deltas = self._has_table("deltas")

    def _has_table(self, name: str) -> bool:
        q = "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?"
        return self._conn.execute(q, (name,)).fetchone() is not None

    @property
    def legacy(self) -> bool:
        """True for a store of schema 1 or 2, read as it is until ``upgrade``."""
        return self.schema_version < 3

    # -- opening -------------------------------------------------------------------------------
    @staticmethod
    def _connect(db: Path) -> sqlite3.Connection:
        conn = sqlite3.connect(db, timeout=30, check_same_thread=False)
        conn.execute("PRAGMA foreign_keys = ON")
        conn.execute("PRAGMA secure_delete = ON")  # freed pages are zeroed: deleted ids leave the file
        try:
            with conn:
                conn.executescript(_OPLOG)
        except sqlite3.OperationalError:  # a read-only store: the log is read when present
            pass
        return conn

    @classmethod
    def create(cls, path: str | Path, *, dim: int, embedder: str, config: dict[str, Any]) -> Store:
        root = Path(path)
        if (root / DB_NAME).exists():
            raise StoreError(f"{root}: a store already exists here")
        (root / "arrays").mkdir(parents=True, exist_ok=True)
        tmp = root / (DB_NAME + ".tmp")
        tmp.unlink(missing_ok=True)
        conn = sqlite3.connect(tmp)
        with conn:
            conn.executescript(_SCHEMA + _OPLOG + "\n" + _INDEXES)
            conn.executemany(
                "INSERT INTO meta VALUES (?, ?)",
                [
                    ("schema_version", str(SCHEMA_VERSION)),
                    ("dim", str(int(dim))),
                    ("embedder", embedder),
                    ("config", json.dumps(config)),
                    ("created", str(time.time())),
                ],
            )
        conn.close()
        os.replace(tmp, root / DB_NAME)  # the store appears whole
        return cls(root, cls._connect(root / DB_NAME))

    @classmethod
    def open(cls, path: str | Path) -> Store:
        """Open a store as it is (an old schema is read, not changed: see ``upgrade``)."""
        root = Path(path)
        db = root / DB_NAME
        if not db.exists():
            raise StoreError(f"{root}: not a memory store (no {DB_NAME})")
        try:
            return cls(root, cls._connect(db))
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"{db}: cannot read the database: {exc}") from None

    @classmethod
    def open_or_create(cls, path: str | Path, *, dim: int, embedder: str, config: dict[str, Any]) -> Store:
        root = Path(path)
        if not (root / DB_NAME).exists():
            return cls.create(root, dim=dim, embedder=embedder, config=config)
        store = cls.open(root)
        if store.dim != dim:
            raise StoreError(
                f"{root}: dim: the store holds {store.dim}-dimensional embeddings, the embedder gives {dim}"
            )
        if store.embedder != embedder:
            raise StoreError(
                f"{root}: embedder: the store was built with {store.embedder!r}, not {embedder!r}"
            )
        return store

    def close(self) -> None:
        if (
            self._pending is not None
        ):  # started and never finished: its files go (in the process that wrote them)
            self._pending.abandon()
        if self._pool is not None and self._pool_pid == os.getpid():  # a forked child's copy has no threads
            self._pool.shutdown()
        self._pool = None
        self.committed.clear()
        with self._shapes_lock:
            self._shapes.clear()
        self._conn.close()

    # -- the catalogue -------------------------------------------------------------------------
    def memory_ids(self) -> list[str]:
        return [r[0] for r in self._conn.execute("SELECT memory_id FROM memories ORDER BY position")]

    def versions(self, memory_ids: list[str] | None = None) -> dict[str, str]:
        """Memory id -> the name of its last file (its last delta's, else its base's; content-addressed:
        a new name is a new commit), of every memory or of ``memory_ids`` (those stored)."""
        self._sync_version()
        self._fresh_deltas()
        head = (
            "COALESCE((SELECT d.file FROM deltas d WHERE d.memory_id = m.memory_id ORDER BY d.seq DESC "
            "LIMIT 1), m.arrays_file)"
            if self._deltas
            else "m.arrays_file"
        )
        if memory_ids is None:
            return dict(self._conn.execute(f"SELECT m.memory_id, {head} FROM memories m").fetchall())
        q = f"SELECT m.memory_id, {head} FROM memories m WHERE m.memory_id = ?"
        return dict(r for m in memory_ids for r in self._conn.execute(q, (m,)).fetchall())

    def has(self, memory_id: str, *, intact: bool = False) -> bool:
        """Whether the memory is stored (and, with ``intact``, its file present and matching)."""
        if self._conn.execute("SELECT 1 FROM memories WHERE memory_id = ?", (memory_id,)).fetchone() is None:
            return False
        return not intact or self.check(memory_id) is None

    def check(self, memory_id: str) -> str | None:
        """None when memory ``memory_id`` loads (file, checksum, columns, ranges); otherwise what is
        wrong, in one line."""
        try:
            self.get_slice(memory_id)
        except (StoreError, KeyError, sqlite3.DatabaseError, ValueError) as exc:
            return _reason(exc)
        return None

    def check_all(self) -> dict[str, str | None]:
        """Every memory's ``check``, plus SQLite's own integrity check under the key ``""`` (None = ok)."""
        try:
            res = self._conn.execute("PRAGMA integrity_check").fetchall()
            db = None if res == [("ok",)] else "; ".join(r[0] for r in res[:3])
        except sqlite3.DatabaseError as exc:
            db = str(exc)
        out: dict[str, str | None] = {"": db}
        try:
            ids = self.memory_ids()
        except sqlite3.DatabaseError as exc:
            out[""] = f"cannot list memories: {exc}"
            return out
        for mid in ids:
            out[mid] = self.check(mid)
        return out

    def stats(self, memory_id: str) -> dict[str, Any]:
        row = self._conn.execute("SELECT stats FROM memories WHERE memory_id = ?", (memory_id,)).fetchone()
        if row is None:
            raise KeyError(f"{self.path}: no memory {memory_id!r}")
        return without_state(json.loads(row[0]))  # the engine's state: get_slice

    def counts(self, memory_id: str) -> dict[str, int]:
        """Rows per level of one memory, from the catalogue (no file read)."""
        if self._format(memory_id) < 3:
            return legacy.counts(self._conn, memory_id)
        self._fresh_counts()
        row = self._conn.execute(
            f"SELECT {', '.join(self._counts)} FROM memories WHERE memory_id = ?", (memory_id,)
        ).fetchone()
        if row is None:
            raise KeyError(f"{self.path}: no memory {memory_id!r}")
        return self._level_counts(row)

    def _level_counts(self, row) -> dict[str, int]:
        """Rows per level from the catalogue's count columns (0 where the store has none: ``n_psg``
        of a schema 3 store, whose files hold no passages)."""
        got = dict(zip(self._counts, (int(n) for n in row)))
        return {lv: got.get(f"n_{lv}", 0) for lv in LEVELS}

    def find_message(self, message_id: str) -> list[str]:
        """The memories holding a message with this id (the catalogue's index; no file read)."""
        table, col = ("messages", "id") if self.legacy else ("message_ids", "id")
        return [
            r[0]
            for r in self._conn.execute(
                f"SELECT DISTINCT m.memory_id FROM {table} t JOIN memories m ON m.memory_id = t.memory_id "
                f"WHERE t.{col} = ? ORDER BY m.position",
                (message_id,),
            )
        ]

    def _audit_key(self, create: bool = False) -> bytes | None:
        """The store's random key for the log entries of deleted memories (``meta.audit_key``); made
        on first need (``create``, inside a commit's transaction)."""
        row = self._conn.execute("SELECT value FROM meta WHERE key = 'audit_key'").fetchone()
        if row is None and create:
            self._conn.execute("INSERT INTO meta VALUES ('audit_key', ?)", (secrets.token_hex(32),))
            row = self._conn.execute("SELECT value FROM meta WHERE key = 'audit_key'").fetchone()
        return None if row is None else bytes.fromhex(row[0])

    def _audit_id(self, memory_id: str, key: bytes | None) -> str | None:
        """What the log keeps of a deleted memory's id: a keyed digest (an audit can ask for a scope's
        deletion by its ids; the ids themselves, e.g. a user id, leave the store)."""
        return (
            None
            if key is None
            else "hmac:"
            + hmac.new(key, memory_id.encode("utf-8", "surrogatepass"), "sha256").hexdigest()[:32]
        )

    def history(self, memory_id: str) -> list[dict[str, Any]]:
        """The operations log of one memory, oldest first: operation, unit ids, time (POSIX s); the
        entries of its deletion are found by the keyed digest of its id (``_audit_id``)."""
        out = []
        names = [memory_id] + [a for a in [self._audit_id(memory_id, self._audit_key())] if a is not None]
        marks = ", ".join("?" for _ in names)
        for op, ids, t in self._conn.execute(
            f"SELECT op, ids, time FROM oplog WHERE memory_id IN ({marks}) ORDER BY seq", names
        ):
            try:
                out.append({"op": op, "ids": json.loads(ids), "time": t})
            except ValueError as exc:
                raise StoreError(
                    f"{self.path}: memory {memory_id}: table oplog, field ids: not valid JSON ({exc})"
                ) from None
        return out

    # -- writing -------------------------------------------------------------------------------
    def _encode(self, unit: MemorySlice | EncodedSlice, *, checked: bool = False) -> tuple[str, EncodedSlice]:
        """The memory's checked bytes (a slice is checked and encoded here, ``checked``: its
        ``check_slice`` passed already; an ``EncodedSlice``, encoded by its builder, has its dimension
        and sha256 checked) and the content-addressed file name they go to."""
        try:
            if isinstance(unit, MemorySlice):
                unit = encode_slice(unit, self.dim, checked=checked)
            else:
                unit.verify(self.dim)
        except SliceFormatError as exc:
            raise StoreError(f"{self.path}: {exc}") from None
        return f"{_key(unit.memory_id)}-{unit.sha256[:12]}.slice", unit

    def _write(self, files: list[tuple[str, str, bytes]]) -> None:
        """Files ``(memory id, name, data)`` written as new files (``write_durable``: temp, fsync,
        rename, up to ``WRITE_THREADS`` at once, in C++ without the GIL when built); ``StoreError``
        naming a memory whose file failed."""
        arrays, pid, tid = self.path / "arrays", os.getpid(), threading.get_ident()
        try:
            write_durable(
                [(arrays / f".{name}.{pid}.{tid}.tmp", arrays / name, data) for _, name, data in files],
                threads=WRITE_THREADS,
            )
        except OSError as exc:
            where = os.path.basename(exc.filename or "")
            mid = next((m for m, name, _ in files if name in where), files[0][0])
            raise StoreError(
                f"{self.path}: cannot write memory {mid!r}: {exc.strerror or exc} "
                "(nothing of this commit was stored)"
            ) from None

    def _write_file(self, memory_id: str, name: str, data: bytes) -> None:
        """``data`` in the new file ``name`` (temp, fsync, rename)."""
        self._write([(memory_id, name, data)])

    def _write_streamed(self, pl: _Plan, live: set[str]) -> None:
        """``pl``'s base file streamed from its pieces (``write_hashed``: written while the store's
        writer thread hashes them), then renamed to its content's name; ``pl`` then holds the name
        and sha256 (``_finish`` fsyncs the folder). ``StoreError`` naming the memory on failure,
        nothing of the commit left behind."""
        arrays, mid = self.path / "arrays", pl.memory_id
        tmp = arrays / f".{_key(mid)}.{os.getpid()}.{threading.get_ident()}.stream.tmp"
        name = None
        try:
            digest = write_hashed(tmp, pl.pieces, self._writer())
            name = f"{_key(mid)}-{digest[:12]}.slice"
            os.replace(tmp, arrays / name)
            pl.unit = dataclasses.replace(pl.unit, sha256=digest)
            pl.name, pl.sha256, pl.pieces = name, digest, None
        except OSError as exc:
            tmp.unlink(missing_ok=True)
            raise StoreError(
                f"{self.path}: cannot write memory {mid!r}: {exc.strerror or exc} "
                "(nothing of this commit was stored)"
            ) from None
        except BaseException:  # an interrupt: the file may exist under either name, nothing names it
            tmp.unlink(missing_ok=True)
            if name is not None:
                self._remove_new([name], live)
            raise

    def _writer(self) -> ThreadPoolExecutor:
        """The store's background writer (one thread, started once per process), which runs a
        commit's ``_write`` while the caller goes on, or hashes a file while it is streamed or read. A
        Store must not be used across ``fork`` (SQLite's rule: a child opens its own); should a child
        still commit, it starts its own writer rather than wait on an inherited one, which has no
        thread there."""
        if self._pool is None or self._pool_pid != os.getpid():
            self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="xmemory-store-write")
            self._pool_pid = os.getpid()
        return self._pool

    def _remove_new(self, names: list[str], live: set[str]) -> None:
        """Remove the files a failed commit wrote (or may have: a missing one is skipped), but never one
        the catalogue names."""
        names = [name for name in names if name not in live]
        try:  # a file the catalogue names stays, whatever interrupted the commit (one that committed)
            named = self._named(names)
        except sqlite3.Error:
            return  # the catalogue cannot be read: leave the files (garbage collection takes the orphans)
        for name in names:
            if name not in named:
                try:
                    (self.path / "arrays" / name).unlink(missing_ok=True)
                except (
                    OSError
                ):  # cleaning up must not hide why the commit failed (garbage collection takes it)
                    pass

    def _named(self, names: list[str]) -> set[str]:
        """Those of ``names`` the catalogue names (a base file or a delta)."""
        queries = ["SELECT arrays_file FROM memories WHERE arrays_file IN ({})"]
        if self._deltas:
            queries.append("SELECT file FROM deltas WHERE file IN ({})")
        named: set[str] = set()
        for i in range(0, len(names), 500):
            chunk = names[i : i + 500]
            for q in queries:
                named.update(n for (n,) in self._conn.execute(q.format(", ".join("?" * len(chunk))), chunk))
        return named

    def commit(
        self,
        units: list[MemorySlice | Memory | EncodedSlice],
        *,
        replace: bool = False,
        delete: list[str] = (),
        log: list[tuple[str, str, list[str]]] = (),
        redact: dict[str, set[str]] | None = None,
        previous: Mapping[str, tuple[str, MemorySlice]] | None = None,
    ) -> None:
        """One atomic commit: ``units`` (slices, ``Memory`` records converted to slices, or memories
        encoded by a build worker) written
        (new, or replacing the stored ones when ``replace``), ``delete`` removed with their
        operations log, ``redact`` (memory id -> unit ids) removed from the earlier entries of the
        log, ``log`` entries (memory id, operation, unit ids) appended to it. Files go first; the
        catalogue and the log change in one SQLite transaction; replaced files are removed after it.
        A crash at any point leaves the store as before or as after.

        ``previous``: memory id -> (the name of its last file, ``versions``; the caller's copy of that
        version's columns): the caller holds the stored versions (an engine's bank), so a delta is
        diffed against its copy, and a caller that passes ``previous`` (even empty) has the store
        keep no copy of its own (``committed``)."""
        self.start_commit(
            units, replace=replace, delete=delete, log=log, redact=redact, previous=previous
        ).finish()

    def start_commit(
        self,
        units: list[MemorySlice | Memory | EncodedSlice],
        *,
        replace: bool = False,
        delete: list[str] = (),
        log: list[tuple[str, str, list[str]]] = (),
        redact: dict[str, set[str]] | None = None,
        previous: Mapping[str, tuple[str, MemorySlice]] | None = None,
    ) -> PendingCommit:
        """:meth:`commit`'s first half: every unit checked and encoded here (a broken one raises
        before any file is written), their files then written by the store's background writer
        while the caller goes on (a bulk build builds its next shard meanwhile). A memory whose
        last version this store wrote or read is written as a delta when the commit only appends
        to its messages and removes no row (``_delta_plan``), as a base file otherwise; a commit of
        one memory writes its base file here, streamed from its columns (``_write_streamed``). The
        returned :class:`PendingCommit`'s ``finish`` waits for the files and commits the catalogue;
        ``abandon`` removes them. One pending commit at a time."""
        if self._pending is not None:
            raise StoreError(f"{self.path}: a commit is pending (finish or abandon it first)")
        self._sync_version()
        if self.schema_version < SCHEMA_VERSION:
            self.upgrade()
        slices = [_as_unit(u) for u in units]
        olds: dict[str, _Old | None] = {}
        for sl in slices:
            old = self._old(sl.memory_id)
            if old is not None and not replace:
                raise StoreError(
                    f"{self.path}: memory {sl.memory_id!r} is already stored (pass replace=True)"
                )
            olds[sl.memory_id] = old
        for mid in delete:
            old = self._old(mid)
            if old is None:
                raise KeyError(f"{self.path}: no memory {mid!r}")
            olds[mid] = old
        ids = [sl.memory_id for sl in slices]
        if len(set(ids)) != len(ids):
            raise StoreError(
                f"{self.path}: one commit names a memory twice ({sorted({m for m in ids if ids.count(m) > 1})[:3]})"
            )
        redact = dict(redact or {})
        # CPU work under the GIL; nothing is written yet
        held = previous or {}
        self.changed = {}  # until this commit's are known (``_remember``)
        plans = [
            self._plan(
                sl,
                olds[sl.memory_id],
                replace,
                bool(redact.get(sl.memory_id)),
                held.get(sl.memory_id),
                keep_copy=previous is None,
                stream=len(slices) == 1,
            )
            for sl in slices
        ]
        files = [(pl.memory_id, pl.name, pl.data) for pl in plans if pl.name is not None]
        live = {f for old in olds.values() if old is not None for f in old.files()}
        done: Future = Future()
        if plans and plans[0].pieces is not None:  # a commit of one memory's base file: streamed here
            self._write_streamed(plans[0], live)  # (its failure raises here, not at ``finish``)
            try:
                done.set_result(None)
            except BaseException:  # an interrupt: the file exists, nothing names it
                self._remove_new([plans[0].name], live)
                raise
        elif not files:
            done.set_result(None)
        elif len(files) > 1:
            done = self._writer().submit(self._write, files)
        else:  # one file (an engine's write): here, no hand-off
            try:
                self._write(files)
                done.set_result(None)
            except StoreError as exc:
                done.set_exception(exc)
            except BaseException:  # an interrupt: the file may exist, nothing names it
                self._remove_new([name for _, name, _ in files], live)
                raise
        self._pending = PendingCommit(self, plans, olds, live, list(delete), list(log), redact, done)
        return self._pending

    def _old(self, memory_id: str) -> _Old | None:
        """Memory ``memory_id`` as the catalogue holds it (None: not stored)."""
        row = self._conn.execute(
            "SELECT arrays_file, position, sha256, format, n_msg, n_sem FROM memories WHERE memory_id = ?",
            (memory_id,),
        ).fetchone()
        if row is None:
            return None
        chain: tuple[tuple[str, str], ...] = ()
        if self._deltas:
            q = "SELECT file, sha256 FROM deltas WHERE memory_id = ? ORDER BY seq"
            chain = tuple((f, d) for f, d in self._conn.execute(q, (memory_id,)).fetchall())
        return _Old(row[0], int(row[1]), row[2], int(row[3]), int(row[4]), int(row[5]), chain)

    def _plan(
        self,
        unit: MemorySlice | EncodedSlice,
        old: _Old | None,
        replace: bool,
        redacted: bool,
        prev: tuple[str, MemorySlice] | None = None,
        *,
        keep_copy: bool = True,
        stream: bool = False,
    ) -> _Plan:
        """What to write for ``unit``: a delta when ``_delta_plan`` gives one (against ``prev``, the
        caller's copy of the stored version, when it names the catalogue's last file; else against
        ``committed``), else a base file (kept in ``committed`` for the next commit when it replaces
        a memory and ``keep_copy``: the caller keeps no copies). ``stream``: the commit's one memory,
        whose base file (one this store does not keep) is left to ``_write_streamed``."""
        mid, checked = unit.memory_id, False
        if (
            isinstance(unit, MemorySlice)
            and old is not None
            and old.format == FORMAT
            and not redacted
            and unit.n("msg") >= old.n_msg  # fewer messages or statements: a delete (a fresh base)
            and unit.n("sem") >= old.n_sem
        ):
            cols = self._previous_columns(old, prev)
            entry = self._light_entry(mid, old) if cols is not None else self.committed.get(mid)
            # a growth of exactly the caller's copy says which rows it kept: only the others are compared
            kept = unit.kept.columns if cols is not None and unit.kept and unit.kept.base is prev[1] else None
            if entry is not None and entry.head == old.head:
                plan, checked = self._delta_plan(unit, old, entry, cols, kept)
                if plan is not None:
                    plan.shapes, plan.against_copy = _widths_of(unit), cols is not None
                    return plan
        cache = replace and isinstance(unit, MemorySlice) and keep_copy
        if stream and isinstance(unit, MemorySlice) and not cache:
            try:
                pieces, _ = slice_pieces(unit, self.dim, checked=checked)
            except SliceFormatError as exc:
                raise StoreError(f"{self.path}: {exc}") from None
            enc = encoded_as(unit, self.dim, b"", "")  # its digest once written
            return _Plan(mid, "base", old, unit=enc, pieces=pieces, shapes=_widths_of(unit))
        name, enc = self._encode(unit, checked=checked)
        return _Plan(
            mid,
            "base",
            old,
            name=name,
            unit=enc,
            data=enc.data,
            sha256=enc.sha256,
            cache=cache,
            shapes=_widths_of(unit) if isinstance(unit, MemorySlice) else None,
        )

    def _previous_columns(
        self, old: _Old, prev: tuple[str, MemorySlice] | None
    ) -> dict[str, np.ndarray] | None:
        """The stored columns of ``prev`` (``diff``'s keys) when it names ``old``'s last file, holds its
        rows of messages and statements, and its columns are the version's as this store last read or
        wrote it (``_shapes``), a ragged or kNN column wider only by padding (a bank pads every memory
        to its widest: cut here); None otherwise (the store's own copy is used, if any)."""
        if prev is None or prev[0] != old.files()[-1]:
            return None
        mid, sl = prev[1].memory_id, prev[1]
        with self._shapes_lock:
            rec = self._shapes.get(mid)
            if rec is None or rec[0] != old.head:
                return None
            self._shapes.move_to_end(mid)
        widths = dict(zip(_WIDE, rec[1]))
        out: dict[str, np.ndarray] = {}
        try:
            if sl.n("msg") != old.n_msg or sl.n("sem") != old.n_sem:
                return None
            for lv, name, _ in stored_columns():  # another dtype or row shape: ``diff`` writes it whole
                a, w = sl.cols[lv][name], widths.get((lv, name))
                if w is not None and a.ndim == 2 and a.shape[1] != w:
                    a = _cut_padding(name, a, w)
                    if a is None:
                        return None
                out[f"{lv}.{name}"] = a
        except (KeyError, StopIteration):
            return None
        return out

    def _record_widths(self, memory_id: str, head: str | None, widths: tuple[int, ...] | None) -> None:
        """Remember memory ``memory_id``'s last version (forget it: ``widths`` None)."""
        with self._shapes_lock:
            if head is None or widths is None:
                self._shapes.pop(memory_id, None)
                return
            self._shapes[memory_id] = (head, widths)
            self._shapes.move_to_end(memory_id)
            while len(self._shapes) > WIDTH_RECORDS:
                self._shapes.popitem(last=False)

    def _light_entry(self, memory_id: str, old: _Old) -> Committed:
        """The stored version's head and file sizes, without its columns (a caller holds them)."""
        try:
            base = (self.path / "arrays" / old.file).stat().st_size
        except OSError:
            base = 0  # a fresh base at the next delta: its share of the base is then passed
        q = "SELECT size FROM deltas WHERE memory_id = ? ORDER BY seq"
        sizes = [int(r[0]) for r in self._conn.execute(q, (memory_id,)).fetchall()] if self._deltas else []
        return Committed(old.head, base, sizes)

    def _delta_plan(
        self,
        sl: MemorySlice,
        old: _Old,
        entry: Committed,
        cols: dict[str, np.ndarray] | None = None,
        kept: dict[str, tuple[int, np.ndarray]] | None = None,
    ) -> tuple[_Plan | None, bool]:
        """``sl`` as a delta on the version ``entry`` holds (the catalogue's: ``old``), or no file when
        no column changed; None when it must be a base file: a slice that does not check (the base
        path says why), a commit that forgets (``Change.forgets``: messages removed or changed,
        statements removed; a fresh base, so that no file still named holds what was forgotten), a
        chain of ``MAX_CHAIN`` deltas, or one whose bytes would pass ``COMPACT_SHARE`` of the base's.
        Also whether ``sl`` passed ``check_slice``: an append's value checks read the rows it
        changed (the version it follows passed them). ``cols``: that version's columns as the
        caller holds them (None: ``entry``'s); ``kept``: the rows ``sl``'s growth copied from those
        (``bank.KeptRows``; only with ``cols``)."""
        mid = sl.memory_id
        try:
            if sl.cols["msg"]["x"].shape[-1] != self.dim:
                return None, False
            check_shapes(sl, self.dim)
        except (SliceFormatError, KeyError, IndexError, ValueError):
            return None, False
        if cols is None:
            try:
                cols = entry.columns(mid)
            except SliceFormatError:
                self.committed.drop(mid)
                return None, False
        change = diff(cols, sl, kept)
        if change is None or change.forgets():  # a delete or an update: its base file checks every row
            return None, False
        try:
            check_slice(sl, self.dim, changed=change.changed_rows(), before=change.before)
        except (SliceFormatError, KeyError, IndexError, ValueError):
            return None, False
        new_ids = [str(i) for i in sl.cols["msg"]["id"][change.before["msg"] :].tolist()]
        plan = _Plan(
            mid,
            "same",
            old,
            stats=catalogue_stats(sl),
            counts=dict(change.after),
            new_ids=new_ids,
            change=change,
            entry=entry,
        )
        if not change:
            return plan, True
        if len(old.chain) >= MAX_CHAIN:
            return None, True
        data = encode_delta(change, entry.head)
        if sum(entry.chain) + len(data) > COMPACT_SHARE * entry.base_size:
            return None, True
        plan.kind, plan.data, plan.sha256 = "delta", data, _sha256(data)
        plan.name = f"{_key(mid)}-{plan.sha256[:12]}.delta"
        return plan, True

    def _claim(self, p: PendingCommit, what: str) -> None:
        """Check that ``p`` is this store's pending commit, in this process, not yet finished or
        abandoned (``StoreError`` otherwise, nothing changed)."""
        if p.pid != os.getpid():
            raise StoreError(f"{self.path}: a commit started in process {p.pid} cannot be {what} in another")
        if p.state != "pending" or self._pending is not p:
            raise StoreError(f"{self.path}: this commit is {p.state}, it cannot be {what}")

    def _finish(self, p: PendingCommit) -> None:
        """``PendingCommit.finish``: wait for the files, sync the folder, commit the catalogue and the
        log in one transaction, remove replaced files; on any failure the new files go."""
        self._claim(p, "finished")
        c = self._conn
        p.state = "failed"  # until the transaction is in
        try:
            p.done.result()
            if p.written:
                try:
                    fd = os.open(self.path / "arrays", os.O_RDONLY)
                    try:
                        os.fsync(fd)
                    finally:
                        os.close(fd)
                except OSError as exc:
                    raise StoreError(
                        f"{self.path}: cannot sync the arrays folder: {exc.strerror or exc}"
                    ) from None
            with c:
                pos = (
                    c.execute("SELECT COALESCE(MAX(position), -1) + 1 FROM memories").fetchone()[0]
                    if any(pl.old is None for pl in p.plans)
                    else 0
                )
                for mid in p.delete:
                    c.execute("DELETE FROM deltas WHERE memory_id = ?", (mid,))
                    c.execute("DELETE FROM memories WHERE memory_id = ?", (mid,))
                    c.execute("DELETE FROM oplog WHERE memory_id = ?", (mid,))
                self._delete_scoped_rows(p)
                for mid, gone in p.redact.items():
                    self._redact(mid, set(gone))
                for pl in p.plans:
                    if pl.old is None or pl.old.format < 3:  # new, or an old format's rows in the text tables
                        if pl.old is not None:
                            c.execute("DELETE FROM memories WHERE memory_id = ?", (pl.memory_id,))
                        self._insert(pl.unit, pos if pl.old is None else pl.old.position, pl.name)
                        pos += pl.old is None
                    else:
                        self._update(pl)
                gone = set(p.delete)  # a deleted memory's entries keep a keyed digest of its id, not the id
                key = (
                    self._audit_key(create=True) if gone and any(mid in gone for mid, _, _ in p.log) else None
                )
                c.executemany(
                    "INSERT INTO oplog (memory_id, op, ids, time) VALUES (?, ?, ?, ?)",
                    [
                        (self._audit_id(mid, key) if mid in gone else mid, op, json.dumps(ids), time.time())
                        for mid, op, ids in p.log
                    ],
                )
            p.state = "finished"
        except BaseException as exc:
            wait([p.done])  # the writes handed out finish (or fail) before their files are removed
            self._remove_new(
                p.written, p.live
            )  # the commit did not happen (or did: what the catalogue names stays)
            for pl in p.plans:  # what this store remembers of them may no longer be the catalogue's
                self.committed.drop(pl.memory_id)
            if self._committed(p):  # an interrupt raised as COMMIT returned: the commit happened
                p.state = "finished"
                self._remove_replaced(p)
            if isinstance(exc, sqlite3.Error):
                raise StoreError(
                    f"{self.path / DB_NAME}: the commit failed and was rolled back: {exc}"
                ) from None
            raise
        finally:
            self._pending = None
        self._remove_replaced(p)  # first: what a delete replaced goes whatever follows
        try:
            self._remember(p)
        except BaseException:  # the commit happened; only what this store remembers of it is lost
            for pl in p.plans:
                self.committed.drop(pl.memory_id)
            raise

    def _update(self, pl: _Plan) -> None:
        """Within a commit's transaction: a stored memory's catalogue rows after ``pl``. A base file
        replaces the chain; a delta joins it; either way the message-id index changes by the ids
        that came or went (``_sync_message_ids``), not as a whole."""
        c, mid = self._conn, pl.memory_id
        # the write lock first (a no-op update opens the transaction), then the version this commit
        # was planned on must still be the catalogue's: another Store (another process) may have
        # committed the memory since; its delta would not follow ours, its files must not be removed
        c.execute("UPDATE memories SET position = position WHERE memory_id = ?", (mid,))
        now = self._old(mid)
        if now is None or now.file != pl.old.file or now.chain != pl.old.chain:
            raise StoreError(
                f"{self.path}: memory {mid}: another writer committed it after this commit began; "
                "nothing was written (try again)"
            )
        sets = ", ".join(f"{k} = ?" for k in _COUNT_COLUMNS)
        if pl.kind == "base":
            enc = pl.unit
            c.execute("DELETE FROM deltas WHERE memory_id = ?", (mid,))
            c.execute(
                f"UPDATE memories SET arrays_file = ?, sha256 = ?, stats = ?, format = {FORMAT}, {sets} "
                "WHERE memory_id = ?",
                (pl.name, enc.sha256, json.dumps(enc.stats), *(enc.counts[lv] for lv in LEVELS), mid),
            )
            self._sync_message_ids(mid, enc.message_ids)
            return
        if pl.kind == "delta":
            seq = c.execute(
                "SELECT COALESCE(MAX(seq), 0) + 1 FROM deltas WHERE memory_id = ?", (mid,)
            ).fetchone()[0]
            c.execute(
                "INSERT INTO deltas (memory_id, seq, file, sha256, size) VALUES (?, ?, ?, ?, ?)",
                (mid, seq, pl.name, pl.sha256, len(pl.data)),
            )
        c.execute(
            f"UPDATE memories SET stats = ?, {sets} WHERE memory_id = ?",
            (json.dumps(pl.stats), *(pl.counts[lv] for lv in LEVELS), mid),
        )
        c.executemany("INSERT INTO message_ids VALUES (?, ?)", [(mid, i) for i in pl.new_ids])

    def _sync_message_ids(self, memory_id: str, ids: list[str]) -> None:
        """The message-id index of ``memory_id`` made ``ids``: the ids that went deleted, the new ones
        inserted (all of them again only where an id repeats)."""
        c = self._conn
        old = [r[0] for r in c.execute("SELECT id FROM message_ids WHERE memory_id = ?", (memory_id,))]
        olds, news = set(old), set(ids)
        if len(olds) == len(old) and len(news) == len(ids):
            gone = [(memory_id, i) for i in old if i not in news]
            new = [(memory_id, i) for i in ids if i not in olds]
            c.executemany("DELETE FROM message_ids WHERE memory_id = ? AND id = ?", gone)
        else:
            c.execute("DELETE FROM message_ids WHERE memory_id = ?", (memory_id,))
            new = [(memory_id, i) for i in ids]
        c.executemany("INSERT INTO message_ids VALUES (?, ?)", new)

    def _remember(self, p: PendingCommit) -> None:
        """After commit ``p``: the versions it wrote, for the next commit's deltas (a delta updates the
        version it was made from; a base replacing a memory is kept as its bytes)."""
        self.changed = {
            pl.memory_id: pl.change.changed_rows()
            for pl in p.plans
            if pl.against_copy and pl.change is not None
        }
        for pl in p.plans:
            mid = pl.memory_id
            head = pl.old.head if pl.kind == "same" else pl.sha256
            self._record_widths(mid, head, pl.shapes)
            if pl.kind == "delta":
                if self.committed.get(mid) is pl.entry and pl.entry.head == pl.old.head:
                    pl.entry.apply(pl.change, pl.sha256, len(pl.data))
                    self.committed.put(mid, pl.entry)  # its size changed
                else:
                    self.committed.drop(mid)
            elif pl.kind == "base":
                if pl.cache:
                    self.committed.put(mid, Committed.of_files(pl.data, pl.sha256, []))
                else:
                    self.committed.drop(mid)
        for mid in p.delete:
            self.committed.drop(mid)
            self._record_widths(mid, None, None)

    def _has_scoped_rows(self) -> bool:
        return self._has_table(SCOPED_ROWS)

    def _delete_scoped_rows(self, p: PendingCommit) -> None:
        """Within commit ``p``'s transaction: the ``SCOPED_ROWS`` of the memories it deletes, all of
        them when it is a reset (rows of a scope the engine never held included)."""
        if not p.delete or not self._has_scoped_rows():
            return
        if any(op == RESET_OP for _, op, _ in p.log):
            self._conn.execute(f"DELETE FROM {SCOPED_ROWS}")
        else:
            self._conn.executemany(f"DELETE FROM {SCOPED_ROWS} WHERE memory_id = ?", [(m,) for m in p.delete])

    def forget_scoped_rows(self, memory_ids: list[str] | None = None) -> int:
        """Delete the ``SCOPED_ROWS`` of ``memory_ids`` (None: all) in one transaction: what a
        ``delete_all`` or a reset does to them where no memory is stored to delete (an integration's
        rows alone). Returns the number of rows deleted."""
        if not self._has_scoped_rows():
            return 0
        with self._conn as c:
            if memory_ids is None:
                return c.execute(f"DELETE FROM {SCOPED_ROWS}").rowcount
            return sum(
                c.execute(f"DELETE FROM {SCOPED_ROWS} WHERE memory_id = ?", (m,)).rowcount for m in memory_ids
            )

    def _committed(self, p: PendingCommit) -> bool:
        """Whether the catalogue holds commit ``p`` (its memories with its new files, its deletions gone)."""
        try:
            c = self._conn

            def holds(pl: _Plan) -> bool:
                if pl.kind == "delta":
                    q = "SELECT 1 FROM deltas WHERE memory_id = ? AND file = ?"
                    return c.execute(q, (pl.memory_id, pl.name)).fetchone() is not None
                q = "SELECT 1 FROM memories WHERE memory_id = ? AND arrays_file = ?"
                if c.execute(q, (pl.memory_id, pl.name)).fetchone() is None:
                    return False
                return not (
                    pl.old is not None
                    and pl.old.chain
                    and c.execute("SELECT 1 FROM deltas WHERE memory_id = ?", (pl.memory_id,)).fetchone()
                )

            mine = all(holds(pl) for pl in p.plans if pl.name is not None)
            gone = not any(
                c.execute("SELECT 1 FROM memories WHERE memory_id = ?", (mid,)).fetchone() for mid in p.delete
            )
        except sqlite3.Error:
            return False
        return mine and gone and bool(p.written or p.delete)

    def _remove_replaced(self, p: PendingCommit) -> None:
        """After commit ``p``: the files of the memories it deleted or gave a new base (their old base
        and deltas, but a file it kept); a delta leaves the chain's files where they are."""
        new = set(p.written)
        kinds = {pl.memory_id: pl.kind for pl in p.plans}
        for mid, old in p.olds.items():
            if old is None or kinds.get(mid, "base") != "base":
                continue
            for name in old.files():
                if name not in new:
                    (self.path / "arrays" / name).unlink(missing_ok=True)

    def _abandon(self, p: PendingCommit) -> None:
        """``PendingCommit.abandon``: wait for the files and remove them; the store is as before. A
        forked child's copy of a pending commit is dropped untouched (its files are the parent's)."""
        if p.pid != os.getpid():
            if self._pending is p:
                self._pending = None
            return
        self._claim(p, "abandoned")
        p.state = "abandoned"
        try:
            wait([p.done])
            self._remove_new(p.written, p.live)
        finally:
            self._pending = None

    def _insert(self, enc: EncodedSlice, pos: int, name: str) -> None:
        c, mid = self._conn, enc.memory_id
        c.execute(
            f"INSERT INTO memories (memory_id, position, arrays_file, sha256, stats, created, format, "
            f"{', '.join(_COUNT_COLUMNS)}) VALUES (?, ?, ?, ?, ?, ?, {FORMAT}, {', '.join('?' * len(LEVELS))})",
            (
                mid,
                pos,
                name,
                enc.sha256,
                json.dumps(enc.stats),
                time.time(),
                *(enc.counts[lv] for lv in LEVELS),
            ),
        )
        c.executemany("INSERT INTO message_ids VALUES (?, ?)", [(mid, i) for i in enc.message_ids])

    def _redact(self, memory_id: str, gone: set[str]) -> None:
        """Remove ``gone`` from the unit ids of the memory's log entries (a deleted id leaves the log)."""
        c = self._conn
        for seq, ids in c.execute("SELECT seq, ids FROM oplog WHERE memory_id = ?", (memory_id,)).fetchall():
            old = json.loads(ids)
            new = [i for i in old if i not in gone]
            if new != old:
                c.execute("UPDATE oplog SET ids = ? WHERE seq = ?", (json.dumps(new), seq))

    def put(self, unit: MemorySlice | Memory, *, replace: bool = False) -> None:
        """Commit one memory atomically."""
        self.commit([unit], replace=replace)

    put_slice = put

    def delete(self, memory_id: str) -> None:
        self.commit([], delete=[memory_id])

    def compact(self) -> None:
        """Rewrite the database file without its free pages (``VACUUM``)."""
        self._conn.execute("VACUUM")

    def maybe_compact(self) -> bool:
        """``compact`` when at least ``COMPACT_FREE_FRACTION`` of the database's pages are free
        (after deletes); True when it ran. Freed pages are zeroed either way (``secure_delete``)."""
        free = self._conn.execute("PRAGMA freelist_count").fetchone()[0]
        pages = self._conn.execute("PRAGMA page_count").fetchone()[0]
        if pages and free >= COMPACT_FREE_FRACTION * pages:
            self.compact()
            return True
        return False

    def collect_garbage(self) -> list[str]:
        """Remove files no catalogue row names (left by a crash between writing and committing);
        ``StoreError`` while a commit is pending (its files are not named yet)."""
        if self._pending is not None and self._pending.pid == os.getpid():
            raise StoreError(
                f"{self.path}: a commit is pending (finish or abandon it before collecting garbage)"
            )
        named = {r[0] for r in self._conn.execute("SELECT arrays_file FROM memories")}
        if self._deltas:
            named.update(r[0] for r in self._conn.execute("SELECT file FROM deltas"))
        gone = []
        for f in (self.path / "arrays").iterdir():
            if f.name not in named and (f.suffix in (".slice", ".delta", ".npz", ".tmp")):
                f.unlink(missing_ok=True)
                gone.append(f.name)
        return gone

    # -- upgrading -----------------------------------------------------------------------------
    def upgrade(self) -> list[str]:
        """Bring a store of schema 1 or 2 to schema 3 atomically: every memory's columns are written
        to its one file first, then one transaction adds the catalogue's counts, format and
        message-id index, moves the converted memories out of the text tables and sets the
        version; the old files go after it. A memory that does not load now (damaged, or a read
        that failed) keeps its old file and its rows in the old tables: it is read the old way
        (quarantined if it still fails), removed with its memory, and converted by a later
        ``upgrade`` once it loads. Returns the ids of the memories left in the old format."""
        self._sync_version()
        c = self._conn
        tables = {r[0] for r in c.execute("SELECT name FROM sqlite_master WHERE type = 'table'")} & set(
            legacy.TABLES
        )
        if self.legacy:
            todo, version = self.memory_ids(), self.schema_version
        else:
            if not tables and self.schema_version == SCHEMA_VERSION:
                return []
            todo = [
                r[0] for r in c.execute("SELECT memory_id FROM memories WHERE format < 3 ORDER BY position")
            ]
            version = SCHEMA_VERSION
        converted: dict[str, tuple[MemorySlice, str, str]] = {}
        damaged: list[str] = []
        try:
            for mid in todo:
                try:
                    sl = self.get_slice(mid)
                except (StoreError, KeyError, ValueError, sqlite3.DatabaseError) as exc:
                    log.warning(
                        "%s: memory %s stays in the old format (quarantined while it fails): %s",
                        self.path,
                        mid,
                        _reason(exc),
                    )
                    damaged.append(mid)
                    continue
                name, enc = self._encode(sl)
                self._write_file(mid, name, enc.data)
                converted[mid] = (sl, name, enc.sha256)
            olds = dict(c.execute("SELECT memory_id, arrays_file FROM memories").fetchall())
            with c:
                c.execute("BEGIN")  # the DDL below is part of the transaction (sqlite3 opens none for it)
                cols = {r[1] for r in c.execute("PRAGMA table_info(memories)")}
                for col in _COUNT_COLUMNS:
                    if col not in cols:
                        c.execute(f"ALTER TABLE memories ADD COLUMN {col} INTEGER NOT NULL DEFAULT 0")
                if "format" not in cols:  # every memory of the old store is in its format until converted
                    c.execute(
                        f"ALTER TABLE memories ADD COLUMN format INTEGER NOT NULL DEFAULT {int(version)}"
                    )
                for stmt in filter(str.strip, (_CATALOGUE + _INDEXES).split(";")):
                    c.execute(stmt)
                for mid, (sl, name, digest) in converted.items():
                    # format 3: the columns, no passages yet (``construct.passages.store_passages`` embeds them)
                    c.execute(
                        f"UPDATE memories SET arrays_file = ?, sha256 = ?, format = 3, "
                        f"{', '.join(f'{k} = ?' for k in _COUNT_COLUMNS)} WHERE memory_id = ?",
                        (name, digest, *(sl.n(lv) for lv in LEVELS), mid),
                    )
                    c.executemany(
                        "INSERT INTO message_ids VALUES (?, ?)",
                        [(mid, str(i)) for i in sl.cols["msg"]["id"].tolist()],
                    )
                for table in reversed(legacy.TABLES):
                    if damaged:  # the old rows of what could not be converted stay
                        c.executemany(f"DELETE FROM {table} WHERE memory_id = ?", [(m,) for m in converted])
                    else:
                        c.execute(f"DROP TABLE IF EXISTS {table}")
                c.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(SCHEMA_VERSION),))
        except BaseException as exc:
            for _, name, _ in converted.values():
                (self.path / "arrays" / name).unlink(missing_ok=True)
            if isinstance(exc, sqlite3.Error):
                raise StoreError(
                    f"{self.path / DB_NAME}: the upgrade failed and was rolled back: {exc}"
                ) from None
            raise
        self.schema_version = SCHEMA_VERSION
        self._count_columns()
        for mid in converted:
            if olds.get(mid) and olds[mid] != converted[mid][1]:
                (self.path / "arrays" / olds[mid]).unlink(missing_ok=True)
        if tables:
            self.compact()  # the text tables' pages leave the file
        return damaged

    def formats(self) -> dict[str, int]:
        """Memory id -> the file format it is stored in (4 now; 3 holds no passages; 1-2 legacy)."""
        if self.legacy:
            return {m: self.schema_version for m in self.memory_ids()}
        return dict(self._conn.execute("SELECT memory_id, format FROM memories ORDER BY position").fetchall())

    def _format(self, memory_id: str) -> int:
        """The layout memory ``memory_id`` is stored in: 4, 3 (no passages), or the old schema it was left in."""
        if self.legacy:
            return self.schema_version
        row = self._conn.execute("SELECT format FROM memories WHERE memory_id = ?", (memory_id,)).fetchone()
        return int(row[0]) if row is not None else SCHEMA_VERSION

    # -- reading -------------------------------------------------------------------------------
    def _file(
        self, memory_id: str
    ) -> tuple[Path, str, str, str, int, dict[str, int] | None, list[tuple[Path, str]]]:
        """One catalogue read (one statement: one version): the memory's base file path, sha256,
        stats JSON, where (for errors), format, rows per level (None for a memory in an old format)
        and its deltas' paths and sha256, oldest first."""
        chained = not self.legacy
        if chained:
            self._fresh_counts()
            self._fresh_deltas()
            chained = self._deltas
        extra = "" if self.legacy else ", m.format, " + ", ".join(f"m.{c}" for c in self._counts)
        rows = self._conn.execute(
            f"SELECT m.arrays_file, m.sha256, m.stats{extra}, d.file, d.sha256 FROM memories m "
            "LEFT JOIN deltas d ON d.memory_id = m.memory_id WHERE m.memory_id = ? ORDER BY d.seq"
            if chained
            else f"SELECT m.arrays_file, m.sha256, m.stats{extra} FROM memories m WHERE m.memory_id = ?",
            (memory_id,),
        ).fetchall()
        if not rows:
            raise KeyError(f"{self.path}: no memory {memory_id!r}")
        fname, digest, stats = rows[0][:3]
        fmt = self.schema_version if self.legacy else int(rows[0][3])
        counts = self._level_counts(rows[0][4 : 4 + len(self._counts)]) if fmt >= 3 else None
        where = f"{self.path}: memory {memory_id}"
        chain = (
            [(self._arrays_path(r[-2], where), r[-1]) for r in rows if r[-2] is not None] if chained else []
        )
        return self._arrays_path(fname, where), digest, stats, where, fmt, counts, chain

    def _read_verified(self, path: Path, digest: str, where: str) -> bytearray:
        """The file's bytes, read into a fresh buffer the caller owns, checked against ``digest``
        (hashed on the store's thread while the file is read: ``read_hashed``)."""
        try:
            data, got = read_hashed(path, self._writer())
        except FileNotFoundError:
            raise StoreError(f"{where}: file {path} is missing") from None
        except OSError as exc:
            raise StoreError(f"{where}: cannot read {path}: {exc.strerror or exc}") from None
        if got != digest:
            raise StoreError(f"{where}: file {path} does not match its checksum (damaged)")
        return data

    def get_slice(self, memory_id: str) -> MemorySlice:
        """One memory's columns (local rows), verified: checksum of its base file and of each delta,
        the deltas' chain, columns, shapes, references."""
        path, digest, stats_json, where, fmt, counts, chain = self._file(memory_id)
        data = self._read_verified(path, digest, where)
        deltas = [(self._read_verified(p, sha, where), sha) for p, sha in chain]
        try:
            stats = json.loads(stats_json)
        except ValueError as exc:
            raise StoreError(f"{where}: table memories, field stats: not valid JSON ({exc})") from None
        try:
            if fmt < 3:
                mem = legacy.read_memory(
                    self._conn, memory_id, path, dim=self.dim, schema_version=fmt, where=where
                )
                sl = slice_from_memory(mem)
                check_slice(sl, self.dim)
            elif deltas:
                if fmt != FORMAT:
                    raise SliceFormatError(f"memory {memory_id}: deltas on a file of format {fmt}")
                w = f"memory {memory_id}"
                arrays = apply_chain(
                    unpack_arrays(data, w, own=True),
                    [(unpack_arrays(d, w, own=True), sha) for d, sha in deltas],
                    digest,
                    w,
                )
                sl = slice_from_arrays(memory_id, arrays, stats, fmt)
                check_slice(sl, self.dim, counts)
            else:
                sl = slice_from_bytes(memory_id, data, stats, fmt, own=True)
                check_slice(sl, self.dim, counts)
        except legacy.LegacyError as exc:
            raise StoreError(str(exc)) from None
        except ValueError as exc:  # SliceFormatError, or provenance naming a unit that is not there
            raise StoreError(f"{self.path}: {exc}") from None
        if fmt == FORMAT:
            self._record_widths(memory_id, chain[-1][1] if chain else digest, _widths_of(sl))
        return sl

    def get(self, memory_id: str) -> Memory:
        """One memory as records plus arrays (a read-only view of ``get_slice``)."""
        return memory_from_slice(self.get_slice(memory_id))

    def _arrays_path(self, fname: str, where: str) -> Path:
        """The file a catalogue row names, confined to the store's ``arrays/`` folder (a link is
        never followed: it could point outside the store)."""
        folder = self.path / "arrays"
        if (
            not isinstance(fname, str)
            or not fname
            or "/" in fname
            or "\\" in fname
            or fname.startswith(".")
            or "\x00" in fname
        ):
            raise StoreError(f"{where}: arrays_file {fname!r} is not a plain file name inside {folder}")
        path = folder / fname
        if path.is_symlink() or folder.is_symlink():
            raise StoreError(
                f"{where}: arrays file {path} is a symbolic link (refused: it could point outside the store)"
            )
        return path

    def load_bank(self, memory_ids: list[str] | None = None, *, quarantine: bool = False) -> Bank:
        """The bank of ``memory_ids`` (default: all), read memory by memory straight into
        preallocated columns, so each embedding matrix is held once. A memory that fails to load
        raises ``StoreError``; with ``quarantine`` it is left out and recorded in
        ``self.quarantined`` (memory id -> reason), so the others still load."""
        ids = self.memory_ids() if memory_ids is None else list(memory_ids)
        for m in ids:
            if not self.has(m):
                raise KeyError(f"{self.path}: no memory {m!r}")
        self.quarantined = {}
        while True:  # bounded: each pass quarantines one more memory or returns
            live = [m for m in ids if m not in self.quarantined]
            try:
                return self._load(live)
            except _Damaged as exc:
                if not quarantine:
                    raise StoreError(exc.reason) from None
                log.warning("%s: memory %s quarantined: %s", self.path, exc.memory_id, exc.reason)
                self.quarantined[exc.memory_id] = exc.reason

    def _load(self, ids: list[str]) -> Bank:
        lengths: dict[str, list[int]] = {lv: [] for lv in LEVELS}
        for m in ids:
            for lv, n in self.counts(m).items():
                lengths[lv].append(n)

        def slices():
            for m in ids:
                try:
                    sl = self.get_slice(m)
                except (StoreError, KeyError, ValueError, sqlite3.DatabaseError) as exc:
                    raise _Damaged(m, _reason(exc)) from None
                yield sl

        return Bank.from_slices(slices(), self.dim, lengths=lengths, memory_ids=ids)
