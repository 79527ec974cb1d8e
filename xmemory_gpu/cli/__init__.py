"""The ``xmemory`` command. Each subcommand lives in its own module with ``add_parser``."""

from __future__ import annotations

import argparse
import importlib
import sys

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
}


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="xmemory", description="xMemory agent memory: build, inspect, search, evaluate")
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


def main(argv: list[str] | None = None) -> int:
    parser = make_parser()
    args, extra = parser.parse_known_args(argv)
    # argparse cannot place a trailing optional positional after options ("search STORE --memory ID QUESTION")
    if extra and hasattr(args, "question") and args.question is None and not any(e.startswith("-") for e in extra):
        args.question = " ".join(extra)
    elif extra:
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    try:
        return int(args.func(args) or 0)
    except BrokenPipeError:  # output piped into head and closed: not an error
        sys.stderr.close()
        return 0
    except (ValueError, FileNotFoundError, KeyError, RuntimeError) as exc:
        msg = exc.args[0] if isinstance(exc, KeyError) and exc.args else exc
        print(f"xmemory {args.command}: error: {msg}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
