"""``xmemory mcp`` for real: a server process driven by the MCP SDK's own client, over stdio
(initialize, list the tools, call each; a bad argument is a tool error naming it; no result crosses
users; ``--user`` refuses another user) and over streamable HTTP on 127.0.0.1 (keys required, a key
bound to a user reaches that user only). Every wait is bounded."""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("mcp")

import anyio  # noqa: E402
import httpx2  # noqa: E402
from mcp import ClientSession  # noqa: E402
from mcp.client.stdio import StdioServerParameters, stdio_client  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402

from xmemory_gpu.cli.mcp import main  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
TOOLS = {"add", "search", "get_all", "delete", "delete_all", "history", "update", "scopes"}
PASSED_ENV = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "TRITON_INTERPRET", "TOKENIZERS_PARALLELISM")
ADMIN = "admin-key-0123456789abcdef"
ALICE_KEY = "alice-key-0123456789abcdef"
TIMEOUT = 120  # seconds for a whole conversation with one server


def _command(store: Path, *extra: str) -> list[str]:
    return ["-m", "xmemory_gpu.cli.mcp", str(store), "--embedder", "hashing:384", *extra]


def _stdio(store: Path, *extra: str) -> StdioServerParameters:
    env = {k: os.environ[k] for k in PASSED_ENV if k in os.environ}
    return StdioServerParameters(command=sys.executable, args=_command(store, *extra), cwd=str(ROOT), env=env)


def _text(res) -> str:
    return " ".join(c.text for c in res.content if c.type == "text")


async def _ok(session: ClientSession, tool: str, args: dict) -> dict:
    res = await session.call_tool(tool, args)
    assert not res.is_error, f"{tool} {args}: {_text(res)}"
    return res.structured_content


async def _refused(session: ClientSession, tool: str, args: dict, *names: str) -> str:
    res = await session.call_tool(tool, args)
    text = _text(res)
    assert res.is_error, f"{tool} {args} was not refused: {text}"
    for name in names:
        assert name in text, f"{tool} {args}: the error does not name {name!r}: {text}"
    return text


