"""Delta files: a commit that appends writes what changed; every version loads bit for bit as a base
file of the same columns would; deletes leave no named file holding what was forgotten; a crash, a
damaged delta and an old store behave as with base files alone."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import numpy as np
import pytest
from long_chat import long_chat_turns

from xmemory_gpu.embed.hashing import HashingEmbedder
from xmemory_gpu.engine import MemoryEngine
from xmemory_gpu.memory import store as store_mod
from xmemory_gpu.memory.bank import LEVELS, MemorySlice
from xmemory_gpu.memory.deltas import Change, CommittedCache, apply_chain, encode_delta, first_change
from xmemory_gpu.memory.store import DB_NAME, Store, StoreError

EMB = HashingEmbedder(64)
TOKEN = "Zorblatt"  # in one message only: deleting it must leave no named file holding it


def _turns(n: int, seed: int = 3) -> list[dict]:
    return long_chat_turns(seed, 60_000, n, sessions=False, ids=True)


def _copy(sl: MemorySlice) -> MemorySlice:
    cols = {lv: {k: np.array(v, copy=True) for k, v in sl.cols[lv].items()} for lv in LEVELS}
    return MemorySlice(sl.memory_id, cols, dict(sl.stats), sl.engine)


@pytest.fixture(scope="module")
def versions(tmp_path_factory) -> list[MemorySlice]:
    """The slices an engine commits for one memory over 24 two-turn adds (copies, in order)."""
    got: list[MemorySlice] = []
    real = Store.commit

    def record(self, units, **kw):
        got.extend(_copy(u) for u in units)
        return real(self, units, **kw)

    mp = pytest.MonkeyPatch()
    mp.setattr(Store, "commit", record)
    try:
        with MemoryEngine.open(tmp_path_factory.mktemp("v") / "s", embedder=EMB) as eng:
            turns = _turns(48)
            for i in range(0, len(turns), 2):
                eng.add(turns[i : i + 2], user_id="u")
    finally:
        mp.undo()
    assert len(got) == 24 and got[-1].n("msg") == 48
    return got


def _same(a: MemorySlice, b: MemorySlice) -> None:
    """Columns equal bit for bit (dtype, shape, bytes; texts as strings)."""
    for lv in LEVELS:
        assert a.cols[lv].keys() == b.cols[lv].keys(), lv
        for k, x in a.cols[lv].items():
            y = b.cols[lv][k]
            assert x.dtype == y.dtype and x.shape == y.shape, (lv, k)
            if x.dtype.kind == "O":
                assert x.tolist() == y.tolist(), (lv, k)
            else:
                assert np.ascontiguousarray(x).tobytes() == np.ascontiguousarray(y).tobytes(), (lv, k)


def _store(path: Path) -> Store:
    return Store.create(path, dim=EMB.dim, embedder="hashing-64", config={})


def _chain(st: Store, mid: str) -> list[str]:
    return [
        r[0] for r in st._conn.execute("SELECT file FROM deltas WHERE memory_id = ? ORDER BY seq", (mid,))
    ]


def _full(tmp_path: Path, sl: MemorySlice) -> MemorySlice:
    """``sl`` written as one base file into a store of its own, read back."""
    root = tmp_path / f"full-{sl.n('msg')}"
    st = _store(root)
    st.put(sl)
    out = Store.open(root).get_slice(sl.memory_id)
    st.close()
    return out


def test_appends_are_deltas_and_every_version_loads_as_its_base_file_would(tmp_path, versions):
    st = _store(tmp_path / "s")
    mid = versions[0].memory_id
    deltas = 0
    for i, sl in enumerate(versions):
        st.commit([sl], replace=True)
        deltas += st.versions([mid])[mid].endswith(".delta")
        if i % 5 == 4 or i == len(versions) - 1:
            fresh = Store.open(tmp_path / "s")  # nothing remembered: base and deltas read from disk
            got = fresh.get_slice(mid)
            full = _full(tmp_path, sl)
            _same(got, sl)
            _same(got, full)
            assert got.stats == full.stats
            fresh.close()
    assert deltas >= len(versions) // 2  # most appends wrote a delta
    names = {p.name for p in (tmp_path / "s" / "arrays").iterdir()}
    assert names == {st.versions([mid])[mid]} | set(_chain(st, mid)) | {
        st._conn.execute("SELECT arrays_file FROM memories").fetchone()[0]
    }  # replaced files are gone
    assert sorted(r[0] for r in st._conn.execute("SELECT id FROM message_ids")) == sorted(
        versions[-1].cols["msg"]["id"].tolist()
    )
    st.close()


def test_a_delta_writes_what_changed_and_keeps_the_index_rows(tmp_path, versions):
    st = _store(tmp_path / "s")
    for sl in versions[:10]:
        st.commit([sl], replace=True)
    mid = versions[0].memory_id
    rows = dict(st._conn.execute("SELECT id, rowid FROM message_ids").fetchall())
    base = (tmp_path / "s" / "arrays" / st._old(mid).file).stat().st_size
    st.commit([versions[10]], replace=True)
    head = st.versions([mid])[mid]
    assert head.endswith(".delta") and (tmp_path / "s" / "arrays" / head).stat().st_size < base / 2
    after = dict(st._conn.execute("SELECT id, rowid FROM message_ids").fetchall())
    assert {k: after[k] for k in rows} == rows  # old ids kept their rows: no delete-all + insert-all
    assert set(after) - set(rows) == set(versions[10].cols["msg"]["id"].tolist()[versions[9].n("msg") :])
    st.commit([versions[10]], replace=True)  # nothing changed: no file
    assert st.versions([mid])[mid] == head
    st.close()


def test_a_reopened_store_writes_a_base_then_chains_again(tmp_path, versions, monkeypatch):
    monkeypatch.setattr(store_mod, "COMPACT_SHARE", 100.0)
    st = _store(tmp_path / "s")
    for sl in versions[:8]:
        st.commit([sl], replace=True)
    st.close()
    st = Store.open(tmp_path / "s")
    mid = versions[0].memory_id
    assert len(_chain(st, mid)) >= 2
    st.load_bank()  # a read keeps nothing: readers hold no copies of what they read
    assert all(st.committed.get(m) is None for m in st.memory_ids())
    st.commit([versions[8]], replace=True)
    assert _chain(st, mid) == []  # the first write of this store is a base
    st.commit([versions[9]], replace=True)
    assert len(_chain(st, mid)) == 1  # then the chain grows again
    for sl in versions[10:]:
        st.commit([sl], replace=True)
    st.close()
    _same(Store.open(tmp_path / "s").get_slice(mid), versions[-1])


def test_a_commit_planned_on_a_version_another_writer_replaced_is_refused(tmp_path, versions, monkeypatch):
    monkeypatch.setattr(store_mod, "COMPACT_SHARE", 100.0)
    a = _store(tmp_path / "s")
    for sl in versions[:3]:
        a.commit([sl], replace=True)
    b = Store.open(tmp_path / "s")
    b.commit([versions[3]], replace=True)  # b's first write: a base
    pb = b.start_commit([versions[4]], replace=True)  # a delta on b's version
    pa = a.start_commit([versions[4]], replace=True)  # a base planned on the same version
    pb.finish()
    with pytest.raises(StoreError, match="another writer committed it"):
        pa.finish()
    mid = versions[0].memory_id
    assert Store.open(tmp_path / "s").check(mid) is None  # nothing damaged, b's files kept
    _same(Store.open(tmp_path / "s").get_slice(mid), versions[4])
    a.commit([versions[5]], replace=True)  # planned again on the catalogue's version
    _same(Store.open(tmp_path / "s").get_slice(mid), versions[5])


def test_the_chain_is_compacted(tmp_path, versions, monkeypatch):
    monkeypatch.setattr(store_mod, "MAX_CHAIN", 3)
    st = _store(tmp_path / "s")
    mid = versions[0].memory_id
    lengths = []
    for sl in versions:
        st.commit([sl], replace=True)
        lengths.append(len(_chain(st, mid)))
    assert max(lengths) == 3 and lengths.count(0) >= 3  # a fresh base after three deltas
    _same(Store.open(tmp_path / "s").get_slice(mid), versions[-1])
    monkeypatch.setattr(store_mod, "COMPACT_SHARE", 0.0)  # no delta is small enough: bases only
    st.commit([versions[0]], replace=True)
    for sl in versions[1:6]:
        st.commit([sl], replace=True)
        assert _chain(st, mid) == []
    st.close()


def test_an_old_row_that_changes_costs_its_row_not_the_rows_after_it(tmp_path, versions):
    """A statement that gains a source, an old kNN list with a new neighbour: the delta sets those
    rows (``.at`` / ``.set``) and appends the new ones; every version still loads bit for bit."""
    st = _store(tmp_path / "s")
    mid = versions[0].memory_id
    st.commit([versions[-2]], replace=True)
    grown = _copy(versions[-1])
    sem = grown.cols["sem"]
    n = sem["msgs"].shape[0]
    assert n > 20
    sem["msgs"][1, 0] = 0  # an early statement's first source
    sem["knn_sim"][3] = np.float32(0.25)  # an early kNN list
    head = st.versions([mid])[mid]
    st.commit([grown], replace=True)
    name = st.versions([mid])[mid]
    assert name != head and name.endswith(".delta")
    from xmemory_gpu.memory.codec import unpack_arrays

    delta = unpack_arrays((tmp_path / "s" / "arrays" / name).read_bytes(), "test")
    assert delta["sem.msgs.at"].tolist()[:1] == [1] and delta["sem.knn_sim.at"].tolist()[:1] == [3]
    assert not any(k.startswith("sem.msgs@") and int(k.rsplit("@", 1)[1]) < n - 5 for k in delta)
    _same(Store.open(tmp_path / "s").get_slice(mid), grown)  # read from base + deltas
    again = _copy(grown)
    again.cols["sem"]["msgs"][1, 0] = 1  # the same row set again, by the next delta of the chain
    st.commit([again], replace=True)
    _same(Store.open(tmp_path / "s").get_slice(mid), again)
    _same(_full(tmp_path, again), again)
    st.close()


@pytest.mark.parametrize(
    "at, rows, why",
    [
        (np.array([2, 1]), np.zeros(2, np.int64), "set rows do not fit"),  # not increasing
        (np.array([1], np.int32), np.zeros(1, np.int64), "set rows do not fit"),  # not int64
        (np.array([5]), np.zeros(1, np.int64), "sets row 5 of 3"),
        (np.array([1]), np.zeros(1, np.int32), "do not fit the column"),
        (np.array([1]), None, "set rows do not fit"),
        (np.array([2**63 - 1, -2]), np.zeros(2, np.int64), "set rows do not fit"),  # np.diff wraps
        (np.array([1, -(2**63)]), np.zeros(2, np.int64), "set rows do not fit"),
    ],
)
def test_set_rows_that_do_not_fit_are_refused(at, rows, why):
    from xmemory_gpu.memory.codec import SliceFormatError

    base = {"msg.session": np.arange(3, dtype=np.int64)}
    d = {"follows": np.zeros(32, np.uint8), "msg.session.at": at}
    if rows is not None:
        d["msg.session.set"] = rows
    with pytest.raises(SliceFormatError, match=why):
        apply_chain(base, [(d, "11")], "00" * 32, "memory m")
    d = {
        "follows": np.zeros(32, np.uint8),
        "msg.session.at": np.array([0, 2]),
        "msg.session.set": np.array([7, 9]),
    }
    d["msg.session@3"] = np.array([4])
    assert apply_chain(base, [(d, "11")], "00" * 32, "memory m")["msg.session"].tolist() == [7, 1, 9, 4]


def test_a_level_that_was_empty_reads_back_when_a_delta_gives_it_wider_rows():
    """An empty column of one width (a memory with no theme yet) replaced from row 0 by rows of
    another width: the empty segment is not kept beside them."""
    base = {"theme.parents": np.zeros((0, 1), np.int64)}
    d = {"follows": np.zeros(32, np.uint8), "theme.parents@0": np.arange(4, dtype=np.int64).reshape(2, 2)}
    got = apply_chain(base, [(d, "11")], "00" * 32, "memory m")["theme.parents"]
    assert got.shape == (2, 2) and got.tolist() == [[0, 1], [2, 3]]


def _grep(root: Path, text: str) -> list[str]:
    return [p.name for p in root.rglob("*") if p.is_file() and text.encode() in p.read_bytes()]


@pytest.mark.parametrize("how", ["delete", "update"])
def test_a_delete_leaves_no_named_file_holding_the_text(tmp_path, how):
    root = tmp_path / "s"
    turns = _turns(42)
    with MemoryEngine.open(root, embedder=EMB) as eng:
        for i in range(0, 20, 2):
            eng.add(turns[i : i + 2], user_id="u")
        eng.add(
            [{"id": "secret", "role": "user", "content": f"My neighbour {TOKEN} keeps bees."}], user_id="u"
        )
        for i in range(20, 40, 2):
            eng.add(turns[i : i + 2], user_id="u")
        st = eng.store
        assert st._conn.execute("SELECT COUNT(*) FROM deltas").fetchone()[0] > 0
        assert _grep(root / "arrays", TOKEN)
        if how == "delete":
            eng.delete("secret", user_id="u")
        else:
            eng.update("secret", "My neighbour keeps bees.", user_id="u")
        assert st._conn.execute("SELECT COUNT(*) FROM deltas").fetchone()[0] == 0  # a fresh base
        named = {r[0] for r in st._conn.execute("SELECT arrays_file FROM memories")}
        assert {p.name for p in (root / "arrays").iterdir()} == named  # the old base and deltas went
        assert _grep(root, TOKEN) == []
        eng.add(turns[40:42], user_id="u")  # growth goes on in deltas
        assert st._conn.execute("SELECT COUNT(*) FROM deltas").fetchone()[0] == 1
    assert _grep(root, TOKEN) == []


@pytest.mark.parametrize("crash", ["transaction", "process"])
def test_a_crash_between_the_files_and_the_transaction_leaves_the_version_before(
    tmp_path, versions, monkeypatch, crash
):
    st = _store(tmp_path / "s")
    mid = versions[0].memory_id
    for sl in versions[:6]:
        st.commit([sl], replace=True)
    before = set((tmp_path / "s" / "arrays").iterdir())

    def boom(self, plan):
        raise RuntimeError("crash")

    monkeypatch.setattr(Store, "_update", boom)
    if crash == "process":  # the process dies: nothing removes the new file
        monkeypatch.setattr(Store, "_remove_new", lambda self, names, live: None)
    with pytest.raises(RuntimeError, match="crash"):
        st.commit([versions[6]], replace=True)
    monkeypatch.undo()
    fresh = Store.open(tmp_path / "s")
    _same(fresh.get_slice(mid), versions[5])
    orphans = set((tmp_path / "s" / "arrays").iterdir()) - before
    assert len(orphans) == (crash == "process")
    assert fresh.collect_garbage() == [p.name for p in orphans]
    st.commit([versions[6]], replace=True)  # the same store goes on (what it remembered was dropped)
    st.commit([versions[7]], replace=True)
    _same(Store.open(tmp_path / "s").get_slice(mid), versions[7])
    st.close()


def _two_memories(tmp_path: Path, versions: list[MemorySlice]) -> tuple[Store, str, str]:
    st = _store(tmp_path / "s")
    other = MemorySlice("other", versions[3].cols, dict(versions[3].stats), versions[3].engine)
    st.commit([other])
    for sl in versions[:8]:
        st.commit([sl], replace=True)
    return st, versions[0].memory_id, "other"


@pytest.mark.parametrize("damage", ["flip", "missing", "order"])
def test_a_damaged_delta_quarantines_its_memory(tmp_path, versions, damage, monkeypatch):
    monkeypatch.setattr(store_mod, "COMPACT_SHARE", 100.0)  # a long chain, however small the memory
    st, mid, other = _two_memories(tmp_path, versions)
    chain = _chain(st, mid)
    assert len(chain) >= 2
    f = tmp_path / "s" / "arrays" / chain[0]
    if damage == "flip":
        data = bytearray(f.read_bytes())
        data[-3] ^= 1
        f.write_bytes(bytes(data))
        why = "checksum"
    elif damage == "missing":
        f.unlink()
        why = "missing"
    else:
        with st._conn as c:
            c.execute("UPDATE deltas SET seq = -seq WHERE memory_id = ?", (mid,))
        why = "does not follow"
    fresh = Store.open(tmp_path / "s")
    bank = fresh.load_bank(quarantine=True)
    assert list(bank.memory_ids) == [other] and why in fresh.quarantined[mid]
    with pytest.raises(StoreError, match=why):
        fresh.get_slice(mid)
    assert why in fresh.check(mid)
    st.close()


def test_a_schema_4_store_is_read_and_upgraded_by_its_first_commit(tmp_path, versions):
    st = _store(tmp_path / "s")
    mid = versions[0].memory_id
    st.put(versions[4])
    st.close()
    conn = sqlite3.connect(tmp_path / "s" / DB_NAME)
    with conn:  # as schema 4 wrote it: no deltas table
        conn.execute("DROP TABLE deltas")
        conn.execute("UPDATE meta SET value = '4' WHERE key = 'schema_version'")
    conn.close()
    old = Store.open(tmp_path / "s")
    assert old.schema_version == 4 and old.versions() == {mid: old._old(mid).file}
    _same(old.get_slice(mid), versions[4])
    writer = Store.open(tmp_path / "s")
    writer.commit([versions[5]], replace=True)  # upgrades, writes a base
    writer.commit([versions[6]], replace=True)  # then a delta on it
    assert writer.schema_version == store_mod.SCHEMA_VERSION and _chain(writer, mid)
    _same(old.get_slice(mid), versions[6])  # the reader follows the upgrade and the delta
    assert old.versions()[mid] == _chain(writer, mid)[-1]
    writer.close()
    old.close()


def test_first_change_compares_bytes():
    a = np.array([0.0, 1.0, np.nan], np.float32)
    assert first_change(a, a.copy()) is None  # NaN equals itself
    assert first_change(a, np.array([-0.0, 1.0, np.nan], np.float32)) == 0  # -0.0 is not 0.0
    assert first_change(a, np.concatenate([a, a])) == 3
    assert first_change(a, a[:2]) == 2
    assert first_change(a, a.astype(np.float64)) == 0
    big = np.zeros((50_000, 3), np.int32)
    other = big.copy()
    other[40_000, 2] = 1
    assert first_change(big, other) == 40_000
    t = np.array(["a", "b", "c"], dtype=object)
    assert first_change(t, np.array(["a", "b", "x", "d"], dtype=object)) == 2


def test_a_delta_that_does_not_fit_is_refused():
    from xmemory_gpu.memory.codec import SliceFormatError

    base = {"msg.session": np.arange(3, dtype=np.int64)}
    d = {"follows": np.zeros(32, np.uint8), "msg.session@5": np.arange(2, dtype=np.int64)}
    with pytest.raises(SliceFormatError, match="starts at row 5 of 3"):
        apply_chain(base, [(d, "11")], "00" * 32, "memory m")
    d = {"follows": np.zeros(32, np.uint8), "msg.nope@0": np.arange(2, dtype=np.int64)}
    with pytest.raises(SliceFormatError, match="not a column of a delta"):
        apply_chain(base, [(d, "11")], "00" * 32, "memory m")
    d = {"follows": np.zeros(32, np.uint8), "msg.session@1": np.arange(2, dtype=np.int32)}
    with pytest.raises(SliceFormatError, match="do not fit"):
        apply_chain(base, [(d, "11")], "00" * 32, "memory m")
    d = {"follows": np.zeros(32, np.uint8), "msg.session@1": np.arange(2, dtype=np.int64)}
    got = apply_chain(base, [(d, "11")], "00" * 32, "memory m")
    assert got["msg.session"].tolist() == [0, 0, 1]


def test_the_cache_is_bounded():
    from xmemory_gpu.memory.deltas import Committed

    cache = CommittedCache(100)
    for i in range(5):
        cache.put(str(i), Committed.of_files(b"x" * 30, "s", []))
    assert [k for k in "01234" if cache.get(k)] == ["2", "3", "4"]
    cache.put("big", Committed.of_files(b"x" * 101, "s", []))  # held beside the others, outside the budget
    assert cache.get("big") is not None and [k for k in "01234" if cache.get(k)] == ["2", "3", "4"]
    cache.put("5", Committed.of_files(b"x" * 30, "s", []))
    assert cache.get("big") is not None and [k for k in "012345" if cache.get(k)] == ["3", "4", "5"]
    cache.put("bigger", Committed.of_files(b"x" * 150, "s", []))  # one large entry at a time
    assert cache.get("big") is None and cache.get("bigger") is not None
    cache.drop("bigger")
    assert cache.get("bigger") is None
    assert isinstance(Change({}, {}, {lv: 0 for lv in LEVELS}, {lv: 0 for lv in LEVELS}).forgets(), bool)


def test_a_memory_over_the_cache_budget_and_small_ones_written_in_turn_all_write_deltas(
    tmp_path, monkeypatch
):
    """The committed version of a memory larger than the cache's budget is held beside the others:
    it goes on writing deltas, and writing it does not evict the small memory's version (a caller
    that keeps no copies: an engine's writes replayed into a store)."""
    turns = long_chat_turns(4, 400_000)
    assert len(turns) >= 520
    commits: list[list[MemorySlice]] = []
    real = Store.commit

    def record(self, units, **kw):
        commits.append([_copy(u) for u in units])
        return real(self, units, **kw)

    with monkeypatch.context() as m:
        m.setattr(Store, "commit", record)
        with MemoryEngine.open(tmp_path / "e", embedder=EMB) as eng:
            eng.add(turns[:400], user_id="big")
            eng.add(turns[400:500], user_id="small")
            for i in range(500, 520, 2):
                for user in ("big", "small"):
                    eng.add(turns[i : i + 2], user_id=user)
    st = _store(tmp_path / "s")
    for units in commits[:2]:
        st.commit(units, replace=True)
    sizes = {k: st.committed.get(k).nbytes for k in st.memory_ids()}
    assert len(sizes) == 2 and min(sizes.values()) < max(sizes.values())
    st.committed.budget = sum(sizes.values()) // 2  # the small one under it, the big one over
    kinds: dict[str, list[str]] = {}
    plan = Store._plan

    def spy(self, unit, *a, **kw):
        got = plan(self, unit, *a, **kw)
        kinds.setdefault(unit.memory_id, []).append(got.kind)
        return got

    monkeypatch.setattr(Store, "_plan", spy)
    for units in commits[2:]:
        st.commit(units, replace=True)
    assert all(k == "delta" for ks in kinds.values() for k in ks) and len(kinds) == 2, kinds
    st.close()


