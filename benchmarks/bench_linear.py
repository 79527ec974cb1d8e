"""The sentence encoder's dense layers on the CPU: ours (``rowwise_linear``, cpu: one FMA chain per
output, batch-invariant) against torch's ``F.linear`` (MKL sgemm, the strongest baseline here, not
batch-invariant) and NumPy's ``@`` (OpenBLAS), at all-MiniLM-L6-v2's three layer shapes and row
counts of one short message (26 tokens), a filled forward (256) and a bulk batch (2,048). The floor
is 2 M N K flops at this machine's measured FMA peak (``_C.fma_peak_gflops``), printed once.
Run: ``python -m pytest benchmarks/bench_linear.py --benchmark-columns=min,median,rounds``; repeat
the run to interleave; compare medians."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from ops.linear_cases import ENCODER_LAYERS, activations, layer

from xmemory_gpu.ops import available_backends
from xmemory_gpu.ops.linear import pack_linear, rowwise_linear

ROWS = (26, 256, 2048)
IMPLS = ["ours", "torch", "numpy"]


@pytest.fixture(scope="module")
def peak_gflops():
    if not available_backends()["cpu"].available:
        pytest.skip("the C++ module is not built")
    from xmemory_gpu import _C

    peak = _C.fma_peak_gflops(0.3)
    print(f"\nFMA peak {peak:.0f} GFLOP/s ({_C.cpu_isa()}, {torch.get_num_threads()} threads)")
    return peak


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("m", ROWS)
@pytest.mark.parametrize("k, n", ENCODER_LAYERS, ids=[f"{k}x{n}" for k, n in ENCODER_LAYERS])
def test_dense_layer(benchmark, peak_gflops, impl, m, k, n):
    rng = np.random.default_rng(0)
    w, b = layer(rng, k, n)
    x = activations(rng, m, k)
    if impl == "ours":
        packed = pack_linear(w, b, backend="cpu")
        run = lambda: rowwise_linear(x, packed, backend="cpu")  # noqa: E731
    elif impl == "torch":
        xt, wt, bt = torch.from_numpy(x), torch.from_numpy(w), torch.from_numpy(b)
        run = lambda: torch.nn.functional.linear(xt, wt, bt)  # noqa: E731
    else:
        wT = w.T
        run = lambda: x @ wT + b  # noqa: E731
    with torch.inference_mode():
        benchmark(run)
    floor_ms = 2 * m * n * k / (peak_gflops * 1e9) * 1e3
    benchmark.extra_info.update(
        floor_ms=round(floor_ms, 4), gflops=round(2 * m * n * k / benchmark.stats["median"] / 1e9, 1)
    )
