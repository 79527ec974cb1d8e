"""The bulk build in worker processes (``construct/worker_pool.py``): the same store as one process,
a killed worker stops the build with the earlier shards committed, a re-run completes it."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from slow_build import SLOW_DRIVER, committed, paused_env

from xmemory_gpu.cli import main
from xmemory_gpu.config import XMemoryConfig
from xmemory_gpu.construct.pipeline import build_store, chunks, load_conversations
from xmemory_gpu.construct.worker_pool import WorkerError, WorkerPool
from xmemory_gpu.datasets.synthetic import generate_conversations, write_json
from xmemory_gpu.embed import load_embedder
from xmemory_gpu.memory.backend import InMemoryBackend
from xmemory_gpu.memory.store import Store

EMBEDDER = "hashing:64"


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    return write_json(generate_conversations(9, seed=3), tmp_path_factory.mktemp("conv") / "conv.json")


def _config() -> XMemoryConfig:
    cfg = XMemoryConfig()
    cfg.embed.model = EMBEDDER
    return cfg


def _catalogue(store: Path) -> list[tuple]:
    with sqlite3.connect(store / "memory.sqlite") as con:
        rows = con.execute(
            "SELECT memory_id, position, arrays_file, sha256, stats, n_msg, n_epi, n_sem, n_theme, n_psg "
            "FROM memories ORDER BY position"
        ).fetchall()
        ids = con.execute("SELECT memory_id, id FROM message_ids ORDER BY memory_id, id").fetchall()
    return [*rows, ids]


def _files(store: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted((store / "arrays").glob("*.slice"))}


def _build(data: Path, out: Path, workers: int, **kw) -> object:
    cfg = kw.pop("config", _config())
    return build_store(
        data,
        out,
        embedder=load_embedder(cfg.embed.model),
        config=cfg,
        progress=False,
        shard_size=2,
        workers=workers,
        **kw,
    )


def _other_embedder() -> XMemoryConfig:
    cfg = XMemoryConfig()
    cfg.embed.model = "hashing:32"
    return cfg


@pytest.mark.slow
def test_workers_write_the_store_one_process_writes(data, tmp_path):
    one = _build(data, tmp_path / "one", 1)
    two = _build(data, tmp_path / "two", 2)
    assert two.built == one.built and len(one.built) == 9
    assert _catalogue(tmp_path / "two") == _catalogue(
        tmp_path / "one"
    )  # names, positions, sha256, stats, counts, ids
    assert _files(tmp_path / "two") == _files(tmp_path / "one")
    assert {"episodes", "themes", "encode", "commit"} <= set(two.timings)
    again = _build(data, tmp_path / "two", 2)  # everything stored: skipped, nothing sent to a worker
    assert again.built == [] and sorted(again.skipped) == sorted(one.built)


@pytest.mark.slow
def test_workers_fill_an_in_memory_backend_and_resume_a_partial_store(data, tmp_path):
    _build(data, tmp_path / "ref", 1)
    mem = InMemoryBackend(dim=64, embedder=load_embedder(EMBEDDER).name)
    _build(data, mem, 3)
    shas = {row[0]: row[3] for row in _catalogue(tmp_path / "ref")[:-1]}
    assert mem.versions() == shas and len(shas) == 9  # the in-memory backend's version: the bytes' sha256
    _build(data, tmp_path / "part", 1, limit=4)
    rest = _build(data, tmp_path / "part", 2)
    assert len(rest.skipped) == 4 and len(rest.built) == 5
    assert _files(tmp_path / "part") == _files(tmp_path / "ref")


@pytest.mark.slow
def test_a_killed_worker_stops_the_build_with_earlier_shards_committed(data, tmp_path):
    cfg, emb = _config(), load_embedder(EMBEDDER)
    convs = load_conversations(data)
    shards = list(chunks(convs, 1))  # 9 shards: at most 2 x 2 built ahead of the first commit
    settings = {"name": emb.name, "dim": emb.dim, "device": "cpu", "config": cfg.to_dict(), "backend": "auto"}
    store = Store.open_or_create(tmp_path / "s", dim=emb.dim, embedder=emb.name, config=cfg.to_dict())
    committed: list[str] = []
    with pytest.raises(WorkerError, match=r"build worker \d: exited"), WorkerPool(2, settings) as pool:

        def kill_all(ids, seconds):
            committed.extend(ids)
            for w in pool._pool:
                w.proc.kill()

        pool.build(store, shards, set(), kill_all)
    assert pool._pool == []  # stopped
    assert 1 <= len(committed) <= 5 and committed == [c.sample_id for c in convs[: len(committed)]]
    assert store.memory_ids() == committed
    store.close()
    rest = _build(data, tmp_path / "s", 2)
    assert rest.skipped == committed and len(rest.built) == 9 - len(committed)
    _build(data, tmp_path / "ref", 1)
    assert _files(tmp_path / "s") == _files(tmp_path / "ref")


def test_a_worker_without_settings_answers_one_error_line():
    run = subprocess.run(
        [sys.executable, "-m", "xmemory_gpu.construct.build_worker"],
        input=b"",
        capture_output=True,
        timeout=120,
    )
    assert run.returncode == 1
    msg = json.loads(run.stdout.decode().strip())
    assert "no settings line" in msg["error"]


def test_workers_must_be_a_positive_integer_and_llm_free(data, tmp_path, capsys):
    with pytest.raises(ValueError, match="workers: expected an integer >= 1"):
        _build(data, tmp_path / "s", 0)
    assert (
        main(
            [
                "build",
                str(data),
                "--out",
                str(tmp_path / "s"),
                "--workers",
                "2",
                "--builder",
                "llm",
                "--embedder",
                EMBEDDER,
                "--no-progress",
            ]
        )
        == 2
    )
    err = capsys.readouterr().err
    assert "--workers builds LLM-free" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "s").exists()


def _refuse(*args, **kw):
    raise AssertionError("the builder loaded an embedder: its workers load it")


@pytest.mark.slow
def test_cli_build_with_workers(data, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr("xmemory_gpu.embed.load_embedder", _refuse)  # only the workers load it
    assert (
        main(
            [
                "build",
                str(data),
                "--out",
                str(tmp_path / "s"),
                "--workers",
                "2",
                "--embedder",
                EMBEDDER,
                "--shard-size",
                "4",
                "--no-progress",
                "--json",
            ]
        )
        == 0
    )
    report = json.loads(capsys.readouterr().out)
    assert len(report["built"]) == 9 and report["timings"]["commit"] > 0
    assert Store.open(tmp_path / "s").embedder == "hashing-64"  # the name the workers reported


@pytest.mark.slow
def test_without_an_embedder_the_workers_load_the_configured_one(data, tmp_path, monkeypatch):
    _build(data, tmp_path / "ref", 1)
    monkeypatch.setattr("xmemory_gpu.embed.load_embedder", _refuse)
    report = build_store(data, tmp_path / "s", config=_config(), progress=False, shard_size=2, workers=2)
    assert len(report.built) == 9
    assert _files(tmp_path / "s") == _files(tmp_path / "ref") and _catalogue(tmp_path / "s") == _catalogue(
        tmp_path / "ref"
    )


def test_a_malformed_embedder_spec_is_refused_as_one_process_refuses_it(data, tmp_path, capsys):
    errors = []
    for workers in ("1", "2"):
        assert (
            main(
                [
                    "build",
                    str(data),
                    "--out",
                    str(tmp_path / "s"),
                    "--workers",
                    workers,
                    "--embedder",
                    "hashing:x",
                    "--no-progress",
                ]
            )
            == 2
        )
        errors.append(capsys.readouterr().err.strip())
    assert errors[0] == errors[1] and len(errors[0].splitlines()) == 1 and "embedder 'hashing:x'" in errors[0]
    assert not (tmp_path / "s").exists()


@pytest.mark.slow
def test_shards_are_built_while_the_inputs_are_checked_and_a_bad_input_commits_nothing(
    data, tmp_path, monkeypatch
):
    import threading

    from xmemory_gpu.construct import pipeline
    from xmemory_gpu.construct.worker_pool import _Worker
    from xmemory_gpu.datasets.locomo import DatasetError

    convs = load_conversations(data)
    ready, built = threading.Semaphore(0), threading.Event()
    real_ready, real_build = _Worker._read_ready, _Worker.build

    def read_ready(self):
        real_ready(self)
        ready.release()

    def build(self, shard, shard_convs):
        out = real_build(self, shard, shard_convs)
        built.set()
        return out

    def read(*args, **kw):
        def checked():
            assert ready.acquire(timeout=1800) and ready.acquire(
                timeout=1800
            )  # both workers loaded (hang guards)
            yield from convs[:4]
            built.wait(timeout=1800)  # two shards went out before the rest was read
            raise DatasetError(f"{data}: item 4: sample_id: missing or not a string")

        return len(convs), checked()

    monkeypatch.setattr(_Worker, "_read_ready", read_ready)
    monkeypatch.setattr(_Worker, "build", build)
    monkeypatch.setattr(pipeline, "read_conversations", read)
    with pytest.raises(DatasetError, match="item 4"):
        _build(data, tmp_path / "s", 2)
    assert built.is_set()  # a shard was built before the bad input was read ...
    assert (
        not (tmp_path / "s" / "memory.sqlite").exists() and not (tmp_path / "s" / "arrays").exists()
    )  # ... no store
    monkeypatch.undo()
    _build(data, tmp_path / "s", 2, config=_other_embedder())  # so another embedder may build there


def test_read_conversations_counts_at_once_and_checks_every_item(data, tmp_path):
    from xmemory_gpu.construct.pipeline import read_conversations
    from xmemory_gpu.datasets.locomo import DatasetError

    items = json.loads(data.read_text())
    count, convs = read_conversations(data, limit=4, max_sessions=1)
    assert count == 4 and [c.sample_id for c in convs] == [i["sample_id"] for i in items[:4]]
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps([*items[:3], {"sample_id": 7}]))
    count, convs = read_conversations(bad, limit=2)  # the file is parsed, its items not yet checked
    assert count == 2 and next(convs).sample_id == items[0]["sample_id"]
    with pytest.raises(DatasetError, match=r"item 3: sample_id"):  # past the limit, still checked
        list(convs)
    with pytest.raises(DatasetError, match="malformed JSON"):
        bad.write_text("[{")
        read_conversations(bad)


def test_conversations_cross_the_wire_unchanged_but_for_their_questions(data):
    from dataclasses import replace

    from xmemory_gpu.memory.records import (
        QA,
        Conversation,
        Message,
        conversation_from_wire,
        conversation_to_wire,
    )

    odd = Conversation(
        "s\u00e9",
        ("Zo\u00eb", "\u674e"),
        [
            Message("d1", "Zo\u00eb", 'caf\u00e9 \U0001f600 "q"\nline', 1, None),
            Message("d2", "\u674e", "x", 2, 1.5e9 + 0.1),
        ],
        [QA("why?", None, ["d1"], 2, "no")],
        "f.json",
    )
    for conv in [*load_conversations(data), odd, replace(odd, messages=[])]:
        text = conversation_to_wire(conv)
        assert "\n" not in text and text.isascii()  # one line of the worker's wire
        assert conversation_from_wire(json.loads(text)) == replace(conv, qa=[])  # a build reads no questions
    cut = json.loads(conversation_to_wire(odd))
    cut["text"].pop()
    with pytest.raises(ValueError, match="message columns of different lengths"):
        conversation_from_wire(cut)


def test_a_worker_of_another_install_refuses_to_build():
    emb = load_embedder(EMBEDDER)
    settings = {
        "name": emb.name,
        "dim": emb.dim,
        "device": "cpu",
        "config": _config().to_dict(),
        "backend": "auto",
        "package": "/elsewhere/xmemory_gpu",
    }
    run = subprocess.run(
        [sys.executable, "-m", "xmemory_gpu.construct.build_worker"],
        input=json.dumps(settings).encode() + b"\n",
        capture_output=True,
        timeout=120,
    )
    assert (
        run.returncode == 1 and "not the builder's /elsewhere/xmemory_gpu" in json.loads(run.stdout)["error"]
    )


@pytest.mark.slow
def test_killing_the_builder_stops_its_workers_and_a_rerun_completes(data, tmp_path):
    import time

    psutil = pytest.importorskip("psutil")
    args = [str(data), "--embedder", EMBEDDER, "--shard-size", "1", "--workers", "2", "--no-progress"]
    part = tmp_path / "part"
    # the build stops once 2 memories are in, its workers alive, until killed
    proc = subprocess.Popen(
        [sys.executable, "-c", SLOW_DRIVER, "build", *args, "--out", str(part)], env=paused_env(2)
    )
    for _ in range(30000):  # bounded: a condition, not a time, ends the wait
        if proc.poll() is not None or committed(part) >= 2:
            break
        time.sleep(0.02)
    workers = psutil.Process(proc.pid).children()
    proc.kill()
    proc.wait()
    assert len(workers) == 2
    _, alive = psutil.wait_procs(
        workers, timeout=600
    )  # their input ends: they stop by themselves (a hang guard)
    assert not alive
    with sqlite3.connect(part / "memory.sqlite") as con:
        n = con.execute("SELECT COUNT(*) FROM memories").fetchone()[0]
    assert 2 <= n < 9
    assert main(["build", *args, "--out", str(part)]) == 0
    _build(data, tmp_path / "ref", 1)
    assert _files(part) == _files(tmp_path / "ref")


@pytest.mark.slow
def test_workers_rebuild_a_damaged_memory(data, tmp_path):
    _build(data, tmp_path / "ref", 1)
    _build(data, tmp_path / "s", 1)
    victim = sorted((tmp_path / "s" / "arrays").glob("*.slice"))[3]
    victim.write_bytes(victim.read_bytes()[:-10])  # cut: the memory fails its checksum
    again = _build(data, tmp_path / "s", 2)
    assert len(again.built) == 1 and len(again.skipped) == 8
    assert _files(tmp_path / "s") == _files(tmp_path / "ref") and _catalogue(tmp_path / "s") == _catalogue(
        tmp_path / "ref"
    )


def test_a_worker_that_fails_before_its_task_reports_its_own_error(data, tmp_path):
    emb = load_embedder(EMBEDDER)
    settings = {
        "name": emb.name,
        "dim": emb.dim + 1,
        "device": "cpu",
        "config": _config().to_dict(),
        "backend": "auto",
    }
    convs = load_conversations(data)
    store = Store.open_or_create(tmp_path / "s", dim=emb.dim, embedder=emb.name, config={})
    with (
        pytest.raises(WorkerError, match=r"loads as 'hashing-64' \(64\) in a worker, not with dim 65"),
        WorkerPool(1, settings) as pool,
    ):
        pool.build(store, [convs], set(), lambda ids, seconds: None)  # its ready line is the error
    assert store.memory_ids() == []


def test_a_worker_that_dies_before_its_task_stops_the_build_and_a_pool_builds_once(data, tmp_path):
    cfg, emb = _config(), load_embedder(EMBEDDER)
    settings = {"name": emb.name, "dim": emb.dim, "device": "cpu", "config": cfg.to_dict(), "backend": "auto"}
    convs = load_conversations(data)
    store = Store.open_or_create(tmp_path / "s", dim=emb.dim, embedder=emb.name, config=cfg.to_dict())
    with (
        pytest.raises(WorkerError, match=r"build worker 0: exited before its task was sent \(exit code -9\)"),
        WorkerPool(1, settings) as pool,
    ):
        assert pool.loaded() == (emb.name, emb.dim)
        pool._pool[0].proc.kill()
        pool._pool[0].proc.wait()
        pool.build(store, [convs], set(), lambda ids, seconds: None)  # a shard larger than a pipe's buffer
    assert store.memory_ids() == []
    with WorkerPool(1, settings) as pool:
        pool.build(store, [convs[:1]], set(), lambda ids, seconds: None)
        with pytest.raises(RuntimeError, match="a pool builds once"):
            pool.build(store, [convs[1:2]], set(), lambda ids, seconds: None)
    assert store.memory_ids() == [convs[0].sample_id]
    store.close()


@pytest.mark.slow
def test_ctrl_c_stops_the_build_and_its_workers_with_one_line(data, tmp_path):
    import os
    import signal
    import time

    psutil = pytest.importorskip("psutil")
    args = [str(data), "--embedder", EMBEDDER, "--shard-size", "1", "--workers", "2", "--no-progress"]
    part = tmp_path / "part"
    # Python's own Ctrl-C handler, even where this test runs with SIGINT ignored (a background job of a script)
    driver = "import signal; signal.signal(signal.SIGINT, signal.default_int_handler)\n" + SLOW_DRIVER
    proc = subprocess.Popen(
        [sys.executable, "-c", driver, "build", *args, "--out", str(part)],
        env=paused_env(1),
        stderr=subprocess.PIPE,
        start_new_session=True,
    )  # its own group: the terminal's Ctrl-C
    for _ in range(30000):  # bounded: the build stops once a memory is in, until interrupted
        if proc.poll() is not None or committed(part) >= 1:
            break
        time.sleep(0.02)
    workers = psutil.Process(proc.pid).children()
    os.killpg(proc.pid, signal.SIGINT)
    _, err = proc.communicate(timeout=1800)  # a hang guard
    assert proc.returncode == 130 and err.decode().strip().splitlines() == ["xmemory build: interrupted"]
    _, alive = psutil.wait_procs(workers, timeout=600)
    assert len(workers) == 2 and not alive
    assert not list((part / "arrays").glob("*.tmp"))
    assert main(["build", *args, "--out", str(part)]) == 0
    _build(data, tmp_path / "ref", 1)
    assert _files(part) == _files(tmp_path / "ref") and _catalogue(part) == _catalogue(tmp_path / "ref")


def test_balanced_shards_give_every_worker_its_share():
    import random

    from xmemory_gpu.construct.pipeline import balanced_shard_size

    assert balanced_shard_size(1000, 2, 64) == 63  # 16 shards (the last of 55), not 15 of 64 and one of 40
    rng = random.Random(5)
    for _ in range(2000):
        count, workers, most = rng.randint(1, 5000), rng.randint(1, 16), rng.randint(1, 256)
        size = balanced_shard_size(count, workers, most)
        shards = -(-count // size)
        assert 1 <= size <= most
        assert size <= -(-count // workers)  # shards no larger than one per worker needs
        assert shards <= workers * -(-count // (workers * most))  # no more rounds than shards of `most` need


def test_a_build_that_stops_before_its_first_commit_leaves_no_store(data, tmp_path):
    class Broken:  # an encoder that fails on its first call
        name, dim = "hashing-64", 64

        def encode(self, texts):
            raise RuntimeError("encoder down")

    (tmp_path / "s").mkdir()
    (tmp_path / "s" / "notes.txt").write_text("mine")
    with pytest.raises(RuntimeError, match="encoder down"):
        build_store(data, tmp_path / "s", embedder=Broken(), config=_config(), progress=False)
    assert sorted(p.name for p in (tmp_path / "s").iterdir()) == [
        "notes.txt",
        "write.lock",
    ]  # the user's file stays
    _build(data, tmp_path / "s", 1, config=_other_embedder())  # another embedder builds there
    part = _build(data, tmp_path / "p", 1, limit=2)
    with pytest.raises(RuntimeError, match="encoder down"):  # a store with memories is kept
        build_store(data, tmp_path / "p", embedder=Broken(), config=_config(), progress=False)
    assert Store.open(tmp_path / "p").memory_ids() == part.built
