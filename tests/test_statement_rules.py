"""construct.semantic's statement rules: the filler test and the specificity score equal to the rules as
first written (on fresh random sentences built from every form the rules match and their near
misses), the regular expressions written for a fast search equal to their plain forms, and whole
messages: known statements, non-ASCII text and names, long repetitions."""

from __future__ import annotations

import random
import re

import pytest

from xmemory_gpu.config import SemanticConfig
from xmemory_gpu.construct import semantic as sem
from xmemory_gpu.datasets.synthetic import generate_conversations
from xmemory_gpu.text import STOPWORDS, words

PIECES = (
    list(sem._GREETINGS)
    + list(sem._REQUEST_LEADS)
    + list(sem._REQUEST_VERBS)
    + list(sem._REQUEST_OBJECTS)
    + list(sem._THAT_HEADS)
    + list(sem._ASK_JOINS)
    + list(sem._ASK_VERBS)
    + list(sem._INTERROGATIVES)
    + sorted(sem._ABBREV)[:20]
    + sorted(sem.REACTION_WORDS)[:30]
    + "that you You YOU Hi HELLO Thanks Sam Alice Bob I I'm my Dr. St. Mr. e.g. i.e. J. R. A. a.m. Oct 12 2024 3pm "
    "adopted puppy Boston nurse job hiking ItalY mcDonald McDonald xyz remindme thatx youx hix hiking summarising "
    "photo picture image of a the dog beach haha lol wow great nice Zürich Éva éA 2nd x1 é1 7 0 7-7 a1".split()
)
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
    "\x1f",
    ", ",
    ". ",
    "! ",
    "? ",
    "?",
    ".",
    "!",
    ",",
    ";",
    ": ",
    " - ",
    "-",
    "'",
    '"',
    "",
    "_",
    "(",
    ")",
    "?! ",
    "... ",
    "\n\n",
    "\u00a0",
    "é",
]
CONFIGS = [
    SemanticConfig(),
    SemanticConfig(min_words=0),
    SemanticConfig(min_words=2),
    SemanticConfig(min_words=1000),
]


def _sentences(seed: int, n: int) -> list[str]:
    rnd = random.Random(seed)
    return [
        "".join(rnd.choice(PIECES) + rnd.choice(GLUE) for _ in range(rnd.randint(1, 18))) for _ in range(n)
    ]


def _is_filler_as_written(sentence: str, cfg: SemanticConfig) -> bool:
    if sentence.rstrip().endswith("?"):
        return True
    ws = words(sentence)
    facts = [w for w in ws if w not in STOPWORDS and len(w) > 1 and w not in sem.REACTION_WORDS]
    return (
        len(ws) < cfg.min_words
        or len(facts) < 2
        or bool(sem._GREETING.match(sentence.strip()))
        or bool(sem._REQUEST.match(sentence.strip()))
    )


def _specificity_as_written(sentence: str) -> int:
    ws = words(sentence)
    cw = {w for w in ws if w not in STOPWORDS and len(w) > 1 and w not in sem.REACTION_WORDS}
    names = set(re.findall(r"(?<!^)(?<![.!?]\s)\b[A-Z][a-z]+", sentence))
    return len(cw) + len(names) + len({w for w in ws if re.search(r"\d", w)})


@pytest.mark.parametrize("seed", range(4))
def test_filler_and_specificity_are_the_rules_as_written(seed):
    chats = [
        t["text"]
        for c in generate_conversations(10, seed=seed)
        for k, turns in c["conversation"].items()
        if k.startswith("session_") and isinstance(turns, list)
        for t in turns
    ]
    for s in _sentences(seed, 1500) + [p for t in chats for p in sem.split_sentences(t)]:
        for cfg in CONFIGS:
            assert (
                sem.is_filler(s, cfg) == sem.is_filler(s, cfg, words(s)) == _is_filler_as_written(s, cfg)
            ), (s, cfg)
        assert sem.specificity(s) == sem.specificity(s, words(s)) == _specificity_as_written(s), s


@pytest.mark.parametrize(
    "forms",
    [
        ("I",),
        ("My", "my"),
        ("I don't", "I dont"),
        ("You", "you"),
        ("me",),
        ("I", "My", "my", "mine", "me", "You", "you"),
    ],
)
def test_forms_at_a_word_start_are_the_leading_boundary(forms):
    """``_at_word_start(*forms)`` matches where ``\\b(?:forms)`` does, the same text, on random strings of
    the forms, word characters (ASCII, non-ASCII, digits, ``_``) and separators."""
    fast = re.compile(sem._at_word_start(*forms) + r"\b")
    plain = re.compile(r"\b(?:" + "|".join(map(re.escape, forms)) + r")\b")
    rnd = random.Random(len(forms))
    alphabet = list(forms) + [
        "a",
        "I",
        "m",
        "e",
        "é",
        "_",
        "1",
        " ",
        "'",
        "\t",
        "\n",
        ".",
        "-",
        "y",
        "ou",
        "Y",
    ]
    for _ in range(20000):
        s = "".join(rnd.choice(alphabet) for _ in range(rnd.randint(0, 10)))
        assert [m.span() for m in fast.finditer(s)] == [m.span() for m in plain.finditer(s)], s
        assert fast.sub("<>", s) == plain.sub("<>", s)


def test_names_are_the_look_behinds_first_form():
    plain = re.compile(r"(?<!^)(?<![.!?]\s)\b[A-Z][a-z]+")
    rnd = random.Random(3)
    for _ in range(50000):
        s = "".join(rnd.choice("aAbZz .!?\t\n\x1c_é1É'") for _ in range(rnd.randint(0, 12)))
        assert sem._NAME.findall(s) == plain.findall(s), s


@pytest.mark.parametrize(
    "text,want",
    [
        (
            "My sister Emma is coming on Oct 12, can you remind me?",
            ["Alice's sister Emma is coming on Oct 12."],
        ),
        (
            "Can you remember that I'm allergic to peanuts and shellfish?",
            ["Alice is allergic to peanuts and shellfish."],
        ),
        (
            "Hi Sam! I work nights at St. Mary's Hospital in Boston. Dr. Smith runs it.\n[shares a photo: a photo of a dog]",
            [
                "Alice works nights at St. Mary's Hospital in Boston.",
                "Alice said: Dr. Smith runs it.",
                "Alice shared a photo of a dog",
            ],
        ),
        ("Please give me a stretching routine. Thanks, Bob!", []),
        ("I moved to Zürich in May 2023.", ["Alice moved to Zürich in May 2023."]),
        ("I\u2019m training for a marathon in June.", ["Alice is training for a marathon in June."]),
    ],
)
def test_known_messages(text, want):
    assert sem.message_statements(text, "Alice", "Bob", False, SemanticConfig()) == want


def test_non_ascii_names():
    cfg = SemanticConfig()
    assert sem.message_statements("My dog is called Rex and he is three.", "Zoë", "Bob", False, cfg) == [
        "Zoë's dog is called Rex and he is three."
    ]
    assert sem.message_statements("I love my dog, do you?", "Łukasz", "Zoë", False, cfg) == [
        "Łukasz loves Łukasz's dog."
    ]


def test_long_repetitions():
    """A greeting or request lead repeated 200,000 times: the regular expressions walk the repetitions."""
    cfg = SemanticConfig()
    assert sem.is_filler("good morning, " * 200_000 + "Sam!", cfg)
    assert not sem.is_filler("good morning " * 200_000 + "Sam x", cfg)
    assert sem.is_filler("please, " * 200_000 + "give me a list of things", cfg)
    assert not sem.is_filler("please, " * 200_000 + "give xme", cfg)