def test_stdio_server_tools_and_isolation(tmp_path):
    async def scenario() -> None:
        with anyio.fail_after(TIMEOUT), (tmp_path / "server.log").open("w") as log:
            async with (
                stdio_client(_stdio(tmp_path / "store"), errlog=log) as (r, w),
                ClientSession(r, w) as s,
            ):
                init = await s.initialize()
                assert init.server_info.name == "xmemory" and "search" in init.instructions
                tools = {t.name: t for t in (await s.list_tools()).tools}
                assert set(tools) == TOOLS
                assert {"user_id", "agent_id", "run_id"} <= set(tools["search"].input_schema["properties"])

                alice = await _ok(
                    s,
                    "add",
                    {"messages": "I adopted a grey cat named Pixelmora last spring.", "user_id": "alice"},
                )
                more = await _ok(
                    s,
                    "add",
                    {
                        "messages": [
                            {
                                "content": "My sister lives in Lisbon.",
                                "role": "alice",
                                "timestamp": "2024-05-01T10:00:00",
                            }
                        ],
                        "user_id": "alice",
                    },
                )
                bob = await _ok(
                    s,
                    "add",
                    {
                        "messages": [{"content": "My parrot Quokkaville talks all day.", "id": "b1"}],
                        "user_id": "bob",
                    },
                )
                assert len(alice["ids"]) == len(more["ids"]) == 1 and bob["ids"] == ["b1"]
                # mem0's events: the message and what was derived from it
                assert {"id": "b1", "event": "ADD", "type": "message", "user_id": "bob"}.items() <= bob[
                    "results"
                ][0].items()
                assert any(e["type"] == "semantic" and e["event"] == "ADD" for e in alice["results"])
                one = await _ok(
                    s,
                    "add",
                    {"messages": {"content": "I ride a red bicycle.", "id": "c1"}, "user_id": "carol"},
                )
                assert one["ids"] == ["c1"]
                raw = await _ok(
                    s,
                    "add",
                    {
                        "messages": "The door code is 4512 and the gate code is 99.",
                        "user_id": "carol",
                        "infer": False,
                    },
                )
                assert [e["type"] for e in raw["results"]] == ["message"]
                assert {"user_id": "carol", "agent_id": None, "run_id": None} in (await _ok(s, "scopes", {}))[
                    "scopes"
                ]

                found = await _ok(s, "search", {"query": "What is the name of my cat?", "user_id": "alice"})
                assert "Pixelmora" in found["context"] and "Quokkaville" not in json.dumps(found)
                assert found["units"] and all(
                    {"type", "id", "text", "memory", "score", "message_ids", "created_at", "user_id"}
                    <= set(u)
                    and 0.0 <= u["score"] <= 1.0
                    for u in found["units"]
                )
                assert alice["ids"][0] in found["message_ids"]  # provenance: the message the answer came from
                assert "Pixelmora" not in json.dumps(
                    await _ok(s, "search", {"query": "cat name?", "user_id": "bob"})
                )

                units = (await _ok(s, "get_all", {"user_id": "alice"}))["units"]
                assert {u["type"] for u in units} >= {"message", "episode", "semantic"}
                assert "Quokkaville" not in json.dumps(units)
                # bob's message id is not alice's: deleting it in alice's scope is refused, bob keeps it
                await _refused(s, "delete", {"unit_id": "b1", "user_id": "alice"}, "b1")
                assert any(u["id"] == "b1" for u in (await _ok(s, "get_all", {"user_id": "bob"}))["units"])

                assert await _ok(s, "delete", {"unit_id": alice["ids"][0], "user_id": "alice"}) == {
                    "deleted": alice["ids"][0]
                }
                after = await _ok(s, "search", {"query": "What is the name of my cat?", "user_id": "alice"})
                assert "Pixelmora" not in json.dumps(after) and "Lisbon" in after["context"]
                ops = [e["op"] for e in (await _ok(s, "history", {"user_id": "alice"}))["history"]]
                assert ops == ["add", "add", "delete"]

                # mem0's names: metadata and filters, limit, update
                tagged = await _ok(
                    s,
                    "add",
                    {
                        "messages": "I keep bees on the roof of my building.",
                        "user_id": "alice",
                        "metadata": {"topic": "hobby"},
                    },
                )
                hobby = await _ok(
                    s,
                    "search",
                    {
                        "query": "Where does my sister live?",
                        "user_id": "alice",
                        "filters": {"topic": "hobby"},
                        "threshold": 0.0,
                    },
                )
                assert "Lisbon" not in hobby["context"] and set(hobby["message_ids"]) <= set(tagged["ids"])
                assert (
                    len((await _ok(s, "search", {"query": "bees?", "user_id": "alice", "limit": 1}))["units"])
                    <= 1
                )
                got = (await _ok(s, "get_all", {"user_id": "alice", "filters": {"topic": "hobby"}}))["units"]
                assert {u["id"] for u in got if u["type"] == "message"} == set(tagged["ids"])
                upd = await _ok(
                    s,
                    "update",
                    {"unit_id": tagged["ids"][0], "text": "I keep goats on a farm.", "user_id": "alice"},
                )
                assert upd["text"] == "I keep goats on a farm." and upd["metadata"] == {"topic": "hobby"}
                assert upd["id"] == tagged["ids"][0] and upd["updated_at"] >= upd["created_at"]
                assert "bees" not in json.dumps((await _ok(s, "get_all", {"user_id": "alice"}))["units"])
                await _ok(s, "delete", {"unit_id": tagged["ids"][0], "user_id": "alice"})
                ops = [e["op"] for e in (await _ok(s, "history", {"user_id": "alice"}))["history"]]
                assert ops == ["add", "add", "delete", "add", "update", "delete"]

                # bad arguments: a tool error naming the argument, nothing stored changes
                kept = (await _ok(s, "get_all", {"user_id": "alice"}))["units"]
                await _refused(
                    s,
                    "search",
                    {"query": "cat?", "user_id": "alice", "budget_tokens": "many"},
                    "budget_tokens",
                )
                await _refused(
                    s, "search", {"query": "cat?", "user_id": "alice", "strategy": "magic"}, "strategy"
                )
                await _refused(s, "search", {"query": "cat?"}, "user_id")
                await _refused(s, "search", {"query": "", "user_id": "alice"}, "query")
                await _refused(
                    s,
                    "add",
                    {"messages": [{"content": "x", "timestamp": "someday"}], "user_id": "alice"},
                    "messages[0]",
                    "timestamp",
                )
                await _refused(
                    s, "add", {"messages": [{"content": "x", "colour": "red"}], "user_id": "alice"}, "colour"
                )
                await _refused(s, "add", {"messages": "x", "user_id": ""}, "user_id")
                await _refused(s, "delete", {"unit_id": "semantic:999", "user_id": "alice"}, "semantic:999")
                assert (await _ok(s, "get_all", {"user_id": "alice"}))["units"] == kept
                assert [e["op"] for e in (await _ok(s, "history", {"user_id": "alice"}))["history"]] == ops

    anyio.run(scenario)


