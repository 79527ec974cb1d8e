"""Public-set converters (BEAM, LongMemEval) and their scoring, on tiny hand-written fixtures in the
shape of each set's files; the benchmark loop once on them with the hashing embedder."""

from __future__ import annotations

import json
import math
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

from xmemory_gpu.datasets.beam import PublicChat, check_not_reserved, load_beam
from xmemory_gpu.datasets.locomo import DatasetError
from xmemory_gpu.datasets.longmemeval import load_longmemeval, stratified
from xmemory_gpu.eval.public import content_words, current_fact, score, summarize, word_recall

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

BEAM_CHAT = [
    {
        "batch_number": 1,
        "time_anchor": None,
        "turns": [
            [
                {
                    "role": "user",
                    "id": 0,
                    "time_anchor": "March-02-2024",
                    "content": "I run the API on port 8080.",
                },
                {"role": "assistant", "id": 1, "content": "Noted, port 8080."},
            ],
            [
                {"role": "user", "id": 2, "content": "Login takes 180ms under 20 concurrent requests."},
                {"role": "assistant", "id": 3, "content": "That is a reasonable latency."},
            ],
        ],
    },
    {
        "batch_number": 2,
        "time_anchor": None,
        "turns": [
            [
                {
                    "role": "user",
                    "id": 4,
                    "time_anchor": "April-10-2024",
                    "content": "Login is down to 120ms now.",
                },
                {"role": "assistant", "id": 5, "content": "Great improvement."},
                {"role": "user", "id": 6, "content": "I have never used Docker for this project."},
                {"role": "assistant", "id": 7, "content": "Understood."},
            ]
        ],
    },
]

BEAM_QUESTIONS = {
    "abstention": [
        {"question": "What colour is my office?", "ideal_response": "No information.", "rubric": []}
    ],
    "information_extraction": [
        {"question": "Which port does my API use?", "answer": "Port 8080.", "source_chat_ids": [0]}
    ],
    "knowledge_update": [
        {
            "question": "What is the login latency?",
            "answer": "120ms",
            "source_chat_ids": {"original_info": [2], "updated_info": [4]},
        },
        {"question": "How many keys are in Redis?", "answer": "15,000 keys", "source_chat_ids": None},
    ],
    "contradiction_resolution": [
        {
            "question": "Have I used Docker?",
            "ideal_answer": "You said both that you used and never used Docker.",
            "source_chat_ids": {"first_statement": [6], "second_statement": [[2]]},
        }
    ],
    "instruction_following": [
        {
            "question": "How do I log errors?",
            "instruction_being_tested": "Always show code.",
            "source_chat_ids": [99],
        }
    ],
}


def _beam(root: Path, split: str = "500K", n: int = 2) -> Path:
    for i in range(1, n + 1):
        d = root / "chats" / split / str(i)
        (d / "probing_questions").mkdir(parents=True)
        (d / "chat.json").write_text(json.dumps(BEAM_CHAT))
        (d / "probing_questions" / "probing_questions.json").write_text(json.dumps(BEAM_QUESTIONS))
    return root / "chats" / split


def _lme(
    qid: str, kind: str, sessions: list[list[dict]], answer: str = "Acme", ids: list[str] | None = None
) -> dict:
    sids = [f"s{i}" for i in range(len(sessions))]
    return {
        "question_id": qid,
        "question_type": kind,
        "question": "Where do I work now?",
        "answer": answer,
        "question_date": "2023/06/01 (Thu) 10:00",
        "haystack_dates": [f"2023/05/0{i + 1} (Mon) 09:3{i}" for i in range(len(sessions))],
        "haystack_session_ids": sids,
        "answer_session_ids": ids if ids is not None else sids,
        "haystack_sessions": sessions,
    }


U, A = "user", "assistant"
LME = [
    _lme(
        "ku1",
        "knowledge-update",
        [
            [
                {"role": U, "content": "I work at Initech.", "has_answer": True},
                {"role": A, "content": "Nice."},
            ],
            [{"role": U, "content": "What is a good soup?"}, {"role": A, "content": "Try miso."}],
            [
                {"role": U, "content": "I moved to Acme last week.", "has_answer": True},
                {"role": A, "content": "Cool!"},
            ],
        ],
    ),
    _lme(
        "ms1",
        "multi-session",
        [[{"role": U, "content": "I bought a kayak."}, {"role": A, "content": "Fun."}]],
    ),
    _lme(
        "ku2_abs",
        "knowledge-update",
        [[{"role": U, "content": "I like tea."}, {"role": A, "content": "Ok."}]],
    ),
]


