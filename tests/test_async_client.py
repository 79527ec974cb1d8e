"""``AsyncMemoryClient`` against a real ``xmemory serve`` on 127.0.0.1: every call the blocking client
has, with the same signature and the same answers; the same errors (401, 403, 404, 422 as
``ServiceError``); concurrent calls on one event loop; a redirect not followed (the key stays home);
a server that never answers is a ``TimeoutError``; a chunked answer and a base URL with a path."""

from __future__ import annotations

import asyncio
import inspect
import json
import signal
import socket
import threading
from http.server import BaseHTTPRequestHandler

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

from test_service import ADMIN, ALICE, Server  # noqa: E402
from test_service_hardening import _Recorder, _serve  # noqa: E402

from xmemory_gpu.client import AsyncMemoryClient, MemoryClient, ServiceError  # noqa: E402


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    root = tmp_path_factory.mktemp("async")
    keys = root / "keys.json"
    keys.write_text(json.dumps({ADMIN: "*", ALICE: ["alice"]}))
    s = Server(root / "store", keys)
    yield s
    s.kill(signal.SIGTERM)


def test_the_async_client_has_every_call_of_the_blocking_one():
    public = {n for n in dir(MemoryClient) if not n.startswith("_")} - {"close"}
    assert public == {n for n in dir(AsyncMemoryClient) if not n.startswith("_")} - {"aclose"}
    for name in public:
        fn = getattr(AsyncMemoryClient, name)
        assert inspect.iscoroutinefunction(fn), name
        assert inspect.signature(fn) == inspect.signature(getattr(MemoryClient, name)), name


def test_every_call_against_a_real_server(live):
    sync = MemoryClient(live.url, api_key=ADMIN)

    async def main() -> None:
        async with AsyncMemoryClient(live.url, api_key=ADMIN) as c:
            await calls(c)
        await c.aclose()  # closing twice is harmless

    async def calls(c: AsyncMemoryClient) -> None:
        assert (await c.health())["status"] == "ok"
        ids = await c.add(
            [
                {"role": "user", "content": "I bought a red kayak in town.", "id": "a/1"},
                {"role": "user", "content": "My sister Ana lives in Porto.", "id": "a2"},
            ],
            user_id="alice",
            metadata={"topic": "life"},
        )
        assert ids == ["a/1", "a2"]
        assert await c.add_batch(
            [{"user_id": "bob", "messages": [{"role": "user", "content": "I play the violin."}]}]
        )
        res = await c.search(["What did I buy?", "Where does Ana live?"], user_id="alice", limit=2)
        assert len(res) == 2 and all(len(r["units"]) <= 2 for r in res)
        assert res == sync.search(["What did I buy?", "Where does Ana live?"], user_id="alice", limit=2)
        assert (await c.get_all(user_id="alice")) == sync.get_all(user_id="alice")
        assert (await c.get_all(user_id="alice", filters={"topic": "life"})) == sync.get_all(
            user_id="alice", filters={"topic": "life"}
        )
        assert (await c.get("a/1", user_id="alice"))["text"] == "I bought a red kayak in town."
        updated = await c.update("a/1", "I bought a green canoe in town.", user_id="alice")
        assert updated == await c.get("a/1", user_id="alice")  # one shape: the message as get gives it
        assert (
            updated["text"] == "I bought a green canoe in town."
            and updated["updated_at"] >= updated["created_at"]
        )
        assert {"user_id": "alice", "agent_id": None, "run_id": None} in await c.scopes()
        await c.delete("a2", user_id="alice")
        assert [u["id"] for u in await c.get_all(user_id="alice") if u["type"] == "message"] == ["a/1"]
        assert [e["op"] for e in await c.history(user_id="alice")] == ["add", "update", "delete"]
        assert "xmemory_requests_total" in await c.metrics()
        assert await c.delete_all(user_id="alice") == 1
        assert await c.reset() == 1  # bob's memory
        assert await c.get_all(user_id="bob") == []

    asyncio.run(main())


