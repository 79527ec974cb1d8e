"""Store: round trip, validation on open and load, and nothing stored is lost by a failed write."""

from __future__ import annotations

import sqlite3

import numpy as np
import pytest

from xmemory_gpu.config import XMemoryConfig
from xmemory_gpu.construct.pipeline import build_memories
from xmemory_gpu.datasets.locomo import load_locomo
from xmemory_gpu.datasets.synthetic import generate_conversations, write_json
from xmemory_gpu.embed.hashing import HashingEmbedder
from xmemory_gpu.memory.store import SCHEMA_VERSION, Store, StoreError


@pytest.fixture(scope="module")
def memories(tmp_path_factory):
    p = tmp_path_factory.mktemp("d") / "s.json"
    write_json(generate_conversations(3, seed=5), p)
    return build_memories(load_locomo(p), HashingEmbedder(32), XMemoryConfig())


def _new(tmp_path, memories):
    st = Store.create(tmp_path / "store", dim=32, embedder="hashing-32", config={})
    for m in memories[:2]:
        st.put(m)
    return st


def test_round_trip(tmp_path, memories):
    st = _new(tmp_path, memories)
    assert st.memory_ids() == [m.memory_id for m in memories[:2]]
    got = Store.open(tmp_path / "store").get(memories[0].memory_id)
    for k, v in memories[0].arrays().items():
        np.testing.assert_array_equal(got.arrays()[k], v)
    assert [s.message_ids for s in got.semantics] == [s.message_ids for s in memories[0].semantics]
    bank = st.load_bank()
    assert list(bank.memory_ids) == st.memory_ids()


def test_duplicate_put_and_wrong_dim_keep_the_store(tmp_path, memories):
    st = _new(tmp_path, memories)
    with pytest.raises(StoreError, match="already stored"):
        st.put(memories[0])
    bad = build_memories(load_locomo_like(memories), HashingEmbedder(16), XMemoryConfig())[0]
    with pytest.raises(StoreError, match="dim 16 != store dim 32"):
        st.put(bad)
    assert Store.open(tmp_path / "store").memory_ids() == [m.memory_id for m in memories[:2]]
    st.get(memories[1].memory_id)  # still loads


def load_locomo_like(memories):
    from xmemory_gpu.memory.records import Conversation

    m = memories[2]
    return [Conversation(sample_id=m.memory_id, speakers=("A", "B"), messages=m.messages, qa=[])]


def test_schema_version_and_dimension_checks(tmp_path, memories):
    _new(tmp_path, memories)
    with pytest.raises(StoreError, match="dim: the store holds 32"):
        Store.open_or_create(tmp_path / "store", dim=384, embedder="hashing-32", config={})
    with sqlite3.connect(tmp_path / "store" / "memory.sqlite") as con:
        con.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(SCHEMA_VERSION + 1),))
    with pytest.raises(StoreError, match=f"schema_version is {SCHEMA_VERSION + 1}"):
        Store.open(tmp_path / "store")


def test_damaged_arrays_file_is_reported(tmp_path, memories):
    st = _new(tmp_path, memories)
    f = next((tmp_path / "store" / "arrays").glob("*.npz"))
    f.write_bytes(f.read_bytes()[:-10] + b"0123456789")
    with pytest.raises(StoreError, match="checksum"):
        for mid in st.memory_ids():
            st.get(mid)


def test_not_a_store(tmp_path):
    with pytest.raises(StoreError, match="not a memory store"):
        Store.open(tmp_path)
