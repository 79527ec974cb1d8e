// f(P) kernels on the GPU (semantics: ops/objective/reference.py; arithmetic: csrc/cpu/objective.cpp).
//
// Closed form (DESIGN section 1): with S_k the sum of theme k's unit rows, cohesion_k = |S_k| / n_k
// and cos(mu_k, mu_j) = S_k.S_j / (|S_k| |S_j|). objective_score_kernel<kCandidates> (two modes, two entry
// points: objective_score_candidates_cuda / objective_score_segments_cuda) runs one block of 256
// threads per item (a candidate edit of one memory, or a whole segment whose themes are all "new"):
//   1. removed flags for the memory's theme rows;
//   2. one warp per kept theme: s_k from the kept top-2 (or, when both are removed, the max over the
//      other kept themes), max'd with its cosines to the new themes, which also raise the new
//      themes' s through an atomic max (max is order-free, so the result is deterministic);
//   3. one warp per new theme g: cosines to the new themes h > g, atomic max into both;
//   4. -inf (no other theme) -> 0; bitonic sort of s (removed / padding slots +inf) for the median,
//      again of |s - m| for the MAD; sigma = MAD + eps;
//   5. sparsity N^2 / (K sum n_k^2) + mean_k cohesion_k g(s_k), block sums in double.
// Per-item state (s, sort buffer, flags) sits in shared memory up to kObjectiveSharedMaxSlots slots,
// beyond that in a global scratch region. Dots are lane-strided then tree-reduced (lane 0's value
// broadcast, so every lane branches on the same bits); results agree with the CPU path to rounding.
#include "xmemory/cuda_check.h"
#include "xmemory/objective_cuda.h"

#include <climits>
#include <cmath>
#include <stdexcept>

