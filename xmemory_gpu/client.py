"""``MemoryClient``: the live engine's methods over HTTP (``xmemory serve``), so switching between
in-process and remote is one line::

    mem = MemoryEngine.open("stores/live")            # in process
    mem = MemoryClient("http://127.0.0.1:8000", api_key="...")   # remote, same calls

Search results come back as dicts (``context``, ``units``, ``message_ids``, ``context_tokens``).
Redirects are not followed (a redirect to another host would carry the API key there): a 3xx answer
is a ``ServiceError`` naming where it pointed. Only the standard library is used.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from typing import Any


class ServiceError(RuntimeError):
    """An HTTP error from the server: ``status`` and the server's ``detail``."""

    def __init__(self, status: int, detail: str) -> None:
        super().__init__(f"HTTP {status}: {detail}")
        self.status, self.detail = status, detail


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """Every redirect answered as the error it is, never followed with the key."""

    def redirect_request(self, req: urllib.request.Request, fp: Any, code: int, msg: str, headers: Any,
                         newurl: str) -> None:
        return None


class MemoryClient:
    def __init__(self, base_url: str, *, api_key: str | None = None, timeout: float = 60.0) -> None:
        self.base = base_url.rstrip("/")
        self.api_key = api_key
        self.timeout = timeout
        self._opener = urllib.request.build_opener(_NoRedirect)

    def _call(self, method: str, path: str, body: Any = None, **params: Any) -> Any:
        q = {k: v for k, v in params.items() if v is not None}
        url = self.base + path + ("?" + urllib.parse.urlencode(q) if q else "")
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(url, data=data, method=method)
        if data is not None:
            req.add_header("Content-Type", "application/json")
        if self.api_key:
            req.add_header("Authorization", f"Bearer {self.api_key}")
        try:
            with self._opener.open(req, timeout=self.timeout) as resp:
                raw = resp.read()
                return json.loads(raw) if resp.headers.get_content_type() == "application/json" else raw.decode()
        except urllib.error.HTTPError as exc:
            if 300 <= exc.code < 400:
                raise ServiceError(exc.code, f"redirect to {exc.headers.get('Location')!r} not followed "
                                             "(MemoryClient sends its key only to base_url)") from None
            try:
                detail = json.loads(exc.read()).get("detail", "")
            except (ValueError, AttributeError):
                detail = exc.reason
            raise ServiceError(exc.code, str(detail)) from None

    @staticmethod
    def _scope(user_id: str, agent_id: str | None, run_id: str | None) -> dict:
        return {"user_id": user_id, "agent_id": agent_id, "run_id": run_id}

    def add(self, messages: list[dict], *, user_id: str, agent_id: str | None = None, run_id: str | None = None) -> list[str]:
        return self._call("POST", "/v1/memories", {"messages": messages, **self._scope(user_id, agent_id, run_id)})["ids"]

    def add_batch(self, items: list[dict]) -> list[list[str]]:
        return self._call("POST", "/v1/memories/batch", {"items": items})["ids"]

    def search(self, query_or_queries: str | list[str], *, user_id: str, agent_id: str | None = None, run_id: str | None = None,
               strategy: str = "xmemory", budget_tokens: int | None = None) -> list[dict]:
        key = "query" if isinstance(query_or_queries, str) else "queries"
        body = {key: query_or_queries if key == "query" else list(query_or_queries), "strategy": strategy,
                "budget_tokens": budget_tokens, **self._scope(user_id, agent_id, run_id)}
        return self._call("POST", "/v1/search", {k: v for k, v in body.items() if v is not None})["results"]

    def get_all(self, *, user_id: str, agent_id: str | None = None, run_id: str | None = None) -> list[dict]:
        return self._call("GET", "/v1/memories", **self._scope(user_id, agent_id, run_id))["units"]

    def get(self, unit_id: str, *, user_id: str, agent_id: str | None = None, run_id: str | None = None) -> dict:
        return self._call("GET", f"/v1/memories/{urllib.parse.quote(unit_id, safe='')}", **self._scope(user_id, agent_id, run_id))

    def delete(self, unit_id: str, *, user_id: str, agent_id: str | None = None, run_id: str | None = None) -> None:
        self._call("DELETE", f"/v1/memories/{urllib.parse.quote(unit_id, safe='')}", **self._scope(user_id, agent_id, run_id))

    def delete_all(self, *, user_id: str, agent_id: str | None = None, run_id: str | None = None) -> int:
        return self._call("DELETE", "/v1/memories", **self._scope(user_id, agent_id, run_id))["deleted_messages"]

    def history(self, *, user_id: str, agent_id: str | None = None, run_id: str | None = None) -> list[dict]:
        return self._call("GET", "/v1/history", **self._scope(user_id, agent_id, run_id))["history"]

    def health(self) -> dict:
        return self._call("GET", "/health")

    def metrics(self) -> str:
        return self._call("GET", "/metrics")
