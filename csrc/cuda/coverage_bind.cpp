// coverage kernels (CUDA) bindings: checked tensor views (csrc/include/xmemory/checks.h) from
// __cuda_array_interface__ / DLPack, checked for device, dtype, shape and contiguity before the
// launch; the caller's stream arrives as an int (torch.cuda.current_stream().cuda_stream).
#include <pybind11/pybind11.h>

#include <cstdint>
#include <string>

#include "xmemory/checks.h"
#include "xmemory/coverage_cuda.h"
#include "xmemory/gil.h"

namespace py = pybind11;

namespace {

void coverage_select(py::handle cand_offsets_obj, py::handle nbr_idx_obj, py::handle nbr_w_obj,
                     py::handle relevance_obj, py::handle cap_offsets_obj, py::handle idx_scratch_obj,
                     py::handle w_scratch_obj, py::handle state_scratch_obj, py::handle selected_obj,
                     py::handle values_obj, py::handle counts_obj, double alpha, double target,
                     const std::string& stop, int64_t max_n, std::uintptr_t stream) {
  using xmem::DType;
  auto input = [](py::handle obj, const char* name, DType dtype) {  // view + CUDA / contiguous / dtype checks
    xmem::TensorView t = xmem::tensor_view(obj, name);
    XMEM_CHECK_INPUT(t, dtype);
    return t;
  };
  if (stop != "count" && stop != "weight") xmem::fail("stop: expected 'count' or 'weight', got '" + stop + "'");
  if (!(alpha >= 0.0 && alpha <= 1.0)) xmem::fail("alpha: must be in [0, 1]");
  if (!(target >= 0.0 && target <= 1.0)) xmem::fail("target: must be in [0, 1]");
  const auto cand_offsets = input(cand_offsets_obj, "cand_offsets", DType::kInt64);
  const auto nbr_idx = input(nbr_idx_obj, "nbr_idx", DType::kInt32);
  const auto nbr_w = input(nbr_w_obj, "nbr_w", DType::kFloat32);
  const auto relevance = input(relevance_obj, "relevance", DType::kFloat64);
  const auto cap_offsets = input(cap_offsets_obj, "cap_offsets", DType::kInt64);
  const auto idx_scratch = input(idx_scratch_obj, "idx_scratch", DType::kInt32);
  const auto w_scratch = input(w_scratch_obj, "w_scratch", DType::kFloat32);
  const auto selected = input(selected_obj, "selected", DType::kInt32);
  const auto values = input(values_obj, "values", DType::kFloat64);
  const auto counts = input(counts_obj, "counts", DType::kInt32);
  const auto state = xmem::optional_view(state_scratch_obj, "state_scratch");
  XMEM_CHECK_DIM(cand_offsets, 1);
  const int64_t q1 = cand_offsets.size(0);
  if (q1 < 1) xmem::fail("cand_offsets: expected Q+1 >= 1 entries");
  XMEM_CHECK_DIM(relevance, 1);
  const int64_t m = relevance.size(0);
  XMEM_CHECK_DIM(nbr_idx, 2);
  const int64_t k = nbr_idx.size(1);
  XMEM_CHECK_SHAPE(nbr_idx, {m, k});
  XMEM_CHECK_SHAPE(nbr_w, {m, k});
  XMEM_CHECK_SHAPE(idx_scratch, {m, k});
  XMEM_CHECK_SHAPE(w_scratch, {m, k});
  XMEM_CHECK_SHAPE(cap_offsets, {q1});
  XMEM_CHECK_SHAPE(counts, {q1 - 1});
  XMEM_CHECK_DIM(selected, 1);
  XMEM_CHECK_SHAPE(values, {selected.size(0)});
  if (max_n < 0) xmem::fail("max_n: must be >= 0");
  if (state.dim() == 0) {
    if (max_n > xmem::kCoverageSharedMaxN)
      xmem::fail("state_scratch: needed (M * COVERAGE_STATE_BYTES uint8) when max_n > COVERAGE_SHARED_MAX_N");
  } else {
    XMEM_CHECK_INPUT(state, DType::kUInt8);
    XMEM_CHECK_SHAPE(state, {m * xmem::kCoverageStateBytes});
    XMEM_CHECK_SAME_DEVICE(relevance, state);
  }
  for (const auto* t : {&cand_offsets, &nbr_idx, &nbr_w, &cap_offsets, &idx_scratch, &w_scratch, &selected, &values,
                        &counts})
    XMEM_CHECK_SAME_DEVICE(relevance, *t);
  xmem::GilRelease release;
  xmem::coverage_select_cuda(cand_offsets.data<int64_t>(), nbr_idx.data<int32_t>(), nbr_w.data<float>(),
                             relevance.data<double>(), alpha, target, stop == "count", cap_offsets.data<int64_t>(),
                             q1 - 1, m, k, max_n, idx_scratch.data<int32_t>(), w_scratch.data<float>(),
                             state.dim() == 0 ? nullptr : state.data<uint8_t>(), selected.data<int32_t>(),
                             values.data<double>(), counts.data<int32_t>(), reinterpret_cast<cudaStream_t>(stream));
}

}  // namespace

void register_coverage_cuda(py::module_& m) {
  m.attr("COVERAGE_STATE_BYTES") = xmem::kCoverageStateBytes;
  m.attr("COVERAGE_SHARED_MAX_N") = xmem::kCoverageSharedMaxN;
  m.def("coverage_select", &coverage_select, py::arg("cand_offsets"), py::arg("nbr_idx"), py::arg("nbr_w"),
        py::arg("relevance"), py::arg("cap_offsets"), py::arg("idx_scratch"), py::arg("w_scratch"),
        py::arg("state_scratch"), py::arg("selected"), py::arg("values"), py::arg("counts"), py::arg("alpha"),
        py::arg("target"), py::arg("stop"), py::arg("max_n"), py::arg("stream"),
        "Eq. 4 greedy coverage selection, one block per query (async on `stream`). CUDA tensors\n"
        "(__cuda_array_interface__ or DLPack), contiguous, checked before the launch: cand_offsets [Q+1] i64,\n"
        "nbr_idx [M, k] i32 (local ids, validated by the caller), nbr_w [M, k] f32, relevance [M] f64,\n"
        "cap_offsets [Q+1] i64 (prefix sum of budgets clipped to [0, n_q]), idx_scratch [M, k] i32,\n"
        "w_scratch [M, k] f32, state_scratch None or [M * COVERAGE_STATE_BYTES] u8 (needed when max_n >\n"
        "COVERAGE_SHARED_MAX_N); writes selected [S] i32 / values [S] f64 at cap slots and counts [Q] i32;\n"
        "stop 'count' (authors') or 'weight'.");
}
