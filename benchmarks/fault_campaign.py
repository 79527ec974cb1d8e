"""A fault campaign against the command line, the store and the live engine, with figures:

(a) ``cli``: bad-input kinds, each run through ``xmemory`` in process; counted: one-line errors,
    tracebacks, wrong exit codes, and data lost (the store's memories and checksums before and after);
(b) ``builds``: ``kill -9`` at random moments of bulk builds and of engine batch streams, then resume:
    memories lost, duplicated, failed reopens, and whether the end state equals an uninterrupted run;
(c) ``disk``: a full disk (a small tmpfs when this machine lets us mount one, else ``ENOSPC`` raised
    by a patched writer): a clear error, nothing committed lost, no orphan files;
(d) ``writers``: two writer processes on one new store: one builds, the other is refused;

and the live engine's write path:

(e) ``inputs``: bad-input kinds at every front door (the engine's Python calls, the HTTP service
    through FastAPI's TestClient, the MCP server's tools in process, the LangGraph store, the clients'
    API key), each classified: ``clean`` (a one-line error naming the field), ``vague`` (refused
    without naming it), ``raw`` (an internal exception escaping, an HTTP 5xx), ``silent`` (accepted:
    coerced or dropped), ``lost`` (refused, but the stored data changed), ``accepted`` (allowed by the
    front doors' rules, e.g. ``3.0`` as the integer 3);
(f) ``copies``: unique tokens (content, metadata, message id, a name given in a message and in a
    message's ``name``, the user id) added, deleted, ``delete_all``-ed and ``reset``; their bytes
    counted in every file of the store and in ``get_all`` / ``search`` / ``history`` outputs;
(g) ``resurrect``: a statement deleted by its ``semantic:N`` and later adds that re-derive it;
(h) ``kills``: an adder process SIGKILLed at random moments: acknowledged adds lost, names or
    batches half-applied;
(i) ``fair``: one user's add 0.5 s behind a large ``add_batch``: how long it waited.

  python benchmarks/fault_campaign.py --out DIR [--sections inputs,copies,resurrect,kills,fair]
      [--kills 20] [--engine-kills 20] [--fair-users 10] [--fair-messages 1000] [--deadline 3600] [--seed 0]

Everything runs on local files under a temporary folder (removed at the end); no socket is bound;
every loop is bounded, and the live sections stop early past ``--deadline``.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import random
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _record import write_record

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT)}
EMB = "hashing:64"


def _store_state(store: Path) -> dict:
    """Memory ids and array checksums: what must not change when a command fails."""
    db = store / "memory.sqlite"
    if not db.exists():
        return {}
    with contextlib.closing(sqlite3.connect(db)) as c:
        return dict(c.execute("SELECT memory_id, sha256 FROM memories").fetchall())


def _run_cli(argv: list[str]) -> tuple[int, str]:
    from xmemory_gpu.cli import main

    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            code = main(argv)
        except SystemExit as exc:  # should not happen: main returns codes
            code = 99 if exc.code is None else int(exc.code)
        except BaseException:  # noqa: BLE001 - a traceback escaping main counts as one
            import traceback

            return 98, "Traceback (escaped main)\n" + traceback.format_exc()
    return code, err.getvalue()


def bad_inputs(tmp: Path) -> dict:
    from xmemory_gpu.datasets.synthetic import generate_conversations, write_json

    good = tmp / "good.json"
    write_json(generate_conversations(2, seed=3), good)
    store = tmp / "store"
    assert _run_cli(["build", str(good), "--out", str(store), "--embedder", EMB, "--no-progress"])[0] == 0
    sid = json.loads(good.read_text())[0]["sample_id"]

    def data(obj, raw: bytes | None = None) -> str:
        p = tmp / f"d{random.getrandbits(32)}.json"
        p.write_bytes(raw if raw is not None else json.dumps(obj).encode())
        return str(p)

    def conv(**over):
        c = json.loads(good.read_text())[0]
        c["sample_id"] = "new-" + str(random.getrandbits(16))
        for k, v in over.items():
            if k == "turn":
                c["conversation"]["session_1"][0].update(v)
            elif k in ("conversation",):
                c["conversation"].update(v)
            else:
                c[k] = v
        return [c]

    def cfg(obj) -> str:
        p = tmp / f"c{random.getrandbits(32)}.json"
        p.write_text(json.dumps(obj) if not isinstance(obj, bytes) else obj.decode("latin-1"))
        return str(p)

    folder = tmp / "folder"
    folder.mkdir(exist_ok=True)
    afile = tmp / "afile"
    afile.write_text("x")
    s = str(store)
    B = ["build"]
    BO = ["--out", s, "--embedder", EMB, "--no-progress"]
    cases: list[tuple[str, list[str]]] = [
        ("build: missing file", B + [str(tmp / "nope.json")] + BO),
        ("build: folder without json", B + [str(folder)] + BO),
        ("build: malformed JSON", B + [data(None, b"[{")] + BO),
        ("build: not UTF-8", B + [data(None, b'[{"sample_id": "\xff"}]')] + BO),
        ("build: nested too deeply", B + [data(None, b"[" * 50000 + b"]" * 50000)] + BO),
        ("build: top level a number", B + [data(5)] + BO),
        ("build: item a string", B + [data(["x"])] + BO),
        ("build: sample_id missing", B + [data(conv(sample_id=None))] + BO),
        ("build: sample_id a number", B + [data(conv(sample_id=5))] + BO),
        (
            "build: conversation missing",
            B + [data(conv(conversation=None) if False else [{"sample_id": "z"}])] + BO,
        ),
        ("build: speaker_a missing", B + [data(conv(conversation={"speaker_a": None}))] + BO),
        ("build: session not a list", B + [data(conv(conversation={"session_1": "x"}))] + BO),
        ("build: date unparsable", B + [data(conv(conversation={"session_1_date_time": "yesterday"}))] + BO),
        ("build: date missing", B + [data(conv(conversation={"session_1_date_time": None}))] + BO),
        ("build: turn not an object", B + [data(conv(conversation={"session_1": [5]}))] + BO),
        ("build: dia_id missing", B + [data(conv(turn={"dia_id": None}))] + BO),
        ("build: empty text", B + [data(conv(turn={"text": "   "}))] + BO),
        ("build: speaker missing", B + [data(conv(turn={"speaker": ""}))] + BO),
        (
            "build: lone surrogate",
            B
            + [data(None, json.dumps(conv(turn={"text": "hi XSURX"})).replace("XSURX", "\\ud800").encode())]
            + BO,
        ),
        ("build: qa not a list", B + [data(conv(qa="x"))] + BO),
        ("build: question missing", B + [data(conv(qa=[{"answer": "x"}]))] + BO),
        ("build: category abc", B + [data(conv(qa=[{"question": "q", "category": "abc"}]))] + BO),
        (
            "build: evidence not a list",
            B + [data(conv(qa=[{"question": "q", "category": 1, "evidence": 5}]))] + BO,
        ),
        ("build: duplicate sample across files", B + [str(good), str(good)] + BO),
        ("build: --limit -1", B + [str(good), "--limit", "-1"] + BO),
        ("build: --limit x", B + [str(good), "--limit", "x"] + BO),
        ("build: --shard-size -1", B + [str(good), "--shard-size", "-1"] + BO),
        ("build: --sessions -1", B + [str(good), "--sessions", "-1"] + BO),
        ("build: --sessions 0", B + [str(good), "--sessions", "0"] + BO),
        ("build: --out is a file", B + [str(good), "--out", str(afile), "--embedder", EMB]),
        ("build: unknown embedder spec", B + [str(good), "--out", str(tmp / "o2"), "--embedder", "nope"]),
        ("build: hashing:x", B + [str(good), "--out", str(tmp / "o3"), "--embedder", "hashing:x"]),
        ("build: other embedder than the store", B + [str(good), "--out", s, "--embedder", "hashing:32"]),
        ("build: config a list", B + [str(good), "--config", cfg([1])] + BO),
        ("build: config null section", B + [str(good), "--config", cfg({"stage1": None})] + BO),
        ("build: config wrong type", B + [str(good), "--config", cfg({"theme": {"size_cap": "x"}})] + BO),
        ("build: config size_cap 0", B + [str(good), "--config", cfg({"theme": {"size_cap": 0}})] + BO),
        ("build: config unknown key", B + [str(good), "--config", cfg({"nope": 1})] + BO),
        ("build: config not JSON", B + [str(good), "--config", cfg(b"{nope")] + BO),
        ("build: config missing file", B + [str(good), "--config", str(tmp / "none.json")] + BO),
        ("search: not a store", ["search", str(folder), "q"]),
        ("search: random bytes database", ["search", str(_random_store(tmp)), "q"]),
        ("search: empty memory id", ["search", s, "--memory", "", "q"]),
        ("search: unknown memory", ["search", s, "--memory", "nope", "q"]),
        ("search: empty question", ["search", s, "--memory", sid, ""]),
        ("search: no question", ["search", s, "--memory", sid]),
        ("search: invalid UTF-8 question", ["search", s, "--memory", sid, "bad \udcff"]),
        ("search: --budget-tokens -5", ["search", s, "--budget-tokens", "-5", "q"]),
        ("search: unknown strategy", ["search", s, "--strategy", "nope", "q"]),
        ("search: --batch a folder", ["search", s, "--batch", str(folder)]),
        ("search: --batch malformed", ["search", s, "--batch", data(None, b"[")]),
        ("search: --batch not a list", ["search", s, "--batch", data({"question": "q"})]),
        ("search: --batch item without question", ["search", s, "--batch", data([{"memory": sid}])]),
        ("search: --batch memory a number", ["search", s, "--batch", data([{"question": "q", "memory": 5}])]),
        ("search: unknown reader", ["search", s, "--reader", "nope:x", "q"]),
        ("search: --tir-prune without reader", ["search", s, "--strategy", "tir", "--tir-prune", "q"]),
        ("search: config alpha 2", ["search", s, "--config", cfg({"stage1": {"alpha": 2}}), "q"]),
        ("search: unknown backend", ["search", s, "--backend", "nope", "q"]),
        ("eval: --limit -1", ["eval", s, "--data", str(good), "--out", str(tmp / "e1"), "--limit", "-1"]),
        ("eval: --out a file", ["eval", s, "--data", str(good), "--out", str(afile)]),
        (
            "eval: unknown strategy",
            ["eval", s, "--data", str(good), "--out", str(tmp / "e2"), "--strategies", "nope"],
        ),
        (
            "eval: --sweep-budget -1",
            ["eval", s, "--data", str(good), "--out", str(tmp / "e3"), "--sweep-budget", "-1"],
        ),
        (
            "eval: --categories x",
            ["eval", s, "--data", str(good), "--out", str(tmp / "e4"), "--categories", "x"],
        ),
        ("eval: data missing", ["eval", s, "--data", str(tmp / "none.json"), "--out", str(tmp / "e5")]),
        ("synth: --conversations -1", ["synth", "--conversations", "-1", "--out", str(tmp / "s.json")]),
        ("synth: --out a folder", ["synth", "--out", str(folder)]),
        ("stats: not a store", ["stats", str(folder)]),
        ("stats: --drop-damaged without --check", ["stats", s, "--drop-damaged"]),
        (
            "add: file missing",
            ["add", str(tmp / "live"), str(tmp / "none.json"), "--user", "u", "--embedder", EMB],
        ),
        ("add: not a list", ["add", str(tmp / "live"), data({"x": 1}), "--user", "u", "--embedder", EMB]),
        (
            "add: message without content",
            ["add", str(tmp / "live"), data([{"role": "user"}]), "--user", "u", "--embedder", EMB],
        ),
        (
            "add: bad timestamp",
            [
                "add",
                str(tmp / "live"),
                data([{"role": "u", "content": "x", "timestamp": "soon"}]),
                "--user",
                "u",
                "--embedder",
                EMB,
            ],
        ),
        (
            "add: id a number",
            [
                "add",
                str(tmp / "live"),
                data([{"role": "u", "content": "x", "id": 5}]),
                "--user",
                "u",
                "--embedder",
                EMB,
            ],
        ),
        (
            "add: unknown field",
            [
                "add",
                str(tmp / "live"),
                data([{"role": "u", "content": "x", "mood": 1}]),
                "--user",
                "u",
                "--embedder",
                EMB,
            ],
        ),
        (
            "add: empty user",
            [
                "add",
                str(tmp / "live"),
                data([{"role": "u", "content": "x"}]),
                "--user",
                "",
                "--embedder",
                EMB,
            ],
        ),
        (
            "add: into a bulk store with another embedder",
            ["add", s, data([{"role": "u", "content": "x"}]), "--user", "u", "--embedder", "hashing:32"],
        ),
        ("delete: unknown unit", ["delete", s, "nope", "--user", "u"]),
        ("delete: neither unit nor --all", ["delete", s, "--user", "u"]),
        ("history: not a store", ["history", str(folder), "--user", "u"]),
        ("unknown command", ["nope"]),
    ]
    rows, before = [], _store_state(store)
    for name, argv in cases:
        code, err = _run_cli(argv)
        lines = [x for x in err.strip().splitlines() if x.strip()]
        ours = [x for x in lines if x.startswith("xmemory")]
        rows.append(
            {
                "kind": name,
                "exit": code,
                "one_line": len(ours) == 1 and "error:" in ours[0],
                "traceback": "Traceback" in err,
                "wrong_exit": code not in (2,),
                "stderr": ours[-1] if ours else err[-300:],
            }
        )
    lost = before != _store_state(store)
    return {
        "kinds": len(rows),
        "one_line_errors": sum(r["one_line"] for r in rows),
        "tracebacks": sum(r["traceback"] for r in rows),
        "wrong_exit_codes": sum(r["wrong_exit"] for r in rows),
        "data_lost": int(lost),
        "rows": rows,
    }


def _random_store(tmp: Path) -> Path:
    p = tmp / "random_store"
    p.mkdir(exist_ok=True)
    (p / "memory.sqlite").write_bytes(os.urandom(4096))
    return p


def _dump(store: Path) -> dict:
    from xmemory_gpu.memory.store import Store

    st = Store.open(store)
    try:
        return {m: [x.__dict__ for x in st.get(m).semantics] for m in st.memory_ids()}
    finally:
        st.close()


def kill_builds(tmp: Path, kills: int, rng: random.Random) -> dict:
    from xmemory_gpu.datasets.synthetic import generate_conversations, write_json

    data = write_json(generate_conversations(40, seed=5), tmp / "k.json")
    cmd = [
        sys.executable,
        "-m",
        "xmemory_gpu",
        "build",
        str(data),
        "--embedder",
        EMB,
        "--no-progress",
        "--shard-size",
        "2",
    ]
    ref = tmp / "ref"
    subprocess.run(cmd + ["--out", str(ref)], check=True, env=ENV, capture_output=True, timeout=900)
    store = tmp / "killed"
    failed_reopen, done = 0, 0
    for _ in range(kills):
        p = subprocess.Popen(
            cmd + ["--out", str(store)], env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        time.sleep(rng.uniform(0.5, 4.0))
        p.send_signal(signal.SIGKILL)
        p.wait(timeout=60)
        done += 1
        try:
            if (store / "memory.sqlite").exists():
                _dump(store)
        except Exception:  # noqa: BLE001 - counted
            failed_reopen += 1
    subprocess.run(cmd + ["--out", str(store)], check=True, env=ENV, capture_output=True, timeout=900)
    a, b = _dump(ref), _dump(store)
    return {
        "kills": done,
        "lost": len(set(a) - set(b)),
        "duplicated": len(b) - len(set(b)),
        "extra": len(set(b) - set(a)),
        "failed_reopen": failed_reopen,
        "equal_to_uninterrupted": a == b,
    }


def kill_streams(tmp: Path, kills: int, rng: random.Random) -> dict:
    sys.path.insert(0, str(ROOT / "tests"))
    from test_engine import STREAM, _snapshot, committed_batches  # the test's stream, reused

    n = 200
    ref = tmp / "sref"
    subprocess.run(
        [sys.executable, "-c", STREAM, str(ref), "0", str(n)],
        check=True,
        env=ENV,
        timeout=900,
        capture_output=True,
    )
    store = tmp / "skilled"
    failed, done = 0, 0
    for _ in range(kills):
        try:
            start = committed_batches(store)
        except Exception:  # noqa: BLE001 - a half batch or an unreadable store
            failed += 1
            break
        if start >= n:
            break
        p = subprocess.Popen(
            [sys.executable, "-c", STREAM, str(store), str(start), str(n)],
            env=ENV,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        time.sleep(rng.uniform(0.8, 2.5))
        p.send_signal(signal.SIGKILL)
        p.wait(timeout=60)
        done += 1
    start = committed_batches(store)
    subprocess.run(
        [sys.executable, "-c", STREAM, str(store), str(start), str(n)],
        check=True,
        env=ENV,
        timeout=900,
        capture_output=True,
    )
    same = _snapshot(store) == _snapshot(ref)
    return {"kills": done, "failed_reopen": failed, "equal_to_uninterrupted": same, "batches": n}


_ENOSPC = """
import errno, sys
import numpy as np
from xmemory_gpu.cli import main
calls = {"n": 0}
real = np.savez
def savez(*a, **k):
    calls["n"] += 1
    if calls["n"] > int(sys.argv[3]):
        raise OSError(errno.ENOSPC, "No space left on device")
    return real(*a, **k)
