"""This machine's single-precision FMA peak, measured: a C loop of independent vector FMAs (no
memory traffic), compiled here for the widest ISA the CPU reports, one OpenMP thread per core.
The kNN benchmark states the fraction of this peak it reaches (FLOPs counted as 2 per FMA).

Run alone: ``python benchmarks/fma_peak.py`` prints GFLOP/s per thread count.
"""

from __future__ import annotations

import ctypes
import os
import subprocess
import tempfile
import time
from functools import lru_cache
from pathlib import Path

_SRC = r"""
#include <immintrin.h>
#include <omp.h>
#if defined(__AVX512F__)
typedef __m512 v; enum { LANES = 16 };
#define SET(x) _mm512_set1_ps(x)
#define FMA(a, b, c) _mm512_fmadd_ps(a, b, c)
#define ADD(a, b) _mm512_add_ps(a, b)
static float hsum(v a) { return _mm512_reduce_add_ps(a); }
#else
typedef __m256 v; enum { LANES = 8 };
#define SET(x) _mm256_set1_ps(x)
#define FMA(a, b, c) _mm256_fmadd_ps(a, b, c)
#define ADD(a, b) _mm256_add_ps(a, b)
static float hsum(v a) { float t[8]; _mm256_storeu_ps(t, a); float s = 0; for (int i = 0; i < 8; ++i) s += t[i]; return s; }
#endif
int lanes(void) { return LANES; }
/* 12 independent accumulators hide the FMA latency; returns a value so nothing is optimised away. */
float run(long iters, int threads) {
  float total = 0.f;
#pragma omp parallel num_threads(threads) reduction(+ : total)
  {
    /* distinct starting values: equal chains would be merged by the compiler into one */
    v a0 = SET(1.00f), a1 = SET(1.01f), a2 = SET(1.02f), a3 = SET(1.03f), a4 = SET(1.04f), a5 = SET(1.05f);
    v a6 = SET(1.06f), a7 = SET(1.07f), a8 = SET(1.08f), a9 = SET(1.09f), a10 = SET(1.10f), a11 = SET(1.11f);
    const v m = SET(0.999999f), c = SET(1e-7f);
    for (long i = 0; i < iters; ++i) {
      a0 = FMA(a0, m, c); a1 = FMA(a1, m, c); a2 = FMA(a2, m, c); a3 = FMA(a3, m, c);
      a4 = FMA(a4, m, c); a5 = FMA(a5, m, c); a6 = FMA(a6, m, c); a7 = FMA(a7, m, c);
      a8 = FMA(a8, m, c); a9 = FMA(a9, m, c); a10 = FMA(a10, m, c); a11 = FMA(a11, m, c);
    }
    v s = ADD(ADD(ADD(a0, a1), ADD(a2, a3)), ADD(ADD(a4, a5), ADD(a6, a7)));
    s = ADD(s, ADD(ADD(a8, a9), ADD(a10, a11)));
    total += hsum(s);
  }
  return total;
}
"""


@lru_cache(maxsize=1)
def _lib() -> ctypes.CDLL:
    tmp = Path(tempfile.mkdtemp(prefix="xmem_fma_"))
    (tmp / "fma.c").write_text(_SRC)
    subprocess.run(["cc", "-O2", "-march=native", "-fopenmp", "-shared", "-fPIC", str(tmp / "fma.c"), "-o", str(tmp / "fma.so")],
                   check=True, capture_output=True)
    lib = ctypes.CDLL(str(tmp / "fma.so"))
    lib.run.restype, lib.run.argtypes = ctypes.c_float, [ctypes.c_long, ctypes.c_int]
    lib.lanes.restype = ctypes.c_int
    return lib


def fma_peak_gflops(threads: int | None = None, seconds: float = 0.5, rounds: int = 5) -> float:
    """Best of ``rounds`` measured single-precision GFLOP/s (2 FLOPs per FMA lane) on ``threads``
    threads (default: every core)."""
    lib = _lib()
    threads = threads or os.cpu_count() or 1
    iters = 1_000_000
    t0 = time.perf_counter()
    lib.run(iters, threads)
    iters = max(1, int(iters * seconds / max(time.perf_counter() - t0, 1e-6)))
    best = 0.0
    for _ in range(rounds):
        t0 = time.perf_counter()
        lib.run(iters, threads)
        dt = time.perf_counter() - t0
        best = max(best, iters * 12 * lib.lanes() * 2 * threads / dt / 1e9)
    return best


if __name__ == "__main__":
    for t in range(1, (os.cpu_count() or 1) + 1):
        print(f"{t} thread(s): {fma_peak_gflops(t):.1f} GFLOP/s single precision (lanes {_lib().lanes()})")
