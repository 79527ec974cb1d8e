"""One contract at the front door (``api.MemoryAPI`` / ``AsyncMemoryAPI``): the engine, the HTTP
client against a real server on 127.0.0.1, the async engine and the async client take the contract's
signatures and, through the same session (adds of a string, a message and a list, a batch, searches
one by one and batched, reads with filters and pages, an update, deletes, the history, a reset),
answer in the same shapes (keys, nested) with the same facts, and refuse alike (an unknown id, a bad
argument). Then the servers' shared rules: the HTTP service, the MCP server's HTTP transport and the
Ray Serve ingress frame bodies and check keys alike (``service.framing``, ``service.auth``)."""

from __future__ import annotations

import asyncio
import inspect
import json
import socket
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

pytest.importorskip("fastapi")
uvicorn = pytest.importorskip("uvicorn")

from xmemory_gpu.api import ANSWER_KEYS, CALLS, AsyncMemoryAPI, MemoryAPI, search_answer  # noqa: E402
from xmemory_gpu.client import AsyncMemoryClient, MemoryClient, ServiceError  # noqa: E402
from xmemory_gpu.engine import MemoryEngine  # noqa: E402
from xmemory_gpu.engine.aio import AsyncMemoryEngine  # noqa: E402
from xmemory_gpu.service import ServiceConfig, auth, create_app, framing  # noqa: E402

EMB = "hashing:64"
KINDS = ("engine", "client", "async_engine", "async_client")
ALICE_SAYS = [
    {"role": "user", "content": "I bought a red kayak in Porto.", "id": "k1"},
    {"role": "user", "content": "My sister Ana lives in Lisbon.", "id": "k2"},
    {"role": "user", "content": "I keep tomatoes in the garden.", "id": "k3"},
]


# -- the four implementations ----------------------------------------------------------------------


class _Ready(uvicorn.Server):
    """uvicorn's server that says when it listens (or has stopped trying)."""

    def __init__(self, config: Any) -> None:
        super().__init__(config)
        self.ready = threading.Event()

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        try:
            await super().startup(sockets)
        finally:
            self.ready.set()


class LiveServer:
    """``create_app`` over a new store, served by uvicorn on a socket of 127.0.0.1 in a thread;
    ready when uvicorn has started (its lifespan opened the engine)."""

    def __init__(self, store: Any) -> None:
        app = create_app(lambda: MemoryEngine.open(store, embedder=EMB), ServiceConfig())
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.server = _Ready(uvicorn.Config(app, log_level="warning"))
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()
        self.server.ready.wait()
        if not self.server.started:
            raise RuntimeError("the server did not start")

    def _run(self) -> None:
        try:
            self.server.run(sockets=[self.sock])
        finally:
            self.server.ready.set()

    def close(self) -> None:
        self.server.should_exit = True
        self.thread.join()
        self.sock.close()


class Awaited:
    """An async implementation called as a blocking one: each call awaited on one event loop."""

    def __init__(self, impl: Any, loop: asyncio.AbstractEventLoop) -> None:
        self.impl, self.loop = impl, loop

    def __getattr__(self, name: str) -> Callable[..., Any]:
        fn = getattr(self.impl, name)
        return lambda *a, **kw: self.loop.run_until_complete(fn(*a, **kw))


class Subject:
    """One implementation under test: ``mem`` (called as a blocking ``MemoryAPI``), ``raw`` (the
    object itself) and ``answers`` (its search results as dicts)."""

    def __init__(self, kind: str, mem: Any, raw: Any, answers: Callable[[list], list[dict]]) -> None:
        self.kind, self.mem, self.raw, self.answers = kind, mem, raw, answers


def _engine_answers(engine: MemoryEngine) -> Callable[[list], list[dict]]:
    return lambda results: [search_answer(r, engine.hits(r)) for r in results]


def _as_is(results: list) -> list[dict]:
    return results


def open_subject(kind: str, root: Any) -> tuple[Subject, Callable[[], None]]:
    """(the implementation ``kind`` over a new store under ``root``, how to close it)."""
    store = root / "store"
    if kind == "engine":
        eng = MemoryEngine.open(store, embedder=EMB)
        return Subject(kind, eng, eng, _engine_answers(eng)), eng.close
    if kind == "client":
        live = LiveServer(store)
        client = MemoryClient(live.url)
        return Subject(kind, client, client, _as_is), live.close
    loop = asyncio.new_event_loop()
    if kind == "async_engine":
        aeng = loop.run_until_complete(AsyncMemoryEngine.open(store, embedder=EMB))

        def close() -> None:
            loop.run_until_complete(aeng.aclose())
            loop.close()

        return Subject(kind, Awaited(aeng, loop), aeng, _engine_answers(aeng.engine)), close
    live = LiveServer(store)
    aclient = AsyncMemoryClient(live.url)

    def close_client() -> None:
        loop.close()
        live.close()

    return Subject(kind, Awaited(aclient, loop), aclient, _as_is), close_client


