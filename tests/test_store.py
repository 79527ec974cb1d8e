"""Store: round trip, validation on open and load, and nothing stored is lost by a failed write."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys

import numpy as np
import pytest

from xmemory_gpu.config import XMemoryConfig
from xmemory_gpu.construct.pipeline import build_memories
from xmemory_gpu.datasets.locomo import load_locomo
from xmemory_gpu.datasets.synthetic import generate_conversations, write_json
from xmemory_gpu.embed.hashing import HashingEmbedder
from xmemory_gpu.memory.bank import MemorySlice
from xmemory_gpu.memory.hierarchy import slice_from_memory
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
    f = next((tmp_path / "store" / "arrays").glob("*.slice"))
    f.write_bytes(f.read_bytes()[:-10] + b"0123456789")
    with pytest.raises(StoreError, match="checksum"):
        for mid in st.memory_ids():
            st.get(mid)


def test_not_a_store(tmp_path):
    with pytest.raises(StoreError, match="not a memory store"):
        Store.open(tmp_path)


# -- schema 3: old stores, the catalogue, compaction ------------------------------------------------
def _snapshot(st: Store) -> dict:
    """Every memory's columns (exact) and stats."""
    out = {}
    for mid in st.memory_ids():
        sl = st.get_slice(mid)
        out[mid] = (
            {
                (lv, k): (v.tolist() if v.dtype.kind == "O" else v.tobytes())
                for lv, c in sl.cols.items()
                for k, v in c.items()
            },
            sl.stats,
        )
    return out


