"""Scopes and filters as mem0 has them: a user's reads cover its agents' and runs' memories, an agent
or a run alone is a scope, combinations narrow; filters with operators over metadata, times and scope,
applied before retrieval; the scopes listed at every door; a bulk-built store's plain memory ids."""

from __future__ import annotations

import json

import pytest

from xmemory_gpu.embed.hashing import HashingEmbedder
from xmemory_gpu.engine import MemoryEngine

EMB = HashingEmbedder(128)
ADMIN, ALICE = "admin-key-0123456789", "alice-key-0123456789"
SCOPES = {
    ("u", None, None): "I flew to Lisbon in May and ate custard tarts by the river.",
    ("u", "a1", None): "My sister lives in Porto and works as a nurse at the hospital.",
    ("u", "a2", "r1"): "The violin teacher says my bowing improved a lot this month.",
    ("v", "a1", None): "Bob keeps three beehives on the roof of his building.",
}


def _scope(s):
    return {"user_id": s[0], "agent_id": s[1], "run_id": s[2]}


@pytest.fixture
def eng(tmp_path):
    with MemoryEngine.open(tmp_path / "s", embedder=EMB) as e:
        for n, (s, text) in enumerate(SCOPES.items()):
            e.add(
                [{"role": "user", "content": text, "id": f"m{n}"}],
                **_scope(s),
                metadata={"n": n, "tags": ["x", f"t{n}"], "kind": "even" if n % 2 == 0 else "odd"},
            )
        yield e


def _messages(units) -> set[str]:
    return {u["id"] for u in units if u["type"] == "message"}


@pytest.mark.parametrize(
    "scope, expected",
    [
        ({"user_id": "u"}, {"m0", "m1", "m2"}),
        ({"agent_id": "a1"}, {"m1", "m3"}),
        ({"run_id": "r1"}, {"m2"}),
        ({"user_id": "u", "agent_id": "a1"}, {"m1"}),
        ({"user_id": "v", "agent_id": "a2"}, set()),
        ({"user_id": "nobody"}, set()),
    ],
)
def test_reads_cover_the_scope_mem0s_way(eng, scope, expected):
    units = eng.get_all(**scope)
    assert _messages(units) == expected
    assert all(all(u[k] == v for k, v in scope.items()) for u in units)
    res = eng.search(["Where does my sister live?", "What did I eat?"], **scope, strategy="naive-rag")
    for r in res:
        assert set(r.message_ids) <= expected
        assert len(r.scopes) == len(r.units)
        assert all(all(sc[k] == v for k, v in scope.items()) for sc in r.scopes)


def test_delete_all_forgets_the_scope_mem0s_way(eng):
    assert eng.delete_all(agent_id="a1") == 2  # u's and v's memories of agent a1
    assert _messages(eng.get_all(user_id="u")) == {"m0", "m2"} and eng.get_all(user_id="v") == []
    assert eng.delete_all(user_id="u") == 2
    assert eng.scopes() == [] and eng.delete_all(user_id="u") == 0
    assert [h["op"] for h in eng.history(user_id="u", agent_id="a2", run_id="r1")] == ["delete_all"]


def test_a_users_search_merges_its_memories_by_relevance(eng):
    (r,) = eng.search("Where does my sister live?", user_id="u")
    hits = eng.hits(r)
    assert {(h["agent_id"], h["run_id"]) for h in hits} >= {("a1", None)}
    assert "Porto" in r.context and "beehives" not in r.context
    scores = [h["score"] for h in hits]
    assert scores == sorted(scores, reverse=True)
    assert len(eng.search("Where does my sister live?", user_id="u", limit=2)[0].units) <= 2
    with pytest.raises(ValueError, match="user_id"):
        eng.search("q")
    with pytest.raises(ValueError, match="user_id"):
        eng.get_all()