def _results(eng: MemoryEngine) -> list:
    out = []
    for q in ("Which trip am I planning?", "What did we discuss about the budget?", "What is my job?"):
        for s in ("xmemory", "naive-rag"):
            r = eng.search(q, user_id="u", strategy=s, budget_tokens=400)[0]
            out.append((r.context, [(u.id, u.text, round(u.score, 6)) for u in r.units]))
    return out


def test_an_engine_on_deltas_answers_as_one_that_never_wrote_a_delta(tmp_path, monkeypatch):
    turns = _turns(60)
    written = []
    monkeypatch.setattr(store_mod, "encode_delta", lambda *a: written.append(1) or encode_delta(*a))
    with MemoryEngine.open(tmp_path / "d", embedder=EMB) as eng:
        for i in range(0, len(turns), 2):
            eng.add(turns[i : i + 2], user_id="u")
        assert len(written) >= 10  # a delta every other add or more (the chain compacts meanwhile)
        live = _results(eng)
    monkeypatch.setattr(store_mod, "MAX_CHAIN", 0)  # every commit a base file
    with MemoryEngine.open(tmp_path / "b", embedder=EMB) as eng:
        for i in range(0, len(turns), 2):
            eng.add(turns[i : i + 2], user_id="u")
        assert eng.store._conn.execute("SELECT COUNT(*) FROM deltas").fetchone()[0] == 0
        want = _results(eng)
    monkeypatch.undo()
    assert live == want
    with MemoryEngine.open(tmp_path / "d", embedder=EMB) as eng:  # reopened: read from base + deltas
        assert _results(eng) == want
        a = eng.store.get_slice(eng.store.memory_ids()[0])
    with MemoryEngine.open(tmp_path / "b", embedder=EMB) as eng:
        _same(a, eng.store.get_slice(eng.store.memory_ids()[0]))


