"""Start-up latency, each round in a fresh process (nothing cached in the interpreter):

- ``import``: ``import xmemory_gpu.engine``;
- ``open``: ``MemoryEngine.open`` of an existing store (one memory, the default embedder);
- ``open -> add``: open until the first ``add`` of one message returns;
- ``open -> search``: open until a ``search`` after that add returns;
- ``cli add``: ``xmemory add STORE FILE --user u`` of one message, the whole process;
- ``serve -> /health``: ``xmemory serve STORE`` started until ``GET /health`` answers 200 (127.0.0.1,
  a free port; polled every 50 ms for at most ``--limit`` seconds, then the server is stopped);
- ``mcp -> initialize``: ``xmemory mcp STORE`` over stdio until the MCP SDK's client has its
  ``initialize`` answer (only when the ``mcp`` package is installed).

Seconds, median and min over ``--rounds`` rounds, and the CPU's model name. The figures depend on
how busy the machine is: compare runs made on the same machine under the same load.

Run: ``python benchmarks/bench_startup.py [--rounds 3] [--embedder all-MiniLM-L6-v2] [--json OUT]``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

from _record import cpu_name

ROOT = Path(__file__).resolve().parents[1]
POLL_S = 0.05

ENGINE_CHILD = r"""
import json, sys, time
t0 = time.perf_counter()
import xmemory_gpu.engine
from xmemory_gpu.engine import MemoryEngine
t1 = time.perf_counter()
engine = MemoryEngine.open(sys.argv[1], embedder=sys.argv[2] or None)
t2 = time.perf_counter()
engine.add([{"role": "user", "content": "I moved to Lisbon in May and adopted a cat named Miso."}], user_id="u")
t3 = time.perf_counter()
engine.search("Where does the user live?", user_id="u")
t4 = time.perf_counter()
engine.close()
print(json.dumps({"import": t1 - t0, "open": t2 - t1, "open -> add": t3 - t1, "open -> search": t4 - t1}))
"""

SEED_CHILD = r"""
import sys
from xmemory_gpu.engine import MemoryEngine
with MemoryEngine.open(sys.argv[1], embedder=sys.argv[2]) as engine:
    engine.add([{"role": "user", "content": "My sister Emma visits every October."}], user_id="u")
"""


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault("HF_HUB_OFFLINE", "1")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    return env


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _stop(proc: subprocess.Popen) -> None:
    """SIGTERM, then SIGKILL after 30 s."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def engine_round(seed: Path, work: Path, embedder: str) -> dict[str, float]:
    store = work / "engine-store"
    shutil.rmtree(store, ignore_errors=True)
    shutil.copytree(seed, store)
    out = subprocess.run(
        [sys.executable, "-c", ENGINE_CHILD, str(store), embedder],
        env=_env(),
        capture_output=True,
        text=True,
    )
    if out.returncode != 0:
        raise RuntimeError(f"the engine round failed: {out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def cli_add_round(seed: Path, work: Path) -> float:
    """Seconds of a one-shot ``xmemory add`` of one message (start to exit)."""
    store = work / "cli-store"
    shutil.rmtree(store, ignore_errors=True)
    shutil.copytree(seed, store)
    msgs = work / "messages.json"
    msgs.write_text(json.dumps([{"role": "user", "content": "I started learning the cello in March."}]))
    t0 = time.perf_counter()
    out = subprocess.run(
        [sys.executable, "-m", "xmemory_gpu", "add", str(store), str(msgs), "--user", "u"],
        env=_env(),
        capture_output=True,
        text=True,
    )
    if out.returncode != 0:
        raise RuntimeError(f"xmemory add failed: {out.stderr[-2000:]}")
    return time.perf_counter() - t0


def serve_round(seed: Path, work: Path, limit: float) -> float:
    """Seconds from starting ``xmemory serve`` to the first 200 of ``/health``."""
    store = work / "serve-store"
    shutil.rmtree(store, ignore_errors=True)
    shutil.copytree(seed, store)
    port = _free_port()
    env = _env()
    env.pop("XMEMORY_API_KEY", None)
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "xmemory_gpu",
            "serve",
            str(store),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        for _ in range(int(limit / POLL_S)):
            if proc.poll() is not None:
                raise RuntimeError(f"xmemory serve exited: {proc.stderr.read().decode()[-2000:]}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5) as r:
                    if r.status == 200:
                        return time.perf_counter() - t0
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
            time.sleep(POLL_S)
        raise RuntimeError(f"xmemory serve: no /health within {limit:g} s")
    finally:
        _stop(proc)


def mcp_round(seed: Path, work: Path, limit: float) -> float:
    """Seconds from starting ``xmemory mcp`` (stdio) to its ``initialize`` answer."""
    import anyio
    from mcp import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    store = work / "mcp-store"
    shutil.rmtree(store, ignore_errors=True)
    shutil.copytree(seed, store)
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "xmemory_gpu.cli.mcp", str(store)],
        cwd=str(ROOT),
        env=_env(),
    )

    async def scenario() -> float:
        with anyio.fail_after(limit), open(work / "mcp.log", "w") as log:
            t0 = time.perf_counter()
            async with stdio_client(params, errlog=log) as (r, w), ClientSession(r, w) as s:
                await s.initialize()
                return time.perf_counter() - t0

    return anyio.run(scenario)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--embedder", default="all-MiniLM-L6-v2")
    ap.add_argument("--limit", type=float, default=180.0, help="seconds a server may take to answer")
    ap.add_argument("--skip", nargs="*", default=[], choices=["engine", "cli", "serve", "mcp"])
    ap.add_argument("--json", default=None, help="also write the figures here")
    args = ap.parse_args(argv)
    if args.rounds < 1:
        ap.error("--rounds: expected an integer >= 1")
    times: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-startup-") as tmp:
        work = Path(tmp)
        seed = work / "seed"
        subprocess.run([sys.executable, "-c", SEED_CHILD, str(seed), args.embedder], env=_env(), check=True)
        try:
            import mcp  # noqa: F401

            has_mcp = True
        except ImportError:
            has_mcp = False
        for _ in range(args.rounds):
            if "engine" not in args.skip:
                for k, v in engine_round(seed, work, args.embedder).items():
                    times.setdefault(k, []).append(v)
            if "cli" not in args.skip:
                times.setdefault("cli add", []).append(cli_add_round(seed, work))
            if "serve" not in args.skip:
                times.setdefault("serve -> /health", []).append(serve_round(seed, work, args.limit))
            if "mcp" not in args.skip and has_mcp:
                times.setdefault("mcp -> initialize", []).append(mcp_round(seed, work, args.limit))
    print(
        f"CPU: {cpu_name()} ({os.cpu_count()} logical CPUs); embedder {args.embedder}; {args.rounds} rounds"
    )
    print(f"{'phase':<22}{'median s':>10}{'min s':>10}")
    for k, v in times.items():
        print(f"{k:<22}{statistics.median(v):>10.2f}{min(v):>10.2f}")
    if args.json:
        Path(args.json).write_text(
            json.dumps({"cpu": cpu_name(), "embedder": args.embedder, "seconds": times}, indent=1)
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
