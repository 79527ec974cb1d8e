// Eq. 4 greedy coverage selection, one thread block per query (semantics: ops/coverage/reference.py).
//
// Setup: each thread dedups the neighbour lists of its candidates (out-of-range and repeated entries
// become -1 in idx_scratch; the first occurrence keeps the largest weight, in w_scratch; a candidate
// that lists itself covers itself at that entry, else by an implicit entry of weight 1 after its
// neighbours), the block reduces min / max relevance, and thread 0 sums Z sequentially in the
// reference's order. Each greedy step every thread recomputes, from scratch and in entry order, the
// gain of its unselected candidates over the uncovered nodes, the block takes the argmax (ties to
// the lowest position), and thread 0 records the pick, marks its nodes covered and applies the stop
// rule (count: covered candidates reach the target share, or all are covered; weight: credited
// weight share reaches the target). Doubles with explicit round-to-nearest intrinsics (no FMA contraction) reproduce the
// reference's arithmetic bit for bit, so picks, values and stop decisions match it exactly.
#include "xmemory/coverage_cuda.h"
#include "xmemory/cuda_check.h"

#include <climits>
#include <cmath>

namespace xmem {
namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;

// (av, ap) ranks before (bv, bp): larger value, or equal value and lower position
__device__ __forceinline__ bool beats(double av, int ap, double bv, int bp) {
  return av > bv || (av == bv && ap < bp);
}

__global__ void __launch_bounds__(kThreads)
coverage_select_kernel(const int64_t* __restrict__ cand_offsets, const int32_t* __restrict__ nbr_idx,
                       const float* __restrict__ nbr_w, const double* __restrict__ relevance, double alpha,
                       double target, bool count_stop, const int64_t* __restrict__ cap_offsets,
                       int64_t num_candidates, int64_t k, int32_t* __restrict__ idx_scratch,
                       float* __restrict__ w_scratch, unsigned char* __restrict__ state,
                       int32_t* __restrict__ selected, double* __restrict__ values, int32_t* __restrict__ counts) {
  extern __shared__ __align__(8) unsigned char smem[];
  __shared__ double red_v[kWarps], red_g[kWarps], red_lo[kWarps], red_hi[kWarps];
  __shared__ int red_p[kWarps];
  __shared__ double sh_z, sh_lo, sh_hi;
  __shared__ int sh_stop;

  const int64_t qi = blockIdx.x;
  const int64_t s = cand_offsets[qi];
  const int n = static_cast<int>(cand_offsets[qi + 1] - s);
  const int64_t cs = cap_offsets[qi];
  const int64_t cap = cap_offsets[qi + 1] - cs;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  if (n <= 0 || cap <= 0) {  // block-uniform
    if (tid == 0) counts[qi] = 0;
    return;
  }

  // per-query state: reln [n] double, covered [n], chosen [n] bytes (shared, or global scratch)
  double* reln;
  unsigned char* covered;
  if (state != nullptr) {
    reln = reinterpret_cast<double*>(state) + s;
    covered = state + 8 * num_candidates + 2 * s;
  } else {
    reln = reinterpret_cast<double*>(smem);
    covered = smem + 8 * static_cast<int64_t>(n);
  }
  unsigned char* chosen = covered + n;
  const int32_t* I = nbr_idx + s * k;  // [n, k]
  const float* W = nbr_w + s * k;      // [n, k]
  int32_t* I2 = idx_scratch + s * k;   // [n, k] deduplicated ids
  float* W2 = w_scratch + s * k;       // [n, k] their largest weights
  const double* R = relevance + s;     // [n]

  // setup: flags, dedup (an entry counts once, at its first occurrence; self is entry 0), min / max
  double lo = INFINITY, hi = -INFINITY;
  for (int i = tid; i < n; i += kThreads) {
    covered[i] = 0;
    chosen[i] = 0;
    lo = fmin(lo, R[i]);
    hi = fmax(hi, R[i]);
    const int32_t* row = I + static_cast<int64_t>(i) * k;
    int32_t* out = I2 + static_cast<int64_t>(i) * k;
    const float* wrow = W + static_cast<int64_t>(i) * k;
    float* wout = W2 + static_cast<int64_t>(i) * k;
    for (int64_t j = 0; j < k; ++j) {
      const int32_t u = row[j];
      bool ok = u >= 0 && u < n;
      for (int64_t jj = 0; ok && jj < j; ++jj) ok = row[jj] != u;
      float wm = wrow[j];
      if (ok)
        for (int64_t jj = j + 1; jj < k; ++jj)
          if (row[jj] == u) wm = fmaxf(wm, wrow[jj]);
      out[j] = ok ? u : -1;
      wout[j] = wm;
    }
  }
  for (int off = 16; off > 0; off >>= 1) {
    lo = fmin(lo, __shfl_down_sync(0xffffffffu, lo, off));
    hi = fmax(hi, __shfl_down_sync(0xffffffffu, hi, off));
  }
  if (lane == 0) { red_lo[warp] = lo; red_hi[warp] = hi; }
  __syncthreads();
  if (tid == 0) {
    for (int w = 1; w < kWarps; ++w) { lo = fmin(lo, red_lo[w]); hi = fmax(hi, red_hi[w]); }
    sh_lo = lo;
    sh_hi = hi;
  }
  __syncthreads();
  lo = sh_lo;
  hi = sh_hi;
  for (int i = tid; i < n; i += kThreads)
    reln[i] = (hi == lo) ? 0.5 : __ddiv_rn(__dsub_rn(R[i], lo), __dsub_rn(hi, lo));
  __syncthreads();  // idx_scratch / w_scratch written by every thread
  if (tid == 0) {  // Z summed in the reference's order: candidate by candidate, entries, then self
    double z = 0.0;
    for (int i = 0; i < n; ++i) {
      bool listed = false;
      for (int64_t j = 0; j < k; ++j) {
        const int32_t u = I2[static_cast<int64_t>(i) * k + j];
        const double wu = static_cast<double>(W2[static_cast<int64_t>(i) * k + j]);
        if (u < 0) continue;
        listed = listed || u == i;
        if (wu > 0.0) z = __dadd_rn(z, wu);
      }
      if (!listed) z = __dadd_rn(z, 1.0);
    }
    sh_z = z > 0.0 ? z : 1.0;
  }
  __syncthreads();
  const double z = sh_z;
  const double beta = __dsub_rn(1.0, alpha);

  double credited = 0.0;  // thread 0's running credited weight
  int npicks = 0, ncovered = 0;
  for (int64_t step = 0; step < cap; ++step) {
    double bv = -INFINITY, bg = 0.0;
    int bp = INT_MAX;
    for (int i = tid; i < n; i += kThreads) {  // ascending i: strict > keeps the lowest position
      if (chosen[i]) continue;
      double gain = 0.0;
      bool listed = false;
      const int64_t b = static_cast<int64_t>(i) * k;
      for (int64_t j = 0; j < k; ++j) {
        const int32_t u = I2[b + j];
        if (u < 0) continue;
        listed = listed || u == i;
        if (!covered[u]) gain = __dadd_rn(gain, static_cast<double>(W2[b + j]));
      }
      if (!listed && !covered[i]) gain = __dadd_rn(gain, 1.0);
      const double v = __dadd_rn(__dmul_rn(alpha, __ddiv_rn(gain, z)), __dmul_rn(beta, reln[i]));
      if (v > bv) { bv = v; bp = i; bg = gain; }
    }
    for (int off = 16; off > 0; off >>= 1) {
      const double ov = __shfl_down_sync(0xffffffffu, bv, off);
      const double og = __shfl_down_sync(0xffffffffu, bg, off);
      const int op = __shfl_down_sync(0xffffffffu, bp, off);
      if (beats(ov, op, bv, bp)) { bv = ov; bp = op; bg = og; }
    }
    if (lane == 0) { red_v[warp] = bv; red_p[warp] = bp; red_g[warp] = bg; }
    __syncthreads();
    if (tid == 0) {
      for (int w = 1; w < kWarps; ++w)
        if (beats(red_v[w], red_p[w], bv, bp)) { bv = red_v[w]; bp = red_p[w]; bg = red_g[w]; }
      int stop = 0;
      if (bp == INT_MAX || bv <= 0.0) {
        stop = 1;
      } else {
        chosen[bp] = 1;
        const int64_t b = static_cast<int64_t>(bp) * k;
        for (int64_t j = 0; j < k; ++j) {
          const int32_t u = I2[b + j];
          if (u >= 0 && !covered[u]) { covered[u] = 1; ++ncovered; }
        }
        if (!covered[bp]) { covered[bp] = 1; ++ncovered; }
        credited = __dadd_rn(credited, bg);
        selected[cs + npicks] = bp;
        values[cs + npicks] = bv;
        ++npicks;
        if (count_stop) {
          if (ncovered == n || (target < 1.0 && __ddiv_rn(static_cast<double>(ncovered), static_cast<double>(n)) >= target))
            stop = 1;
        } else if (__ddiv_rn(credited, z) >= target) {
          stop = 1;
        }
      }
      sh_stop = stop;
    }
    __syncthreads();
    if (sh_stop) break;
  }
  if (tid == 0) counts[qi] = npicks;
}

}  // namespace

