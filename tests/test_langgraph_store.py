"""``XMemoryStore``: LangGraph's ``BaseStore`` contract over the live engine (langgraph ships no store
test suite, so this one follows the contract: put / get / search / delete / list_namespaces, the
async twins, ``batch`` / ``abatch`` semantics, namespace rules), xMemory retrieval behind ``search``,
replaced and deleted values forgotten on disk, a write that fails or crashes leaving nothing behind,
and a real ``StateGraph`` that reads and writes memories through the store."""

from __future__ import annotations

import asyncio
import json
import time
from datetime import datetime
from pathlib import Path
from typing import TypedDict

import pytest

pytest.importorskip("langgraph")

from langgraph.config import get_store  # noqa: E402
from langgraph.graph import END, START, StateGraph  # noqa: E402
from langgraph.store.base import (  # noqa: E402
    BaseStore,
    GetOp,
    InvalidNamespaceError,
    Item,
    ListNamespacesOp,
    PutOp,
    SearchItem,
    SearchOp,
)

from xmemory_gpu.embed.hashing import HashingEmbedder  # noqa: E402
from xmemory_gpu.integrations.langgraph import DB_FILE, XMemoryStore, namespace_scope  # noqa: E402

EMB = HashingEmbedder(384)
TOKEN = "Qzxvwplorbanth"


@pytest.fixture
def store(tmp_path):
    with XMemoryStore.open(tmp_path / "s", embedder=EMB) as st:
        yield st


def _messages(st: XMemoryStore, namespace: tuple[str, ...]) -> list[str]:
    return [u["text"] for u in st.engine.get_all(**namespace_scope(namespace)) if u["type"] == "message"]


def test_put_get_replace_delete_roundtrip(store):
    value = {
        "text": "I adopted a cat named Pixel.",
        "tags": ["pet", "cat"],
        "meta": {"n": 3, "ok": True, "x": None},
        "é": "ünïcode",
    }
    store.put(("alice", "memories"), "k1", value)
    item = store.get(("alice", "memories"), "k1")
    assert (
        isinstance(item, Item)
        and item.value == value
        and item.key == "k1"
        and item.namespace == ("alice", "memories")
    )
    assert isinstance(item.created_at, datetime) and item.created_at == item.updated_at
    assert store.get(("alice", "memories"), "other") is None and store.get(("bob", "memories"), "k1") is None
    assert _messages(store, ("alice", "memories")) == ["I adopted a cat named Pixel."]

    time.sleep(0.01)
    store.put(("alice", "memories"), "k1", {"text": "I adopted a dog named Rex."})
    again = store.get(("alice", "memories"), "k1")
    assert again.value == {"text": "I adopted a dog named Rex."}
    assert again.created_at == item.created_at and again.updated_at > item.updated_at
    assert _messages(store, ("alice", "memories")) == [
        "I adopted a dog named Rex."
    ]  # the old text left the memory

    store.delete(("alice", "memories"), "k1")
    assert store.get(("alice", "memories"), "k1") is None and _messages(store, ("alice", "memories")) == []
    store.delete(("alice", "memories"), "never-there")  # deleting a missing key is no error


def test_values_persist_across_reopen(tmp_path):
    with XMemoryStore.open(tmp_path / "s", embedder=EMB) as st:
        st.put(("u",), "a", {"content": "Lunch with Sam on Friday.", "n": 1.5})
    with XMemoryStore.open(tmp_path / "s", embedder=EMB) as st:
        assert st.get(("u",), "a").value == {"content": "Lunch with Sam on Friday.", "n": 1.5}
        assert st.search(("u",), query="When is lunch with Sam?")[0].key == "a"


def test_text_of_a_value_and_index_choice(store):
    store.put(("u",), "t", {"memory": "Likes jazz.", "text": 5})  # text is not a string: memory is
    store.put(("u",), "j", {"a": 1, "b": "two"})  # no text field: the JSON
    store.put(("u",), "f", {"title": "Trip", "body": {"where": "Kyoto"}}, index=["title", "body.where"])
    store.put(("u",), "n", {"text": "Secret plan nobody may search."}, index=False)
    assert sorted(_messages(store, ("u",))) == sorted(["Likes jazz.", '{"a": 1, "b": "two"}', "Trip\nKyoto"])
    assert store.get(("u",), "n").value == {"text": "Secret plan nobody may search."}
    assert all(r.key != "n" for r in store.search(("u",), query="secret plan"))
    assert {r.key for r in store.search(("u",))} == {"t", "j", "f", "n"}  # without a query: every item


