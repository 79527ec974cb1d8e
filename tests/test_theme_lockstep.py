"""The theme stage in lockstep across memories equals the per-conversation path it replaced.

References kept here (the code as it was before the stage was batched): ``_block_reference``, one
memory's f(P) state from its labels (sums by ``np.add.at``, norms and centroid cosines by ``dot4``,
top-2 by argmax, ``objective_from_parts``); ``_grow_reference``, one conversation at a time, its state rebuilt from
its labels for every scoring call and its merge candidates from the per-theme loop
(``merge_candidates_reference``). The batched path must take the same decisions to the last tie:
same theme ids, lineage, theme_of, reassignments and split / merge counts, and f(P) within 1e-9
(it is bit-identical).
"""

from __future__ import annotations

import numpy as np
import pytest

from xmemory_gpu.config import ThemeConfig, XMemoryConfig
from xmemory_gpu.construct import pipeline
from xmemory_gpu.construct.segment import boundaries, embed_messages, make_episodes
from xmemory_gpu.construct.semantic import extract_statements, merge_duplicates
from xmemory_gpu.construct.theme_split import split_proposals
from xmemory_gpu.construct.theme_state import ThemeState
from xmemory_gpu.construct.themes import grow_themes, merge_candidates, merge_candidates_reference
from xmemory_gpu.datasets.locomo import load_locomo
from xmemory_gpu.datasets.synthetic import generate_conversations, write_json
from xmemory_gpu.embed.hashing import HashingEmbedder
from xmemory_gpu.ops import available_backends
from xmemory_gpu.ops.objective import Candidates, PartitionState, partition_objective, score_candidates
from xmemory_gpu.ops.objective.state import objective_from_parts
from xmemory_gpu.ops.rows import dot4


def _block_reference(x: np.ndarray, labels: np.ndarray, eps: float = 1e-8):
    """One memory's (theme labels, sums, counts, top-2 rows, top-2 cosines, f) from x [n, d] (any
    norms) and labels [n], as the per-memory state computed them."""
    x = np.asarray(x, np.float64)
    nx = np.sqrt(dot4(x, x))[:, None]  # norms in the rule's fixed order
    x = np.divide(x, nx, out=np.zeros_like(x), where=nx > 0)
    uniq, inv = np.unique(labels, return_inverse=True)
    k, d = len(uniq), x.shape[1]
    sm = np.zeros((k, d))
    np.add.at(sm, inv, x)
    cnt = np.bincount(inv, minlength=k).astype(np.int64)
    nrm = np.sqrt(dot4(sm, sm))
    unit = np.divide(sm, nrm[:, None], out=np.zeros_like(sm), where=nrm[:, None] > 0)
    cos = dot4(
        unit[:, None, :], unit[None, :, :]
    )  # the centroid cosines in one fixed order (no BLAS product)
    np.fill_diagonal(cos, -np.inf)
    ti, tc = np.full((k, 2), -1, np.int64), np.full((k, 2), -np.inf)
    if k > 1:
        rows = np.arange(k)
        ti[:, 0] = np.argmax(cos, axis=1)
        tc[:, 0] = cos[rows, ti[:, 0]]
        rest = cos.copy()
        rest[rows, ti[:, 0]] = -np.inf
        ti[:, 1] = np.argmax(rest, axis=1)
        tc[:, 1] = rest[rows, ti[:, 1]]
        ti[~np.isfinite(tc)] = -1
    return (
        uniq,
        sm,
        cnt,
        ti,
        tc,
        objective_from_parts(nrm, cnt, tc[:, 0] if k > 1 else np.zeros(1), len(labels), eps),
    )


def _state_of(st: ThemeState) -> PartitionState:
    n = st.n_attached
    return PartitionState.from_labels(st.x[:n], st.label[:n], np.array([0, n], np.int64))


