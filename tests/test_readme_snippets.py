"""Every code block of the README runs as written: each block is named by its section and runs in a
test here (the set-up block is CI itself: ``.ci/run`` runs both of its scripts), and a README block
no test runs fails ``test_every_block_runs``. docs/operations.md's LangGraph example and MCP host
configuration run too (tests/test_mcp.py starts the MCP command through the SDK's stdio client)."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
OPERATIONS = ROOT / "docs" / "operations.md"
BIN = Path(sys.executable).parent  # the environment's console scripts (xmemory)


def blocks(doc: Path = README) -> list[tuple[str, int, str, str]]:
    """(section heading, index within it, language, code) of every fenced block of ``doc``."""
    out, heading, count = [], "", {}
    lines = doc.read_text(encoding="utf-8").splitlines(keepends=True)
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("#"):
            heading = line.strip()
        elif line.startswith("```"):
            lang, body = line[3:].strip(), []
            i += 1
            while not lines[i].startswith("```"):
                body.append(lines[i])
                i += 1
            n = count.get(heading, 0)
            count[heading] = n + 1
            out.append((heading, n, lang, "".join(body)))
        i += 1
    return out


def block(heading: str, n: int = 0, doc: Path = README) -> str:
    for h, i, _, code in blocks(doc):
        if h == heading and i == n:
            return code
    raise AssertionError(f"no block {n} under {heading!r} in {doc.name}")


RUN_BY = {  # (heading, index) -> the test that runs it
    ("## Set up", 0): "test_setup_block_is_what_ci_runs",
    ("## Memory for a chat app", 0): "test_chat_app_snippet_runs",
    ("## HTTP service and clients", 0): "test_service_and_client_snippets_run",
    ("## HTTP service and clients", 1): "test_service_and_client_snippets_run",
    ("### Coming from mem0", 0): "test_mem0_snippet_runs",
    ("## Bulk build", 0): "test_bulk_build_snippet_runs",
    ("## Benchmarks", 0): "test_benchmark_command_is_documented_and_runs_the_suites",
}


def test_every_block_runs():
    found = {(h, i) for h, i, _, _ in blocks()}
    assert found == set(RUN_BY), f"README blocks no test runs: {sorted(found - set(RUN_BY))}"


def _env() -> dict[str, str]:
    return {**os.environ, "HF_HUB_OFFLINE": "1", "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}


def _shell(code: str, cwd: Path, timeout: float = 1800) -> str:
    r = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", code],
        cwd=cwd,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=timeout,  # a hang guard, not a speed check
    )
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    return r.stdout


def test_setup_block_is_what_ci_runs():
    code = [ln.split("#")[0].strip() for ln in block("## Set up").splitlines() if ln.strip()]
    assert code == ["bash scripts/quickstart.sh", "bash scripts/test.sh"]
    ci = (ROOT / ".ci" / "run").read_text()
    assert "bash scripts/test.sh" in ci and "bash scripts/quickstart.sh" in ci


def test_chat_app_snippet_runs(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    exec(compile(block("## Memory for a chat app"), "README.md", "exec"), {})
    out = capsys.readouterr().out
    assert out.index("product designer at Google") < out.index("previously, until")
    assert 0.0 < float(out.strip().splitlines()[-1]) <= 1.0


def test_mem0_snippet_runs(capsys):
    exec(compile(block("### Coming from mem0"), "README.md", "exec"), {})
    out = capsys.readouterr().out
    context, hobby = out.split("\n")[:-2], out.split("\n")[-2]
    assert "Lisbon" in "\n".join(context) and "violin" not in out and "cello" not in "\n".join(context)
    assert hobby == "['I bought a cello.']"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_service_and_client_snippets_run(tmp_path, capsys):
    """The server command as written (on a free port in place of 8000, in a temporary folder), then
    the client block against it."""
    pytest.importorskip("fastapi")
    port = str(_free_port())
    serve = block("## HTTP service and clients", 0).strip()
    assert "--port 8000" in serve and "xmemory serve" in serve
    proc = subprocess.Popen(
        ["bash", "-c", "exec env " + serve.replace("8000", port)],
        cwd=tmp_path,
        env=_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        deadline = time.time() + 900  # readiness, polled; the bound is for a server that never listens
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2).read()
                break
            except OSError:
                assert proc.poll() is None, proc.stdout.read()
                assert time.time() < deadline, "the server never answered /health"
                time.sleep(0.2)
        client = block("## HTTP service and clients", 1).replace("8000", port)
        exec(compile(client, "README.md", "exec"), {})
        assert "Lisbon" in capsys.readouterr().out
    finally:
        proc.terminate()
        proc.wait(timeout=600)
        proc.stdout.close()


def test_bulk_build_snippet_runs(tmp_path):
    out = _shell(block("## Bulk build"), tmp_path)
    assert "Lisbon" in out


def test_benchmark_command_is_documented_and_runs_the_suites(tmp_path):
    """The documented command is scripts/bench.sh; it runs here on one suite (the whole set takes
    minutes: ``bash scripts/bench.sh`` by hand)."""
    code = [ln.split("#")[0].strip() for ln in block("## Benchmarks").splitlines() if ln.strip()]
    assert code == ["bash scripts/bench.sh"]
    env = {**_env(), "XMEM_VENV": str(BIN.parent)}
    r = subprocess.run(
        ["bash", str(ROOT / "scripts" / "bench.sh"), "benchmarks/bench_coverage.py"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,  # a hang guard
    )
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "coverage_select" in r.stdout and "Median" in r.stdout


def test_langgraph_snippet_runs(tmp_path, monkeypatch, capsys):
    pytest.importorskip("langgraph")
    monkeypatch.chdir(tmp_path)
    exec(compile(block("## LangGraph store", 0, OPERATIONS), "docs/operations.md", "exec"), {})
    assert "Lisbon" in capsys.readouterr().out


def test_mcp_host_config_names_a_working_command():
    pytest.importorskip("mcp")
    cfg = json.loads(block("## MCP server", 0, OPERATIONS))["mcpServers"]["xmemory"]
    # the absolute path of the virtual environment's xmemory (a host does not run inside the environment)
    assert cfg["command"].startswith("/") and Path(cfg["command"]).name == "xmemory"
    assert cfg["args"][0] == "mcp" and "--user" in cfg["args"]
    from xmemory_gpu.cli import main

    try:
        rc = main(["mcp", "--help"])
    except SystemExit as exc:
        rc = exc.code
    assert rc == 0


def test_block_parser_reads_fences():
    assert re.match(r"#+ ", blocks()[0][0])
