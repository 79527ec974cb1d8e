"""``limit`` counts what the context shows (themes never show), and a statement that superseded
another never ranks below it: ``engine.results`` on hand-made results and on the live engine."""

from __future__ import annotations

from xmemory_gpu.embed import load_embedder
from xmemory_gpu.engine import MemoryEngine
from xmemory_gpu.engine.results import current_first, limit_units, mark_relevance, render, show_current
from xmemory_gpu.retrieve.context import assemble
from xmemory_gpu.retrieve.result import RetrievalResult, RetrievedUnit


def _count(texts: list[str]) -> list[int]:
    return [len(t.split()) for t in texts]


def _unit(kind: str, uid: str, text: str, rel: float, ts: float | None = None) -> RetrievedUnit:
    key = "similarity" if kind == "episode" else "relevance"
    return RetrievedUnit(kind, uid, text, len(text.split()), rel, [f"m-{uid}"], ts, {key: rel}, relevance=rel)


def _result(units: list[RetrievedUnit]) -> RetrievalResult:
    r = RetrievalResult("q", "m", "xmemory", units, assemble(units), 0, "words")
    r.context_tokens = _count([r.context])[0]
    return mark_relevance(r)


def test_a_theme_neither_counts_nor_stays_under_a_limit():
    r = _result(
        [
            _unit("theme", "theme:1", "Work and home", 0.9),
            _unit("semantic", "semantic:1", "the user works at Google.", 0.6),
            _unit("episode", "episode:1", "the user: I work at Google.", 0.5),
        ]
    )
    render(limit_units(r, 1, None), _count, None)
    assert [u.id for u in r.units] == ["semantic:1"] and "works at Google" in r.context
    assert r.notes == ["2 units left out (past limit 1)"]


def test_themes_stay_without_a_limit():
    r = _result([_unit("theme", "theme:1", "Work", 0.9), _unit("semantic", "semantic:1", "a b c", 0.2)])
    limit_units(r, None, 0.5)
    assert [u.id for u in r.units] == ["theme:1"]


def _changed() -> RetrievalResult:
    """The stale nurse statement (0.716) above its successor (0.637) and another fact (0.70)."""
    return _result(
        [
            _unit("semantic", "semantic:1", "the user works as a nurse.", 0.716, 1704700000.0),
            _unit("semantic", "semantic:3", "the user lives in Lisbon.", 0.70, 1711000000.0),
            _unit("semantic", "semantic:5", "the user started at Google.", 0.637, 1714600000.0),
        ]
    )


SUP = {"semantic:1": ("semantic:5", 1714600000.0)}


def test_the_current_value_comes_first_and_takes_the_stale_ones_rank():
    r = render(show_current(_changed(), SUP, _count), _count, None)
    assert [u.id for u in r.units] == ["semantic:5", "semantic:1", "semantic:3"]
    assert r.units[1].text.startswith("previously, until 2024-05: ")
    assert r.units[0].relevance == 0.716 and r.units[0].scores["relevance"] == 0.637  # its own cosine kept
    assert r.context.index("Google") < r.context.index("nurse")


def test_a_limit_keeps_the_successor_over_its_stale_statement():
    for limit, want in ((1, ["semantic:5"]), (2, ["semantic:5", "semantic:1"])):
        r = limit_units(show_current(_changed(), SUP, _count), limit, None)
        assert [u.id for u in r.units] == want
    r = limit_units(show_current(_changed(), SUP, _count), None, 0.7)  # the threshold too
    assert [u.id for u in r.units] == ["semantic:5", "semantic:1", "semantic:3"]


def test_a_chain_of_changes_reads_newest_first():
    units = [
        _unit("semantic", f"semantic:{k}", f"fact {k}", rel) for k, rel in ((1, 0.9), (3, 0.5), (2, 0.7))
    ]
    got = current_first(units, {"semantic:1": "semantic:2", "semantic:2": "semantic:3"})
    assert [u.id for u in got] == ["semantic:3", "semantic:2", "semantic:1"]
    assert [u.relevance for u in got] == [0.9, 0.9, 0.9]
    units = [
        _unit("semantic", f"semantic:{k}", f"fact {k}", rel) for k, rel in ((3, 0.5), (2, 0.7), (1, 0.9))
    ]
    got = current_first(units, {"semantic:1": "semantic:2", "semantic:2": "semantic:3"})  # in order already
    assert [u.id for u in got] == ["semantic:3", "semantic:2", "semantic:1"]
    assert [u.relevance for u in got] == [0.9, 0.9, 0.9]


def test_limit_one_shows_one_unit_on_the_live_engine(tmp_path):
    with MemoryEngine.open(tmp_path / "s", embedder=load_embedder("hashing:384")) as eng:
        eng.add(
            [
                {"role": "user", "content": f"Note {i}: I bought a {w} in town last weekend."}
                for i, w in enumerate(["lamp", "kayak", "violin", "teapot", "bicycle"])
            ],
            user_id="u",
        )
        full = eng.search("What did I buy in town?", user_id="u", threshold=0.0)[0]
        assert any(u.type == "theme" for u in full.units)  # the case: a theme ranks among the units
        for limit in (1, 2, 3):
            r = eng.search("What did I buy in town?", user_id="u", threshold=0.0, limit=limit)[0]
            assert len(r.units) == limit and all(u.type != "theme" for u in r.units)
            assert all(u.text in r.context for u in r.units) and r.context_tokens > 0


def test_the_context_is_rendered_once_from_the_kept_units_within_the_budget():
    r = limit_units(show_current(_changed(), SUP, _count), 2, None)
    render(r, _count, 9, name="Priya")
    assert [u.id for u in r.units] == ["semantic:5"]  # the relabelled stale fact no longer fits 9 words
    assert r.context == assemble(r.units) and "Priya started at Google" in r.context
    assert r.context_tokens == _count([r.context])[0] <= 9
