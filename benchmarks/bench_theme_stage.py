"""How the bulk build's theme stage scales with one long memory: one synthetic user-assistant chat
(``datasets.synthetic.generate_long_chats``) per target size, each built in a fresh ``xmemory build``
process; the stage's seconds (the build's own ``timings.themes``), its microseconds per semantic
node, and the exponent ``b`` of ``seconds ~ nodes ** b`` fitted by least squares on the log-log points
(1: the cost per node does not grow with the memory). Min over ``--runs`` builds per size.

    python benchmarks/bench_theme_stage.py --tokens 250000,500000,1000000,2000000 --runs 2 --out themes.json
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import tempfile
from pathlib import Path

from _record import write_record

from xmemory_gpu.datasets.synthetic import generate_long_chats, write_json


def _xmemory(*argv: str) -> dict:
    cmd = [sys.executable, "-m", "xmemory_gpu", *argv, "--json"]
    return json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)


def build_once(chat: Path, store: Path, embedder: str) -> dict:
    """One fresh build: {'themes_s', 'build_s', 'nodes', 'themes', 'messages'}."""
    report = _xmemory("build", str(chat), "--out", str(store), "--embedder", embedder, "--no-progress")
    stats = _xmemory("stats", str(store))["totals"]
    return {
        "themes_s": report["timings"]["themes"],
        "build_s": sum(report["timings"].values()),
        "nodes": stats["n_semantics"],
        "themes": stats["n_themes"],
        "messages": stats["n_messages"],
    }


def exponent(nodes: list[int], seconds: list[float]) -> float:
    """Least-squares slope of log(seconds) on log(nodes)."""
    x, y = [math.log(n) for n in nodes], [math.log(s) for s in seconds]
    mx, my = sum(x) / len(x), sum(y) / len(y)
    return sum((a - mx) * (b - my) for a, b in zip(x, y)) / sum((a - mx) ** 2 for a in x)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tokens", default="250000,500000,1000000,2000000", help="target sizes, comma-separated")
    ap.add_argument("--seed", type=int, default=3)
    ap.add_argument("--embedder", default="hashing:384")
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--out", default=None, help="also write the points here (JSON)")
    args = ap.parse_args(argv)
    points = []
    with tempfile.TemporaryDirectory() as tmp:
        for target in (int(t) for t in args.tokens.split(",")):
            chat = write_json(
                generate_long_chats(1, seed=args.seed, target_tokens=target), Path(tmp) / f"chat{target}.json"
            )
            runs = [build_once(chat, Path(tmp) / f"s{target}-{r}", args.embedder) for r in range(args.runs)]
            best = min(runs, key=lambda r: r["themes_s"])
            best |= {"target_tokens": target, "us_per_node": round(1e6 * best["themes_s"] / best["nodes"], 1)}
            best["themes_s_runs"] = [r["themes_s"] for r in runs]
            points.append(best)
            print(json.dumps(best), flush=True)
    b = exponent([p["nodes"] for p in points], [p["themes_s"] for p in points]) if len(points) > 1 else None
    print(f"theme stage: seconds ~ nodes ** {b:.2f}" if b is not None else "one size: no exponent")
    if args.out:
        write_record(
            args.out, {"embedder": args.embedder, "seed": args.seed, "points": points, "exponent": b}
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
