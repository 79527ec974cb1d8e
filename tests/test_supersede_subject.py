"""Facts that change: a statement supersedes an earlier one only about the same subject and the same
attribute, the change word tied to that attribute (``construct.supersede``); and on the live engine,
the current value of a changed fact comes first and survives ``limit``."""

from __future__ import annotations

import numpy as np
import pytest

from xmemory_gpu.construct.supersede import SELF, attributes, changes, repeats, subject, supersessions
from xmemory_gpu.engine import MemoryEngine

U = "the user"


@pytest.mark.parametrize(
    "text, want",
    [
        ("the user moved to Lisbon in March.", SELF),
        ("Quick one: the user quit Tilde last week.", SELF),
        ("Bad news, the user broke the user's ankle on an icy run.", SELF),
        ("Update: Tom and the user moved from Dublin to Austin in March.", SELF),
        ("the user said: We changed plans, the wedding will be in Lisbon instead of Mt. Hood.", SELF),
        ("the user said: The marathon is off.", SELF),
        ("the user's birthday is on October 3rd.", SELF),
        ("the user's friend Bob is allergic to peanuts.", "bob"),
        ("the user said: Bob broke his ankle last week, so he swims instead now.", "bob"),
        ("the user's sister Meena is visiting on June 14th.", "meena"),
        ("the user's sister moved to Rome.", "sister"),
        ("Our daughter Lily starts kindergarten in September.", "lily"),
        ("the user said: He moved to Paris.", None),
        ("Priya works as a nurse.", SELF),  # a memory of named speakers: the speaker is Priya
    ],
)
def test_the_subject_of_a_statement(text, want):
    assert subject(text, "Priya" if text.startswith("Priya") else U) == want


@pytest.mark.parametrize(
    "text, changed",
    [
        ("the user moved to Lisbon in March.", {"home"}),
        ("the user just started at Google as a product designer.", {"job"}),
        ("Quick one: the user quit Tilde last week.", {"job"}),
        ("the user said: Bob broke his ankle last week, so he swims instead now.", {"injury"}),
        ("Tom and the user moved to Austin for his new job.", {"home"}),  # his job changed, not the user's
        ("the user sold the Civic and now cycles to work, no more fuel costs.", {"transport"}),
        ("the user got a raise, the user now takes home $4,800 a month.", {"income"}),
        ("the user lives in Boston.", set()),
        ("the user's friend Bob is allergic to peanuts.", set()),
    ],
)
def test_a_change_word_changes_the_attribute_it_is_tied_to(text, changed):
    assert changes(text) == changed


@pytest.mark.parametrize(
    "text",
    [
        "the user wants to quit the job.",
        "the user is thinking about quitting the job.",
        "the user is nervous about quitting.",
        "the user's going to quit the job.",
        "the user would like to start a new job.",
        "the user hopes to get a new job in the spring.",
        "the user will now live in Berlin.",
        "If the user moved to Berlin, she'd be happy.",
        "the user would be happy if she moved to Berlin.",
        "If the visa comes through, the user is relocating to Berlin.",
        "When the user starts the new job, she will bike to work.",
        "Maybe the user moved to Berlin?",
        "the user started a new hobby at the office.",
    ],
)
def test_intent_doubt_and_conditions_change_nothing(text):
    assert changes(text) == set()


@pytest.mark.parametrize(
    "text, changed",
    [
        ("the user has quit the job.", {"job"}),
        ("the user quit the job.", {"job"}),
        ("the user is quitting the job.", {"job"}),  # a decided change, told as under way
        ("When the user moved to Berlin, she found a flat.", {"home"}),  # "when" told in the past
        ("the user didn't want to move but moved to Berlin.", {"home"}),  # the intent is in another clause
        ("the user's friend Will moved to Berlin.", {"home"}),  # "Will" is a name, not a future
        ("the user now goes to the office on Mondays.", {"schedule"}),  # the office is no job change
        ("the user now works at the office in Leeds.", {"job"}),
        # a negation 40 characters back or more is out of the change word's reach
        (
            "the user never thought that after so many long years of waiting she'd finally be moving to Lisbon.",
            set(),
        ),
        (
            "the user never dreamt it but after so many long and slow years of waiting moved to Lisbon.",
            {"home"},
        ),
    ],
)
def test_a_done_change_still_counts(text, changed):
    assert changes(text) == changed


