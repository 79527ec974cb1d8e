// Rows added into per-group sums in row order (ops/rows.py add_rows_in_order): for i = 0..m-1,
// sums[group[i]] += x[rows[i]], every element one float64 add in that order, the bits of
// np.add.at(sums, group, x[rows]) (the theme stage's f(P) state and a memory's theme sums rest on them).
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cstdint>
#include <string>

namespace py = pybind11;

namespace {

template <typename T>
void add(double* s, int64_t d, const int64_t* g, const T* x, const int64_t* r, int64_t m) {
  for (int64_t i = 0; i < m; ++i) {
    double* row = s + g[i] * d;
    const T* xi = x + r[i] * d;
    for (int64_t j = 0; j < d; ++j) row[j] += static_cast<double>(xi[j]);
  }
}

// sums float64 [k, d] (C-contiguous, written in place), group int64 [m] in [0, k), x float32 or
// float64 [N, d] (C-contiguous), rows int64 [m] in [0, N).
void add_rows(py::array sums, const py::array_t<int64_t, py::array::c_style>& group, const py::array& x,
              const py::array_t<int64_t, py::array::c_style>& rows) {
  const auto bad = [](const std::string& what) { throw py::value_error("add_rows: " + what); };
  if (!py::isinstance<py::array_t<double>>(sums) || sums.ndim() != 2 || !(sums.flags() & py::array::c_style) ||
      !sums.writeable())
    bad("sums: expected a writable C-contiguous float64 [k, d] array");
  if (x.ndim() != 2 || x.shape(1) != sums.shape(1) || !(x.flags() & py::array::c_style))
    bad("x: expected a C-contiguous [N, d] array with the sums' d");
  if (group.ndim() != 1 || rows.ndim() != 1 || group.shape(0) != rows.shape(0)) bad("group and rows: expected [m] each");
  const int64_t k = sums.shape(0), n = x.shape(0), d = sums.shape(1), m = group.shape(0);
  const int64_t* g = group.data();
  const int64_t* r = rows.data();
  for (int64_t i = 0; i < m; ++i) {
    if (g[i] < 0 || g[i] >= k) bad("a group outside 0.." + std::to_string(k - 1));
    if (r[i] < 0 || r[i] >= n) bad("a row outside 0.." + std::to_string(n - 1));
  }
  double* s = static_cast<double*>(sums.mutable_data());
  if (py::isinstance<py::array_t<double>>(x)) {
    const double* v = static_cast<const double*>(x.data());
    py::gil_scoped_release release;
    add(s, d, g, v, r, m);
  } else if (py::isinstance<py::array_t<float>>(x)) {
    const float* v = static_cast<const float*>(x.data());
    py::gil_scoped_release release;
    add(s, d, g, v, r, m);
  } else {
    bad("x: expected float32 or float64");
  }
}

}  // namespace

void register_rows(py::module_& m) {
  m.def("add_rows", &add_rows, py::arg("sums"), py::arg("group"), py::arg("x"), py::arg("rows"),
        "sums[group[i]] += x[rows[i]] for i in order, in float64 (np.add.at's bits), in place");
}
