"""The command line under careless use: settings past any sane size, a store's hand-edited settings,
a check that would write while a server holds the store, a typo'd store path, a bad embedder spec,
the README's argument order, a store of several memories searched without saying which, and a
LoCoMo turn whose text is not text. Each is one line on stderr naming what, non-zero exit,
nothing created or lost."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from xmemory_gpu.cli import main
from xmemory_gpu.config import XMemoryConfig, resolve_config
from xmemory_gpu.datasets.synthetic import generate_conversations, write_json
from xmemory_gpu.memory.locks import WriterLock
from xmemory_gpu.memory.store import Store

EMB = "hashing:64"


def _err(capsys, argv: list[str], code: int = 2) -> str:
    assert main(argv) == code, argv
    err = capsys.readouterr().err.strip()
    assert "Traceback" not in err and len(err.splitlines()) == 1, err
    assert err.startswith(f"xmemory {argv[0]}: error:"), err
    return err


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("hard")
    data = write_json(generate_conversations(2, seed=3), root / "d.json")
    store = root / "store"
    assert main(["build", str(data), "--out", str(store), "--embedder", EMB, "--no-progress"]) == 0
    return store


@pytest.fixture(scope="module")
def live(tmp_path_factory) -> Path:
    """A live store with two users' memories (alice and bob)."""
    root = tmp_path_factory.mktemp("live")
    store = root / "live"
    for user, topic in (
        ("alice", "I adopted a grey cat named Pixel last spring."),
        ("bob", "My new bicycle is a red racing bike with thin tyres."),
    ):
        msgs = root / f"{user}.json"
        msgs.write_text(
            json.dumps(
                [
                    {"id": f"{user}-1", "role": "user", "content": topic},
                    {"id": f"{user}-2", "role": "user", "content": "We talk about it every single week."},
                ]
            )
        )
        assert main(["add", str(store), "--user", user, str(msgs), "--embedder", EMB]) == 0
    return store


# -- settings --------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "config, expect",
    [
        (
            '{"stage1": {"semantic_pool": 1000000000}}',
            "stage1.semantic_pool: expected <= 10000, got 1000000000",
        ),
        ('{"knn": {"k_semantics": 100000}}', "knn.k_semantics: expected <= 256"),
        ('{"embed": {"batch_size": 10000000}}', "embed.batch_size: expected <= 4096"),
        ('{"baselines": {"naive_rag_fill": -5}}', "baselines.naive_rag_fill: expected >= 0"),
        ('{"theme": {"split_ks": [2, 1000000]}}', "theme.split_ks: expected at most 16 integers in [2, 64]"),
        (
            '{"segment": {"drift_threshold": Infinity}}',
            "segment.drift_threshold: expected a finite number, got inf",
        ),
        ('{"stage2": {"parent_weight": NaN}}', "stage2.parent_weight: expected a finite number, got nan"),
    ],
)
def test_settings_past_their_bounds_are_refused(built, capsys, tmp_path, config, expect):
    cfg = tmp_path / "cfg.json"
    cfg.write_text(config)
    err = _err(capsys, ["search", str(built), "--config", str(cfg), "--memory", "x", "q"])
    assert str(cfg) in err and expect in err, err


def test_every_default_is_within_its_bounds():
    cfg = XMemoryConfig()
    assert XMemoryConfig.from_dict(cfg.to_dict()) == cfg


def _set_store_config(store: Path, config: dict) -> None:
    with sqlite3.connect(store / "memory.sqlite") as con:
        con.execute("UPDATE meta SET value = ? WHERE key = 'config'", (json.dumps(config),))
    con.close()


@pytest.mark.parametrize(
    "edit, expect",
    [
        ({"stage1": {"semantic_pool": 10**9}}, "store config: stage1.semantic_pool: expected <= 10000"),
        ({"stage1": {"semantic_pol": 40}}, "store config: stage1: unknown setting 'semantic_pol'"),
        ({"retrieval": {}}, "store config: settings: unknown setting 'retrieval'"),
    ],
)
def test_a_hand_edited_store_config_is_refused(built, tmp_path, capsys, edit, expect):
    import shutil

    store = tmp_path / "s"
    shutil.copytree(built, store)
    good = Store.open(store).config
    _set_store_config(store, {**good, **{k: {**good.get(k, {}), **v} for k, v in edit.items()}})
    with pytest.raises(ValueError, match=expect.split(": ", 1)[1].replace("[", r"\[")):
        resolve_config(Store.open(store).config)
    memory = Store.open(store).memory_ids()[0]
    assert expect in _err(capsys, ["search", str(store), "--memory", memory, "q"])


# -- stats --check --drop-damaged and the write lock --------------------------------------------
def test_drop_damaged_refuses_while_a_writer_holds_the_store(tmp_path, capsys):
    data = write_json(generate_conversations(2, seed=8), tmp_path / "d.json")
    store = tmp_path / "s"
    assert main(["build", str(data), "--out", str(store), "--embedder", EMB, "--no-progress"]) == 0
    st = Store.open(store)
    victim = st.memory_ids()[1]
    name = st._conn.execute("SELECT arrays_file FROM memories WHERE memory_id = ?", (victim,)).fetchone()[0]
    st.close()
    (store / "arrays" / name).unlink()
    capsys.readouterr()
    with WriterLock(store):  # as a server or an `xmemory add` would hold it
        err = _err(capsys, ["stats", str(store), "--check", "--drop-damaged"])
        assert "--drop-damaged" in err and "another process is writing this store" in err
        assert victim in Store.open(store).memory_ids()  # nothing deleted behind the writer's back
    assert main(["stats", str(store), "--check", "--drop-damaged"]) == 0  # the lock released: it drops
    assert f"deleted damaged memory {victim}" in capsys.readouterr().out
    assert victim not in Store.open(store).memory_ids()
    with WriterLock(store):  # the command released the lock again
        pass