def test_long_negated_text_is_read_in_bounded_windows():
    assert changes("the user has not " + "never now quit " * 10_000) == set()
    assert changes("x " * 100_000 + "the user moved to Lisbon.") == {"home"}


@pytest.mark.parametrize(
    "later, earlier, same",
    [
        ("the user now lives in Paris too.", "the user lives in Paris.", True),
        ("the user moved to Paris.", "the user lives in Paris.", True),
        ("The user  moved to Berlin", "the user moved to Berlin.", True),
        ("the user quit Tilde.", "the user quit Tilde.", True),
        ("the user quit Tilde.", "the user works at Tilde.", False),  # an ending word names the old value
        ("the user moved from Paris to Berlin.", "the user lives in Paris.", False),
        ("the user doesn't live in Paris anymore.", "the user lives in Paris.", False),
        ("the user now works as a teacher.", "the user works as a nurse.", False),
    ],
)
def test_a_repeat_is_no_change(later, earlier, same):
    assert repeats(later, earlier) == same


def test_an_empty_speaker_is_read_without_a_name():
    assert subject("the user moved to Berlin.", "") == SELF
    assert subject("We moved to Berlin.", "") == SELF
    assert subject("Bob moved to Paris.", "") == "bob"
    assert subject("Tom and Jerry moved to Paris.", " ") == "tom"
    assert subject("He moved to Rome.", "") is None
    texts = ["I live in Boston.", "I moved to Lisbon in March."]
    assert supersessions(texts, _close(2), np.arange(2), ["", ""]) == {0: 1}


def test_an_allergy_is_no_injury():
    assert attributes("Bob is allergic to peanuts.") == {"allergy"}
    assert attributes("Bob broke his ankle.") == {"injury"}


def _close(n: int) -> np.ndarray:
    """n unit rows, every pair at cosine 0.9: closeness never decides below."""
    x = np.full((n, n + 1), 0.0, np.float32)
    x[:, 0] = np.sqrt(0.9)
    x[np.arange(n), np.arange(n) + 1] = np.sqrt(0.1)
    return x


def test_a_change_supersedes_only_the_same_subject_and_attribute():
    texts = [
        "the user lives in Boston.",  # 0
        "the user works as a nurse at Mass General.",  # 1
        "the user's friend Bob is allergic to peanuts.",  # 2
        "the user moved to Lisbon in March.",  # 3: home of the user
        "the user said: Bob broke his ankle last week, so he swims instead now.",  # 4: Bob's injury
        "the user's sister moved to Rome.",  # 5: the sister's home
        "the user just started at Google as a product designer.",  # 6: the user's job
    ]
    sup = supersessions(texts, _close(len(texts)), np.arange(len(texts)), [U] * len(texts))
    assert sup == {0: 3, 1: 6}


def test_the_same_attribute_of_someone_else_or_of_no_one_known_stands():
    texts = [
        "the user lives in Boston.",
        "the user said: Bob moved to Paris.",
        "the user said: He moved to Rome.",
    ]
    assert supersessions(texts, _close(3), np.arange(3), [U] * 3) == {}
    texts = ["the user's friend Bob lives in Leeds.", "the user said: Bob moved to Paris."]
    assert supersessions(texts, _close(2), np.arange(2), [U] * 2) == {0: 1}


@pytest.mark.parametrize(
    "earlier, later, superseded",
    [
        ("the user works as a nurse.", "the user wants to quit the job.", False),
        ("the user works as a nurse.", "the user is thinking about quitting the job.", False),
        ("the user works as a nurse.", "the user has quit the job.", True),
        ("the user lives in Paris.", "If the user moved to Berlin, she'd be happy.", False),
        ("the user lives in Paris.", "the user is planning to move to Berlin.", False),
        ("the user lives in Paris.", "the user moved to Berlin.", True),
        ("the user works at Google.", "the user started a new hobby at the office.", False),
        ("the user works at Google.", "the user just started at Stripe as a designer.", True),
        ("the user lives in Paris.", "the user now lives in Paris too.", False),
        ("the user lives in Paris.", "the user lives in Paris.", False),
        ("the user lives in Paris.", "the user doesn't live in Paris anymore.", True),
    ],
)
def test_only_a_change_that_happened_and_says_something_new_supersedes(earlier, later, superseded):
    assert supersessions([earlier, later], _close(2), np.arange(2), [U, U]) == ({0: 1} if superseded else {})