def _grow_reference(st: ThemeState, steps: list[np.ndarray], cfg: ThemeConfig, max_rounds: int = 8) -> None:
    """One conversation: attach each step's rows, split every overfull theme by its best proposal
    (rounds until none is over the cap), merge the best-gaining disjoint candidate pairs."""
    for rows in steps:
        st.attach(rows, cfg)
        for _ in range(max_rounds if cfg.split else 0):
            todo = [t for t in st.live_ids() if st.count(t) > cfg.size_cap]
            if not todo:
                break
            part = _state_of(st)
            members = [part.members_of(part.theme_row(0, t)) for t in todo]
            props = split_proposals(
                np.concatenate([st.x[m] for m in members]),
                np.cumsum([0] + [len(m) for m in members]),
                ks=cfg.split_ks,
                n_init=cfg.split_n_init,
                seed=cfg.seed,
                cc_threshold=cfg.cc_threshold,
            )
            items, owner = [], []
            for j, (t, m, plist) in enumerate(zip(todo, members, props)):
                if not plist:
                    parts = -(-len(m) // cfg.size_cap)
                    plist = [np.minimum(np.arange(len(m)) * parts // len(m), parts - 1)]
                for lab in plist:
                    items.append((0, [t], [m[lab == c] for c in range(int(lab.max()) + 1)]))
                    owner.append(j)
            f_after = score_candidates(part, Candidates.from_lists(part, items))
            best: dict[int, int] = {}
            for c, j in enumerate(owner):
                if j not in best or f_after[c] > f_after[best[j]]:
                    best[j] = c
            for j, c in best.items():
                st.split(todo[j], items[c][2])
        if cfg.merge:
            part = _state_of(st)
            cands, pairs = merge_candidates_reference([st], part, [0], cfg)
            if not pairs:
                continue
            gains = score_candidates(part, cands) - part.f[0]
            used: set[int] = set()
            for c in np.argsort(-gains, kind="stable"):
                _, t, j = pairs[c]
                if gains[c] <= 0:
                    break
                if t in used or j in used:
                    continue
                used.update({t, j})
                st.merge(t, j)


def _outcome(st: ThemeState) -> tuple:
    ids, parents, theme_of, _, _ = st.final()
    return ids, parents, theme_of.tolist(), st.reassigned.tolist(), st.n_splits, st.n_merges, st.lineage()


def _check_lockstep(
    xs: list[np.ndarray], steps: list[list[np.ndarray]], cfg: ThemeConfig, k: int = 5
) -> None:
    batched = [ThemeState(x, k, True) for x in xs]
    grow_themes(batched, steps, cfg)
    f_fast, f_ref = [], []
    for x, st_steps, st in zip(xs, steps, batched):
        ref = ThemeState(x, k, True)
        _grow_reference(ref, st_steps, cfg)
        got, want = _outcome(st), _outcome(ref)
        assert got == want
        n = np.array([0, len(x)], np.int64)
        f_fast.append(float(partition_objective(x, np.array(got[2]), n)[0]))
        f_ref.append(float(partition_objective(x, np.array(want[2]), n)[0]))
    np.testing.assert_allclose(f_fast, f_ref, rtol=0, atol=1e-9)


def _clustered(rng: np.random.Generator, n: int, k: int, d: int) -> np.ndarray:
    centres = rng.standard_normal((k, d))
    x = centres[rng.integers(0, k, size=n)] + 0.7 * rng.standard_normal((n, d))
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def test_blocks_are_the_per_memory_numerics_bit_for_bit(rng):
    """``from_labels``, ``extend`` and ``apply`` (all memories' blocks in one call) give each memory the
    columns the per-memory code computed, to the bit."""
    for _ in range(10):
        sizes = [int(v) for v in rng.integers(0, 50, size=int(rng.integers(1, 7)))]
        d = int(rng.integers(2, 40))
        x = (
            np.concatenate([_clustered(rng, n, 4, d) for n in sizes])
            if sum(sizes)
            else np.zeros((0, d), np.float32)
        )
        labels = rng.integers(0, 9, size=len(x)) * 3
        off = np.cumsum([0, *sizes]).astype(np.int64)
        st = PartitionState.from_labels(x, labels, off)
        for b in range(len(sizes)):
            s, e = int(off[b]), int(off[b + 1])
            ts, te = int(st.theme_offsets[b]), int(st.theme_offsets[b + 1])
            lab, sm, cnt, ti, tc, f = _block_reference(x[s:e], labels[s:e])
            np.testing.assert_array_equal(st.theme_label[ts:te], lab)
            np.testing.assert_array_equal(st.theme_sum[ts:te], sm)
            np.testing.assert_array_equal(st.theme_count[ts:te], cnt)
            np.testing.assert_array_equal(st.top_idx[ts:te], np.where(ti >= 0, ti + ts, -1))
            np.testing.assert_array_equal(st.top_cos[ts:te], tc)
            assert st.f[b] == f


def test_merge_candidates_equal_the_per_theme_loop(rng):
    cfg = ThemeConfig(size_cap=6, merge_pair_threshold=0.3)
    for _ in range(5):
        xs = [_clustered(rng, int(rng.integers(0, 90)), 6, 12) for _ in range(int(rng.integers(1, 6)))]
        states = [ThemeState(x, 4, True) for x in xs]
        for st in states:
            st.attach(np.arange(len(st.x)), cfg)
        part = PartitionState.from_labels(
            np.concatenate([s.x for s in states]),
            np.concatenate([s.label for s in states]),
            np.cumsum([0] + [len(s.x) for s in states]),
        )
        active = list(range(len(states)))
        got, got_pairs = merge_candidates(states, part, active, cfg)
        want, want_pairs = merge_candidates_reference(states, part, active, cfg)
        assert got_pairs == want_pairs
        for name in ("memory", "rem_offsets", "rem_rows", "add_offsets", "group_offsets", "members"):
            np.testing.assert_array_equal(getattr(got, name), getattr(want, name), err_msg=name)


@pytest.mark.parametrize(
    "cfg",
    [
        ThemeConfig(),
        ThemeConfig(size_cap=5, tiny_size=1, merge_pair_threshold=0.5),
        ThemeConfig(merge=False),
        ThemeConfig(split=False),
    ],
    ids=["default", "tight", "no-merge", "no-split"],
)
def test_lockstep_equals_per_conversation_on_random_memories(rng, cfg):
    xs, steps = [], []
    for _ in range(int(rng.integers(2, 7))):
        n = int(rng.integers(0, 120))
        xs.append(_clustered(rng, n, int(rng.integers(1, 12)), 16))
        steps.append(
            np.array_split(np.arange(n), int(rng.integers(1, 7)))
        )  # memories take different step counts
    _check_lockstep(xs, steps, cfg)


def test_lockstep_equals_per_conversation_on_synthetic_conversations(tmp_path):
    """40 synthetic conversations through the build's own stages (hashing encoder), in shards of 16."""
    cfg = XMemoryConfig()
    emb = HashingEmbedder(384)
    convs = load_locomo(write_json(generate_conversations(40, seed=5), tmp_path / "synth.json"))
    for shard in pipeline.chunks(convs, 16):
        msg_x = pipeline._split(
            embed_messages(emb, [m for c in shard for m in c.messages], cfg.semantic.passage_words).x,
            [len(c.messages) for c in shard],
        )
        episodes = [make_episodes(c, boundaries(c, x, cfg.segment)) for c, x in zip(shard, msg_x)]
        raw = [extract_statements(c, e, cfg.semantic) for c, e in zip(shard, episodes)]
        raw_x = pipeline._split(emb.encode([n.text for nodes in raw for n in nodes]), [len(n) for n in raw])
        deduped = [merge_duplicates(n, x, cfg.semantic.dedup_threshold) for n, x in zip(raw, raw_x)]
        steps = []
        for conv, (nodes, _) in zip(shard, deduped):
            sess = pipeline._node_sessions(conv, nodes)
            steps.append([np.flatnonzero(sess == s) for s in dict.fromkeys(sess.tolist())])
        _check_lockstep([x for _, x in deduped], steps, cfg.theme, k=cfg.knn.k_themes)


def test_cpu_graph_steps_equal_their_numpy_forms(rng):
    """The kNN upkeep's selection and offer steps (the ops ``topk_select`` / ``offer_rows``) leave the
    graph on ``cpu`` exactly as on ``reference``, ties and padding included, under random inserts, moves and
    removals (vectors on a coarse grid, so equal similarities are common)."""
    from xmemory_gpu.ops.knn import graph as graph_mod

    def run(backend: str, seed: int):
        r = np.random.default_rng(seed)
        g = graph_mod.KnnGraph(
            np.zeros((0, 6), np.float32), 4, drop_nonpositive=bool(seed % 2), backend=backend
        )
        for _ in range(25):
            op = int(r.integers(0, 3))
            alive = np.flatnonzero(g.alive)
            if op == 0 or alive.size < 3:
                g.insert(r.integers(-2, 3, size=(int(r.integers(1, 5)), 6)).astype(np.float32))
            elif op == 1:
                rows = r.choice(alive, size=int(r.integers(1, 3)), replace=False)
                g.update(rows, r.integers(-2, 3, size=(rows.size, 6)).astype(np.float32))
            else:
                g.remove(r.choice(alive, size=1))
        return g.idx.copy(), g.sim.copy()

    assert available_backends()["cpu"].available, "the compiled module is not built"
    for seed in rng.integers(0, 2**31, size=6).tolist():
        fast, slow = run("cpu", seed), run("reference", seed)
        np.testing.assert_array_equal(fast[0], slow[0])
        np.testing.assert_array_equal(fast[1], slow[1])


def test_an_engine_add_batch_of_50_scopes_is_one_lockstep_call(tmp_path, monkeypatch):
    """The live engine grows the themes of every memory of a batch in one ``grow_themes`` call."""
    from xmemory_gpu.construct import incremental
    from xmemory_gpu.engine import MemoryEngine

    calls = []
    real = incremental.grow_themes

    def counted(states, steps, cfg, **kw):
        calls.append(len(states))
        return real(states, steps, cfg, **kw)

    monkeypatch.setattr(incremental, "grow_themes", counted)
    items = [
        {
            "user_id": f"u{u}",
            "messages": [
                {
                    "speaker": "Ana",
                    "text": f"I planted {n + u} tomato seedlings by the fence on day {n}.",
                    "timestamp": 1_700_000_000 + n,
                }
                for n in range(4)
            ],
        }
        for u in range(50)
    ]
    with MemoryEngine.open(tmp_path / "s", embedder=HashingEmbedder(64)) as eng:
        eng.add_batch(items)
        assert calls == [50] and len(eng.scopes()) == 50


_BLAS_SCRIPT = """
import sys
from xmemory_gpu.config import XMemoryConfig
from xmemory_gpu.construct.pipeline import build_slices
from xmemory_gpu.datasets.locomo import load_locomo
from xmemory_gpu.embed.hashing import HashingEmbedder
slices = build_slices(load_locomo(sys.argv[1]), HashingEmbedder(384), XMemoryConfig())
sys.stdout.write(" ".join(s.cols["sem"]["theme"].tobytes().hex() for s in slices))
"""


def test_themes_do_not_depend_on_numpys_blas_kernels(tmp_path):
    """The theme stage's decisions on 200 synthetic conversations with the hashing embedder (sparse
    vectors, exact-zero cosines, ties) are the same with NumPy's OpenBLAS on its default kernels and on
    its AVX2 (Haswell) ones, the path an AMD CPU takes. With the theme graphs kept by NumPy products
    (before the ragged kernel), 6 of these 200 memories got other themes on the Haswell kernels (built in
    one batch, as here; 167 of 200 when ``xmemory build`` built them in shards of 16)."""
    import os
    import subprocess
    import sys

    data = write_json(generate_conversations(200, seed=5), tmp_path / "synth.json")
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_CORETYPE"}
    got = [
        subprocess.run(
            [sys.executable, "-c", _BLAS_SCRIPT, str(data)],
            capture_output=True,
            text=True,
            check=True,
            env={**env, **extra},
        ).stdout
        for extra in ({}, {"OPENBLAS_CORETYPE": "Haswell"})
    ]
    assert got[0] and got[0] == got[1]