def test_errors_are_the_blocking_clients(live):
    async def status(aw) -> int:
        with pytest.raises(ServiceError) as e:
            await aw
        return e.value.status

    async def main() -> None:
        admin, alice = AsyncMemoryClient(live.url, api_key=ADMIN), AsyncMemoryClient(live.url, api_key=ALICE)
        assert await status(AsyncMemoryClient(live.url).get_all(user_id="alice")) == 401
        assert await status(alice.search("x", user_id="bob")) == 403
        assert await status(alice.reset()) == 403
        assert await status(admin.get("nope", user_id="alice")) == 404
        with pytest.raises(ServiceError) as e:
            await admin.search("q", user_id="alice", limit=0)
        assert e.value.status == 422 and e.value.detail.startswith("limit:")
        with pytest.raises(ConnectionError):
            await AsyncMemoryClient(f"http://127.0.0.1:{_closed_port()}").health()

    asyncio.run(main())
    with pytest.raises(ValueError, match="base_url"):
        AsyncMemoryClient("127.0.0.1:8000")


def test_concurrent_calls_on_one_loop(live):
    async def main() -> list:
        c = AsyncMemoryClient(live.url, api_key=ADMIN)
        users = [f"c{i}" for i in range(6)]
        await asyncio.gather(
            *(
                c.add([{"role": "user", "content": f"{u} bought a lamp.", "id": f"{u}-0"}], user_id=u)
                for u in users
            )
        )
        return await asyncio.gather(
            *(c.search("What did I buy?", user_id=u) for u in users for _ in range(3))
        )

    out = asyncio.run(main())
    assert len(out) == 18
    for n, res in enumerate(out):
        assert res[0]["message_ids"] == [f"c{n // 3}-0"]  # each answer is its own scope's


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_no_redirect_is_followed():
    target_cls = type("Target", (_Recorder,), {"seen": [], "location": ""})
    target = _serve(target_cls)
    redirector = _serve(
        type("Redirector", (_Recorder,), {"seen": [], "location": f"http://127.0.0.1:{target.server_port}"})
    )
    try:

        async def main() -> None:
            c = AsyncMemoryClient(f"http://127.0.0.1:{redirector.server_port}", api_key=ADMIN, timeout=10)
            for aw in (c.get_all(user_id="alice"), c.add([{"role": "u", "content": "x"}], user_id="alice")):
                with pytest.raises(ServiceError) as e:
                    await aw
                assert e.value.status == 302 and f"127.0.0.1:{target.server_port}" in e.value.detail
            assert (
                await AsyncMemoryClient(f"http://127.0.0.1:{target.server_port}", api_key=ADMIN).get_all(
                    user_id="a"
                )
                == []
            )

        asyncio.run(main())
        assert (
            len(target_cls.seen) == 1 and target_cls.seen[0]["Authorization"] == f"Bearer {ADMIN}"
        )  # the direct call only
    finally:
        redirector.shutdown()
        target.shutdown()


