// Register-blocked float32 dot-product micro-kernels for the CPU kernels, with runtime ISA dispatch.
//
// C[r][c] = dot(A row r, B column c) for MR = 6 rows of a row-major A (row stride d) against a
// packed panel of NR = 32 columns (panel[t * 32 + c] = B row c, element t). Every entry is one
// sequential fused-multiply-add chain over t = 0..d-1, in every ISA (AVX-512, AVX2+FMA, scalar
// std::fma), so a pair's value is bit-identical whatever the ISA, tile, position or operand order
// (a * b == b * a): callers may compute each unordered pair once and trust both directions.
// A call covers t in [0, kc) of its (offset) operands and, with ``acc``, continues the chains
// from the float32 values in ``out``: callers split d into chunks of kKC so a panel chunk
// (kKC x 32 floats, 16 KiB) stays in L1 across all row groups, and the chains are unchanged.
// Compiled for the portable baseline; the vector kernels carry target attributes and are picked
// at run time (no -march=native needed). XMEM_CPU_ISA=scalar|avx2|avx512 caps the choice.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#if defined(__x86_64__) || defined(_M_X64)
#include <immintrin.h>
#define XMEM_X86 1
#endif

namespace xmem {

constexpr int64_t kMR = 6;   // A rows per micro-kernel call
constexpr int64_t kNR = 32;  // packed panel width (columns)
constexpr int64_t kKC = 128;  // depth chunk: a panel chunk of kKC x kNR floats fits L1
// Multiply-adds (about ten milliseconds of one core's dots) below which a CPU kernel call stays on one
// thread: on a shared machine every parallel region waits for a descheduled thread, a scheduler
// quantum or more (a 100 x 150-row theme-graph search took 30 ms with two threads on a busy 2-core VM,
// 0.2 ms on one; a 1M-token chat's theme stage 4.5-7.3 s at a threshold of 4e6, 2.0-3.0 s at 32e6).
constexpr double kParallelWork = 32e6;

// kParallelWork, or XMEM_PARALLEL_WORK (multiply-adds, >= 0) where set: read once, when a kernel first
// asks (the environment is never read while other threads may be changing it).
inline double parallel_work() {
  static const double value = [] {
    if (const char* env = std::getenv("XMEM_PARALLEL_WORK")) {
      char* end = nullptr;
      const double v = std::strtod(env, &end);
      if (end != env && v >= 0) return v;
    }
    return kParallelWork;
  }();
  return value;
}

enum class Isa { Scalar = 0, Avx2 = 1, Avx512 = 2 };

inline const char* isa_name(Isa i) { return i == Isa::Avx512 ? "avx512" : i == Isa::Avx2 ? "avx2" : "scalar"; }

// The best ISA this CPU runs, capped by XMEM_CPU_ISA (read on every call: tests switch it).
inline Isa cpu_isa() {
  Isa best = Isa::Scalar;
#ifdef XMEM_X86
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) best = Isa::Avx512;
  else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) best = Isa::Avx2;
#endif
  if (const char* env = std::getenv("XMEM_CPU_ISA")) {
    const std::string s(env);
    Isa cap = s == "scalar" ? Isa::Scalar : s == "avx2" ? Isa::Avx2 : Isa::Avx512;
    if (static_cast<int>(cap) < static_cast<int>(best)) best = cap;
  }
  return best;
}

// Pack rows [0, n) of B (row stride d) into ceil(n / 32) panels of d x 32 (zero-padded columns);
// with ``scale`` [n], row c multiplied by scale[c] as it is packed.
inline void pack_panels(const float* b, int64_t n, int64_t d, float* out, const float* scale = nullptr) {
  for (int64_t p = 0; p * kNR < n; ++p) {
    float* panel = out + p * d * kNR;
    const int64_t c0 = p * kNR, nc = std::min(kNR, n - c0);
    if (nc < kNR) std::memset(panel, 0, sizeof(float) * d * kNR);
    // 8 depths of every column at a time: the writes stay in a few lines of the panel
    for (int64_t t0 = 0; t0 < d; t0 += 8) {
      const int64_t nt = std::min<int64_t>(8, d - t0);
      for (int64_t c = 0; c < nc; ++c) {
        const float* row = b + (c0 + c) * d + t0;
        if (scale) {
          const float s = scale[c0 + c];
          for (int64_t t = 0; t < nt; ++t) panel[(t0 + t) * kNR + c] = row[t] * s;
        } else {
          for (int64_t t = 0; t < nt; ++t) panel[(t0 + t) * kNR + c] = row[t];
        }
      }
    }
  }
}

