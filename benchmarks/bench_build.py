"""Bulk construction, stage by stage: ``xmemory build`` on a LoCoMo file or on synthetic
conversations, each run a fresh process and a fresh store, its per-stage timings parsed from the
CLI's own report; min and median over the runs. With ``--before DIR`` (a copy of another commit's
``xmemory_gpu`` package, e.g. ``git archive <commit> xmemory_gpu | tar -x -C DIR`` plus a link to
the built ``_C`` module) the runs of the two trees alternate (the machine may be shared: interleaved
rounds keep the comparison fair); ``--workers N`` rows then run for both trees. ``--profile`` adds two in-process runs of this tree and reports the
share of the non-encoder time spent inside the compiled module (``xmemory_gpu._C``): under cProfile,
and at full speed with every ``_C`` function and the encoder wrapped in a clock (cProfile's per-call
cost inflates the Python side about 2x; the second figure is the truer one).

    python benchmarks/bench_build.py --data locomo_dev.json --runs 3
    python benchmarks/bench_build.py --synthetic 1000 --seed 11 --runs 3 --before OLD_PACKAGE --profile
    python benchmarks/bench_build.py --synthetic 1000 --seed 11 --runs 3 --workers 2
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from _record import write_record

_LINE = re.compile(r"^\s+(\w+)\s+([0-9.]+) s$")
_RUN = (
    "import sys; src = sys.argv.pop(1)\n"
    "if src:  # editable-install hooks are off there (_NO_EDITABLE)\n"
    "    sys.path.insert(0, src)\n"
    "from xmemory_gpu.cli import main\n"
    "sys.exit(main(sys.argv[1:]))\n"
)


# On the path of another tree's processes (its build workers too): editable installs' import hooks off, so
# ``xmemory_gpu`` is the tree's (a build worker imports it by the path the builder gives it)
_NO_EDITABLE = (
    "import sys\nsys.meta_path[:] = [f for f in sys.meta_path if 'editable' not in repr(f).lower()]\n"
)


def build_once(data: Path, embedder: str, src: str = "", workers: int = 1) -> dict[str, float]:
    """One ``xmemory build`` in a fresh process and store: {stage: seconds, 'wall': process seconds}
    (``workers`` > 1: its ``--workers``; stage seconds are then summed over the workers)."""
    with tempfile.TemporaryDirectory() as tmp:
        src = str(Path(src).resolve()) if src else ""  # the before tree's runs start in a temp folder
        cmd = [
            sys.executable,
            "-c",
            _RUN,
            src,
            "build",
            str(Path(data).resolve()),
            "--out",
            f"{tmp}/store",
            "--embedder",
            embedder,
            "--no-progress",
            *(["--workers", str(workers)] if workers > 1 else []),
        ]
        env = dict(os.environ)
        if (
            src
        ):  # run from the temp folder: a worker started with ``-m`` has the working folder first on its path
            Path(tmp, "sitecustomize.py").write_text(_NO_EDITABLE)
            env["PYTHONPATH"] = os.pathsep.join([tmp, *filter(None, [env.get("PYTHONPATH")])])
        t0 = time.perf_counter()
        out = subprocess.run(
            cmd, capture_output=True, text=True, check=True, env=env, cwd=tmp if src else None
        ).stdout
        wall = time.perf_counter() - t0
    stages = {m.group(1): float(m.group(2)) for m in map(_LINE.match, out.splitlines()) if m}
    built = re.search(r"built \d+ memories.*?([0-9.]+) s$", out, re.M)
    return {**stages, "build": float(built.group(1)) if built else float("nan"), "wall": wall}


_ENCODER_KERNELS = {"rowwise_linear", "pack_linear_weight"}  # ``_C`` calls inside ``encode``


def native_share(data: Path, embedder: str) -> dict[str, float]:
    """One in-process build under cProfile: seconds in ``xmemory_gpu._C`` kernels, in the encoder, in all."""
    from xmemory_gpu.construct.pipeline import build_store
    from xmemory_gpu.embed import load_embedder

    emb = load_embedder(embedder)
    with tempfile.TemporaryDirectory() as tmp:
        prof = cProfile.Profile()
        prof.enable()
        build_store(data, f"{tmp}/store", embedder=emb, progress=False)
        prof.disable()
    stats = pstats.Stats(prof).stats
    total = max(v[3] for v in stats.values())
    kernels = {
        name: v[2] for (_, _, name), v in stats.items() if name.startswith("<built-in method xmemory_gpu._C.")
    }  # methods too
    # the encoder's own kernels (hashed features, dense layers) run inside ``encode``: not non-encoder time
    in_encoder = sum(
        t for name, t in kernels.items() if name.rsplit(".", 1)[-1].rstrip(">") in _ENCODER_KERNELS
    )
    native = sum(kernels.values()) - in_encoder
    encode = sum(v[3] for (path, _, name), v in stats.items() if name == "encode" and "/embed/" in path)
    return {
        "total_s": total,
        "encoder_s": encode,
        "encoder_native_s": in_encoder,
        "native_s": native,
        "native_share_of_non_encoder": native / max(total - encode, 1e-9),
    }


def native_share_timed(data: Path, embedder: str) -> dict[str, float]:
    """One in-process build at full speed (no profiler: cProfile's per-call cost inflates the Python
    side): every ``xmemory_gpu._C`` function and the embedder's ``encode`` wrapped in a clock;
    seconds in ``_C`` outside ``encode``, in ``encode``, in all, on the build's own thread (a store's
    background writer runs its ``_C`` call beside the build: not the build's time)."""
    from xmemory_gpu import _C
    from xmemory_gpu.construct.pipeline import build_store
    from xmemory_gpu.embed import load_embedder
    from xmemory_gpu.ops import rows
    from xmemory_gpu.ops.knn import graph

    clock = {"native": 0.0, "encode": 0.0, "in_encode": 0}
    build_thread = threading.get_ident()

    def timed_native(fn):
        def call(*args, **kw):
            t0 = time.perf_counter()
            try:
                return fn(*args, **kw)
            finally:
                if not clock["in_encode"] and threading.get_ident() == build_thread:
                    clock["native"] += time.perf_counter() - t0

        return call

    def timed_encode(fn):
        def call(*args, **kw):
            t0 = time.perf_counter()
            clock["in_encode"] += 1
            try:
                return fn(*args, **kw)
            finally:
                clock["in_encode"] -= 1
                clock["encode"] += time.perf_counter() - t0

        return call

    originals = {n: f for n in dir(_C) if type(f := getattr(_C, n)).__name__ == "builtin_function_or_method"}
    # cached lookups of _C's functions (an older tree, measured with this function, may have them)
    cached = [
        f.cache_clear
        for f in (
            getattr(graph, "_native", None),
            getattr(rows, "compiled", None),
            getattr(rows, "_native_add_rows", None),
        )
        if f is not None
    ]
    emb = load_embedder(embedder)
    emb.encode = timed_encode(emb.encode)
    try:
        for n, f in originals.items():
            setattr(_C, n, timed_native(f))
        for clear in cached:  # cached lookups of _C's functions: looked up again, wrapped
            clear()
        with tempfile.TemporaryDirectory() as tmp:
            t0 = time.perf_counter()
            build_store(data, f"{tmp}/store", embedder=emb, progress=False)
            total = time.perf_counter() - t0
    finally:
        for n, f in originals.items():
            setattr(_C, n, f)
        for clear in cached:
            clear()
    return {
        "total_s": total,
        "encoder_s": clock["encode"],
        "native_s": clock["native"],
        "native_share_of_non_encoder": clock["native"] / max(total - clock["encode"], 1e-9),
    }


