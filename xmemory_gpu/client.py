"""``MemoryClient`` and ``AsyncMemoryClient``: the live engine's methods over HTTP (``xmemory serve``),
so switching between in-process and remote is one line::

    mem = MemoryEngine.open("stores/live")            # in process
    mem = MemoryClient("http://127.0.0.1:8000", api_key="...")   # remote, same calls
    mem = AsyncMemoryClient("http://127.0.0.1:8000", api_key="...")   # remote, the same calls awaited

Search results come back as dicts (``context``, ``units`` as mem0's results with ``score`` the
relevance, ``message_ids``, ``context_tokens``: ``api.search_answer``); ``add`` gives the ids, or with
``events=True`` mem0's ``{"ids", "results"}`` (``add_batch``: per item); ``search_batch`` one request
per item (the async client's at once, so the server coalesces them); ``update`` the updated message;
``get_all`` takes mem0's ``page`` / ``page_size``, ``search`` mem0's ``top_k`` (``limit``'s other
name). Both clients implement ``api.MemoryAPI`` (the async one ``AsyncMemoryAPI``). ``batch_update`` /
``batch_delete`` take mem0's ``[{"memory_id", ...}]`` (every item or none). ``with MemoryClient(...)`` and ``async with
AsyncMemoryClient(...)`` work (``close`` / ``aclose``: there is no pool to release).
Redirects are not followed (a redirect to another host would carry the API key there): a 3xx answer
is a ``ServiceError`` naming where it pointed. An ``api_key`` goes into a header, so both clients
refuse one that a header cannot hold as it is (CR, LF, other control characters, spaces, non-ASCII).
Only the standard library is used.
"""

from __future__ import annotations

import asyncio
import json
import ssl
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

SEARCH_BATCH_CONCURRENCY = 32  # AsyncMemoryClient.search_batch's requests in flight at once


class ServiceError(RuntimeError):
    """An HTTP error from the server: ``status`` and the server's ``detail``."""

    def __init__(self, status: int, detail: str) -> None:
        super().__init__(f"HTTP {status}: {detail}")
        self.status, self.detail = status, detail


@dataclass(frozen=True)
class _Req:
    """One call as HTTP: ``field`` names the part of the JSON answer the method returns (None: all of it)."""

    method: str
    path: str
    body: dict | None = None
    params: dict | None = None
    field: str | None = None

    def target(self, base_path: str) -> str:
        q = {k: v for k, v in (self.params or {}).items() if v is not None}
        return base_path + self.path + ("?" + urllib.parse.urlencode(q) if q else "")

    def data(self) -> bytes | None:
        return (
            None
            if self.body is None
            else json.dumps({k: v for k, v in self.body.items() if v is not None}).encode()
        )


def _answer(req: _Req, status: int, content_type: str, raw: bytes, location: str | None) -> Any:
    """The method's value from an HTTP answer, or the ``ServiceError`` it is."""
    if 300 <= status < 400:
        raise ServiceError(
            status, f"redirect to {location!r} not followed (the client sends its key only to base_url)"
        )
    if status >= 400:
        try:
            detail = json.loads(raw).get("detail", "")
        except (ValueError, AttributeError):
            detail = raw.decode(errors="replace")[:200]
        raise ServiceError(status, str(detail))
    out = json.loads(raw) if content_type == "application/json" else raw.decode()
    return out if req.field is None else out[req.field]


def check_api_key(key: str | None) -> str | None:
    """``key`` if it can be sent as ``Authorization: Bearer KEY`` as it is (visible ASCII only: a CR or
    LF would end the header and start another), None for no key; else a ``ValueError`` naming
    ``api_key`` and the offending character (never the key)."""
    if key is None:
        return None
    if not isinstance(key, str):
        raise ValueError(f"api_key: expected a string, got {type(key).__name__}")
    for i, c in enumerate(key):
        if not "!" <= c <= "~":
            raise ValueError(
                f"api_key: character {i} is {c!r}; expected visible ASCII characters only "
                "(no CR, LF or other control characters, no spaces)"
            )
    return key


def _per_item(out: Any, events: bool) -> Any:
    """``POST /v1/memories/batch``'s answer as the engine's ``add_batch`` gives it: with ``events``,
    ``{"ids": [...], "results": [...]}`` per item (the body has both lists across the items)."""
    if not events:
        return out
    return [{"ids": ids, "results": res} for ids, res in zip(out["ids"], out["results"])]