np.savez = savez
sys.exit(main(["build", sys.argv[1], "--out", sys.argv[2], "--embedder", "hashing:64", "--no-progress", "--shard-size", "2"]))
"""


def disk_full(tmp: Path) -> dict:
    from xmemory_gpu.datasets.synthetic import generate_conversations, write_json

    data = write_json(generate_conversations(6, seed=2), tmp / "f.json")
    out = {}
    mnt = tmp / "tiny"
    mnt.mkdir()
    mounted = (
        subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=300k", "tmpfs", str(mnt)], capture_output=True
        ).returncode
        == 0
    )
    try:
        target = mnt / "store" if mounted else tmp / "enospc"
        if mounted:
            p = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "xmemory_gpu",
                    "build",
                    str(data),
                    "--out",
                    str(target),
                    "--embedder",
                    "hashing:384",
                    "--no-progress",
                    "--shard-size",
                    "1",
                ],
                env=ENV,
                capture_output=True,
                text=True,
                timeout=600,
            )
        else:
            p = subprocess.run(
                [sys.executable, "-c", _ENOSPC, str(data), str(target), "3"],
                env=ENV,
                capture_output=True,
                text=True,
                timeout=600,
            )
        err = [x for x in p.stderr.splitlines() if x.startswith("xmemory")]
        kept = _store_state(target)
        loadable = True
        try:
            _dump(target)
        except Exception:  # noqa: BLE001 - counted
            loadable = False
        named = _arrays_named(target)
        orphans = (
            [f.name for f in (target / "arrays").iterdir() if f.name not in named]
            if (target / "arrays").exists()
            else []
        )
        out = {
            "method": "tmpfs 300 KB" if mounted else "ENOSPC from a patched np.savez after 3 writes",
            "exit": p.returncode,
            "one_line_error": len(err) == 1 and "No space left" in err[0],
            "committed_memories": len(kept),
            "store_loads": loadable,
            "orphan_files": orphans,
            "message": err[-1] if err else p.stderr[-300:],
        }
    finally:
        if mounted:
            subprocess.run(["umount", str(mnt)], capture_output=True)
    return out


def read_only_store(tmp: Path) -> dict:
    """A store on a read-only mount (a bind mount remounted read-only: root ignores file modes):
    a build into it fails with one line and loses nothing; searching it still works."""
    from xmemory_gpu.datasets.synthetic import generate_conversations, write_json

    a = write_json(generate_conversations(3, seed=1), tmp / "a.json")
    more = write_json(generate_conversations(5, seed=1), tmp / "more.json")
    store = tmp / "ro"
    build = [sys.executable, "-m", "xmemory_gpu", "build"]
    subprocess.run(
        build + [str(a), "--out", str(store), "--embedder", EMB, "--no-progress"],
        check=True,
        env=ENV,
        capture_output=True,
        timeout=600,
    )
    before = _store_state(store)
    ok = (
        subprocess.run(["mount", "--bind", str(store), str(store)], capture_output=True).returncode == 0
        and subprocess.run(["mount", "-o", "remount,ro,bind", str(store)], capture_output=True).returncode
        == 0
    )
    if not ok:
        subprocess.run(["umount", str(store)], capture_output=True)
        return {"method": "not possible here (no bind mount)"}
    try:
        p = subprocess.run(
            build + [str(more), "--out", str(store), "--embedder", EMB, "--no-progress"],
            env=ENV,
            capture_output=True,
            text=True,
            timeout=600,
        )
        q = subprocess.run(
            [sys.executable, "-m", "xmemory_gpu", "search", str(store), "what is the job?"],
            env=ENV,
            capture_output=True,
            text=True,
            timeout=600,
        )
        err = [x for x in p.stderr.splitlines() if x.startswith("xmemory")]
    finally:
        subprocess.run(["umount", str(store)], capture_output=True)
    return {
        "method": "read-only bind mount",
        "build_exit": p.returncode,
        "one_line_error": len(err) == 1,
        "message": err[-1] if err else p.stderr[-300:],
        "nothing_lost": _store_state(store) == before,
        "search_exit": q.returncode,
    }


def _arrays_named(store: Path) -> set[str]:
    db = store / "memory.sqlite"
    if not db.exists():
        return set()
    with contextlib.closing(sqlite3.connect(db)) as c:
        return {r[0] for r in c.execute("SELECT arrays_file FROM memories")}


def two_writers(tmp: Path) -> dict:
    from xmemory_gpu.datasets.synthetic import generate_conversations, write_json

    data = write_json(generate_conversations(12, seed=6), tmp / "w.json")
    store = tmp / "two"
    cmd = [
        sys.executable,
        "-m",
        "xmemory_gpu",
        "build",
        str(data),
        "--out",
        str(store),
        "--embedder",
        EMB,
        "--no-progress",
    ]
    ps = [
        subprocess.Popen(cmd, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    res = [(p.wait(timeout=600), p.stderr.read()) for p in ps]
    codes = sorted(c for c, _ in res)
    refused = [e for c, e in res if c == 2]
    ok = True
    try:
        n = len(_dump(store))
    except Exception:  # noqa: BLE001 - counted
        ok, n = False, 0
    return {
        "exit_codes": codes,
        "refused_message": refused[0].strip()[-200:] if refused else "",
        "store_loads": ok,
        "memories": n,
        "both_succeeded": codes == [0, 0],
    }


# -- the live engine's write path: bad input at every front door, forgetting, kills, fairness -----------

LIVE_EMB = "hashing:384"
SURROGATE = "\ud800"
OUTCOMES = ("clean", "vague", "raw", "silent", "lost", "accepted")
_SIGNATURE = re.compile(r"unexpected keyword argument|missing \d+ required")
Attempt = Callable[[], tuple[str, str]]  # -> ("ok" | "clean" | "vague" | "raw", what came back)


class Deadline:
    """The campaign's global time limit: bounded loops stop early once it has passed (and say so)."""

    def __init__(self, seconds: float) -> None:
        self.end = time.monotonic() + seconds

    def left(self) -> float:
        return self.end - time.monotonic()

    @property
    def passed(self) -> bool:
        return self.left() <= 0