namespace xmem {
namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr unsigned kFull = 0xffffffffu;

// dot of two d-vectors by one warp; every lane returns lane 0's total
__device__ __forceinline__ double warp_dot(const double* __restrict__ a, const double* __restrict__ b, int64_t d,
                                           int lane) {
  double acc = 0.0;
  for (int64_t j = lane; j < d; j += 32) acc += a[j] * b[j];
  for (int off = 16; off > 0; off >>= 1) acc += __shfl_down_sync(kFull, acc, off);
  return __shfl_sync(kFull, acc, 0);
}

__device__ __forceinline__ double warp_cos(const double* a, double na, const double* b, double nb, int64_t d,
                                           int lane) {
  return (na > 0.0 && nb > 0.0) ? warp_dot(a, b, d, lane) / (na * nb) : 0.0;
}

// *addr = max(*addr, v) for shared or global doubles (no NaNs)
__device__ __forceinline__ void atomic_max_double(double* addr, double v) {
  auto* a = reinterpret_cast<unsigned long long*>(addr);
  unsigned long long old = *reinterpret_cast<volatile unsigned long long*>(a);
  while (__longlong_as_double(static_cast<long long>(old)) < v) {
    const unsigned long long seen = atomicCAS(a, old, static_cast<unsigned long long>(__double_as_longlong(v)));
    if (seen == old) break;
    old = seen;
  }
}

// ascending bitonic sort of buf [P], P a power of two; all threads of the block call it
__device__ void block_bitonic_sort(double* buf, int64_t P) {
  for (int64_t k = 2; k <= P; k <<= 1) {
    for (int64_t j = k >> 1; j > 0; j >>= 1) {
      for (int64_t i = threadIdx.x; i < P; i += blockDim.x) {
        const int64_t p = i ^ j;
        if (p > i) {
          const double a = buf[i], b = buf[p];
          const bool up = (i & k) == 0;
          if (up ? (a > b) : (a < b)) {
            buf[i] = b;
            buf[p] = a;
          }
        }
      }
      __syncthreads();
    }
  }
}

// median of the n smallest entries of the sorted buf (NumPy's: mean of the two middle for even n)
__device__ __forceinline__ double sorted_median(const double* buf, int64_t n) {
  const double hi = buf[n / 2];
  return (n % 2 == 1) ? hi : 0.5 * (buf[n / 2 - 1] + hi);
}

__global__ void __launch_bounds__(kThreads)
row_norms_kernel(const double* __restrict__ a, int64_t rows, int64_t d, double* __restrict__ out) {
  const int lane = threadIdx.x & 31;
  const int64_t r = static_cast<int64_t>(blockIdx.x) * kWarps + (threadIdx.x >> 5);
  if (r >= rows) return;  // warp-uniform
  const double* row = a + r * d;
  const double s = warp_dot(row, row, d, lane);
  if (lane == 0) out[r] = sqrt(s);
}

__global__ void __launch_bounds__(kThreads)
group_sums_kernel(const double* __restrict__ x, const double* __restrict__ row_norm,
                  const int64_t* __restrict__ group_offsets, const int64_t* __restrict__ members, int64_t d,
                  double* __restrict__ gsum, double* __restrict__ gnorm) {
  __shared__ double red[kWarps];
  const int64_t g = blockIdx.x;
  const int64_t m0 = group_offsets[g], m1 = group_offsets[g + 1];
  double sq = 0.0;
  for (int64_t j = threadIdx.x; j < d; j += kThreads) {
    double acc = 0.0;
    for (int64_t m = m0; m < m1; ++m) {
      const int64_t r = members[m];
      if (row_norm != nullptr) {
        const double nr = row_norm[r];
        if (nr > 0.0) acc += x[r * d + j] / nr;
      } else {
        acc += x[r * d + j];
      }
    }
    gsum[g * d + j] = acc;
    sq += acc * acc;
  }
  for (int off = 16; off > 0; off >>= 1) sq += __shfl_down_sync(kFull, sq, off);
  if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = sq;
  __syncthreads();
  if (threadIdx.x == 0) {
    double t = 0.0;
    for (int w = 0; w < kWarps; ++w) t += red[w];
    gnorm[g] = sqrt(t);
  }
}

// 3 blocks per SM: ptxas fits ~80 registers, no spills (at the default 64 it spills a few bytes).
// kCandidates: candidate mode (memory, theme_*, top_*, rem_* read); else segment mode (item = segment,
// only new themes; those pointers are not read).
template <bool kCandidates>
__global__ void __launch_bounds__(kThreads, 3)
objective_score_kernel(const int64_t* __restrict__ memory, const int64_t* __restrict__ node_offsets,
                       const double* __restrict__ theme_sum, const double* __restrict__ theme_norm,
                       const int64_t* __restrict__ theme_count, const int64_t* __restrict__ theme_offsets,
                       const int64_t* __restrict__ top_idx, const double* __restrict__ top_cos,
                       const int64_t* __restrict__ rem_offsets, const int64_t* __restrict__ rem_rows,
                       const int64_t* __restrict__ add_offsets, const int64_t* __restrict__ group_offsets,
                       const double* __restrict__ gsum, const double* __restrict__ gnorm, int64_t d, double eps,
                       int64_t smem_slots, unsigned char* state_scratch, const int64_t* __restrict__ state_offsets,
                       double* __restrict__ out) {
  // short names for the arithmetic below (the parameters carry the header's names)
  const double* const TS = theme_sum;
  const double* const TN = theme_norm;
  const int64_t* const CNT = theme_count;
  const int64_t* const TI = top_idx;
  const double* const TC = top_cos;
  const int64_t* const RR = rem_rows;
  const int64_t* const GO = group_offsets;
  const double* const GS = gsum;
  const double* const GN = gnorm;
  extern __shared__ __align__(8) unsigned char smem[];
  __shared__ double red_a[kWarps], red_b[kWarps];

  const int64_t c = blockIdx.x;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  int64_t b = c, t0 = 0, kb = 0, r0 = 0, R = 0;
  if constexpr (kCandidates) {
    b = memory[c];
    t0 = theme_offsets[b];
    kb = theme_offsets[b + 1] - t0;
    r0 = rem_offsets[c];
    R = rem_offsets[c + 1] - r0;
  }
  const int64_t n_nodes = node_offsets[b + 1] - node_offsets[b];
  const int64_t g0 = add_offsets[c], G = add_offsets[c + 1] - g0;
  const int64_t slots = kb + G, nv = kb - R + G;  // theme positions, themes after the edit
  if (slots <= 0 || nv <= 0 || n_nodes <= 0) {  // block-uniform
    if (tid == 0) out[c] = 0.0;
    return;
  }
  int64_t P = 1;
  while (P < slots) P <<= 1;
  unsigned char* base;
  if (P <= smem_slots) {
    base = smem;
  } else if (state_scratch != nullptr) {
    base = state_scratch + state_offsets[c];
  } else {  // the launcher checks this; never silently wrong
    if (tid == 0) out[c] = __longlong_as_double(0x7ff8000000000000LL);
    return;
  }
  double* s = reinterpret_cast<double*>(base);  // [P] s of each theme position (kept rows, then groups)
  double* buf = s + P;                          // [P] sort buffer
  unsigned char* removed = reinterpret_cast<unsigned char*>(buf + P);  // [P]

  for (int64_t i = tid; i < P; i += kThreads) {
    s[i] = -INFINITY;
    removed[i] = 0;
  }
  __syncthreads();
  for (int64_t r = tid; r < R; r += kThreads) removed[RR[r0 + r] - t0] = 1;
  __syncthreads();

  // 2. kept themes: s from the kept top-2 (exact recomputation when both are gone), then the new themes
  for (int64_t i = warp; i < kb; i += kWarps) {
    if (removed[i]) continue;
    const int64_t u = t0 + i;
    const double* su = TS + u * d;
    const double nu = TN[u];
    double best = -INFINITY;
    const int64_t n1 = TI[2 * u], n2 = TI[2 * u + 1];
    if (n1 >= 0 && !removed[n1 - t0]) {
      best = TC[2 * u];
    } else if (n2 >= 0 && !removed[n2 - t0]) {
      best = TC[2 * u + 1];
    } else if (n1 >= 0) {
      for (int64_t q = 0; q < kb; ++q)
        if (q != i && !removed[q]) best = fmax(best, warp_cos(su, nu, TS + (t0 + q) * d, TN[t0 + q], d, lane));
    }
    for (int64_t g = 0; g < G; ++g) {
      const double cg = warp_cos(su, nu, GS + (g0 + g) * d, GN[g0 + g], d, lane);
      best = fmax(best, cg);
      if (lane == 0) atomic_max_double(&s[kb + g], cg);
    }
    if (lane == 0) s[i] = best;
  }
  // 3. new themes among themselves: each pair once
  for (int64_t g = warp; g < G; g += kWarps) {
    const double* sg = GS + (g0 + g) * d;
    const double ng = GN[g0 + g];
    double best = -INFINITY;
    for (int64_t h = g + 1; h < G; ++h) {
      const double ch = warp_cos(sg, ng, GS + (g0 + h) * d, GN[g0 + h], d, lane);
      best = fmax(best, ch);
      if (lane == 0) atomic_max_double(&s[kb + h], ch);
    }
    if (lane == 0) atomic_max_double(&s[kb + g], best);
  }
  __syncthreads();

  // 4. lone theme -> s = 0; sort buffer; sum n_k^2
  double sq = 0.0;
  for (int64_t i = tid; i < P; i += kThreads) {
    const bool valid = i < slots && !(i < kb && removed[i]);
    double v = INFINITY;
    if (valid) {
      v = s[i];
      if (v == -INFINITY) v = 0.0;
      s[i] = v;
      const double n = i < kb ? static_cast<double>(CNT[t0 + i])
                              : static_cast<double>(GO[g0 + i - kb + 1] - GO[g0 + i - kb]);
      sq += n * n;
    }
    buf[i] = v;
  }
  __syncthreads();
  block_bitonic_sort(buf, P);
  const double m = sorted_median(buf, nv);
  __syncthreads();  // everyone has read the median before buf is overwritten
  for (int64_t i = tid; i < P; i += kThreads) buf[i] = i < nv ? fabs(buf[i] - m) : INFINITY;
  __syncthreads();
  block_bitonic_sort(buf, P);
  const double sigma = sorted_median(buf, nv) + eps;

  // 5. SemScore numerator
  double sem = 0.0;
  for (int64_t i = tid; i < slots; i += kThreads) {
    if (i < kb && removed[i]) continue;
    double nrm, n;
    if (i < kb) {
      nrm = TN[t0 + i];
      n = static_cast<double>(CNT[t0 + i]);
    } else {
      const int64_t g = g0 + i - kb;
      nrm = GN[g];
      n = static_cast<double>(GO[g + 1] - GO[g]);
    }
    const double z = s[i] - m;
    sem += (nrm / n) * exp(-(z * z) / (2.0 * sigma * sigma));
  }
  for (int off = 16; off > 0; off >>= 1) {
    sq += __shfl_down_sync(kFull, sq, off);
    sem += __shfl_down_sync(kFull, sem, off);
  }
  if (lane == 0) {
    red_a[warp] = sq;
    red_b[warp] = sem;
  }
  __syncthreads();
  if (tid == 0) {
    double tsq = 0.0, tsem = 0.0;
    for (int w = 0; w < kWarps; ++w) {
      tsq += red_a[w];
      tsem += red_b[w];
    }
    const double k = static_cast<double>(nv), n = static_cast<double>(n_nodes);
    out[c] = n * n / (k * tsq) + tsem / k;
  }
}

void check_grid(int64_t n, const char* what) {
  if (n < 0) throw std::invalid_argument(std::string("objective_cuda: negative ") + what);
  if (n > INT_MAX) throw std::invalid_argument(std::string("objective_cuda: more than 2^31 - 1 ") + what);
}

}  // namespace