class _Chunked(BaseHTTPRequestHandler):
    """Answers in chunks under a base path, records the request line; or never answers (``/slow``:
    not until ``release`` is set, at the test's end)."""

    protocol_version = "HTTP/1.1"
    lines: list[str] = []
    release = threading.Event()

    def do_GET(self) -> None:
        self.lines.append(self.requestline)
        if self.path.startswith("/slow"):
            self.release.wait(600)  # bounded all the same
            return
        body = json.dumps({"units": [{"id": "x", "text": "é" * 3000}]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json; charset=utf-8")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for i in range(0, len(body), 1000):
            part = body[i : i + 1000]
            self.wfile.write(f"{len(part):x}\r\n".encode() + part + b"\r\n")
        self.wfile.write(b"0\r\n\r\n")

    def log_message(self, *args) -> None:
        pass


def test_chunked_answers_base_paths_and_timeouts():
    srv = _serve(type("C", (_Chunked,), {"lines": [], "release": threading.Event()}))
    handler = srv.RequestHandlerClass
    try:

        async def main() -> None:
            c = AsyncMemoryClient(f"http://127.0.0.1:{srv.server_port}/mem/", timeout=120)
            units = await c.get_all(user_id="a b", filters={"k": "v"})
            assert units == [{"id": "x", "text": "é" * 3000}]
            # the server holds the request until the test ends: only the client's timeout ends the call
            with pytest.raises(TimeoutError, match="within 1"):
                await AsyncMemoryClient(f"http://127.0.0.1:{srv.server_port}/slow", timeout=1).health()

        asyncio.run(main())
        assert handler.lines[0] == (
            "GET /mem/v1/memories?user_id=a+b&filters=%7B%22k%22%3A+%22v%22%7D HTTP/1.1"
        )
    finally:
        handler.release.set()
        srv.shutdown()


def test_sync_and_async_clients_send_the_same_requests():
    seen: list[tuple[str, str, bytes]] = []

    class Echo(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _answer(self) -> None:
            n = int(self.headers.get("Content-Length") or 0)
            seen.append((self.command, self.path, self.rfile.read(n)))
            body = json.dumps(
                {
                    "ids": [],
                    "results": [],
                    "units": [],
                    "history": [],
                    "deleted_messages": 0,
                    "deleted_memories": 0,
                    "scopes": [],
                }
            ).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST = do_PUT = do_DELETE = _answer

        def log_message(self, *args) -> None:
            pass

    srv = _serve(Echo)
    url = f"http://127.0.0.1:{srv.server_port}"
    calls = [
        (
            "add",
            ([{"role": "user", "content": "x"}],),
            {"user_id": "u", "metadata": {"a": 1}, "user_name": "U"},
        ),
        ("add_batch", ([{"user_id": "u", "messages": []}],), {}),
        (
            "search",
            ("q",),
            {"user_id": "u", "agent_id": "g", "limit": 3, "threshold": 0.2, "filters": {"a": 1}},
        ),
        ("get_all", (), {"user_id": "u", "filters": {"a": True}}),
        ("get", ("a/b",), {"user_id": "u"}),
        ("update", ("a/b", "new"), {"user_id": "u", "run_id": "r"}),
        ("delete", ("a/b",), {"user_id": "u"}),
        ("delete_all", (), {"user_id": "u"}),
        ("reset", (), {}),
        ("history", (), {"user_id": "u"}),
        ("add", ("just text",), {"agent_id": "g", "infer": False, "events": True}),
        ("add", ({"role": "user", "content": "one"},), {"run_id": "r"}),
        ("search", ("q",), {"agent_id": "g"}),
        ("scopes", (), {"user_id": "u"}),
    ]
    try:
        sync, asyn = MemoryClient(url), AsyncMemoryClient(url)
        for name, args, kw in calls:
            getattr(sync, name)(*args, **kw)
        first = list(seen)
        seen.clear()

        async def main() -> None:
            for name, args, kw in calls:
                await getattr(asyn, name)(*args, **kw)

        asyncio.run(main())
        assert seen == first and len(seen) == len(calls)
    finally:
        srv.shutdown()


def test_cancelling_a_call_closes_its_connection():
    entered, closed = threading.Event(), threading.Event()

    class Hold(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            entered.set()
            self.rfile.read(1)  # blocks until the client closes the connection
            closed.set()

        def log_message(self, *args) -> None:
            pass

    srv = _serve(Hold)
    try:

        async def main() -> None:
            task = asyncio.ensure_future(AsyncMemoryClient(f"http://127.0.0.1:{srv.server_port}").health())
            for _ in range(
                60000
            ):  # bounded: cancelled once the server has the request, however slow the machine
                if entered.is_set():
                    break
                await asyncio.sleep(0.01)
            assert entered.is_set()
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task

        asyncio.run(main())
        assert closed.wait(600)  # a hang guard: the close comes at once
    finally:
        srv.shutdown()
