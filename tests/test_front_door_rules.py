"""One set of input rules at every front door (``engine.rules``): the engine's own checks of metadata
and filters (valid Unicode, nesting), HTTP, the MCP server and the LangGraph store refusing the same
arguments with a one-line error naming the field, the OpenAPI document saying what the server
accepts, the clients' API key check, reader specs, and LangGraph values forgotten by a reset or a
``delete_all`` of their scope."""

from __future__ import annotations

import json
import sqlite3
import time

import pytest

from xmemory_gpu.client import AsyncMemoryClient, MemoryClient, check_api_key
from xmemory_gpu.engine import MemoryEngine, inputs, rules
from xmemory_gpu.llm import as_reader, load_reader

EMB = "hashing:64"
SURROGATE = "\ud800"


def _deep(n: int) -> dict:
    d: dict = {}
    for _ in range(n - 1):
        d = {"a": d}
    return d


@pytest.fixture
def eng(tmp_path):
    with MemoryEngine.open(tmp_path / "s", embedder=EMB) as e:
        e.add([{"role": "user", "content": "I like green tea."}], user_id="u", metadata={"topic": "tea"})
        yield e


def _units(e: MemoryEngine) -> list[dict]:
    return e.get_all(user_id="u")


# -- metadata and filters: Unicode and depth -----------------------------------------------------------


@pytest.mark.parametrize(
    "metadata, said",
    [
        ({"topic": SURROGATE}, "lone surrogate"),
        ({SURROGATE: 1}, "lone surrogate"),
        ({"a": [{"b": "x" + SURROGATE}]}, "lone surrogate"),
        ({"a": {SURROGATE: 1}}, "lone surrogate"),
        (_deep(33), "nested more than 32 levels deep"),
        (_deep(3000), "nested more than 32 levels deep"),
    ],
)
def test_the_engine_refuses_metadata_it_could_not_serve_again(eng, metadata, said):
    before = _units(eng)
    with pytest.raises(ValueError) as e:
        eng.add([{"role": "user", "content": "x"}], user_id="u", metadata=metadata)
    msg = str(e.value)
    assert "metadata" in msg and said in msg and "\n" not in msg
    msg.encode("utf-8")  # the message itself can be sent anywhere (the key is shown escaped)
    assert _units(eng) == before
    assert eng.add([{"role": "user", "content": "x"}], user_id="u", metadata=_deep(32))  # 32 deep: taken


def test_the_engine_refuses_filters_with_a_lone_surrogate(eng):
    for flt in ({"topic": SURROGATE}, {SURROGATE: "tea"}):
        with pytest.raises(ValueError, match="filters.*lone surrogate"):
            eng.get_all(user_id="u", filters=flt)
        with pytest.raises(ValueError, match="filters.*lone surrogate"):
            eng.search("tea?", user_id="u", filters=flt)
    assert [
        u["text"] for u in eng.get_all(user_id="u", filters={"topic": "tea"}) if u["type"] == "message"
    ] == ["I like green tea."]


def test_a_refused_metadata_leaves_the_scope_readable_after_a_restart(tmp_path):
    with MemoryEngine.open(tmp_path / "s", embedder=EMB) as e:
        e.add([{"role": "user", "content": "kept"}], user_id="u")
        with pytest.raises(ValueError, match="metadata"):
            e.add([{"role": "user", "content": "x"}], user_id="u", metadata={"k": SURROGATE})
    with MemoryEngine.open(tmp_path / "s", embedder=EMB) as e:
        assert [u["text"] for u in e.get_all(user_id="u") if u["type"] == "message"] == ["kept"]
        json.dumps(e.search("kept?", user_id="u")[0].to_dict(), ensure_ascii=False).encode("utf-8")


# -- empty text ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("text", ["", "   ", "\n\t"])
def test_the_engine_refuses_empty_text_on_add_and_update(eng, text):
    mid = next(u["id"] for u in _units(eng) if u["type"] == "message")
    before = _units(eng)
    with pytest.raises(ValueError, match=r"messages\[0\]: content: expected text"):
        eng.add([{"role": "user", "content": text}], user_id="u")
    with pytest.raises(ValueError, match="update: text: expected text"):
        eng.update(mid, text, user_id="u")
    assert _units(eng) == before


