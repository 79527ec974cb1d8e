"""The word rule and what is read with it: ``text.words`` (the matches of ``[A-Za-z0-9][A-Za-z0-9'-]*``,
lower-cased, trailing ' and - cut) on fresh random texts with every character the rule splits on,
``text.keywords`` (the most frequent content words, ties to the first seen) and the episode parts of
``construct.segment``."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

import numpy as np
import pytest

from xmemory_gpu.construct.segment import episode_parts
from xmemory_gpu.text import STOPWORDS, keywords, word_runs, words

PIECES = [
    "dog",
    "Dog",
    "DOG",
    "",
    "café",
    "漢字",
    "\U0001f600",
    "\x00",
    "e\u0301",
    "it's",
    "2nd-hand",
    "well--",
    "'quoted'",
    "-dash",
    "a'b-c'",
    "o'-",
    "İstanbul",
    "\ud800x",
    "ß",
    "Ǆ",
    "\u212a",
    "12:30",
    "U.S.A.",
    "the",
    "The",
    "I",
    "a",
    "x",
    "hiking",
    "Hiking",
    "trip",
    "trips",
    "z" * 40,
    "'",
    "-",
    "'-'",
    "a''",
    "''a",
    "-a-",
    "a-'-b",
    "\x80",
    "Ａ",
]
SEPS = [" ", ", ", "-", "'", "/", "\u00a0", "\u2019", "\t", "\n", "", "\x1c", "\x85", "\u2028"]
_AS_WRITTEN = re.compile(r"[A-Za-z0-9][A-Za-z0-9'\-]*")


def _texts(rng: np.random.Generator, n: int) -> list[str]:
    return [
        "".join(str(rng.choice(PIECES)) + str(rng.choice(SEPS)) for _ in range(int(rng.integers(0, 20))))
        for _ in range(n)
    ]


def _words_as_written(text: str) -> list[str]:
    return [w.lower().strip("'-") for w in _AS_WRITTEN.findall(text)]


@pytest.mark.parametrize("seed", range(10))
def test_words_are_the_regular_expression(seed):
    for text in _texts(np.random.default_rng(seed), 300):
        got = words(text)
        assert got == _words_as_written(text), text
        assert word_runs(text).split() == [w.encode() for w in got]


def test_words_of_known_texts():
    assert words("It's a 2nd-hand 'quoted' well-- -dash o'- '-' a'-'b") == [
        "it's",
        "a",
        "2nd-hand",
        "quoted",
        "well",
        "dash",
        "o",
        "a'-'b",
    ]
    assert words("café İstanbul \u212aing Ａb \ud800x") == [
        "caf",
        "stanbul",
        "ing",
        "b",
        "x",
    ]  # non-ASCII splits words
    assert words("") == [] and words(" '-' ") == []
    assert words(np.str_("Dog and Cat")) == ["dog", "and", "cat"]
    with pytest.raises(TypeError):
        words(3)


@pytest.mark.parametrize("seed", range(10))
def test_keywords_are_the_most_frequent_content_words(seed):
    rng = np.random.default_rng(seed)
    for _ in range(100):
        texts = _texts(rng, int(rng.integers(0, 8)))
        counts: Counter[str] = Counter()
        for t in texts:
            counts.update(w for w in _words_as_written(t) if w not in STOPWORDS and len(w) > 1)
        for n in (1, 2, 4, 50, None):
            assert keywords(texts, n) == [w for w, _ in counts.most_common(n)], (texts, n)
    assert keywords(["dog dog cat"], 0) == keywords(["dog dog cat"], -1) == []


def test_keywords_of_any_iterable():
    texts = ["dog cat dog", "cat bird", "the Dog"]
    assert keywords(texts, 2) == ["dog", "cat"]  # ties to the first seen
    assert (
        keywords(np.array(texts), 2)
        == keywords(tuple(texts), 2)
        == keywords(iter(texts), 2)
        == ["dog", "cat"]
    )
    assert keywords(["a b c the of", ""]) == []


class _Loud(str):
    """A str whose f-string form is not its text (``__str__`` overridden), and equal to its text as a key."""

    def __str__(self) -> str:
        return "loud " + str.__str__(self)


@dataclass
class _M:
    speaker: str
    text: str
    id: str = "m"


@pytest.mark.parametrize("seed", range(6))
def test_episode_parts_are_the_rule(seed):
    """Each span's lines (each piece formatted as an f-string formats it), keywords, distinct speakers
    in order and ids, on fresh random messages: non-ASCII text, repeated and equal-but-distinct speakers,
    str subclasses, spans of one message."""
    rng = np.random.default_rng(seed)
    names = ["Ann", "Bob", "user", "assistant", "Zoë", _Loud("Ann"), "".join(["A", "nn"])]
    for _ in range(30):
        msgs = [
            _M(names[int(rng.integers(0, len(names)))], t or "x", f"D{i}")
            for i, t in enumerate(_texts(rng, int(rng.integers(1, 30))))
        ]
        if rng.random() < 0.3:
            msgs[0].text = _Loud(msgs[0].text)
        cuts = sorted({0, len(msgs), *rng.integers(1, len(msgs) + 1, int(rng.integers(0, 5))).tolist()})
        spans = list(zip(cuts[:-1], cuts[1:]))
        want = [
            (
                "\n".join(f"{m.speaker}: {m.text}" for m in msgs[s:e]),
                keywords([m.text for m in msgs[s:e]]),
                " and ".join(dict.fromkeys(m.speaker for m in msgs[s:e])),
                [m.id for m in msgs[s:e]],
            )
            for s, e in spans
        ]
        got = episode_parts(msgs, spans)
        assert got == want
        assert [type(p[0]) for p in got] == [str] * len(spans)


def test_episode_parts_of_known_messages():
    msgs = [
        _M("Ann", "I hiked Mount Tam.", "a"),
        _M(_Loud("Bob"), "Hiking again? Tam is great.", "b"),
        _M("Ann", "Tam!", "c"),
    ]
    assert episode_parts(msgs, [(0, 3), (2, 3)]) == [
        (
            "Ann: I hiked Mount Tam.\nloud Bob: Hiking again? Tam is great.\nAnn: Tam!",
            ["tam", "hiked", "mount", "hiking"],
            "Ann and Bob",
            ["a", "b", "c"],
        ),  # joined as str data, formatted in the lines
        ("Ann: Tam!", ["tam"], "Ann", ["c"]),
    ]


def test_episode_parts_read_the_span_it_was_given():
    """A message's getter that empties the caller's list: the span read is ``messages[s:e]``, taken first."""
    msgs: list = []

    class M:
        def __init__(self, i: int) -> None:
            self.id, self.text = f"m{i}", f"hello world {i}"

        @property
        def speaker(self) -> str:
            msgs.clear()
            return "Ann"

    msgs.extend(M(i) for i in range(50))
    ((text, kw, speakers, ids),) = episode_parts(msgs, [(0, 50)])
    assert ids == [f"m{i}" for i in range(50)] and speakers == "Ann" and kw == ["world", "10", "11", "12"]
    assert text.count("\n") == 49
    msgs = [_M("Bo", f"text {i}", f"n{i}") for i in range(6)]
    assert episode_parts(msgs, np.array([[0, 2], [2, 6]])) == episode_parts(
        msgs, [(0, 2), (2, 6)]
    )  # spans as rows of an array
