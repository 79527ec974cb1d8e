"""The live engine: incremental growth with the bulk build's code (invariants, f(P) near the bulk
build's), deletion that forgets (a planted token leaves every column, result and file), isolation
across adversarial scopes, kill -9 during a stream of batches, readers during writes, one writer."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from xmemory_gpu.config import XMemoryConfig
from xmemory_gpu.construct.pipeline import build_memories
from xmemory_gpu.datasets.locomo import load_locomo
from xmemory_gpu.datasets.synthetic import generate_conversations, write_json
from xmemory_gpu.embed.hashing import HashingEmbedder
from xmemory_gpu.engine import MemoryEngine, WriterLockError, scope_key
from xmemory_gpu.memory.hierarchy import view
from xmemory_gpu.retrieve import STRATEGIES

EMB = HashingEmbedder(128)
ROOT = Path(__file__).resolve().parents[1]


def _msgs(conv, session=None):
    return [
        {"id": m.id, "speaker": m.speaker, "content": m.text, "timestamp": m.timestamp, "session": m.session}
        for m in conv.messages
        if session is None or m.session == session
    ]


@pytest.fixture(scope="module")
def convs(tmp_path_factory):
    path = tmp_path_factory.mktemp("eng") / "synthetic.json"
    write_json(generate_conversations(4, seed=11), path)
    return load_locomo(path)


def _check_invariants(mem, cap: int) -> None:
    n_sem = len(mem.semantics)
    assert mem.theme_of.shape == (n_sem,)  # one theme per node
    if n_sem:
        assert mem.theme_of.min() >= 0 and mem.theme_of.max() < len(mem.themes)
        assert np.bincount(mem.theme_of).max() <= cap
    ids = {m.id for m in mem.messages}
    assert all(
        set(s.message_ids) <= ids and s.message_ids for s in mem.semantics
    )  # provenance to live messages
    assert all(set(e.message_ids) <= ids for e in mem.episodes)
    assert sorted(i for e in mem.episodes for i in e.message_ids) == sorted(
        ids
    )  # every message in one episode


def test_streaming_sessions_matches_the_bulk_build(tmp_path, convs):
    cfg = XMemoryConfig()
    bulk = {m.memory_id: m for m in build_memories(convs, EMB, cfg)}
    with MemoryEngine.open(tmp_path / "s", embedder=EMB, config=cfg) as eng:
        n_sessions = max(len({m.session for m in c.messages}) for c in convs)
        for step in range(n_sessions):
            items = []  # a memory with no session left takes no part (its themes do not depend on the batch)
            for c in convs:
                sessions = sorted({m.session for m in c.messages})
                if step < len(sessions):
                    items.append({"messages": _msgs(c, sessions[step]), "user_id": c.sample_id})
            eng.add_batch(items)
        for c in convs:
            mem = view(eng.bank, eng.bank.index[scope_key(c.sample_id)])
            _check_invariants(mem, cfg.theme.size_cap)
            assert [m.id for m in mem.messages] == [m.id for m in c.messages]
            assert mem.stats["f_P"] == pytest.approx(bulk[c.sample_id].stats["f_P"], rel=0.02)
            assert [s.text for s in mem.semantics] == [s.text for s in bulk[c.sample_id].semantics]


def test_turn_by_turn_keeps_the_invariants_and_reopens_exactly(tmp_path, convs):
    conv = convs[0]
    cfg = XMemoryConfig()
    with MemoryEngine.open(tmp_path / "t", embedder=EMB, config=cfg) as eng:
        for m in _msgs(conv):
            eng.add([m], user_id="u")
        mem = view(eng.bank, 0)
        _check_invariants(mem, cfg.theme.size_cap)
        before = eng.get_all(user_id="u")
        res = [
            r.to_dict() for r in eng.search([q.question for q in conv.qa], user_id="u", strategy="xmemory")
        ]
    with MemoryEngine.open(tmp_path / "t", embedder=EMB) as eng:
        assert eng.get_all(user_id="u") == before
        again = [
            r.to_dict() for r in eng.search([q.question for q in conv.qa], user_id="u", strategy="xmemory")
        ]
        assert [{k: v for k, v in r.items() if k != "timings"} for r in again] == [
            {k: v for k, v in r.items() if k != "timings"} for r in res
        ]


TOKEN = "Qzxvwplorbanth"


def test_delete_forgets_a_planted_token_everywhere(tmp_path, convs):
    store = tmp_path / "d"
    with MemoryEngine.open(store, embedder=EMB) as eng:
        eng.add(_msgs(convs[1])[:20], user_id="alice")
        planted = eng.add(
            [{"speaker": "Alice", "content": f"My new neighbour is called {TOKEN} and she keeps bees."}],
            user_id="alice",
        )[0]
        eng.add(_msgs(convs[1])[20:30], user_id="alice")
        eng.add(_msgs(convs[2])[:10], user_id="bob")
        assert any(TOKEN in u["text"] for u in eng.get_all(user_id="alice") if u["type"] == "semantic")
        hits = eng.search(f"Who is {TOKEN}?", user_id="alice", strategy="naive-rag")
        assert TOKEN in hits[0].context
        eng.delete(planted)
        for lv in eng.bank.levels.values():
            for name, col in lv.cols.items():
                if col.dtype == object:
                    assert not any(TOKEN in str(v) for v in col), name
        assert not any(TOKEN in json.dumps(u) for u in eng.get_all(user_id="alice"))
        for s in STRATEGIES:
            assert all(
                TOKEN not in r.context
                for r in eng.search([f"Who is {TOKEN}?", "bees"], user_id="alice", strategy=s)
            )
        digest = "message sha256:" + hashlib.sha256(planted.encode()).hexdigest()[:16]
        assert eng.history(user_id="alice")[-1] == {
            "op": "delete",
            "ids": [digest],
            "time": pytest.approx(time.time(), abs=60),
        }
        assert not any(
            planted in e["ids"] for e in eng.history(user_id="alice")
        )  # the deleted id left the log
        n_bob = len(eng.get_all(user_id="bob"))
    for f in store.rglob("*"):
        if f.is_file():
            assert TOKEN.encode() not in f.read_bytes(), f"{f.name} still holds the deleted text"
    with MemoryEngine.open(store, embedder=EMB) as eng:  # reopened: still forgotten, others untouched
        assert not any(TOKEN in json.dumps(u) for u in eng.get_all(user_id="alice"))
        assert len(eng.get_all(user_id="bob")) == n_bob


def test_deleting_a_statement_keeps_its_message_but_not_the_fact(tmp_path, convs):
    with MemoryEngine.open(tmp_path / "ds", embedder=EMB) as eng:
        eng.add(_msgs(convs[0])[:25], user_id="u")
        sem = next(u for u in eng.get_all(user_id="u") if u["type"] == "semantic")
        eng.delete(sem["id"], user_id="u")
        units = eng.get_all(user_id="u")
        assert sem["text"] not in [u["text"] for u in units if u["type"] == "semantic"]
        assert set(sem["message_ids"]) <= {u["id"] for u in units if u["type"] == "message"}
        eng.add(_msgs(convs[0])[25:30], user_id="u")  # growth does not bring it back
        assert sem["text"] not in [u["text"] for u in eng.get_all(user_id="u") if u["type"] == "semantic"]


ADVERSARIAL = [
    "../../etc/passwd",
    "a'; DROP TABLE memories;--",
    '["alice", null, null]',
    "alice\\",
    "用户 ✓",
    "%s%n",
    "a" * 400,
    "alice",
]


def test_scopes_are_isolated_with_adversarial_ids(tmp_path):
    with MemoryEngine.open(tmp_path / "iso", embedder=EMB) as eng:
        items = []
        for i, user in enumerate(ADVERSARIAL):
            for agent in (None, "agent/../x"):
                items.append(
                    {
                        "user_id": user,
                        "agent_id": agent,
                        "messages": [
                            {
                                "speaker": "U",
                                "content": f"My secret code word is tok{i}{agent is None} today.",
                            },
                            {"speaker": "A", "content": "I will remember that for you."},
                        ],
                    }
                )
        eng.add_batch(items)
        assert {p.name for p in (tmp_path / "iso").iterdir()} == {"memory.sqlite", "arrays", "write.lock"}
        for i, user in enumerate(ADVERSARIAL):
            for agent in (None, "agent/../x"):
                # mem0's rule: a user's search without an agent covers its agents' memories too
                mine = {f"tok{i}False"} | ({f"tok{i}True"} if agent is None else set())
                for s in STRATEGIES:
                    for r in eng.search(
                        ["What is my secret code word?"], user_id=user, agent_id=agent, strategy=s
                    ):
                        words = {w.strip(".") for w in r.context.split()}
                        assert not any(w.startswith("tok") and w not in mine for w in words), (user, agent, s)
                units = eng.get_all(user_id=user, agent_id=agent)
                assert {t for t in mine if any(t in u["text"] for u in units)} == mine
                assert {u["user_id"] for u in units} == {user}
                assert not any(
                    f"tok{j}{flag}" in u["text"]
                    for j in range(len(ADVERSARIAL))
                    for flag in (True, False)
                    for u in units
                    if f"tok{j}{flag}" not in mine
                )
        assert eng.delete_all(user_id=ADVERSARIAL[1], agent_id="agent/../x") == 2
        left = eng.get_all(user_id=ADVERSARIAL[1])  # the user's own memory stays
        assert left and {u["agent_id"] for u in left} == {None}
        assert eng.delete_all(user_id=ADVERSARIAL[2]) == 4  # mem0's rule: the user's agents' memories too
        assert eng.get_all(user_id=ADVERSARIAL[2]) == [] and eng.get_all(user_id=ADVERSARIAL[3])
    for bad in ("", None, 5, "x\x00y"):
        with pytest.raises(ValueError, match="user_id"):
            scope_key(bad)


def test_readers_never_see_half_a_batch(tmp_path):
    eng = MemoryEngine.open(tmp_path / "rw", embedder=EMB)
    stop, seen, errors = threading.Event(), [], []

    def reader():
        try:
            while not stop.is_set():
                n = sum(1 for u in eng.get_all(user_id="u") if u["type"] == "message")
                seen.append(n)
                eng.search("what did I say about the garden?", user_id="u", strategy="xmemory")
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=reader) for _ in range(3)]
    for t in threads:
        t.start()
    try:
        for i in range(15):  # bounded
            eng.add(
                [
                    {"speaker": "U", "content": f"In round {i} I planted tulips in the garden."},
                    {"speaker": "A", "content": f"Round {i} noted: tulips."},
                ],
                user_id="u",
            )
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=60)
        eng.close()
    assert not errors, errors
    assert seen and all(n % 2 == 0 for n in seen)  # two messages per batch: both or neither
    assert max(seen) <= 30


_WRITER = """
import sys
from xmemory_gpu.engine import MemoryEngine, WriterLockError
from xmemory_gpu.embed.hashing import HashingEmbedder
try:
    MemoryEngine.open(sys.argv[1], embedder=HashingEmbedder(128))