def test_flag_takes_booleans_only():
    assert inputs.flag(True, "stamp_arrival") is True and inputs.flag(False, "stamp_arrival") is False
    for bad in ("no", None, 0, 1, "False"):
        with pytest.raises(ValueError, match="^stamp_arrival: expected True or False"):
            inputs.flag(bad, "stamp_arrival")


# -- the shared rules --------------------------------------------------------------------------------------


def test_the_rules_take_integral_floats_and_nothing_looser():
    assert rules.check(rules.Limit, 1.0, "limit") == 1 and isinstance(
        rules.check(rules.Limit, 1.0, "limit"), int
    )
    assert rules.check(rules.Session, 3.0, "session") == 3
    assert rules.check(rules.Threshold, 1, "threshold") == 1.0
    for typ, v, said in [
        (rules.Limit, True, "a boolean"),
        (rules.Limit, "3", "a string"),
        (rules.Limit, 1.5, "1.5"),
        (rules.BudgetTokens, 10**12, "from 0 to 1000000"),
        (rules.Threshold, "0.5", "a string"),
        (rules.Threshold, True, "a boolean"),
        (rules.Threshold, float("nan"), "nan"),
        (rules.Text, "", "at least 1 character"),
        (rules.Text, " ", "whitespace"),
        (rules.Query, "q" * (rules.MAX_QUERY + 1), "at most 4000"),
        (rules.Timestamp, True, "a boolean"),
        (rules.Metadata, {"a": SURROGATE}, "lone surrogate"),
        (rules.Metadata, _deep(40), "nested more than 32"),
    ]:
        with pytest.raises(ValueError) as e:
            rules.check(typ, v, "field")
        assert str(e.value).startswith("field") and said in str(e.value) and "\n" not in str(e.value), str(
            e.value
        )


# -- HTTP -----------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def http(tmp_path_factory):
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    from xmemory_gpu.service import ServiceConfig, create_app

    app = create_app(
        lambda: MemoryEngine.open(tmp_path_factory.mktemp("svc") / "s", embedder=EMB),
        ServiceConfig(coalesce_ms=0),
    )
    with TestClient(app) as c:
        c.app_ = app
        yield c


def _raw(http, path: str, body: str | bytes, method: str = "POST"):
    data = body.encode("utf-8", "surrogatepass") if isinstance(body, str) else body
    return http.request(method, path, content=data, headers={"Content-Type": "application/json"})


@pytest.mark.parametrize(
    "metadata, field",
    [
        ('{"k": "\\ud800"}', "metadata"),
        ('{"\\ud800": 1}', "metadata"),
        ('{"a": [{"b": "\\udfff"}]}', "metadata"),
    ],
)
def test_http_refuses_metadata_with_a_lone_surrogate(http, metadata, field):
    r = _raw(
        http,
        "/v1/memories",
        f'{{"user_id": "sur", "messages": [{{"role": "u", "content": "x"}}], "metadata": {metadata}}}',
    )
    assert r.status_code == 422 and r.json()["errors"][0]["field"] == field, r.json()
    r = _raw(
        http,
        "/v1/memories/batch",
        '{"items": [{"user_id": "sur", "messages": [{"role": "u", "content": "x"}], '
        f'"metadata": {metadata}}}]}}',
    )
    assert r.status_code == 422 and r.json()["errors"][0]["field"] == f"items.0.{field}", r.json()
    r = http.get("/v1/memories", params={"user_id": "sur"})
    assert r.status_code == 200 and r.json()["units"] == []


@pytest.mark.parametrize("depth", [33, 3000])
def test_http_refuses_deep_metadata_naming_it(http, depth):
    deep = json.dumps(_deep(10)) if depth < 100 else "{}"
    for _ in range(depth - (10 if depth < 100 else 1)):
        deep = '{"a": ' + deep + "}"
    r = _raw(
        http,
        "/v1/memories",
        f'{{"user_id": "deep", "messages": [{{"role": "u", "content": "x"}}], "metadata": {deep}}}',
    )
    body = r.json()
    assert r.status_code == 422 and body["detail"] == "metadata: nested more than 32 levels deep", body
    r = _raw(
        http,
        "/v1/memories/batch",
        '{"items": [{"user_id": "deep", "messages": [{"role": "u", "content": "x"}], '
        f'"metadata": {deep}}}]}}',
    )
    assert r.status_code == 422 and r.json()["errors"][0]["field"] == "items.0.metadata", r.json()
    assert http.get("/v1/memories", params={"user_id": "deep"}).json()["units"] == []


