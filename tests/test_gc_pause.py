"""The collector pause around a large batched search (retrieve/gc_pause.py): it ends with the
search, even one that raises, nests across threads, collects while searches keep overlapping, leaves
a collector the application disabled alone, is not taken by small searches, and the search returns
the same results with the collector running."""

from __future__ import annotations

import gc
import threading

import pytest

from xmemory_gpu.config import XMemoryConfig
from xmemory_gpu.construct.pipeline import build_bank
from xmemory_gpu.datasets.locomo import load_locomo
from xmemory_gpu.datasets.synthetic import generate_conversations, write_json
from xmemory_gpu.embed import load_embedder
from xmemory_gpu.retrieve import Retriever
from xmemory_gpu.retrieve.gc_pause import gc_paused


@pytest.fixture(autouse=True)
def _collector_on():
    was = gc.isenabled()
    gc.enable()
    yield
    (gc.enable if was else gc.disable)()


def test_the_pause_ends_with_the_block_even_when_it_raises():
    with gc_paused():
        assert not gc.isenabled()
        with gc_paused():  # nested
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()
    with pytest.raises(RuntimeError), gc_paused():
        raise RuntimeError("boom")
    assert gc.isenabled()
    with gc_paused(active=False):
        assert gc.isenabled()


def test_a_collector_the_application_disabled_stays_disabled():
    gc.disable()
    with gc_paused():
        assert not gc.isenabled()
    assert not gc.isenabled()


def test_overlapping_pauses_in_threads_end_with_the_last():
    inside, go = threading.Barrier(3), threading.Event()

    def search():
        with gc_paused():
            inside.wait()
            go.wait(10)

    threads = [threading.Thread(target=search) for _ in range(2)]
    for t in threads:
        t.start()
    inside.wait()
    assert not gc.isenabled()
    go.set()
    for t in threads:
        t.join(10)
    assert gc.isenabled()


def test_overlapping_pauses_still_collect_every_max_pause(monkeypatch):
    """A busy server's searches overlap without end: one ending while others run collects once the
    collector has been off for ``MAX_PAUSE_S``."""
    from xmemory_gpu.retrieve import gc_pause

    runs: list[int] = []
    monkeypatch.setattr(gc, "collect", lambda generation=2: runs.append(generation) or 0)
    monkeypatch.setattr(gc_pause, "MAX_PAUSE_S", 0.0)
    with gc_paused():
        with gc_paused():
            pass
        assert runs == [1] and not gc.isenabled()  # collected at the inner exit, still paused
    assert gc.isenabled() and runs == [1]  # the last exit re-enables, no extra collection
    monkeypatch.setattr(gc_pause, "MAX_PAUSE_S", 3600.0)
    with gc_paused():
        with gc_paused():
            pass
    assert runs == [1]


def test_a_search_restores_the_collector_and_matches_one_with_it_running(tmp_path, monkeypatch):
    emb = load_embedder("hashing:64")
    convs = load_locomo(write_json(generate_conversations(2, seed=4, sessions=(2, 3)), tmp_path / "c.json"))
    r = Retriever(build_bank(convs, emb, XMemoryConfig()), emb, XMemoryConfig())
    qs = [
        "What did they do at the weekend?",
        "Where do they work?",
        "Who visited whom?",
        "What was painted?",
    ] * 8
    mids = [c.sample_id for c in convs] * 16
    seen = []
    real = r.budget.contexts
    monkeypatch.setattr(r.budget, "contexts", lambda *a, **k: (seen.append(gc.isenabled()), real(*a, **k))[1])
    paused = [x.context for x in r.search(qs, mids, budget_tokens=200)]
    assert seen == [False] and gc.isenabled()
    r.search(qs[:4], mids[:4], budget_tokens=200)  # a small search: no pause
    assert seen == [False, True]
    seen.clear()
    import xmemory_gpu.retrieve.retriever as retriever

    monkeypatch.setattr(retriever, "gc_paused", lambda active=True: gc_paused(False))
    assert [x.context for x in r.search(qs, mids, budget_tokens=200)] == paused and seen == [True]


def test_a_child_forked_during_a_pause_starts_with_the_collector_on():
    import os

    with gc_paused():
        pid = os.fork()
        if pid == 0:  # the child: exit status 0 when the collector is on
            os._exit(0 if gc.isenabled() else 1)
        _, status = os.waitpid(pid, 0)
        assert not gc.isenabled()
    assert os.waitstatus_to_exitcode(status) == 0 and gc.isenabled()