def _wider_sources(sl: MemorySlice, row: int, extra: int) -> MemorySlice:
    """``sl`` whose statement ``row`` gains ``extra`` sources past the widest row: ``sem.msgs`` wider."""
    out = _copy(sl)
    m = out.cols["sem"]["msgs"]
    w = m.shape[1]
    grown = np.full((m.shape[0], w + extra), -1, m.dtype)
    grown[:, :w] = m
    have = int((m[row] >= 0).sum())
    grown[row, have : have + w + extra - have] = np.arange(w + extra - have) % out.n("msg")
    out.cols["sem"]["msgs"] = grown
    return out


def test_a_wider_ragged_column_writes_its_width_and_changed_rows_not_the_column(tmp_path, versions):
    """A statement that gains its widest row of sources: the delta holds the new width and that row;
    every version still loads bit for bit as its base file would (from disk and from memory)."""
    from xmemory_gpu.memory.deltas import diff

    st = _store(tmp_path / "s")
    mid = versions[-1].memory_id
    last = versions[-1]
    st.commit([last], replace=True)
    wider = _wider_sources(last, 3, 2)
    change = diff(st.committed.get(mid).columns(mid), wider)
    assert change.widths == {"sem.msgs": wider.cols["sem"]["msgs"].shape[1]}
    assert change.scatter["sem.msgs"][0].tolist() == [3] and "sem.msgs" not in change.starts
    st.commit([wider], replace=True)
    name = st.versions([mid])[mid]
    assert name.endswith(".delta")
    size = (tmp_path / "s" / "arrays" / name).stat().st_size
    assert size < wider.cols["sem"]["msgs"].nbytes  # not the column again
    again = _wider_sources(wider, 5, 1)  # then wider again, from the remembered columns
    st.commit([again], replace=True)
    _same(st.get_slice(mid), again)
    fresh = Store.open(tmp_path / "s")
    _same(fresh.get_slice(mid), again)
    _same(fresh.get_slice(mid), _full(tmp_path, again))
    fresh.close()
    st.close()


