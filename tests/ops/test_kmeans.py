"""Seeded spherical k-means (ops/kmeans) against the theme stage's per-theme code
(tests/ops/kmeans_oracle.py, drawing from each theme's generator run by run): the batched op on every
host backend and ISA, and ``split_proposals`` built on it, give the same labels, in the same order."""

from __future__ import annotations

import zlib

import numpy as np
import pytest

from xmemory_gpu.construct.theme_split import connected_components, split_proposals
from xmemory_gpu.ops import available_backends
from xmemory_gpu.ops.kmeans import spherical_kmeans
from xmemory_gpu.ops.rows import unit_rows

from . import kmeans_oracle as oracle
from .kmeans_cases import clustered_themes, split_draws

BACKENDS = [b for b in ("reference", "cpu") if available_backends()[b].available]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("d", [1, 5, 64, 384])
def test_runs_equal_the_per_theme_oracle(backend, d):
    """Each run's labels are the oracle's ``_canonical(spherical_kmeans(xt, k, rng))`` for the same
    generator; a run whose seeding weights are all zero says so (ok False) instead."""
    rng = np.random.default_rng(d)
    x, off = clustered_themes(rng, [int(n) for n in rng.integers(2, 40, size=12)], d)
    x = unit_rows(x)
    seg, kk, first, u = split_draws(x, off, (2, 3, 4), 3, seed=7)
    labels, ok = spherical_kmeans(x, off, seg, kk, first, u, backend=backend)
    pos, checked = 0, 0
    for t in range(len(off) - 1):
        xt = x[off[t] : off[t + 1]]
        n = len(xt)
        g = np.random.default_rng([7, zlib.crc32(xt.tobytes())])
        runs = np.flatnonzero(seg == t)
        want = [oracle._canonical(oracle.spherical_kmeans(xt, int(kk[q]), g)) for q in runs]
        for q, w in zip(runs, want):
            if ok[q]:
                np.testing.assert_array_equal(labels[pos : pos + n], w, err_msg=f"theme {t} run {q}")
                checked += 1
            else:
                assert len(np.unique(xt, axis=0)) < kk[q], (
                    "only a theme with fewer distinct rows than k runs out of weights"
                )
            pos += n
    assert pos == len(labels) and not ok.all()
    assert checked > (0.2 if d == 1 else 0.7) * len(
        seg
    )  # d = 1: unit rows are +-1, k >= 3 runs out of weights


@pytest.mark.parametrize("backend", BACKENDS)
def test_split_proposals_equal_the_oracle(backend):
    """The proposals of every theme, in order, are the per-theme code's (the themes where seeding ran
    out of weights included: they are redrawn run by run)."""
    rng = np.random.default_rng(3)
    for d, seed in ((16, 0), (384, 5)):
        x, off = clustered_themes(rng, [int(n) for n in rng.integers(1, 50, size=20)], d)
        got = split_proposals(x, off, seed=seed, backend=backend)
        want = oracle.split_proposals(x, off, seed=seed)
        assert len(got) == len(want)
        for g, w in zip(got, want):
            assert len(g) == len(w)
            for a, b in zip(g, w):
                np.testing.assert_array_equal(a, b)


def test_connected_components_equal_the_union_find():
    """Label propagation gives the authors' union-find labels (each row the smallest index of its
    component): random thresholds and dimensions, and a chain (the longest propagation)."""
    rng = np.random.default_rng(2)
    for _ in range(400):
        n, d = int(rng.integers(1, 40)), int(rng.choice([2, 3, 16]))
        x = unit_rows(rng.standard_normal((n, d)))
        th = float(rng.choice([0.0, 0.3, 0.5, 0.8]))
        np.testing.assert_array_equal(connected_components(x, th), oracle.connected_components(x, th))
    angles = np.linspace(0, 3, 30)[rng.permutation(30)]  # neighbours on a chain, 0.1 rad apart
    chain = np.stack([np.cos(angles), np.sin(angles)], axis=1)
    got = connected_components(chain, float(np.cos(0.15)))
    np.testing.assert_array_equal(got, oracle.connected_components(chain, float(np.cos(0.15))))
    assert (got == 0).all()


def test_cpu_isas_are_bit_identical(monkeypatch):
    """One call over many runs (past the kernel's threading threshold): every ISA this CPU runs gives
    the same labels and flags (dot4 and sum4, no fused multiply-adds), and on the
    themes with distinct rows, the reference's labels."""
    if "cpu" not in BACKENDS:
        pytest.skip("the C++ module is not built")
    from xmemory_gpu import _C

    rng = np.random.default_rng(11)
    sizes = [int(n) for n in rng.integers(5, 60, size=60)]
    x, off = clustered_themes(rng, sizes, 384)
    x = unit_rows(x)
    seg, kk, first, u = split_draws(x, off, (2, 3, 4), 4, seed=1)
    got = {}
    for isa in ("scalar", "avx2", "avx512"):
        monkeypatch.setenv("XMEM_CPU_ISA", isa)
        if _C.cpu_isa() == isa:
            got[isa] = spherical_kmeans(x, off, seg, kk, first, u, backend="cpu")
    for isa, (labels, ok) in got.items():
        np.testing.assert_array_equal(ok, got["scalar"][1], err_msg=isa)
        np.testing.assert_array_equal(labels, got["scalar"][0], err_msg=isa)
    labels, ok = spherical_kmeans(x, off, seg, kk, first, u, backend="reference")
    ends = np.cumsum([sizes[t] for t in seg])
    distinct = [t for t in range(len(sizes)) if t % 3 != 1 and t % 5 != 4]
    for q in np.flatnonzero(np.isin(seg, distinct)):
        assert ok[q] and got["scalar"][1][q]
        np.testing.assert_array_equal(
            got["scalar"][0][ends[q] - sizes[seg[q]] : ends[q]], labels[ends[q] - sizes[seg[q]] : ends[q]]
        )


