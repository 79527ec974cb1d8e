"""API keys, the same at every server (the HTTP service, the MCP server's HTTP transport, the Ray
Serve ingress): ``Authorization: Bearer KEY`` (the scheme in any case, the key stripped of spaces),
compared with every configured key in constant time; a key may be bound to a set of user ids, and
then reaches those users only. Standard library only (the MCP server imports it without FastAPI)."""

from __future__ import annotations

import hmac

Keys = dict[str, frozenset[str] | None]  # API key -> the user ids it may access (None: all)
MISSING = "missing API key (Authorization: Bearer KEY)"
INVALID = "invalid API key"
CHALLENGE = {"WWW-Authenticate": "Bearer"}  # the headers of a 401


def bearer_token(authorization: str | None) -> str | None:
    """The key of an ``Authorization`` header's value ``Bearer KEY``; None without one."""
    scheme, _, token = (authorization or "").partition(" ")
    token = token.strip()
    return token if scheme.lower() == "bearer" and token else None


def key_users(keys: Keys, token: str | None) -> tuple[bool, frozenset[str] | None]:
    """(whether ``token`` is one of ``keys``, the user ids it may access: None for all); every key
    is compared, each in constant time."""
    found, users = False, None
    if token is None:
        return found, users
    for key, allowed in keys.items():
        if hmac.compare_digest(key.encode(), token.encode()):
            found, users = True, allowed
    return found, users


def authenticate(keys: Keys, authorization: str | None) -> tuple[str | None, frozenset[str] | None]:
    """(why a request with this ``Authorization`` value is refused: ``MISSING``, ``INVALID``, or None
    for a valid key; the user ids the key may access, None for all)."""
    token = bearer_token(authorization)
    found, users = key_users(keys, token)
    if token is None:
        return MISSING, None
    return (None, users) if found else (INVALID, None)


def every_scope(keys: Keys, authorization: str | None) -> bool:
    """Whether the request's key may access every scope (store-wide counts, metrics, reset)."""
    return key_users(keys, bearer_token(authorization)) == (True, None)


def user_refusal(allowed: frozenset[str] | None, user_id: str | None) -> str | None:
    """Why a key that may access ``allowed`` (None: every user) may not reach ``user_id``'s memory
    (a one-line error naming ``user_id``), or None when it may."""
    if allowed is None:
        return None
    if user_id is None:
        return "user_id: required with this API key (it is bound to user ids)"
    if user_id not in allowed:
        return f"user_id: this API key may not access user {user_id!r:.80}"
    return None