except WriterLockError as exc:
    print("refused:", exc); sys.exit(3)
print("opened"); sys.exit(0)
"""


def test_a_second_writer_is_refused_and_readers_still_work(tmp_path):
    store = tmp_path / "one"
    with MemoryEngine.open(store, embedder=EMB) as eng:
        eng.add([{"speaker": "U", "content": "The first writer holds the lock."}], user_id="u")
        p = subprocess.run(
            [sys.executable, "-c", _WRITER, str(store)],
            capture_output=True,
            text=True,
            timeout=120,
            env={**os.environ, "HF_HUB_OFFLINE": "1"},
        )
        assert p.returncode == 3 and "another process is writing" in p.stdout
        with MemoryEngine.open(store, embedder=EMB, read_only=True) as ro:
            assert len(ro.get_all(user_id="u")) >= 1
            with pytest.raises(RuntimeError, match="read_only"):
                ro.add([{"speaker": "U", "content": "x"}], user_id="u")
        with pytest.raises(WriterLockError):
            MemoryEngine.open(store, embedder=EMB)
    p = subprocess.run(
        [sys.executable, "-c", _WRITER, str(store)], capture_output=True, text=True, timeout=120
    )
    assert p.returncode == 0, p.stdout + p.stderr  # released with the first engine


STREAM = """
import sys
from xmemory_gpu.engine import MemoryEngine
from xmemory_gpu.embed.hashing import HashingEmbedder
store, start, stop = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
with MemoryEngine.open(store, embedder=HashingEmbedder(128)) as eng:
    for i in range(start, stop):
        eng.add_batch([{"user_id": f"user{u}", "messages": [
            {"id": f"b{i}-u{u}-{j}", "speaker": "U" if j % 2 == 0 else "A",
             "content": f"Batch {i} message {j}: I visited city number {(i * 7 + u) % 13} and met friend {j}.",
             "timestamp": 1_700_000_000 + 60 * i + j}
            for j in range(3)]} for u in range(4)])
        print(i, flush=True)
