// The xmemory_gpu._cuda module: CUDA kernels, bound from plain C++ (no pybind11 in nvcc).
// Functions take CUDA tensors (__cuda_array_interface__ or DLPack), checked in C++ before any launch
// (csrc/include/xmemory/checks.h), and the caller's stream as an integer.
#include <pybind11/pybind11.h>
#include "xmemory/cuda_runtime_info.h"

namespace py = pybind11;

void register_knn_cuda(py::module_& m);
void register_objective_cuda(py::module_& m);
void register_coverage_cuda(py::module_& m);

PYBIND11_MODULE(_cuda, m) {
  m.doc() = "xmemory_gpu CUDA kernels";
  m.def("device_count", &xmem::cuda_device_count,
        "Number of CUDA devices visible to the static runtime (0 when no driver or GPU).");
  m.def("runtime_version", &xmem::cuda_runtime_version, "CUDA runtime version linked in (e.g. 13000).");
  register_knn_cuda(m);
  register_objective_cuda(m);
  register_coverage_cuda(m);
}