def test_search_runs_xmemory_retrieval_with_scores(store):
    facts = {
        "pet": "I adopted a grey cat named Pixel last spring.",
        "city": "I moved to Lisbon near the river.",
        "food": "My favourite food is spicy ramen.",
        "job": "I work as a nurse at the city hospital.",
    }
    for k, v in facts.items():
        store.put(("alice",), k, {"text": v, "kind": k})
    store.put(("bob",), "pet", {"text": "Bob has a parrot called Kiwi."})
    hits = store.search(("alice",), query="What is the name of my cat?")
    assert hits and all(isinstance(h, SearchItem) and isinstance(h.score, float) for h in hits)
    assert hits[0].key == "pet" and hits[0].value == {"text": facts["pet"], "kind": "pet"}
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    assert all(h.namespace == ("alice",) for h in hits)  # bob's parrot is another memory
    assert len(store.search(("alice",), query="What is the name of my cat?", limit=1)) == 1
    assert [h.key for h in store.search(("alice",), query="What is the name of my cat?", offset=1)] == [
        h.key for h in hits[1:]
    ]
    assert [
        h.key for h in store.search(("alice",), query="What is my favourite food?", filter={"kind": "food"})
    ] == ["food"]
    assert {
        h.key
        for h in store.search(
            ("alice",), query="What is my favourite food?", filter={"kind": {"$ne": "food"}}
        )
    } <= {"pet", "city", "job"}
    both = store.search((), query="Who has a parrot or a cat?")  # the empty prefix spans every namespace
    assert {h.namespace for h in both} == {("alice",), ("bob",)}


def test_search_without_query_filters_orders_and_pages(store):
    for i in range(5):
        store.put(
            ("docs", "a"), f"d{i}", {"text": f"Note {i}", "n": i, "meta": {"lang": "en" if i % 2 else "pt"}}
        )
        time.sleep(0.002)
    store.put(("docs", "b"), "x", {"text": "Other", "n": 10})
    store.put(("other",), "y", {"text": "Outside", "n": 3})
    assert [r.key for r in store.search(("docs",))] == [
        "x",
        "d4",
        "d3",
        "d2",
        "d1",
        "d0",
    ]  # most recently updated first
    assert [r.key for r in store.search(("docs", "a"), limit=2, offset=1)] == ["d3", "d2"]
    assert {r.key for r in store.search(("docs",), filter={"n": {"$gte": 3}})} == {"x", "d4", "d3"}
    assert {r.key for r in store.search(("docs",), filter={"n": {"$gt": 1, "$lt": 4}})} == {"d2", "d3"}
    assert {r.key for r in store.search(("docs",), filter={"meta": {"lang": "en"}})} == {"d1", "d3"}
    assert {r.key for r in store.search(("docs",), filter={"n": {"$ne": 0}, "text": "Note 2"})} == {"d2"}
    assert all(r.score is None for r in store.search(("docs",)))
    with pytest.raises(ValueError, match=r"filter: unsupported operator '\$regex'"):
        store.search(("docs",), filter={"n": {"$regex": "x"}})


def test_list_namespaces(store):
    for ns in [
        ("a", "b", "c"),
        ("a", "b", "d", "e"),
        ("a", "b", "d", "i"),
        ("a", "b", "f"),
        ("a", "c", "f"),
        ("z",),
    ]:
        store.put(ns, "k", {"text": "/".join(ns)})
    assert store.list_namespaces(prefix=("a", "b"), max_depth=3) == [
        ("a", "b", "c"),
        ("a", "b", "d"),
        ("a", "b", "f"),
    ]
    assert store.list_namespaces(suffix=("f",)) == [("a", "b", "f"), ("a", "c", "f")]
    assert store.list_namespaces(prefix=("a", "*", "f")) == [("a", "b", "f"), ("a", "c", "f")]
    assert store.list_namespaces(max_depth=1) == [("a",), ("z",)]
    assert store.list_namespaces(limit=2, offset=1) == [("a", "b", "d", "e"), ("a", "b", "d", "i")]
    store.delete(("z",), "k")
    assert ("z",) not in store.list_namespaces()