// out[r * 32 + c] for r < 6, c < 32; a[r] are the 6 A row pointers (repeat one for short groups).
inline void mk_scalar(const float* const* a, const float* panel, int64_t d, float* out, bool accumulate) {
  float acc[kMR][kNR] = {};
  if (accumulate) std::memcpy(acc, out, sizeof(acc));
  for (int64_t t = 0; t < d; ++t) {
    const float* bt = panel + t * kNR;
    for (int64_t r = 0; r < kMR; ++r) {
      const float ar = a[r][t];
      for (int64_t c = 0; c < kNR; ++c) acc[r][c] = std::fma(ar, bt[c], acc[r][c]);
    }
  }
  std::memcpy(out, acc, sizeof(acc));
}

#ifdef XMEM_X86
__attribute__((target("avx2,fma"))) inline void mk_avx2(const float* const* a, const float* panel, int64_t d, float* out,
                                                         bool accumulate) {
  for (int64_t h = 0; h < kNR; h += 16) {  // two 6 x 16 halves: 12 accumulators + 2 loads + 1 broadcast
    float* o = out + h;
    __m256 c00 = _mm256_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00;
    __m256 c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;
    if (accumulate) {
      c00 = _mm256_loadu_ps(o + 0 * kNR); c01 = _mm256_loadu_ps(o + 0 * kNR + 8);
      c10 = _mm256_loadu_ps(o + 1 * kNR); c11 = _mm256_loadu_ps(o + 1 * kNR + 8);
      c20 = _mm256_loadu_ps(o + 2 * kNR); c21 = _mm256_loadu_ps(o + 2 * kNR + 8);
      c30 = _mm256_loadu_ps(o + 3 * kNR); c31 = _mm256_loadu_ps(o + 3 * kNR + 8);
      c40 = _mm256_loadu_ps(o + 4 * kNR); c41 = _mm256_loadu_ps(o + 4 * kNR + 8);
      c50 = _mm256_loadu_ps(o + 5 * kNR); c51 = _mm256_loadu_ps(o + 5 * kNR + 8);
    }
    const float *a0 = a[0], *a1 = a[1], *a2 = a[2], *a3 = a[3], *a4 = a[4], *a5 = a[5];
    const float* bp = panel + h;
    for (int64_t t = 0; t < d; ++t, bp += kNR) {
      const __m256 b0 = _mm256_loadu_ps(bp), b1 = _mm256_loadu_ps(bp + 8);
      __m256 x = _mm256_broadcast_ss(a0 + t);
      c00 = _mm256_fmadd_ps(x, b0, c00); c01 = _mm256_fmadd_ps(x, b1, c01);
      x = _mm256_broadcast_ss(a1 + t);
      c10 = _mm256_fmadd_ps(x, b0, c10); c11 = _mm256_fmadd_ps(x, b1, c11);
      x = _mm256_broadcast_ss(a2 + t);
      c20 = _mm256_fmadd_ps(x, b0, c20); c21 = _mm256_fmadd_ps(x, b1, c21);
      x = _mm256_broadcast_ss(a3 + t);
      c30 = _mm256_fmadd_ps(x, b0, c30); c31 = _mm256_fmadd_ps(x, b1, c31);
      x = _mm256_broadcast_ss(a4 + t);
      c40 = _mm256_fmadd_ps(x, b0, c40); c41 = _mm256_fmadd_ps(x, b1, c41);
      x = _mm256_broadcast_ss(a5 + t);
      c50 = _mm256_fmadd_ps(x, b0, c50); c51 = _mm256_fmadd_ps(x, b1, c51);
    }
    _mm256_storeu_ps(o + 0 * kNR, c00); _mm256_storeu_ps(o + 0 * kNR + 8, c01);
    _mm256_storeu_ps(o + 1 * kNR, c10); _mm256_storeu_ps(o + 1 * kNR + 8, c11);
    _mm256_storeu_ps(o + 2 * kNR, c20); _mm256_storeu_ps(o + 2 * kNR + 8, c21);
    _mm256_storeu_ps(o + 3 * kNR, c30); _mm256_storeu_ps(o + 3 * kNR + 8, c31);
    _mm256_storeu_ps(o + 4 * kNR, c40); _mm256_storeu_ps(o + 4 * kNR + 8, c41);
    _mm256_storeu_ps(o + 5 * kNR, c50); _mm256_storeu_ps(o + 5 * kNR + 8, c51);
  }
}

