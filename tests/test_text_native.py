"""text.words and text.keywords from the compiled module: the rules as written (``words_reference``,
``keywords_reference``) on fresh random texts with every character the word rule splits on, ties and
stopwords included."""

from __future__ import annotations

import numpy as np
import pytest

from xmemory_gpu.ops import available_backends
from xmemory_gpu.text import STOPWORDS, keywords, keywords_reference, words, words_reference

pytestmark = pytest.mark.skipif(
    not available_backends()["cpu"].available, reason="the C++ module is not built"
)

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
]
SEPS = [" ", ", ", "-", "'", "/", "\u00a0", "\u2019", "\t", "\n", ""]


def _texts(rng: np.random.Generator, n: int) -> list[str]:
    return [
        "".join(str(rng.choice(PIECES)) + str(rng.choice(SEPS)) for _ in range(int(rng.integers(0, 20))))
        for _ in range(n)
    ]


@pytest.mark.parametrize("seed", range(10))
def test_words_are_the_rule(seed):
    from xmemory_gpu import _C

    for text in _texts(np.random.default_rng(seed), 200):
        assert _C.words(text) == words_reference(text) == words(text), text


@pytest.mark.parametrize("seed", range(10))
def test_keywords_are_the_rule(seed):
    from xmemory_gpu import _C

    rng = np.random.default_rng(seed)
    for _ in range(100):
        texts = _texts(rng, int(rng.integers(0, 8)))
        for n in (1, 2, 4, 50):
            assert _C.keywords(texts, n, STOPWORDS) == keywords_reference(texts, n) == keywords(texts, n), (
                texts,
                n,
            )
    assert keywords(["dog dog cat"], 0) == keywords_reference(["dog dog cat"], 0) == []


def test_keywords_of_any_iterable_and_n_are_the_rule():
    """What the C++ path does not take (a NumPy array, a tuple, a generator, n None or huge) goes to the rule."""
    texts = ["dog cat dog", "cat bird", "the Dog"]
    want = keywords_reference(texts, 2)
    assert keywords(np.array(texts), 2) == keywords(tuple(texts), 2) == keywords(iter(texts), 2) == want
    assert keywords(texts, None) == keywords_reference(texts, None) and keywords(
        texts, 2**70
    ) == keywords_reference(texts, 2**70)

    class Sub(str):
        pass

    assert words(Sub("Dog's day")) == words_reference("Dog's day")
    with pytest.raises(TypeError):
        words(3)


def test_bad_input_is_refused_in_one_line():
    from xmemory_gpu import _C

    with pytest.raises(TypeError, match="text: expected a str"):
        _C.words(b"bytes")
    with pytest.raises(TypeError, match=r"texts\[i\]: expected a str"):
        _C.keywords(["ok", 3], 4, STOPWORDS)
    with pytest.raises(TypeError, match="stop: expected a set"):
        _C.keywords(["ok"], 4, ["the"])


class _Loud(str):
    """A str whose f-string form is not its text (``__str__`` overridden), and equal to its text as a key."""

    def __str__(self) -> str:
        return "loud " + str.__str__(self)


@pytest.mark.parametrize("seed", range(6))
def test_episode_parts_are_the_rule(seed):
    """An episode's lines, keywords and speakers from one C++ call per conversation equal the rule as
    written (``episode_parts_reference``) on fresh random messages: non-ASCII text, repeated and
    equal-but-distinct speakers, str subclasses formatted as f-strings format them, spans of one message."""
    from dataclasses import dataclass

    from xmemory_gpu.construct.segment import episode_parts, episode_parts_reference

    @dataclass
    class M:
        speaker: str
        text: str
        id: str = "m"

    rng = np.random.default_rng(seed)
    names = ["Ann", "Bob", "user", "assistant", "Zoë", _Loud("Ann"), "".join(["A", "nn"])]
    for _ in range(30):
        msgs = [
            M(names[int(rng.integers(0, len(names)))], t or "x", f"D{i}")
            for i, t in enumerate(_texts(rng, int(rng.integers(1, 30))))
        ]
        if rng.random() < 0.3:
            msgs[0].text = _Loud(msgs[0].text)
        cuts = sorted({0, len(msgs), *rng.integers(1, len(msgs) + 1, int(rng.integers(0, 5))).tolist()})
        spans = list(zip(cuts[:-1], cuts[1:]))
        got, want = episode_parts(msgs, spans), episode_parts_reference(msgs, spans)
        assert got == want
        assert [type(p[0]) for p in got] == [str] * len(spans)
    with pytest.raises(ValueError, match="spans"):
        episode_parts([M("a", "b")], [(0, 2)])
    with pytest.raises(ValueError, match="spans"):
        episode_parts([M("a", "b")], [(1, 1)])


def test_episode_parts_survive_code_that_edits_the_messages():
    """A message's getter that empties the caller's list, and spans given as a NumPy array (whose rows
    are fresh objects): no freed object is read, the span read is the rule's ``messages[s:e]``."""
    from xmemory_gpu.construct.segment import episode_parts, episode_parts_reference

    def messages():
        msgs: list = []

        class M:
            def __init__(self, i: int) -> None:
                self.id, self.text = f"m{i}", f"hello world {i}"

            @property
            def speaker(self) -> str:
                msgs.clear()
                return "Ann"

        msgs.extend(M(i) for i in range(50))
        return msgs

    assert episode_parts(messages(), [(0, 50)]) == episode_parts_reference(messages(), [(0, 50)])
    with pytest.raises(ValueError, match="spans"):  # the list is empty by the second span: refused, not read
        episode_parts(messages(), [(0, 25), (25, 50)])

    class N:
        def __init__(self, i: int) -> None:
            self.id, self.speaker, self.text = f"n{i}", "Bo", f"text {i}"

    msgs = [N(i) for i in range(6)]
    spans = np.array([[0, 2], [2, 6]])
    assert episode_parts(msgs, spans) == episode_parts_reference(msgs, [(0, 2), (2, 6)])