def test_http_refuses_empty_text_on_add_and_update(http):
    ids = http.post(
        "/v1/memories", json={"user_id": "empty", "messages": [{"role": "u", "content": "old"}]}
    ).json()["ids"]
    for text in ("", "  "):
        r = http.post("/v1/memories", json={"user_id": "empty", "messages": [{"role": "u", "content": text}]})
        assert r.status_code == 422 and r.json()["errors"][0]["field"] == "messages.0.content", r.json()
        r = http.put(f"/v1/memories/{ids[0]}", json={"user_id": "empty", "text": text})
        assert r.status_code == 422 and r.json()["errors"][0]["field"] == "text", r.json()
    assert [
        u["text"]
        for u in http.get("/v1/memories", params={"user_id": "empty"}).json()["units"]
        if u["type"] == "message"
    ] == ["old"]


def test_http_takes_integral_floats_where_the_schema_says_integer(http):
    r = http.post(
        "/v1/memories", json={"user_id": "int", "messages": [{"role": "u", "content": "x", "session": 3.0}]}
    )
    assert r.status_code == 200, r.json()
    r = http.post("/v1/search", json={"user_id": "int", "query": "x", "limit": 1.0, "budget_tokens": 600.0})
    assert r.status_code == 200 and len(r.json()["results"][0]["units"]) <= 1, r.json()
    for extra, field in (
        ({"limit": 1.5}, "limit"),
        ({"limit": True}, "limit"),
        ({"budget_tokens": "600"}, "budget_tokens"),
        ({"budget_tokens": 10**12}, "budget_tokens"),
        ({"threshold": "0.5"}, "threshold"),
    ):
        r = http.post("/v1/search", json={"user_id": "int", "query": "x", **extra})
        assert r.status_code == 422 and r.json()["errors"][0]["field"] == field, (extra, r.json())
    spec = http.app_.openapi()
    session = spec["components"]["schemas"]["Message"]["properties"]["session"]["anyOf"][0]
    assert session["type"] == "integer"


def test_http_documents_the_400_of_an_unreadable_body_and_names_it(http):
    spec = http.app_.openapi()
    for path, method in (
        ("/v1/memories", "post"),
        ("/v1/memories/batch", "post"),
        ("/v1/search", "post"),
        ("/v1/memories/{unit_id}", "put"),
    ):
        resp = spec["paths"][path][method]["responses"]
        assert resp["400"]["content"]["application/json"]["schema"] == {
            "$ref": "#/components/schemas/ErrorBody"
        }
    r = _raw(http, "/v1/search", b'{"user_id": "\xff", "query": "q"}')
    assert r.status_code == 400 and r.json()["detail"].startswith("body: not valid UTF-8"), r.json()


def test_a_405_lists_every_method_of_the_path(http):
    r = http.patch("/v1/memories")
    assert r.status_code == 405 and r.headers["allow"] == "DELETE, GET, HEAD, POST"
    r = http.patch("/v1/memories/some/id")
    assert r.status_code == 405 and r.headers["allow"] == "DELETE, GET, HEAD, PUT"
    r = http.get("/v1/search")
    assert r.status_code == 405 and r.headers["allow"] == "POST"


# -- MCP --------------------------------------------------------------------------------------------------


@pytest.fixture
def mcp(eng):
    pytest.importorskip("mcp")
    from xmemory_gpu.integrations.mcp_server import create_server

    return create_server(eng)


def _call(server, tool: str, args: dict) -> tuple[bool, str]:
    import anyio
    from mcp.server.mcpserver.exceptions import ToolError

    async def go():
        try:
            res = await server.call_tool(tool, args)
        except ToolError as exc:
            return False, str(exc)
        return not res.is_error, " ".join(c.text for c in res.content if c.type == "text")

    return anyio.run(go)


