// Exact segmented cosine top-k on the GPU (semantics: xmemory_gpu/ops/knn/reference.py).
// One kernel serves knn_graph (queries = rows, self excluded) and knn_search.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

namespace xmem {

constexpr int kKnnQueryTile = 64;  // query rows per thread block; the caller builds tile_start with it
constexpr int kKnnMaxK = 64;       // largest supported k

// q [nq, d] and x [nx, d] float32 row-major, rows already L2-normalised (zero rows stay zero).
// q_offsets / x_offsets [B+1] int64: segment b's queries only see segment b's rows.
// tile_start [B+1] int64: prefix sum over segments of ceil(nq_b / kKnnQueryTile); num_tiles =
// tile_start[B]. Writes out_idx [nq, k] int32 (global rows of x) and out_sim [nq, k] float32,
// descending, ties to the lower row id, padded with -1 / -inf (and sims <= 0 dropped when
// drop_nonpositive). exclude_self skips key row == query row (graph mode: q is x).
// All pointers are device pointers; the launch is asynchronous on `stream`.
void knn_topk_cuda(const float* q, const int64_t* q_offsets, const float* x, const int64_t* x_offsets,
                   const int64_t* tile_start, int64_t num_segments, int64_t num_tiles, int64_t d, int k,
                   bool exclude_self, bool drop_nonpositive, int32_t* out_idx, float* out_sim,
                   cudaStream_t stream);

}  // namespace xmem