# -- BEAM --------------------------------------------------------------------------------------------


def test_beam_converts_to_role_chats(tmp_path: Path) -> None:
    chats = load_beam(_beam(tmp_path))
    assert [c.user_id for c in chats] == ["beam-500k-1", "beam-500k-2"]
    c = chats[0]
    assert isinstance(c, PublicChat) and c.source == "beam:500K"
    assert len(c.turns) == 8 and c.sessions == [0, 0, 0, 0, 1, 1, 1, 1]
    assert c.turns[0] == ("user", "I run the API on port 8080.", "2024-03-02T00:00:00Z")
    assert c.turns[3][2] == "2024-03-02T00:00:00Z" and c.turns[4][2] == "2024-04-10T00:00:00Z"
    m = c.messages()[4]
    assert m["id"] == "beam-500k-1-4" and m["session"] == 1 and m["timestamp"] == "2024-04-10T00:00:00Z"
    q = {x.text: x for x in c.questions}
    assert (
        q["What colour is my office?"].kind == "unanswerable" and not q["What colour is my office?"].evidence
    )
    ie = q["Which port does my API use?"]
    assert (ie.kind, ie.evidence, ie.answer, ie.category) == (
        "first",
        [0],
        "Port 8080.",
        "information_extraction",
    )
    ku = q["What is the login latency?"]
    assert (ku.evidence, ku.current, ku.stale) == ([4], [4], [2])
    assert q["How many keys are in Redis?"].evidence == []  # no ids: scored by words
    cr = q["Have I used Docker?"]
    assert (cr.evidence, cr.current, cr.stale) == ([2, 6], [6], [2])  # nested ids flattened
    inst = q["How do I log errors?"]
    assert inst.evidence == [] and inst.answer == "Always show code."  # an id not in the chat dropped


def test_beam_limit_and_one_conversation(tmp_path: Path) -> None:
    root = _beam(tmp_path, n=3)
    assert len(load_beam(root, limit=2)) == 2
    assert [c.user_id for c in load_beam(root / "3")] == ["beam-500k-3"]


def test_beam_first_sessions_keep_the_questions_judged_there(tmp_path: Path) -> None:
    (c,) = load_beam(_beam(tmp_path, n=1), sessions=1)
    assert len(c.turns) == 4 and c.sessions == [0, 0, 0, 0]
    # kept: never said, and evidence inside session 0; dropped: the update (its newer value is in
    # session 1), the contradiction (one statement in session 1), the questions without ids
    assert [q.text for q in c.questions] == ["What colour is my office?", "Which port does my API use?"]
    with pytest.raises(DatasetError, match="sessions"):
        load_beam(tmp_path / "chats" / "500K", sessions=0)


@pytest.mark.parametrize("split", ["100K", "128k"])
def test_beam_refuses_the_reserved_split(tmp_path: Path, split: str) -> None:
    with pytest.raises(DatasetError, match="reserved"):
        load_beam(tmp_path / "chats" / split)
    with pytest.raises(DatasetError, match="reserved"):
        load_beam(tmp_path, split=split)
    with pytest.raises(DatasetError, match="reserved"):
        check_not_reserved(f"BEAM/chats/{split}/1")


def test_beam_bad_input_names_the_field(tmp_path: Path) -> None:
    root = _beam(tmp_path, n=1)
    bad = json.loads(json.dumps(BEAM_CHAT))
    bad[0]["turns"][0][0]["role"] = "system"
    (root / "1" / "chat.json").write_text(json.dumps(bad))
    with pytest.raises(DatasetError, match=r"role: expected user or assistant"):
        load_beam(root)
    bad[0]["turns"][0][0]["role"] = "user"
    bad[0]["turns"][0][0]["time_anchor"] = "2024-03-02"
    (root / "1" / "chat.json").write_text(json.dumps(bad))
    with pytest.raises(DatasetError, match="time_anchor"):
        load_beam(root)
    with pytest.raises(DatasetError, match="no BEAM split folder"):
        load_beam(tmp_path / "nowhere")


