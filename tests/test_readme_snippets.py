"""The documentation's snippets run as written: the README's chat-app and mem0 examples, and
docs/operations.md's LangGraph example (default embedder, in a temporary folder) and MCP host
configuration's command line (tests/test_mcp.py starts it through the SDK's stdio client)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
OPERATIONS = ROOT / "docs" / "operations.md"


def _block(after: str, lang: str, doc: Path = README) -> str:
    text = doc.read_text(encoding="utf-8")
    start = text.index(after)
    m = re.compile(rf"```{lang}\n(.*?)```", re.S).search(text, start)
    assert m, f"no {lang} block after {after!r} in {doc.name}"
    return m.group(1)


def test_langgraph_snippet_runs(tmp_path, monkeypatch, capsys):
    pytest.importorskip("langgraph")
    monkeypatch.chdir(tmp_path)
    exec(compile(_block("## LangGraph store", "python", OPERATIONS), "docs/operations.md", "exec"), {})
    assert "Lisbon" in capsys.readouterr().out


def test_mcp_host_config_names_a_working_command():
    pytest.importorskip("mcp")
    cfg = json.loads(_block("## MCP server", "json", OPERATIONS))["mcpServers"]["xmemory"]
    # the absolute path of the virtual environment's xmemory (a host does not run inside the environment)
    assert cfg["command"].startswith("/") and Path(cfg["command"]).name == "xmemory"
    assert cfg["args"][0] == "mcp" and "--user" in cfg["args"]
    from xmemory_gpu.cli import main

    try:
        rc = main(["mcp", "--help"])
    except SystemExit as exc:
        rc = exc.code
    assert rc == 0


def test_mem0_snippet_runs(capsys):
    exec(compile(_block("### Coming from mem0", "python"), "README.md", "exec"), {})
    out = capsys.readouterr().out
    context, hobby = out.split("\n")[:-2], out.split("\n")[-2]
    assert "Lisbon" in "\n".join(context) and "violin" not in out and "cello" not in "\n".join(context)
    assert hobby == "['I bought a cello.']"


def test_chat_app_snippet_runs(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    exec(compile(_block("## Memory for a chat app", "python"), "README.md", "exec"), {})
    out = capsys.readouterr().out
    assert out.index("product designer at Google") < out.index("previously, until")
    assert 0.0 < float(out.strip().splitlines()[-1]) <= 1.0