def test_a_wider_column_with_many_changed_rows_is_written_whole(versions):
    from xmemory_gpu.memory.deltas import diff

    last = versions[-1]
    wider = _copy(last)
    m = wider.cols["sem"]["msgs"]
    wider.cols["sem"]["msgs"] = np.concatenate([m, np.zeros((m.shape[0], 1), m.dtype)], axis=1)
    cols = {f"{lv}.{k}": v for lv in LEVELS for k, v in last.cols[lv].items()}
    change = diff(cols, wider)
    assert not change.widths and change.starts["sem.msgs"] == 0


@pytest.mark.parametrize(
    "width, why",
    [
        (np.array([2], np.int64), "does not widen it"),  # the width it has
        (np.array([1], np.int64), "does not widen it"),
        (np.array([4], np.int32), "width does not read"),
        (np.array([0], np.int64), "width does not read"),
        (np.array([4, 5], np.int64), "width does not read"),
    ],
)
def test_a_width_that_does_not_widen_is_refused(width, why):
    from xmemory_gpu.memory.codec import SliceFormatError

    base = {"sem.msgs": np.array([[0, 1], [2, -1]], np.int32)}
    d = {"follows": np.zeros(32, np.uint8), "sem.msgs.width": width}
    with pytest.raises(SliceFormatError, match=why):
        apply_chain(base, [(d, "11")], "00" * 32, "memory m")
    d = {
        "follows": np.zeros(32, np.uint8),
        "sem.msgs.width": np.array([3], np.int64),
        "sem.msgs.at": np.array([1]),
        "sem.msgs.set": np.array([[2, 3, 4]], np.int32),
        "sem.msgs@2": np.array([[5, -1, -1]], np.int32),
    }
    got = apply_chain(base, [(d, "11")], "00" * 32, "memory m")["sem.msgs"]
    assert got.tolist() == [[0, 1, -1], [2, 3, 4], [5, -1, -1]]
    d = {"follows": np.zeros(32, np.uint8), "msg.session.width": np.array([3], np.int64)}
    with pytest.raises(SliceFormatError, match="not a column of a delta"):  # not a ragged column
        apply_chain({"msg.session": np.arange(3, dtype=np.int64)}, [(d, "11")], "00" * 32, "memory m")


