"""Bank rows -> retrieved units -> the answer context (the paper's format: semantic memories,
then episodic memories, each with its date), and the token budget: counting, fitting, trimming.

Units are built from bank columns by **global** row; a unit's ``id`` is the record id within its
memory (theme id, semantic id, episode id, message id, chunk or session number).
"""

from __future__ import annotations

import re
import threading
from collections import Counter
from collections.abc import Iterable
from dataclasses import replace
from datetime import datetime, timezone
from typing import Any

import numpy as np

from ..memory.bank import Bank
from ..memory.hierarchy import time_or_none
from ..text import fmt_date, is_assistant
from ..tokens import TokenCounter
from .dates import annotate
from .result import RetrievedUnit

SECTIONS = {
    "semantic": "Semantic memories:",
    "episodic": "Episodic memories:",
}  # the context's section headers
HEADER_ALLOWANCE = 12  # tokens of the section headers and dates, before the exact check
MIN_PASSAGE_TOKENS = 24  # a passage is cut to what is left of the budget only when at least this much is left
MIN_CUT_TOKENS = 12  # the room left once every unit was tried goes to a cut unit of at least this many tokens


def _ids(bank: Bank, rows: np.ndarray) -> list[str]:
    return [bank.msg["id"][int(r)] for r in rows if r >= 0]


class MessageLines:
    """Per global message row: (``speaker: text`` line, message id, timestamp or None), made on each
    read from the columns of the bank at construction. Not kept: a line is one concatenation, and
    keeping them would hold a second copy of the text of every message a search touched."""

    __slots__ = ("_ids", "_speaker", "_text", "_time")

    def __init__(self, bank: Bank) -> None:
        msg = bank.msg
        self._ids, self._speaker, self._text, self._time = msg["id"], msg["speaker"], msg["text"], msg["time"]

    def __getitem__(self, r: int) -> tuple[str, Any, float | None]:
        return f"{self._speaker[r]}: {self._text[r]}", self._ids[r], time_or_none(self._time[r])


def message_rows(bank: Bank) -> MessageLines:
    """Per global message row: (``speaker: text`` line, message id, timestamp or None)."""
    return MessageLines(bank)


def episode_rows(bank: Bank):
    """Per global episode row: (text, source message ids, their line ends or None, start or None, unit id)."""
    e, lines = bank.epi, message_rows(bank)

    def fn(row: int) -> tuple:
        text = e["text"][row]
        got = [lines[int(r)] for r in e["msgs"][row] if r >= 0]
        ls = [g[0] for g in got]
        ends = _line_ends(ls) if "\n".join(ls) == text else None
        return text, [g[1] for g in got], ends, time_or_none(e["start"][row]), str(int(e["id"][row]))

    return e.rows_cache("retrieve.episode", fn, (bank.msg,))


def semantic_rows(bank: Bank):
    """Per global semantic row: (text, source message ids, time or None, unit id)."""
    s, ids = bank.sem, bank.msg["id"]

    def fn(row: int) -> tuple:
        return (
            s["text"][row],
            [ids[int(r)] for r in s["msgs"][row] if r >= 0],
            time_or_none(s["time"][row]),
            str(int(s["id"][row])),
        )

    return s.rows_cache("retrieve.semantic", fn, (bank.msg,))


def assistant_said(bank: Bank):
    """Per global semantic row: whether only an assistant role's turns (``text.is_assistant``) said
    the statement, so that it is the assistant's answer, not what the user said."""
    s, msg = bank.sem, bank.msg

    def fn(row: int) -> bool:
        src = [int(r) for r in s["msgs"][row] if r >= 0]
        return bool(src) and all(is_assistant(msg["speaker"][r]) for r in src)

    return s.rows_cache("retrieve.assistant_said", fn, (bank.msg,))


def theme_unit(bank: Bank, row: int, score: float, rel: float) -> RetrievedUnit:
    """A selected theme: its summary; provenance is empty (its facts arrive through its semantics)."""
    th = bank.theme
    return RetrievedUnit(
        "theme",
        str(int(th["id"][row])),
        th["summary"][row],
        0,
        score,
        [],
        None,
        {"relevance": rel, "coverage_value": score},
    )


def semantic_unit(bank: Bank, row: int, score: float, scores: dict[str, float], rows=None) -> RetrievedUnit:
    """``rows``: ``semantic_rows(bank)`` when the caller builds many (synced once)."""
    text, ids, ts, uid = (rows or semantic_rows(bank))[row]
    return RetrievedUnit("semantic", uid, text, 0, score, list(ids), ts, scores)


