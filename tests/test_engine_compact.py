"""The bank's holes: a memory that outgrows its rows moves and leaves a hole; ``compact`` (and a write,
once the wasted rows outnumber the live ones) reclaims them without changing what any memory holds."""

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


def _grow(eng: MemoryEngine, user: str, n: int) -> None:
    for i in range(0, n, 2):
        eng.add(_chat(n, user)[i : i + 2], user_id=user)


def test_compact_reclaims_the_holes_and_keeps_every_memory(tmp_path, monkeypatch):
    monkeypatch.setattr(paging, "COMPACT_MIN_ROWS", 10**9)  # no compaction on writes here
    with MemoryEngine.open(tmp_path / "s", embedder="hashing:64") as eng:
        _grow(eng, "ana", 40)
        _grow(eng, "bo", 16)
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
        _grow(eng, "ana", 60)
        assert seen and all(w > paging.COMPACT_WASTE * live for w, live in seen)
        wasted, live = eng.bank.wasted_rows()
        assert wasted <= max(paging.COMPACT_WASTE * live, 0) + 1e-9
        units = eng.get_all(user_id="ana")
        assert len([u for u in units if u["type"] == "message"]) == 60
    with MemoryEngine.open(tmp_path / "s", embedder="hashing:64") as again:
        assert again.get_all(user_id="ana") == units