def test_an_append_checks_its_changed_rows_and_every_reference_to_a_level_that_shrank(tmp_path, versions):
    """The delta path reads the values of the rows a commit changed only; a bad new row, and an
    unchanged row that refers past a level that lost rows, are still refused."""
    from xmemory_gpu.memory.codec import SliceFormatError, check_slice

    last, st = versions[-1], _store(tmp_path / "s")
    st.commit([versions[-2]], replace=True)
    bad = _copy(last)
    bad.cols["msg"]["x"][-1, 0] = np.nan  # an appended message
    with pytest.raises(StoreError, match="non-finite"):
        st.commit([bad], replace=True)
    st.commit([last], replace=True)
    _same(st.get_slice(last.memory_id), last)
    fewer = _copy(last)
    used = int(fewer.cols["sem"]["theme"].max())
    fewer.cols["theme"] = {k: v[:used] for k, v in fewer.cols["theme"].items()}  # the theme rows shrink
    fewer.cols["theme"]["knn_idx"] = np.where(
        fewer.cols["theme"]["knn_idx"] < used, fewer.cols["theme"]["knn_idx"], -1
    )
    with pytest.raises(SliceFormatError, match="sem.theme: row ids outside"):
        check_slice(fewer, EMB.dim, changed={}, before={lv: last.n(lv) for lv in LEVELS})
    check_slice(last, EMB.dim, changed={}, before={lv: last.n(lv) for lv in LEVELS})
    with pytest.raises(StoreError, match="sem.theme: row ids outside"):
        st.commit([fewer], replace=True)
    _same(st.get_slice(last.memory_id), last)
    st.close()


