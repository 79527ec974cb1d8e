"""Theme construction state: ``PartitionState.apply`` / ``extend`` equal ``from_labels`` on the edited
partition (bit for bit: the build's decisions rest on it), the batched attach equals the per-node
rule, the lazily synced theme graph is the exact kNN graph of the centroids, and the split proposals."""

from __future__ import annotations

import numpy as np
import pytest

from xmemory_gpu.config import ThemeConfig
from xmemory_gpu.construct.theme_split import split_proposals
from xmemory_gpu.construct.theme_state import ZERO_COSINE, ThemeState, sync_graphs
from xmemory_gpu.construct.themes import grow_themes
from xmemory_gpu.ops.knn import knn_graph
from xmemory_gpu.ops.objective import PartitionState
from xmemory_gpu.ops.rows import row_sum_in_order

FIELDS = (
    "x",
    "labels",
    "offsets",
    "theme_offsets",
    "theme_label",
    "theme_sum",
    "theme_count",
    "member_offsets",
    "member_rows",
    "top_idx",
    "top_cos",
    "f",
)


def _clustered(
    rng: np.random.Generator, n: int, k: int, d: int, noise: float = 0.8
) -> tuple[np.ndarray, np.ndarray]:
    """x [n, d] float32 around k centres, and the centre of each row."""
    centres = rng.standard_normal((max(k, 1), d))
    c = rng.integers(0, max(k, 1), size=n)
    return (centres[c] + noise * rng.standard_normal((n, d))).astype(np.float32), c


