"""``xmemory synth``: write seeded synthetic conversations in LoCoMo's format."""

from __future__ import annotations

import argparse


def add_parser(sub: argparse._SubParsersAction) -> None:
    from .args import integer

    p = sub.add_parser("synth", help="generate synthetic LoCoMo-format conversations with QA")
    p.add_argument("--conversations", type=integer(1), default=20)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", required=True, help="output JSON file")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from ..datasets.synthetic import generate_conversations, write_json

    if Path(args.out).is_dir():
        raise ValueError(f"--out {args.out}: is a folder; expected a file name")
    path = write_json(generate_conversations(args.conversations, seed=args.seed), args.out)
    print(f"wrote {args.conversations} conversations to {path}")
    return 0
