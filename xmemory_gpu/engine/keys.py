"""The names the engine reads and writes: the fields of a request item and of a message, and the
keys of a memory's stats the engine keeps beside its derived units."""

from __future__ import annotations

SEARCH_ITEM_FIELDS = frozenset(
    {
        "queries",
        "query",
        "user_id",
        "agent_id",
        "run_id",
        "strategy",
        "budget_tokens",
        "limit",
        "top_k",
        "threshold",
        "filters",
    }
)
ADD_ITEM_FIELDS = frozenset({"messages", "user_id", "agent_id", "run_id", "metadata", "user_name", "infer"})
MESSAGE_FIELDS = frozenset({"speaker", "role", "name", "content", "text", "timestamp", "id", "session"})
USER_NAME = "user_name"  # stats key: the name of the memory's subject (role "user"), shown for "the user"
USER_NAME_FROM = (
    "user_name_from"  # stats key: {"id": message id, "explicit": bool} that gave it (absent: the app's)
)
STAMPED = "stamped"  # stats key: ids of the messages the engine stamped with their arrival time
RAW = "raw"  # stats key: ids of the messages added with infer=False (nothing is derived from them)
SUPERSEDED = "superseded"  # stats key: semantic id -> [the semantic id that superseded it, its time]


class QuarantinedError(RuntimeError):
    """A request for a memory that failed to load (damaged); names it."""


__all__ = [
    "ADD_ITEM_FIELDS",
    "MESSAGE_FIELDS",
    "QuarantinedError",
    "RAW",
    "SEARCH_ITEM_FIELDS",
    "STAMPED",
    "SUPERSEDED",
    "USER_NAME",
    "USER_NAME_FROM",
]