# -- LongMemEval -------------------------------------------------------------------------------------


def test_longmemeval_converts_each_instance_to_a_chat(tmp_path: Path) -> None:
    f = tmp_path / "lme.json"
    f.write_text(json.dumps(LME))
    chats = load_longmemeval(f)
    assert [c.user_id for c in chats] == ["lme-ku1", "lme-ms1", "lme-ku2_abs"]
    ku = chats[0]
    assert ku.sessions == [0, 0, 1, 1, 2, 2] and ku.turns[0][2] == "2023-05-01T09:30:00Z"
    q = ku.questions[0]
    assert (q.kind, q.evidence, q.current, q.stale, q.answer) == ("first", [4], [4], [0], "Acme")
    ms = chats[1].questions[0]
    assert ms.evidence == [] and ms.answer == "Acme"  # no marked turn: scored by words
    ab = chats[2].questions[0]
    assert (ab.kind, ab.category, ab.evidence, ab.answer) == (
        "unanswerable",
        "abstention:knowledge-update",
        [],
        "",
    )


def test_a_knowledge_update_asking_for_the_earlier_value_takes_the_earlier_session(tmp_path: Path) -> None:
    item = dict(LME[0], question_id="ku3", question="Where did I work before Acme?", answer="Initech")
    f = tmp_path / "lme.json"
    f.write_text(json.dumps([item]))
    q = load_longmemeval(f)[0].questions[0]
    assert (q.evidence, q.current, q.stale) == ([0], [0], [4])
    # no word of the answer in either session: the latest, as before
    f.write_text(json.dumps([dict(item, answer="somewhere else")]))
    q = load_longmemeval(f)[0].questions[0]
    assert (q.evidence, q.current, q.stale) == ([4], [4], [0])


def test_longmemeval_folder_and_stratified_limit(tmp_path: Path) -> None:
    for i, x in enumerate(LME):
        (tmp_path / f"{i}_{x['question_id']}.json").write_text(json.dumps(x))
    assert [c.user_id for c in load_longmemeval(tmp_path, limit=2)] == ["lme-ku1", "lme-ku2_abs"]
    assert stratified(["a", "a", "b", "abstention", "b"], 3) == [0, 2, 3]
    assert stratified(["a", "b"], None) == [0, 1]


def test_longmemeval_bad_input(tmp_path: Path) -> None:
    f = tmp_path / "x.json"
    f.write_text(json.dumps({"question_id": "a"}))
    with pytest.raises(DatasetError, match="expected a JSON list"):
        load_longmemeval(f)
    bad = json.loads(json.dumps(LME[:1]))
    bad[0]["haystack_dates"][0] = "May 1"
    f.write_text(json.dumps(bad))
    with pytest.raises(DatasetError, match=r"haystack_dates\[0\]"):
        load_longmemeval(f)
    with pytest.raises(DatasetError, match="limit"):
        load_longmemeval(f, limit=0)


# -- scoring -----------------------------------------------------------------------------------------


def test_word_recall_counts_answer_words_the_question_does_not_say() -> None:
    assert content_words("You moved to Acme in Austin", "Where did I move?") == ["moved", "acme", "austin"]
    assert word_recall("Acme in Austin", "The user works at Acme.", "Where?") == 0.5
    assert word_recall("the", "anything") is None
    assert word_recall("$400,000", "a price of $400,000") == 1.0


def test_current_fact_by_ids_else_by_words() -> None:
    assert current_fact(["c-4", "c-2"], ["c-4"], ["c-2"]) is True
    assert current_fact(["c-2", "c-4"], ["c-4"], ["c-2"]) is False
    assert current_fact(["c-2"], ["c-4"], ["c-2"]) is False
    assert current_fact([], [], [], "120ms latency", "login latency is 120ms") is True
    assert current_fact([], [], [], "120ms", "it was 180ms") is False
    assert current_fact([], [], []) is None


def _row(
    kind: str, recall: float | None, words: float | None, top: float, empty: bool, cat: str = "x"
) -> dict:
    return {
        "kind": kind,
        "category": cat,
        "recall": recall,
        "word_recall": words,
        "current": True if cat == "ku" else None,
        "top_relevance": top,
        "empty": empty,
    }


