"""Reading stores of schema 1 and 2 (text in SQLite tables, embeddings in an arrays-only ``.npz``).

A store of this release (schema 3) keeps every column of a memory in one file; an older store is
read through here as it is (a read-only open never changes it) and upgraded by the first writable
open or commit (``Store.upgrade``). Schema 1's episode and semantic ids are their rows.
"""

from __future__ import annotations

import json
import math
import sqlite3
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

from .bank import LEVELS
from .codec import MAX_TIME, MIN_TIME
from .hierarchy import ARRAY_FIELDS, Memory
from .records import Episode, Message, SemanticNode, Theme

TABLES = ("messages", "episodes", "semantics", "themes", "lineage")


class LegacyError(ValueError):
    """One memory of an old store cannot be read; names memory, table or field."""


def _time(v: Any) -> float | None:
    """A stored timestamp, or None when it is not one datetime can represent."""
    if v is None or isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    return float(v) if math.isfinite(v) and MIN_TIME <= v < MAX_TIME else None


def _json(v: Any, where: str, table: str, field: str) -> Any:
    try:
        return json.loads(v)
    except (TypeError, ValueError) as exc:
        raise LegacyError(f"{where}: table {table}, field {field}: not valid JSON ({exc})") from None


def counts(conn: sqlite3.Connection, memory_id: str) -> dict[str, int]:
    """Rows per level of one memory, from its records (no passages: those came with schema 4)."""
    q = "SELECT COUNT(*) FROM {} WHERE memory_id = ?"
    levels = ("msg", "epi", "sem", "theme")  # the tables of the four levels, in TABLES' order
    out = {lv: int(conn.execute(q.format(t), (memory_id,)).fetchone()[0]) for lv, t in zip(levels, TABLES)}
    return {lv: out.get(lv, 0) for lv in LEVELS}


def read_memory(
    conn: sqlite3.Connection, memory_id: str, arrays_path: Path, *, dim: int, schema_version: int, where: str
) -> Memory:
    """Records plus the arrays file (already checksum-verified by the caller) of one memory."""
    try:
        with np.load(arrays_path, allow_pickle=False) as npz:
            arrays = {k: npz[k] for k in npz.files}
    except (ValueError, OSError, zipfile.BadZipFile, EOFError) as exc:
        raise LegacyError(f"{where}: cannot read {arrays_path}: {exc}") from None
    order = "row" if schema_version >= 2 else "id"
    stats = conn.execute("SELECT stats FROM memories WHERE memory_id = ?", (memory_id,)).fetchone()[0]
    messages = [
        Message(i, sp, t, s, _time(ts))
        for i, sp, t, s, ts in conn.execute(
            "SELECT id, speaker, text, session, timestamp FROM messages WHERE memory_id = ? ORDER BY pos",
            (memory_id,),
        )
    ]
    episodes = [
        Episode(i, t, x, _json(m, where, "episodes", "message_ids"), _time(s), _time(e))
        for i, t, x, m, s, e in conn.execute(
            f"SELECT id, title, text, message_ids, start, end FROM episodes WHERE memory_id = ? ORDER BY {order}",
            (memory_id,),
        )
    ]
    semantics = [
        SemanticNode(
            i,
            t,
            _json(e, where, "semantics", "episode_ids"),
            _json(m, where, "semantics", "message_ids"),
            _time(ts),
        )
        for i, t, e, m, ts in conn.execute(
            f"SELECT id, text, episode_ids, message_ids, timestamp FROM semantics WHERE memory_id = ? ORDER BY {order}",
            (memory_id,),
        )
    ]
    parents: dict[int, list[int]] = {}
    for tid, pid in conn.execute(
        "SELECT theme_id, parent_id FROM lineage WHERE memory_id = ? ORDER BY rowid", (memory_id,)
    ):
        parents.setdefault(tid, []).append(pid)
    themes = [
        Theme(i, s, parents.get(i, []))
        for i, s in conn.execute(
            "SELECT id, summary FROM themes WHERE memory_id = ? ORDER BY row", (memory_id,)
        )
    ]
    rows = {
        "msg_x": len(messages),
        "epi_x": len(episodes),
        "sem_x": len(semantics),
        "theme_of": len(semantics),
        "sem_knn_idx": len(semantics),
        "sem_knn_sim": len(semantics),
        "theme_knn_idx": len(themes),
        "theme_knn_sim": len(themes),
    }
    for name, (dtype, ndim) in ARRAY_FIELDS.items():
        if name not in arrays:
            raise LegacyError(f"{where}: field {name} is missing from {arrays_path}")
        a = arrays[name]
        if a.dtype != dtype or a.ndim != ndim or a.shape[0] != rows[name]:
            raise LegacyError(
                f"{where}: field {name}: expected {np.dtype(dtype)} [{rows[name]}, ...] with {ndim} dims, "
                f"found {a.dtype} {a.shape}"
            )
        if name.endswith("_x") and a.shape[1] != dim:
            raise LegacyError(f"{where}: field {name}: dimension {a.shape[1]} != store dim {dim}")
    return Memory(
        memory_id=memory_id,
        messages=messages,
        episodes=episodes,
        semantics=semantics,
        themes=themes,
        stats=_json(stats, where, "memories", "stats"),
        **{k: arrays[k] for k in ARRAY_FIELDS},
    )
