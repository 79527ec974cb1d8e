"""LLM-free retrieval metrics for one question.

A retrieved block is a ranked unit of context: ``(text, message_ids, n_tokens)`` (a ``Block`` or
any 3-tuple). Gold evidence is a list of LoCoMo ``dia_id`` s (``"D1:3"``).

Evidence recall counts an evidence message once any unit of it is in the context, so the narrower
the units, the more messages a budget touches; ``evidence_word_recall`` counts the share of each
evidence message's words the context shows, which a fragment cannot game.

Answer words are the answer's SQuAD-normalised tokens (``metrics.tokens``) minus ``STOPWORDS``;
a block *holds* a word when the word is one of the block text's normalised tokens (exact token
match; numbers compare as strings, so ``"2023"`` matches ``"2023"`` but not ``"2023s"``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from functools import lru_cache
from typing import Any, NamedTuple

from .metrics import tokens

__all__ = [
    "STOPWORDS",
    "Block",
    "normalize_evidence",
    "evidence_recall",
    "evidence_precision",
    "evidence_word_recall",
    "answer_words",
    "answer_coverage",
    "evidence_density",
    "mean",
    "aggregate",
]

# Function words only. Deliberately absent because they are also answer content in LoCoMo:
# "may" (the month), "will" / "can" (name, noun), "us" ("US" after lower-casing).
STOPWORDS = frozenset(
    """
    a an the and or but if nor so yet of to in on at by for with from as into onto over under about
    after before up down out off than then also too very just only
    is are was were be been being am do does did done have has had having would shall should
    could might must
    it its this that these those there here
    i me my mine we our ours you your yours he him his she her hers they them their theirs
    what when where who whom whose which why how
    not no yes
    """.split()
)


class Block(NamedTuple):
    """One retrieved unit: its text, the ``dia_id`` s it came from, and its token count."""

    text: str
    message_ids: list[str]
    n_tokens: int


_DIA_ID = re.compile(r"^D:?(\d+):0*(\d+)$", re.IGNORECASE)
_ID_SEP = re.compile(r"[;,\s]+")


def normalize_evidence(ids: Iterable[str]) -> set[str]:
    """Distinct canonical ``dia_id`` s: entries holding several ids (``"D8:6; D9:17"``) are split
    on ``; , whitespace``, and ``D<s>:<t>`` is written without leading zeros (``"D30:05"`` ->
    ``"D30:5"``, ``"D:11:26"`` -> ``"D11:26"``); anything else is kept as written."""
    out: set[str] = set()
    for raw in ids:
        for part in _ID_SEP.split(str(raw).strip()):
            if not part:
                continue
            m = _DIA_ID.match(part)
            out.add(f"D{int(m.group(1))}:{int(m.group(2))}" if m else part)
    return out


def evidence_recall(retrieved_ids: Iterable[str], evidence: Iterable[str]) -> float | None:
    """Share of the distinct evidence ids that were retrieved; None when there is no evidence."""
    ev = normalize_evidence(evidence)
    return len(ev & normalize_evidence(retrieved_ids)) / len(ev) if ev else None


CUT_MARK = " ..."  # what ends the text of a unit cut to fit a budget (``context.TokenBudget``)


def _run_at(words: list[str], run: list[str]) -> int:
    """Where ``run`` first stands in ``words`` as a contiguous run; -1 when it does not."""
    if not run:
        return -1
    for i in range(len(words) - len(run) + 1):
        if words[i] == run[0] and words[i : i + len(run)] == run:
            return i
    return -1


def _body(line: str, speaker: str) -> str:
    """A message line (``speaker: text``, perhaps cut short) without its speaker."""
    head = f"{speaker}: "
    if line.startswith(head):
        return line[len(head) :]
    return "" if head.startswith(line) else line


def evidence_word_recall(
    units: Sequence[Any], evidence: Iterable[str], messages: Mapping[str, tuple[str, str]]
) -> float | None:
    """Mean over the distinct evidence messages of the share of each one's words (``str.split``)
        that the context shows; None when there is no evidence.

        ``units``: the context's units (``RetrievedUnit``: ``type``, ``text``, ``message_ids``,
        ``scores``, ``message_ends``; themes are not context and are skipped); ``messages``: evidence
        id -> (speaker, text), ids written as ``normalize_evidence`` writes them (an evidence message
        missing there earns 0, as it cannot be retrieved). A block of raw message lines shows each
        line's words (a unit cut to fit shows the words before its cut; a message it shows less than half
    of is out of its provenance and earns nothing, as for evidence recall); a passage of a message shows
        its run of the message's words; the same words shown twice count once. Any other unit (a
        statement, an LLM-written episode) is derived: it credits each of its source messages with its
        own word count divided by the number of sources. A message's share is capped at 1; a message
        without words counts 1 when any unit names it."""
    ev = normalize_evidence(evidence)
    if not ev:
        return None
    shown: dict[str, set[int]] = {m: set() for m in ev}
    credit = dict.fromkeys(ev, 0.0)
    named: set[str] = set()
    for u in units:
        if u.type == "theme":
            continue
        ids = [next(iter(normalize_evidence([m])), m) for m in u.message_ids]
        named.update(ids)
        if not ev.intersection(ids):
            continue
        text = u.text.removesuffix(CUT_MARK) if u.cut else u.text
        if u.message_ends is not None:  # raw lines, one per message, perhaps cut short
            start = 0
            for mid, end in zip(ids, u.message_ends):
                if mid in ev and mid in messages:
                    n = len(messages[mid][1].split())
                    shown[mid].update(range(min(n, len(_body(text[start:end], messages[mid][0]).split()))))
                start = end + 1
                if start >= len(text):
                    break
            continue
        if len(ids) == 1 and ids[0] in messages and u.passage:  # a passage: find its words
            speaker, full = messages[ids[0]]
            words, run = full.split(), _body(text, speaker).split()
            at = _run_at(words, run)
            if at >= 0:
                shown[ids[0]].update(range(at, at + len(run)))
                continue
        for mid in ids:  # derived: its words, split evenly over its sources
            if mid in credit:
                credit[mid] += len(text.split()) / len(ids)
    total = 0.0
    for mid in sorted(
        ev
    ):  # a fixed order: the sum is the same in every process (set order follows the hash seed)
        if mid not in messages:
            continue
        n = len(messages[mid][1].split())
        total += (mid in named) if n == 0 else min(1.0, (len(shown[mid]) + credit[mid]) / n)
    return total / len(ev)


def evidence_precision(retrieved_ids: Iterable[str], evidence: Iterable[str]) -> float | None:
    """Share of the distinct retrieved ids that are evidence. None when nothing was retrieved, and
    also when the question has no evidence (precision against an empty gold set is undefined; a
    0 there would drag every mean down for questions the metric cannot judge)."""
    got, ev = normalize_evidence(retrieved_ids), normalize_evidence(evidence)
    return len(got & ev) / len(got) if got and ev else None


def answer_words(answer: object) -> list[str]:
    """Distinct content words of the answer (normalised tokens minus ``STOPWORDS``), in order."""
    return list(dict.fromkeys(w for w in tokens(answer) if w not in STOPWORDS))


@lru_cache(maxsize=1 << 16)
def _token_set(text: str) -> frozenset[str]:
    return frozenset(tokens(text))


def _held(block: Sequence, words: set[str]) -> set[str]:
    return words & _token_set(str(block[0]))


def answer_coverage(blocks: Sequence[Sequence], answer: object) -> dict:
    """How well the ranked blocks cover the answer's content words.

    Returns ``words`` (number of distinct answer words), ``covered`` (True when every answer word
    is in the union of the blocks' tokens; False when the answer has no content word),
    ``covered_share`` (share of answer words found in any block; None when no content word),
    ``blocks_to_cover`` (length of the shortest prefix of the ranking whose union holds every
    answer word; None if never) and ``tokens_to_cover`` (sum of ``n_tokens`` over that prefix).
    """
    words = set(answer_words(answer))
    found: set[str] = set()
    blocks_to_cover: int | None = None
    tokens_to_cover: int | None = None
    total = 0
    if words:
        for i, b in enumerate(blocks):
            found |= _held(b, words)
            total += int(b[2])
            if found == words:
                blocks_to_cover, tokens_to_cover = i + 1, total
                break  # all found; otherwise the loop ends with `found` = the whole union
    return {
        "words": len(words),
        "covered": bool(words) and found == words,
        "covered_share": len(found) / len(words) if words else None,
        "blocks_to_cover": blocks_to_cover,
        "tokens_to_cover": tokens_to_cover,
    }


def evidence_density(blocks: Sequence[Sequence], answer: object) -> dict[str, float | None]:
    """Share of the retrieved blocks holding 0, 1, 2 and 3+ distinct answer words (keys ``"0"``,
    ``"1"``, ``"2"``, ``"3+"``; the shares sum to 1). All None when there is no block."""
    words = set(answer_words(answer))
    counts = {"0": 0, "1": 0, "2": 0, "3+": 0}
    for b in blocks:
        n = len(_held(b, words))
        counts["3+" if n >= 3 else str(n)] += 1
    total = len(blocks)
    return {k: (v / total if total else None) for k, v in counts.items()}


def mean(values: Iterable) -> float | None:
    """Mean of the non-None values (bools count as 0/1); None when there is none."""
    vals = [float(v) for v in values if v is not None]
    return sum(vals) / len(vals) if vals else None


def aggregate(
    rows: Sequence[dict], key: str, categories: Sequence[int] = (1, 2, 3, 4), *, by: str = "category"
) -> dict[str, float | None]:
    """Per-group and micro means of ``row[key]`` over per-question ``rows``.

    Returns one entry per distinct ``row[by]`` (key ``str(value)``; numbers sorted numerically, before other values): the mean
    of that group's non-None values, and ``"micro"``: the mean over all questions whose LoCoMo
    ``row["category"]`` is in ``categories`` (1-4 by default; 5, adversarial, is left out), i.e.
    weighted by question, not the mean of the per-category means. ``micro`` always filters on
    ``"category"`` whatever ``by`` is (rows without it are left out of it). None values (and rows
    lacking ``key``) are ignored everywhere; a mean with nothing to average is None.
    """
    groups: dict[str, list] = {}
    for r in rows:
        groups.setdefault(str(r[by]), []).append(r.get(key))
    order = sorted(groups, key=lambda g: (0, int(g), "") if g.lstrip("-").isdigit() else (1, 0, g))
    out: dict[str, float | None] = {g: mean(groups[g]) for g in order}
    cats = {int(c) for c in categories}
    out["micro"] = mean(
        r.get(key) for r in rows if r.get("category") is not None and int(r["category"]) in cats
    )
    return out
