"""Embedders that install offline, compared where users meet them: each one's CPU cost per text, then
the same public sets (``bench_public.py``: the live engine, two messages per add, each question alone)
and the LoCoMo dev split (``xmemory build`` and ``xmemory eval``) with every strategy built on it.

Per embedder it reports the encoder's milliseconds per text (a bulk call of ``--cost-texts`` chat
texts, min over interleaved rounds, ``--threads`` torch / OpenVINO threads) and its ratio to the first
spec's, and per source and budget the evidence recall, evidence-word recall, current-fact accuracy and
AUROC of ``top_relevance`` of ``xmemory`` and the strongest RAG peer of the same run.

    python benchmarks/bench_embedders.py --specs all-MiniLM-L6-v2 ov-int8 hashing:384 \\
        --locomo locomo_dev.json --public beam:500k=BEAM/chats/500K:4 \\
        --public longmemeval=LME_ORACLE:100 --stores STORES --json F

``--stores DIR`` keeps every memory under DIR, a folder per source, limit and spec (LoCoMo's marked with
its data's digest), so a second run searches them again instead of adding the chats anew
(``bench_public.py --store``); without it they live in a temporary folder. A spec's model must load
offline.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _record import write_record
from bench_public import BUDGETS, STRATEGIES, _f
from bench_public import load as load_public
from bench_public import run as run_public

from xmemory_gpu.cli.args import integer
from xmemory_gpu.datasets.locomo import DatasetError, conversations_of, load_locomo
from xmemory_gpu.datasets.synthetic import generate_conversations
from xmemory_gpu.embed import EmbedderLoadError, check_embedder_spec, load_embedder

RAG = ("naive-rag", "chunk-rag", "chunk-rag:16")
LOCOMO_BUDGETS = [150, 300, 600, 1200]


def _slug(text: str, key: str = "") -> str:
    """A folder name for ``text`` that no other (text, key) shares: a digest of both at the end."""
    tag = hashlib.sha256(f"{text}\0{key}".encode()).hexdigest()[:8]
    return f"{re.sub(r'[^A-Za-z0-9.]+', '_', text).strip('_')}-{tag}"


def cost_texts(n: int, locomo: Path | None) -> list[str]:
    """Up to ``n`` distinct chat texts in order: the LoCoMo file's turns when given, else synthetic
    chats' (the neural embedders encode a repeated text once, so repeats would not be a cost)."""
    if locomo is not None:
        convs = load_locomo(locomo)
    else:
        convs = conversations_of(Path("synthetic"), generate_conversations(max(1, n // 4), seed=5))
    texts = [m.text for c in convs for m in c.messages]
    return list(dict.fromkeys(t for t in texts if t.strip()))[:n]


def encoder_cost(specs: list[str], texts: list[str], rounds: int, threads: int | None) -> dict[str, float]:
    """Milliseconds per text of one bulk ``encode`` of ``texts`` per spec, min of ``rounds`` rounds
    that visit the specs in turn (a noisy machine's slow period touches each one alike); each spec
    encodes the texts once untimed first (its load, compiles and first shapes are not the cost)."""
    embedders = {s: load_embedder(s, num_threads=threads) for s in specs}
    for e in embedders.values():
        e.encode(texts)
    best = dict.fromkeys(specs, float("inf"))
    for _ in range(rounds):
        for s, e in embedders.items():
            t = time.perf_counter()
            e.encode(texts)
            best[s] = min(best[s], time.perf_counter() - t)
    return {s: 1000 * best[s] / len(texts) for s in specs}


def _public_figures(res: dict) -> dict:
    """Per ``strategy@budget`` the figures a comparison reads (no rows), and ``add_s``."""
    keep = ("recall", "word_recall", "auroc", "current_ku", "current_contradiction", "search_p50_ms")
    return {
        "add_s": res["add_s"],
        "questions": res["questions"],
        "results": {k: {f: v.get(f) for f in keep} for k, v in res["results"].items()},
    }


def _digest(path: Path) -> str:
    files = sorted(path.rglob("*.json")) if path.is_dir() else [path]
    h = hashlib.sha256()
    for f in files:
        h.update(f.read_bytes())
    return h.hexdigest()


def locomo_run(spec: str, data: Path, where: Path, env: dict[str, str]) -> dict:
    """``xmemory build`` (kept in ``where`` when its mark names this data and spec; timed when built)
    and ``xmemory eval --sweep-budget`` of every strategy; recall and word recall per
    ``strategy@budget`` from the sweep."""
    store, mark = where / "store", where / "built.json"
    want = {"spec": spec, "data": _digest(data)}
    build_s = None
    if not (mark.exists() and json.loads(mark.read_text()) == want):
        shutil.rmtree(where, ignore_errors=True)
        t = time.perf_counter()
        cmd = [sys.executable, "-m", "xmemory_gpu", "build", str(data), "--out", str(store)]
        subprocess.run(
            cmd + ["--embedder", spec, "--no-progress"], check=True, env=env, stdout=subprocess.DEVNULL
        )
        build_s = time.perf_counter() - t
        mark.write_text(json.dumps(want))
    cmd = [sys.executable, "-m", "xmemory_gpu", "eval", str(store), "--data", str(data)]
    cmd += ["--out", str(where / "eval"), "--sweep-budget", ",".join(map(str, LOCOMO_BUDGETS))]
    subprocess.run(
        cmd + ["--strategies", ",".join(STRATEGIES)], check=True, env=env, stdout=subprocess.DEVNULL
    )
    sweep = json.loads((where / "eval" / "sweep.json").read_text())
    results = {}
    for name, r in sweep["strategies"].items():
        for i, b in enumerate(sweep["budgets"]):
            word = r.get("evidence_word_recall")
            results[f"{name}@{b}"] = {"recall": r["recall"][i], "word_recall": word[i] if word else None}
    return {"build_s": build_s, "results": results}


def _cell(r: dict, b: int) -> str:
    """``xmemory``'s recall / word recall at budget ``b``, then the best RAG peer's: the highest
    recall and the highest word recall among the peers (two peers, where they differ)."""
    x = r.get(f"xmemory@{b}", {})
    peers = [r[f"{p}@{b}"] for p in RAG if f"{p}@{b}" in r]
    recall = max((v for m in peers if (v := m.get("recall")) is not None), default=None)
    word = max((v for m in peers if (v := m.get("word_recall")) is not None), default=None)
    cell = f"{_f(x.get('recall'))} / {_f(x.get('word_recall'))}; peer {_f(recall)} / {_f(word)}"
    if x.get("auroc") is not None:
        cell += f"; AUROC {_f(x['auroc'], 2)}"
    cur = [x.get(k) for k in ("current_ku", "current_contradiction") if x.get(k) is not None]
    if cur:
        cell += "; current " + " / ".join(_f(c, 2) for c in cur)
    return cell


def table(out: dict) -> str:
    """Markdown: the cost per text, then per source ``xmemory`` and the best RAG peer per budget."""
    specs = list(out["cost_ms"])
    first = out["cost_ms"][specs[0]]
    lines = ["| embedder | ms per text | x first |", "|---|---|---|"]
    lines += [f"| {s} | {out['cost_ms'][s]:.3f} | {out['cost_ms'][s] / first:.2f} |" for s in specs]
    for source, per_spec in out["sources"].items():
        budgets = LOCOMO_BUDGETS if source == "locomo" else BUDGETS
        lines += ["", f"**{source}** (xmemory, then the best RAG peer: recall / word recall; AUROC, current)"]
        lines += ["| embedder | " + " | ".join(f"@{b}" for b in budgets) + " |"]
        lines += ["|---|" + "---|" * len(budgets)]
        for spec, res in per_spec.items():
            lines.append(f"| {spec} | " + " | ".join(_cell(res["results"], b) for b in budgets) + " |")
    return "\n".join(lines)


def _public_arg(text: str) -> tuple[str, Path, int | None]:
    """``SOURCE=DATA[:LIMIT]``; a DATA path that exists as written keeps a ``:digits`` ending."""
    source, sep, rest = text.partition("=")
    if not sep or not source or not rest:
        raise argparse.ArgumentTypeError(f"--public {text!r}: expected SOURCE=DATA[:LIMIT]")
    data, _, limit = rest.rpartition(":")
    if Path(rest).exists() or not re.fullmatch(r"\d+", limit):
        return source, Path(rest), None
    if int(limit) < 1:
        raise argparse.ArgumentTypeError(f"--public {text!r}: LIMIT must be at least 1")
    return source, Path(data), int(limit)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--specs", nargs="+", default=["all-MiniLM-L6-v2", "ov-int8", "hashing:384"])
    ap.add_argument("--public", action="append", type=_public_arg, default=[], help="SOURCE=DATA[:LIMIT]")
    ap.add_argument("--locomo", type=Path, help="the LoCoMo dev split (or another LoCoMo-format file)")
    ap.add_argument("--stores", type=Path, help="keep every memory under this folder and reuse it")
    ap.add_argument("--cost-texts", type=integer(1), default=512, help="distinct texts timed per round")
    ap.add_argument("--rounds", type=integer(1), default=3)
    ap.add_argument("--threads", type=integer(1), default=None, help="torch and OpenVINO threads")
    ap.add_argument("--json", type=Path, help="write the figures here (no question text)")
    args = ap.parse_args(argv)
    labels = [f"{src}:{limit}" if limit else src for src, _, limit in args.public]
    try:
        if len(set(labels)) < len(labels):
            raise ValueError(f"--public: a source and limit given twice ({', '.join(labels)})")
        for spec in args.specs:
            check_embedder_spec(spec)
        public = [
            (lab, src, data, load_public(src, data, lim))
            for lab, (src, data, lim) in zip(labels, args.public)
        ]
        texts = cost_texts(args.cost_texts, args.locomo)
    except (ValueError, DatasetError, OSError) as exc:
        print(f"bench_embedders: {exc}", file=sys.stderr)
        return 2
    env = os.environ | {"HF_HUB_OFFLINE": "1"}
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
        env |= {"OMP_NUM_THREADS": str(args.threads)}
    out: dict = {"specs": args.specs, "cost_texts": len(texts), "threads": args.threads, "sources": {}}

    def save() -> None:
        if args.json:
            write_record(args.json, out)

    with contextlib.ExitStack() as stack:
        stores = args.stores or Path(stack.enter_context(tempfile.TemporaryDirectory()))
        try:
            out["cost_ms"] = encoder_cost(args.specs, texts, args.rounds, args.threads)
            save()
            for label, source, data, chats in public:
                for spec in args.specs:
                    where = stores / _slug(f"{label}-{spec}", key=str(data.resolve()))
                    res = run_public(source, chats, spec, STRATEGIES, BUDGETS, store=where)
                    out["sources"].setdefault(label, {})[spec] = _public_figures(res)
                    save()
            for spec in args.specs if args.locomo is not None else ():
                where = stores / _slug(f"locomo-{spec}")
                out["sources"].setdefault("locomo", {})[spec] = locomo_run(spec, args.locomo, where, env)
                save()
        except (ValueError, DatasetError, EmbedderLoadError) as exc:
            print(f"bench_embedders: {exc}", file=sys.stderr)
            return 2
        except subprocess.CalledProcessError as exc:
            print(
                f"bench_embedders: {' '.join(exc.cmd[2:5])} failed (exit {exc.returncode})", file=sys.stderr
            )
            return 1
    print(table(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
