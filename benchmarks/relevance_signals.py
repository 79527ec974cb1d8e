"""Does a question's similarity to the memory tell an answerable question from a never-said one?

Candidate no-answer signals, each a number per question (higher: more likely about something said),
from a question's cosines to the memory's own rows (its statements, messages and long messages'
passages, unit vectors as stored):

- ``top_relevance``: what the engine's search returns (``xmemory`` at 600 tokens, no gate);
- ``max_statement`` / ``max_unit``: the best cosine over the statements / over every row;
- ``z_unit``: that best cosine in standard deviations above the memory's mean cosine to the question;
- ``gap10`` / ``gap50``: the best cosine minus the 10th / 50th best.

For each public set given (``--set SOURCE DATA LIMIT FOLDER``, the memory added by ``bench_public.run``
into FOLDER, or reused from there when FOLDER holds exactly these chats), the AUROC of each signal between
the answerable and the never-said questions. The first set calibrates: a signal whose AUROC is below
one half there is read reversed (lower: more likely answerable) on every set, and the table says so.
A gate needs an AUROC of at least 0.85 on the sets it was not calibrated on.

    python benchmarks/relevance_signals.py --set beam:500k BEAM/chats/500K 4 STORES/b500 \\
        --set longmemeval LME_ORACLE 100 STORES/lme --set beam:1m BEAM_1M 3 STORES/b1m [--json F]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
from _record import write_record
from bench_public import load, run

from xmemory_gpu.datasets.locomo import DatasetError
from xmemory_gpu.embed import encode_queries, load_embedder
from xmemory_gpu.embed.base import normalize_rows
from xmemory_gpu.engine.inputs import scope_key
from xmemory_gpu.eval.chat_metrics import auroc
from xmemory_gpu.memory.store import Store, StoreError

SIGNALS = ("top_relevance", "max_statement", "max_unit", "z_unit", "gap10", "gap50")
BUDGET = 600  # the search whose top_relevance is read


def row_signals(q: np.ndarray, statements: np.ndarray, units: np.ndarray) -> dict[str, float]:
    """The distribution signals of one unit query row ``q`` [d] against a memory's unit rows:
    ``statements`` [s, d] and ``units`` [u, d] (every row, statements included; u >= 1)."""
    cs = statements @ q if len(statements) else np.zeros(1, np.float32)
    cu = np.sort(units @ q)[::-1].astype(np.float64)
    sd = float(cu.std())
    return {
        "max_statement": float(cs.max()),
        "max_unit": float(cu[0]),
        "z_unit": (float(cu[0]) - float(cu.mean())) / sd if sd > 0 else 0.0,
        "gap10": float(cu[0] - cu[min(9, len(cu) - 1)]),
        "gap50": float(cu[0] - cu[min(49, len(cu) - 1)]),
    }


def signals(source: str, data: Path, limit: int | None, folder: Path, embedder: str | None) -> dict:
    """Each question's kind and signals for one public set (its memory added into, or reused from,
    ``folder``): {'source', 'questions': [{'kind', signal: value, ...}]}."""
    chats = load(source, data, limit)
    res = run(source, chats, embedder, ["xmemory"], [BUDGET], store=folder)
    rows = res["results"][f"xmemory@{BUDGET}"]["rows"]
    if len(rows) != sum(len(c.questions) for c in chats):
        raise DatasetError(f"{source}: the search gave {len(rows)} rows for the set's questions")
    emb = load_embedder(embedder or res["embedder"])
    out = []
    store = Store.open(folder / "store")
    try:
        i = 0
        for chat in chats:
            sl = store.get_slice(scope_key(chat.user_id))
            sem = normalize_rows(sl.cols["sem"]["x"])
            units = np.concatenate(
                [sem, normalize_rows(sl.cols["msg"]["x"]), normalize_rows(sl.cols["psg"]["x"])]
            )
            qs = normalize_rows(encode_queries(emb, [q.text for q in chat.questions]))
            for q, v in zip(chat.questions, qs):
                row = rows[i]
                i += 1
                if row["question"] != q.text:
                    raise DatasetError(f"{source}: the search's rows are not in the questions' order")
                out.append(
                    {"kind": q.kind, "top_relevance": row["top_relevance"]} | row_signals(v, sem, units)
                )
    finally:
        store.close()
    return {"source": f"{source}:{limit}" if limit else source, "embedder": res["embedder"], "questions": out}


def aurocs(questions: list[dict], reverse: dict[str, bool]) -> dict[str, float]:
    """Each signal's AUROC (answerable above never-said), a ``reverse``d signal negated first."""
    ans = [q for q in questions if q["kind"] != "unanswerable"]
    neg = [q for q in questions if q["kind"] == "unanswerable"]
    sign = {s: -1.0 if reverse.get(s) else 1.0 for s in SIGNALS}
    return {s: auroc([sign[s] * q[s] for q in ans], [sign[s] * q[s] for q in neg]) for s in SIGNALS}


