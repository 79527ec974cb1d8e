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


def conversation_to_wire(conv: Conversation) -> str:
    """What a build reads of a conversation (its id, speakers, source and messages; not its
    questions) as one line of ASCII JSON, the messages as columns (``id``, ``speaker``, ``text``,
    ``session``, ``timestamp``): a build worker's or a Ray actor's input. Parsed, it reads back
    with :func:`conversation_from_wire` (``qa`` empty)."""
    ms = conv.messages
    return json.dumps(
        {
            "sample_id": conv.sample_id,
            "speakers": list(conv.speakers),
            "source": conv.source,
            "id": [m.id for m in ms],
            "speaker": [m.speaker for m in ms],
            "text": [m.text for m in ms],
            "session": [m.session for m in ms],
            "timestamp": [m.timestamp for m in ms],
        }
    )


def conversation_from_wire(d: dict) -> Conversation:
    """The conversation :func:`conversation_to_wire` wrote, from its parsed JSON (no questions)."""
    columns = (d["id"], d["speaker"], d["text"], d["session"], d["timestamp"])
    if len({len(c) for c in columns}) != 1:
        raise ValueError(f"conversation {d['sample_id']!r}: message columns of different lengths")
    return Conversation(d["sample_id"], tuple(d["speakers"]), list(map(Message, *columns)), [], d["source"])


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