def test_a_schema_5_store_reads_as_it_is_and_its_first_commit_makes_it_schema_6(tmp_path, versions):
    """Schema 6 only allows deltas that widen a source list (which a schema 5 reader would not
    apply): a schema 5 store's memories read unchanged, and its first commit sets the version."""
    root = tmp_path / "s"
    st = _store(root)
    st.commit([versions[-2]], replace=True)
    st.close()
    with sqlite3.connect(root / DB_NAME) as con:
        con.execute("UPDATE meta SET value = '5' WHERE key = 'schema_version'")
    old = Store.open(root)
    assert old.schema_version == 5
    _same(old.get_slice(versions[-2].memory_id), versions[-2])
    old.commit([_wider_sources(versions[-1], 2, 1)], replace=True)
    assert old.schema_version == 6
    old.close()
    again = Store.open(root)
    assert again.schema_version == 6
    _same(again.get_slice(versions[-1].memory_id), _wider_sources(versions[-1], 2, 1))
    again.close()


def _padded(sl: MemorySlice, extra: int) -> MemorySlice:
    """``sl`` with its ragged and kNN columns padded ``extra`` wider, as a bank holding a wider
    memory beside it gives them."""
    out = _copy(sl)
    for lv, name in (
        ("epi", "msgs"),
        ("sem", "msgs"),
        ("sem", "epis"),
        ("sem", "knn_idx"),
        ("sem", "knn_sim"),
    ):
        a = out.cols[lv][name]
        fill = -np.inf if name == "knn_sim" else -1
        out.cols[lv][name] = np.concatenate([a, np.full((a.shape[0], extra), fill, a.dtype)], axis=1)
    return out


