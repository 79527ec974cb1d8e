"""``xmemory backends``: which kernel backends are usable here and why (not)."""

from __future__ import annotations

import argparse
import json


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("backends", help="list kernel backends and whether they are usable here")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..ops import available_backends

    status = available_backends()
    if args.json:
        print(json.dumps({k: {"available": v.available, "reason": v.reason} for k, v in status.items()}, indent=2))
    else:
        for name, st in status.items():
            print(f"{name:10s} {'yes' if st.available else 'no ':3s}  {st.reason}")
    return 0
