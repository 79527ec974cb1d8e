"""A short reply read with the question of the turn before it (``SemanticConfig.
read_replies_with_questions``, off by default): the rule, the same statements in a bulk build and a
live engine, and a delete of the question forgets what it was read into."""

from __future__ import annotations

import dataclasses

import pytest

from xmemory_gpu.config import SemanticConfig, XMemoryConfig
from xmemory_gpu.construct.semantic import asked_question, extract_statements, message_statements
from xmemory_gpu.embed.hashing import HashingEmbedder
from xmemory_gpu.engine import MemoryEngine
from xmemory_gpu.memory.records import Conversation, Episode, Message

CFG = SemanticConfig(read_replies_with_questions=True)
ASK = Message("a", "assistant", "Nice to meet you! What do you teach?", 1)


@pytest.mark.parametrize(
    ("reply", "want"),
    [
        (
            "Chemistry at Roosevelt High here in Chicago. Mostly juniors.",
            ["user said: Chemistry at Roosevelt High here in Chicago. (asked: What do you teach?)"],
        ),
        ("Mostly juniors.", ["user said: Mostly juniors. (asked: What do you teach?)"]),
        ("I teach chemistry at Roosevelt High.", ["user teaches chemistry at Roosevelt High."]),  # says it
        ("Sure!", []),
        ("Thanks, what should I read next?", []),
    ],
)
def test_a_short_reply_carries_the_question(reply, want):
    q = asked_question(ASK, Message("b", "user", reply, 1))
    assert q == "What do you teach?"
    assert message_statements(reply, "user", "assistant", False, CFG, q) == want


def test_what_is_no_question_to_a_reply():
    reply = Message("b", "user", "Chemistry at Roosevelt High.", 1)
    assert asked_question(None, reply) is None
    assert asked_question(dataclasses.replace(ASK, speaker="user"), reply) is None  # the same speaker
    assert asked_question(dataclasses.replace(ASK, session=2), reply) is None  # another session
    assert asked_question(dataclasses.replace(ASK, text="What do you teach? Tell me."), reply) is None
    assert asked_question(dataclasses.replace(ASK, text="How are you?"), reply) is None  # asks nothing
    long = (
        "Chemistry at Roosevelt High here in Chicago, mostly juniors and a few seniors who need the credit, "
        * 2
    )
    assert message_statements(long, "user", "assistant", False, CFG, "What do you teach?") == [
        message_statements(long, "user", "assistant", False, CFG)[0]
    ]
    # an assistant's answer is never read with the user's question
    assert "(asked:" not in " ".join(message_statements("x " * 50, "assistant", "user", True, CFG, "Why?"))


CHAT = [
    ("assistant", "Hi! What do you teach?"),
    ("user", "Chemistry at Roosevelt High here in Chicago."),
    ("assistant", "Lovely. Do you have kids?"),
    ("user", "Yes, two of them."),
    ("user", "My daughter Lena has her first piano recital on May 18th."),
    ("assistant", "Which part of Leeds do you live in?"),
    ("user", "Headingley, five minutes from the studio."),
]


def _messages() -> list[Message]:
    return [Message(f"m{i}", r, t, 1) for i, (r, t) in enumerate(CHAT)]


def test_statements_of_part_of_a_chat_read_with_the_turns_before_them():
    msgs = _messages()
    conv = Conversation("c", ("user", "assistant"), msgs)
    whole = [n.text for n in extract_statements(conv, [Episode(0, "", "", [m.id for m in msgs])], CFG)]
    assert sum("(asked:" in t for t in whole) == 3
    part = Conversation("c", ("user", "assistant"), msgs[3:])
    before = {m.id: p for p, m in zip([msgs[2], *msgs[3:-1]], msgs[3:])}
    got = [
        n.text
        for n in extract_statements(
            part, [Episode(0, "", "", [m.id for m in msgs[3:]])], CFG, previous=before
        )
    ]
    assert got == [t for t in whole if "teach" not in t]
    off = extract_statements(conv, [Episode(0, "", "", [m.id for m in msgs])], SemanticConfig())
    assert not any("(asked:" in n.text for n in off)  # the default: replies read alone


def _texts(eng: MemoryEngine) -> list[str]:
    return sorted(u["text"] for u in eng.get_all(user_id="u") if u["type"] == "semantic")


def test_the_live_engine_reads_replies_as_a_build_does_and_a_delete_forgets_the_question(tmp_path):
    config = XMemoryConfig(semantic=CFG)
    turns = [{"role": r, "content": t, "session": 1} for r, t in CHAT]
    emb = HashingEmbedder(dim=64)
    with (
        MemoryEngine.open(tmp_path / "one", embedder=emb, config=config) as one,
        MemoryEngine.open(tmp_path / "turns", embedder=emb, config=config) as turn_by_turn,
    ):
        one.add(turns, user_id="u")
        for t in turns:
            turn_by_turn.add([t], user_id="u")
        assert _texts(one) == _texts(turn_by_turn)
        assert any("(asked: Do you have kids?)" in t for t in _texts(one))
        kids = next(u["id"] for u in one.get_all(user_id="u") if u.get("text") == "Lovely. Do you have kids?")
        one.delete(kids, user_id="u")
        assert not any("kids" in t for t in _texts(one))
        assert any("(asked: Which part of Leeds do you live in?)" in t for t in _texts(one))


def test_a_deleted_statement_stays_deleted_when_the_question_before_it_goes_or_changes(tmp_path):
    turns = [
        {"role": "user", "content": "Hello, I just moved to Chicago last month.", "id": "h"},
        {"role": "assistant", "content": "Welcome! Chicago is a great city for food.", "id": "w"},
        {"role": "assistant", "content": "Hi! What do you teach?", "id": "q"},
        {"role": "user", "content": "Chemistry at Roosevelt High here in Chicago.", "id": "r"},
    ]
    config = XMemoryConfig(semantic=CFG)
    for change in ("delete", "update"):
        with MemoryEngine.open(
            tmp_path / change, embedder=HashingEmbedder(dim=64), config=config, stamp_arrival=False
        ) as eng:
            eng.add(turns, user_id="u")
            unit = next(
                u
                for u in eng.get_all(user_id="u")
                if "Roosevelt" in u.get("text", "") and u["type"] == "semantic"
            )
            assert "(asked: What do you teach?)" in unit["text"]
            eng.delete(unit["id"], user_id="u")
            if change == "delete":
                eng.delete("q", user_id="u")
            else:
                eng.update("q", "Which school do you work at?", user_id="u")
            assert not any("Roosevelt" in t for t in _texts(eng)), change


def test_a_question_read_with_a_reply_changes_no_fact():
    from xmemory_gpu.construct.semantic import without_question
    from xmemory_gpu.construct.supersede import changes

    said = "user said: Still in the Headingley flat. (asked: Where do you live now?)"
    assert changes(said, "user")  # "now" read as a change of home ...
    assert without_question(said) == "user said: Still in the Headingley flat."
    assert not changes(without_question(said), "user")  # ... where supersession reads what was said
    assert without_question("I said (asked: x) then.") == "I said (asked: x) then."