void objective_row_norms_cuda(const double* a, int64_t rows, int64_t d, double* out, cudaStream_t stream) {
  check_grid(rows, "rows");
  if (d < 0) throw std::invalid_argument("objective_cuda: negative d");
  if (rows == 0) return;
  const int64_t blocks = (rows + kWarps - 1) / kWarps;
  row_norms_kernel<<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(a, rows, d, out);
  XMEM_CUDA_CHECK(cudaGetLastError());
}

void objective_group_sums_cuda(const double* x, const double* row_norm, const int64_t* group_offsets,
                               const int64_t* members, int64_t num_groups, int64_t d, double* gsum, double* gnorm,
                               cudaStream_t stream) {
  check_grid(num_groups, "groups");
  if (d < 0) throw std::invalid_argument("objective_cuda: negative d");
  if (num_groups == 0) return;
  group_sums_kernel<<<static_cast<unsigned>(num_groups), kThreads, 0, stream>>>(x, row_norm, group_offsets, members,
                                                                                  d, gsum, gnorm);
  XMEM_CUDA_CHECK(cudaGetLastError());
}

namespace {

template <bool kCandidates>
void launch_score(const int64_t* memory, const int64_t* node_offsets, const double* theme_sum,
                  const double* theme_norm, const int64_t* theme_count, const int64_t* theme_offsets,
                  const int64_t* top_idx, const double* top_cos, const int64_t* rem_offsets, const int64_t* rem_rows,
                  const int64_t* add_offsets, const int64_t* group_offsets, const double* gsum, const double* gnorm,
                  int64_t num_items, int64_t d, double eps, int64_t max_slots, void* state_scratch,
                  const int64_t* state_offsets, double* out, cudaStream_t stream) {
  check_grid(num_items, "items");
  if (d < 0 || max_slots < 0) throw std::invalid_argument("objective_cuda: negative d or max_slots");
  if (max_slots > kObjectiveSharedMaxSlots && (state_scratch == nullptr || state_offsets == nullptr))
    throw std::invalid_argument("objective_score_{candidates,segments}_cuda: max_slots exceeds the shared-memory limit; pass state_scratch");
  if (num_items == 0) return;
  int64_t cap = 1;  // shared slots: the largest power of two needed, up to the shared limit
  while (cap < max_slots && cap < kObjectiveSharedMaxSlots) cap <<= 1;
  const size_t smem = static_cast<size_t>((cap * kObjectiveSlotBytes + 7) / 8 * 8);
  objective_score_kernel<kCandidates><<<static_cast<unsigned>(num_items), kThreads, smem, stream>>>(
      memory, node_offsets, theme_sum, theme_norm, theme_count, theme_offsets, top_idx, top_cos, rem_offsets, rem_rows,
      add_offsets, group_offsets, gsum, gnorm, d, eps, cap, static_cast<unsigned char*>(state_scratch), state_offsets,
      out);
  XMEM_CUDA_CHECK(cudaGetLastError());
}

}  // namespace