@pytest.fixture(params=KINDS)
def subject(request, tmp_path) -> Iterator[Subject]:
    s, close = open_subject(request.param, tmp_path)
    try:
        yield s
    finally:
        close()


# -- one session, its shapes and facts ------------------------------------------------------------


def shape(x: Any) -> Any:
    """``x``'s shape: an object's keys with their values' shapes, a list's items' shapes in order, a
    scalar's kind (a number is a number, int or float)."""
    if isinstance(x, dict):
        return {k: shape(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [shape(v) for v in x]
    if x is None or isinstance(x, (bool, str)):
        return type(x).__name__
    if isinstance(x, (int, float)):
        return "number"
    return f"other:{type(x).__name__}"


def refused(call: Callable[[], Any]) -> str:
    """How a call was refused, in the contract's words: an unknown unit, or an invalid argument."""
    try:
        call()
    except KeyError:
        return "unknown"
    except ValueError:
        return "invalid"
    except ServiceError as exc:
        return {404: "unknown", 422: "invalid"}.get(exc.status, f"HTTP {exc.status}")
    return "accepted"


def call_sequence(s: Subject) -> dict[str, Any]:
    """The contract's calls, in the order an app makes them, on a new store: every answer, by call."""
    mem = s.mem
    out: dict[str, Any] = {}
    out["add_string"] = mem.add("I play the cello on Sundays.", user_id="alice", metadata={"topic": "music"})
    out["add_message"] = mem.add(
        {"role": "user", "content": "I keep bees on the roof.", "id": "b1"}, user_id="bob", events=True
    )
    out["add_list"] = mem.add(ALICE_SAYS, user_id="alice", metadata={"topic": "life"})
    out["add_batch"] = mem.add_batch(
        [
            {
                "messages": [{"role": "user", "content": "I run every morning.", "id": "c1"}],
                "user_id": "carol",
            },
            {"messages": "I collect old maps.", "agent_id": "guide", "user_id": "dave"},
        ],
        events=True,
    )
    out["add_batch_ids"] = mem.add_batch(
        [{"messages": [{"role": "user", "content": "I bake bread.", "id": "c2"}], "user_id": "carol"}]
    )
    out["search"] = s.answers(mem.search("Where does Ana live?", user_id="alice", top_k=2))
    out["search_queries"] = s.answers(
        mem.search(["kayak", "cello"], user_id="alice", limit=2, filters={"topic": "life"})
    )
    out["search_batch"] = [
        s.answers(r)
        for r in mem.search_batch(
            [
                {"query": "What does Bob keep?", "user_id": "bob"},
                {"queries": ["kayak", "garden"], "user_id": "alice", "top_k": 1},
            ]
        )
    ]
    out["get"] = mem.get("k1", user_id="alice")
    out["get_all"] = mem.get_all(user_id="alice")
    out["get_all_filtered"] = mem.get_all(user_id="alice", filters={"topic": "music"})
    out["get_all_page"] = mem.get_all(user_id="alice", page=2, page_size=2)
    out["get_all_agent"] = mem.get_all(agent_id="guide")
    out["update"] = mem.update("k1", "I bought a green canoe in Porto.", user_id="alice")
    out["get_updated"] = mem.get("k1", user_id="alice")
    out["delete"] = mem.delete("k2", user_id="alice")
    out["history"] = mem.history(user_id="alice")
    out["refused"] = [
        refused(lambda: mem.get("nope", user_id="alice")),
        refused(lambda: mem.delete("nope", user_id="alice")),
        refused(lambda: mem.search("q", user_id="alice", limit=0)),
        refused(lambda: mem.search_batch([{"query": "q", "user_id": "alice", "limit": 0}])),
        refused(lambda: mem.add([{"role": "user", "content": "x"}], user_id="alice", metadata=[1])),
    ]
    out["delete_all"] = mem.delete_all(user_id="alice")
    out["after_delete_all"] = mem.get_all(user_id="alice")
    out["reset"] = mem.reset()
    out["after_reset"] = mem.get_all(user_id="bob")
    return out


def facts(out: dict[str, Any]) -> dict[str, Any]:
    """What every implementation must agree on beyond the shapes (assigned ids and times left out)."""

    def found(answers: list[dict]) -> list[tuple[str, str]]:
        return [(u["type"], u["memory"]) for a in answers for u in a["units"]]

    return {
        "add_list": out["add_list"],
        "add_message": [(e["event"], e["memory"]) for e in out["add_message"]["results"]],
        "add_batch": [(e["event"], e["memory"]) for a in out["add_batch"] for e in a["results"]],
        "add_batch_ids": out["add_batch_ids"],
        "search": found(out["search"]),
        "search_queries": found(out["search_queries"]),
        "search_batch": [found(r) for r in out["search_batch"]],
        "get": out["get"]["text"],
        "get_all": [(u["type"], u["text"]) for u in out["get_all"]],
        "get_all_filtered": [u["text"] for u in out["get_all_filtered"] if u["type"] == "message"],
        "get_all_page": [u["text"] for u in out["get_all_page"]],
        "get_all_agent": [(u["type"], u["user_id"], u["agent_id"]) for u in out["get_all_agent"]],
        "update": out["update"]["text"],
        "history": [e["op"] for e in out["history"]],
        "rest": [
            out[k] for k in ("delete", "refused", "delete_all", "after_delete_all", "reset", "after_reset")
        ],
    }


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> dict[str, Any]:
    """The session on the engine itself."""
    s, close = open_subject("engine", tmp_path_factory.mktemp("reference"))
    try:
        return call_sequence(s)
    finally:
        close()


def test_every_implementation_takes_the_contracts_signatures():
    for cls, proto, awaited in (
        (MemoryEngine, MemoryAPI, False),
        (MemoryClient, MemoryAPI, False),
        (AsyncMemoryEngine, AsyncMemoryAPI, True),
        (AsyncMemoryClient, AsyncMemoryAPI, True),
    ):
        for name in CALLS:
            want = inspect.signature(getattr(proto, name)).parameters
            got = inspect.signature(getattr(cls, name)).parameters
            assert [(p.name, p.kind, p.default) for p in got.values()] == [
                (p.name, p.kind, p.default) for p in want.values()
            ], (cls.__name__, name)
            assert inspect.iscoroutinefunction(getattr(cls, name)) == awaited, (cls.__name__, name)


def test_the_session_answers_alike(subject, reference):
    assert isinstance(subject.raw, AsyncMemoryAPI if subject.kind.startswith("async") else MemoryAPI)
    out = call_sequence(subject)
    assert list(out["search"][0]) == list(ANSWER_KEYS)
    assert out["update"] == out["get_updated"]  # one shape: the message as get gives it
    assert out["add_message"]["ids"] == ["b1"] and out["add_message"]["results"][0]["event"] == "ADD"
    assert len(out["add_string"]) == 1 and isinstance(out["add_string"][0], str)
    assert out["add_batch"][0]["ids"] == ["c1"] and out["add_batch_ids"] == [["c2"]]
    assert {tuple(e) for e in out["history"]} == {("op", "ids", "time")}
    assert out["refused"] == ["unknown", "unknown", "invalid", "invalid", "invalid"]
    assert out["delete_all"] == 3 and out["after_delete_all"] == [] and out["reset"] == 3
    for call in out:
        assert shape(out[call]) == shape(reference[call]), call
    assert facts(out) == facts(reference)


# -- the servers' shared rules: framing and keys --------------------------------------------------

KEY = "k" * 20
BOUND = "b" * 20


def test_one_key_check():
    keys = {KEY: None, BOUND: frozenset({"alice"})}
    assert auth.bearer_token(f"bearer  {KEY} ") == KEY
    for value in (None, "", "Bearer", "Bearer  ", f"Basic {KEY}", KEY):
        assert auth.bearer_token(value) is None, value
    assert auth.authenticate(keys, None) == (auth.MISSING, None)
    assert auth.authenticate(keys, f"Basic {KEY}") == (auth.MISSING, None)
    assert auth.authenticate(keys, "Bearer nope") == (auth.INVALID, None)
    assert auth.authenticate(keys, f"Bearer {KEY}") == (None, None)
    assert auth.authenticate(keys, f"Bearer {BOUND}") == (None, frozenset({"alice"}))
    assert auth.every_scope(keys, f"Bearer {KEY}") and not auth.every_scope(keys, f"Bearer {BOUND}")
    assert auth.user_refusal(None, "bob") is None and auth.user_refusal(frozenset({"alice"}), "alice") is None
    assert auth.user_refusal(frozenset({"alice"}), "bob").startswith("user_id: ")
    assert auth.user_refusal(frozenset({"alice"}), None).startswith("user_id: ")


def test_one_body_framing():
    limit = framing.MAX_BODY_BYTES
    assert ServiceConfig().max_body_bytes == limit
    assert framing.refusal("GET", "/v1/memories", None) is None
    assert framing.refusal("DELETE", "/v1/memories/x", None) is None
    assert framing.refusal("POST", "/v1/memories", str(limit)) is None
    assert framing.refusal("POST", "/v1/memories", None)[0] == 411
    assert framing.refusal("DELETE", "/v1/batch", None)[0] == 411
    for length in (str(limit + 1), "-1", "1e9", ""):
        assert framing.refusal("PUT", "/v1/batch", length)[0] == 413, length


def _call(
    app: Any, method: str, path: str, headers: dict[str, str], query: str = ""
) -> tuple[int, dict, dict]:
    """One request through an ASGI ``app`` (its body never sent: the framing refuses it first or
    the route needs none): (status, JSON body, headers)."""
    sent: dict[str, Any] = {"headers": [], "body": b""}

    async def receive() -> dict:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(msg: dict) -> None:
        if msg["type"] == "http.response.start":
            sent["status"], sent["headers"] = msg["status"], msg.get("headers", [])
        elif msg["type"] == "http.response.body":
            sent["body"] += msg.get("body", b"")

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "root_path": "",
        "query_string": query.encode(),
        "headers": [(k.lower().encode(), v.encode()) for k, v in headers.items()],
        "client": ("127.0.0.1", 1),
        "server": ("127.0.0.1", 80),
    }
    asyncio.run(app(scope, receive, send))
    hdrs = {k.decode().lower(): v.decode() for k, v in sent["headers"]}
    return sent["status"], json.loads(sent["body"]), hdrs


def _service() -> Any:
    return create_app(lambda: None, ServiceConfig(api_keys={KEY: None}))


def _mcp() -> Any:
    pytest.importorskip("mcp")
    from starlette.responses import JSONResponse

    from xmemory_gpu.integrations.mcp_server import RequireKey

    async def inner(scope, receive, send) -> None:
        await JSONResponse({"ok": True})(scope, receive, send)

    return RequireKey(inner, {KEY: None})


def _ray_ingress() -> Any:
    pytest.importorskip("ray.serve")
    from starlette.requests import Request

    from xmemory_gpu.distributed.ray_serve import Ingress

    ingress = Ingress([], ServiceConfig(api_keys={KEY: None}))

    async def app(scope, receive, send) -> None:
        await (await ingress(Request(scope, receive)))(scope, receive, send)

    return app


@pytest.mark.parametrize("server", [_service, _mcp, _ray_ingress], ids=["service", "mcp", "ray"])
def test_every_server_frames_bodies_and_checks_keys_alike(server):
    app = server()
    path = "/mcp" if server is _mcp else "/v1/memories"
    limit = framing.MAX_BODY_BYTES
    too_big = {"Authorization": f"Bearer {KEY}", "Content-Length": str(limit + 1)}
    status, body, _ = _call(app, "POST", path, too_big)
    assert (status, body["detail"]) == (413, f"body larger than the limit of {limit} bytes")
    status, body, _ = _call(app, "POST", path, {"Authorization": f"Bearer {KEY}"})
    assert (status, body["detail"]) == (411, "a Content-Length header is required")
    for headers, detail in (({}, auth.MISSING), ({"Authorization": "Bearer wrong"}, auth.INVALID)):
        status, body, hdrs = _call(app, "GET", path, headers, query="user_id=alice")
        assert (status, body["detail"], hdrs["www-authenticate"]) == (401, detail, "Bearer")


def test_a_search_item_with_query_and_queries_is_refused_by_the_engine(tmp_path):
    from xmemory_gpu.engine import MemoryEngine

    with MemoryEngine.open(tmp_path / "s", embedder="hashing:64") as eng:
        eng.add("I live in Lisbon.", user_id="u")
        with pytest.raises(ValueError, match="exactly one of query and queries"):
            eng.search_batch([{"query": "a", "queries": ["b"], "user_id": "u"}])
        with pytest.raises(ValueError, match="queries: expected a list"):
            eng.search_batch([{"queries": "where", "user_id": "u"}])


def test_framing_refuses_a_non_ascii_length():
    from xmemory_gpu.service.framing import refusal

    assert refusal("POST", "/v1/memories", "\u00b2")[0] == 413
    assert refusal("POST", "/v1/memories", "12") is None


def test_service_caps_follow_its_config():
    from xmemory_gpu.service.state import ServiceConfig

    assert ServiceConfig(max_items=8).max_items == 8
    with pytest.raises(ValueError, match="max_items"):
        ServiceConfig(max_items=10**6)