@pytest.mark.parametrize(
    "tool, args, field",
    [
        ("add", {"messages": [{"content": "x", "timestamp": True}]}, "messages[0].timestamp"),
        ("add", {"messages": [{"content": ""}]}, "messages[0].content"),
        ("add", {"messages": ""}, "messages"),
        ("add", {"messages": "  "}, "messages"),
        ("add", {"messages": "x", "colour": "red"}, "colour"),
        ("add", {"messages": "x", "metadata": {"k": SURROGATE}}, "metadata"),
        ("add", {"messages": "x", "metadata": _deep(40)}, "metadata"),
        ("search", {"query": "tea?", "budget_tokens": "600"}, "budget_tokens"),
        ("search", {"query": "tea?", "budget_tokens": 10**12}, "budget_tokens"),
        ("search", {"query": "tea?", "threshold": "0.5"}, "threshold"),
        ("search", {"query": "tea?", "limit": True}, "limit"),
        ("search", {"query": "q" * 200_000}, "query"),
        ("search", {"query": "tea?", "max_results": 3}, "max_results"),
        ("search", {"query": "tea?", "filters": {"k": SURROGATE}}, "filters"),
        ("get_all", {"filters": "topic=tea"}, "filters"),
        ("update", {"unit_id": "x", "text": ""}, "text"),
        ("update", {"unit_id": "x", "text": " "}, "text"),
        ("delete", {"unit_id": "x", "force": True}, "force"),
    ],
)
def test_mcp_refuses_what_http_refuses(mcp, eng, tool, args, field):
    before = _units(eng)
    ok, text = _call(mcp, tool, {"user_id": "u", **args})
    assert not ok and f"{field}:" in text and "\n" not in text, text
    assert _units(eng) == before


def test_mcp_takes_arguments_as_given(mcp, eng):
    import anyio

    ok, text = _call(mcp, "add", {"messages": '["not", "a", "list"]', "user_id": "u"})
    assert ok, text
    assert '["not", "a", "list"]' in [u["text"] for u in _units(eng) if u["type"] == "message"]
    ok, text = _call(mcp, "search", {"query": "tea?", "user_id": "u", "limit": 1.0, "budget_tokens": 600})
    assert ok and len(json.loads(text)["units"]) <= 1, text

    async def schema():
        return {t.name: t.input_schema for t in await mcp.list_tools()}

    schemas = anyio.run(schema)
    assert all(s["additionalProperties"] is False for s in schemas.values())
    assert schemas["search"]["properties"]["query"]["maxLength"] == rules.MAX_QUERY


# -- clients ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("key", ["abc\r\nX-Evil: 1", "abc\ndef", "a\rb", "a b", "k\x00", "kéy"])
def test_both_clients_refuse_a_key_a_header_cannot_hold(key):
    for make in (MemoryClient, AsyncMemoryClient):
        with pytest.raises(ValueError, match="^api_key: character") as e:
            make("http://127.0.0.1:9", api_key=key)
        assert "Evil" not in str(e.value)  # the key is not echoed
    assert (
        check_api_key("admin-key-0123456789abcdef") == "admin-key-0123456789abcdef"
        and check_api_key(None) is None
    )


# -- readers ------------------------------------------------------------------------------------------------


def test_reader_specs_are_checked_at_once():
    t = time.perf_counter()
    with pytest.raises(ValueError) as e:
        load_reader("hf:/nonexistent")
    assert str(e.value) == "reader: hf:/nonexistent: no such directory" and time.perf_counter() - t < 3
    with pytest.raises(ValueError, match="^reader: hf:no-such-org/no-such-model: no such directory"):
        load_reader("hf:no-such-org/no-such-model")
    for bad in (5, None, b"hf:x", ["smollm2"]):
        with pytest.raises(ValueError, match="^reader: expected a spec string"):
            load_reader(bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="^reader: expected a Reader or a spec"):
        as_reader(5)
    assert as_reader(None) is None


def test_the_engine_refuses_a_bad_reader_or_stamp_arrival_when_it_opens(tmp_path):
    with pytest.raises(ValueError, match="^reader: "):
        MemoryEngine.open(tmp_path / "r", embedder=EMB, reader=5)
    with pytest.raises(ValueError, match="^reader: hf:/nonexistent: no such directory"):
        MemoryEngine.open(tmp_path / "r", embedder=EMB, reader="hf:/nonexistent")
    for bad in ("no", None, 1):
        with pytest.raises(ValueError, match="^stamp_arrival: expected True or False"):
            MemoryEngine.open(tmp_path / "r", embedder=EMB, stamp_arrival=bad)