def test_summarize_figures() -> None:
    rows = [
        _row("first", 1.0, 0.5, 0.8, False, "ku"),
        _row("first", 0.0, 0.0, 0.3, True),
        _row("first", None, 0.5, 0.5, False),
        _row("unanswerable", None, None, 0.2, True),
        _row("unanswerable", None, None, 0.6, False),
    ]
    s = summarize(rows, {"ku": "ku"})
    assert (s["answerable"], s["never_said"], s["with_ids"]) == (3, 2, 2)
    assert s["recall"] == 0.5 and math.isclose(s["word_recall"], 1 / 3) and s["word_recall_no_ids"] == 0.5
    assert math.isclose(s["auroc"], 4 / 6)
    assert s["never_said_emptied"] == 0.5 and math.isclose(s["answerable_emptied"], 1 / 3)
    assert s["recall_kept"] == 1.0  # the emptied answerable row had recall 0
    assert (s["current_ku"], s["current_ku_n"]) == (1.0, 1)
    assert math.isnan(summarize(rows[:3])["auroc"])


def test_score_row() -> None:
    row = score(
        kind="first",
        category="knowledge_update",
        evidence=["c-4"],
        current=["c-4"],
        stale=["c-2"],
        answer="120ms",
        question="What is the login latency?",
        shown=["c-4", "c-2"],
        order=["c-4", "c-2"],
        context="Login is down to 120ms now. Login takes 180ms.",
        top_relevance=0.7,
        empty=False,
        changed=True,
    )
    assert (row["recall"], row["word_recall"], row["current"]) == (1.0, 1.0, True)
    never = score(
        kind="unanswerable",
        category="abstention",
        evidence=[],
        current=[],
        stale=[],
        answer="",
        question="q",
        shown=[],
        order=[],
        context="",
        top_relevance=None,
        empty=True,
        changed=False,
    )
    assert (never["recall"], never["word_recall"], never["current"], never["top_relevance"]) == (
        None,
        None,
        None,
        0.0,
    )


# -- the benchmark loop ------------------------------------------------------------------------------


def test_bench_runs_on_both_sets(tmp_path: Path) -> None:
    import bench_public

    beam = _beam(tmp_path / "b", n=1)
    lme = tmp_path / "lme.json"
    lme.write_text(json.dumps(LME))
    for source, data in (("beam:500k", beam), ("longmemeval", lme)):
        out = tmp_path / f"{source.replace(':', '_')}.json"
        argv = ["--source", source, "--data", str(data), "--embedder", "hashing:64", "--json", str(out)]
        assert bench_public.main(argv + ["--strategies", "xmemory", "chunk-rag:16", "--budgets", "150"]) == 0
        res = json.loads(out.read_text())
        assert set(res["results"]) == {"xmemory@150", "chunk-rag:16@150"}
        fig = res["results"]["xmemory@150"]
        assert fig["never_said"] == 1 and fig["answerable"] >= 2 and fig["with_ids"] >= 1
        assert fig["rows"] and all("question" in r for r in fig["rows"])
        assert bench_public.main(argv + ["--strategies", "xmemory", "--budgets", "150", "--no-rows"]) == 0
        assert "rows" not in json.loads(out.read_text())["results"]["xmemory@150"]
    assert bench_public.main(["--source", "beam:100k", "--data", str(tmp_path)]) == 2