def _partition(
    rng: np.random.Generator, sizes: list[int], d: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    xs, labs = [], []
    for n in sizes:
        x, c = _clustered(rng, n, int(rng.integers(1, 8)), d)
        xs.append(x)
        labs.append(c * 5 + 2)  # sparse label values
    return np.concatenate(xs), np.concatenate(labs).astype(np.int64), np.cumsum([0, *sizes]).astype(np.int64)


def _assert_same(got: PartitionState, want: PartitionState) -> None:
    for name in FIELDS:
        a, b = getattr(got, name), getattr(want, name)
        assert a.shape == b.shape and a.dtype == b.dtype, name
        np.testing.assert_array_equal(a, b, err_msg=name)


def _random_edits(rng: np.random.Generator, st: PartitionState, labels: np.ndarray, next_label: int):
    """Edits over a few memories (several per memory, applied in order), and the edited labels."""
    labels = labels.copy()
    edits = []
    for b in rng.permutation(len(st.offsets) - 1)[: int(rng.integers(1, len(st.offsets)))].tolist():
        s, e = int(st.offsets[b]), int(st.offsets[b + 1])
        for _ in range(int(rng.integers(1, 4))):
            live = np.unique(labels[s:e]).tolist()
            if not live:
                break
            kind = int(rng.integers(0, 4))
            if kind == 0:  # split one theme into 2..4 groups (some may be empty)
                t = int(rng.choice(live))
                rows = np.flatnonzero(labels[s:e] == t) + s
                parts = int(rng.integers(2, 5))
                cut = rng.integers(0, parts, size=rows.size)
                groups = [rows[cut == p] for p in range(parts)]
                remove = [t]
            elif kind == 1 and len(live) >= 2:  # merge 2..3 themes (in member order)
                remove = [
                    int(t)
                    for t in rng.choice(live, size=min(len(live), int(rng.integers(2, 4))), replace=False)
                ]
                groups = [np.concatenate([np.flatnonzero(labels[s:e] == t) + s for t in remove])]
            elif kind == 2 and len(live) >= 2:  # empty a theme into another that keeps its label
                a, keep = (int(t) for t in rng.choice(live, size=2, replace=False))
                remove = [a, keep]
                groups = [np.sort(np.flatnonzero(np.isin(labels[s:e], remove)) + s)]
                new = [keep]
            else:  # move a few nodes between two themes (or re-open one theme under a new label)
                remove = [int(t) for t in rng.choice(live, size=min(2, len(live)), replace=False)]
                rows = np.flatnonzero(np.isin(labels[s:e], remove)) + s
                cut = rng.integers(0, 2, size=rows.size)
                groups = [rows[cut == 0], rows[cut == 1]]
            if kind != 2 or len(live) < 2:
                new = list(range(next_label, next_label + len(groups)))
                next_label += len(groups)
            for g, t in zip(groups, new):
                labels[g] = t
            edits.append((b, remove, groups, new))
    return edits, labels, next_label


@pytest.mark.parametrize("check", [True, False])  # the theme stage's own edits skip the checks
def test_apply_equals_from_labels(rng, check):
    for _ in range(25):
        sizes = [int(n) for n in rng.integers(0, 60, size=int(rng.integers(1, 6)))]
        x, labels, off = _partition(rng, sizes, int(rng.integers(2, 12)))
        st = PartitionState.from_labels(x, labels, off)
        next_label = 1000
        for _ in range(4):  # successive rounds on the same state
            edits, labels, next_label = _random_edits(rng, st, labels, next_label)
            st.apply(edits, check=check)
            _assert_same(st, PartitionState.from_labels(x, labels, off))


def test_extend_equals_from_labels(rng):
    for _ in range(25):
        sizes = [int(n) for n in rng.integers(0, 40, size=int(rng.integers(1, 5)))]
        d = int(rng.integers(2, 12))
        x, labels, off = _partition(rng, sizes, d)
        st = PartitionState.from_labels(x, labels, off)
        xs = [x[s:e] for s, e in zip(off[:-1], off[1:])]
        ls = [labels[s:e] for s, e in zip(off[:-1], off[1:])]
        for _ in range(3):
            nodes = {}
            for b in rng.permutation(len(sizes))[: int(rng.integers(1, len(sizes) + 1))].tolist():
                m = int(rng.integers(0, 15))
                xn, _ = _clustered(rng, m, 3, d)
                old = np.unique(ls[b])
                ln = np.where(
                    rng.random(m) < 0.5,
                    rng.choice(old, size=m) if old.size else 7,
                    rng.integers(500, 503, size=m),
                )
                nodes[b] = (xn, ln.astype(np.int64))
                xs[b], ls[b] = np.concatenate([xs[b], xn]), np.concatenate([ls[b], ln]).astype(np.int64)
            st.extend(nodes)
            off = np.cumsum([0, *[len(a) for a in xs]]).astype(np.int64)
            _assert_same(st, PartitionState.from_labels(np.concatenate(xs), np.concatenate(ls), off))


def test_apply_refuses_bad_edits():
    x = np.eye(4)
    st = PartitionState.from_labels(x, np.array([0, 0, 1, 1]), np.array([0, 4], np.int64))
    with pytest.raises(ValueError, match="cover exactly"):
        st.apply([(0, [0], [np.array([0])], [5])])
    with pytest.raises(ValueError, match="no theme labelled"):
        st.apply([(0, [7], [], [])])
    with pytest.raises(ValueError, match="remaining theme"):
        st.apply([(0, [0], [np.array([0, 1])], [1])])


def _per_node_attach(
    x: np.ndarray,
    rows: np.ndarray,
    cfg: ThemeConfig,
    sums: dict[int, np.ndarray],
    count: dict[int, int],
    label: np.ndarray,
    next_id: int,
) -> int:
    """The per-node attach rule: one product per node over every theme's sum, in opening order."""
    for i in rows.tolist():
        best, best_cos = -1, -np.inf
        if sums:
            ids = list(sums)
            s = np.stack([sums[t] for t in ids])
            norms = np.linalg.norm(s, axis=1)
            cos = (s @ x[i].astype(np.float64)) / np.where(norms > 0, norms, 1.0)
            j = int(np.argmax(cos))
            best, best_cos = ids[j], float(cos[j])
        below_cap = best >= 0 and count[best] < cfg.size_cap
        if best >= 0 and (best_cos >= cfg.attach_threshold or (below_cap and best_cos >= cfg.lenient_floor)):
            label[i] = best
            sums[best] += x[i]
            count[best] += 1
        else:
            label[i], sums[next_id], count[next_id] = next_id, x[[i]].astype(np.float64).sum(axis=0), 1
            next_id += 1
    return next_id


def test_batched_attach_equals_the_per_node_rule(rng):
    cfg = ThemeConfig(size_cap=4)
    for _ in range(10):
        d = int(rng.integers(3, 24))
        x, _ = _clustered(rng, int(rng.integers(1, 120)), int(rng.integers(1, 10)), d, noise=0.5)
        x /= np.linalg.norm(x, axis=1, keepdims=True)
        st = ThemeState(x, 3, True)
        sums: dict[int, np.ndarray] = {}
        count: dict[int, int] = {}
        label = np.full(len(x), -1, np.int64)
        next_id = 0
        for rows in np.array_split(np.arange(len(x)), int(rng.integers(1, 6))):  # sessions
            st.attach(rows, cfg)
            next_id = _per_node_attach(x, rows, cfg, sums, count, label, next_id)
        np.testing.assert_array_equal(st.label, label)
        assert st.live_ids() == list(sums)
        for t, s in sums.items():
            np.testing.assert_array_equal(st.sums[st.slot_of[t]], s)
            assert st.count(t) == count[t]


def test_attach_ties_go_to_the_earliest_theme():
    x = np.array([[1, 0], [1, 0], [0, 1], [0.6, 0.8]], np.float32)
    st = ThemeState(x, 3, True)
    cfg = ThemeConfig(attach_threshold=0.99, lenient_floor=0.99)
    st.attach(np.array([0]), cfg)
    st.attach(np.array([2]), cfg)
    st.sums[st.slot_of[1]] = st.sums[st.slot_of[0]]  # two themes, equal centroids: an exact tie
    st.attach(np.array([1]), cfg)
    assert st.label[1] == 0
    on = float(np.float32(0.6))  # node 3's cosine to both themes: a tie exactly on the threshold
    st.attach(np.array([3]), ThemeConfig(attach_threshold=on, lenient_floor=on))
    assert st.label[3] == 0


def test_synced_theme_graph_is_exact(rng):
    cfg = ThemeConfig()
    states, steps = [], []
    for _ in range(3):
        x, _ = _clustered(rng, int(rng.integers(40, 160)), 12, 16, noise=0.6)
        x /= np.linalg.norm(x, axis=1, keepdims=True)
        states.append(ThemeState(x, 5, True))
        steps.append(np.array_split(np.arange(len(x)), 6))
    grow_themes(states, steps, cfg)
    for st in states:
        ids, _, theme_of, idx, sim = st.final()
        assert np.bincount(theme_of).max() <= cfg.size_cap and ids == sorted(ids)
        cent = np.stack([st.sums[st.slot_of[t]] for t in ids])
        want_idx, want_sim = knn_graph(
            cent.astype(np.float32), np.array([0, len(ids)]), 5, drop_nonpositive=True, backend="reference"
        )
        np.testing.assert_allclose(np.sort(sim, axis=1), np.sort(want_sim, axis=1), atol=1e-5)
        assert ((idx >= 0) == (want_idx >= 0)).all()


def _one_theme_per_row(x: np.ndarray, k: int) -> ThemeState:
    st = ThemeState(x.astype(np.float32), k, True)
    for i in range(len(x)):
        st._open(np.array([i]), [])
    return st


def test_theme_graphs_synced_together_equal_each_alone(rng):
    """One ragged kernel call for many memories gives each the graph it gets alone, bit for bit (the
    kernel's cosines do not depend on the batch), and the kernel's graph of its live centroids."""
    xs = [rng.standard_normal((int(n), 24)) for n in rng.integers(1, 40, size=6)]
    together = [_one_theme_per_row(x, 5) for x in xs]
    for st in together[::2]:
        st._close(int(st.ids[0]))  # a closed theme leaves the graph; positions follow the live slots
    sync_graphs(together)
    for st, x in zip(together, xs):
        alone = _one_theme_per_row(x, 5)
        if st.n_slots and not st.alive[0]:
            alone._close(int(alone.ids[0]))
        sync_graphs([alone])
        np.testing.assert_array_equal(st.graph_slots, alone.graph_slots)
        np.testing.assert_array_equal(st.graph_idx, alone.graph_idx)
        np.testing.assert_array_equal(st.graph_sim.view(np.int32), alone.graph_sim.view(np.int32))
        u = (st.sums[st.graph_slots] / np.linalg.norm(st.sums[st.graph_slots], axis=1, keepdims=True)).astype(
            np.float32
        )
        want_idx, want_sim = knn_graph(u, np.array([0, len(u)]), 5, drop_nonpositive=True, backend="cpu")
        np.testing.assert_array_equal(st.graph_idx, np.where(want_sim > ZERO_COSINE, want_idx, -1))
    together[1]._open(np.array([0]), [])  # a theme opened since the sync: the graph must be synced again
    with pytest.raises(RuntimeError, match="stale"):
        together[1].merge_pair_item()


def test_theme_graph_has_no_edge_between_orthogonal_centroids():
    """Integer vectors, whose orthogonality is exact: the kernel's float32 cosine of an orthogonal pair
    can come out as +1e-8 (rounding), which ``drop_nonpositive`` alone would keep as an edge; the theme
    graph treats cosines within rounding of zero as zero, so no orthogonal pair is an edge and every
    pair with a positive integer dot within the top k is."""
    kept_noise = 0
    for seed in range(5):
        ints = np.random.default_rng(seed).integers(-2, 3, size=(16, 6)).astype(np.float64)
        ints = ints[np.abs(ints).sum(1) > 0]
        st = _one_theme_per_row(ints / np.linalg.norm(ints, axis=1, keepdims=True), 15)
        sync_graphs([st])
        dots = ints @ ints.T
        for r in range(len(ints)):
            got = {int(p) for p in st.graph_idx[r] if p >= 0}
            assert got == {p for p in range(len(ints)) if p != r and dots[r, p] > 0}
        u = st.sums.astype(np.float32)[: len(ints)]
        raw_idx, _ = knn_graph(
            u / np.linalg.norm(u, axis=1, keepdims=True),
            np.array([0, len(ints)]),
            15,
            drop_nonpositive=True,
            backend="cpu",
        )
        kept_noise += sum(int(dots[r, p] == 0) for r in range(len(ints)) for p in raw_idx[r] if p >= 0)
    assert kept_noise > 0  # the case the rule is for occurs here


def test_row_sums_add_rows_one_after_another(rng):
    """k-means centres are running sums in row order from zero: ``row_sum_in_order`` gives the last row
    of the cumulative sum of [0; m] bit for bit, for one column and many, one row and hundreds,
    magnitudes 1e-8 to 1e8, negative zeros, and a non-contiguous view."""

    def want(m: np.ndarray) -> np.ndarray:
        return np.cumsum(np.vstack([np.zeros((1, m.shape[1])), m]), axis=0)[-1]

    for _ in range(400):
        n, d = int(rng.integers(1, 300)), int(rng.choice([1, 2, 3, 7, 64, 384, 391]))
        m = rng.standard_normal((n, d)) * rng.choice([1e-8, 1.0, 1e8], size=(n, 1))
        np.testing.assert_array_equal(row_sum_in_order(m).view(np.int64), want(m).view(np.int64))
    m = rng.standard_normal((50, 40))[:, ::2]
    np.testing.assert_array_equal(row_sum_in_order(m).view(np.int64), want(m).view(np.int64))
    assert row_sum_in_order(np.array([[-0.0], [-0.0]])).view(np.int64)[0] == 0  # +0.0, as 0.0 + -0.0


def test_split_proposals_valid_and_seeded(rng):
    x, _ = _clustered(rng, 40, 3, 8)
    moff = np.array([0, 1, 2, 14, 40], np.int64)
    props = split_proposals(x, moff, ks=(2, 3, 4), n_init=3)
    assert props[0] == [] and len(props[1]) == 0  # one member: nothing to split
    for t, plist in enumerate(props):
        n = int(moff[t + 1] - moff[t])
        for lab in plist:
            assert lab.shape == (n,) and lab.min() == 0 and set(np.unique(lab)) == set(range(lab.max() + 1))
            assert 2 <= lab.max() + 1 <= 4 or lab.max() + 1 <= n  # k-means up to 4, components any
    again = split_proposals(x, moff, ks=(2, 3, 4), n_init=3)
    assert all(
        len(a) == len(b) and all(np.array_equal(p, q) for p, q in zip(a, b)) for a, b in zip(props, again)
    )


def test_restore_opens_every_theme_as_opening_them_one_by_one_does():
    """``ThemeState.restore`` (one pass over the themes) gives the sums, counts, slots, labels,
    lineage and capacity that ``_open`` of each theme in turn gives, bit for bit, empty themes and
    unattached rows included."""
    rng = np.random.default_rng(0)
    for _ in range(300):
        n, d, k_th = int(rng.integers(0, 120)), int(rng.integers(1, 24)), int(rng.integers(0, 40))
        x = rng.standard_normal((n, d)).astype(np.float32)
        ids = rng.choice(10**6, k_th, replace=False).astype(np.int64)
        n_att = int(rng.integers(0, n + 1))
        labels = rng.integers(0, max(k_th, 1), n_att) if k_th else np.full(n_att, -1)
        parents = {int(t): [int(t) + 1] for t in ids[: k_th // 2]}
        one = ThemeState(x, 5, False)
        order = np.argsort(labels, kind="stable")
        bounds = np.searchsorted(labels[order], np.arange(k_th + 1))
        for r, t in enumerate(ids.tolist()):
            one._open(order[bounds[r] : bounds[r + 1]], list(parents.get(t, [])), theme_id=t)
        got = ThemeState.restore(x, n_att, ids, labels, parents, 0, 5, False)
        assert got.n_slots == one.n_slots and len(got.ids) == len(one.ids)
        for f in ("sums", "counts", "ids", "alive"):
            assert getattr(got, f)[: got.n_slots].tobytes() == getattr(one, f)[: one.n_slots].tobytes(), f
        assert got.label.tobytes() == one.label.tobytes()
        assert got.parents == one.parents and got.slot_of == one.slot_of
