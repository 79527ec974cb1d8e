"""``xmemory build`` over role chats: the shapes it reads, its one-line errors, and the memories it
writes being the live engine's (found by ``user_id``, searched, added to and deleted from)."""

from __future__ import annotations

import json

import pytest

from xmemory_gpu.cli import main
from xmemory_gpu.datasets.locomo import DatasetError
from xmemory_gpu.datasets.role_chats import Scope, detect_format, read_chats
from xmemory_gpu.datasets.synthetic import generate_conversations
from xmemory_gpu.engine import MemoryEngine, scope_key

EMB = "hashing:384"

CHATS = [
    {
        "user_id": "u_7f3a",
        "messages": [
            {
                "role": "user",
                "content": "Hi! I'm Priya, nice to meet you.",
                "created_at": "2024-01-08T09:00:00Z",
            },
            {
                "role": "assistant",
                "content": "Nice to meet you, Priya!",
                "created_at": "2024-01-08T09:00:05Z",
            },
            {
                "role": "user",
                "content": "I work as a night-shift nurse at St. Mary's Hospital in Boston.",
                "created_at": "2024-01-08T09:01:00Z",
            },
            {"role": "system", "content": "Be brief."},
            {
                "role": "user",
                "content": "My dog Biscuit is a beagle and he hates the rain.",
                "timestamp": 1704704520,
            },
        ],
    },
    {
        "user_id": "c91e",
        "agent_id": "chef",
        "metadata": {"app": "meals"},
        "messages": [
            {"role": "human", "content": "I have been vegetarian for three years."},
            {"role": "ai", "content": [{"type": "text", "text": "Vegetarian meals can be very varied."}]},
            {"role": "user", "content": "I live in Dublin with my partner Tom, near the canal."},
        ],
    },
    {
        "user_id": "u_7f3a",
        "messages": [
            {
                "role": "user",
                "content": "I left the hospital and started as a product designer at Google.",
                "created_at": "2024-05-02T10:00:00Z",
            }
        ],
    },
]


def _write(path, data, lines: bool = False):
    path.write_text("\n".join(json.dumps(d) for d in data) if lines else json.dumps(data), encoding="utf-8")
    return path


def _build(tmp_path, *inputs, extra=()):
    store = tmp_path / "store"
    rc = main(["build", *map(str, inputs), "--out", str(store), "--embedder", EMB, "--no-progress", *extra])
    assert rc == 0
    return store


def test_shapes_read_alike(tmp_path):
    """A JSON list, JSONL, {"conversations": [...]} and single objects give the same chats."""
    a = read_chats(_write(tmp_path / "a.json", CHATS))
    b = read_chats(_write(tmp_path / "b.jsonl", CHATS, lines=True))
    c = read_chats(_write(tmp_path / "c.json", {"conversations": CHATS}))
    d = read_chats(_write(tmp_path / "d.json", CHATS[0]))
    for chats in (a, b, c):
        assert [(x.user_id, x.agent_id, len(x.messages), x.skipped) for x in chats] == [
            ("u_7f3a", None, 4, 1),
            ("c91e", "chef", 3, 0),
            ("u_7f3a", None, 1, 0),
        ]
    assert [m.content for m in d[0].messages] == [m.content for m in a[0].messages]
    assert a[1].messages[1].role == "assistant" and a[1].messages[1].content.startswith("Vegetarian")
    assert a[0].messages[3].timestamp == 1704704520.0
    assert detect_format(CHATS) == "chats"
    assert detect_format(generate_conversations(1)) == "locomo"


