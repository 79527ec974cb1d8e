"""``xmemory add``, ``xmemory delete``, ``xmemory history``: the live engine from the command line.

``add STORE --user ID FILE.json`` takes a JSON list of messages (``speaker``/``role``,
``content``/``text``, optional ``timestamp``, ``id``, ``session``) and prints the ids added.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def _scope(p: argparse.ArgumentParser) -> None:
    p.add_argument("--user", required=True, help="user id of the memory")
    p.add_argument("--agent", default=None, help="agent id (optional part of the scope)")
    p.add_argument("--run", default=None, help="run id (optional part of the scope)")


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("add", help="add messages to a live memory (creates the store if needed)")
    p.add_argument("store")
    p.add_argument("file", help="JSON list of messages")
    _scope(p)
    p.add_argument("--embedder", default=None, help="embedder for a new store (default all-MiniLM-L6-v2)")
    p.set_defaults(func=run_add)
    p = sub.add_parser(
        "delete", help="forget a unit (message id, episode:N, semantic:N) or, with --all, a whole memory"
    )
    p.add_argument("store")
    p.add_argument("unit", nargs="?", default=None)
    p.add_argument("--all", action="store_true", help="delete the whole memory of the scope")
    _scope(p)
    p.set_defaults(func=run_delete)
    p = sub.add_parser("history", help="the operations log of a memory")
    p.add_argument("store")
    _scope(p)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=run_history)


def _read_messages(path: str) -> list:
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise ValueError(f"{path}: cannot read ({exc.strerror or exc})") from None
    except UnicodeDecodeError as exc:
        raise ValueError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except (json.JSONDecodeError, RecursionError) as exc:
        raise ValueError(f"{path}: not valid JSON ({exc})") from None
    if isinstance(data, dict) and "messages" in data:
        data = data["messages"]
    if not isinstance(data, list):
        raise ValueError(f'{path}: expected a JSON list of messages (or {{"messages": [...]}})')
    return data


def _has_store(path: str) -> bool:
    from ..memory.store import DB_NAME

    return (Path(path) / DB_NAME).is_file()


def run_add(args: argparse.Namespace) -> int:
    from ..engine import MemoryEngine

    msgs = _read_messages(args.file)
    embedder = args.embedder
    if not _has_store(args.store):
        # a new store: load its embedder before anything is created, so a bad --embedder leaves nothing behind
        from ..config import XMemoryConfig
        from ..embed import load_embedder
        from ..ops.devices import encoder_device

        cfg = XMemoryConfig()
        embedder = load_embedder(
            args.embedder or cfg.embed.model, device=encoder_device("auto", cfg.embed.device)
        )
    ids: list[str] = []
    with MemoryEngine.open(args.store, embedder=embedder) as eng:
        step = (
            eng.limits.max_messages
        )  # a file longer than one write's limit goes in as several commits, in order
        for a in range(0, max(len(msgs), 1), step):
            try:
                ids += eng.add(msgs[a : a + step], user_id=args.user, agent_id=args.agent, run_id=args.run)
            except ValueError as exc:
                if a == 0:
                    raise
                raise ValueError(
                    f"{args.file}: messages from {a} on (the {a} before were added): {exc}"
                ) from None
    print("\n".join(ids))
    return 0


def run_delete(args: argparse.Namespace) -> int:
    from ..engine import MemoryEngine

    if bool(args.all) == bool(args.unit):
        raise ValueError("give a unit id or --all (not both)")
    if not _has_store(args.store):
        raise ValueError(f"{args.store}: no store here (nothing to delete)")
    with MemoryEngine.open(args.store) as eng:
        if args.all:
            n = eng.delete_all(user_id=args.user, agent_id=args.agent, run_id=args.run)
            print(f"deleted the memory ({n} messages)")
        else:
            eng.delete(args.unit, user_id=args.user, agent_id=args.agent, run_id=args.run)
            print(f"deleted {args.unit}")
    return 0


def run_history(args: argparse.Namespace) -> int:
    from ..engine import MemoryEngine

    with MemoryEngine.open(args.store, read_only=True) as eng:
        log = eng.history(user_id=args.user, agent_id=args.agent, run_id=args.run)
    if args.json:
        print(json.dumps(log, indent=2))
        return 0
    from datetime import datetime, timezone

    for e in log:
        when = datetime.fromtimestamp(e["time"], tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S")
        print(
            f"{when}  {e['op']:10s} {len(e['ids'])} ids  {', '.join(e['ids'][:5])}{' ...' if len(e['ids']) > 5 else ''}"
        )
    return 0
