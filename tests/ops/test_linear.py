"""Batch-invariant dense layer (ops/linear): close to the float64 reference on fresh random shapes,
and on ``cpu`` a row's output bit-identical whatever its batchmates, their number, its position,
the threads (one thread below the parallel threshold, OpenMP above) and the ISA."""

from __future__ import annotations

import numpy as np
import pytest

from xmemory_gpu.ops import available_backends
from xmemory_gpu.ops.linear import pack_linear, rowwise_linear

from .linear_cases import ENCODER_LAYERS, activations, layer

BACKENDS = [b for b in ("reference", "cpu") if available_backends()[b].available]
needs_cpu = pytest.mark.skipif("cpu" not in BACKENDS, reason="the C++ module is not built")


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(
    "m, k, n, bias",
    [
        (0, 8, 5, True),
        (3, 0, 5, True),
        (2, 5, 0, False),
        (1, 1, 1, False),
        (5, 3, 31, True),
        (7, 129, 33, False),
        (203, 300, 45, True),
        (97, 384, 384, True),
        (40, 1536, 384, True),
        (13, 384, 1536, False),
    ],
)
def test_matches_the_float64_product(backend, m, k, n, bias):
    rng = np.random.default_rng(m * 1000 + k + n)
    w, b = layer(rng, k, n, bias)
    x = activations(rng, m, k)
    y = rowwise_linear(x, pack_linear(w, b, backend=backend), backend=backend)
    want = x.astype(np.float64) @ w.T.astype(np.float64) + (0 if b is None else b)
    assert y.shape == (m, n) and y.dtype == np.float32
    # float32 rounding of a k-term sum: |error| <= k * eps * sum |x_i w_i| (a loose bound; typically far below)
    bound = (
        k * np.finfo(np.float32).eps * (np.abs(x).astype(np.float64) @ np.abs(w.T).astype(np.float64)) + 1e-6
    )
    assert np.all(np.abs(y - want) <= bound)


@needs_cpu
@pytest.mark.parametrize("k, n", ENCODER_LAYERS)
def test_rows_do_not_depend_on_the_rest_of_the_call(k, n):
    """Row i alone, among a few, at another position, in a call big enough to run on every thread:
    the same bits (a BLAS gives a lone row other bits than the same row in a large batch)."""
    rng = np.random.default_rng(k + n)
    w, b = layer(rng, k, n)
    packed = pack_linear(w, b, backend="cpu")
    x = activations(rng, 700, k)
    full = rowwise_linear(x, packed, backend="cpu")
    for i in (0, 5, 6, 95, 96, 97, 699):
        np.testing.assert_array_equal(
            rowwise_linear(x[i : i + 1], packed, backend="cpu")[0], full[i], err_msg=f"row {i}"
        )
    for s, e in ((3, 10), (90, 101), (1, 2), (600, 700)):
        np.testing.assert_array_equal(rowwise_linear(x[s:e], packed, backend="cpu"), full[s:e])
    perm = rng.permutation(len(x))
    np.testing.assert_array_equal(rowwise_linear(x[perm], packed, backend="cpu"), full[perm])


@needs_cpu
def test_every_isa_gives_the_same_bits(monkeypatch):
    """One FMA chain per entry in every ISA (AVX-512, AVX2+FMA, scalar std::fma): identical outputs."""
    from xmemory_gpu import _C

    rng = np.random.default_rng(5)
    got = {}
    for k, n in ENCODER_LAYERS + ((37, 45), (300, 70)):  # 300: a partial last depth chunk
        w, b = layer(rng, k, n)
        x = activations(rng, 61, k)
        for isa in ("scalar", "avx2", "avx512"):
            monkeypatch.setenv("XMEM_CPU_ISA", isa)
            if _C.cpu_isa() == isa:
                got[(k, n, isa)] = rowwise_linear(x, pack_linear(w, b, backend="cpu"), backend="cpu")
        for isa in ("avx2", "avx512"):
            if (k, n, isa) in got:
                np.testing.assert_array_equal(
                    got[(k, n, isa)], got[(k, n, "scalar")], err_msg=f"{isa} k={k} n={n}"
                )