def _item_error(n: int, exc: ServiceError) -> ServiceError:
    """A ``search_batch`` item's refusal, naming the item as the engine does."""
    return ServiceError(exc.status, f"items[{n}]: {exc.detail}")


def _unit(unit_id: str) -> str:
    return "/v1/memories/" + urllib.parse.quote(unit_id, safe="")


def _scope(user_id: str | None, agent_id: str | None, run_id: str | None) -> dict:
    return {"user_id": user_id, "agent_id": agent_id, "run_id": run_id}


def _filters(filters: dict | None) -> str | None:
    return None if filters is None else json.dumps(filters)


class _Requests:
    """The request of each method, shared by both clients (their signatures are the engine's)."""

    @staticmethod
    def add(
        messages: str | dict | Sequence[dict],
        scope: dict,
        metadata: dict | None,
        user_name: str | None,
        infer: bool,
        events: bool,
    ) -> _Req:
        body = {"messages": messages, **scope, "metadata": metadata, "user_name": user_name}
        return _Req(
            "POST",
            "/v1/memories",
            body | ({"infer": infer} if infer is not True else {}),
            field=None if events else "ids",
        )

    @staticmethod
    def add_batch(items: Sequence[dict], events: bool) -> _Req:
        return _Req("POST", "/v1/memories/batch", {"items": list(items)}, field=None if events else "ids")

    @staticmethod
    def search_item(n: int, item: dict) -> _Req:
        """Item ``n`` of a ``search_batch`` (the engine's item fields: the server checks them)."""
        if not isinstance(item, dict):
            raise ValueError(f"search_batch: items[{n}]: expected an object, got {type(item).__name__}")
        return _Req("POST", "/v1/search", dict(item), field="results")

    @staticmethod
    def scopes(scope: dict) -> _Req:
        return _Req("GET", "/v1/scopes", params=scope, field="scopes")

    @staticmethod
    def search(
        query_or_queries: str | Sequence[str],
        scope: dict,
        strategy: str,
        budget_tokens: int | None,
        limit: int | None,
        threshold: float | None,
        filters: dict | None,
        top_k: int | None,
    ) -> _Req:
        key = "query" if isinstance(query_or_queries, str) else "queries"
        return _Req(
            "POST",
            "/v1/search",
            {
                key: query_or_queries if key == "query" else list(query_or_queries),
                **scope,
                "strategy": strategy,
                "budget_tokens": budget_tokens,
                "limit": limit,
                "top_k": top_k,
                "threshold": threshold,
                "filters": filters,
            },
            field="results",
        )

    @staticmethod
    def update(unit_id: str, text: str, scope: dict) -> _Req:
        return _Req("PUT", _unit(unit_id), {"text": text, **scope})

    @staticmethod
    def get_all(scope: dict, filters: dict | None, page: int | None, page_size: int | None) -> _Req:
        params = {**scope, "filters": _filters(filters), "page": page, "page_size": page_size}
        return _Req("GET", "/v1/memories", params=params, field="units")

    @staticmethod
    def batch_update(memories: list[dict]) -> _Req:
        return _Req("PUT", "/v1/batch", {"memories": list(memories)}, field="results")

    @staticmethod
    def batch_delete(memories: list[dict]) -> _Req:
        return _Req("DELETE", "/v1/batch", {"memories": list(memories)}, field="deleted")


