"""Bad input from a careless or hostile user: every case is one line on stderr naming where and
what (``xmemory CMD: error: ...``), exit 2, no traceback, nothing stored lost; a memory with nothing
to extract is a valid empty memory that never breaks the others."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from xmemory_gpu.cli import main
from xmemory_gpu.datasets.synthetic import generate_conversations, write_json
from xmemory_gpu.memory.store import Store
from xmemory_gpu.retrieve import STRATEGIES, Retriever


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    root = tmp_path_factory.mktemp("cli")
    data = write_json(generate_conversations(2, seed=4), root / "d.json")
    store = root / "store"
    assert main(["build", str(data), "--out", str(store), "--embedder", "hashing:64", "--no-progress"]) == 0
    return root, data, store


def _err(capsys, argv: list[str], code: int = 2) -> str:
    assert main(argv) == code, argv
    err = capsys.readouterr().err.strip()
    assert "Traceback" not in err and len(err.splitlines()) == 1, err
    cmd = argv[0]
    assert err.startswith(f"xmemory {cmd}: error:"), err
    return err


def test_bad_arguments_are_one_line_errors(built, capsys, tmp_path):
    root, data, store = built
    s = str(store)
    assert "memory id" in _err(capsys, ["search", s, "--memory", "", "q"])
    assert "--budget-tokens" in _err(capsys, ["search", s, "--budget-tokens", "-5", "q"])
    assert "--conversations" in _err(
        capsys, ["synth", "--conversations", "-1", "--out", str(tmp_path / "x.json")]
    )
    assert "--limit" in _err(
        capsys, ["eval", s, "--data", str(data), "--out", str(tmp_path / "e"), "--limit", "-1"]
    )
    assert "no memory 'nope'" in _err(capsys, ["search", s, "--memory", "nope", "q"])
    assert "is a folder" in _err(capsys, ["search", s, "--batch", str(root)])
    assert "is a folder" in _err(capsys, ["synth", "--out", str(root)])
    f = tmp_path / "file"
    f.write_text("x")
    assert "is a file" in _err(capsys, ["eval", s, "--data", str(data), "--out", str(f)])
    assert "not valid UTF-8" in _err(capsys, ["search", s, "bad \udcff bytes"])


@pytest.mark.parametrize(
    "config, expect",
    [
        ([1, 2], "expected a JSON object"),
        ({"stage1": None}, "stage1: expected an object"),
        ({"theme": {"size_cap": "x"}}, "theme.size_cap: expected int"),
        ({"theme": {"size_cap": 0}}, "theme.size_cap: expected >= 2"),
        ({"stage1": {"semantic_budget": "abc"}}, "stage1.semantic_budget: expected int"),
        ({"nope": 1}, "unknown setting 'nope'"),
    ],
)
def test_bad_config_files_name_the_field(built, capsys, tmp_path, config, expect):
    _, _, store = built
    cfg = tmp_path / "cfg.json"
    cfg.write_text(json.dumps(config))
    err = _err(capsys, ["search", str(store), "--config", str(cfg), "q"])
    assert str(cfg) in err and expect in err


def _conv(turns: list[tuple[str, str]], sid: str = "bad") -> dict:
    return {
        "sample_id": sid,
        "conversation": {
            "speaker_a": "A",
            "speaker_b": "B",
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": [
                {"dia_id": f"D1:{i}", "speaker": sp, "text": t} for i, (sp, t) in enumerate(turns, 1)
            ],
        },
        "qa": [],
    }


def test_bad_data_files_name_file_and_field(capsys, tmp_path):
    out = str(tmp_path / "s")
    f = tmp_path / "d.json"
    f.write_bytes(b'[{"sample_id": "a\xff"}]')
    assert "not UTF-8" in _err(capsys, ["build", str(f), "--out", out, "--embedder", "hashing:32"])
    f.write_text("[" * 100000 + "]" * 100000)
    assert "nested too deeply" in _err(capsys, ["build", str(f), "--out", out, "--embedder", "hashing:32"])
    f.write_text(json.dumps([_conv([("A", "hi \ud800 there")])]).replace("\\\\ud800", "\\ud800"))
    assert "lone surrogate" in _err(capsys, ["build", str(f), "--out", out, "--embedder", "hashing:32"])
    c = _conv([("A", "I like tea a lot these days.")])
    c["qa"] = [{"question": "q?", "answer": "x", "evidence": [], "category": "abc"}]
    f.write_text(json.dumps([c]))
    err = _err(capsys, ["build", str(f), "--out", out, "--embedder", "hashing:32"])
    assert str(f) in err and "qa[0].category" in err


def test_unexpected_errors_are_one_line_with_a_log(monkeypatch, capsys, tmp_path):
    monkeypatch.setenv("XMEMORY_LOG_DIR", str(tmp_path / "logs"))
    import xmemory_gpu.cli.backends as backends

    def boom(args):
        raise ZeroDivisionError("simulated bug")

    monkeypatch.setattr(backends, "run", boom)
    assert main(["backends"]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "internal error: ZeroDivisionError: simulated bug" in err
    log = next((tmp_path / "logs").iterdir())
    assert "Traceback" in log.read_text() and str(log) in err
    with pytest.raises(ZeroDivisionError):
        main(["--debug", "backends"])


def test_a_memory_with_nothing_to_extract_is_valid_and_empty(capsys, tmp_path):
    f = tmp_path / "d.json"
    good = generate_conversations(1, seed=2)
    write_json(good + [_conv([("A", "hi"), ("B", "ok"), ("A", "lol")], sid="tiny")], f)
    store = tmp_path / "s"
    assert main(["build", str(f), "--out", str(store), "--embedder", "hashing:64", "--no-progress"]) == 0
    capsys.readouterr()
    r = Retriever.from_store(store)  # one tiny memory does not break loading the store
    for s in STRATEGIES:
        for res in r.search(["what did they say?", "hi"], "tiny", strategy=s):
            assert set(res.message_ids) <= {"D1:1", "D1:2", "D1:3"}
        assert r.search(["what is the job?"], good[0]["sample_id"], strategy=s)
    st = Store.open(store)
    assert st.stats("tiny")["n_semantics"] == 0
    assert main(["search", str(store), "--memory", "tiny", "anything"]) == 0


def test_a_crafted_store_cannot_read_outside_its_folder(built, tmp_path, capsys):
    import shutil
    import sqlite3

    _, _, store = built
    copy = tmp_path / "crafted"
    shutil.copytree(store, copy)
    conn = sqlite3.connect(copy / "memory.sqlite")
    name = conn.execute("SELECT arrays_file FROM memories").fetchone()[0]
    (tmp_path / "outside").mkdir()
    shutil.copy(copy / "arrays" / name, tmp_path / "outside" / "b.npz")
    with conn:
        conn.execute("UPDATE memories SET arrays_file = ?", ("../../outside/b.npz",))
    conn.close()
    mid = Store.open(copy).memory_ids()[0]
    with pytest.raises(ValueError, match="not a plain file name"):
        Retriever.from_store(copy, [mid])
    r = Retriever.from_store(copy)  # all memories: the crafted one is quarantined, never read
    assert "not a plain file name" in r.quarantined[mid] and r.bank.n_memories == 0
    with pytest.raises(ValueError, match="damaged and was not loaded: .*not a plain file name"):
        r.search("q", mid)
    assert main(["search", str(copy), "--memory", Store.open(copy).memory_ids()[0], "q"]) == 2
    assert "not a plain file name" in capsys.readouterr().err
    assert Path(store / "memory.sqlite").exists()


def test_stats_check_reports_and_build_rebuilds_a_damaged_memory(tmp_path, capsys):
    data = write_json(generate_conversations(3, seed=8), tmp_path / "d.json")
    store = tmp_path / "s"
    assert main(["build", str(data), "--out", str(store), "--embedder", "hashing:64", "--no-progress"]) == 0
    st = Store.open(store)
    victim = st.memory_ids()[1]
    name = st._conn.execute("SELECT arrays_file FROM memories WHERE memory_id = ?", (victim,)).fetchone()[0]
    st.close()
    (store / "arrays" / name).unlink()
    capsys.readouterr()
    assert main(["stats", str(store), "--check"]) == 1
    out = capsys.readouterr().out
    assert f"{victim}" in out and "DAMAGED" in out and "is missing" in out
    assert main(["build", str(data), "--out", str(store), "--embedder", "hashing:64", "--no-progress"]) == 0
    assert main(["stats", str(store), "--check"]) == 0  # the resume rebuilt it
    assert Retriever.from_store(store).search("q", victim, strategy="naive-rag")