def test_bench_keeps_and_reuses_its_memory(tmp_path: Path, capsys) -> None:
    import bench_public

    beam = _beam(tmp_path / "b", n=1)
    keep = tmp_path / "kept"
    argv = ["--source", "beam:500k", "--data", str(beam), "--embedder", "hashing:64", "--store", str(keep)]
    argv += ["--strategies", "xmemory", "--budgets", "150"]
    outs = []
    for n in range(2):
        out = tmp_path / f"run{n}.json"
        assert bench_public.main(argv + ["--json", str(out)]) == 0
        outs.append(json.loads(out.read_text()))
    assert "in the memory already" in capsys.readouterr().err  # the second run added nothing
    assert outs[0]["add_s"] == outs[1]["add_s"]
    assert outs[0]["results"]["xmemory@150"]["recall"] == outs[1]["results"]["xmemory@150"]["recall"]
    search_only = tmp_path / "search.json"  # settings that a search reads: the kept memory serves
    search_only.write_text(json.dumps({"stage1": {"users_first": False}}))
    assert bench_public.main(argv + ["--config", str(search_only)]) == 0
    assert "in the memory already" in capsys.readouterr().err
    shutil.rmtree(keep / "store")  # the mark outlives its memory: the chats are added again
    assert bench_public.main(argv) == 0
    assert "added 1/1 chats" in capsys.readouterr().err
    other = _beam(tmp_path / "c", n=2)  # other chats: the kept memory is not theirs
    bad = ["--source", "beam:500k", "--data", str(other), "--embedder", "hashing:64", "--store", str(keep)]
    assert bench_public.main(bad + ["--strategies", "xmemory", "--budgets", "150"]) == 2
    assert "holds another memory" in capsys.readouterr().err


def test_embedder_comparison_runs_every_source(tmp_path: Path, capsys) -> None:
    import bench_embedders

    from xmemory_gpu.datasets.synthetic import generate_conversations, write_json

    beam = _beam(tmp_path / "b", n=1)
    chats = generate_conversations(1, seed=3, sessions=(2, 2), turns_per_session=(6, 6))
    locomo = write_json(chats, tmp_path / "l.json")
    out, stores = tmp_path / "cmp.json", tmp_path / "stores"
    argv = ["--specs", "hashing:64", "hashing:32", "--public", f"beam:500k={beam}:1", "--locomo", str(locomo)]
    argv += ["--stores", str(stores), "--cost-texts", "16", "--rounds", "1", "--json", str(out)]
    assert bench_embedders.main(argv) == 0
    res = json.loads(out.read_text())
    assert set(res["cost_ms"]) == {"hashing:64", "hashing:32"} and 0 < res["cost_texts"] <= 16
    assert set(res["sources"]) == {"beam:500k:1", "locomo"}
    for source, budgets in (
        ("beam:500k:1", bench_embedders.BUDGETS),
        ("locomo", bench_embedders.LOCOMO_BUDGETS),
    ):
        for spec in ("hashing:64", "hashing:32"):
            figures = res["sources"][source][spec]["results"]
            assert {f"{s}@{b}" for s in bench_embedders.STRATEGIES for b in budgets} <= set(figures)
            assert all(0.0 <= f["recall"] <= 1.0 for f in figures.values() if f["recall"] is not None)
    assert res["sources"]["locomo"]["hashing:64"]["build_s"] is not None
    assert "**beam:500k:1**" in capsys.readouterr().out
    assert bench_embedders.main(argv) == 0  # the kept memories are searched again
    assert "in the memory already" in capsys.readouterr().err
    again = json.loads(out.read_text())
    assert again["sources"]["locomo"]["hashing:64"]["build_s"] is None
    assert (
        again["sources"]["locomo"]["hashing:64"]["results"]
        == res["sources"]["locomo"]["hashing:64"]["results"]
    )
    # no --stores, no --json: the memories live in a temporary folder
    assert (
        bench_embedders.main(["--specs", "hashing:64", "--public", f"beam:500k={beam}", "--rounds", "1"]) == 0
    )
    assert bench_embedders.main(["--specs", "nonsense"]) == 2
    assert "bench_embedders: unknown embedder spec" in capsys.readouterr().err
    assert bench_embedders.main(["--specs", "hashing:64", "--locomo", str(tmp_path / "missing.json")]) == 2
    assert capsys.readouterr().err.startswith("bench_embedders: ")


def test_embedder_table_takes_each_figure_from_its_best_peer() -> None:
    import bench_embedders

    r = {
        "xmemory@150": {"recall": 0.5, "word_recall": 0.4, "auroc": 0.6},
        "naive-rag@150": {"recall": 0.2, "word_recall": 0.35},
        "chunk-rag:16@150": {"recall": 0.45, "word_recall": 0.1},
        "chunk-rag@150": {"recall": 0.3, "word_recall": None},
    }
    assert bench_embedders._cell(r, 150) == "0.500 / 0.400; peer 0.450 / 0.350; AUROC 0.60"
    assert bench_embedders._public_arg("longmemeval=x/y.json:7") == ("longmemeval", Path("x/y.json"), 7)
    assert bench_embedders._public_arg("longmemeval=x/y.json") == ("longmemeval", Path("x/y.json"), None)


