"""Rewrite a store in the layout of schema 2 (the release before one-file-per-memory), for tests of
reading and upgrading old stores. The tables and the arrays file are what schema 2's writer wrote
(its ``_SCHEMA``, ``_insert`` and ``np.savez`` of eight arrays, verbatim)."""

from __future__ import annotations

import hashlib
import json
import sqlite3
import time
from pathlib import Path

import numpy as np

from xmemory_gpu.memory.hierarchy import ARRAY_FIELDS
from xmemory_gpu.memory.store import Store

SCHEMA_2 = """
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
CREATE TABLE IF NOT EXISTS oplog (seq INTEGER PRIMARY KEY AUTOINCREMENT, memory_id TEXT NOT NULL, op TEXT NOT NULL,
  ids TEXT NOT NULL, time REAL NOT NULL);
CREATE INDEX IF NOT EXISTS messages_by_id ON messages (id);
"""


def _stats(mem) -> dict:
    """The catalogue's stats of ``mem`` as the release wrote them: the engine's state under ``engine``."""
    return mem.stats if mem.engine is None else {**mem.stats, "engine": mem.engine.as_dict()}


def to_schema_2(root: Path) -> None:
    """Rewrite the store at ``root`` (any readable schema) as schema 2 wrote it; the operations log is kept."""
    st = Store.open(root)
    mems = [st.get(m) for m in st.memory_ids()]
    meta = {
        "schema_version": "2",
        "dim": str(st.dim),
        "embedder": st.embedder,
        "config": json.dumps(st.config),
        "created": str(time.time()),
    }
    oplog = st._conn.execute("SELECT memory_id, op, ids, time FROM oplog ORDER BY seq").fetchall()
    st.close()
    for f in (root / "arrays").iterdir():
        f.unlink()
    (root / "memory.sqlite").unlink()
    c = sqlite3.connect(root / "memory.sqlite")
    with c:
        c.executescript(SCHEMA_2)
        c.executemany("INSERT INTO meta VALUES (?, ?)", list(meta.items()))
        c.executemany("INSERT INTO oplog (memory_id, op, ids, time) VALUES (?, ?, ?, ?)", oplog)
        for pos, mem in enumerate(mems):
            key = hashlib.sha1(mem.memory_id.encode()).hexdigest()[:16]
            tmp = root / "arrays" / f"{key}.tmp"
            with open(tmp, "wb") as fh:
                np.savez(fh, **{name: getattr(mem, name) for name in ARRAY_FIELDS})
            digest = hashlib.sha256(tmp.read_bytes()).hexdigest()
            name = f"{key}-{digest[:12]}.npz"
            tmp.rename(root / "arrays" / name)
            mid = mem.memory_id
            c.execute(
                "INSERT INTO memories VALUES (?, ?, ?, ?, ?, ?)",
                (mid, pos, name, digest, json.dumps(_stats(mem)), time.time()),
            )
            c.executemany(
                "INSERT INTO messages VALUES (?, ?, ?, ?, ?, ?, ?)",
                [
                    (mid, i, m.id, m.speaker, m.text, m.session, m.timestamp)
                    for i, m in enumerate(mem.messages)
                ],
            )
            c.executemany(
                "INSERT INTO episodes (memory_id, id, title, text, message_ids, start, end, row) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    (mid, e.id, e.title, e.text, json.dumps(e.message_ids), e.start, e.end, r)
                    for r, e in enumerate(mem.episodes)
                ],
            )
            c.executemany(
                "INSERT INTO semantics (memory_id, id, text, episode_ids, message_ids, timestamp, row) VALUES (?, ?, ?, ?, ?, ?, ?)",
                [
                    (mid, s.id, s.text, json.dumps(s.episode_ids), json.dumps(s.message_ids), s.timestamp, r)
                    for r, s in enumerate(mem.semantics)
                ],
            )
            c.executemany(
                "INSERT INTO themes VALUES (?, ?, ?, ?)",
                [(mid, r, t.id, t.summary) for r, t in enumerate(mem.themes)],
            )
            c.executemany(
                "INSERT INTO lineage VALUES (?, ?, ?)",
                [(mid, t.id, p) for t in mem.themes for p in t.parents],
            )
    c.close()
