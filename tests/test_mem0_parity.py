"""mem0's remaining calls at every front door they apply to: ``AsyncMemoryEngine`` (mem0's
``AsyncMemory``: the engine's calls awaited), ``get_all`` paging (``page`` / ``page_size``), ``top_k``
as ``limit``'s other name, the MCP ``delete_all`` tool, and ``batch_update`` / ``batch_delete`` (every
item or none, one commit) in the engine, over HTTP (``PUT`` / ``DELETE /v1/batch``) and in both
clients."""

from __future__ import annotations

import asyncio
import inspect
import json
import signal

import pytest

import xmemory_gpu
from xmemory_gpu.embed import load_embedder
from xmemory_gpu.engine import AsyncMemoryEngine, MemoryEngine
from xmemory_gpu.engine.aio import AWAITED
from xmemory_gpu.engine.writes import MAX_BATCH_UNITS

EMB = load_embedder("hashing:64")
ADMIN = "admin-key-0123456789abcdef"
ALICE = "alice-key-0123456789abcdef"
ALICE_SAYS = [
    {"role": "user", "content": "I bought a red kayak in town last week.", "id": "k1"},
    {"role": "user", "content": "My sister Ana lives in Porto near the river.", "id": "k2"},
    {"role": "user", "content": "I keep bees in the garden behind the house.", "id": "k3"},
    {"role": "user", "content": "I hike in the Alps every summer with friends.", "id": "k4"},
]
BOB_SAYS = [{"role": "user", "content": "I play the cello in a small orchestra.", "id": "b1"}]


def _fill(e) -> None:
    e.add(ALICE_SAYS, user_id="alice")
    e.add(BOB_SAYS, user_id="bob")


@pytest.fixture
def eng(tmp_path):
    with MemoryEngine.open(tmp_path / "s", embedder=EMB) as e:
        _fill(e)
        yield e


@pytest.fixture
def http(eng):
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    from xmemory_gpu.service import ServiceConfig, create_app

    keys = {ADMIN: None, ALICE: frozenset({"alice"})}
    with TestClient(create_app(eng, ServiceConfig(api_keys=keys, coalesce_ms=0))) as c:
        c.headers["Authorization"] = f"Bearer {ADMIN}"
        yield c


def _mcp(server, tool: str, args: dict) -> tuple[bool, object]:
    """(refused, the error's text or the answer) of one call of an MCP tool in process."""
    import anyio
    from mcp.server.mcpserver.exceptions import ToolError

    async def go():
        try:
            res = await server.call_tool(tool, args)
        except ToolError as exc:
            return True, str(exc)
        text = " ".join(c.text for c in res.content if c.type == "text")
        return res.is_error, text if res.is_error else json.loads(text)

    return anyio.run(go)


def _found(r) -> tuple:
    """A search result without its timings: its units and context."""
    return [(u.id, u.relevance) for u in r.units], r.context


def _messages(units: list[dict]) -> dict[str, str]:
    return {u["id"]: u["text"] for u in units if u["type"] == "message"}


# -- AsyncMemoryEngine ----------------------------------------------------------------------------


def test_the_async_engine_has_the_engine_calls_with_their_signatures():
    assert xmemory_gpu.AsyncMemoryEngine is AsyncMemoryEngine
    wanted = {"add", "add_batch", "search", "search_batch", "get", "get_all", "update", "delete"}
    wanted |= {"delete_all", "history", "scopes", "reset", "batch_update", "batch_delete"}
    assert wanted <= set(AWAITED)
    for name in (*AWAITED, "close", "aclose"):
        fn = getattr(AsyncMemoryEngine, name)
        assert inspect.iscoroutinefunction(fn), name
    opened = inspect.signature(AsyncMemoryEngine.open).parameters
    assert list(opened) == [*inspect.signature(MemoryEngine.open).parameters, "max_workers"]
    for name in AWAITED:
        got = getattr(AsyncMemoryEngine, name)
        assert inspect.signature(got) == inspect.signature(getattr(MemoryEngine, name)), name
        assert got.__doc__ == getattr(MemoryEngine, name).__doc__, name


