"""One memory as records plus local arrays: a read-only view of a bank slice for reading and
tests (``view(bank, b)``, a store's ``get``), and :func:`slice_of_records`, the one conversion
from the records construction works on to the columns it emits (a :class:`MemorySlice`).

Row i of ``sem_x`` is ``semantics[i]``; ``theme_of[i]`` is a local theme row (index into
``themes``); kNN graphs hold local row ids with ``-1`` for "no edge".
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .bank import Bank, MemorySlice
from .codec import theme_columns
from .engine_state import EngineState
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
    psg_x: np.ndarray | None = None  # [n_psg, d] float32: the passages of long messages, in message order
    psg_msg: np.ndarray | None = None  # [n_psg] int32: each passage's message row
    engine: EngineState | None = None  # the live engine's state (None: built in bulk)

    def __post_init__(self) -> None:
        if self.psg_x is None:
            self.psg_x = np.zeros((0, self.dim), np.float32)
        if self.psg_msg is None:
            self.psg_msg = np.zeros(0, np.int32)

    @property
    def dim(self) -> int:
        return int(self.sem_x.shape[1]) if self.sem_x.ndim == 2 else int(self.msg_x.shape[1])

    def arrays(self) -> dict[str, np.ndarray]:
        """The array fields by name."""
        return {name: getattr(self, name) for name in (*ARRAY_FIELDS, "psg_x", "psg_msg")}


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
}  # what stores of schema 1 and 2 hold (``legacy``); a memory's passages came later


def _ts(v: float | None) -> float:
    return np.nan if v is None else float(v)


def time_or_none(v: float) -> float | None:
    """A time column's value as records hold it: seconds, or None for NaN (unknown)."""
    return None if math.isnan(v) else float(v)


def _ragged(lists: list[list[int]], dtype) -> np.ndarray:
    """Lists of ints -> [n, w] padded with -1 (w >= 1)."""
    w = max([len(x) for x in lists] + [1])
    out = np.full((len(lists), w), -1, dtype=dtype)
    for i, x in enumerate(lists):
        out[i, : len(x)] = x
    return out


def _obj(items: list[str]) -> np.ndarray:
    out = np.empty(len(items), dtype=object)
    out[:] = items
    return out


def _graph(a: np.ndarray, n: int, fill: float | int, dtype) -> np.ndarray:
    """A kNN graph as [n, k] (k >= 1), whatever shape an empty one was given in."""
    a = np.asarray(a, dtype)
    if a.ndim == 2 and a.shape[0] == n and a.shape[1] >= 1:
        return a
    if a.size == 0:
        return np.full((n, 1), fill, dtype)
    return a.reshape(n, -1)


def slice_from_memory(mem: Memory) -> MemorySlice:
    """Records and arrays -> local columns (:func:`slice_of_records`)."""
    return slice_of_records(
        mem.memory_id,
        mem.messages,
        mem.episodes,
        mem.semantics,
        mem.themes,
        mem.arrays(),
        dict(mem.stats),
        mem.engine,
    )


