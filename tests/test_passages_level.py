"""Passages as a level of the bank: a long message's passages are embedded once,
at construction and at engine ingest, stored with the memory, deleted with it, and a search calls
the encoder for its queries only; a store written before (file format 3) is still searched, with
the same results, and its first writable open stores its passages."""

from __future__ import annotations

import hashlib
import shutil
import sqlite3

import numpy as np
import pytest

from xmemory_gpu.construct.pipeline import build_store
from xmemory_gpu.datasets.synthetic import generate_long_chats, write_json
from xmemory_gpu.embed.hashing import HashingEmbedder
from xmemory_gpu.engine import MemoryEngine
from xmemory_gpu.engine.inputs import scope_key
from xmemory_gpu.memory.codec import FORMAT, SINCE_4, pack_arrays, unpack_arrays
from xmemory_gpu.memory.store import DB_NAME, SCHEMA_VERSION, Store
from xmemory_gpu.retrieve.retriever import Retriever
from xmemory_gpu.retrieve.strategies import strategy_names
from xmemory_gpu.text import embedding_text, passages

DIM = 64
WORDS = 150  # the default passage length


class CountingEmbedder(HashingEmbedder):
    """The hashing encoder, recording the texts of every ``encode`` call."""

    def __init__(self, dim: int = DIM) -> None:
        super().__init__(dim)
        self.calls: list[list[str]] = []

    def encode(self, texts: list[str]) -> np.ndarray:
        self.calls.append(list(texts))
        return super().encode(texts)


# the strategies whose search needs no LLM; chunk-rag cuts its own chunks of a width given at search time
STRATEGIES = [
    s
    for s in strategy_names()
    if s not in ("chunk-rag", "tir-llm", "llm-select") and not s.startswith("mem0")
]