def _deep(n: int) -> dict:
    """A JSON object nested ``n`` deep, built without recursion."""
    d: dict = {}
    for _ in range(n - 1):
        d = {"a": d}
    return d


def _deep_json(n: int) -> str:
    return '{"a":' * (n - 1) + "{}" + "}" * (n - 1)


def _names(msg: str, field: str) -> bool:
    """Whether ``msg`` is one line that names ``field``."""
    return "\n" not in msg.strip() and field.lower() in msg.lower()


def _error_outcome(exc: BaseException, field: str) -> tuple[str, str]:
    """A Python front door's refusal: ``clean`` (a one-line ValueError / KeyError naming the field, or
    Python's own signature error naming the argument), ``vague`` (one that does not name it), ``raw``
    (any other exception type escaping, a codec error, a pydantic dump)."""
    msg = str(exc.args[0]) if isinstance(exc, KeyError) and exc.args else str(exc)
    shown = f"{type(exc).__name__}: {msg}"
    if isinstance(exc, TypeError) and _SIGNATURE.search(msg):
        return ("clean" if _names(msg, field) else "vague"), shown
    if isinstance(exc, UnicodeError) or type(exc).__name__ == "ValidationError":
        return "raw", shown
    if isinstance(exc, (ValueError, KeyError)):
        return ("clean" if _names(msg, field) else "vague"), shown
    return "raw", shown