def test_the_async_engine_answers_as_the_engine_does(tmp_path):
    async def main() -> None:
        async with AsyncMemoryEngine.open(tmp_path / "s", embedder=EMB, max_workers=2) as mem:
            ids = await mem.add(ALICE_SAYS, user_id="alice")
            assert ids == ["k1", "k2", "k3", "k4"]
            more = await mem.add_batch([{"messages": BOB_SAYS, "user_id": "bob"}], events=True)
            assert more[0]["ids"] == ["b1"] and more[0]["results"][0]["event"] == "ADD"
            e = mem.engine
            assert await mem.get_all(user_id="alice") == e.get_all(user_id="alice")
            assert await mem.get_all(user_id="alice", page=1, page_size=2) == e.get_all(user_id="alice")[:2]
            queries = ["Where does Ana live?", "What do I keep in the garden?", "kayak", "cello"]
            one_by_one = [e.search(q, user_id="alice", top_k=2)[0] for q in queries]
            at_once = await asyncio.gather(*(mem.search(q, user_id="alice", top_k=2) for q in queries))
            assert [_found(r[0]) for r in at_once] == [_found(r) for r in one_by_one]
            batch = await mem.search_batch([{"query": "cello", "user_id": "bob", "top_k": 1}])
            assert len(batch[0][0].units) <= 1
            assert await mem.hits(batch[0][0]) == e.hits(batch[0][0])
            assert (await mem.get("k2", user_id="alice"))["text"] == ALICE_SAYS[1]["content"]
            assert (await mem.update("k2", "My sister Ana moved to Braga."))["text"].endswith("Braga.")
            done = await mem.batch_update([{"memory_id": "k3", "text": "I keep goats in the garden."}])
            assert done[0]["text"] == "I keep goats in the garden."
            await mem.delete("k1", user_id="alice")
            assert await mem.batch_delete([{"memory_id": "k4", "user_id": "alice"}]) == ["k4"]
            assert set(_messages(await mem.get_all(user_id="alice"))) == {"k2", "k3"}
            assert [h["op"] for h in await mem.history(user_id="alice")] == [
                "add",
                "update",
                "update",
                "delete",
                "delete",
            ]
            assert {s["user_id"] for s in await mem.scopes()} == {"alice", "bob"}
            assert (await mem.stats())["memories"] == 2
            with pytest.raises(ValueError, match="top_k"):
                await mem.search("kayak", user_id="alice", top_k=1, limit=2)
            with pytest.raises(KeyError):
                await mem.get("nope", user_id="alice")
            assert await mem.delete_all(user_id="bob") == 1
            assert await mem.reset() == 1
            await mem.flush()
        assert e._closed and mem._closed
        await mem.aclose()  # closing twice is harmless
        with pytest.raises(RuntimeError, match="closed"):
            await mem.get_all(user_id="alice")
        # awaited rather than entered: the caller closes it
        ro = await AsyncMemoryEngine.open(tmp_path / "s", read_only=True)
        assert ro.read_only and await ro.get_all(user_id="alice") == []
        with pytest.raises(RuntimeError, match="read_only"):
            await ro.add("hello there", user_id="alice")
        await ro.close()

    asyncio.run(main())


def test_the_async_engine_refuses_a_bad_pool_size_before_opening(tmp_path):
    with pytest.raises(ValueError, match="max_workers"):
        AsyncMemoryEngine.open(tmp_path / "s", embedder=EMB, max_workers=0)
    assert not (tmp_path / "s").exists()
    with pytest.raises(ValueError, match="engine"):
        AsyncMemoryEngine("stores/live")


# -- get_all paging -------------------------------------------------------------------------------


