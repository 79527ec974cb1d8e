"""``xmemory synth``: write seeded synthetic conversations in LoCoMo's format (``--long``: long user-assistant chats)."""

from __future__ import annotations

import argparse


def add_parser(sub: argparse._SubParsersAction) -> None:
    from .args import integer

    p = sub.add_parser("synth", help="generate synthetic LoCoMo-format conversations with QA")
    p.add_argument("--conversations", type=integer(1), default=20)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", required=True, help="output JSON file")
    p.add_argument(
        "--long",
        action="store_true",
        help="long user-assistant chats (assistant answers of several thousand characters) instead of persona chats",
    )
    p.add_argument(
        "--target-tokens",
        type=integer(1000),
        default=150_000,
        help="with --long: word pieces per conversation",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from ..datasets.synthetic import generate_conversations, generate_long_chats, write_json

    if Path(args.out).is_dir():
        raise ValueError(f"--out {args.out}: is a folder; expected a file name")
    if args.long:
        convs = generate_long_chats(args.conversations, seed=args.seed, target_tokens=args.target_tokens)
    else:
        convs = generate_conversations(args.conversations, seed=args.seed)
    path = write_json(convs, args.out)
    print(f"wrote {args.conversations} conversations to {path}")
    return 0