def slice_of_records(
    memory_id: str,
    messages: list[Message],
    episodes: list[Episode],
    semantics: list[SemanticNode],
    themes: list[Theme],
    arrays: dict[str, np.ndarray],
    stats: dict[str, Any],
    engine: EngineState | None = None,
) -> MemorySlice:
    """Records plus their arrays (``Memory.arrays()``'s names; ``psg_*`` optional) -> local
    columns. Ids that provenance names must exist in the memory."""
    where = f"memory {memory_id}"
    msg_row = {m.id: i for i, m in enumerate(messages)}
    epi_row = {e.id: i for i, e in enumerate(episodes)}
    try:
        epi_msgs = [[msg_row[i] for i in e.message_ids] for e in episodes]
        sem_msgs = [[msg_row[i] for i in s.message_ids] for s in semantics]
        sem_epis = [[epi_row[i] for i in s.episode_ids] for s in semantics]
    except KeyError as exc:
        raise ValueError(f"{where}: provenance names {exc.args[0]!r}, which is not in the memory") from None
    n_sem, n_th = len(semantics), len(themes)
    sem_x = np.asarray(arrays["sem_x"], np.float32)
    msg_x = np.asarray(arrays["msg_x"], np.float32)
    d = int(sem_x.shape[1]) if sem_x.ndim == 2 else int(msg_x.shape[1])
    psg_x = arrays.get("psg_x")
    psg_x = np.zeros((0, d), np.float32) if psg_x is None else np.asarray(psg_x, np.float32).reshape(-1, d)
    psg_msg = np.asarray(arrays.get("psg_msg", np.zeros(0, np.int32)), np.int32).reshape(-1)
    first_psg = np.full(len(messages), -1, np.int32)
    if psg_msg.size:
        if (np.diff(psg_msg) < 0).any() or psg_msg.min() < 0 or psg_msg.max() >= len(messages):
            raise ValueError(f"{where}: psg_msg must name message rows in order")
        first = np.concatenate([[True], psg_msg[1:] != psg_msg[:-1]])
        first_psg[psg_msg[first]] = np.flatnonzero(first)
    theme_of = np.asarray(arrays["theme_of"], np.int32).reshape(-1)
    sem_x = sem_x.reshape(-1, d)
    theme = theme_columns(sem_x, theme_of, n_th)
    cols = {
        "msg": {
            "x": msg_x.reshape(-1, d),
            "id": _obj([m.id for m in messages]),
            "speaker": _obj([m.speaker for m in messages]),
            "text": _obj([m.text for m in messages]),
            "session": np.array([m.session for m in messages], np.int64),
            "time": np.array([_ts(m.timestamp) for m in messages], np.float64),
            "psg": first_psg,
        },
        "epi": {
            "x": np.asarray(arrays["epi_x"], np.float32).reshape(-1, d),
            "id": np.array([e.id for e in episodes], np.int64),
            "title": _obj([e.title for e in episodes]),
            "text": _obj([e.text for e in episodes]),
            "start": np.array([_ts(e.start) for e in episodes], np.float64),
            "end": np.array([_ts(e.end) for e in episodes], np.float64),
            "msgs": _ragged(epi_msgs, np.int32),
        },
        "sem": {
            "x": sem_x,
            "id": np.array([s.id for s in semantics], np.int64),
            "text": _obj([s.text for s in semantics]),
            "time": np.array([_ts(s.timestamp) for s in semantics], np.float64),
            "epis": _ragged(sem_epis, np.int32),
            "msgs": _ragged(sem_msgs, np.int32),
            "theme": theme_of,
            "knn_idx": _graph(arrays["sem_knn_idx"], n_sem, -1, np.int32),
            "knn_sim": _graph(arrays["sem_knn_sim"], n_sem, -np.inf, np.float32),
        },
        "theme": {
            "id": np.array([t.id for t in themes], np.int64),
            "summary": _obj([t.summary for t in themes]),
            "parents": _ragged([t.parents for t in themes], np.int64),
            "sum": theme["sum"],
            "count": theme["count"],
            "x": theme["x"],
            "knn_idx": _graph(arrays["theme_knn_idx"], n_th, -1, np.int32),
            "knn_sim": _graph(arrays["theme_knn_sim"], n_th, -np.inf, np.float32),
        },
        "psg": {"x": psg_x, "msg": psg_msg},
    }
    return MemorySlice(memory_id, cols, stats, engine)


def messages_at(sl: MemorySlice, rows: Iterable[int]) -> list[Message]:
    """The slice's messages at ``rows`` as records."""
    m = sl.cols["msg"]
    return [
        Message(
            str(m["id"][i]),
            str(m["speaker"][i]),
            str(m["text"][i]),
            int(m["session"][i]),
            time_or_none(m["time"][i]),
        )
        for i in rows
    ]


def memory_from_slice(sl: MemorySlice) -> Memory:
    """Local columns -> records and arrays (a copy; editing it does not change the bank)."""
    m, e, s, t = (sl.cols[lv] for lv in ("msg", "epi", "sem", "theme"))
    ids = list(m["id"])

    def valid(row: np.ndarray) -> list[int]:
        return row[row >= 0].tolist()

    messages = messages_at(sl, range(len(ids)))
    episodes = [
        Episode(
            int(e["id"][i]),
            str(e["title"][i]),
            str(e["text"][i]),
            [ids[r] for r in valid(e["msgs"][i])],
            time_or_none(e["start"][i]),
            time_or_none(e["end"][i]),
        )
        for i in range(e["id"].shape[0])
    ]
    semantics = [
        SemanticNode(
            int(s["id"][i]),
            str(s["text"][i]),
            [int(e["id"][r]) for r in valid(s["epis"][i])],
            [ids[r] for r in valid(s["msgs"][i])],
            time_or_none(s["time"][i]),
        )
        for i in range(s["id"].shape[0])
    ]
    themes = [
        Theme(int(t["id"][i]), str(t["summary"][i]), valid(t["parents"][i])) for i in range(t["id"].shape[0])
    ]
    return Memory(
        sl.memory_id,
        messages,
        episodes,
        semantics,
        themes,
        m["x"],
        e["x"],
        s["x"],
        s["theme"],
        s["knn_idx"],
        s["knn_sim"],
        t["knn_idx"],
        t["knn_sim"],
        dict(sl.stats),
        sl.cols["psg"]["x"],
        sl.cols["psg"]["msg"],
        sl.engine,
    )


def view(bank: Bank, b: int) -> Memory:
    """Memory ``b`` of ``bank`` as records plus local arrays (a copy, for reading)."""
    return memory_from_slice(bank.slice(b))


def bank_of(memories: list[Memory], dim: int | None = None) -> Bank:
    """A bank of built memories (records and arrays)."""
    if not memories and dim is None:
        raise ValueError("bank_of: no memories and no dim given")
    return Bank.from_slices(
        [slice_from_memory(m) for m in memories], dim if dim is not None else memories[0].dim
    )
