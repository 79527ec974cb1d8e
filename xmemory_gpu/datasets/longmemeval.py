"""LongMemEval (Wu et al., ICLR 2025; github.com/xiaowu0162/LongMemEval, MIT licence) converted to
the role-chat shape of ``datasets.assistant_chats`` (``beam.PublicChat``).

Every LongMemEval instance is one question over its own chat history (``haystack_sessions``: lists
of ``{"role", "content", "has_answer"?}`` turns, dated by ``haystack_dates`` such as
``"2023/05/20 (Sat) 00:31"``), so each becomes one chat with one question. Accepted inputs: the
official file (a JSON list of instances: ``longmemeval_s_cleaned.json``, ``longmemeval_oracle.json``)
or a folder of JSON files holding one instance each (taken in name order).

Mapping: a question id ending in ``_abs`` -> ``unanswerable`` (abstention: never said), any other
-> ``first``; turns marked ``has_answer`` -> ``evidence``; for ``knowledge-update``, marked turns of
the answer session asked for are ``evidence`` and ``current``, those of the others ``stale`` (the
session asked for: the latest, or an earlier one whose marked turns hold more of the answer's words:
``asked_session``); ``answer`` -> ``answer`` (questions without a marked turn are scored by
evidence-word recall). ``--limit`` subsets are taken round-robin over question types
(``stratified``), so a small one still has never-said questions.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path

from ..text import content_words
from .beam import PublicChat, PublicQuestion
from .locomo import DatasetError

_DATE = re.compile(r"^\s*(\d{4})/(\d{2})/(\d{2})(?:\s*\(\w+\))?\s*(\d{2}):(\d{2})")


def _stamp(text: object, where: str) -> str | None:
    if text is None:
        return None
    m = _DATE.match(str(text))
    if not m:
        raise DatasetError(f"{where}: expected a date like 2023/05/20 (Sat) 00:31, got {text!r:.40}")
    y, mo, d, h, mi = (int(x) for x in m.groups())
    return datetime(y, mo, d, h, mi).strftime("%Y-%m-%dT%H:%M:00Z")


def asked_session(order: list[int], marked: dict[int, list[int]], turns: list[tuple], answer: str) -> int:
    """The answer session (``order``: oldest first) whose value a knowledge-update question asks for:
    the one whose marked turns hold the most of the reference answer's content words, the latest on
    a tie. Most ask for the latest value; some ask for an earlier one ("Where do I initially keep ...",
    "What was my previous personal best ...?"), whose answer is the earlier session's."""
    want = set(content_words(answer))
    held = [len(want & {w for n in marked[s] for w in content_words(turns[n][1])}) for s in order]
    return order[max(range(len(order)), key=lambda i: (held[i], i))]


