"""Growth and forgetting on columns.

A sequence of writes (adds by session, an add kept without inference, a learned user name, message
metadata, deletes of messages, episodes, statements and themes, updates, mem0's batch update and
delete) is replayed on the engine, whose writes grow and forget memory slices; the engine's answers
are checked for what the writes promise, and no write builds records of the whole memory."""

from __future__ import annotations

import hashlib
import json
import traceback
from pathlib import Path

from xmemory_gpu.datasets.locomo import load_locomo
from xmemory_gpu.datasets.synthetic import generate_conversations, write_json
from xmemory_gpu.embed.hashing import HashingEmbedder
from xmemory_gpu.engine import MemoryEngine
from xmemory_gpu.memory import hierarchy

EMB = HashingEmbedder(384)
QUERIES = ["what does the user like to do", "travel plans and places", "Priya", "work and family"]


def _session(conv, s: int) -> list[dict]:
    return [
        {"id": m.id, "speaker": m.speaker, "content": m.text, "timestamp": m.timestamp, "session": m.session}
        for m in conv.messages
        if m.session == s
    ]


def _clean(v):
    """``v`` without its wall-clock fields (``created_at``, ``updated_at``)."""
    if isinstance(v, dict):
        return {k: _clean(x) for k, x in v.items() if k not in ("created_at", "updated_at")}
    if isinstance(v, list):
        return [_clean(x) for x in v]
    return v


def _snapshot(eng: MemoryEngine, users: list[str]) -> dict:
    out = {}
    for u in users:
        units = eng.get_all(user_id=u)
        res = eng.search(QUERIES, user_id=u, budget_tokens=400)
        out[u] = {
            "units": _clean(units),
            "contexts": [r.context for r in res],
        }
    return out


def _digest(eng: MemoryEngine) -> dict:
    """Each memory's slice as the bank holds it: every column's dtype, shape and bytes (texts as
    JSON), its stats and engine state, hashed."""
    out = {}
    for key, b in sorted(eng.bank.index.items()):
        sl = eng.bank.slice(b)
        h = hashlib.sha256()
        for lv in sorted(sl.cols):
            for name in sorted(sl.cols[lv]):
                a = sl.cols[lv][name]
                h.update(f"{lv}.{name}:{a.dtype}:{a.shape}".encode())
                h.update(json.dumps(a.tolist()).encode() if a.dtype == object else a.tobytes())
        h.update(json.dumps(sl.stats, sort_keys=True, default=str).encode())
        h.update(json.dumps(sl.engine.as_dict() if sl.engine else None, sort_keys=True).encode())
        out[key] = h.hexdigest()
    return out


def _unit(eng: MemoryEngine, user: str, kind: str, nth: int = 0) -> str:
    ids = [u["id"] for u in eng.get_all(user_id=user) if u["type"] == kind]
    return ids[nth % len(ids)]


def _chats(folder: Path) -> list:
    path = folder / "chats.json"
    write_json(generate_conversations(2, seed=5, sessions=(5, 6)), path)
    return load_locomo(path)


def replay(root: Path) -> list:
    """The sequence's writes on a fresh engine at ``root``; each step's name, answer and snapshot."""
    a, b = _chats(root.parent)
    sa = sorted({m.session for m in a.messages})
    sb = sorted({m.session for m in b.messages})
    steps: list = []
    users = ["ana", "bo", "raw"]
    with MemoryEngine.open(root, embedder=EMB, stamp_arrival=False, max_resident_bytes=None) as eng:

        def step(name: str, fn) -> None:
            got = fn()
            steps.append([name, _clean(got), _snapshot(eng, users), _digest(eng)])

        step("add ana s0", lambda: eng.add(_session(a, sa[0]), user_id="ana", metadata={"topic": "a"}))
        step(
            "add_batch",
            lambda: eng.add_batch(
                [
                    {"messages": _session(a, sa[1]), "user_id": "ana"},
                    {"messages": _session(b, sb[0]), "user_id": "bo"},
                ],
                events=True,
            ),
        )
        step(
            "name",
            lambda: eng.add(
                [{"role": "user", "content": "Hi, I'm Priya and I love hiking in the Alps.", "id": "nm"}],
                user_id="ana",
                events=True,
            ),
        )
        step(
            "raw",
            lambda: eng.add(
                [{"role": "user", "content": "Remember my locker code is 5521 please.", "id": "r1"}],
                user_id="ana",
                infer=False,
            ),
        )
        step("raw memory", lambda: eng.add(_session(b, sb[1]), user_id="raw", infer=False))
        step("add ana s2", lambda: eng.add(_session(a, sa[2]), user_id="ana", events=True))
        step("add bo s1", lambda: eng.add(_session(b, sb[1]), user_id="bo"))
        step("delete message", lambda: eng.delete(a.messages[3].id, user_id="ana"))
        step("delete statement", lambda: eng.delete(_unit(eng, "ana", "semantic", 2), user_id="ana"))
        step("delete theme", lambda: eng.delete(_unit(eng, "bo", "theme", 1), user_id="bo"))
        step("delete episode", lambda: eng.delete(_unit(eng, "ana", "episode", 1), user_id="ana"))
        step(
            "update",
            lambda: eng.update(
                _unit(eng, "ana", "message", 4), "I moved to Lisbon last spring for work.", user_id="ana"
            ),
        )
        step("update name", lambda: eng.update("nm", "Hello there, nice to meet you.", user_id="ana"))
        step("add ana s3", lambda: eng.add(_session(a, sa[3]), user_id="ana", events=True))
        step(
            "batch_update",
            lambda: eng.batch_update(
                [
                    {
                        "memory_id": _unit(eng, "bo", "message", 1),
                        "text": "My sister teaches piano in Porto.",
                        "user_id": "bo",
                    },
                    {"memory_id": "r1", "text": "My locker code changed to 7731.", "user_id": "ana"},
                ]
            ),
        )
        step(
            "batch_delete",
            lambda: eng.batch_delete(
                [
                    {"memory_id": _unit(eng, "bo", "message", 7), "user_id": "bo"},
                    {"memory_id": _unit(eng, "bo", "semantic", 3), "user_id": "bo"},
                    {"memory_id": _unit(eng, "ana", "semantic", 5), "user_id": "ana"},
                ]
            ),
        )
        step("delete raw message", lambda: eng.delete(_unit(eng, "raw", "message", 3), user_id="raw"))
        step("add ana s4", lambda: eng.add(_session(a, sa[4]), user_id="ana"))
    return steps


