"""One long synthetic user-assistant chat (``generate_long_chats``) as the turns an app adds."""

from __future__ import annotations

from xmemory_gpu.datasets.synthetic import generate_long_chats


def long_chat_turns(
    seed: int, target_tokens: int, n: int | None = None, *, sessions: bool = True, ids: bool = False
) -> list[dict]:
    """The chat's first ``n`` turns (all: None) in order, each ``{"role", "content"}`` with its
    ``session`` number; ``ids``: with ids ``m0, m1, ...`` and times a minute apart (two engines fed
    them hold the same columns)."""
    conv = generate_long_chats(1, seed=seed, target_tokens=target_tokens)[0]["conversation"]
    keys = sorted(
        (k for k in conv if k.startswith("session_") and not k.endswith("date_time")),
        key=lambda s: int(s[8:]),
    )
    turns = [
        {
            "role": "user" if t["speaker"] == conv["speaker_a"] else "assistant",
            "content": t["text"],
            **({"session": int(k[8:])} if sessions else {}),
        }
        for k in keys
        for t in conv[k]
    ][:n]
    if ids:
        turns = [{**t, "id": f"m{i}", "timestamp": 1_700_000_000 + 60 * i} for i, t in enumerate(turns)]
    return turns
