"""The live engine on public role-chat sets the project did not write (``docs/public-data.md``): BEAM
(500K, 1M or 10M split; the 100K one is reserved and refused) or LongMemEval, as an app would use it:
each chat added exchange by exchange within its sessions (two messages per ``add``), then every
question searched alone.

Per strategy and budget it reports: evidence recall (questions whose evidence messages the set
names), evidence-word recall (the share of the reference answer's content words the context shows),
current-fact accuracy on changed facts (knowledge updates; for BEAM also contradictions, the later
statement counted current), the AUROC of ``top_relevance`` between answerable and never-said
questions (searched with the no-answer gate off, ``threshold=0``), and, searched again under the
engine's default gate, the share of never-said contexts emptied and of answerable recall kept.

    python benchmarks/bench_public.py --source beam:500k --data BEAM/chats/500K --limit 2
    python benchmarks/bench_public.py --source longmemeval --data longmemeval_s_cleaned.json --limit 14

``--config FILE`` runs the engine with those settings over the defaults (e.g.
``{"semantic": {"read_replies_with_questions": true}}``). ``--store DIR`` keeps the memory there: a
later run with the same chats, embedder and construction settings (a search-only ``--config`` may
differ) searches it without adding them again; the add time shown is then that of the run that
added them.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from _record import write_record

from xmemory_gpu.config import XMemoryConfig
from xmemory_gpu.datasets.beam import RESERVED, SPLITS, PublicChat, load_beam
from xmemory_gpu.datasets.locomo import DatasetError
from xmemory_gpu.datasets.longmemeval import load_longmemeval
from xmemory_gpu.embed import load_embedder
from xmemory_gpu.engine import MemoryEngine
from xmemory_gpu.engine.results import gate_for
from xmemory_gpu.eval.public import score, summarize

STRATEGIES = ["xmemory", "memory-only", "naive-rag", "chunk-rag", "chunk-rag:16"]
BUDGETS = [150, 600, 1200]
CHANGED = {  # source family -> question category -> label of its current-fact figure
    "beam": {"knowledge_update": "ku", "contradiction_resolution": "contradiction"},
    "longmemeval": {"knowledge-update": "ku"},
}


def load(source: str, data: Path, limit: int | None, sessions: int | None = None) -> list[PublicChat]:
    """The chats of ``source`` (``beam:500k`` | ``beam:1m`` | ``beam:10m`` | ``longmemeval``)."""
    family, _, split = source.lower().partition(":")
    if family == "beam":
        if split.upper() in RESERVED:
            raise DatasetError(f"--source {source}: BEAM's 100K/128K split is reserved and is never read")
        if split.upper() not in SPLITS:
            raise DatasetError(f"--source {source}: expected beam:500k, beam:1m or beam:10m")
        return load_beam(data, limit, split=split.upper(), sessions=sessions)
    if family == "longmemeval":
        return load_longmemeval(data, limit)
    raise DatasetError(f"--source {source}: expected beam:500k, beam:1m, beam:10m or longmemeval")


def _pairs(chat: PublicChat) -> list[list[dict]]:
    """The chat's messages two by two, never across a session boundary."""
    out: list[list[dict]] = []
    for m in chat.messages():
        if out and len(out[-1]) < 2 and out[-1][0].get("session") == m.get("session"):
            out[-1].append(m)
        else:
            out.append([m])
    return out


SEARCH_SETTINGS = ("stage1", "stage2", "baselines")  # what a search reads: free to differ on a kept memory


def _added_key(source: str, chats: list[PublicChat], eng: MemoryEngine) -> list:
    """What a kept memory must have been added from: the source, each chat's user and a digest of
    its messages, the embedder, and the settings other than the search's (``SEARCH_SETTINGS``)."""
    settings = {k: v for k, v in eng.config.to_dict().items() if k not in SEARCH_SETTINGS}
    return [
        source,
        [
            [c.user_id, hashlib.sha256(json.dumps(c.messages(), sort_keys=True).encode()).hexdigest()]
            for c in chats
        ],
        eng.embedder.name,
        json.loads(json.dumps(settings, default=str)),
    ]