def convert(item: object, where: str) -> PublicChat:
    """One LongMemEval instance as a chat with its one question."""
    if not isinstance(item, dict):
        raise DatasetError(f"{where}: expected an instance object")
    for k in ("question_id", "question", "haystack_sessions"):
        if k not in item:
            raise DatasetError(f"{where}: {k}: missing")
    qid, sessions = str(item["question_id"]), item["haystack_sessions"]
    if not isinstance(sessions, list):
        raise DatasetError(f"{where}: haystack_sessions: expected a list of sessions")
    dates = item.get("haystack_dates") or [None] * len(sessions)
    sids = item.get("haystack_session_ids") or [str(i) for i in range(len(sessions))]
    if len(dates) != len(sessions) or len(sids) != len(sessions):
        raise DatasetError(f"{where}: haystack_dates / haystack_session_ids: not one per session")
    turns: list[tuple[str, str, str | None]] = []
    session_of: list[int] = []
    marked: dict[int, list[int]] = {}  # session -> its has_answer turn numbers
    for s, (sess, date) in enumerate(zip(sessions, dates)):
        at = f"{where}: haystack_sessions[{s}]"
        if not isinstance(sess, list):
            raise DatasetError(f"{at}: expected a list of turns")
        ts = _stamp(date, f"{where}: haystack_dates[{s}]")
        for t, m in enumerate(sess):
            if not isinstance(m, dict) or m.get("role") not in ("user", "assistant"):
                raise DatasetError(f"{at}[{t}]: role: expected user or assistant")
            if not isinstance(m.get("content"), str):
                raise DatasetError(f"{at}[{t}]: content: expected a string")
            if m.get("has_answer") is True:
                marked.setdefault(s, []).append(len(turns))
            turns.append((m["role"], m["content"], ts))
            session_of.append(s)
    kind = str(item.get("question_type", ""))
    evidence = sorted(n for ns in marked.values() for n in ns)
    stale: list[int] = []
    current: list[int] = []
    if kind == "knowledge-update" and len(marked) > 1:
        answer_sessions = set(item.get("answer_session_ids") or [sids[s] for s in marked])
        order = sorted((s for s in marked if sids[s] in answer_sessions), key=lambda s: (str(dates[s]), s))
        if len(order) > 1:
            asked = asked_session(order, marked, turns, str(item.get("answer", "")))
            current = marked[asked]
            stale = [n for s in order if s != asked for n in marked[s]]
            evidence = current
    unanswerable = qid.endswith("_abs")
    q = PublicQuestion(
        str(item["question"]),
        "unanswerable" if unanswerable else "first",
        [] if unanswerable else evidence,
        [] if unanswerable else stale,
        category=("abstention:" if unanswerable else "") + kind,
        answer="" if unanswerable else str(item.get("answer", "")),
        current=[] if unanswerable else current,
    )
    uid = "lme-" + re.sub(r"[^A-Za-z0-9_]+", "", qid)
    return PublicChat(uid, None, turns, [q], sessions=session_of, source="longmemeval")


def _group(item: object) -> str:
    """The stratum of an instance: ``abstention`` for a never-said question, else its type."""
    if not isinstance(item, dict):
        return ""
    return (
        "abstention"
        if str(item.get("question_id", "")).endswith("_abs")
        else str(item.get("question_type", ""))
    )


def stratified(groups: Sequence[str], limit: int | None) -> list[int]:
    """Positions of the first ``limit`` items taken round-robin over their groups (``abstention``
    first, then groups in order of first appearance; items in input order): a subset that holds
    every question type."""
    if limit is None or limit >= len(groups):
        return list(range(len(groups)))
    queues: dict[str, list[int]] = {"abstention": []}  # never-said first: a small subset still has some
    for i, g in enumerate(groups):
        queues.setdefault(g, []).append(i)
    out: list[int] = []
    while len(out) < limit:
        for q in queues.values():
            if q and len(out) < limit:
                out.append(q.pop(0))
    return sorted(out)


def _read(f: Path) -> object:
    try:
        x = json.loads(f.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise DatasetError(f"{f}: not JSON ({exc.msg} at line {exc.lineno})") from exc
    return x[0] if isinstance(x, list) and len(x) == 1 else x


def load_longmemeval(path: str | Path, limit: int | None = None) -> list[PublicChat]:
    """LongMemEval instances at ``path`` (the official JSON list, or a folder of one-instance JSON
    files in name order), each a chat with its one question; with ``limit``, that many taken
    round-robin over the question types (abstention as one more type, ``stratified``)."""
    if limit is not None and limit < 1:
        raise DatasetError(f"limit: expected a positive number of instances, got {limit}")
    root = Path(path)
    if root.is_dir():
        files = sorted(root.glob("*.json"))
        if not files:
            raise DatasetError(f"{root}: no .json instance files")
        keep = stratified([_group(_read(f)) for f in files], limit)
        return [convert(_read(files[i]), str(files[i])) for i in keep]
    try:
        data = json.loads(root.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise DatasetError(f"{root}: no such file or folder") from exc
    except json.JSONDecodeError as exc:
        raise DatasetError(f"{root}: not JSON ({exc.msg} at line {exc.lineno})") from exc
    if not isinstance(data, list):
        raise DatasetError(f"{root}: expected a JSON list of instances")
    keep = stratified([_group(x) for x in data], limit)
    return [convert(data[i], f"{root}: [{i}]") for i in keep]


__all__ = ["convert", "load_longmemeval", "stratified"]
