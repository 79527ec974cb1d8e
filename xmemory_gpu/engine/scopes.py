"""Which memories a request names: ``scope_keys`` (mem0's rule: a part left out matches any), the
scope index each commit keeps, ``scopes`` (the listing), and locating a unit id in the memories of a
scope (a derived id several of them hold is ambiguous). A ``MemoryEngine`` mixin."""

from __future__ import annotations

from typing import Any

import numpy as np

from . import ids as unit_ids
from . import inputs
from .inputs import in_scope, scope_key, scope_of


class Scopes:
    def scope_keys(
        self, user_id: Any = None, agent_id: Any = None, run_id: Any = None, *, quarantined: bool = False
    ) -> list[str]:
        """The stored memories a read of this scope covers, mem0's way: every part given must equal
        the memory's, a part left out matches any (``user_id`` alone: the user's memories across its
        agents and runs; ``agent_id`` alone: that agent's across users). A memory stored under a plain
        id (a bulk build's ``conv-26``) is the user of that id. The memory of exactly this scope comes
        first; with none stored, the list is that memory alone (a search of it finds nothing). A
        quarantined memory other than that one is left out, and that one refused (``QuarantinedError``);
        ``quarantined=True`` lists them all (``delete_all`` removes them). Looked up in ``_scope_index``."""
        with self._rw.read():
            return self._covered(user_id, agent_id, run_id, quarantined=quarantined)

    def _covered(
        self, user_id: Any = None, agent_id: Any = None, run_id: Any = None, *, quarantined: bool = False
    ) -> list[str]:
        """``scope_keys``' lookup; the caller holds the read lock or the writer."""
        scope = inputs.check_scope(user_id, agent_id, run_id)
        exact = self._exact(user_id, agent_id, run_id)
        usable = (lambda k: k) if quarantined else self._usable
        if None not in scope.values():
            return [usable(exact)]
        index = self._scope_index()
        found = None
        for part, v in scope.items():
            if v is not None:
                keys = index.get((part, v), set())
                found = set(keys) if found is None else found & keys
        hits = sorted(k for k in found or () if k != exact and (quarantined or k not in self.quarantined))
        if exact in self._loaded or exact in self.quarantined or not hits:
            hits.insert(0, usable(exact))
        return hits

    def _scope_index(self) -> dict[tuple[str, str], set[str]]:
        """(scope part, value) -> the keys of the stored memories with that part: built on first use
        (again after a ``refresh``), kept up to date by each commit (``_index_scopes``); the caller
        holds the read lock."""
        index = self.__dict__.get("_scope_idx")
        if index is None:
            index = {}
            for key in self._loaded:
                for part, v in scope_of(key).items():
                    if v is not None:
                        index.setdefault((part, v), set()).add(key)
            self.__dict__["_scope_idx"] = index
        return index

    def _index_scopes(self, added: list[str], dropped: list[str]) -> None:
        """The scopes' index kept up to date by a commit that adds or drops memories (the caller holds
        the write lock); none built yet: nothing to do."""
        index = self.__dict__.get("_scope_idx")
        if index is None:
            return
        for key in dropped:
            for part, v in scope_of(key).items():
                if v is not None:
                    index.get((part, v), set()).discard(key)
        for key in added:
            for part, v in scope_of(key).items():
                if v is not None:
                    index.setdefault((part, v), set()).add(key)

    def _exact(self, user_id: Any, agent_id: Any = None, run_id: Any = None) -> str:
        """The key of the memory of exactly this scope: its JSON key, or a memory stored under the plain
        id ``user_id`` (a bulk build's) when there is no JSON one and no agent or run is named."""
        key = scope_key(user_id, agent_id, run_id)
        if (
            agent_id is None
            and run_id is None
            and key not in self._loaded
            and key not in self.quarantined
            and isinstance(user_id, str)
            and (user_id in self._loaded or user_id in self.quarantined)
            and scope_of(user_id)["user_id"] == user_id  # a plain id, not another scope's JSON key
        ):
            return user_id
        return key

    def scopes(
        self, *, user_id: str | None = None, agent_id: str | None = None, run_id: str | None = None
    ) -> list[dict[str, str | None]]:
        """Every memory's scope ``{"user_id", "agent_id", "run_id"}`` (a memory stored under a plain id,
        as a bulk build stores one, has that id as ``user_id``), quarantined ones left out; the parts
        given narrow the list (a part left out matches any)."""
        self._check_open()
        want = {
            k: None if v is None else inputs.check_id(v, k)
            for k, v in (("user_id", user_id), ("agent_id", agent_id), ("run_id", run_id))
        }
        if self._residency is not None:  # the catalogue: every stored memory, resident or not
            ids = [m for m in self.store.memory_ids() if m not in self.quarantined]
        else:
            with self._rw.read():
                ids = list(self.bank.memory_ids)
        return [dict(scope_of(m)) for m in ids if in_scope(m, want)]

    def _owner(self, unit_id: str, user_id, agent_id, run_id) -> list[str]:
        """The memory key a unit id names, to make resident before ``_locate`` (none when it does
        not parse: ``_locate`` says why)."""
        if self._residency is None:
            return []
        try:
            if user_id is not None or agent_id is not None or run_id is not None:
                return self.scope_keys(user_id, agent_id, run_id)  # every memory the scope covers
            return self.store.find_message(unit_id) if isinstance(unit_id, str) and unit_id else []
        except (TypeError, ValueError):
            return []

    def _locate(self, unit_id: str, user_id, agent_id, run_id) -> tuple[str, str, int]:
        """(memory key, kind, local row; -1 for a message): ``episode:N`` / ``semantic:N`` /
        ``theme:N`` need the scope; a message id without a scope must name exactly one message of the
        store."""
        if not isinstance(unit_id, str) or not unit_id:
            raise ValueError(f"unit_id: expected a non-empty string, got {unit_id!r:.80}")
        inputs.check_id(unit_id, "unit_id")
        unit = unit_ids.parse_unit_id(unit_id)
        if user_id is None and agent_id is None and run_id is None:
            if unit is not None:
                raise ValueError(
                    f"unit_id {unit_id!r}: episode, semantic and theme ids need user_id (and agent_id, run_id)"
                )
            if (
                self._residency is not None
            ):  # the catalogue's message-id index (most memories are not resident)
                keys = [m for m in self.store.find_message(unit_id) if m not in self.quarantined]
            else:
                rows = np.flatnonzero(self.bank.msg["id"][: self.bank.msg.seg.size] == unit_id)
                keys = [
                    self.bank.memory_ids[b]
                    for b in sorted({int(b) for b in self.bank.msg.seg.memory_of(rows) if b >= 0})
                ]
            if len(keys) != 1:
                raise KeyError(
                    f"unit {unit_id!r}: {'no such message' if not keys else 'ambiguous: give user_id'}"
                )
            return keys[0], "message", -1
        keys = self._covered(user_id, agent_id, run_id)
        if len(keys) == 1:
            return self._find(keys[0], unit_id, unit)
        found = []  # a scope with a part left out covers several memories: the unit must be in one
        for key in keys:
            try:
                found.append(self._find(key, unit_id, unit))
            except KeyError:
                continue
        if len(found) != 1:
            raise KeyError(
                f"unit {unit_id!r}: "
                + (
                    "not in this scope's memories"
                    if not found
                    else "ambiguous, it is in several of this scope's memories "
                    f"({', '.join(str(scope_of(k)) for k, _, _ in found)}): give agent_id and run_id"
                )
            )
        return found[0]

    def _find(self, key: str, unit_id: str, unit: tuple[str, int] | None) -> tuple[str, str, int]:
        """(key, kind, local row; -1 for a message) of ``unit_id`` in memory ``key`` (KeyError: not there)."""
        key = self._usable(key)
        b = self.bank.index.get(key)
        if b is None:
            raise KeyError(f"unit {unit_id!r}: no memory for this scope")
        is_message = unit_id in set(self.bank.msg["id"][self.bank.msg.seg.rows(b)].tolist())
        if unit is None:
            if not is_message:
                raise KeyError(f"unit {unit_id!r}: no such message in this memory")
            return key, "message", -1
        if is_message:  # a message id of this form was accepted before such ids were refused
            raise KeyError(
                f"unit {unit_id!r}: ambiguous, it names a message and a derived unit id; "
                "delete_all the scope or re-add its messages under other ids"
            )
        kind, num = unit
        level = {"episode": self.bank.epi, "semantic": self.bank.sem, "theme": self.bank.theme}[kind]
        hit = np.flatnonzero(level["id"][level.seg.rows(b)] == num)
        if not len(hit):
            raise KeyError(f"unit {unit_id!r}: no {kind} {num} in this memory")
        return key, kind, int(hit[0])