def _call(fn: Callable[[], Any], field: str) -> tuple[str, str]:
    """``fn()`` as an attempt: ``ok`` and its result, or its refusal classified."""
    try:
        res = fn()
    except Exception as exc:  # noqa: BLE001 - every escaping exception is classified
        return _error_outcome(exc, field)
    return "ok", repr(res)


def _probe(
    surface: str, kind: str, attempt: Attempt, snapshot: Callable[[], str], expect: str = "refuse"
) -> dict:
    """One bad-input kind against one surface: ``silent`` when accepted (``accepted`` where the rules
    allow it: ``expect="either"``), ``lost`` when refused but the stored data changed, else the
    refusal's class."""
    before = snapshot()
    status, said = attempt()
    changed = snapshot() != before
    if status == "ok":
        outcome = "accepted" if expect == "either" else "silent"
    else:
        outcome = "lost" if changed else status
    return {"surface": surface, "kind": kind, "outcome": outcome, "said": said[:300]}


def _engine_snapshot(e: Any) -> str:
    """What a refused request must not change: every unit of every scope."""
    try:
        return json.dumps([(s, e.get_all(**s)) for s in e.scopes()], sort_keys=True, default=str)
    except Exception as exc:  # noqa: BLE001 - an unreadable store differs from any readable one
        return f"unreadable: {type(exc).__name__}: {exc}"


def _seed(e: Any) -> str:
    """The scope every probe runs against (user ``u``, one message with metadata); its message id."""
    return e.add([{"role": "user", "content": "I like green tea."}], user_id="u", metadata={"topic": "tea"})[
        0
    ]


def _engine_probes(tmp: Path) -> list[dict]:
    from xmemory_gpu.engine import MemoryEngine

    ok = [{"role": "user", "content": "I like green tea."}]

    def msg(**kw: Any) -> list[dict]:
        return [{**ok[0], **kw}]

    with MemoryEngine.open(tmp / "engine", embedder=LIVE_EMB) as e:
        mid = _seed(e)

        def add(messages: Any = ok, **kw: Any) -> Callable[[], Any]:
            return lambda: e.add(messages, **{"user_id": "u", **kw})

        def search(query: Any = "what tea do I like?", **kw: Any) -> Callable[[], Any]:
            return lambda: e.search(query, **{"user_id": "u", **kw})

        def opened(**kw: Any) -> Callable[[], Any]:
            def go() -> str:
                with MemoryEngine.open(tmp / f"open{random.getrandbits(32)}", embedder=LIVE_EMB, **kw):
                    return "opened"

            return go

        cases: list[tuple[str, str, Callable[[], Any], str]] = [
            ("user_id: a number", "user_id", add(user_id=5), "refuse"),
            ("user_id: NUL", "user_id", add(user_id="a\x00b"), "refuse"),
            ("user_id: lone surrogate", "user_id", add(user_id="u" + SURROGATE), "refuse"),
            ("messages: a string", "messages", add("I like green tea."), "either"),  # mem0: one user message
            ("content: a number", "content", add(msg(content=5)), "refuse"),
            ("content: empty", "content", add(msg(content="")), "refuse"),
            ("content: lone surrogate", "content", add(msg(content="tea " + SURROGATE)), "refuse"),
            ("role: a number", "role", add(msg(role=5)), "refuse"),
            ("timestamp: a boolean", "timestamp", add(msg(timestamp=True)), "refuse"),
            ("timestamp: a string of digits", "timestamp", add(msg(timestamp="1700000000")), "refuse"),
            ("session: a string of digits", "session", add(msg(session="3")), "refuse"),
            ("session: an integral float", "session", add(msg(session=3.0)), "either"),
            ("id: NUL", "id", add(msg(id="m\x00")), "refuse"),
            ("message: unknown field", "mood", add(msg(mood="happy")), "refuse"),
            ("add: unknown argument", "colour", add(colour="red"), "refuse"),
            ("metadata: a list", "metadata", add(metadata=[1]), "refuse"),
            ("metadata: nested 3,000 deep", "metadata", add(metadata=_deep(3000)), "refuse"),
            ("metadata: lone-surrogate key", "metadata", add(metadata={SURROGATE: 1}), "refuse"),
            ("user_name: a number", "user_name", add(user_name=5), "refuse"),
            ("search: 200,000-character query", "query", search("q" * 200_000), "refuse"),
            ("search: limit 0", "limit", search(limit=0), "refuse"),
            ("search: limit 10**12", "limit", search(limit=10**12), "refuse"),
            ("search: limit a boolean", "limit", search(limit=True), "refuse"),
            ("search: threshold a string of digits", "threshold", search(threshold="0.5"), "refuse"),
            ("search: budget_tokens 10**12", "budget_tokens", search(budget_tokens=10**12), "refuse"),
            ("search: strategy a number", "strategy", search(strategy=5), "refuse"),
            ("search: filters a string", "filters", search(filters="topic=tea"), "refuse"),
            (
                "search: filters lone-surrogate value",
                "filters",
                search(filters={"topic": SURROGATE}),
                "refuse",
            ),
            ("update: empty text", "text", lambda: e.update(mid, "", user_id="u"), "refuse"),
            ("open: reader a number", "reader", opened(reader=5), "refuse"),
            ("open: reader an unknown spec", "reader", opened(reader="nope:x"), "refuse"),
        ]
        return [
            _probe("engine", k, lambda fn=fn, f=f: _call(fn, f), lambda: _engine_snapshot(e), x)
            for k, f, fn, x in cases
        ]


def _http_attempt(client: Any, method: str, path: str, body: str | None, field: str) -> tuple[str, str]:
    """One request: ``ok`` (2xx), ``raw`` (a 5xx, or the request itself failing), ``clean`` (a 4xx whose
    JSON ``detail`` is one line naming the field) or ``vague``."""
    try:
        r = client.request(
            method,
            path,
            content=None if body is None else body.encode(),
            headers={"content-type": "application/json"},
        )
    except Exception as exc:  # noqa: BLE001 - a request the server could not answer
        return "raw", f"{type(exc).__name__}: {exc}"
    if r.status_code < 300:
        return "ok", f"{r.status_code}"
    if r.status_code >= 500:
        return "raw", f"{r.status_code} {r.text}"
    try:
        detail = r.json().get("detail")
    except ValueError:
        detail = None
    said = f"{r.status_code} {detail if isinstance(detail, str) else r.text}"
    return ("clean" if isinstance(detail, str) and _names(detail, field) else "vague"), said


