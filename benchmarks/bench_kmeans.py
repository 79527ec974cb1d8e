"""The theme splits' seeded spherical k-means on the CPU: 400 overfull themes of 13-48 rows, d = 384
(clustered rows; dev's overfull themes hold 13-20), k = 2, 3, 4 with 4 restarts each (the default
``split_proposals``), so 4,800 runs. Ours (cpu: every run in one ``spherical_kmeans`` call) against
the float64 reference (the same NumPy code run by run, BLAS products) and the per-theme code
(``tests/ops/kmeans_oracle.py``: NumPy run by run, drawing from each theme's generator as it goes),
the rule as first written. Interleave rounds with ``--benchmark-min-rounds``; compare medians.
"""

from __future__ import annotations

import zlib

import numpy as np
import pytest
from ops import kmeans_oracle
from ops.kmeans_cases import clustered_themes, split_draws
from scale import scaled

from xmemory_gpu.ops.kmeans import spherical_kmeans
from xmemory_gpu.ops.rows import unit_rows

THEMES, D, KS, N_INIT = scaled(400, 20), 384, (2, 3, 4), 4


@pytest.fixture(scope="module")
def problem():
    rng = np.random.default_rng(0)
    x, off = clustered_themes(rng, [int(n) for n in rng.integers(13, 49, size=THEMES)], D)
    x = unit_rows(x)
    return x, off, split_draws(x, off, KS, N_INIT, seed=0)


def per_theme_oracle(x: np.ndarray, off: np.ndarray) -> list[np.ndarray]:
    """Every run as the build did it before: one theme at a time, NumPy per run."""
    out = []
    for t in range(len(off) - 1):
        xt = x[off[t] : off[t + 1]]
        rng = np.random.default_rng([0, zlib.crc32(xt.tobytes())])
        out += [
            kmeans_oracle._canonical(kmeans_oracle.spherical_kmeans(xt, k, rng))
            for k in KS
            if 2 <= k < len(xt)
            for _ in range(N_INIT)
        ]
    return out


@pytest.mark.parametrize(
    "impl", ["cpu (one call)", "reference (NumPy per run)", "per-theme oracle (NumPy run by run)"]
)
def test_spherical_kmeans(benchmark, problem, impl):
    x, off, (seg, k, first, u) = problem
    benchmark.group = f"spherical k-means: {len(seg)} runs over {THEMES} themes of 13-48 rows, d={D}"
    if impl == "per-theme oracle (NumPy run by run)":
        labels = benchmark(per_theme_oracle, x, off)
        assert len(labels) == len(seg)
        return
    backend = "cpu" if impl.startswith("cpu") else "reference"
    labels, ok = benchmark(spherical_kmeans, x, off, seg, k, first, u, backend=backend)
    assert ok.sum() > 0.7 * len(
        seg
    )  # a fifth of the themes repeat one row: their seeding runs out of weights