void objective_score_candidates_cuda(const int64_t* memory, const int64_t* node_offsets, const double* theme_sum,
                                     const double* theme_norm, const int64_t* theme_count,
                                     const int64_t* theme_offsets, const int64_t* top_idx, const double* top_cos,
                                     const int64_t* rem_offsets, const int64_t* rem_rows, const int64_t* add_offsets,
                                     const int64_t* group_offsets, const double* gsum, const double* gnorm,
                                     int64_t num_items, int64_t d, double eps, int64_t max_slots,
                                     void* state_scratch, const int64_t* state_offsets, double* out,
                                     cudaStream_t stream) {
  launch_score<true>(memory, node_offsets, theme_sum, theme_norm, theme_count, theme_offsets, top_idx, top_cos,
                     rem_offsets, rem_rows, add_offsets, group_offsets, gsum, gnorm, num_items, d, eps, max_slots,
                     state_scratch, state_offsets, out, stream);
}

void objective_score_segments_cuda(const int64_t* node_offsets, const int64_t* add_offsets,
                                   const int64_t* group_offsets, const double* gsum, const double* gnorm,
                                   int64_t num_items, int64_t d, double eps, int64_t max_slots, void* state_scratch,
                                   const int64_t* state_offsets, double* out, cudaStream_t stream) {
  launch_score<false>(nullptr, node_offsets, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr,
                      add_offsets, group_offsets, gsum, gnorm, num_items, d, eps, max_slots, state_scratch,
                      state_offsets, out, stream);
}

}  // namespace xmem
