"""The bank as the one layout: slices round-trip exactly, a memory grows or shrinks in place or
moves to the arena's end without moving any other memory's rows, kernels read the grown arena
directly (holes and slack are segments no query targets), and search on a grown bank equals
search on its compact copy."""

from __future__ import annotations

import numpy as np
import pytest

from xmemory_gpu.config import XMemoryConfig
from xmemory_gpu.construct.pipeline import build_memories
from xmemory_gpu.datasets.locomo import load_locomo
from xmemory_gpu.datasets.synthetic import generate_conversations, write_json
from xmemory_gpu.embed.hashing import HashingEmbedder
from xmemory_gpu.memory.bank import LEVELS, MemorySlice
from xmemory_gpu.memory.hierarchy import bank_of, slice_from_memory, view
from xmemory_gpu.memory.segments import Segments
from xmemory_gpu.retrieve import STRATEGIES, Retriever

EMB = HashingEmbedder(64)


@pytest.fixture(scope="module")
def memories(tmp_path_factory):
    path = tmp_path_factory.mktemp("bank") / "synthetic.json"
    write_json(generate_conversations(4, seed=5), path)
    convs = load_locomo(path)
    return convs, build_memories(convs, EMB, XMemoryConfig())


def _records(mem):
    return (
        [m.__dict__ for m in mem.messages],
        [e.__dict__ for e in mem.episodes],
        [s.__dict__ for s in mem.semantics],
        [t.__dict__ for t in mem.themes],
    )


def test_view_round_trips_records_and_arrays(memories):
    _, mems = memories
    bank = bank_of(mems)
    assert bank.index == {m.memory_id: b for b, m in enumerate(mems)}
    for b, m in enumerate(mems):
        v = view(bank, b)
        assert _records(v) == _records(m)
        for name, a in m.arrays().items():
            np.testing.assert_array_equal(getattr(v, name), a, err_msg=name)
    # global rows: a semantic's provenance column points into its own memory's message rows
    for b in range(bank.n_memories):
        rows = bank.sem["msgs"][bank.sem.seg.rows(b)]
        live = rows[rows >= 0]
        assert np.all(bank.msg.seg.memory_of(live) == b)


def _shrink(sl: MemorySlice, n_sem: int) -> MemorySlice:
    """The slice with only its first ``n_sem`` semantics (graph edges to dropped rows removed)."""
    cols = {lv: dict(c) for lv, c in sl.cols.items()}
    for name, a in cols["sem"].items():
        cols["sem"][name] = a[:n_sem].copy()
    for name in ("knn_idx",):
        idx = cols["sem"][name]
        cols["sem"]["knn_sim"] = np.where(idx >= n_sem, -np.inf, cols["sem"]["knn_sim"]).astype(np.float32)
        cols["sem"][name] = np.where(idx >= n_sem, -1, idx).astype(np.int32)
    return MemorySlice(sl.memory_id, cols, dict(sl.stats))


def _grow(sl: MemorySlice, times: int) -> MemorySlice:
    """The slice with its semantics repeated ``times`` (more rows than its capacity)."""
    cols = {lv: dict(c) for lv, c in sl.cols.items()}
    n = sl.n("sem")
    for name, a in sl.cols["sem"].items():
        parts = [a]
        for t in range(1, times):
            parts.append(np.where(a >= 0, a + t * n, -1).astype(a.dtype) if name == "knn_idx" else a)
        cols["sem"][name] = np.concatenate(parts)
    return MemorySlice(sl.memory_id, cols, dict(sl.stats))


