"""A change told in the middle of a long statement, and a later "never" that denies an earlier
statement: ``construct.supersede``'s ``focus`` (the part of a change statement that says what changed,
compared on its own given an encoder) and ``denial`` (``DENIAL_THRESHOLD``, ``DENIAL_SHARE``)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from xmemory_gpu.cli import main
from xmemory_gpu.construct.supersede import (
    DENIAL_THRESHOLD,
    MEASURE_THRESHOLD,
    denial,
    focus,
    supersessions,
)
from xmemory_gpu.embed import load_embedder
from xmemory_gpu.engine import MemoryEngine

OLD = "the user measured the login API response time and it is currently at 180ms under load"
LONG = (
    "the user is tuning the login API, which has decreased to 120ms under load after the new cache, "
    "and the user wants to make sure the errors are handled, since the user never fixed the lint warnings"
)


def _x(*cos: float) -> np.ndarray:
    """Unit rows: row 0, then one row per cosine with row 0."""
    rows = [[1.0, 0.0]] + [[c, (1 - c * c) ** 0.5] for c in cos]
    return np.array(rows, np.float32)


@pytest.mark.parametrize(
    ("text", "head"),
    [
        (
            LONG,
            "the user is tuning the login API, which has decreased to 120ms under load after the new cache",
        ),
        ("the user moved to Berlin, and loves it there", "the user moved to Berlin"),
        ("the user now lives in Paris.", None),  # the change is the whole statement
        ("the user loves it there", None),  # no change
        ("the user loves the city, and moved to Berlin", None),  # the change closes it
    ],
)
def test_the_part_of_a_statement_that_says_what_changed(text, head):
    assert focus(text, "user") == head


def test_a_long_change_statement_is_compared_by_its_change():
    """Whole, the long statement is further from the old value than one metric's cosine; its part that
    says what changed is as close as the short statement would be."""
    low = MEASURE_THRESHOLD - 0.05
    order, speakers = np.array([0, 1]), ["user", "user"]
    assert supersessions([OLD, LONG], _x(low), order, speakers) == {}
    seen: list[list[str]] = []

    def encode(texts: list[str]) -> np.ndarray:
        seen.append(texts)
        return np.array([[0.9, (1 - 0.81) ** 0.5]], np.float32)

    assert supersessions([OLD, LONG], _x(low), order, speakers, encode=encode) == {0: 1}
    assert seen == [[focus(LONG, "user")]]  # only the change statement's part is encoded
    far = lambda texts: np.array([[0.0, 1.0]], np.float32)  # noqa: E731
    assert supersessions([OLD, LONG], _x(low), order, speakers, encode=far) == {}  # the higher counts


@pytest.mark.parametrize(
    ("text", "stems", "verb", "last"),
    [
        (
            "the user has never written integration tests for any socket events, so the user is unsure",
            {"written", "integration", "test", "socket", "event"},
            "written",
            "event",
        ),
        (
            "the user has never actually worked with restaurant datasets before",
            {"work", "restaurant", "dataset"},
            "work",
            "dataset",
        ),
    ],
)
def test_what_a_denial_says_was_never_done(text, stems, verb, last):
    got = denial(text, "user")
    assert (got.stems, got.verb, got.last) == (frozenset(stems), verb, last)
    assert text.startswith(got.clause)


@pytest.mark.parametrize(
    "text",
    [
        "if the user never calls, the deal is off",  # a condition
        "have you never written tests?",  # a question
        "the user had never coded before joining the bootcamp",  # a time before something else
        "the user has never been to Japan",  # one word of a deed: too little to compare
        "the user would never work for Google as an engineer",  # a wish, not a denial
        "the user never misses a Monday workout",  # a habit
        "growing up, the user has never eaten vegetables",  # a time that is over
        "the user writes tests",
    ],
)
def test_what_is_no_denial(text):
    assert denial(text, "user") is None


@pytest.mark.parametrize(
    ("earlier", "later"),
    [
        (
            "the user lives in Berlin with their partner",
            "the user never liked living in Berlin",
        ),  # another verb
        ("the user works at Google as an engineer", "the user has never been happier working at Google"),
        ("the user plays guitar in a band", "the user never plays guitar in public"),  # a qualifier
        ("the user uses PostgreSQL for the project", "the user never uses PostgreSQL for analytics"),
        ("Bob calls the user every Sunday evening", "Bob never calls the user on weekdays"),
        ("the user doesn't use Docker at home", "the user has never used Docker at home"),  # said as well
        (
            "the user wants to deploy the app on Kubernetes",
            "the user has never deployed the app on Kubernetes",
        ),
        (
            "the user asked how to deploy the app on Kubernetes",
            "the user has never deployed the app on Kubernetes",
        ),
        (
            "if the user deploys the app on Kubernetes, it scales",
            "the user has never deployed the app on Kubernetes",
        ),
        (
            "the user calls Bob every Sunday",
            "the user loves Bob, but Bob has never called the user on Sunday",
        ),
    ],
)
def test_a_statement_that_still_holds_is_not_denied(earlier, later):
    assert supersessions([earlier, later], _x(0.9), np.array([0, 1]), ["user", "user"]) == {}


DID = "the user has written integration tests for socket events using Jest, but coverage is at 90%"
NEVER = "the user has never written integration tests for any socket events, so the user is unsure"


def test_a_later_denial_supersedes_what_it_denies():
    order, speakers = np.array([0, 1]), ["user", "user"]
    at = DENIAL_THRESHOLD + 0.05
    assert supersessions([DID, NEVER], _x(at), order, speakers) == {0: 1}
    assert supersessions([DID, NEVER], _x(DENIAL_THRESHOLD - 0.05), order, speakers) == {}  # not close
    assert supersessions([NEVER, DID], _x(at), order, speakers) == {}  # an affirmation denies nothing
    other = "the user has read a blog post about socket events"  # too few of the denied words
    assert supersessions([other, NEVER], _x(at), order, speakers) == {}
    assert supersessions([DID, NEVER], _x(at), order, ["user", "Bob"]) == {}  # another speaker
    again = "the user has never written integration tests for socket events yet"
    assert supersessions([again, NEVER], _x(0.99), order, speakers) == {}  # a denial of its own
    sister = "the user's sister has never written integration tests for any socket events"
    assert supersessions([DID, sister], _x(at), order, speakers) == {}  # about someone else


def test_the_engine_reads_a_denial_as_it_adds(tmp_path):
    """Through ``add``: the denial's earlier statement reads as earlier, after the denial."""
    with MemoryEngine.open(tmp_path / "s", embedder=load_embedder("hashing:384")) as eng:
        eng.add([{"role": "user", "content": DID + "."}], user_id="u")
        eng.add([{"role": "user", "content": NEVER + "."}], user_id="u")
        r = eng.search("Have I written integration tests for socket events?", user_id="u", threshold=0.0)[0]
        texts = [u.text for u in r.units if u.type == "semantic"]
        first = next(i for i, t in enumerate(texts) if "never" in t)
        stale = next(i for i, t in enumerate(texts) if "Jest" in t)
        assert first < stale and texts[stale].startswith("previously")


