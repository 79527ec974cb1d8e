// objective kernels (CUDA) bindings: checked tensor views (csrc/include/xmemory/checks.h) from
// __cuda_array_interface__ / DLPack, checked for device, dtype, shape and contiguity before any
// launch; the caller's stream arrives as an int. Parameter names follow objective_cuda.h.
#include <pybind11/pybind11.h>

#include <cstdint>
#include <string>

#include "xmemory/checks.h"
#include "xmemory/gil.h"
#include "xmemory/objective_cuda.h"

namespace py = pybind11;
using xmem::DType;
using xmem::TensorView;

namespace {

cudaStream_t as_stream(std::uintptr_t s) { return reinterpret_cast<cudaStream_t>(s); }

TensorView input(py::handle obj, const char* name, DType dtype) {
  TensorView t = xmem::tensor_view(obj, name);
  XMEM_CHECK_INPUT(t, dtype);
  return t;
}

void check_items(int64_t num_items, const TensorView& add_offsets, const TensorView& out) {
  XMEM_CHECK_SHAPE(add_offsets, {num_items + 1});
  XMEM_CHECK_SHAPE(out, {num_items});
}

// state_scratch / state_offsets: both None, or uint8 [*] and int64 [num_items]
void check_state(const TensorView& scratch, const TensorView& soff, int64_t num_items, int64_t max_slots) {
  const bool has_scratch = scratch.dim() > 0, has_soff = soff.dim() > 0;  // None -> a view of no dimensions
  if (has_scratch != has_soff) xmem::fail("state_scratch, state_offsets: pass both or neither");
  if (has_scratch) {
    XMEM_CHECK_INPUT(scratch, DType::kUInt8);
    XMEM_CHECK_DIM(scratch, 1);
    XMEM_CHECK_INPUT(soff, DType::kInt64);
    XMEM_CHECK_SHAPE(soff, {num_items});
  }
  if (max_slots < 0) xmem::fail("max_slots: must be >= 0");
  if (max_slots > xmem::kObjectiveSharedMaxSlots && !has_scratch)
    xmem::fail("max_slots: exceeds the shared-memory limit of " + std::to_string(xmem::kObjectiveSharedMaxSlots) +
               " slots; pass state_scratch and state_offsets");
}

void row_norms(py::handle a_obj, py::handle out_obj, std::uintptr_t stream) {
  const auto a = input(a_obj, "a", DType::kFloat64);
  const auto out = input(out_obj, "out", DType::kFloat64);
  XMEM_CHECK_DIM(a, 2);
  XMEM_CHECK_SHAPE(out, {a.size(0)});
  XMEM_CHECK_SAME_DEVICE(a, out);
  xmem::GilRelease release;
  xmem::objective_row_norms_cuda(a.data<double>(), a.size(0), a.size(1), out.data<double>(), as_stream(stream));
}

void group_sums(py::handle x_obj, py::handle row_norm_obj, py::handle group_offsets_obj, py::handle members_obj,
                py::handle gsum_obj, py::handle gnorm_obj, std::uintptr_t stream) {
  const auto x = input(x_obj, "x", DType::kFloat64);
  const auto row_norm = xmem::optional_view(row_norm_obj, "row_norm");
  const auto group_offsets = input(group_offsets_obj, "group_offsets", DType::kInt64);
  const auto members = input(members_obj, "members", DType::kInt64);
  const auto gsum = input(gsum_obj, "gsum", DType::kFloat64);
  const auto gnorm = input(gnorm_obj, "gnorm", DType::kFloat64);
  XMEM_CHECK_DIM(x, 2);
  const int64_t d = x.size(1);
  XMEM_CHECK_DIM(gsum, 2);
  const int64_t num_groups = gsum.size(0);
  XMEM_CHECK_SHAPE(gsum, {num_groups, d});
  XMEM_CHECK_SHAPE(gnorm, {num_groups});
  XMEM_CHECK_SHAPE(group_offsets, {num_groups + 1});
  XMEM_CHECK_DIM(members, 1);
  if (row_norm.dim() > 0) {
    XMEM_CHECK_INPUT(row_norm, DType::kFloat64);
    XMEM_CHECK_SHAPE(row_norm, {x.size(0)});
  }
  for (const auto* t : {&group_offsets, &members, &gsum, &gnorm}) XMEM_CHECK_SAME_DEVICE(x, *t);
  xmem::GilRelease release;
  xmem::objective_group_sums_cuda(x.data<double>(), row_norm.dim() ? row_norm.data<double>() : nullptr,
                                  group_offsets.data<int64_t>(), members.data<int64_t>(), num_groups, d,
                                  gsum.data<double>(), gnorm.data<double>(), as_stream(stream));
}

void score_candidates(py::handle memory_obj, py::handle node_offsets_obj, py::handle theme_sum_obj,
                      py::handle theme_norm_obj, py::handle theme_count_obj, py::handle theme_offsets_obj,
                      py::handle top_idx_obj, py::handle top_cos_obj, py::handle rem_offsets_obj,
                      py::handle rem_rows_obj, py::handle add_offsets_obj, py::handle group_offsets_obj,
                      py::handle gsum_obj, py::handle gnorm_obj, double eps, int64_t max_slots,
                      py::handle state_scratch_obj, py::handle state_offsets_obj, py::handle out_obj,
                      std::uintptr_t stream) {
  const auto memory = input(memory_obj, "memory", DType::kInt64);
  const auto node_offsets = input(node_offsets_obj, "node_offsets", DType::kInt64);
  const auto theme_sum = input(theme_sum_obj, "theme_sum", DType::kFloat64);
  const auto theme_norm = input(theme_norm_obj, "theme_norm", DType::kFloat64);
  const auto theme_count = input(theme_count_obj, "theme_count", DType::kInt64);
  const auto theme_offsets = input(theme_offsets_obj, "theme_offsets", DType::kInt64);
  const auto top_idx = input(top_idx_obj, "top_idx", DType::kInt64);
  const auto top_cos = input(top_cos_obj, "top_cos", DType::kFloat64);
  const auto rem_offsets = input(rem_offsets_obj, "rem_offsets", DType::kInt64);
  const auto rem_rows = input(rem_rows_obj, "rem_rows", DType::kInt64);
  const auto add_offsets = input(add_offsets_obj, "add_offsets", DType::kInt64);
  const auto group_offsets = input(group_offsets_obj, "group_offsets", DType::kInt64);
  const auto gsum = input(gsum_obj, "gsum", DType::kFloat64);
  const auto gnorm = input(gnorm_obj, "gnorm", DType::kFloat64);
  const auto out = input(out_obj, "out", DType::kFloat64);
  const auto scratch = xmem::optional_view(state_scratch_obj, "state_scratch");
  const auto soff = xmem::optional_view(state_offsets_obj, "state_offsets");
  XMEM_CHECK_DIM(memory, 1);
  const int64_t num_items = memory.size(0);
  check_items(num_items, add_offsets, out);
  XMEM_CHECK_SHAPE(rem_offsets, {num_items + 1});
  XMEM_CHECK_DIM(rem_rows, 1);
  XMEM_CHECK_DIM(theme_sum, 2);
  const int64_t k = theme_sum.size(0), d = theme_sum.size(1);
  XMEM_CHECK_SHAPE(theme_norm, {k});
  XMEM_CHECK_SHAPE(theme_count, {k});
  XMEM_CHECK_SHAPE(top_idx, {k, 2});
  XMEM_CHECK_SHAPE(top_cos, {k, 2});
  XMEM_CHECK_DIM(node_offsets, 1);
  XMEM_CHECK_SHAPE(theme_offsets, {node_offsets.size(0)});
  XMEM_CHECK_DIM(gsum, 2);
  XMEM_CHECK_SHAPE(gsum, {-1, d});
  XMEM_CHECK_SHAPE(gnorm, {gsum.size(0)});
  XMEM_CHECK_DIM(group_offsets, 1);
  if (group_offsets.size(0) < gsum.size(0) + 1) xmem::fail("group_offsets: needs at least gsum.shape[0] + 1 entries");
  check_state(scratch, soff, num_items, max_slots);
  for (const auto* t : {&node_offsets, &theme_sum, &theme_norm, &theme_count, &theme_offsets, &top_idx, &top_cos,
                        &rem_offsets, &rem_rows, &add_offsets, &group_offsets, &gsum, &gnorm, &out})
    XMEM_CHECK_SAME_DEVICE(memory, *t);
  xmem::GilRelease release;
  xmem::objective_score_candidates_cuda(
      memory.data<int64_t>(), node_offsets.data<int64_t>(), theme_sum.data<double>(), theme_norm.data<double>(),
      theme_count.data<int64_t>(), theme_offsets.data<int64_t>(), top_idx.data<int64_t>(), top_cos.data<double>(),
      rem_offsets.data<int64_t>(), rem_rows.data<int64_t>(), add_offsets.data<int64_t>(), group_offsets.data<int64_t>(),
      gsum.data<double>(), gnorm.data<double>(), num_items, d, eps, max_slots, scratch.dim() ? scratch.ptr : nullptr,
      soff.dim() ? soff.data<int64_t>() : nullptr, out.data<double>(), as_stream(stream));
}

void score_segments(py::handle node_offsets_obj, py::handle add_offsets_obj, py::handle group_offsets_obj,
                    py::handle gsum_obj, py::handle gnorm_obj, double eps, int64_t max_slots,
                    py::handle state_scratch_obj, py::handle state_offsets_obj, py::handle out_obj,
                    std::uintptr_t stream) {
  const auto node_offsets = input(node_offsets_obj, "node_offsets", DType::kInt64);
  const auto add_offsets = input(add_offsets_obj, "add_offsets", DType::kInt64);
  const auto group_offsets = input(group_offsets_obj, "group_offsets", DType::kInt64);
  const auto gsum = input(gsum_obj, "gsum", DType::kFloat64);
  const auto gnorm = input(gnorm_obj, "gnorm", DType::kFloat64);
  const auto out = input(out_obj, "out", DType::kFloat64);
  const auto scratch = xmem::optional_view(state_scratch_obj, "state_scratch");
  const auto soff = xmem::optional_view(state_offsets_obj, "state_offsets");
  XMEM_CHECK_DIM(out, 1);
  const int64_t num_items = out.size(0);
  check_items(num_items, add_offsets, out);
  XMEM_CHECK_SHAPE(node_offsets, {num_items + 1});
  XMEM_CHECK_DIM(gsum, 2);
  XMEM_CHECK_SHAPE(gnorm, {gsum.size(0)});
  XMEM_CHECK_SHAPE(group_offsets, {gsum.size(0) + 1});
  check_state(scratch, soff, num_items, max_slots);
  for (const auto* t : {&add_offsets, &group_offsets, &gsum, &gnorm, &out}) XMEM_CHECK_SAME_DEVICE(node_offsets, *t);
  xmem::GilRelease release;
  xmem::objective_score_segments_cuda(node_offsets.data<int64_t>(), add_offsets.data<int64_t>(),
                                      group_offsets.data<int64_t>(), gsum.data<double>(), gnorm.data<double>(),
                                      num_items, gsum.size(1), eps, max_slots, scratch.dim() ? scratch.ptr : nullptr,
                                      soff.dim() ? soff.data<int64_t>() : nullptr, out.data<double>(), as_stream(stream));
}

}  // namespace

