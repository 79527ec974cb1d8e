"""A memory's themes as its last growth left them, as a hint to the next (``ThemeTop2``,
``construct.theme_memo``): the partition state, and the memory an engine writes, are the same bits
with the hints as without them, whatever the hints hold."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from xmemory_gpu.construct.theme_memo import ThemeMemo
from xmemory_gpu.datasets.synthetic import generate_long_chats
from xmemory_gpu.embed.hashing import HashingEmbedder
from xmemory_gpu.engine import MemoryEngine
from xmemory_gpu.ops.objective import PartitionState, ThemeTop2

COLUMNS = ("labels", "offsets", "theme_offsets", "theme_label", "theme_sum", "theme_count")
COLUMNS += ("member_offsets", "member_rows", "top_idx", "top_cos", "f")


def _same(a: PartitionState, b: PartitionState) -> None:
    for name in COLUMNS:
        u, v = np.asarray(getattr(a, name)), np.asarray(getattr(b, name))
        assert u.shape == v.shape and u.tobytes() == v.tobytes(), name


def _blocks(rng, sizes: list[int], d: int, themes: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    x = rng.standard_normal((sum(sizes), d))
    x[1::7] = x[0]  # repeated rows: themes with the same centroid, cosines that tie
    labels = np.concatenate([rng.integers(0, themes, n) for n in sizes])
    return x, labels, np.concatenate([[0], np.cumsum(sizes)])


@pytest.mark.parametrize("seed", range(6))
def test_a_state_built_with_hints_is_the_state_built_without(seed):
    rng = np.random.default_rng(seed)
    sizes, d = [120, 3, 80, 0], 8
    x, labels, off = _blocks(rng, sizes, d, 30)
    before = PartitionState.from_labels(x, labels, off)
    hints = [before.block_top2(b) for b in range(len(sizes))]
    # the memories change: a few nodes move, one theme goes, nodes are added to the first
    lab2 = labels.copy()
    lab2[rng.choice(len(lab2), 10, replace=False)] = rng.integers(0, 40, 10)
    lab2[lab2 == 5] = 6
    add = rng.standard_normal((15, d))
    x2 = np.concatenate([x[: off[1]], add, x[off[1] :]])
    lab2 = np.concatenate([lab2[: off[1]], rng.integers(0, 45, 15), lab2[off[1] :]])
    off2 = off + np.array([0, 15, 15, 15, 15])
    want = PartitionState.from_labels(x2, lab2, off2)
    _same(PartitionState.from_labels(x2, lab2, off2, hints=hints), want)
    _same(PartitionState.from_labels(x2, lab2, off2, hints=[None, hints[1], None, hints[3]]), want)
    # stale sums, other memories' hints, another dimension: speed only
    stale = dataclasses.replace(hints[0], sums=hints[0].sums + 1e-12)
    narrow = ThemeTop2(np.arange(3), np.ones((3, d - 1)), np.zeros((3, 2), np.int64), np.zeros((3, 2)))
    for odd in ([stale, None, None, None], [hints[2], hints[0], hints[1], None], [narrow] * 4):
        _same(PartitionState.from_labels(x2, lab2, off2, hints=odd), want)
    # labels out of order, or beyond 2**31 (where they would read as another block's), are no hint
    over = dataclasses.replace(hints[0], labels=hints[0].labels + (1 << 32))
    backwards = dataclasses.replace(hints[0], labels=hints[0].labels[::-1].copy())
    for odd in ([over, None, None, None], [backwards, None, None, None], ["not a hint"] * 4):
        _same(PartitionState.from_labels(x2, lab2, off2, hints=odd), want)
    with pytest.raises(ValueError, match="hints"):
        PartitionState.from_labels(x2, lab2, off2, hints=hints[:2])


def test_the_memo_is_bounded_and_forgets_what_it_is_told():
    h = lambda k: ThemeTop2(np.arange(k), np.zeros((k, 4)), -np.ones((k, 2), np.int64), np.zeros((k, 2)))  # noqa: E731
    memo = ThemeMemo(max_bytes=3 * h(10).nbytes, min_themes=5)

    def put(m, hint):
        memo.put(m, hint)
        memo.publish([m])

    put("small", h(4))
    assert memo.get("small") is None
    for m in "abcd":
        put(m, h(10))
    assert memo.get("a") is None and len(memo) == 3 and memo.nbytes == 3 * h(10).nbytes
    memo.get("b")  # used last: kept when another comes in
    put("e", h(10))
    assert memo.get("b") is not None and memo.get("c") is None
    memo.drop(["b"])
    assert memo.get("b") is None and memo.nbytes == 2 * h(10).nbytes
    put("d", None)
    assert memo.get("d") is None
    # what a write puts is read only once the write is stored
    memo.put("f", h(10))
    assert memo.get("f") is None
    memo.publish(["e"])  # another write: f's was not stored
    memo.publish(["f"])
    assert memo.get("f") is None
    memo.put("f", h(10))
    memo.discard()
    memo.publish(["f"])
    assert memo.get("f") is None
    memo.drop()
    assert len(memo) == 0 and memo.nbytes == 0


def _turns(conv: dict) -> list[dict]:
    c = conv["conversation"]
    keys = sorted((k for k in c if k.startswith("session_") and k[8:].isdigit()), key=lambda s: int(s[8:]))
    role = lambda t: "user" if t["speaker"] == c["speaker_a"] else "assistant"  # noqa: E731
    return [{"role": role(t), "content": t["text"], "session": int(k[8:])} for k in keys for t in c[k]]


def _columns(eng: MemoryEngine) -> dict:
    (key,) = eng.bank.index  # the one memory: user "u"
    sl = eng.bank.slice(eng.bank.index[key])
    return {f"{lv}.{n}": a for lv, cols in sl.cols.items() for n, a in cols.items()} | {"f": sl.stats["f_P"]}


def test_an_engine_writes_the_same_memory_with_the_memo_as_without(tmp_path):
    turns = _turns(generate_long_chats(1, seed=5, target_tokens=60_000)[0])
    emb = HashingEmbedder(dim=64)
    with (
        MemoryEngine.open(tmp_path / "hinted", embedder=emb, stamp_arrival=False) as hinted,
        MemoryEngine.open(tmp_path / "plain", embedder=emb, stamp_arrival=False) as plain,
    ):
        hinted._theme_memo = ThemeMemo(min_themes=1)
        plain._theme_memo = ThemeMemo(min_themes=10**9)  # never holds one
        rng = np.random.default_rng(0)
        for i in range(0, len(turns), 6):
            for eng in (hinted, plain):
                eng.add(turns[i : i + 6], user_id="u")
            if i and i % 30 == 0:  # a delete between adds: the hint left by the add is stale
                at = None
                for eng in (hinted, plain):  # the same message (ids are drawn by each engine)
                    ids = [u["id"] for u in eng.get_all(user_id="u") if u["type"] == "message"]
                    at = int(rng.integers(len(ids))) if at is None else at
                    eng.delete(ids[at], user_id="u")
        assert len(hinted._theme_memo) == 1
        a, b = _columns(hinted), _columns(plain)
        assert a.keys() == b.keys()
        for k in a:
            if k.endswith(".id") or k.endswith("_id"):  # drawn by each engine
                continue
            u, v = np.asarray(a[k]), np.asarray(b[k])
            same = u.tolist() == v.tolist() if u.dtype == object else u.tobytes() == v.tobytes()
            assert u.shape == v.shape and u.dtype == v.dtype and same, k
        assert len(hinted.get_all(user_id="u")) == len(plain.get_all(user_id="u"))


def _held_matches_the_memory(eng: MemoryEngine) -> bool:
    """The memo's entry for the one memory, if any, holds that memory's themes as stored now."""
    (key,) = eng.bank.index
    hint = eng._theme_memo.get(key)
    if hint is None:
        return True
    sl = eng.bank.slice(eng.bank.index[key])
    sem, theme = sl.cols["sem"], sl.cols["theme"]
    now = PartitionState.from_labels(sem["x"], theme["id"][sem["theme"]], np.array([0, len(sem["x"])]))
    return (
        hint.labels.tobytes() == now.theme_label.tobytes() and hint.sums.tobytes() == now.theme_sum.tobytes()
    )


def test_what_a_delete_forgets_leaves_the_memo_and_a_failed_write_adds_nothing(tmp_path, monkeypatch):
    turns = _turns(generate_long_chats(1, seed=2, target_tokens=40_000)[0])
    with MemoryEngine.open(tmp_path / "s", embedder=HashingEmbedder(dim=64), stamp_arrival=False) as eng:
        eng._theme_memo = ThemeMemo(min_themes=1)
        eng.add(turns[:-10], user_id="u")
        assert len(eng._theme_memo) == 1
        for kind in ("semantic", "theme", "episode", "message"):
            unit = next(u for u in eng.get_all(user_id="u") if u["type"] == kind)
            eng.delete(unit["id"], user_id="u")
            assert _held_matches_the_memory(eng), kind
        eng.add(turns[-10:-5], user_id="u")
        before = eng._theme_memo.get(next(iter(eng.bank.index)))

        def refuse(*a, **k):
            raise OSError("disk full")

        monkeypatch.setattr(eng.store, "commit", refuse)
        with pytest.raises(OSError):
            eng.add(turns[-5:], user_id="u")
        assert eng._theme_memo.get(next(iter(eng.bank.index))) is before
