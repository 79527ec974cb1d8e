"""construct.semantic.decouple from the compiled module (csrc/cpu/statements.cpp): the regular
expressions' string (``decouple_reference``) on fresh random sentences built from every form the rules
match, near misses (word characters glued on, other cases, adverbs as prefixes), every whitespace
``\\s`` accepts, odd names; non-ASCII text and names stay on the reference."""

from __future__ import annotations

import random

import pytest

from xmemory_gpu.construct import semantic as sem
from xmemory_gpu.ops import available_backends

pytestmark = pytest.mark.skipif(
    not available_backends()["cpu"].available, reason="the C++ module is not built"
)

WORDS = (
    "I I'm I've I'd I'll Im I_ I2 II i me Me ME my My MY mine myself Myself you You YOU your Your yours yourself "
    "you're You're you've You've don't dont do not haven't havent have has can't won't wouldn't cann't can'tx 'n't n't "
    "can will would could should did was am are is go do watch fix try play study say buy enjoy kiss box quiz echo "
    "run walked sings went read said eat love like tried Love LIKE just also really always never still finally "
    "recently already actually usually often now currently sometimes rarely ever even once then first later only "
    "nowhere evening everything onlyx alsoX Alice Bob the a dog TV 2024 it's x y"
).split()
GLUE = [
    " ",
    " ",
    " ",
    "  ",
    "\t",
    "\n",
    "\x0b",
    "\x0c",
    "\r",
    "\x1c",
    "\x1d",
    "\x1e",
    "\x1f",
    ", ",
    ". ",
    "! ",
    "? ",
    "'",
    "-",
    "",
    "_",
    "(",
    ")",
    "\u2019",
    "\\1 ",
]
NAMES = [
    "Alice",
    "Bob",
    "Me",
    "I",
    "My",
    "you",
    "Jo Ann",
    "",
    "Alice Alice",
    "me2",
    "Ann-Marie",
    "X\\1",
    "C:\\Users",
    "{s}",
    "user",
    "assistant",
    " Alice",
    "Bob\t",
    "\x1e",
    "I don't",
    "you're",
]


def _sentence(rnd: random.Random) -> str:
    s = "".join(rnd.choice(WORDS) + rnd.choice(GLUE) for _ in range(rnd.randint(1, 14)))
    return (" " if rnd.random() < 0.2 else "") + s


@pytest.mark.parametrize("seed", range(8))
def test_native_decouple_is_the_rule(seed):
    rnd = random.Random(seed)
    native = 0
    for _ in range(3000):
        s, speaker, other = _sentence(rnd), rnd.choice(NAMES), rnd.choice(NAMES)
        straight = s.replace("\u2019", "'")
        want = sem.decouple_reference(straight, speaker, other)
        assert sem.decouple(s, speaker, other) == want, (s, speaker, other)
        if straight.isascii():
            assert sem._native_decouple(straight, speaker, other) == want, (s, speaker, other)
            native += 1
    assert native > 2000  # most cases ran the C++


def test_statements_of_synthetic_chats_are_the_rule():
    from xmemory_gpu.datasets.synthetic import generate_conversations

    convs = generate_conversations(30, seed=4)
    texts = [
        t["text"]
        for c in convs
        for key, turns in c["conversation"].items()
        if key.startswith("session_") and isinstance(turns, list)
        for t in turns
    ]
    sentences = [s for t in texts for s in sem.split_sentences(t)]
    assert len(sentences) > 500
    for s in sentences:
        for speaker, other in (("Caroline", "Melanie"), ("user", "assistant")):
            assert sem.decouple(s, speaker, other) == sem.decouple_reference(
                s.replace("\u2019", "'"), speaker, other
            ), s


@pytest.mark.parametrize(
    "text,expected",
    [
        ("I really love my dog, you know.", "Alice really loves Alice's dog, Bob know."),
        ("I just\tnow  go there", "Alice just now goes there"),
        ("I nowhere", "Alice nowheres"),
        ("I can not swim, I wouldn't.", "Alice can not swim, Alice wouldn't."),
        ("I study; I fix; I do it; I play", "Alice studies; Alice fixes; Alice does it; Alice plays"),
        ("You're right, your dog is yours.", "Bob is right, Bob's dog is Bob's."),
        ("IKEA opened.", "Alice said: IKEA opened."),
        ("  I_x and I2 \x1c", "Alice said:   I_x and I2"),
    ],
)
def test_known_rewrites(text, expected):
    assert sem.decouple(text, "Alice", "Bob") == sem.decouple_reference(text, "Alice", "Bob") == expected


def test_names_go_in_as_they_are():
    """A backslash in a name is no template escape (the rules once raised re.error on "X\\1")."""
    for speaker in ("X\\1", "C:\\Users", "a\\gb"):
        want = f"{speaker} is here and {speaker}'s dog likes Bob."
        assert sem.decouple("I'm here and my dog likes you.", speaker, "Bob") == want
        assert sem.decouple_reference("I'm here and my dog likes you.", speaker, "Bob") == want


def test_non_ascii_stays_on_the_reference(monkeypatch):
    calls = []
    monkeypatch.setattr(sem, "_native_decouple", lambda *a: calls.append(a) or "native")
    assert sem.decouple("I love café food.", "Alice", "Bob") == "Alice loves café food."
    assert sem.decouple("I love my dog.", "Zoë", "Bob") == "Zoë loves Zoë's dog."
    assert sem.decouple("I love my dog.", "Alice", "Łukasz") == "Alice loves Alice's dog."
    assert calls == []
    assert (
        sem.decouple("I\u2019m here.", "Alice", "Bob") == "native"
    )  # a curly apostrophe is made straight first
    assert calls == [("I'm here.", "Alice", "Bob")]


def test_decoupler_refuses_an_adverb_that_prefixes_another():
    from xmemory_gpu import _C

    with pytest.raises(ValueError, match="'now' is a prefix of 'nowadays'"):
        _C.Decoupler([], [], [], [], {"now", "nowadays"}, set(), set(), {})
