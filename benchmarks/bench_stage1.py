"""Stage I end to end on the LoCoMo dev store: 1,000 questions in one batch, query embedding
(all-MiniLM-L6-v2, CPU) included; and every strategy on the same batch.

Needs a built store and the dev split (paths are parameters):
  xmemory build locomo_dev.json --out stores/locomo_dev
  XMEM_STORE=stores/locomo_dev XMEM_LOCOMO=locomo_dev.json \\
    python -m pytest benchmarks/bench_stage1.py
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from xmemory_gpu.datasets.locomo import load_locomo
from xmemory_gpu.retrieve import STRATEGIES, Retriever

STORE = os.environ.get("XMEM_STORE", "")
LOCOMO = os.environ.get("XMEM_LOCOMO", "locomo_dev.json")  # the LoCoMo file the store was built from
pytestmark = pytest.mark.skipif(
    not STORE or not Path(STORE).exists(),
    reason="set XMEM_STORE to a built store (scripts/bench.sh builds a small one)",
)


@pytest.fixture(scope="module")
def batch():
    convs = load_locomo(LOCOMO)
    qs = [(q.question, c.sample_id) for c in convs for q in c.qa][:1000]
    return [q for q, _ in qs], [m for _, m in qs], Retriever.from_store(STORE)


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_questions_one_batch(benchmark, batch, strategy):
    questions, mems, retriever = batch
    benchmark.group = (
        f"{len(questions):,} questions of {Path(LOCOMO).name}, one batch, embedding included (CPU)"
    )
    res = benchmark.pedantic(
        lambda: retriever.search(questions, mems, strategy=strategy), rounds=3, iterations=1, warmup_rounds=1
    )
    assert len(res) == len(questions)
    benchmark.extra_info["questions"] = len(questions)
