"""``xmemory stats STORE``: per memory counts, theme sizes, f(P), reassignment ratio, and totals
(``--ids``: the memory ids; ``--scopes``: each memory's scope)."""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING

from ..memory.summary import COLUMNS, collect

if TYPE_CHECKING:
    from ..memory.store import Store


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("stats", help="summarise a memory store")
    p.add_argument("store")
    p.add_argument("--json", action="store_true")
    p.add_argument("--ids", action="store_true", help="print only the memory ids, one per line")
    p.add_argument(
        "--scopes",
        action="store_true",
        help='print each memory\'s scope, one JSON object a line: {"user_id", "agent_id", "run_id"}',
    )
    p.add_argument(
        "--check",
        action="store_true",
        help="check every memory's records and files; exit 1 if any is damaged",
    )
    p.add_argument(
        "--drop-damaged",
        action="store_true",
        help="with --check: delete damaged memories (a re-run of build rebuilds them)",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..memory.store import Store

    if args.drop_damaged and not args.check:
        raise ValueError("--drop-damaged needs --check")
    store = Store.open(args.store)
    if args.check:
        if not args.drop_damaged:
            return _check(store, drop=False)
        from ..memory.locks import WriterLock, WriterLockError

        lock = WriterLock(store.path)
        try:
            lock.acquire()  # deleting is writing: not while a server or an add holds the store
        except WriterLockError:
            raise RuntimeError(
                f"--drop-damaged: {store.path}: another process is writing this store (it holds "
                f"{lock.path.name}); stop it (the server, an add or a build), then run this again"
            ) from None
        try:
            return _check(store, drop=True)
        finally:
            lock.release()
    if args.ids:
        print("\n".join(store.memory_ids()))
        return 0
    if args.scopes:  # a bulk build's memory (a plain id) is the user of that id, as the engine reads it
        from ..engine.inputs import scope_of

        for m in store.memory_ids():
            print(json.dumps(scope_of(m), ensure_ascii=False))
        return 0
    data = collect(store)
    if args.json:
        print(json.dumps(data, indent=2))
        return 0
    print(
        f"store {data['store']}  embedder {data['embedder']} (d={data['dim']})  memories {len(data['memories'])}"
    )
    head = f"{'memory':16s}" + "".join(f"{label:>10s}" for _, label in COLUMNS)
    print(head)
    for mid, row in data["memories"].items():
        cells = "".join(
            f"{row[k]:10.3f}" if isinstance(row[k], float) else f"{row[k]!s:>10s}" for k, _ in COLUMNS
        )
        print(f"{mid:16s}{cells}")
    t = data["totals"]
    print(
        f"total: {t['n_messages']} messages, {t['n_episodes']} episodes, {t['n_semantics']} semantic nodes, "
        f"{t['n_themes']} themes (max size {t['max_theme_size']}); mean f(P) {t['mean_f_P']:.4f}, "
        f"mean reassignment {t['mean_reassignment_ratio']:.3f}"
    )
    llm_rows = [
        (mid, stage, c) for mid, row in data["memories"].items() for stage, c in row.get("llm", {}).items()
    ]
    if llm_rows:
        keys = ("units", "calls", "prompt_tokens", "output_tokens", "repaired", "retries", "fallbacks")
        print(f"\nLLM builder work ({next(iter(data['memories'].values())).get('builder')}):")
        print(f"{'memory':16s}{'stage':>12s}" + "".join(f"{k:>15s}" for k in keys))
        for mid, stage, c in llm_rows:
            print(f"{mid:16s}{stage:>12s}" + "".join(f"{c.get(k, 0):15d}" for k in keys))
    return 0


def _check(store: Store, drop: bool) -> int:
    """``--check``: every memory's state; with ``drop`` (the write lock held) damaged ones deleted."""
    report = store.check_all()
    bad = {m: r for m, r in report.items() if r is not None}
    for m, r in report.items():
        print(f"{m or '(database)':24s} {'ok' if r is None else 'DAMAGED: ' + r}")
    if drop:
        for m in bad:
            if m:
                store.delete(m)
                print(f"deleted damaged memory {m}")
    print(
        f"{len(report) - 1} memories, {len([m for m in bad if m])} damaged"
        + (", database damaged" if "" in bad else "")
    )
    return 1 if bad and not drop else 0