void register_objective_cuda(py::module_& m) {
  m.attr("OBJECTIVE_SLOT_BYTES") = xmem::kObjectiveSlotBytes;
  m.attr("OBJECTIVE_SHARED_MAX_SLOTS") = xmem::kObjectiveSharedMaxSlots;
  m.def("objective_row_norms", &row_norms, py::arg("a"), py::arg("out"), py::arg("stream"),
        "out [rows] = |a[r, :]| for a [rows, d] f64 (CUDA tensors, checked; async on `stream`).");
  m.def("objective_group_sums", &group_sums, py::arg("x"), py::arg("row_norm"), py::arg("group_offsets"),
        py::arg("members"), py::arg("gsum"), py::arg("gnorm"), py::arg("stream"),
        "gsum [G, d] f64 = sum of x[members] rows per group (each divided by row_norm [N], zero rows\n"
        "skipped, when row_norm is not None), gnorm [G] = |gsum|; group_offsets [G+1] i64, members i64\n"
        "(CUDA tensors, checked; async on `stream`).");
  m.def("objective_score_candidates", &score_candidates, py::arg("memory"), py::arg("node_offsets"),
        py::arg("theme_sum"), py::arg("theme_norm"), py::arg("theme_count"), py::arg("theme_offsets"),
        py::arg("top_idx"), py::arg("top_cos"), py::arg("rem_offsets"), py::arg("rem_rows"), py::arg("add_offsets"),
        py::arg("group_offsets"), py::arg("gsum"), py::arg("gnorm"), py::arg("eps"), py::arg("max_slots"),
        py::arg("state_scratch"), py::arg("state_offsets"), py::arg("out"), py::arg("stream"),
        "f after each candidate edit, one block per candidate (objective_cuda.h; CUDA tensors, checked):\n"
        "the kept themes of memory[i] minus rem_rows, plus groups add_offsets[i]..; max_slots = largest\n"
        "next-pow2(kept + new themes); items with more than OBJECTIVE_SHARED_MAX_SLOTS slots use\n"
        "state_scratch (uint8) at state_offsets[i] (or both None). Writes out [C] f64.");
  m.def("objective_score_segments", &score_segments, py::arg("node_offsets"), py::arg("add_offsets"),
        py::arg("group_offsets"), py::arg("gsum"), py::arg("gnorm"), py::arg("eps"), py::arg("max_slots"),
        py::arg("state_scratch"), py::arg("state_offsets"), py::arg("out"), py::arg("stream"),
        "f of each segment whose themes are the groups add_offsets[i].. (objective_cuda.h; CUDA tensors,\n"
        "checked). Writes out [B] f64.");
}
