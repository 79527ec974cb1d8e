"""The retriever's values derived from the bank (naive-RAG's chunks, chunk-rag's passages) follow
the bank's writes (``Bank.version``) and its replacement, whatever changed it: a write, a refresh,
a memory paged in under the residency budget, an eviction."""

from __future__ import annotations

import pytest

from xmemory_gpu.embed.hashing import HashingEmbedder
from xmemory_gpu.engine import MemoryEngine, scope_key
from xmemory_gpu.memory.bank import Bank
from xmemory_gpu.memory.store import Store
from xmemory_gpu.retrieve import Retriever

EMB = HashingEmbedder(64)
PLACES = {"alice": "Oslo", "bob": "Rome", "carol": "Lima"}
STRATEGIES = ["naive-rag", "chunk-rag"]


def _said(user: str) -> list[dict]:
    return [{"role": "user", "content": f"I live in {PLACES[user]}."}]


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    root = tmp_path_factory.mktemp("chunks") / "s"
    with MemoryEngine.open(root, embedder=EMB) as eng:
        for user in PLACES:
            eng.add(_said(user), user_id=user)
    return root


def _where(eng: MemoryEngine, user: str, strategy: str) -> list[str]:
    return [u.text for u in eng.search("Where do I live?", user_id=user, strategy=strategy)[0].units]


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("budget", ["auto", 1])
def test_a_memory_paged_in_after_the_first_search_is_searched(store, strategy, budget):
    # "auto": each memory is paged into the bank the first search built the cache from;
    # one byte: each search evicts the others (a new bank) and pages its own in again
    with MemoryEngine.open(store, embedder=EMB, read_only=True, max_resident_bytes=budget) as eng:
        for user in [*PLACES, *PLACES]:
            assert _where(eng, user, strategy) == [f"the user: I live in {PLACES[user]}."]


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_writes_and_refreshes_reach_the_cache(tmp_path, strategy):
    root = tmp_path / "s"
    with MemoryEngine.open(root, embedder=EMB) as writer:
        writer.add(_said("alice"), user_id="alice")
        with MemoryEngine.open(root, embedder=EMB, read_only=True, max_resident_bytes=None) as reader:
            assert _where(reader, "alice", strategy) == ["the user: I live in Oslo."]
            assert _where(writer, "alice", strategy) == ["the user: I live in Oslo."]
            writer.add(_said("bob"), user_id="bob")
            assert _where(writer, "bob", strategy) == ["the user: I live in Rome."]
            assert reader.refresh() == [scope_key("bob", None, None)]
            assert _where(reader, "bob", strategy) == ["the user: I live in Rome."]
            writer.delete_all(user_id="alice")
            reader.refresh()
            assert _where(reader, "bob", strategy) == ["the user: I live in Rome."]


def _slices(store) -> list:
    st = Store.open(store)
    try:
        return [st.get_slice(scope_key(user, None, None)) for user in PLACES]
    finally:
        st.close()


def test_every_write_moves_the_bank_version(store):
    a, b, c = _slices(store)
    bank = Bank.from_slices([a], EMB.dim)
    assert bank.version == 0
    bank.put_slice(b)  # a new memory
    bank.put_slice(a)  # rewritten in place
    assert bank.version == 2
    copy = bank.without({a.memory_id})
    assert copy is not bank and copy.version == 0 and bank.version == 2


def test_the_retriever_rebuilds_its_chunks_for_a_written_or_replaced_bank(store):
    a, b, c = _slices(store)
    bank = Bank.from_slices([a, b], EMB.dim)
    r = Retriever(bank, EMB)
    first = r.chunks()
    assert r.chunks() is first  # kept while the bank is unchanged
    assert first.level.seg.n_memories == 2
    bank.put_slice(c)
    grown = r.chunks()
    assert grown is not first and grown.level.seg.n_memories == 3
    r.bank = bank.without({b.memory_id})
    assert r.chunks().level.seg.n_memories == 2
    hits = r.search(["Where do I live?"] * 2, [a.memory_id, c.memory_id], strategy="naive-rag")
    assert [[u.text for u in h.units] for h in hits] == [
        ["the user: I live in Oslo."],
        ["the user: I live in Lima."],
    ]