def test_namespaces_map_to_distinct_scopes():
    assert namespace_scope(("alice",)) == {"user_id": "alice", "agent_id": None, "run_id": None}
    assert namespace_scope(("alice", "bot")) == {"user_id": "alice", "agent_id": "bot", "run_id": None}
    assert namespace_scope(("alice", "bot", "r1")) == {"user_id": "alice", "agent_id": "bot", "run_id": "r1"}
    assert namespace_scope(("a", "b", "c", "d"))["run_id"] == '["c", "d"]'
    assert (
        namespace_scope(("a", "b", '["c", "d"]'))["run_id"] == '["[\\"c\\", \\"d\\"]"]'
    )  # never ("a", "b", "c", "d")'s
    with pytest.raises(InvalidNamespaceError, match="user_id"):
        namespace_scope(("x" * 600,))


def test_namespace_and_ttl_rules(store):
    for bad in [("a.b",), ("",), ("langgraph", "x"), ()]:
        with pytest.raises(InvalidNamespaceError):
            store.put(bad, "k", {"text": "x"})
    with pytest.raises(InvalidNamespaceError):  # the same rules for ops given to batch directly
        store.batch([PutOp(("a.b",), "k", {"text": "x"})])
    with pytest.raises(InvalidNamespaceError):
        store.batch([GetOp(("a", ""), "k")])
    with pytest.raises(NotImplementedError):
        store.put(("a",), "k", {"text": "x"}, ttl=5)
    with pytest.raises(NotImplementedError, match="ttl"):
        store.batch([PutOp(("a",), "k", {"text": "x"}, ttl=5.0)])
    assert store.list_namespaces() == []


def test_bad_values_are_refused_naming_the_key_and_change_nothing(store):
    store.put(("u",), "k", {"text": "Original value."})
    with pytest.raises(ValueError, match=r"put \('u',\) 'k': value: not JSON"):
        store.put(("u",), "k", {"text": "x", "when": datetime.now()})
    with pytest.raises(ValueError, match=r"put \('u',\) 'big': value: its text has 100001 characters"):
        store.batch([PutOp(("u",), "fine", {"text": "Fine."}), PutOp(("u",), "big", {"text": "x" * 100_001})])
    assert store.get(("u",), "k").value == {"text": "Original value."} and store.get(("u",), "fine") is None
    assert _messages(store, ("u",)) == ["Original value."]


def test_batch_reads_see_the_state_before_its_writes_and_last_put_wins(store):
    store.put(("u",), "a", {"text": "Old a."})
    res = store.batch(
        [
            PutOp(("u",), "a", {"text": "New a."}),
            GetOp(("u",), "a"),
            PutOp(("u",), "b", {"text": "B one."}),
            PutOp(("u",), "b", {"text": "B two."}),
            SearchOp(("u",)),
            ListNamespacesOp(),
        ]
    )
    assert res[0] is None and res[1].value == {"text": "Old a."} and [r.key for r in res[4]] == ["a"]
    assert res[5] == [("u",)]
    assert store.get(("u",), "a").value == {"text": "New a."} and store.get(("u",), "b").value == {
        "text": "B two."
    }
    assert sorted(_messages(store, ("u",))) == ["B two.", "New a."]


def test_async_twins(store):
    async def run() -> None:
        await store.aput(("carol",), "k", {"text": "Carol plays chess on Sundays."})
        assert (await store.aget(("carol",), "k")).value == {"text": "Carol plays chess on Sundays."}
        hits = await store.asearch(("carol",), query="What game does Carol play?")
        assert [h.key for h in hits] == ["k"] and hits[0].score is not None
        assert await store.alist_namespaces() == [("carol",)]
        res = await store.abatch([GetOp(("carol",), "k"), PutOp(("carol",), "k", None)])
        assert res[0].key == "k" and res[1] is None
        assert await store.aget(("carol",), "k") is None
        await store.aput(("carol",), "k2", {"text": "Carol likes tea."})
        await store.adelete(("carol",), "k2")
        assert await store.asearch(("carol",)) == []

    asyncio.run(asyncio.wait_for(run(), timeout=120))


