// Exact segmented cosine top-k (knn_graph / knn_search), semantics of ops/knn/reference.py.
//
// Grid: one block per (segment, tile of kTQ query rows), located by binary search over tile_start.
// Per key tile of kTK rows the block computes the kTQ x kTK dot products with shared-memory tiles
// over chunks of kDC dimensions (any d), 4x4 register micro-tiles, float32 accumulation, then
// each warp merges the tile into the running top-k of its kRPW query rows. A running list is
// held in registers across the warp: lane l keeps slots l and l + 32 (k <= 64), sorted by
// (sim desc, row id asc); candidates that beat slot k-1 are inserted one at a time.
#include "xmemory/cuda_check.h"
#include "xmemory/knn_cuda.h"

#include <climits>
#include <cmath>

namespace xmem {
namespace {

constexpr int kTQ = kKnnQueryTile;  // query rows per block (64)
constexpr int kTK = 64;             // key rows per tile
constexpr int kDC = 32;             // dimensions per shared-memory chunk
constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int kRPW = kTQ / kWarps;  // query rows per warp in the top-k phase (8)
constexpr int kQS = kDC + 1;        // padded row stride of the q / x chunk tiles
constexpr int kSS = kTK + 16;       // row stride of the score tile (conflict-free 4x4 stores)
constexpr int kNoId = INT_MAX;      // empty slot id: loses every tie
static_assert(kTQ == 64 && kTK == 64 && kThreads == 256, "micro-tiling assumes 64x64 tiles, 256 threads");

__device__ __forceinline__ int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

// a ranks before b: larger sim, or equal sim and lower row id
__device__ __forceinline__ bool better(float av, int ai, float bv, int bi) {
  return av > bv || (av == bv && ai < bi);
}

// Insert (cv, ci) into the warp's sorted list (slots lane / lane + 32 in v0,i0 / v1,i1), keep the
// first k slots, and refresh the threshold (tv, ti) = slot k - 1. Warp-uniform call.
template <bool kTwo>
__device__ __forceinline__ void insert(float& v0, int& i0, float& v1, int& i1, float& tv, int& ti, float cv, int ci,
                                       int k, int lane) {
  const unsigned full = 0xffffffffu;
  int pos = __popc(__ballot_sync(full, lane < k && better(v0, i0, cv, ci)));
  if (kTwo) pos += __popc(__ballot_sync(full, lane + 32 < k && better(v1, i1, cv, ci)));
  const float u0v = __shfl_up_sync(full, v0, 1);
  const int u0i = __shfl_up_sync(full, i0, 1);
  float u1v = 0.f, l31v = 0.f;
  int u1i = 0, l31i = 0;
  if (kTwo) {
    u1v = __shfl_up_sync(full, v1, 1);
    u1i = __shfl_up_sync(full, i1, 1);
    l31v = __shfl_sync(full, v0, 31);  // slot 31 moves to slot 32
    l31i = __shfl_sync(full, i0, 31);
  }
  if (lane > pos) { v0 = u0v; i0 = u0i; }
  else if (lane == pos) { v0 = cv; i0 = ci; }
  if (kTwo) {
    const float pv = lane == 0 ? l31v : u1v;
    const int pi = lane == 0 ? l31i : u1i;
    if (lane + 32 > pos) { v1 = pv; i1 = pi; }
    else if (lane + 32 == pos) { v1 = cv; i1 = ci; }
  }
  const int kl = (k - 1) & 31;
  const float a0 = __shfl_sync(full, v0, kl);
  const int b0 = __shfl_sync(full, i0, kl);
  if (kTwo && k > 32) {
    tv = __shfl_sync(full, v1, kl);
    ti = __shfl_sync(full, i1, kl);
  } else {
    tv = a0;
    ti = b0;
  }
}

template <bool kTwo>
__global__ void __launch_bounds__(kThreads)
knn_topk_kernel(const float* __restrict__ q, const int64_t* __restrict__ q_offsets, const float* __restrict__ x,
                const int64_t* __restrict__ x_offsets, const int64_t* __restrict__ tile_start, int64_t num_segments,
                int64_t d, int k, bool exclude_self, bool drop_nonpositive, int32_t* __restrict__ out_idx,
                float* __restrict__ out_sim) {
  __shared__ float Qs[kTQ * kQS];  // query chunk [kTQ, kDC]
  __shared__ float Ks[kTK * kQS];  // key chunk [kTK, kDC]
  __shared__ float S[kTQ * kSS];   // scores [kTQ, kTK]

  // locate the segment: the last b with tile_start[b] <= tile
  const int64_t tile = blockIdx.x;
  int64_t lo = 0, hi = num_segments;  // tile_start[lo] <= tile < tile_start[hi]
  while (hi - lo > 1) {
    const int64_t mid = (lo + hi) >> 1;
    if (tile_start[mid] <= tile) lo = mid; else hi = mid;
  }
  const int64_t seg = lo;
  const int64_t q0 = q_offsets[seg] + (tile - tile_start[seg]) * kTQ;
  const int64_t qe = q_offsets[seg + 1];
  const int64_t xs = x_offsets[seg], xe = x_offsets[seg + 1];
  const int nq = static_cast<int>(min64(kTQ, qe - q0));

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int ty = tid >> 4, tx = tid & 15;  // dot phase: queries ty + 16a, keys tx + 16b

  // running top-k of this warp's rows r = warp * kRPW + rr
  float v0[kRPW], v1[kRPW], tv[kRPW];
  int i0[kRPW], i1[kRPW], ti[kRPW];
#pragma unroll
  for (int rr = 0; rr < kRPW; ++rr) {
    v0[rr] = v1[rr] = tv[rr] = -INFINITY;
    i0[rr] = i1[rr] = ti[rr] = kNoId;
  }

  for (int64_t kt = xs; kt < xe; kt += kTK) {
    const int nk = static_cast<int>(min64(kTK, xe - kt));
    float acc[4][4];
#pragma unroll
    for (int a = 0; a < 4; ++a)
#pragma unroll
      for (int b = 0; b < 4; ++b) acc[a][b] = 0.f;

    for (int64_t c0 = 0; c0 < d; c0 += kDC) {
      const int nc = static_cast<int>(min64(kDC, d - c0));
#pragma unroll
      for (int e = tid; e < kTQ * kDC; e += kThreads) {  // coalesced: 32 consecutive dims per row
        const int r = e / kDC, c = e % kDC;
        Qs[r * kQS + c] = (r < nq && c < nc) ? q[(q0 + r) * d + c0 + c] : 0.f;
        Ks[r * kQS + c] = (r < nk && c < nc) ? x[(kt + r) * d + c0 + c] : 0.f;
      }
      __syncthreads();
#pragma unroll 8
      for (int c = 0; c < kDC; ++c) {
        float av[4], bv[4];
#pragma unroll
        for (int a = 0; a < 4; ++a) av[a] = Qs[(ty + 16 * a) * kQS + c];
#pragma unroll
        for (int b = 0; b < 4; ++b) bv[b] = Ks[(tx + 16 * b) * kQS + c];
#pragma unroll
        for (int a = 0; a < 4; ++a)
#pragma unroll
          for (int b = 0; b < 4; ++b) acc[a][b] = fmaf(av[a], bv[b], acc[a][b]);
      }
      __syncthreads();
    }
#pragma unroll
    for (int a = 0; a < 4; ++a)
#pragma unroll
      for (int b = 0; b < 4; ++b) S[(ty + 16 * a) * kSS + tx + 16 * b] = acc[a][b];
    __syncthreads();

    // merge: lane looks at keys kt + lane and kt + lane + 32 (ascending ids: first mask, then second)
    const int id0 = static_cast<int>(kt) + lane, id1 = id0 + 32;
#pragma unroll
    for (int rr = 0; rr < kRPW; ++rr) {
      const int r = warp * kRPW + rr;
      if (r >= nq) continue;  // warp-uniform
      const int gq = static_cast<int>(q0) + r;
      const float s0 = S[r * kSS + lane], s1 = S[r * kSS + lane + 32];
      const bool ok0 = lane < nk && !(exclude_self && id0 == gq) && better(s0, id0, tv[rr], ti[rr]);
      const bool ok1 = lane + 32 < nk && !(exclude_self && id1 == gq) && better(s1, id1, tv[rr], ti[rr]);
      unsigned m0 = __ballot_sync(0xffffffffu, ok0), m1 = __ballot_sync(0xffffffffu, ok1);
      while (m0 | m1) {
        float cv;
        int ci;
        if (m0) {
          const int l = __ffs(m0) - 1;
          m0 &= m0 - 1;
          cv = __shfl_sync(0xffffffffu, s0, l);
          ci = static_cast<int>(kt) + l;
        } else {
          const int l = __ffs(m1) - 1;
          m1 &= m1 - 1;
          cv = __shfl_sync(0xffffffffu, s1, l);
          ci = static_cast<int>(kt) + 32 + l;
        }
        if (better(cv, ci, tv[rr], ti[rr]))  // threshold may have risen since the ballot
          insert<kTwo>(v0[rr], i0[rr], v1[rr], i1[rr], tv[rr], ti[rr], cv, ci, k, lane);
      }
    }
    __syncthreads();  // S is rewritten by the next tile
  }

  // write rows [q0, q0 + nq): slots lane (and lane + 32)
#pragma unroll
  for (int rr = 0; rr < kRPW; ++rr) {
    const int r = warp * kRPW + rr;
    if (r >= nq) continue;
    const int64_t base = (q0 + r) * k;
    if (lane < k) {
      const bool ok = i0[rr] != kNoId && isfinite(v0[rr]) && (!drop_nonpositive || v0[rr] > 0.f);
      out_idx[base + lane] = ok ? i0[rr] : -1;
      out_sim[base + lane] = ok ? v0[rr] : -INFINITY;
    }
    if (kTwo && lane + 32 < k) {
      const bool ok = i1[rr] != kNoId && isfinite(v1[rr]) && (!drop_nonpositive || v1[rr] > 0.f);
      out_idx[base + lane + 32] = ok ? i1[rr] : -1;
      out_sim[base + lane + 32] = ok ? v1[rr] : -INFINITY;
    }
  }
}

}  // namespace

void knn_topk_cuda(const float* q, const int64_t* q_offsets, const float* x, const int64_t* x_offsets,
                   const int64_t* tile_start, int64_t num_segments, int64_t num_tiles, int64_t d, int k,
                   bool exclude_self, bool drop_nonpositive, int32_t* out_idx, float* out_sim,
                   cudaStream_t stream) {
  if (k < 1 || k > kKnnMaxK) throw std::invalid_argument("knn_topk_cuda: k must be in 1..64");
  if (num_segments < 1 || d < 0) throw std::invalid_argument("knn_topk_cuda: bad num_segments or d");
  if (num_tiles <= 0) return;
  if (num_tiles > INT_MAX) throw std::invalid_argument("knn_topk_cuda: too many query tiles");
  const dim3 grid(static_cast<unsigned>(num_tiles)), block(kThreads);
  if (k > 32)
    knn_topk_kernel<true><<<grid, block, 0, stream>>>(q, q_offsets, x, x_offsets, tile_start, num_segments, d, k,
                                                      exclude_self, drop_nonpositive, out_idx, out_sim);
  else
    knn_topk_kernel<false><<<grid, block, 0, stream>>>(q, q_offsets, x, x_offsets, tile_start, num_segments, d, k,
                                                       exclude_self, drop_nonpositive, out_idx, out_sim);
  XMEM_CUDA_CHECK(cudaGetLastError());
}

}  // namespace xmem
