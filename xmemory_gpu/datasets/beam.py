"""BEAM (Tavakoli et al., "Beyond a Million Tokens", 2025; github.com/mohammadtavakoli78/BEAM, its
``chats/`` folder) converted to the role-chat shape of ``datasets.assistant_chats``, so the loop that
runs the engine on the project's own role chats runs on it too.

A BEAM split folder (``chats/500K``, ``chats/1M``, ``chats/10M``) holds one folder per conversation
with ``chat.json`` (batches of user-assistant turns; every message has a numeric ``id``, the first
of a batch a ``time_anchor`` such as ``"January-05-2024"``) and
``probing_questions/probing_questions.json`` (ten question types, each question with its
``source_chat_ids``: the ids of the messages it rests on). The converter maps:

- a message: its batch is its ``session``, its batch's anchor its timestamp;
- ``abstention`` -> ``unanswerable`` (never said); every other type -> ``first`` (first person);
- ``source_chat_ids`` -> ``evidence`` (message numbers); ``knowledge_update``'s ``original_info``
  -> ``stale`` and ``updated_info`` -> ``evidence`` and ``current``; ``contradiction_resolution``:
  both statements are evidence, the later one ``current`` and the earlier one ``stale``;
- the reference answer (``answer``, ``ideal_answer``, ``ideal_summary``, or the instruction or
  preference being tested) -> ``answer``, for evidence-word recall where ids are missing.

BEAM's 128K split (the ``100K`` folder) is reserved: :func:`load_beam` refuses it.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from .assistant_chats import Chat, Question
from .locomo import DatasetError

SPLITS = ("500K", "1M", "10M")
RESERVED = ("100K", "128K")  # BEAM's smallest split: never read

# question type -> the field holding the reference answer (the first present is taken)
_ANSWER_FIELDS = (
    "answer",
    "ideal_answer",
    "ideal_summary",
    "instruction_being_tested",
    "preference_being_tested",
)


@dataclass
class PublicQuestion(Question):
    """A role-chat question with what a public set adds: its ``category`` (the set's question type),
    its reference ``answer`` and, for a changed fact, ``current``: the message numbers of the newer
    value (``stale`` holds the older one's)."""

    category: str = ""
    answer: str = ""
    current: list[int] = field(default_factory=list)


@dataclass
class PublicChat(Chat):
    """A role chat whose messages carry their ``session`` number (``sessions[n]`` for turn n)."""

    sessions: list[int] = field(default_factory=list)
    source: str = ""

    def messages(self) -> list[dict]:
        out = super().messages()
        for m, s in zip(out, self.sessions):
            m["session"] = s
        return out


def check_not_reserved(path: str | Path, split: str | None = None) -> None:
    """Refuse BEAM's reserved 128K split, named as a split or as any folder of ``path``."""
    parts = {p.upper() for p in Path(path).parts}
    if (split or "").upper() in RESERVED or parts & set(RESERVED):
        raise DatasetError(
            f"{path}: BEAM's 100K/128K split is reserved and is never read; use 500K, 1M or 10M"
        )


def _anchor(text: object, where: str) -> str | None:
    if text is None:
        return None
    try:
        return datetime.strptime(str(text), "%B-%d-%Y").strftime("%Y-%m-%dT00:00:00Z")
    except ValueError as exc:
        raise DatasetError(f"{where}: time_anchor: expected Month-DD-YYYY, got {text!r:.40}") from exc


def _ids(v: object) -> list[int]:
    """Message ids of a ``source_chat_ids`` value: an int, a list (nested lists flattened) or a dict
    of those; anything else is no id."""
    if isinstance(v, bool):
        return []
    if isinstance(v, int):
        return [v]
    if isinstance(v, str) and v.strip().isdigit():
        return [int(v)]
    if isinstance(v, list):
        return [i for x in v for i in _ids(x)]
    if isinstance(v, dict):
        return [i for x in v.values() for i in _ids(x)]
    return []


def _turns(
    batches: object, where: str
) -> tuple[list[tuple[str, str, str | None]], list[int], dict[int, int]]:
    """(turns, session per turn, message id -> turn number) of a ``chat.json``."""
    if not isinstance(batches, list):
        raise DatasetError(f"{where}: expected a list of batches")
    turns: list[tuple[str, str, str | None]] = []
    sessions: list[int] = []
    number: dict[int, int] = {}
    for b, batch in enumerate(batches):
        if not isinstance(batch, dict) or not isinstance(batch.get("turns"), list):
            raise DatasetError(f"{where}: [{b}].turns: expected a list")
        ts = None
        for t, group in enumerate(batch["turns"]):
            for m in group if isinstance(group, list) else [group]:
                at = f"{where}: [{b}].turns[{t}]"
                if not isinstance(m, dict):
                    raise DatasetError(f"{at}: expected a message object")
                role, content = m.get("role"), m.get("content")
                if role not in ("user", "assistant"):
                    raise DatasetError(f"{at}: role: expected user or assistant, got {role!r:.40}")
                if not isinstance(content, str):
                    raise DatasetError(f"{at}: content: expected a string")
                ts = _anchor(m.get("time_anchor"), at) or ts
                if isinstance(m.get("id"), int):
                    number[m["id"]] = len(turns)
                turns.append((role, content, ts))
                sessions.append(b)
    return turns, sessions, number


def _question(kind: str, q: dict, number: dict[int, int], where: str) -> PublicQuestion:
    text = q.get("question")
    if not isinstance(text, str) or not text.strip():
        raise DatasetError(f"{where}: question: expected a non-empty string")
    answer = next((q[f] for f in _ANSWER_FIELDS if isinstance(q.get(f), str)), "")
    if kind == "abstention":
        return PublicQuestion(text, "unanswerable", category=kind)
    src = q.get("source_chat_ids")

    def known(ids: list[int]) -> list[int]:
        return sorted({number[i] for i in ids if i in number})

    evidence, stale, current = known(_ids(src)), [], []
    if kind == "knowledge_update" and isinstance(src, dict):
        current = known(_ids(src.get("updated_info")))
        stale = [n for n in known(_ids(src.get("original_info"))) if n not in current]
        evidence = current
    elif kind == "contradiction_resolution" and len(evidence) > 1:
        current, stale = [evidence[-1]], evidence[:-1]
    return PublicQuestion(text, "first", evidence, stale, category=kind, answer=answer, current=current)


def _conversation_dirs(path: Path) -> list[Path]:
    if (path / "chat.json").is_file():
        return [path]
    if not path.is_dir():
        raise DatasetError(f"{path}: no BEAM split folder or conversation folder (chat.json) there")
    dirs = [d for d in path.iterdir() if d.is_dir() and (d / "chat.json").is_file()]
    if not dirs:
        raise DatasetError(f"{path}: no conversation folders with chat.json")
    return sorted(dirs, key=lambda d: (0, int(d.name)) if d.name.isdigit() else (1, d.name))


def first_sessions(chat: PublicChat, sessions: int) -> PublicChat:
    """``chat`` cut to its first ``sessions`` sessions, with the questions still judged there: the
    never-said ones, and those whose evidence (stale and current included) all lies in the kept
    turns; a question without evidence ids is dropped (its answer may lie past the cut)."""
    n = sum(s < sessions for s in chat.sessions)
    keep = [
        q
        for q in chat.questions
        if q.kind == "unanswerable" or (q.evidence and max(q.evidence + q.stale + q.current) < n)
    ]
    return PublicChat(
        chat.user_id, chat.user_name, chat.turns[:n], keep, sessions=chat.sessions[:n], source=chat.source
    )


def load_beam(
    path: str | Path, limit: int | None = None, split: str | None = None, sessions: int | None = None
) -> list[PublicChat]:
    """The BEAM conversations under ``path`` (a split folder such as ``chats/500K``, or one
    conversation's folder), at most ``limit`` of them in numeric order; with ``sessions``, each cut
    to its first sessions (``first_sessions``). ``split`` names the split when the path does not
    (the reserved 100K/128K one is refused either way)."""
    check_not_reserved(path, split)
    if limit is not None and limit < 1:
        raise DatasetError(f"limit: expected a positive number of conversations, got {limit}")
    if sessions is not None and sessions < 1:
        raise DatasetError(f"sessions: expected a positive number of sessions, got {sessions}")
    root = Path(path)
    label = split or next((p for p in reversed(root.parts) if p.upper() in SPLITS), "beam")
    out = []
    for d in _conversation_dirs(root)[:limit]:
        where = str(d / "chat.json")
        try:
            batches = json.loads((d / "chat.json").read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            raise DatasetError(f"{where}: not JSON ({exc.msg} at line {exc.lineno})") from exc
        turns, session_of, number = _turns(batches, where)
        qpath = d / "probing_questions" / "probing_questions.json"
        try:
            probing = json.loads(qpath.read_text(encoding="utf-8"))
        except FileNotFoundError as exc:
            raise DatasetError(f"{qpath}: missing (each conversation needs its probing questions)") from exc
        if not isinstance(probing, dict):
            raise DatasetError(f"{qpath}: expected an object of question type -> list")
        questions = []
        for kind, qs in probing.items():
            if not isinstance(qs, list):
                raise DatasetError(f"{qpath}: {kind}: expected a list of questions")
            questions += [_question(kind, q, number, f"{qpath}: {kind}[{i}]") for i, q in enumerate(qs)]
        uid = f"beam-{re.sub(r'[^A-Za-z0-9]+', '', label.lower())}-{d.name}"
        chat = PublicChat(uid, None, turns, questions, sessions=session_of, source=f"beam:{label}")
        out.append(first_sessions(chat, sessions) if sessions is not None else chat)
    return out


__all__ = [
    "RESERVED",
    "SPLITS",
    "PublicChat",
    "PublicQuestion",
    "check_not_reserved",
    "first_sessions",
    "load_beam",
]
