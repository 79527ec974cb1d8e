"""A memory's themes as its last growth left them, for the next (``HeldThemes``, ``ThemeTop2``,
``construct.theme_memo``): the partition state, and the memory an engine writes, are the same bits
with them as without them, whatever they hold; and what a growth takes from the memory before it (a
theme's summary and columns where its members did not change) is what it would compute again."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from xmemory_gpu.config import ThemeConfig
from xmemory_gpu.construct.finalize import PreviousThemes
from xmemory_gpu.construct.theme_memo import HeldThemes, ThemeMemo
from xmemory_gpu.construct.theme_state import ThemeState
from xmemory_gpu.construct.themes import grow_themes
from xmemory_gpu.datasets.synthetic import generate_long_chats
from xmemory_gpu.embed.hashing import HashingEmbedder
from xmemory_gpu.engine import MemoryEngine, writes
from xmemory_gpu.memory.codec import theme_columns, theme_columns_from
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
        hinted._theme_memo = ThemeMemo(min_themes=1, min_state_rows=1)
        plain._theme_memo = ThemeMemo(min_themes=10**9)  # never holds one
        rng = np.random.default_rng(0)
        kept_through_delete = 0
        for i in range(0, len(turns), 6):
            for eng in (hinted, plain):
                eng.add(turns[i : i + 6], user_id="u")
            if i and i % 12 == 0:  # deletes between adds: the state left by the add is stale
                for kind in ("message", "semantic"):
                    at = None
                    for eng in (hinted, plain):  # the same unit (ids are drawn by each engine)
                        ids = [u["id"] for u in eng.get_all(user_id="u") if u["type"] == kind]
                        at = int(rng.integers(len(ids))) if at is None else at
                        eng.delete(ids[at], user_id="u")
                    # a delete's growth keeps the memory's state (built for the next write), and
                    # records its f(P): the plain engine's (scored again) to a relative 1e-12
                    kept = isinstance(hinted._theme_memo.get(next(iter(hinted.bank.index))), HeldThemes)
                    kept_through_delete += kept
                    fa, fb = _columns(hinted)["f"], _columns(plain)["f"]
                    assert fa == pytest.approx(fb, rel=1e-12, abs=0), (i, kind)
                    assert kept or repr(fa) == repr(fb), (i, kind)
        assert kept_through_delete >= 4
        assert len(hinted._theme_memo) == 1
        assert isinstance(hinted._theme_memo.get(next(iter(hinted.bank.index))), HeldThemes)
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
    if isinstance(hint, HeldThemes):
        hint = hint.top2()
    sl = eng.bank.slice(eng.bank.index[key])
    sem, theme = sl.cols["sem"], sl.cols["theme"]
    now = PartitionState.from_labels(sem["x"], theme["id"][sem["theme"]], np.array([0, len(sem["x"])]))
    return (
        hint.labels.tobytes() == now.theme_label.tobytes() and hint.sums.tobytes() == now.theme_sum.tobytes()
    )


def test_what_a_delete_forgets_leaves_the_memo_and_a_failed_write_adds_nothing(tmp_path, monkeypatch):
    turns = _turns(generate_long_chats(1, seed=2, target_tokens=40_000)[0])
    with MemoryEngine.open(tmp_path / "s", embedder=HashingEmbedder(dim=64), stamp_arrival=False) as eng:
        eng._theme_memo = ThemeMemo(min_themes=1, min_state_rows=1)
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
        monkeypatch.undo()
        # a write that fails after its growth and before its commit leaves nothing waiting either
        monkeypatch.setattr(writes, "carry_over", refuse)
        with pytest.raises(OSError):
            eng.add(turns[-5:], user_id="u")
        assert eng._theme_memo.get(next(iter(eng.bank.index))) is before and not eng._theme_memo._pending


def _grown_state(rng, n_old: int, n_new: int, d: int = 8) -> tuple[np.ndarray, list[np.ndarray]]:
    """Unit float32 rows of a memory: its first n_old rows, then one step of n_new more."""
    x = rng.standard_normal((n_old + n_new, d)).astype(np.float32)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    return x, [np.arange(n_old, n_old + n_new)]


def _grow_once(x: np.ndarray, n_attached: int, cfg: ThemeConfig, hints) -> tuple[ThemeState, np.ndarray]:
    """One memory's rows [:n_attached] attached in one step, then the rest in another; its state and f."""
    st = ThemeState(x, 4, True)
    grow_themes([st], [[np.arange(n_attached)]], cfg)
    f = grow_themes([st], [[np.arange(n_attached, len(x))]], cfg, hints=hints)
    return st, f


