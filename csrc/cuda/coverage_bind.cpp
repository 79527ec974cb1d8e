// coverage kernels (CUDA) bindings. Placeholder registration until the family lands.
#include <pybind11/pybind11.h>
namespace py = pybind11;
void register_coverage_cuda(py::module_& m) { (void)m; }
