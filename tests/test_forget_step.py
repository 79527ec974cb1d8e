"""Forgetting as a construction step (``construct.forget``): after any sequence of deletes and updates
the memory is whole (every message in one episode, every source alive, no empty theme), holds nothing
derived from a deleted or replaced text, and holds every statement its remaining messages give (or a
near duplicate of it), as a build of those messages would."""

from __future__ import annotations

import random

import numpy as np
import pytest

from xmemory_gpu.config import XMemoryConfig
from xmemory_gpu.construct import theme_state
from xmemory_gpu.construct.forget import forget, one_source_statements
from xmemory_gpu.construct.incremental import grow, statement_hash
from xmemory_gpu.construct.semantic import ONE_SOURCE, extract_statements
from xmemory_gpu.construct.theme_state import ThemeState, sync_graphs
from xmemory_gpu.embed.hashing import HashingEmbedder
from xmemory_gpu.engine import MemoryEngine
from xmemory_gpu.engine.inputs import scope_key
from xmemory_gpu.memory.hierarchy import view
from xmemory_gpu.memory.records import Conversation, Episode

EMB = HashingEmbedder(384)
PLACES = ["Oslo", "Rome", "Lima", "Kyiv", "Pune", "Cork", "Bern", "Nice", "Bonn", "Riga"]
HOBBIES = ["chess", "rowing", "pottery", "climbing", "baking", "sailing", "archery", "knitting"]


def _chat(rng: random.Random, n: int) -> list[dict]:
    out = []
    for i in range(n):
        tok = f"tok{i:03d}x"
        if i % 3 == 2:
            out.append(
                {
                    "role": "assistant",
                    "content": f"That sounds lovely, the {tok} plan is a good one.",
                    "session": i // 12,
                }
            )
        else:
            out.append(
                {
                    "role": "user",
                    "session": i // 12,
                    "content": f"I went to {rng.choice(PLACES)} for {rng.choice(HOBBIES)} with my friend {tok} last week.",
                }
            )
    return out


def _check_whole(eng: MemoryEngine, user: str, gone_tokens: set[str]) -> None:
    units = eng.get_all(user_id=user)  # resident from here on
    mem = view(eng.bank, eng.bank.index[scope_key(user, None, None)])
    ids = [m.id for m in mem.messages]
    assert len(set(ids)) == len(ids)
    covered = [mid for e in mem.episodes for mid in e.message_ids]
    assert sorted(covered) == sorted(ids)  # every message in exactly one episode
    alive = set(ids)
    episode_of = {mid: e.id for e in mem.episodes for mid in e.message_ids}
    for s in mem.semantics:
        assert s.message_ids and set(s.message_ids) <= alive
        assert sorted(s.episode_ids) == sorted({episode_of[m] for m in s.message_ids}), s
    sizes = np.bincount(np.asarray(mem.theme_of), minlength=len(mem.themes))
    assert len(mem.themes) == 0 or sizes.min() > 0
    for u in units:
        if u["type"] != "message":
            assert not [t for t in gone_tokens if t in u["text"] or t in u.get("title", "")], u
    # every statement of the remaining messages is there, or a near duplicate, or forgotten
    cfg = XMemoryConfig().semantic
    conv = Conversation(mem.memory_id, (mem.engine.speakers + ("", ""))[:2], mem.messages)
    raw = extract_statements(conv, [Episode(0, "", "", ids)], cfg)
    gone = set(mem.engine.forgotten)
    raw = [r for r in raw if statement_hash(r.text) not in gone]
    if raw:
        sims = (
            EMB.encode([r.text for r in raw]) @ mem.sem_x.T if len(mem.semantics) else np.zeros((len(raw), 0))
        )
        best = sims.max(axis=1) if sims.shape[1] else np.full(len(raw), -1.0)
        assert (best > cfg.dedup_threshold - 1e-6).all(), [
            r.text for r, b in zip(raw, best) if b <= cfg.dedup_threshold
        ]
    texts = {s.text for s in mem.semantics}
    assert texts <= {r.text for r in extract_statements(conv, [Episode(0, "", "", ids)], cfg)}
    _theme_graph_is_built_whole(eng, user)