__attribute__((target("avx512f"))) inline void mk_avx512(const float* const* a, const float* panel, int64_t d, float* out,
                                                          bool accumulate) {
  __m512 c00 = _mm512_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00;
  __m512 c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;
  if (accumulate) {
    c00 = _mm512_loadu_ps(out + 0 * kNR); c01 = _mm512_loadu_ps(out + 0 * kNR + 16);
    c10 = _mm512_loadu_ps(out + 1 * kNR); c11 = _mm512_loadu_ps(out + 1 * kNR + 16);
    c20 = _mm512_loadu_ps(out + 2 * kNR); c21 = _mm512_loadu_ps(out + 2 * kNR + 16);
    c30 = _mm512_loadu_ps(out + 3 * kNR); c31 = _mm512_loadu_ps(out + 3 * kNR + 16);
    c40 = _mm512_loadu_ps(out + 4 * kNR); c41 = _mm512_loadu_ps(out + 4 * kNR + 16);
    c50 = _mm512_loadu_ps(out + 5 * kNR); c51 = _mm512_loadu_ps(out + 5 * kNR + 16);
  }
  const float *a0 = a[0], *a1 = a[1], *a2 = a[2], *a3 = a[3], *a4 = a[4], *a5 = a[5];
  const float* bp = panel;
  for (int64_t t = 0; t < d; ++t, bp += kNR) {
    const __m512 b0 = _mm512_loadu_ps(bp), b1 = _mm512_loadu_ps(bp + 16);
    __m512 x = _mm512_set1_ps(a0[t]);
    c00 = _mm512_fmadd_ps(x, b0, c00); c01 = _mm512_fmadd_ps(x, b1, c01);
    x = _mm512_set1_ps(a1[t]);
    c10 = _mm512_fmadd_ps(x, b0, c10); c11 = _mm512_fmadd_ps(x, b1, c11);
    x = _mm512_set1_ps(a2[t]);
    c20 = _mm512_fmadd_ps(x, b0, c20); c21 = _mm512_fmadd_ps(x, b1, c21);
    x = _mm512_set1_ps(a3[t]);
    c30 = _mm512_fmadd_ps(x, b0, c30); c31 = _mm512_fmadd_ps(x, b1, c31);
    x = _mm512_set1_ps(a4[t]);
    c40 = _mm512_fmadd_ps(x, b0, c40); c41 = _mm512_fmadd_ps(x, b1, c41);
    x = _mm512_set1_ps(a5[t]);
    c50 = _mm512_fmadd_ps(x, b0, c50); c51 = _mm512_fmadd_ps(x, b1, c51);
  }
  _mm512_storeu_ps(out + 0 * kNR, c00); _mm512_storeu_ps(out + 0 * kNR + 16, c01);
  _mm512_storeu_ps(out + 1 * kNR, c10); _mm512_storeu_ps(out + 1 * kNR + 16, c11);
  _mm512_storeu_ps(out + 2 * kNR, c20); _mm512_storeu_ps(out + 2 * kNR + 16, c21);
  _mm512_storeu_ps(out + 3 * kNR, c30); _mm512_storeu_ps(out + 3 * kNR + 16, c31);
  _mm512_storeu_ps(out + 4 * kNR, c40); _mm512_storeu_ps(out + 4 * kNR + 16, c41);
  _mm512_storeu_ps(out + 5 * kNR, c50); _mm512_storeu_ps(out + 5 * kNR + 16, c51);
}
#endif

// One 6 x 32 block over depth [0, d) of its operands: out[r * 32 + c] = dot(a[r], panel column c),
// or, with ``accumulate``, the chains continued from out's values.
inline void microkernel(Isa isa, const float* const* a, const float* panel, int64_t d, float* out, bool accumulate = false) {
#ifdef XMEM_X86
  if (isa == Isa::Avx512) return mk_avx512(a, panel, d, out, accumulate);
  if (isa == Isa::Avx2) return mk_avx2(a, panel, d, out, accumulate);
#endif
  (void)isa;
  mk_scalar(a, panel, d, out, accumulate);
}

// Single-precision FMA peak probe: `reps` x 12 independent FMA chains per thread in the best ISA.
// Returns the flops done (2 per lane per FMA); the caller times it.
#ifdef XMEM_X86
__attribute__((target("avx512f"))) inline float fma_probe_avx512(int64_t reps) {
  __m512 c[12];
  for (int i = 0; i < 12; ++i) c[i] = _mm512_set1_ps(float(i));
  const __m512 a = _mm512_set1_ps(0.999999f), b = _mm512_set1_ps(1e-7f);
  for (int64_t r = 0; r < reps; ++r)
    for (int i = 0; i < 12; ++i) c[i] = _mm512_fmadd_ps(c[i], a, b);
  __m512 s = c[0];
  for (int i = 1; i < 12; ++i) s = _mm512_add_ps(s, c[i]);
  return _mm512_reduce_add_ps(s);
}
__attribute__((target("avx2,fma"))) inline float fma_probe_avx2(int64_t reps) {
  __m256 c[12];
  for (int i = 0; i < 12; ++i) c[i] = _mm256_set1_ps(float(i));
  const __m256 a = _mm256_set1_ps(0.999999f), b = _mm256_set1_ps(1e-7f);
  for (int64_t r = 0; r < reps; ++r)
    for (int i = 0; i < 12; ++i) c[i] = _mm256_fmadd_ps(c[i], a, b);
  __m256 s = c[0];
  for (int i = 1; i < 12; ++i) s = _mm256_add_ps(s, c[i]);
  float o[8];
  _mm256_storeu_ps(o, s);
  return o[0] + o[1] + o[2] + o[3] + o[4] + o[5] + o[6] + o[7];
}
#endif

}  // namespace xmem