def test_the_engine_and_the_bulk_build_pass_the_statements_encoder(tmp_path, monkeypatch):
    """A write's supersessions get the encoder of the memory's statements, in the live engine and in
    a role-chat bulk build (``_engine_finish``), so a long change statement reads the same in both."""
    from xmemory_gpu.engine import writes

    got: list = []

    def spy(*args, **kw):
        got.append(kw.get("encode"))
        return supersessions(*args, **kw)

    monkeypatch.setattr(writes, "supersessions", spy)
    emb = load_embedder("hashing:384")
    with MemoryEngine.open(tmp_path / "s", embedder=emb) as eng:
        eng.add([{"role": "user", "content": OLD + "."}], user_id="u")
        eng.add([{"role": "user", "content": LONG + "."}], user_id="u")
        head = focus([m for m in eng.get_all(user_id="u") if m["type"] == "semantic"][-1]["text"], "the user")
    assert got and got[-1] is not None and head is not None
    assert np.allclose(got[-1]([head]), emb.encode([head]))
    got.clear()
    chats = tmp_path / "chats.json"
    chats.write_text(
        json.dumps(
            [
                {
                    "user_id": "u",
                    "messages": [
                        {"role": "user", "content": OLD + "."},
                        {"role": "user", "content": LONG + "."},
                    ],
                }
            ]
        )
    )
    out = tmp_path / "bulk"
    assert main(["build", str(chats), "--out", str(out), "--embedder", "hashing:384", "--no-progress"]) == 0
    assert got and got[-1] is not None
    assert np.allclose(got[-1]([head]), emb.encode([head]))
