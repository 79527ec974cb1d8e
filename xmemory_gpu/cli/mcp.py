"""``xmemory mcp STORE``: the live engine as an MCP server (the ``mcp`` extra) for agent hosts, over
stdio (default: the host starts the process) or streamable HTTP on 127.0.0.1 only (``/mcp``). HTTP
always needs an API key, as ``xmemory serve`` reads them (``XMEMORY_API_KEY``, ``--keys-file``):
every request carries ``Authorization: Bearer KEY``. ``--user ID`` serves that user only."""

from __future__ import annotations

import argparse
import contextlib
import signal
import sys

from .serve import MIN_KEY, check_backend, load_keys, port

HOST = "127.0.0.1"  # HTTP: this machine only


def add_parser(sub: argparse._SubParsersAction) -> None:
    from .args import text

    p = sub.add_parser("mcp", help="serve a live memory store to agent hosts over MCP (stdio or HTTP)")
    p.add_argument("store")
    p.add_argument("--embedder", default=None, help="embedder for a new store (default all-MiniLM-L6-v2)")
    p.add_argument(
        "--user",
        type=text("user id"),
        default=None,
        help="serve this user only (default: every tool call names its user_id)",
    )
    p.add_argument(
        "--transport",
        choices=("stdio", "http"),
        default="stdio",
        help="stdio (default: the MCP host runs this command) or streamable HTTP at /mcp",
    )
    p.add_argument("--port", type=port, default=8765, help="HTTP: port on 127.0.0.1 (default 8765)")
    p.add_argument(
        "--api-key-env",
        default="XMEMORY_API_KEY",
        help=f"HTTP: environment variable holding the API key (all users; at least {MIN_KEY} characters)",
    )
    p.add_argument(
        "--keys-file", default=None, help='HTTP: JSON {"KEY": ["user", ...] or "*"}: keys bound to user ids'
    )
    p.add_argument("--backend", default="auto", help="kernel backend: auto, reference, cpu, triton, cuda")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    try:
        from ..integrations.mcp_server import RequireKey, create_server
    except ImportError as exc:
        raise ValueError(f"mcp needs the MCP SDK ({exc}): pip install 'xmemory-gpu[mcp]'") from None
    from ..engine import MemoryEngine

    keys: dict[str, frozenset[str] | None] = {}
    if args.transport == "http":
        keys = load_keys(args)
        if not keys:
            raise ValueError(
                f"--transport http: no API key; set {args.api_key_env} (at least {MIN_KEY} characters) or "
                "--keys-file: every request must carry Authorization: Bearer KEY"
            )
    check_backend(args.backend)
    # over stdio, stdout is the protocol's: nothing else may reach it. The engine opens without waiting
    # for its embedder's model (it loads in a background thread); while serving stdio the SDK points
    # fd 1 at stderr, so what that thread might print misses the wire.
    with contextlib.redirect_stdout(sys.stderr):
        engine = MemoryEngine.open(args.store, embedder=args.embedder, backend=args.backend)
    with engine:
        with contextlib.redirect_stdout(sys.stderr):
            server = create_server(engine, user_id=args.user, keys=keys)
        if args.transport == "stdio":
            server.run("stdio")
            return 0
        import anyio
        import uvicorn

        class Server(uvicorn.Server):
            def handle_exit(self, sig: int, frame: object) -> None:
                if sig == signal.SIGTERM:  # a requested stop: finish, close the store, exit 0
                    self.should_exit = True
                else:
                    super().handle_exit(sig, frame)

        app = RequireKey(server.streamable_http_app(host=HOST), keys)
        print(
            f"xmemory mcp: {args.store} on http://{HOST}:{args.port}/mcp (this machine only; keys required)",
            file=sys.stderr,
            flush=True,
        )
        uv = Server(uvicorn.Config(app, host=HOST, port=args.port, log_level="warning"))
        anyio.run(uv.serve)
        if not uv.started:
            raise RuntimeError(f"the server did not start on {HOST}:{args.port} (see the log above)")
    return 0


def main(argv: list[str] | None = None) -> int:
    """``xmemory mcp ...`` with the ``xmemory`` command's one-line errors (for
    ``python -m xmemory_gpu.cli.mcp``)."""
    from . import _one_line, _Parser

    parser = _Parser(prog="xmemory")
    add_parser(parser.add_subparsers(dest="command", required=True))
    try:
        args = parser.parse_args(["mcp", *(sys.argv[1:] if argv is None else argv)])
    except SystemExit as exc:
        return int(exc.code or 0)
    try:
        return run(args)
    except KeyboardInterrupt:
        return 130
    except (ValueError, KeyError, RuntimeError, OSError) as exc:
        print(f"xmemory mcp: error: {_one_line(exc)}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
