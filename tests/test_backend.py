"""The storage seam (memory/backend.py): the SQLite store and the in-memory backend are both
``MemoryBackend``s, and a build into either gives the same memories (columns exactly, stats but
timings), which retrieve the same."""

from __future__ import annotations

import numpy as np
import pytest

from xmemory_gpu.config import XMemoryConfig
from xmemory_gpu.construct.pipeline import build_store
from xmemory_gpu.datasets.synthetic import generate_conversations, write_json
from xmemory_gpu.embed import load_embedder
from xmemory_gpu.memory.backend import InMemoryBackend, MemoryBackend
from xmemory_gpu.memory.store import Store
from xmemory_gpu.retrieve.retriever import Retriever

SPEC = "hashing:64"


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return write_json(
        generate_conversations(4, seed=21, sessions=(2, 4)), tmp_path_factory.mktemp("b") / "d.json"
    )


def _cfg() -> XMemoryConfig:
    cfg = XMemoryConfig()
    cfg.embed.model = SPEC
    return cfg


def _memories(backend: MemoryBackend) -> dict:
    out = {}
    for mid in backend.memory_ids():
        sl = backend.get_slice(mid)
        cols = {
            (lv, k): (v.tolist() if v.dtype.kind == "O" else v.tobytes())
            for lv, c in sl.cols.items()
            for k, v in c.items()
        }
        out[mid] = (cols, {k: v for k, v in sl.stats.items() if k != "timings"}, backend.counts(mid))
    return out


def test_a_build_into_either_backend_gives_the_same_memories(tmp_path, data):
    emb = load_embedder(SPEC)
    mem = InMemoryBackend(dim=emb.dim, embedder=emb.name, config=_cfg().to_dict())
    assert isinstance(mem, MemoryBackend)
    first = build_store(data, mem, embedder=emb, config=_cfg(), shard_size=3, progress=False)
    build_store(data, tmp_path / "s", embedder=emb, config=_cfg(), shard_size=3, progress=False)
    st = Store.open(tmp_path / "s")
    assert isinstance(st, MemoryBackend)
    assert len(first.built) == 4 and _memories(mem) == _memories(st)
    again = build_store(data, mem, embedder=emb, config=_cfg(), progress=False)  # resume: nothing to do
    assert again.built == [] and sorted(again.skipped) == sorted(first.built)
    ra, rb = Retriever.from_store(mem, embedder=emb), Retriever.from_store(st, embedder=emb)
    for mid in st.memory_ids():
        a, b = (r.search("What did they say about the weekend?", mid)[0] for r in (ra, rb))
        assert a.units and [(u.id, u.text) for u in a.units] == [(u.id, u.text) for u in b.units]
    with pytest.raises(ValueError, match="holds 'hashing"):
        build_store(data, mem, embedder=load_embedder("hashing:32"), config=_cfg(), progress=False)


def test_the_in_memory_backend_commits_atomically(data):
    emb = load_embedder(SPEC)
    mem = InMemoryBackend(dim=emb.dim, embedder=emb.name)
    build_store(data, mem, embedder=emb, config=_cfg(), limit=2, progress=False)
    a, b = mem.memory_ids()
    before = _memories(mem)
    bad = mem.get_slice(a)
    bad.cols["sem"]["x"][0, 0] = np.nan
    with pytest.raises(ValueError, match="sem.x: non-finite"):
        mem.commit([mem.get_slice(b), bad], replace=True, delete=[], log=[(a, "x", [])])
    with pytest.raises(KeyError, match="no memory"):
        mem.commit([], delete=[b, "nobody"])
    assert _memories(mem) == before and mem.history(a) == []
    mem.commit([], delete=[a], log=[(b, "note", ["m1", "m2"])], redact={b: {"m2"}})
    assert mem.memory_ids() == [b] and [h["ids"] for h in mem.history(b)] == [["m1", "m2"]]
    mem.commit([], log=[], redact={b: {"m2"}})
    assert [h["ids"] for h in mem.history(b)] == [["m1"]]


def test_a_build_commits_the_slices_construction_emits(tmp_path, data, monkeypatch):
    """Construction emits slices and the store writes them as they are: no bank is assembled and
    cut up again on the way (the build would fail if it were)."""
    from xmemory_gpu.memory.bank import Bank, MemorySlice

    def refuse(*a, **k):
        raise AssertionError("the build went through a bank")

    monkeypatch.setattr(Bank, "from_slices", refuse)
    monkeypatch.setattr(Bank, "slice", refuse)
    emb = load_embedder(SPEC)
    mem = InMemoryBackend(dim=emb.dim, embedder=emb.name, config=_cfg().to_dict())
    committed: list = []
    commit = mem.commit
    monkeypatch.setattr(mem, "commit", lambda units, **kw: (committed.extend(units), commit(units, **kw)))
    report = build_store(data, mem, embedder=emb, config=_cfg(), shard_size=3, progress=False)
    assert len(report.built) == 4 and len(committed) == 4
    assert all(isinstance(u, MemorySlice) and u.engine is None for u in committed)


