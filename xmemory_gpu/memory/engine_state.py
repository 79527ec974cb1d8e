"""What the live engine needs to grow a stored memory again, typed: a slice's ``engine`` field.

A memory built in bulk has none (``None``): every episode is closed, theme ids continue after the
largest, and the speakers are read from its messages. On disk it is the ``engine`` object of the
catalogue's stats JSON (:func:`~.codec.catalogue_stats` writes it, :meth:`EngineState.split` reads
it back), the place stores written before this type kept it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

KEY = "engine"  # its name in the catalogue's stats JSON


@dataclass(slots=True)
class EngineState:
    open_from: int = 0  # first message of the open episode (== number of messages when none is open)
    next_theme_id: int = 0
    speakers: tuple[str, ...] = ()  # the first two distinct speakers (statement rewriting)
    forgotten: tuple[str, ...] = ()  # hashes of deleted statements: never extracted again

    @classmethod
    def closed(cls, n_messages: int) -> EngineState:
        """The state of a memory built in bulk: nothing open."""
        return cls(open_from=n_messages)

    def as_dict(self) -> dict[str, Any]:
        """The state as the catalogue's JSON object."""
        return {
            "open_from": self.open_from,
            "next_theme_id": self.next_theme_id,
            "speakers": list(self.speakers),
            "forgotten": list(self.forgotten),
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any], n_messages: int) -> EngineState:
        """The inverse of :meth:`as_dict`; a missing ``open_from`` means nothing open (``n_messages``)."""
        return cls(
            int(d.get("open_from", n_messages)),
            int(d.get("next_theme_id", 0)),
            tuple(d.get("speakers", ())),
            tuple(d.get("forgotten", ())),
        )

    @staticmethod
    def split(stats: dict[str, Any], n_messages: int) -> tuple[dict[str, Any], EngineState | None]:
        """Catalogue stats -> (the stats without ``engine``, the typed state or None)."""
        if KEY not in stats:
            return stats, None
        return without_state(stats), EngineState.from_dict(stats[KEY] or {}, n_messages)


def without_state(stats: dict[str, Any]) -> dict[str, Any]:
    """Catalogue stats without the engine's state (what ``stats`` of a backend returns)."""
    return {k: v for k, v in stats.items() if k != KEY}