"""


def committed_batches(store: Path) -> int:
    """Batches fully in the store (each batch is one commit, so a batch is all there or not at all)."""
    if not (store / "memory.sqlite").exists():
        return 0
    with MemoryEngine.open(store, embedder=EMB, read_only=True) as eng:
        ids = {u["id"] for s in range(4) for u in eng.get_all(user_id=f"user{s}") if u["type"] == "message"}
    done = 0
    while all(f"b{done}-u{u}-{j}" in ids for u in range(4) for j in range(3)):
        done += 1
    assert not any(i.startswith(f"b{done}-") for i in ids), "a batch was half committed"
    return done


def _snapshot(store: Path) -> list:
    """Every unit of the stream's users, without the times its writes happened at."""
    with MemoryEngine.open(store, embedder=EMB, read_only=True) as eng:
        return [
            [
                {k: v for k, v in x.items() if k not in ("created_at", "updated_at")}
                for x in eng.get_all(user_id=f"user{u}")
            ]
            for u in range(4)
        ]


def test_kill_9_during_a_stream_loses_at_most_the_batch_in_flight(tmp_path):
    n_batches, kills = 40, 10
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT)}
    ref = tmp_path / "ref"
    subprocess.run(
        [sys.executable, "-c", STREAM, str(ref), "0", str(n_batches)],
        check=True,
        env=env,
        timeout=600,
        capture_output=True,
    )
    store = tmp_path / "killed"
    rng = np.random.default_rng(int(os.environ.get("XMEM_TEST_SEED", "0")) or 1)
    progress = []
    for _ in range(kills):
        start = committed_batches(store)
        progress.append(start)
        if start >= n_batches:
            break
        p = subprocess.Popen(
            [sys.executable, "-c", STREAM, str(store), str(start), str(n_batches)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        p.stdout.readline() if rng.random() < 0.5 else None  # sometimes after a commit, sometimes during start-up
        time.sleep(float(rng.uniform(0.0, 0.2)))
        p.send_signal(signal.SIGKILL)
        p.wait(timeout=60)
        p.stdout.close()
    start = committed_batches(store)  # reopen and continue to the end
    subprocess.run(
        [sys.executable, "-c", STREAM, str(store), str(start), str(n_batches)],
        check=True,
        env=env,
        timeout=600,
        capture_output=True,
    )
    assert committed_batches(store) == n_batches
    assert len(progress) >= 4 and progress == sorted(
        progress
    )  # killed mid-stream several times, never went back
    assert _snapshot(store) == _snapshot(ref)
    assert not [
        f.name for f in (store / "arrays").iterdir() if f.suffix == ".tmp"
    ]  # the last writer collected orphans


def test_cli_add_history_delete(tmp_path, capsys):
    from xmemory_gpu.cli import main

    f = tmp_path / "m.json"
    f.write_text(
        json.dumps(
            [
                {"role": "user", "content": "I moved to Lisbon in May.", "id": "m1"},
                {"role": "assistant", "content": "Lisbon is lovely in spring."},
            ]
        )
    )
    store = str(tmp_path / "cli")
    assert main(["add", store, str(f), "--user", "alice", "--embedder", "hashing:64"]) == 0
    assert capsys.readouterr().out.split("\n")[0] == "m1"
    assert main(["history", store, "--user", "alice", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)[0]["op"] == "add"
    assert main(["delete", store, "m1", "--user", "alice"]) == 0
    assert main(["delete", store, "--user", "alice"]) == 2
    assert "give a unit id or --all" in capsys.readouterr().err
    assert main(["delete", store, "--all", "--user", "alice"]) == 0
    f.write_text("{not json")
    assert main(["add", store, str(f), "--user", "alice"]) == 2
    assert "not valid JSON" in capsys.readouterr().err


_BUILD = """
import sys, time
from xmemory_gpu.memory.locks import WriterLock
with WriterLock(__import__("pathlib").Path(sys.argv[1])):
    print("locked", flush=True)
    time.sleep(3600)  # holds the lock until the test kills it (bounded all the same)
"""


def test_a_build_is_refused_while_another_process_writes(tmp_path, capsys):
    from xmemory_gpu.cli import main

    data = write_json(generate_conversations(1, seed=1), tmp_path / "d.json")
    store = tmp_path / "s"
    store.mkdir()
    p = subprocess.Popen([sys.executable, "-c", _BUILD, str(store)], stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline().strip() == "locked"
        assert (
            main(["build", str(data), "--out", str(store), "--embedder", "hashing:32", "--no-progress"]) == 2
        )
        assert "another process is writing" in capsys.readouterr().err
        assert not (store / "memory.sqlite").exists()  # nothing half-created
    finally:
        p.kill()
        p.wait(timeout=30)
    assert main(["build", str(data), "--out", str(store), "--embedder", "hashing:32", "--no-progress"]) == 0


def test_a_store_keeps_the_search_settings_it_was_made_with(tmp_path):
    """A store made with other statement budgets than the defaults searches with its own after a reopen
    (a default that changes does not change what an existing memory returns); settings passed over
    the store's (``resolve_config``, as ``search --config``) win."""
    from xmemory_gpu.config import resolve_config
    from xmemory_gpu.memory.store import Store

    made = XMemoryConfig()
    made.stage1.semantic_budget, made.baselines.memory_only_semantics = 7, 9
    with MemoryEngine.open(tmp_path / "s", embedder=EMB, config=made) as eng:
        eng.add([{"speaker": "Ann", "content": "I adopted a cat named Miso in May."}], user_id="u")
    with MemoryEngine.open(tmp_path / "s", embedder=EMB) as eng:
        assert eng.config.stage1.semantic_budget == 7 and eng.config.baselines.memory_only_semantics == 9
    st = Store.open(tmp_path / "s")
    try:
        over = resolve_config(st.config, overrides={"stage1": {"semantic_budget": 30}})
    finally:
        st.close()
    assert over.stage1.semantic_budget == 30 and over.baselines.memory_only_semantics == 9
    assert XMemoryConfig().stage1.semantic_budget == 30