@pytest.mark.parametrize(
    "flt, expected",
    [
        ({"kind": "even"}, {"m0", "m2"}),
        ({"kind": {"eq": "odd"}}, {"m1"}),
        ({"kind": {"ne": "even"}}, {"m1"}),
        ({"n": {"in": [0, 2, 9]}}, {"m0", "m2"}),
        ({"n": {"nin": [0]}}, {"m1", "m2"}),
        ({"n": {"gt": 0}}, {"m1", "m2"}),
        ({"n": {"gte": 1, "lt": 2}}, {"m1"}),
        ({"n": {"lte": 0}}, {"m0"}),
        ({"tags": {"contains": "t1"}}, {"m1"}),
        ({"kind": {"icontains": "EV"}}, {"m0", "m2"}),
        ({"n": "*"}, {"m0", "m1", "m2"}),
        ({"OR": [{"n": 0}, {"n": 2}]}, {"m0", "m2"}),
        ({"AND": [{"kind": "even"}, {"n": {"gt": 0}}]}, {"m2"}),
        ({"NOT": {"kind": "even"}}, {"m1"}),
        ({"NOT": [{"n": 0}, {"n": 1}]}, {"m2"}),
        ({"agent_id": "a1"}, {"m1"}),
        ({"run_id": {"ne": "r1"}}, {"m0", "m1"}),
        ({"created_at": {"gte": "2000-01-01T00:00:00Z"}}, {"m0", "m1", "m2"}),
        ({"created_at": {"lt": "2000-01-01"}}, set()),
        ({"updated_at": {"gt": 946684800}}, {"m0", "m1", "m2"}),
        ({"missing": {"ne": 1}}, {"m0", "m1", "m2"}),
        ({"missing": 1}, set()),
    ],
)
def test_filters_take_mem0s_operators(eng, flt, expected):
    assert _messages(eng.get_all(user_id="u", filters=flt)) == expected
    for r in eng.search("What did I do?", user_id="u", filters=flt, strategy="naive-rag", threshold=-1.0):
        assert set(r.message_ids) <= expected


@pytest.mark.parametrize(
    "flt, why",
    [
        ({"n": {"between": [1, 2]}}, "unknown operator"),
        ({"n": {"in": 3}}, "in: expected a list"),
        ({"n": {}}, "at least one operator"),
        ({"AND": {"n": 1}}, "AND: expected a non-empty list"),
        ({"OR": []}, "OR: expected a non-empty list"),
        ({"n": {"gt": None}}, "gt: expected a number or a string"),
        ({"created_at": {"gt": "someday"}}, "created_at"),
        ({"n": [1]}, "key 'n'"),
        ([], "expected a JSON object"),
    ],
)
def test_bad_filters_are_refused_at_every_door(eng, flt, why):
    with pytest.raises(ValueError, match=why):
        eng.get_all(user_id="u", filters=flt)
    with pytest.raises(ValueError, match="filters"):
        eng.search("q", user_id="u", filters=flt)


def test_scopes_are_listed_at_every_door(eng):
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    from xmemory_gpu.service import ServiceConfig, create_app

    want = [_scope(s) for s in SCOPES]
    assert sorted(map(json.dumps, eng.scopes())) == sorted(map(json.dumps, want))
    assert eng.scopes(user_id="u", agent_id="a1") == [_scope(("u", "a1", None))]
    assert {s["user_id"] for s in eng.scopes(agent_id="a1")} == {"u", "v"}
    app = create_app(eng, ServiceConfig(coalesce_ms=0, api_keys={ADMIN: None, ALICE: frozenset({"u"})}))
    with TestClient(app) as http:
        admin, alice = {"Authorization": f"Bearer {ADMIN}"}, {"Authorization": f"Bearer {ALICE}"}
        r = http.get("/v1/scopes", headers=admin)
        assert r.status_code == 200 and sorted(map(json.dumps, r.json()["scopes"])) == sorted(
            map(json.dumps, want)
        )
        assert http.get("/v1/scopes", params={"run_id": "r1"}, headers=admin).json()["scopes"] == [
            _scope(("u", "a2", "r1"))
        ]
        assert http.get("/v1/scopes", headers=alice).status_code == 403
        assert http.get("/v1/scopes").status_code == 401
        # a key bound to users reaches no agent-only or run-only scope (it would cross users)
        body = {"query": "bees?", "agent_id": "a1"}
        assert http.post("/v1/search", json=body, headers=alice).status_code == 403
        got = http.post("/v1/search", json=body, headers=admin).json()["results"][0]["units"]
        assert {u["user_id"] for u in got} <= {"u", "v"} and got
        assert http.get("/v1/memories", params={"agent_id": "a1"}, headers=alice).status_code == 403
        assert http.get("/v1/memories", headers=admin).status_code == 422
        units = http.get("/v1/memories", params={"user_id": "u"}, headers=alice).json()["units"]
        assert _messages(units) == {"m0", "m1", "m2"}
        flt = json.dumps({"n": {"gte": 1}})
        units = http.get("/v1/memories", params={"user_id": "u", "filters": flt}, headers=alice).json()[
            "units"
        ]
        assert _messages(units) == {"m1", "m2"}
        bad = http.post(
            "/v1/search", json={"query": "q", "user_id": "u", "filters": {"n": {"x": 1}}}, headers=admin
        )
        assert bad.status_code == 422 and bad.json()["detail"].startswith("filters")


