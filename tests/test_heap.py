"""Freed heap pages go back to the system (``xmemory_gpu.heap``): a trim after an encoder call whose
largest batch had large activations, none after a small one; after a write to large memories at most
once per interval; nothing where the C library lacks ``malloc_trim``."""

from __future__ import annotations

import xmemory_gpu.heap as heap


def test_a_small_call_is_not_trimmed(monkeypatch):
    calls = []
    monkeypatch.setattr(heap, "_trim", lambda: calls.append)
    assert heap.release_freed(heap.RELEASE_BYTES - 1) is False and calls == []
    assert heap.release_freed(heap.RELEASE_BYTES) is True and calls == [0]


def test_without_malloc_trim_nothing_is_done(monkeypatch):
    monkeypatch.setattr(heap, "_trim", lambda: None)
    assert heap.release_freed(1 << 40) is False


def test_the_real_trim_runs_where_the_c_library_has_it():
    fn = heap._trim()
    assert fn is None or heap.release_freed(heap.RELEASE_BYTES) is True


def test_a_write_to_large_memories_trims_at_most_once_per_interval(monkeypatch):
    calls = []
    monkeypatch.setattr(heap, "_trim", lambda: calls.append)
    monkeypatch.setattr(heap, "_last_write_trim", [float("-inf")])
    assert heap.release_after_write(heap.WRITE_BYTES - 1) is False and calls == []
    assert heap.release_after_write(heap.WRITE_BYTES) is True and calls == [0]
    assert heap.release_after_write(heap.WRITE_BYTES) is False and calls == [0]  # within the interval
    monkeypatch.setattr(heap, "WRITE_INTERVAL_S", 0.0)
    assert heap.release_after_write(heap.WRITE_BYTES) is True and calls == [0, 0]


def test_release_now_trims_whatever_the_size(monkeypatch):
    calls = []
    monkeypatch.setattr(heap, "_trim", lambda: calls.append)
    assert heap.release_now() is True and calls == [0]
    monkeypatch.setattr(heap, "_trim", lambda: None)
    assert heap.release_now() is False
