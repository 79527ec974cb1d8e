"""The CPU kernels' thread count follows ``XMEM_PARALLEL_WORK`` (multiply-adds below which a call stays
on one thread, read once per process), and nothing they return depends on it: kNN lists and k-means
runs are the same with every call threaded and with none (each setting in a process of its own)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from xmemory_gpu.ops.linear import runs_compiled

pytestmark = pytest.mark.skipif(not runs_compiled(), reason="the C++ module is not built")

ALWAYS, NEVER = "0", "1e18"
TESTS = Path(__file__).resolve().parents[1]

CHILD = r"""
import hashlib, sys
import numpy as np
sys.path.insert(0, sys.argv[1])
from ops.kmeans_cases import clustered_themes, split_draws
from xmemory_gpu.ops.kmeans import spherical_kmeans
from xmemory_gpu.ops.knn import knn_graph, knn_search

def unit(rng, n, d=64):
    x = rng.standard_normal((n, d)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)

rng = np.random.default_rng(1)
x, q = unit(rng, 300), unit(rng, 120)
outs = [*knn_graph(x, [0, 100, 300], 8, backend="cpu")]
outs += [*knn_search(q, [0, 50, 120], x, [0, 100, 300], 8, backend="cpu")]
rng = np.random.default_rng(2)
xk, off = clustered_themes(rng, [120, 30, 200, 60, 90], 64)
xk = xk / np.linalg.norm(xk, axis=1, keepdims=True)
seg, kk, first, u = split_draws(xk, off, (2, 3), 2, 5)
outs += [np.asarray(a) for a in spherical_kmeans(xk, off, seg, kk, first, u, backend="cpu")]
print(hashlib.sha256(b"".join(np.ascontiguousarray(a).tobytes() for a in outs)).hexdigest())
"""


def _digest(work: str) -> str:
    env = dict(os.environ, XMEM_PARALLEL_WORK=work)
    out = subprocess.run(
        [sys.executable, "-c", CHILD, str(TESTS)], env=env, capture_output=True, text=True, check=True
    )
    return out.stdout.strip()


def test_kernel_outputs_do_not_depend_on_the_thread_count():
    always, never = _digest(ALWAYS), _digest(NEVER)
    assert len(always) == 64 and always == never