def test_replaced_and_deleted_values_leave_no_trace_on_disk(tmp_path):
    root = tmp_path / "s"
    with XMemoryStore.open(root, embedder=EMB) as st:
        for i in range(6):
            st.put(("alice",), f"n{i}", {"text": f"On day {i} I walked along the harbour and fed the gulls."})
        st.put(
            ("alice",),
            "secret",
            {"text": f"My new neighbour is called {TOKEN} and keeps bees.", "who": TOKEN},
        )
        st.put(("alice",), "gone", {"text": f"{TOKEN}{TOKEN} is my locker code.", "code": TOKEN})
        assert TOKEN in json.dumps(st.engine.get_all(user_id="alice"))
        st.put(("alice",), "secret", {"text": "My new neighbour keeps bees."})
        st.delete(("alice",), "gone")
        assert TOKEN not in json.dumps(st.engine.get_all(user_id="alice"))
        assert all(TOKEN not in json.dumps(h.value) for h in st.search(("alice",), query=f"Who is {TOKEN}?"))
    for f in root.rglob("*"):
        if f.is_file():
            assert TOKEN.encode() not in f.read_bytes(), f"{f.name} still holds the replaced or deleted text"
    with XMemoryStore.open(root, embedder=EMB) as st:
        assert st.get(("alice",), "secret").value == {"text": "My new neighbour keeps bees."}


def test_a_failed_write_leaves_nothing_behind_and_loses_nothing(store, monkeypatch):
    store.put(("u",), "k", {"text": "The original fact."})
    real = store.engine.add_batch

    def add_then_fail(items):  # the engine committed the new text, then the process "died"
        real(items)
        raise RuntimeError("simulated crash")

    monkeypatch.setattr(store.engine, "add_batch", add_then_fail)
    with pytest.raises(RuntimeError, match="simulated crash"):
        store.put(("u",), "k", {"text": "A replacement that never landed."})
    monkeypatch.undo()
    assert store.get(("u",), "k").value == {"text": "The original fact."}
    assert _messages(store, ("u",)) == ["The original fact."]


def test_a_crash_between_engine_and_items_is_finished_on_open(tmp_path):
    root = tmp_path / "s"
    with XMemoryStore.open(root, embedder=EMB) as st:
        st.put(("u",), "k", {"text": "Kept fact."})
        # what a write records before it touches the engine, then the engine add, then a crash
        with st._db:
            st._db.execute("INSERT INTO langgraph_pending VALUES (?, ?)", ('["u"]', "lg-orphan"))
        st.engine.add(
            [{"id": "lg-orphan", "speaker": "user", "content": f"Half-written {TOKEN}."}], user_id="u"
        )
        assert len(_messages(st, ("u",))) == 2
        st._db.close()
        st.engine.close()
    with XMemoryStore.open(root, embedder=EMB) as st:
        assert _messages(st, ("u",)) == ["Kept fact."]
        assert st._db.execute("SELECT COUNT(*) FROM langgraph_pending").fetchone() == (0,)
    assert (root / DB_FILE).exists()


class State(TypedDict):
    user: str
    said: str
    recalled: list[str]


def test_a_state_graph_reads_and_writes_memories_through_the_store(tmp_path):
    def remember(state: State, store: BaseStore) -> dict:  # the store injected by argument
        store.put(
            (state["user"], "memories"),
            f"m{len(store.search((state['user'], 'memories')))}",
            {"text": state["said"]},
        )
        return {}

    def recall(state: State) -> dict:  # the store from the run's context
        hits = get_store().search(
            (state["user"], "memories"), query="Which city does the user live in?", limit=3
        )
        return {"recalled": [h.value["text"] for h in hits]}

    graph = StateGraph(State)
    graph.add_node("remember", remember)
    graph.add_node("recall", recall)
    graph.add_edge(START, "remember")
    graph.add_edge("remember", "recall")
    graph.add_edge("recall", END)
    with XMemoryStore.open(tmp_path / "s", embedder=EMB) as st:
        app = graph.compile(store=st)
        app.invoke({"user": "alice", "said": "I work as a nurse at the hospital.", "recalled": []})
        out = app.invoke({"user": "alice", "said": "I live in Porto by the river.", "recalled": []})
        assert "I live in Porto by the river." in out["recalled"]
        other = app.invoke({"user": "bob", "said": "I like chess.", "recalled": []})
        assert other["recalled"] == ["I like chess."]  # bob's namespace holds only bob's memory
    with XMemoryStore.open(tmp_path / "s", embedder=EMB) as st:  # written to the store, not to the process
        assert {i.value["text"] for i in st.search(("alice", "memories"))} == {
            "I work as a nurse at the hospital.",
            "I live in Porto by the river.",
        }
    assert Path(tmp_path / "s" / DB_FILE).exists()
