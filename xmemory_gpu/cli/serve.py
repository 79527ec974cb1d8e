"""``xmemory serve STORE``: the live engine behind HTTP on 127.0.0.1 (FastAPI + uvicorn; the
``serve`` extra). Unsafe or broken settings are refused before the store is opened: an address
other than loopback without an API key, a key shorter than 16 characters, a coalescing window that
is not a finite number of milliseconds up to 1000, a port outside 1-65535, a backend that is
unknown or not usable here. SIGTERM drains in-flight requests, commits and exits with status 0.
The server answers (``/health``) while the embedder's model still loads in a background thread; the
first add or search waits for it.

``xmemory serve DIR --ray [local|auto|ADDRESS] --shards N``: the same API sharded by user on Ray
Serve (``xmemory_gpu.distributed.ray_serve``; the ``serve-ray`` extra): ``DIR`` holds the store
set's ``manifest.json`` and one store per shard; a ``--shards`` that disagrees with the manifest is
refused before Ray starts. SIGTERM or Ctrl-C stops the shards gracefully (drain, commit, close)."""

from __future__ import annotations

import argparse
import ipaddress
import json
import math
import os
import signal
import threading
from pathlib import Path

MIN_KEY = 16  # characters of an API key
MAX_COALESCE_MS = 1000.0


def port(text: str) -> int:
    """An argparse type: a TCP port, 1-65535."""
    try:
        v = int(text)
    except ValueError:
        v = -1
    if not 1 <= v <= 65535:
        raise argparse.ArgumentTypeError(f"expected a port from 1 to 65535, got {text!r}")
    return v


def coalesce_ms(text: str) -> float:
    """An argparse type: a window in milliseconds, finite, 0 (off) to MAX_COALESCE_MS."""
    try:
        v = float(text)
    except ValueError:
        v = math.nan
    if not (math.isfinite(v) and 0 <= v <= MAX_COALESCE_MS):
        raise argparse.ArgumentTypeError(
            f"expected milliseconds from 0 (off) to {MAX_COALESCE_MS:g}, got {text!r}"
        )
    return v


def amount(text: str) -> float:
    """An argparse type: a finite number >= 0 (CPUs, GPUs, seconds)."""
    try:
        v = float(text)
    except ValueError:
        v = math.nan
    if not (math.isfinite(v) and v >= 0):
        raise argparse.ArgumentTypeError(f"expected a finite number >= 0, got {text!r}")
    return v


def add_parser(sub: argparse._SubParsersAction) -> None:
    from .args import integer, resident_bytes

    p = sub.add_parser("serve", help="serve a live memory store over HTTP")
    p.add_argument("store", help="a store; with --ray, a store set's directory (manifest.json, shard-K/)")
    p.add_argument(
        "--host",
        default="127.0.0.1",
        help="address to bind (default 127.0.0.1: this machine only; any other needs an API key)",
    )
    p.add_argument("--port", type=port, default=8000)
    p.add_argument(
        "--api-key-env",
        default="XMEMORY_API_KEY",
        help=f"environment variable holding the API key (all scopes; at least {MIN_KEY} characters)",
    )
    p.add_argument(
        "--keys-file", default=None, help='JSON {"KEY": ["user", ...] or "*"}: keys bound to user ids'
    )
    p.add_argument(
        "--coalesce-ms",
        type=coalesce_ms,
        default=2.0,
        help=f"window in which concurrent requests share one engine call (0: off; at most {MAX_COALESCE_MS:g})",
    )
    p.add_argument("--max-batch", type=integer(1), default=64)
    p.add_argument("--embedder", default=None, help="embedder for a new store (default all-MiniLM-L6-v2)")
    p.add_argument(
        "--reader",
        default=None,
        help="reader LLM spec (smollm2, hf:PATH[#FILE.gguf], vllm:ID, openai:URL#MODEL): Stage II's "
        "uncertainty gate on live searches (default: none, episodes admitted by priority)",
    )
    p.add_argument(
        "--backend",
        default="auto",
        help="kernel backend: auto, reference, cpu, triton, cuda (cuda / triton: encoder and bank copies on "
        "the GPU); one not usable here is refused, naming why",
    )
    p.add_argument(
        "--max-resident-bytes",
        type=resident_bytes,
        default="auto",
        metavar="N|auto|all",
        help="keep about N bytes of memories in RAM (each shard's, with --ray): a memory loads when a request "
        "touches it, the least recently used go (default auto: half of the RAM; all: every memory, "
        "loaded at start)",
    )
    p.add_argument("--log-level", default="warning")
    g = p.add_argument_group("sharded serving on Ray Serve")
    g.add_argument(
        "--ray",
        nargs="?",
        const="local",
        default=None,
        metavar="local|auto|ADDRESS",
        help="serve STORE as a store set on Ray Serve: local (a new Ray instance here; the default), "
        "auto (the cluster this machine is in) or a cluster's address",
    )
    g.add_argument(
        "--shards",
        type=integer(1),
        default=None,
        help="shards of a new store set (default 1); an existing set's count is fixed by its manifest",
    )
    g.add_argument(
        "--shard-cpus", type=amount, default=1.0, help="CPUs Ray reserves for each shard (default 1)"
    )
    g.add_argument(
        "--shard-gpus",
        type=amount,
        default=None,
        help="GPUs Ray gives each shard (default 1 with --backend cuda or triton, else 0)",
    )
    g.add_argument(
        "--shard-timeout",
        type=amount,
        default=30.0,
        help="seconds the ingress waits for a shard before answering 503 (default 30)",
    )
    g.add_argument(
        "--ray-cpus", type=integer(1), default=None, help="CPUs of a local Ray instance (default: all)"
    )
    p.set_defaults(func=run)