def test_growth_moves_only_the_growing_memory(memories):
    _, mems = memories
    bank = bank_of(mems)
    before = {b: bank.slice(b) for b in range(bank.n_memories)}
    starts = {lv: bank.levels[lv].seg.starts.copy() for lv in LEVELS}
    grown = _grow(before[1], 3)
    assert bank.put_slice(grown) == 1
    assert not bank.sem.seg.is_compact
    for b in (0, 2, 3):  # other memories: same rows, same values
        assert bank.sem.seg.starts[b] == starts["sem"][b]
        got = bank.slice(b)
        for lv in LEVELS:
            for name in before[b].cols[lv]:
                np.testing.assert_array_equal(
                    got.cols[lv][name], before[b].cols[lv][name], err_msg=f"{lv}.{name}"
                )
    got = bank.slice(1)
    for name in grown.cols["sem"]:
        np.testing.assert_array_equal(got.cols["sem"][name], grown.cols["sem"][name], err_msg=name)
    # shrinking back fits the new capacity: rewritten in place, slack cleared
    start = int(bank.sem.seg.starts[1])
    bank.put_slice(_shrink(grown, 5))
    assert int(bank.sem.seg.starts[1]) == start and int(bank.sem.seg.lengths[1]) == 5
    assert np.all(bank.sem["theme"][start + 5 : start + int(bank.sem.seg.capacity[1])] == -1)


def test_new_memory_appends_without_moving_others(memories):
    _, mems = memories
    bank = bank_of(mems[:3])
    starts = bank.sem.seg.starts.copy()
    b = bank.put_slice(slice_from_memory(mems[3]))
    assert b == 3 and bank.index[mems[3].memory_id] == 3
    np.testing.assert_array_equal(bank.sem.seg.starts[:3], starts)
    assert _records(view(bank, 3)) == _records(mems[3])


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_search_on_a_grown_bank_equals_its_compact_copy(memories, strategy):
    convs, mems = memories
    bank = bank_of(mems)
    bank.put_slice(_shrink(bank.slice(0), 3))  # in place, leaves slack
    bank.put_slice(_grow(bank.slice(2), 2))  # moved to the end, leaves a hole
    compact = bank.compact()
    assert compact.sem.seg.is_compact and not bank.sem.seg.is_compact
    qs = [(q.question, c.sample_id) for c in convs for q in c.qa][:24]
    a = Retriever(bank, EMB).search([q for q, _ in qs], [m for _, m in qs], strategy=strategy)
    b = Retriever(compact, EMB).search([q for q, _ in qs], [m for _, m in qs], strategy=strategy)
    strip = [{k: v for k, v in r.to_dict().items() if k != "timings"} for r in a]
    assert strip == [{k: v for k, v in r.to_dict().items() if k != "timings"} for r in b]


def test_kernel_view_segments():
    s = Segments(np.array([10, 0, 30, 30]), np.array([5, 4, 0, 2]), np.array([8, 4, 0, 2]), 32)
    offsets, seg = s.kernel_view()
    assert offsets[0] == 0 and offsets[-1] == 32 and np.all(np.diff(offsets) >= 0)
    for b in range(4):  # each memory's segment is exactly its live rows (an empty one: an empty piece)
        assert offsets[seg[b] + 1] - offsets[seg[b]] == s.lengths[b]
        assert s.lengths[b] == 0 or offsets[seg[b]] == s.starts[b]
    assert Segments.from_lengths([3, 0, 2]).kernel_view()[0].tolist() == [0, 3, 3, 5]
    assert s.memory_of(np.array([0, 4, 10, 14, 15, 31, 9])).tolist() == [1, -1, 0, 0, -1, 3, -1]


def test_kernel_view_with_an_empty_memory_where_another_moved():
    """An empty memory and a memory moved to the arena's end can share a start row (the engine after
    a delete, a reopen and an add): offsets stay non-decreasing and each gets its own rows."""
    s = Segments(np.array([0, 5, 5]), np.array([0, 0, 7]), np.array([0, 0, 9]), 14)
    s.starts[0], s.capacity[0] = 5, 0
    offsets, seg = s.kernel_view()
    assert np.all(np.diff(offsets) >= 0) and offsets[-1] >= 14
    assert offsets[seg[2]] == 5 and offsets[seg[2] + 1] == 12
    for b in (0, 1):
        assert offsets[seg[b] + 1] == offsets[seg[b]]
    assert s.memory_of(np.array([5, 11, 12])).tolist() == [2, 2, -1]


