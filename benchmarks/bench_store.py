"""Storage figures before and after a store refactor, all in one process:

* ``build``: wall seconds of ``build_store`` over a LoCoMo file or folder (``--data``) with the ``hashing:384`` embedder into a fresh temporary folder, and
  the build report's own stage timings;
* ``open``: that store's bytes on disk (every file under its folder), and the milliseconds of
  ``Store.open(path).load_bank()`` (the close after it is timed apart), min and median of 5;
* ``delete``: a fresh engine store (``hashing:384``) holding 300 memories (one per user_id, 6 short
  deterministic chat messages each, added with ``add_batch`` in chunks), then the milliseconds of
  ``engine.delete(message_id, user_id=...)`` of one message in each of 7 memories, min and median.

``--tree DIR`` measures another checkout instead (a folder holding an ``xmemory_gpu/`` package tree,
e.g. ``git archive <commit> xmemory_gpu | tar -x -C DIR``): a child Python runs this script with the
editable install's finder removed and DIR first on ``sys.path``; the venv's compiled ``_C`` (and
``_cuda``) modules are linked into DIR's package when it has none.

    python benchmarks/bench_store.py --data locomo_dev.json --out after.json
    python benchmarks/bench_store.py --data locomo_dev.json --tree OLD_PACKAGE --out before.json
    python benchmarks/bench_store.py --data locomo_dev.json --only open,delete
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path
from typing import Any

from _record import cpu_name

ROOT = Path(__file__).resolve().parents[1]
EMBEDDER = "hashing:384"
PARTS = ("build", "open", "delete")
# the child of --tree: the editable install's finder removed, the other tree first on sys.path
_RUN = (
    "import runpy, sys; src = sys.argv.pop(1)\n"
    "sys.meta_path[:] = [f for f in sys.meta_path if 'editable' not in repr(f).lower()]\n"
    "sys.path.insert(0, src)\n"
    "sys.argv = sys.argv[1:]\n"
    "runpy.run_path(sys.argv[0], run_name='__main__')\n"
)


def _ms(seconds: list[float]) -> dict[str, Any]:
    ms = [s * 1000 for s in seconds]
    return {
        "min_ms": round(min(ms), 3),
        "median_ms": round(statistics.median(ms), 3),
        "runs_ms": [round(v, 3) for v in ms],
    }


def disk_bytes(folder: Path) -> tuple[int, int]:
    """(bytes, files) of every regular file under ``folder``."""
    files = [p for p in folder.rglob("*") if p.is_file() and not p.is_symlink()]
    return sum(p.stat().st_size for p in files), len(files)


def bench_build(data: Path, store: Path) -> dict[str, Any]:
    """One ``build_store`` of ``data`` into ``store`` (a fresh folder)."""
    from xmemory_gpu.construct.pipeline import build_store
    from xmemory_gpu.embed import load_embedder

    emb = load_embedder(EMBEDDER)
    t0 = time.perf_counter()
    report = build_store(data, store, embedder=emb, progress=False)
    wall = time.perf_counter() - t0
    out: dict[str, Any] = {"wall_s": round(wall, 4), "memories": len(getattr(report, "built", []) or [])}
    if getattr(report, "wall_s", None) is not None:
        out["report_wall_s"] = round(float(report.wall_s), 4)
    if getattr(report, "timings", None):
        out["stages_s"] = {k: round(float(v), 4) for k, v in dict(report.timings).items()}
    return out


def bench_open(store: Path, repeat: int) -> dict[str, Any]:
    """Bytes on disk, then ``repeat`` rounds of ``Store.open(store).load_bank()`` and ``close()``."""
    from xmemory_gpu.memory.store import Store

    size, files = disk_bytes(store)
    opened, closed = [], []
    for _ in range(repeat):
        t0 = time.perf_counter()
        st = Store.open(store)
        st.load_bank()
        t1 = time.perf_counter()
        st.close()
        closed.append(time.perf_counter() - t1)
        opened.append(t1 - t0)
    return {"bytes": size, "files": files, "open_load_bank": _ms(opened), "close": _ms(closed)}


_NAMES = ["Alice", "Ben", "Chloe", "Dev", "Elena", "Farid", "Grace", "Hiro", "Ines", "Jonas", "Kemi", "Liam"]
_PLACES = [
    "Lisbon",
    "the lake",
    "Kyoto",
    "the farmers market",
    "Denver",
    "the library",
    "Oslo",
    "the gym",
    "Nairobi",
    "the beach",
]
_THINGS = [
    "a red bicycle",
    "a sourdough starter",
    "a used piano",
    "running shoes",
    "a tomato plant",
    "a film camera",
    "a chess set",
    "a kayak",
    "a sketchbook",
    "a sewing machine",
]
_HOBBIES = [
    "painting",
    "rock climbing",
    "baking bread",
    "learning Spanish",
    "birdwatching",
    "playing guitar",
    "pottery",
    "trail running",
    "gardening",
    "writing poems",
]


def chat(u: int) -> list[dict[str, str]]:
    """Six short deterministic chat messages for memory ``u`` (user and assistant in turn)."""
    r = random.Random(u)
    name, place, thing, hobby = r.choice(_NAMES), r.choice(_PLACES), r.choice(_THINGS), r.choice(_HOBBIES)
    friend, days = r.choice(_NAMES), r.randint(2, 9)
    return [
        {"role": "user", "content": f"Hi, I'm {name}. I moved to {place} {days} weeks ago."},
        {"role": "assistant", "content": f"Welcome, {name}! How are you settling in at {place}?"},
        {
            "role": "user",
            "content": f"Pretty well. Yesterday I bought {thing} and started {hobby} with my friend {friend}.",
        },
        {"role": "assistant", "content": f"That sounds fun. How often do you and {friend} meet for {hobby}?"},
        {
            "role": "user",
            "content": f"Every Saturday morning, and I'm allergic to cats, so we meet at {friend}'s flat.",
        },
        {"role": "assistant", "content": f"Noted: {hobby} on Saturdays with {friend}, and no cats for you."},
    ]


def bench_delete(folder: Path, memories: int, deletes: int, chunk: int) -> dict[str, Any]:
    """A fresh engine store of ``memories`` memories, then one message deleted in each of ``deletes`` of them."""
    from xmemory_gpu.engine import MemoryEngine

    users = [f"user-{u:04d}" for u in range(memories)]
    items = [{"messages": chat(u), "user_id": uid} for u, uid in enumerate(users)]
    eng = MemoryEngine.open(folder, embedder=EMBEDDER)
    try:
        t0 = time.perf_counter()
        ids: list[list[str]] = []
        if hasattr(eng, "add_batch"):
            for i in range(0, len(items), chunk):
                ids += eng.add_batch(items[i : i + chunk])
        else:
            ids = [eng.add(it["messages"], user_id=it["user_id"]) for it in items]
        add_s = time.perf_counter() - t0
        size_before, files_before = disk_bytes(folder)
        picks = sorted({round(k * (memories - 1) / max(deletes - 1, 1)) for k in range(deletes)})
        times = []
        for n, u in enumerate(picks):
            mids = (
                list(ids[u])
                if u < len(ids) and ids[u]
                else [x["id"] for x in eng.get_all(user_id=users[u]) if x.get("type") == "message"]
            )
            mid = mids[(2 + n) % len(mids)]  # a different turn of the chat each time
            t1 = time.perf_counter()
            eng.delete(mid, user_id=users[u])
            times.append(time.perf_counter() - t1)
            if any(x["id"] == mid for x in eng.get_all(user_id=users[u]) if x.get("type") == "message"):
                raise RuntimeError(f"delete: message {mid!r} of {users[u]} is still there")
    finally:
        eng.close()
    size_after, files_after = disk_bytes(folder)
    return {
        "memories": memories,
        "messages": sum(len(it["messages"]) for it in items),
        "add_s": round(add_s, 4),
        "add_chunk": chunk,
        "bytes_before": size_before,
        "files_before": files_before,
        "bytes_after": size_after,
        "files_after": files_after,
        "deleted": len(times),
        "delete": _ms(times),
    }


def table(res: dict[str, Any]) -> str:
    lines = [f"package: {res['package']}", f"cpu: {res['cpu']}"]
    if "build" in res:
        b = res["build"]
        stages = ", ".join(f"{k} {v:.2f}" for k, v in b.get("stages_s", {}).items())
        lines.append(
            f"build   {b['wall_s']:8.2f} s wall, {b['memories']} memories"
            + (f"  [stages s: {stages}]" if stages else "")
        )
    if "open" in res:
        o = res["open"]
        lines.append(
            f"open    {o['bytes']:,} bytes in {o['files']} files; open+load_bank min {o['open_load_bank']['min_ms']:.1f} ms, "
            f"median {o['open_load_bank']['median_ms']:.1f} ms (close median {o['close']['median_ms']:.2f} ms)"
        )
    if "delete" in res:
        d = res["delete"]
        lines.append(
            f"delete  {d['memories']} memories ({d['messages']} messages, add {d['add_s']:.2f} s, "
            f"{d['bytes_before']:,} bytes in {d['files_before']} files); delete min {d['delete']['min_ms']:.1f} ms, "
            f"median {d['delete']['median_ms']:.1f} ms over {d['deleted']}"
        )
    return "\n".join(lines)


def run_tree(tree: Path, args: argparse.Namespace) -> int:
    """Run this script in a child Python that imports ``xmemory_gpu`` from ``tree``."""
    pkg = tree / "xmemory_gpu"
    if not (pkg / "__init__.py").is_file():
        sys.exit(f"--tree {tree}: no xmemory_gpu/__init__.py there")
    site = Path(sysconfig.get_paths()["platlib"]) / "xmemory_gpu"
    for pattern in ("_C*.so", "_cuda*.so"):
        if not any(pkg.glob(pattern)):
            for so in site.glob(pattern):
                (pkg / so.name).symlink_to(so)
    argv = [
        str(Path(__file__).resolve()),
        "--data",
        str(args.data),
        "--only",
        ",".join(args.only),
        "--repeat",
        str(args.repeat),
        "--memories",
        str(args.memories),
        "--deletes",
        str(args.deletes),
        "--chunk",
        str(args.chunk),
        "--in-tree",
        str(tree),
    ]
    if args.out:
        argv += ["--out", str(args.out)]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run([sys.executable, "-c", _RUN, str(tree), *argv], env=env).returncode


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--data",
        type=Path,
        required=True,
        help="a LoCoMo-format JSON file or folder",
    )
    ap.add_argument(
        "--only",
        type=lambda s: [p.strip() for p in s.split(",") if p.strip()],
        default=list(PARTS),
        help="comma-separated parts among build,open,delete (default: all)",
    )
    ap.add_argument("--tree", type=Path, help="measure the xmemory_gpu package under this folder instead")
    ap.add_argument("--out", type=Path, help="write the result as JSON here")
    ap.add_argument("--repeat", type=int, default=5, help="rounds of open + load_bank")
    ap.add_argument("--memories", type=int, default=300, help="memories of the delete store")
    ap.add_argument("--deletes", type=int, default=7, help="messages deleted, each in another memory")
    ap.add_argument("--chunk", type=int, default=50, help="items per add_batch call")
    ap.add_argument("--in-tree", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args()
    bad = sorted(set(args.only) - set(PARTS))
    if bad or not args.only:
        ap.error(f"--only: expected some of {','.join(PARTS)}, got {','.join(bad) or 'nothing'}")
    args.data = args.data.resolve()
    if args.out:
        args.out = args.out.resolve()
    if args.tree is not None:
        return run_tree(args.tree.resolve(), args)

    import xmemory_gpu

    package = str(Path(xmemory_gpu.__file__).resolve().parent)
    if args.in_tree is not None and not package.startswith(str(args.in_tree)):
        sys.exit(f"--tree {args.in_tree}: xmemory_gpu was imported from {package}, not from the tree")
    res: dict[str, Any] = {
        "tree": str(args.in_tree or ROOT),
        "package": package,
        "cpu": cpu_name(),
        "python": platform.python_version(),
        "embedder": EMBEDDER,
        "data": str(args.data),
        "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
    with tempfile.TemporaryDirectory(prefix="bench_store_") as tmp:
        if "build" in args.only or "open" in args.only:
            store = Path(tmp) / "store"
            built = bench_build(args.data, store)
            if "build" in args.only:
                res["build"] = built
            if "open" in args.only:
                res["open"] = bench_open(store, args.repeat)
        if "delete" in args.only:
            res["delete"] = bench_delete(Path(tmp) / "engine", args.memories, args.deletes, args.chunk)
    print(table(res))
    if args.out:
        args.out.write_text(json.dumps(res, indent=2) + "\n")
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
