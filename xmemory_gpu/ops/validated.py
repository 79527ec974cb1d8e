"""The validated-backends table: which GPU path of each op has passed its tests on a real GPU.

``validated.json`` beside this file holds one entry per (op, backend) that a GPU run of
``benchmarks/gpu/run.sh`` validated: the device, date and commit of that run, whether every test of
that path passed, and its median time on the run's benchmark. ``backend="auto"`` on CUDA tensors
prefers the validated path of an op (the fastest one when both GPU paths are validated), otherwise
Triton (``backends.gpu_preference``). ``xmemory backends`` prints the table.

Fill it from a GPU run's JSON with ``python -m xmemory_gpu.ops.validated --merge results.json``.
"""

from __future__ import annotations

import argparse
import functools
import json
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

TABLE = Path(__file__).with_name("validated.json")
OPS = (
    "knn_graph",
    "knn_search",
    "partition_objective",
    "score_candidates",
    "coverage_select",
    "token_entropy_logprob",
)
GPU = ("triton", "cuda")
NOT_IMPLEMENTED = {("token_entropy_logprob", "cuda")}  # entropy's GPU path is Triton only


@dataclass(frozen=True)
class Validated:
    """One GPU path validated on one GPU run."""

    op: str
    backend: str  # "triton" or "cuda"
    device: str  # e.g. "NVIDIA H100 80GB HBM3"
    date: str  # ISO date of the run
    commit: str  # git commit the run tested
    tests_passed: bool
    median_ms: float | None = None  # on the run's benchmark size (for choosing between two paths)
    note: str = ""

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Validated:
        names = {f.name for f in fields(cls)}
        missing = {"op", "backend", "device", "date", "commit", "tests_passed"} - set(d)
        if missing:
            raise ValueError(f"validated entry {d!r}: missing {sorted(missing)}")
        if d["op"] not in OPS or d["backend"] not in GPU:
            raise ValueError(f"validated entry: unknown op/backend {d['op']!r}/{d['backend']!r}")
        return cls(**{k: v for k, v in d.items() if k in names})


def load(path: Path | str = TABLE) -> list[Validated]:
    """Entries of a validated-backends JSON (``{"entries": [...]}``); a missing file is empty."""
    p = Path(path)
    if not p.exists():
        return []
    data = json.loads(p.read_text())
    return [Validated.from_dict(e) for e in data.get("entries", [])]


@functools.lru_cache(maxsize=1)
def table() -> tuple[Validated, ...]:
    """The package's table (cached)."""
    return tuple(load())


def validated_backend(op: str, entries: tuple[Validated, ...] | None = None) -> Validated | None:
    """The GPU path of ``op`` that ``auto`` should prefer: validated (every test passed), fastest
    first; ``None`` when no GPU path of ``op`` has been validated."""
    ok = [e for e in (table() if entries is None else entries) if e.op == op and e.tests_passed]
    if not ok:
        return None
    return min(ok, key=lambda e: (e.median_ms is None, e.median_ms or 0.0))


def merge(run_json: Path | str, path: Path | str = TABLE) -> list[Validated]:
    """Fold a GPU run's ``validated`` entries (benchmarks/gpu/run.sh writes them) into the table:
    an entry replaces the one of the same (op, backend). Returns the new table."""
    run = json.loads(Path(run_json).read_text())
    if run.get("dry_run"):
        raise ValueError(f"{run_json}: a --dry-run result validates nothing")
    new = [Validated.from_dict(e) for e in run.get("validated", [])]
    keep = {(e.op, e.backend): e for e in load(path)}
    for e in new:
        keep[(e.op, e.backend)] = e
    entries = sorted(keep.values(), key=lambda e: (OPS.index(e.op), e.backend))
    p = Path(path)
    data = json.loads(p.read_text()) if p.exists() else {"schema": 1}
    data["entries"] = [asdict(e) for e in entries]
    p.write_text(json.dumps(data, indent=2) + "\n")
    table.cache_clear()
    return entries


def rows() -> list[dict[str, Any]]:
    """One row per op and GPU backend: validated entry fields, or ``validated: False``."""
    out = []
    by = {(e.op, e.backend): e for e in table()}
    for op in OPS:
        for b in GPU:
            if (op, b) in NOT_IMPLEMENTED:
                continue
            e = by.get((op, b))
            out.append(
                {
                    "op": op,
                    "backend": b,
                    "validated": bool(e and e.tests_passed),
                    **({k: v for k, v in asdict(e).items() if k not in ("op", "backend")} if e else {}),
                }
            )
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m xmemory_gpu.ops.validated", description=__doc__.splitlines()[0]
    )
    ap.add_argument("--merge", metavar="RUN_JSON", help="fold a GPU run's results into validated.json")
    args = ap.parse_args(argv)
    if args.merge:
        for e in merge(args.merge):
            print(f"{e.op:22s} {e.backend:7s} {e.device} {e.date} {e.commit[:10]} passed={e.tests_passed}")
    else:
        print(json.dumps(rows(), indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
