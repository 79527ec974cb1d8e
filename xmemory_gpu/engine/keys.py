"""The names the engine reads: the fields of a request item and of a message (what the engine keeps
beside a memory's derived units is typed in ``memory.engine_state.EngineState``)."""

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


class QuarantinedError(RuntimeError):
    """A request for a memory that failed to load (damaged); names it."""


__all__ = [
    "ADD_ITEM_FIELDS",
    "MESSAGE_FIELDS",
    "QuarantinedError",
    "SEARCH_ITEM_FIELDS",
]
