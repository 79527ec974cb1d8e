"""The front door's contract: ``MemoryAPI``, the calls that ``MemoryEngine`` (in process) and
``MemoryClient`` (over HTTP) take with the same arguments and answer in the same shapes, and
``AsyncMemoryAPI``, the same calls awaited (``AsyncMemoryEngine``, ``AsyncMemoryClient``). Code
written against it runs against any of the four::

    def remember(mem: MemoryAPI, said: str) -> list[str]:
        return mem.add(said, user_id="alice")

Scope: ``user_id`` / ``agent_id`` / ``run_id``, at least one given; a part left out matches any
(mem0's rules). Answers:

- ``add``: the message ids; ``events=True``: mem0's ``{"ids", "results": [event, ...]}``;
- ``add_batch``: the ids per item; ``events=True``: that dict per item;
- ``search``: one result per query, ``search_batch`` a list of them per item. In process a
  ``RetrievalResult``; over HTTP its dict ``search_answer(r, engine.hits(r))`` (``ANSWER_KEYS``,
  ``units`` as mem0's results: ``score`` the relevance, ``created_at``, the scope);
- ``get`` / ``update``: one unit as ``get_all`` lists it (``update``: the message, updated);
- ``get_all``: the scope's units (``filters``: mem0's; ``page`` / ``page_size``: mem0's paging);
- ``history``: ``[{"op", "ids", "time"}]``, oldest first; ``delete``: None;
- ``delete_all``: the messages forgotten; ``reset``: the memories forgotten.

Refusals: ``ValueError`` in process (``ServiceError`` 422 over HTTP), ``KeyError`` for an unknown
unit (404). ``isinstance(x, MemoryAPI)`` checks that every call is there (``runtime_checkable``);
``tests/test_memory_api_protocol.py`` checks the signatures and the shapes. This module imports
nothing of the package, so any layer may name it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

# the calls of the contract, in the order a session meets them
CALLS = (
    "add",
    "add_batch",
    "search",
    "search_batch",
    "get",
    "get_all",
    "update",
    "delete",
    "delete_all",
    "reset",
    "history",
)

# one query's answer over HTTP (and its dict in process: ``search_answer``)
ANSWER_KEYS = (
    "query",
    "context",
    "units",
    "message_ids",
    "context_tokens",
    "tokenizer",
    "notes",
    "top_relevance",
    "llm_calls",
)


def search_answer(result: Any, hits: list[dict]) -> dict[str, Any]:
    """One query's answer as the HTTP service gives it: ``result``'s fields (a ``RetrievalResult``)
    named in ``ANSWER_KEYS``, with ``units`` its ``hits`` (``MemoryEngine.hits(result)``)."""
    d = result.to_dict()
    return {k: hits if k == "units" else d[k] for k in ANSWER_KEYS}


@runtime_checkable
class MemoryAPI(Protocol):
    """The blocking calls (``MemoryEngine``, ``MemoryClient``); each documented on ``MemoryEngine``."""

    def add(
        self,
        messages: str | dict | Sequence[dict],
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        run_id: str | None = None,
        metadata: dict | None = None,
        user_name: str | None = None,
        infer: bool = True,
        events: bool = False,
    ) -> list[str] | dict: ...

    def add_batch(self, items: Sequence[dict], *, events: bool = False) -> list[list[str]] | list[dict]: ...

    def search(
        self,
        query_or_queries: str | Sequence[str],
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        run_id: str | None = None,
        strategy: str = "xmemory",
        budget_tokens: int | None = None,
        limit: int | None = None,
        threshold: float | None = None,
        filters: dict | None = None,
        top_k: int | None = None,
    ) -> list[Any]: ...

    def search_batch(self, items: Sequence[dict]) -> list[list[Any]]: ...

    def get(
        self,
        unit_id: str,
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        run_id: str | None = None,
    ) -> dict: ...

    def get_all(
        self,
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        run_id: str | None = None,
        filters: dict | None = None,
        page: int | None = None,
        page_size: int | None = None,
    ) -> list[dict]: ...

    def update(
        self,
        unit_id: str,
        text: str,
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        run_id: str | None = None,
    ) -> dict: ...

    def delete(
        self,
        unit_id: str,
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        run_id: str | None = None,
    ) -> None: ...

    def delete_all(
        self, *, user_id: str | None = None, agent_id: str | None = None, run_id: str | None = None
    ) -> int: ...

    def reset(self) -> int: ...

    def history(
        self, *, user_id: str | None = None, agent_id: str | None = None, run_id: str | None = None
    ) -> list[dict]: ...


@runtime_checkable
class AsyncMemoryAPI(Protocol):
    """``MemoryAPI``'s calls awaited (``AsyncMemoryEngine``, ``AsyncMemoryClient``)."""

    async def add(
        self,
        messages: str | dict | Sequence[dict],
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        run_id: str | None = None,
        metadata: dict | None = None,
        user_name: str | None = None,
        infer: bool = True,
        events: bool = False,
    ) -> list[str] | dict: ...

    async def add_batch(
        self, items: Sequence[dict], *, events: bool = False
    ) -> list[list[str]] | list[dict]: ...

    async def search(
        self,
        query_or_queries: str | Sequence[str],
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        run_id: str | None = None,
        strategy: str = "xmemory",
        budget_tokens: int | None = None,
        limit: int | None = None,
        threshold: float | None = None,
        filters: dict | None = None,
        top_k: int | None = None,
    ) -> list[Any]: ...

    async def search_batch(self, items: Sequence[dict]) -> list[list[Any]]: ...

    async def get(
        self,
        unit_id: str,
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        run_id: str | None = None,
    ) -> dict: ...

    async def get_all(
        self,
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        run_id: str | None = None,
        filters: dict | None = None,
        page: int | None = None,
        page_size: int | None = None,
    ) -> list[dict]: ...

    async def update(
        self,
        unit_id: str,
        text: str,
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        run_id: str | None = None,
    ) -> dict: ...

    async def delete(
        self,
        unit_id: str,
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        run_id: str | None = None,
    ) -> None: ...

    async def delete_all(
        self, *, user_id: str | None = None, agent_id: str | None = None, run_id: str | None = None
    ) -> int: ...

    async def reset(self) -> int: ...

    async def history(
        self, *, user_id: str | None = None, agent_id: str | None = None, run_id: str | None = None
    ) -> list[dict]: ...


__all__ = ["ANSWER_KEYS", "CALLS", "AsyncMemoryAPI", "MemoryAPI", "search_answer"]
