"""Relative times resolved against a memory's date, for the answer prompt.

Retrieved memories say "yesterday", "last week", "two months ago"; the question asks "when". The
answer context dates every memory (``- (YYYY-MM-DD) statement``, ``[YYYY-MM-DD]`` before an
episode), so each relative expression can be followed by its absolute value in the words LoCoMo's
answers use: "yesterday (7 May 2023)", "last week (the week before 9 June 2023)", "last year (2022)".
"""

from __future__ import annotations

import re
from datetime import date, timedelta

_NUMBERS = {
    "a": 1,
    "an": 1,
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
}
_WEEKDAYS = ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]
_MONTHS = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
]
_NUM = r"(\d+|a|an|one|two|three|four|five|six|seven|eight|nine|ten)"

_PATTERN = re.compile(
    r"\b(?:(?P<day>today|tonight|this morning|this afternoon|this evening|yesterday|last night|tomorrow)"
    rf"|(?P<n>{_NUM})\s+(?P<unit>day|week|month|year)s?\s+ago"
    r"|(?P<rel>last|next|this)\s+(?P<what>week|weekend|month|year|" + "|".join(_WEEKDAYS) + r"))\b",
    re.I,
)
_DATED_LINE = re.compile(r"^- \((\d{4}-\d{2}-\d{2})\) ")
_DATED_HEADER = re.compile(r"^\[(\d{4}-\d{2}-\d{2})\]$")


def spoken(d: date) -> str:
    """``7 May 2023``."""
    return f"{d.day} {_MONTHS[d.month - 1]} {d.year}"


def _month(d: date, delta: int) -> str:
    m = d.year * 12 + d.month - 1 + delta
    return f"{_MONTHS[m % 12]} {m // 12}"


def absolute(phrase: str, anchor: date) -> str | None:
    """The absolute value of one relative expression said on ``anchor``; None if not recognised."""
    m = _PATTERN.fullmatch(phrase.strip())
    if m is None:
        return None
    g = {k: (v.lower() if v else v) for k, v in m.groupdict().items()}
    if g["day"]:
        shift = {"yesterday": -1, "last night": -1, "tomorrow": 1}.get(g["day"], 0)
        return spoken(anchor + timedelta(days=shift))
    if g["n"]:
        n = int(g["n"]) if g["n"].isdigit() else _NUMBERS[g["n"]]
        unit = g["unit"]
        if unit == "day":
            return spoken(anchor - timedelta(days=n))
        if unit == "week":
            return f"the week of {spoken(anchor - timedelta(days=7 * n))}"
        if unit == "month":
            return _month(anchor, -n)
        return str(anchor.year - n)
    rel, what = g["rel"], g["what"]
    step = {"last": -1, "next": 1, "this": 0}[rel]
    if what == "week":
        return {
            -1: f"the week before {spoken(anchor)}",
            1: f"the week after {spoken(anchor)}",
            0: f"the week of {spoken(anchor)}",
        }[step]
    if what == "weekend":
        wd = anchor.weekday()
        sat = (
            anchor - timedelta(days=wd - 5) if wd >= 5 else anchor + timedelta(days=5 - wd)
        )  # this weekend's Saturday
        if step == -1:
            sat = anchor - timedelta(days=wd + 2)  # the Saturday before this week
        elif step == 1 and wd >= 5:
            sat += timedelta(days=7)
        return f"the weekend of {spoken(sat)}"
    if what == "month":
        return _month(anchor, step)
    if what == "year":
        return str(anchor.year + step)
    wd = _WEEKDAYS.index(what)
    if step == -1:
        return spoken(anchor - timedelta(days=(anchor.weekday() - wd - 1) % 7 + 1))
    return spoken(anchor + timedelta(days=(wd - anchor.weekday() - 1) % 7 + 1))


def annotate(text: str, anchor: date) -> str:
    """Follow every relative expression in ``text`` by its absolute value in parentheses."""

    def sub(m: re.Match) -> str:
        value = absolute(m.group(0), anchor)
        return f"{m.group(0)} ({value})" if value else m.group(0)

    return _PATTERN.sub(sub, text)


def resolve_context_dates(context: str) -> str:
    """Annotate an assembled answer context line by line against the date each memory carries."""
    out, anchor = [], None
    for line in context.split("\n"):
        if h := _DATED_HEADER.match(line):
            anchor = date.fromisoformat(h.group(1))
            out.append(line)
            continue
        if s := _DATED_LINE.match(line):
            out.append(s.group(0) + annotate(line[s.end() :], date.fromisoformat(s.group(1))))
            continue
        if line.endswith("memories:"):
            anchor = None
        out.append(annotate(line, anchor) if anchor and line else line)
    return "\n".join(out)