# -- LangGraph ------------------------------------------------------------------------------------------------


@pytest.fixture
def lg(tmp_path):
    pytest.importorskip("langgraph")
    from xmemory_gpu.integrations.langgraph import XMemoryStore

    with XMemoryStore.open(tmp_path / "s", embedder=EMB) as st:
        yield st


def test_langgraph_refuses_a_string_index_and_negative_pages(lg):
    lg.put(("u",), "k", {"text": "I like green tea."})
    with pytest.raises(ValueError, match=r"^index: expected None, False or a list of field paths"):
        lg.put(("u",), "s", {"text": "Indexed by a string."}, index="text")
    assert lg.get(("u",), "s") is None
    lg.put(("u",), "l", {"text": "Indexed by a list.", "n": 1}, index=["text"])
    assert {r.key for r in lg.search(("u",), query="Indexed by a list")} >= {"l"}
    for kw, field in (
        ({"limit": -1}, "limit"),
        ({"offset": -1}, "offset"),
        ({"limit": True}, "limit"),
        ({"limit": "3"}, "limit"),
    ):
        with pytest.raises(ValueError, match=f"^{field}: expected an integer"):
            lg.search(("u",), **kw)
        with pytest.raises(ValueError, match=f"^{field}: expected an integer"):
            lg.list_namespaces(**kw)
    with pytest.raises(ValueError, match="^max_depth: expected an integer"):
        lg.list_namespaces(max_depth=-1)
    with pytest.raises(ValueError, match="^query: expected a string of at most 4000 characters"):
        lg.search(("u",), query="q" * 200_000)
    assert [r.key for r in lg.search(("u",), limit=1, offset=0)] and lg.search(("u",), limit=0) == []


def _nested(depth: int) -> dict:
    v: dict = {}
    x = v
    for _ in range(depth):
        x["a"] = {}
        x = x["a"]
    return v


@pytest.mark.parametrize(
    "value, says",
    [
        (_nested(3000), "nested more than"),
        ({"\ud800": 1}, "lone surrogate"),
        ({"x": float("nan")}, "finite number"),
    ],
)
def test_langgraph_refuses_a_value_json_cannot_hold_naming_it(lg, value, says):
    with pytest.raises(ValueError, match=rf"put \('ns',\) 'k': value: not JSON: .*{says}"):
        lg.put(("ns",), "k", value)
    assert lg.get(("ns",), "k") is None


def test_langgraph_refuses_a_key_that_is_no_string(lg):
    with pytest.raises(ValueError, match="key: expected a non-empty string, got int"):
        lg.put(("ns",), 5, {"text": "x"})
    assert lg.get(("ns",), "5") is None


def test_the_engine_caps_a_search_as_the_services_do(eng):
    eng.add([{"role": "user", "content": "I live in Oslo."}], user_id="u")
    for kw, field in (
        ({"query_or_queries": "x" * 4001}, "query_or_queries"),
        ({"budget_tokens": 10**12}, "budget_tokens"),
        ({"limit": 10**12}, "limit"),
        ({"budget_tokens": True}, "budget_tokens"),
        ({"limit": "3"}, "limit"),
    ):
        args = {"query_or_queries": "Where do I live?", "user_id": "u"} | kw
        with pytest.raises(ValueError, match=field):
            eng.search(**args)
    assert eng.search("Where do I live?", user_id="u", limit=2.0, budget_tokens=600.0, threshold=0)[0].units


def test_langgraph_a_value_whose_indexed_fields_are_blank_is_kept_unindexed(lg):
    lg.put(("u",), "b", {"text": "   ", "title": "T"}, index=["text"])
    assert lg.get(("u",), "b").value == {"text": "   ", "title": "T"}
    assert [u for u in lg.engine.get_all(user_id="u") if u["type"] == "message"] == []


