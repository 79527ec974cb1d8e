"""The evaluation harness end to end on a small synthetic store (no LLM)."""

from __future__ import annotations

import json

import pytest

from xmemory_gpu.cli import main
from xmemory_gpu.config import XMemoryConfig
from xmemory_gpu.datasets.locomo import load_locomo
from xmemory_gpu.datasets.synthetic import generate_conversations, write_json
from xmemory_gpu.eval.runner import DEFAULT_STRATEGIES, score
from xmemory_gpu.retrieve import STRATEGIES
from xmemory_gpu.retrieve.result import RetrievalResult, RetrievedUnit

QUESTION = {
    "sample_id": "m",
    "qa_index": 3,
    "question": "q",
    "answer": "Lisbon, Portugal",
    "evidence": ["D1:2", "D9:9"],
    "category": 2,
}


def test_score_counts_provenance_and_answer_words():
    units = [
        RetrievedUnit("theme", "0", "Lisbon", 0, 1.0, []),
        RetrievedUnit("semantic", "1", "Alice moved to Lisbon.", 6, 0.9, ["D1:2"]),
        RetrievedUnit("episode", "0", "Bob: hi\nAlice: I love Portugal", 9, 0.5, ["D1:3", "D1:4"]),
    ]
    r = RetrievalResult("q", "m", "s", units, "ctx", 15, "tok")
    row = score(r, QUESTION)
    assert row["recall"] == 0.5 and row["precision"] == pytest.approx(1 / 3)
    assert (
        row["blocks"] == 2
        and row["covered"] == 1.0
        and row["blocks_to_cover"] == 2
        and row["tokens_to_cover"] == 15
    )
    assert row["density_1"] == 1.0
    assert row["message_ids"] == ["D1:2", "D1:3", "D1:4"] and row["answer"] is None and row["strategy"] == "s"
    assert (row["sample_id"], row["qa_index"], row["category"]) == ("m", 3, 2)
    assert row["units"][1] == {"type": "semantic", "id": "1", "tokens": 6, "message_ids": ["D1:2"]}


@pytest.fixture(scope="module")
def two_convs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("ev")
    data = tmp / "synthetic.json"
    write_json(generate_conversations(2, seed=4), data)
    store = tmp / "store"
    assert main(["build", str(data), "--out", str(store), "--embedder", "hashing:64", "--no-progress"]) == 0
    return data, store