def _files(root) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_an_old_store_is_read_as_it_is_and_upgraded_atomically(tmp_path, memories, monkeypatch):
    from legacy_store import to_schema_2

    st = _new(tmp_path, memories)
    want = _snapshot(st)
    st.close()
    root = tmp_path / "store"
    to_schema_2(root)
    before = _files(root)
    old = Store.open(root)  # read-only use never changes an old store
    assert old.schema_version == 2 and _snapshot(old) == want
    assert old.counts(memories[0].memory_id)["msg"] == len(memories[0].messages)
    assert memories[0].memory_id in old.find_message(memories[0].messages[0].id)
    old.close()
    assert _files(root) == before

    calls = []  # a crash while the new files are written: the store stays schema 2, whole
    real = Store._write_file

    def failing(self, memory_id, name, data):
        calls.append(memory_id)
        if len(calls) == 2:
            raise OSError(28, "No space left on device")
        return real(self, memory_id, name, data)

    monkeypatch.setattr(Store, "_write_file", failing)
    st = Store.open(root)
    with pytest.raises(OSError):
        st.upgrade()
    st.close()
    assert _files(root) == before
    monkeypatch.undo()

    st = Store.open(root)
    assert st.upgrade() == [] and st.schema_version == SCHEMA_VERSION
    assert _snapshot(st) == want
    tables = {r[0] for r in st._conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert not {"messages", "episodes", "semantics", "themes", "lineage"} & tables
    assert len(list((root / "arrays").iterdir())) == 2 and st.collect_garbage() == []
    text = memories[0].messages[0].text
    assert text.encode() not in (root / "memory.sqlite").read_bytes()  # text lives in the memory's file
    st.put(memories[2])  # and the store takes writes
    st.close()
    assert Store.open(root).memory_ids() == [m.memory_id for m in memories]


def test_the_upgrade_keeps_what_it_cannot_convert(tmp_path, memories):
    """A memory that does not load during the upgrade loses nothing: its old rows and file stay, it is
    quarantined while it fails, converted by a later upgrade once it loads, and removed with its memory."""
    from legacy_store import to_schema_2

    st = _new(tmp_path, memories)
    want = _snapshot(st)
    st.close()
    root = tmp_path / "store"
    to_schema_2(root)
    victim = memories[1].memory_id
    with sqlite3.connect(root / "memory.sqlite") as con:
        good = con.execute(
            "SELECT message_ids FROM semantics WHERE memory_id = ? AND row = 0", (victim,)
        ).fetchone()[0]
        con.execute("UPDATE semantics SET message_ids = 'oops' WHERE memory_id = ? AND row = 0", (victim,))
    st = Store.open(root)
    assert st.upgrade() == [victim] and st.schema_version == SCHEMA_VERSION
    bank = st.load_bank(quarantine=True)
    assert bank.memory_ids == [memories[0].memory_id] and list(st.quarantined) == [victim]
    st.put(memories[2])  # the store takes writes meanwhile
    with sqlite3.connect(root / "memory.sqlite") as con:  # repaired (or the read failure was passing)
        con.execute("UPDATE semantics SET message_ids = ? WHERE memory_id = ? AND row = 0", (good, victim))
    assert st.check(victim) is None
    assert st.upgrade() == []  # converted now; the old tables go
    tables = {r[0] for r in st._conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert not {"messages", "semantics"} & tables
    snap = _snapshot(st)
    assert {m: snap[m] for m in want} == want
    st.close()


def test_the_upgrade_leaves_a_damaged_memory_removable(tmp_path, memories):
    from legacy_store import to_schema_2

    _new(tmp_path, memories).close()
    root = tmp_path / "store"
    to_schema_2(root)
    victim = memories[1].memory_id
    with sqlite3.connect(root / "memory.sqlite") as con:
        con.execute("UPDATE semantics SET message_ids = 'oops' WHERE memory_id = ?", (victim,))
    st = Store.open(root)
    assert st.upgrade() == [victim]
    st.delete(victim)  # its old rows go with it (cascade)
    assert st._conn.execute("SELECT COUNT(*) FROM messages WHERE memory_id = ?", (victim,)).fetchone()[0] == 0
    assert st.load_bank().memory_ids == [memories[0].memory_id]


def test_a_failed_commit_of_unchanged_columns_keeps_the_live_file(tmp_path, memories):
    st = _new(tmp_path, memories)
    mid = memories[0].memory_id
    blocker = sqlite3.connect(tmp_path / "store" / "memory.sqlite", timeout=0)
    blocker.execute("BEGIN IMMEDIATE")  # another writer holds the database: the transaction fails
    st._conn.execute("PRAGMA busy_timeout = 50")
    with pytest.raises(StoreError, match="rolled back"):
        st.commit([st.get_slice(mid)], replace=True)  # the same columns: the same file name
    blocker.rollback()
    blocker.close()
    assert st.check(mid) is None
    with pytest.raises(StoreError, match="names a memory twice"):
        st.commit([st.get_slice(mid), st.get_slice(mid)], replace=True)


def test_a_commit_of_several_memories_that_fails_leaves_no_file(tmp_path, memories):
    """A shard's commit: a failed write (here a real one: the file's name is taken by a folder, so
    its rename fails) or a broken slice leaves the store as it was, with no file of the failed
    commit (the files the writers did write removed)."""
    root = tmp_path / "store"
    st = Store.create(root, dim=32, embedder="hashing-32", config={})
    before = _files(root)
    slices = [slice_from_memory(m) for m in memories]
    taken = root / "arrays" / st._encode(slices[1])[0]
    taken.mkdir()
    with pytest.raises(StoreError, match=f"cannot write memory {memories[1].memory_id!r}"):
        st.commit(slices)
    taken.rmdir()
    assert st.memory_ids() == [] and _files(root) == before
    assert sorted(p.name for p in (root / "arrays").iterdir()) == []  # no temporary file either
    broken = slices[2]
    broken = MemorySlice(
        broken.memory_id,
        {**broken.cols, "msg": {**broken.cols["msg"], "x": broken.cols["msg"]["x"][:, :16]}},
        broken.stats,
    )
    with pytest.raises(StoreError, match="dim 16 != store dim 32"):
        st.commit([*slices[:2], broken])  # refused before any file is written
    assert st.memory_ids() == [] and _files(root) == before
    st.commit(slices)  # the same memories commit afterwards
    assert st.memory_ids() == [m.memory_id for m in memories]
    st.close()


def test_a_started_commit_is_invisible_until_finished_and_abandon_leaves_nothing(tmp_path, memories):
    """``start_commit`` writes the files in the background; the catalogue names them only after
    ``finish``; ``abandon`` removes them; one pending commit at a time; ``close`` abandons one."""
    root = tmp_path / "store"
    st = Store.create(root, dim=32, embedder="hashing-32", config={})
    before = _files(root)
    slices = [slice_from_memory(m) for m in memories]
    pending = st.start_commit(slices[:2])
    assert st.memory_ids() == []
    with pytest.raises(StoreError, match="a commit is pending"):
        st.start_commit(slices[2:])
    pending.abandon()
    assert st.memory_ids() == [] and _files(root) == before
    pending = st.start_commit(slices[:2])
    pending.finish()
    assert st.memory_ids() == [m.memory_id for m in memories[:2]]
    assert st.get_slice(memories[1].memory_id).n("sem") == slices[1].n("sem")
    after_two = _files(root)
    st.start_commit(slices[2:])
    st.close()  # a pending commit is abandoned
    st = Store.open(root)
    assert st.memory_ids() == [m.memory_id for m in memories[:2]] and _files(root) == after_two
    st.close()


_INTERRUPTED_COMMIT = """
import signal, sys, time
from pathlib import Path
from xmemory_gpu.config import XMemoryConfig
from xmemory_gpu.construct.pipeline import build_memories
from xmemory_gpu.datasets.locomo import load_locomo
from xmemory_gpu.datasets.synthetic import generate_conversations, write_json
from xmemory_gpu.embed.hashing import HashingEmbedder
from xmemory_gpu.memory.hierarchy import slice_from_memory
from xmemory_gpu.memory.store import Store

tmp = Path(sys.argv[1])
data = write_json(generate_conversations(3, seed=5), tmp / "s.json")
slices = [slice_from_memory(m) for m in build_memories(load_locomo(data), HashingEmbedder(32), XMemoryConfig())]
st = Store.create(tmp / "store", dim=32, embedder="hashing-32", config={})
files = lambda: sorted(p.name for p in (tmp / "store").rglob("*") if p.is_file())
before = files()
real = Store._write
def slow(self, files):
    time.sleep(0.4)
    return real(self, files)
def interrupt(signum, frame):
    raise KeyboardInterrupt
Store._write = slow
signal.signal(signal.SIGALRM, interrupt)
signal.setitimer(signal.ITIMER_REAL, 0.15)
try:
    st.commit(slices)
except KeyboardInterrupt:
    print("interrupted", st.memory_ids() == [] and files() == before)
st.close()
"""


@pytest.mark.skipif(not hasattr(signal, "setitimer"), reason="needs setitimer")
def test_an_interrupted_commit_leaves_no_file(tmp_path):
    """Ctrl-C while the commit waits on its writers: the writes finish, every file of the commit is
    removed, the store is as before (in a process of its own: the test's signal stays there)."""
    out = subprocess.run(
        [sys.executable, "-c", _INTERRUPTED_COMMIT, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.stdout.strip() == "interrupted True", out.stdout + out.stderr


def test_catalogue_counts_and_message_index(tmp_path, memories):
    st = _new(tmp_path, memories)
    m = memories[1]
    assert st.counts(m.memory_id) == {
        "msg": len(m.messages),
        "epi": len(m.episodes),
        "sem": len(m.semantics),
        "theme": len(m.themes),
        "psg": len(m.psg_msg),
    }
    assert st.find_message(m.messages[-1].id) == sorted(
        {x.memory_id for x in memories[:2] if any(y.id == m.messages[-1].id for y in x.messages)},
        key=st.memory_ids().index,
    )
    assert st.find_message("no such id") == []
    st.delete(m.memory_id)
    assert m.memory_id not in st.find_message(m.messages[-1].id)
    assert (
        st._conn.execute("SELECT COUNT(*) FROM message_ids WHERE memory_id = ?", (m.memory_id,)).fetchone()[0]
        == 0
    )


def test_a_write_costs_what_it_changes(tmp_path, memories, monkeypatch):
    st = _new(tmp_path, memories)
    vacuums = []
    monkeypatch.setattr(Store, "compact", lambda self: vacuums.append(1))
    name0 = st.versions()[memories[0].memory_id]
    st.put(memories[2])
    st.put(memories[1], replace=True)
    assert st.versions()[memories[0].memory_id] == name0  # an untouched memory's file is untouched
    assert vacuums == []  # no whole-database rewrite per write
    monkeypatch.undo()
    sl = st.get_slice(memories[0].memory_id)
    for i in range(40):  # enough catalogue rows (message ids) to span many pages
        st.put(MemorySlice(f"copy-{i}", sl.cols, sl.stats))
    assert not st.maybe_compact()
    pages = st._conn.execute("PRAGMA page_count").fetchone()[0]
    for i in range(36):
        st.delete(f"copy-{i}")
    assert st.maybe_compact()  # most pages free now: compaction runs, once
    assert st._conn.execute("PRAGMA page_count").fetchone()[0] < pages / 2
    assert not st.maybe_compact()


def _dangling(st: Store) -> list[str]:
    named = [r[0] for r in st._conn.execute("SELECT arrays_file FROM memories")]
    return [n for n in named if not (st.path / "arrays" / n).exists()]


def test_a_pending_commit_is_finished_or_abandoned_once(tmp_path, memories):
    """A second finish, or an abandon after finish, raises and removes nothing the catalogue names;
    an old handle cannot touch the commit pending after it."""
    st = Store.create(tmp_path / "store", dim=32, embedder="hashing-32", config={})
    slices = [slice_from_memory(m) for m in memories]
    first = st.start_commit(slices[:2])
    first.finish()
    for again in (first.finish, first.abandon):
        with pytest.raises(StoreError, match="this commit is finished"):
            again()
    second = st.start_commit(slices[2:])
    with pytest.raises(StoreError, match="finished"):
        first.abandon()
    second.finish()
    assert st.memory_ids() == [m.memory_id for m in memories] and _dangling(st) == []
    st.close()


def test_an_interrupt_as_the_transaction_commits_keeps_its_files(tmp_path, memories):
    """A Ctrl-C raised right after SQLite's COMMIT returns (it arrived during it): the commit
    happened, so its files stay (the cleanup leaves every file the catalogue names)."""
    st = Store.create(tmp_path / "store", dim=32, embedder="hashing-32", config={})

    class InterruptedAfterCommit:
        def __init__(self, conn):
            self.conn = conn

        def __getattr__(self, name):
            return getattr(self.conn, name)

        def __enter__(self):
            return self.conn.__enter__()

        def __exit__(self, *exc):
            out = self.conn.__exit__(*exc)
            if exc[0] is None:
                raise KeyboardInterrupt
            return out

    real, st._conn = st._conn, InterruptedAfterCommit(st._conn)
    with pytest.raises(KeyboardInterrupt):
        st.commit([slice_from_memory(m) for m in memories[:2]])
    st._conn = real
    assert st.memory_ids() == [m.memory_id for m in memories[:2]] and _dangling(st) == []
    # the same as a replacement: the replaced files go too (no orphan), the commit is finished
    changed = [slice_from_memory(m) for m in memories[:2]]
    for sl in changed:
        sl.cols["msg"]["x"] = sl.cols["msg"]["x"] * np.float32(0.5)
    st._conn = InterruptedAfterCommit(real)
    with pytest.raises(KeyboardInterrupt):
        st.start_commit(changed, replace=True).finish()
    st._conn = real
    names = sorted(st.versions().values())
    assert _dangling(st) == [] and sorted(p.name for p in (st.path / "arrays").iterdir()) == names
    assert (
        st.get_slice(memories[0].memory_id).cols["msg"]["x"].tobytes()
        == changed[0].cols["msg"]["x"].tobytes()
    )
    st.close()


def test_garbage_is_not_collected_under_a_pending_commit(tmp_path, memories):
    st = Store.create(tmp_path / "store", dim=32, embedder="hashing-32", config={})
    pending = st.start_commit([slice_from_memory(m) for m in memories])
    with pytest.raises(StoreError, match="a commit is pending"):
        st.collect_garbage()
    pending.finish()
    assert st.collect_garbage() == [] and _dangling(st) == []
    st.close()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_leaves_the_parents_pending_commit_alone(tmp_path, memories):
    """A child forked while a commit is pending closes its copy of the store: the parent's files stay
    and its finish commits them."""
    st = Store.create(tmp_path / "store", dim=32, embedder="hashing-32", config={})
    pending = st.start_commit([slice_from_memory(m) for m in memories])
    pid = os.fork()
    if pid == 0:  # the child: close the inherited store, then leave without running the parent's cleanup
        try:
            st.close()
        finally:
            os._exit(0)
    assert os.waitpid(pid, 0)[1] == 0
    pending.finish()
    assert st.memory_ids() == [m.memory_id for m in memories] and _dangling(st) == []
    st.close()


_WRITE_FAILS = """
import resource, signal, sys
from pathlib import Path
import xmemory_gpu.ops.files.cpu as files_cpu
import xmemory_gpu.ops.files.reference as files_reference
from xmemory_gpu.config import XMemoryConfig
from xmemory_gpu.construct.pipeline import build_memories
from xmemory_gpu.datasets.locomo import load_locomo
from xmemory_gpu.datasets.synthetic import generate_conversations, write_json
from xmemory_gpu.embed.hashing import HashingEmbedder
from xmemory_gpu.memory.hierarchy import slice_from_memory
from xmemory_gpu.memory.store import Store, StoreError

tmp, n = Path(sys.argv[1]), int(sys.argv[3])
if sys.argv[2] == "python":
    files_cpu.write_durable = files_reference.write_durable
data = write_json(generate_conversations(n, seed=5), tmp / "s.json")
slices = [slice_from_memory(m) for m in build_memories(load_locomo(data), HashingEmbedder(32), XMemoryConfig())]
st = Store.create(tmp / "store", dim=32, embedder="hashing-32", config={})
size = {sl.memory_id: len(st._encode(sl)[1].data) for sl in slices}
big = max(size, key=size.get)
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (size[big] - 1, resource.RLIM_INFINITY))  # the largest file cannot be written
try:
    st.commit(slices)
    print("committed")
except StoreError as exc:
    print("failed", big in str(exc), st.memory_ids(), sorted(p.name for p in (tmp / "store" / "arrays").iterdir()))
"""


@pytest.mark.skipif(sys.platform != "linux", reason="RLIMIT_FSIZE and SIGXFSZ as on Linux")
@pytest.mark.parametrize("path", ["native", "python"])
# one memory: streamed from its columns (write_hashed); 3: an fsync each; 17: one sync of the file system
@pytest.mark.parametrize("n", [1, 3, 17])
def test_a_failed_write_names_its_memory_and_leaves_nothing(tmp_path, path, n):
    """A write that fails part-way (the file size limit: EFBIG, as a full disk's ENOSPC) names the
    memory whose file failed; the store keeps no file of the commit."""
    out = subprocess.run(
        [sys.executable, "-c", _WRITE_FAILS, str(tmp_path), path, str(n)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.stdout.strip() == "failed True [] []", out.stdout + out.stderr


def test_a_streamed_base_file_holds_the_packed_bytes(tmp_path):
    """A commit of one memory streams its base file from the slice's columns (``write_hashed``, the
    hash on the writer's thread): the file is the packed container byte for byte, named and
    catalogued by its sha256, and reads back as the slice; a commit of several packs them."""
    import hashlib

    from xmemory_gpu.memory.codec import slice_to_bytes

    data = write_json(generate_conversations(2, seed=9), tmp_path / "s.json")
    slices = [
        slice_from_memory(m) for m in build_memories(load_locomo(data), HashingEmbedder(32), XMemoryConfig())
    ]
    st = Store.create(tmp_path / "store", dim=32, embedder="hashing-32", config={})
    st.commit([slices[0]])
    st.commit([slices[1]])
    for sl in slices:
        want = slice_to_bytes(sl)
        digest = hashlib.sha256(want).hexdigest()
        (path,) = (tmp_path / "store" / "arrays").glob(f"*-{digest[:12]}.slice")
        assert path.read_bytes() == want
        assert st.check(sl.memory_id) is None
        assert slice_to_bytes(st.get_slice(sl.memory_id)) == want
    assert not list((tmp_path / "store" / "arrays").glob(".*"))  # no temporary file left
    st.close()