def test_a_slice_without_copies_reads_as_the_copy_and_cannot_be_written(memories):
    """``slice(b, copy=False)``: the same values as a copy, as read-only views of the bank's rows
    (row references of a memory not first in its level copied, to be made local)."""
    _, mems = memories
    bank = bank_of(mems)
    for b in range(bank.n_memories):
        copied, viewed = bank.slice(b), bank.slice(b, copy=False)
        for lv in LEVELS:
            for name, a in copied.cols[lv].items():
                v = viewed.cols[lv][name]
                assert not v.flags.writeable, (b, lv, name)
                if a.dtype.kind == "O":
                    assert a.tolist() == v.tolist()
                else:
                    np.testing.assert_array_equal(a, v, err_msg=f"{b} {lv}.{name}")
        with pytest.raises(ValueError):
            viewed.cols["sem"]["x"][0, 0] = 1.0
    assert bank.slice(0, copy=False).cols["sem"]["x"].base is not None  # a view, not a copy


def test_a_put_of_the_changed_rows_leaves_the_bank_as_a_put_of_all_rows(memories):
    """``put_slice(changed=)`` (the rows a diff against the bank's own rows found) writes those rows
    only, where the memory stays in place; the arena then equals the one a whole put leaves, through
    scattered edits, a widened source column, appends that move the memory then fit its slack, and
    a level that shrinks."""
    from xmemory_gpu.memory.deltas import diff

    _, mems = memories
    part, whole = bank_of(mems), bank_of(mems)

    def step(edit) -> None:
        old = part.slice(1)
        new = edit(part.slice(1))
        cols = {f"{lv}.{k}": v for lv in LEVELS for k, v in old.cols[lv].items()}
        changed = diff(cols, new).changed_rows()
        part.put_slice(new, changed=changed)
        whole.put_slice(new)
        for lv in LEVELS:
            a, b = part.levels[lv], whole.levels[lv]
            assert a.seg.starts.tolist() == b.seg.starts.tolist()
            assert a.seg.lengths.tolist() == b.seg.lengths.tolist()
            for name, x in a.cols.items():
                y = b.cols[name]
                if x.dtype.kind == "O":
                    assert x.tolist() == y.tolist(), (lv, name)
                else:
                    assert x.shape == y.shape and x.tobytes() == y.tobytes(), (lv, name)

    def scatter(sl):
        sl.cols["sem"]["knn_sim"][3, 0] = 0.5
        sl.cols["msg"]["text"][2] = "changed"
        m = sl.cols["sem"]["msgs"]
        sl.cols["sem"]["msgs"] = np.concatenate([m, np.full((m.shape[0], 1), -1, m.dtype)], 1)
        sl.cols["sem"]["msgs"][0, (m[0] >= 0).sum()] = 0  # a statement gains a source: wider
        return sl

    step(scatter)
    step(lambda sl: _grow(sl, 2))  # more rows than its capacity: it moves
    step(lambda sl: _grow(_shrink(sl, sl.n("sem") - 2), 1))  # fewer rows, in place
    step(lambda sl: _grow(_shrink(sl, sl.n("sem") // 2 + 1), 1))
    n = part.slice(1).n("sem")
    step(
        lambda sl: MemorySlice(
            sl.memory_id,
            {**sl.cols, "sem": {k: np.concatenate([v, v[:1]]) for k, v in sl.cols["sem"].items()}},
            sl.stats,
        )
    )
    assert part.slice(1).n("sem") == n + 1


def test_a_partial_put_notes_its_rows_merged(memories):
    """The rows a partial put wrote go to the write log (what device copies and row caches follow)
    as merged ranges: next rows as one range, many scattered rows as one covering range."""
    _, mems = memories
    bank = bank_of(mems)
    sl = bank.slice(0)
    n = sl.n("sem")
    log = bank.sem.writes
    count = log.count
    bank.put_slice(sl, changed={"sem.x": np.arange(2, 6), "sem.time": np.array([3, 4, 5])})
    start = int(bank.sem.seg.starts[0])
    assert log.count - count == 1 and log.since(count) == [(start + 2, start + 6)]
    count = log.count
    scattered = np.arange(0, n, 2)
    bank.put_slice(sl, changed={"sem.x": scattered})
    got = log.since(count)
    assert len(got) == (len(scattered) if len(scattered) <= 64 else 1)
    covered = {r for lo, hi in got for r in range(lo - start, hi - start)}
    assert set(scattered.tolist()) <= covered