def test_mcp_lists_scopes_and_takes_agent_only_scopes(eng):
    pytest.importorskip("mcp")
    import anyio

    from xmemory_gpu.integrations.mcp_server import create_server

    def call(server, tool, args):
        async def go():
            res = await server.call_tool(tool, args)
            assert not res.is_error, res.content
            return json.loads(" ".join(c.text for c in res.content if c.type == "text"))

        return anyio.run(go)

    server = create_server(eng)
    assert len(call(server, "scopes", {})["scopes"]) == len(SCOPES)
    units = call(server, "get_all", {"agent_id": "a1", "filters": {"kind": {"in": ["odd", "even"]}}})["units"]
    assert _messages(units) == {"m1", "m3"}
    found = call(server, "search", {"query": "Who keeps bees?", "agent_id": "a1"})
    assert found["units"] and {u["agent_id"] for u in found["units"]} == {"a1"}
    one = create_server(eng, user_id="v")
    assert call(one, "scopes", {})["scopes"] == [_scope(("v", "a1", None))]


def test_a_bulk_built_store_is_listed_and_addressed_by_its_memory_ids(tmp_path, capsys):
    from xmemory_gpu.cli import main
    from xmemory_gpu.construct.pipeline import build_store
    from xmemory_gpu.datasets.synthetic import generate_conversations, write_json

    write_json(generate_conversations(2, seed=3), tmp_path / "c.json")
    build_store(tmp_path / "c.json", tmp_path / "built", embedder=EMB, progress=False)
    assert main(["stats", str(tmp_path / "built"), "--scopes"]) == 0
    lines = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert len(lines) == 2 and all(x["agent_id"] is None and x["run_id"] is None for x in lines)
    assert main(["search", str(tmp_path / "built"), "--user", lines[0]["user_id"], "What happened?"]) == 0
    assert lines[0]["user_id"] in capsys.readouterr().out
    with MemoryEngine.open(tmp_path / "built", embedder=EMB) as e:
        listed = e.scopes()
        ids = [s["user_id"] for s in listed]
        assert len(ids) == 2 and all(s["agent_id"] is None and s["run_id"] is None for s in listed)
        units = e.get_all(user_id=ids[0])
        msgs = [u for u in units if u["type"] == "message"]
        assert msgs and {u["user_id"] for u in units} == {ids[0]}
        assert msgs[0]["created_at"] is not None  # a built message is dated by its timestamp
        (r,) = e.search("What happened?", user_id=ids[0])
        assert r.units and set(r.message_ids) <= {u["id"] for u in msgs}
        assert e.get(msgs[0]["id"], user_id=ids[0])["id"] == msgs[0]["id"]
        e.add("I like tea with lemon every morning.", user_id=ids[0])  # into that memory, not a second one
        assert len(e.scopes()) == 2 and len(e.get_all(user_id=ids[0], filters={"n": "*"})) == 0
        e.delete(msgs[0]["id"], user_id=ids[0])
        assert msgs[0]["id"] not in {u["id"] for u in e.get_all(user_id=ids[0])}
    with MemoryEngine.open(
        tmp_path / "built", embedder=EMB, read_only=True, max_resident_bytes=1 << 20
    ) as ro:
        assert sorted(s["user_id"] for s in ro.scopes()) == sorted(ids)
        assert ro.search("tea?", user_id=ids[0])[0].units


def test_a_list_of_times_with_null_or_wildcard_is_refused_naming_the_field(eng):
    for flt in ({"created_at": {"in": [None]}}, {"updated_at": {"nin": ["*"]}}):
        with pytest.raises(ValueError, match=r"filters: (created|updated)_at"):
            eng.get_all(user_id="u", filters=flt)
        with pytest.raises(ValueError, match=r"filters: (created|updated)_at"):
            eng.search("Lisbon", user_id="u", filters=flt)


def test_a_derived_id_in_several_of_a_users_memories_is_ambiguous_not_another_unit(eng):
    """A user-wide read merges memories whose derived ids repeat (each has semantic:0): naming one by
    the user alone is refused as ambiguous; with its agent and run it names that one."""
    sem = {
        s: {u["id"] for u in eng.get_all(**_scope(s)) if u["type"] == "semantic"}
        for s in SCOPES
        if s[0] == "u"
    }
    shared = set.intersection(*sem.values())
    assert shared, "the memories' statements share an id"
    uid = sorted(shared)[0]
    with pytest.raises(KeyError, match="ambiguous"):
        eng.delete(uid, user_id="u")

    def units():  # (agent, run, id) of every unit the user's read covers
        return {(u["agent_id"], u["run_id"], u["id"]) for u in eng.get_all(user_id="u")}

    before = units()
    eng.delete(uid, user_id="u", agent_id="a1")
    gone = before - units()
    assert gone and {(a, r) for a, r, _ in gone} == {("a1", None)}


def test_a_message_of_a_users_agent_memory_is_found_by_the_user(eng):
    assert eng.get("m1", user_id="u")["text"].startswith("My sister lives in Porto")