class MemoryClient:
    """The engine's calls against ``xmemory serve`` (blocking; urllib)."""

    def __init__(self, base_url: str, *, api_key: str | None = None, timeout: float = 60.0) -> None:
        self.base = base_url.rstrip("/")
        self.api_key = check_api_key(api_key)
        self.timeout = timeout
        self._opener = urllib.request.build_opener(_NoRedirect)

    def _call(self, req: _Req) -> Any:
        data = req.data()
        r = urllib.request.Request(self.base + req.target(""), data=data, method=req.method)
        if data is not None:
            r.add_header("Content-Type", "application/json")
        if self.api_key:
            r.add_header("Authorization", f"Bearer {self.api_key}")
        try:
            with self._opener.open(r, timeout=self.timeout) as resp:
                return _answer(req, resp.status, resp.headers.get_content_type(), resp.read(), None)
        except urllib.error.HTTPError as exc:
            return _answer(
                req, exc.code, exc.headers.get_content_type(), exc.read(), exc.headers.get("Location")
            )

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
    ) -> list[str] | dict:
        """The engine's ``add``: the ids, or with ``events=True`` mem0's ``{"ids", "results"}``."""
        scope = _scope(user_id, agent_id, run_id)
        return self._call(_Requests.add(messages, scope, metadata, user_name, infer, events))

    def add_batch(self, items: Sequence[dict], *, events: bool = False) -> list[list[str]] | list[dict]:
        """The engine's ``add_batch``: ids per item, or with ``events=True`` mem0's ``{"ids": [...],
        "results": [...]}`` per item."""
        return _per_item(self._call(_Requests.add_batch(items, events)), events)

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
    ) -> list[dict]:
        return self._call(
            _Requests.search(
                query_or_queries,
                _scope(user_id, agent_id, run_id),
                strategy,
                budget_tokens,
                limit,
                threshold,
                filters,
                top_k,
            )
        )

    def search_batch(self, items: Sequence[dict]) -> list[list[dict]]:
        """The engine's ``search_batch``: items ``{"query" | "queries", "user_id"?, "agent_id"?,
        "run_id"?, "strategy"?, "budget_tokens"?, "limit" | "top_k"?, "threshold"?, "filters"?}``,
        one request each, in order; the answers per item. A refused item is a ``ServiceError``
        naming it (``items[N]: ...``)."""
        reqs = [_Requests.search_item(n, it) for n, it in enumerate(items)]
        out = []
        for n, req in enumerate(reqs):
            try:
                out.append(self._call(req))
            except ServiceError as exc:
                raise _item_error(n, exc) from None
        return out

    def get_all(
        self,
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        run_id: str | None = None,
        filters: dict | None = None,
        page: int | None = None,
        page_size: int | None = None,
    ) -> list[dict]:
        """The scope's units; with ``page`` / ``page_size`` (mem0's paging), that page of them."""
        return self._call(_Requests.get_all(_scope(user_id, agent_id, run_id), filters, page, page_size))

    def get(
        self,
        unit_id: str,
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        run_id: str | None = None,
    ) -> dict:
        return self._call(_Req("GET", _unit(unit_id), params=_scope(user_id, agent_id, run_id)))

    def update(
        self,
        unit_id: str,
        text: str,
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        run_id: str | None = None,
    ) -> dict:
        return self._call(_Requests.update(unit_id, text, _scope(user_id, agent_id, run_id)))

    def delete(
        self,
        unit_id: str,
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        run_id: str | None = None,
    ) -> None:
        self._call(_Req("DELETE", _unit(unit_id), params=_scope(user_id, agent_id, run_id)))

    def batch_update(self, memories: list[dict]) -> list[dict]:
        """mem0's ``batch_update``: ``[{"memory_id", "text", "user_id"?, ...}]``, every update or none;
        the updated messages back."""
        return self._call(_Requests.batch_update(memories))

    def batch_delete(self, memories: list[dict]) -> list[str]:
        """mem0's ``batch_delete``: ``[{"memory_id", "user_id"?, ...}]``, every delete or none; the ids back."""
        return self._call(_Requests.batch_delete(memories))

    def delete_all(
        self, *, user_id: str | None = None, agent_id: str | None = None, run_id: str | None = None
    ) -> int:
        return self._call(
            _Req("DELETE", "/v1/memories", params=_scope(user_id, agent_id, run_id), field="deleted_messages")
        )

    def reset(self) -> int:
        """Delete every memory of the store (a key of every scope); returns the number of memories deleted."""
        return self._call(_Req("POST", "/v1/reset", field="deleted_memories"))

    def history(
        self, *, user_id: str | None = None, agent_id: str | None = None, run_id: str | None = None
    ) -> list[dict]:
        return self._call(
            _Req("GET", "/v1/history", params=_scope(user_id, agent_id, run_id), field="history")
        )

    def scopes(
        self, *, user_id: str | None = None, agent_id: str | None = None, run_id: str | None = None
    ) -> list[dict]:
        """Every memory's scope, narrowed by the parts given (a key of every scope)."""
        return self._call(_Requests.scopes(_scope(user_id, agent_id, run_id)))

    def health(self) -> dict:
        return self._call(_Req("GET", "/health"))

    def metrics(self) -> str:
        return self._call(_Req("GET", "/metrics"))

    def close(self) -> None:
        """Nothing to release (one connection per call); kept for ``with`` and mem0's clients."""
        self._closed = True

    def __enter__(self) -> MemoryClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """Every redirect answered as the error it is, never followed with the key."""

    def redirect_request(
        self, req: urllib.request.Request, fp: Any, code: int, msg: str, headers: Any, newurl: str
    ) -> None:
        return None