def test_a_repeat_leaves_the_fact_to_a_later_change():
    texts = ["the user lives in Paris.", "the user now lives in Paris too.", "the user moved to Berlin."]
    assert supersessions(texts, _close(3), np.arange(3), [U] * 3) == {0: 2, 1: 2}


def test_closeness_still_gates():
    texts = ["the user lives in Boston.", "the user moved to Lisbon in March."]
    far = np.eye(2, dtype=np.float32)
    assert supersessions(texts, far, np.arange(2), [U] * 2) == {}
    assert supersessions(texts, _close(2), np.arange(2), [U] * 2) == {0: 1}


def test_changed_facts_on_the_live_engine(tmp_path):
    """The default embedder: the closeness rule is calibrated on it."""
    said = [
        ("I live in Boston.", "2024-01-08T09:00:00Z"),
        ("I work as a nurse at Mass General.", "2024-01-08T09:01:00Z"),
        ("My friend Bob is allergic to peanuts.", "2024-01-09T09:00:00Z"),
        ("Bob broke his ankle last week, so he swims instead now.", "2024-02-09T09:00:00Z"),
        ("I moved to Lisbon in March.", "2024-03-20T09:00:00Z"),
        ("I quit nursing and I just started at Google as a product designer.", "2024-05-02T09:00:00Z"),
    ]
    with MemoryEngine.open(tmp_path / "s") as eng:
        for text, ts in said:
            eng.add(
                [
                    {"role": "user", "content": text, "timestamp": ts},
                    {"role": "assistant", "content": "Noted.", "timestamp": ts},
                ],
                user_id="u",
            )
        sem = {u["text"]: u for u in eng.get_all(user_id="u") if u["type"] == "semantic"}

        def unit(word: str) -> dict:
            return next(u for t, u in sem.items() if word in t)

        boston, nurse, allergy, lisbon, google = map(
            unit, ("Boston", "nurse", "allergic", "Lisbon", "Google")
        )
        assert allergy.get("superseded_by") is None and lisbon.get("superseded_by") is None
        assert boston["superseded_by"] == lisbon["id"] and nurse["superseded_by"] == google["id"]

        def semantic(q: str, **kw) -> list:
            return [
                u for u in eng.search(q, user_id="u", threshold=0.0, **kw)[0].units if u.type == "semantic"
            ]

        live = semantic("Where do I live?")
        assert live[0].id == lisbon["id"] and live[1].id == boston["id"]
        assert live[1].text.startswith("previously") and not live[0].text.startswith("previously")
        work = [u.id for u in semantic("Where do I work now?")]
        assert work.index(google["id"]) < work.index(nurse["id"])
        for limit in range(1, 7):  # a stale statement never displaces its successor
            for q in ("Where do I work now?", "Where do I live?"):
                r = eng.search(q, user_id="u", threshold=0.0, limit=limit)[0]
                ids = [u.id for u in r.units]
                assert len(ids) == limit and all(u.text in r.context for u in r.units)
                assert all(
                    old["id"] not in ids or new["id"] in ids
                    for old, new in ((nurse, google), (boston, lisbon))
                )


def test_facts_are_read_once_per_statement_and_keep_no_text(monkeypatch) -> None:
    from xmemory_gpu.construct import supersede

    monkeypatch.setattr(supersede, "_facts_kept", type(supersede._facts_kept)())
    monkeypatch.setattr(supersede, "FACTS_KEPT", 2)
    said = [
        ("the user moved to Berlin last month.", "user"),
        ("the user works as a nurse at St Mary's.", "user"),
        ("the user's sister Meena quit her job.", "user"),
    ]
    for text, speaker in said:
        want = (
            supersede._mask(supersede.attributes(text, speaker) | supersede.changes(text, speaker)),
            supersede._subject_key(supersede.subject(text, speaker)),
        )
        assert supersede._facts(text, speaker) == want == supersede._facts(text, speaker)
    assert len(supersede._facts_kept) == 2  # bounded: the least recently read went
    # digests and ints, not text: "meena" is the third statement's subject
    assert all(isinstance(k, bytes) and len(k) == 32 for k in supersede._facts_kept)
    assert all(
        isinstance(m, int) and (w is None or isinstance(w, bytes)) for m, w in supersede._facts_kept.values()
    )
    assert supersede._facts(said[2][0], "user")[1] == supersede._subject_key("meena")
    before = set(supersede._facts_kept)
    supersede._facts("the user works as a nurse at St Mary's.", "assistant")
    assert set(supersede._facts_kept) != before  # the speaker is part of what is kept apart