@needs_cpu
def test_non_finite_inputs_pass_through_row_by_row():
    """A row with inf / nan spoils its own outputs only (the kernel does not check finiteness)."""
    rng = np.random.default_rng(2)
    w, b = layer(rng, 64, 40)
    packed = pack_linear(w, b, backend="cpu")
    x = activations(rng, 20, 64)
    clean = rowwise_linear(x, packed, backend="cpu")
    x[3, 7], x[11, 0] = np.inf, np.nan
    y = rowwise_linear(x, packed, backend="cpu")
    assert not np.isfinite(y[[3, 11]]).any()  # inf * w and nan * w reach every output of their row
    rest = np.setdiff1d(np.arange(20), [3, 11])
    np.testing.assert_array_equal(y[rest], clean[rest])


@pytest.mark.parametrize("backend", BACKENDS)
def test_any_real_input_kind(backend):
    """float64, non-contiguous, integer and torch inputs (with grad) give the float32 rows of x."""
    import torch

    rng = np.random.default_rng(9)
    w, b = layer(rng, 40, 24)
    packed = pack_linear(torch.from_numpy(w).requires_grad_(), torch.from_numpy(b), backend=backend)
    x = activations(rng, 30, 80)[:, ::2]
    want = rowwise_linear(np.ascontiguousarray(x), packed, backend=backend)
    np.testing.assert_array_equal(rowwise_linear(x, packed, backend=backend), want)
    np.testing.assert_array_equal(
        rowwise_linear(torch.from_numpy(np.ascontiguousarray(x)).requires_grad_(), packed, backend=backend),
        want,
    )
    np.testing.assert_array_equal(rowwise_linear(x.astype(np.float64), packed, backend=backend), want)
    xi = np.arange(80).reshape(2, 40) % 7
    np.testing.assert_array_equal(
        rowwise_linear(xi, packed, backend=backend),
        rowwise_linear(xi.astype(np.float32), packed, backend=backend),
    )


def test_packed_layers_are_copies_and_gpu_requests_stay_on_the_host(monkeypatch):
    """Editing the source arrays after packing changes nothing; ``XMEMORY_BACKEND`` naming a GPU path
    runs the host op under ``auto`` (an explicit GPU backend is refused, see below)."""
    rng = np.random.default_rng(4)
    w, b = layer(rng, 16, 8)
    packed = pack_linear(w, b)
    x = activations(rng, 3, 16)
    before = rowwise_linear(x, packed)
    w[:] = 0
    b[:] = 0
    np.testing.assert_array_equal(rowwise_linear(x, packed), before)
    monkeypatch.setenv("XMEMORY_BACKEND", "cuda")
    np.testing.assert_array_equal(rowwise_linear(x, pack_linear(packed.weight, packed.bias)), before)


@pytest.mark.parametrize("backend", BACKENDS)
def test_bad_input_names_the_argument(backend):
    w = np.ones((4, 3), np.float32)
    with pytest.raises(ValueError, match="weight: expected a 2-D"):
        pack_linear(np.ones(3), backend=backend)
    with pytest.raises(ValueError, match="bias: expected 4 values"):
        pack_linear(w, np.ones(5), backend=backend)
    with pytest.raises(ValueError, match="weight:.*real"):
        pack_linear(w.astype(complex), backend=backend)
    packed = pack_linear(w, np.zeros(4), backend=backend)
    with pytest.raises(ValueError, match="x: expected rows of 3 inputs"):
        rowwise_linear(np.ones((2, 5), np.float32), packed, backend=backend)
    with pytest.raises(ValueError, match="x: expected a 2-D"):
        rowwise_linear(np.ones(3, np.float32), packed, backend=backend)
    with pytest.raises(ValueError, match="layer: expected a PackedLinear"):
        rowwise_linear(np.ones((2, 3), np.float32), np.ones((4, 3)), backend=backend)
    with pytest.raises(ValueError, match="not implemented"):
        rowwise_linear(np.ones((2, 3), np.float32), packed, backend="cuda")