def test_stdio_server_started_for_one_user(tmp_path):
    async def scenario() -> None:
        with anyio.fail_after(TIMEOUT), (tmp_path / "server.log").open("w") as log:
            params = _stdio(tmp_path / "store", "--user", "alice")
            async with stdio_client(params, errlog=log) as (r, w), ClientSession(r, w) as s:
                await s.initialize()
                await _ok(s, "add", {"messages": "I run marathons every autumn."})
                assert "marathons" in (await _ok(s, "search", {"query": "What sport do I do?"}))["context"]
                assert (
                    "marathons"
                    in (await _ok(s, "search", {"query": "sport?", "user_id": "alice"}))["context"]
                )
                for tool, args in [
                    ("search", {"query": "sport?"}),
                    ("get_all", {}),
                    ("history", {}),
                    ("add", {"messages": "hi"}),
                    ("delete", {"unit_id": "x"}),
                    ("delete_all", {}),
                ]:
                    text = await _refused(s, tool, {**args, "user_id": "mallory"}, "user_id", "alice")
                    assert "marathons" not in text

    anyio.run(scenario)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_http_server_needs_a_key_and_keeps_bound_keys_to_their_user(tmp_path):
    keys = tmp_path / "keys.json"
    keys.write_text(json.dumps({ALICE_KEY: ["alice"]}))
    port = _free_port()
    env = {**os.environ, "XMEMORY_API_KEY": ADMIN}
    log = (tmp_path / "server.log").open("w")
    proc = subprocess.Popen(
        [
            sys.executable,
            *_command(
                tmp_path / "store", "--transport", "http", "--port", str(port), "--keys-file", str(keys)
            ),
        ],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        deadline = time.time() + 90
        while time.time() < deadline:  # bounded wait for the port
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert proc.poll() is None, (tmp_path / "server.log").read_text()
                time.sleep(0.2)
        for headers, detail in [
            ({}, "missing API key"),
            ({"Authorization": "Bearer wrong-key-0123456789"}, "invalid"),
        ]:
            r = httpx2.post(url, json={}, headers=headers, timeout=10)
            assert (
                r.status_code == 401
                and detail in r.json()["detail"]
                and r.headers["www-authenticate"] == "Bearer"
            )

        async def session(key: str, calls) -> None:
            async with (
                httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=30) as http,
                streamable_http_client(url, http_client=http) as (r, w),
                ClientSession(r, w) as s,
            ):
                await s.initialize()
                await calls(s)

        async def admin(s: ClientSession) -> None:
            assert {t.name for t in (await s.list_tools()).tools} == TOOLS
            await _ok(s, "add", {"messages": "Bob keeps bees on the roof.", "user_id": "bob"})
            await _ok(s, "add", {"messages": "Alice collects old maps.", "user_id": "alice"})

        async def bound(s: ClientSession) -> None:
            assert (
                "maps"
                in (await _ok(s, "search", {"query": "What does Alice collect?", "user_id": "alice"}))[
                    "context"
                ]
            )
            text = await _refused(s, "search", {"query": "bees?", "user_id": "bob"}, "user_id", "API key")
            assert "bees" not in text
            assert {x["user_id"] for x in (await _ok(s, "scopes", {}))["scopes"]} == {"alice"}
            await _refused(s, "search", {"query": "bees?", "agent_id": "a"}, "user_id", "API key")
            await _refused(s, "delete_all", {"user_id": "bob"}, "user_id", "API key")
            await _refused(s, "delete_all", {"agent_id": "a"}, "user_id", "API key")
            assert await _ok(s, "delete_all", {"user_id": "alice"}) == {"deleted_messages": 1}

        async def scenario() -> None:
            with anyio.fail_after(TIMEOUT):
                await session(ADMIN, admin)
                await session(ALICE_KEY, bound)

        anyio.run(scenario)
    finally:
        proc.terminate()
        assert proc.wait(timeout=60) == 0, (tmp_path / "server.log").read_text()  # SIGTERM: a clean stop
        log.close()