def _theme_graph_is_built_whole(eng: MemoryEngine, user: str, cfg: XMemoryConfig | None = None) -> None:
    """The stored theme kNN lists (kept through deletes where a theme's centroid did not move, the
    rest searched again) are, bit for bit, the lists a whole build over the live centroids gives."""
    sl = eng.bank.slice(eng.bank.index[scope_key(user, None, None)])
    sc, tc = sl.cols["sem"], sl.cols["theme"]
    knn = (cfg or XMemoryConfig()).knn
    ts = ThemeState.restore(
        sc["x"], len(sc["x"]), tc["id"].tolist(), sc["theme"], {}, 0, knn.k_themes, knn.drop_nonpositive
    )
    sync_graphs([ts])
    assert ts.graph_idx.tobytes() == np.asarray(tc["knn_idx"], np.int32).tobytes()
    assert ts.graph_sim.tobytes() == np.asarray(tc["knn_sim"], np.float32).tobytes()


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_random_deletes_and_updates_keep_the_memory_whole_and_faithful(tmp_path, seed, monkeypatch):
    # the theme graph kept through a delete is brought up to date, not built whole, at any size
    monkeypatch.setattr(theme_state, "UPKEEP_MIN", 2)
    monkeypatch.setattr(theme_state, "UPKEEP_SHARE", 1.0)
    rng = random.Random(seed)
    with MemoryEngine.open(tmp_path / "s", embedder=EMB) as eng:
        chat = _chat(rng, 72)
        ids = []
        for i in range(0, len(chat), 12):
            ids += eng.add(chat[i : i + 12], user_id="u")
        gone_tokens: set[str] = set()
        for step in range(10):
            units = eng.get_all(user_id="u")
            kind = rng.choice(["message", "update", "semantic", "episode", "theme"])
            msgs = [u for u in units if u["type"] == "message" and "tok" in u["text"]]
            if kind in ("message", "update"):
                u = rng.choice(msgs)
                tok = next(
                    w for w in u["text"].replace(",", " ").replace(".", " ").split() if w.startswith("tok")
                )
                gone_tokens.add(tok)
                if kind == "message":
                    eng.delete(u["id"], user_id="u")
                else:
                    eng.update(
                        u["id"],
                        f"I moved to {rng.choice(PLACES)} and took up {rng.choice(HOBBIES)} step{step}.",
                        user_id="u",
                    )
            else:
                cands = [u for u in units if u["type"] == kind]
                if not cands:
                    continue
                u = rng.choice(cands)
                if kind == "episode":
                    gone_tokens |= {
                        w
                        for m in msgs
                        if m["id"] in u["message_ids"]
                        for w in m["text"].replace(",", " ").replace(".", " ").split()
                        if w.startswith("tok")
                    }
                eng.delete(u["id"], user_id="u")
            _check_whole(eng, "u", gone_tokens)
    with MemoryEngine.open(tmp_path / "s", embedder=EMB) as eng:  # reopened: the same memory
        _check_whole(eng, "u", gone_tokens)
        if any(u["type"] == "message" for u in eng.get_all(user_id="u")):
            assert eng.search("Where did I go for chess?", user_id="u", threshold=0)[0].units


def test_a_deleted_statement_is_not_extracted_again_from_its_other_sources(tmp_path):
    with MemoryEngine.open(tmp_path / "s", embedder=EMB) as eng:
        eng.add(
            [
                {"role": "user", "content": "I keep bees in the garden. My sister lives in Porto."},
                {"role": "user", "content": "I keep bees in the garden."},
            ],
            user_id="u",
        )
        bees = [u for u in eng.get_all(user_id="u") if u["type"] == "semantic" and "bees" in u["text"]]
        assert len(bees) == 1 and len(bees[0]["message_ids"]) == 2
        eng.delete(bees[0]["id"], user_id="u")
        texts = [u["text"] for u in eng.get_all(user_id="u") if u["type"] == "semantic"]
        assert not [t for t in texts if "bees" in t] and [t for t in texts if "Porto" in t]
        eng.add([{"role": "user", "content": "Did I tell you my dog is called Rex?"}], user_id="u")
        assert not [u for u in eng.get_all(user_id="u") if u["type"] == "semantic" and "bees" in u["text"]]


