"""mem0's names on the engine: ``update``, ``reset``, ``metadata`` on add, ``filters`` on search and
``get_all``, ``limit`` and ``threshold`` on search, ``user_name`` / a message's ``name``, arrival
stamps; and ``memory.subset.restrict`` (what a filtered search runs over) against a direct rebuild."""

from __future__ import annotations

import json

import numpy as np
import pytest

from xmemory_gpu.construct.pipeline import theme_summary
from xmemory_gpu.embed.hashing import HashingEmbedder
from xmemory_gpu.engine import MemoryEngine
from xmemory_gpu.engine.results import relevance
from xmemory_gpu.memory.hierarchy import view
from xmemory_gpu.memory.subset import restrict
from xmemory_gpu.retrieve.strategies import strategy_names

EMB = HashingEmbedder(128)
TOKEN = "Wibblethorpe"
TRAVEL = [
    ("I flew to Lisbon in May and ate custard tarts by the river.", "t1"),
    ("In Lisbon I rode the old yellow tram up the hill every morning.", "t2"),
]
HOBBY = [
    ("I bought a second-hand violin and practise scales every evening.", "h1"),
    ("My violin teacher says my bowing has improved a lot this month.", "h2"),
]
PLAIN = [("I water the tomato plants on the balcony after dinner.", "p1")]


def _msgs(rows):
    return [
        {"role": "user", "content": t, "id": i, "timestamp": 1_700_000_000 + 3600 * n}
        for n, (t, i) in enumerate(rows)
    ]


@pytest.fixture
def eng(tmp_path):
    with MemoryEngine.open(tmp_path / "s", embedder=EMB) as e:
        e.add(_msgs(TRAVEL), user_id="u", metadata={"topic": "travel", "year": 2024})
        e.add(_msgs(HOBBY), user_id="u", metadata={"topic": "hobby", "year": 2024, "loud": True})
        e.add(_msgs(PLAIN), user_id="u")
        yield e


def test_top_level_names():
    import xmemory_gpu
    from xmemory_gpu import AsyncMemoryClient, MemoryClient
    from xmemory_gpu import MemoryEngine as Top

    assert (
        Top is MemoryEngine
        and MemoryClient.__name__ == "MemoryClient"
        and AsyncMemoryClient.__name__ == "AsyncMemoryClient"
    )
    assert {"MemoryEngine", "MemoryClient", "AsyncMemoryClient"} <= set(xmemory_gpu.__all__)


def test_metadata_is_returned_and_filters_select_by_it(eng):
    units = eng.get_all(user_id="u")
    md = {u["id"]: u.get("metadata") for u in units if u["type"] == "message"}
    assert md == {
        "t1": {"topic": "travel", "year": 2024},
        "t2": {"topic": "travel", "year": 2024},
        "h1": {"topic": "hobby", "year": 2024, "loud": True},
        "h2": {"topic": "hobby", "year": 2024, "loud": True},
        "p1": None,
    }
    src = {u["id"]: set(u.get("message_ids", [u["id"]])) for u in units if u["type"] != "theme"}
    for flt, ok in (
        ({"topic": "travel"}, {"t1", "t2"}),
        ({"year": 2024}, {"t1", "t2", "h1", "h2"}),
        ({"year": 2024.0}, {"t1", "t2", "h1", "h2"}),
        ({"loud": True}, {"h1", "h2"}),
        ({"loud": 1}, set()),
        ({"topic": "travel", "loud": True}, set()),
        ({"nope": None}, set()),
    ):
        got = eng.get_all(user_id="u", filters=flt)
        assert {u["id"] for u in got if u["type"] == "message"} == ok, flt
        for u in got:  # every derived unit comes from matching messages only
            assert u["type"] == "theme" or src[u["id"]] <= ok, (flt, u)
        derived = {i for i, s in src.items() if s <= ok}
        assert {u["id"] for u in got if u["type"] != "theme"} == derived, flt
    assert eng.get_all(user_id="u", filters={}) == units