def test_a_commit_diffs_against_the_callers_copy_and_keeps_none_of_its_own(tmp_path, versions):
    """``previous`` (the caller's copy of the stored version, named by its last file): the commit
    writes the same delta as against the store's own copy, keeps no copy, and a copy padded wider
    (a bank) is cut to the stored columns; a copy of another version, or one whose cut part is not
    padding, is not used (a base file is written)."""
    mid = versions[0].memory_id
    st, ref = _store(tmp_path / "s"), _store(tmp_path / "r")
    st.commit([versions[10]], replace=True)
    ref.commit([versions[10]], replace=True)
    deltas = 0
    for i in range(11, 16):
        prev = (st.versions([mid])[mid], _padded(versions[i - 1], 3 if i % 2 else 0))
        st.commit([versions[i]], replace=True, previous={mid: prev})
        ref.commit([versions[i]], replace=True)
        assert st.versions([mid])[mid] == ref.versions([mid])[mid]  # the same file, named by its bytes
        assert st.committed.get(mid) is None
        deltas += st.versions([mid])[mid].endswith(".delta")
    assert deltas >= 3
    fresh = Store.open(tmp_path / "s")
    _same(fresh.get_slice(mid), versions[15])
    # the store read it: its first commit diffs against the caller's copy too
    fresh.commit([versions[16]], replace=True, previous={mid: (fresh.versions([mid])[mid], versions[15])})
    ref.commit([versions[16]], replace=True)
    assert fresh.versions([mid])[mid] == ref.versions([mid])[mid] and fresh.committed.get(mid) is None
    stale = (fresh.versions([mid])[mid], versions[15])  # named as the last file, but an older version
    wrong = _padded(versions[16], 2)
    wrong.cols["sem"]["msgs"][0, -1] = 0  # not padding past the stored width
    for bad in [("nope.delta", versions[16]), (fresh.versions([mid])[mid], wrong), stale]:
        fresh.committed.clear()  # no copy of the store's own either: a base file
        fresh.commit([versions[17]], replace=True, previous={mid: bad})
        assert fresh.versions([mid])[mid].endswith(".slice"), bad[0]
        _same(Store.open(tmp_path / "s").get_slice(mid), versions[17])
        fresh.commit([versions[16]], replace=True)  # back, as a base
    fresh.close()
    st.close()
    ref.close()


def test_an_engine_keeps_no_copy_of_what_it_stored_and_reads_back_its_bank(tmp_path):
    root = tmp_path / "s"
    turns = _turns(40)
    with MemoryEngine.open(root, embedder=EMB) as eng:
        for i in range(0, 20, 2):
            eng.add(turns[i : i + 2], user_id="u")
            eng.add([{**turns[i], "id": f"w{i}"}], user_id="w")  # a second memory in the bank
        assert all(eng.store.committed.get(m) is None for m in eng.store.versions())
        n_deltas = eng.store._conn.execute("SELECT COUNT(*) FROM deltas").fetchone()[0]
        assert n_deltas > 0
    with MemoryEngine.open(root, embedder=EMB) as eng:  # after a reopen, the first add is a delta too
        before = eng.store._conn.execute("SELECT COUNT(*) FROM deltas").fetchone()[0]
        eng.add(turns[20:22], user_id="u")
        assert eng.store._conn.execute("SELECT COUNT(*) FROM deltas").fetchone()[0] == before + 1
        want = {k: eng.bank.slice(b) for k, b in eng.bank.index.items()}
    st = Store.open(root)
    for key, sl in want.items():
        got = st.get_slice(key)
        for lv in LEVELS:
            for name, a in got.cols[lv].items():
                b = sl.cols[lv][name]
                if a.dtype.kind == "O":
                    assert a.tolist() == b.tolist(), (lv, name)
                else:
                    w = a.shape[1] if a.ndim == 2 else None
                    assert np.array_equal(a, b[:, :w] if w else b, equal_nan=a.dtype.kind == "f"), (lv, name)
    st.close()


