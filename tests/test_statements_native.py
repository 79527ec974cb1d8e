"""construct.semantic's per-message statement rules from the compiled module (csrc/cpu/statements.cpp):
each rule (split_sentences, is_filler, stated_part, specificity) and whole messages
(``message_statements``) against the regular expressions, on fresh random text built from every
form the rules match and their near misses (other cases, glued word characters, every whitespace
``\\s`` accepts, photo captions, titles and initials), under several configurations; non-ASCII text
and names stay on the reference."""

from __future__ import annotations

import random

import pytest

from xmemory_gpu.config import SemanticConfig
from xmemory_gpu.construct import semantic as sem
from xmemory_gpu.memory.records import Conversation, Episode, Message
from xmemory_gpu.ops import available_backends

pytestmark = pytest.mark.skipif(
    not available_backends()["cpu"].available, reason="the C++ module is not built"
)

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
    + "that you You YOU Hi HELLO Thanks Sam Alice Bob I I'm my Dr. St. Mr. e.g. i.e. J. R. A. a.m. Oct 12 2024 3pm "
    "adopted puppy Boston nurse job hiking ItalY mcDonald McDonald xyz remindme thatx youx hix hiking summarising "
    "photo picture image of a the dog beach haha lol wow great nice".split()
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
]
NAMES = ["Alice", "Bob", "user", "assistant", "I", "you", "Jo Ann", "", "X\\1", "Sam said: "]
CONFIGS = [
    SemanticConfig(),
    SemanticConfig(max_per_message=0),
    SemanticConfig(max_per_message=1, min_words=0),
    SemanticConfig(max_per_message=2, min_words=2, max_statement_words=4),
    SemanticConfig(min_words=1000),
]


def _text(rnd: random.Random, most: int = 18) -> str:
    s = "".join(rnd.choice(PIECES) + rnd.choice(GLUE) for _ in range(rnd.randint(1, most)))
    if rnd.random() < 0.5:
        s = s[:1].upper() + s[1:]
    if rnd.random() < 0.25:  # a shared photo, as the loader writes it (and near misses)
        cap = rnd.choice(
            [
                "a photo of a dog",
                "photo of the beach",
                "a picture of Bob ",
                "image of",
                "",
                "  ",
                "a photo of",
                "[shares a photo: x",
                "sunset] and",
                "a image of x",
            ]
        )
        s += (
            rnd.choice([" ", "", "\n", "  "])
            + f"[shares a photo: {cap}]"
            + rnd.choice(["", " ", "\n", " x", "]"])
        )
    return (" " if rnd.random() < 0.1 else "") + s


def _question(rnd: random.Random) -> str:
    """A question carrying a fact (or a near miss): "<clause>, [so] can you ...?", "... remember that <fact>?"."""

    def words(k: int) -> str:
        return "".join(
            rnd.choice(PIECES) + rnd.choice([" ", " ", "  ", "\t", "\n", ", ", ";", "-"])
            for _ in range(rnd.randint(0, k))
        )

    ask = (
        rnd.choice([",", ";", ":", "-", " ", ",,"])
        + rnd.choice(["", " ", "  ", "\t"])
        + rnd.choice(["", "so ", "And  ", "but\t", "SO", "and"])
        + rnd.choice(list(sem._ASK_VERBS) + ["cant", "Could"])
        + rnd.choice([" ", "  ", "", "\n"])
        + rnd.choice(["you", "You", "YOU", "youx", "you'd", "you_"])
    )
    that = (
        rnd.choice(list(sem._THAT_HEADS) + ["Remember", "KNOW", "remindme", "keep in  mind"])
        + rnd.choice([" ", "  ", "", "\t"])
        + rnd.choice(["that", "That", "thatx", "that's"])
        + rnd.choice([" ", "  ", "", "\n"])
    )
    body = words(8) + rnd.choice([ask, that, ask + " " + that, that + words(3) + ask]) + words(6)
    return body + rnd.choice(["?", "??", "?!?", " ?", ".?", ",?", ";?"])


@pytest.mark.parametrize("seed", range(6))
def test_each_rule_is_the_regular_expressions(seed):
    rnd, rules = random.Random(seed), sem._native_statements
    for _ in range(1500):
        text = _text(rnd)
        assert rules.split_sentences(text) == sem.split_sentences(text), text
        for s in sem.split_sentences(text) + [text, text.strip() + "?", _question(rnd), _question(rnd)]:
            for cfg in CONFIGS[:4]:
                assert rules.is_filler(s, cfg.min_words) == sem.is_filler(s, cfg), (s, cfg.min_words)
            assert rules.stated_part(s) == sem.stated_part(s), s
            assert rules.specificity(s) == sem.specificity(s), s


@pytest.mark.parametrize("seed", range(6))
def test_messages_are_the_reference(seed):
    rnd, rules = random.Random(100 + seed), sem._native_statements
    for cfg in CONFIGS:
        texts = [_text(rnd, 40 if rnd.random() < 0.2 else 18) for _ in range(300)]
        speakers, others = [rnd.choice(NAMES) for _ in texts], [rnd.choice(NAMES) for _ in texts]
        assistant = [rnd.random() < 0.3 for _ in texts]
        got = rules.statements(
            texts, speakers, others, assistant, cfg.min_words, cfg.max_per_message, cfg.max_statement_words
        )
        for t, sp, ot, a, g in zip(texts, speakers, others, assistant, got):
            assert g == sem.message_statements(t, sp, ot, a, cfg), (t, sp, ot, a)