def test_http_without_a_key_is_refused_before_the_store_opens(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("XMEMORY_API_KEY", raising=False)
    assert main([str(tmp_path / "store"), "--transport", "http", "--embedder", "hashing:384"]) == 2
    err = capsys.readouterr().err
    assert "XMEMORY_API_KEY" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "store").exists()
    monkeypatch.setenv("XMEMORY_API_KEY", "short")
    assert main([str(tmp_path / "store"), "--transport", "http"]) == 2
    assert "XMEMORY_API_KEY: the API key has 5 characters; expected at least 16" in capsys.readouterr().err
    assert main([str(tmp_path / "store"), "--port", "0"]) == 2
    assert "--port" in capsys.readouterr().err
    # HTTP binds 127.0.0.1 only: no option opens it to other machines
    assert main([str(tmp_path / "store"), "--transport", "http", "--host", "0.0.0.0"]) == 2
    assert "unrecognized arguments: --host" in capsys.readouterr().err
    assert not (tmp_path / "store").exists()


def test_the_readme_host_configuration_runs_as_written(tmp_path):
    """docs/operations.md's MCP host snippet, started as a host starts it: its command (the absolute path
    of the environment's ``xmemory``: the placeholder folder becomes this environment's), its arguments
    (the store path moved to a temporary folder), the default embedder."""
    text = (ROOT / "docs" / "operations.md").read_text(encoding="utf-8")
    block = re.search(r"```json\n(.*?)```", text[text.index("## MCP server") :], re.S)
    cfg = json.loads(block.group(1))["mcpServers"]["xmemory"]
    assert cfg["command"].startswith("/"), f"{cfg['command']}: a host needs the absolute path"
    command = shutil.which(Path(cfg["command"]).name, path=str(Path(sys.executable).parent))
    assert command, f"{Path(cfg['command']).name} is not installed beside {sys.executable}"
    args = [str(tmp_path / "store") if a == "/home/me/agent-memory" else a for a in cfg["args"]]
    assert str(tmp_path / "store") in args
    env = {k: os.environ[k] for k in PASSED_ENV if k in os.environ}

    async def scenario() -> None:
        with anyio.fail_after(TIMEOUT), (tmp_path / "server.log").open("w") as log:
            params = StdioServerParameters(command=command, args=args, cwd=str(tmp_path), env=env)
            async with stdio_client(params, errlog=log) as (r, w), ClientSession(r, w) as s:
                await s.initialize()
                await _ok(s, "add", {"messages": "I keep my bike in the blue shed behind the house."})
                found = await _ok(s, "search", {"query": "Where do I keep my bike?"})
                assert "blue shed" in found["context"]

    anyio.run(scenario)