@pytest.fixture(scope="module")
def long_store(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("psg")
    data = write_json(
        generate_long_chats(2, seed=4, target_tokens=5000, answer_chars=(900, 2400)), tmp / "long.json"
    )
    store = tmp / "store"
    build_store([data], store, embedder=HashingEmbedder(DIM), progress=False)
    return data, store


def _questions(store) -> tuple[list[str], list[str]]:
    s = Store.open(store)
    try:
        ids = s.memory_ids()
        texts = [str(t) for m in ids for t in s.get_slice(m).cols["msg"]["text"][:6]]
    finally:
        s.close()
    qs = [" ".join(t.split()[:12]) + "?" for t in texts]
    return qs, [ids[i * len(ids) // len(qs)] for i in range(len(qs))]


def test_build_stores_each_long_message_passages_as_the_encoder_gives_them(long_store):
    _, store = long_store
    s = Store.open(store)
    try:
        assert set(s.formats().values()) == {FORMAT}
        emb = HashingEmbedder(DIM)
        n_long = 0
        for mid in s.memory_ids():
            sl = s.get_slice(mid)
            m, p = sl.cols["msg"], sl.cols["psg"]
            assert s.counts(mid)["psg"] == p["x"].shape[0]
            for r, text in enumerate(m["text"].tolist()):
                parts = passages(text, WORDS)
                if len(parts) == 1:
                    assert m["psg"][r] == -1
                    continue
                n_long += 1
                first = int(m["psg"][r])
                assert p["msg"][first : first + len(parts)].tolist() == [r] * len(parts)
                want = emb.encode([embedding_text(str(m["speaker"][r]), t) for t in parts])
                np.testing.assert_allclose(p["x"][first : first + len(parts)], want, atol=1e-6)
        assert n_long >= 4
    finally:
        s.close()


@pytest.mark.parametrize("budget", [None, 300])
def test_a_search_calls_the_encoder_for_its_queries_only(long_store, budget):
    _, store = long_store
    emb = CountingEmbedder()
    r = Retriever.from_store(store, embedder=emb)
    qs, mids = _questions(store)
    for strategy in STRATEGIES:
        emb.calls.clear()
        r.search(qs, mids, strategy=strategy, budget_tokens=budget)
        texts = [t for c in emb.calls for t in c]
        assert len(emb.calls) == 1 and texts == qs, (
            strategy,
            len(emb.calls),
            [t[:40] for t in texts if t not in qs][:3],
        )


def _as_format_3(store) -> None:
    """Rewrite the store as schema 3 wrote it: files without the passage columns, no ``n_psg``."""
    conn = sqlite3.connect(store / DB_NAME)
    with conn:
        for mid, name in conn.execute("SELECT memory_id, arrays_file FROM memories").fetchall():
            path = store / "arrays" / name
            arrays = unpack_arrays(path.read_bytes())
            old = {
                k: np.ascontiguousarray(v)
                for k, v in arrays.items()
                if tuple(k.split(".")[:2]) not in SINCE_4
            }
            data = pack_arrays(old)
            path.write_bytes(data)
            conn.execute(
                "UPDATE memories SET sha256 = ?, format = 3 WHERE memory_id = ?",
                (hashlib.sha256(data).hexdigest(), mid),
            )
        conn.execute("ALTER TABLE memories DROP COLUMN n_psg")
        conn.execute("UPDATE meta SET value = '3' WHERE key = 'schema_version'")
    conn.close()


def test_a_store_of_format_3_is_searched_alike_and_its_writable_open_stores_the_passages(
    long_store, tmp_path
):
    _, built = long_store
    store = tmp_path / "old"
    shutil.copytree(built, store)
    _as_format_3(store)
    qs, mids = _questions(built)
    new = Retriever.from_store(built, embedder=HashingEmbedder(DIM))
    emb = CountingEmbedder()
    old = Retriever.from_store(store, embedder=emb)  # read as it is
    assert int((old.bank.msg["psg"] >= 0).sum()) == 0 and old.bank.psg["x"].shape[0] == 0
    for strategy in ("xmemory", "naive-rag"):
        a = new.search(qs, mids, strategy=strategy, budget_tokens=300)
        emb.calls.clear()
        b = old.search(qs, mids, strategy=strategy, budget_tokens=300)
        assert [x.context for x in a] == [y.context for y in b], strategy
        assert sum(len(c) for c in emb.calls) > len(qs)  # this one embedded passages at search time
    assert Store.open(store).schema_version == 3
    MemoryEngine.open(store, embedder=HashingEmbedder(DIM)).close()  # the first writable open
    s = Store.open(store)
    try:
        assert s.schema_version == SCHEMA_VERSION and set(s.formats().values()) == {FORMAT}
        for mid in s.memory_ids():
            a, b = s.get_slice(mid), Store.open(built).get_slice(mid)
            for lv in ("msg", "psg"):
                for name in a.cols[lv]:
                    np.testing.assert_array_equal(a.cols[lv][name], b.cols[lv][name])
    finally:
        s.close()


def test_engine_ingest_stores_passages_and_a_delete_forgets_them(tmp_path):
    eng = MemoryEngine.open(tmp_path / "s", embedder=HashingEmbedder(DIM))
    body = " ".join(f"Sentence {i} talks about the harbour crane number {i % 7}." for i in range(60))
    eng.add(
        [{"role": "user", "content": "short hello"}, {"role": "assistant", "content": body, "id": "long1"}],
        user_id="u",
    )
    key = scope_key("u")
    b = eng.bank.index[key]
    rows = eng.bank.msg.seg.rows(b)
    first = eng.bank.msg["psg"][rows]
    n = len(passages(body, WORDS))
    assert n > 1 and (first >= 0).sum() == 1
    assert eng.bank.psg.seg.lengths[eng.bank.index[key]] == n
    emb = eng.embedder
    calls = []
    orig = emb.encode
    emb.encode = lambda texts: (calls.append(list(texts)), orig(texts))[1]
    eng.search("harbour crane number 3", user_id="u", budget_tokens=60)
    assert calls == [["harbour crane number 3"]]
    emb.encode = orig
    eng.delete("long1", user_id="u")
    assert eng.bank.psg.seg.lengths[eng.bank.index[key]] == 0
    s = Store.open(tmp_path / "s")
    try:
        assert s.counts(key)["psg"] == 0
    finally:
        s.close()
    eng.close()


# -- older stores (what an independent review of the change found) ---------------------------------------------


def _small_store(tmp_path, words: int = 8):
    """Two synthetic memories, passages at ``words`` words (so most messages have several)."""
    from xmemory_gpu.config import XMemoryConfig
    from xmemory_gpu.construct.pipeline import build_memories
    from xmemory_gpu.datasets.locomo import load_locomo
    from xmemory_gpu.datasets.synthetic import generate_conversations

    write_json(generate_conversations(2, seed=5), tmp_path / "s.json")
    cfg = XMemoryConfig()
    cfg.semantic.passage_words = words
    emb = HashingEmbedder(32)
    mems = build_memories(load_locomo(tmp_path / "s.json"), emb, cfg)
    st = Store.create(tmp_path / "store", dim=32, embedder="hashing-32", config=cfg.to_dict())
    for m in mems:
        st.put(m)
    st.close()
    return tmp_path / "store", mems, emb, cfg


def test_a_legacy_store_with_theme_lineage_loads_and_its_upgrade_leads_to_stored_passages(tmp_path):
    from legacy_store import to_schema_2

    from xmemory_gpu.construct.passages import store_passages

    store, mems, emb, cfg = _small_store(tmp_path)
    assert all(m.psg_x.shape[0] for m in mems)
    to_schema_2(store)
    with sqlite3.connect(store / DB_NAME) as c:
        assert c.execute("SELECT COUNT(*) FROM lineage").fetchone()[0] > 0
    old = Store.open(store)
    assert old.counts(mems[0].memory_id)["psg"] == 0
    assert old.load_bank(quarantine=True).memory_ids == [m.memory_id for m in mems] and not old.quarantined
    old.upgrade()
    assert set(old.formats().values()) == {3}  # converted from records: no passages yet
    assert store_passages(old, emb, cfg.semantic.passage_words) == len(mems)
    for m in mems:
        sl = old.get_slice(m.memory_id)
        np.testing.assert_allclose(sl.cols["psg"]["x"], m.psg_x, atol=1e-6)
        assert sl.cols["psg"]["msg"].tolist() == m.psg_msg.tolist()
    old.close()


def test_a_damaged_memory_does_not_keep_the_others_from_their_passages(tmp_path):
    from xmemory_gpu.construct.passages import store_passages

    store, mems, emb, cfg = _small_store(tmp_path)
    _as_format_3(store)
    st = Store.open(store)
    st.upgrade()
    name = st._conn.execute(
        "SELECT arrays_file FROM memories WHERE memory_id = ?", (mems[1].memory_id,)
    ).fetchone()[0]
    f = store / "arrays" / name
    f.write_bytes(f.read_bytes()[:-1] + bytes([f.read_bytes()[-1] ^ 1]))
    assert store_passages(st, emb, cfg.semantic.passage_words) == 1
    assert st.formats() == {mems[0].memory_id: FORMAT, mems[1].memory_id: 3}
    st.close()


def test_a_reader_of_a_schema_3_store_follows_an_upgrade_by_another_process(tmp_path):
    from xmemory_gpu.construct.passages import store_passages

    store, mems, emb, cfg = _small_store(tmp_path)
    _as_format_3(store)
    reader = Store.open(store)
    reader.load_bank()
    writer = Store.open(store)
    writer.upgrade()
    assert store_passages(writer, emb, cfg.semantic.passage_words) == len(mems)
    writer.close()
    sl = reader.get_slice(mems[0].memory_id)  # format 4 now: its passages counted by n_psg
    assert sl.n("psg") == mems[0].psg_x.shape[0] == reader.counts(mems[0].memory_id)["psg"]
    reader.close()


def test_an_engine_memory_keeps_its_state_through_the_passages_upgrade(tmp_path):
    """A memory the engine wrote (open episode, speakers, forgotten statements) stored at format 3
    keeps its engine state when the first writable open stores its passages: a deleted statement
    stays forgotten."""
    emb = HashingEmbedder(DIM)
    key = scope_key("u1")
    with MemoryEngine.open(tmp_path / "s", embedder=emb) as eng:
        eng.add(
            [
                {"role": "user", "content": "I adopted a beagle called Miso last spring."},
                {"role": "assistant", "content": "Miso sounds lovely."},
                {"role": "user", "content": "I also started learning the cello in June."},
            ],
            user_id="u1",
            user_name="Priya",
        )
        gone = next(u for u in eng.get_all(user_id="u1") if u["type"] == "semantic" and "cello" in u["text"])
        eng.delete(gone["id"], user_id="u1")
        state = eng.bank.engine[eng.bank.index[key]]
        assert (
            state.forgotten and state.speakers[0] == "the user"
        )  # the name is shown, not stored in the speakers
    _as_format_3(tmp_path / "s")
    with MemoryEngine.open(tmp_path / "s", embedder=emb) as eng:  # upgrades, stores the passages
        assert set(eng.store.formats().values()) == {FORMAT}
        assert eng.store.get_slice(key).engine == state
        eng.add(
            [{"role": "user", "content": "Miso chewed my shoes today."}], user_id="u1"
        )  # re-derives nothing forgotten
        assert not any("cello" in u["text"] for u in eng.get_all(user_id="u1") if u["type"] == "semantic")