def test_a_partial_check_still_reads_the_derived_theme_columns_and_refuses_holes(versions):
    from xmemory_gpu.memory.codec import SliceFormatError, check_slice

    last = versions[-1]
    counts = {lv: last.n(lv) for lv in LEVELS}
    bad = _copy(last)
    bad.cols["theme"]["sum"][0, 0] = np.inf  # derived from sem.x (an overflow), never stored nor diffed
    with pytest.raises(SliceFormatError, match="theme.sum: non-finite"):
        check_slice(bad, EMB.dim, changed={}, before=counts)
    holed = _copy(last)
    holed.cols["sem"]["msgs"] = np.concatenate(
        [holed.cols["sem"]["msgs"], np.zeros((last.n("sem"), 1), np.int32)], 1
    )
    holed.cols["sem"]["msgs"][0, :-1] = -1  # an entry after a -1: rows are read to their length
    with pytest.raises(SliceFormatError, match="sem.msgs: a row holds an entry after a -1"):
        check_slice(holed, EMB.dim)
    with pytest.raises(SliceFormatError, match="sem.msgs: a row holds an entry after a -1"):
        check_slice(holed, EMB.dim, changed={"sem.msgs": np.array([0])}, before=counts)


def test_a_width_no_written_row_fills_is_refused():
    """A delta's width is bounded by the rows it writes (a crafted width allocates nothing)."""
    from xmemory_gpu.memory.codec import SliceFormatError

    base = {"sem.msgs": np.array([[0, 1], [2, -1]], np.int32)}
    for width, rows in (
        (2**31 - 1, np.array([[2, 3, 4]], np.int32)),
        (4, np.array([[2, 3, 4, -1]], np.int32)),
    ):
        d = {
            "follows": np.zeros(32, np.uint8),
            "sem.msgs.width": np.array([width], np.int64),
            "sem.msgs.at": np.array([1]),
            "sem.msgs.set": rows,
        }
        with pytest.raises(SliceFormatError, match="no row it writes is"):
            apply_chain(base, [(d, "11")], "00" * 32, "memory m")


def test_a_column_padded_wider_than_any_row_goes_whole(versions):
    from xmemory_gpu.memory.deltas import diff

    last = versions[-1]
    cols = {f"{lv}.{k}": v for lv in LEVELS for k, v in last.cols[lv].items()}
    padded = _padded(last, 2)  # wider, but no row fills the new width
    change = diff(cols, padded)
    assert "sem.msgs" not in change.widths and change.starts["sem.msgs"] == 0


def test_the_widths_a_store_remembers_are_bounded(tmp_path, versions, monkeypatch):
    """Reading many memories keeps a few numbers per memory, the most recent only; a memory left out
    writes a base at its next commit with the caller's copy (nothing wrong is written)."""
    monkeypatch.setattr(store_mod, "WIDTH_RECORDS", 2)
    st = _store(tmp_path / "s")
    names = []
    for i, mid in enumerate(("a", "b", "c")):
        sl = _copy(versions[10 + i])
        sl.memory_id = mid
        st.commit([sl], replace=True)
        names.append(st.versions([mid])[mid])
    fresh = Store.open(tmp_path / "s")
    for mid in ("a", "b", "c"):
        fresh.get_slice(mid)
    assert list(fresh._shapes) == ["b", "c"] and all(len(w) <= 8 for _, w in fresh._shapes.values())
    nxt = _copy(versions[11])
    nxt.memory_id = "a"
    prev = _copy(versions[10])
    prev.memory_id = "a"
    fresh.commit([nxt], replace=True, previous={"a": (names[0], prev)})  # "a" was left out: a base
    assert fresh.versions(["a"])["a"].endswith(".slice")
    _same(Store.open(tmp_path / "s").get_slice("a"), nxt)
    fresh.close()
    st.close()


def test_a_growth_s_kept_rows_shorten_the_diff_to_the_same_change(tmp_path, monkeypatch):
    """An add tells the store which rows it copied from the bank's version (``bank.KeptRows``): the
    store compares only the others, and the change is the one comparing every row gives (the tests
    run with ``CHECK_KEPT``, which compares the two); a claim that does not hold is caught there."""
    from xmemory_gpu.memory import deltas

    hinted = []
    real = deltas._diff

    def spy(old, sl, kept):
        hinted.append(bool(kept))
        return real(old, sl, kept)

    monkeypatch.setattr(deltas, "_diff", spy)
    with MemoryEngine.open(tmp_path / "s", embedder=EMB) as eng:
        turns = _turns(40)
        for i in range(0, len(turns), 2):
            eng.add(turns[i : i + 2], user_id="u")
        assert hinted.count(True) >= 19  # every add after the first, each checked against the full diff
        old = _copy(eng.bank.slice(0))
    cols = {f"{lv}.{k}": v for lv in LEVELS for k, v in old.cols[lv].items()}
    new = _copy(old)
    new.cols["sem"]["x"][1] += 1.0
    n, none = old.n("sem"), np.zeros(0, np.int64)
    full = deltas.diff(cols, new)
    assert full and deltas._same_change(deltas.diff(cols, new, {"sem.x": (n, np.array([1]))}), full)
    with pytest.raises(AssertionError, match="kept rows"):
        deltas.diff(cols, new, {"sem.x": (n, none)})  # row 1 changed, claimed kept
    monkeypatch.setattr(
        deltas, "CHECK_KEPT", False
    )  # a claim not in the form (rows unsorted, repeated, past n) is not used
    for bad in ([n - 1, 1], [1, 1], [1, n]):
        assert deltas._same_change(deltas.diff(cols, new, {"sem.x": (n, np.array(bad, np.int64))}), full)
    assert deltas._same_change(deltas.diff(cols, new, {"sem.x": (n, np.array([1.0]))}), full)