def test_the_sequence_keeps_what_the_writes_promise(tmp_path):
    steps = {name: (got, snap) for name, got, snap, _ in replay(tmp_path / "s")}
    units = steps["add ana s4"][1]["ana"]["units"]
    kinds = {u["type"] for u in units}
    assert kinds == {"message", "episode", "semantic", "theme"}
    texts = " ".join(u.get("text", "") or "" for u in units)
    assert "5521" not in texts and "7731" in texts  # an update leaves no old text behind
    assert "Priya" not in texts  # the name went with the message that gave it
    raw = steps["delete raw message"][1]["raw"]["units"]
    assert {u["type"] for u in raw} == {"message", "episode"}  # kept without inference: no statement
    sem = [u["id"] for u in units if u["type"] == "semantic"]
    assert len(sem) == len(set(sem))
    before = {u["id"]: u["text"] for u in steps["add ana s3"][1]["ana"]["units"] if u["type"] == "semantic"}
    after = {u["id"]: u["text"] for u in units if u["type"] == "semantic"}
    assert all(after[i] == t for i, t in before.items() if i in after)  # a statement keeps its id


def test_a_write_builds_no_records_of_the_memory(tmp_path, monkeypatch):
    """Adds, deletes and updates of a memory work on its slice: no ``Memory`` of it is built (the
    update's answer is read as a read is)."""
    a, _ = _chats(tmp_path)
    with MemoryEngine.open(tmp_path / "s", embedder=EMB, stamp_arrival=False, max_resident_bytes=None) as eng:
        eng.add([m for s in (1, 2) for m in _session(a, s)], user_id="u")
        victim, changed = _unit(eng, "u", "message", 2), _unit(eng, "u", "message", 4)
        made = []
        real_init = hierarchy.Memory.__post_init__

        def counted(self):
            stack = traceback.format_stack()
            if self.messages and not any("reads.py" in f for f in stack):  # not an answer read back
                made.append("".join(stack[-6:]))
            real_init(self)

        monkeypatch.setattr(hierarchy.Memory, "__post_init__", counted)
        eng.add(_session(a, 3), user_id="u", events=True)
        eng.delete(victim, user_id="u")
        eng.update(changed, "We went to Kyoto in April.", user_id="u")
        assert made == []


def test_a_grown_memory_records_the_theme_stage_s_f_of_its_partition(tmp_path):
    """Growth records f(P) as the theme stage's state holds it (no pass over every statement): the
    value ``partition_objective`` gives for the memory's statements and themes, within 1e-12."""
    import numpy as np

    from xmemory_gpu.engine import scope_key
    from xmemory_gpu.ops.objective import partition_objective

    write_json(generate_conversations(1, seed=7), tmp_path / "c.json")
    conv = load_locomo(tmp_path / "c.json")[0]
    sessions = sorted({m.session for m in conv.messages})
    with MemoryEngine.open(tmp_path / "s", embedder=EMB) as eng:
        for s in sessions:
            eng.add(_session(conv, s), user_id="u")
            sl = eng.bank.slice(eng.bank.index[scope_key("u")])
            sc = sl.cols["sem"]
            want = partition_objective(sc["x"], sc["theme"].astype(np.int64), np.array([0, len(sc["x"])]))
            assert abs(sl.stats["f_P"] - float(want[0])) <= 1e-12
