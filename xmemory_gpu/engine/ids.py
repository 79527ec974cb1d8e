"""Stable ids of derived units: ``episode:N``, ``semantic:N``, ``theme:N``.

Construction numbers episodes and statements by position; the engine renumbers every memory it
writes so that a unit that survives keeps its id and a new unit gets a number never used before in
that memory (per-memory counters in ``Memory.stats["ids"]``):

- an episode keeps the id of the stored episode whose first surviving message it starts with;
- a statement keeps the id of the stored statement with the same text (``statement_hash``);
- after a re-derivation (a delete), a theme keeps the id of the stored theme it shares the most
  statements with (growth keeps theme ids itself).

A store written before stable ids had ids equal to positions, so its ids resolve unchanged and its
counters start after its largest id.
"""

from __future__ import annotations

import re
from collections import defaultdict, deque

import numpy as np

from ..construct.incremental import statement_hash
from ..memory.hierarchy import Memory

UNIT_KINDS = ("episode", "semantic", "theme")
_UNIT_ID = re.compile(r"(episode|semantic|theme):([0-9]+)")  # ASCII digits only: 'semantic:١' is not semantic:1


def parse_unit_id(s: str) -> tuple[str, int] | None:
    """(kind, number) of a derived unit id, or None when ``s`` is not one."""
    m = _UNIT_ID.fullmatch(s)
    return (m[1], int(m[2])) if m else None


def counters(mem: Memory) -> dict[str, int]:
    """The next unused id per kind of ``mem`` (after its largest id for a memory stored without counters)."""
    got = mem.stats.get("ids") or {}
    eng = mem.stats.get("engine") or {}
    largest = {"episode": max([e.id for e in mem.episodes], default=-1), "semantic": max([s.id for s in mem.semantics], default=-1),
               "theme": max([t.id for t in mem.themes], default=-1)}
    out = {k: max(int(got.get(k, 0)), largest[k] + 1) for k in ("episode", "semantic")}
    out["theme"] = max(int(eng.get("next_theme_id", 0)), largest["theme"] + 1)
    return out


def _members(mem: Memory) -> list[set[int]]:
    return [{mem.semantics[i].id for i in np.flatnonzero(mem.theme_of == r)} for r in range(len(mem.themes))]


def assign(old: Memory, new: Memory, dropped: set[str], *, rederived: bool) -> None:
    """Give ``new`` (``old`` grown, or re-derived without the ``dropped`` messages) stable ids, in place."""
    nxt = counters(old)
    first_of: dict[str, int] = {}
    for e in old.episodes:
        alive = [m for m in e.message_ids if m not in dropped]
        if alive:
            first_of.setdefault(alive[0], e.id)
    used: set[int] = set()
    for e in new.episodes:
        eid = first_of.get(e.message_ids[0]) if e.message_ids else None
        if eid is None or eid in used:
            eid, nxt["episode"] = nxt["episode"], nxt["episode"] + 1
        used.add(eid)
        e.id = eid
    ep_of = {mid: e.id for e in new.episodes for mid in e.message_ids}
    by_text: dict[str, deque[int]] = defaultdict(deque)
    for s in old.semantics:
        by_text[statement_hash(s.text)].append(s.id)
    for s in new.semantics:
        q = by_text.get(statement_hash(s.text))
        if q:
            s.id = q.popleft()
        else:
            s.id, nxt["semantic"] = nxt["semantic"], nxt["semantic"] + 1
        s.episode_ids = sorted({ep_of[m] for m in s.message_ids})
    if rederived:
        _themes(old, new, nxt)
    new.stats["ids"] = {"episode": nxt["episode"], "semantic": nxt["semantic"]}
    new.stats.setdefault("engine", {})["next_theme_id"] = max(nxt["theme"], max([t.id for t in new.themes], default=-1) + 1)


def _themes(old: Memory, new: Memory, nxt: dict[str, int]) -> None:
    """Re-derived themes take the ids of the stored themes they share the most statements with."""
    olds = list(zip([t.id for t in old.themes], _members(old)))
    taken: set[int] = set()
    remap: dict[int, int] = {}
    for t, members in zip(new.themes, _members(new)):
        best, best_n = None, 0
        for tid, om in olds:
            n = len(members & om)
            if tid not in taken and n > best_n:
                best, best_n = tid, n
        if best is None:
            best, nxt["theme"] = nxt["theme"], nxt["theme"] + 1
        taken.add(best)
        remap[t.id] = best
    for t in new.themes:
        t.id = remap[t.id]
        t.parents = [remap[p] for p in t.parents if p in remap]
    lineage = new.stats.get("lineage") or {}
    new.stats["lineage"] = {str(remap[int(k)]): [remap[p] for p in v if p in remap] for k, v in lineage.items()
                            if int(k) in remap}
