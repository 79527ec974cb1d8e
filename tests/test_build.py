"""The LLM-free builder: segmentation, decoupling, de-duplication, themes, and whole memories."""

from __future__ import annotations

import numpy as np
import pytest

from xmemory_gpu.config import SegmentConfig, SemanticConfig, XMemoryConfig
from xmemory_gpu.construct.pipeline import build_memories
from xmemory_gpu.construct.segment import boundaries, make_episodes
from xmemory_gpu.construct.semantic import decouple, extract_statements, is_filler, merge_duplicates
from xmemory_gpu.datasets.locomo import load_locomo
from xmemory_gpu.datasets.synthetic import generate_conversations, write_json
from xmemory_gpu.embed.hashing import HashingEmbedder
from xmemory_gpu.memory.records import Conversation, Message, SemanticNode
from xmemory_gpu.ops.objective import partition_objective


def _conv(sessions: list[int], gaps: list[float] | None = None) -> Conversation:
    t, msgs = 1.7e9, []
    for i, s in enumerate(sessions):
        t += gaps[i] if gaps else 10.0
        msgs.append(
            Message(
                id=f"D{s}:{i}",
                speaker="Alice" if i % 2 == 0 else "Bob",
                text=f"message {i} about hiking",
                session=s,
                timestamp=t,
            )
        )
    return Conversation(sample_id="c", speakers=("Alice", "Bob"), messages=msgs)


def test_boundaries_cover_messages_in_order_and_respect_sessions_and_cap():
    conv = _conv([1] * 30 + [2] * 5)
    x = np.ones((35, 8), np.float32) / np.sqrt(8)
    spans = boundaries(conv, x, SegmentConfig(max_messages=12))
    assert spans[0][0] == 0 and spans[-1][1] == 35
    assert all(a[1] == b[0] for a, b in zip(spans, spans[1:]))
    assert all(e - s <= 12 for s, e in spans)
    assert (30, 35) in spans  # the session change is a boundary
    assert [e - s for s, e in spans[:3]] == [10, 10, 10]  # 30 messages cut into balanced parts


def test_boundaries_time_gap_and_drift():
    conv = _conv([1] * 6, gaps=[10, 10, 10, 10 * 3600, 10, 10])
    x = np.ones((6, 4), np.float32) / 2
    assert (0, 3) in boundaries(conv, x, SegmentConfig(time_gap_s=3600))
    y = np.zeros((8, 2), np.float32)
    y[:4, 0] = 1
    y[4:, 1] = 1  # orthogonal topic from message 4
    spans = boundaries(_conv([1] * 8), y, SegmentConfig(drift_threshold=0.5, min_messages=3))
    assert spans == [(0, 4), (4, 8)]


def test_episodes_keep_messages_intact():
    conv = _conv([1] * 5)
    eps = make_episodes(conv, [(0, 2), (2, 5)])
    assert [e.message_ids for e in eps] == [["D1:0", "D1:1"], ["D1:2", "D1:3", "D1:4"]]
    assert eps[1].text.splitlines()[0] == "Alice: message 2 about hiking"


@pytest.mark.parametrize(
    "text,expected",
    [
        ("I really love painting landscapes.", "Alice really loves painting landscapes."),
        ("My dog is called Max.", "Alice's dog is called Max."),
        ("I'm a nurse at the city hospital.", "Alice is a nurse at the city hospital."),
        ("Your painting looks great.", "Bob's painting looks great."),
        ("That trip to Paris was amazing!", "Alice said: That trip to Paris was amazing!"),
    ],
)
def test_decouple_names_the_speakers(text, expected):
    assert decouple(text, "Alice", "Bob") == expected


def test_filler_and_questions_are_dropped():
    cfg = SemanticConfig()
    assert is_filler("Hey, how are you doing?", cfg)
    assert is_filler("Wow, thanks!", cfg)
    assert not is_filler("I started a new job as a nurse in Boston.", cfg)


def test_photo_caption_becomes_a_statement():
    conv = Conversation(
        "c",
        ("Alice", "Bob"),
        [Message("D1:1", "Alice", "Look at this! [shares a photo: a red kayak on a lake]", 1, 0.0)],
    )
    (node,) = extract_statements(conv, make_episodes(conv, [(0, 1)]), SemanticConfig())
    assert node.text == "Alice shared a photo of a red kayak on a lake"
    assert node.message_ids == ["D1:1"] and node.episode_ids == [0]


