"""What every benchmark's data file carries: the CPU it ran on, the command that made it, and its
figures, written atomically as indented JSON (the files under ``benchmarks/results/`` that RESULTS
links beside its figures)."""

from __future__ import annotations

import json
import os
import platform
import shlex
import sys
from pathlib import Path
from typing import Any


def cpu_name() -> str:
    """The CPU's model name as the kernel reports it (``/proc/cpuinfo``), else the platform's."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def command_line(argv: list[str] | None = None) -> str:
    """``python benchmarks/NAME.py ARGS`` as the process was started (paths as given)."""
    argv = sys.argv if argv is None else argv
    script = Path(argv[0])
    name = f"benchmarks/{script.name}" if script.parent.name == "benchmarks" else str(script)
    return shlex.join(["python", name, *argv[1:]])


def write_record(path: str | os.PathLike, figures: dict[str, Any], argv: list[str] | None = None) -> Path:
    """Write ``{"command", "cpu", "logical_cpus", **figures}`` to ``path`` (a temporary file renamed
    into place); return the path."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    record = {"command": command_line(argv), "cpu": cpu_name(), "logical_cpus": os.cpu_count(), **figures}
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text(json.dumps(record, indent=1) + "\n")
    os.replace(tmp, out)
    return out
