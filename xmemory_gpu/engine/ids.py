"""Stable ids of derived units: ``episode:N``, ``semantic:N``, ``theme:N``.

Construction numbers episodes and statements by position; the engine renumbers every memory it
writes so that a unit that survives keeps its id and a new unit gets a number never used before in
that memory (per-memory counters in the memory's ``stats["ids"]``, the theme counter in its engine
state):

- an episode keeps the id of the stored episode whose first surviving message it starts with;
- a statement keeps the id of the stored statement with the same text (``statement_hash``);
- a theme keeps its id: growth and forgetting (``construct.forget``) carry theme ids themselves.

A store written before stable ids had ids equal to positions, so its ids resolve unchanged and its
counters start after its largest id.
"""

from __future__ import annotations

import re

import numpy as np

from ..construct.incremental import statement_hash
from ..memory.bank import MemorySlice, ragged_blocks
from ..memory.engine_state import EngineState
from ..memory.hierarchy import Memory, slice_from_memory

UNIT_KINDS = ("episode", "semantic", "theme")
_UNIT_ID = re.compile(
    r"(episode|semantic|theme):([0-9]+)"
)  # ASCII digits only: 'semantic:١' is not semantic:1


def parse_unit_id(s: str) -> tuple[str, int] | None:
    """(kind, number) of a derived unit id, or None when ``s`` is not one."""
    m = _UNIT_ID.fullmatch(s)
    return (m[1], int(m[2])) if m else None


def counters(mem: MemorySlice | Memory) -> dict[str, int]:
    """The next unused id per kind of ``mem`` (after its largest id for a memory stored without counters)."""
    if isinstance(mem, Memory):
        mem = slice_from_memory(mem)
    got = mem.stats.get("ids") or {}
    largest = {
        kind: int(mem.cols[lv]["id"].max(initial=-1))
        for kind, lv in (("episode", "epi"), ("semantic", "sem"), ("theme", "theme"))
    }
    out = {k: max(int(got.get(k, 0)), largest[k] + 1) for k in ("episode", "semantic")}
    out["theme"] = max(mem.engine.next_theme_id if mem.engine is not None else 0, largest["theme"] + 1)
    return out


def _valid(row: np.ndarray) -> list[int]:
    return [int(v) for v in row if v >= 0]


def _in_id_order(epis: np.ndarray, epi_id: np.ndarray) -> np.ndarray:
    """``epis`` [n, w] (each row's episode rows, valid entries first, ``-1`` padded) with each row's
    entries sorted by their episode's id (stable; a copy only where a row changes). Rows already in
    order stay: most of a grown memory's. Rows are read to about their length (``ragged_blocks``),
    not the column's width, which one statement with many sources sets for all."""
    if epis.shape[1] < 2 or not epis.shape[0]:
        return epis
    out = epis
    for here, width in ragged_blocks(epis, np.flatnonzero(epis[:, 1] >= 0)):  # one entry: in order
        part = epis[here, :width]
        key = np.where(part >= 0, epi_id[np.maximum(part, 0)], np.iinfo(np.int64).max)
        bad = np.flatnonzero((key[:, 1:] < key[:, :-1]).any(axis=1))
        if bad.size:
            if out is epis:
                out = epis.copy()
            order = np.argsort(key[bad], axis=1, kind="stable")
            out[here[bad], :width] = np.take_along_axis(part[bad], order, axis=1)
    return out