def _http_probes(tmp: Path) -> list[dict]:
    """The HTTP service in process (FastAPI's TestClient: no socket is bound)."""
    from fastapi.testclient import TestClient

    from xmemory_gpu.engine import MemoryEngine
    from xmemory_gpu.service import ServiceConfig, create_app

    e = MemoryEngine.open(tmp / "http", embedder=LIVE_EMB)
    mid = _seed(e)
    deep = "@DEEP@"

    def body(obj: dict) -> str:
        return json.dumps(obj).replace(json.dumps(deep), _deep_json(3000))

    def add(over: dict | None = None, **msg: Any) -> tuple[str, str, str]:
        return (
            "POST",
            "/v1/memories",
            body(
                {
                    "user_id": "u",
                    "messages": [{"role": "user", "content": "I like green tea.", **msg}],
                    **(over or {}),
                }
            ),
        )

    def search(**over: Any) -> tuple[str, str, str]:
        return "POST", "/v1/search", body({"user_id": "u", "query": "what tea do I like?", **over})

    cases: list[tuple[str, str, tuple[str, str, str | None], str]] = [
        ("user_id: a number", "user_id", add({"user_id": 5}), "refuse"),
        ("user_id: NUL", "user_id", add({"user_id": "a\x00b"}), "refuse"),
        (
            "messages: a string",
            "messages",
            add({"messages": "I like green tea."}),
            "either",
        ),  # mem0: one user message
        ("content: empty", "content", add(content=""), "refuse"),
        ("content: lone surrogate", "content", add(content="tea " + SURROGATE), "refuse"),
        ("role: a number", "role", add(role=5), "refuse"),
        ("timestamp: a boolean", "timestamp", add(timestamp=True), "refuse"),
        ("session: a string of digits", "session", add(session="3"), "refuse"),
        ("session: an integral float", "session", add(session=3.0), "either"),
        ("id: NUL", "id", add(id="m\x00"), "refuse"),
        ("metadata: nested 3,000 deep", "metadata", add({"metadata": deep}), "refuse"),
        ("metadata: lone-surrogate key", "metadata", add({"metadata": {SURROGATE: 1}}), "refuse"),
        ("body: unknown field", "colour", add({"colour": "red"}), "refuse"),
        ("search: 200,000-character query", "query", search(query="q" * 200_000), "refuse"),
        ("search: limit -1", "limit", search(limit=-1), "refuse"),
        ("search: limit a string of digits", "limit", search(limit="5"), "refuse"),
        ("search: threshold a boolean", "threshold", search(threshold=True), "refuse"),
        ("search: budget_tokens 10**12", "budget_tokens", search(budget_tokens=10**12), "refuse"),
        ("search: strategy unknown", "strategy", search(strategy="nope"), "refuse"),
        ("search: filters a string", "filters", search(filters="topic=tea"), "refuse"),
        (
            "update: empty text",
            "text",
            ("PUT", f"/v1/memories/{mid}", body({"user_id": "u", "text": ""})),
            "refuse",
        ),
        ("delete: NUL in unit id", "unit", ("DELETE", "/v1/memories/a%00b?user_id=u", None), "refuse"),
    ]
    with TestClient(create_app(e, ServiceConfig(coalesce_ms=0)), raise_server_exceptions=False) as c:
        return [
            _probe("http", k, lambda r=r, f=f: _http_attempt(c, *r, f), lambda: _engine_snapshot(e), x)
            for k, f, r, x in cases
        ]


def _mcp_attempt(server: Any, tool: str, args: dict, field: str) -> tuple[str, str]:
    """One tool call in process: ``ok``, ``raw`` (the SDK's wrapper of an unexpected exception, or an
    exception escaping the call), or the tool error's text classified."""
    import anyio
    from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError

    async def go() -> tuple[str, str]:
        try:
            res = await server.call_tool(tool, args)
        except UnexpectedToolError as exc:
            cause = exc.__cause__
            return "raw", f"{exc} <- {type(cause).__name__}: {cause}"
        except ToolError as exc:
            return ("clean" if _names(str(exc), field) else "vague"), f"ToolError: {exc}"
        except Exception as exc:  # noqa: BLE001 - escaped the SDK
            return "raw", f"{type(exc).__name__}: {exc}"
        text = " ".join(getattr(c, "text", "") for c in getattr(res, "content", []) or [])
        if getattr(res, "is_error", False):
            return ("clean" if _names(text, field) else "vague"), text
        return "ok", text

    return anyio.run(go)


def _mcp_probes(tmp: Path) -> list[dict]:
    from xmemory_gpu.engine import MemoryEngine
    from xmemory_gpu.integrations.mcp_server import create_server

    with MemoryEngine.open(tmp / "mcp", embedder=LIVE_EMB) as e:
        mid = _seed(e)
        server = create_server(e)
        q = {"query": "what tea do I like?"}
        cases: list[tuple[str, str, str, dict, str]] = [
            (
                "user_id: a number",
                "user_id",
                "add",
                {"messages": "I like green tea.", "user_id": 5},
                "refuse",
            ),
            ("content: a number", "content", "add", {"messages": [{"content": 5}]}, "refuse"),
            ("role: a number", "role", "add", {"messages": [{"content": "x", "role": 5}]}, "refuse"),
            (
                "timestamp: a boolean",
                "timestamp",
                "add",
                {"messages": [{"content": "x", "timestamp": True}]},
                "refuse",
            ),
            (
                "id: lone surrogate",
                "id",
                "add",
                {"messages": [{"content": "x", "id": "m" + SURROGATE}]},
                "refuse",
            ),
            (
                "metadata: nested 3,000 deep",
                "metadata",
                "add",
                {"messages": "x", "metadata": _deep(3000)},
                "refuse",
            ),
            (
                "metadata: lone-surrogate value",
                "metadata",
                "add",
                {"messages": "x", "metadata": {"k": SURROGATE}},
                "refuse",
            ),
            ("add: unknown argument", "colour", "add", {"messages": "x", "colour": "red"}, "refuse"),
            ("search: limit 10**12", "limit", "search", {**q, "limit": 10**12}, "refuse"),
            ("search: limit an integral float", "limit", "search", {**q, "limit": 3.0}, "either"),
            (
                "search: budget_tokens a string of digits",
                "budget_tokens",
                "search",
                {**q, "budget_tokens": "600"},
                "refuse",
            ),
            ("search: 200,000-character query", "query", "search", {"query": "q" * 200_000}, "refuse"),
            ("update: empty text", "text", "update", {"unit_id": mid, "text": ""}, "refuse"),
            ("delete: NUL in unit id", "unit_id", "delete", {"unit_id": "a\x00b"}, "refuse"),
        ]
        return [
            _probe(
                "mcp",
                k,
                lambda t=t, a=a, f=f: _mcp_attempt(server, t, {"user_id": "u", **a}, f),
                lambda: _engine_snapshot(e),
                x,
            )
            for k, f, t, a, x in cases
        ]


def _langgraph_probes(tmp: Path) -> list[dict]:
    from xmemory_gpu.integrations.langgraph import XMemoryStore

    def opened(**kw: Any) -> Callable[[], Any]:
        def go() -> int:
            with XMemoryStore.open(tmp / f"lg{random.getrandbits(32)}", embedder=LIVE_EMB, **kw) as s:
                s.put(("u",), "k", {"text": "I like green tea."})
                return len(s.search(("u",), query="what tea do I like?"))

        return go

    with XMemoryStore.open(tmp / "langgraph", embedder=LIVE_EMB) as st:
        st.put(("u",), "k0", {"text": "I like green tea.", "topic": "tea"})

        def snapshot() -> str:
            items = [(i.namespace, i.key, i.value) for i in st.search(("u",), limit=1000)]
            return _engine_snapshot(st.engine) + json.dumps(items, sort_keys=True, default=str)

        def put(ns: Any, key: Any, value: Any, **kw: Any) -> Callable[[], Any]:
            return lambda: st.put(ns, key, value, **kw)

        def search(**kw: Any) -> Callable[[], Any]:
            return lambda: st.search(("u",), **kw)

        cases: list[tuple[str, str, Callable[[], Any], str]] = [
            ("namespace: NUL in a label", "namespace", put(("u\x00x",), "k", {"text": "x"}), "refuse"),
            (
                "namespace: lone-surrogate label",
                "namespace",
                put(("u" + SURROGATE,), "k", {"text": "x"}),
                "refuse",
            ),
            ("key: a number", "key", put(("u",), 5, {"text": "x"}), "refuse"),
            ("value: a string", "value", put(("u",), "k", "just text"), "refuse"),
            (
                "value: nested 3,000 deep",
                "value",
                put(("u",), "k", {"text": "x", "d": _deep(3000)}),
                "refuse",
            ),
            ("value: lone-surrogate key", "value", put(("u",), "k", {"text": "x", SURROGATE: 1}), "refuse"),
            ("value: lone-surrogate text", "text", put(("u",), "k", {"text": "tea " + SURROGATE}), "refuse"),
            ("index: a string", "index", put(("u",), "k", {"text": "x"}, index="text"), "refuse"),
            ("search: limit -1", "limit", search(limit=-1), "refuse"),
            ("search: limit a boolean", "limit", search(limit=True), "refuse"),
            ("search: 200,000-character query", "query", search(query="q" * 200_000), "refuse"),
            ("open: strategy a number", "strategy", opened(strategy=5), "refuse"),
            ("open: budget_tokens 10**12", "budget_tokens", opened(budget_tokens=10**12), "refuse"),
        ]
        return [_probe("langgraph", k, lambda fn=fn, f=f: _call(fn, f), snapshot, x) for k, f, fn, x in cases]


