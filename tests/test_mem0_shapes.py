"""mem0's shapes at every front door (engine, HTTP, MCP, CLI): ``add`` of a string, one message or a
list; the add answer as mem0's events; ``created_at`` / ``updated_at``; ``infer=False``; one shape for
``update``; ``score`` as the relevance in [0, 1]; argument errors that name the call, not a class."""

from __future__ import annotations

import json

import pytest

from xmemory_gpu.embed.hashing import HashingEmbedder
from xmemory_gpu.engine import MemoryEngine
from xmemory_gpu.engine.results import relevance
from xmemory_gpu.engine.writes import _statement_events

EMB = HashingEmbedder(128)
LISBON = "I flew to Lisbon in May and ate custard tarts by the river."
CODE = "The garage code is 4512 and the gate code is 99."


@pytest.fixture
def eng(tmp_path):
    with MemoryEngine.open(tmp_path / "s", embedder=EMB) as e:
        yield e


@pytest.fixture
def http(eng):
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    from xmemory_gpu.service import ServiceConfig, create_app

    with TestClient(create_app(eng, ServiceConfig(coalesce_ms=0))) as c:
        yield c


def _mcp(eng, tool: str, args: dict) -> dict:
    pytest.importorskip("mcp")
    import anyio

    from xmemory_gpu.integrations.mcp_server import create_server

    server = create_server(eng)

    async def go():
        res = await server.call_tool(tool, args)
        assert not res.is_error, res.content
        return json.loads(" ".join(c.text for c in res.content if c.type == "text"))

    return anyio.run(go)


def _texts(eng, **scope) -> list[str]:
    return [u["text"] for u in eng.get_all(**scope) if u["type"] == "message"]


@pytest.mark.parametrize(
    "messages",
    [LISBON, {"role": "user", "content": LISBON}, [{"role": "user", "content": LISBON}]],
    ids=["string", "message", "list"],
)
def test_add_takes_a_string_one_message_or_a_list_at_every_door(eng, http, messages):
    assert len(eng.add(messages, user_id="engine")) == 1
    r = http.post("/v1/memories", json={"messages": messages, "user_id": "http"})
    assert r.status_code == 200 and len(r.json()["ids"]) == 1, r.json()
    assert len(_mcp(eng, "add", {"messages": messages, "user_id": "mcp"})["ids"]) == 1
    assert (
        _texts(eng, user_id="engine") == _texts(eng, user_id="http") == _texts(eng, user_id="mcp") == [LISBON]
    )
    for bad in ("", "   ", 3, [3]):
        with pytest.raises(ValueError, match="messages"):
            eng.add(bad, user_id="engine")
        assert http.post("/v1/memories", json={"messages": bad, "user_id": "http"}).status_code == 422


def test_the_add_answer_is_mem0s_events_at_every_door(eng, http):
    out = eng.add([{"role": "user", "content": LISBON, "id": "m1"}], user_id="u", agent_id="a", events=True)
    assert out["ids"] == ["m1"]
    (msg,) = [e for e in out["results"] if e["type"] == "message"]
    assert msg == {
        "id": "m1",
        "memory": LISBON,
        "event": "ADD",
        "type": "message",
        "user_id": "u",
        "agent_id": "a",
        "run_id": None,
    }
    stmts = [e for e in out["results"] if e["type"] == "semantic"]
    assert stmts and all(e["event"] == "ADD" and e["id"].startswith("semantic:") for e in stmts)
    assert {e["id"] for e in stmts} <= {u["id"] for u in eng.get_all(user_id="u", agent_id="a")}
    r = http.post(
        "/v1/memories", json={"messages": "I keep bees on the roof of my building.", "user_id": "h"}
    )
    body = r.json()
    assert set(body) == {"ids", "results"} and body["results"][0]["event"] == "ADD"
    batch = http.post(
        "/v1/memories/batch", json={"items": [{"messages": "Hello there, friend.", "user_id": "h"}]}
    )
    assert set(batch.json()) == {"ids", "results"} and len(batch.json()["results"]) == 1
    assert eng.add_batch([{"messages": "Short.", "user_id": "q"}], events=True)[0]["ids"]
    assert isinstance(eng.add("Plain ids still come back.", user_id="q")[0], str)  # the default: ids


def test_statement_events_name_each_change():
    before = {"semantic:0": ("a", 1, None), "semantic:1": ("b", 1, None), "semantic:2": ("c", 1, None)}
    after = {
        "semantic:0": ("a", 2, None),  # said again
        "semantic:1": ("b", 1, "semantic:3"),  # superseded
        "semantic:3": ("b2", 1, None),  # new
    }
    got = {e["id"]: e for e in _statement_events(before, after)}
    assert got["semantic:0"]["event"] == "NONE"
    assert got["semantic:1"] | {} == {
        "id": "semantic:1",
        "memory": "b2",
        "event": "UPDATE",
        "previous_memory": "b",
        "superseded_by": "semantic:3",
        "type": "semantic",
    }
    assert got["semantic:3"]["event"] == "ADD" and got["semantic:2"]["event"] == "DELETE"
    changed = _statement_events({"semantic:0": ("a", 1, None)}, {"semantic:0": ("a!", 1, None)})
    assert changed == [
        {"id": "semantic:0", "memory": "a!", "event": "UPDATE", "previous_memory": "a", "type": "semantic"}
    ]