def table(sets: list[dict]) -> tuple[str, dict]:
    """The Markdown table (a row per signal, a column per set, the first calibrating the direction)
    and the figures."""
    kinds = {q["kind"] == "unanswerable" for q in sets[0]["questions"]}
    if kinds != {True, False}:
        raise DatasetError(
            f"--set {sets[0]['source']}: the first set calibrates and needs both answerable and never-said "
            "questions"
        )
    raw = aurocs(sets[0]["questions"], {})
    reverse = {s: bool(raw[s] < 0.5) for s in SIGNALS}
    figures = {st["source"]: aurocs(st["questions"], reverse) for st in sets}
    counts = {
        st["source"]: (
            sum(q["kind"] != "unanswerable" for q in st["questions"]),
            sum(q["kind"] == "unanswerable" for q in st["questions"]),
        )
        for st in sets
    }
    head = ["signal"] + [
        f"{src} ({a}/{n}){' (calibration)' if i == 0 else ''}"
        for i, (src, (a, n)) in enumerate(counts.items())
    ]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for s in SIGNALS:
        name = f"{s} (reversed)" if reverse[s] else s
        lines.append("| " + " | ".join([name] + [f"{figures[src][s]:.3f}" for src in figures]) + " |")
    return "\n".join(lines), {"reversed": reverse, "auroc": figures, "answerable_never_said": counts}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--set",
        nargs=4,
        action="append",
        required=True,
        metavar=("SOURCE", "DATA", "LIMIT", "FOLDER"),
        help="a public set (bench_public's --source, --data, --limit; 0: all) and its memory's folder; "
        "the first calibrates",
    )
    ap.add_argument("--embedder", default=None, help="embedder spec (default: all-MiniLM-L6-v2)")
    ap.add_argument("--json", type=Path, help="write the figures here")
    args = ap.parse_args(argv)
    sets = []
    try:
        if len({(source, limit) for source, _, limit, _ in args.set}) < len(args.set):
            raise DatasetError("--set: a source and limit given twice (one column each)")
        for source, data, limit, folder in args.set:
            try:
                n = int(limit)
            except ValueError:
                raise DatasetError(f"--set {source}: LIMIT must be a whole number, got {limit!r}") from None
            sets.append(signals(source, Path(data), n or None, Path(folder), args.embedder))
        text, figures = table(sets)
    except (DatasetError, StoreError, ValueError) as exc:
        print(f"relevance_signals: {exc}", file=sys.stderr)
        return 2
    print(text)
    if args.json:  # the command names the data by placeholders (``write_record`` adds the CPU)
        cmd = "python benchmarks/relevance_signals.py " + " ".join(
            f"--set {s} DATA {lim} FOLDER" for s, _, lim, _ in args.set
        )
        write_record(args.json, {"command": cmd, "embedder": sets[0]["embedder"]} | figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
