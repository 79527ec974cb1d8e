"""What the live engine keeps with a memory it writes, typed: a slice's ``engine`` field. What it
needs to grow the memory again (the open episode, the next theme id, the speakers, the statements
deleted for good) and what it knows beside the derived units (the user's name and the message that
gave it, the messages stamped at arrival or kept without inference, the supersessions).

A memory built in bulk from LoCoMo-format chats has none (``None``): every episode is closed, theme ids
continue after the largest, and the speakers are read from its messages. On disk it is the ``engine``
object of the catalogue's stats JSON (:func:`~.codec.catalogue_stats` writes it,
:meth:`EngineState.split` reads it back); stores written before the state held the user's name,
stamps and supersessions kept them as stats keys of their own (``LEGACY_KEYS``), read into the state.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

KEY = "engine"  # its name in the catalogue's stats JSON
# stats keys that older stores kept beside ``engine``: read into the state, never written
LEGACY_KEYS = ("user_name", "user_name_from", "stamped", "raw", "superseded")


@dataclass(slots=True)
class EngineState:
    open_from: int = 0  # first message of the open episode (== number of messages when none is open)
    next_theme_id: int = 0
    speakers: tuple[str, ...] = ()  # the first two distinct speakers (statement rewriting)
    forgotten: tuple[str, ...] = ()  # hashes of deleted statements: never extracted again
    user_name: str | None = None  # the name of the memory's subject (role "user"), shown for "the user"
    user_name_from: dict[str, Any] | None = None  # {"id": message id, "explicit": bool}; None: the app's
    stamped: tuple[str, ...] = ()  # ids of the messages stamped with their arrival time
    raw: tuple[str, ...] = ()  # ids of the messages added with infer=False (nothing derived from them)
    # statement id (str) -> [the id of the statement that superseded it, that statement's time or None]
    superseded: dict[str, list] = field(default_factory=dict)

    @classmethod
    def closed(cls, n_messages: int) -> EngineState:
        """The state of a memory built in bulk: nothing open."""
        return cls(open_from=n_messages)

    def as_dict(self) -> dict[str, Any]:
        """The state as the catalogue's JSON object (the user's name, stamps and supersessions only
        when there are any)."""
        d: dict[str, Any] = {
            "open_from": self.open_from,
            "next_theme_id": self.next_theme_id,
            "speakers": list(self.speakers),
            "forgotten": list(self.forgotten),
        }
        if self.user_name:
            d["user_name"] = self.user_name
            if self.user_name_from is not None:
                d["user_name_from"] = dict(self.user_name_from)
        for name in ("stamped", "raw"):
            if getattr(self, name):
                d[name] = list(getattr(self, name))
        if self.superseded:
            d["superseded"] = {k: list(v) for k, v in self.superseded.items()}
        return d

    def copy(self) -> EngineState:
        """A copy that shares nothing mutable with this state."""
        return EngineState(
            self.open_from,
            self.next_theme_id,
            self.speakers,
            self.forgotten,
            self.user_name,
            None if self.user_name_from is None else dict(self.user_name_from),
            self.stamped,
            self.raw,
            {k: list(v) for k, v in self.superseded.items()},
        )

    @classmethod
    def from_dict(cls, d: dict[str, Any], n_messages: int) -> EngineState:
        """The inverse of :meth:`as_dict`; a missing ``open_from`` means nothing open (``n_messages``)."""
        source = d.get("user_name_from")
        return cls(
            int(d.get("open_from", n_messages)),
            int(d.get("next_theme_id", 0)),
            tuple(d.get("speakers", ())),
            tuple(d.get("forgotten", ())),
            d.get("user_name") or None,
            dict(source) if isinstance(source, dict) else None,
            tuple(d.get("stamped", ())),
            tuple(d.get("raw", ())),
            {str(k): list(v) for k, v in (d.get("superseded") or {}).items()},
        )

    @staticmethod
    def split(stats: dict[str, Any], n_messages: int) -> tuple[dict[str, Any], EngineState | None]:
        """Catalogue stats -> (the stats without ``engine`` and the legacy keys, the typed state or
        None); an older store's legacy keys are read into its state (a state's own fields first)."""
        if KEY not in stats:
            return stats, None
        legacy = {k: stats[k] for k in LEGACY_KEYS if k in stats}
        return without_state(stats), EngineState.from_dict({**legacy, **(stats[KEY] or {})}, n_messages)


def without_state(stats: dict[str, Any]) -> dict[str, Any]:
    """Catalogue stats without the engine's state and the keys older stores kept beside it (what
    ``stats`` of a backend returns)."""
    return {k: v for k, v in stats.items() if k != KEY and k not in LEGACY_KEYS}