@pytest.mark.parametrize("strategy", sorted(set(strategy_names()) - {"xmemory-llm", "llm-select"}))
def test_filtered_search_sees_only_matching_messages(eng, strategy):
    for flt, ok, banned in (
        ({"topic": "travel"}, {"t1", "t2"}, ("violin", "tomato")),
        ({"topic": "hobby"}, {"h1", "h2"}, ("Lisbon", "tomato")),
    ):
        for r in eng.search(
            ["What did I buy?", "Where did I travel?"],
            user_id="u",
            strategy=strategy,
            budget_tokens=400,
            filters=flt,
        ):
            assert set(r.message_ids) <= ok, (strategy, flt, r.message_ids)
            assert r.units and not any(b in r.context for b in banned), (strategy, flt, r.context)
            assert not any(b in u.text for u in r.units for b in banned)
            for u in r.units:  # ids the whole memory resolves
                if u.type in ("semantic", "episode", "theme", "message"):
                    eng.get(u.id, user_id="u")
    r = eng.search("anything", user_id="u", filters={"topic": "cooking"})[0]
    assert r.units == [] and r.notes == ["no message matches the filters"]


def test_restrict_to_everything_searches_the_same(eng):
    mem = view(eng.bank, eng.bank.index[eng.bank.memory_ids[0]])
    whole = restrict(mem, {m.id for m in mem.messages}, theme_summary)
    for name in (
        "sem_knn_idx",
        "sem_knn_sim",
        "theme_knn_idx",
        "theme_knn_sim",
        "theme_of",
        "sem_x",
        "msg_x",
        "epi_x",
    ):
        assert np.array_equal(getattr(whole, name), getattr(mem, name)), name
    assert [t.summary for t in whole.themes] == [t.summary for t in mem.themes]


def test_restrict_graphs_are_the_kept_edges_in_order(rng):
    """Against a direct rebuild: each kept row keeps exactly its edges to kept rows, in order."""
    from xmemory_gpu.memory.subset import _graph

    n, k = 40, 6
    idx = rng.integers(-1, n, size=(n, k)).astype(np.int32)
    sim = rng.standard_normal((n, k)).astype(np.float32)
    keep = rng.random(n) < 0.6
    new_of = {int(o): j for j, o in enumerate(np.flatnonzero(keep))}
    gi, gs = _graph(idx, sim, keep)
    for j, o in enumerate(np.flatnonzero(keep)):
        want = [(new_of[int(a)], float(b)) for a, b in zip(idx[o], sim[o]) if a >= 0 and int(a) in new_of]
        got = [(int(a), float(b)) for a, b in zip(gi[j], gs[j]) if a >= 0]
        assert got == want
        assert np.all(np.isneginf(gs[j][gi[j] < 0]))