def test_merge_duplicates_keeps_every_source(rng):
    x = rng.standard_normal((4, 16)).astype(np.float32)
    x[2] = x[0] + 1e-3
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    nodes = [SemanticNode(i, f"s{i}", [i], [f"m{i}"]) for i in range(4)]
    kept, kx = merge_duplicates(nodes, x, 0.99)
    assert [n.text for n in kept] == ["s0", "s1", "s3"]
    assert kept[0].message_ids == ["m0", "m2"] and kept[0].episode_ids == [0, 2]
    assert np.array_equal(kx, x[[0, 1, 3]])
    nodes[1] = SemanticNode(
        1, "s1", [3, 1, 3], ["m1", "m0", "m1"]
    )  # nothing merges into it: its sources still tidied
    kept, _ = merge_duplicates(nodes, x, 0.99)
    assert kept[1].message_ids == ["m1", "m0"] and kept[1].episode_ids == [1, 3]
    assert (
        kept[2].message_ids == ["m3"] and kept[2].message_ids is not nodes[3].message_ids
    )  # a copy, not shared


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory):
    path = tmp_path_factory.mktemp("synth") / "synthetic.json"
    write_json(generate_conversations(4, seed=11), path)
    return load_locomo(path)


@pytest.fixture(scope="module")
def built(synthetic):
    return build_memories(synthetic, HashingEmbedder(64), XMemoryConfig())


def test_memories_are_complete_and_traceable(synthetic, built):
    cfg = XMemoryConfig()
    for conv, mem in zip(synthetic, built):
        ids = [m.id for m in conv.messages]
        assert [
            mid for e in mem.episodes for mid in e.message_ids
        ] == ids  # every message in one episode, in order
        assert mem.theme_of.shape == (len(mem.semantics),)
        assert mem.theme_of.min() >= 0 and mem.theme_of.max() < len(mem.themes)
        counts = np.bincount(mem.theme_of, minlength=len(mem.themes))
        assert counts.min() >= 1 and counts.max() <= cfg.theme.size_cap
        for node in mem.semantics:
            assert node.message_ids and set(node.message_ids) <= set(ids)
            assert all(0 <= e < len(mem.episodes) for e in node.episode_ids)
        assert mem.sem_x.shape == (len(mem.semantics), 64) and mem.epi_x.shape == (len(mem.episodes), 64)
        k = cfg.knn.k_themes
        assert mem.theme_knn_idx.shape == (len(mem.themes), k)
        assert mem.theme_knn_idx.max() < len(mem.themes)
        assert not np.any(mem.theme_knn_idx == np.arange(len(mem.themes))[:, None])
        assert mem.sem_knn_idx.max() < len(mem.semantics)
        assert mem.stats["n_semantics"] == len(mem.semantics)
        assert 0.0 <= mem.stats["reassignment_ratio"] <= 1.0
        f = partition_objective(
            mem.sem_x, mem.theme_of.astype(np.int64), np.array([0, len(mem.semantics)]), backend="reference"
        )
        assert mem.stats["f_P"] == pytest.approx(float(f[0]), rel=1e-6)


def test_theme_graph_is_the_exact_knn_of_final_centroids(built):
    from xmemory_gpu.memory.codec import theme_columns
    from xmemory_gpu.ops.knn import knn_graph

    for mem in built:
        theme_x = theme_columns(mem.sem_x, mem.theme_of, len(mem.themes))["x"]
        idx, sim = knn_graph(
            theme_x,
            np.array([0, len(mem.themes)]),
            mem.theme_knn_idx.shape[1],
            drop_nonpositive=True,
            backend="reference",
        )
        for r in range(len(mem.themes)):
            # edges at similarity ~0 sit on the "drop <= 0" boundary: rounding decides them
            got = mem.theme_knn_sim[r][(mem.theme_knn_idx[r] >= 0) & (mem.theme_knn_sim[r] > 1e-6)]
            want = sim[r][(idx[r] >= 0) & (sim[r] > 1e-6)]
            assert len(got) == len(want)
            np.testing.assert_allclose(np.sort(got), np.sort(want), atol=1e-4)


def test_build_is_deterministic_and_independent_of_batch(synthetic, built):
    again = build_memories(synthetic[1:3], HashingEmbedder(64), XMemoryConfig())
    for a, b in zip(built[1:3], again):
        assert np.array_equal(a.theme_of, b.theme_of)
        assert [t.summary for t in a.themes] == [t.summary for t in b.themes]


def test_split_and_merge_switches(synthetic):
    cfg = XMemoryConfig()
    cfg.theme.split = cfg.theme.merge = False
    mems = build_memories(synthetic[:2], HashingEmbedder(64), cfg)
    assert all(m.stats["n_splits"] == 0 and m.stats["n_merges"] == 0 for m in mems)
    assert all(m.stats["reassignment_ratio"] == 0.0 for m in mems)
