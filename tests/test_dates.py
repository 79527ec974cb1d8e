"""Relative times resolved against a memory's date (hand-worked cases) and in an answer context."""

from __future__ import annotations

from datetime import date

import pytest

from xmemory_gpu.retrieve.dates import absolute, annotate, resolve_context_dates

SUN = date(2023, 5, 7)  # a Sunday
WED = date(2023, 5, 10)


@pytest.mark.parametrize(
    "phrase,anchor,expected",
    [
        ("yesterday", SUN, "6 May 2023"),
        ("Tomorrow", SUN, "8 May 2023"),
        ("last night", date(2023, 1, 1), "31 December 2022"),
        ("today", WED, "10 May 2023"),
        ("3 days ago", WED, "7 May 2023"),
        ("two weeks ago", WED, "the week of 26 April 2023"),
        ("a month ago", date(2023, 1, 15), "December 2022"),
        ("5 years ago", WED, "2018"),
        ("last week", WED, "the week before 10 May 2023"),
        ("next week", WED, "the week after 10 May 2023"),
        ("last weekend", WED, "the weekend of 6 May 2023"),
        ("this weekend", WED, "the weekend of 13 May 2023"),
        ("this weekend", SUN, "the weekend of 6 May 2023"),
        ("next weekend", SUN, "the weekend of 13 May 2023"),
        ("last month", date(2023, 1, 20), "December 2022"),
        ("next month", date(2023, 12, 2), "January 2024"),
        ("last year", WED, "2022"),
        ("this year", WED, "2023"),
        ("last Friday", WED, "5 May 2023"),
        ("last Wednesday", WED, "3 May 2023"),
        ("next Monday", WED, "15 May 2023"),
        ("next Wednesday", WED, "17 May 2023"),
        ("the cat", WED, None),
    ],
)
def test_absolute(phrase, anchor, expected):
    assert absolute(phrase, anchor) == expected


def test_annotate_and_context():
    assert annotate("I went hiking yesterday and last week.", SUN) == (
        "I went hiking yesterday (6 May 2023) and last week (the week before 7 May 2023)."
    )
    ctx = "Semantic memories:\n- (2023-05-07) Alice adopted a dog yesterday.\n\nEpisodic memories:\n[2023-05-10]\nBob: I ran last weekend.\nAlice: nice"
    out = resolve_context_dates(ctx)
    assert "Alice adopted a dog yesterday (6 May 2023)." in out
    assert "Bob: I ran last weekend (the weekend of 6 May 2023)." in out
    assert resolve_context_dates("no dates yesterday") == "no dates yesterday"  # no anchor: unchanged