def ids_by_text(old_texts: list[str], old_ids: np.ndarray, new_texts: list[str]) -> np.ndarray:
    """int64 [len(new_texts)]: for each new statement, in order, the id of the first stored statement
    with its text (``statement_hash``) that no earlier new statement took, in the stored order; -1
    where none is left. The j-th new statement of a text takes the j-th stored one's id."""
    codes: dict[str, int] = {}
    old_c = np.fromiter(
        (codes.setdefault(statement_hash(t), len(codes)) for t in old_texts), np.int64, len(old_texts)
    )
    n_old_codes = len(codes)
    new_c = np.fromiter(
        (codes.setdefault(statement_hash(t), len(codes)) for t in new_texts), np.int64, len(new_texts)
    )
    out = np.full(len(new_texts), -1, np.int64)
    known = np.flatnonzero(new_c < n_old_codes)  # a text no stored statement has takes no id
    if not len(known) or not len(old_texts):
        return out

    def ranks(c: np.ndarray) -> np.ndarray:  # each entry's occurrence number among the entries of its code
        order = np.argsort(c, kind="stable")
        starts = np.searchsorted(c[order], c[order], side="left")
        r = np.empty(len(c), np.int64)
        r[order] = np.arange(len(c)) - starts
        return r

    width = max(len(old_texts), len(new_texts)) + 1
    old_key = old_c * width + ranks(old_c)
    new_key = new_c[known] * width + ranks(new_c[known])
    order = np.argsort(old_key)
    at = np.minimum(np.searchsorted(old_key[order], new_key), len(order) - 1)
    hit = old_key[order][at] == new_key
    out[known[hit]] = np.asarray(old_ids, np.int64)[order[at[hit]]]
    return out


def assign(old: MemorySlice | Memory, new: MemorySlice, dropped: set[str]) -> None:
    """Give ``new`` (``old`` grown, or without the ``dropped`` messages) stable ids, in place: its
    ``id`` columns, its statements' episode rows in the order of their ids, and its counters.
    ``old`` is read from its columns (a ``Memory`` is taken as its slice)."""
    if isinstance(old, Memory):
        old = slice_from_memory(old)
    nxt = counters(old)
    first_of: dict[str, int] = {}  # the first surviving message of each stored episode -> its id
    old_msg = old.cols["msg"]["id"]
    if dropped:
        for eid, row in zip(old.cols["epi"]["id"].tolist(), old.cols["epi"]["msgs"]):
            alive = [m for m in old_msg[row[row >= 0]].tolist() if m not in dropped]
            if alive:
                first_of.setdefault(alive[0], eid)
    else:  # each episode's first message (valid entries come first), the earliest episode kept on a tie
        e_first = old.cols["epi"]["msgs"][:, 0] if old.n("epi") else np.zeros(0, np.int64)
        held = np.flatnonzero(e_first >= 0)[::-1]
        first_of = dict(zip(old_msg[e_first[held]].tolist(), old.cols["epi"]["id"][held].tolist()))
    used: set[int] = set()
    msg_id, epi, sem = new.cols["msg"]["id"], new.cols["epi"], new.cols["sem"]
    for r in range(new.n("epi")):
        first = int(epi["msgs"][r, 0])
        eid = first_of.get(msg_id[first]) if first >= 0 else None
        if eid is None or eid in used:
            eid, nxt["episode"] = nxt["episode"], nxt["episode"] + 1
        used.add(eid)
        epi["id"][r] = eid
    old_text, new_text = old.cols["sem"]["text"], sem["text"]
    n_old = len(old_text)
    if len(new_text) >= n_old and np.array_equal(new_text[:n_old], old_text):
        # a growth: the stored statements are the first rows, unchanged, so each keeps its id
        # (what matching by text gives them) and every later row is new
        sem["id"][:n_old] = old.cols["sem"]["id"]
        n_new = len(new_text) - n_old
        sem["id"][n_old:] = np.arange(nxt["semantic"], nxt["semantic"] + n_new)
        nxt["semantic"] += n_new
    else:
        got = ids_by_text(old_text.tolist(), np.asarray(old.cols["sem"]["id"], np.int64), new_text.tolist())
        fresh = np.flatnonzero(got < 0)
        got[fresh] = np.arange(nxt["semantic"], nxt["semantic"] + len(fresh))
        nxt["semantic"] += len(fresh)
        sem["id"][:] = got
    sem["epis"] = _in_id_order(sem["epis"], epi["id"])  # each statement's episodes by their ids
    new.stats["ids"] = {"episode": nxt["episode"], "semantic": nxt["semantic"]}
    if new.engine is None:  # a memory the engine grows for the first time
        new.engine = EngineState.closed(new.n("msg"))
    new.engine.next_theme_id = max(nxt["theme"], int(new.cols["theme"]["id"].max(initial=-1)) + 1)
