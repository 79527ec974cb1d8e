// coverage kernels (CUDA) bindings: device pointers and the caller's stream arrive as Python ints.
#include <pybind11/pybind11.h>

#include <cstdint>

#include "xmemory/coverage_cuda.h"

namespace py = pybind11;

namespace {

template <typename T>
T* ptr(std::uintptr_t p) {
  return reinterpret_cast<T*>(p);
}

void coverage_select(std::uintptr_t cand_offsets, std::uintptr_t nbr_idx, std::uintptr_t nbr_w,
                     std::uintptr_t relevance, double alpha, double target, std::uintptr_t cap_offsets,
                     int64_t num_queries, int64_t num_candidates, int64_t k, int64_t max_n,
                     std::uintptr_t idx_scratch, std::uintptr_t state_scratch, std::uintptr_t selected,
                     std::uintptr_t values, std::uintptr_t counts, std::uintptr_t stream) {
  xmem::coverage_select_cuda(ptr<const int64_t>(cand_offsets), ptr<const int32_t>(nbr_idx), ptr<const float>(nbr_w),
                             ptr<const double>(relevance), alpha, target, ptr<const int64_t>(cap_offsets),
                             num_queries, num_candidates, k, max_n, ptr<int32_t>(idx_scratch),
                             ptr<void>(state_scratch), ptr<int32_t>(selected), ptr<double>(values),
                             ptr<int32_t>(counts), reinterpret_cast<cudaStream_t>(stream));
}

}  // namespace

void register_coverage_cuda(py::module_& m) {
  m.attr("COVERAGE_STATE_BYTES") = xmem::kCoverageStateBytes;
  m.attr("COVERAGE_SHARED_MAX_N") = xmem::kCoverageSharedMaxN;
  m.def("coverage_select", &coverage_select, py::arg("cand_offsets"), py::arg("nbr_idx"), py::arg("nbr_w"),
        py::arg("relevance"), py::arg("alpha"), py::arg("target"), py::arg("cap_offsets"), py::arg("num_queries"),
        py::arg("num_candidates"), py::arg("k"), py::arg("max_n"), py::arg("idx_scratch"), py::arg("state_scratch"),
        py::arg("selected"), py::arg("values"), py::arg("counts"), py::arg("stream"),
        py::call_guard<py::gil_scoped_release>(),
        "Eq. 4 greedy coverage selection, one block per query (device pointers as ints; async on stream).\n"
        "cand_offsets [Q+1] i64, nbr_idx [M, k] i32, nbr_w [M, k] f32, relevance [M] f64, cap_offsets [Q+1] i64\n"
        "(clipped budgets), idx_scratch [M, k] i32, state_scratch 0 or M * COVERAGE_STATE_BYTES bytes when\n"
        "max_n > COVERAGE_SHARED_MAX_N; writes selected i32 / values f64 at cap slots and counts [Q] i32.");
}
