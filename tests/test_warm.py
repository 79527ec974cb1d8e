"""``MemoryEngine.warm``: a memory made ready for its next requests (loaded, its themes' f(P) state held,
the caches its searches fill on first use filled) writes and searches exactly as it would without it,
and its first write starts from the held state; ``TokenBudget.prime`` counts as the tokenizer does."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from xmemory_gpu.construct import themes
from xmemory_gpu.construct.theme_memo import HeldThemes, ThemeMemo
from xmemory_gpu.datasets.synthetic import generate_long_chats
from xmemory_gpu.embed.hashing import HashingEmbedder
from xmemory_gpu.engine import MemoryEngine
from xmemory_gpu.retrieve import context
from xmemory_gpu.retrieve.context import TokenBudget
from xmemory_gpu.tokens import WhitespaceCounter, default_counter

EMB = HashingEmbedder(dim=64)
QUERIES = ("What does the user plan for the weekend?", "Which city was mentioned?", "What was decided?")


def _turns(conv: dict) -> list[dict]:
    c = conv["conversation"]
    keys = sorted((k for k in c if k.startswith("session_") and k[8:].isdigit()), key=lambda s: int(s[8:]))
    role = lambda t: "user" if t["speaker"] == c["speaker_a"] else "assistant"  # noqa: E731
    return [{"role": role(t), "content": t["text"], "session": int(k[8:])} for k in keys for t in c[k]]


def _columns(eng: MemoryEngine) -> dict:
    (key,) = eng.bank.index
    sl = eng.bank.slice(eng.bank.index[key])
    return {f"{lv}.{n}": a for lv, cols in sl.cols.items() for n, a in cols.items()} | {"f": sl.stats["f_P"]}


def _found(eng: MemoryEngine) -> list:
    out = []
    for q in QUERIES:
        (r,) = eng.search(q, user_id="u", budget_tokens=300)
        out.append([(u.type, u.text, u.relevance) for u in r.units])
    return out


@pytest.fixture(scope="module")
def stored(tmp_path_factory):
    """A store holding one memory (user "u") of a synthetic chat, and the turns that come after it."""
    turns = _turns(generate_long_chats(1, seed=4, target_tokens=30_000)[0])
    root = tmp_path_factory.mktemp("warm") / "s"
    with MemoryEngine.open(root, embedder=EMB, stamp_arrival=False) as eng:
        for i in range(0, len(turns) - 8, 10):
            eng.add(turns[i : min(i + 10, len(turns) - 8)], user_id="u")
    return root, turns[-8:]


def test_a_warmed_memory_writes_and_searches_as_a_cold_one(stored, tmp_path, monkeypatch):
    root, more = stored
    shutil.copytree(root, tmp_path / "warm")
    shutil.copytree(root, tmp_path / "cold")
    with (
        MemoryEngine.open(tmp_path / "warm", embedder=EMB, stamp_arrival=False) as warm,
        MemoryEngine.open(tmp_path / "cold", embedder=EMB, stamp_arrival=False) as cold,
    ):
        warm._theme_memo = ThemeMemo(min_themes=1, min_state_rows=1)
        cold._theme_memo = ThemeMemo(min_themes=1, min_state_rows=1)  # holds one from its first write on
        got = warm.warm(user_id="u")
        assert got["memory"] and got["loaded"] and got["themes_held"] and got["words_counted"] > 0
        key = next(iter(warm.bank.index))
        assert isinstance(warm._theme_memo.get(key), HeldThemes)
        # again: nothing left to do (the held state still holds, the words are counted)
        again = warm.warm(user_id="u")
        assert again["themes_held"] and not again["loaded"] and again["words_counted"] == 0
        assert _found(warm) == _found(cold)
        built = []
        real = themes.PartitionState.from_labels
        monkeypatch.setattr(
            themes.PartitionState, "from_labels", lambda *a, **k: built.append(1) or real(*a, **k)
        )
        for i in range(0, len(more), 2):
            warm.add(more[i : i + 2], user_id="u")
            if i == 0:
                assert not built  # the first write grew the held state: none was built
            cold.add(more[i : i + 2], user_id="u")
            if i == 0:
                assert built  # ... where the cold engine's built one
        _same_memory(warm, cold)
        assert _found(warm) == _found(cold)
        for eng in (warm, cold):  # a delete after them: the same memory again
            ids = [u["id"] for u in eng.get_all(user_id="u") if u["type"] == "message"]
            eng.delete(ids[5], user_id="u")
        _same_memory(warm, cold)
        assert _found(warm) == _found(cold)


def _same_memory(one: MemoryEngine, other: MemoryEngine) -> None:
    a, b = _columns(one), _columns(other)
    assert a.keys() == b.keys()
    for k in a:
        if k.endswith(".id"):  # drawn by each engine
            continue
        u, v = np.asarray(a[k]), np.asarray(b[k])
        same = u.tolist() == v.tolist() if u.dtype == object else u.tobytes() == v.tobytes()
        assert u.shape == v.shape and u.dtype == v.dtype and same, k


def test_warm_of_no_memory_and_of_a_read_only_engine(stored):
    root, _ = stored
    with MemoryEngine.open(root, embedder=EMB, read_only=True) as ro:
        assert ro.warm(user_id="nobody") == {
            "memory": False,
            "loaded": False,
            "themes_held": False,
            "words_counted": 0,
        }
        got = ro.warm(user_id="u")
        assert got["memory"] and got["loaded"] and not got["themes_held"]
        assert len(ro._theme_memo) == 0
        with pytest.raises(ValueError, match="user_id"):
            ro.warm()


def test_prime_counts_as_the_tokenizer_and_stops_at_its_share(monkeypatch):
    texts = ["the cat sat on the mat", "the dog, quietly: sat", "résumé naïve 12:30 the"]
    tb, plain = TokenBudget(default_counter()), TokenBudget(default_counter())
    n = tb.prime(texts)
    assert n == len({w for t in texts for w in t.split(" ")})
    assert tb.count(texts) == plain.count(texts) == default_counter().count(texts)
    assert tb.prime(texts) == 0  # every word counted already
    monkeypatch.setattr(context, "PRIMED_MAX", 2)
    small = TokenBudget(WhitespaceCounter())
    assert small.prime(["b a a", "c a b"]) == 2
    assert set(small._words) == {"a", "b"}  # the most frequent: a (3), then b (2) before c (1)

    class Whole(WhitespaceCounter):
        additive = False

    assert TokenBudget(Whole()).prime(texts) == 0


def test_a_write_fills_the_search_caches_of_the_rows_it_added(stored, tmp_path, monkeypatch):
    root, more = stored
    shutil.copytree(root, tmp_path / "a")
    shutil.copytree(root, tmp_path / "b")
    with (
        MemoryEngine.open(tmp_path / "a", embedder=EMB, stamp_arrival=False) as primed,
        MemoryEngine.open(tmp_path / "b", embedder=EMB, stamp_arrival=False) as plain,
    ):
        calls = []
        real = type(primed.retriever).prime

        def prime(self, mid, since=None):
            if self is not primed.retriever:
                return 0  # the plain engine fills nothing ahead
            calls.append(since)
            return real(self, mid, since)

        monkeypatch.setattr(type(primed.retriever), "prime", prime)
        primed.add(more[:2], user_id="u")
        plain.add(more[:2], user_id="u")
        (since,) = calls
        (key,) = primed.bank.index
        n_msg = int(primed.bank.msg.seg.lengths[primed.bank.index[key]])
        assert since["msg"] == n_msg - 2 and set(since) == {"msg", "epi", "sem", "psg"}
        new_words = {w for t in (m["content"] for m in more[:2]) for w in t.split(" ")}
        assert new_words <= set(primed.retriever.budget._words)
        assert _found(primed) == _found(plain)
        ids = [u["id"] for u in primed.get_all(user_id="u") if u["type"] == "message"]
        primed.delete(ids[3], user_id="u")  # rows renumbered: the added ones filled, the rest carried
        ids = [u["id"] for u in plain.get_all(user_id="u") if u["type"] == "message"]
        plain.delete(ids[3], user_id="u")
        assert _found(primed) == _found(plain)


def test_the_async_engine_warms_as_the_engine_does(stored, tmp_path):
    import asyncio

    from xmemory_gpu import AsyncMemoryEngine

    root, _ = stored
    shutil.copytree(root, tmp_path / "s")

    async def main() -> dict:
        async with AsyncMemoryEngine.open(tmp_path / "s", embedder=EMB, max_workers=2) as mem:
            return await mem.warm(user_id="u")

    got = asyncio.run(main())
    assert got["memory"] and got["loaded"] and got["words_counted"] > 0
