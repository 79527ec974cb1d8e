"""Request bodies of the HTTP API (pydantic): the engine's arguments, with the service's limits."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field

MAX_ID = 512
MAX_QUERY = 4000  # characters of one query
MAX_TEXT = 100_000  # characters of one message
Query = Annotated[str, Field(min_length=1, max_length=MAX_QUERY)]


class Message(BaseModel):
    model_config = ConfigDict(extra="forbid")
    speaker: str | None = Field(None, min_length=1, max_length=MAX_ID)
    role: str | None = Field(None, min_length=1, max_length=MAX_ID)
    content: str | None = Field(None, max_length=MAX_TEXT)
    text: str | None = Field(None, max_length=MAX_TEXT)
    timestamp: float | str | None = None
    id: str | None = Field(None, min_length=1, max_length=MAX_ID)
    session: int | None = Field(None, ge=0)

    def as_engine(self) -> dict[str, Any]:
        return {k: v for k, v in self.model_dump().items() if v is not None}


class Scope(BaseModel):
    model_config = ConfigDict(extra="forbid")
    user_id: str = Field(min_length=1, max_length=MAX_ID)
    agent_id: str | None = Field(None, min_length=1, max_length=MAX_ID)
    run_id: str | None = Field(None, min_length=1, max_length=MAX_ID)


def limited_add(max_messages: int) -> type[BaseModel]:
    class AddRequest(Scope):
        messages: list[Message] = Field(min_length=1, max_length=max_messages)

    return AddRequest


def limited_batch(add_model: type[BaseModel], max_items: int) -> type[BaseModel]:
    class AddBatchRequest(BaseModel):
        model_config = ConfigDict(extra="forbid")
        items: list[add_model] = Field(min_length=1, max_length=max_items)  # type: ignore[valid-type]

    return AddBatchRequest


def limited_search(max_queries: int) -> type[BaseModel]:
    class SearchRequest(Scope):
        query: str | None = Field(None, min_length=1, max_length=MAX_QUERY)
        queries: list[Query] | None = Field(None, min_length=1, max_length=max_queries)
        strategy: str = "xmemory"
        budget_tokens: int | None = Field(None, ge=0, le=1_000_000)

    return SearchRequest
