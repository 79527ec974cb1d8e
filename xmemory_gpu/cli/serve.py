"""``xmemory serve STORE``: the live engine behind HTTP on 127.0.0.1 (FastAPI + uvicorn; the
``serve`` extra). SIGTERM drains in-flight requests and commits before exiting."""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path


def add_parser(sub: argparse._SubParsersAction) -> None:
    from .args import integer

    p = sub.add_parser("serve", help="serve a live memory store over HTTP")
    p.add_argument("store")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1: this machine only)")
    p.add_argument("--port", type=integer(0), default=8000)
    p.add_argument("--api-key-env", default="XMEMORY_API_KEY", help="environment variable holding the API key (all scopes)")
    p.add_argument("--keys-file", default=None, help='JSON {"KEY": ["user", ...] or "*"}: keys bound to user ids')
    p.add_argument("--coalesce-ms", type=float, default=2.0, help="window in which concurrent requests share one engine call (0: off)")
    p.add_argument("--max-batch", type=integer(1), default=64)
    p.add_argument("--embedder", default=None, help="embedder for a new store (default all-MiniLM-L6-v2)")
    p.add_argument("--backend", default="auto",
                   help="kernel backend: auto, reference, cpu, triton, cuda (cuda / triton: encoder and bank copies on the GPU)")
    p.add_argument("--log-level", default="warning")
    p.set_defaults(func=run)


def load_keys(args: argparse.Namespace) -> dict[str, frozenset[str] | None]:
    keys: dict[str, frozenset[str] | None] = {}
    env = os.environ.get(args.api_key_env, "")
    if env:
        keys[env] = None
    if args.keys_file:
        try:
            data = json.loads(Path(args.keys_file).read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ValueError(f"--keys-file {args.keys_file}: cannot read a JSON object of keys ({exc})") from None
        if not isinstance(data, dict):
            raise ValueError(f"--keys-file {args.keys_file}: expected a JSON object {{key: [user ids] or \"*\"}}")
        for k, v in data.items():
            if not isinstance(k, str) or len(k) < 16:
                raise ValueError(f"--keys-file {args.keys_file}: key {k[:4]!r}...: expected at least 16 characters")
            if v == "*":
                keys[k] = None
            elif isinstance(v, list) and all(isinstance(u, str) and u for u in v):
                keys[k] = frozenset(v)
            else:
                raise ValueError(f"--keys-file {args.keys_file}: the value of a key must be a list of user ids or \"*\"")
    return keys


def run(args: argparse.Namespace) -> int:
    try:
        import uvicorn
    except ImportError:
        raise ValueError("serve needs FastAPI and uvicorn: pip install 'xmemory-gpu[serve]'") from None
    from ..engine import MemoryEngine
    from ..service import ServiceConfig, create_app

    if args.coalesce_ms < 0:
        raise ValueError(f"--coalesce-ms: expected a number >= 0, got {args.coalesce_ms}")
    cfg = ServiceConfig(api_keys=load_keys(args), coalesce_ms=args.coalesce_ms, max_batch=args.max_batch)
    engine = MemoryEngine.open(args.store, embedder=args.embedder, backend=args.backend)  # fails here, before binding, if the store is locked
    app = create_app(engine, cfg)
    print(f"xmemory serve: {args.store} on http://{args.host}:{args.port} "
          f"({'keys required' if cfg.api_keys else 'no API key: open to this host'}, coalescing {args.coalesce_ms} ms)", flush=True)
    uvicorn.run(app, host=args.host, port=args.port, log_level=args.log_level, timeout_graceful_shutdown=30)
    return 0
