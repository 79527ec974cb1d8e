"""``xmemory serve`` for real: a server process on 127.0.0.1 (a free port), talked to over HTTP with
``MemoryClient``: auth, validation limits, isolation, concurrent clients (bounded loops), a
``kill -9`` mid-stream then a restart (every acknowledged add is there once), graceful SIGTERM."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

from xmemory_gpu.client import MemoryClient, ServiceError  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
ADMIN = "admin-key-0123456789abcdef"
ALICE = "alice-key-0123456789abcdef"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(self, store: Path, keys: Path, coalesce_ms: float = 2.0, extra: list[str] = ()) -> None:
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT), "XMEMORY_API_KEY": ""}
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "xmemory_gpu",
                "serve",
                str(store),
                "--port",
                str(self.port),
                "--keys-file",
                str(keys),
                "--embedder",
                "hashing:64",
                "--coalesce-ms",
                str(coalesce_ms),
                *extra,
            ],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        deadline = time.time() + 600
        while (
            time.time() < deadline
        ):  # bounded wait for the port (seconds; the bound is for a server that never listens)
            try:
                urllib.request.urlopen(self.url + "/health", timeout=1).read()
                return
            except OSError:
                if self.proc.poll() is not None:
                    raise RuntimeError(self.proc.stdout.read()) from None
                time.sleep(0.2)
        self.kill()
        raise RuntimeError("server did not start")

    def kill(self, sig: int = signal.SIGKILL) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        code = self.proc.wait(timeout=600)  # a hang guard: the drain and commit take seconds
        self.proc.stdout.close()
        return code


@pytest.fixture
def keys(tmp_path) -> Path:
    p = tmp_path / "keys.json"
    p.write_text(json.dumps({ADMIN: "*", ALICE: ["alice"]}))
    return p


@pytest.fixture
def server(tmp_path, keys):
    s = Server(tmp_path / "store", keys)
    yield s
    s.kill(signal.SIGTERM)


def _msgs(user: str, n: int, start: int = 0) -> list[dict]:
    return [
        {
            "role": "user",
            "content": f"{user} note {i}: I bought a {['lamp', 'kayak', 'violin'][i % 3]} in town.",
            "id": f"{user}-{i}",
        }
        for i in range(start, start + n)
    ]


def test_auth_missing_wrong_and_out_of_scope(server):
    assert MemoryClient(server.url).health()["status"] == "ok"  # /health needs no key
    for client, status in (
        (MemoryClient(server.url), 401),
        (MemoryClient(server.url, api_key="wrong-key-000000000"), 401),
    ):
        with pytest.raises(ServiceError) as e:
            client.add(_msgs("alice", 1), user_id="alice")
        assert e.value.status == status
    alice = MemoryClient(server.url, api_key=ALICE)
    assert alice.add(_msgs("alice", 2), user_id="alice") == ["alice-0", "alice-1"]
    for call in (
        lambda: alice.add(_msgs("bob", 1), user_id="bob"),
        lambda: alice.search("x", user_id="bob"),
        lambda: alice.get_all(user_id="bob"),
        lambda: alice.delete_all(user_id="bob"),
    ):
        with pytest.raises(ServiceError) as e:
            call()
        assert e.value.status == 403
    with pytest.raises(ServiceError) as e:
        MemoryClient(server.url).metrics()
    assert e.value.status == 401
    assert "xmemory_requests_total" in MemoryClient(server.url, api_key=ADMIN).metrics()


def _post(url: str, path: str, body: bytes, key: str = ADMIN) -> tuple[int, dict]:
    req = urllib.request.Request(
        url + path,
        data=body,
        method="POST",
        headers={"Content-Type": "application/json", "Authorization": f"Bearer {key}"},
    )
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def test_validation_limits_name_the_field(server):
    u = server.url
    code, body = _post(u, "/v1/search", json.dumps({"user_id": "a", "query": "x" * 5000}).encode())
    assert code == 422 and body["detail"].startswith("query:")
    code, body = _post(u, "/v1/search", json.dumps({"user_id": "a", "queries": ["q"] * 300}).encode())
    assert code == 422 and body["detail"].startswith("queries:")
    code, body = _post(u, "/v1/memories", json.dumps({"user_id": "a", "messages": _msgs("a", 1001)}).encode())
    assert code == 422 and body["detail"].startswith("messages:")
    code, body = _post(
        u,
        "/v1/memories/batch",
        json.dumps({"items": [{"user_id": "a", "messages": _msgs("a", 1)}] * 300}).encode(),
    )
    assert code == 422 and body["detail"].startswith("items:")
    import http.client

    conn = http.client.HTTPConnection(
        "127.0.0.1", server.port, timeout=30
    )  # the header alone is refused, unread
    conn.putrequest("POST", "/v1/memories")
    conn.putheader("Content-Length", str(5 << 20))
    conn.putheader("Authorization", f"Bearer {ADMIN}")
    conn.endheaders()
    resp = conn.getresponse()
    assert resp.status == 413 and "limit" in json.loads(resp.read())["detail"]
    conn.close()
    code, body = _post(
        u,
        "/v1/memories",
        json.dumps({"user_id": "a", "messages": [{"role": "u", "content": "x", "mood": 1}]}).encode(),
    )
    assert code == 422 and "mood" in json.dumps(body)
    code, body = _post(
        u,
        "/v1/memories",
        json.dumps(
            {"user_id": "a", "messages": [{"role": "u", "content": "x", "timestamp": "soon"}]}
        ).encode(),
    )
    assert code == 422 and "timestamp" in body["detail"]
    code, body = _post(
        u, "/v1/search", json.dumps({"user_id": "a", "query": "q", "strategy": "nope"}).encode()
    )
    assert code == 422 and body["detail"].startswith("strategy:") and "xmemory" in body["detail"]
    code, body = _post(u, "/v1/search", json.dumps({"user_id": "", "query": "q"}).encode())
    assert code == 422 and body["detail"].startswith("user_id:")


def test_isolation_and_concurrent_clients(server):
    client = MemoryClient(server.url, api_key=ADMIN)
    users = [f"user{i}" for i in range(8)]
    acked: dict[str, list[str]] = {u: [] for u in users}
    errors: list[Exception] = []

    def worker(user: str) -> None:
        try:
            for r in range(5):  # bounded
                acked[user] += client.add(_msgs(user, 2, start=2 * r), user_id=user)
                for res in client.search(["what did I buy?", "lamp"], user_id=user, strategy="xmemory"):
                    assert all(m.startswith(user + "-") for m in res["message_ids"]), res["message_ids"]
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(u,)) for u in users]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=1800)  # a hang guard: each worker runs a bounded loop
    assert not errors, errors
    for u in users:
        ids = [x["id"] for x in client.get_all(user_id=u) if x["type"] == "message"]
        assert sorted(ids) == sorted(acked[u]) and len(ids) == 10
    m = client.metrics()
    assert "xmemory_coalesced_search_requests_total" in m and "xmemory_ingested_messages_total 80" in m


def test_kill_9_then_restart_keeps_every_acknowledged_add(tmp_path, keys):
    store = tmp_path / "k"
    s = Server(store, keys)
    client = MemoryClient(s.url, api_key=ADMIN, timeout=30)
    acked: list[str] = []
    stop = threading.Event()

    def writer() -> None:
        for r in range(400):  # bounded; the kill ends it sooner
            if stop.is_set():
                return
            try:
                acked.extend(client.add(_msgs("w", 2, start=2 * r), user_id="w"))
            except (ServiceError, OSError):
                return

    t = threading.Thread(target=writer)
    t.start()
    deadline = time.time() + 120
    while len(acked) < 6 and time.time() < deadline and t.is_alive():  # bounded: a few adds acknowledged
        time.sleep(0.05)
    time.sleep(0.3)  # then kill while the stream goes on
    s.kill(signal.SIGKILL)
    stop.set()
    t.join(timeout=60)
    assert acked, "nothing was acknowledged before the kill"
    s2 = Server(store, keys)
    try:
        ids = [
            x["id"]
            for x in MemoryClient(s2.url, api_key=ADMIN).get_all(user_id="w")
            if x["type"] == "message"
        ]
        assert set(acked) <= set(ids) and len(ids) == len(set(ids))
        assert len(ids) - len(acked) <= 2  # at most the batch in flight
    finally:
        s2.kill(signal.SIGTERM)


def _accepted(pid: int, port: int, psutil) -> int:
    """Connections on ``port`` the process ``pid`` has accepted (not only the kernel's backlog)."""
    return sum(
        1
        for c in psutil.Process(pid).net_connections(kind="tcp")
        if c.laddr and c.laddr.port == port and c.status == psutil.CONN_ESTABLISHED
    )


def test_sigterm_drains_in_flight_requests(tmp_path, keys):
    """4 adds sent in full, then SIGTERM once the server has accepted their connections (a request
    not yet accepted would be refused, not drained): each is answered and committed."""
    import http.client

    psutil = pytest.importorskip("psutil")
    s = Server(tmp_path / "g", keys, coalesce_ms=500)  # the adds wait in the coalescer when the signal comes
    conns = []
    for i in range(4):
        conn = http.client.HTTPConnection("127.0.0.1", s.port, timeout=600)  # a hang guard
        conn.request(
            "POST",
            "/v1/memories",
            json.dumps({"user_id": f"g{i}", "messages": _msgs(f"g{i}", 3)}),
            {"Content-Type": "application/json", "Authorization": f"Bearer {ADMIN}"},
        )  # sent whole
        conns.append(conn)
    for _ in range(30000):  # bounded: a condition, not a time, ends the wait
        if _accepted(s.proc.pid, s.port, psutil) >= 4 or s.proc.poll() is not None:
            break
        time.sleep(0.01)
    assert s.kill(signal.SIGTERM) == 0  # drained, committed, and a requested stop is no failure
    out: list = []
    for conn in conns:  # every in-flight request was answered before the process ended
        r = conn.getresponse()
        body = json.loads(r.read())
        assert r.status == 200, body
        out.append(body["ids"])
        conn.close()
    assert len(out) == 4
    s2 = Server(tmp_path / "g", keys)
    try:
        c2 = MemoryClient(s2.url, api_key=ADMIN)
        for ids in out:  # every request that got an answer is committed
            user = ids[0].rsplit("-", 1)[0]
            assert {x["id"] for x in c2.get_all(user_id=user)} >= set(ids)
    finally:
        s2.kill(signal.SIGTERM)