def _client_probes() -> list[dict]:
    """The clients only need constructing: a key a header cannot hold must be refused there."""
    from xmemory_gpu.client import AsyncMemoryClient, MemoryClient

    rows = []
    for make in (MemoryClient, AsyncMemoryClient):
        for kind, key in (("CR/LF in api_key", "abc\r\nX-Injected: 1"), ("LF in api_key", "abc\ndef")):
            rows.append(
                _probe(
                    "clients",
                    f"{make.__name__}: {kind}",
                    lambda make=make, key=key: _call(
                        lambda: make("http://127.0.0.1:9", api_key=key), "api_key"
                    ),
                    lambda: "",
                )
            )
    return rows


def input_kinds(tmp: Path, deadline: Deadline) -> dict:
    """Bad-input kinds per surface (engine, HTTP, MCP, LangGraph store, clients), each classified
    (``OUTCOMES``); a surface whose optional dependency is missing is skipped and named."""
    surfaces: list[tuple[str, Callable[[], list[dict]]]] = [
        ("engine", lambda: _engine_probes(tmp)),
        ("http", lambda: _http_probes(tmp)),
        ("mcp", lambda: _mcp_probes(tmp)),
        ("langgraph", lambda: _langgraph_probes(tmp)),
        ("clients", _client_probes),
    ]
    rows: list[dict] = []
    skipped: dict[str, str] = {}
    for name, run in surfaces:
        if deadline.passed:
            skipped[name] = "deadline"
            continue
        try:
            rows += run()
        except ImportError as exc:
            skipped[name] = f"not installed: {exc.name or exc}"
        except Exception as exc:  # noqa: BLE001 - a surface that cannot be set up is named, the others still run
            skipped[name] = f"failed: {type(exc).__name__}: {exc}"[:300]
    per = {
        s: {o: sum(r["outcome"] == o for r in rows if r["surface"] == s) for o in OUTCOMES}
        for s in dict.fromkeys(r["surface"] for r in rows)
    }
    total = {o: sum(v[o] for v in per.values()) for o in OUTCOMES}
    return {"kinds": len(rows), "per_surface": per, "total": total, "skipped": skipped, "rows": rows}


# -- deletes that forget: token copies left behind -------------------------------------------------------

TOKENS = {
    "content": "Qcontenttokzz",
    "metadata": "Qmetatokzz",
    "message_id": "qmsgidtokzz",
    "name_claim": "Qzxwvy",
    "name_field": "Qnamefieldzz",
    "user_id": "quseridtokzz",
}
_ENCODINGS = ("utf-8", "utf-16-le", "utf-32-le")  # text columns, and numpy's fixed-width strings
CONTROL = "after add (control)"
_QUERIES = [
    "What beads do I keep on my desk?",
    "What is my name?",
    "What does my sister collect?",
    "Tell me about me.",
]


def _token_messages() -> list[dict]:
    t = TOKENS
    return [
        {"role": "user", "content": f"My name is {t['name_claim']}."},
        {
            "role": "user",
            "content": f"I keep a jar of {t['content']} beads on my desk.",
            "id": t["message_id"],
        },
        {"role": "user", "name": t["name_field"], "content": "My sister collects old maps of Lisbon."},
    ]


def _copies_in_files(store: Path) -> dict[str, dict[str, int]]:
    """Token kind -> file (relative to the store) -> occurrences, case-insensitive, in each encoding."""
    out: dict[str, dict[str, int]] = {k: {} for k in TOKENS}
    for f in sorted(p for p in store.rglob("*") if p.is_file()):
        try:
            data = f.read_bytes().lower()
        except OSError:
            continue
        for k, tok in TOKENS.items():
            n = sum(data.count(tok.lower().encode(enc)) for enc in _ENCODINGS)
            if n:
                out[k][str(f.relative_to(store))] = n
    return out


def _copies_in_outputs(e: Any, user_id: str) -> dict[str, int]:
    """Token kind -> occurrences in ``get_all``, ``search`` (less the echoed query and scope) and ``history``."""
    found = [
        {k: v for k, v in r.to_dict().items() if k not in ("query", "memory_id")}
        for r in e.search(_QUERIES, user_id=user_id)
    ]
    text = json.dumps(
        [e.get_all(user_id=user_id), found, e.history(user_id=user_id)], ensure_ascii=False, default=str
    ).lower()
    return {k: text.count(tok.lower()) for k, tok in TOKENS.items()}


def _measure(e: Any, store: Path, user_id: str) -> dict:
    """Copies per token kind with the engine open (files incl. the WAL; outputs), then closed (files)."""
    outputs, opened = _copies_in_outputs(e, user_id), _copies_in_files(store)
    e.close()
    closed = _copies_in_files(store)
    return {
        k: {
            "files_open": sum(opened[k].values()),
            "files_closed": sum(closed[k].values()),
            "outputs": outputs[k],
            "where": sorted(set(opened[k]) | set(closed[k])),
        }
        for k in TOKENS
    }


def deletion_copies(tmp: Path) -> dict:
    """Tokens added, then forgotten three ways: their messages deleted (the scope stays), the scope's
    ``delete_all``, and ``reset``; copies of each token counted after each (goal 0, the user id's
    too once its scope is gone)."""
    from xmemory_gpu.engine import MemoryEngine

    store, uid = tmp / "copies", TOKENS["user_id"]

    def opened() -> Any:
        return MemoryEngine.open(store, embedder=LIVE_EMB)

    def add_tokens(e: Any) -> list[str]:
        e.add([{"role": "user", "content": "I go running every morning before work."}], user_id=uid)
        return e.add(_token_messages(), user_id=uid, metadata={"tag": TOKENS["metadata"]})

    e = opened()
    ids = add_tokens(e)
    phases = {CONTROL: _measure(e, store, uid)}  # the tokens are found where they are
    e = opened()
    for mid in ids:
        e.delete(mid, user_id=uid)
    phases["after delete"] = _measure(e, store, uid)
    e = opened()
    e.delete_all(user_id=uid)
    phases["after delete_all"] = _measure(e, store, uid)
    e = opened()
    add_tokens(e)
    e.reset()
    phases["after reset"] = _measure(e, store, uid)
    left = {
        p: {
            k: v["files_open"] + v["files_closed"] + v["outputs"]
            for k, v in rows.items()
            if k != "user_id" or p != "after delete"
        }
        for p, rows in phases.items()
        if p != CONTROL
    }
    return {"tokens": TOKENS, "phases": phases, "copies_left": left}


# -- resurrection of a deleted statement ------------------------------------------------------------------


def _pin_statements(e: Any, user_id: str) -> list[dict]:
    return [
        u for u in e.get_all(user_id=user_id) if u["type"] in ("semantic", "theme") and "4417" in u["text"]
    ]