# -- live commands ------------------------------------------------------------------------------------
def test_delete_on_a_missing_store_creates_nothing_and_loads_no_encoder(tmp_path, capsys, monkeypatch):
    from xmemory_gpu.engine import MemoryEngine

    def no_engine(*a, **k):
        raise AssertionError("the engine (and its encoder) was loaded")

    monkeypatch.setattr(MemoryEngine, "open", no_engine)
    typo = tmp_path / "stores" / "lvie"
    err = _err(capsys, ["delete", str(typo), "--all", "--user", "alice"])
    assert err == f"xmemory delete: error: {typo}: no store here (nothing to delete)"
    assert "no store here" in _err(capsys, ["delete", str(typo), "--user", "alice", "m1"])
    assert not (tmp_path / "stores").exists()


def test_add_with_a_bad_embedder_leaves_no_folder(tmp_path, capsys):
    msgs = tmp_path / "m.json"
    msgs.write_text(json.dumps([{"role": "user", "content": "hello there, this is a message"}]))
    new = tmp_path / "new"
    err = _err(capsys, ["add", str(new), "--user", "alice", str(msgs), "--embedder", "bogus"])
    assert "bogus" in err
    assert not new.exists()


def test_delete_takes_the_message_id_after_the_options(live, capsys):
    capsys.readouterr()
    assert main(["delete", str(live), "--user", "alice", "alice-2"]) == 0  # the README's order
    assert capsys.readouterr().out.strip() == "deleted alice-2"
    assert main(["delete", str(live), "--user", "alice", "a", "b"]) == 2
    assert "unrecognized arguments: a b" in capsys.readouterr().err


def test_search_of_several_memories_needs_a_choice(live, capsys, tmp_path):
    err = _err(capsys, ["search", str(live), "what pet do I have?"])
    assert (
        "the store holds 2 memories: choose one with --memory ID or --user ID" in err
        and "--user alice" in err
    )
    capsys.readouterr()
    assert main(["search", str(live), "--user", "alice", "what pet do I have?", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out[0]["memory_id"] == json.dumps(["alice", None, None])
    assert out[0]["message_ids"] and all(m.startswith("alice-") for m in out[0]["message_ids"])
    assert "no memory for --user 'carol'" in _err(capsys, ["search", str(live), "--user", "carol", "q"])
    assert "not both" in _err(capsys, ["search", str(live), "--user", "alice", "--memory", "x", "q"])
    assert "--agent and --run need --user" in _err(capsys, ["search", str(live), "--agent", "a", "q"])
    batch = tmp_path / "b.json"
    batch.write_text(json.dumps([{"question": "q"}]))
    err = _err(capsys, ["search", str(live), "--batch", str(batch)])
    assert "item 0: field 'memory' missing, the store holds 2 memories" in err


def test_search_of_a_single_memory_needs_no_choice(tmp_path, capsys):
    msgs = tmp_path / "m.json"
    msgs.write_text(
        json.dumps([{"id": "m1", "role": "user", "content": "I adopted a grey cat named Pixel."}])
    )
    store = tmp_path / "one"
    assert main(["add", str(store), "--user", "alice", str(msgs), "--embedder", EMB]) == 0
    capsys.readouterr()
    assert main(["search", str(store), "what pet?", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)[0]["message_ids"] == ["m1"]


# -- LoCoMo parsing ---------------------------------------------------------------------------------
@pytest.mark.parametrize("field, value", [("text", 42), ("text", ["a"]), ("blip_caption", 7)])
def test_a_turn_whose_text_is_not_a_string_is_refused(tmp_path, capsys, field, value):
    turn = {
        "dia_id": "D1:1",
        "speaker": "A",
        "text": "I like tea a lot these days.",
        "blip_caption": "a cup of tea",
    }
    turn[field] = value
    conv = {
        "sample_id": "x",
        "conversation": {
            "speaker_a": "A",
            "speaker_b": "B",
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": [turn],
        },
        "qa": [],
    }
    f = tmp_path / "d.json"
    f.write_text(json.dumps([conv]))
    err = _err(capsys, ["build", str(f), "--out", str(tmp_path / "s"), "--embedder", EMB])
    assert (
        f"conversation.session_1[0].{field}: expected a string, got {type(value).__name__}" in err
        and "D1:1" in err
    )


def test_a_photo_turn_with_only_a_caption_is_kept(tmp_path):
    from xmemory_gpu.datasets.locomo import load_locomo

    conv = {
        "sample_id": "x",
        "conversation": {
            "speaker_a": "A",
            "speaker_b": "B",
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": [{"dia_id": "D1:1", "speaker": "A", "blip_caption": "a cup of tea"}],
        },
        "qa": [],
    }
    f = tmp_path / "d.json"
    f.write_text(json.dumps([conv]))
    assert load_locomo(f)[0].messages[0].text == "[shares a photo: a cup of tea]"


def test_add_of_a_file_longer_than_one_write(tmp_path, capsys):
    """The engine bounds one write (``Limits.max_messages``); ``xmemory add`` puts a longer file in as
    several commits, in order, and prints every id."""
    from xmemory_gpu.engine.inputs import Limits

    n = Limits().max_messages + 5
    f = tmp_path / "m.json"
    f.write_text(
        json.dumps(
            [
                {"id": f"m{i}", "role": "user", "content": f"note number {i} about topic {i % 7}"}
                for i in range(n)
            ]
        )
    )
    assert main(["add", str(tmp_path / "s"), "--user", "u", str(f), "--embedder", "hashing:64"]) == 0
    out = capsys.readouterr().out.split()
    assert out == [f"m{i}" for i in range(n)]
