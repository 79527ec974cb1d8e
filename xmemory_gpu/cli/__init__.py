"""The ``xmemory`` command. Each subcommand lives in its own module with ``add_parser``."""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import tempfile
import time
import traceback
from pathlib import Path

from .args import text

# subcommand name -> module (relative to this package); each has add_parser(subparsers)
SUBCOMMANDS = {
    "synth": "synth",
    "build": "build",
    "stats": "stats",
    "search": "search",
    "eval": "evaluate",
    "models": "models",
    "backends": "backends",
    "add, delete, history": "live",
    "serve": "serve",
    "mcp": "mcp",
}


class _Parser(argparse.ArgumentParser):
    """Usage errors as one line (``xmemory CMD: error: ...``), exit 2; ``--help`` shows the usage."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def make_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="xmemory", description="xMemory agent memory: build, inspect, search, evaluate")
    parser.add_argument(
        "--debug", action="store_true", help="show Python tracebacks instead of one-line errors"
    )
    sub = parser.add_subparsers(dest="command", required=True)
    for module in SUBCOMMANDS.values():
        try:
            mod = importlib.import_module(f"{__name__}.{module}")
        except ModuleNotFoundError as exc:
            if exc.name == f"{__name__}.{module}":
                continue  # subcommand not present in this build
            raise
        mod.add_parser(sub)
    return parser


def _log_traceback(command: str) -> Path:
    """The current exception's traceback in a log file; its path."""
    folder = Path(os.environ.get("XMEMORY_LOG_DIR") or Path(tempfile.gettempdir()) / "xmemory-logs")
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{command}-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.log"
    path.write_text(traceback.format_exc(), encoding="utf-8", errors="backslashreplace")
    return path


def _one_line(exc: BaseException) -> str:
    msg = exc.args[0] if isinstance(exc, KeyError) and exc.args else str(exc)
    if isinstance(exc, OSError) and exc.filename is not None and str(exc.filename) not in str(msg):
        msg = f"{exc.filename}: {exc.strerror or msg}"
    return " ".join(str(msg).split())  # one line, whatever the message held


def main(argv: list[str] | None = None) -> int:
    parser = make_parser()
    try:
        args, extra = parser.parse_known_args(argv)
        # argparse cannot place a trailing optional positional after options ("search STORE --memory ID QUESTION",
        # "delete STORE --user ID MESSAGE_ID")
        late = not any(e.startswith("-") for e in extra)
        if extra and late and hasattr(args, "question") and args.question is None:
            try:
                args.question = text("question")(" ".join(extra))
            except argparse.ArgumentTypeError as exc:
                print(f"xmemory {args.command}: error: argument question: {exc}", file=sys.stderr)
                return 2
        elif len(extra) == 1 and late and hasattr(args, "unit") and args.unit is None:
            args.unit = extra[0]
        elif extra:
            parser.error(f"unrecognized arguments: {' '.join(extra)}")
    except SystemExit as exc:  # usage errors (one line, printed) and --help
        return int(exc.code or 0)
    if args.debug:
        return int(args.func(args) or 0)
    try:
        return int(args.func(args) or 0)
    except BrokenPipeError:  # output piped into head and closed: not an error
        sys.stderr.close()
        return 0
    except KeyboardInterrupt:
        print(f"xmemory {args.command}: interrupted", file=sys.stderr)
        return 130
    except (ValueError, KeyError, RuntimeError, OSError) as exc:  # the user's input, files or environment
        print(f"xmemory {args.command}: error: {_one_line(exc)}", file=sys.stderr)
        return 2
    except Exception as exc:  # noqa: BLE001 - a bug: one line, the traceback in a log file
        path = _log_traceback(args.command)
        print(
            f"xmemory {args.command}: internal error: {type(exc).__name__}: {_one_line(exc)} "
            f"(traceback in {path}; --debug shows it)",
            file=sys.stderr,
        )
        return 1


if __name__ == "__main__":
    sys.exit(main())