class AsyncMemoryClient:
    """``MemoryClient``'s calls as coroutines, on asyncio's streams: one HTTP/1.1 connection per call
    (no pool, no proxy); ``timeout`` bounds a whole call (``TimeoutError``); cancelling a call closes
    its connection."""

    def __init__(self, base_url: str, *, api_key: str | None = None, timeout: float = 60.0) -> None:
        url = urllib.parse.urlsplit(base_url.rstrip("/"))
        if url.scheme not in ("http", "https") or not url.hostname:
            raise ValueError(f"base_url: expected http://HOST[:PORT][/PATH] or https://..., got {base_url!r}")
        self.base = base_url.rstrip("/")
        self.api_key = check_api_key(api_key)
        self.timeout = timeout
        self._tls = url.scheme == "https"
        self._host, self._port = url.hostname, url.port or (443 if self._tls else 80)
        self._netloc, self._path = url.netloc, url.path

    async def _call(self, req: _Req) -> Any:
        try:
            return await asyncio.wait_for(self._exchange(req), self.timeout)
        except asyncio.TimeoutError:
            raise TimeoutError(
                f"{req.method} {self.base}{req.path}: no answer within {self.timeout} s"
            ) from None

    async def _exchange(self, req: _Req) -> Any:
        data = req.data() or b""
        head = [
            f"{req.method} {req.target(self._path)} HTTP/1.1",
            f"Host: {self._netloc}",
            "Connection: close",
            "Accept: application/json",
            f"Content-Length: {len(data)}",
        ]
        if req.body is not None:
            head.append("Content-Type: application/json")
        if self.api_key:
            head.append(f"Authorization: Bearer {self.api_key}")
        reader, writer = await asyncio.open_connection(
            self._host, self._port, ssl=ssl.create_default_context() if self._tls else None
        )
        try:
            writer.write(("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + data)
            await writer.drain()
            status, headers = await _read_head(reader)
            raw = await _read_body(reader, headers)
        finally:
            writer.close()
        ctype = headers.get("content-type", "").split(";")[0].strip().lower()
        return _answer(req, status, ctype, raw, headers.get("location"))

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
    ) -> list[str] | dict:
        """The engine's ``add``: the ids, or with ``events=True`` mem0's ``{"ids", "results"}``."""
        scope = _scope(user_id, agent_id, run_id)
        return await self._call(_Requests.add(messages, scope, metadata, user_name, infer, events))

    async def add_batch(self, items: Sequence[dict], *, events: bool = False) -> list[list[str]] | list[dict]:
        """The engine's ``add_batch``: ids per item, or with ``events=True`` mem0's ``{"ids": [...],
        "results": [...]}`` per item."""
        return _per_item(await self._call(_Requests.add_batch(items, events)), events)

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
    ) -> list[dict]:
        return await self._call(
            _Requests.search(
                query_or_queries,
                _scope(user_id, agent_id, run_id),
                strategy,
                budget_tokens,
                limit,
                threshold,
                filters,
                top_k,
            )
        )

    async def search_batch(self, items: Sequence[dict]) -> list[list[dict]]:
        """The engine's ``search_batch`` (``MemoryClient.search_batch``), up to
        ``SEARCH_BATCH_CONCURRENCY`` requests in flight at once (the server answers concurrent
        searches with one batched engine call; more would only hold sockets open)."""
        reqs = [_Requests.search_item(n, it) for n, it in enumerate(items)]
        gate = asyncio.Semaphore(SEARCH_BATCH_CONCURRENCY)

        async def one(req):
            async with gate:
                return await self._call(req)

        got = await asyncio.gather(*(one(r) for r in reqs), return_exceptions=True)
        for n, g in enumerate(got):
            if isinstance(g, ServiceError):
                raise _item_error(n, g) from None
            if isinstance(g, BaseException):
                raise g
        return list(got)

    async def get_all(
        self,
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        run_id: str | None = None,
        filters: dict | None = None,
        page: int | None = None,
        page_size: int | None = None,
    ) -> list[dict]:
        """The scope's units; with ``page`` / ``page_size`` (mem0's paging), that page of them."""
        return await self._call(
            _Requests.get_all(_scope(user_id, agent_id, run_id), filters, page, page_size)
        )

    async def get(
        self,
        unit_id: str,
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        run_id: str | None = None,
    ) -> dict:
        return await self._call(_Req("GET", _unit(unit_id), params=_scope(user_id, agent_id, run_id)))

    async def update(
        self,
        unit_id: str,
        text: str,
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        run_id: str | None = None,
    ) -> dict:
        return await self._call(_Requests.update(unit_id, text, _scope(user_id, agent_id, run_id)))

    async def delete(
        self,
        unit_id: str,
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        run_id: str | None = None,
    ) -> None:
        await self._call(_Req("DELETE", _unit(unit_id), params=_scope(user_id, agent_id, run_id)))

    async def batch_update(self, memories: list[dict]) -> list[dict]:
        """mem0's ``batch_update``: ``[{"memory_id", "text", "user_id"?, ...}]``, every update or none;
        the updated messages back."""
        return await self._call(_Requests.batch_update(memories))

    async def batch_delete(self, memories: list[dict]) -> list[str]:
        """mem0's ``batch_delete``: ``[{"memory_id", "user_id"?, ...}]``, every delete or none; the ids back."""
        return await self._call(_Requests.batch_delete(memories))

    async def delete_all(
        self, *, user_id: str | None = None, agent_id: str | None = None, run_id: str | None = None
    ) -> int:
        return await self._call(
            _Req("DELETE", "/v1/memories", params=_scope(user_id, agent_id, run_id), field="deleted_messages")
        )

    async def reset(self) -> int:
        """Delete every memory of the store (a key of every scope); returns the number of memories deleted."""
        return await self._call(_Req("POST", "/v1/reset", field="deleted_memories"))

    async def history(
        self, *, user_id: str | None = None, agent_id: str | None = None, run_id: str | None = None
    ) -> list[dict]:
        return await self._call(
            _Req("GET", "/v1/history", params=_scope(user_id, agent_id, run_id), field="history")
        )

    async def scopes(
        self, *, user_id: str | None = None, agent_id: str | None = None, run_id: str | None = None
    ) -> list[dict]:
        """Every memory's scope, narrowed by the parts given (a key of every scope)."""
        return await self._call(_Requests.scopes(_scope(user_id, agent_id, run_id)))

    async def health(self) -> dict:
        return await self._call(_Req("GET", "/health"))

    async def metrics(self) -> str:
        return await self._call(_Req("GET", "/metrics"))

    async def aclose(self) -> None:
        """Nothing to release (one connection per call, closed with it); kept for ``async with``."""
        self._closed = True

    async def __aenter__(self) -> AsyncMemoryClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


async def _read_head(reader: asyncio.StreamReader) -> tuple[int, dict[str, str]]:
    """The status and the headers (names lower-cased) of an HTTP/1.x answer."""
    line = (await reader.readline()).decode("latin-1")
    parts = line.split(None, 2)
    if len(parts) < 2 or not parts[0].startswith("HTTP/1.") or not parts[1].isdigit():
        raise ConnectionError(f"not an HTTP/1.x answer: {line[:80]!r}")
    headers: dict[str, str] = {}
    for _ in range(256):  # bounded: a server sending more headers is not one we talk to
        line = (await reader.readline()).decode("latin-1")
        if line in ("\r\n", "\n", ""):
            return int(parts[1]), headers
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    raise ConnectionError("more than 256 header lines in an answer")


async def _read_body(reader: asyncio.StreamReader, headers: dict[str, str]) -> bytes:
    if "chunked" in headers.get("transfer-encoding", "").lower():
        chunks = []
        while size := int((await reader.readline()).split(b";")[0].strip() or b"0", 16):
            chunks.append(await reader.readexactly(size))
            await reader.readline()  # the CRLF after each chunk
        return b"".join(chunks)
    if "content-length" in headers:
        return await reader.readexactly(int(headers["content-length"]))
    return await reader.read()
