// knn kernels (CUDA) bindings: device pointers and the caller's stream arrive as Python ints.
#include <pybind11/pybind11.h>

#include <cstdint>

#include "xmemory/knn_cuda.h"

namespace py = pybind11;

namespace {

template <typename T>
T* ptr(std::uintptr_t p) {
  return reinterpret_cast<T*>(p);
}

void knn_topk(std::uintptr_t q, std::uintptr_t q_offsets, std::uintptr_t x, std::uintptr_t x_offsets,
              std::uintptr_t tile_start, int64_t num_segments, int64_t num_tiles, int64_t d, int k, bool exclude_self,
              bool drop_nonpositive, std::uintptr_t out_idx, std::uintptr_t out_sim, std::uintptr_t stream) {
  xmem::knn_topk_cuda(ptr<const float>(q), ptr<const int64_t>(q_offsets), ptr<const float>(x),
                      ptr<const int64_t>(x_offsets), ptr<const int64_t>(tile_start), num_segments, num_tiles, d, k,
                      exclude_self, drop_nonpositive, ptr<int32_t>(out_idx), ptr<float>(out_sim),
                      reinterpret_cast<cudaStream_t>(stream));
}

}  // namespace

void register_knn_cuda(py::module_& m) {
  m.attr("KNN_QUERY_TILE") = xmem::kKnnQueryTile;
  m.attr("KNN_MAX_K") = xmem::kKnnMaxK;
  m.def("knn_topk", &knn_topk, py::arg("q"), py::arg("q_offsets"), py::arg("x"), py::arg("x_offsets"),
        py::arg("tile_start"), py::arg("num_segments"), py::arg("num_tiles"), py::arg("d"), py::arg("k"),
        py::arg("exclude_self"), py::arg("drop_nonpositive"), py::arg("out_idx"), py::arg("out_sim"),
        py::arg("stream"), py::call_guard<py::gil_scoped_release>(),
        "Segmented exact top-k by dot product of unit rows (device pointers as ints; async on stream).\n"
        "q [nq, d] f32, q_offsets [B+1] i64, x [nx, d] f32, x_offsets [B+1] i64, tile_start [B+1] i64\n"
        "(prefix sum of ceil(nq_b / KNN_QUERY_TILE)); writes out_idx [nq, k] i32, out_sim [nq, k] f32.");
}
