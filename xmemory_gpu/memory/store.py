"""The on-disk store: a directory with ``memory.sqlite`` and one ``arrays/*.npz`` per memory.

A memory is committed whole or not at all: its arrays (``np.savez`` of plain ``.npy`` arrays)
are written to a temporary file, fsynced and renamed into place under a content-addressed name,
then its records and the file's sha256 are inserted in one SQLite transaction. A crash between
the two leaves an unreferenced file that is ignored. Loading validates the schema version, the
dimension, every array's presence, dtype and shape, and the checksum; nothing is unpickled.

Schema 2 (this release) adds a ``row`` column to episodes and semantics: their ids are stable
(they survive re-derivation, see ``engine.ids``) and no longer their positions, so records are
ordered by ``row``. A schema-1 store is read as it is (its ids are its rows) and upgraded by its
first commit. ``load_bank(quarantine=True)`` leaves out a memory that fails to load (recorded in
``Store.quarantined``), so one damaged memory never keeps the others from loading.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import sqlite3
import time
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

from .bank import LEVELS, Bank, MemorySlice
from .hierarchy import ARRAY_FIELDS, Memory, memory_from_slice, slice_from_memory
from .records import Episode, Message, SemanticNode, Theme

SCHEMA_VERSION = 2
READABLE_VERSIONS = (1, 2)  # schema 1 is read as is and upgraded by the first commit
DB_NAME = "memory.sqlite"
# timestamps are POSIX seconds of years 1-9999 (what datetime can represent)
MIN_TIME = -62135596800.0  # 0001-01-01T00:00:00Z
MAX_TIME = 253402300800.0  # 10000-01-01T00:00:00Z (exclusive)
log = logging.getLogger(__name__)

_SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE memories (memory_id TEXT PRIMARY KEY, position INTEGER NOT NULL, arrays_file TEXT NOT NULL,
  sha256 TEXT NOT NULL, stats TEXT NOT NULL, created REAL NOT NULL);
CREATE TABLE messages (memory_id TEXT NOT NULL REFERENCES memories(memory_id) ON DELETE CASCADE, pos INTEGER NOT NULL,
  id TEXT NOT NULL, speaker TEXT NOT NULL, text TEXT NOT NULL, session INTEGER NOT NULL, timestamp REAL,
  PRIMARY KEY (memory_id, pos));
CREATE TABLE episodes (memory_id TEXT NOT NULL REFERENCES memories(memory_id) ON DELETE CASCADE, id INTEGER NOT NULL,
  title TEXT NOT NULL, text TEXT NOT NULL, message_ids TEXT NOT NULL, start REAL, end REAL, row INTEGER,
  PRIMARY KEY (memory_id, id));
CREATE TABLE semantics (memory_id TEXT NOT NULL REFERENCES memories(memory_id) ON DELETE CASCADE, id INTEGER NOT NULL,
  text TEXT NOT NULL, episode_ids TEXT NOT NULL, message_ids TEXT NOT NULL, timestamp REAL, row INTEGER,
  PRIMARY KEY (memory_id, id));
CREATE TABLE themes (memory_id TEXT NOT NULL REFERENCES memories(memory_id) ON DELETE CASCADE, row INTEGER NOT NULL,
  id INTEGER NOT NULL, summary TEXT NOT NULL, PRIMARY KEY (memory_id, row));
CREATE TABLE lineage (memory_id TEXT NOT NULL REFERENCES memories(memory_id) ON DELETE CASCADE, theme_id INTEGER NOT NULL,
  parent_id INTEGER NOT NULL);
"""
# added tables (created when missing, so stores of the first release open unchanged)
_ADDED = """
CREATE TABLE IF NOT EXISTS oplog (seq INTEGER PRIMARY KEY AUTOINCREMENT, memory_id TEXT NOT NULL, op TEXT NOT NULL,
  ids TEXT NOT NULL, time REAL NOT NULL);
CREATE INDEX IF NOT EXISTS messages_by_id ON messages (id);
"""


