"""LoCoMo loader (Maharana et al., ACL 2024 format). Paths are parameters; nothing is bundled.

Each item: ``sample_id``, ``conversation`` (``speaker_a``, ``speaker_b``, ``session_N`` turn lists
with ``speaker``, ``dia_id``, ``text`` and optional ``blip_caption``, and ``session_N_date_time``
like ``"1:56 pm on 8 May, 2023"``) and ``qa``. Errors name the file, the sample and the field.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path

from ..memory.records import QA, Conversation, Message

_SESSION = re.compile(r"^session_(\d+)$")
DATE_FORMAT = "%I:%M %p on %d %B, %Y"


class DatasetError(ValueError):
    """A dataset file that does not have the expected shape; the message names file and field."""


@functools.lru_cache(maxsize=1 << 14)
def parse_datetime(text: str) -> float:
    """``"1:56 pm on 8 May, 2023"`` -> POSIX seconds (UTC), remembered per text (``strptime`` is slow).
    Raises ValueError."""
    return datetime.strptime(text.strip(), DATE_FORMAT).replace(tzinfo=timezone.utc).timestamp()


def _check_unicode(where: str, text: str) -> None:
    """Text that cannot be encoded (a lone surrogate from a broken escape) is refused here, not deep
    inside a tokenizer."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise DatasetError(f"{where}: not valid Unicode (lone surrogate at character {exc.start})") from None


def locomo_files(path: str | Path) -> list[Path]:
    """The files of ``path``: the file itself, or a folder's ``.json`` files (sorted)."""
    path = Path(path)
    if path.is_dir():
        files = sorted(p for p in path.iterdir() if p.suffix == ".json")
        if not files:
            raise DatasetError(f"{path}: folder holds no .json files")
        return files
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such file or folder")
    return [path]


def load_locomo(path: str | Path) -> list[Conversation]:
    """Conversations of a LoCoMo-format file, or of every ``.json`` file in a folder (sorted)."""
    return [c for f in locomo_files(path) for c in conversations_of(f, read_locomo_file(f))]


def read_locomo_file(f: Path) -> list:
    """File ``f`` read and parsed: its items, not yet checked (:func:`conversations_of`). A file that
    cannot be read, is not UTF-8, not JSON or not a list (or one object) raises ``DatasetError``."""
    try:
        raw = f.read_bytes()
    except OSError as exc:
        raise DatasetError(f"{f}: cannot read ({exc.strerror or exc})") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DatasetError(f"{f}: not UTF-8 text (byte {exc.start}: {exc.reason})") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise DatasetError(
            f"{f}: malformed JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}"
        ) from None
    except RecursionError:
        raise DatasetError(f"{f}: JSON nested too deeply") from None
    if isinstance(data, dict):
        data = [data]
    if not isinstance(data, list):
        raise DatasetError(f"{f}: expected a list of conversations, got {type(data).__name__}")
    return data


def conversations_of(f: Path, items: list) -> Iterator[Conversation]:
    """File ``f``'s parsed ``items`` checked and read one by one (a lazy sequence: a bulk build with
    workers hands out the first conversations while it checks the rest); an item that does not
    have the expected shape raises ``DatasetError`` naming file, sample and field."""
    for i, item in enumerate(items):
        yield _conversation(f, i, item)


