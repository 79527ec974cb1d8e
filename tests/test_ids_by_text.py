"""``engine.ids.ids_by_text``: the stored ids a memory's statements keep, matched by text, equal to
matching them one by one (each new statement takes the first stored one of its text not yet taken)."""

from __future__ import annotations

from collections import defaultdict, deque

import numpy as np
import pytest

from xmemory_gpu.construct.incremental import statement_hash
from xmemory_gpu.engine.ids import ids_by_text


def _one_by_one(old_texts: list[str], old_ids: list[int], new_texts: list[str]) -> list[int]:
    by_text: dict[str, deque[int]] = defaultdict(deque)
    for text, sid in zip(old_texts, old_ids):
        by_text[statement_hash(text)].append(sid)
    out = []
    for text in new_texts:
        q = by_text.get(statement_hash(text))
        out.append(q.popleft() if q else -1)
    return out


@pytest.mark.parametrize("seed", range(20))
def test_ids_by_text_is_one_by_one_matching(seed):
    rng = np.random.default_rng(seed)
    words = ["the user likes tea", "The user  likes TEA", "the user runs", "a b c", "x", "y z", ""]
    n_old, n_new = int(rng.integers(0, 30)), int(rng.integers(0, 30))
    old = [words[i] for i in rng.integers(0, len(words), n_old)]
    new = [words[i] for i in rng.integers(0, len(words), n_new)] + ["never stored"] * int(rng.integers(0, 3))
    ids = rng.permutation(1000)[:n_old]
    got = ids_by_text(old, ids, new)
    assert got.dtype == np.int64 and got.tolist() == _one_by_one(old, ids.tolist(), new)


def test_a_delete_keeps_the_ids_of_what_is_left():
    old = ["a", "b", "a", "c"]
    assert ids_by_text(old, np.array([7, 8, 9, 10]), ["a", "c", "a", "d"]).tolist() == [7, 10, 9, -1]
    assert ids_by_text([], np.zeros(0, np.int64), ["a"]).tolist() == [-1]
    assert ids_by_text(["a"], np.array([3]), []).tolist() == []