def test_bare_messages_and_mem0_export_take_the_scope_given(tmp_path):
    msgs = [{"role": "user", "content": "I play the cello."}, {"role": "assistant", "content": "Lovely."}]
    (chat,) = read_chats(_write(tmp_path / "m.json", msgs), Scope(user_id="alice", run_id="r1"))
    assert (chat.user_id, chat.agent_id, chat.run_id, len(chat.messages)) == ("alice", None, "r1", 2)
    with pytest.raises(
        DatasetError, match=r"m\.json: user_id: missing \(give it in the file, or with --user-id\)"
    ):
        read_chats(tmp_path / "m.json")
    export = {
        "results": [
            {
                "id": "m-1",
                "memory": "Dev works at TechCorp",
                "user_id": "dev",
                "created_at": "2024-03-01T10:00:00",
            },
            {"id": "m-2", "memory": "Arjun prefers morning meetings", "user_id": "arjun"},
            {
                "id": "m-3",
                "memory": "Dev is a senior engineer",
                "user_id": "dev",
                "metadata": {"type": "work"},
            },
        ]
    }
    chats = read_chats(_write(tmp_path / "export.json", export))
    assert [(c.user_id, [m.id for m in c.messages]) for c in chats] == [
        ("dev", ["m-1", "m-3"]),
        ("arjun", ["m-2"]),
    ]
    assert chats[0].messages[1].metadata == {"type": "work"}


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (
            lambda d: d[2]["messages"][0].update(role="robot"),
            r"conversations\[2\]\.messages\[0\]\.role: expected 'user' or 'assistant', got 'robot'",
        ),
        (lambda d: d[1].pop("user_id"), r"conversations\[1\]\.user_id: missing"),
        (
            lambda d: d[0]["messages"][2].update(created_at="yesterday"),
            r"conversations\[0\]\.messages\[2\]\.created_at: expected an ISO date-time or epoch seconds",
        ),
        (
            lambda d: d[0]["messages"][0].update(content=5),
            r"conversations\[0\]\.messages\[0\]\.content: expected a string",
        ),
        (lambda d: d[1].update(messages="hi"), r"conversations\[1\]\.messages: expected a list of messages"),
        (
            lambda d: d[0]["messages"][1].update(id="semantic:3"),
            r"conversations\[0\]\.messages\[1\]: id: 'semantic:3' has the form of a derived unit id",
        ),
    ],
)
def test_bad_input_is_one_line_naming_the_field(tmp_path, capsys, mutate, expected):
    data = json.loads(json.dumps(CHATS))
    mutate(data)
    f = _write(tmp_path / "chats.json", data)
    rc = main(["build", str(f), "--out", str(tmp_path / "store"), "--embedder", EMB, "--no-progress"])
    err = capsys.readouterr().err.strip()
    assert rc != 0
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert __import__("re").search(expected, err), err
    assert not (tmp_path / "store" / "xmemory.db").exists()


def test_a_repeated_message_id_in_one_scope_is_refused(tmp_path):
    data = json.loads(json.dumps(CHATS))
    data[0]["messages"][0]["id"] = "m1"
    data[2]["messages"][0]["id"] = "m1"
    with pytest.raises(
        DatasetError, match=r"conversations\[2\]\.messages\[0\]\.id: 'm1' is already used in this scope"
    ):
        from xmemory_gpu.cli.build import role_chat_conversations

        role_chat_conversations(read_chats(_write(tmp_path / "c.json", data)))


def test_mixed_formats_are_refused(tmp_path, capsys):
    loc = _write(tmp_path / "locomo.json", generate_conversations(1))
    chats = _write(tmp_path / "chats.json", CHATS)
    rc = main(
        ["build", str(loc), str(chats), "--out", str(tmp_path / "s"), "--embedder", EMB, "--no-progress"]
    )
    assert rc != 0 and "build them into separate stores" in capsys.readouterr().err


def test_locomo_is_told_apart(tmp_path):
    f = _write(tmp_path / "locomo.json", generate_conversations(2, seed=3))
    store = _build(tmp_path, f)
    with MemoryEngine.open(store, embedder=EMB, max_resident_bytes=None) as eng:
        assert sorted(eng.bank.index) == ["synth-3-0", "synth-3-1"]


def test_role_chats_build_the_engines_memories(tmp_path):
    """Build -> open the engine -> search by user_id finds the evidence -> add -> delete one message ->
    get_all consistent, and the memory is what the engine keeps of one it wrote."""
    store = _build(tmp_path, _write(tmp_path / "chats.json", CHATS))
    with MemoryEngine.open(store, embedder=EMB, max_resident_bytes=None) as eng:
        assert sorted(eng.bank.index) == sorted([scope_key("u_7f3a"), scope_key("c91e", "chef")])
        units = eng.get_all(user_id="u_7f3a")
        msgs = [u for u in units if u["type"] == "message"]
        assert [m["text"][:12] for m in msgs] == [
            "Hi! I'm Priy",
            "Nice to meet",
            "I work as a ",
            "My dog Biscu",
            "I left the h",
        ]
        assert msgs[0]["speaker"] == "Priya" and msgs[1]["speaker"] == "assistant"  # the name learned, shown
        assert msgs[0]["timestamp_source"] == "given"
        b = eng.bank.index[scope_key("u_7f3a")]
        stats, state = eng.bank.stats[b], eng.bank.engine[b]
        assert state.user_name == "Priya" and state.user_name_from["id"] == msgs[0]["id"]
        assert "user_name" not in stats  # typed in the engine state, not a stats key
        kinds = [u["type"] for u in units]
        assert stats["ids"] == {"episode": kinds.count("episode"), "semantic": kinds.count("semantic")}
        assert state.speakers == ("the user", "assistant") and state.open_from == 5
        sessions = eng.bank.msg["session"][eng.bank.msg.seg.rows(b)].tolist()
        assert sessions == [0, 0, 0, 0, 1]  # the scope's second conversation is its second session

        (hit,) = eng.search("What breed is my dog?", user_id="u_7f3a")
        assert msgs[3]["id"] in hit.message_ids
        assert any("Biscuit" in u.text for u in hit.units)
        chef = [u for u in eng.get_all(user_id="c91e", agent_id="chef") if u["type"] == "message"]
        assert chef[0]["metadata"] == {"app": "meals"} and chef[0]["speaker"] == "the user"

        (new_id,) = eng.add(
            [{"role": "user", "content": "We adopted a second dog, a collie named Pip."}], user_id="u_7f3a"
        )
        eng.delete(msgs[3]["id"], user_id="u_7f3a")
        after = eng.get_all(user_id="u_7f3a")
        ids = [u["id"] for u in after if u["type"] == "message"]
        assert ids == [m["id"] for m in msgs if m["id"] != msgs[3]["id"]] + [new_id]
        derived = [u for u in after if u["type"] in ("episode", "semantic")]
        assert all(msgs[3]["id"] not in u["message_ids"] for u in derived)
        assert all(set(u["message_ids"]) <= set(ids) for u in derived)
        assert not any("Biscuit" in u["text"] for u in after if u["type"] == "semantic")
        assert any("Pip" in u["text"] for u in after if u["type"] == "semantic")
        for u in after:  # every listed id resolves
            assert eng.get(u["id"], user_id="u_7f3a")["id"] == u["id"]
    with MemoryEngine.open(
        store, embedder=EMB, max_resident_bytes=None
    ) as eng:  # and the writes were committed
        assert [u["id"] for u in eng.get_all(user_id="u_7f3a")] == [u["id"] for u in after]


