"""A process that exits while daemon threads use an engine, or call the compiled kernels, ends with
its own exit status: no thread takes the GIL back into a C++ frame that may not throw during the
interpreter's finalisation (``engine/exits.py``, ``csrc/include/xmemory/gil.h``)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from xmemory_gpu.engine.exits import ExitGate

ROOT = Path(__file__).resolve().parents[1]
RUNS = 5

ENGINE = """
import sys, threading, time
from xmemory_gpu import MemoryEngine

e = MemoryEngine.open(sys.argv[1], embedder="hashing:384")
e.add([{"role": "user", "content": "I live in Oslo."}], user_id="alice")

def search():
    while True:
        e.search("Where do I live?", user_id="alice")

def add():
    n = 0
    while True:
        e.add([{"role": "user", "content": f"I moved {n} times."}], user_id="bob")
        n += 1

for fn in {threads}:
    threading.Thread(target=fn, daemon=True).start()
time.sleep(1)
sys.exit(0)
"""

NATIVE = """
import sys, threading, time
from xmemory_gpu import _C

def call():
    {call}

def loop():
    while True:
        call()

for _ in range(3):
    threading.Thread(target=loop, daemon=True).start()
time.sleep(0.3)
sys.exit(0)
"""


def _run(tmp_path: Path, script: str, runs: int) -> None:
    path = tmp_path / "exit_script.py"
    path.write_text(textwrap.dedent(script))
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    for n in range(runs):
        proc = subprocess.run(
            [sys.executable, str(path), str(tmp_path / f"store{n}")],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert "terminate called" not in proc.stderr, proc.stderr[-2000:]
        assert proc.returncode == 0, f"run {n}: exit status {proc.returncode}\n{proc.stderr[-2000:]}"


@pytest.mark.parametrize("threads", ["(search, search)", "(search, search, add)"])
def test_exiting_while_daemon_threads_use_an_engine(tmp_path, threads):
    _run(tmp_path, ENGINE.replace("{threads}", threads), RUNS)


@pytest.mark.parametrize(
    "call",
    [
        "_C.fma_peak_gflops(0.002)",  # knn.cpp
        "_C.write_durable([sys.argv[1] + '.tmp'], [sys.argv[1]], [b'x' * 4096], 2)",  # files.cpp: its own threads too
    ],
    ids=["knn", "files"],
)
def test_exiting_while_daemon_threads_are_in_compiled_kernels(tmp_path, call):
    _run(tmp_path, NATIVE.replace("{call}", call), RUNS)


def test_no_binding_releases_the_gil_but_through_the_exit_safe_guard():
    guard = ROOT / "csrc" / "include" / "xmemory" / "gil.h"
    uses = [
        f"{p.relative_to(ROOT)}:{n}"
        for p in sorted((ROOT / "csrc").rglob("*"))
        if p.is_file() and p != guard
        for n, line in enumerate(p.read_text(errors="replace").splitlines(), 1)
        if re.search(r"\bgil_scoped_release\b", line)
    ]
    assert not uses, f"py::gil_scoped_release aborts a daemon thread at exit; use xmem::GilRelease: {uses}"


def test_the_gate_waits_for_calls_in_flight_and_holds_new_ones():
    gate = ExitGate()
    inside, leave, ran = threading.Event(), threading.Event(), threading.Event()

    def in_flight() -> None:
        with gate.call():
            inside.set()
            leave.wait()
            with gate.call():  # a call within a call in flight goes on after the close
                pass

    def late() -> None:
        with gate.call():
            ran.set()

    t = threading.Thread(target=in_flight, daemon=True)
    t.start()
    inside.wait()
    assert not gate.close(timeout=0.01)  # the call in flight is not done
    leave.set()
    assert gate.close(timeout=60)
    t.join()
    held = threading.Thread(target=late, daemon=True)
    held.start()
    held.join(0.2)
    assert held.is_alive() and not ran.is_set()
    with gate.call():  # a thread that is not a daemon (the main thread, at exit) is never held
        pass
