"""What a write embeds: an update or a delete embeds only the texts that changed (the embedding cache,
primed with the memory's statements), and an add embeds its texts before it takes the writer lock."""

from __future__ import annotations

import threading

import numpy as np

from xmemory_gpu.embed.cache import CachedEmbedder
from xmemory_gpu.embed.hashing import HashingEmbedder
from xmemory_gpu.engine import MemoryEngine


class Counting:
    """An embedder that counts the texts it embeds and whether the engine's writer lock was held."""

    def __init__(self, inner) -> None:
        self.inner, self.texts, self.under_writer = inner, [], []
        self.writer: threading.RLock | None = None

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def encode(self, texts, *a, **k):
        self.texts += list(texts)
        if self.writer is not None:
            self.under_writer += [self.writer._is_owned()] * len(texts)
        return self.inner.encode(texts, *a, **k)


def _chat(n: int) -> list[dict]:
    places = ["Oslo", "Rome", "Lima", "Kyiv", "Pune", "Cork", "Bern", "Nice"]
    return [
        {
            "role": "user" if i % 2 == 0 else "assistant",
            "content": f"On day {i} I visited {places[i % 8]} and met {i % 7 + 2} old friends from school there.",
        }
        for i in range(n)
    ]


def test_the_cache_returns_the_encoders_rows_and_is_bounded():
    inner = HashingEmbedder(64)
    c = CachedEmbedder(inner, max_rows=3)
    texts = ["a b", "c d", "a b", "e f"]
    assert np.array_equal(c.encode(texts), inner.encode(texts))
    assert (c.hits, c.misses) == (0, 3)  # a text twice in one call is embedded once
    c.encode(["g h"])  # the least recently used row leaves
    assert len(c._rows) == 3
    assert c.encode([]).shape == (0, 64)
    c.prime(["x y"], inner.encode(["x y"]))
    before = c.misses
    c.encode(["x y"])
    assert c.misses == before


def test_update_and_delete_embed_only_what_changed(tmp_path):
    emb = Counting(HashingEmbedder(384))
    with MemoryEngine.open(tmp_path / "s", embedder=emb) as eng:
        for i in range(0, 120, 40):
            ids = eng.add(_chat(120)[i : i + 40], user_id="u")
        emb.texts.clear()
        eng.update(ids[0], "I moved to Bergen last spring and I love the rain there.", user_id="u")
        assert 1 <= len(emb.texts) <= 4, emb.texts  # the message and its statements
        emb.texts.clear()
        eng.delete(ids[2], user_id="u")
        assert len(emb.texts) <= 2, emb.texts
    # reopened (a cold cache): primed with the memory's own statements
    emb = Counting(HashingEmbedder(384))
    with MemoryEngine.open(tmp_path / "s", embedder=emb) as eng:
        n_sem = len([u for u in eng.get_all(user_id="u") if u["type"] == "semantic"])
        emb.texts.clear()
        eng.delete(ids[4], user_id="u")
        assert len(emb.texts) < n_sem // 4, (len(emb.texts), n_sem)


def test_an_add_embeds_before_it_takes_the_writer_lock(tmp_path):
    emb = Counting(HashingEmbedder(384))
    with MemoryEngine.open(tmp_path / "s", embedder=emb) as eng:
        emb.writer = eng._writer
        eng.add_batch([{"user_id": f"u{k}", "messages": _chat(60)} for k in range(3)])
        assert emb.under_writer and sum(emb.under_writer) <= len(emb.under_writer) // 10
