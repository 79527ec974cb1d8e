"""The encoder's freed activations go back to the system (``embed.heap``): a trim after a call whose
largest batch had large activations, none after a small one, and nothing where the C library lacks
``malloc_trim``."""

from __future__ import annotations

import xmemory_gpu.embed.heap as heap


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