def _conversation(f: Path, i: int, item: object) -> Conversation:
    where = f"{f}: item {i}"
    if not isinstance(item, dict):
        raise DatasetError(f"{where}: expected an object, got {type(item).__name__}")
    sid = item.get("sample_id")
    if not isinstance(sid, str) or not sid:
        raise DatasetError(f"{where}: sample_id: missing or not a string")
    where = f"{f}: sample {sid}"
    conv = item.get("conversation")
    if not isinstance(conv, dict):
        raise DatasetError(f"{where}: conversation: missing or not an object")
    speakers = (conv.get("speaker_a"), conv.get("speaker_b"))
    for key, sp in zip(("speaker_a", "speaker_b"), speakers):
        if not isinstance(sp, str) or not sp:
            raise DatasetError(f"{where}: conversation.{key}: missing or not a string")
    sessions = sorted((int(m.group(1)), k) for k in conv if (m := _SESSION.match(k)))
    if not sessions:
        raise DatasetError(f"{where}: conversation: no session_N lists (expected session_1, session_2, ...)")
    messages: list[Message] = []
    seen: set[str] = set()
    for n, key in sessions:
        turns = conv[key]
        if not isinstance(turns, list):
            raise DatasetError(f"{where}: conversation.{key}: expected a list of turns")
        dt_key = f"{key}_date_time"
        dt = conv.get(dt_key)
        if not isinstance(dt, str):
            raise DatasetError(
                f"{where}: conversation.{dt_key}: missing (expected like '1:56 pm on 8 May, 2023')"
            )
        try:
            ts = parse_datetime(dt)
        except ValueError:
            raise DatasetError(
                f"{where}: conversation.{dt_key}: cannot parse {dt!r} (expected like '1:56 pm on 8 May, 2023')"
            ) from None
        for j, turn in enumerate(turns):
            if not isinstance(turn, dict):
                raise DatasetError(f"{where}: conversation.{key}[{j}]: expected an object")
            mid = turn.get("dia_id")
            if not isinstance(mid, str) or not mid:
                raise DatasetError(f"{where}: conversation.{key}[{j}].dia_id: missing")
            if mid in seen:
                raise DatasetError(f"{where}: conversation.{key}[{j}].dia_id: duplicate id {mid!r}")
            seen.add(mid)
            text, caption = turn.get("text"), turn.get("blip_caption")
            for field, value in (("text", text), ("blip_caption", caption)):
                if value is not None and not isinstance(value, str):
                    raise DatasetError(
                        f"{where}: conversation.{key}[{j}].{field}: expected a string, got {type(value).__name__} {value!r:.40} (dia_id {mid})"
                    )
            text = text or ""  # a photo turn may have only its caption
            if isinstance(caption, str) and caption.strip():
                text = f"{text} [shares a photo: {caption.strip()}]".strip()
            if not text.strip():
                raise DatasetError(f"{where}: conversation.{key}[{j}].text: missing or empty (dia_id {mid})")
            if not text.isascii():  # only non-ASCII text can hold a lone surrogate
                _check_unicode(f"{where}: conversation.{key}[{j}].text", text)
            speaker = turn.get("speaker")
            if not isinstance(speaker, str) or not speaker:
                raise DatasetError(f"{where}: conversation.{key}[{j}].speaker: missing (dia_id {mid})")
            messages.append(Message(id=mid, speaker=speaker, text=text.strip(), session=n, timestamp=ts + j))
    qa = []
    qas = item.get("qa") or []
    if not isinstance(qas, list):
        raise DatasetError(f"{where}: qa: expected a list of questions")
    for j, q in enumerate(qas):
        if not isinstance(q, dict) or not isinstance(q.get("question"), str):
            raise DatasetError(f"{where}: qa[{j}].question: missing")
        _check_unicode(f"{where}: qa[{j}].question", q["question"])
        cat = q.get("category", 0)
        if isinstance(cat, bool) or not isinstance(cat, (int, str)) or not str(cat).strip().isdigit():
            raise DatasetError(f"{where}: qa[{j}].category: expected an integer 1-5, got {cat!r}")
        if not isinstance(q.get("evidence") or [], list):
            raise DatasetError(f"{where}: qa[{j}].evidence: expected a list of dia_ids")
        ans = q.get("answer")
        adv = q.get("adversarial_answer")
        qa.append(
            QA(
                question=q["question"],
                answer=None if ans is None else str(ans),
                evidence=[str(e) for e in (q.get("evidence") or [])],
                category=int(cat),
                adversarial_answer=None if adv is None else str(adv),
            )
        )
    return Conversation(sample_id=sid, speakers=speakers, messages=messages, qa=qa, source=str(f))  # type: ignore[arg-type]