def test_eval_cli_end_to_end(tmp_path, two_convs, capsys):
    data, store = two_convs
    out = tmp_path / "eval"
    assert (
        main(
            [
                "eval",
                str(store),
                "--data",
                str(data),
                "--out",
                str(out),
                "--sweep-budget",
                "150,400",
                "--seed",
                "3",
            ]
        )
        == 0
    )
    printed = capsys.readouterr().out
    summary = json.loads((out / "summary.json").read_text())
    names = list(summary["strategies"])
    assert names == list(DEFAULT_STRATEGIES) and set(names) == set(STRATEGIES)
    for name, s in summary["strategies"].items():
        assert 0.0 <= s["recall"]["micro"] <= 1.0 and s["context_tokens"]["micro"] > 0, name
        assert s["queries_per_second"] > 0 and set(s["recall"]) >= {"micro"}
    meta = summary["meta"]
    prov = meta["provenance"]
    assert (
        prov["seed"] == 3
        and prov["versions"]["numpy"]
        and prov["versions"]["python"]
        and "git_commit" in prov
    )
    assert (
        meta["config"]["stage2"]["mode"] == "independent"
        and meta["tokenizer"]
        and meta["embedder"] == "hashing-64"
    )
    convs = {c.sample_id: c for c in load_locomo(data)}
    rows = [json.loads(line) for line in open(out / "results.jsonl")]
    assert len(rows) == meta["questions"] * len(names)
    for row in rows:
        qa = convs[row["sample_id"]].qa[row["qa_index"]]
        assert row["question"] == qa.question and row["category"] == qa.category in (1, 2, 3, 4)
        assert row["answer"] is None and row["strategy"] in names
        assert row["message_ids"] == list(dict.fromkeys(m for u in row["units"] for m in u["message_ids"]))
        assert all(set(u) == {"type", "id", "tokens", "message_ids"} for u in row["units"])
    sweep = json.loads((out / "sweep.json").read_text())
    for s in sweep["strategies"].values():
        assert s["context_tokens"][0] <= 150 and s["context_tokens"][0] <= s["context_tokens"][1] + 1e-9
    for png in ("sweep.png", "recall_vs_tokens.png", "categories.png", "density.png"):
        assert (out / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and (out / png).stat().st_size > 5000, png
    md = (out / "summary.md").read_text()
    assert "| xmemory |" in md and "Evidence recall by category" in md and "| xmemory |" in printed
    assert main(["eval", str(store), "--data", str(data), "--out", str(out), "--strategies", "nope"]) == 2
    assert main(["eval", str(store), "--data", str(data), "--out", str(out), "--tir-prune"]) == 2
    assert "--tir-prune needs --reader" in capsys.readouterr().err


def test_eval_limit_categories_and_config(tmp_path, two_convs):
    data, store = two_convs
    cfg = tmp_path / "cfg.json"
    cfg.write_text(json.dumps({"stage2": {"mode": "sequential", "episode_budget": 3}}))
    out = tmp_path / "e"
    assert (
        main(
            [
                "eval",
                str(store),
                "--data",
                str(data),
                "--out",
                str(out),
                "--strategies",
                "xmemory",
                "--limit",
                "4",
                "--categories",
                "2",
                "--config",
                str(cfg),
            ]
        )
        == 0
    )
    summary = json.loads((out / "summary.json").read_text())
    assert summary["meta"]["questions"] <= 4 and summary["meta"]["config"]["stage2"]["episode_budget"] == 3
    rows = [json.loads(line) for line in open(out / "results.jsonl")]
    assert rows and all(r["category"] == 2 for r in rows)
    assert all(sum(u["type"] == "episode" for u in r["units"]) <= 3 for r in rows)


def test_retrieval_ablation_rows(tmp_path, two_convs):
    data, store = two_convs
    out = tmp_path / "abl"
    assert (
        main(
            [
                "eval",
                str(store),
                "--data",
                str(data),
                "--out",
                str(out),
                "--ablation",
                "retrieval",
                "--limit",
                "6",
            ]
        )
        == 0
    )
    summary = json.loads((out / "summary.json").read_text())
    assert list(summary["strategies"]) == [
        "naive-rag",
        "memory-only",
        "xmemory-stage1",
        "xmemory-stage2",
        "xmemory",
    ]
    md = (out / "summary.md").read_text()
    for label in ("| Naive RAG |", "| Memory-only |", "| +RepSel |", "| +UncSion |", "| Full |"):
        assert label in md


def test_construction_ablation(tmp_path, two_convs):
    from xmemory_gpu.embed.hashing import HashingEmbedder
    from xmemory_gpu.eval.ablation import run_construction_ablation

    data, _ = two_convs
    res = run_construction_ablation(
        data, tmp_path / "stores", tmp_path / "out", embedder=HashingEmbedder(64), question_limit=5
    )
    rows = {r["construction"]: r for r in res["rows"]}
    assert list(rows) == ["split + merge", "without merge", "without split", "without both"]
    cap = XMemoryConfig().theme.size_cap
    assert rows["split + merge"]["max_theme_size"] <= cap and rows["without merge"]["max_theme_size"] <= cap
    assert (
        rows["without merge"]["themes"] >= rows["split + merge"]["themes"]
    )  # merging only ever removes themes
    assert rows["without split"]["themes"] <= rows["split + merge"]["themes"]
    for r in rows.values():
        assert (
            r["semantics"] == rows["split + merge"]["semantics"]
            and 0 <= r["recall"] <= 1
            and r["mean_f_P"] is not None
        )
        assert 0.0 <= r["mean_reassignment_ratio"] <= 1.0
    md = (tmp_path / "out" / "construction.md").read_text()
    assert md.count("\n| without") == 3 and (tmp_path / "out" / "no-split" / "summary.json").exists()
    again = run_construction_ablation(
        data, tmp_path / "stores", tmp_path / "out2", embedder=HashingEmbedder(64), question_limit=5
    )
    assert all(r["built_now"] == 0 for r in again["rows"])  # the stores are reused
    assert [r["recall"] for r in again["rows"]] == [r["recall"] for r in res["rows"]]


def test_eval_with_a_reader_adds_qa_metrics(tmp_path, two_convs):
    from tiny_llm import make_tiny_llama

    from xmemory_gpu.eval.runner import run_eval

    data, store = two_convs
    model = make_tiny_llama(tmp_path / "tiny", layers=1)
    rep = run_eval(
        store, data, tmp_path / "eval", strategies=["naive-rag", "xmemory"], limit=3, reader=f"hf:{model}"
    )
    for s in rep["strategies"].values():
        assert (
            0.0 <= s["f1_authors"]["micro"] <= 1.0
            and s["tokens_per_query"]["micro"] > s["context_tokens"]["micro"]
        )
    assert (
        rep["strategies"]["xmemory"]["llm_calls"]["micro"] >= 2
        and rep["strategies"]["naive-rag"]["llm_calls"]["micro"] == 0
    )
    assert "QA with the reader" in (tmp_path / "eval" / "summary.md").read_text()
    rows = [json.loads(line) for line in open(tmp_path / "eval" / "results.jsonl")]
    assert all(isinstance(r["answer"], str) and "f1_squad" in r for r in rows)
