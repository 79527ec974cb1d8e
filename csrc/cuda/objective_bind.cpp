// objective kernels (CUDA) bindings: device pointers and the caller's stream arrive as Python ints.
#include <pybind11/pybind11.h>

#include <cstdint>

#include "xmemory/objective_cuda.h"

namespace py = pybind11;

namespace {

template <typename T>
T* ptr(std::uintptr_t p) {
  return reinterpret_cast<T*>(p);
}

void row_norms(std::uintptr_t a, int64_t rows, int64_t d, std::uintptr_t out, std::uintptr_t stream) {
  xmem::objective_row_norms_cuda(ptr<const double>(a), rows, d, ptr<double>(out), reinterpret_cast<cudaStream_t>(stream));
}

void group_sums(std::uintptr_t x, std::uintptr_t row_norm, std::uintptr_t group_offsets, std::uintptr_t members,
                int64_t num_groups, int64_t d, std::uintptr_t gsum, std::uintptr_t gnorm, std::uintptr_t stream) {
  xmem::objective_group_sums_cuda(ptr<const double>(x), ptr<const double>(row_norm), ptr<const int64_t>(group_offsets),
                                  ptr<const int64_t>(members), num_groups, d, ptr<double>(gsum), ptr<double>(gnorm),
                                  reinterpret_cast<cudaStream_t>(stream));
}

void score(std::uintptr_t memory, std::uintptr_t node_offsets, std::uintptr_t theme_sum, std::uintptr_t theme_norm,
           std::uintptr_t theme_count, std::uintptr_t theme_offsets, std::uintptr_t top_idx, std::uintptr_t top_cos,
           std::uintptr_t rem_offsets, std::uintptr_t rem_rows, std::uintptr_t add_offsets,
           std::uintptr_t group_offsets, std::uintptr_t gsum, std::uintptr_t gnorm, int64_t num_items, int64_t d,
           double eps, int64_t max_slots, std::uintptr_t state_scratch, std::uintptr_t state_offsets,
           std::uintptr_t out, std::uintptr_t stream) {
  xmem::objective_score_cuda(ptr<const int64_t>(memory), ptr<const int64_t>(node_offsets), ptr<const double>(theme_sum),
                             ptr<const double>(theme_norm), ptr<const int64_t>(theme_count),
                             ptr<const int64_t>(theme_offsets), ptr<const int64_t>(top_idx), ptr<const double>(top_cos),
                             ptr<const int64_t>(rem_offsets), ptr<const int64_t>(rem_rows),
                             ptr<const int64_t>(add_offsets), ptr<const int64_t>(group_offsets),
                             ptr<const double>(gsum), ptr<const double>(gnorm), num_items, d, eps, max_slots,
                             ptr<void>(state_scratch), ptr<const int64_t>(state_offsets), ptr<double>(out),
                             reinterpret_cast<cudaStream_t>(stream));
}

}  // namespace

void register_objective_cuda(py::module_& m) {
  m.attr("OBJECTIVE_SLOT_BYTES") = xmem::kObjectiveSlotBytes;
  m.attr("OBJECTIVE_SHARED_MAX_SLOTS") = xmem::kObjectiveSharedMaxSlots;
  m.def("objective_row_norms", &row_norms, py::arg("a"), py::arg("rows"), py::arg("d"), py::arg("out"),
        py::arg("stream"), py::call_guard<py::gil_scoped_release>(),
        "out[r] = |a[r, :]| for a [rows, d] f64 (device pointers as ints; async on stream).");
  m.def("objective_group_sums", &group_sums, py::arg("x"), py::arg("row_norm"), py::arg("group_offsets"),
        py::arg("members"), py::arg("num_groups"), py::arg("d"), py::arg("gsum"), py::arg("gnorm"), py::arg("stream"),
        py::call_guard<py::gil_scoped_release>(),
        "gsum [G, d] f64 = sum of x[members] rows per group (each divided by row_norm, zero rows skipped,\n"
        "when row_norm != 0), gnorm [G] = |gsum| (device pointers as ints; async on stream).");
  m.def("objective_score", &score, py::arg("memory"), py::arg("node_offsets"), py::arg("theme_sum"),
        py::arg("theme_norm"), py::arg("theme_count"), py::arg("theme_offsets"), py::arg("top_idx"),
        py::arg("top_cos"), py::arg("rem_offsets"), py::arg("rem_rows"), py::arg("add_offsets"),
        py::arg("group_offsets"), py::arg("gsum"), py::arg("gnorm"), py::arg("num_items"), py::arg("d"),
        py::arg("eps"), py::arg("max_slots"), py::arg("state_scratch"), py::arg("state_offsets"), py::arg("out"),
        py::arg("stream"), py::call_guard<py::gil_scoped_release>(),
        "f after each item, one block per item (device pointers as ints; async on stream). Candidate mode\n"
        "(memory != 0): kept themes of memory[i] minus rem_rows, plus groups add_offsets[i]..; segment mode\n"
        "(memory == 0): segment i's groups only. max_slots = largest next-pow2(kept + new themes); items with\n"
        "more than OBJECTIVE_SHARED_MAX_SLOTS slots use state_scratch + state_offsets[i]\n"
        "(slots * OBJECTIVE_SLOT_BYTES bytes each). Writes out [num_items] f64.");
}