def test_langgraph_values_are_forgotten_by_reset_and_delete_all(tmp_path):
    pytest.importorskip("langgraph")
    from xmemory_gpu.integrations.langgraph import XMemoryStore

    root = tmp_path / "s"
    with XMemoryStore.open(root, embedder=EMB) as st:
        st.put(("alice",), "a", {"text": "Alice keeps bees."})
        st.put(("alice",), "hidden", {"text": "Not searchable."}, index=False)
        st.put(("bob", "agent"), "b", {"text": "Bob paints."})
        st.engine.delete_all(user_id="alice")
        assert st.get(("alice",), "a") is None and st.get(("alice",), "hidden") is None
        assert st.get(("bob", "agent"), "b").value == {"text": "Bob paints."}  # another scope stays
        st.put(("alice",), "a2", {"text": "Alice moved to Porto."})
        st.put(("carol",), "only-hidden", {"text": "Kept unindexed."}, index=False)
        assert st.engine.reset() == 2
        assert st.get(("alice",), "a2") is None and st.get(("bob", "agent"), "b") is None
        assert (
            st.get(("carol",), "only-hidden") is None
        )  # a scope the engine never held: the reset takes it too
        assert st.search(("alice",)) == [] and st.list_namespaces() == []
        st.put(("alice",), "new", {"text": "A fresh start."})
        assert [i.key for i in st.search(("alice",), query="fresh start")] == ["new"]
    with XMemoryStore.open(root, embedder=EMB) as st:  # across a restart too
        assert st.get(("alice",), "a2") is None and [i.key for i in st.search(("alice",))] == ["new"]


def test_langgraph_unindexed_values_of_a_scope_the_engine_never_held_go_too(lg):
    lg.put(("carol",), "h", {"text": "Unindexed only."}, index=False)
    lg.put(("dave",), "h", {"text": "Unindexed only."}, index=False)
    assert lg.engine.delete_all(user_id="carol") == 0  # no memory to delete: the rows go all the same
    assert lg.get(("carol",), "h") is None and lg.get(("dave",), "h") is not None
    assert lg.engine.reset() == 0
    assert lg.get(("dave",), "h") is None and lg.list_namespaces() == []


def test_langgraph_values_are_forgotten_by_the_services_reset(tmp_path):
    pytest.importorskip("langgraph")
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    from xmemory_gpu.integrations.langgraph import XMemoryStore
    from xmemory_gpu.service import ServiceConfig, create_app

    with XMemoryStore.open(tmp_path / "s", embedder=EMB) as st:
        st.put(("alice",), "a", {"text": "Alice keeps bees."})
        with TestClient(create_app(st.engine, ServiceConfig(coalesce_ms=0))) as http:
            r = http.post("/v1/reset", headers={"Content-Length": "0"})
            assert r.status_code == 200 and r.json() == {"deleted_memories": 1}
        assert st.get(("alice",), "a") is None


def test_langgraph_items_of_an_earlier_release_move_into_the_catalogue(tmp_path):
    pytest.importorskip("langgraph")
    from xmemory_gpu.integrations.langgraph import OLD_DB_FILE, XMemoryStore

    root = tmp_path / "s"
    with MemoryEngine.open(root, embedder=EMB) as e:
        e.add([{"id": "lg-1", "speaker": "user", "content": "Alice keeps bees."}], user_id="alice")
    with sqlite3.connect(root / OLD_DB_FILE) as db:  # the earlier layout, one item of it stale (reset away)
        db.executescript("""
            CREATE TABLE items (namespace TEXT NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL, message_id TEXT,
                                created_at REAL NOT NULL, updated_at REAL NOT NULL, PRIMARY KEY (namespace, key));
            CREATE TABLE pending (namespace TEXT NOT NULL, message_id TEXT NOT NULL, PRIMARY KEY (namespace, message_id));
        """)
        db.executemany(
            "INSERT INTO items VALUES (?, ?, ?, ?, 1.0, 2.0)",
            [
                ('["alice"]', "a", '{"text": "Alice keeps bees."}', "lg-1"),
                ('["alice"]', "gone", '{"text": "Reset long ago."}', "lg-gone"),
                ('["bob"]', "hidden", '{"text": "Unindexed."}', None),
            ],
        )
    db.close()
    with XMemoryStore.open(root, embedder=EMB) as st:
        assert st.get(("alice",), "a").value == {"text": "Alice keeps bees."}
        assert st.get(("alice",), "gone") is None and st.get(("bob",), "hidden").value == {
            "text": "Unindexed."
        }
        assert [i.key for i in st.search(("alice",), query="bees")] == ["a"]
    assert not (root / OLD_DB_FILE).exists()