def _line_ends(lines: list[str]) -> list[int]:
    """Character offsets where each line ends in ``"\n".join(lines)``."""
    ends, at = [], -1
    for line in lines:
        at += 1 + len(line)
        ends.append(at)
    return ends


def episode_unit(bank: Bank, row: int, score: float, scores: dict[str, float], rows=None) -> RetrievedUnit:
    """An episode; its ``message_ends`` are set when its text is its messages' lines (the LLM-free builder).
    ``rows``: ``episode_rows(bank)`` when the caller builds many (synced once)."""
    text, ids, ends, ts, uid = (rows or episode_rows(bank))[row]
    return RetrievedUnit(
        "episode",
        uid,
        text,
        0,
        score,
        list(ids),
        ts,
        scores,
        message_ends=None if ends is None else list(ends),
    )


def message_line_at(bank: Bank, row: int) -> str:
    """One message as ``speaker: text``."""
    return f"{bank.msg['speaker'][row]}: {bank.msg['text'][row]}"


def message_unit(
    line: tuple, score: float, scores: dict[str, float], kind: str = "message", uid: str | None = None
) -> RetrievedUnit:
    """One message as a unit from its ``message_rows`` entry ``(line, id, timestamp)``; ``uid``
    defaults to the message id."""
    text, mid, ts = line
    return RetrievedUnit(
        kind, str(mid) if uid is None else uid, text, 0, score, [mid], ts, scores, message_ends=[len(text)]
    )


def messages_unit(
    kind: str,
    uid: str,
    bank: Bank,
    rows: np.ndarray | list[int],
    score: float,
    scores: dict[str, float],
    lines=None,
) -> RetrievedUnit:
    """A block of raw messages by global rows (a naive-RAG chunk, a TIR session, a turn). ``lines``:
    ``message_rows(bank)`` when the caller builds many."""
    lines = lines or message_rows(bank)
    if len(rows) == 1:
        return message_unit(lines[int(rows[0])], score, scores, kind, uid)
    got = [lines[int(r)] for r in rows]
    ls = [g[0] for g in got]
    return RetrievedUnit(
        kind,
        uid,
        "\n".join(ls),
        0,
        score,
        [g[1] for g in got],
        got[0][2] if got else None,
        scores,
        message_ends=_line_ends(ls),
    )


def context_pieces(units: list[RetrievedUnit], *, resolve_dates: bool = False) -> list[tuple[str, str]]:
    """The answer context as (separator, piece) pairs: semantic memories (statements), then
    episodic memories (episodes, chunks, sessions, messages), each with its date. Separators are
    whitespace, so a tokenizer that pre-splits on whitespace counts the context as the sum of its
    pieces. ``resolve_dates``: relative times in each unit's text are followed by their dates,
    worked out from the unit's own timestamp (the answer prompt)."""

    def body(u: RetrievedUnit) -> str:
        if not resolve_dates or u.timestamp is None:
            return u.text
        return annotate(u.text, datetime.fromtimestamp(u.timestamp, tz=timezone.utc).date())

    sem = [u for u in units if u.type == "semantic"]
    epi = [u for u in units if u.type not in ("semantic", "theme")]
    out: list[tuple[str, str]] = []
    if sem:
        out.append(("", SECTIONS["semantic"]))
        for u in sem:
            out += [("\n", f"- ({fmt_date(u.timestamp)})"), (" ", body(u))]
    if epi:
        out.append(("\n\n" if sem else "", SECTIONS["episodic"]))
        for i, u in enumerate(epi):
            out += [("\n" if i == 0 else "\n\n", f"[{fmt_date(u.timestamp)}]"), ("\n", body(u))]
    return out


def assemble(units: list[RetrievedUnit]) -> str:
    """The context a result carries (dates as written)."""
    return "".join(sep + piece for sep, piece in context_pieces(units))


def answer_context(units: list[RetrievedUnit]) -> str:
    """The context an answer prompt gets: relative times resolved against each unit's date."""
    return "".join(sep + piece for sep, piece in context_pieces(units, resolve_dates=True))