def test_a_held_state_is_taken_only_where_its_rows_and_labels_are_the_memorys(monkeypatch):
    rng = np.random.default_rng(3)
    cfg = ThemeConfig(size_cap=6)
    x, _ = _grown_state(rng, 60, 9)
    x[7, 0] = 0.0  # a zero whose sign bit a held copy may not share
    first = ThemeState(x[:60], 4, True)
    hints = [None]
    grow_themes([first], [[np.arange(60)]], cfg, hints=hints)
    (held,) = hints
    assert isinstance(held, HeldThemes) and len(held.state.labels) == 60 and held.rows.dtype == np.float32
    want_st, want_f = _grow_once(x, 60, cfg, None)  # no hint: the state built over every row
    built = []
    from_labels = PartitionState.from_labels.__func__
    monkeypatch.setattr(
        PartitionState,
        "from_labels",
        classmethod(lambda cls, *a, **k: built.append(1) or from_labels(cls, *a, **k)),
    )
    for case in ("held", "prefix", "one bit", "minus zero", "labels", "top2", "none"):
        h: object = held
        if case in ("one bit", "minus zero"):
            rows = held.rows.copy()
            rows.view(np.uint32)[(5, 3) if case == "one bit" else (7, 0)] ^= (
                1 if case == "one bit" else 1 << 31
            )
            h = HeldThemes(held.state, rows)
        elif case == "labels":
            st = held.state.detached()
            st.labels = st.labels.copy()
            st.labels[0] = st.labels[-1] + 1
            h = HeldThemes(st, held.rows)
        elif case == "prefix":  # the state of the first 50 rows: theirs, and the rest are added to it
            h = HeldThemes(PartitionState.from_labels(x[:50], held.state.labels[:50], [0, 50]), x[:50])
        elif case == "top2":
            h = held.top2()
        built.clear()
        got_st, got_f = _grow_once(x, 60, cfg, [None if case == "none" else h])
        # the first growth builds its state; the second takes the held one or builds it again
        assert len(built) == (1 if case in ("held", "prefix") else 2), case
        assert got_f is not None and got_f.tobytes() == want_f.tobytes(), case
        assert got_st.label.tobytes() == want_st.label.tobytes(), case
    # the memo holds a state too large for it, or of a small memory, as its top-2
    for memo in (
        ThemeMemo(max_bytes=held.nbytes - 1, min_themes=1, min_state_rows=1),
        ThemeMemo(min_themes=1),
    ):
        memo.put("m", held)
        memo.publish(["m"])
        assert isinstance(memo.get("m"), ThemeTop2) and memo.nbytes == held.top2().nbytes
    memo = ThemeMemo(min_themes=1, min_state_rows=60)
    memo.put("m", held)
    memo.publish(["m"])
    assert memo.get("m") is held and memo.nbytes == held.nbytes
    held.state.detached()._appended(np.zeros((10_000, held.rows.shape[1])))  # a copy's growth moves no bytes
    memo.drop(["m"])
    assert memo.nbytes == 0


def test_a_copy_of_a_held_state_grows_apart_from_it():
    rng = np.random.default_rng(4)
    x = rng.standard_normal((40, 6))
    labels = rng.integers(0, 7, 40)
    st = PartitionState.from_labels(x[:30], labels[:30], [0, 30])
    before = {name: np.asarray(getattr(st, name)).tobytes() for name in COLUMNS} | {"x": st.x.tobytes()}
    a, b = st.detached(), st.detached()
    a.extend({0: (x[30:35], labels[30:35])})
    b.extend({0: (x[30:], labels[30:])})  # appends where a's rows are: a's view keeps its own
    a.apply([(0, [int(labels[0])], [np.flatnonzero(a.labels == labels[0])], [99])])
    _same(b, PartitionState.from_labels(x, labels, [0, 40]))
    _same(st, PartitionState.from_labels(x[:30], labels[:30], [0, 30]))
    assert {name: np.asarray(getattr(st, name)).tobytes() for name in COLUMNS} | {
        "x": st.x.tobytes()
    } == before


@pytest.mark.parametrize("seed", range(4))
def test_what_a_growth_keeps_of_the_themes_before_it_is_what_it_would_compute(seed):
    rng = np.random.default_rng(seed)
    n_old, n_new, k, d = 50, 12, 9, 5
    x = rng.standard_normal((n_old + n_new, d)).astype(np.float32)
    old_of = rng.integers(0, k, n_old)
    old_ids = list(range(100, 100 + k))
    old = theme_columns(x[:n_old], old_of, k)
    new_ids = old_ids[:-1] + [200, 201]  # the last theme goes, two open
    new_of = np.concatenate([old_of, rng.integers(0, k + 1, n_new)])
    new_of[new_of == k - 1] = k  # the last one's members join the first new theme
    new_of[rng.choice(n_old, 3, replace=False)] = rng.integers(0, k + 1, 3)  # a few rows move
    prev = PreviousThemes(np.asarray(old_ids)[old_of], old_ids, {t: f"theme {t}" for t in old_ids[::2]})
    labels = np.asarray(new_ids)[new_of]
    same = prev.unchanged(labels)
    for t in old_ids:
        before = set(np.flatnonzero(np.asarray(old_ids)[old_of] == t).tolist())
        after = set(np.flatnonzero(labels == t).tolist())
        assert (t in same) == (before == after), t
    assert prev.kept(labels) == same & set(old_ids[::2])
    assert prev.unchanged(labels[: n_old - 1]) == set()  # fewer rows than before: nothing is taken
    row = {t: r for r, t in enumerate(old_ids)}
    old_rows = np.array([row[t] if t in same else -1 for t in new_ids])
    got, want = theme_columns_from(old, old_rows, x, new_of, k + 1), theme_columns(x, new_of, k + 1)
    assert got.keys() == want.keys()
    for name in want:
        assert got[name].dtype == want[name].dtype and got[name].tobytes() == want[name].tobytes(), name