def test_pick_centre_is_the_prefix_sum_rule():
    """A further centre is the first row whose prefix sum of the weights (added in row order) exceeds
    u times their total: the first row of positive weight at u = 0, the last at u just below 1, never
    a row of zero weight, None when every weight is zero; an explicit loop agrees on random weights."""
    from xmemory_gpu.ops.kmeans.reference import pick_centre

    w = np.array([0.0, 0.5, 0.0, 0.25, 0.25, 0.0])
    assert pick_centre(w, 0.0) == 1 and pick_centre(w, 0.5) == 3 and pick_centre(w, np.nextafter(1.0, 0)) == 4
    assert pick_centre(np.zeros(4), 0.3) is None
    rng = np.random.default_rng(5)
    for _ in range(300):
        w = rng.random(int(rng.integers(1, 30))) * (rng.random() < 0.9) * (rng.random(1) < 0.7)
        u = float(rng.random())
        c, run = [], 0.0
        for v in w.tolist():
            run += v
            c.append(run)
        want = None if not run > 0 else next((i for i, v in enumerate(c) if v > u * run), len(w) - 1)
        assert pick_centre(w, u) == want


@pytest.mark.parametrize("backend", BACKENDS)
def test_edge_cases(backend):
    """No runs; k = 1 and k = n; a zero row; a one-row segment."""
    x = unit_rows(np.array([[1.0, 0.0], [0.0, 1.0], [0.0, 0.0], [1.0, 1.0], [2.0, -1.0]]))
    off = np.array([0, 4, 5])
    labels, ok = spherical_kmeans(x, off, [], [], [], [], backend=backend)
    assert labels.shape == (0,) and ok.shape == (0,)
    labels, ok = spherical_kmeans(x, off, [0, 0, 1], [1, 4, 1], [2, 0, 0], [0.1, 0.5, 0.9], backend=backend)
    assert ok.all()
    np.testing.assert_array_equal(labels[:4], [0, 0, 0, 0])
    assert sorted(labels[4:8]) == [0, 1, 2, 3] and labels[8] == 0


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"k": [5]}, r"k: run 0 asks for 5 clusters of a segment of 4 rows"),
        ({"k": [0]}, r"k: run 0 asks for 0 clusters"),
        ({"first": [4]}, r"first: id 4"),
        ({"segment": [2]}, r"segment: id 2"),
        ({"uniforms": [0.5, 0.5]}, r"uniforms: expected sum\(k - 1\) = 1 values, got 2"),
        ({"uniforms": [1.0]}, r"uniforms: expected values in \[0, 1\)"),
        ({"offsets": [0, 3]}, r"offsets"),
        ({"iters": 0}, r"iters must be >= 1"),
    ],
)
def test_bad_input_names_the_argument(kwargs, match):
    args = {"x": np.eye(4), "offsets": [0, 4], "segment": [0], "k": [2], "first": [0], "uniforms": [0.5]}
    iters = kwargs.pop("iters", 12)
    args.update(kwargs)
    with pytest.raises(ValueError, match=match):
        spherical_kmeans(**args, iters=iters)


def test_a_gpu_construction_keeps_its_kmeans_on_the_host(monkeypatch):
    """The theme stage passes its backend through: a GPU one (or ``XMEMORY_BACKEND`` naming one) runs the
    k-means on the host's best with the same proposals, while the op itself refuses a GPU backend."""
    from xmemory_gpu.ops.backends import host_backend

    rng = np.random.default_rng(4)
    x, off = clustered_themes(rng, [15, 20, 13], 16)
    want = split_proposals(x, off, backend="reference")
    host = "cpu" if "cpu" in BACKENDS else "reference"
    assert host_backend("triton") == host_backend("cuda") == host and host_backend("reference") == "reference"
    monkeypatch.setenv("XMEMORY_BACKEND", "cuda")
    assert host_backend("auto") == host
    for backend in ("triton", "cuda", "auto"):
        got = split_proposals(x, off, backend=backend)
        assert [[p.tolist() for p in t] for t in got] == [[p.tolist() for p in t] for t in want]
    with pytest.raises(ValueError, match="spherical_kmeans: backend 'triton' is not implemented"):
        spherical_kmeans(x, off, [0], [2], [0], [0.5], backend="triton")
