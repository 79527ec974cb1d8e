"""A bulk-build worker process (``python -m xmemory_gpu.construct.build_worker``), started by
:class:`~.worker_pool.WorkerPool`: the wire is described there."""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path
from typing import IO

from ..config import XMemoryConfig
from ..embed import embedder_for_store, load_embedder
from ..memory.records import conversation_from_wire
from .pipeline import build_encoded
from .progress import Timings
from .worker_pool import PARENT_VAR


def _serve(inp: IO[bytes], wire: IO[bytes]) -> None:
    """A worker's loop: settings, then shard after shard until its input ends."""
    s = json.loads(inp.readline() or b"null")
    if not isinstance(s, dict):
        raise ValueError("no settings line on stdin (this module is started by build_store(workers=N))")
    here = str(Path(__file__).resolve().parents[1])
    if s.get("package", here) != here:
        raise ValueError(
            f"the worker imported xmemory_gpu from {here}, not the builder's {s['package']} "
            "(another install first on the path)"
        )
    if "spec" in s:  # the builder loads no embedder: the workers do, and say what they loaded
        emb = load_embedder(s["spec"], device=s["device"], num_threads=s.get("threads"))
    else:  # the builder's embedder, by the name a store records
        emb = embedder_for_store(s["name"], device=s["device"], num_threads=s.get("threads"))
        if (emb.name, emb.dim) != (s["name"], s["dim"]):
            raise ValueError(
                f"embedder {s['name']!r} loads as {emb.name!r} ({emb.dim}) in a worker, not with dim {s['dim']}"
            )
    wire.write(json.dumps({"ready": {"name": emb.name, "dim": emb.dim}}).encode() + b"\n")
    wire.flush()
    cfg = XMemoryConfig.from_dict(s["config"])
    for task_line in inp:
        task = json.loads(task_line)
        tm = Timings()
        with tm.stage("receive"):
            convs = [conversation_from_wire(d) for d in task["conversations"]]
        encoded = build_encoded(
            convs,
            emb,
            cfg,
            dim=emb.dim,
            timings=tm,
            backend=s["backend"],
            progress=lambda k: _progress(wire, k),
        )
        head = {
            "shard": task["shard"],
            "timings": dict(tm.seconds),
            "memories": [
                {
                    "id": e.memory_id,
                    "sha256": e.sha256,
                    "dim": e.dim,
                    "size": len(e.data),
                    "stats": e.stats,
                    "counts": e.counts,
                    "message_ids": e.message_ids,
                }
                for e in encoded
            ],
        }
        wire.write(json.dumps(head).encode() + b"\n")
        for e in encoded:
            wire.write(e.data)
        wire.flush()


def _progress(wire: IO[bytes], k: float) -> None:
    """One ``{"progress": k}`` line: ``k`` conversations' worth of the shard's work done."""
    wire.write(b'{"progress": %.6g}\n' % k)
    wire.flush()


def _die_with_parent() -> None:
    """Ask Linux to kill this worker when the builder dies (``PR_SET_PDEATHSIG``), and stop at once
    if it already has; elsewhere a worker stops when its input ends."""
    parent = os.environ.get(PARENT_VAR)
    if not sys.platform.startswith("linux") or not parent:
        return
    import ctypes

    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    if os.getppid() != int(parent):
        os._exit(1)


def main() -> int:
    """A worker process: serves its stdin; a failure is one ``{"error": ...}`` line and exit code 1."""
    _die_with_parent()
    wire = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # a stray print must not break the wire: it goes to stderr
    try:
        _serve(sys.stdin.buffer, wire)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 1
    except Exception as exc:  # noqa: BLE001 - reported on the wire, one line
        try:
            wire.write(json.dumps({"error": f"{type(exc).__name__}: {exc}"}).encode() + b"\n")
            wire.flush()
        except OSError:
            pass
        return 1
    finally:
        try:
            wire.close()
        except OSError:  # the builder is gone: nothing to tell it
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
