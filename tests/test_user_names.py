"""The user's name in a role chat: a fact of its own, derived from the message that gave it.

The memory is written about "the user"; the name is shown, not stored into statements. So learning a
name cannot bring back a statement the user deleted, is committed with the add that taught it,
leaves the store with the message that gave it, is learned only from words that say a name, and a
memory has one person however many names it is given."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from xmemory_gpu.embed.hashing import HashingEmbedder
from xmemory_gpu.engine import MemoryEngine
from xmemory_gpu.engine.people import name_claim

EMB = HashingEmbedder(384)


def _user(text: str, **kw) -> dict:
    return {"role": "user", "content": text, **kw}


def _copies(root: Path, token: str) -> dict[str, int]:
    """Files under ``root`` holding ``token`` (UTF-8 bytes) and how often."""
    out = {}
    for p in root.rglob("*"):
        if p.is_file() and (n := p.read_bytes().count(token.encode())):
            out[str(p.relative_to(root))] = n
    return out


def _texts(eng: MemoryEngine, user: str) -> list[str]:
    return [u["text"] for u in eng.get_all(user_id=user) if u["type"] == "semantic"]


@pytest.mark.parametrize(
    "teach",
    [
        {"messages": [_user("Hi, I'm Priya.")]},
        {"messages": [_user("Nice weather today.")], "user_name": "Priya"},
    ],
)
def test_a_deleted_statement_stays_deleted_when_a_name_is_learned(tmp_path, teach):
    with MemoryEngine.open(tmp_path / "s", embedder=EMB) as eng:
        eng.add([_user("My bank PIN is 4417 and I keep it secret.")], user_id="u")
        (pin,) = [
            u["id"] for u in eng.get_all(user_id="u") if u["type"] == "semantic" and "4417" in u["text"]
        ]
        eng.delete(pin, user_id="u")
        eng.add(user_id="u", **teach)
        assert not [t for t in _texts(eng, "u") if "4417" in t]
        eng.add([_user("I also keep a spare key under the mat.")], user_id="u")
        assert not [t for t in _texts(eng, "u") if "4417" in t]


def test_the_name_is_shown_for_the_user_everywhere(tmp_path):
    with MemoryEngine.open(tmp_path / "s", embedder=EMB) as eng:
        eng.add([_user("I work as a night-shift nurse at St. Mary's Hospital.")], user_id="u")
        assert any(t.startswith("the user works") for t in _texts(eng, "u"))
        eng.add([_user("Hi, I'm Priya, by the way.")], user_id="u")
        assert any(t.startswith("Priya works") for t in _texts(eng, "u"))
        assert {u["speaker"] for u in eng.get_all(user_id="u") if u["type"] == "message"} == {"Priya"}
        for q in ("Where do I work?", "Where does Priya work?"):
            r = eng.search(q, user_id="u", threshold=0)[0]
            assert (
                r.query == q
                and "Priya works as a night-shift nurse" in r.context
                and "the user" not in r.context
            )
            assert all("the user" not in u.text for u in r.units)


def test_the_add_that_teaches_a_name_is_one_commit(tmp_path):
    with MemoryEngine.open(tmp_path / "s", embedder=EMB) as eng:
        eng.add([_user(f"I walked {n} miles today.") for n in range(20)], user_id="u")
        commits = []
        real = eng.store.commit
        eng.store.commit = lambda *a, **k: (commits.append(a), real(*a, **k))[1]
        eng.add([_user("My name is Priya.")], user_id="u")
        assert len(commits) == 1
    with MemoryEngine.open(tmp_path / "s", embedder=EMB) as eng:
        assert {u["speaker"] for u in eng.get_all(user_id="u") if u["type"] == "message"} == {"Priya"}


def test_a_kill_right_after_the_add_that_teaches_a_name_leaves_it_whole(tmp_path):
    """The process is killed as soon as the add's commit returns, where a second commit (the rename)
    used to follow: reopened, every earlier turn is the named person's."""
    store = tmp_path / "s"
    with MemoryEngine.open(store, embedder=EMB) as eng:
        eng.add([_user(f"I walked {n} miles today.") for n in range(60)], user_id="u")
    script = textwrap.dedent(f"""
        import os, signal
        from xmemory_gpu.embed.hashing import HashingEmbedder
        from xmemory_gpu.engine import MemoryEngine
        eng = MemoryEngine.open({str(store)!r}, embedder=HashingEmbedder(384))
        real = eng.store.commit
        def commit(*a, **k):
            real(*a, **k)
            os.kill(os.getpid(), signal.SIGKILL)
        eng.store.commit = commit
        eng.add([{{"role": "user", "content": "Hi, I'm Priya."}}], user_id="u")
    """)
    proc = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=1800,
        env=os.environ | {"HF_HUB_OFFLINE": "1"},
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-2000:]
    with MemoryEngine.open(store, embedder=EMB) as eng:
        units = eng.get_all(user_id="u")
        assert len([u for u in units if u["type"] == "message"]) == 61
        assert {u["speaker"] for u in units if u["type"] == "message"} == {"Priya"}
        assert all(not t.startswith("the user") for t in _texts(eng, "u"))


