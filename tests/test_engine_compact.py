"""The bank's holes: a memory that outgrows its rows moves and leaves a hole (the arena's last memory
grows where it is); ``compact`` (and a write, once the wasted rows outnumber the live ones) reclaims
them without changing what any memory holds."""

from __future__ import annotations

from xmemory_gpu.engine import MemoryEngine, paging


def _chat(n: int, who: str) -> list[dict]:
    return [
        {"role": "user", "content": f"{who} note {i}: I planted {i} tulips by the {i % 7} fence in spring."}
        for i in range(n)
    ]


def _found(eng: MemoryEngine, user: str) -> list:
    """A search's context and units (not its timings)."""
    return [(r.context, r.units) for r in eng.search("tulips by the fence", user_id=user)]


def _grow(eng: MemoryEngine, user: str, n: int, beside: str | None = None) -> None:
    """``n`` messages of ``user``, two per add; ``beside``: a message of that user after each add, so
    that ``user``'s rows are never the arena's last (a growth then moves them)."""
    for i in range(0, n, 2):
        eng.add(_chat(n, user)[i : i + 2], user_id=user)
        if beside is not None:
            eng.add([{"role": "user", "content": f"{beside} says hello {i}."}], user_id=beside)


def test_the_arenas_last_memory_grows_where_it_is(tmp_path, monkeypatch):
    monkeypatch.setattr(paging, "COMPACT_MIN_ROWS", 10**9)
    with MemoryEngine.open(tmp_path / "s", embedder="hashing:64") as eng:
        _grow(eng, "ana", 40)
        assert eng.bank.wasted_rows()[0] == 0


def test_compact_reclaims_the_holes_and_keeps_every_memory(tmp_path, monkeypatch):
    monkeypatch.setattr(paging, "COMPACT_MIN_ROWS", 10**9)  # no compaction on writes here
    with MemoryEngine.open(tmp_path / "s", embedder="hashing:64") as eng:
        _grow(eng, "ana", 40, beside="bo")
        _grow(eng, "bo", 16, beside="ana")
        wasted, live = eng.bank.wasted_rows()
        assert wasted > 0
        before = {u: eng.get_all(user_id=u) for u in ("ana", "bo")}
        hits = {u: _found(eng, u) for u in ("ana", "bo")}
        assert eng.compact() == wasted
        assert eng.bank.wasted_rows() == (0, live)
        assert all(eng.bank.levels[lv].seg.is_compact for lv in eng.bank.levels)
        assert {u: eng.get_all(user_id=u) for u in ("ana", "bo")} == before
        assert {u: _found(eng, u) for u in ("ana", "bo")} == hits
        _grow(eng, "bo", 4)  # writes go on after the swap
        assert len(eng.get_all(user_id="bo")) > len(before["bo"])


def test_a_write_compacts_once_the_waste_outgrows_the_live_rows(tmp_path, monkeypatch):
    monkeypatch.setattr(paging, "COMPACT_MIN_ROWS", 0)
    seen = []
    real = paging.Paging._compact

    def counting(self):
        seen.append(self.bank.wasted_rows())
        return real(self)

    monkeypatch.setattr(paging.Paging, "_compact", counting)
    with MemoryEngine.open(tmp_path / "s", embedder="hashing:64") as eng:
        _grow(eng, "ana", 60, beside="bo")
        assert seen and all(w > paging.COMPACT_WASTE * live for w, live in seen)
        wasted, live = eng.bank.wasted_rows()
        assert wasted <= max(paging.COMPACT_WASTE * live, 0) + 1e-9
        units = eng.get_all(user_id="ana")
        assert len([u for u in units if u["type"] == "message"]) == 60
    with MemoryEngine.open(tmp_path / "s", embedder="hashing:64") as again:
        assert again.get_all(user_id="ana") == units


def test_compaction_is_amortised_not_every_write(tmp_path, monkeypatch):
    monkeypatch.setattr(paging, "COMPACT_MIN_ROWS", 0)
    count = []
    real = paging.Paging._compact
    monkeypatch.setattr(paging.Paging, "_compact", lambda self: count.append(1) or real(self))
    with MemoryEngine.open(tmp_path / "s", embedder="hashing:64") as eng:
        for i, m in enumerate(_chat(120, "ana")):
            eng.add([m], user_id="ana")
            eng.add([{"role": "user", "content": f"bo says hello {i}."}], user_id="bo")
    assert 0 < len(count) <= 20  # a compaction per few moves of the memories, not one per add


def test_a_read_only_follower_compacts_on_refresh(tmp_path, monkeypatch):
    monkeypatch.setattr(paging, "COMPACT_MIN_ROWS", 0)
    with MemoryEngine.open(tmp_path / "s", embedder="hashing:64") as eng:
        eng.add(_chat(2, "ana"), user_id="ana")
        with MemoryEngine.open(tmp_path / "s", embedder="hashing:64", read_only=True) as ro:
            for i in range(0, 80, 2):
                eng.add(_chat(80, "ana")[i : i + 2], user_id="ana")
                ro.refresh()
            holes, live = ro.bank.wasted_rows()
            assert holes <= paging.COMPACT_WASTE * live
            assert ro.get_all(user_id="ana") == eng.get_all(user_id="ana")
