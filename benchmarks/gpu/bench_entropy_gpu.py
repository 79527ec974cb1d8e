"""GPU benchmark for per-step uncertainty from logits (xmemory_gpu.ops.entropy), skipped without CUDA.

A 4,096 x 151,936 logit matrix (4,096 decoding steps over a Qwen-sized vocabulary) in bf16 and
fp32: the fused triton backend (one read of the logits) against the torch backend
(``log_softmax`` + entropy + ``gather``). Bytes read = T * V * itemsize; GB/s from the median of
CUDA-event timings after warm-up.

Run: ``python -m pytest -s benchmarks/gpu/bench_entropy_gpu.py`` (pytest-benchmark rows plus a
printed GB/s line per case), or ``python benchmarks/gpu/bench_entropy_gpu.py`` for a markdown table
(benchmarks/gpu/run.sh does both). Written for the GPU machine; not yet run (no GPU was available
when it was written).
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from cuda_timing import cuda_ms  # noqa: E402

from xmemory_gpu.ops.entropy import token_entropy_logprob  # noqa: E402

T, V = 4096, 151_936
DTYPES = ("bfloat16", "float32")
IMPLS = ("triton", "torch")

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]


def make_case(dtype: str, t: int = T, v: int = V, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """logits [t, v] on CUDA (scale 4: a peaked but not one-hot softmax), token_ids [t] int64."""
    g = torch.Generator(device="cuda").manual_seed(seed)
    z = (torch.randn(t, v, device="cuda", generator=g) * 4).to(getattr(torch, dtype))
    ids = torch.randint(0, v, (t,), device="cuda", generator=g)
    return z, ids


def gbps(z: torch.Tensor, ms: float) -> float:
    return z.numel() * z.element_size() / ms / 1e6


@pytest.fixture(scope="module", params=DTYPES)
def case(request):
    z, ids = make_case(request.param)
    e_tr, l_tr = token_entropy_logprob(z, ids, backend="triton")  # also compiles the kernel
    e_to, l_to = token_entropy_logprob(z, ids, backend="torch")
    torch.testing.assert_close(e_tr, e_to, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(l_tr, l_to, rtol=1e-4, atol=1e-4)
    yield request.param, z, ids
    z = ids = None
    torch.cuda.empty_cache()


@pytest.mark.parametrize("impl", IMPLS)
def test_entropy_logprob(benchmark, case, impl):
    dtype, z, ids = case
    benchmark.group = f"entropy + logprob, {T} x {V} {dtype} logits"

    def run():
        token_entropy_logprob(z, ids, backend=impl)
        torch.cuda.synchronize()

    benchmark.pedantic(run, rounds=30, warmup_rounds=3, iterations=1)
    ms = cuda_ms(lambda: token_entropy_logprob(z, ids, backend=impl))
    benchmark.extra_info.update(cuda_event_median_ms=ms, gb_per_s=gbps(z, ms))
    print(f"\n{impl} {dtype}: {ms:.3f} ms (CUDA events, median), {gbps(z, ms):.0f} GB/s read")


def main() -> None:
    print(f"device: {torch.cuda.get_device_name()}")
    print(f"\n### entropy + logprob per step: {T} x {V} logits (bytes read = T * V * itemsize)\n")
    print("| dtype | impl | median ms | GB/s |\n|---|---|---|---|")
    for dtype in DTYPES:
        z, ids = make_case(dtype)
        for impl in IMPLS:
            ms = cuda_ms(lambda z=z, ids=ids, impl=impl: token_entropy_logprob(z, ids, backend=impl))
            print(f"| {dtype} | {impl} | {ms:.3f} | {gbps(z, ms):.0f} |")
        z = ids = None  # free the logits before the next dtype
        torch.cuda.empty_cache()


if __name__ == "__main__":
    if not torch.cuda.is_available():
        raise SystemExit("bench_entropy_gpu: needs a CUDA GPU")
    main()
