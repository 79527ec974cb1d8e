"""The service's answers to the fault campaign: forged ``/metrics`` labels, the client's key on
redirects, unsafe ``serve`` settings, ids holding ``/``, malformed JSON, the OpenAPI document against
the real error model and the real acceptance rules, strict types, what ``/health`` and ``/metrics``
show to which key, and SIGTERM's exit status. In-process (FastAPI's TestClient) where the HTTP layer
is the point; a real ``xmemory serve`` on 127.0.0.1 where the process or the client's URLs are."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

from fastapi.testclient import TestClient  # noqa: E402
from test_service import ADMIN, ALICE, ROOT, Server, _free_port  # noqa: E402

from xmemory_gpu.cli import main  # noqa: E402
from xmemory_gpu.client import MemoryClient, ServiceError  # noqa: E402
from xmemory_gpu.engine import MemoryEngine  # noqa: E402
from xmemory_gpu.service import ServiceConfig, create_app  # noqa: E402

KEYS = {ADMIN: None, ALICE: frozenset({"alice"})}
AUTH = {"Authorization": f"Bearer {ADMIN}"}


@pytest.fixture(scope="module")
def app(tmp_path_factory):
    return create_app(
        lambda: MemoryEngine.open(tmp_path_factory.mktemp("svc") / "store", embedder="hashing:64"),
        ServiceConfig(api_keys=KEYS, coalesce_ms=0),
    )


@pytest.fixture(scope="module")
def http(app):
    with TestClient(app) as c:
        yield c


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    """A real ``xmemory serve`` (keys file: ADMIN for every scope, ALICE for alice)."""
    root = tmp_path_factory.mktemp("live")
    keys = root / "keys.json"
    keys.write_text(json.dumps({ADMIN: "*", ALICE: ["alice"]}))
    s = Server(root / "store", keys)
    yield s
    s.kill(signal.SIGTERM)


def _post(http: TestClient, path: str, body: dict) -> tuple[int, dict]:
    r = http.post(path, json=body, headers=AUTH)
    return r.status_code, r.json()


# -- /metrics labels ----------------------------------------------------------------------

SAMPLE = re.compile(r'^xmemory_\w+(\{[a-z_]+="[^"\\\n]*"(,[a-z_]+="[^"\\\n]*")*\})? [0-9.e+-]+$')


def test_metrics_unmatched_routes_cannot_forge_or_grow_samples(app, http):
    forged = "/v1/search%22,status=%22500%22%7D%20123456789%20"
    assert http.get(forged).status_code == 404  # no key needed for a 404
    assert http.request("BREW", "/v1/brew").status_code == 404
    http.get("/metrics", headers=AUTH)  # its own series exist from here on
    before = len(http.get("/metrics", headers=AUTH).text)
    for i in range(40):  # bounded: distinct 2 KB paths and invented methods
        assert http.get(f"/x{i}/" + "a" * 2048).status_code == 404
        assert http.request(f"BREW{i}", "/v1/" + "b" * 100).status_code == 404
    text = http.get("/metrics", headers=AUTH).text
    assert len(text) - before < 200  # counts grew, no series was added
    templates = {r.path for r in app.router.routes if getattr(r, "path", None)} | {"<unmatched>"}
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        assert SAMPLE.match(line), line
        labels = dict(re.findall(r'(\w+)="([^"]*)"', line))
        assert labels.get("route", "<unmatched>") in templates, line
        assert labels.get("method", "GET") in {
            "GET",
            "HEAD",
            "POST",
            "PUT",
            "PATCH",
            "DELETE",
            "OPTIONS",
            "OTHER",
        }
    assert 'route="/v1/search",status="500"' not in text and "123456789" not in text
    assert 'xmemory_requests_total{method="GET",route="<unmatched>",status="404"} 41' in text
    assert 'xmemory_requests_total{method="OTHER",route="<unmatched>",status="404"} 41' in text


# -- the client's key on redirects ---------------------------------------------------------


class _Recorder(BaseHTTPRequestHandler):
    seen: list[dict] = []
    location = ""

    def _answer(self) -> None:
        if self.location:
            self.send_response(302)
            self.send_header("Location", self.location + self.path)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        self.seen.append(dict(self.headers))
        body = b'{"units": [], "ids": []}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = do_DELETE = _answer

    def log_message(self, *args) -> None:  # quiet
        pass


def _serve(handler: type) -> ThreadingHTTPServer:
    srv = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv


def test_client_does_not_carry_its_key_through_a_redirect():
    target_cls = type("Target", (_Recorder,), {"seen": [], "location": ""})
    target = _serve(target_cls)
    redirector = _serve(
        type("Redirector", (_Recorder,), {"seen": [], "location": f"http://127.0.0.1:{target.server_port}"})
    )
    try:
        client = MemoryClient(f"http://127.0.0.1:{redirector.server_port}", api_key=ADMIN, timeout=10)
        for call in (
            lambda: client.get_all(user_id="alice"),
            lambda: client.add([{"role": "u", "content": "x"}], user_id="alice"),
        ):
            with pytest.raises(ServiceError) as e:
                call()
            assert e.value.status == 302 and f"127.0.0.1:{target.server_port}" in e.value.detail
        assert target_cls.seen == []  # the other host got nothing, so never the key
        assert (
            MemoryClient(f"http://127.0.0.1:{target.server_port}", api_key=ADMIN).get_all(user_id="a") == []
        )
        assert target_cls.seen[0]["Authorization"] == f"Bearer {ADMIN}"  # the base URL itself still gets it
    finally:
        redirector.shutdown()
        target.shutdown()


# -- serve's start-up checks ---------------------------------------------------------------


def _refused(argv: list[str], capsys, monkeypatch) -> str:
    """Run ``xmemory serve`` in process; it must refuse before opening the store: one line, exit 2."""

    def reached(*a, **k):
        raise AssertionError("serve opened the store: the setting was not refused")

    monkeypatch.setattr(MemoryEngine, "open", reached)
    capsys.readouterr()
    assert main(["serve", *argv]) == 2
    out = capsys.readouterr()
    assert out.out == "" and len(out.err.strip().splitlines()) == 1 and "Traceback" not in out.err, out.err
    assert out.err.startswith("xmemory serve: error:")
    return out.err


@pytest.mark.parametrize(
    "args, named",
    [
        (["--host", "0.0.0.0"], "--host 0.0.0.0"),
        (["--host", "::"], "--host ::"),
        (["--host", "my.example.org"], "--host my.example.org"),
        (["--coalesce-ms", "inf"], "--coalesce-ms"),
        (["--coalesce-ms", "nan"], "--coalesce-ms"),
        (["--coalesce-ms", "-1"], "--coalesce-ms"),
        (["--coalesce-ms", "1e9"], "--coalesce-ms"),
        (["--port", "99999"], "--port"),
        (["--port", "0"], "--port"),
        (["--backend", "bogus"], "--backend"),
    ],
)
def test_serve_refuses_unsafe_or_broken_settings(tmp_path, capsys, monkeypatch, args, named):
    monkeypatch.setenv("XMEMORY_API_KEY", "")
    err = _refused([str(tmp_path / "s"), *args], capsys, monkeypatch)
    assert named in err
    assert not (tmp_path / "s").exists()  # nothing was created


def test_serve_refuses_a_short_env_key_and_an_unusable_backend(tmp_path, capsys, monkeypatch):
    from xmemory_gpu.ops import available_backends

    monkeypatch.setenv("XMEMORY_API_KEY", "x")
    assert "XMEMORY_API_KEY" in _refused([str(tmp_path / "s")], capsys, monkeypatch)
    monkeypatch.setenv("XMEMORY_API_KEY", "")
    absent = [(n, s.reason) for n, s in available_backends().items() if not s.available]
    if absent:
        err = _refused([str(tmp_path / "s"), "--backend", absent[0][0]], capsys, monkeypatch)
        assert "not usable here" in err and absent[0][1] in err
    monkeypatch.setenv("XMEMORY_BACKEND", "bogus")
    assert "XMEMORY_BACKEND" in _refused([str(tmp_path / "s")], capsys, monkeypatch)
    assert not (tmp_path / "s").exists()


# -- ids holding '/' ----------------------------------------------------------------------


def test_ids_with_a_slash_are_readable_and_deletable_over_http(live):
    client = MemoryClient(live.url, api_key=ADMIN)
    ids = client.add(
        [
            {"role": "u", "content": "the lamp is blue", "id": "notes/1"},
            {"role": "u", "content": "the kayak is red", "id": "a/../b"},
        ],
        user_id="slash",
    )
    assert ids == ["notes/1", "a/../b"]
    assert client.get("notes/1", user_id="slash")["text"] == "the lamp is blue"
    assert client.get("a/../b", user_id="slash")["text"] == "the kayak is red"
    client.delete("notes/1", user_id="slash")
    with pytest.raises(ServiceError) as e:
        client.get("notes/1", user_id="slash")
    assert e.value.status == 404
    assert [u["id"] for u in client.get_all(user_id="slash") if u["type"] == "message"] == ["a/../b"]


# -- malformed JSON -------------------------------------------------------------------------


def test_malformed_json_is_named_as_the_body(http):
    r = http.post(
        "/v1/search",
        content=b'{"user_id": "a", "query": "q",,}',
        headers={**AUTH, "Content-Type": "application/json"},
    )
    body = r.json()
    assert r.status_code == 422 and body["detail"].startswith("body: invalid JSON at character 30")
    assert body["errors"] == [{"field": "body", "error": body["detail"].removeprefix("body: ")}]


# -- the OpenAPI document -------------------------------------------------------------------


def test_openapi_declares_the_error_model_and_the_bearer_scheme(app):
    spec = app.openapi()
    schemas = spec["components"]["schemas"]
    assert "HTTPValidationError" not in schemas and "ValidationError" not in schemas
    assert set(schemas["ValidationErrorBody"]["required"]) == {"detail", "errors"}
    assert spec["components"]["securitySchemes"]["bearer"] == {
        "type": "http",
        "scheme": "bearer",
        "description": "an API key: Authorization: Bearer KEY",
    }
    keyed = 0
    for path, item in spec["paths"].items():
        for method, op in item.items():
            responses = op["responses"]
            if path == "/health":  # no key needed
                assert "security" not in op and "422" not in responses
                continue
            keyed += 1
            assert op["security"] == [{"bearer": []}], (method, path)
            assert {"401", "403"} <= set(responses), (method, path)
            if path not in ("/metrics", "/v1/reset"):  # the keyed routes without input
                assert responses["422"]["content"]["application/json"]["schema"] == {
                    "$ref": "#/components/schemas/ValidationErrorBody"
                }
            for code in ("401", "403"):
                assert responses[code]["content"]["application/json"]["schema"] == {
                    "$ref": "#/components/schemas/ErrorBody"
                }
            if "{unit_id}" in path:
                assert "404" in responses
    assert keyed == 14
    assert spec["paths"]["/v1/reset"]["post"]["responses"].keys() == {"200", "401", "403", "503"}
    (param,) = [p for p in spec["paths"]["/v1/memories"]["get"]["parameters"] if p["name"] == "filters"]
    assert param["in"] == "query" and param["content"]["application/json"]["schema"]["type"] == "object"


def test_the_service_refuses_what_the_schema_refuses_and_no_more(app, http):
    jsonschema = pytest.importorskip("jsonschema")
    spec = app.openapi()

    def valid(name: str, body: dict) -> bool:
        schema = {"$ref": f"#/components/schemas/{name}", "components": spec["components"]}
        return jsonschema.Draft202012Validator(schema).is_valid(body)

    messages = [
        {},
        {"role": "u"},
        {"content": "x"},
        {"role": "u", "content": "x"},
        {"speaker": "s", "text": "x"},
        {"speaker": None, "role": "u", "text": "x"},
        {"role": "u", "content": None},
        {"role": "u", "content": "x", "timestamp": True},
        {"role": "u", "content": "x", "timestamp": 1e20},
        {"role": "u", "content": "x", "timestamp": 1_700_000_000},
        {"role": "u", "content": "x", "session": 3},
        {"role": "u", "content": "x", "mood": 1},
        {"role": "u", "content": "x", "session": 3.0},
        {"role": "u", "content": "x", "session": 3.5},
        {"role": "u", "content": ""},
        {"role": "u", "content": " \n"},
    ]
    # (session 3.0: an integer to JSON Schema, and so to the service: the session 3)
    for n, m in enumerate(messages):
        code, body = _post(
            http, "/v1/memories", {"user_id": "schema", "messages": [{**m, "id": f"m{n}"}] if m else [m]}
        )
        assert valid("Message", m) == (code == 200), (m, code, body)
        if code == 422:
            assert (
                body["errors"]
                and body["detail"] == f"{body['errors'][0]['field']}: {body['errors'][0]['error']}"
            )
    searches = [
        {"user_id": "schema"},
        {"user_id": "schema", "query": "q"},
        {"user_id": "schema", "queries": ["q"]},
        {"user_id": "schema", "query": "q", "queries": ["q"]},
        {"user_id": "schema", "query": None, "queries": ["q"]},
        {"user_id": "schema", "query": "q", "budget_tokens": "600"},
        {"user_id": "schema", "query": "q", "budget_tokens": 600},
        {"user_id": "schema", "query": "q", "strategy": "nope"},
        {"user_id": "schema", "query": "q", "top_k": 3},
    ]
    searches += [
        {"user_id": "schema", "query": "q", **extra}
        for extra in (
            {"limit": 1},
            {"limit": 1.0},
            {"limit": 1.5},
            {"budget_tokens": 600.0},
            {"budget_tokens": 10**12},
            {"limit": 0},
            {"limit": 10_001},
            {"limit": True},
            {"limit": "3"},
            {"threshold": 0.3},
            {"threshold": 1},
            {"threshold": "0.3"},
            {"threshold": None},
            {"filters": {"topic": "x", "n": 1, "f": 1.5, "b": False, "z": None}},
            {"filters": {}},
            {"filters": {"a": [1]}},
            {"filters": {"a": {"b": 1}}},
            {"filters": {"": 1}},
            {"filters": []},
            {"filters": "topic=x"},
        )
    ]
    for s in searches:
        code, body = _post(http, "/v1/search", s)
        assert valid("SearchRequest", s) == (code == 200), (s, code, body)
    adds = [
        {"metadata": {"topic": "x", "deep": {"a": [1, None]}}},
        {"metadata": {}},
        {"metadata": None},
        {"metadata": []},
        {"metadata": "x"},
        {"metadata": {"": 1}},
        {"user_name": "Maya"},
        {"user_name": ""},
        {"user_name": 3},
        {"messages": [{"role": "user", "name": "Maya", "content": "x"}]},
        {"messages": [{"role": "user", "name": 3, "content": "x"}]},
        {"messages": [{"role": "user", "name": "", "content": "x"}]},
    ]
    for n, extra in enumerate(adds):
        a = {"user_id": "schema", "messages": [{"role": "u", "content": "x", "id": f"a{n}"}], **extra}
        code, body = _post(http, "/v1/memories", a)
        assert valid("AddRequest", a) == (code == 200), (a, code, body)
    http.post(
        "/v1/memories",
        json={"user_id": "schema", "messages": [{"role": "u", "content": "old", "id": "up"}]},
        headers=AUTH,
    )
    for u in (
        {"user_id": "schema", "text": "new"},
        {"user_id": "schema", "text": ""},
        {"user_id": "schema", "text": "  "},
        {"user_id": "schema"},
        {"user_id": "schema", "text": None},
        {"user_id": "schema", "text": 3},
        {"text": "new"},
        {"user_id": "schema", "text": "new", "agent_id": None},
        {"user_id": "schema", "text": "new", "x": 1},
    ):
        r = http.put("/v1/memories/up", json=u, headers=AUTH)
        assert valid("UpdateRequest", u) == (r.status_code == 200), (u, r.status_code, r.json())
    filters_schema = {
        **spec["paths"]["/v1/memories"]["get"]["parameters"][-1]["content"]["application/json"]["schema"],
        "components": spec["components"],
    }
    for f in (
        '{"topic": "x"}',
        "{}",
        '{"n": 1, "b": true, "z": null}',
        '{"a": [1]}',
        "[]",
        '"x"',
        "{topic: 1}",
        '{"": 1}',
    ):
        r = http.get("/v1/memories", params={"user_id": "schema", "filters": f}, headers=AUTH)
        try:
            ok = jsonschema.Draft202012Validator(filters_schema).is_valid(json.loads(f))
        except ValueError:
            ok = False
        assert ok == (r.status_code == 200), (f, r.status_code, r.json())


def test_docs_page_works_offline(http):
    r = http.get("/docs")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    assert "default-src 'self'" in r.headers["content-security-policy"]
    assert not re.search(r"https?://|//cdn|<script[^>]+src=|<link[^>]+href=", r.text)
    assert "Authorize" in r.text and "openapi.json" in r.text
    assert http.get("/redoc").status_code == 404  # it loads its script from a CDN


# -- strict types, /health, /metrics, SIGTERM --------------------------------------------------


@pytest.mark.parametrize(
    "path, body, field",
    [
        (
            "/v1/memories",
            {"user_id": "t", "messages": [{"role": "u", "content": "x", "timestamp": True}]},
            "messages.0.timestamp",
        ),
        (
            "/v1/memories",
            {"user_id": "t", "messages": [{"role": "u", "content": "x", "session": 3.5}]},
            "messages.0.session",
        ),
        ("/v1/search", {"user_id": "t", "query": "q", "limit": True}, "limit"),
        ("/v1/search", {"user_id": "t", "query": "q", "budget_tokens": "600"}, "budget_tokens"),
        ("/v1/search", {"user_id": "t", "query": "q", "max_results": 3}, "max_results"),
        (
            "/v1/memories/batch",
            {"items": [{"user_id": "t", "messages": [{"role": "u", "content": "x"}], "x": 1}]},
            "items.0.x",
        ),
    ],
)
def test_http_types_are_strict(http, path, body, field):
    code, out = _post(http, path, body)
    assert code == 422 and out["detail"].startswith(f"{field}:"), out
    assert (
        http.get("/v1/memories", params={"user_id": "t"}, headers=AUTH).json()["units"] == []
    )  # nothing stored


def test_health_and_metrics_show_store_wide_data_to_full_keys_only(http):
    assert (
        _post(http, "/v1/memories", {"user_id": "alice", "messages": [{"role": "u", "content": "hi"}]})[0]
        == 200
    )
    alice = {"Authorization": f"Bearer {ALICE}"}
    for headers in ({}, alice, {"Authorization": "Bearer wrong-key-0123456789"}):
        assert http.get("/health", headers=headers).json() == {"status": "ok"}
    full = http.get("/health", headers=AUTH).json()
    assert full["status"] == "ok" and full["messages"] >= 1 and full["memories"] >= 1
    r = http.get("/metrics", headers=alice)
    assert r.status_code == 403 and "/metrics" in r.json()["detail"]
    assert http.get("/metrics").status_code == 401
    assert "xmemory_requests_total" in http.get("/metrics", headers=AUTH).text


def test_sigterm_exits_with_status_0(tmp_path):
    port = _free_port()
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT), "XMEMORY_API_KEY": ""}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "xmemory_gpu",
            "serve",
            str(tmp_path / "store"),
            "--port",
            str(port),
            "--embedder",
            "hashing:384",
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        deadline = time.time() + 90
        while True:  # bounded wait for the port
            assert proc.poll() is None and time.time() < deadline, (
                proc.stdout.read() if proc.poll() is not None else "no start"
            )
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1).read()
                break
            except OSError:
                time.sleep(0.2)
        MemoryClient(f"http://127.0.0.1:{port}").add([{"role": "u", "content": "kept"}], user_id="t")
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0
        out = proc.stdout.read()
        assert "Traceback" not in out, out
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)
        proc.stdout.close()
    engine = MemoryEngine.open(tmp_path / "store", read_only=True)  # the acknowledged add was committed
    try:
        assert [u["text"] for u in engine.get_all(user_id="t") if u["type"] == "message"] == ["kept"]
    finally:
        engine.close()