def test_limit_and_threshold(eng):
    full = eng.search("What did I buy?", user_id="u", strategy="memory-only", budget_tokens=400)[0]
    assert len(full.units) > 2
    two = eng.search("What did I buy?", user_id="u", strategy="memory-only", budget_tokens=400, limit=2)[0]
    assert len(two.units) == 2
    best = sorted(range(len(full.units)), key=lambda i: (-relevance(full.units[i]), i))[:2]
    assert [u.id for u in two.units] == [full.units[i].id for i in sorted(best)]
    assert all(u.text in two.context for u in two.units)
    assert not any(
        u.text in two.context
        for u in full.units
        if u.id not in {v.id for v in two.units} and u.type != "theme"
    )
    assert two.context_tokens < full.context_tokens and any("past limit 2" in n for n in two.notes)
    cut = sorted(relevance(u) for u in full.units)[len(full.units) // 2]
    hi = eng.search("What did I buy?", user_id="u", strategy="memory-only", budget_tokens=400, threshold=cut)[
        0
    ]
    assert hi.units and all(relevance(u) >= cut for u in hi.units)
    assert eng.search("What did I buy?", user_id="u", threshold=1.0)[0].units == []
    for kw, field in (
        ({"limit": 0}, "limit"),
        ({"limit": True}, "limit"),
        ({"threshold": 2}, "threshold"),
        ({"threshold": "0.1"}, "threshold"),
        ({"filters": {"a": [1]}}, "filters"),
        ({"filters": "x"}, "filters"),
    ):
        with pytest.raises(ValueError, match=field):
            eng.search("q", user_id="u", **kw)


def test_update_rederives_and_forgets_the_old_text(tmp_path):
    store = tmp_path / "s"
    with MemoryEngine.open(store, embedder=EMB) as e:
        e.add(
            _msgs(
                [(f"My neighbour {TOKEN} keeps bees in the garden.", "n1"), ("I bought a red kayak.", "k1")]
            ),
            user_id="u",
            metadata={"topic": "home"},
        )
        assert TOKEN in json.dumps(e.get_all(user_id="u"))
        got = e.update("n1", "My neighbour Maple keeps goats in the garden.", user_id="u")
        assert got["text"] == "My neighbour Maple keeps goats in the garden." and got["metadata"] == {
            "topic": "home"
        }
        units = e.get_all(user_id="u")
        assert TOKEN not in json.dumps(units)
        assert any("goats" in u["text"] for u in units if u["type"] == "semantic")
        assert all(
            TOKEN not in r.context for r in e.search([TOKEN, "bees"], user_id="u", strategy="naive-rag")
        )
        assert e.history(user_id="u")[-1]["op"] == "update"
        with pytest.raises(ValueError, match="derived"):
            e.update(next(u["id"] for u in units if u["type"] == "semantic"), "x", user_id="u")
        with pytest.raises(KeyError):
            e.update("nope", "x", user_id="u")
        with pytest.raises(ValueError, match="text"):
            e.update("k1", 3, user_id="u")
        assert e.get("k1", user_id="u")["text"] == "I bought a red kayak."
    for f in store.rglob("*"):
        if f.is_file():
            assert TOKEN.encode() not in f.read_bytes(), f.name


def test_delete_drops_the_metadata_and_reset_forgets_everything(tmp_path):
    with MemoryEngine.open(tmp_path / "s", embedder=EMB) as e:
        e.add(_msgs(TRAVEL), user_id="u", metadata={"topic": "travel"})
        e.add(_msgs(HOBBY), user_id="v", agent_id="a")
        e.delete("t1", user_id="u")
        assert e.bank.stats[e.bank.index[e.bank.memory_ids[0]]]["message_metadata"].keys() == {"t2"}
        assert e.reset() == 2
        assert (
            e.scopes() == [] and e.get_all(user_id="u") == [] and e.get_all(user_id="v", agent_id="a") == []
        )
        assert e.reset() == 0
    with MemoryEngine.open(tmp_path / "s", embedder=EMB) as e:  # reopened: still empty
        assert e.stats()["memories"] == 0


def test_user_name_names_and_arrival_stamps(tmp_path):
    with MemoryEngine.open(tmp_path / "s", embedder=EMB) as e:
        ids = e.add(
            [
                {"role": "user", "content": "I adopted a grey cat called Pixel."},
                {"role": "assistant", "content": "Pixel is a lovely name."},
                {"role": "user", "name": "Sam", "content": "Sam here, I borrowed the laptop."},
                {"role": "user", "content": "Yesterday I moved flat.", "timestamp": "2024-03-01T10:00:00Z"},
            ],
            user_id="u",
            user_name="Maya",
        )
        later = e.add(
            [{"role": "user", "content": "I started a pottery class."}], user_id="u"
        )  # the name is remembered
        msgs = {u["id"]: u for u in e.get_all(user_id="u") if u["type"] == "message"}
        assert [msgs[i]["speaker"] for i in ids + later] == ["Maya", "assistant", "Sam", "Maya", "Maya"]
        assert [msgs[i]["timestamp_source"] for i in ids + later] == [
            "arrival",
            "arrival",
            "arrival",
            "given",
            "arrival",
        ]
        assert msgs[ids[0]]["timestamp"] == msgs[ids[1]]["timestamp"] > 1.7e9  # one arrival time per call
        with pytest.raises(ValueError, match="user_name"):
            e.add([{"role": "user", "content": "x"}], user_id="u", user_name="")
        with pytest.raises(ValueError, match="name"):
            e.add([{"role": "user", "name": 3, "content": "x"}], user_id="u")
    with MemoryEngine.open(tmp_path / "t", embedder=EMB, stamp_arrival=False) as e:
        (i,) = e.add([{"role": "user", "content": "No clock here."}], user_id="u")
        m = e.get(i, user_id="u")
        assert m["timestamp"] is None and m["timestamp_source"] is None