def test_relevance_signals_table_on_both_sets(tmp_path: Path, capsys) -> None:
    import relevance_signals

    beam = _beam(tmp_path / "b", n=1)
    lme = tmp_path / "lme.json"
    lme.write_text(json.dumps(LME))
    out = tmp_path / "sig.json"
    argv = ["--set", "beam:500k", str(beam), "1", str(tmp_path / "sb"), "--set", "longmemeval", str(lme)]
    argv += ["0", str(tmp_path / "sl"), "--embedder", "hashing:64", "--json", str(out)]
    assert relevance_signals.main(argv) == 0
    res = json.loads(out.read_text())
    assert set(res["auroc"]) == {"beam:500k:1", "longmemeval"}
    assert res["answerable_never_said"]["longmemeval"][1] == 1
    for figures in res["auroc"].values():
        assert set(figures) == set(relevance_signals.SIGNALS)
        assert all(0.0 <= v <= 1.0 for v in figures.values())
    assert set(res["reversed"]) == set(relevance_signals.SIGNALS)
    assert "(calibration)" in capsys.readouterr().out
    assert relevance_signals.main(argv) == 0  # the kept memories are searched again
    assert "in the memory already" in capsys.readouterr().err
    bad = ["--set", "longmemeval", str(lme), "some", str(tmp_path / "x"), "--embedder", "hashing:64"]
    assert relevance_signals.main(bad) == 2
    assert "LIMIT must be a whole number" in capsys.readouterr().err
    twice = argv[:5] + argv[:5] + ["--embedder", "hashing:64"]
    assert relevance_signals.main(twice) == 2
    assert "given twice" in capsys.readouterr().err


def test_relevance_signals_of_one_row() -> None:
    from relevance_signals import row_signals

    q = np.array([1.0, 0.0], np.float32)
    sem = np.array([[0.6, 0.8]], np.float32)
    units = np.array([[0.6, 0.8], [1.0, 0.0], [0.0, 1.0]], np.float32)
    s = row_signals(q, sem, units)
    assert s["max_statement"] == pytest.approx(0.6) and s["max_unit"] == pytest.approx(1.0)
    cos = np.array([1.0, 0.6, 0.0])
    assert s["z_unit"] == pytest.approx((1.0 - cos.mean()) / cos.std())
    assert s["gap10"] == pytest.approx(1.0) and s["gap50"] == pytest.approx(1.0)


def test_long_memory_streams_public_conversations_one_after_another(tmp_path: Path) -> None:
    import bench_long_memory

    beam = _beam(tmp_path / "b", split="1M", n=2)
    turns, names = bench_long_memory.public_turns(beam)
    assert names == ["beam-1m-1", "beam-1m-2"]
    assert len(turns) == 2 * 8 and [t["role"] for t in turns[:2]] == ["user", "assistant"]
    sessions = [t["session"] for t in turns]
    assert sessions == sorted(sessions) and sessions[8] == sessions[7] + 1  # the second one goes on
    assert turns[0]["timestamp"] and "id" not in turns[0]  # BEAM's ids repeat from one to the next
    assert len(bench_long_memory.public_turns(beam, 1)[0]) == 8
    out = tmp_path / "lm.json"
    argv = ["--beam", str(beam), "--adds", "1", "--searches", "1", "--deletes", "1", "--json", str(out)]
    assert bench_long_memory.main(argv) == 0
    res = json.loads(out.read_text())
    assert res["chat"] == "beam-1m-1 beam-1m-2" and res["turns"] == 16 and res["target_tokens"] is None
    assert res["at_100pct"]["delete"]["n"] == 1 and res["reopened"]["memory_mb"] is not None
    assert len(res["reopened"]["first_searches_ms"]) == 3 and "warm_s" not in res["reopened"]
    assert res["reopened_warm"]["warm_s"] >= 0 and res["reopened_warm"]["first_add_ms"] > 0
    assert bench_long_memory.main(["--beam", str(tmp_path / "b" / "chats" / "100K")]) == 2
    assert bench_long_memory.main(["--limit", "2"]) == 2  # a limit of what: --beam's conversations