def _table(rows: dict[str, list[dict[str, float]]]) -> str:
    stages = list(dict.fromkeys(k for runs in rows.values() for r in runs for k in r))
    head = "| stage | " + " | ".join(f"{name} min | {name} median" for name in rows) + " |"
    lines = [head, "|---" * (1 + 2 * len(rows)) + "|"]
    for s in stages:
        cells = []
        for runs in rows.values():
            v = [r[s] for r in runs if s in r]
            cells += [f"{min(v):.2f}", f"{statistics.median(v):.2f}"] if v else ["", ""]
        lines.append(f"| {s} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--data", type=Path, help="a LoCoMo-format JSON file or folder")
    src.add_argument(
        "--synthetic", type=int, metavar="N", help="N synthetic conversations (datasets.synthetic)"
    )
    ap.add_argument("--seed", type=int, default=0, help="seed of the synthetic conversations")
    ap.add_argument("--embedder", default="hashing:384")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument(
        "--before",
        default="",
        help="a copy of another tree's xmemory_gpu package: its runs alternate with these",
    )
    ap.add_argument(
        "--profile", action="store_true", help="also measure the share of non-encoder time in xmemory_gpu._C"
    )
    ap.add_argument(
        "--workers",
        type=int,
        default=[],
        action="append",
        help="also time `xmemory build --workers N` (repeatable; its rows alternate with the others)",
    )
    ap.add_argument("--out", default=None, help="also write the runs here (JSON)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        data = args.data
        if data is None:
            from xmemory_gpu.datasets.synthetic import generate_conversations, write_json

            data = write_json(
                generate_conversations(args.synthetic, seed=args.seed), Path(tmp) / "synthetic.json"
            )
        trees = {"after": ("", 1)} if not args.before else {"before": (args.before, 1), "after": ("", 1)}
        trees |= {f"before workers {n}": (args.before, n) for n in args.workers if args.before}
        trees |= {f"workers {n}": ("", n) for n in args.workers}
        rows: dict[str, list[dict[str, float]]] = {name: [] for name in trees}
        for _ in range(args.runs):
            for name, (path, workers) in trees.items():
                rows[name].append(build_once(data, args.embedder, path, workers))
        print(_table(rows))
        print(json.dumps(rows))
        figures: dict = {"embedder": args.embedder, "unit": "s", "runs": rows}
        figures["min_median"] = {
            tree: {
                s: [min(v), statistics.median(v)] for s in runs[0] if (v := [r[s] for r in runs if s in r])
            }
            for tree, runs in rows.items()
        }
        if args.profile:
            figures["native_share"] = {
                "cprofile": native_share(data, args.embedder),
                "timed": native_share_timed(data, args.embedder),
            }
            print(json.dumps(figures["native_share"]))
        if args.out:
            write_record(args.out, figures)


if __name__ == "__main__":
    main()