@pytest.mark.parametrize("how", ["delete", "update"])
def test_a_name_leaves_with_the_message_that_gave_it(tmp_path, how):
    store = tmp_path / "s"
    with MemoryEngine.open(store, embedder=EMB) as eng:
        ids = eng.add(
            [
                _user("I live in Oslo."),
                _user("My name is Qzxwvy."),
                {"role": "assistant", "content": "Hi Qzxwvy!"},
                _user("I like skiing.", name="Zorblax"),
            ],
            user_id="u",
        )
        assert _copies(store, "Qzxwvy") and _copies(store, "Zorblax")
        if how == "delete":
            for mid in ids[1:]:
                eng.delete(mid, user_id="u")
        else:
            eng.update(ids[1], "I like tea.", user_id="u")
            eng.update(ids[2], "Hello!", user_id="u")
            eng.delete(ids[3], user_id="u")
        seen = [u for u in eng.get_all(user_id="u") if "Qzxwvy" in str(u) or "Zorblax" in str(u)]
        seen += [
            u
            for q in ("What is my name?", "Who likes skiing?")
            for u in eng.search(q, user_id="u", threshold=0)[0].units
            if "Qzxwvy" in u.text or "Zorblax" in u.text
        ]
        assert seen == []
        assert {u["speaker"] for u in eng.get_all(user_id="u") if u["type"] == "message"} <= {
            "the user",
            "assistant",
        }
    assert _copies(store, "Qzxwvy") == {} and _copies(store, "Zorblax") == {}


def test_a_name_comes_back_from_an_earlier_message_when_the_later_one_goes(tmp_path):
    with MemoryEngine.open(tmp_path / "s", embedder=EMB) as eng:
        ids = eng.add([_user("Hi, I'm Priya."), _user("Actually, call me Pri.")], user_id="u")
        speakers = {u["speaker"] for u in eng.get_all(user_id="u") if u["type"] == "message"}
        assert speakers == {"Pri"}
        eng.delete(ids[1], user_id="u")
        assert {u["speaker"] for u in eng.get_all(user_id="u") if u["type"] == "message"} == {"Priya"}


@pytest.mark.parametrize(
    "text",
    [
        "I'm Hungry.",
        "This is Paris.",
        "I'm Single.",
        "I'm Pregnant.",
        "This is Tuesday.",
        "Call me tomorrow.",
        "Call me Monday.",
        "I'm Canadian.",
    ],
)
def test_ordinary_capitalised_words_are_no_names(text):
    assert name_claim(text) is None


@pytest.mark.parametrize(
    "text, name, explicit",
    [
        ("My name is Priya.", "Priya", True),
        ("Please call me Sam.", "Sam", True),
        ("My name is Qzxwvy.", "Qzxwvy", True),
        ("Hi, I'm Priya, nice to meet you.", "Priya", False),
        ("Hi, this is Sam.", "Sam", False),
        ("Jordan here, quick one.", "Jordan", False),
    ],
)
def test_names_are_learned_from_forms_that_say_a_name(text, name, explicit):
    c = name_claim(text)
    assert c is not None and (c.name, c.explicit) == (name, explicit)


def test_a_later_explicit_name_replaces_a_learned_one_and_not_the_reverse(tmp_path):
    with MemoryEngine.open(tmp_path / "s", embedder=EMB) as eng:
        eng.add([_user("I'm Hungry.")], user_id="u")
        eng.add([_user("My name is Priya.")], user_id="u")
        assert any(t.startswith("Priya's name is Priya") for t in _texts(eng, "u"))
        eng.add(
            [_user("Hi, I'm Sam, by the way.")], user_id="u"
        )  # an introduction does not replace a stated name
        assert {u["speaker"] for u in eng.get_all(user_id="u") if u["type"] == "message"} == {"Priya"}
        eng.add([_user("My name is Kemi.")], user_id="u")
        assert {u["speaker"] for u in eng.get_all(user_id="u") if u["type"] == "message"} == {"Kemi"}


def test_one_memory_is_one_person_whatever_names_the_app_gives(tmp_path):
    with MemoryEngine.open(tmp_path / "s", embedder=EMB) as eng:
        eng.add([_user("I live in Oslo.")], user_id="u", user_name="Priya")
        eng.add([_user("I work at the harbour.")], user_id="u", user_name="Sam")
        assert {u["speaker"] for u in eng.get_all(user_id="u") if u["type"] == "message"} == {"Sam"}
        assert all("Priya" not in t for t in _texts(eng, "u"))
        eng.add([_user("My name is Kemi.")], user_id="u")  # the app's name stands
        assert {u["speaker"] for u in eng.get_all(user_id="u") if u["type"] == "message"} == {"Sam"}
