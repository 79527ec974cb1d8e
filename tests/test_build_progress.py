"""The bulk build's progress: it moves per conversation, not per shard, in this process and with
worker processes, counts resumed conversations as done, and ends at the total (no timing asserts)."""

from __future__ import annotations

import json

import pytest

from xmemory_gpu.config import XMemoryConfig
from xmemory_gpu.construct import progress as progress_mod
from xmemory_gpu.construct.pipeline import build_slices, build_store
from xmemory_gpu.construct.progress import STAGE_SHARE, BuildProgress
from xmemory_gpu.datasets.locomo import conversations_of
from xmemory_gpu.datasets.synthetic import generate_conversations, write_json
from xmemory_gpu.embed import load_embedder

EMB = "hashing:384"


class FakeBar:
    """tqdm's part the build uses, recording every move."""

    made: list[FakeBar] = []

    def __init__(self, total=None, **kw) -> None:
        self.total, self.kw, self.n, self.moves, self.closed = total, kw, 0.0, [], False
        self.initial = 0
        FakeBar.made.append(self)

    def update(self, n=1) -> None:
        self.n += n
        self.moves.append(n)

    def _time(self) -> float:
        return 0.0

    def close(self) -> None:
        self.closed = True


@pytest.fixture
def bars(monkeypatch):
    import tqdm.auto

    FakeBar.made = []
    monkeypatch.setattr(tqdm.auto, "tqdm", FakeBar)
    return FakeBar.made


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    f = tmp_path_factory.mktemp("progress") / "convs.json"
    write_json(generate_conversations(12, seed=5, sessions=(2, 3), turns_per_session=(4, 6)), f)
    return f


def test_stage_shares_make_one_conversation():
    assert sum(STAGE_SHARE.values()) == pytest.approx(1.0)


def test_one_shard_moves_per_conversation(data):
    convs = list(conversations_of(data, json.loads(data.read_text())))
    moves: list[float] = []
    build_slices(convs, load_embedder(EMB), progress=moves.append)
    assert sum(moves) == pytest.approx(len(convs))
    # the per-conversation stages move once per conversation each
    assert moves.count(STAGE_SHARE["statements"]) >= len(convs)
    assert moves.count(STAGE_SHARE["summaries"]) >= len(convs)


def test_in_process_build_moves_per_conversation_and_ends_at_the_total(data, tmp_path, bars):
    report = build_store(data, tmp_path / "s", embedder=load_embedder(EMB), shard_size=64, progress=True)
    (bar,) = bars
    assert bar.total == 12 and bar.kw["unit"] == "conv" and bar.closed
    assert "rate_fmt" in bar.kw["bar_format"] and "remaining" in bar.kw["bar_format"]
    assert bar.n == pytest.approx(12)
    assert (
        len(bar.moves) >= 3 * 12
    )  # one shard of 12, yet the bar moved within it conversation by conversation
    assert len(report.built) == 12


def test_a_resumed_build_counts_what_the_store_holds(data, tmp_path, bars):
    build_store(data, tmp_path / "s", embedder=load_embedder(EMB), limit=5, progress=False)
    assert not bars
    report = build_store(data, tmp_path / "s", embedder=load_embedder(EMB), progress=True)
    (bar,) = bars
    assert len(report.skipped) == 5 and len(report.built) == 7
    assert bar.moves[:5] == [1] * 5  # the five already built, counted as done
    assert bar.n == pytest.approx(12) and bar.initial == 5  # and left out of the rate


def test_worker_build_moves_per_conversation(data, tmp_path, bars):
    cfg = XMemoryConfig()
    cfg.embed.model = EMB
    report = build_store(data, tmp_path / "w", config=cfg, shard_size=6, progress=True, workers=2)
    (bar,) = bars
    assert len(report.built) == 12
    assert bar.n == pytest.approx(12)
    assert len(bar.moves) >= 3 * 12  # the workers' stage lines reach the bar


def test_progress_counts_without_a_bar():
    p = BuildProgress(4, enabled=False)
    p.skip(1)
    p.advance(0.5)
    p.advance(10)  # capped at the total
    assert p.n == 4
    p.commit(3)
    assert (p.n, p.done) == (4, 4)
    q = BuildProgress(3, enabled=False)
    q.commit(2)  # committed with no stage reported: settled to them
    assert q.n == 2 and q.updates == 1
    assert progress_mod.BAR_FORMAT.count("{") >= 5


def test_int8_quantisation_says_so_and_shows_the_batches_read(monkeypatch, capsys):
    """``ov-int8``'s first use quantises for minutes: a one-line notice, then a bar of the calibration
    batches NNCF reads (NNCF itself stays quiet), the batches handed over as a list would be."""
    import numpy as np

    from xmemory_gpu.embed import openvino

    seen: list = []

    class FakeDataset:
        def __init__(self, source) -> None:
            self.source = source

    class FakeNNCF:
        ModelType = type("ModelType", (), {"TRANSFORMER": "transformer"})
        Dataset = FakeDataset

        @staticmethod
        def quantize(model, dataset, **kw):
            print("nncf chatter")
            for _ in range(2):  # two statistics passes, one by index and one in order
                seen.extend(dataset.source[i] for i in range(len(dataset.source)))
            seen.extend(iter(dataset.source))
            return "int8-model"

    def tokenize(texts, **kw):
        n = len(texts)
        return {"input_ids": np.ones((n, 3)), "attention_mask": np.ones((n, 3))}

    monkeypatch.setattr(openvino, "_nncf", lambda: FakeNNCF)
    assert openvino._quantize("model", tokenize) == "int8-model"
    out = capsys.readouterr()
    batches = -(-len(openvino.calibration_texts()) // openvino.CALIBRATION_BATCH)
    assert len(seen) == 3 * batches
    notice = [line for line in out.err.splitlines() if line.startswith("xmemory: quantising")]
    assert len(notice) == 1 and f"{batches} calibration batches" in notice[0]
    assert "quantising (batches read)" in out.err and "nncf chatter" not in out.err + out.out