def _check_arrays(where: str, arrays: dict[str, np.ndarray], n_sem: int, n_themes: int) -> None:
    """Index ranges and finite values of one memory's arrays (a crafted or damaged file is refused)."""
    for name in ("msg_x", "epi_x", "sem_x", "theme_knn_sim", "sem_knn_sim"):
        a = arrays[name]
        bad = ~np.isfinite(a) if name.endswith("_x") else np.isnan(a)
        if bad.any():
            rows = np.flatnonzero(bad.any(axis=1))[:5].tolist()
            raise StoreError(f"{where}: field {name}: non-finite values in rows {rows}")
    theme_of = arrays["theme_of"]
    if theme_of.size and (theme_of.min() < 0 or theme_of.max() >= n_themes):
        raise StoreError(f"{where}: field theme_of: values outside 0..{n_themes - 1}")
    for name, n in (("sem_knn_idx", n_sem), ("theme_knn_idx", n_themes)):
        a = arrays[name]
        if a.size and (a.min() < -1 or a.max() >= n):
            raise StoreError(f"{where}: field {name}: row ids outside -1..{n - 1}")


class StoreError(ValueError):
    """A store that is missing, of another schema or dimension, or damaged; names path and field."""


class _Damaged(Exception):
    """One memory failed to load (``load_bank`` quarantines it)."""

    def __init__(self, memory_id: str, reason: str) -> None:
        super().__init__(reason)
        self.memory_id, self.reason = memory_id, reason


def _time(v: Any) -> float | None:
    """A stored timestamp, or None when it is not one datetime can represent (years 1-9999): a
    value stored by an older release never makes a search fail."""
    if v is None or isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    return float(v) if math.isfinite(v) and MIN_TIME <= v < MAX_TIME else None


def _json(v: Any, where: str, table: str, field: str) -> Any:
    """A JSON cell of a record, its damage reported with table and field."""
    try:
        return json.loads(v)
    except (TypeError, ValueError) as exc:
        raise StoreError(f"{where}: table {table}, field {field}: not valid JSON ({exc})") from None


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


