// knn kernels (CUDA) bindings: checked tensor views (csrc/include/xmemory/checks.h) from
// __cuda_array_interface__ / DLPack, checked for device, dtype, shape and contiguity before the
// launch; the caller's stream arrives as an int (torch.cuda.current_stream().cuda_stream).
#include <pybind11/pybind11.h>

#include <cstdint>

#include "xmemory/checks.h"
#include "xmemory/gil.h"
#include "xmemory/knn_cuda.h"

namespace py = pybind11;

namespace {

void knn_topk(py::handle q_obj, py::handle q_offsets_obj, py::handle x_obj, py::handle x_offsets_obj,
              py::handle tile_start_obj, int64_t num_tiles, bool exclude_self, bool drop_nonpositive,
              py::handle out_idx_obj, py::handle out_sim_obj, std::uintptr_t stream) {
  using xmem::DType;
  auto input = [](py::handle obj, const char* name, DType dtype) {  // view + CUDA / contiguous / dtype checks
    xmem::TensorView t = xmem::tensor_view(obj, name);
    XMEM_CHECK_INPUT(t, dtype);
    return t;
  };
  const auto q = input(q_obj, "q", DType::kFloat32);
  const auto q_offsets = input(q_offsets_obj, "q_offsets", DType::kInt64);
  const auto x = input(x_obj, "x", DType::kFloat32);
  const auto x_offsets = input(x_offsets_obj, "x_offsets", DType::kInt64);
  const auto tile_start = input(tile_start_obj, "tile_start", DType::kInt64);
  const auto out_idx = input(out_idx_obj, "out_idx", DType::kInt32);
  const auto out_sim = input(out_sim_obj, "out_sim", DType::kFloat32);
  XMEM_CHECK_DIM(q, 2);
  const int64_t nq = q.size(0), d = q.size(1);
  XMEM_CHECK_SHAPE(x, {-1, d});
  XMEM_CHECK_DIM(q_offsets, 1);
  const int64_t nseg1 = q_offsets.size(0);
  if (nseg1 < 1) xmem::fail("q_offsets: expected B+1 >= 1 entries");
  XMEM_CHECK_SHAPE(x_offsets, {nseg1});
  XMEM_CHECK_SHAPE(tile_start, {nseg1});
  XMEM_CHECK_DIM(out_idx, 2);
  const int64_t k = out_idx.size(1);
  if (k < 1 || k > xmem::kKnnMaxK)
    xmem::fail("out_idx: k must be in 1.." + std::to_string(xmem::kKnnMaxK) + ", got " + std::to_string(k));
  XMEM_CHECK_SHAPE(out_idx, {nq, k});
  XMEM_CHECK_SHAPE(out_sim, {nq, k});
  if (num_tiles < 0) xmem::fail("num_tiles: must be >= 0");
  if (nq >= INT32_MAX || x.size(0) >= INT32_MAX) xmem::fail("q, x: row ids must fit int32");
  for (const auto* t : {&x, &q_offsets, &x_offsets, &tile_start, &out_idx, &out_sim}) XMEM_CHECK_SAME_DEVICE(q, *t);
  xmem::GilRelease release;
  xmem::knn_topk_cuda(q.data<float>(), q_offsets.data<int64_t>(), x.data<float>(), x_offsets.data<int64_t>(),
                      tile_start.data<int64_t>(), nseg1 - 1, num_tiles, d, static_cast<int>(k), exclude_self,
                      drop_nonpositive, out_idx.data<int32_t>(), out_sim.data<float>(),
                      reinterpret_cast<cudaStream_t>(stream));
}

}  // namespace

void register_knn_cuda(py::module_& m) {
  m.attr("KNN_QUERY_TILE") = xmem::kKnnQueryTile;
  m.attr("KNN_MAX_K") = xmem::kKnnMaxK;
  m.def("knn_topk", &knn_topk, py::arg("q"), py::arg("q_offsets"), py::arg("x"), py::arg("x_offsets"),
        py::arg("tile_start"), py::arg("num_tiles"), py::arg("exclude_self"), py::arg("drop_nonpositive"),
        py::arg("out_idx"), py::arg("out_sim"), py::arg("stream"),
        "Segmented exact top-k by dot product of unit rows (async on `stream`). CUDA tensors\n"
        "(__cuda_array_interface__ or DLPack), contiguous, checked before the launch: q [nq, d] f32,\n"
        "q_offsets [B+1] i64, x [nx, d] f32, x_offsets [B+1] i64, tile_start [B+1] i64 (prefix sum of\n"
        "ceil(nq_b / KNN_QUERY_TILE)), num_tiles = tile_start[B]; writes out_idx [nq, k] i32 and\n"
        "out_sim [nq, k] f32 (k = out_idx.shape[1], 1..KNN_MAX_K).");
}