def resurrection(tmp: Path) -> dict:
    """A statement deleted by its ``semantic:N`` must stay gone when later adds re-derive the memory
    (a name given in a message; a ``user_name``); statements (and themes) mentioning 4417 counted."""
    from xmemory_gpu.engine import MemoryEngine

    uid, steps = "pin-user", {}

    def count(e: Any) -> dict[str, int]:
        units = _pin_statements(e, uid)
        return {
            "statements": sum(u["type"] == "semantic" for u in units),
            "themes": sum(u["type"] == "theme" for u in units),
        }

    with MemoryEngine.open(tmp / "pin", embedder=LIVE_EMB) as e:
        e.add([{"role": "user", "content": "My bank PIN is 4417 and I keep it secret."}], user_id=uid)
        steps["after add"] = count(e)
        deleted = []
        for _ in range(5):  # bounded: one delete per statement found
            sem = [u["id"] for u in _pin_statements(e, uid) if u["type"] == "semantic"]
            if not sem:
                break
            e.delete(sem[0], user_id=uid)
            deleted.append(sem[0])
        steps["after delete"] = count(e)
        e.add([{"role": "user", "content": "Hi, I'm Priya."}], user_id=uid)
        steps["after a name in a message"] = count(e)
        e.add([{"role": "user", "content": "I walked the dog this morning."}], user_id=uid, user_name="Priya")
        steps["after user_name"] = count(e)
    with MemoryEngine.open(tmp / "pin", embedder=LIVE_EMB) as e:
        steps["after reopen"] = count(e)
    return {"deleted": deleted, "steps": steps, "resurrected": steps["after reopen"]["statements"]}


# -- kills between an add and what follows it -------------------------------------------------------------

_ADDER = """
import sys
from xmemory_gpu.engine import MemoryEngine
store, start, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
names = ["Alice", "Priya", "Sam", "Maria"]
with MemoryEngine.open(store, embedder="hashing:384") as e:
    print("ready", flush=True)
    for i in range(start, start + n):
        text = f"Note {i}: I planted {i % 97} tulips in the garden."
        if i % 5 == 0:
            text = f"My name is {names[(i // 5) % 4]}. " + text
        mine = [{"role": "user", "content": text, "id": f"u{i}"}, {"role": "assistant", "content": f"Noted {i}.", "id": f"a{i}"}]
        if i % 3 == 0:  # a batch over two memories: all of it or none
            e.add_batch([{"user_id": "k", "messages": mine},
                          {"user_id": "k2", "messages": [{"role": "user", "content": f"Other {i}.", "id": f"o{i}"}]}])
            print(f"ack u{i} a{i} o{i}", flush=True)
        else:
            e.add(mine, user_id="k")
            print(f"ack u{i} a{i}", flush=True)
"""


def _half_applied(units: list[dict]) -> bool:
    """Whether the role-user messages of a memory show two speakers, or not the name given last."""
    msgs = [u for u in units if u["type"] == "message" and u["id"].startswith("u")]
    claims = [m.group(1) for u in msgs if (m := re.search(r"My name is ([A-Z][a-z]+)\.", u["text"]))]
    speakers = {u["speaker"] for u in msgs}
    return len(speakers) > 1 or bool(claims) and speakers != {claims[-1]}


