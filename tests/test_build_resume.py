"""A build killed with SIGKILL part-way, then re-run, ends with the same store as an uninterrupted build."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from slow_build import SLOW_DRIVER, committed, paused_env

from xmemory_gpu.cli import main
from xmemory_gpu.datasets.synthetic import generate_conversations, write_json
from xmemory_gpu.memory.store import Store


def _snapshot(path: Path) -> dict:
    store = Store.open(path)
    out = {}
    for mid in store.memory_ids():
        m = store.get(mid)
        out[mid] = (
            [(e.title, e.text, e.message_ids) for e in m.episodes],
            [(s.text, s.message_ids, s.episode_ids) for s in m.semantics],
            [(t.id, t.summary, t.parents) for t in m.themes],
            {k: v.tobytes() for k, v in m.arrays().items()},
        )
    return out


@pytest.mark.slow
def test_kill9_then_resume_matches_uninterrupted_build(tmp_path):
    data = tmp_path / "synthetic.json"
    write_json(generate_conversations(6, seed=5), data)
    args = [str(data), "--embedder", "hashing:64", "--shard-size", "1", "--no-progress"]

    full = tmp_path / "full"
    assert main(["build", *args, "--out", str(full)]) == 0

    part = tmp_path / "part"
    env = dict(paused_env(2), PYTHONUNBUFFERED="1")  # the build stops once 2 memories are in, until killed
    proc = subprocess.Popen([sys.executable, "-c", SLOW_DRIVER, "build", *args, "--out", str(part)], env=env)
    for _ in range(30000):  # bounded: a condition, not a time, ends the wait
        if committed(part) >= 2 or proc.poll() is not None:
            break
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    n_before = committed(part)
    assert 2 <= n_before < 6, f"expected a partial store, found {n_before} committed memories"

    assert main(["build", *args, "--out", str(part)]) == 0
    assert _snapshot(part) == _snapshot(full)


def test_build_rejects_a_store_of_another_dimension(tmp_path, capsys):
    data = tmp_path / "synthetic.json"
    write_json(generate_conversations(1, seed=1), data)
    store = tmp_path / "store"
    assert main(["build", str(data), "--embedder", "hashing:64", "--out", str(store), "--no-progress"]) == 0
    before = _snapshot(store)
    assert main(["build", str(data), "--embedder", "hashing:32", "--out", str(store), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "dim" in err and "64" in err and "32" in err
    assert _snapshot(store) == before


def test_build_reports_malformed_json_with_the_file(tmp_path, capsys):
    bad = tmp_path / "broken.json"
    bad.write_text('[{"sample_id": "x", "conversation": ')
    assert (
        main(["build", str(bad), "--embedder", "hashing:64", "--out", str(tmp_path / "s"), "--no-progress"])
        == 2
    )
    assert "broken.json" in capsys.readouterr().err


def test_stats_json_reports_every_memory(tmp_path, capsys):
    data = tmp_path / "synthetic.json"
    write_json(generate_conversations(2, seed=3), data)
    store = tmp_path / "store"
    assert main(["build", str(data), "--embedder", "hashing:64", "--out", str(store), "--no-progress"]) == 0
    capsys.readouterr()
    assert main(["stats", str(store), "--json"]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert len(stats["memories"]) == 2
    for row in stats["memories"].values():
        assert row["n_semantics"] > 0 and row["max_theme_size"] <= 12 and np.isfinite(row["f_P"])


def _backend_and_data(tmp_path: Path, n: int):
    from xmemory_gpu.embed import load_embedder
    from xmemory_gpu.memory.backend import InMemoryBackend

    emb = load_embedder("hashing:64")
    data = write_json(generate_conversations(n, seed=4), tmp_path / "convs.json")
    return emb, data, InMemoryBackend(dim=emb.dim, embedder=emb.name)


def test_a_failed_commit_stops_the_build_and_a_rerun_completes_it(tmp_path, monkeypatch):
    """A commit that fails stops the build with its error; the shards before it stay, and a rerun
    builds the rest into the same store as an uninterrupted build."""
    from xmemory_gpu.construct import pipeline

    emb, data, backend = _backend_and_data(tmp_path, 6)
    inner = backend.commit
    calls = []

    def failing(slices, **kw):
        calls.append([s.memory_id for s in slices])
        if len(calls) == 2:
            raise OSError("disk full")
        inner(slices, **kw)

    monkeypatch.setattr(backend, "commit", failing)
    with pytest.raises(OSError, match="disk full"):
        pipeline.build_store(data, backend, embedder=emb, shard_size=2, progress=False)
    assert backend.memory_ids() == ["synth-4-0", "synth-4-1"] and len(calls) == 2
    monkeypatch.setattr(backend, "commit", inner)
    again = pipeline.build_store(data, backend, embedder=emb, shard_size=2, progress=False)
    assert again.skipped == ["synth-4-0", "synth-4-1"] and len(again.built) == 4
    _, _, whole = _backend_and_data(tmp_path, 6)
    pipeline.build_store(data, whole, embedder=emb, shard_size=2, progress=False)
    for mid in whole.memory_ids():
        a, b = backend.get_slice(mid), whole.get_slice(mid)
        assert a.cols.keys() == b.cols.keys()
        for lv in a.cols:
            for name in a.cols[lv]:
                assert np.array_equal(a.cols[lv][name], b.cols[lv][name]), (mid, lv, name)


def test_a_rerun_finds_what_it_skips_by_id(tmp_path, monkeypatch):
    """The skipped memories are found by id, never by comparing conversations (quadratic work in the
    conversations and their messages: 1,000 of them cost the build half a second)."""
    from xmemory_gpu.construct import pipeline
    from xmemory_gpu.memory.records import Conversation

    emb, data, backend = _backend_and_data(tmp_path, 5)
    pipeline.build_store(data, backend, embedder=emb, shard_size=2, progress=False, limit=3)

    def refuse(self, other):
        raise AssertionError("conversations compared")

    monkeypatch.setattr(Conversation, "__eq__", refuse)
    again = pipeline.build_store(data, backend, embedder=emb, shard_size=2, progress=False)
    assert again.skipped == ["synth-4-0", "synth-4-1", "synth-4-2"] and again.built == [
        "synth-4-3",
        "synth-4-4",
    ]


def test_a_shard_that_fails_to_build_keeps_the_commits_before_it(tmp_path, monkeypatch):
    """The build writes a shard's files while the next shard builds (``start_commit``); a failure in
    that build still finishes the commit before it, as committing each shard first would: the
    store holds the shards built, every file it holds is catalogued, and a rerun completes it."""
    from xmemory_gpu.construct import pipeline

    emb, data, _ = _backend_and_data(tmp_path, 6)
    real, calls = pipeline.build_slices, []

    def failing(shard, *args, **kw):
        calls.append([c.sample_id for c in shard])
        if len(calls) == 3:
            raise RuntimeError("the encoder crashed")
        return real(shard, *args, **kw)

    monkeypatch.setattr(pipeline, "build_slices", failing)
    root = tmp_path / "store"
    with pytest.raises(RuntimeError, match="the encoder crashed"):
        pipeline.build_store(data, root, embedder=emb, shard_size=2, progress=False)
    store = Store.open(root)
    assert store.memory_ids() == [f"synth-4-{i}" for i in range(4)]
    assert sorted(p.name for p in (root / "arrays").iterdir()) == sorted(store.versions().values())
    store.close()
    monkeypatch.setattr(pipeline, "build_slices", real)
    again = pipeline.build_store(data, root, embedder=emb, shard_size=2, progress=False)
    assert again.built == ["synth-4-4", "synth-4-5"]
