"""The bulk build's core, shared by its executors: the plan (``construct/plan.py``: the one resume
rule), the ordered committer (``construct/commit.py``: results in any arrival order committed whole,
in plan order) and the finalise step (``construct/finalize.py``, shared with growth)."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from xmemory_gpu.config import XMemoryConfig
from xmemory_gpu.construct import finalize, incremental, pipeline
from xmemory_gpu.construct.commit import OrderedCommitter, ShardResult, build_target, build_with, finished
from xmemory_gpu.construct.pipeline import InProcess, build_slices, build_store, load_conversations
from xmemory_gpu.construct.plan import BUILT, DAMAGED, NEW, BuildPlan, Shard, resume_state
from xmemory_gpu.construct.progress import Timings
from xmemory_gpu.datasets.synthetic import generate_conversations, write_json
from xmemory_gpu.embed import load_embedder
from xmemory_gpu.memory.codec import encode_slice
from xmemory_gpu.memory.store import Store

SPEC = "hashing:64"


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    return write_json(generate_conversations(7, seed=9), tmp_path_factory.mktemp("core") / "c.json")


def _cfg() -> XMemoryConfig:
    cfg = XMemoryConfig()
    cfg.embed.model = SPEC
    return cfg


def _files(root: Path) -> list[tuple[str, dict, dict]]:
    """The store's memories in catalogue order, each with its columns (exact bytes; text columns as
    lists) and stats."""
    st = Store.open(root)
    out = []
    for mid in st.memory_ids():
        sl = st.get_slice(mid)
        cols = {
            f"{lvl}.{name}": (a.dtype.str, a.shape, a.tolist() if a.dtype == object else a.tobytes())
            for lvl, level in sl.cols.items()
            for name, a in level.items()
        }
        out.append((mid, cols, {k: v for k, v in sl.stats.items() if k != "timings"}))
    st.close()
    return out


class Replayed:
    """An executor that builds every shard in this process and hands the results back in the order
    ``order`` (shard indices) says; a shard named in ``fail`` gives an error, one left out of
    ``order`` never comes back."""

    def __init__(self, order: list[int], fail: set[int] = frozenset()) -> None:
        self.order, self.fail = order, fail
        self.inner = InProcess(load_embedder(SPEC), _cfg())

    def map(self, shards, track):
        results = {r.index: r for r in self.inner.map(shards, track)}
        for k in self.order:
            yield ShardResult(k, error=RuntimeError(f"shard {k} failed")) if k in self.fail else results[k]


def _build(data: Path, root: Path, executor, *, shard_size: int = 2, limit: int | None = None):
    convs = load_conversations(data, limit=limit)
    emb = load_embedder(SPEC)
    with build_target(root, emb, _cfg()) as store:
        return build_with(executor, store, convs, len(convs), shard_size, Timings(), 0.0)


def test_the_resume_rule_and_the_plan(data, tmp_path):
    root = tmp_path / "s"
    build_store(
        data, root, embedder=load_embedder(SPEC), config=_cfg(), limit=4, shard_size=2, progress=False
    )
    convs = load_conversations(data)
    cut = sorted((root / "arrays").glob("*.slice"))[1]
    cut.write_bytes(cut.read_bytes()[:-10])  # fails its checksum: damaged
    st = Store.open(root)
    states = [resume_state(st, c.sample_id) for c in convs]
    bad = states.index(DAMAGED)
    assert states == [DAMAGED if i == bad else BUILT if i < 4 else NEW for i in range(7)]
    skips: list[int] = []
    plan = BuildPlan(st, convs, len(convs), on_skip=skips.append)
    shards = list(plan.shards(2))
    assert [s.ids for s in shards] == [[convs[i].sample_id for i in ks] for ks in ([bad, 4], [5, 6])]
    assert [s.index for s in shards] == [0, 1] and [s.replace for s in shards] == [True, False]
    assert plan.skipped == [c.sample_id for i, c in enumerate(convs[:4]) if i != bad] and skips == [1, 1, 1]
    assert plan.damaged == {convs[bad].sample_id}
    with pytest.raises(RuntimeError, match="read already"):
        next(plan.todo())
    st.close()


def test_results_in_any_order_are_committed_in_plan_order(data, tmp_path):
    ref = _build(data, tmp_path / "ref", InProcess(load_embedder(SPEC), _cfg()))
    got = _build(data, tmp_path / "s", Replayed([3, 1, 2, 0]))
    assert got.built == ref.built and len(got.built) == 7
    assert _files(tmp_path / "s") == _files(tmp_path / "ref")  # positions, names and bytes
    assert {"embed_messages", "themes", "commit"} <= set(got.timings)


def test_an_error_commits_the_shards_before_it_and_a_rerun_completes(data, tmp_path):
    _build(data, tmp_path / "ref", InProcess(load_embedder(SPEC), _cfg()))
    with pytest.raises(RuntimeError, match="shard 2 failed"):
        _build(data, tmp_path / "s", Replayed([3, 0, 2, 1], fail={2}))
    convs = load_conversations(data)
    assert Store.open(tmp_path / "s").memory_ids() == [c.sample_id for c in convs[:4]]  # not shard 3
    again = _build(data, tmp_path / "s", InProcess(load_embedder(SPEC), _cfg()))
    assert len(again.skipped) == 4 and len(again.built) == 3
    assert _files(tmp_path / "s") == _files(tmp_path / "ref")


def test_a_shard_that_never_comes_back_stops_the_build(data, tmp_path):
    with pytest.raises(RuntimeError, match=r"3 memories did not come back .* re-run the same command"):
        _build(data, tmp_path / "s", Replayed([0, 1]))
    assert len(Store.open(tmp_path / "s").memory_ids()) == 4


def test_an_executor_waits_its_turn(data, tmp_path):
    convs = load_conversations(data, limit=3)
    emb = load_embedder(SPEC)
    store = Store.open_or_create(tmp_path / "s", dim=emb.dim, embedder=emb.name, config={})
    committer = OrderedCommitter(store)
    shards = [Shard(k, [c]) for k, c in enumerate(convs)]
    list(committer._planned(shards))
    assert committer.wait_turn(1, ahead=2)  # one shard ahead of the commit: at once
    turns: list[bool] = []
    waiter = threading.Thread(target=lambda: turns.append(committer.wait_turn(2, ahead=2)))
    waiter.start()
    committer.add(ShardResult(1, build_slices([convs[1]], emb)))  # ahead of its turn: held
    assert committer.committed == 0 and store.memory_ids() == []
    committer.add(ShardResult(0, build_slices([convs[0]], emb)))
    waiter.join(timeout=600)  # a hang guard
    assert turns == [True] and store.memory_ids() == [c.sample_id for c in convs[:2]]
    stopped: list[bool] = []
    late = threading.Thread(target=lambda: stopped.append(committer.wait_turn(9, ahead=1)))
    late.start()
    committer.stop()
    late.join(timeout=600)
    assert stopped == [False]
    store.close()


def test_finish_applies_to_slices_and_to_encoded_memories(data):
    emb = load_embedder(SPEC)
    slices = build_slices(load_conversations(data, limit=2), emb)

    def mark(sls):
        for sl in sls:
            sl.stats["finished"] = True

    encoded = [encode_slice(sl, emb.dim) for sl in slices]
    assert finished(encoded, None, emb.dim) is encoded
    assert all(e.stats["finished"] for e in finished(encoded, mark, emb.dim))
    assert finished(slices, mark, emb.dim) is slices and all(sl.stats["finished"] for sl in slices)


def test_the_finalise_step_is_one_public_module():
    """The bulk build finalises with ``finalize.finalize``; the live engine's grown slices take the
    same theme summaries, partition stats and f(P) record from it."""
    assert pipeline.finalize is finalize.finalize and not hasattr(pipeline, "_finalize")
    for name in ("record_objective", "theme_summaries", "partition_stats"):
        assert getattr(incremental, name) is getattr(finalize, name)


def test_a_ray_actor_answers_each_shard_in_order_with_its_index(data):
    pa = pytest.importorskip("pyarrow")
    import json

    from xmemory_gpu.distributed.ray_build import ShardBuilder
    from xmemory_gpu.memory.records import conversation_to_wire

    convs = load_conversations(data, limit=3)
    builder = ShardBuilder(SPEC, _cfg().to_dict())
    wire = ["[" + ",".join(conversation_to_wire(c) for c in part) + "]" for part in (convs[:2], convs[2:])]
    out = builder(pa.table({"shard": [4, 5], "conversations": wire}))
    assert out.column("shard").to_pylist() == [4, 4, 5]
    assert out.column("memory_id").to_pylist() == [c.sample_id for c in convs]
    stages = [json.loads(t) for t in out.column("timings").to_pylist()]
    assert "encode" in stages[0]["stages"] and stages[1] == {} and "encode" in stages[2]["stages"]