def test_the_engine_state_is_typed_in_memory_and_stored_in_the_catalogue(tmp_path):
    """The live engine's state is a typed field of a memory's slice and of the bank, never a stats
    key; the catalogue keeps it as the ``engine`` object of its stats JSON (where stores written
    before kept it), so an older store's memories grow on."""
    import json
    import sqlite3

    from xmemory_gpu.engine import MemoryEngine
    from xmemory_gpu.engine.inputs import scope_key
    from xmemory_gpu.memory.bank import MemorySlice
    from xmemory_gpu.memory.engine_state import EngineState

    with MemoryEngine.open(tmp_path / "e", embedder=SPEC) as eng:
        eng.add(
            [
                {"role": "user", "content": "I moved to Lisbon in May."},
                {"role": "assistant", "content": "Lisbon is lovely in spring."},
            ],
            user_id="u1",
            user_name="Priya",
        )
        key = scope_key("u1")
        b = eng.bank.index[key]
        st = eng.bank.engine[b]
        assert (
            isinstance(st, EngineState)
            and st.speakers == ("the user", "assistant")
            and "engine" not in eng.bank.stats[b]
        )
        sl = eng.store.get_slice(key)
        assert sl.engine == st and "engine" not in sl.stats and "engine" not in eng.store.stats(key)
    with sqlite3.connect(tmp_path / "e" / "memory.sqlite") as c:
        raw = json.loads(c.execute("SELECT stats FROM memories WHERE memory_id = ?", (key,)).fetchone()[0])
    assert raw["engine"] == st.as_dict()
    # stats as a catalogue holds them (an older store, the Ray build's table) are typed on reading
    again = MemorySlice(
        "m", sl.cols, {"f_P": 1.0, "engine": {"open_from": 1, "next_theme_id": 3, "speakers": ["a"]}}
    )
    assert again.stats == {"f_P": 1.0} and again.engine == EngineState(1, 3, ("a",), ())
    with MemoryEngine.open(
        tmp_path / "e", embedder=SPEC
    ) as eng:  # reopened: it grows on from the stored state
        eng.add([{"role": "user", "content": "I started a new job at Tilde in June."}], user_id="u1")
        assert eng.bank.engine[eng.bank.index[key]].speakers == (
            "the user",
            "assistant",
        )  # the name is shown, not stored
        assert any("Tilde" in u["text"] for u in eng.get_all(user_id="u1") if u["type"] == "semantic")


def test_a_started_commit_on_the_in_memory_backend_or_an_older_backend(data):
    """``start_commit`` checks at start (a refused commit raises there), commits at ``finish`` what
    was handed at start (the caller's list may change meanwhile), once; a backend with only
    ``commit`` is committed at the handle's ``finish`` (``start_commit_on``)."""
    from xmemory_gpu.memory.backend import start_commit_on

    emb = load_embedder(SPEC)
    mem = InMemoryBackend(dim=emb.dim, embedder=emb.name)
    build_store(data, mem, embedder=emb, config=_cfg(), limit=2, progress=False)
    a, b = mem.memory_ids()
    with pytest.raises(ValueError, match="already stored"):
        mem.start_commit([mem.get_slice(a)])
    units = [mem.get_slice(a)]
    pending = mem.start_commit(units, replace=True, delete=[b])
    units.append(mem.get_slice(b))  # the caller reuses its list: not what commits
    assert mem.memory_ids() == [a, b]
    pending.finish()
    assert mem.memory_ids() == [a]
    for again in (pending.finish, pending.abandon):
        with pytest.raises(ValueError, match="already finished or abandoned"):
            again()

    class OlderBackend:  # a backend written before start_commit: only commit
        def __init__(self) -> None:
            self.committed: list[list[str]] = []

        def commit(self, units, *, replace=False):
            self.committed.append([u.memory_id for u in units])

    old = OlderBackend()
    handle = start_commit_on(old, units)
    assert old.committed == []
    handle.finish()
    assert old.committed == [[a, b]]


class _Forwarding:
    """A backend wrapped to count its commits, forwarding everything else (as a metrics layer does)."""

    def __init__(self, inner) -> None:
        self.inner, self.commits = inner, 0

    def commit(self, units, **kw):
        self.commits += 1
        return self.inner.commit(units, **kw)

    def __getattr__(self, name):
        return getattr(self.inner, name)


@pytest.mark.parametrize("kind", ["memory", "store"])
def test_an_engine_writes_through_a_wrapped_backend(tmp_path, kind):
    """The engine hands its copies to a backend that says it takes them (``takes_previous``), and
    only to one: a wrapper of the in-memory backend, which does not, gets the calls it always got."""
    from xmemory_gpu.engine import MemoryEngine

    emb = load_embedder(SPEC)
    if kind == "memory":
        inner = InMemoryBackend(dim=emb.dim, embedder=emb.name, config=_cfg().to_dict())
    else:
        inner = Store.create(tmp_path / "s", dim=emb.dim, embedder=emb.name, config=_cfg().to_dict())
    backend = _Forwarding(inner)
    with MemoryEngine.open(backend, embedder=emb, config=_cfg()) as eng:
        for i in range(6):
            eng.add([{"role": "user", "content": f"I walked {i} miles to the lake on Sunday."}], user_id="u")
        eng.delete(eng.get_all(user_id="u")[0]["id"], user_id="u")
        assert backend.commits == 7 and len(eng.search("lake walks", user_id="u")) == 1
