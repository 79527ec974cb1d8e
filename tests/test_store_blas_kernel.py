"""A store does not depend on the CPU's BLAS kernel: the cosines the construction decides on (the f(P)
state's top-2, theme gists, episode drift, split components, supersession) are in one fixed order
(``dot4``), not a BLAS product's. Two near-ties from the synthetic sets: conversation 394 of seed 11
(two merges: with the top-2 from a BLAS product its theme ids came out swapped under OpenBLAS's AVX-512
kernels, the default on an AVX-512 CPU, against every other kernel) and conversation 1989 of seed 5 (two
statements equally close to a theme's centroid: its gist named the other one). Each build runs in its
own process with ``OPENBLAS_CORETYPE`` set (NumPy's OpenBLAS picks its kernel at load)."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys

import pytest

from xmemory_gpu.datasets.synthetic import generate_conversations, write_json
from xmemory_gpu.ops import available_backends

pytestmark = pytest.mark.skipif(
    not available_backends()["cpu"].available, reason="the C++ module is not built"
)


def _store_rows(data, out, coretype: str | None) -> list[tuple]:
    env = dict(os.environ)
    env.pop("OPENBLAS_CORETYPE", None)
    if coretype:
        env["OPENBLAS_CORETYPE"] = coretype
    subprocess.run(
        [
            sys.executable,
            "-m",
            "xmemory_gpu",
            "build",
            str(data),
            "--out",
            str(out),
            "--embedder",
            "hashing:384",
            "--no-progress",
        ],
        check=True,
        env=env,
        capture_output=True,
    )
    with sqlite3.connect(out / "memory.sqlite") as c:
        return sorted(c.execute("SELECT memory_id, arrays_file, sha256, stats FROM memories"))


def test_store_is_the_same_under_every_blas_kernel(tmp_path):
    data = write_json(
        [generate_conversations(395, seed=11)[394], generate_conversations(1990, seed=5)[1989]],
        tmp_path / "near_ties.json",
    )
    default = _store_rows(data, tmp_path / "default", None)
    assert len(default) == 2
    from numpy._core._multiarray_umath import __cpu_features__

    for coretype in (
        ("Nehalem", "Haswell") if __cpu_features__.get("AVX2") else ("Nehalem",)
    ):  # SSE and AVX2 kernels
        assert _store_rows(data, tmp_path / coretype, coretype) == default, coretype
