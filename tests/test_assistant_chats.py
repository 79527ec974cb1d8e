"""Ordinary assistant chats: who is speaking, facts that change, "nothing relevant", and the
figures on the role chats of ``datasets.assistant_chats`` with the default embedder at 150 tokens."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from xmemory_gpu.config import SemanticConfig
from xmemory_gpu.construct.semantic import extract_statements, is_filler
from xmemory_gpu.construct.supersede import attributes, supersessions
from xmemory_gpu.embed.hashing import HashingEmbedder
from xmemory_gpu.engine import MemoryEngine
from xmemory_gpu.engine.people import about_subject, introduced_name
from xmemory_gpu.eval.chat_metrics import auroc, broken_forms, evidence_recall, newer_first
from xmemory_gpu.memory.records import Conversation, Episode, Message

EMB = HashingEmbedder(256)
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))


@pytest.mark.parametrize(
    "text, name",
    [
        ("Hi! I'm Priya, nice to meet you.", "Priya"),
        ("Btw call me Jordan.", "Jordan"),
        ("My name is Kemi and I cook.", "Kemi"),
        ("Sam here, I borrowed the laptop.", "Sam"),
        ("I'm Canadian.", None),
        ("I'm training for a marathon.", None),
        ("hey, I'm looking for books", None),
        ("Tell Maria I said hi.", None),
    ],
)
def test_names_the_user_gives(text, name):
    assert introduced_name(text) == name


@pytest.mark.parametrize(
    "query, subject, want",
    [
        ("Where do I work now?", "Priya", "Where does Priya work now?"),
        ("What is my dog's name?", "the user", "What is the user's dog's name?"),
        ("Am I still running the marathon?", "Sam", "Is Sam still running the marathon?"),
        ("Who lent me money?", "Kemi", "Who lent Kemi money?"),
        ("What breed is Priya's dog?", "Priya", "What breed is Priya's dog?"),
    ],
)
def test_first_person_questions_are_asked_about_the_subject(query, subject, want):
    assert about_subject(query, subject) == want


def test_greetings_requests_and_assistant_small_talk_are_no_facts():
    cfg = SemanticConfig()
    for s in (
        "Nice to meet you, Priya!",
        "Good morning Sam.",
        "Give me a quick stretching routine for after work.",
        "Explain what a Roth IRA is.",
        "Please write a haiku about autumn.",
    ):
        assert is_filler(s, cfg), s
    for s in (
        "Book club meets on Fridays at the library.",
        "Set up the tent near the lake was hard.",
        "I work as a nurse at the hospital.",
    ):
        assert not is_filler(s, cfg), s
    long = "Compound interest means you earn interest on the interest. " * 8
    msgs = [
        Message("u", "Priya", "I adopted a beagle called Biscuit last spring.", 1),
        Message("a1", "assistant", "Beagles are great company and they love long walks in the park.", 1),
        Message("a2", "assistant", long, 1),
    ]
    nodes = extract_statements(
        Conversation("c", ("Priya", "assistant"), msgs), [Episode(0, "", "", ["u", "a1", "a2"])], cfg
    )
    by = {n.message_ids[0]: n.text for n in nodes}
    assert "a1" not in by and by["u"].startswith("Priya") and by["a2"].startswith("assistant said: ")


def test_supersession_needs_a_change_the_same_attribute_and_closeness():
    texts = [
        "Priya works as a nurse at the hospital.",
        "Priya's sister visits in June.",
        "Priya left the hospital and now works as a designer.",
        "Priya now takes the bus to the gym.",
    ]
    assert attributes(texts[0]) >= {"job"} and "job" in attributes(texts[2])
    x = np.eye(4, dtype=np.float32)
    x[2] = x[0] * 0.8 + x[2] * 0.6  # close to the nurse statement only
    x[3] = x[1] * 0.8 + x[3] * 0.6  # close to the sister statement, but another attribute
    sup = supersessions(texts, x, np.arange(4), ["Priya"] * 4)
    assert sup == {0: 2}
    assert supersessions(texts, x, np.arange(4), ["Priya", "Priya", "Sam", "Priya"]) == {}  # another speaker
    assert supersessions(texts, x, np.array([3, 0, 1, 2]), ["Priya"] * 4) == {}  # the change came first


def test_metrics():
    assert evidence_recall(["a", "b"], ["b", "c"]) == 0.5 and evidence_recall([], []) == 1.0
    assert (
        newer_first(["n", "o"], ["n"], ["o"])
        and not newer_first(["o", "n"], ["n"], ["o"])
        and not newer_first(["o"], ["n"], ["o"])
    )
    assert auroc([0.9, 0.8], [0.1, 0.8]) == 0.875
    assert (
        broken_forms("Priya lefts the hospital") == ["lefts"]
        and broken_forms("Priya works at St.")
        and not broken_forms("Sam sets goals")
    )


def test_a_name_learned_later_renames_the_earlier_turns(tmp_path):
    with MemoryEngine.open(tmp_path / "s", embedder=EMB) as eng:
        eng.add(
            [
                {"role": "user", "content": "I commute by train 40 minutes each way so I read a lot."},
                {"role": "assistant", "content": "That's plenty of reading time."},
            ],
            user_id="u",
        )
        assert any(
            u["text"].startswith("the user commutes")
            for u in eng.get_all(user_id="u")
            if u["type"] == "semantic"
        )
        eng.add([{"role": "user", "content": "Btw call me Jordan."}], user_id="u")
        units = eng.get_all(user_id="u")
        assert {u["speaker"] for u in units if u["type"] == "message"} == {"Jordan", "assistant"}
        assert any(u["text"].startswith("Jordan commutes") for u in units if u["type"] == "semantic")
        assert not any("the user" in u["text"] for u in units if u["type"] == "semantic")
        first = eng.search("How do I get to work?", user_id="u", strategy="memory-only", threshold=0.0)[0]
        named = eng.search(
            "How does Jordan get to work?", user_id="u", strategy="memory-only", threshold=0.0
        )[0]
        assert [u.id for u in first.units] == [
            u.id for u in named.units
        ] and first.query == "How do I get to work?"


def test_a_changed_fact_reads_as_earlier_and_its_successor_comes_first(tmp_path):
    with MemoryEngine.open(
        tmp_path / "s"
    ) as eng:  # the default embedder: the closeness rule is calibrated on it
        eng.add(
            [
                {
                    "role": "user",
                    "content": "I work as a night-shift nurse at St. Mary's Hospital in Boston.",
                    "timestamp": "2024-01-08T09:00:00Z",
                }
            ],
            user_id="u",
            user_name="Priya",
        )
        eng.add(
            [
                {
                    "role": "user",
                    "content": "I left the hospital and now I work as a product designer at Google.",
                    "timestamp": "2024-05-02T10:00:00Z",
                }
            ],
            user_id="u",
        )
        sem = {u["text"]: u for u in eng.get_all(user_id="u") if u["type"] == "semantic"}
        old = next(u for t, u in sem.items() if "nurse" in t)
        new = next(u for t, u in sem.items() if "Google" in t)
        assert old["superseded_by"] == new["id"] and old["valid_until"] == pytest.approx(1714644000.0)
        r = eng.search(
            "Where does Priya work as a nurse?",
            user_id="u",
            strategy="memory-only",
            budget_tokens=200,
            threshold=0.0,
        )[0]
        ids = [u.id for u in r.units if u.type == "semantic"]
        assert ids.index(new["id"]) < ids.index(old["id"])
        assert "previously, until 2024-05: Priya works as a night-shift nurse" in r.context


def test_nothing_relevant_comes_back_empty_with_a_note(tmp_path):
    with MemoryEngine.open(tmp_path / "s", embedder=EMB) as eng:
        eng.add([{"role": "user", "content": "I adopted a beagle called Biscuit last spring."}], user_id="u")
        eng.config.live.no_answer_threshold = 0.99  # every result below it
        r = eng.search("What is my dog called?", user_id="u")[0]
        assert r.units == [] and r.context == "" and r.top_relevance > 0 and "nothing relevant" in r.notes[-1]
        assert eng.search("What is my dog called?", user_id="u", threshold=0.0)[
            0
        ].units  # a caller's threshold replaces it
        eng.config.live.no_answer_threshold = 0.0
        assert eng.search("What is my dog called?", user_id="u")[0].units  # 0: off


def test_the_figures_on_the_role_chats_with_the_default_embedder():
    from assistant_chats import run

    res = run(None, 150, ["xmemory"], 1.0)  # the engine's defaults (no no-answer gate)
    m = res["strategies"]["xmemory"]
    assert m["recall_first"] >= 0.85 and m["recall_named"] >= 0.85, m
    assert m["newer_first"] >= 0.75 and m["auroc"] >= 0.85, m
    assert res["broken"] == []


def test_other_frameworks_role_names_are_the_two_chat_roles(tmp_path):
    with MemoryEngine.open(tmp_path / "s", embedder=EMB) as eng:
        eng.add(
            [
                {"role": "human", "content": "I adopted a beagle called Biscuit last spring."},
                {"role": "AI", "content": "Beagles are lovely."},
                {"role": "model", "content": "Enjoy the walks!"},
                {"speaker": "human", "content": "A speaker is a name: kept as given."},
            ],
            user_id="u",
            user_name="Priya",
        )
        assert [u["speaker"] for u in eng.get_all(user_id="u") if u["type"] == "message"] == [
            "Priya",
            "assistant",
            "assistant",
            "human",
        ]
