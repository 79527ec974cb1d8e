"""``xmemory backends``: which kernel backends are usable here and why (not), and which GPU paths
have been validated on a real GPU (the table ``backend="auto"`` prefers on CUDA tensors)."""

from __future__ import annotations

import argparse
import json


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "backends", help="list kernel backends, whether they are usable here, and the GPU-validated table"
    )
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..ops import available_backends
    from ..ops.backends import gpu_preference
    from ..ops.validated import OPS, rows

    status = available_backends()
    table = rows()
    auto = {op: list(gpu_preference(op)) for op in OPS}
    if args.json:
        print(
            json.dumps(
                {
                    "backends": {
                        k: {"available": v.available, "reason": v.reason} for k, v in status.items()
                    },
                    "validated": table,
                    "auto_gpu_order": auto,
                },
                indent=2,
            )
        )
        return 0
    for name, st in status.items():
        print(f"{name:10s} {'yes' if st.available else 'no ':3s}  {st.reason}")
    print("\nGPU paths validated on a GPU (benchmarks/gpu/run.sh; auto on CUDA tensors tries them first):")
    print(f"{'op':22s} {'backend':8s} {'validated':10s} device / date / commit")
    for r in table:
        where = f"{r['device']} / {r['date']} / {r['commit'][:10]}" if r["validated"] else "-"
        print(f"{r['op']:22s} {r['backend']:8s} {'yes' if r['validated'] else 'no':10s} {where}")
    print("\nauto on CUDA tensors: " + "; ".join(f"{op} -> {' > '.join(o)}" for op, o in auto.items()))
    return 0
