"""A fault campaign against the command line, the store and the live engine, with figures:

(a) bad-input kinds: each run through ``xmemory`` in process; counted: one-line errors, tracebacks,
    wrong exit codes, and data lost (the store's memories and checksums before and after);
(b) ``kill -9`` at random moments of bulk builds and of engine batch streams, then resume: memories
    lost, duplicated, failed reopens, and whether the end state equals an uninterrupted run;
(c) a full disk (a small tmpfs when this machine lets us mount one, else ``ENOSPC`` raised by a
    patched writer): a clear error, nothing committed lost, no orphan files;
(d) two writer processes on one new store: one builds, the other is refused, nothing corrupted.

  python benchmarks/fault_campaign.py --out DIR [--kills 20] [--seed 0]

Everything runs on loopback-free local files under a temporary folder; every loop is bounded.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--kills", type=int, default=20)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--parts", default="a,b,c,d")
    args = ap.parse_args()
    rng = random.Random(args.seed)
    random.seed(args.seed)
    tmp = Path(tempfile.mkdtemp(prefix="xmem-faults-"))
    report: dict = {
        "date": time.strftime("%Y-%m-%d"),
        "machine": f"{os.uname().nodename}, {os.cpu_count()} cpus",
    }
    try:
        parts = set(args.parts.split(","))
        if "a" in parts:
            (tmp / "a").mkdir()
            report["bad_inputs"] = bad_inputs(tmp / "a")
        if "b" in parts:
            (tmp / "b").mkdir()
            report["kill_builds"] = kill_builds(tmp / "b", args.kills, rng)
            (tmp / "b2").mkdir()
            report["kill_streams"] = kill_streams(tmp / "b2", args.kills, rng)
        if "c" in parts:
            (tmp / "c").mkdir()
            report["disk_full"] = disk_full(tmp / "c")
            (tmp / "c2").mkdir()
            report["read_only_store"] = read_only_store(tmp / "c2")
        if "d" in parts:
            (tmp / "d").mkdir()
            report["two_writers"] = two_writers(tmp / "d")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "faults.json").write_text(json.dumps(report, indent=2))
    summary = {
        k: ({kk: vv for kk, vv in v.items() if kk != "rows"} if isinstance(v, dict) else v)
        for k, v in report.items()
    }
    print(json.dumps(summary, indent=2))
    bad = [
        r
        for r in report.get("bad_inputs", {}).get("rows", [])
        if not r["one_line"] or r["traceback"] or r["wrong_exit"]
    ]
    for r in bad:
        print("NOT CLEAN:", r["kind"], r["exit"], r["stderr"][:200])


if __name__ == "__main__":
    main()
