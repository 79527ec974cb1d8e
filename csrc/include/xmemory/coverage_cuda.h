// Eq. 4 greedy coverage selection on the GPU (semantics: xmemory_gpu/ops/coverage/reference.py).
#pragma once
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace xmem {

// Per-query state (relevance normalised as double, covered and chosen flags): bytes per candidate.
constexpr int64_t kCoverageStateBytes = 10;
// Largest per-query candidate count whose state fits the default 48 KiB of shared memory; longer
// lists need `state_scratch` (global memory).
constexpr int64_t kCoverageSharedMaxN = (47 * 1024) / kCoverageStateBytes;  // 1 KiB left for static shared

// One thread block per query q, candidates cand_offsets[q] .. cand_offsets[q+1] (M in all).
// nbr_idx [M, k] int32 local positions (-1 none), nbr_w [M, k] float32, relevance [M] float64.
// cap_offsets [Q+1] int64: query q may write picks cap_offsets[q] .. cap_offsets[q+1] (its budget,
// clipped to [0, n_q]). Writes selected / values at those slots (local positions in pick order,
// objective value of each pick) and counts [Q] int32 (picks made).
// idx_scratch [M, k] int32 / w_scratch [M, k] float32: neighbour ids after dedup (-1 for dropped
// entries) and the largest weight listed for each kept id.
// count_stop: the authors' rule (stop once the covered count reaches target * n, or all are
// covered); false: stop once the credited weight reaches target * Z.
// state_scratch: nullptr when max_n <= kCoverageSharedMaxN (state in shared memory), else
// M * kCoverageStateBytes bytes of global memory (8-byte aligned).
// Doubles throughout with no FMA contraction, so picks and values equal the reference's.
// All pointers are device pointers; the launch is asynchronous on `stream`.
void coverage_select_cuda(const int64_t* cand_offsets, const int32_t* nbr_idx, const float* nbr_w,
                          const double* relevance, double alpha, double target, bool count_stop,
                          const int64_t* cap_offsets, int64_t num_queries, int64_t num_candidates, int64_t k,
                          int64_t max_n, int32_t* idx_scratch, float* w_scratch, void* state_scratch,
                          int32_t* selected, double* values, int32_t* counts, cudaStream_t stream);

}  // namespace xmem
