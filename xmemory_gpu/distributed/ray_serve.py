"""``xmemory serve DIR --ray``: the HTTP API sharded by user on Ray Serve.

One application, ``1 + N`` deployments:

- ``shard-K`` (one replica each): opens ``DIR/shard-K`` (``MemoryEngine.open``, the store's
  single writer) and runs the service's own FastAPI app (``create_app``) in process, so every
  route, validation error, key check and the request coalescing are the single-process service's.
  A GPU shard asks Ray for ``num_gpus``.
- ``ingress``: the Serve HTTP entry (bound to 127.0.0.1 unless told otherwise). It checks the
  body's framing (411, 413: ``service.framing``) and the bearer key (401, and 403 for a user id
  outside a bound key's set: ``service.auth``, as the service does), reads the request's
  ``user_id`` (the JSON body's, or the query's), hashes it with the manifest's rule
  (:mod:`.shards`) and forwards the request to that shard's handle. Store-wide routes fan out:
  ``/health`` (counts summed), ``/metrics`` (each shard's samples labelled ``shard="K"``),
  ``/v1/reset``. A request with no readable ``user_id`` goes to shard 0, whose app answers it as
  the single-process service would (its 422, 404 or 405).

Guarantees: an acknowledged write (a 2xx) was committed on its user's shard before the answer,
and is there after that shard's replica is killed and restarted. A user is only ever answered by
the shard the manifest assigns; while that shard is down (killed, restarting, or not answering
within ``timeout_s``) its users get 503 and every other shard's users are served as before. A
write answered 503 may or may not have been applied. ``POST /v1/memories/batch`` whose items hash
to more than one shard is refused with 422 (a batch is one atomic commit, which one shard can
give and several cannot): send one batch per shard, or per user.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import time
import urllib.error
import urllib.request
from typing import Any
from urllib.parse import parse_qs

import ray
from ray import serve
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response

from ..engine import MemoryEngine
from ..memory.locks import WriterLockError
from ..service import ServiceConfig, auth, create_app, framing
from .ray_build import _init_local
from .shards import ShardSet, open_shard_set, shard_of

log = logging.getLogger("xmemory.serve.ray")


def _loopback_replica_grpc() -> None:
    """On a Ray node whose address is 127.0.0.1 (``--ray local``), bind each replica's inter-deployment
    gRPC server to 127.0.0.1 instead of all interfaces: Ray Serve 2.60 binds it to ``[::]:0`` with no
    option (``ray/serve/_private/replica.py``), and a request sent there skips the ingress's key check.
    A replica imports this module (its deployment class) before that server starts. On a cluster node
    (a routable address, where other nodes' handles must reach it) Serve's binding is left as it is."""
    try:
        from ray.serve._private import replica

        if not ray.is_initialized() or ray.util.get_node_ip_address() != "127.0.0.1":
            return
    except Exception:  # not inside a Ray worker, or another Serve layout: nothing to change
        return
    real = replica.add_port_to_grpc_server
    if getattr(real, "xmemory_loopback", False):
        return

    def loopback(server: Any, address: str) -> int:
        return real(server, "127.0.0.1:0" if address == "[::]:0" else address)

    loopback.xmemory_loopback = True  # type: ignore[attr-defined]
    replica.add_port_to_grpc_server = loopback


_loopback_replica_grpc()
APP_NAME = "xmemory"
INSTALL_HINT = "pip install 'xmemory-gpu[serve-ray]'"
Headers = list[tuple[bytes, bytes]]
_HOP = {b"content-length", b"transfer-encoding", b"connection", b"date", b"server"}
_SAMPLE = re.compile(r"^([A-Za-z_:][A-Za-z0-9_:]*)(\{.*\})?(\s.*)$")


async def asgi_call(app: Any, scope: dict, body: bytes) -> tuple[int, Headers, bytes]:
    """One HTTP request through an ASGI app in this process: (status, headers, body)."""
    done = asyncio.Event()
    sent = False
    status, headers, chunks = 500, [], []

    async def receive() -> dict:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        await done.wait()
        return {"type": "http.disconnect"}

    async def send(msg: dict) -> None:
        nonlocal status, headers
        if msg["type"] == "http.response.start":
            status, headers = msg["status"], list(msg.get("headers", []))
        elif msg["type"] == "http.response.body":
            chunks.append(msg.get("body", b""))
            if not msg.get("more_body", False):
                done.set()

    try:
        await app(scope, receive, send)
    finally:
        done.set()
    return status, headers, b"".join(chunks)


class Shard:
    """One shard: its store's engine behind the service's app. Deployed as ``shard-K``."""

    async def __init__(
        self,
        index: int,
        store: str,
        config: ServiceConfig,
        embedder: str | None = None,
        backend: str = "auto",
        reader: str | None = None,
        lock_wait_s: float = 60.0,
        max_resident_bytes: int | str | None = "auto",
    ) -> None:
        self.index, self.store = index, store
        deadline = time.monotonic() + lock_wait_s
        while True:  # a replaced replica may still be closing the store: wait for its write lock
            try:
                engine = await asyncio.to_thread(
                    MemoryEngine.open,
                    store,
                    embedder=embedder,
                    backend=backend,
                    reader=reader,
                    max_resident_bytes=max_resident_bytes,
                )
                break
            except WriterLockError:
                if time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.5)
        self.engine = engine
        self.app = create_app(engine, config)
        self._life = self.app.router.lifespan_context(self.app)
        await self._life.__aenter__()  # the coalescers start on this replica's event loop
        self._closed = False
        log.info("shard %d: %s open (pid %d)", index, store, os.getpid())

    async def handle(self, scope: dict, body: bytes) -> tuple[int, Headers, bytes]:
        """An HTTP request (its ASGI scope's plain fields) through the shard's app."""
        return await asgi_call(self.app, {**scope, "type": "http", "asgi": {"version": "3.0"}}, body)

    async def pid(self) -> int:
        return os.getpid()

    async def check_health(self) -> None:
        if self._closed:
            raise RuntimeError(f"shard {self.index}: closed")

    async def __del__(self) -> None:  # Serve's graceful stop: drain the coalescers, commit, close the store
        if getattr(self, "_closed", True):
            return
        self._closed = True
        await self._life.__aexit__(None, None, None)


def _json(status: int, body: dict, shard: int | None = None) -> JSONResponse:
    return JSONResponse(
        body, status_code=status, headers={"X-Shard": str(shard)} if shard is not None else None
    )


class Ingress:
    """The HTTP entry: authenticate, route by user id, forward; a shard that fails is a 503."""

    def __init__(self, shards: list, config: ServiceConfig, timeout_s: float = 30.0) -> None:
        self.shards = shards  # DeploymentHandles, shard K at index K
        self.cfg = config
        self.timeout_s = timeout_s

    # -- forwarding ----------------------------------------------------------------------------------
    async def _call(self, k: int, scope: dict, body: bytes) -> tuple[int, Headers, bytes] | str:
        """The shard's answer, or why it has none (it is down, restarting or too slow)."""
        resp = self.shards[k].handle.remote(scope, body)

        async def wait() -> Any:
            return await resp

        try:
            return await asyncio.wait_for(wait(), self.timeout_s)
        except asyncio.TimeoutError:
            resp.cancel()
            return f"shard {k} did not answer within {self.timeout_s:g} s"
        except Exception as exc:  # noqa: BLE001 - a dead replica, an unavailable deployment, a crash
            log.warning("shard %d failed: %s", k, exc)
            return f"shard {k} is unavailable ({type(exc).__name__})"

    async def _forward(self, k: int, scope: dict, body: bytes) -> Response:
        got = await self._call(k, scope, body)
        if isinstance(got, str):
            return _json(503, {"detail": got}, k)
        status, headers, content = got
        resp = Response(content, status_code=status)
        for name, value in headers:
            if name.lower() not in _HOP:
                resp.raw_headers.append((name, value))
        resp.headers["X-Shard"] = str(k)
        return resp

    async def _fan_out(self, scope: dict, body: bytes) -> list[tuple[int, Headers, bytes] | str]:
        return list(await asyncio.gather(*(self._call(k, scope, body) for k in range(len(self.shards)))))

    # -- the entry -----------------------------------------------------------------------------------
    async def __call__(self, request: Request) -> Response:
        method, path = request.method, request.scope["path"]
        refused = framing.refusal(
            method, path, request.headers.get("content-length"), self.cfg.max_body_bytes
        )
        if refused is not None:
            return _json(refused[0], {"detail": refused[1]})
        body = await request.body()
        scope = {
            k: request.scope[k]
            for k in (
                "method",
                "path",
                "raw_path",
                "query_string",
                "headers",
                "http_version",
                "scheme",
                "root_path",
            )
            if k in request.scope
        }
        scope["root_path"] = ""
        scope["client"], scope["server"] = ("127.0.0.1", 0), ("127.0.0.1", 80)

        if path == "/health":
            return await self._health(request, scope, body)
        open_route = path in ("/docs", "/openapi.json")
        allowed: frozenset[str] | None = None
        if self.cfg.api_keys and not open_route:
            why, allowed = auth.authenticate(self.cfg.api_keys, request.headers.get("authorization"))
            if why is not None:
                return JSONResponse({"detail": why}, status_code=401, headers=auth.CHALLENGE)
        if path == "/metrics" and method == "GET":
            return await self._metrics(scope, body)
        if path == "/v1/reset" and method == "POST":
            return await self._reset(scope, body)

        users = self._users(method, path, request, body)
        if isinstance(users, Response):
            return users
        if not users:  # nothing to route by: shard 0 answers as the service does (422, 404, 405, the docs)
            return await self._forward(0, scope, body)
        for u in users:
            if (why := auth.user_refusal(allowed, u)) is not None:
                return _json(403, {"detail": why})
        ks = sorted({shard_of(u, len(self.shards)) for u in users})
        if len(ks) > 1:
            detail = (
                f"items: the batch's users are on {len(ks)} shards ({', '.join(map(str, ks))}); a batch is one "
                "atomic commit on one shard: send one batch per shard (or per user)"
            )
            return _json(
                422,
                {"detail": detail, "errors": [{"field": "items", "error": detail.removeprefix("items: ")}]},
            )
        return await self._forward(ks[0], scope, body)

    def _users(self, method: str, path: str, request: Request, body: bytes) -> list[str] | Response:
        """The user ids a request names ([]: none readable; the shard's validation says why)."""
        if (path == "/v1/memories/batch" and method == "POST") or (
            path == "/v1/batch" and method in ("PUT", "DELETE")
        ):
            data = _loads(body)
            items = (
                data.get("items" if path == "/v1/memories/batch" else "memories")
                if isinstance(data, dict)
                else None
            )
            if not isinstance(items, list):
                return []
            users = [it.get("user_id") if isinstance(it, dict) else None for it in items]
            return users if users and all(isinstance(u, str) and u for u in users) else []
        if (method == "POST" and path in ("/v1/memories", "/v1/search")) or (
            method == "PUT" and path.startswith("/v1/memories/")
        ):
            data = _loads(body)
            u = data.get("user_id") if isinstance(data, dict) else None
            return [u] if isinstance(u, str) and u else []
        if path.startswith("/v1/memories") or path == "/v1/history":
            found = parse_qs(request.scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True)
            got = found.get("user_id", [])
            return [got[-1]] if got and got[-1] else []
        return []

    async def _health(self, request: Request, scope: dict, body: bytes) -> Response:
        """``ok`` when every shard answers; the store-wide counts summed for a key of every scope."""
        keys = self.cfg.api_keys
        full = not keys or auth.every_scope(keys, request.headers.get("authorization"))
        answers = await self._fan_out(scope, body)
        down = [k for k, a in enumerate(answers) if isinstance(a, str) or a[0] != 200]
        if down:
            out: dict[str, Any] = {"status": "degraded", "shards": len(self.shards)}
            if full:
                out["unavailable_shards"] = down
            return _json(503, out)
        out = {"status": "ok"}
        if full:
            stats = [_loads(a[2]) for a in answers]
            for key in ("memories", "messages", "semantics", "themes", "quarantined"):
                out[key] = sum(int(s.get(key, 0)) for s in stats)
            out["time"] = time.time()
            out["shards"] = len(self.shards)
        return _json(200, out)

    async def _metrics(self, scope: dict, body: bytes) -> Response:
        answers = await self._fan_out(scope, body)
        for k, a in enumerate(answers):
            if isinstance(a, str):
                return _json(503, {"detail": a}, k)
            if a[0] != 200:  # a bound key: the shard's 403 (every shard says the same)
                return Response(a[2], status_code=a[0], media_type="application/json")
        seen, lines = set(), []
        for k, a in enumerate(answers):
            for line in a[2].decode("utf-8").splitlines():
                if line.startswith("#"):
                    if line not in seen:
                        seen.add(line)
                        lines.append(line)
                elif m := _SAMPLE.match(line):
                    labels = m.group(2)[1:-1] if m.group(2) else ""
                    lines.append(f'{m.group(1)}{{shard="{k}"{"," + labels if labels else ""}}}{m.group(3)}')
        return PlainTextResponse("\n".join(lines) + "\n", media_type="text/plain; version=0.0.4")

    async def _reset(self, scope: dict, body: bytes) -> Response:
        answers = await self._fan_out(scope, body)
        for a in answers:
            if not isinstance(a, str) and a[0] != 200:
                return Response(a[2], status_code=a[0], media_type="application/json")
        down = [k for k, a in enumerate(answers) if isinstance(a, str)]
        if down:
            done = [k for k in range(len(self.shards)) if k not in down]
            return _json(
                503, {"detail": f"shards {down} are unavailable and were not reset; shards {done} were"}
            )
        return _json(
            200, {"deleted_memories": sum(int(_loads(a[2]).get("deleted_memories", 0)) for a in answers)}
        )


def _loads(body: bytes) -> Any:
    try:
        return json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return None


def application(
    shard_set: ShardSet,
    config: ServiceConfig,
    *,
    embedder: str | None = None,
    backend: str = "auto",
    reader: str | None = None,
    shard_cpus: float = 1.0,
    shard_gpus: float = 0.0,
    timeout_s: float = 30.0,
    ingress_replicas: int = 1,
    health_check_period_s: float = 2.0,
    max_resident_bytes: int | str | None = "auto",
) -> Any:
    """The Serve application of a store set: ``shard-K`` deployments and the ingress over their handles."""
    shards = []
    for k in range(shard_set.shards):
        dep = serve.deployment(
            Shard,
            name=f"shard-{k}",
            num_replicas=1,
            max_ongoing_requests=max(64, 4 * config.max_batch),
            ray_actor_options={"num_cpus": shard_cpus, "num_gpus": shard_gpus},
            health_check_period_s=health_check_period_s,
            health_check_timeout_s=30,
            graceful_shutdown_timeout_s=60,
        )
        shards.append(
            dep.bind(
                k,
                str(shard_set.store(k).resolve()),
                config,
                embedder,
                backend,
                reader,
                max_resident_bytes=max_resident_bytes,
            )
        )
    ingress = serve.deployment(
        Ingress,
        name="ingress",
        num_replicas=ingress_replicas,
        max_ongoing_requests=1000,
        ray_actor_options={"num_cpus": 0},
    )
    return ingress.bind(shards, config, timeout_s)


def deploy(
    root: str,
    *,
    shards: int | None = None,
    config: ServiceConfig | None = None,
    host: str = "127.0.0.1",
    port: int = 8000,
    name: str = APP_NAME,
    **options: Any,
) -> ShardSet:
    """Start Serve's HTTP proxy on ``host:port`` (Ray must be initialised) and run the store set's
    application; returns once every shard is up and the proxy routes requests to the application
    (``serve.run`` returns before the proxy has its new route table: a request sent at once could
    be answered 404). ``options``: :func:`application`'s."""
    shard_set = open_shard_set(root, shards)
    cfg = config or ServiceConfig()
    http = {"host": host, "port": port}
    try:
        serve.start(http_options=http, proxy_location="HeadOnly")
    except (
        TimeoutError
    ):  # Serve waits a fixed 60 s for its new proxy: a busy machine's can take longer, and the
        serve.start(
            http_options=http, proxy_location="HeadOnly"
        )  # controller keeps starting it (polled below)
    if name not in serve.status().applications:  # an application of this name deleted just before: the
        _wait_for_proxy(
            host, port, name, routed=False
        )  # proxy must forget its route before it learns the new one
    serve.run(application(shard_set, cfg, **options), name=name, route_prefix="/")
    _wait_for_proxy(host, port, name, routed=True)
    return shard_set


PROXY_POLLS = (
    1200  # tries of the proxy's route table, 0.25 s apart: a bound for a proxy that never gets there
)


def _routes_url(host: str, port: int) -> str:
    """Serve's route table (``/-/routes``: ``{route prefix: application}``) as seen from the proxy's node."""
    near = {"": "127.0.0.1", "0.0.0.0": "127.0.0.1", "::": "::1"}.get(host, host)
    return f"http://{f'[{near}]' if ':' in near else near}:{port}/-/routes"


def _poll_routes(url: str, name: str, routed: bool, tries: int) -> bool:
    """Whether the proxy at ``url`` came to route ``/`` to ``name`` (``routed``), or not to, within ``tries``."""
    for i in range(tries):
        if i:
            time.sleep(0.25)
        try:
            with urllib.request.urlopen(url, timeout=30) as r:
                table = json.loads(r.read())
        except urllib.error.HTTPError:  # 503: no route table yet (no application at all)
            table = {}
        except (OSError, ValueError):  # not listening yet, or an answer cut short
            continue
        if (isinstance(table, dict) and table.get("/") == name) == routed:
            return True
    return False


def _wait_for_proxy(host: str, port: int, name: str, routed: bool) -> None:
    """Poll the proxy's route table until it routes ``/`` to ``name`` (or, ``routed=False``, does not);
    from this process when it runs on the proxy's node (the head node), else from a task placed there."""
    url = _routes_url(host, port)
    head = next(
        (
            n["NodeID"]
            for n in ray.nodes()
            if n.get("Alive") and "node:__internal_head__" in n.get("Resources", {})
        ),
        None,
    )
    from ray.util.client import ray as ray_client

    if head is None or (not ray_client.is_connected() and ray.get_runtime_context().get_node_id() == head):
        ok = _poll_routes(url, name, routed, PROXY_POLLS)
    else:
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        task = ray.remote(num_cpus=0, scheduling_strategy=NodeAffinitySchedulingStrategy(head, soft=False))(
            _poll_routes
        )
        ok = ray.get(task.remote(url, name, routed, PROXY_POLLS))
    if not ok:
        state = "route to" if routed else "stop routing to"
        raise RuntimeError(
            f"Serve's HTTP proxy at {url} did not {state} application {name!r} "
            f"after {PROXY_POLLS} polls of its route table"
        )


def shard_handle(k: int, name: str = APP_NAME) -> Any:
    """The handle of shard ``k`` (for operators and tests: ``shard_handle(0).pid.remote().result()``)."""
    return serve.get_deployment_handle(f"shard-{k}", app_name=name)


# Serve kills an HTTP proxy that has not answered its readiness check within 5 s three times in a row
# (and serve.start then fails): on a busy machine a local instance's proxy takes longer than that to
# start. A local instance gets generous limits unless the environment sets its own.
SERVE_PROXY_TIMEOUTS = {
    "RAY_SERVE_PROXY_READY_CHECK_TIMEOUT_S": "120",
    "RAY_SERVE_PROXY_HEALTH_CHECK_TIMEOUT_S": "120",
}


def init_ray(where: str, **kw: Any) -> None:
    """``local``: a new Ray instance on this machine, listening on 127.0.0.1 only (``kw`` go to
    ``ray.init``: ``num_cpus``, ``object_store_memory``); ``auto``: the running cluster found from this
    machine; otherwise a cluster's address (``HOST:PORT`` or ``ray://HOST:PORT``)."""
    if where == "local":
        for (
            name,
            seconds,
        ) in SERVE_PROXY_TIMEOUTS.items():  # read by Serve's controller, which inherits this environment
            os.environ.setdefault(name, seconds)
        try:
            _init_local(ray, {"include_dashboard": False, **{k: v for k, v in kw.items() if v is not None}})
        except BaseException:
            ray.shutdown()
            raise
    else:
        ray.init(address=where)