def test_a_rebuild_skips_and_the_ids_are_stable(tmp_path):
    f = _write(tmp_path / "chats.json", CHATS)
    store = _build(tmp_path, f)
    with MemoryEngine.open(store, embedder=EMB, read_only=True, max_resident_bytes=None) as eng:
        first = eng.get_all(user_id="u_7f3a")
    other = tmp_path / "again"
    assert main(["build", str(f), "--out", str(other), "--embedder", EMB, "--no-progress"]) == 0
    assert main(["build", str(f), "--out", str(other), "--embedder", EMB, "--no-progress"]) == 0
    with MemoryEngine.open(other, embedder=EMB, read_only=True, max_resident_bytes=None) as eng:
        assert eng.get_all(user_id="u_7f3a") == first


def test_workers_build_the_same_memories(tmp_path):
    f = _write(tmp_path / "chats.json", CHATS)
    one = _build(tmp_path, f)
    two = tmp_path / "workers"
    assert (
        main(["build", str(f), "--out", str(two), "--embedder", EMB, "--no-progress", "--workers", "2"]) == 0
    )
    with (
        MemoryEngine.open(one, embedder=EMB, read_only=True, max_resident_bytes=None) as a,
        MemoryEngine.open(two, embedder=EMB, read_only=True, max_resident_bytes=None) as b,
    ):
        for key in a.bank.index:
            ia, ib = a.bank.index[key], b.bank.index[key]
            assert a.bank.stats[ia] == b.bank.stats[ib]
            assert a.bank.engine[ia] == b.bank.engine[ib]
            scope = json.loads(key)
            kw = {"user_id": scope[0], "agent_id": scope[1], "run_id": scope[2]}
            assert a.get_all(**kw) == b.get_all(**kw)


def test_ray_builds_the_same_memories(tmp_path, monkeypatch):
    pytest.importorskip("ray.data")
    import tqdm.auto

    from xmemory_gpu.cli.build import _engine_finish, role_chat_conversations
    from xmemory_gpu.config import XMemoryConfig
    from xmemory_gpu.distributed.ray_build import build_store_ray

    f = _write(tmp_path / "chats.json", CHATS)
    one = _build(tmp_path, f)
    cfg = XMemoryConfig()
    cfg.embed.model = EMB
    convs, extras, _ = role_chat_conversations(read_chats(f))
    moves: list[float] = []

    class Bar:
        def __init__(self, *a, **kw) -> None:
            self.n = 0

        def update(self, n=1) -> None:
            moves.append(n)

        def close(self) -> None:
            pass

    monkeypatch.setattr(tqdm.auto, "tqdm", Bar)
    rep = build_store_ray(
        convs,
        tmp_path / "ray",
        config=cfg,
        workers=1,
        finish=_engine_finish(extras, cfg.knn.k_semantics),
        init_kwargs={"num_cpus": 1, "object_store_memory": 100 * 2**20, "log_to_driver": False},
    )
    assert len(rep.built) == 2 and len(moves) >= 2 and sum(moves) == 2  # a move per memory delivered
    with (
        MemoryEngine.open(one, embedder=EMB, read_only=True, max_resident_bytes=None) as a,
        MemoryEngine.open(tmp_path / "ray", embedder=EMB, read_only=True, max_resident_bytes=None) as b,
    ):
        for key in a.bank.index:
            assert a.bank.stats[a.bank.index[key]] == b.bank.stats[b.bank.index[key]]
            scope = json.loads(key)
            kw = {"user_id": scope[0], "agent_id": scope[1], "run_id": scope[2]}
            assert a.get_all(**kw) == b.get_all(**kw)