def test_user_ids_leave_the_store_with_delete_all_and_reset(tmp_path):
    """The log keeps each deletion under a keyed digest of the memory's id: ``history`` still finds
    it by the ids, the files no longer hold them."""
    store = tmp_path / "s"

    def copies(token: str) -> int:
        return sum(p.read_bytes().count(token.encode()) for p in store.rglob("*") if p.is_file())

    with MemoryEngine.open(store, embedder=EMB) as eng:
        eng.add([{"role": "user", "content": "I live in Oslo."}], user_id="userZZ1")
        eng.add([{"role": "user", "content": "I live in Rome."}], user_id="userQQ2", agent_id="agentWW3")
        assert copies("userZZ1") and copies("agentWW3")
        eng.delete_all(user_id="userZZ1")
        assert [h["op"] for h in eng.history(user_id="userZZ1")] == ["delete_all"]
        eng.reset()
        assert [h["op"] for h in eng.history(user_id="userQQ2", agent_id="agentWW3")] == ["reset"]
    assert copies("userZZ1") == copies("userQQ2") == copies("agentWW3") == 0


def test_a_theme_that_lost_a_statement_is_summarised_again(tmp_path):
    """forget blanks the summary of a theme that lost a member; the growth that follows summarises it
    again from the members it has left (as a build picks them), even when nothing joins it."""
    from xmemory_gpu.construct.finalize import theme_summaries
    from xmemory_gpu.datasets.locomo import load_locomo
    from xmemory_gpu.datasets.synthetic import generate_conversations, write_json

    write_json(generate_conversations(1, seed=11), tmp_path / "c.json")
    conv = load_locomo(tmp_path / "c.json")[0]
    msgs = [
        {"id": m.id, "speaker": m.speaker, "content": m.text, "timestamp": m.timestamp, "session": m.session}
        for m in conv.messages[:80]
    ]
    with MemoryEngine.open(tmp_path / "s", embedder=HashingEmbedder(64)) as eng:
        eng.add(msgs, user_id="u")
        sl = eng.bank.slice(eng.bank.index[scope_key("u")])
        sizes = np.bincount(sl.cols["sem"]["theme"], minlength=sl.n("theme"))
        assert sizes.max() >= 2
        victim = int(np.flatnonzero(sl.cols["sem"]["theme"] == int(np.argmax(sizes)))[0])
        eng.delete(f"semantic:{int(sl.cols['sem']['id'][victim])}", user_id="u")
        sl = eng.bank.slice(eng.bank.index[scope_key("u")])
        sc, tc = sl.cols["sem"], sl.cols["theme"]
        fresh = theme_summaries(sc["text"].tolist(), sc["x"], sc["theme"], tc["id"].tolist())
        assert tc["summary"].tolist() == fresh and all(fresh)