class Deferred:
    """Parts of the unit before it, not built yet (``passages.Parts``): under a budget the fit builds
    them (``expand``: units and further deferred groups, in context order) only where that unit did
    not fit, and otherwise ``skip``s them unbuilt; with no budget they are skipped (parts are
    budget-only). ``level``: the part level of its first units; ``levels``: every part level its
    units would have. ``floor`` (optional, no arguments): for the messages its units would come
    from, nested groups included, pairs (timestamp, a lower bound on the tokens of every unit's
    text under an additive counter: ``word_floor``); the fit leaves a group unbuilt where these show
    that none of its units could be taken. Either call is made once, in the units' order."""

    __slots__ = ("level", "levels", "expand", "skip", "floor")

    def __init__(self, level: int, levels: tuple[int, ...], expand, skip, floor=None) -> None:
        self.level, self.levels, self.expand, self.skip, self.floor = level, levels, expand, skip, floor


_WORD_WITH_ALNUM = re.compile(r"[^\W_][^ ]*")  # from a word's first letter or digit to its end


def word_floor(text: str) -> int:
    """A lower bound on ``text``'s tokens under an additive counter: its space-separated words that
    hold a letter or digit (a tokenizer keeps at least one token for each)."""
    return len(_WORD_WITH_ALNUM.findall(text))


def _part_level(u) -> int:
    """The part level of a unit or of a deferred group's first units."""
    return u.level if type(u) is Deferred else u.part


def as_part(u: RetrievedUnit, level: int = 1) -> RetrievedUnit:
    """Mark ``u`` as a part of the nearest unit before it one level up (level 0: whole units): used
    under a budget only where that unit did not fit."""
    u.part = level
    return u


def as_fill(u: RetrievedUnit) -> RetrievedUnit:
    """Mark ``u`` as budget fill: taken only under a budget, while it fits."""
    u.fill = True
    return u


def _section(u: RetrievedUnit) -> str:
    """The context section a (non-theme) unit stands in (``context_pieces``)."""
    return "semantic" if u.type == "semantic" else "episodic"


def _half_shown(shown: str, full: str) -> bool:
    return 2 * len(shown.split()) >= len(full.split())


def shown_messages(u: RetrievedUnit, shown: str) -> list[str]:
    """The source messages that ``shown``, the start of ``u``'s text, still holds, so that a cut
    unit is credited only with the evidence it shows: a message counts when its text in the unit
    shows whole or at least half of its words. A block of raw messages (``message_ends`` set:
    episodes of the LLM-free builder, chunks, sessions, single messages) is counted message by
    message; a statement counts for its sources as a whole; a passage is already a part of its
    message and keeps it. Any other block of several messages (an LLM-written episode) cannot be
    told apart and keeps none."""
    if u.passage:
        return list(u.message_ids)
    if u.message_ends is None:
        if u.type == "semantic" or len(u.message_ids) <= 1:
            return list(u.message_ids) if _half_shown(shown, u.text) else []
        return []
    out, start = [], 0
    for mid, end in zip(u.message_ids, u.message_ends):
        if end <= len(shown):
            out.append(mid)
        else:
            if _half_shown(shown[start:], u.text[start:end]):
                out.append(mid)
            break
        start = end + 1
    return out


def _whole_units(units: list) -> list[RetrievedUnit]:
    """With no budget: every unit but the budget-only ones (parts and fill); deferred parts skipped."""
    out = []
    for u in units:
        if type(u) is Deferred:
            u.skip()
        elif not (u.part or u.fill):
            out.append(u)
    return out


COUNTS_MAX = 1 << 16  # texts whose token counts a TokenBudget keeps (then it starts again: bounded memory)
# words whose token counts it keeps (a word is short: about 30 MB when full): one user's long chat
# holds a few hundred thousand distinct words (nine public 1M-token conversations: 234,000)
WORDS_MAX = 1 << 18
PRIMED_MAX = WORDS_MAX - WORDS_MAX // 8  # words ``prime`` counts ahead at most (the rest: room for searches)