def test_known_cases():
    rules, cfg = sem._native_statements, SemanticConfig()
    cases = {
        "My sister Emma is coming on Oct 12, can you remind me?": [
            "Alice's sister Emma is coming on Oct 12."
        ],
        "Can you remember that I'm allergic to peanuts and shellfish?": [
            "Alice is allergic to peanuts and shellfish."
        ],
        "Hi Sam! I work nights at St. Mary's Hospital in Boston. Dr. Smith runs it.\n[shares a photo: a photo of a dog]": [
            "Alice works nights at St. Mary's Hospital in Boston.",
            "Alice said: Dr. Smith runs it.",
            "Alice shared a photo of a dog",
        ],
        "Please give me a stretching routine. Thanks, Bob!": [],
    }
    for text, want in cases.items():
        (got,) = rules.statements(
            [text], ["Alice"], ["Bob"], [False], cfg.min_words, cfg.max_per_message, cfg.max_statement_words
        )
        assert got == sem.message_statements(text, "Alice", "Bob", False, cfg) == want, text


def test_non_ascii_stays_on_the_reference():
    rules, cfg = sem._native_statements, SemanticConfig()
    texts = [
        "I moved to Zürich in May 2023.",
        "I moved to Paris in May 2023.",
        "My dog is called Rex and he is three.",
        "I\u2019m training for a marathon in June.",
    ]
    speakers, others = ["Alice", "Alice", "Zoë", "Alice"], ["Bob", "Bob", "Bob", "Bob"]
    got = rules.statements(
        texts, speakers, others, [False] * 4, cfg.min_words, cfg.max_per_message, cfg.max_statement_words
    )
    assert (
        got[0] is None
        and got[2] is None
        and got[3] is None
        and got[1] == ["Alice moved to Paris in May 2023."]
    )
    msgs = [
        Message(id=f"m{i}", speaker=s, text=t, session=1) for i, (s, t) in enumerate(zip(speakers, texts))
    ]
    conv = Conversation("c", ("Alice", "Bob"), msgs)
    eps = [Episode(0, "", "", [m.id for m in msgs])]
    fast, ref = sem.extract_statements(conv, eps, cfg), sem.extract_statements(conv, eps, cfg, native=False)
    assert [n.text for n in fast] == [n.text for n in ref]
    assert "Alice is training for a marathon in June." in [n.text for n in fast]
    with pytest.raises(ValueError, match="ASCII"):
        rules.stated_part("Zürich?")


def test_conversations_are_the_reference():
    """Synthetic chats and LoCoMo-style turns: every node the same with and without the C++."""
    from pathlib import Path

    from xmemory_gpu.construct.segment import make_episodes
    from xmemory_gpu.datasets.locomo import conversations_of
    from xmemory_gpu.datasets.synthetic import generate_conversations, generate_long_chats

    items = generate_conversations(20, seed=9) + generate_long_chats(3, seed=9, target_tokens=6000)
    convs = list(conversations_of(Path("synthetic.json"), items))
    n = 0
    for conv in convs:
        eps = make_episodes(conv, [(0, len(conv.messages))])
        for cfg in CONFIGS[:3]:
            fast, ref = (
                sem.extract_statements(conv, eps, cfg),
                sem.extract_statements(conv, eps, cfg, native=False),
            )
            assert fast == ref
            n += len(fast)
    assert n > 1000


def test_word_lists_are_checked():
    with pytest.raises(ValueError, match="lower-case ASCII"):
        sem.StatementRules(sem._native_decouple, set(), set(), set(), ["Hi"], [], [], [], [], [], [], [], 40)


def test_long_repetitions_need_no_deep_stack():
    """A greeting or request lead repeated 200,000 times: the C++ walks the repetitions without
    recursion (it once recursed per repetition) and agrees with the regular expressions."""
    rules, cfg = sem._native_statements, SemanticConfig()
    for text in (
        "good morning, " * 200_000 + "Sam!",
        "good morning " * 200_000 + "Sam x",
        "please, " * 200_000 + "give me a list of things",
        "please, " * 200_000 + "give xme",
    ):
        assert rules.is_filler(text, cfg.min_words) == sem.is_filler(text, cfg)


def test_a_flag_that_edits_the_lists_is_read_first():
    """The assistant flag's truth runs Python code: it is read before the text and names are viewed,
    and each is held while the C++ reads it (a replaced 2 MB text was read after being freed)."""
    texts, speakers = ["I adopted a puppy named Rex in Boston. " * 50_000], ["Alice"]

    class Flag:
        def __bool__(self) -> bool:
            texts[0], speakers[0] = "I moved to Paris in May 2023 with my two cats.", "Carol"
            return False

    got = sem._native_statements.statements(texts, speakers, ["Bob"], [Flag()], 4, 3, 60)
    assert got == [["Carol moved to Paris in May 2023 with Carol's two cats."]]


def test_limits_past_2_62_are_refused():
    with pytest.raises(ValueError, match="2\\*\\*62"):
        sem._native_statements.statements(
            ["I adopted a puppy named Rex."], ["Alice"], ["Bob"], [False], 4, -(2**63), 60
        )