def _kept(where: Path, key: list, chats: list[PublicChat], eng: MemoryEngine) -> float | None:
    """The add time of the memory kept in ``where`` when it holds exactly these chats, added as
    ``key`` says (its mark written once every chat was in); else None."""
    try:
        mark = json.loads((where / "added.json").read_text())
        add_s = float(mark["add_s"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    users = sorted(s["user_id"] for s in eng.scopes())
    return add_s if mark.get("key") == key and users == sorted(c.user_id for c in chats) else None


def _log(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def run(
    source: str,
    chats: list[PublicChat],
    embedder: str | None,
    strategies: list[str],
    budgets: list[int],
    done: Callable[[dict], None] | None = None,
    config: XMemoryConfig | None = None,
    store: Path | None = None,
) -> dict:
    """The figures of every (strategy, budget); ``done(figures so far)`` after each strategy;
    ``config``: the engine's settings (default: the defaults); ``store``: where the memory is kept
    (default: a temporary folder), reused without adding when it holds these chats already."""
    emb = load_embedder(embedder) if embedder else None
    family = source.split(":")[0].lower()
    out: dict = {
        "source": source,
        "chats": len(chats),
        "messages": sum(len(c.turns) for c in chats),
        "questions": sum(len(c.questions) for c in chats),
        "results": {},
    }
    with contextlib.ExitStack() as stack:
        where = store if store is not None else Path(stack.enter_context(tempfile.TemporaryDirectory()))
        eng = stack.enter_context(MemoryEngine.open(where / "store", embedder=emb, config=config))
        out["embedder"] = eng.embedder.name
        out["gate"] = gate_for(-1, eng.embedder.name)  # the gate calibrated for the embedder
        added = _added_key(source, chats, eng)
        kept = _kept(where, added, chats, eng) if store is not None else None
        if kept is not None:
            out["add_s"] = kept
            _log(f"{where}: the chats are in the memory already (added in {kept:.0f} s)")
        else:
            if eng.scopes():
                raise DatasetError(
                    f"--store {where}: holds another memory, or one added only in part; "
                    "give an empty or new folder"
                )
            t0 = time.perf_counter()
            for n, chat in enumerate(chats):
                for pair in _pairs(chat):
                    eng.add(pair, user_id=chat.user_id)
                _log(f"added {n + 1}/{len(chats)} chats ({time.perf_counter() - t0:.0f} s)")
            out["add_s"] = time.perf_counter() - t0
            if store is not None:
                eng.flush()
                write_record(where / "added.json", {"key": added, "add_s": out["add_s"]})
        for strategy in strategies:
            t1 = time.perf_counter()
            for budget in budgets:
                rows, times = [], []
                for chat in chats:
                    for q in chat.questions:
                        t = time.perf_counter()
                        kw = {"user_id": chat.user_id, "strategy": strategy, "budget_tokens": budget}
                        r = eng.search(q.text, threshold=0.0, **kw)[0]
                        times.append(time.perf_counter() - t)
                        gated = eng.search(q.text, **kw)[0]
                        ids = chat.message_id
                        row = score(
                            kind=q.kind,
                            category=q.category,
                            evidence=[ids(n) for n in q.evidence],
                            current=[ids(n) for n in q.current],
                            stale=[ids(n) for n in q.stale],
                            answer=q.answer,
                            question=q.text,
                            shown=r.message_ids,
                            order=[m for u in r.units if u.type != "theme" for m in u.message_ids],
                            context=r.context,
                            top_relevance=r.top_relevance,
                            empty=not gated.units,
                            changed=q.category in CHANGED.get(family, {}),
                        )
                        rows.append(row | {"chat": chat.user_id, "question": q.text})
                figures = summarize(rows, CHANGED.get(family))
                figures["search_p50_ms"] = 1000 * statistics.median(times) if times else None
                out["results"][f"{strategy}@{budget}"] = figures | {
                    "strategy": strategy,
                    "budget": budget,
                    "rows": rows,
                }
            _log(f"{strategy}: {time.perf_counter() - t1:.0f} s")
            if done is not None:
                done(out)
    return out


def _figures(m: dict) -> dict:
    """One (strategy, budget)'s figures without its per-question rows."""
    return {k: v for k, v in m.items() if k != "rows"}


def _f(v: float | None, nd: int = 3) -> str:
    return "-" if v is None or v != v else f"{v:.{nd}f}"


def table(res: dict) -> str:
    family = res["source"].split(":")[0].lower()
    labels = list(CHANGED.get(family, {}).values())
    head = ["strategy", "budget", "evidence recall", "word recall"]
    head += [f"current ({lab})" for lab in labels]
    head += [
        "AUROC top_relevance",
        f"never-said emptied @{res['gate']}",
        f"recall kept @{res['gate']}",
        "search p50",
    ]
    lines = [
        f"{res['source']}: {res['chats']} chats, {res['messages']} messages, {res['questions']} questions; "
        f"embedder {res['embedder']}; add {res['add_s']:.0f} s",
        "| " + " | ".join(head) + " |",
        "|" + "---|" * len(head),
    ]
    for m in res["results"].values():
        cells = [
            m["strategy"],
            str(m["budget"]),
            f"{_f(m['recall'])} ({m['with_ids']})",
            f"{_f(m['word_recall'])} ({m['answerable']})",
        ]
        cells += [f"{_f(m.get(f'current_{lab}'), 2)} ({m.get(f'current_{lab}_n', 0)})" for lab in labels]
        cells += [
            f"{_f(m['auroc'])} ({m['answerable']}/{m['never_said']})",
            _f(m["never_said_emptied"], 2),
            _f(m["recall_kept"], 2),
            f"{_f(m['search_p50_ms'], 1)} ms",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--source", required=True, help="beam:500k | beam:1m | beam:10m | longmemeval")
    ap.add_argument(
        "--data", type=Path, required=True, help="BEAM split folder, or LongMemEval file or folder"
    )
    ap.add_argument("--limit", type=int, default=None, help="conversations (BEAM) or instances (LongMemEval)")
    ap.add_argument(
        "--sessions",
        type=int,
        default=None,
        help="BEAM: each conversation cut to its first N sessions, with the questions judged there",
    )
    ap.add_argument("--embedder", default=None, help="embedder spec (default: all-MiniLM-L6-v2)")
    ap.add_argument("--strategies", nargs="+", default=STRATEGIES)
    ap.add_argument("--budgets", nargs="+", type=int, default=BUDGETS)
    ap.add_argument("--json", type=Path, help="write the figures and every row here")
    ap.add_argument("--config", type=Path, help="JSON file of engine settings overriding the defaults")
    ap.add_argument(
        "--no-rows", action="store_true", help="--json without the per-question rows (the set's text)"
    )
    ap.add_argument(
        "--store",
        type=Path,
        help="keep the memory in this folder; searched again without adding if it holds these chats",
    )
    args = ap.parse_args(argv)
    try:
        chats = load(args.source, args.data, args.limit, args.sessions)
    except DatasetError as exc:
        print(f"bench_public: {exc}", file=sys.stderr)
        return 2

    def write(res: dict) -> None:  # after each strategy, so a long run leaves what it measured
        if args.json:
            if args.no_rows:  # figures only: no question or answer text of the set in the file
                res = res | {"results": {k: _figures(v) for k, v in res["results"].items()}}
            write_record(args.json, res)

    try:
        config = XMemoryConfig.from_json(args.config) if args.config else None
    except ValueError as exc:
        print(f"bench_public: --config: {exc}", file=sys.stderr)
        return 2
    try:
        res = run(args.source, chats, args.embedder, args.strategies, args.budgets, write, config, args.store)
    except DatasetError as exc:
        print(f"bench_public: {exc}", file=sys.stderr)
        return 2
    if args.config:
        res["config"] = str(args.config)
    print(table(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
