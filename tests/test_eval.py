"""The evaluation harness end to end on a small synthetic store (no LLM)."""

from __future__ import annotations

import json

import pytest

from xmemory_gpu.cli import main
from xmemory_gpu.datasets.synthetic import generate_conversations, write_json
from xmemory_gpu.eval.runner import score
from xmemory_gpu.retrieve.result import RetrievalResult, RetrievedUnit


def test_score_counts_provenance_and_answer_words():
    units = [RetrievedUnit("theme", "0", "Lisbon", 0, 1.0, []),
             RetrievedUnit("semantic", "1", "Alice moved to Lisbon.", 6, 0.9, ["D1:2"]),
             RetrievedUnit("episode", "0", "Bob: hi\nAlice: I love Portugal", 9, 0.5, ["D1:3", "D1:4"])]
    r = RetrievalResult("q", "m", "s", units, "ctx", 15, "tok")
    row = score(r, {"memory": "m", "question": "q", "answer": "Lisbon, Portugal", "evidence": ["D1:2", "D9:9"], "category": 2})
    assert row["recall"] == 0.5 and row["precision"] == pytest.approx(1 / 3)
    assert row["blocks"] == 2 and row["covered"] == 1.0 and row["blocks_to_cover"] == 2 and row["tokens_to_cover"] == 15
    assert row["density_1"] == 1.0


def test_eval_cli_writes_tables_and_sweep(tmp_path, capsys):
    data = tmp_path / "synthetic.json"
    write_json(generate_conversations(3, seed=4), data)
    store = tmp_path / "store"
    assert main(["build", str(data), "--out", str(store), "--embedder", "hashing:64", "--no-progress"]) == 0
    out = tmp_path / "eval"
    assert main(["eval", str(store), "--data", str(data), "--out", str(out), "--sweep-budget", "150,400"]) == 0
    printed = capsys.readouterr().out
    summary = json.loads((out / "summary.json").read_text())
    names = list(summary["strategies"])
    assert names == ["naive-rag", "tir", "memory-only", "xmemory-stage1", "xmemory"]
    for name, s in summary["strategies"].items():
        assert 0.0 <= s["recall"]["micro"] <= 1.0 and s["context_tokens"]["micro"] > 0, name
        assert s["queries_per_second"] > 0
    n = summary["meta"]["questions"]
    assert sum(1 for _ in open(out / "questions.jsonl")) == n * len(names)
    sweep = json.loads((out / "sweep.json").read_text())
    for s in sweep["strategies"].values():
        assert s["context_tokens"][0] <= 150 and s["context_tokens"][0] <= s["context_tokens"][1] + 1e-9
    assert (out / "sweep.png").stat().st_size > 1000 and "| xmemory |" in printed
    assert main(["eval", str(store), "--data", str(data), "--out", str(out), "--strategies", "nope"]) == 2


def test_eval_with_a_reader_adds_qa_metrics(tmp_path):
    from tiny_llm import make_tiny_llama

    from xmemory_gpu.eval.runner import run_eval

    data = tmp_path / "synthetic.json"
    write_json(generate_conversations(2, seed=8), data)
    store = tmp_path / "store"
    assert main(["build", str(data), "--out", str(store), "--embedder", "hashing:64", "--no-progress"]) == 0
    model = make_tiny_llama(tmp_path / "tiny", layers=1)
    rep = run_eval(store, data, tmp_path / "eval", strategies=["naive-rag", "xmemory"], limit=3, reader=f"hf:{model}")
    for s in rep["strategies"].values():
        assert 0.0 <= s["f1_authors"]["micro"] <= 1.0 and s["tokens_per_query"]["micro"] > s["context_tokens"]["micro"]
    assert rep["strategies"]["xmemory"]["llm_calls"]["micro"] >= 2 and rep["strategies"]["naive-rag"]["llm_calls"]["micro"] == 0
    assert "QA with the reader" in (tmp_path / "eval" / "table.md").read_text()