void coverage_select_cuda(const int64_t* cand_offsets, const int32_t* nbr_idx, const float* nbr_w,
                          const double* relevance, double alpha, double target, bool count_stop,
                          const int64_t* cap_offsets, int64_t num_queries, int64_t num_candidates, int64_t k,
                          int64_t max_n, int32_t* idx_scratch, float* w_scratch, void* state_scratch,
                          int32_t* selected, double* values, int32_t* counts, cudaStream_t stream) {
  if (num_queries < 0 || num_candidates < 0 || k < 0 || max_n < 0)
    throw std::invalid_argument("coverage_select_cuda: negative size");
  if (num_candidates > INT_MAX || num_queries > INT_MAX)
    throw std::invalid_argument("coverage_select_cuda: more than 2^31 - 1 queries or candidates");
  if (state_scratch == nullptr && max_n > kCoverageSharedMaxN)
    throw std::invalid_argument("coverage_select_cuda: max_n exceeds the shared-memory limit; pass state_scratch");
  if (num_queries == 0) return;
  const size_t smem = state_scratch == nullptr ? static_cast<size_t>(max_n * kCoverageStateBytes) : 0;
  coverage_select_kernel<<<static_cast<unsigned>(num_queries), kThreads, smem, stream>>>(
      cand_offsets, nbr_idx, nbr_w, relevance, alpha, target, count_stop, cap_offsets, num_candidates, k,
      idx_scratch, w_scratch, static_cast<unsigned char*>(state_scratch), selected, values, counts);
  XMEM_CUDA_CHECK(cudaGetLastError());
}

}  // namespace xmem
