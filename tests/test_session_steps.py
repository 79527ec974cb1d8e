"""The theme stage's steps (``themes.session_steps``): one per run of a session's nodes, in row order,
so that messages given out of session order (a session's turns interleaved with another's) are
attached in ascending rows, by the live engine and by a bulk build alike, instead of failing."""

from __future__ import annotations

import numpy as np

from xmemory_gpu.construct.pipeline import build_memories
from xmemory_gpu.construct.themes import session_steps
from xmemory_gpu.embed.hashing import HashingEmbedder
from xmemory_gpu.engine import MemoryEngine
from xmemory_gpu.memory.records import Conversation, Message

PLACES = ["Oslo", "Rome", "Lima", "Kyiv", "Pune", "Cork", "Bern", "Nice"]


def test_steps_are_runs_of_one_session_in_row_order():
    assert [s.tolist() for s in session_steps(np.array([3, 3, 5, 5, 5]), 10)] == [[10, 11], [12, 13, 14]]
    assert [s.tolist() for s in session_steps(np.array([2, 2, 1, 1]))] == [[0, 1], [2, 3]]
    assert [s.tolist() for s in session_steps(np.array([1, 0, 1, 0]))] == [[0], [1], [2], [3]]
    assert session_steps(np.zeros(0, np.int64)) == []


def _turns(sessions: list[int]) -> list[dict]:
    return [
        {
            "role": "user",
            "session": s,
            "content": f"I went to {PLACES[i % len(PLACES)]} for rowing with my friend tok{i:03d}x last week.",
        }
        for i, s in enumerate(sessions)
    ]


def test_an_add_of_interleaved_sessions_places_every_statement(tmp_path):
    with MemoryEngine.open(tmp_path / "s", embedder=HashingEmbedder(dim=16)) as eng:
        eng.add(_turns([1, 0, 1, 0, 2, 1]), user_id="u")
        eng.add(_turns([0, 3, 0, 3]), user_id="u")
        units = eng.get_all(user_id="u")
        assert sum(u["type"] == "message" for u in units) == 10
        sl = eng.bank.slice(0)
        assert sl.n("sem") and (np.asarray(sl.cols["sem"]["theme"]) >= 0).all()
        assert eng.search("Where did I go rowing?", user_id="u", threshold=0)[0].units


def test_a_bulk_build_of_interleaved_sessions_places_every_statement():
    msgs = [
        Message(f"m{i}", "A" if i % 2 else "B", t["content"], t["session"])
        for i, t in enumerate(_turns([1, 0, 1, 0, 2, 1]))
    ]
    (mem,) = build_memories([Conversation("c", ("A", "B"), msgs)], HashingEmbedder(dim=16))
    assert mem.semantics and (np.asarray(mem.theme_of) >= 0).all()