class TokenBudget:
    """Token counts in one tokenizer (cached: memories' texts recur across queries; at most
    ``COUNTS_MAX`` texts and ``WORDS_MAX`` words, so a long-running engine's cache does not grow with
    every memory it ever searched) and the fitting of units into a budget."""

    def __init__(self, tokens: TokenCounter) -> None:
        self.tokens = tokens
        self._cache: dict[str, int] = {}
        self._words: dict[str, int] = {}  # with an additive counter: tokens of each space-separated word met
        self._lock = threading.Lock()
        self._heads: dict[
            tuple[bool, float | None], int
        ] = {}  # (statement?, timestamp) -> tokens of its date line
        self._sections: dict[str, int] = {}  # section -> tokens of its header

    @property
    def name(self) -> str:
        return self.tokens.name

    def count(self, texts: list[str]) -> list[int]:
        with (
            self._lock
        ):  # concurrent searches share the caches: a clear must not fall between a check and a read
            new = list({t: None for t in texts if t not in self._cache})
            if new:
                if len(self._cache) + len(new) > COUNTS_MAX:
                    self._cache.clear()
                    new = list(dict.fromkeys(texts))
                self._cache.update(zip(new, self._count_new(new)))
            return [self._cache[t] for t in texts]

    def _count_new(self, texts: list[str]) -> list[int]:
        """Tokens of texts not counted yet. With an additive counter, the sum over each text's words
        split at spaces (whitespace to every additive tokenizer, so the sum is the text's count exactly),
        each distinct word tokenized once: a long memory's episodes, messages and passages repeat the
        same words, and the first search of a long chat tokenized 528 K characters for one query."""
        if not self.tokens.additive:
            return self.tokens.count(texts)
        split = [t.split(" ") for t in texts]
        words = self._words
        todo = list({w: None for ws in split for w in ws if w not in words})
        if todo:
            if len(words) + len(todo) > WORDS_MAX:
                words.clear()
                todo = list({w: None for ws in split for w in ws})
            words.update(zip(todo, self.tokens.count(todo)))
        return [sum(map(words.__getitem__, ws)) for ws in split]

    def prime(self, texts: Iterable[str]) -> int:
        """Count ahead the words of ``texts`` (a memory's, before its first search) not counted yet,
        while the word cache holds fewer than ``PRIMED_MAX`` (the most frequent first when they do not
        all fit; the rest is left to searches, since a full cache starts again), so a search
        tokenizes fewer words new to it. Returns the words counted (none with a counter that is not
        additive, whose cache holds whole texts)."""
        if not self.tokens.additive:
            return 0
        words, texts = self._words, list(texts)
        seen: set[str] = set()
        for t in texts:
            seen.update(t.split(" "))
        todo = [w for w in seen if w not in words]
        room = PRIMED_MAX - len(words)
        if len(todo) > room:  # the most frequent of them
            freq: Counter[str] = Counter()
            for t in texts:
                freq.update(t.split(" "))
            todo = sorted(todo, key=lambda w: (-freq[w], w))[: max(room, 0)]
        if not todo:
            return 0
        counts = self.tokens.count(todo)  # outside the lock: searches go on meanwhile
        with self._lock:
            room = PRIMED_MAX - len(words)  # a search may have counted words since
            take = list(zip(todo, counts))[: max(room, 0)]
            words.update(take)
        return len(take)

    def fit(self, units: list[RetrievedUnit], budget: int | None) -> list[RetrievedUnit]:
        """Take units in order (themes are free: they are not part of the answer context).

        With no budget: every unit but the budget-only ones (parts and fill). Under a budget: a
        unit that does not fit is skipped and its parts (the units after it one ``part`` level
        deeper: an episode's messages, a message's passages, most relevant first) are tried in its
        place; the parts of a unit that was taken are skipped; fill units are taken while they fit.
        A unit whose every source message already stands whole in the context (an episode or
        message holding its text) is skipped: the same text is not paid for twice.

        The room left once every unit was tried (counted exactly with an additive counter: texts,
        date lines and the section headers the context has, so the allowance for the headers is
        not lost) goes to the units that were skipped for not fitting, in order: whole where one
        fits there, else the first that does not is cut to it at a word boundary (a unit with parts
        is passed over: its parts were tried in its place). The units taken in the first pass are
        the same as without it.

        A group of parts whose every unit is longer than the room left, with too little room to cut
        one (``Deferred.floor``), is not built: a search of a long memory, its budget spent, would
        otherwise build thousands of parts only to skip them. The units taken are the same."""
        if budget is None:
            return _whole_units(units)
        units = list(units)
        taken: dict[
            tuple[int, int], RetrievedUnit
        ] = {}  # (position in ``units``, in a group built late) -> unit
        total = HEADER_ALLOWANCE
        used = 0  # what the taken units add to the context: texts, date lines, section headers
        opened: set[str] = set()  # context sections with a unit in them (their header is paid)
        whole: set[str] = set()  # message ids whose full text is in the context
        handled: dict[int, bool] = {}  # level -> the last unit there was taken, covered or not needed
        skipped: list[int] = []  # units tried that did not fit, and groups left unbuilt (none could fit)
        i = -1
        while i + 1 < len(units):
            i += 1
            u = units[i]
            if type(u) is Deferred:  # parts: skipped unbuilt where their unit is in (as each part would be)
                if handled.get(u.level - 1, True):
                    handled.update(dict.fromkeys(u.levels, True))
                    u.skip()
                    del units[i]
                    i -= 1
                elif self._out_of_reach(u, budget - total, MIN_PASSAGE_TOKENS):
                    u.skip()  # every unit would be skipped: left unbuilt unless the room left reaches it
                    skipped.append(i)
                else:
                    units[i : i + 1] = self._expand(u)
                    i -= 1
                continue
            if u.type == "theme":
                taken[i, 0] = u
                continue
            lvl = u.part
            if lvl and handled.get(lvl - 1, True):
                handled[lvl] = True  # its parent is in the context (or was never needed)
                continue
            if u.message_ids and whole.issuperset(u.message_ids):
                handled[lvl] = True
                continue
            if total + u.tokens > budget and not u.passage:  # does not fit whatever its date line costs
                handled[lvl] = False
                skipped.append(i)
                continue
            head = self._head(u)
            if total + head + u.tokens > budget and u.passage and budget - total - head >= MIN_PASSAGE_TOKENS:
                u = self._cut(u, budget - total - head)  # the last passage that fits only in part: its head
            handled[lvl] = total + head + u.tokens <= budget
            if handled[lvl]:
                taken[i, 0] = u
                total += head + u.tokens
                used += head + self._header(u, opened) + u.tokens
                opened.add(_section(u))
                if u.type != "semantic" and not u.passage:
                    whole.update(u.message_ids)
            else:
                skipped.append(i)
        left = budget - (used if self.tokens.additive else total)

        def tried():
            """The skipped units in order, each with its key and the unit after it; a group left
            unbuilt is built here only when the room left could take one of its units."""
            for i in skipped:
                u, after = units[i], units[i + 1] if i + 1 < len(units) else None
                if type(u) is not Deferred:
                    yield (i, 0), u, after
                elif not self._out_of_reach(u, left, MIN_CUT_TOKENS):
                    built = self._resolve([u])
                    for j, v in enumerate(built):
                        yield (i, j), v, built[j + 1] if j + 1 < len(built) else after

        for key, u, after in tried():  # the room left: the first skipped unit that can be cut to it
            if after is not None and _part_level(after) > u.part:
                continue  # its parts were tried in its place (a cut one would be its text's start, not its best part)
            if u.tokens > left and left < MIN_CUT_TOKENS:
                continue  # neither whole nor cut: its room (``left`` less its date line and header) is smaller still
            if u.message_ids and whole.issuperset(u.message_ids):
                continue  # its text came in whole with a later unit
            room = left - self._head(u) - self._header(u, opened)
            if u.tokens <= room:  # kept out by the allowance only: whole, and the rest goes on
                taken[key], left = u, room - u.tokens
                opened.add(_section(u))
                if u.type != "semantic" and not u.passage:
                    whole.update(u.message_ids)
                continue
            cut = self._cut(u, room) if room >= MIN_CUT_TOKENS else u
            if cut.cut and MIN_CUT_TOKENS <= cut.tokens <= room:
                taken[key] = cut
                break
        return [taken[k] for k in sorted(taken)]

    def greedy(self, units: list[RetrievedUnit], budget: int | None) -> list[RetrievedUnit]:
        """Take units whole, in order, while they fit (the plain RAG rule): a unit that does not fit
        is skipped and the next ones are tried; nothing is cut and no part stands in for a unit.
        Counted exactly with an additive counter (texts, date lines, the section headers opened);
        otherwise texts and date lines within the budget less ``HEADER_ALLOWANCE`` (``contexts``
        trims what still does not fit). With no budget: every unit but the budget-only ones."""
        if budget is None:
            return _whole_units(units)
        units = self._resolve(units)
        used = 0 if self.tokens.additive else HEADER_ALLOWANCE
        opened: set[str] = set()
        out = []
        for u in units:
            if u.type == "theme":
                out.append(u)
                continue
            cost = self._head(u) + u.tokens + (self._header(u, opened) if self.tokens.additive else 0)
            if used + cost <= budget:
                out.append(u)
                used += cost
                opened.add(_section(u))
        return out

    def _expand(self, d: Deferred) -> list:
        """The units (and deferred groups) of ``d``, their tokens counted."""
        out = d.expand()
        units = [u for u in out if type(u) is not Deferred]
        for u, c in zip(units, self.count([u.text for u in units])):
            u.tokens = c
        return out

    def _out_of_reach(self, d: Deferred, room: int, cut_from: int) -> bool:
        """True when no unit of group ``d`` (message parts: a date line each) could go into ``room``
        tokens: each one's date line and text longer than the room, and the room less the shortest
        date line under ``cut_from``, too little to cut one to (``d.floor``; additive counters only)."""
        if d.floor is None or not self.tokens.additive:
            return False
        heads = [(self._date_line(False, ts), n) for ts, n in d.floor()]
        return (
            bool(heads) and min(h + n for h, n in heads) > room and room - min(h for h, _ in heads) < cut_from
        )

    def _resolve(self, units: list) -> list[RetrievedUnit]:
        """Every deferred group in ``units`` built, in order."""
        if not any(type(u) is Deferred for u in units):
            return units
        out, todo = [], list(reversed(units))
        while todo:
            u = todo.pop()
            if type(u) is Deferred:
                todo += reversed(self._expand(u))
            else:
                out.append(u)
        return out

    def _header(self, u: RetrievedUnit, opened: set[str]) -> int:
        """Tokens of the section header ``u`` opens (0 when its section already has a unit)."""
        sec = _section(u)
        if sec in opened:
            return 0
        n = self._sections.get(sec)
        if n is None:
            n = self._sections[sec] = self.count([SECTIONS[sec]])[0]
        return n

    def _head(self, u: RetrievedUnit) -> int:
        """Tokens of the date line a unit brings into the context (``context_pieces``)."""
        return self._date_line(u.type == "semantic", u.timestamp)

    def _date_line(self, semantic: bool, timestamp: float | None) -> int:
        key = (semantic, timestamp)
        n = self._heads.get(key)
        if n is None:
            if len(self._heads) >= COUNTS_MAX:
                self._heads.clear()
            date = fmt_date(timestamp)
            n = self._heads[key] = self.count([f"- ({date})" if key[0] else f"[{date}]"])[0]
        return n

    def _cut(self, u: RetrievedUnit, room: int) -> RetrievedUnit:
        """A copy of ``u`` cut at a word boundary to at most ``room`` tokens ("..." marks the cut); ``u``
        itself when not even one word fits."""
        ws = u.text.split(" ")
        n = min(len(ws) - 1, max(1, len(ws) * room // max(u.tokens, 1)))  # a cut drops a word at least
        while n > 0:
            text = " ".join(ws[:n]) + " ..."
            tok = self.count([text])[0]
            if tok <= room:
                ids = shown_messages(u, " ".join(ws[:n]))
                return replace(u, text=text, tokens=tok, message_ids=ids, cut=True)
            n = min(n - 1, n * room // max(tok, 1))
        return u

    def trim(self, kept: list[RetrievedUnit], budget: int) -> tuple[list[RetrievedUnit], str, int]:
        """Drop units from the end until the assembled context (headers and dates included) fits."""
        while True:
            ctx = assemble(kept)
            n_tok = self.tokens.count([ctx])[0]
            if n_tok <= budget or not any(u.type != "theme" for u in kept):
                return kept, ctx, n_tok
            kept = [
                u for i, u in enumerate(kept) if i != max(j for j, v in enumerate(kept) if v.type != "theme")
            ]

    def contexts(
        self, units: list[list[RetrievedUnit]], budget: int | None, *, greedy: bool = False
    ) -> list[tuple[list[RetrievedUnit], str, int]]:
        """Per query: (units kept, context, context tokens) under ``budget``; unit tokens filled in.
        ``greedy``: units are fitted by ``greedy`` (whole, in order), else by ``fit``."""
        flat = [u for us in units for u in us if type(u) is not Deferred]
        for u, c in zip(flat, self.count([u.text for u in flat])):
            u.tokens = c
        kept = [(self.greedy if greedy else self.fit)(us, budget) for us in units]
        contexts = [assemble(k) for k in kept]
        if self.tokens.additive:  # exact: the sum over the context's whitespace-separated pieces
            pieces = [[p for _, p in context_pieces(k)] for k in kept]
            per = iter(self.count([p for ps in pieces for p in ps]))
            counts = [sum(next(per) for _ in ps) for ps in pieces]
        else:
            counts = self.tokens.count(contexts)  # one batched call; only over-budget contexts are re-counted
        out = []
        for k, ctx, n_tok in zip(kept, contexts, counts):
            if budget is not None and n_tok > budget:
                k, ctx, n_tok = self.trim(k, budget)
            out.append((k, ctx, n_tok))
        return out
