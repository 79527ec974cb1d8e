"""Where a bulk build's main thread spends its time, by library, from a sampling profiler (no
per-call cost, unlike cProfile): one in-process ``build_store`` run under ``py-spy record --native``
(py-spy is not a dependency: ``pip install py-spy``), each sample of the thread that runs the build
attributed to its innermost frame that is Python code or a library other than the C runtime and the
interpreter (so a regular expression or a ``str`` method counts as Python, a NumPy ufunc as NumPy,
``xmemory_gpu._C`` as ours). Prints the shares, the same outside the embedder's ``encode`` (the
non-encoder time), and the top Python functions.

    python benchmarks/native_samples.py --synthetic 1000 --seed 11 --embedder hashing:384
    python benchmarks/native_samples.py --raw samples.txt     # a py-spy ``-f raw`` file already recorded
"""

from __future__ import annotations

import argparse
import collections
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

_GENERIC = (
    "libc",
    "libpython",
    "libstdc++",
    "libm",
    "ld-linux",
    "libgcc",
    "?",
)  # runtime, not a library's work
_FRAME = re.compile(r"\(([^()]*)\)$")
_RUN = (
    "import sys, tempfile\n"
    "from xmemory_gpu.construct.pipeline import build_store\n"
    "from xmemory_gpu.embed import load_embedder\n"
    "with tempfile.TemporaryDirectory() as tmp:\n"
    "    build_store(sys.argv[1], tmp + '/store', embedder=load_embedder(sys.argv[2]), progress=False)\n"
)


def attribute(
    raw: Path, marker: str = "build_store"
) -> tuple[int, collections.Counter, collections.Counter, collections.Counter]:
    """(samples of the stacks holding ``marker``, samples per library or "python", samples per Python
    leaf function, the same per library for the samples outside the embedder's ``encode``) from a
    py-spy raw file (``frame;frame;... count`` lines, innermost last)."""
    kinds: collections.Counter = collections.Counter()
    funcs: collections.Counter = collections.Counter()
    outside: collections.Counter = collections.Counter()
    total = 0
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if marker not in stack:
            continue
        n = int(count)
        total += n
        in_encoder = any(
            f.split(" (")[0].rsplit(".", 1)[-1] == "encode" and "/embed/" in f for f in stack.split(";")
        )
        kind = "runtime"
        for frame in reversed(stack.split(";")):
            m = _FRAME.search(frame)
            where = m.group(1) if m else "?"
            if ".py:" in where or where.startswith("<"):
                kind = "python"
                funcs[f"{frame.split(' (')[0]} ({where.split(':')[0]})"] += n
                break
            if ".c:" in where:  # a CPython extension module's C (json, hashlib, sqlite3's cursor ...)
                kind = "cpython " + where.split(":")[0]
                break
            lib = where.rsplit("/", 1)[-1].split(".")[0]
            if not lib.startswith(_GENERIC):
                kind = lib
                break
        kinds[kind] += n
        if not in_encoder:
            outside[kind] += n
    return total, kinds, funcs, outside


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--data", type=Path, help="a LoCoMo-format JSON file or folder")
    src.add_argument(
        "--synthetic", type=int, metavar="N", help="N synthetic conversations (datasets.synthetic)"
    )
    src.add_argument("--raw", type=Path, help="a py-spy raw file already recorded")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--embedder", default="hashing:384")
    ap.add_argument("--rate", type=int, default=100, help="samples per second")
    ap.add_argument("--top", type=int, default=15, help="Python functions listed")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        raw = args.raw
        if raw is None:
            if shutil.which("py-spy") is None:
                sys.exit("native_samples.py: py-spy is not installed (pip install py-spy)")
            data = args.data
            if data is None:
                from xmemory_gpu.datasets.synthetic import generate_conversations, write_json

                data = write_json(
                    generate_conversations(args.synthetic, seed=args.seed), Path(tmp) / "synthetic.json"
                )
            raw = Path(tmp) / "samples.txt"
            subprocess.run(
                [
                    "py-spy",
                    "record",
                    "-r",
                    str(args.rate),
                    "--native",
                    "-f",
                    "raw",
                    "-o",
                    str(raw),
                    "--",
                    sys.executable,
                    "-c",
                    _RUN,
                    str(data),
                    args.embedder,
                ],
                check=True,
                capture_output=True,
            )
        total, kinds, funcs, outside = attribute(raw)
    print(f"{total} samples of the build's thread")
    for kind, n in kinds.most_common():
        print(f"{n / total:7.1%}  {kind}")
    rest = max(sum(outside.values()), 1)
    compiled = rest - outside["python"] - outside["runtime"]
    print(
        f"outside the encoder ({rest} samples): Python {outside['python'] / rest:.1%}, compiled code {compiled / rest:.1%} "
        f"(xmemory_gpu._C {outside['_C'] / rest:.1%}, NumPy {outside['_multiarray_umath'] / rest:.1%}, "
        f"SQLite {outside['libsqlite3'] / rest:.1%}), the interpreter's runtime {outside['runtime'] / rest:.1%}"
    )
    print("Python functions (innermost):")
    for name, n in funcs.most_common(args.top):
        print(f"{n / total:7.1%}  {name}")


if __name__ == "__main__":
    main()
