"""``xmemory search STORE --memory ID "question"`` (or ``--user ID`` for a live store's memory, or a bulk
build's memory by its id): print the units a strategy retrieves, each with its score (the relevance:
the query-unit cosine in [0, 1], as every front door scores). A store of several memories needs the
choice; one of one memory does not."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..memory.backend import MemoryBackend


def add_parser(sub: argparse._SubParsersAction) -> None:
    from ..retrieve import STRATEGIES
    from .args import integer, text
    from .evaluate import add_retrieval_options

    p = sub.add_parser("search", help="retrieve context for questions from a memory store")
    p.add_argument("store")
    p.add_argument("question", nargs="?", type=text("question"), help="the question (or use --batch)")
    p.add_argument(
        "--memory", type=text("memory id"), help="memory id to search (needed when the store holds several)"
    )
    p.add_argument(
        "--user",
        type=text("user id"),
        help="a live store's memory by its scope: user id (with --agent, --run)",
    )
    p.add_argument("--agent", type=text("agent id"), help="with --user: agent id of the scope")
    p.add_argument("--run", type=text("run id"), help="with --user: run id of the scope")
    p.add_argument("--strategy", default="xmemory", choices=STRATEGIES)
    p.add_argument("--budget-tokens", type=integer(0), default=None, help="cap on context tokens")
    p.add_argument("--batch", help='JSON file: a list of {"question": ..., "memory": ...} (memory optional)')
    p.add_argument("--backend", default="auto", help="kernel backend: auto, reference, cpu, triton, cuda")
    p.add_argument("--json", action="store_true", help="print results as JSON")
    p.add_argument("--context", action="store_true", help="also print the assembled answer context")
    add_retrieval_options(p)
    p.set_defaults(func=run)


def _batch(path: str, default_memory: str | None, choice: str) -> tuple[list[str], list[str]]:
    if Path(path).is_dir():
        raise ValueError(f"--batch {path}: is a folder; expected a JSON file")
    try:
        items = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise ValueError(f"--batch {path}: cannot read ({exc.strerror or exc})") from None
    except UnicodeDecodeError as exc:
        raise ValueError(f"--batch {path}: not UTF-8 text (byte {exc.start})") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"--batch {path}: malformed JSON at line {exc.lineno}: {exc.msg}") from None
    except RecursionError:
        raise ValueError(f"--batch {path}: JSON nested too deeply") from None
    if not isinstance(items, list):
        raise ValueError(f'{path}: expected a list of {{"question": ..., "memory": ...}} objects')
    qs, ms = [], []
    for i, it in enumerate(items):
        if not isinstance(it, dict) or not isinstance(it.get("question"), str) or not it["question"].strip():
            raise ValueError(f"{path}: item {i}: field 'question' missing, empty or not a string")
        if "memory" not in it and default_memory is None:
            raise ValueError(f"{path}: item {i}: field 'memory' missing, {choice}")
        mem = it.get("memory", default_memory)
        if not isinstance(mem, str) or not mem:
            raise ValueError(f"{path}: item {i}: field 'memory' must be a non-empty string")
        qs.append(it["question"])
        ms.append(mem)
    return qs, ms


def _memory(args: argparse.Namespace, ids: list[str]) -> tuple[str | None, str]:
    """The memory ``--memory`` / ``--user`` name (None when neither does and the store holds several),
    and what to tell the user when a choice is missing."""
    if args.user is None and (args.agent is not None or args.run is not None):
        raise ValueError("--agent and --run need --user (they narrow a live store's scope)")
    if args.user is not None:
        if args.memory is not None:
            raise ValueError("give --memory or --user, not both")
        from ..engine.inputs import scope_key, scope_of

        key = scope_key(args.user, args.agent, args.run)
        plain = args.agent is None and args.run is None and scope_of(args.user)["user_id"] == args.user
        if key not in ids and plain and args.user in ids:
            key = args.user  # a bulk build's memory, stored under its plain id (conv-26)
        if key not in ids:
            raise ValueError(
                f"{args.store}: no memory for --user {args.user!r}"
                + (f" --agent {args.agent!r}" if args.agent else "")
                + (f" --run {args.run!r}" if args.run else "")
            )
        return key, ""
    if args.memory is not None or len(ids) == 1:
        return args.memory if args.memory is not None else ids[0], ""
    users = [_user_of(m) for m in ids[:3]]
    examples = ", ".join(f"--user {u}" if u is not None else f"--memory {m}" for m, u in zip(ids[:3], users))
    return (
        None,
        f"the store holds {len(ids)} memories: choose one with --memory ID or --user ID (e.g. {examples})",
    )


def _user_of(memory_id: str) -> str | None:
    """The user id of a live store's memory id (its scope as a JSON array), else None."""
    try:
        scope = json.loads(memory_id)
    except ValueError:
        return None
    return scope[0] if isinstance(scope, list) and len(scope) == 3 and isinstance(scope[0], str) else None


def run(args: argparse.Namespace) -> int:
    from ..memory.store import Store

    store = Store.open(args.store)  # opened once: its settings and memories are read from this one
    try:
        return _search(args, store)
    finally:
        store.close()


def _search(args: argparse.Namespace, store: MemoryBackend) -> int:
    from ..retrieve import Retriever
    from .evaluate import retrieval_config

    ids = store.memory_ids()
    if not ids:
        raise ValueError(f"{args.store}: the store holds no memories")
    config = retrieval_config(args, store)
    memory, choice = _memory(args, ids)
    if args.batch:
        questions, mems = _batch(args.batch, memory, choice)
    elif args.question:
        if memory is None:
            raise ValueError(f"{args.store}: {choice}")
        questions, mems = [args.question], [memory]
    else:
        raise ValueError("search: give a question or --batch FILE")
    missing = sorted(set(mems) - set(ids))
    if missing:
        raise ValueError(
            f"{args.store}: no memory {missing[0]!r} (the store holds {len(ids)}: {', '.join(ids[:5])}...)"
        )
    reader = None
    if args.reader:
        from ..llm import load_reader

        reader = load_reader(args.reader)
    retriever = Retriever.from_store(
        store, sorted(set(mems)), backend=args.backend, reader=reader, config=config
    )
    from ..engine.results import mark_relevance

    results = retriever.search(questions, mems, strategy=args.strategy, budget_tokens=args.budget_tokens)
    for r in results:
        mark_relevance(r)  # each unit's relevance: the score shown, as the front doors show it
    if args.json:
        print(json.dumps([r.to_dict() for r in results], indent=1))
        return 0
    for r in results:
        print(f"Q: {r.query}   [{r.memory_id}, {r.strategy}, {r.context_tokens} tokens ({r.tokenizer})]")
        for u in r.units:
            src = ",".join(u.message_ids[:6]) + ("..." if len(u.message_ids) > 6 else "")
            text = u.text.replace("\n", " | ")
            score = min(1.0, max(0.0, u.relevance or 0.0))  # the query-unit cosine in [0, 1]
            print(f"  {u.type:<8} {score:6.3f}  {text[:110]}{'...' if len(text) > 110 else ''}  [{src}]")
        for note in r.notes:
            print(f"  note: {note}")
        if args.context:
            print(r.context)
        print()
    return 0
