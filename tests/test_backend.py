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
    return write_json(generate_conversations(4, seed=21, sessions=(2, 4)), tmp_path_factory.mktemp("b") / "d.json")


def _cfg() -> XMemoryConfig:
    cfg = XMemoryConfig()
    cfg.embed.model = SPEC
    return cfg


def _memories(backend: MemoryBackend) -> dict:
    out = {}
    for mid in backend.memory_ids():
        sl = backend.get_slice(mid)
        cols = {(lv, k): (v.tolist() if v.dtype.kind == "O" else v.tobytes()) for lv, c in sl.cols.items() for k, v in c.items()}
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
