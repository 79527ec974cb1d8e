// f(P) (sparsity-semantics objective) on the GPU: batched partition objective and incremental
// candidate scoring (semantics: xmemory_gpu/ops/objective/reference.py; the arithmetic mirrors
// csrc/cpu/objective.cpp: closed form from per-theme sums, counts and kept top-2, all in double).
//
// Three launches compose both ops (the Python wrapper ops/objective/cuda.py drives them):
//   objective_row_norms_cuda   |row| of each row of a [rows, d] matrix (theme sums, or raw x)
//   objective_group_sums_cuda  S_g = sum of the member rows of each group (optionally each row
//                              divided by its norm, zero rows skipped) and |S_g|
//   objective_score_{candidates,segments}_cuda  one thread block per item (a candidate, or a whole segment): s_k of
//                              every theme after the edit, median / MAD, g, cohesion, sparsity -> f
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

namespace xmem {

// Per-item state of objective_score_{candidates,segments}_cuda, one slot per theme position (padded to a power of two
// P >= kept + new themes): s [P] double, sort buffer [P] double, removed flag [P] byte.
constexpr int64_t kObjectiveSlotBytes = 17;
// Largest P whose state lives in the default 48 KiB of shared memory (2048 * 17 = 34 KiB); items
// with a larger P use `state_scratch` (global memory) at their `state_offsets` entry.
constexpr int64_t kObjectiveSharedMaxSlots = 2048;

// out[r] = sqrt(sum_j a[r, j]^2), a [rows, d] float64 row-major.
void objective_row_norms_cuda(const double* a, int64_t rows, int64_t d, double* out, cudaStream_t stream);

// One block per group g: gsum[g, :] = sum over m in group_offsets[g] .. group_offsets[g+1] of
// x[members[m], :] (divided by row_norm[members[m]], rows of norm 0 skipped, when row_norm is not
// null), members added in list order; gnorm[g] = |gsum[g, :]|. x [*, d] float64.
void objective_group_sums_cuda(const double* x, const double* row_norm, const int64_t* group_offsets,
                               const int64_t* members, int64_t num_groups, int64_t d, double* gsum, double* gnorm,
                               cudaStream_t stream);

// f after each item, one thread block per item; two modes, two entry points (no null-pointer switch).
// Kept themes keep their s_k through the kept top-2 (recomputed over the other kept themes when both
// are removed) and take the max with the new themes; a lone theme has s = 0.
// max_slots: the largest P over the items (next power of two >= kept + new themes of an item).
// state_scratch / state_offsets: nullptr when max_slots <= kObjectiveSharedMaxSlots; otherwise each
// item with P > kObjectiveSharedMaxSlots uses P * kObjectiveSlotBytes bytes at
// state_scratch + state_offsets[i] (8-byte aligned). Writes out [num_items] float64.
// All pointers are device pointers; the launches are asynchronous on `stream`.

// Candidate mode: item i edits memory b = memory[i]; the themes of b are theme rows
// theme_offsets[b] .. theme_offsets[b+1] (theme_sum [K, d], theme_norm [K], theme_count [K],
// top_idx [K, 2] global theme rows or -1, top_cos [K, 2]); rows rem_rows[rem_offsets[i] ..
// rem_offsets[i+1]] are removed (distinct); new themes are the groups add_offsets[i] ..
// add_offsets[i+1] (sums gsum [*, d], norms gnorm, sizes from group_offsets); the memory has
// node_offsets[b+1] - node_offsets[b] nodes.
void objective_score_candidates_cuda(const int64_t* memory, const int64_t* node_offsets, const double* theme_sum,
                                     const double* theme_norm, const int64_t* theme_count,
                                     const int64_t* theme_offsets, const int64_t* top_idx, const double* top_cos,
                                     const int64_t* rem_offsets, const int64_t* rem_rows, const int64_t* add_offsets,
                                     const int64_t* group_offsets, const double* gsum, const double* gnorm,
                                     int64_t num_items, int64_t d, double eps, int64_t max_slots,
                                     void* state_scratch, const int64_t* state_offsets, double* out,
                                     cudaStream_t stream);

// Segment mode: item i is segment i with node_offsets[i+1] - node_offsets[i] nodes whose themes are
// all new: the groups add_offsets[i] .. add_offsets[i+1] (gsum, gnorm, sizes from group_offsets).
void objective_score_segments_cuda(const int64_t* node_offsets, const int64_t* add_offsets,
                                   const int64_t* group_offsets, const double* gsum, const double* gnorm,
                                   int64_t num_items, int64_t d, double eps, int64_t max_slots, void* state_scratch,
                                   const int64_t* state_offsets, double* out, cudaStream_t stream);

}  // namespace xmem