def kill_engine_adds(tmp: Path, kills: int, rng: random.Random, deadline: Deadline) -> dict:
    """An adder process (ids printed, flushed, after each add returns) SIGKILLed at random moments;
    after each kill the store is reopened: acknowledged ids missing (lost), memories half-applied
    (``_half_applied``), adds found in part (a message of an add without the other, a two-memory
    batch in one memory only; acknowledged or not), reopens that failed."""
    import threading

    from xmemory_gpu.engine import MemoryEngine

    store, per_run = tmp / "adds", 100_000
    acked: set[str] = set()
    lost = half = half_reopens = split = failed = done = not_ready = 0
    detail = []
    for run in range(kills):
        if deadline.left() < 30:
            break
        p = subprocess.Popen(
            [sys.executable, "-c", _ADDER, str(store), str(run * per_run), str(per_run)],
            env=ENV,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        lines: list[list[str]] = []
        ready = threading.Event()

        def pump(
            p: subprocess.Popen = p, lines: list[list[str]] = lines, ready: threading.Event = ready
        ) -> None:
            for line in p.stdout:
                lines.append(line.split())
                ready.set()

        reader = threading.Thread(target=pump, daemon=True)
        reader.start()
        if not ready.wait(timeout=120):
            not_ready += 1
        time.sleep(rng.uniform(0.05, 1.5))
        p.send_signal(signal.SIGKILL)
        p.wait(timeout=60)
        reader.join(timeout=10)
        done += 1
        for words in lines:
            if words and words[0] == "ack":
                acked.update(words[1:])
        try:
            with MemoryEngine.open(store, embedder=LIVE_EMB) as e:
                units = {u: e.get_all(user_id=u) for u in ("k", "k2")}
        except Exception as exc:  # noqa: BLE001 - counted
            failed += 1
            detail.append({"run": run, "reopen": f"{type(exc).__name__}: {exc}"})
            continue
        present = {x["id"] for us in units.values() for x in us if x["type"] == "message"}
        gone = acked - present
        halves = [u for u, us in units.items() if _half_applied(us)]
        started = {int(x[1:]) for x in present if x[:1] in "uao" and x[1:].isdigit()}
        splits = sum(
            0 < sum(f"{c}{i}" in present for c in whole) < len(whole)
            for i in started
            for whole in ["uao" if i % 3 == 0 else "ua"]
        )
        lost, half, split = (
            len(gone),
            len(halves),
            splits,
        )  # the state at this reopen: every acknowledgement so far
        half_reopens += bool(halves)
        detail.append(
            {
                "run": run,
                "acked": sum(w[:1] == ["ack"] for w in lines),
                "lost": sorted(gone)[:10],
                "half_applied": halves,
            }
        )
    return {
        "kills": done,
        "acknowledged_ids": len(acked),
        "lost": lost,
        "half_applied": half,
        "half_applied_reopens": half_reopens,
        "split_adds": split,
        "failed_reopen": failed,
        "adder_never_ready": not_ready,
        "runs": detail,
    }


# -- fairness: one small add behind a large batch ---------------------------------------------------------

_TOPICS = ["hiking", "cooking", "the garden", "work", "my sister", "a trip to Lisbon", "the new job", "books"]


def _bulk(users: int, messages: int, user: str | None = None) -> list[dict]:
    """``users`` items of ``messages`` messages each (all for ``user`` when given, else one user each)."""
    return [
        {
            "user_id": user or f"bulk{u}",
            "messages": [
                {
                    "role": "user" if j % 2 == 0 else "assistant",
                    "content": f"Day {j}: we talked about {_TOPICS[j % 8]}, item {j * 7 + u}.",
                }
                for j in range(messages)
            ],
        }
        for u in range(users)
    ]


def _behind(e: Any, items: list[dict], delay: float = 0.5) -> dict:
    """``add_batch(items)`` in one thread; ``delay`` seconds later another user's one-message add:
    its latency, the batch's duration and its outcome."""
    import threading

    out: dict[str, Any] = {}

    def big() -> None:
        t = time.perf_counter()
        try:
            e.add_batch(items)
            out["batch"] = "accepted"
        except Exception as exc:  # noqa: BLE001 - a refusal is an answer
            out["batch"] = f"refused: {type(exc).__name__}: {exc}"
        out["batch_s"] = round(time.perf_counter() - t, 3)

    th = threading.Thread(target=big)
    t0 = time.perf_counter()
    th.start()
    time.sleep(delay)
    t = time.perf_counter()
    e.add([{"role": "user", "content": "I just moved to Porto."}], user_id="small-user")
    out["small_add_latency_s"] = round(time.perf_counter() - t, 3)
    out["small_add_started_s"] = round(t - t0, 3)
    th.join(timeout=1800)
    out["batch_running_then"] = out.get("batch_s", float("inf")) > out["small_add_started_s"]
    return out


def fairness(tmp: Path, users: int, messages: int) -> dict:
    """``add_batch`` of ``users`` x ``messages`` for one user (the engine may refuse it: bounded), then
    the largest batch it accepts (``users`` users, the per-memory and per-batch limits kept); each
    with another user's one-message add 0.5 s after it starts."""
    from xmemory_gpu.engine import MemoryEngine

    with MemoryEngine.open(tmp / "fair", embedder=LIVE_EMB) as e:
        t = time.perf_counter()
        e.add([{"role": "user", "content": "Warm-up: I like green tea."}], user_id="small-user")
        idle = round(time.perf_counter() - t, 3)
        one_user = _behind(e, _bulk(users, messages, user="bulk-one"))
        lim = e.limits
        per = max(1, min(messages, lim.max_messages, lim.max_batch_messages // max(1, users)))
        n = min(users, lim.max_items)
        largest = _behind(e, _bulk(n, per))
    return {
        "asked": {"items": users, "messages_per_item": messages, "one_user": True, **one_user},
        "largest_accepted": {"items": n, "messages_per_item": per, "users": n, **largest},
        "idle_add_latency_s": idle,
    }


# -- the report -----------------------------------------------------------------------------------------

SECTIONS = ("cli", "builds", "disk", "writers", "inputs", "copies", "resurrect", "kills", "fair")
_PARTS = {"a": "cli", "b": "builds", "c": "disk", "d": "writers"}  # the earlier --parts letters


def _markdown(report: dict) -> str:
    """The figures as short markdown tables."""
    out: list[str] = []
    if "inputs" in report:
        r = report["inputs"]
        out += [
            f"### Bad input ({r['kinds']} kinds)",
            "",
            "| surface | " + " | ".join(OUTCOMES) + " |",
            "|---" * (len(OUTCOMES) + 1) + "|",
        ]
        for s, v in {**r["per_surface"], "all": r["total"]}.items():
            out.append(f"| {s} | " + " | ".join(str(v[o]) for o in OUTCOMES) + " |")
        if r["skipped"]:
            out.append(f"\nskipped: {r['skipped']}")
        out.append("")
    if "copies" in report:
        c = report["copies"]
        phases = list(c["phases"])
        out += [
            "### Copies left after forgetting (files open + files closed + outputs; goal 0 but for the control)",
            "",
            "| token | " + " | ".join(phases) + " |",
            "|---" * (len(phases) + 1) + "|",
        ]
        for k in TOKENS:
            cells = []
            for p in phases:
                v = c["phases"][p][k]
                cells.append(
                    f"{v['files_open']} + {v['files_closed']} + {v['outputs']}"
                    + (" (scope alive)" if k == "user_id" and p in ("after delete", CONTROL) else "")
                )
            out.append(f"| {k} | " + " | ".join(cells) + " |")
        out.append("")
    if "resurrect" in report:
        r = report["resurrect"]
        out += [
            "### Resurrection (statements / themes mentioning 4417; goal 0 after the delete)",
            "",
            "| step | statements | themes |",
            "|---|---|---|",
        ]
        out += [f"| {s} | {v['statements']} | {v['themes']} |" for s, v in r["steps"].items()]
        out.append("")
    if "kill_engine_adds" in report:
        r = report["kill_engine_adds"]
        out += [
            "### Kills between adds",
            "",
            "| kills | acknowledged ids | lost | half-applied (last reopen) | reopens with half-applied "
            "| adds found in part | failed reopens |",
            "|---|---|---|---|---|---|---|",
            f"| {r['kills']} | {r['acknowledged_ids']} | {r['lost']} | {r['half_applied']} | {r['half_applied_reopens']} | "
            f"{r['split_adds']} | {r['failed_reopen']} |",
            "",
        ]
    if "fairness" in report:
        r = report["fairness"]
        out += [
            "### Fairness (one add 0.5 s behind a large add_batch)",
            "",
            "| batch | outcome | batch s | small add latency s | batch still running then |",
            "|---|---|---|---|---|",
        ]
        for name in ("asked", "largest_accepted"):
            b = r[name]
            who = "one user" if b.get("one_user") else f"{b['users']} users"
            out.append(
                f"| {b['items']} x {b['messages_per_item']} ({who}) | {b['batch'][:90]} | {b['batch_s']} | "
                f"{b['small_add_latency_s']} | {b['batch_running_then']} |"
            )
        out += [f"\nidle add latency: {r['idle_add_latency_s']} s", ""]
    rest = {
        k: v
        for k, v in report.items()
        if k in ("bad_inputs", "kill_builds", "kill_streams", "disk_full", "read_only_store", "two_writers")
    }
    if rest:
        out += ["### Command line and store", "", "| section | figures |", "|---|---|"]
        out += [
            f"| {k} | {', '.join(f'{kk}: {vv}' for kk, vv in v.items() if kk != 'rows')} |"
            for k, v in rest.items()
        ]
        out.append("")
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="folder for faults.json and faults.md")
    ap.add_argument(
        "--sections", default=None, help=f"comma-separated subset of {','.join(SECTIONS)} (default: all)"
    )
    ap.add_argument("--parts", default=None, help="the earlier selection: a=cli, b=builds, c=disk, d=writers")
    ap.add_argument("--kills", type=int, default=20, help="kills of bulk builds and of batch streams")
    ap.add_argument("--engine-kills", type=int, default=20, help="kills of a live adder process")
    ap.add_argument("--fair-users", type=int, default=10, help="items of the large add_batch")
    ap.add_argument(
        "--fair-messages", type=int, default=1000, help="messages per item of the large add_batch"
    )
    ap.add_argument(
        "--deadline", type=float, default=3600.0, help="seconds: bounded loops stop early past it"
    )
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    chosen = set(SECTIONS)
    if args.sections or args.parts:
        chosen = {x.strip() for x in (args.sections or "").split(",") if x.strip()}
        chosen |= {_PARTS[x.strip()] for x in (args.parts or "").split(",") if x.strip() in _PARTS}
        unknown = chosen - set(SECTIONS)
        if unknown:
            ap.error(f"--sections: unknown {sorted(unknown)}; choose from {','.join(SECTIONS)}")
    rng = random.Random(args.seed)
    random.seed(args.seed)
    deadline = Deadline(args.deadline)
    tmp = Path(tempfile.mkdtemp(prefix="xmem-faults-"))
    report: dict = {"cpus": os.cpu_count(), "sections": [s for s in SECTIONS if s in chosen]}
    runs: list[tuple[str, str, Callable[[Path], dict]]] = [
        ("cli", "bad_inputs", bad_inputs),
        ("builds", "kill_builds", lambda d: kill_builds(d, args.kills, rng)),
        ("builds", "kill_streams", lambda d: kill_streams(d, args.kills, rng)),
        ("disk", "disk_full", disk_full),
        ("disk", "read_only_store", read_only_store),
        ("writers", "two_writers", two_writers),
        ("inputs", "inputs", lambda d: input_kinds(d, deadline)),
        ("copies", "copies", deletion_copies),
        ("resurrect", "resurrect", resurrection),
        ("kills", "kill_engine_adds", lambda d: kill_engine_adds(d, args.engine_kills, rng, deadline)),
        ("fair", "fairness", lambda d: fairness(d, args.fair_users, args.fair_messages)),
    ]
    try:
        for section, key, run in runs:
            if section not in chosen:
                continue
            if deadline.passed:
                report.setdefault("not_run", []).append(key)
                continue
            (tmp / key).mkdir()
            t = time.perf_counter()
            report[key] = run(tmp / key)
            report[key]["seconds"] = round(time.perf_counter() - t, 1)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    write_record(out / "faults.json", json.loads(json.dumps(report, default=str)))
    md = _markdown(report)
    (out / "faults.md").write_text(md)
    print(md)
    bad = [
        r
        for r in report.get("bad_inputs", {}).get("rows", [])
        if not r["one_line"] or r["traceback"] or r["wrong_exit"]
    ]
    for r in bad:
        print("NOT CLEAN:", r["kind"], r["exit"], r["stderr"][:200])
    for r in report.get("inputs", {}).get("rows", []):
        if r["outcome"] not in ("clean", "accepted"):
            print(f"{r['outcome'].upper()}: {r['surface']}: {r['kind']}: {r['said'][:160]!r}")


if __name__ == "__main__":
    main()