def test_get_all_pages_cover_the_list_in_order(eng):
    full = eng.get_all(user_id="alice")
    assert len(full) > 5
    pages = [eng.get_all(user_id="alice", page=n, page_size=3) for n in range(1, len(full) // 3 + 3)]
    assert [u for p in pages for u in p] == full and pages[-1] == []
    assert eng.get_all(user_id="alice", page=1) == full[:100]  # mem0's default page size
    assert eng.get_all(user_id="alice", page_size=2) == full[:2]  # the first page
    across = eng.get_all(agent_id=None, user_id="alice", page=2, page_size=4)
    assert across == full[4:8]
    flt = {"user_id": "alice"}
    assert eng.get_all(user_id="alice", filters=flt, page=2, page_size=2) == full[2:4]


@pytest.mark.parametrize(
    ("args", "named"),
    [
        ({"page": 0}, "page"),
        ({"page": "2"}, "page"),
        ({"page": 1.5}, "page"),
        ({"page_size": 0}, "page_size"),
        ({"page_size": 1001}, "page_size"),
        ({"page_size": True}, "page_size"),
    ],
)
def test_get_all_refuses_a_bad_page_naming_the_field(eng, args, named):
    with pytest.raises(ValueError, match=rf"^get_all: {named}: "):
        eng.get_all(user_id="alice", **args)


def test_get_all_pages_over_http_and_mcp(eng, http):
    pytest.importorskip("mcp")
    from xmemory_gpu.integrations.mcp_server import create_server

    full = eng.get_all(user_id="alice")
    r = http.get("/v1/memories", params={"user_id": "alice"})
    assert r.json()["units"] == full  # without paging: the answer of before
    r = http.get("/v1/memories", params={"user_id": "alice", "page": 2, "page_size": 3})
    assert r.status_code == 200 and r.json()["units"] == full[3:6]
    for params, field in (({"page": 0}, "page"), ({"page_size": 5000}, "page_size"), ({"page": "x"}, "page")):
        r = http.get("/v1/memories", params={"user_id": "alice", **params})
        assert r.status_code == 422 and r.json()["errors"][0]["field"] == field, r.json()
    server = create_server(eng)
    err, got = _mcp(server, "get_all", {"user_id": "alice", "page": 2, "page_size": 3})
    assert not err and got["units"] == full[3:6]
    err, text = _mcp(server, "get_all", {"user_id": "alice", "page_size": 0})
    assert err and "page_size" in text


# -- top_k ----------------------------------------------------------------------------------------


def test_top_k_is_limit_at_the_engine(eng):
    q = "Where does my sister live?"
    by_limit = _found(eng.search(q, user_id="alice", limit=1)[0])
    assert _found(eng.search(q, user_id="alice", top_k=1)[0]) == by_limit
    assert _found(eng.search(q, user_id="alice", top_k=1, limit=1)[0]) == by_limit
    assert len(eng.search(q, user_id="alice", top_k=1)[0].units) == 1
    (item,) = eng.search_batch([{"query": q, "user_id": "alice", "top_k": 1}])
    assert _found(item[0]) == by_limit
    with pytest.raises(ValueError, match=r"^search: top_k: 1 differs from limit 2") as e:
        eng.search(q, user_id="alice", top_k=1, limit=2)
    assert "\n" not in str(e.value)
    with pytest.raises(ValueError, match=r"^search: top_k: expected an integer"):
        eng.search(q, user_id="alice", top_k=0)
    with pytest.raises(ValueError, match=r"items\[0\]: top_k: 3 differs"):
        eng.search_batch([{"query": q, "user_id": "alice", "top_k": 3, "limit": 1}])


def test_top_k_over_http_and_mcp(eng, http):
    pytest.importorskip("mcp")
    from xmemory_gpu.integrations.mcp_server import create_server

    q = "Where does my sister live?"
    body = {"query": q, "user_id": "alice"}
    by_limit = http.post("/v1/search", json=body | {"limit": 1}).json()["results"]
    got = http.post("/v1/search", json=body | {"top_k": 1})
    assert got.status_code == 200 and got.json()["results"] == by_limit and len(by_limit[0]["units"]) == 1
    assert http.post("/v1/search", json=body | {"top_k": 1, "limit": 1}).json()["results"] == by_limit
    bad = http.post("/v1/search", json=body | {"top_k": 1, "limit": 2})
    assert bad.status_code == 422 and bad.json()["errors"][0]["field"] == "top_k", bad.json()
    bad = http.post("/v1/search", json=body | {"top_k": "1"})
    assert bad.status_code == 422 and bad.json()["errors"][0]["field"] == "top_k"
    server = create_server(eng)
    err, got = _mcp(server, "search", {"query": q, "user_id": "alice", "top_k": 1})
    assert not err and [u["id"] for u in got["units"]] == [u["id"] for u in by_limit[0]["units"]]
    err, text = _mcp(server, "search", {"query": q, "user_id": "alice", "top_k": 1, "limit": 3})
    assert err and "top_k: 1 differs from limit 3" in text


# -- MCP delete_all -------------------------------------------------------------------------------


def test_mcp_delete_all_is_scoped_as_the_other_tools(eng):
    pytest.importorskip("mcp")
    from xmemory_gpu.integrations.mcp_server import create_server

    served = create_server(eng, user_id="alice")
    err, text = _mcp(served, "delete_all", {"user_id": "bob"})
    assert err and "user_id" in text and "alice" in text
    err, text = _mcp(create_server(eng), "delete_all", {})
    assert err and "user_id: required" in text
    err, text = _mcp(served, "delete_all", {"user_id": "alice", "extra": 1})
    assert err and "extra" in text
    assert _mcp(served, "delete_all", {}) == (False, {"deleted_messages": 4})
    assert eng.get_all(user_id="alice") == [] and _messages(eng.get_all(user_id="bob")) == {
        "b1": "I play the cello in a small orchestra."
    }
    assert _mcp(create_server(eng), "delete_all", {"user_id": "bob"}) == (False, {"deleted_messages": 1})
    assert _mcp(create_server(eng), "delete_all", {"user_id": "bob"}) == (False, {"deleted_messages": 0})


# -- batch_update / batch_delete: engine ----------------------------------------------------------


def _commits(eng, monkeypatch) -> list[int]:
    """Counts the store commits from now on."""
    seen: list[int] = []
    commit = eng.store.commit

    def counted(*args, **kwargs):
        seen.append(1)
        return commit(*args, **kwargs)

    monkeypatch.setattr(eng.store, "commit", counted)
    return seen


def test_batch_update_is_one_commit_over_several_memories(eng, monkeypatch):
    commits = _commits(eng, monkeypatch)
    out = eng.batch_update(
        [
            {"memory_id": "k1", "text": "I bought a green canoe in town."},
            {"memory_id": "b1", "text": "I play the violin in a big orchestra.", "user_id": "bob"},
            {"memory_id": "k3", "text": "I keep goats in the garden.", "user_id": "alice"},
        ]
    )
    assert len(commits) == 1
    assert [(u["id"], u["user_id"], u["text"]) for u in out] == [
        ("k1", "alice", "I bought a green canoe in town."),
        ("b1", "bob", "I play the violin in a big orchestra."),
        ("k3", "alice", "I keep goats in the garden."),
    ]
    assert out[0] == eng.get("k1", user_id="alice")
    found = json.dumps(eng.get_all(user_id="alice"))
    assert "red kayak" not in found and "bees" not in found and "goats" in found
    assert eng.history(user_id="alice")[-1]["op"] == "update"
    assert sorted(eng.history(user_id="alice")[-1]["ids"]) == ["k1", "k3"]
    assert eng.search("Which instrument do I play?", user_id="bob")[0].units


def test_batch_delete_forgets_messages_and_derived_units_at_once(eng, monkeypatch):
    stmt = next(u for u in eng.get_all(user_id="alice") if u["type"] == "semantic")
    commits = _commits(eng, monkeypatch)
    gone = eng.batch_delete(
        [
            {"memory_id": "k1"},
            {"memory_id": stmt["id"], "user_id": "alice"},
            {"memory_id": "b1", "user_id": "bob"},
        ]
    )
    assert gone == ["k1", stmt["id"], "b1"] and len(commits) == 1
    left = eng.get_all(user_id="alice")
    assert "k1" not in _messages(left) and stmt["text"] not in [u["text"] for u in left]
    assert eng.get_all(user_id="bob") == [] or "b1" not in _messages(eng.get_all(user_id="bob"))
    logged = eng.history(user_id="alice")[-1]
    assert logged["op"] == "delete" and len(logged["ids"]) == 2 and "k1" not in json.dumps(logged)
    assert eng.batch_delete([]) == [] and eng.batch_update([]) == []


@pytest.mark.parametrize(
    ("call", "items", "error", "message"),
    [
        ("batch_update", [{"memory_id": "k1", "text": "ok"}, {"memory_id": "nope", "text": "x"}], KeyError, r"memories\[1\]: memory_id: .*no such message"),
        ("batch_update", [{"memory_id": "k1", "text": "ok"}, {"memory_id": "k2", "text": " "}], ValueError, r"memories\[1\]: text: "),
        ("batch_update", [{"memory_id": "k1", "text": "ok"}, {"memory_id": "k1", "text": "again"}], ValueError, r"memories\[1\]: memory_id: 'k1' is named twice"),
        ("batch_update", [{"memory_id": "semantic:0", "text": "x", "user_id": "alice"}], ValueError, r"memories\[0\]: memory_id: .*derived semantic"),
        ("batch_update", [{"memory_id": "k1", "txt": "x"}], ValueError, r"memories\[0\]: unknown fields \['txt'\]"),
        ("batch_update", [{"text": "x"}], ValueError, r"memories\[0\]: memory_id: required"),
        ("batch_update", {"memory_id": "k1", "text": "x"}, ValueError, r"^batch_update: memories: expected a list"),
        ("batch_delete", [{"memory_id": "k1"}, {"memory_id": "b1", "user_id": "alice"}], KeyError, r"memories\[1\]: memory_id: "),
        ("batch_delete", [{"memory_id": "k1"}, {"memory_id": "episode:0"}], ValueError, r"memories\[1\]: memory_id: .*need user_id"),
        ("batch_delete", [{"memory_id": "k1", "user_id": 7}], ValueError, r"memories\[0\]: user_id: "),
        ("batch_delete", [{"memory_id": "k1"}, "k2"], ValueError, r"memories\[1\]: expected an object"),
        ("batch_delete", [{"memory_id": "k1"}] * (MAX_BATCH_UNITS + 1), ValueError, r"1001 items, more than the limit of 1000"),
    ],
)  # fmt: skip
def test_a_refused_batch_changes_nothing(eng, call, items, error, message):
    before = (eng.get_all(user_id="alice"), eng.get_all(user_id="bob"), eng.history(user_id="alice"))
    with pytest.raises(error, match=message) as e:
        getattr(eng, call)(items)
    text = e.value.args[0] if error is KeyError else str(e.value)
    assert text.startswith(f"{call}: ") and "\n" not in text
    assert (eng.get_all(user_id="alice"), eng.get_all(user_id="bob"), eng.history(user_id="alice")) == before


def test_batch_writes_refused_on_a_read_only_engine(tmp_path):
    with MemoryEngine.open(tmp_path / "s", embedder=EMB) as e:
        _fill(e)
    with MemoryEngine.open(tmp_path / "s", read_only=True) as ro:
        for call in (ro.batch_update, ro.batch_delete):
            with pytest.raises(RuntimeError, match="read_only"):
                call([{"memory_id": "k1", "text": "x"}])


# -- batch_update / batch_delete: HTTP -------------------------------------------------------------


def test_batch_routes(eng, http):
    r = http.put("/v1/batch", json={"memories": [{"memory_id": "k1", "text": "I bought a green canoe."}]})
    assert r.status_code == 200 and r.json()["results"] == [eng.get("k1", user_id="alice")]
    r = http.request("DELETE", "/v1/batch", json={"memories": [{"memory_id": "k2", "user_id": "alice"}]})
    assert r.status_code == 200 and r.json() == {"deleted": ["k2"]}
    assert set(_messages(eng.get_all(user_id="alice"))) == {"k1", "k3", "k4"}
    before = eng.get_all(user_id="alice")
    for method, body, status, field in (
        ("PUT", {"memories": [{"memory_id": "k1", "text": "x"}, {"memory_id": "zz", "text": "y"}]}, 404, None),
        ("PUT", {"memories": [{"memory_id": "k1", "text": "x"}, {"memory_id": "k1", "text": "y"}]}, 422, "memories.1.memory_id"),
        ("PUT", {"memories": [{"memory_id": "k1"}]}, 422, "memories.0.text"),
        ("PUT", {"memories": []}, 422, "memories"),
        ("DELETE", {"memories": [{"memory_id": "k1", "text": "x"}]}, 422, "memories.0.text"),
        ("DELETE", {"memories": [{"memory_id": "k1"}] * (MAX_BATCH_UNITS + 1)}, 422, "memories"),
        ("DELETE", {"memories": [{"memory_id": "episode:0"}]}, 422, "memories.0.memory_id"),
    ):  # fmt: skip
        r = http.request(method, "/v1/batch", json=body)
        assert r.status_code == status, (body, r.json())
        if field is not None:
            assert r.json()["errors"][0]["field"] == field, r.json()
        else:
            assert "memories[1]" in r.json()["detail"]
    assert eng.get_all(user_id="alice") == before  # nothing of a refused batch happened


def test_batch_routes_keep_a_bound_key_to_its_users(eng, http):
    alice = {"Authorization": f"Bearer {ALICE}"}
    bob_item = {"memory_id": "b1", "user_id": "bob"}
    for method, item in (("PUT", bob_item | {"text": "x"}), ("DELETE", bob_item)):
        r = http.request(method, "/v1/batch", json={"memories": [item]}, headers=alice)
        assert r.status_code == 403, r.json()
        r = http.request(method, "/v1/batch", json={"memories": [{"memory_id": "k1"}]}, headers=alice)
        assert r.status_code in (403, 422) and r.status_code == (403 if method == "DELETE" else 422)
    r = http.request(
        "DELETE", "/v1/batch", json={"memories": [{"memory_id": "k1", "user_id": "alice"}]}, headers=alice
    )
    assert r.status_code == 200 and _messages(eng.get_all(user_id="bob")) == {"b1": BOB_SAYS[0]["content"]}
    r = http.request(
        "DELETE", "/v1/batch", content=b'{"memories": []}', headers={"Content-Length": str(10 << 20)}
    )
    assert r.status_code == 413


# -- the clients ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    pytest.importorskip("fastapi")
    pytest.importorskip("uvicorn")
    from test_service import Server

    root = tmp_path_factory.mktemp("parity")
    keys = root / "keys.json"
    keys.write_text(json.dumps({ADMIN: "*", ALICE: ["alice"]}))
    s = Server(root / "store", keys)
    yield s
    s.kill(signal.SIGTERM)


def test_both_clients_page_take_top_k_and_batch(live):
    from xmemory_gpu.client import AsyncMemoryClient, MemoryClient, ServiceError

    sync = MemoryClient(live.url, api_key=ADMIN)
    sync.add(ALICE_SAYS, user_id="alice")
    full = sync.get_all(user_id="alice")
    assert sync.get_all(user_id="alice", page=2, page_size=2) == full[2:4]
    q = "Where does my sister live?"
    hits = sync.search(q, user_id="alice", top_k=1)
    assert len(hits[0]["units"]) == 1 and hits == sync.search(q, user_id="alice", limit=1)
    with pytest.raises(ServiceError) as e:
        sync.search(q, user_id="alice", top_k=1, limit=2)
    assert e.value.status == 422 and e.value.detail.startswith("top_k: ")
    done = sync.batch_update([{"memory_id": "k1", "text": "I bought a green canoe.", "user_id": "alice"}])
    assert done[0]["text"] == "I bought a green canoe."
    assert sync.batch_delete([{"memory_id": "k4"}]) == ["k4"]
    with pytest.raises(ServiceError) as e:
        sync.batch_delete([{"memory_id": "k2"}, {"memory_id": "gone"}])
    assert e.value.status == 404 and "memories[1]" in e.value.detail
    assert set(_messages(sync.get_all(user_id="alice"))) == {"k1", "k2", "k3"}

    async def main() -> None:
        async with AsyncMemoryClient(live.url, api_key=ADMIN) as c:
            now = await c.get_all(user_id="alice")
            assert await c.get_all(user_id="alice", page=1, page_size=3) == now[:3]
            assert await c.search(q, user_id="alice", top_k=1) == sync.search(q, user_id="alice", top_k=1)
            done = await c.batch_update([{"memory_id": "k2", "text": "Ana moved to Braga."}])
            assert done[0]["text"] == "Ana moved to Braga."
            assert await c.batch_delete([{"memory_id": "k3", "user_id": "alice"}]) == ["k3"]
            with pytest.raises(ServiceError) as e:
                await c.get_all(user_id="alice", page_size=0)
            assert e.value.status == 422 and e.value.detail.startswith("page_size")

    asyncio.run(main())
    assert set(_messages(sync.get_all(user_id="alice"))) == {"k1", "k2"}
    bound = MemoryClient(live.url, api_key=ALICE)
    with pytest.raises(ServiceError) as e:
        bound.batch_delete([{"memory_id": "k1", "user_id": "bob"}])
    assert e.value.status == 403


def test_batches_load_the_memories_they_touch_under_a_residency_budget(tmp_path):
    with MemoryEngine.open(tmp_path / "s", embedder=EMB) as e:
        _fill(e)
    with MemoryEngine.open(tmp_path / "s", embedder=EMB, max_resident_bytes=1) as e:
        out = e.batch_update(
            [{"memory_id": "k2", "text": "Ana moved to Braga."}, {"memory_id": "b1", "text": "I sing."}]
        )
        assert [u["text"] for u in out] == ["Ana moved to Braga.", "I sing."]
        assert e.batch_delete([{"memory_id": "k1"}, {"memory_id": "b1", "user_id": "bob"}]) == ["k1", "b1"]
        assert e.get_all(user_id="alice", page=1, page_size=50) == e.get_all(user_id="alice")
    with MemoryEngine.open(tmp_path / "s", embedder=EMB) as e:  # what was committed
        assert _messages(e.get_all(user_id="alice"))["k2"] == "Ana moved to Braga."
        assert set(_messages(e.get_all(user_id="alice"))) == {"k2", "k3", "k4"}
        assert _messages(e.get_all(user_id="bob")) == {}
