"""The user's own statements before an assistant's answers in a search's semantic memories
(``Stage1Config.users_first``), and the speaker roles that count as an assistant (``text.is_assistant``)."""

from __future__ import annotations

from xmemory_gpu.config import Stage1Config, XMemoryConfig
from xmemory_gpu.embed.hashing import HashingEmbedder
from xmemory_gpu.engine import MemoryEngine
from xmemory_gpu.retrieve.addressee import asks_what_assistant_said
from xmemory_gpu.text import is_assistant

ANSWER = (
    "Sourdough bread needs a lively starter, so feed the starter twice a day with flour and water. "
    "A sourdough loaf rises slowly, so let the sourdough bread dough proof overnight in the fridge. "
    "Bake the sourdough bread in a hot Dutch oven at 250 degrees for the first twenty minutes, then "
    "lower the heat and bake the sourdough loaf until the crust is deep brown and crackles."
)
CHAT = [
    ("user", "I bake sourdough bread for my family every Sunday morning."),
    ("assistant", ANSWER),
    ("user", "My starter is called Bubbles and it lives in a blue jar."),
]
QUERY = "How should I bake the sourdough bread loaf in the Dutch oven?"


def _semantics(tmp_path, users_first: bool, query: str = QUERY) -> list[tuple[bool, str]]:
    config = XMemoryConfig(stage1=Stage1Config(users_first=users_first))
    with MemoryEngine.open(
        tmp_path / str(users_first), embedder=HashingEmbedder(dim=256), config=config
    ) as eng:
        if not eng.scopes():
            eng.add([{"role": r, "content": t, "session": 1} for r, t in CHAT], user_id="u")
        res = eng.search(query, user_id="u", threshold=0.0)[0]
    return [(u.text.startswith("assistant said:"), u.text) for u in res.units if u.type == "semantic"]


def test_the_users_statements_come_before_the_assistants_answers(tmp_path):
    first = _semantics(tmp_path, True)
    plain = _semantics(tmp_path, False)
    said = [a for a, _ in first]
    assert any(said) and not all(said)
    assert said == sorted(said)  # every user statement before every assistant statement
    assert sorted(first) == sorted(plain)  # the same statements, only in another order
    assert [a for a, _ in plain] != said  # by relevance alone an answer leads: the rule moved it
    users = [t for a, t in first if not a]
    assert users == [t for a, t in plain if not a]  # each group keeps its order
    assert [t for a, t in first if a] == [t for a, t in plain if a]


def test_assistant_roles():
    assert all(map(is_assistant, ["assistant", "Assistant", "SYSTEM", "tool"]))
    assert not any(map(is_assistant, ["user", "Caroline", "assistant_bob", ""]))


def test_a_query_about_what_the_assistant_said_keeps_its_answers_in_rank(tmp_path):
    asked = "What did you recommend for baking the sourdough bread loaf in the Dutch oven?"
    plain = _semantics(tmp_path, False, asked)
    said = [a for a, _ in plain]
    assert said != sorted(said)  # an answer ranks above a user's statement
    assert _semantics(tmp_path, True, asked) == plain


def test_what_asks_about_the_assistants_earlier_answer():
    about = [
        "How did you recommend structuring the backend and frontend?",
        "What did you say about the hotel near the station?",
        "You suggested a book last week, what was its title?",
        "I think you've listed three options, which was the second?",
        "Remind me of your earlier list of stretches.",
        "What was your suggestion for the hotel?",
        "How did you walk the user through the firmware update?",  # "me" rewritten for a role chat
        "I think you\u2019ve listed three options, which was the second?",  # a typographic apostrophe
    ]
    new = [  # requests for a new answer, and questions about the user
        "Can you give me a thorough summary of everything we covered?",
        "Could you explain what a Roth IRA is?",
        "Can you provide a detailed summary of my project?",
        "What formula did I use to find the term?",
        "Have I ever used Alpine Linux in my deployments?",
        "What are your recommendations for a laptop on my budget?",
        "Give me your best tips for running a marathon.",
    ]
    assert all(map(asks_what_assistant_said, about))
    assert not any(map(asks_what_assistant_said, new))


def test_a_search_over_several_memories_keeps_the_answers_after_the_users_statements(tmp_path):
    turns = [{"role": r, "content": t, "session": 1} for r, t in CHAT]
    with MemoryEngine.open(tmp_path / "m", embedder=HashingEmbedder(dim=256)) as eng:
        for agent in ("a1", "a2"):
            eng.add(turns, user_id="u", agent_id=agent)
        one = eng.search(QUERY, user_id="u", agent_id="a1", threshold=0.0)[0]
        both = eng.search(QUERY, user_id="u", threshold=0.0, budget_tokens=2000)[0]  # both memories, merged
    for res in (one, both):
        said = [u.text.startswith("assistant said:") for u in res.units if u.type == "semantic"]
        assert any(said) and said == sorted(said)
    assert "after_users" not in both.to_dict()["units"][0]
