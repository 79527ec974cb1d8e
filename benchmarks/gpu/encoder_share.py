"""How much of a bulk build is the encoder: ``xmemory build`` run in this process with every encoder call
timed (the embedder's ``encode`` returns host arrays, so its clock includes the device's work and the
copy back). Prints and writes JSON: the build's stages (s), the build's seconds, the encoder's seconds
and texts, and ``non_encoder_s`` (the build less the encoder), the part a faster encoder cannot shrink.

    python benchmarks/gpu/encoder_share.py CHAT.json --backend cuda --out F [--embedder SPEC]
    # a long chat: xmemory synth --long --conversations 1 --target-tokens 10000000 --seed 3 --out CHAT.json
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: _record

from _record import write_record  # noqa: E402


def timed_build(data: Path, backend: str, embedder: str, store: Path) -> dict[str, Any]:
    """Build ``data`` into ``store`` with the encoder's calls clocked; the figures."""
    from xmemory_gpu.cli import main
    from xmemory_gpu.embed.hashing import HashingEmbedder
    from xmemory_gpu.embed.sentence_transformers import SentenceTransformerEmbedder

    clock = {"s": 0.0, "calls": 0, "texts": 0}

    def wrap(cls: type) -> Any:
        inner = cls.encode

        def encode(self, texts):
            t0 = time.perf_counter()
            try:
                return inner(self, texts)
            finally:
                clock["s"] += time.perf_counter() - t0
                clock["calls"] += 1
                clock["texts"] += len(texts)

        cls.encode = encode
        return inner

    saved = {cls: wrap(cls) for cls in (SentenceTransformerEmbedder, HashingEmbedder)}
    args = ["build", str(data), "--out", str(store), "--backend", backend, "--embedder", embedder]
    buf = io.StringIO()
    try:
        with contextlib.redirect_stdout(buf):
            rc = main([*args, "--no-progress", "--json"])
    finally:
        for cls, inner in saved.items():
            cls.encode = inner
    if rc != 0:
        raise RuntimeError(f"xmemory build exited {rc}")
    report = json.loads(buf.getvalue())
    build_s = float(report["wall_s"])
    return {
        "backend": backend,
        "embedder": embedder,
        "stages_s": report["timings"],
        "build_s": build_s,
        "encoder_s": clock["s"],
        "encoder_calls": clock["calls"],
        "encoder_texts": clock["texts"],
        "non_encoder_s": build_s - clock["s"],
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("data", type=Path, help="a LoCoMo-format JSON file (e.g. from xmemory synth --long)")
    ap.add_argument("--backend", default="auto")
    ap.add_argument("--embedder", default="all-MiniLM-L6-v2")
    ap.add_argument("--out", default=None, help="also write the figures here (JSON)")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        res = timed_build(args.data, args.backend, args.embedder, Path(tmp) / "store")
    print(json.dumps(res, indent=1))
    if args.out:
        write_record(args.out, {"data": args.data.name, **res})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
