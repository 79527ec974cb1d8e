"""Request framing, the same at every server (the HTTP service, the MCP server's HTTP transport, the
Ray Serve ingress): a request that carries a body must give its size (``Content-Length``; 411
without), and one larger than the limit is refused with 413 before its body is read. Standard
library only."""

from __future__ import annotations

MAX_BODY_BYTES = 4 << 20  # bytes of one request body, at every server
BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})
BODY_DELETES = frozenset({"/v1/batch"})  # the DELETE routes that take a body


def takes_body(method: str, route: str) -> bool:
    """Whether a ``method`` request to ``route`` (a route template or a path) carries a body."""
    return method in BODY_METHODS or (method == "DELETE" and route in BODY_DELETES)


def refusal(
    method: str, route: str, content_length: str | None, limit: int = MAX_BODY_BYTES
) -> tuple[int, str] | None:
    """(status, detail) refusing a request by its framing, or None to let it in: 411 for a body of
    no declared size, 413 for one over ``limit`` bytes (or a size that is no number)."""
    if not takes_body(method, route):
        return None
    if content_length is None:
        return 411, "a Content-Length header is required"
    if not (content_length.isascii() and content_length.isdigit()) or int(content_length) > limit:
        return 413, f"body larger than the limit of {limit} bytes"
    return None