def test_units_carry_created_at_and_updated_at(eng, http):
    (mid,) = eng.add(LISBON, user_id="u")
    units = eng.get_all(user_id="u")
    assert units and all(
        isinstance(u["created_at"], str) and u["created_at"].endswith("+00:00") for u in units
    )
    first = eng.get(mid, user_id="u")
    assert first["created_at"] == first["updated_at"]
    after = eng.update(mid, "I flew to Porto in June and ate grilled sardines.", user_id="u")
    assert after["created_at"] == first["created_at"] and after["updated_at"] > first["updated_at"]
    hits = eng.hits(eng.search("Where did I fly?", user_id="u")[0])
    assert hits and all("created_at" in h and "updated_at" in h for h in hits)
    assert any(h["created_at"] == first["created_at"] for h in hits if h["message_ids"])
    r = http.post("/v1/search", json={"query": "Where did I fly?", "user_id": "u"}).json()
    assert all("created_at" in u for u in r["results"][0]["units"])


def test_infer_false_keeps_the_messages_and_derives_nothing(eng, http):
    out = eng.add([{"role": "user", "content": CODE, "id": "g1"}], run_id="r", infer=False, events=True)
    assert [e["type"] for e in out["results"]] == ["message"]
    assert {u["type"] for u in eng.get_all(run_id="r")} == {"message", "episode"}
    found = eng.search("What is the garage code?", run_id="r", strategy="naive-rag")[0]
    assert "4512" in found.context and "g1" in found.message_ids
    assert "4512" in eng.search("What is the garage code?", run_id="r")[0].context
    eng.update("g1", "The garage code is 7777 and I love the colour blue.", run_id="r")
    assert {u["type"] for u in eng.get_all(run_id="r")} == {"message", "episode"}  # an update derives none
    eng.add(LISBON, run_id="r")  # an inferred message beside it gives statements of its own only
    sem = [u for u in eng.get_all(run_id="r") if u["type"] == "semantic"]
    assert sem and all("g1" not in u["message_ids"] for u in sem)
    r = http.post("/v1/memories", json={"messages": CODE, "user_id": "h", "infer": False})
    assert [e["type"] for e in r.json()["results"]] == ["message"]
    assert (
        http.post("/v1/memories", json={"messages": CODE, "user_id": "h", "infer": "no"}).status_code == 422
    )
    with pytest.raises(ValueError, match="infer"):
        eng.add(CODE, user_id="x", infer="no")
    with pytest.raises(ValueError, match="infer"):
        eng.add_batch(
            [{"messages": CODE, "user_id": "y"}, {"messages": LISBON, "user_id": "y", "infer": False}]
        )


def test_update_has_one_shape_at_every_door(eng, http):
    for n, user in enumerate(("e", "h", "m")):
        eng.add([{"role": "user", "content": LISBON, "id": f"x{n}"}], user_id=user, metadata={"k": n})
    a = eng.update("x0", "I keep goats on a farm.", user_id="e")
    b = http.put("/v1/memories/x1", json={"text": "I keep goats on a farm.", "user_id": "h"}).json()
    c = _mcp(eng, "update", {"unit_id": "x2", "text": "I keep goats on a farm.", "user_id": "m"})
    assert set(a) == set(b) == set(c) and a["text"] == b["text"] == c["text"] == "I keep goats on a farm."
    assert (a["metadata"], b["metadata"], c["metadata"]) == ({"k": 0}, {"k": 1}, {"k": 2})
    assert b == eng.get("x1", user_id="h")


def test_score_is_the_relevance_at_every_door(eng, http):
    eng.add(
        [{"role": "user", "content": t} for t in (LISBON, "My sister lives in Porto and works as a nurse.")],
        user_id="u",
    )
    q = "Where does my sister live?"
    res = eng.search(q, user_id="u")[0]
    hits = eng.hits(res)
    assert hits and [h["score"] for h in hits] == [min(1.0, max(0.0, relevance(u))) for u in res.units]
    assert all(0.0 <= h["score"] <= 1.0 and "rank_score" in h and h["memory"] == h["text"] for h in hits)
    over_http = http.post("/v1/search", json={"query": q, "user_id": "u"}).json()["results"][0]["units"]
    over_mcp = _mcp(eng, "search", {"query": q, "user_id": "u"})["units"]
    key = [(h["id"], round(h["score"], 6)) for h in hits]
    assert [(u["id"], round(u["score"], 6)) for u in over_http] == key
    assert [(u["id"], round(u["score"], 6)) for u in over_mcp] == key


def test_the_cli_shows_the_relevance(eng, tmp_path, capsys):
    from xmemory_gpu.cli import main

    eng.add("My sister lives in Porto and works as a nurse.", user_id="u")
    eng.close()
    assert main(["search", str(tmp_path / "s"), "--user", "u", "Where does my sister live?"]) == 0
    rows = [line.split() for line in capsys.readouterr().out.splitlines() if line.startswith("  semantic")]
    assert rows and all(0.0 < float(r[1]) <= 1.0 for r in rows)


def test_argument_errors_name_the_call_not_a_class(eng):
    for call, args in (
        (eng.add, ("x",)),
        (eng.search, ("q",)),
        (eng.get_all, ()),
        (eng.update, ("m", "t")),
        (eng.delete, ("m",)),
    ):
        with pytest.raises(TypeError) as e:
            call(*args, colour="red")
        assert str(e.value).startswith(f"{call.__name__}()"), e.value
        assert "Writes" not in str(e.value) and "Reads" not in str(e.value)