class Store:
    def __init__(self, path: Path, conn: sqlite3.Connection) -> None:
        self.path = path
        self._conn = conn
        meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())
        try:
            self.schema_version = int(meta["schema_version"])
            self.dim = int(meta["dim"])
            self.embedder = meta["embedder"]
            self.config: dict[str, Any] = json.loads(meta["config"])
        except (KeyError, ValueError) as exc:
            raise StoreError(f"{path / DB_NAME}: meta table is incomplete or damaged ({exc})") from None
        if self.schema_version not in READABLE_VERSIONS:
            raise StoreError(
                f"{path / DB_NAME}: schema_version is {self.schema_version}, this xmemory_gpu reads {SCHEMA_VERSION}"
            )
        self.quarantined: dict[str, str] = {}  # memory id -> why it did not load (set by load_bank)

    def _order(self) -> str:
        """The column that orders episodes and semantics (schema 1: their ids are their rows)."""
        return "row" if self.schema_version >= 2 else "id"

    def upgrade(self) -> None:
        """Bring a schema-1 store to schema 2 (``row`` columns, filled from the ids) in one transaction."""
        if self.schema_version == SCHEMA_VERSION:
            return
        with self._conn as c:
            for table in ("episodes", "semantics"):
                c.execute(f"ALTER TABLE {table} ADD COLUMN row INTEGER")
                c.execute(f"UPDATE {table} SET row = id")
            c.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(SCHEMA_VERSION),))
        self.schema_version = SCHEMA_VERSION

    # -- opening -------------------------------------------------------------------------------
    @staticmethod
    def _connect(db: Path) -> sqlite3.Connection:
        conn = sqlite3.connect(db, timeout=30, check_same_thread=False)
        conn.execute("PRAGMA foreign_keys = ON")
        conn.execute("PRAGMA secure_delete = ON")  # freed pages are zeroed: deleted text leaves the file
        try:
            with conn:
                conn.executescript(_ADDED)
        except sqlite3.OperationalError:  # a read-only store: the tables are read when present
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
        conn = cls._connect(tmp)
        with conn:
            conn.executescript(_SCHEMA)
            conn.executemany(
                "INSERT INTO meta VALUES (?, ?)",
                [("schema_version", str(SCHEMA_VERSION)), ("dim", str(int(dim))), ("embedder", embedder),
                 ("config", json.dumps(config)), ("created", str(time.time()))],
            )
        conn.close()
        os.replace(tmp, root / DB_NAME)  # the store appears whole
        return cls(root, cls._connect(root / DB_NAME))

    @classmethod
    def open(cls, path: str | Path) -> Store:
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
            raise StoreError(f"{root}: dim: the store holds {store.dim}-dimensional embeddings, the embedder gives {dim}")
        if store.embedder != embedder:
            raise StoreError(f"{root}: embedder: the store was built with {store.embedder!r}, not {embedder!r}")
        return store

    def close(self) -> None:
        self._conn.close()

    # -- queries -------------------------------------------------------------------------------
    def memory_ids(self) -> list[str]:
        return [r[0] for r in self._conn.execute("SELECT memory_id FROM memories ORDER BY position")]

    def has(self, memory_id: str, *, intact: bool = False) -> bool:
        """Whether the memory is stored (and, with ``intact``, its arrays file present and matching)."""
        if self._conn.execute("SELECT 1 FROM memories WHERE memory_id = ?", (memory_id,)).fetchone() is None:
            return False
        return not intact or self.check(memory_id) is None

    def check(self, memory_id: str) -> str | None:
        """None when memory ``memory_id`` loads (records, arrays file, checksum, shapes, ranges);
        otherwise what is wrong, in one line."""
        try:
            self.get(memory_id)
        except (StoreError, KeyError, sqlite3.DatabaseError, ValueError) as exc:
            return str(exc.args[0] if isinstance(exc, KeyError) and exc.args else exc)
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
        return json.loads(row[0])

    # -- writing -------------------------------------------------------------------------------
    def put(self, memory: Memory, *, replace: bool = False) -> None:
        """Commit one memory atomically (records and arrays together)."""
        self.commit([memory], replace=replace)

    def _write_arrays(self, memory: Memory) -> tuple[str, str]:
        """The memory's arrays in a new content-addressed file (temp, fsync, rename); (name, sha256)."""
        if memory.dim != self.dim:
            raise StoreError(f"{self.path}: memory {memory.memory_id}: dim {memory.dim} != store dim {self.dim}")
        arrays = memory.arrays()
        for name, (dtype, ndim) in ARRAY_FIELDS.items():
            a = arrays[name]
            if a.dtype != dtype or a.ndim != ndim:
                raise StoreError(f"memory {memory.memory_id}: field {name}: expected {np.dtype(dtype)} with {ndim} dims, got {a.dtype} {a.shape}")
        key = hashlib.sha1(memory.memory_id.encode()).hexdigest()[:16]
        tmp = self.path / "arrays" / f".{key}.{os.getpid()}.tmp"
        try:
            return self._write_file(tmp, key, arrays)
        except OSError as exc:
            raise StoreError(f"{self.path}: cannot write the arrays of memory {memory.memory_id!r}: "
                             f"{exc.strerror or exc} (nothing of this commit was stored)") from None

    def _write_file(self, tmp: Path, key: str, arrays: dict[str, np.ndarray]) -> tuple[str, str]:
        try:
            with open(tmp, "wb") as fh:
                np.savez(fh, **arrays)
                fh.flush()
                os.fsync(fh.fileno())
            digest = _sha256(tmp)
            name = f"{key}-{digest[:12]}.npz"
            os.replace(tmp, self.path / "arrays" / name)
        except BaseException:
            tmp.unlink(missing_ok=True)  # a full disk or an interrupt leaves no orphan
            raise
        return name, digest

    def commit(self, memories: list[Memory], *, replace: bool = False, delete: list[str] = (),
               log: list[tuple[str, str, list[str]]] = (), redact: dict[str, set[str]] | None = None) -> None:
        """One atomic commit: ``memories`` written (new, or replacing the stored ones when
        ``replace``), ``delete`` removed with their operations log, ``redact`` (memory id -> unit
        ids) removed from the earlier entries of the log, ``log`` entries (memory id, operation,
        unit ids) appended to it. Arrays go to new files first; the records, the files' names and
        checksums, and the log change in one SQLite transaction; replaced files are removed after
        it. A crash at any point leaves the store as before or as after."""
        c = self._conn
        self.upgrade()
        olds = {}
        for mem in memories:
            row = c.execute("SELECT arrays_file, position FROM memories WHERE memory_id = ?", (mem.memory_id,)).fetchone()
            if row is not None and not replace:
                raise StoreError(f"{self.path}: memory {mem.memory_id!r} is already stored (pass replace=True)")
            olds[mem.memory_id] = row
        for mid in delete:
            row = c.execute("SELECT arrays_file, position FROM memories WHERE memory_id = ?", (mid,)).fetchone()
            if row is None:
                raise KeyError(f"{self.path}: no memory {mid!r}")
            olds[mid] = row
        written = []
        try:
            for mem in memories:
                written.append(self._write_arrays(mem))
            with c:
                pos = c.execute("SELECT COALESCE(MAX(position), -1) + 1 FROM memories").fetchone()[0]
                for mid in delete:
                    c.execute("DELETE FROM memories WHERE memory_id = ?", (mid,))
                    c.execute("DELETE FROM oplog WHERE memory_id = ?", (mid,))
                for mid, gone in (redact or {}).items():
                    self._redact(mid, set(gone))
                for mem, (name, digest) in zip(memories, written):
                    old = olds[mem.memory_id]
                    if old is not None:
                        c.execute("DELETE FROM memories WHERE memory_id = ?", (mem.memory_id,))
                    self._insert(mem, old[1] if old is not None else pos, name, digest)
                    pos += old is None
                c.executemany("INSERT INTO oplog (memory_id, op, ids, time) VALUES (?, ?, ?, ?)",
                              [(mid, op, json.dumps(ids), time.time()) for mid, op, ids in log])
        except BaseException as exc:
            for name, _ in written:  # the commit did not happen: its files go
                (self.path / "arrays" / name).unlink(missing_ok=True)
            if isinstance(exc, sqlite3.Error):
                raise StoreError(f"{self.path / DB_NAME}: the commit failed and was rolled back: {exc}") from None
            raise
        new_names = {name for name, _ in written}
        for old in olds.values():
            if old is not None and old[0] not in new_names:
                (self.path / "arrays" / old[0]).unlink(missing_ok=True)

    def _redact(self, memory_id: str, gone: set[str]) -> None:
        """Remove ``gone`` from the unit ids of the memory's log entries (a deleted id leaves the log)."""
        c = self._conn
        rows = c.execute("SELECT seq, ids FROM oplog WHERE memory_id = ?", (memory_id,)).fetchall()
        for seq, ids in rows:
            old = json.loads(ids)
            new = [i for i in old if i not in gone]
            if new != old:
                c.execute("UPDATE oplog SET ids = ? WHERE seq = ?", (json.dumps(new), seq))

    def _insert(self, memory: Memory, pos: int, name: str, digest: str) -> None:
        c, mid = self._conn, memory.memory_id
        c.execute("INSERT INTO memories VALUES (?, ?, ?, ?, ?, ?)", (mid, pos, name, digest, json.dumps(memory.stats), time.time()))
        c.executemany("INSERT INTO messages VALUES (?, ?, ?, ?, ?, ?, ?)",
                      [(mid, i, m.id, m.speaker, m.text, m.session, m.timestamp) for i, m in enumerate(memory.messages)])
        c.executemany("INSERT INTO episodes (memory_id, id, title, text, message_ids, start, end, row) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                      [(mid, e.id, e.title, e.text, json.dumps(e.message_ids), e.start, e.end, r)
                       for r, e in enumerate(memory.episodes)])
        c.executemany("INSERT INTO semantics (memory_id, id, text, episode_ids, message_ids, timestamp, row) VALUES (?, ?, ?, ?, ?, ?, ?)",
                      [(mid, s.id, s.text, json.dumps(s.episode_ids), json.dumps(s.message_ids), s.timestamp, r)
                       for r, s in enumerate(memory.semantics)])
        c.executemany("INSERT INTO themes VALUES (?, ?, ?, ?)", [(mid, r, t.id, t.summary) for r, t in enumerate(memory.themes)])
        c.executemany("INSERT INTO lineage VALUES (?, ?, ?)", [(mid, t.id, p) for t in memory.themes for p in t.parents])

    def history(self, memory_id: str) -> list[dict[str, Any]]:
        """The operations log of one memory, oldest first: operation, unit ids, time (POSIX s)."""
        return [{"op": op, "ids": _json(ids, f"{self.path}: memory {memory_id}", "oplog", "ids"), "time": t}
                for op, ids, t in self._conn.execute("SELECT op, ids, time FROM oplog WHERE memory_id = ? ORDER BY seq",
                                                     (memory_id,))]

    def vacuum(self) -> None:
        """Rewrite the database file so freed pages (deleted text) leave the disk."""
        self._conn.execute("VACUUM")

    def collect_garbage(self) -> list[str]:
        """Remove array files no record names (left by a crash between writing and committing)."""
        named = {r[0] for r in self._conn.execute("SELECT arrays_file FROM memories")}
        gone = []
        for f in (self.path / "arrays").iterdir():
            if f.name not in named and (f.suffix in (".npz", ".tmp")):
                f.unlink(missing_ok=True)
                gone.append(f.name)
        return gone

    def put_slice(self, sl: MemorySlice, *, replace: bool = False) -> None:
        """Commit one memory of a bank (its local columns) atomically."""
        self.put(memory_from_slice(sl), replace=replace)

    def delete(self, memory_id: str) -> None:
        self.commit([], delete=[memory_id])

    # -- reading -------------------------------------------------------------------------------
    def get(self, memory_id: str) -> Memory:
        c = self._conn
        row = c.execute("SELECT arrays_file, sha256, stats FROM memories WHERE memory_id = ?", (memory_id,)).fetchone()
        if row is None:
            raise KeyError(f"{self.path}: no memory {memory_id!r}")
        fname, digest, stats = row
        where = f"{self.path}: memory {memory_id}"
        apath = self._arrays_path(fname, where)
        if not apath.exists():
            raise StoreError(f"{where}: arrays file {apath} is missing")
        if _sha256(apath) != digest:
            raise StoreError(f"{where}: arrays file {apath} does not match its checksum (damaged)")
        try:
            with np.load(apath, allow_pickle=False) as npz:
                arrays = {k: npz[k] for k in npz.files}
        except (ValueError, OSError, zipfile.BadZipFile, EOFError) as exc:
            raise StoreError(f"{where}: cannot read {apath}: {exc}") from None
        order = self._order()
        messages = [Message(i, sp, t, s, _time(ts)) for i, sp, t, s, ts in c.execute(
            "SELECT id, speaker, text, session, timestamp FROM messages WHERE memory_id = ? ORDER BY pos", (memory_id,))]
        episodes = [Episode(i, t, x, _json(m, where, "episodes", "message_ids"), _time(s), _time(e)) for i, t, x, m, s, e in c.execute(
            f"SELECT id, title, text, message_ids, start, end FROM episodes WHERE memory_id = ? ORDER BY {order}", (memory_id,))]
        semantics = [SemanticNode(i, t, _json(e, where, "semantics", "episode_ids"), _json(m, where, "semantics", "message_ids"),
                                  _time(ts)) for i, t, e, m, ts in c.execute(
            f"SELECT id, text, episode_ids, message_ids, timestamp FROM semantics WHERE memory_id = ? ORDER BY {order}",
            (memory_id,))]
        parents: dict[int, list[int]] = {}
        for tid, pid in c.execute("SELECT theme_id, parent_id FROM lineage WHERE memory_id = ? ORDER BY rowid", (memory_id,)):
            parents.setdefault(tid, []).append(pid)
        themes = [Theme(i, s, parents.get(i, [])) for i, s in c.execute(
            "SELECT id, summary FROM themes WHERE memory_id = ? ORDER BY row", (memory_id,))]
        counts = {"msg_x": len(messages), "epi_x": len(episodes), "sem_x": len(semantics), "theme_of": len(semantics),
                  "sem_knn_idx": len(semantics), "sem_knn_sim": len(semantics), "theme_knn_idx": len(themes), "theme_knn_sim": len(themes)}
        for name, (dtype, ndim) in ARRAY_FIELDS.items():
            if name not in arrays:
                raise StoreError(f"{where}: field {name} is missing from {apath}")
            a = arrays[name]
            if a.dtype != dtype or a.ndim != ndim or a.shape[0] != counts[name]:
                raise StoreError(f"{where}: field {name}: expected {np.dtype(dtype)} [{counts[name]}, ...] with {ndim} dims, found {a.dtype} {a.shape}")
            if name.endswith("_x") and a.shape[1] != self.dim:
                raise StoreError(f"{where}: field {name}: dimension {a.shape[1]} != store dim {self.dim}")
        _check_arrays(where, arrays, len(semantics), len(themes))
        return Memory(memory_id=memory_id, messages=messages, episodes=episodes, semantics=semantics, themes=themes,
                      stats=_json(stats, where, "memories", "stats"), **arrays)

    def _arrays_path(self, fname: str, where: str) -> Path:
        """The arrays file a record names, confined to the store's ``arrays/`` folder (a link is
        never followed: it could point outside the store)."""
        folder = self.path / "arrays"
        if not isinstance(fname, str) or not fname or "/" in fname or "\\" in fname or fname.startswith(".") or "\x00" in fname:
            raise StoreError(f"{where}: arrays_file {fname!r} is not a plain file name inside {folder}")
        path = folder / fname
        if path.is_symlink() or folder.is_symlink():
            raise StoreError(f"{where}: arrays file {path} is a symbolic link (refused: it could point outside the store)")
        return path

    def counts(self, memory_id: str) -> dict[str, int]:
        """Rows per level of one memory, from the records (no arrays read)."""
        c = self._conn
        q = "SELECT COUNT(*) FROM {} WHERE memory_id = ?"
        return {lv: int(c.execute(q.format(t), (memory_id,)).fetchone()[0])
                for lv, t in zip(LEVELS, ("messages", "episodes", "semantics", "themes"))}

    def load_bank(self, memory_ids: list[str] | None = None, *, quarantine: bool = False) -> Bank:
        """The bank of ``memory_ids`` (default: all), read memory by memory straight into
        preallocated columns, so each embedding matrix is held once. A memory that fails to load
        (damaged arrays, records or checksum) raises ``StoreError``; with ``quarantine`` it is left
        out and recorded in ``self.quarantined`` (memory id -> reason), so the others still load."""
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
                    sl = slice_from_memory(self.get(m))
                except (StoreError, KeyError, ValueError, sqlite3.DatabaseError) as exc:
                    raise _Damaged(m, str(exc.args[0] if isinstance(exc, KeyError) and exc.args else exc)) from None
                yield sl

        return Bank.from_slices(slices(), self.dim, lengths=lengths, memory_ids=ids)