def load_keys(args: argparse.Namespace) -> dict[str, frozenset[str] | None]:
    keys: dict[str, frozenset[str] | None] = {}
    env = os.environ.get(args.api_key_env, "")
    if env:
        if len(env) < MIN_KEY:
            raise ValueError(
                f"{args.api_key_env}: the API key has {len(env)} characters; expected at least {MIN_KEY}"
            )
        keys[env] = None
    if args.keys_file:
        try:
            data = json.loads(Path(args.keys_file).read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ValueError(
                f"--keys-file {args.keys_file}: cannot read a JSON object of keys ({exc})"
            ) from None
        if not isinstance(data, dict):
            raise ValueError(
                f'--keys-file {args.keys_file}: expected a JSON object {{key: [user ids] or "*"}}'
            )
        for k, v in data.items():
            if not isinstance(k, str) or len(k) < MIN_KEY:
                raise ValueError(
                    f"--keys-file {args.keys_file}: key {k[:4]!r}...: expected at least {MIN_KEY} characters"
                )
            if v == "*":
                keys[k] = None
            elif isinstance(v, list) and all(isinstance(u, str) and u for u in v):
                keys[k] = frozenset(v)
            else:
                raise ValueError(
                    f'--keys-file {args.keys_file}: the value of a key must be a list of user ids or "*"'
                )
    return keys


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:  # a host name other than localhost: wherever it resolves
        return False


def check_backend(name: str) -> None:
    """Refuse a backend that is unknown (``XMEMORY_BACKEND`` under auto) or not usable here, with why."""
    from ..ops import available_backends

    statuses = available_backends()
    source = "--backend"
    if name == "auto" and os.environ.get("XMEMORY_BACKEND", "auto") not in ("", "auto"):
        name, source = os.environ["XMEMORY_BACKEND"], "XMEMORY_BACKEND"
    if name == "auto":
        return
    if name not in statuses:
        raise ValueError(f"{source}: unknown backend {name!r}; expected auto or one of {', '.join(statuses)}")
    if not statuses[name].available:
        raise ValueError(f"{source}: backend {name!r} is not usable here: {statuses[name].reason}")


def run(args: argparse.Namespace) -> int:
    try:
        import uvicorn
    except ImportError:
        raise ValueError("serve needs FastAPI and uvicorn: pip install 'xmemory-gpu[serve]'") from None
    from ..engine import MemoryEngine
    from ..service import ServiceConfig, create_app

    keys = load_keys(args)
    if not keys and not is_loopback(args.host):
        raise ValueError(
            f"--host {args.host}: not a loopback address, and no API key: anyone who can reach it could "
            f"read and delete every memory; set {args.api_key_env} or --keys-file, or bind 127.0.0.1"
        )
    if args.ray is not None:
        return run_ray(args, keys)
    given = [
        f"--{n.replace('_', '-')}"
        for n in ("shards", "shard_gpus", "ray_cpus")
        if getattr(args, n) is not None
    ]
    if given:
        raise ValueError(f"{', '.join(given)}: sharding needs --ray (xmemory serve DIR --ray --shards N)")
    check_backend(args.backend)

    class Server(uvicorn.Server):
        def handle_exit(self, sig: int, frame: object) -> None:
            if sig == signal.SIGTERM:  # drain, commit and exit 0: a requested stop is no failure
                self.should_exit = True
            else:
                super().handle_exit(sig, frame)

    cfg = ServiceConfig(api_keys=keys, coalesce_ms=args.coalesce_ms, max_batch=args.max_batch)
    engine = MemoryEngine.open(
        args.store,
        embedder=args.embedder,
        backend=args.backend,
        reader=args.reader,
        max_resident_bytes=args.max_resident_bytes,
    )  # fails here, before binding, if the store is locked
    app = create_app(engine, cfg)
    print(
        f"xmemory serve: {args.store} on http://{args.host}:{args.port} "
        f"({'keys required' if cfg.api_keys else 'no API key: open to this machine'}, coalescing {args.coalesce_ms:g} ms)",
        flush=True,
    )
    server = Server(
        uvicorn.Config(
            app, host=args.host, port=args.port, log_level=args.log_level, timeout_graceful_shutdown=30
        )
    )
    server.run()
    if not server.started:
        raise RuntimeError(f"the server did not start on {args.host}:{args.port} (see the log above)")
    return 0


def run_ray(args: argparse.Namespace, keys: dict[str, frozenset[str] | None]) -> int:
    """The store set ``args.store`` on Ray Serve until SIGTERM or Ctrl-C."""
    from ..distributed.shards import open_shard_set
    from ..service import ServiceConfig

    if args.shard_timeout <= 0:
        raise ValueError("--shard-timeout: expected seconds > 0")
    shard_set = open_shard_set(args.store, args.shards)  # a mismatch is refused before Ray starts
    if (
        args.ray == "local"
    ):  # elsewhere the shards run on other machines, whose backends this one cannot check
        check_backend(args.backend)
    try:
        from ray import serve

        from ..distributed import ray_serve
    except ImportError as exc:
        raise ValueError(
            f"--ray: Ray Serve is not installed ({exc.name or exc}); pip install 'xmemory-gpu[serve-ray]'"
        ) from None
    gpus = (
        args.shard_gpus
        if args.shard_gpus is not None
        else (1.0 if args.backend in ("cuda", "triton") else 0.0)
    )
    cfg = ServiceConfig(api_keys=keys, coalesce_ms=args.coalesce_ms, max_batch=args.max_batch)
    stop = threading.Event()
    ray_serve.init_ray(args.ray, num_cpus=args.ray_cpus)  # local: on 127.0.0.1 only
    for sig in (signal.SIGTERM, signal.SIGINT):  # after ray.init (which installs its own), before the deploy
        signal.signal(sig, lambda *_: stop.set())
    try:
        ray_serve.deploy(
            args.store,
            shards=shard_set.shards,
            config=cfg,
            host=args.host,
            port=args.port,
            embedder=args.embedder,
            backend=args.backend,
            reader=args.reader,
            shard_cpus=args.shard_cpus,
            shard_gpus=gpus,
            timeout_s=args.shard_timeout,
            max_resident_bytes=args.max_resident_bytes,
        )
        print(
            f"xmemory serve: {args.store} ({shard_set.shards} shard(s) on Ray {args.ray}) on "
            f"http://{args.host}:{args.port} ({'keys required' if cfg.api_keys else 'no API key: open to this machine'}, "
            f"coalescing {args.coalesce_ms:g} ms)",
            flush=True,
        )
        while not stop.wait(1.0):
            pass
    finally:
        try:  # the shards drain, commit and close their stores
            serve.shutdown() if args.ray == "local" else serve.delete(ray_serve.APP_NAME)
        finally:
            import ray

            ray.shutdown()
    return 0
