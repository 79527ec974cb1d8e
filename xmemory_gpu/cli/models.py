"""``xmemory models fetch``: download the embedded default reader (SmolLM2-135M-Instruct GGUF)."""

from __future__ import annotations

import argparse
from pathlib import Path


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("models", help="fetch or locate the default reader LLM")
    p.add_argument("action", choices=["fetch", "where"])
    p.add_argument("--dir", default=None, help="target folder (default: $XMEMORY_CACHE/smollm2)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..llm.models import SMOLLM2_GGUF, fetch_smollm2, smollm2_dir

    d = Path(args.dir) if args.dir else smollm2_dir()
    if args.action == "fetch":
        d = fetch_smollm2(d)
    print(f"{d / SMOLLM2_GGUF} ({'present' if (d / SMOLLM2_GGUF).exists() else 'missing'})")
    return 0
