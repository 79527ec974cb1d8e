"""Text records of the hierarchy: messages, episodes, semantic nodes, themes, and conversations.

Every unit carries provenance: the message ids (LoCoMo ``dia_id``) it came from. Timestamps are
POSIX seconds (float, UTC) or ``None`` when unknown.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field


@dataclass
class Message:
    """One turn of a conversation. ``id`` is the dataset's message id (LoCoMo ``dia_id``)."""

    id: str
    speaker: str
    text: str
    session: int
    timestamp: float | None = None


@dataclass
class QA:
    """A question about a conversation, with its evidence message ids and LoCoMo category."""

    question: str
    answer: str | None
    evidence: list[str]
    category: int
    adversarial_answer: str | None = None


@dataclass
class Conversation:
    """One conversation (one memory's source): messages in order, plus its questions."""

    sample_id: str
    speakers: tuple[str, str]
    messages: list[Message]
    qa: list[QA] = field(default_factory=list)
    source: str = ""  # file the conversation came from, for error messages


def conversation_to_json(conv: Conversation) -> str:
    """A conversation as JSON, its dataclass fields (ASCII: non-ASCII text escaped); a build worker's
    or a Ray actor's input. :func:`conversation_from_json` reads it back equal."""
    return json.dumps({"sample_id": conv.sample_id, "speakers": list(conv.speakers),
                       "messages": [vars(m) for m in conv.messages], "qa": [vars(q) for q in conv.qa],
                       "source": conv.source})


def conversation_from_json(text: str | bytes) -> Conversation:
    """The conversation :func:`conversation_to_json` wrote."""
    return conversation_from_dict(json.loads(text))


def conversation_from_dict(d: dict) -> Conversation:
    """A conversation from the parsed JSON of :func:`conversation_to_json`."""
    return Conversation(d["sample_id"], tuple(d["speakers"]), [Message(**m) for m in d["messages"]],
                        [QA(**q) for q in d["qa"]], d["source"])


@dataclass
class Episode:
    """A contiguous block of messages kept intact. ``message_ids`` in conversation order."""

    id: int
    title: str
    text: str
    message_ids: list[str]
    start: float | None = None
    end: float | None = None


@dataclass
class SemanticNode:
    """A reusable fact decoupled from episodes; may have several sources after de-duplication."""

    id: int
    text: str
    episode_ids: list[int]
    message_ids: list[str]
    timestamp: float | None = None


@dataclass
class Theme:
    """A group of semantic nodes. ``id`` is stable across splits and merges (see lineage)."""

    id: int
    summary: str
    parents: list[int] = field(default_factory=list)  # lineage: themes this one came from


def session_windows(messages: list, size: int) -> list[tuple[int, int]]:
    """Spans ``(start, end)`` of at most ``size`` consecutive messages that never cross a session."""
    out, start = [], 0
    n = len(messages)
    for i in range(1, n + 1):
        if i == n or i - start == size or messages[i].session != messages[start].session:
            out.append((start, i))
            start = i
    return out
