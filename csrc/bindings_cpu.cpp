// The xmemory_gpu._C module: C++ CPU kernels. Each kernel family registers its functions
// from its own source file in csrc/cpu/.
#include <pybind11/pybind11.h>

namespace py = pybind11;

void register_knn(py::module_& m);
void register_objective(py::module_& m);
void register_coverage(py::module_& m);
void register_kmeans(py::module_& m);
void register_linear(py::module_& m);
void register_hashing(py::module_& m);
void register_attach(py::module_& m);
void register_columns(py::module_& m);
void register_rows(py::module_& m);
void register_files(py::module_& m);
void register_dedup(py::module_& m);
void register_partition(py::module_& m);

PYBIND11_MODULE(_C, m) {
  m.doc() = "xmemory_gpu C++ CPU kernels (OpenMP)";
#ifdef XMEM_OPENMP
  m.attr("openmp") = true;
#else
  m.attr("openmp") = false;
#endif
  register_knn(m);
  register_objective(m);
  register_coverage(m);
  register_kmeans(m);
  register_linear(m);
  register_hashing(m);
  register_attach(m);
  register_columns(m);
  register_rows(m);
  register_files(m);
  register_dedup(m);
  register_partition(m);
}