def _bees_chat() -> list[dict]:
    lines = [
        "I keep bees in the garden.",
        "My sister Meena lives in Porto.",
        "I started rowing on the river last spring.",
        "I keep bees in the garden.",
        "My brother works as a nurse in Leeds.",
        "I keep bees in the garden.",
        "We adopted a grey cat called Pixel.",
    ]
    return [{"id": f"m{i}", "role": "user", "content": t, "session": i // 2} for i, t in enumerate(lines)]


def _statements(eng: MemoryEngine) -> dict[str, tuple[str, ...]]:
    return {
        u["text"]: tuple(sorted(u["message_ids"]))
        for u in eng.get_all(user_id="u")
        if u["type"] == "semantic"
    }


@pytest.mark.parametrize("gone", ["m3", "m5"])
def test_a_statement_that_loses_a_merged_source_keeps_its_row_as_a_build_without_it(tmp_path, gone):
    """Deleting a message whose statement merged into an earlier one's (not the statement's first
    source) takes the message out of the statement's sources and keeps the statement (its id, text,
    theme): no other source is read again, and the statements are those of a build without it."""
    chat = _bees_chat()
    with MemoryEngine.open(tmp_path / "s", embedder=EMB) as eng:
        for i in range(0, len(chat), 2):
            eng.add(chat[i : i + 2], user_id="u")
        (bees,) = [u for u in eng.get_all(user_id="u") if u["type"] == "semantic" and "bees" in u["text"]]
        assert bees["message_ids"] == ["m0", "m3", "m5"]
        _, restate = forget(eng.bank.slice(eng.bank.index[scope_key("u")]), {gone}, {}, None)
        assert restate == set()
        eng.delete(gone, user_id="u")
        (after,) = [u for u in eng.get_all(user_id="u") if u["type"] == "semantic" and "bees" in u["text"]]
        assert after["id"] == bees["id"] and after["text"] == bees["text"]
        assert after["message_ids"] == [m for m in ["m0", "m3", "m5"] if m != gone]
        _check_whole(eng, "u", set())
        trimmed = _statements(eng)
    left = [m for m in chat if m["id"] != gone]
    with MemoryEngine.open(tmp_path / "fresh", embedder=EMB) as eng:
        for i in range(0, len(left), 2):
            eng.add(left[i : i + 2], user_id="u")
        assert _statements(eng) == trimmed


def test_a_statement_that_loses_its_first_source_is_read_again_from_the_others(tmp_path):
    chat = _bees_chat()
    with MemoryEngine.open(tmp_path / "s", embedder=EMB) as eng:
        eng.add(chat, user_id="u")
        sl = eng.bank.slice(eng.bank.index[scope_key("u")])
        _, restate = forget(sl, {"m0"}, {}, None)
        assert restate == {"m3", "m5"}  # the statement leaves; its other sources are read again
        eng.delete("m0", user_id="u")
        (after,) = [u for u in eng.get_all(user_id="u") if u["type"] == "semantic" and "bees" in u["text"]]
        assert after["message_ids"] == ["m3", "m5"]
        _check_whole(eng, "u", set())


@pytest.mark.parametrize("marked", [False, None])
def test_a_memory_not_marked_as_read_one_message_a_statement_reads_every_touched_statement_again(
    tmp_path, marked
):
    """A fact of the LLM builder may come from several messages (the mark False), and a memory stored
    without the mark may be one: a touched source of any position takes the statement out and its
    other sources are read again. The engine's growth keeps the mark a memory has, and gives it to a
    new one."""
    with MemoryEngine.open(tmp_path / "s", embedder=EMB) as eng:
        eng.add(_bees_chat()[:3], user_id="u")
        eng.add(_bees_chat()[3:], user_id="u")
        sl = eng.bank.slice(eng.bank.index[scope_key("u")])
    assert one_source_statements(sl.stats) and sl.stats[ONE_SOURCE] is True
    n = sl.n("sem")
    kept, restate = forget(sl, {"m3"}, {}, None)
    assert kept.n("sem") == n and restate == set()
    sl.stats = {k: v for k, v in sl.stats.items() if k != ONE_SOURCE}
    if marked is not None:
        sl.stats[ONE_SOURCE] = marked
    assert not one_source_statements(sl.stats)
    wide, restate = forget(sl, {"m3"}, {}, None)
    assert wide.n("sem") == n - 1 and restate == {"m0", "m5"}
    (grown,) = grow([sl], [[]], EMB, XMemoryConfig())
    assert not one_source_statements(grown.stats)  # a memory not marked stays so


def test_a_statement_an_earlier_message_merged_into_is_read_again(tmp_path):
    """An update restates an earlier message into a later one's statement: its first source is then
    not its earliest, and a build would read it from the earlier one; a delete of another of its
    sources reads it again, and the statements are those of a build of what is left."""
    chat = [dict(m, content="My brother is a pilot in Oslo.") if m["id"] == "m0" else m for m in _bees_chat()]
    with MemoryEngine.open(tmp_path / "s", embedder=EMB) as eng:
        eng.add(chat, user_id="u")
        eng.update("m1", "I keep bees in the garden.", user_id="u")
        sl = eng.bank.slice(eng.bank.index[scope_key("u")])
        (bees,) = [u for u in eng.get_all(user_id="u") if u["type"] == "semantic" and "bees" in u["text"]]
        assert bees["message_ids"][0] != "m1" and "m1" in bees["message_ids"]
        _, restate = forget(sl, {"m5"}, {}, None)
        assert "m1" in restate
        eng.delete("m5", user_id="u")
        after = _statements(eng)
    left = [
        dict(m, content="I keep bees in the garden.") if m["id"] == "m1" else m
        for m in chat
        if m["id"] != "m5"
    ]
    with MemoryEngine.open(tmp_path / "fresh", embedder=EMB) as eng:
        eng.add(left, user_id="u")
        assert _statements(eng) == after


def test_a_statement_s_first_source_is_the_message_its_text_was_read_from(tmp_path):
    """What the narrower forget rule rests on, for the bulk build and the live engine alike: position 0
    of a statement's sources is a message whose own statements hold its text (the others merged in)."""
    from xmemory_gpu.construct.pipeline import build_slices
    from xmemory_gpu.memory.records import Message

    rng = random.Random(5)
    msgs = []
    for i in range(60):
        speaker = "Ann" if i % 2 == 0 else "Bob"
        line = rng.choice(_bees_chat())["content"] if rng.random() < 0.5 else f"I saw {rng.choice(PLACES)}."
        msgs.append(Message(f"d{i}", speaker, line, i // 10, None))
    conv = Conversation("c", ("Ann", "Bob"), msgs)
    cfg = XMemoryConfig().semantic
    own = {
        m.id: {
            s.text
            for s in extract_statements(
                Conversation("c", ("Ann", "Bob"), [m]), [Episode(0, "", "", [m.id])], cfg
            )
        }
        for m in msgs
    }
    (built,) = build_slices([conv], EMB)
    with MemoryEngine.open(tmp_path / "s", embedder=EMB) as eng:
        for i in range(0, len(msgs), 7):
            eng.add(
                [
                    {"id": m.id, "speaker": m.speaker, "content": m.text, "session": m.session}
                    for m in msgs[i : i + 7]
                ],
                user_id="u",
            )
        eng.delete("d3", user_id="u")  # restated statements merge into kept ones too
        live = eng.bank.slice(eng.bank.index[scope_key("u")])
    for sl in (built, live):
        assert sl.stats[ONE_SOURCE] is True
        ids = sl.cols["msg"]["id"].tolist()
        sm = sl.cols["sem"]["msgs"]
        assert (sm >= 0).sum(axis=1).max() > 1  # statements with merged sources
        for r, text in enumerate(sl.cols["sem"]["text"].tolist()):
            assert text in own[ids[sm[r, 0]]]


def test_a_long_memory_keeps_its_theme_graph_through_deletes_as_a_whole_build_gives_it(tmp_path, monkeypatch):
    """Themes left empty by a delete (a theme deleted) and themes that lost members, in a memory with
    many more themes than a list holds: the lists kept and brought up to date are the whole build's."""
    from dataclasses import replace

    from xmemory_gpu.datasets.synthetic import generate_long_chats

    monkeypatch.setattr(theme_state, "UPKEEP_MIN", 2)
    cfg = XMemoryConfig()
    cfg = replace(cfg, knn=replace(cfg.knn, k_themes=3))
    conv = generate_long_chats(1, seed=4, target_tokens=30_000)[0]["conversation"]
    keys = sorted((k for k in conv if k.startswith("session_") and k[8:].isdigit()), key=lambda s: int(s[8:]))
    turns = [
        {"role": "user" if t["speaker"] == conv["speaker_a"] else "assistant", "content": t["text"]}
        for k in keys
        for t in conv[k]
    ]
    rng = random.Random(0)
    with MemoryEngine.open(tmp_path / "s", embedder=HashingEmbedder(dim=64), config=cfg) as eng:
        eng.add(turns, user_id="u")
        assert eng.bank.slice(0).n("theme") > 4 * 3
        for kind in ["theme", "message", "theme", "semantic", "message", "theme", "theme", "message"]:
            u = rng.choice([u for u in eng.get_all(user_id="u") if u["type"] == kind])
            eng.delete(u["id"], user_id="u")
            _theme_graph_is_built_whole(eng, "u", cfg)
